import numpy as np
import pytest

from bundler.modelio import TensorSpec, read_model, signature
from bundler.reference import (
    INTEGER_RANGE,
    Case,
    NotRunnable,
    Reference,
    fingerprint,
    fingerprint_mismatch,
    make_feeds,
    native_reference,
    resolve_shapes,
)
from tests import models


def specs(path):
    return signature(read_model(path)).inputs


def test_feeds_are_seeded_typed_and_honour_scalars(tmp_path):
    inputs = [*specs(models.ALL["multi_io"](tmp_path)), *
        (spec for spec in specs(models.ALL["scalar_input"](tmp_path)) if spec.name != "x")]
    shapes = resolve_shapes(inputs, {"batch": 2})
    feeds = make_feeds(inputs, shapes, seed=3)
    assert feeds["x"].dtype == np.float32 and feeds["x"].shape == (2, 4)
    assert feeds["ids"].dtype == np.int64 and feeds["ids"].shape == (2, 3)
    assert feeds["ids"].min() >= INTEGER_RANGE[0] and feeds["ids"].max() < INTEGER_RANGE[1]
    assert feeds["step"].shape == () and feeds["step"] == 1
    assert all(np.array_equal(a, b) for a, b in zip(
        feeds.values(), make_feeds(inputs, shapes, seed=3).values(), strict=True))


def test_dims_by_input_axis_win_over_dims_by_name():
    spec = TensorSpec("image", "float32", ("batch", 3, "size", "size"))
    shapes = resolve_shapes([spec], {"size": 32, "image:3": 48})
    assert shapes == {"image": (1, 3, 32, 48)}


def test_symbolic_height_and_width_that_fail_at_one_find_a_size_that_runs(tmp_path):
    path = models.ALL["symbolic_hw"](tmp_path)
    reference = native_reference(path, specs(path), {})
    assert reference.dims["height"] >= 3 and reference.dims["width"] >= 3
    assert reference.cases[0].outputs["features"].shape[:2] == (1, 2)


def test_sizes_the_user_fixed_are_kept_and_failure_names_the_flags(tmp_path):
    path = models.ALL["symbolic_hw"](tmp_path)
    with pytest.raises(NotRunnable) as raised:
        native_reference(path, specs(path), {"height": 1, "width": 1})
    assert "native onnxruntime fails" in raised.value.reason
    with pytest.raises(NotRunnable) as raised:
        native_reference(path, specs(path), {"height": 2})
    assert raised.value.hint == "--dim width=VALUE"


def test_fingerprint_notices_changed_outputs(tmp_path):
    path = models.ALL["conv_stack"](tmp_path)
    reference = native_reference(path, specs(path), {})
    recorded = fingerprint(reference)
    assert fingerprint_mismatch(recorded, reference) is None
    (case,) = reference.cases
    changed = Case("", case.feeds, {**case.outputs, "scores": case.outputs["scores"] + 0.01})
    assert fingerprint_mismatch(recorded, Reference(reference.dims, (changed,))) == (
        "output 'scores'")


def test_if_conditions_on_inputs_get_a_case_for_each_branch(tmp_path):
    path = models.ALL["recurrent_state"](tmp_path)
    reference = native_reference(path, specs(path), {})
    assert [case.label for case in reference.cases] == ["", "sr=16000"]
    default, steered = reference.cases
    assert steered.feeds["sr"] == 16000 and default.feeds["sr"] == 1
    assert not np.allclose(default.outputs["output"], steered.outputs["output"])
    flag = models.ALL["if_subgraph"](tmp_path)
    cases = native_reference(flag, specs(flag), {}).cases
    assert {bool(case.feeds["flag"]) for case in cases} == {True, False}


def test_sizes_with_constant_outputs_are_passed_over(tmp_path):
    path = models.ALL["symbolic_hw"](tmp_path)
    reference = native_reference(path, specs(path), {})
    assert np.ptp(reference.cases[0].outputs["features"]) > 0
