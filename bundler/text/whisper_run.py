"""The native reference run of a Whisper-style export (optimum's
`--task automatic-speech-recognition-with-past`: encoder_model.onnx and
decoder_model_merged.onnx) on one 30 s window: what the browser's transcript must reproduce,
token for token. The decoding rules are bundler/text/whisper.py's spec; this module only feeds
the sessions.

The encoder maps log-mel features [1, mels, 3000] to hidden states [1, 1500, d_model]. The
merged decoder takes `input_ids`, `encoder_hidden_states`, `use_cache_branch` and, per layer N,
`past_key_values.N.decoder.key/value` (self-attention, [1, heads, past, head_size], grows each
step) and `past_key_values.N.encoder.key/value` (cross-attention, [1, heads, 1500, head_size]).
Step 0 runs the whole prompt with `use_cache_branch` false and zero-length pasts; its
`present.N.encoder.*` are the cross-attention cache for every later step, which feed one token
with `use_cache_branch` true and only take the new `present.N.decoder.*`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bundler.errors import ModelError
from bundler.tasks.audio import resample
from bundler.tasks.logmel import LogMelSpec, log_mel
from bundler.text import whisper
from bundler.text.whisper import WhisperSettings
from bundler.text.whisper_windows import RATE, Chunk, WindowSpan, merge, windows

PAST = re.compile(r"^past_key_values\.(\d+)\.(decoder|encoder)\.(key|value)$")
DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


@dataclasses.dataclass
class Call:
    """One decoding call (a window takes one or more): the prompt, the generated ids (an ending
    eos included) and, when recorded, each step's raw logits [vocab] (float32) in order;
    `kept`: how many of the generated ids (a prefix) the window's segments keep; `seek`: the
    window's feature frame it started at."""

    prompt: list[int]
    generated: list[int]
    logits: list[np.ndarray] = dataclasses.field(default_factory=list)
    kept: int = 0
    seek: int = 0

    @property
    def tokens(self) -> list[int]:
        """Prompt and generated ids, as transformers' generate returns them."""
        return self.prompt + self.generated


