"""The bundle's files without a browser: content-hashed names, the file list of bundle.json,
bundle.files.mjs, and dist/ as an npm package (installed with npm, imported under Node.js)."""

import hashlib
import json
import re
import subprocess

import pytest

from bundler.bundle import manifest as manifest_file
from bundler.bundle.files import hashed_name, npm_name
from bundler.hosting.publish import owned_paths
from bundler.hosting.registry import CONFIG_FILES
from bundler.site.npmtools import node_executable
from bundler.site.runtime import node_and_npm

HASHED = re.compile(r"^(models|runtime)/[^/]+\.[0-9a-f]{8}\.[a-z]+$")
STABLE = {"index.html", "bundle.mjs", "bundle.json", "bundle.files.mjs", "package.json"}


@pytest.fixture(scope="module")
def digits_bundle(tmp_path_factory, runtime_dist):
    from bundler.bundle.options import BuildOptions
    from bundler.commands.build import build

    output = tmp_path_factory.mktemp("files") / "dist"
    manifest = build(None, BuildOptions(output=output, verify=False, runtime_dir=runtime_dist,
                                        variants=("fp32", "int8")))
    return output, manifest.to_json()


def test_model_and_runtime_files_are_named_by_their_content(digits_bundle):
    directory, manifest = digits_bundle
    shipped = {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()}
    assert shipped >= STABLE
    assets = {entry["path"]: entry for entry in manifest["files"]
              if entry["path"].split("/")[0] in ("models", "runtime")}
    assert len(assets) == 2 + 6 and all(HASHED.match(path) for path in assets)
    for path, entry in assets.items():
        pieces = [part["path"] for part in entry.get("parts", [])] or [path]
        data = b"".join((directory / piece).read_bytes() for piece in pieces)
        assert path.rsplit(".", 2)[1] == hashlib.sha256(data).hexdigest()[:8], path
    files = {v["file"] for v in manifest["sessions"][0]["variants"]}
    assert files == {p for p in assets if "models/" in p}
    assert manifest["runtime"]["builds"]["wasm"]["module"].startswith("runtime/ort.wasm.min.")
    assert set(manifest["runtime"]["builds"]["webgpu"]) == {"module", "mjs", "wasm"}
    assert hashed_name("ort.wasm.min.mjs", "1a2b3c4d5e") == "ort.wasm.min.1a2b3c4d.mjs"


def test_bundle_json_lists_every_other_file_with_bytes_and_sha256(digits_bundle):
    directory, manifest = digits_bundle
    listed = {entry["path"]: entry for entry in manifest["files"]}
    on_disk = {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()
               and not p.name.startswith(".")}
    host_configs = set(CONFIG_FILES.values())
    split = {path for path, entry in listed.items() if entry.get("parts")}  # only parts on disk
    files = manifest_file.from_json(manifest).files or []
    assert owned_paths(files) - split == on_disk - {"bundle.json", "bundle.files.mjs",
                                                    *host_configs}
    for path, entry in listed.items():
        pieces = [part["path"] for part in entry.get("parts", [])] or [path]
        data = b"".join((directory / piece).read_bytes() for piece in pieces)
        assert entry["bytes"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()


def test_files_module_holds_the_manifest_and_one_literal_url_per_model_and_runtime_file(
        digits_bundle):
    directory, manifest = digits_bundle
    text = (directory / "bundle.files.mjs").read_text()
    literal = re.findall(r'new URL\("\./([^"]+)", import\.meta\.url\)', text)
    split = {entry["path"]: [part["path"] for part in entry["parts"]]
             for entry in manifest["files"] if entry.get("parts")}
    assert split, "the 28.7 MB asyncify wasm is over the 25 MiB default: the table lists parts"
    builds = manifest["runtime"]["builds"].values()
    imported = {build[key] for build in builds for key in ("module", "mjs")}
    fetched = {v["file"] for v in manifest["sessions"][0]["variants"]}
    fetched |= {build["wasm"] for build in builds}
    gzip_of = {piece["path"]: piece["encodings"]["gzip"]["path"]
               for entry in manifest["files"] for piece in entry.get("parts") or [entry]
               if "gzip" in piece.get("encodings", {})}
    pieces = {piece for path in fetched for piece in split.get(path, [path])}
    assert pieces <= gzip_of.keys(), "models and .wasm compress: each has a gzip sibling"
    # imported modules by their own name; fetched bytes by their gzip sibling (DecompressionStream)
    assert sorted(literal) == sorted(imported | {gzip_of[piece] for piece in pieces})
    script = ("import('./bundle.files.mjs').then(({ manifest, urls }) => console.log("
              "JSON.stringify({ manifest, urls: Object.keys(urls) })))")
    result = subprocess.run([str(node_executable()), "--input-type=module", "-e", script],
                            cwd=directory, capture_output=True, text=True, check=True)
    loaded = json.loads(result.stdout)
    assert loaded["manifest"] == json.loads((directory / "bundle.json").read_text()) == manifest
    assert sorted(loaded["urls"]) == sorted(literal)


@pytest.mark.parametrize(("name", "expected"), [
    ("digits", "digits"),
    ("@acme/yolo-v8n", "@acme/yolo-v8n"),
    ("My Model (v2)", "my-model-v2"),
    ("_private.Net", "private.net"),
    ("###", "onnx-model"),
])
def test_package_name_is_a_valid_npm_name(name, expected):
    assert npm_name(name) == expected


def test_npm_install_of_dist_gives_a_package_whose_node_entry_rejects_clearly(
        digits_bundle, tmp_path):
    directory, manifest = digits_bundle
    package = json.loads((directory / "package.json").read_text())
    assert package["name"] == "digits" and package["type"] == "module"
    assert package["sideEffects"] is False
    assert package["exports"]["."]["types"] == "./bundle.d.ts"
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text('{"name": "app", "private": true, "type": "module"}')
    node, npm = node_and_npm()
    subprocess.run([*npm, "install", "--offline", "--no-audit", "--no-fund", "--install-links",
                    str(directory)], cwd=app, capture_output=True, text=True, check=True)
    installed = app / "node_modules" / "digits"
    assert (installed / "bundle.files.mjs").is_file()
    assert not (installed / "index.html").exists()  # the demo page is not part of the package
    for entry in manifest["files"]:
        if entry["path"].startswith(("models/", "runtime/")):
            for piece in entry.get("parts") or [entry]:
                assert (installed / piece["path"]).stat().st_size == piece["bytes"]
    script = """import('digits').then(async (bundle) => {
      try { await bundle.load(); console.log('loaded'); }
      catch (error) { console.log(JSON.stringify({ name: error.name, code: error.code,
                                                  message: error.message })); }
    })"""
    result = subprocess.run([str(node), "--input-type=module", "-e", script], cwd=app,
                            capture_output=True, text=True, check=True)
    error = json.loads(result.stdout)
    assert error["code"] == "unsupported-environment" and error["name"] == "BundleError"
    assert "runs in the browser only" in error["message"]

