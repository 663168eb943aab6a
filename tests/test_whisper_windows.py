"""Long audio for Whisper (bundler/text/whisper_windows.py) against transformers' ASR pipeline
with chunk_length_s: the same windows and strides as its chunk_iter, the same joins as its
_find_longest_common_sequence, the same merged chunks as its tokenizer's _decode_asr, and, end to
end on 75 s of speech read by eSpeak NG, the same text and timestamps as the pipeline running the
torch model the ONNX export came from; the JS twin (web/text/whisper_windows.mjs) under Node the
same as the Python one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from transformers import WhisperFeatureExtractor, WhisperTokenizerFast, pipeline
from transformers.models.whisper.tokenization_whisper import _find_longest_common_sequence
from transformers.pipelines.automatic_speech_recognition import chunk_iter

from bundler.tasks.logmel import spec_of
from bundler.text import whisper
from bundler.text.whisper_run import WhisperSessions, transcribe
from bundler.text.whisper_windows import Chunk, lcs_merge, merge, windows
from tests import speech_models
from tests.speech import speech

TWIN = Path(__file__).resolve().parent / "js" / "whisper_windows_twin.mjs"


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> speech_models.SpeechExport:
    return speech_models.whisper(tmp_path_factory.mktemp("whisper"))


@pytest.mark.parametrize("seconds", [10.0, 30.0, 31.0, 50.0, 75.0, 80.5])
@pytest.mark.parametrize("chunk_s,stride_s", [(30.0, None), (30.0, 2.5), (20.0, 4.0)])
def test_windows_are_the_pipelines(seconds: float, chunk_s: float, stride_s: float | None):
    extractor = WhisperFeatureExtractor(feature_size=80)
    samples = np.zeros(int(seconds * 16000), np.float32)
    stride = int(round((chunk_s / 6 if stride_s is None else stride_s) * 16000))
    theirs = [item["stride"] for item in chunk_iter(samples, extractor, int(chunk_s * 16000),
                                                    stride, stride)]
    ours = windows(samples.size, chunk_s, stride_s)
    assert [(s.end - s.start, s.left, s.right) for s in ours] == theirs


def test_lcs_merge_is_transformers() -> None:
    rng = np.random.default_rng(0)
    for case in range(200):
        base = rng.integers(0, 6 if case % 2 else 50, 60).tolist()
        pieces, start = [], 0
        while start < len(base):
            stop = start + int(rng.integers(5, 25))
            piece = base[start:stop]
            if rng.random() < 0.3 and piece:  # the windows disagree somewhere
                piece[int(rng.integers(len(piece)))] = int(rng.integers(0, 50))
            pieces.append(piece)
            start = max(start + 1, stop - int(rng.integers(0, 8)))
        assert lcs_merge(pieces) == _find_longest_common_sequence(pieces), case


def _decode(tokenizer: WhisperTokenizerFast, chunks: list[Chunk]) -> tuple[str, list]:
    texts = [tokenizer.decode(chunk.tokens) for chunk in chunks]
    return "".join(texts), [{"text": text, "timestamp": (chunk.start, chunk.end)}
                            for text, chunk in zip(texts, chunks, strict=True)]


def _crafted(settings: whisper.WhisperSettings) -> list[tuple[list[list[int]], list]]:
    """Window outputs at the edges of the merge rules: timestamps in the strides, decreasing
    timestamps (several calls), a language change, no timestamps at all."""
    b, de, en = (settings.timestamp_begin, settings.lang_to_id["<|de|>"],
                 settings.lang_to_id["<|en|>"])
    three = [(30.0, 0.0, 5.0), (30.0, 5.0, 5.0), (12.5, 5.0, 0.0)]
    return [
        ([[b, 5, 6, 7, b + 400, b + 400, 8, 9, b + 1300, b + 1400, 10, b + 1450],
          [b + 100, 7, 8, 9, 10, b + 600, b + 600, 11, 12, b + 1300],
          [b + 200, 12, 13, 14, b + 500]], three),
        ([[b, 5, 6, b + 100, 7, 8, b + 50, b + 60, 9], [b + 10, 8, 9, 20, b + 800]],
         three[:1] + [(28.0, 5.0, 0.0)]),
        ([[en, 5, 6, 7, 8], [de, 7, 8, 9, 10], [de, 9, 10, 11]], three),
        ([[5, 6, 7, 8, 9], [8, 9, 10, 11], [10, 11, 12]], three),
        ([[b + 3, 5, 6, b + 20, b + 20, 7, b + 30]], [(20.0, 0.0, 0.0)]),
    ]


def test_merge_is_decode_asr_on_crafted_outputs(export) -> None:
    settings = whisper.settings_of(export.generation_config)
    tokenizer = WhisperTokenizerFast.from_pretrained(export.folder)
    for outputs, strides in _crafted(settings):
        for timestamps in (False, True):
            items = [{"tokens": np.array([tokens]), "stride": stride}
                     for tokens, stride in zip(outputs, strides, strict=True)]
            text, optional = tokenizer._decode_asr(items, return_timestamps=timestamps,
                                                   return_language=False, time_precision=0.02)
            ours_text, ours_chunks = _decode(tokenizer, merge(outputs, strides, settings,
                                                              timestamps))
            assert ours_text == text
            if timestamps:
                assert ours_chunks == optional["chunks"]


@pytest.mark.parametrize("timestamps", [False, True])
def test_75_seconds_are_the_pipelines(export, timestamps: bool) -> None:
    samples, rate = speech(75.0)
    settings = whisper.settings_of(export.generation_config)
    tokenizer = WhisperTokenizerFast.from_pretrained(export.folder)
    extractor = WhisperFeatureExtractor.from_pretrained(export.folder)
    sessions = WhisperSessions(
        ort.InferenceSession(str(export.folder / "encoder_model.onnx")),
        ort.InferenceSession(str(export.folder / "decoder_model_merged.onnx")))
    runs, chunks = transcribe(sessions, np.array(samples), rate, spec_of(extractor.to_dict()),
                              settings, whisper.language_id(settings, "en"), "transcribe",
                              timestamps)
    assert len(runs) == 4
    recognizer = pipeline("automatic-speech-recognition", model=export.model,
                          tokenizer=tokenizer, feature_extractor=extractor, chunk_length_s=30)
    from bundler.tasks.audio import resample

    # greedy: the pipeline's own default is a beam search of 5
    theirs = recognizer(resample(np.array(samples), rate, 16000), return_timestamps=timestamps,
                        generate_kwargs={"language": "en", "task": "transcribe", "num_beams": 1})
    text, found = _decode(tokenizer, chunks)
    assert text == theirs["text"] and len(text) > 20
    if timestamps:
        assert found == theirs["chunks"] and len(found) >= 3
