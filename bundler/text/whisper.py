"""The Whisper decoding spec: how a Whisper-style encoder-decoder turns one 30 s window's logits
into tokens and segments, the same in Python (this module, numpy) and in the browser
(web/text/whisper.mjs). It follows transformers' WhisperForConditionalGeneration.generate
(4.57, greedy, short-form: one call per window), so that on the same weights the tokens are
those of transformers and of optimum's ORTModelForSpeechSeq2Seq. Long audio is cut into windows
by bundler/text/whisper_windows.py; bundler/text/whisper_run.py runs the ONNX sessions.

1. **Settings** come from generation_config.json (`settings_of`): `decoder_start_token_id`
   (<|startoftranscript|>), `eos_token_id`, `no_timestamps_token_id` (the first timestamp
   <|0.00|> is the next id; a timestamp id t means `(t - first) * 0.02` s), `lang_to_id`,
   `task_to_id`, `suppress_tokens`, `begin_suppress_tokens`, `max_initial_timestamp_index`,
   `max_length` and the legacy `forced_decoder_ids`.
2. **Prompt** (`prompt`): <|startoftranscript|>, then the language token (`language` as a code
   "en", a token "<|en|>" or a name "english"; when none is given and forced_decoder_ids has
   none either, the detected one: the argmax over the language tokens of the logits after
   <|startoftranscript|>), then the task token (`task` given, else the one of
   forced_decoder_ids, else "transcribe" when a language is known), then <|notimestamps|>
   unless timestamps are asked for.
3. **Logits** of each step (`process`), in transformers' order, on float64 scores widened from
   the model's float32: (a) at the first generated step, `begin_suppress_tokens` become -inf;
   (b) `suppress_tokens` become -inf; (c) with timestamps, the timestamp rules of
   WhisperTimeStampLogitsProcessor, over the generated tokens `g` (the prompt excluded):
   <|notimestamps|> is -inf; when `g` ends in a timestamp: if the one before it is a timestamp
   too (or `g` has one token) every timestamp is -inf, else every id below `eos` (text) is;
   when `g` has timestamps, those below the last one are -inf, the last one itself too unless
   `g` ends in a lone timestamp (timestamps never decrease, and <|0.00|> is not repeated); at
   the first step everything below the first timestamp is -inf and so is every timestamp after
   `max_initial_timestamp_index`; and if the probability of all timestamps together exceeds
   that of the likeliest text token, every text token is -inf. That last rule is computed as
   `sum(exp64(s - max))` over the timestamps (id order) `> exp64(best_text - max)`, with
   sampling.py's exp64, so both twins decide it bit-identically; transformers compares float32
   log-probabilities, which only differs when the two sides are equal to within float32
   rounding.
4. **Choice**: the argmax of the processed scores, the lowest id on ties. Decoding stops after
   `eos` or when prompt plus generated tokens reach `max_length`.
5. **Segments** (`segments`) of one call's generated tokens (eos dropped), as transformers'
   _retrieve_segment: two consecutive timestamps end a segment; each segment runs from its
   first token's timestamp to its last (the last segment, when it ends in a pair, to the first
   of the pair); tokens after the last pair are dropped unless `g` ends in a single timestamp.
   Without a pair the whole call is one segment from 0 to its last timestamp (or the input's
   length when there is none or it is <|0.00|>). Times are `seek * 0.02 / 2` (the call's start
   frame in seconds) plus `timestamp * 0.02`.
6. **A window** (whisper_run.transcribe_window) is decoded as transformers' generate decodes
   one 30 s input, with or without timestamps: calls from frame `seek = 0` until `seek` reaches
   the window's 3,000 frames, each on the features from `seek` on, zero-padded to 3,000 frames,
   each moving `seek` on by what `segments` returns (to the input's end, or to the first
   timestamp of the last pair when text after it was cut off; without timestamps the model may
   still emit them, and they count). A detected language is detected once, on the window's
   first call, and kept. The window's tokens are its segments' tokens in order (the prompt and
   eos not included).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bundler.errors import ConfigError
from bundler.text.sampling import exp64

TIME_PRECISION = 0.02  # seconds per timestamp token: 30 s over 1,500 encoder positions
FRAME_SECONDS = 0.01  # seconds per log-mel frame (hop 160 at 16 kHz)
INPUT_STRIDE = 2  # feature frames per encoder position (the encoder's two convolutions)
WINDOW_FRAMES = 3000  # frames in one decoding call's input
# transformers' Whisper language names (tokenization_whisper.LANGUAGES, a subset in use here is
# enough to resolve names; codes and tokens always work)
LANGUAGE_NAMES = {"english": "en", "chinese": "zh", "german": "de", "spanish": "es",
                  "russian": "ru", "korean": "ko", "french": "fr", "japanese": "ja",
                  "portuguese": "pt", "turkish": "tr", "polish": "pl", "italian": "it",
                  "dutch": "nl", "arabic": "ar", "hindi": "hi"}


@dataclasses.dataclass(frozen=True)
class WhisperSettings:
    """A model's decoding settings, from its generation_config.json (spec step 1)."""

    decoder_start: int
    eos: int
    no_timestamps: int
    lang_to_id: Mapping[str, int]
    task_to_id: Mapping[str, int]
    suppress_tokens: tuple[int, ...] = ()
    begin_suppress_tokens: tuple[int, ...] = ()
    max_initial_timestamp_index: int | None = None
    max_length: int = 448
    forced_decoder_ids: tuple[tuple[int, int | None], ...] = ()

    @property
    def timestamp_begin(self) -> int:
        """The id of <|0.00|>."""
        return self.no_timestamps + 1


