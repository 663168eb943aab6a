"""Task bundles judged on what their users see: a variant's outputs decoded by the task's own
Python reference (bundler.tasks: the kind's postprocess, classify.top_classes, audio.segments)
and compared with fp32's answers on the same held-out inputs, as budget keys judged by their 95 %
Wilson lower bound (bundler.variants.budget):

- labels  image- and text-classification: the top-1 label of each row is fp32's;
          token-classification: each token's (every row of the logits, padding included: each
          text is fed alone, so there is none);
- boxes   object-detection: each image's detections (the task's thresholds and NMS, in the
          input's pixels) are matched one to one: by fp32's score, each fp32 box takes the
          variant's unmatched box of the same class that overlaps it most, when their IoU is at
          least MATCH_IOU. Agreement = matched / (fp32's boxes + the variant's left unmatched),
          so extra boxes count against a variant as missing ones do; pooled over the images
          (judged) and per image (recorded);
- frames  audio-stream: each sample is one chunk (its state inputs as given); it is speech when
          the chunk's score reaches the task's score_threshold (the rule audio.segments applies),
          and the variant agrees when it decides the same.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from bundler.bundle.records import Task
from bundler.tasks.kinds.registry import kind_of
from bundler.variants.metrics import Agreement, Decode

MATCH_IOU = 0.5  # a variant's box stands for fp32's when they overlap at least this much

Runs = list[list[np.ndarray]]


def decoder(task: Task | None, generated: bool = False) -> Decode | None:
    """How `task`'s answers are compared (None: no task, or one judged on raw outputs only).
    On `generated` inputs answers vouch for nothing, so none are decoded: the agreement is of
    none (n = 0), which the budget refuses as unshowable (bundler.variants.budget)."""
    if task is None:
        return None
    kind = kind_of(task.kind)
    if kind.media == "image" and kind.postprocess is not None:
        key, decode = ("boxes" if kind.answers == "detections" else "labels"), _image
    elif kind.name in ("text-classification", "token-classification"):
        key, decode = "labels", _text_labels
    elif kind.name == "audio-stream":
        key, decode = "frames", _frames
    else:
        return None
    return partial(_none, key) if generated else partial(decode, task)


def _none(key: str, names: list[str], refs: Runs, cands: Runs) -> tuple[Agreement, ...]:
    return (Agreement(key, 0, 0),)


def _outputs(names: list[str], runs: Runs, output: str | None) -> list[np.ndarray]:
    index = names.index(output) if output in names else 0
    return [run[index] for run in runs]


def _image(task: Task, names: list[str], refs: Runs, cands: Runs) -> tuple[Agreement, ...]:
    """Labels or boxes: the samples are the shipped input (uint8 [1, H, W, 3]), so the picture
    is the input and its geometry the identity."""
    from bundler.tasks.image import Geometry

    kind = kind_of(task.kind)
    assert kind.postprocess is not None
    height, width = task.size or (0, 0)
    place = Geometry(1.0, 1.0, 0.0, 0.0, float(width), float(height))

    def answers(output: np.ndarray) -> list[dict[str, Any]]:
        assert kind.postprocess is not None
        return kind.postprocess(output, task, place, width, height, 1, None)

    pairs = [(answers(a), answers(b)) for a, b in zip(_outputs(names, refs, task.output),
                                                      _outputs(names, cands, task.output),
                                                      strict=True)]
    if kind.answers == "detections":
        return (box_agreement(pairs),)
    agreeing = sum(bool(a) and bool(b) and a[0]["index"] == b[0]["index"] for a, b in pairs)
    return (Agreement("labels", agreeing, len(pairs)),)


def _text_labels(task: Task, names: list[str], refs: Runs, cands: Runs) -> tuple[Agreement, ...]:
    from bundler.tasks.classify import top_classes

    agreeing = rows = 0
    for a, b in zip(_outputs(names, refs, task.output), _outputs(names, cands, task.output),
                    strict=True):
        a, b = np.asarray(a), np.asarray(b)
        for row_a, row_b in zip(a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1]),
                                strict=True):
            rows += 1
            agreeing += top_classes(row_a, task, 1)[0]["index"] == \
                top_classes(row_b, task, 1)[0]["index"]
    return (Agreement("labels", agreeing, rows),)


def matched_boxes(reference: list[dict[str, Any]], variant: list[dict[str, Any]],
                  min_iou: float = MATCH_IOU) -> tuple[int, int]:
    """(matched, counted) of one image's detections: see the module's docstring."""
    from bundler.tasks.detect import iou

    def box(found: dict[str, Any]) -> tuple[float, float, float, float]:
        b = found["box"]
        return b["x"], b["y"], b["x"] + b["width"], b["y"] + b["height"]

    unmatched = list(variant)
    matched = 0
    for want in sorted(reference, key=lambda found: -found["score"]):
        same = [(iou(box(want), box(got)), n) for n, got in enumerate(unmatched)
                if got["index"] == want["index"]]
        best = max(same, default=None, key=lambda pair: pair[0])
        if best is not None and best[0] >= min_iou:
            unmatched.pop(best[1])
            matched += 1
    return matched, len(reference) + len(unmatched)


def box_agreement(pairs: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]
                  ) -> Agreement:
    """The boxes of each image's (fp32's, the variant's) detections, matched and pooled."""
    counts = [matched_boxes(reference, variant) for reference, variant in pairs]
    return Agreement("boxes", sum(m for m, _ in counts), sum(n for _, n in counts),
                     tuple(m / n for m, n in counts if n))


def _frames(task: Task, names: list[str], refs: Runs, cands: Runs) -> tuple[Agreement, ...]:
    from bundler.tasks.audio import segments

    threshold = task.score_threshold if task.score_threshold is not None else 0.5

    def speech(outputs: list[np.ndarray]) -> list[bool]:
        chunks = [{"start": float(n), "end": float(n + 1),
                   "score": float(np.asarray(out, np.float64).reshape(-1)[0])}
                  for n, out in enumerate(outputs)]
        frames = [False] * len(chunks)
        for segment in segments(chunks, threshold):
            for n in range(int(segment["start"]), int(segment["end"])):
                frames[n] = True
        return frames

    ours = speech(_outputs(names, refs, task.output))
    theirs = speech(_outputs(names, cands, task.output))
    return (Agreement("frames", sum(a == b for a, b in zip(ours, theirs, strict=True)),
                      len(ours)),)
