"""The bounds auto judges its budget by, the calibration/validation split, and a budget judged by
bounds rather than point estimates."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from bundler.variants.budget import DEFAULT_BUDGET, parse_budget
from bundler.variants.confidence import (
    lower_quantile,
    rows_needed,
    upper_quantile,
    wilson_lower,
)
from bundler.variants.metrics import Metrics, measure
from bundler.verify.samples import MIN_SPLIT, split_samples
from tests import quant_models


@pytest.mark.parametrize(("agreeing", "n", "expected"), [
    (5, 10, 0.236593),     # the textbook Wilson interval of 5/10: 0.2366-0.7634
    (10, 10, 0.722467),    # n / (n + 1.96^2) when all agree
    (199, 200, 0.972226),  # the case: 199 of 200 is 0.972-0.999, not 0.995
    (0, 10, 0.0),
    (0, 0, 0.0),
])
def test_wilson_lower_bound_matches_known_values(agreeing: int, n: int, expected: float) -> None:
    assert wilson_lower(agreeing, n) == pytest.approx(expected, abs=5e-7)


def test_rows_needed_is_the_first_count_whose_bound_reaches_the_target() -> None:
    for target, rows in ((0.99, 381), (0.98, 189), (0.95, 73)):
        assert rows_needed(target) == rows
        assert wilson_lower(rows, rows) >= target > wilson_lower(rows - 1, rows - 1)
    assert rows_needed(1.0) is None


def test_quantiles_take_the_conservative_order_statistic() -> None:
    values = [float(v) for v in range(1, 21)]  # 1 .. 20
    assert lower_quantile(values, 0.05) == 1.0   # 0.95 of the way to the 2nd: stays at the 1st
    assert upper_quantile(values, 0.95) == 20.0
    assert lower_quantile(values[::-1], 0.5) == 10.0 and upper_quantile(values, 0.5) == 11.0


def test_the_split_is_deterministic_disjoint_and_keeps_a_minimum_on_each_side() -> None:
    samples = [{"x": np.full((1, 2), i, np.float32)} for i in range(40)]
    calibration, validation = split_samples(samples)
    again = split_samples(samples)
    assert again is not None and [int(f["x"][0, 0]) for f in again[1]] == \
        [int(f["x"][0, 0]) for f in validation]
    seen_c = [int(f["x"][0, 0]) for f in calibration]
    seen_v = [int(f["x"][0, 0]) for f in validation]
    assert not set(seen_c) & set(seen_v) and sorted(seen_c + seen_v) == list(range(40))
    assert len(validation) == 20 and seen_v == sorted(seen_v)  # half, in the order given
    assert seen_v != list(range(20)) and seen_v != list(range(0, 40, 2))  # shuffled, not sliced
    low = split_samples(samples[:2 * MIN_SPLIT])
    assert low is not None and len(low[0]) == len(low[1]) == MIN_SPLIT
    assert split_samples(samples[:2 * MIN_SPLIT - 1]) is None


@pytest.fixture(scope="module")
def int8_on_few(tmp_path_factory: pytest.TempPathFactory) -> Metrics:
    """A real int8 MLP measured on 30 held-out samples: every row agrees with fp32."""
    from bundler.variants.registry import make_variant

    folder = tmp_path_factory.mktemp("bounds")
    model = quant_models.mlp_classifier(folder / "mlp.onnx")
    made = make_variant("int8", model, folder / "int8.onnx", calibration=None)
    feeds = [{"x": x[None]} for x in quant_models.mixture_samples(30, seed=3)[0]]
    return dataclasses.replace(measure(model, made.path, feeds), measured_on="calibration-split")


def test_a_point_estimate_within_budget_is_not_enough_when_its_bound_is_not(
        int8_on_few: Metrics) -> None:
    metrics = int8_on_few
    assert metrics.top1_agreement == 1.0 and metrics.rows == 30
    assert DEFAULT_BUDGET.accepts(metrics, exact=True)  # the point estimates keep the budget
    n, estimate, bound = metrics.judged("top1")
    assert (n, estimate) == (30, 1.0) and bound == pytest.approx(wilson_lower(30, 30))
    assert not DEFAULT_BUDGET.accepts(metrics)
    assert DEFAULT_BUDGET.explain(metrics) == (
        "top1 0.8865 (95% lower bound of 30 rows; estimate 1) is not >= 0.99")
    assert DEFAULT_BUDGET.shortfall(metrics) == (
        "30 held-out samples (calibration-split) cannot show top1>=0.99: even if all agree, its"
        " 95% lower bound is 0.886; it takes at least 381 samples (pass --validation)")
    # cosine is judged by its 5th percentile over the samples, which is below the pooled figure
    _, pooled, p5 = metrics.judged("cosine")
    # of 30 samples, the 2nd least (floor(0.05 * 29) = 1)
    assert p5 < pooled and p5 == sorted(s[0] for s in metrics.per_sample)[1]
    between = parse_budget(f"cosine>={(p5 + pooled) / 2!r}")
    assert between.accepts(metrics, exact=True) and not between.accepts(metrics)


def test_inputs_that_cannot_vouch_for_a_quantized_variant(int8_on_few: Metrics) -> None:
    generated = dataclasses.replace(int8_on_few, measured_on="generated", rows=10_000)
    assert DEFAULT_BUDGET.failures(generated) == ["top1 cannot be shown on generated inputs"]
    assert parse_budget("cosine>=0.99").accepts(generated)  # cosine may be shown on them
    assert DEFAULT_BUDGET.shortfall(generated) == (
        "generated inputs cannot show top1; pass --validation with real inputs (at least 381"
        " samples)")
    in_sample = dataclasses.replace(int8_on_few, measured_on="calibration")
    assert "measured on its own calibration inputs" in DEFAULT_BUDGET.explain(in_sample)
    assert DEFAULT_BUDGET.accepts(in_sample, exact=True)  # fp32 is judged by its estimates


def test_bundle_json_records_n_estimate_and_bound(int8_on_few: Metrics, tmp_path: Path) -> None:
    record = int8_on_few.accuracy(samples=30, data="calibration-split")
    assert record.data == "calibration-split" and record.bounds is not None
    top1 = record.bounds["top1"]
    assert (top1.n, top1.estimate, top1.method) == (30, 1.0, "wilson-95-lower")
    assert top1.bound == pytest.approx(0.886487, abs=1e-6)  # 6 significant digits
    assert record.bounds["cosine"].method == "p5" and record.bounds["mean_rel"].method == "p95"
    assert record.bounds["cosine"].n == 30
