"""The large-model build path at small scale: a model whose weights, in external data, are past
$BUNDLER_LARGE_MODEL_BYTES (protobuf's 2 GB unless lowered, as here) is built from its graph
alone: fp32 only, every optimisation step skipped with the reason, its data files shipped as
they are. (benchmarks/large_model.py runs the same path past 2 GB, by hand.)"""

from __future__ import annotations

import gzip
import hashlib

import brotli
import numpy as np
import onnx
import onnxruntime
import pytest

from bundler.bundle.external import ALIGN, ship_external
from bundler.bundle.manifest import load
from bundler.bundle.modelio import LARGE_ENV, move_model
from bundler.errors import ModelError, QuantizeError
from bundler.hosting.publish import HostingOptions, assembled, prepare_heavy
from bundler.model.optimize import LARGE_SKIPPED
from bundler.model.prepare import check_weights
from bundler.variants.plan import variants_to_make
from bundler.variants.registry import make_variant
from tests import models


@pytest.mark.parametrize("large", [True, False])
def test_a_large_model_is_built_from_its_graph_alone(build_bundle, tmp_path, monkeypatch,
                                                     large):
    source = models.external_several(tmp_path / "model")
    if large:
        monkeypatch.setenv(LARGE_ENV, "1000")  # its 6 KB of weights are "large"
    root, manifest = build_bundle(source)
    steps = {step["name"]: step for step in manifest["optimization"]["steps"]}
    skipped = {name for name, step in steps.items() if step["status"] == "skipped"}
    if large:
        assert skipped == set(LARGE_SKIPPED), steps
        assert "past 1000 bytes" in steps["onnxslim"]["detail"]
        assert any("built from the graph alone" in note for note in manifest["notes"])
    else:  # the same model under the threshold: optimised as any other
        assert steps["onnxslim"]["status"] == "ok", steps
    variant = manifest["sessions"][0]["variants"][0]
    # a large model's data files ship as they are; the optimised one's weights are rewritten
    assert variant["kind"] == "fp32" and len(variant["data"]) == (3 if large else 1), variant
    graph = onnx.load(str(root / variant["file"]), load_external_data=False)
    external = {tensor.name for tensor in graph.graph.initializer
                if tensor.data_location == onnx.TensorProto.EXTERNAL}
    assert external == {"w1", "b1", "w2"} or not large, external
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    expected = onnxruntime.InferenceSession(str(source)).run(None, {"x": x})[0]
    with assembled(root, load(root), variant["file"]) as path:
        got = onnxruntime.InferenceSession(str(path)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, expected)


def test_a_large_model_is_refused_a_quantized_variant_before_a_weight_is_read(
        build_bundle, tmp_path, monkeypatch):
    source = models.external_several(tmp_path / "model")
    monkeypatch.setenv(LARGE_ENV, "1000")
    for data in (tmp_path / "model").rglob("*.bin"):
        data.write_bytes(b"")  # unreadable weights: the refusal comes from file sizes alone
    (tmp_path / "model" / "weights" / "w2.bin").write_bytes(bytes(2000))
    with pytest.raises(ModelError, match="only fp32, fp16, int8-weights, int8, int4 are built"
                                         " from a model past 2 GB"):
        build_bundle(source, quantize="int8-static")


@pytest.mark.parametrize("large", [True, False])
def test_large_files_are_compressed_only_where_a_fast_pass_says_it_pays(tmp_path, monkeypatch,
                                                                        large):
    models_dir = tmp_path / "models"
    models_dir.mkdir()
    noise = np.random.default_rng(0).integers(0, 256, 64 * 1024, dtype=np.uint8)
    noise.reshape(4, -1)[:, :256] = 0  # each 16 KiB part: brotli saves 1.4%, under the 2% asked
    (models_dir / "noise.data").write_bytes(noise.tobytes())
    (models_dir / "zeros.data").write_bytes(bytes(64 * 1024))
    if large:
        monkeypatch.setenv(LARGE_ENV, "1000")
    entries = {entry.path: entry for entry in
               prepare_heavy(tmp_path, HostingOptions(max_file_size=16 * 1024))}
    noisy = [part.encodings for part in entries["models/noise.data"].parts]
    assert all(encodings is None for encodings in noisy) if large else all(noisy), noisy
    zeros = entries["models/zeros.data"].parts
    assert all(part.encodings for part in zeros)
    for part in zeros:  # (a large file's siblings are written block by block)
        assert gzip.decompress((tmp_path / part.encodings["gzip"].path).read_bytes()) == bytes(
            part.bytes)
        assert brotli.decompress((tmp_path / part.encodings["br"].path).read_bytes()) == bytes(
            part.bytes)
        assert part.sha256 == hashlib.sha256(bytes(part.bytes)).hexdigest()


