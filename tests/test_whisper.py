"""The Whisper decoding spec (bundler/text/whisper.py) and its native run
(bundler/text/whisper_run.py) against the owners, on a random-weight Whisper exported by optimum
(tests/speech_models.py) and speech read aloud by eSpeak NG, through bundler/tasks/logmel.py:
tokens and segments identical to transformers' WhisperForConditionalGeneration.generate
(greedy, with and without timestamps, language and task given or detected) and to optimum's
ORTModelForSpeechSeq2Seq; the logits rules equal to transformers' processors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from transformers import (
    GenerationConfig,
    SuppressTokensAtBeginLogitsProcessor,
    SuppressTokensLogitsProcessor,
    WhisperTimeStampLogitsProcessor,
)

from bundler.errors import ConfigError
from bundler.tasks.audio import resample
from bundler.tasks.logmel import log_mel, spec_of
from bundler.text import whisper
from bundler.text.whisper_bundle import forced_logits, window_steps
from bundler.text.whisper_run import WhisperSessions, transcribe_window
from tests import speech_models
from tests.speech import speech

RATE = 16000


@pytest.fixture(scope="module")
def export(whisper_export: speech_models.SpeechExport) -> speech_models.SpeechExport:
    return whisper_export


@pytest.fixture(scope="module")
def sessions(export: speech_models.SpeechExport) -> WhisperSessions:
    return WhisperSessions(ort.InferenceSession(str(export.folder / "encoder_model.onnx")),
                           ort.InferenceSession(str(export.folder / "decoder_model_merged.onnx")))


def features(seconds: float) -> np.ndarray:
    """Log-mel features [80, 3000] of `seconds` of speech at 16 kHz."""
    samples, rate = speech(seconds)
    from transformers import WhisperFeatureExtractor

    return log_mel(resample(np.array(samples), rate, RATE), RATE,
                   spec_of(WhisperFeatureExtractor(feature_size=80).to_dict()))


def _theirs(export: speech_models.SpeechExport, inputs: np.ndarray, **options) -> dict:
    return export.model.generate(torch.tensor(inputs)[None], return_segments=True, **options)


CASES = [({"language": "en", "task": "transcribe"}, 12.0),
         ({"language": "de", "task": "translate"}, 7.0),
         ({"language": "french"}, 20.0),
         ({}, 12.0),  # language detected, task from forced_decoder_ids
         ({"task": "translate"}, 3.0)]  # language detected


@pytest.mark.parametrize("timestamps", [False, True])
@pytest.mark.parametrize(("options", "seconds"), CASES)
def test_tokens_and_segments_are_transformers(export, sessions, options: dict, seconds: float,
                                              timestamps: bool) -> None:
    settings = whisper.settings_of(export.generation_config)
    inputs = features(seconds)
    language = options.get("language")
    ours = transcribe_window(sessions, inputs, settings,
                             whisper.language_id(settings, language) if language else None,
                             options.get("task"), timestamps)
    theirs = _theirs(export, inputs, return_timestamps=timestamps, **options)
    assert ours.tokens == theirs["sequences"][0].tolist()
    got = [(s.start, s.end, list(s.tokens)) for s in ours.segments]
    want = [(float(s["start"]), float(s["end"]), s["tokens"].tolist())
            for s in theirs["segments"][0]]
    assert got == want
    if timestamps:
        stamps = [t for t in ours.tokens if t >= settings.timestamp_begin]
        assert len(ours.segments) >= 2 and len(stamps) >= 4  # the rules had work to do
    assert len(set(ours.tokens)) > 3  # not one token over and over
    assert ours.calls[0].prompt[0] == settings.decoder_start


def test_the_prompt_follows_language_task_and_timestamps(export) -> None:
    settings = whisper.settings_of(export.generation_config)
    ids = {name: settings.lang_to_id.get(name, 0) for name in ("<|en|>", "<|de|>")}
    transcribe, translate = settings.task_to_id["transcribe"], settings.task_to_id["translate"]
    start, none = settings.decoder_start, settings.no_timestamps
    assert whisper.prompt(settings, ids["<|en|>"], None, False) == [start, ids["<|en|>"],
                                                                   transcribe, none]
    assert whisper.prompt(settings, ids["<|de|>"], "translate", True) == [start, ids["<|de|>"],
                                                                          translate]
    assert whisper.prompt(settings, None, None, True, detected=ids["<|de|>"]) == [
        start, ids["<|de|>"], transcribe]
    assert whisper.language_id(settings, "German") == whisper.language_id(settings, "<|de|>")
    with pytest.raises(ConfigError, match="not one of this model's"):
        whisper.language_id(settings, "klingon")
    with pytest.raises(ConfigError, match="lacks"):
        whisper.settings_of({"eos_token_id": 1})


@pytest.mark.parametrize("timestamps", [False, True])
def test_an_english_only_model_decodes_as_transformers(export, sessions, timestamps) -> None:
    """An English-only generation config (whisper-tiny.en's: no language or task ids): the
    prompt is <|startoftranscript|> (and <|notimestamps|>), the tokens and segments are
    transformers'; a language or task asked for is refused, as transformers refuses it."""
    config = speech_models.english_only(export.generation_config)
    settings = whisper.settings_of(config)
    inputs = features(12.0)
    ours = transcribe_window(sessions, inputs, settings, None, None, timestamps)
    theirs = _theirs(export, inputs, return_timestamps=timestamps,
                     generation_config=GenerationConfig(**config))
    assert ours.calls[0].prompt == [settings.decoder_start] + (
        [] if timestamps else [settings.no_timestamps])
    assert ours.tokens == theirs["sequences"][0].tolist()
    assert [(s.start, s.end, list(s.tokens)) for s in ours.segments] == [
        (float(s["start"]), float(s["end"]), s["tokens"].tolist()) for s in theirs["segments"][0]]
    assert not whisper.needs_language(settings, None, None)
    with pytest.raises(ConfigError, match="language 'en' cannot be given: this model is"
                                          " English-only"):
        whisper.language_id(settings, "en")
    with pytest.raises(ConfigError, match="task 'translate' cannot be given"):
        whisper.prompt(settings, None, "translate", timestamps)
    with pytest.raises(ValueError, match="English-only"):
        _theirs(export, inputs, language="en", generation_config=GenerationConfig(**config))


def test_a_generation_config_without_whisper_keys_is_completed(export, sessions) -> None:
    """A model saved from its config alone has config.json's ids only: the keys decoding needs
    come from the tokenizer's special tokens as the checkpoint's config has them, and
    transformers given the completed config decodes what ours does."""
    from bundler.text.whisper_folder import completed_generation, special_tokens

    given = export.generation_config
    bare = speech_models.from_model_config(given)
    tokens = special_tokens(json.loads((export.folder / "tokenizer.json").read_text()))
    config, filled = completed_generation(bare, {}, tokens)
    assert filled == ["no_timestamps_token_id", "lang_to_id", "task_to_id", "is_multilingual"]
    for key in ("no_timestamps_token_id", "lang_to_id", "task_to_id", "is_multilingual"):
        assert config[key] == given[key], key
    settings = whisper.settings_of(config)
    inputs = features(7.0)
    own = export.model.generation_config  # else generate() takes its keys for those not given
    export.model.generation_config = GenerationConfig(**config)
    try:
        for timestamps in (False, True):
            ours = transcribe_window(sessions, inputs, settings, None, None, timestamps)
            theirs = _theirs(export, inputs, return_timestamps=timestamps)
            assert ours.tokens == theirs["sequences"][0].tolist(), timestamps
    finally:
        export.model.generation_config = own
    assert completed_generation(given, {}, tokens) == (given, [])  # a complete one is kept
    english, filled = completed_generation({**bare, "is_multilingual": False}, {}, tokens)
    assert filled == ["no_timestamps_token_id"] and "lang_to_id" not in english
    openai_english = {name: 50256 + index for index, name in enumerate(
        ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|de|>", "<|translate|>",
         "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>",
         "<|notimestamps|>"])}
    english, filled = completed_generation(bare, {}, openai_english)
    assert (english["is_multilingual"], english["no_timestamps_token_id"]) == (False, 50265)
    assert "lang_to_id" not in english and "is_multilingual" in filled
    with pytest.raises(ConfigError, match="has no no_timestamps_token_id and the tokenizer no"
                                          r" <\|notimestamps\|> token"):
        completed_generation(bare, {}, {})


