"""auto's choice: the objective, the browser's verdict and the record for bundle.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundler.bundle.manifest import Selection, Variant
from bundler.errors import QuantizeError
from bundler.perf.speed import speed_record
from bundler.variants.budget import parse_budget
from bundler.variants.make import MadeVariant
from bundler.variants.metrics import Metrics
from bundler.variants.select import Candidate, browser_passed, choose, select
from bundler.verify.conformance import ConformanceReport, EPCheck

PERFECT = Metrics(0.0, 0.0, 1.0, 1.0)
CLOSE = Metrics(0.01, 0.001, 0.9995, 1.0)
LOSSY = Metrics(0.5, 0.05, 0.95, 0.8)


def test_choose_auto() -> None:
    results = [
        Candidate("fp32", 1000, PERFECT, True),
        Candidate("fp16", 500, CLOSE, True),
        Candidate("int8-weights", 270, CLOSE, True),
        Candidate("int8", 260, CLOSE, False),  # failed in the browser
        Candidate("int4", 160, LOSSY, True),  # outside the budget
    ]
    assert choose(results) == "int8-weights"
    assert choose(results, parse_budget("cosine>=0.9")) == "int4"
    assert choose([Candidate("fp32", 1000, LOSSY, True), Candidate("fp16", 500, LOSSY, True)]) \
        == "fp32"
    assert choose([Candidate("fp32", 1000, PERFECT, False),
                   Candidate("fp16", 500, LOSSY, True)]) is None


def test_the_objective_ranks_the_fitting_candidates() -> None:
    results = [Candidate("fp32", 1000, PERFECT, True), Candidate("fp16", 500, CLOSE, True),
               Candidate("int8", 260, LOSSY, True)]
    assert choose(results, objective="size") == "fp16"
    # equal sizes: the kind listed first in VARIANT_KINDS
    assert choose([Candidate("int8", 500, CLOSE, True), Candidate("fp16", 500, CLOSE, True)]) \
        == "fp16"


def _timed(name: str, size: int, ms: float | None, ok: bool = True) -> Candidate:
    return Candidate(name, size, CLOSE, ok, ms)


def test_speed_ships_the_fastest_and_a_tie_goes_to_the_smaller() -> None:
    results = [_timed("fp32", 1000, 70.0), _timed("int8-weights", 270, 67.0),
               _timed("int8", 280, 40.0), _timed("int8-static", 290, 33.0)]
    assert choose(results, objective="speed") == "int8-static"
    assert choose(results, objective="size") == "int8-weights"
    # within SPEED_TIE (5 %) of the fastest: a tie, and the smaller file wins
    tied = [_timed("int8", 280, 40.0), _timed("int8-static", 290, 39.0)]
    assert choose(tied, objective="speed") == "int8"
    assert choose([*tied, _timed("int4", 100, 38.0, ok=False)], objective="speed") == "int8"


def test_balanced_trades_a_little_speed_for_much_smaller_files() -> None:
    fastest = _timed("fp16", 1000, 40.0)
    # 30 % smaller and at most 10 % slower: the smaller one ships
    assert choose([fastest, _timed("int8", 700, 44.0)]) == "int8"
    # smaller, but more than 10 % slower: the fastest ships
    assert choose([fastest, _timed("int8", 700, 44.5)]) == "fp16"
    # not quite 30 % smaller: the fastest ships
    assert choose([fastest, _timed("int8", 701, 43.0)]) == "fp16"
    # among several that qualify, the smallest
    assert choose([fastest, _timed("int8", 600, 43.0), _timed("int4", 300, 43.9)]) == "int4"
    # no speeds (no browser): the smallest, as the size objective
    assert choose([_timed("fp32", 1000, None), _timed("int8", 300, None)]) == "int8"


def test_select_per_ep_records_speeds_and_the_objective() -> None:
    variants = [_variant("fp32", 1000, PERFECT), _variant("int8-weights", 270, CLOSE),
                _variant("int8-static", 290, CLOSE)]
    speeds = {"wasm": {"fp32": 70.0, "int8-weights": 67.0, "int8-static": 33.0}}
    choice = select(variants, None, None, "balanced", speeds, ("webgpu", "wasm"),
                    speed_record("test"))
    # WebGPU is not timed: it gets the WASM choice, so one name (not a map) is the default
    assert choice.chosen == "int8-static"
    assert choice.dropped == ["fp32", "int8-weights"]
    assert choice.selection.objective == "balanced"
    assert choice.selection.speed == speed_record("test")
    assert [c.wasm_ms for c in choice.selection.candidates] == [70.0, 67.0, 33.0]
    both = select(variants, None, None, "speed",
                  {"wasm": {"fp32": 70.0, "int8-static": 33.0},
                   "webgpu": {"fp32": 5.0, "int8-static": 9.0}}, ("webgpu", "wasm"))
    assert both.chosen == {"webgpu": "fp32", "wasm": "int8-static"}
    assert both.dropped == ["int8-weights"] and both.selection.chosen == "int8-static"


def _variant(name: str, size: int, metrics: Metrics | None) -> MadeVariant:
    return MadeVariant(Variant(name, name, f"models/{name}.onnx", size, "0" * 64, 1.0, None, {},
                               [], None), metrics, latency_ms=None)


def _check(ep: str, variant: str, error: str | None = None) -> EPCheck:
    return EPCheck(label=ep, variant=variant, requested=[ep], error=error)


def test_browser_passed_counts_only_the_eps_where_fp32_passed() -> None:
    report = ConformanceReport(Path("dist"), checks=[
        _check("webgpu", "fp32", "no ai.onnx.ml kernels"), _check("wasm", "fp32"),
        _check("webgpu", "int8", "no ai.onnx.ml kernels"), _check("wasm", "int8"),
        _check("webgpu", "fp16"), _check("wasm", "fp16", "worst abs error 0.3"),
    ])
    assert browser_passed(report, ["fp32", "int8", "fp16"]) == {
        "fp32": True, "int8": True, "fp16": False}
    assert browser_passed(None, ["fp32", "int8"]) == {"fp32": True, "int8": True}


def test_browser_passed_does_not_hold_a_missing_adapter_feature_against_a_variant() -> None:
    missing = _check("webgpu", "fp16", "webgpu skipped: variant 'fp16' needs the WebGPU feature"
                     " shader-f16, which this adapter lacks (asked for by name)")
    checks = [_check("webgpu", "fp32"), _check("wasm", "fp32"), missing, _check("wasm", "fp16")]
    report = ConformanceReport(Path("dist"), checks=checks)
    assert browser_passed(report, ["fp32", "fp16"]) == {"fp32": True, "fp16": False}
    missing.missing_feature = True  # as conformance records bundle.mjs's feature-missing code
    assert browser_passed(report, ["fp32", "fp16"]) == {"fp32": True, "fp16": True}


def test_select_ships_the_choice_and_records_every_candidate() -> None:
    variants = [_variant("fp32", 1000, PERFECT), _variant("int8-weights", 270, CLOSE),
                _variant("int4", 160, LOSSY)]
    report = ConformanceReport(Path("dist"), checks=[
        _check(ep, name) for ep in ("webgpu", "wasm") for name in ("fp32", "int8-weights", "int4")
    ])

    choice = select(variants, report, "cosine>=0.999")

    assert (choice.chosen, choice.dropped) == ("int8-weights", ["fp32", "int4"])
    selection = choice.selection
    assert isinstance(selection, Selection)
    assert (selection.mode, selection.budget, selection.chosen) == (
        "auto", "cosine>=0.999", "int8-weights")
    assert [(c.name, c.bytes, c.within_budget, c.browser_verified, c.chosen)
            for c in selection.candidates] == [
        ("fp32", 1000, True, True, False),
        ("int8-weights", 270, True, True, True),
        ("int4", 160, False, True, False),
    ]
    assert selection.candidates[2].budget == "cosine 0.95 is not >= 0.999"
    assert select(variants, None, None).selection.budget == "cosine>=0.999,top1>=0.99"


def test_select_without_a_fitting_candidate_is_one_clear_error() -> None:
    with pytest.raises(QuantizeError, match=r"^auto: no variant is within the budget cosine>=1"
                                            r" and passed the browser check \(fp32 included\)"):
        select([_variant("fp16", 500, CLOSE)], None, "cosine>=1")


def test_a_rejected_choice_gives_way_to_the_next_on_its_ep_only() -> None:
    """The build's final check rejected int8-static on WASM: WASM ships the next of its ranking
    (int8-weights, the smaller of the rest), WebGPU, untimed and not rejected, keeps int8-static;
    rejected everywhere but fp32 on both, fp32 ships; fp32 rejected too, nothing is left."""
    variants = [_variant("fp32", 1000, PERFECT), _variant("int8-weights", 270, CLOSE),
                _variant("int8-static", 290, CLOSE)]
    speeds = {"wasm": {"fp32": 70.0, "int8-weights": 67.0, "int8-static": 33.0}}
    choose_with = lambda rejected: select(variants, None, None, "balanced", speeds,  # noqa: E731
                                          ("webgpu", "wasm"), rejected=rejected)
    assert choose_with({}).chosen == "int8-static"
    choice = choose_with({"wasm": {"int8-static"}})
    assert choice.chosen == {"webgpu": "int8-static", "wasm": "int8-weights"}
    assert choice.dropped == ["fp32"]
    assert [c.name for c in choice.selection.candidates if c.chosen] == [
        "int8-weights", "int8-static"]
    quantized = {"int8-static", "int8-weights"}
    assert choose_with({"wasm": quantized, "webgpu": quantized}).chosen == "fp32"
    with pytest.raises(QuantizeError):
        choose_with({"wasm": {*quantized, "fp32"}})