def settings_of(config: Mapping[str, Any]) -> WhisperSettings:
    """Spec step 1: the settings of a generation_config.json (a dict)."""
    missing = [key for key in ("decoder_start_token_id", "eos_token_id", "no_timestamps_token_id")
               if config.get(key) is None]
    if missing:
        raise ConfigError(f"generation_config.json lacks {', '.join(missing)}: not a Whisper"
                          " generation config")
    eos = config["eos_token_id"]
    forced = tuple((int(i), None if t is None else int(t))
                   for i, t in config.get("forced_decoder_ids") or ())
    return WhisperSettings(
        decoder_start=int(config["decoder_start_token_id"]),
        eos=int(eos[0] if isinstance(eos, list) else eos),
        no_timestamps=int(config["no_timestamps_token_id"]),
        lang_to_id=dict(config.get("lang_to_id") or {}),
        task_to_id=dict(config.get("task_to_id") or {}),
        suppress_tokens=tuple(int(t) for t in config.get("suppress_tokens") or ()),
        begin_suppress_tokens=tuple(int(t) for t in config.get("begin_suppress_tokens") or ()),
        max_initial_timestamp_index=config.get("max_initial_timestamp_index"),
        max_length=int(config.get("max_length") or 448),
        forced_decoder_ids=forced)


def language_id(settings: WhisperSettings, language: str) -> int:
    """The id of `language`: a code ("en"), a token ("<|en|>") or a name ("english")."""
    if not settings.lang_to_id:
        raise ConfigError(f"language {language!r} cannot be given: this model is English-only"
                          " (its generation_config.json has no lang_to_id); leave it out")
    key = language.lower()
    token = key if key.startswith("<|") else f"<|{LANGUAGE_NAMES.get(key, key)}|>"
    if token not in settings.lang_to_id:
        known = ", ".join(sorted(t[2:-2] for t in settings.lang_to_id))
        raise ConfigError(f"language {language!r} is not one of this model's: {known}")
    return int(settings.lang_to_id[token])


def prompt(settings: WhisperSettings, language: int | None, task: str | None,
           timestamps: bool, detected: int | None = None) -> list[int]:
    """Spec step 2: the window's prompt ids. `language` is the id asked for (language_id) or
    None; `detected` the detected one, used where needs_language said so."""
    forced = dict(settings.forced_decoder_ids) if task is None and language is None else {}
    ids: list[int | None] = [settings.decoder_start]
    position = 1
    while position in forced:  # the legacy positions 1, 2, ... in order
        ids.append(forced[position])
        position += 1
    if language is not None:
        ids[1:2] = [language]  # replaces a forced language, else appends
    elif detected is not None and (len(ids) <= 1 or ids[1] is None):
        ids[1:2] = [detected]
    if task is not None:  # the forced ids were not read, so the prompt has no task yet
        if not settings.task_to_id:
            raise ConfigError(f"task {task!r} cannot be given: this model is English-only (its"
                              " generation_config.json has no task_to_id); leave it out")
        if task not in settings.task_to_id:
            raise ConfigError(f"task {task!r} is not one of {sorted(settings.task_to_id)}")
        ids.append(settings.task_to_id[task])
    elif (language is not None and "transcribe" in settings.task_to_id
          and not any(i in settings.task_to_id.values() for i in ids)):
        ids.append(settings.task_to_id["transcribe"])
    if not timestamps and ids[-1] != settings.no_timestamps:
        ids.append(settings.no_timestamps)
    elif timestamps and ids[-1] == settings.no_timestamps:
        ids.pop()
    return [int(i) for i in ids if i is not None]


def needs_language(settings: WhisperSettings, language: int | None, task: str | None) -> bool:
    """Whether the language must be detected: a multilingual model, none given or forced (the
    forced ids count only when neither language nor task is given)."""
    forced = dict(settings.forced_decoder_ids) if task is None else {}
    return bool(settings.lang_to_id) and language is None and forced.get(1) is None


