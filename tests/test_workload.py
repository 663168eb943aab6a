"""bundler.verify.workload: which sizes a bundle is measured at, where they came from, and the
one-line warning when a symbolic spatial dim was guessed."""

from __future__ import annotations

import numpy as np

from bundler.bundle import manifest as manifest_file
from bundler.bundle.manifest import Task
from bundler.bundle.modelio import TensorSpec
from bundler.verify.workload import Workload, bundle_known, known_dims, measured, task_dims
from tests import models

IMAGES = (TensorSpec("images", "float32", ("batch", 3, "height", "width")),)


def _feeds(*shape: int) -> dict[str, np.ndarray]:
    return {"images": np.zeros(shape, np.float32)}


def test_a_guessed_dim_is_named_in_one_line_with_the_flag_that_sets_it() -> None:
    workload = measured(IMAGES, _feeds(1, 3, 320, 32), known_dims(IMAGES, given={"height": 320}))
    assert workload.inputs == {"images": [1, 3, 320, 32]}
    assert workload.dims == {"batch": 1, "height": 320, "width": 32}
    assert workload.dims_source == "guess"
    assert [(g.input, g.axis, g.dim, g.value) for g in workload.guessed] == [
        ("images", 3, "width", 32)]
    warning = workload.warning()
    assert warning is not None and "\n" not in warning
    assert "input images 1x3x320x32: width=32 (axis 3)" in warning
    assert "--dim width=VALUE" in warning and "height" not in warning.split(":", 1)[1]
    assert workload.label() == "images 1x3x320x32"


def test_sources_in_order_task_size_dim_sample_model() -> None:
    given = known_dims(IMAGES, given={"height": 64, "width": 48})
    assert measured(IMAGES, _feeds(1, 3, 64, 48), given).dims_source == "--dim"
    assert measured(IMAGES, _feeds(1, 3, 64, 48), given).warning() is None
    # --dim over the sample's shape, for the dims both size
    sample = known_dims(IMAGES, given={"height": 64}, sample=_feeds(1, 3, 30, 40))
    assert sample.dims == {"batch": 1, "height": 64, "width": 40}
    # data that ran at its own size: its size and the data as the source
    assert measured(IMAGES, _feeds(1, 3, 30, 40), sample).dims_source == "sample"
    # only a symbolic batch, run at 1: the model's dims, nothing guessed
    batch_only = (TensorSpec("x", "float32", ("n", 4)),)
    plain = measured(batch_only, {"x": np.zeros((1, 4), np.float32)}, known_dims(batch_only))
    assert (plain.dims_source, plain.guessed) == ("model", ())
    task = Task(kind="object-detection", input="pixels", output="out", size=[96, 128])
    pixels = (TensorSpec("pixels", "uint8", (1, 96, 128, 3)),)
    known = known_dims(pixels, task=task)
    ran = measured(pixels, {"pixels": np.zeros((1, 96, 128, 3), np.uint8)}, known)
    assert (ran.inputs, ran.dims_source) == ({"pixels": [1, 96, 128, 3]}, "task-size")


def test_an_audio_task_sizes_its_samples_and_state_as_its_app_feeds_them() -> None:
    inputs = (TensorSpec("audio", "float32", (1, "samples")),
              TensorSpec("state", "float32", (2, "batch", 8)), TensorSpec("sr", "int64", ()))
    task = Task(kind="audio-stream", input="audio", output="prob", chunk_size=512,
                context_size=64, sample_rate_input="sr")
    assert task_dims(inputs, task) == {"audio:1": 576, "state:1": 1}


def test_a_decoder_is_measured_at_its_prefill() -> None:
    past = ("batch_size", 4, "past_sequence_length", 16)
    inputs = (TensorSpec("input_ids", "int64", ("batch_size", "sequence_length")),
              TensorSpec("past_key_values.0.key", "float32", past),
              TensorSpec("attention_mask", "int64",
                         ("batch_size", "past_sequence_length + sequence_length")))
    task = Task(kind="text-generation", input="input_ids", output="logits")
    assert task_dims(inputs, task) == {
        "input_ids:0": 1, "input_ids:1": 64, "past_key_values.0.key:0": 1,
        "past_key_values.0.key:2": 0, "attention_mask:0": 1, "attention_mask:1": 64}


def test_a_record_read_back_keeps_its_guesses() -> None:
    workload = measured(IMAGES, _feeds(1, 3, 32, 32), known_dims(IMAGES))
    again = Workload.from_json(workload.to_json())
    assert again == workload
    assert measured(IMAGES, _feeds(1, 3, 32, 32), again.known()) == workload


def test_a_bundle_built_before_the_record_is_measured_at_its_checks_dims(build_bundle, tmp_path):
    bundle, written = build_bundle(models.symbolic_hw(tmp_path), quantize="int8",
                                   dims={"height": 12})
    assert written["workload"]["dims"] == {"height": 12, "width": written["workload"]["dims"][
        "width"]}
    manifest = manifest_file.load(bundle)
    assert bundle_known(manifest).sources == {"height": "--dim", "width": "guess"}
    # as an older build wrote it: no workload, the check's dims in verification
    manifest.workload = None
    manifest.verification.dims = {"height": 12, "width": 10}
    known = bundle_known(manifest, {"width": 14})
    specs = manifest.session().inputs
    ran = measured(specs, {"image": np.zeros((1, 3, 12, 14), np.float32)}, known)
    assert (ran.dims, ran.dims_source, ran.guessed) == ({"height": 12, "width": 14}, "--dim", ())
    guess = measured(specs, {"image": np.zeros((1, 3, 12, 10), np.float32)},
                     bundle_known(manifest))
    assert [g.dim for g in guess.guessed] == ["width"]
