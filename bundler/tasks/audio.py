"""Streaming audio (the spec; web/tasks/audio.mjs is its twin): samples at any rate are resampled
linearly to the task's sample_rate (output sample i reads the input at i * from / to: the two
neighbours weighted, in float64), cut into chunk_size chunks, and each chunk runs, after the last
context_size samples before it (zeros at the start), with the state inputs set to the previous
chunk's state outputs (zeros at the start and after reset). A chunk's
result is {index, start, end (seconds), score (the output's first value), values}; chunks whose
score is >= score_threshold make up the segments (runs of such chunks, merged). flush() runs the
last partial chunk, padded with zeros."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bundler.bundle.manifest import Task
from bundler.bundle.modelio import TensorSpec
from bundler.errors import ConfigError

Run = Callable[[dict[str, np.ndarray]], Mapping[str, np.ndarray]]


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    samples = np.asarray(samples, np.float32)
    if from_rate == to_rate or samples.size == 0:
        return samples
    count = int(samples.size * to_rate // from_rate)
    position = np.arange(count, dtype=np.float64) * from_rate / to_rate
    index = np.floor(position).astype(np.int64)
    fraction = position - index
    following = np.minimum(index + 1, samples.size - 1)
    source = samples.astype(np.float64)
    return (source[index] * (1 - fraction) + source[following] * fraction).astype(np.float32)


class AudioStream:
    """model.stream()'s Python twin: push samples, get the results of the chunks completed."""

    def __init__(self, run: Run, task: Task, inputs: list[TensorSpec]) -> None:
        self._run, self._task = run, task
        self._shapes = {spec.name: tuple(d if isinstance(d, int) else 1 for d in spec.shape or ())
                        for spec in inputs}
        self._types = {spec.name: spec.type for spec in inputs}
        self.reset()

    def reset(self) -> None:
        self._pending = np.zeros(0, np.float32)
        self._context = np.zeros(self._task.context_size or 0, np.float32)
        self._index = 0
        self._state = {name: np.zeros(self._shapes[name], self._types[name])
                       for name in (self._task.state or {})}

    def push(self, samples: np.ndarray, sample_rate: int) -> list[dict[str, Any]]:
        rate = self._task.sample_rate or 16000
        self._pending = np.concatenate([self._pending, resample(samples, sample_rate, rate)])
        results = []
        chunk = self._task.chunk_size or 512
        while self._pending.size >= chunk:
            results.append(self._chunk(self._pending[:chunk]))
            self._pending = self._pending[chunk:]
        return results

    def flush(self) -> list[dict[str, Any]]:
        if self._pending.size == 0:
            return []
        chunk = np.zeros(self._task.chunk_size or 512, np.float32)
        chunk[:self._pending.size] = self._pending
        self._pending = np.zeros(0, np.float32)
        return [self._chunk(chunk)]

    def _chunk(self, samples: np.ndarray) -> dict[str, Any]:
        task = self._task
        given = np.concatenate([self._context, samples])
        if self._context.size:
            self._context = given[-self._context.size:]
        feeds = {task.input: given.reshape(1, -1) if len(self._shapes[task.input]) == 2
                 else given, **self._state}
        if task.sample_rate_input:
            feeds[task.sample_rate_input] = np.full(self._shapes[task.sample_rate_input],
                                                    task.sample_rate, self._types[
                                                        task.sample_rate_input])
        outputs = self._run(feeds)
        self._state = {name: np.asarray(outputs[out]) for name, out in (task.state or {}).items()}
        values = np.asarray(outputs[task.output], np.float64).reshape(-1)
        chunk, rate = task.chunk_size or 512, task.sample_rate or 16000
        result = {"index": self._index, "start": self._index * chunk / rate,
                  "end": (self._index + 1) * chunk / rate,
                  "score": float(values[0]) if values.size else 0.0,
                  "values": values.tolist()}
        self._index += 1
        return result