def detect_language(settings: WhisperSettings, logits: np.ndarray) -> int:
    """The language id of the logits after <|startoftranscript|>: the argmax over the language
    tokens, the lowest id on ties."""
    ids = np.array(sorted(settings.lang_to_id.values()))
    scores = np.asarray(logits, np.float32)[ids]
    return int(ids[int(np.argmax(scores))])


def process(logits: np.ndarray, generated: Sequence[int], settings: WhisperSettings,
            timestamps: bool) -> np.ndarray:
    """Spec step 3: the step's float64 scores after the suppressions and timestamp rules."""
    scores = np.asarray(logits, np.float32).astype(np.float64).reshape(-1).copy()
    if not generated and settings.begin_suppress_tokens:
        scores[list(settings.begin_suppress_tokens)] = -np.inf
    if settings.suppress_tokens:
        scores[list(settings.suppress_tokens)] = -np.inf
    if timestamps:
        _timestamp_rules(scores, list(generated), settings)
    return scores


def _timestamp_rules(scores: np.ndarray, generated: list[int], settings: WhisperSettings) -> None:
    begin = settings.timestamp_begin
    scores[settings.no_timestamps] = -np.inf
    last = len(generated) >= 1 and generated[-1] >= begin
    penultimate = len(generated) < 2 or generated[-2] >= begin
    if last:
        if penultimate:  # a pair (or a lone first timestamp) is followed by text
            scores[begin:] = -np.inf
        else:  # a segment's end is followed by the next one's start (or eos)
            scores[:settings.eos] = -np.inf
    stamps = [t for t in generated if t >= begin]
    if stamps:
        floor = stamps[-1] if last and not penultimate else stamps[-1] + 1
        scores[begin:floor] = -np.inf
    if not generated:
        scores[:begin] = -np.inf
        if settings.max_initial_timestamp_index is not None:
            scores[begin + settings.max_initial_timestamp_index + 1:] = -np.inf
    top = np.max(scores)
    if not np.isfinite(top):
        return
    stamp_weight = np.cumsum(exp64(scores[begin:] - top))[-1]  # id order, as the JS loop
    text_weight = exp64(np.array([np.max(scores[:begin]) - top]))[0]
    if stamp_weight > text_weight:
        scores[:begin] = -np.inf


def choose(scores: np.ndarray) -> int:
    """Spec step 4: the argmax, the lowest id on ties."""
    return int(np.argmax(scores))


@dataclasses.dataclass(frozen=True)
class Segment:
    """A stretch of a transcript between timestamps: seconds and the tokens (timestamps
    included, as transformers keeps them)."""

    start: float
    end: float
    tokens: tuple[int, ...]


def _f32(value: float) -> float:
    return float(np.float32(value))


def frames_to_positions(frames: int) -> int:
    """Timestamp steps in `frames` feature frames, as transformers computes it in float32
    (frames * 0.01 / 0.02, truncated; not always frames // 2)."""
    return int(_f32(_f32(_f32(frames) * _f32(FRAME_SECONDS)) / _f32(TIME_PRECISION)))


def segments(generated: Sequence[int], settings: WhisperSettings, seek: int = 0,
             frames: int = WINDOW_FRAMES) -> tuple[list[Segment], int]:
    """Spec step 5: the segments of one decoding call's generated tokens (a trailing eos
    dropped) that started at feature frame `seek` with `frames` frames of input left, and how
    many frames the next call starts after this one's."""
    tokens = list(generated)
    if tokens and tokens[-1] == settings.eos:
        tokens.pop()
    offset = seek * TIME_PRECISION / INPUT_STRIDE
    begin = settings.timestamp_begin
    is_stamp = [t >= begin for t in tokens]
    single_ending = is_stamp[-2:] == [False, True]
    cuts = [i + 1 for i in range(len(tokens) - 1) if is_stamp[i] and is_stamp[i + 1]]
    if not cuts:
        stamps = [t for t in tokens if t >= begin]
        position = stamps[-1] - begin if stamps and stamps[-1] != begin else \
            frames_to_positions(frames)
        return [Segment(offset, offset + position * TIME_PRECISION, tuple(tokens))], frames
    if single_ending:
        cuts.append(len(tokens))
    else:
        cuts[-1] += 1  # the last pair's second timestamp stays with its segment
    found, previous = [], 0
    for index, cut in enumerate(cuts):
        piece = tokens[previous:cut]
        last_piece = index == len(cuts) - 1
        end_token = piece[-1] if not last_piece or single_ending else piece[-2]
        found.append(Segment(offset + (piece[0] - begin) * TIME_PRECISION,
                             offset + (end_token - begin) * TIME_PRECISION, tuple(piece)))
        previous = cut
    if single_ending:  # nothing was cut off: the call covered its input
        return found, frames
    # the text after the last pair was cut off mid-speech: decode again from that pair
    return found, (tokens[previous - 2] - begin) * INPUT_STRIDE
