"""Streaming audio (the spec; web/tasks/audio.mjs is its twin): samples at any rate are resampled
linearly to the task's sample_rate (output sample i reads the input at i * from / to: the two
neighbours weighted, in float64), cut into chunk_size chunks, and each chunk runs, after the last
context_size samples before it (zeros at the start), with the state inputs set to the previous
chunk's state outputs (zeros at the start and after reset). A chunk's
result is {index, start, end (seconds), score (the output's first value), values}; chunks whose
score is >= score_threshold make up the segments (runs of such chunks, merged). flush() runs the
last partial chunk, padded with zeros."""

from __future__ import annotations

import wave
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


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """A PCM .wav file (8/16/32-bit, any channels: averaged) as float32 in [-1, 1] and its rate."""
    try:
        with wave.open(str(path), "rb") as file:
            width, channels, rate = file.getsampwidth(), file.getnchannels(), file.getframerate()
            frames = file.readframes(file.getnframes())
    except FileNotFoundError:
        raise ConfigError(f"--audio {path}: no such file") from None
    except (wave.Error, EOFError, OSError) as error:
        raise ConfigError(f"--audio {path}: not a PCM .wav file ({error})") from None
    if width == 1:
        data = (np.frombuffer(frames, np.uint8).astype(np.float32) - 128) / 128
    elif width in (2, 4):
        kind = np.int16 if width == 2 else np.int32
        data = np.frombuffer(frames, kind).astype(np.float32) / float(np.iinfo(kind).max + 1)
    else:
        raise ConfigError(f"--audio {path}: {8 * width}-bit samples; give 8, 16 or 32-bit PCM")
    return data.reshape(-1, channels).mean(axis=1).astype(np.float32), rate
