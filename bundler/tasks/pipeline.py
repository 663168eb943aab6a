"""A task run end to end natively, from pixels or samples to labels, boxes or chunk scores: the
reference `bundle run --image/--audio` prints and `bundle test` compares the browser with."""

from __future__ import annotations

from typing import Any

import numpy as np

from bundler.bundle.manifest import Task
from bundler.errors import ConfigError
from bundler.modelio import TensorSpec
from bundler.tasks.audio import AudioStream, Run, resample, segments
from bundler.tasks.classify import top_classes
from bundler.tasks.detect import detections
from bundler.tasks.image import fit_image


def run_image(run: Run, task: Task, pixels: np.ndarray, *, top_k: int | None = None,
              threshold: float | None = None) -> dict[str, Any]:
    """RGB uint8 [h, w, 3] -> {"classes": [...]} or {"detections": [...]}, with the geometry."""
    if task.kind not in ("image-classification", "object-detection"):
        raise ConfigError(f"--image: this bundle's task is {task.kind}, not an image task")
    image, place = fit_image(pixels, task)
    output = run({task.input: image})[task.output]
    height, width = pixels.shape[:2]
    result: dict[str, Any] = {"width": width, "height": height, "geometry": place.to_json()}
    if task.kind == "image-classification":
        result["classes"] = top_classes(output, task, top_k)
    else:
        result["detections"] = detections(output, task, place, width, height, threshold)
    return result


def run_audio(run: Run, task: Task, inputs: list[TensorSpec], samples: np.ndarray,
              sample_rate: int) -> dict[str, Any]:
    """All the samples pushed at once, then flushed: {chunks, segments}."""
    if task.kind != "audio-stream":
        raise ConfigError(f"--audio: this bundle's task is {task.kind}, not audio-stream")
    stream = AudioStream(run, task, inputs)
    chunks = stream.push(samples, sample_rate) + stream.flush()
    threshold = task.score_threshold if task.score_threshold is not None else 0.5
    return {"sample_rate": task.sample_rate, "chunk_size": task.chunk_size, "chunks": chunks,
            "segments": segments(chunks, threshold),
            "samples": int(resample(samples, sample_rate, task.sample_rate or 16000).size)}
