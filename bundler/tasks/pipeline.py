"""A task run end to end natively, from pixels or samples to labels, boxes or chunk scores: the
reference `bundle run --image/--audio` prints and `bundle test` compares the browser with."""

from __future__ import annotations

from typing import Any

import numpy as np

from bundler.bundle.manifest import Task
from bundler.bundle.modelio import TensorSpec
from bundler.errors import ConfigError
from bundler.tasks.audio import AudioStream, Run, resample, segments
from bundler.tasks.image import fit_image
from bundler.tasks.kinds.registry import kind_of, kinds_fed


def run_image(run: Run, task: Task, pixels: np.ndarray, *, top_k: int | None = None,
              threshold: float | None = None) -> dict[str, Any]:
    """RGB uint8 [h, w, 3] -> the answer under the kind's `answers` key ({"classes": [...]},
    {"detections": [...]}), with the geometry."""
    kind = kind_of(task.kind)
    if kind.media != "image" or kind.answers is None or kind.postprocess is None:
        raise ConfigError(f"--image: this bundle's task is {task.kind}, not an image task")
    image, place = fit_image(pixels, task)
    output = run({task.input: image})[task.output]
    height, width = pixels.shape[:2]
    result: dict[str, Any] = {"width": width, "height": height, "geometry": place.to_json()}
    result[kind.answers] = kind.postprocess(output, task, place, width, height, top_k, threshold)
    return result


def run_audio(run: Run, task: Task, inputs: list[TensorSpec], samples: np.ndarray,
              sample_rate: int) -> dict[str, Any]:
    """All the samples pushed at once, then flushed: {chunks, segments}."""
    if kind_of(task.kind).method != "stream":  # transcribe(): bundler.text.whisper_bundle
        audio_kinds = " or ".join(kind.name for kind in kinds_fed("audio")
                                  if kind.method == "stream")
        raise ConfigError(f"--audio: this bundle's task is {task.kind}, not {audio_kinds}")
    stream = AudioStream(run, task, inputs)
    chunks = stream.push(samples, sample_rate) + stream.flush()
    threshold = task.score_threshold if task.score_threshold is not None else 0.5
    return {"sample_rate": task.sample_rate, "chunk_size": task.chunk_size, "chunks": chunks,
            "segments": segments(chunks, threshold),
            "samples": int(resample(samples, sample_rate, task.sample_rate or 16000).size)}