class WhisperSessions:
    """An encoder and a merged decoder session, with the decoder's cache layout read from its
    input metadata."""

    def __init__(self, encoder: Any, decoder: Any) -> None:
        self.encoder, self.decoder = encoder, decoder
        inputs = {item.name: item for item in decoder.get_inputs()}
        past = [PAST.match(name) for name in inputs]
        layers = sorted({int(m.group(1)) for m in past if m})
        needed = {"input_ids", "encoder_hidden_states", "use_cache_branch"}
        if not layers or not needed <= set(inputs):
            raise ModelError("not a merged Whisper decoder: it needs input_ids,"
                             " encoder_hidden_states, use_cache_branch and"
                             " past_key_values.N.decoder/encoder.key/value inputs (optimum's"
                             " decoder_model_merged.onnx)")
        first = inputs["past_key_values.0.decoder.key"]
        heads, size = first.shape[1], first.shape[3]
        if not (isinstance(heads, int) and isinstance(size, int)):
            raise ModelError(f"past_key_values.0.decoder.key has shape {first.shape}: the heads"
                             " and head size must be fixed")
        if first.type not in DTYPES:
            raise ModelError(f"past_key_values.0.decoder.key is {first.type}; expected float")
        self.layers, self.heads, self.head_size = len(layers), heads, size
        self.dtype = DTYPES[first.type]
        self.outputs = [item.name for item in decoder.get_outputs()]
        self.encoder_input = encoder.get_inputs()[0].name

    def encode(self, features: np.ndarray) -> np.ndarray:
        """Hidden states [1, positions, d_model] of features [mels, frames]."""
        batch = np.asarray(features, np.float32)[None]
        return self.encoder.run(None, {self.encoder_input: batch})[0]

    def _empty(self) -> dict[str, np.ndarray]:
        zero = np.zeros((1, self.heads, 0, self.head_size), self.dtype)
        return {f"past_key_values.{layer}.{part}.{kind}": zero for layer in range(self.layers)
                for part in ("decoder", "encoder") for kind in ("key", "value")}

    def step(self, ids: list[int], hidden: np.ndarray,
             past: dict[str, np.ndarray] | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The logits [len(ids), vocab] of `ids` after `past` (None: step 0) and the new past."""
        # The cached branch reads the cross-attention cache, not the hidden states: it gets none
        # (the browser then copies 1,500 x d_model floats into the runtime once per call, not
        # once per step).
        if past is not None:
            hidden = hidden[:, :0]
        feed = {"input_ids": np.asarray([ids], np.int64), "encoder_hidden_states": hidden,
                "use_cache_branch": np.array([past is not None])}
        feed.update(past if past is not None else self._empty())
        values = dict(zip(self.outputs, self.decoder.run(self.outputs, feed), strict=True))
        new = dict(past or {})
        for name, value in values.items():
            if name.startswith("present.") and (past is None or ".decoder." in name):
                new[name.replace("present", "past_key_values", 1)] = value
        return values["logits"][0], new


class Encoding:
    """The merged decoder over one encoding, stepped as bundler.text.agreement.stepwise_logits
    steps a decoder (teacher-forced; Whisper's decoder takes no attention mask)."""

    def __init__(self, sessions: WhisperSessions, hidden: np.ndarray) -> None:
        self.sessions, self.hidden = sessions, hidden

    def run(self, ids: Sequence[int], past: dict[str, np.ndarray] | None,
            mask: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return self.sessions.step(list(ids), self.hidden, past)


def detect(sessions: WhisperSessions, settings: WhisperSettings, hidden: np.ndarray) -> int:
    """The language detected from a window's hidden states (spec step 2)."""
    logits, _ = sessions.step([settings.decoder_start], hidden, None)
    return whisper.detect_language(settings, logits[-1])


def decode_call(sessions: WhisperSessions, features: np.ndarray, settings: WhisperSettings,
                language: int | None = None, task: str | None = None,
                timestamps: bool = False, record: bool = False,
                on_token: Callable[[int], None] | None = None,
                detected: int | None = None) -> Call:
    """Greedy decoding of one call's features by the spec: language detection where needed
    (unless `detected` gives it), the prompt, then one token a step until eos or
    `max_length`."""
    hidden = sessions.encode(features)
    if detected is None and whisper.needs_language(settings, language, task):
        detected = detect(sessions, settings, hidden)
    ids = whisper.prompt(settings, language, task, timestamps, detected)
    call = Call(ids, [])
    past, pending = None, list(ids)
    while len(ids) + len(call.generated) < settings.max_length:
        logits, past = sessions.step(pending, hidden, past)
        if record:
            call.logits.append(np.array(logits[-1], np.float32))
        scores = whisper.process(logits[-1], call.generated, settings, timestamps)
        token = whisper.choose(scores)
        call.generated.append(token)
        if on_token is not None:
            on_token(token)
        if token == settings.eos:
            break
        pending = [token]
    return call


@dataclasses.dataclass
class Transcript:
    """One window's transcript (spec step 6): its segments, their tokens in order, and each
    decoding call it took."""

    segments: list[whisper.Segment]
    calls: list[Call]

    @property
    def tokens(self) -> list[int]:
        return [token for segment in self.segments for token in segment.tokens]


def padded(features: np.ndarray, seek: int) -> np.ndarray:
    """A call's features [mels, 3000]: the window's `features` [mels, frames] from frame `seek`
    on, zero-padded (or cut) to 3,000 frames."""
    frames = min(whisper.WINDOW_FRAMES, features.shape[-1] - seek)
    piece = np.zeros((features.shape[0], whisper.WINDOW_FRAMES), np.float32)
    piece[:, :frames] = features[:, seek:seek + frames]
    return piece


def transcribe_window(sessions: WhisperSessions, features: np.ndarray,
                      settings: WhisperSettings, language: int | None = None,
                      task: str | None = None, timestamps: bool = False,
                      record: bool = False) -> Transcript:
    """Spec step 6: one window's features [mels, 3000] decoded call by call, each call on the
    features from `seek` on, zero-padded, until `seek` reaches the window's end; the language,
    where it is detected, is detected once on the window's start."""
    total = features.shape[-1]
    seek, calls, detected = 0, [], None
    found: list[whisper.Segment] = []
    if whisper.needs_language(settings, language, task):  # once, on the window's start
        detected = detect(sessions, settings, sessions.encode(features[:, :whisper.WINDOW_FRAMES]))
    while seek < total:
        frames = min(whisper.WINDOW_FRAMES, total - seek)
        call = decode_call(sessions, padded(features, seek), settings, language, task,
                           timestamps, record, detected=detected)
        calls.append(call)
        pieces, advance = whisper.segments(call.generated, settings, seek, frames)
        call.kept, call.seek = sum(len(piece.tokens) for piece in pieces), seek
        found += pieces
        seek += advance
    return Transcript(found, calls)


def window_features(samples: np.ndarray, rate: int, spec: LogMelSpec, chunk_s: float = 30.0,
                    stride_s: float | None = None) -> tuple[list[WindowSpan], list[np.ndarray]]:
    """Audio of any length at any rate cut into windows (bundler/text/whisper_windows.py): their
    spans and each one's log-mel features [mels, frames]."""
    audio = resample(np.asarray(samples, np.float32), rate, RATE)
    spans = windows(audio.size, chunk_s, stride_s)
    return spans, [log_mel(audio[s.start:s.end], RATE, spec) for s in spans]


def transcribe(sessions: WhisperSessions, samples: np.ndarray, rate: int,
               spec: LogMelSpec, settings: WhisperSettings, language: int | None = None,
               task: str | None = None, timestamps: bool = False, chunk_s: float = 30.0,
               stride_s: float | None = None, record: bool = False
               ) -> tuple[list[Transcript], list[Chunk]]:
    """Audio of any length at any rate: each window's transcript (`record`: with each step's
    logits) and the merged chunks (bundler/text/whisper_windows.py)."""
    spans, features = window_features(samples, rate, spec, chunk_s, stride_s)
    runs = [transcribe_window(sessions, window, settings, language, task, timestamps, record)
            for window in features]
    chunks = merge([run.tokens for run in runs], [s.stride_seconds for s in spans], settings,
                   timestamps)
    return runs, chunks