def test_the_runtime_is_compressed_once_per_machine_past_a_lowered_large_size(tmp_path,
                                                                               monkeypatch):
    """Only a model's files take the large-model path: a runtime file past a lowered
    $BUNDLER_LARGE_MODEL_BYTES gets its siblings through the content cache, as in any build (the
    same wasm was brotli'd at quality 11 anew in every build: minutes per test build)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(LARGE_ENV, "1000")
    wasm = tmp_path / "site" / "runtime" / "ort.wasm"
    wasm.parent.mkdir(parents=True)
    wasm.write_bytes(b"\0asm" + bytes(range(256)) * 64)
    [entry] = prepare_heavy(tmp_path / "site", HostingOptions())
    siblings = sorted((tmp_path / "site" / sibling.path).read_bytes()
                      for sibling in entry.encodings.values())
    cached = sorted(path.read_bytes()
                    for path in (tmp_path / "cache" / "onnx-bundler" / "compressed").iterdir())
    assert len(siblings) == 2 and cached == siblings


def test_a_data_file_past_the_limit_is_cut_between_tensors(tmp_path):
    source = models.external_several(tmp_path / "model")
    model = onnx.load(str(source))  # w1 4096 bytes, b1 128, w2 2048, then into one file
    onnx.save_model(model, source, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="one.bin", size_threshold=0)
    shipped = tmp_path / "dist" / "fp32.onnx"
    shipped.parent.mkdir()
    data = ship_external(source, shipped, max_data_bytes=5000)
    assert sorted(file.stat().st_size for file in data) == [2048, 4224]  # w1 + b1 | w2
    graph = onnx.load(str(shipped), load_external_data=False)
    for tensor in graph.graph.initializer:
        entries = {entry.key: entry.value for entry in tensor.external_data}
        assert int(entries["offset"]) % ALIGN == 0 and entries["location"] in {
            file.name for file in data}
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    expected = onnxruntime.InferenceSession(str(source)).run(None, {"x": x})[0]
    got = onnxruntime.InferenceSession(str(shipped)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, expected)
    assert len(ship_external(source, tmp_path / "dist" / "whole.onnx")) == 1  # under 1 GiB


def test_a_model_is_moved_over_another_with_its_data_files(tmp_path):
    """move_model (int8's per-tensor candidate, kept, of a large model): the graph and its data
    files, one in a folder, renamed over a model of the same name, whose own data file goes."""
    source = models.external_several(tmp_path / "model")
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    expected = onnxruntime.InferenceSession(str(source)).run(None, {"x": x})[0]
    dst = tmp_path / "variant" / source.name
    dst.parent.mkdir()
    onnx.save_model(onnx.load(str(source)), dst, save_as_external_data=True,
                    location=f"{dst.name}.data", size_threshold=0)
    move_model(source, dst)
    assert sorted(str(path.relative_to(dst.parent)) for path in dst.parent.rglob("*.*")) == [
        "external_several.onnx", "external_several.w1.bin", "weights/b1.bin", "weights/w2.bin"]
    assert not any(path.is_file() for path in source.parent.rglob("*"))
    got = onnxruntime.InferenceSession(str(dst)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, expected)


def test_auto_leaves_out_the_kinds_a_large_model_cannot_have(tmp_path, monkeypatch):
    """Named, int8-static is refused before the build reads a weight; as a candidate of auto,
    it is left out by make_variant's one line (make_variants warns of it), where int4, fp16 and
    int8 are made."""
    source = models.external_several(tmp_path / "model")
    monkeypatch.setenv(LARGE_ENV, "1000")
    with pytest.raises(ModelError, match="past 2 GB .*: leave out int8-static, or"):
        check_weights(source, variants_to_make(None, ["fp16", "int4", "int8", "int8-static"],
                                               None))
    check_weights(source, variants_to_make("auto", None, None))
    with pytest.raises(QuantizeError, match="int8-static is not made from a model past 2 GB"):
        make_variant("int8-static", source, tmp_path / "int8-static.onnx",
                     calibration=[{"x": np.zeros((2, 32), np.float32)}])
    assert make_variant("int4", source, tmp_path / "int4.onnx").settings["matmuls_int4"] == 2
    assert make_variant("fp16", source, tmp_path / "fp16.onnx").requires == ["shader-f16"]
    assert make_variant("int8", source, tmp_path / "int8.onnx").settings["per_channel"]


@pytest.mark.parametrize("kind", ["int4", "fp16", "int8"])
def test_a_large_model_builds_a_variant_from_its_data_files(build_bundle, tmp_path, monkeypatch,
                                                           kind):
    """The whole build: int4 made a batch of weights at a time, fp16 a block of each weight at a
    time, int8 each weight read when the quantizer gets to it (from data files in a subfolder
    too), measured against fp32, shipped; what the bundle computes is what the kind made in
    memory computes. (int4's blocks, 512 bytes each, stay in the graph, under INLINE_BELOW: no
    data file is left for nothing; fp16's w1 and w2 are 2048 and 1024 bytes, in one data file;
    int8's w1 is 1024 bytes, in one, its w2 512, inline.)"""
    source = models.external_several(tmp_path / "model")
    whole = tmp_path / "whole" / f"{kind}.onnx"
    make_variant(kind, source, whole)  # not large yet: from memory
    monkeypatch.setenv(LARGE_ENV, "1000")
    root, manifest = build_bundle(source, quantize=kind)
    [variant] = manifest["sessions"][0]["variants"]
    files = 0 if kind == "int4" else 1
    assert variant["kind"] == kind and len(variant.get("data", [])) == files, variant
    assert len(list((root / "models").glob("*.data"))) == files
    assert variant["accuracy"]["cosine"] > 0.9  # measured natively against fp32
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    expected = onnxruntime.InferenceSession(str(whole)).run(None, {"x": x})[0]
    with assembled(root, load(root), variant["file"]) as path:
        got = onnxruntime.InferenceSession(str(path)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, expected)
