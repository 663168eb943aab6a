"""How a speech-recognition bundle's variants transcribe compared with fp32, natively: what auto
judges such a bundle by and bundle.json's `accuracy` records, per session and per combination of
the sessions' variants (an `encoder` variant with a `decoder` variant).

fp32's transcript of the check audio (bundler/text/whisper_run.py over the fp32 sessions) is made
once; a combination is measured by:

- `tokens`: the share of fp32's transcript tokens it reproduces before first parting from them
  (bundler.text.quality.agreement: after a difference the two decode different texts);
- `wer`: the word error rate of its text against fp32's text (word-level edit distance over
  fp32's word count, over all the audio);
- cosine, top1, max_abs and mean_rel: of its logits teacher-forced on fp32's tokens of each
  audio's first window (top1: the same next token predicted).

The check audio is `--validation` when it is a .wav file or a folder of them, else the built-in
check audio (bundler.tasks.samples.speech_like: tones in bursts, not speech).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from bundler.bundle.modelio import cpu_session
from bundler.errors import ConfigError, QuantizeError, first_line
from bundler.tasks.audio import read_wav, resample
from bundler.tasks.logmel import log_mel, spec_of
from bundler.tasks.samples import speech_like
from bundler.text import whisper
from bundler.text.folder import ExportFolder
from bundler.text.quality import agreement
from bundler.text.tokenizer import TextTokenizer
from bundler.text.whisper_run import RATE, WhisperSessions, transcribe
from bundler.variants.metrics import Metrics, compare_runs

CHECK_AUDIO = "check-audio"  # bundle.json's accuracy.data without --validation audio
CHECK_AUDIO_NOTE = ("measured on the built-in check audio (tones, not speech); pass --validation"
                    " speech.wav (or a folder of .wav files) with recordings of your own")
CHECK_SECONDS = 4.0
ENCODER, DECODER = "encoder", "decoder"
Models = Mapping[str, Path]  # session name -> model file
Configs = Mapping[str, Mapping[str, str] | None]  # session name -> its session config entries


def is_audio(path: Path | None) -> bool:
    """Whether --validation names check audio: a .wav file, or a folder of them."""
    return path is not None and (path.suffix.lower() == ".wav" or path.is_dir())


def check_audio(validation: Path | None) -> tuple[list[np.ndarray], str]:
    """The check audio at 16 kHz and its accuracy.data name."""
    if not is_audio(validation):
        return [speech_like(CHECK_SECONDS, RATE)], CHECK_AUDIO
    assert validation is not None
    files = sorted(validation.glob("*.wav")) if validation.is_dir() else [validation]
    if not files:
        raise ConfigError(f"--validation {validation}: no .wav file in the folder")
    audio = []
    for file in files:
        samples, rate = read_wav(file)
        audio.append(resample(samples, rate, RATE))
    return audio, "validation"


@dataclasses.dataclass(frozen=True)
class TranscriptCheck:
    """fp32's transcripts of the check audio, made once and compared with each combination."""

    folder: ExportFolder
    fp32: dict[str, Path]
    audio: list[np.ndarray]
    data: str  # accuracy.data: "check-audio" or "validation"
    tokens: list[list[int]]  # fp32's transcript tokens per audio
    texts: list[str]
    forced: list[list[int]]  # fp32's prompt and tokens of each audio's first decoding call
    logits: list[np.ndarray]  # fp32's logits teacher-forced on them
    seconds: float  # fp32's transcription time, natively on one thread


def _sessions(models: Models, configs: Configs) -> WhisperSessions:
    try:
        return WhisperSessions(*(cpu_session(models[name], threads=1, config=configs.get(name))
                                 for name in (ENCODER, DECODER)))
    except Exception as error:
        raise QuantizeError(f"the speech sessions do not run in onnxruntime"
                            f" ({first_line(error, typed=True)})") from None


@dataclasses.dataclass(frozen=True)
class _Run:
    tokens: list[list[int]]
    texts: list[str]
    forced: list[list[int]]
    logits: list[np.ndarray]
    seconds: float


def _run(folder: ExportFolder, audio: list[np.ndarray], models: Models, configs: Configs,
         forced: list[list[int]] | None) -> _Run:
    """Transcripts of `audio` by `models`, and the logits teacher-forced on `forced` (None: on
    their own first window's tokens)."""
    spec = spec_of(folder.json("preprocessor_config.json"))
    settings = whisper.settings_of(folder.json("generation_config.json"))
    tokenizer = TextTokenizer.from_folder(folder.folder)
    sessions = _sessions(models, configs)
    tokens, texts, firsts, logits, seconds = [], [], [], [], 0.0
    for index, samples in enumerate(audio):
        started = time.perf_counter()
        runs, chunks = transcribe(sessions, samples, RATE, spec, settings)
        seconds += time.perf_counter() - started
        found = [token for chunk in chunks for token in chunk.tokens]
        tokens.append(found)
        texts.append(tokenizer.decode(found))
        first = runs[0].calls[0].tokens if forced is None else forced[index]
        firsts.append(list(first))
        features = log_mel(samples[:RATE * 30], RATE, spec)
        window = np.zeros((features.shape[0], whisper.WINDOW_FRAMES), np.float32)
        window[:, :min(features.shape[1], whisper.WINDOW_FRAMES)] = \
            features[:, :whisper.WINDOW_FRAMES]
        rows, _ = sessions.step(first, sessions.encode(window), None)
        logits.append(np.asarray(rows, np.float32))
    return _Run(tokens, texts, firsts, logits, seconds)


def reference(fp32: Models, folder: ExportFolder, validation: Path | None) -> TranscriptCheck:
    """fp32's transcripts of the check audio, by the export `folder`'s configs and tokenizer."""
    audio, data = check_audio(validation)
    run = _run(folder, audio, fp32, {}, None)
    return TranscriptCheck(folder, dict(fp32), audio, data, run.tokens, run.texts, run.forced,
                           run.logits, run.seconds)


def word_error_rate(want: list[str], got: list[str]) -> float:
    """Word-level edit distance of `got` from `want` over `want`'s word count (1 per word when
    `want` has none: any word is an error)."""
    edits = 0
    words = 0
    for a, b in zip(want, got, strict=True):
        ref, hyp = a.split(), b.split()
        row = list(range(len(hyp) + 1))
        for i, word in enumerate(ref, 1):
            diagonal, row[0] = row[0], i
            for j, other in enumerate(hyp, 1):
                diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1,
                                               diagonal + (word != other))
        edits += row[-1]
        words += len(ref)
    return edits / words if words else float(edits > 0)


@dataclasses.dataclass(frozen=True)
class Measured:
    metrics: Metrics
    seconds: float  # the transcription's native time, one thread


def measure_transcripts(check: TranscriptCheck, models: Models,
                        configs: Configs | None = None) -> Measured:
    """The sessions `models` names (the others at fp32), opened with their `configs`, against
    fp32's transcripts (see the module)."""
    run = _run(check.folder, check.audio, {**check.fp32, **models}, configs or {},
               check.forced)
    metrics = compare_runs(["logits"], [[rows] for rows in check.logits],
                           [[rows] for rows in run.logits], "+".join(models) or "fp32")
    return Measured(dataclasses.replace(
        metrics, measured_on=check.data, tokens=agreement(check.tokens, run.tokens),
        steps=sum(map(len, check.tokens)), wer=word_error_rate(check.texts, run.texts)),
        run.seconds)

