"""A built speech-recognition bundle transcribed natively: its `encoder` and `decoder` sessions
(bundle.json's files) run by bundler/text/whisper_run.py over the bundle's own shipped
generation_config.json, preprocessor_config.json and tokenizer. What `bundle run --audio` prints
and what `bundle test --audio` compares the browser's model.transcribe() with, window by
window."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bundler.bundle.folder import native_model
from bundler.bundle.manifest import Manifest
from bundler.bundle.modelio import cpu_session
from bundler.errors import ConfigError
from bundler.tasks.logmel import spec_of
from bundler.text import whisper
from bundler.text.agreement import probes, spread, stepwise_logits
from bundler.text.reference import bundle_tokenizer
from bundler.text.whisper_run import (
    Encoding,
    Transcript,
    WhisperSessions,
    padded,
    transcribe,
    window_features,
)

ENCODER, DECODER = "encoder", "decoder"
# What `bundle test --audio` and `bundle run --audio` transcribe each recording with: the
# language detected (the model's own choice), without and with timestamps.
CASES = ({"timestamps": False}, {"timestamps": True})


def _shipped_json(directory: Path, manifest: Manifest, name: str) -> dict[str, Any]:
    path = (manifest.task.files or {}).get(name) if manifest.task else None
    if path is None:
        raise ConfigError(f"{directory}: the bundle ships no {name}; rebuild it from the export"
                          " folder")
    return json.loads((directory / path).read_text(encoding="utf-8"))


def bundle_sessions(directory: Path, manifest: Manifest, encoder: Any | None = None,
                    stack: contextlib.ExitStack | None = None) -> WhisperSessions:
    """The bundle's two sessions on native CPU: `encoder` an open session of the encoder (a
    chosen variant), else its default; the decoder's default variant, each default as load()
    picks it on WASM and opened with its own session config entries (int4 qdq folds there).
    A model file the build split into parts is put back together in a temporary folder, kept
    until `stack` closes (without one: removed once the session is open)."""
    names = [session.name for session in manifest.sessions]
    if ENCODER not in names or DECODER not in names:
        raise ConfigError(f"{directory} is not a speech-recognition bundle (sessions"
                          f" {', '.join(names)}; expected {ENCODER} and {DECODER})")

    def open_default(name: str) -> Any:
        variant = manifest.session(name).default_for("wasm")
        with contextlib.ExitStack() as own:
            path = (stack or own).enter_context(
                native_model(directory, manifest, directory / variant.file))
            return cpu_session(path, config=variant.config_for("wasm"))

    return WhisperSessions(encoder if encoder is not None else open_default(ENCODER),
                           open_default(DECODER))


def window_steps(run: Transcript, settings: whisper.WhisperSettings,
                 timestamps: bool) -> dict[str, list]:
    """The probes (bundler.text.agreement.probes) of the processed scores of each step that
    chose one of the window's tokens, in their order, then of the step after the last one (where
    native chose eos, or a token the segments drop): where the browser's tokens part from
    native's, the check reads native's scores of both tokens there. Also `raw`: the raw logits
    at the probes (what the browser's teacher-forced logits are compared with), and `teacher`:
    those steps call by call, as the browser runs them teacher-forced ({seek: the call's first
    frame, ids: its prompt then its tokens, prompt: the prompt's length, at: each step's
    probes}). `run` was recorded."""
    scores, raw, counted = [], [], []
    for index, call in enumerate(run.calls):
        stop = call.kept + 1 if index == len(run.calls) - 1 else call.kept
        steps = call.logits[:stop]
        for step, logits in enumerate(steps):
            scores.append(whisper.process(logits, call.generated[:step], settings, timestamps))
            raw.append(logits)
        if steps:  # a call whose tokens the segments all drop is not run again
            counted.append((call, len(steps)))
    probed = probes(np.array(scores), np.array(raw))
    probed["raw"] = np.take_along_axis(np.array(raw, np.float64),
                                       np.asarray(probed["at"], np.int64), axis=1).tolist()
    teacher, first = [], 0
    for call, count in counted:
        teacher.append({"seek": call.seek, "ids": call.prompt + call.generated[:count],
                        "prompt": len(call.prompt), "at": probed["at"][first:first + count]})
        first += count
    return {**probed, "teacher": teacher}


def forced_logits(sessions: WhisperSessions, features: np.ndarray,
                  call: dict[str, Any]) -> np.ndarray:
    """The raw logits [steps, vocab] of one of window_steps' `teacher` calls, natively: the
    call's features encoded, the decoder fed its ids one a step."""
    encoding = Encoding(sessions, sessions.encode(padded(features, call["seek"])))
    prompt = call["prompt"]
    return stepwise_logits(encoding, call["ids"][:prompt], call["ids"][prompt:])


def _own_spread(basic: WhisperSessions, features: np.ndarray, steps: dict[str, list]) -> float:
    """Native's own spread (bundler.text.agreement.spread) over one window's teacher-forced
    steps: the sessions at ORT_ENABLE_BASIC (`basic`) against the recorded run."""
    rows = np.concatenate([forced_logits(basic, features, call) for call in steps["teacher"]])
    return spread(steps["raw"], steps["range"], steps["at"], rows)


def transcripts(directory: Path, manifest: Manifest, sessions: WhisperSessions,
                samples: np.ndarray, rate: int, cases: tuple[dict[str, Any], ...] = CASES,
                steps: bool = False, basic: WhisperSessions | None = None
                ) -> list[dict[str, Any]]:
    """Per case ({language, task, timestamps}): {"windows": each 30 s window's tokens, "tokens":
    the merged text tokens, "text", and with timestamps "segments" ({start, end, text,
    tokens})}, as model.transcribe() resolves to; with `steps`, "steps": each window's
    window_steps (for the browser check), and with `basic` (the same sessions at
    ORT_ENABLE_BASIC: a quantized one's fused integer kernels round differently from its
    unfused graph) "spread": native's own worst spread over them."""
    settings = whisper.settings_of(_shipped_json(directory, manifest, "generation_config.json"))
    spec = spec_of(_shipped_json(directory, manifest, "preprocessor_config.json"))
    assert manifest.task is not None
    with tempfile.TemporaryDirectory(prefix="bundle-asr-") as scratch:
        tokenizer = bundle_tokenizer(directory, manifest.task, Path(scratch))
    found = []
    for case in cases:
        language = case.get("language")
        runs, chunks = transcribe(
            sessions, np.asarray(samples, np.float32), rate, spec, settings,
            None if language is None else whisper.language_id(settings, language),
            case.get("task"), bool(case.get("timestamps")), record=steps)
        tokens = [token for chunk in chunks for token in chunk.tokens]
        result: dict[str, Any] = {"options": dict(case), "windows": [run.tokens for run in runs],
                                  "tokens": tokens, "text": tokenizer.decode(tokens)}
        if case.get("timestamps"):
            result["segments"] = [{"start": chunk.start, "end": chunk.end,
                                   "text": tokenizer.decode(chunk.tokens),
                                   "tokens": chunk.tokens} for chunk in chunks]
        if steps:
            result["steps"] = [window_steps(run, settings, bool(case.get("timestamps")))
                               for run in runs]
        if steps and basic is not None:
            _, features = window_features(samples, rate, spec)
            result["spread"] = max(_own_spread(basic, window, probed) for window, probed
                                   in zip(features, result["steps"], strict=True))
        found.append(result)
    return found