def test_optimum_ort_model_gives_the_same_tokens(export, sessions) -> None:
    from optimum.onnxruntime import ORTModelForSpeechSeq2Seq

    model = ORTModelForSpeechSeq2Seq.from_pretrained(export.folder, use_cache=True,
                                                     use_merged=True)
    settings = whisper.settings_of(export.generation_config)
    inputs = features(12.0)
    for timestamps in (False, True):
        ours = transcribe_window(sessions, inputs, settings, whisper.language_id(settings, "en"),
                                 "transcribe", timestamps)
        theirs = model.generate(torch.tensor(inputs)[None], language="en", task="transcribe",
                                return_timestamps=timestamps)
        assert ours.tokens == theirs[0].tolist(), timestamps


def _config(settings: whisper.WhisperSettings, eos: int) -> GenerationConfig:
    return GenerationConfig(no_timestamps_token_id=settings.no_timestamps, eos_token_id=eos,
                            max_initial_timestamp_index=settings.max_initial_timestamp_index)


@pytest.mark.parametrize("seed", range(6))
def test_the_logits_rules_are_transformers_processors(export, seed: int) -> None:
    """Random logits after random histories (timestamps at the end, in pairs, lone, none),
    scaled so the sum-of-probabilities rule goes both ways."""
    settings = whisper.settings_of(export.generation_config)
    vocab, begin = settings.timestamp_begin + 1501, settings.timestamp_begin
    rng = np.random.default_rng(seed)
    prompt = whisper.prompt(settings, settings.lang_to_id["<|en|>"], "transcribe", True)
    config = _config(settings, settings.eos)
    fired = set()
    for case in range(60):
        length = case % 6
        history = [int(rng.integers(begin, vocab)) if rng.random() < 0.5 else
                   int(rng.integers(0, settings.eos)) for _ in range(length)]
        logits = (rng.standard_normal(vocab) * rng.choice([0.5, 3.0, 8.0])).astype(np.float32)
        logits[begin:] += np.float32(rng.choice([-6.0, -3.0, 0.0]))
        ids = torch.tensor([prompt + history])
        scores = torch.tensor(logits[None])
        for processor in (SuppressTokensAtBeginLogitsProcessor(
                settings.begin_suppress_tokens, len(prompt)),
                SuppressTokensLogitsProcessor(settings.suppress_tokens),
                WhisperTimeStampLogitsProcessor(config, begin_index=len(prompt))):
            scores = processor(ids, scores)
        ours = whisper.process(logits, history, settings, timestamps=True)
        theirs = scores[0].numpy()
        assert np.array_equal(np.isinf(ours), np.isinf(theirs)), (seed, case, history)
        assert whisper.choose(ours) == int(np.argmax(theirs))
        fired.add(bool(np.isinf(ours[:begin]).all()))
    assert fired == {True, False}  # timestamps forced in some cases, text allowed in others


