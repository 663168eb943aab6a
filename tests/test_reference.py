import numpy as np
import pytest
from onnx import helper

from bundler.bundle.modelio import TensorSpec, read_model, signature
from bundler.model.dim_expressions import expression_size
from bundler.verify.reference import (
    INTEGER_RANGE,
    Case,
    NotRunnable,
    Reference,
    fingerprint,
    fingerprint_mismatch,
    make_feeds,
    native_reference,
    open_dims,
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


def _kv_cache_mask(directory):
    """out = concat(past, x) * mask[:, :past + seq], read by a Gather over range(past + seq) as
    GPT-2's export reads its attention mask: a mask shorter than the keys fails."""
    nodes = [helper.make_node("Concat", ["past", "x"], ["keys"], axis=1),
             helper.make_node("Shape", ["keys"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["length"]),
             helper.make_node("Range", ["zero", "length", "one"], ["positions"]),
             helper.make_node("Gather", ["mask", "positions"], ["picked"], axis=1),
             helper.make_node("Cast", ["picked"], ["weights"], to=models.F32),
             helper.make_node("Mul", ["keys", "weights"], ["out"])]
    return models._save(models._graph(
        "kv_cache_mask", nodes,
        [models._io("past", models.F32, [1, "past"]), models._io("x", models.F32, [1, "seq"]),
         models._io("mask", models.I64, [1, "past + seq"])],
        [models._io("out", models.F32, [1, None])],
        [models._const("zero", 0, np.int64), models._const("one", 1, np.int64)]), directory)


def test_a_dim_named_by_a_sum_of_dims_is_sized_as_that_sum(tmp_path):
    """optimum's decoders take an attention mask of `past_sequence_length + sequence_length`:
    sized 1 on its own, the mask was shorter than the keys and every build's check failed with
    'indices element out of data bounds'."""
    model = _kv_cache_mask(tmp_path)
    inputs = specs(model)
    assert open_dims(inputs, {}) == ["past", "seq"]
    assert resolve_shapes(inputs, {"past": 3, "seq": 2})["mask"] == (1, 5)
    reference = native_reference(model, inputs, {"past": 4})
    assert reference.dims == {"past": 4, "seq": 1}
    assert reference.feeds["mask"].shape == reference.cases[0].outputs["out"].shape == (1, 5)


def test_expression_sizes_follow_the_dims_they_name():
    sizes = {"s0": 3, "s1": 4}
    assert [expression_size(dim, sizes) for dim in ("s0 + 1", "2*s1", "s0*s1 - 2", "s1//2")] == [
        4, 8, 10, 2]
    assert [expression_size(dim, sizes) for dim in ("s0", "s2 + 1", "s0 - 9", "s0 ** 2")] == [
        None, None, None, None]


def test_guessed_sizes_whose_inputs_would_not_fit_in_memory_are_not_tried(tmp_path):
    """Runs only at n = 640, where x [1, n, n, n] would be 1 GiB: guessing it took a GPT-2's
    build to 15 GB and the OOM killer; the user can still ask for it with --dim."""
    nodes = [helper.make_node("Reshape", ["x", "flat"], ["out"])]
    model = models._save(models._graph(
        "needs_a_huge_input", nodes, [models._io("x", models.F32, [1, "n", "n", "n"])],
        [models._io("out", models.F32, [640 ** 3])],
        [models._const("flat", [640 ** 3], np.int64)]), tmp_path)
    with pytest.raises(NotRunnable):
        native_reference(model, specs(model), {})
