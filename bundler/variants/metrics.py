"""How far a variant's outputs stray from the fp32 model's (native onnxruntime, CPU EP), and how
fast it runs natively.

Besides the figures over all samples (the point estimates), `measure` keeps what auto judges its
budget by (bundler.variants.confidence): the rows top-1 agreement counts and each sample's cosine
and normalised error, so a bound, not an estimate, decides what ships."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from bundler.bundle.modelio import cpu_session
from bundler.bundle.records import Accuracy, Bound
from bundler.errors import QuantizeError, first_line
from bundler.variants.budget import DECODED_TERMS
from bundler.variants.confidence import (
    COSINE_QUANTILE,
    ERROR_QUANTILE,
    lower_quantile,
    upper_quantile,
    wilson_lower,
)

Feeds = list[dict[str, np.ndarray]]
# The runs of a decoder (bundler.variants.decoded): output names, then per feed the reference's
# and the candidate's outputs in that order.
Decode = Callable[[list[str], list[list[np.ndarray]], list[list[np.ndarray]]],
                  tuple["Agreement", ...]]


def _rounded(value: float | None) -> float | None:
    if value is None or not np.isfinite(value):
        return None
    return float(f"{value:.6g}")


@dataclass(frozen=True)
class Agreement:
    """A task's decoded answers agreeing with fp32's (bundler.variants.decoded): `agreeing` of
    `n` labels, boxes or frames (the budget key `key`), judged by their Wilson lower bound;
    `per_sample` each sample's share, where it has any (boxes: each image's)."""

    key: str  # "labels", "boxes" or "frames"
    agreeing: int
    n: int
    per_sample: tuple[float, ...] = ()


@dataclass(frozen=True)
class Metrics:
    """How a candidate's float outputs differ from the reference's, over all feeds.

    `nonfinite` counts output values that are NaN/Inf in the candidate but finite in the
    reference; the other fields are computed where both are finite. `rows` is how many rows (and
    integer values) top1_agreement is a share of, `per_sample` each feed's (cosine, mean_rel),
    worst over outputs, and `measured_on` which inputs the feeds were (bundle.json's `data`);
    Metrics made by hand without them are judged by their point estimates. A text-generation
    model's variant also has `tokens` (greedy-token agreement with fp32) and `perplexity` (its
    perplexity over fp32's on the check text), bundler.text.quality; a speech-recognition
    bundle's has `tokens` and `wer` of its transcripts (bundler.text.transcripts).
    """

    max_abs: float
    mean_rel: float
    cosine: float
    top1_agreement: float | None
    nonfinite: int = 0
    rows: int = 0
    per_sample: tuple[tuple[float, float], ...] = ()
    measured_on: str | None = None
    decoded: tuple[Agreement, ...] = ()  # a task bundle's answers (bundler.variants.decoded)
    tokens: float | None = None
    perplexity: float | None = None
    steps: int = 0  # greedy steps `tokens` is a share of
    wer: float | None = None  # a transcript's word error rate against fp32's (text/transcripts)

    def agreement(self, key: str) -> Agreement | None:
        return next((found for found in self.decoded if found.key == key), None)

    def _share(self, key: str) -> float | None:
        found = self.agreement(key)
        return found.agreeing / found.n if found is not None and found.n else None

    @property
    def label_agreement(self) -> float | None:
        return self._share("labels")

    @property
    def box_agreement(self) -> float | None:
        return self._share("boxes")

    @property
    def frame_agreement(self) -> float | None:
        return self._share("frames")

    def judged(self, key: str) -> tuple[int, float | None, float | None]:
        """(n, point estimate, the value the budget judges) of a budget key: top1 by its 95 %
        Wilson lower bound over `rows`; cosine and mean_rel by a quantile over the samples
        (bundler.variants.confidence); max_abs is a worst case already."""
        samples = len(self.per_sample)
        if (found := self.agreement(key)) is not None:  # none to agree on vouches for nothing
            return found.n, self._share(key), wilson_lower(found.agreeing, found.n)
        if key in DECODED_TERMS:  # not a task with such answers: n/a, as top1 without classes
            return 0, None, None
        if key == "top1":
            value = self.top1_agreement
            if value is None or not self.rows:
                return self.rows, value, value
            return self.rows, value, wilson_lower(round(value * self.rows), self.rows)
        if key == "cosine":
            return samples, self.cosine, lower_quantile(
                [s[0] for s in self.per_sample], COSINE_QUANTILE) if samples else self.cosine
        if key == "mean_rel":
            return samples, self.mean_rel, upper_quantile(
                [s[1] for s in self.per_sample], ERROR_QUANTILE) if samples else self.mean_rel
        if key in ("tokens", "perplexity", "wer"):  # counted exactly on fixed checks: as measured
            value = getattr(self, key)
            return (self.steps if key == "tokens" else samples), value, value
        return samples, self.max_abs, self.max_abs

    def bounds(self) -> dict[str, Bound]:
        """bundle.json's `accuracy.bounds`: n, estimate and bound of each judged metric."""
        keys = (["top1"] if self.top1_agreement is not None else []) + ["cosine", "mean_rel"]
        record = {}
        for key in keys + [found.key for found in self.decoded]:
            n, estimate, bound = self.judged(key)
            record[key] = Bound(n, _rounded(estimate), _rounded(bound),
                                _METHODS.get(key, _METHODS["top1"]))
        for found in self.decoded:  # recorded, not judged: how the shares spread over samples
            if found.per_sample:
                record[f"{found.key}_per_sample"] = Bound(
                    len(found.per_sample), _rounded(float(np.mean(found.per_sample))),
                    _rounded(lower_quantile(found.per_sample, COSINE_QUANTILE)), _METHODS["cosine"])
        return record

    def accuracy(self, *, samples: int, data: str) -> Accuracy:
        """bundle.json's `accuracy` of a variant measured on `samples` inputs from `data`."""
        return Accuracy(max_abs=_rounded(self.max_abs), mean_rel=_rounded(self.mean_rel),
                        cosine=_rounded(self.cosine),
                        top1_agreement=_rounded(self.top1_agreement), nonfinite=self.nonfinite,
                        samples=samples, data=data,
                        bounds=self.bounds() if self.per_sample else None,
                        tokens_agreement=_rounded(self.tokens),
                        perplexity_ratio=_rounded(self.perplexity),
                        word_error_rate=_rounded(self.wer))


_METHODS = {"top1": "wilson-95-lower", "cosine": f"p{round(COSINE_QUANTILE * 100)}",
            "mean_rel": f"p{round(ERROR_QUANTILE * 100)}"}


def run_all(
    model: Path,
    feeds: Feeds,
    level: ort.GraphOptimizationLevel = ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    config: Mapping[str, str] | None = None,
) -> tuple[list[str], list[list[np.ndarray]]]:
    try:
        session = cpu_session(model, level=level, config=config)
        names = [output.name for output in session.get_outputs()]
        return names, [session.run(names, feed) for feed in feeds]
    except Exception as error:
        raise QuantizeError(
            f"{model.name} does not run in onnxruntime on the given feeds"
            f" ({first_line(error, typed=True)})"
        ) from None


def _compare(refs: list[np.ndarray], cands: list[np.ndarray]) -> tuple[float, float, float, int]:
    """(max_abs, mean_rel, cosine, nonfinite) of float outputs `cands` against `refs`, flattened
    together, where both are finite."""
    a = np.concatenate([r.ravel() for r in refs]).astype(np.float64)
    b = np.concatenate([c.ravel() for c in cands]).astype(np.float64)
    finite = np.isfinite(a)
    nonfinite = int(np.count_nonzero(finite & ~np.isfinite(b)))
    both = finite & np.isfinite(b)
    a, b = a[both], b[both]
    if not a.size:
        return 0.0, 0.0, 1.0, nonfinite
    error = np.abs(a - b)
    spread = float(a.max() - a.min()) or 1.0
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    cosine = float(a @ b) / norms if norms else 0.0 if np.any(a) or np.any(b) else 1.0
    return float(error.max()), float(error.mean()) / spread, cosine, nonfinite


def measure(reference: Path, candidate: Path, feeds: Feeds, decode: Decode | None = None,
            config: Mapping[str, str] | None = None) -> Metrics:
    """Compare `candidate` with `reference` (CPU EP) on every feed, over all float outputs.

    max_abs: worst |a - b|. mean_rel: mean |a - b| relative to the output's range in the
    reference (max - min), worst over outputs. cosine: of each flattened output, worst over
    outputs. top1_agreement: share of rows with the same argmax over the last axis, over the
    outputs that look like class scores (float, rank 2, last dim >= 2), together with the share of
    integer output values that are equal (labels, indices); None if there are neither. The same
    cosine and mean_rel of each feed alone go to `per_sample`; `decode` (a task bundle's,
    bundler.variants.decoded) compares the answers the outputs decode to. `config`: the
    candidate's session config entries (its record's `session_config`).
    """
    if not feeds:
        raise QuantizeError("measure needs at least one feed")
    names, ref_runs = run_all(reference, feeds)
    cand_names, cand_runs = run_all(candidate, feeds, config=config)
    if cand_names != names:
        raise QuantizeError(
            f"{candidate.name} has outputs {cand_names}, but {reference.name} has {names}"
        )
    return compare_runs(names, ref_runs, cand_runs, candidate.name, decode)


def compare_runs(names: list[str], ref_runs: list[list[np.ndarray]],
                 cand_runs: list[list[np.ndarray]], candidate: str,
                 decode: Decode | None = None) -> Metrics:
    """The Metrics of `measure` from the outputs `names` of each run (one run per sample)."""
    feeds = ref_runs
    max_abs, mean_rel, cosine = 0.0, 0.0, 1.0
    nonfinite, rows, agreeing = 0, 0, 0
    per_sample = [(1.0, 0.0)] * len(feeds)
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
                    f"output {name!r} of {candidate} has shape {b.shape}, not {a.shape}"
                )
        worst, rel, cos, bad = _compare(refs, cands)
        max_abs, mean_rel, cosine = max(max_abs, worst), max(mean_rel, rel), min(cosine, cos)
        nonfinite += bad
        for sample, (r, c) in enumerate(zip(refs, cands, strict=True)):
            _, rel, cos, _ = _compare([r], [c])
            per_sample[sample] = (min(per_sample[sample][0], cos), max(per_sample[sample][1], rel))
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
        rows=rows,
        per_sample=tuple(per_sample),
        decoded=decode(names, ref_runs, cand_runs) if decode is not None else (),
    )


def native_latency_ms(model: Path, feeds: Feeds, threads: int = 1, repeats: int = 10,
                      config: Mapping[str, str] | None = None) -> float:
    """Median wall time of one session.run (CPU EP, `threads` intra-op threads, `config`
    entries), after a warm-up."""
    if not feeds:
        raise QuantizeError("native_latency_ms needs at least one feed")
    try:
        session = cpu_session(model, threads=threads, config=config)
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