def test_frames_to_positions_is_transformers_float32() -> None:
    frames = torch.arange(0, 3001)
    want = [int(value) for value in frames * 0.01 / 0.02]
    assert [whisper.frames_to_positions(k) for k in range(3001)] == want
    assert want != [k // 2 for k in range(3001)]  # the rounding matters


TWIN = Path(__file__).resolve().parent / "js" / "whisper_twin.mjs"
TWIN_CASES = [({"language": "en", "task": "transcribe"}, 12.0, True),
              ({"language": "de", "task": "translate"}, 7.0, False),
              ({}, 20.0, True), ({"task": "translate"}, 3.0, False)]


def _crafted(settings: whisper.WhisperSettings) -> list[dict]:
    """Token lists at each edge of the segment rules."""
    b, eos = settings.timestamp_begin, settings.eos
    lists = [[], [5, 6, eos], [b], [b, 5, b + 10], [b, 5, b + 10, eos], [b, 5, b + 10, b + 10],
             [b + 3, 5, b + 10, b + 10, 7, b + 20, b + 21, 8], [5, b + 40, 6], [b, 5, b],
             [b + 1, 5, b + 2, b + 3, 6, b + 9], [b + 1, b + 1, 5, b + 7, b + 7, 6, b + 9, eos]]
    return [{"generated": tokens, "seek": seek, "frames": frames}
            for tokens in lists for seek, frames in ((0, 3000), (1724, 1276), (137, 2863))]


def test_javascript_twin_replays_the_same_decoding(export, sessions, tmp_path: Path) -> None:
    """Each call's recorded logits replayed under Node by web/text/whisper.mjs: the same prompt,
    tokens, segments (times bit-equal) and seeks as the Python run; the prompt, detection and
    segment rules on their own cases too."""
    from bundler.site.npmtools import node_executable

    settings = whisper.settings_of(export.generation_config)
    rows, calls, runs = [], [], []
    for options, seconds, timestamps in TWIN_CASES:
        language = options.get("language")
        run = transcribe_window(sessions, features(seconds), settings,
                                whisper.language_id(settings, language) if language else None,
                                options.get("task"), timestamps, record=True)
        seek = 0
        for call in run.calls:
            detected = call.prompt[1] if whisper.needs_language(
                settings, None if language is None else 1, options.get("task")) else None
            calls.append({"language": language, "task": options.get("task"),
                          "timestamps": timestamps, "detected": detected, "first": len(rows),
                          "steps": len(call.logits), "seek": seek,
                          "frames": min(3000, 3000 - seek)})
            rows += call.logits
            seek += whisper.segments(call.generated, settings, seek, 3000 - seek)[1]
        runs.append(run)
    assert sum(len(run.calls) for run in runs) > len(runs)  # some windows took several calls
    detections = [call["first"] for call in calls]
    questions = [{"language": language, "task": task, "timestamps": timestamps,
                  "detected": detected}
                 for language in (None, "en", "german") for task in (None, "translate")
                 for timestamps in (False, True) for detected in (None, 305)]
    table = {"config": export.generation_config, "vocab": int(rows[0].size), "calls": calls,
             "questions": questions, "detections": detections, "crafted": _crafted(settings)}
    (tmp_path / "table.json").write_text(json.dumps(table))
    np.stack(rows).astype("<f4").tofile(tmp_path / "logits.bin")
    result = subprocess.run([str(node_executable()), str(TWIN), str(tmp_path / "table.json"),
                             str(tmp_path / "logits.bin")], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    node = json.loads(result.stdout)

    python_calls = [call for run in runs for call in run.calls]
    for ours, theirs, spec in zip(python_calls, node["calls"], calls, strict=True):
        assert theirs["prompt"] == ours.prompt
        assert theirs["generated"] == ours.generated
        pieces, advance = whisper.segments(ours.generated, settings, spec["seek"], spec["frames"])
        assert theirs["advance"] == advance
        assert [(s["start"], s["end"], s["tokens"]) for s in theirs["segments"]] == [
            (s.start, s.end, list(s.tokens)) for s in pieces]
    for question, answer in zip(questions, node["questions"], strict=True):
        language = question["language"]
        language = None if language is None else whisper.language_id(settings, language)
        assert answer["needs"] == whisper.needs_language(settings, language, question["task"])
        assert answer["prompt"] == whisper.prompt(settings, language, question["task"],
                                                  question["timestamps"], question["detected"])
    assert node["detections"] == [whisper.detect_language(settings, rows[i]) for i in detections]
    assert node["positions"] == [whisper.frames_to_positions(k) for k in range(3001)]
    for case, answer in zip(table["crafted"], node["crafted"], strict=True):
        pieces, advance = whisper.segments(case["generated"], settings, case["seek"],
                                           case["frames"])
        assert answer["advance"] == advance, case
        assert [(s["start"], s["end"], s["tokens"]) for s in answer["segments"]] == [
            (s.start, s.end, list(s.tokens)) for s in pieces], case


def test_window_steps_line_up_with_the_window_tokens(export, sessions) -> None:
    """The browser check's native probes (whisper_bundle.window_steps) are the steps of each
    window's tokens, across the window's decoding calls (the tokens their segments drop
    skipped), then the step after the last token: native's top id at each is its token. Its
    `teacher` calls, run teacher-forced (whisper_bundle.forced_logits, as the browser runs them
    on its side), give the recorded logits back at the probes, which are the processed scores
    wherever a rule left them finite."""
    settings = whisper.settings_of(export.generation_config)
    seeks = []
    for options, seconds, timestamps in TWIN_CASES:
        language = options.get("language")
        window = features(seconds)
        run = transcribe_window(sessions, window, settings,
                                whisper.language_id(settings, language) if language else None,
                                options.get("task"), timestamps, record=True)
        steps = window_steps(run, settings, timestamps)
        tops = [at[0] for at in steps["at"]]
        last = run.calls[-1]
        assert tops == run.tokens + last.generated[last.kept:last.kept + 1]
        assert len(steps["range"]) == len(tops) and min(steps["range"]) > 0
        teacher = steps["teacher"]
        seeks += [call["seek"] for call in teacher]
        # every call that kept a token, and the last (its step after the window's tokens)
        assert [call["seek"] for call in teacher] == [
            c.seek for c in run.calls[:-1] if c.kept] + [last.seek]
        assert [step for call in teacher for step in call["at"]] == steps["at"]
        # the prompt, then the tokens of the compared steps
        assert all(len(call["ids"]) == call["prompt"] + len(call["at"]) for call in teacher)
        rows = np.concatenate([forced_logits(sessions, window, call) for call in teacher])
        np.testing.assert_array_equal(
            np.take_along_axis(rows, np.array(steps["at"]), axis=1).astype(np.float64),
            np.array(steps["raw"]))
        processed = np.array(steps["logits"])
        finite = np.isfinite(processed)
        assert finite[:, 0].all()
        np.testing.assert_array_equal(processed[finite], np.array(steps["raw"])[finite])
    assert max(seeks) > 0  # a call after the window's start was forced on its own features
