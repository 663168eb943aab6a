"""bundle build without the browser: layout, manifest, determinism, atomic replacement, wheel."""

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import onnx
import pytest

from bundler.bundle.manifest import load
from bundler.bundle.modelio import native_load_error
from bundler.bundle.options import BuildOptions
from bundler.commands.build import build
from bundler.errors import ConfigError
from bundler.resources import example_model
from bundler.verify.conformance import integrity_problems
from tests import models
from tests.conftest import ROOT


def tree(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*")) if path.is_file()
    }


def shipped_names(folder: Path) -> list[str]:
    """The names in `folder` without their content hash (`x.1a2b3c4d.mjs` -> `x.mjs`), the
    precompressed siblings left out."""
    return sorted(re.sub(r"\.[0-9a-f]{8}(\.[a-z]+(\.part\d+)?)$", r"\1", p.name)
                  for p in folder.iterdir() if p.suffix not in (".br", ".gz"))


def test_manifest_describes_types_and_symbolic_dims(build_bundle, tmp_path):
    directory, manifest = build_bundle(models.multi_io(tmp_path), name="multi")
    assert json.loads((directory / "bundle.json").read_text()) == manifest
    assert manifest["name"] == "multi_io"
    assert manifest["sessions"][0]["inputs"] == [
        {"name": "x", "type": "float32", "shape": ["batch", 4]},
        {"name": "ids", "type": "int64", "shape": ["batch", 3]},
        {"name": "mask", "type": "int32", "shape": ["batch", 3]},
    ]
    assert [o["type"] for o in manifest["sessions"][0]["outputs"]] == ["float32", "int32"]
    assert manifest["runtime"]["package"] == "onnxruntime-web"
    assert manifest["runtime"]["version"] == "1.31.1"
    assert manifest["tool"]["name"] == "onnx-bundler"
    (variant,) = manifest["sessions"][0]["variants"]
    assert variant["name"] == manifest["sessions"][0]["default_variant"] == "fp32"
    assert variant["bytes"] == (directory / variant["file"]).stat().st_size
    assert manifest["verification"]["status"] == "not_done"


def test_only_the_runtime_files_the_page_needs_are_shipped(build_bundle):
    directory, manifest = build_bundle(None)
    assert shipped_names(directory / "runtime") == [  # the 28.7 MB asyncify wasm is over 25 MiB
        "ort-wasm-simd-threaded.asyncify.mjs", "ort-wasm-simd-threaded.asyncify.wasm.part0",
        "ort-wasm-simd-threaded.asyncify.wasm.part1",
        "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm",
        "ort.wasm.min.mjs", "ort.webgpu.min.mjs",
    ]
    wasm_only, _ = build_bundle(None, name="wasm-only", execution_providers=("wasm",))
    assert shipped_names(wasm_only / "runtime") == [
        "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm", "ort.wasm.min.mjs",
    ]
    assert set(json.loads((wasm_only / "bundle.json").read_text())["runtime"]["builds"]) == {
        "wasm"}
    for text_file in ["bundle.mjs", "bundle.core.mjs", "app.mjs", "index.html"]:
        assert "http://" not in (directory / text_file).read_text().replace(
            "http://www.w3.org", "")
        assert "https://" not in (directory / text_file).read_text()


def test_same_model_and_options_give_byte_identical_output(build_bundle, tmp_path):
    model = models.conv_stack(tmp_path)
    first, _ = build_bundle(model, name="first")
    second, _ = build_bundle(model, name="second")
    assert tree(first) == tree(second)


def test_example_model_is_the_default_and_the_page_names_it(build_bundle):
    directory, manifest = build_bundle(None)
    assert manifest["source"]["file"] == example_model().name
    assert manifest["sessions"][0]["inputs"] == [
        {"name": "image", "type": "float32", "shape": ["batch", 1, 8, 8]}]
    html = (directory / "index.html").read_text()
    assert "<title>digits · onnx-bundler</title>" in html
    assert 'src="./app.mjs"' in html
    assert oct(directory.stat().st_mode & 0o777) == "0o755"


