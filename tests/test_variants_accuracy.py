"""`--quantize auto` judges accuracy on inputs held out from calibration, by confidence bounds:
too few inputs ship fp32 with one line saying what it would take, enough ship a quantized
variant, bundle.json records n, estimate and bound, and `bundle test --validation` judges the
shipped variant on the user's inputs afterwards (natively here; the CLI in the browser tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bundler.bundle.options import BuildOptions
from bundler.commands.build import build
from bundler.console import Reporter
from bundler.errors import ConfigError
from bundler.variants.holdout import check_held_out
from tests import quant_models

CANDIDATES = ("fp32", "int8-weights", "int8", "int8-static")


class Warnings(Reporter):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def warn(self, message: str) -> None:
        self.seen.append(message)


def _npz(path: Path, count: int, seed: int) -> Path:
    np.savez(path, x=quant_models.mixture_samples(count, seed)[0])
    return path


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return quant_models.mlp_classifier(tmp_path_factory.mktemp("mlp") / "mlp.onnx")


def _auto(model: Path, output: Path, runtime: Path, reporter: Reporter, **options) -> dict:
    return build(model, BuildOptions(output=output, runtime_dir=runtime, verify=False,
                                     quantize="auto", variants=CANDIDATES, **options),
                 reporter=reporter).to_json()


def test_too_few_inputs_say_so_in_one_line_and_ship_fp32(mlp, tmp_path, runtime_dist) -> None:
    reporter = Warnings()
    manifest = _auto(mlp, tmp_path / "dist", runtime_dist, reporter,
                     calibration=_npz(tmp_path / "c.npz", 40, seed=5))
    session = manifest["sessions"][0]
    assert [v["name"] for v in session["variants"]] == ["fp32"] == [session["default_variant"]]
    note = manifest["selection"]["note"]
    assert note == (
        "auto: 20 held-out samples (calibration-split) cannot show top1>=0.99: even if all agree,"
        " its 95% lower bound is 0.839; it takes at least 381 samples (pass --validation);"
        " shipping fp32, which is exact by construction")
    assert reporter.seen.count(note) == 1 and "\n" not in note
    for candidate in manifest["selection"]["candidates"]:
        accuracy = candidate["accuracy"]
        assert (accuracy["data"], accuracy["samples"]) == ("calibration-split", 20)
        top1 = accuracy["bounds"]["top1"]
        assert (top1["n"], top1["method"]) == (20, "wilson-95-lower")
        assert top1["bound"] < 0.99 <= top1["estimate"]  # the estimate passes, the bound not
        assert candidate["within_budget"] == (candidate["name"] == "fp32"), candidate
        if candidate["name"] != "fp32":
            assert "top1 0.8389 (95% lower bound of 20 rows; estimate 1) is not >= 0.99" in \
                candidate["budget"]


def test_a_few_inputs_cannot_be_split_and_vouch_for_nothing(mlp, tmp_path, runtime_dist) -> None:
    reporter = Warnings()
    manifest = _auto(mlp, tmp_path / "dist", runtime_dist, reporter,
                     calibration=_npz(tmp_path / "c.npz", 10, seed=5),
                     max_error="cosine>=0.9")
    assert manifest["sessions"][0]["default_variant"] == "fp32"
    assert manifest["selection"]["note"] == (
        "auto: the 10 calibration samples are too few to hold out a validation part; pass"
        " --validation with real inputs; shipping fp32, which is exact by construction")
    int8 = next(c for c in manifest["selection"]["candidates"] if c["name"] == "int8")
    assert int8["budget"] == "measured on its own calibration inputs, not held-out ones"


def test_enough_validation_inputs_ship_int8_and_bundle_test_judges_it_again(
        mlp, tmp_path, runtime_dist) -> None:
    directory = tmp_path / "dist"
    manifest = _auto(mlp, directory, runtime_dist, Warnings(),
                     calibration=_npz(tmp_path / "c.npz", 40, seed=5),
                     validation=_npz(tmp_path / "v.npz", 1000, seed=7), objective="size")
    (shipped,) = manifest["sessions"][0]["variants"]
    assert shipped["name"] != "fp32" and "note" not in manifest["selection"]
    top1 = shipped["accuracy"]["bounds"]["top1"]
    assert shipped["accuracy"]["data"] == "validation" and top1["n"] == 1000
    assert top1["bound"] >= 0.99
    # afterwards, on 600 other real inputs: the same bound, against the original model
    held_out = _npz(tmp_path / "later.npz", 600, seed=11)
    with pytest.raises(ConfigError, match="ships no fp32 variant to compare with; pass"
                                          " --original MODEL.onnx"):
        check_held_out(directory, held_out, None)
    (result,) = check_held_out(directory, held_out, mlp)
    assert (result.variant, result.against) == (shipped["name"], "mlp.onnx")
    n, estimate, bound = result.metrics.judged("top1")
    assert n == 600 and estimate is not None and bound is not None and bound < estimate
    assert result.failures == []
    row = result.row()
    assert row[2] == "validation (600)" and row[-1] == "within (cosine>=0.999,top1>=0.99)"
    (few,) = check_held_out(directory, _npz(tmp_path / "few.npz", 50, seed=13), mlp)
    assert few.failures and few.failures[0].startswith("top1 0.9287 (95% lower bound of 50 rows")


def test_samples_given_beside_calibration_judge_the_candidates(mlp, tmp_path,
                                                               runtime_dist) -> None:
    manifest = _auto(mlp, tmp_path / "dist", runtime_dist, Warnings(),
                     calibration=_npz(tmp_path / "c.npz", 40, seed=5),
                     sample=_npz(tmp_path / "s.npz", 1000, seed=7), objective="size")
    for candidate in manifest["selection"]["candidates"]:
        accuracy = candidate["accuracy"]
        assert (accuracy["data"], accuracy["samples"]) == ("sample-held-out", 1000), candidate
        assert accuracy["bounds"]["top1"]["n"] == 1000
    assert manifest["sessions"][0]["default_variant"] != "fp32"  # 1,000 held-out vouch
