"""Long audio for Whisper: 30 s windows with a stride, each decoded on its own
(bundler/text/whisper.py step 6), merged into one transcript. The twin is
web/text/whisper_windows.mjs. This follows transformers' ASR pipeline with `chunk_length_s`
(its chunk_iter and the tokenizer's _decode_asr), not the sequential long-form algorithm of
generate(): windows do not depend on each other's tokens, so each window's tokens can be checked
against a native run of that window alone, and windows can be decoded in any order.

**Windows** (`windows`): at 16 kHz, `chunk = round(chunk_s * 16000)` samples (30 s) and
`stride = round(stride_s * 16000)` on each side (default `chunk_s / 6`, 5 s), so windows start
every `chunk - 2 * stride` samples (20 s) and end where the audio does; the first has no left
stride, the last no right stride, and a window no longer than its left stride is dropped. Each
window is padded to 30 s by the log-mel front end.

**Merge** (`merge`), as _decode_asr, over each window's tokens (special ids, from <|endoftext|>
up to <|notimestamps|>, are skipped; a language token sets the chunk's language), with
`offset`, the running time of the window's start less its left stride: a timestamp token at `t`
seconds means `round(t + offset, 2)`; timestamps within the right stride (from the last
timestamp before it) are skipped, and the token after them; in a later window, timestamps before
its left stride are skipped. The first kept timestamp opens a chunk; the next, unless equal,
closes it: the text tokens gathered so far in each window are joined by `lcs_merge` (the
longest-common-sequence rule: slide the next window's tokens over the end of the previous ones,
keep the alignment with the most matches over length plus length / 10000 where matches > 1, and
cut both at the middle of the overlap). Without timestamps the chunk's tokens are all windows'
text joined by `lcs_merge`. Where a window's timestamps decrease (its generate call took several
decoding calls), the earlier calls' length is added, as _decode_asr does. Times are rounded to
2 decimals (Python's round; the JS twin's toFixed agrees, no time here is a decimal tie).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from bundler.text.whisper import TIME_PRECISION, WhisperSettings

RATE = 16000
SEGMENT_POSITIONS = 1500  # a decoding call's length in timestamp steps


@dataclasses.dataclass(frozen=True)
class WindowSpan:
    """One window: samples [start, end) of the audio, and its strides in samples."""

    start: int
    end: int
    left: int
    right: int

    @property
    def stride_seconds(self) -> tuple[float, float, float]:
        """(length, left stride, right stride) in seconds, as the merge takes them."""
        return ((self.end - self.start) / RATE, self.left / RATE, self.right / RATE)


def windows(samples: int, chunk_s: float = 30.0, stride_s: float | None = None
            ) -> list[WindowSpan]:
    """The windows over `samples` samples at 16 kHz (transformers' chunk_iter)."""
    stride_s = chunk_s / 6 if stride_s is None else stride_s
    chunk, stride = int(round(chunk_s * RATE)), int(round(stride_s * RATE))
    if chunk < 2 * stride:
        raise ValueError("the window must be longer than its two strides")
    found = []
    for start in range(0, samples, chunk - 2 * stride):
        end = min(start + chunk, samples)
        last = start + chunk >= samples
        left, right = (0 if start == 0 else stride), (0 if last else stride)
        if end - start > left:
            found.append(WindowSpan(start, end, left, right))
        if last:
            break
    return found


def lcs_merge(sequences: Sequence[Sequence[int]]) -> list[int]:
    """The longest-common-sequence join of overlapping token sequences (_decode_asr's)."""
    if not sequences:
        return []
    left, total = list(sequences[0]), []
    for right in (list(s) for s in sequences[1:]):
        best, cut = 0.0, (len(left), len(left), 0, 0)
        n, m = len(left), len(right)
        for i in range(1, n + m):
            left_start, left_stop = max(0, n - i), min(n, n + m - i)
            right_start, right_stop = max(0, i - n), min(m, i)
            matches = int(np.sum(np.array(left[left_start:left_stop]) ==
                                 np.array(right[right_start:right_stop])))
            score = matches / i + i / 10000.0
            if matches > 1 and score > best:
                best, cut = score, (left_start, left_stop, right_start, right_stop)
        total += left[:(cut[0] + cut[1]) // 2]
        left = right[(cut[2] + cut[3]) // 2:]
    return total + left


@dataclasses.dataclass
class Chunk:
    """A piece of the merged transcript: its text tokens, start and end seconds (None without
    timestamps or when the audio ended first) and language code."""

    tokens: list[int]
    start: float | None = None
    end: float | None = None
    language: str | None = None


def merge(outputs: Sequence[Sequence[int]], strides: Sequence[tuple[float, float, float]],
          settings: WhisperSettings, timestamps: bool) -> list[Chunk]:
    """The merged chunks of each window's tokens and (length, left, right) strides in
    seconds."""
    begin, eos = settings.timestamp_begin, settings.eos
    languages = {int(i): token[2:-2] for token, i in settings.lang_to_id.items()}
    chunks: list[Chunk] = []
    chunk, pending = Chunk([]), []
    offset, skip = 0.0, False
    for tokens, (length, left, right) in zip(outputs, strides, strict=True):
        tokens = list(tokens)
        offset -= left
        first = begin + left / TIME_PRECISION if left else begin
        last = None
        if right:
            right_start = length - right
            for token in reversed(tokens):
                if token >= begin:
                    if last is not None and (token - begin) * TIME_PRECISION < right_start:
                        break
                    last = token
        current: list[int] = []
        top, earlier, penultimate = 0.0, 0.0, 0.0
        for i, token in enumerate(tokens):
            if eos <= token < begin:
                language = languages.get(token)
                if language is None:
                    continue
                if chunk.language and language != chunk.language and not timestamps:
                    chunk.tokens = lcs_merge([*pending, current])
                    chunks.append(chunk)
                    pending, current, chunk = [], [], Chunk([])
                chunk.language = language
            elif token >= begin:
                stamp = float((token - begin) * TIME_PRECISION)
                if stamp < top:  # a later decoding call of the same window
                    single = i >= 2 and not (tokens[i - 1] >= begin and tokens[i - 2] >= begin)
                    if single:
                        earlier += TIME_PRECISION * SEGMENT_POSITIONS
                    else:
                        top = penultimate
                        earlier += penultimate
                penultimate, top = top, stamp
                time = round((token - begin) * TIME_PRECISION + offset + earlier, 2)
                if last and token >= last:
                    skip = True
                elif skip or (pending and token < first):
                    skip = False
                elif chunk.start is None:
                    chunk.start = time
                elif time != chunk.start:
                    chunk.end = time
                    chunk.tokens = lcs_merge([*pending, current])
                    chunks.append(chunk)
                    pending, current, chunk = [], [], Chunk([], language=chunk.language)
            else:
                current.append(token)
        offset += length - right
        if current:
            pending.append(current)
        elif not any(pending):
            chunk, pending = Chunk([], language=chunk.language), []
    if pending:
        chunk.tokens = lcs_merge(pending)
        chunks.append(chunk)
    return chunks