@pytest.mark.parametrize("builder", [models.external_data, models.external_several])
def test_external_data_stays_external_in_the_shipped_model(build_bundle, tmp_path, builder):
    directory, manifest = build_bundle(builder(tmp_path / "model"))
    variant = manifest["sessions"][0]["variants"][0]
    shipped = onnx.load(str(directory / variant["file"]), load_external_data=False)
    locations = {entry.value for tensor in shipped.graph.initializer
                 if tensor.data_location == onnx.TensorProto.EXTERNAL
                 for entry in tensor.external_data if entry.key == "location"}
    # the graph names each data file by its hashed name beside it, as bundle.json lists it
    assert sorted(locations) == sorted(path.split("/")[-1] for path in variant["data"])
    assert shipped_names(directory / "models") == ["fp32.data", "fp32.onnx"]
    listed = {entry["path"]: entry for entry in manifest["files"]}
    shipped = [directory / path for path in [variant["file"], *variant["data"]]]
    sizes = [path.stat().st_size for path in shipped]
    assert all(path in listed for path in variant["data"])
    # readable by the web server, as every other file
    assert {path.stat().st_mode & 0o777 for path in shipped} == {0o644}
    assert variant["bytes"] == sum(sizes) and sizes[1] > 2048  # the weights are in the data
    # native onnxruntime opens the shipped graph with its data as it is in the bundle
    assert native_load_error(directory / variant["file"]) is None
    # bundle test notices a data file changed after the build
    loaded = load(directory)
    graph = {variant["file"]: directory / variant["file"]}
    assert integrity_problems(loaded, graph) == []
    with (directory / variant["data"][0]).open("r+b") as stream:
        stream.write(b"\x00\x01\x02\x03")
    assert integrity_problems(loaded, graph) == [
        f"variant fp32: {variant['data'][0]} does not match the sha256 in bundle.json (the file"
        " was changed after the build)"]


def test_zipmap_output_becomes_the_probability_tensor(build_bundle, tmp_path):
    _, manifest = build_bundle(models.ml_classifier(tmp_path))
    assert manifest["sessions"][0]["outputs"] == [
        {"name": "label", "type": "int64", "shape": ["batch"]},
        {"name": "probabilities", "type": "float32", "shape": ["batch", 3]},  # inferred
    ]
    assert "ZipMap removed" in manifest["notes"][0]


def test_rebuild_replaces_its_own_folder_and_force_replaces_others(build_bundle, tmp_path):
    directory, _ = build_bundle(None)
    (directory / "stale.txt").write_text("old")
    build_bundle(None)
    assert not (directory / "stale.txt").exists()
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="--force"):
        build(None, BuildOptions(output=other, verify=False))
    assert (other / "keep.txt").exists()


def test_failed_build_leaves_the_previous_bundle_untouched(build_bundle, tmp_path):
    directory, _ = build_bundle(None)
    before = tree(directory)
    with pytest.raises(Exception, match="lacks"):
        build(None, BuildOptions(output=directory, verify=False, runtime_dir=tmp_path))
    assert tree(directory) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_wheel_carries_templates_web_config_and_example_and_works_elsewhere(tmp_path, runtime_dist):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(tmp_path / "wheel"), str(ROOT)],
        check=True, capture_output=True,
    )
    (wheel,) = (tmp_path / "wheel").glob("onnx_bundler-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for expected in ["bundler/templates/index.html.j2", "bundler/web/bundle.mjs",
                     "bundler/web/bundle.core.mjs", "bundler/web/bundle.d.ts",
                     "bundler/web/app.mjs", "bundler/web/task-demo.mjs",
                     "bundler/web/tasks/index.mjs", "bundler/web/text/tokenizer.mjs",
                     "bundler/web/dev/conformance.mjs",
                     "bundler/web/dev/bench.mjs", "bundler/tasks/spec.py",
                     "bundler/defaults/playwright.config.py",
                     "bundler/example/digits.onnx"]:
        assert expected in names
    for package in (ROOT / "bundler").rglob("__init__.py"):  # every package, not only these
        assert package.relative_to(ROOT).as_posix() in names
    target = tmp_path / "site-packages"
    zipfile.ZipFile(wheel).extractall(target)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "bundler", "build", "--no-verify", "-o", "out",
         "--runtime-dir", str(runtime_dist)],
        cwd=elsewhere, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(target)},
    )
    assert result.returncode == 0, result.stderr
    assert (elsewhere / "out" / "index.html").is_file()
    assert not (elsewhere / "out" / "dev").exists()  # the harness is not part of a bundle
    assert "export interface Inputs" in (elsewhere / "out" / "bundle.d.mts").read_text()
    shipped = (elsewhere / "out" / "bundle.mjs").read_bytes()
    assert shipped == (ROOT / "web" / "bundle.mjs").read_bytes()


def test_verification_not_done_when_the_model_runs_at_no_size_says_which_flag(build_bundle,
                                                                              tmp_path):
    _, manifest = build_bundle(models.symbolic_hw(tmp_path), verify=True,
                               dims={"height": 1, "width": 1})
    verification = manifest["verification"]
    assert verification["status"] == "not_done"
    assert verification["reason"].startswith("native onnxruntime fails on generated inputs")
    assert "--dim" in verification["hint"]
