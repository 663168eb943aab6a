"""How far a variant's outputs stray from the fp32 model's (native onnxruntime, CPU EP), and how
fast it runs natively."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from bundler.bundle.modelio import cpu_session
from bundler.bundle.records import Accuracy
from bundler.errors import QuantizeError, first_line

Feeds = list[dict[str, np.ndarray]]


def _rounded(value: float | None) -> float | None:
    if value is None or not np.isfinite(value):
        return None
    return float(f"{value:.6g}")


@dataclass(frozen=True)
class Metrics:
    """How a candidate's float outputs differ from the reference's, over all feeds.

    `nonfinite` counts output values that are NaN/Inf in the candidate but finite in the
    reference; the other fields are computed where both are finite.
    """

    max_abs: float
    mean_rel: float
    cosine: float
    top1_agreement: float | None
    nonfinite: int = 0

    def to_json(self) -> dict[str, float | int | None]:
        return {
            "max_abs": _rounded(self.max_abs),
            "mean_rel": _rounded(self.mean_rel),
            "cosine": _rounded(self.cosine),
            "top1_agreement": _rounded(self.top1_agreement),
            "nonfinite": self.nonfinite,
        }

    def accuracy(self, *, samples: int, data: str) -> Accuracy:
        """bundle.json's `accuracy` of a variant measured on `samples` inputs from `data`."""
        return Accuracy(**self.to_json(), samples=samples, data=data)


def run_all(
    model: Path,
    feeds: Feeds,
    level: ort.GraphOptimizationLevel = ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
) -> tuple[list[str], list[list[np.ndarray]]]:
    try:
        session = cpu_session(model, level=level)
        names = [output.name for output in session.get_outputs()]
        return names, [session.run(names, feed) for feed in feeds]
    except Exception as error:
        raise QuantizeError(
            f"{model.name} does not run in onnxruntime on the given feeds"
            f" ({first_line(error, typed=True)})"
        ) from None


def measure(reference: Path, candidate: Path, feeds: Feeds) -> Metrics:
    """Compare `candidate` with `reference` (CPU EP) on every feed, over all float outputs.

    max_abs: worst |a - b|. mean_rel: mean |a - b| relative to the output's range in the
    reference (max - min), worst over outputs. cosine: of each flattened output, worst over
    outputs. top1_agreement: share of rows with the same argmax over the last axis, over the
    outputs that look like class scores (float, rank 2, last dim >= 2), together with the share of
    integer output values that are equal (labels, indices); None if there are neither.
    """
    if not feeds:
        raise QuantizeError("measure needs at least one feed")
    names, ref_runs = run_all(reference, feeds)
    cand_names, cand_runs = run_all(candidate, feeds)
    if cand_names != names:
        raise QuantizeError(
            f"{candidate.name} has outputs {cand_names}, but {reference.name} has {names}"
        )
    max_abs, mean_rel, cosine = 0.0, 0.0, 1.0
    nonfinite, rows, agreeing = 0, 0, 0
    for index, name in enumerate(names):
        refs = [run[index] for run in ref_runs]
        cands = [run[index] for run in cand_runs]
        if not np.issubdtype(refs[0].dtype, np.floating):  # integers: the share equal counts
            rows += sum(r.size for r in refs)           # as agreement, like top-1
            agreeing += sum(int(np.count_nonzero(np.equal(r, c))) for r, c in
                            zip(refs, cands, strict=True) if r.shape == c.shape)
            continue
        for a, b in zip(refs, cands, strict=True):
            if a.shape != b.shape:
                raise QuantizeError(
                    f"output {name!r} of {candidate.name} has shape {b.shape}, not {a.shape}"
                )
        a = np.concatenate([r.ravel() for r in refs]).astype(np.float64)
        b = np.concatenate([c.ravel() for c in cands]).astype(np.float64)
        finite = np.isfinite(a)
        nonfinite += int(np.count_nonzero(finite & ~np.isfinite(b)))
        both = finite & np.isfinite(b)
        a, b = a[both], b[both]
        if a.size:
            error = np.abs(a - b)
            spread = float(a.max() - a.min()) or 1.0
            max_abs = max(max_abs, float(error.max()))
            mean_rel = max(mean_rel, float(error.mean()) / spread)
            norms = float(np.linalg.norm(a) * np.linalg.norm(b))
            if norms:
                cosine = min(cosine, float(a @ b) / norms)
            elif np.any(a) or np.any(b):
                cosine = 0.0
        if refs[0].ndim == 2 and refs[0].shape[-1] >= 2:
            for r, c in zip(refs, cands, strict=True):
                rows += r.shape[0]
                agreeing += int(np.count_nonzero(r.argmax(-1) == c.argmax(-1)))
    return Metrics(
        max_abs=max_abs,
        mean_rel=mean_rel,
        cosine=cosine,
        top1_agreement=agreeing / rows if rows else None,
        nonfinite=nonfinite,
    )


def native_latency_ms(model: Path, feeds: Feeds, threads: int = 1, repeats: int = 10) -> float:
    """Median wall time of one session.run (CPU EP, `threads` intra-op threads), after a warm-up."""
    if not feeds:
        raise QuantizeError("native_latency_ms needs at least one feed")
    try:
        session = cpu_session(model, threads=threads)
        session.run(None, feeds[0])
        times = []
        for index in range(repeats):
            feed = feeds[index % len(feeds)]
            start = time.perf_counter()
            session.run(None, feed)
            times.append(time.perf_counter() - start)
    except Exception as error:
        raise QuantizeError(
            f"{model.name} does not run in onnxruntime ({first_line(error, typed=True)})"
        ) from None
    return statistics.median(times) * 1000