def segments(chunks: list[dict[str, Any]], threshold: float) -> list[dict[str, float]]:
    """Runs of chunks scoring >= threshold, as {start, end} in seconds."""
    found: list[dict[str, float]] = []
    for chunk in chunks:
        if chunk["score"] < threshold:
            continue
        if found and found[-1]["end"] == chunk["start"]:
            found[-1]["end"] = chunk["end"]
        else:
            found.append({"start": chunk["start"], "end": chunk["end"]})
    return found


# WAV format tags: integer PCM, IEEE float, and the extensible header whose sub-format (the
# first two bytes of its GUID) is one of those two (sox and most recorders past 16 bits)
PCM, IEEE_FLOAT, EXTENSIBLE = 1, 3, 0xFFFE


def _wav_chunks(data: bytes) -> dict[bytes, bytes]:
    """A RIFF/WAVE file's chunks by id (the first of each); a chunk whose size runs past the
    end (a stream's header written before its length was known) is cut there."""
    chunks: dict[bytes, bytes] = {}
    at = 12
    while at + 8 <= len(data):
        size = int.from_bytes(data[at + 4:at + 8], "little")
        chunks.setdefault(data[at:at + 4], data[at + 8:at + 8 + size])
        at += 8 + size + (size & 1)
    return chunks


def _decoded(raw: bytes, tag: int, width: int) -> np.ndarray | None:
    """The samples of a data chunk in [-1, 1]; None for a layout not read here."""
    if tag == IEEE_FLOAT and width in (4, 8):
        return np.frombuffer(raw, "<f4" if width == 4 else "<f8").astype(np.float32)
    if tag != PCM:
        return None
    if width == 1:
        return (np.frombuffer(raw, np.uint8).astype(np.float32) - 128) / 128
    if width == 3:  # little-endian 24-bit: widened to the top of an int32, sign kept
        bytes3 = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        value = (bytes3[:, 0] << 8) | (bytes3[:, 1] << 16) | (bytes3[:, 2] << 24)
        return (value.astype(np.float64) / 2**31).astype(np.float32)
    if width in (2, 4):
        kind = np.dtype("<i2" if width == 2 else "<i4")
        return (np.frombuffer(raw, kind).astype(np.float64)
                / float(np.iinfo(kind).max + 1)).astype(np.float32)
    return None


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """A .wav file as float32 in [-1, 1] and its rate: integer PCM of 8, 16, 24 or 32 bits, or
    32/64-bit float, plain or in the extensible header; any channels, averaged."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"--audio {path}: no such file") from None
    except OSError as error:
        raise ConfigError(f"--audio {path}: not readable ({error.strerror})") from None
    chunks = _wav_chunks(data) if data[:4] == b"RIFF" and data[8:12] == b"WAVE" else {}
    form, raw = chunks.get(b"fmt "), chunks.get(b"data")
    if form is None or raw is None or len(form) < 16:
        raise ConfigError(f"--audio {path}: not a .wav file (no RIFF/WAVE header with fmt and"
                          " data chunks); convert it, e.g. ffmpeg -i FILE speech.wav")
    tag, channels = int.from_bytes(form[0:2], "little"), int.from_bytes(form[2:4], "little")
    rate, block = int.from_bytes(form[4:8], "little"), int.from_bytes(form[12:14], "little")
    if tag == EXTENSIBLE and len(form) >= 26:
        tag = int.from_bytes(form[24:26], "little")
    width = block // channels if channels else 0
    samples = _decoded(raw[:len(raw) - len(raw) % block] if block else b"", tag, width)
    if samples is None or rate <= 0:
        kind = {PCM: "integer", IEEE_FLOAT: "float"}.get(tag, f"format {tag:#x}")
        raise ConfigError(f"--audio {path}: {8 * width}-bit {kind} samples; give PCM of 8, 16,"
                          " 24 or 32 bits or 32/64-bit float (e.g. ffmpeg -i FILE speech.wav)")
    return samples.reshape(-1, channels).mean(axis=1).astype(np.float32), rate
