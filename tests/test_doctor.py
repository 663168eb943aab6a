"""`bundle doctor` against 127.0.0.1 hosts: a correct one passes; each planted misconfiguration
is found, named by file, with a fix."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from bundler.bundle.options import BuildOptions
from bundler.commands.build import build
from bundler.commands.doctor import doctor
from bundler.errors import BundlerError
from bundler.hosting.doctor.report import DoctorReport
from bundler.hosting.registry import detect_host
from bundler.hosting.sizes import MIB
from tests import models
from tests.conftest import run_cli
from tests.hostsim import Host, hosting

WASM = "runtime/ort-wasm-simd-threaded.wasm"
MODEL = "models/fp32.onnx"
RUNTIME_MODULE = "runtime/ort.wasm.min.mjs"


def named(root: Path, name: str) -> str:
    """The content-hashed path the bundle in `root` gives `name` (models/fp32.onnx ->
    models/fp32.3b765687.onnx)."""
    stem, suffix = name.rsplit(".", 1)
    pattern = re.compile(rf"^{re.escape(stem)}\.[0-9a-f]{{8}}\.{suffix}$")
    files = json.loads((root / "bundle.json").read_text())["files"]
    return next(entry["path"] for entry in files if pattern.match(entry["path"]))


def _build(root: Path, runtime_dist: Path, **options: object) -> Path:
    build(None, BuildOptions(output=root, runtime_dir=runtime_dist, verify=False,
                             execution_providers=("wasm",), **options))
    return root


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> Path:
    return _build(tmp_path_factory.mktemp("doctor") / "dist", runtime_dist)


def _doctor(host: Host, **options: object) -> DoctorReport:
    with hosting(host) as url:
        return doctor(url, **options)


def _errors(report: DoctorReport) -> set[tuple[str, str]]:
    return {(p.kind, p.path) for p in report.problems if p.severity == "error"}


def test_a_correct_deployment_passes_from_the_command_line(bundle):
    wasm_file = named(bundle, WASM)
    with hosting(Host(bundle, prefix="/some/sub/path/", negotiate=True)) as url:
        result = run_cli("doctor", url, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and report["problems"] == []
    rows = {row["file"]: row for row in report["files"]}
    assert rows[wasm_file]["content_type"] == "application/wasm"
    assert rows[wasm_file]["encoding"] == "br"  # the sibling, checked against the real sha256
    assert int(rows[wasm_file]["sent"]) < 0.3 * (bundle / wasm_file).stat().st_size


def test_a_plain_host_with_the_worker_only_warns(bundle):
    report = _doctor(Host(bundle, isolation=False))
    assert report.ok, report.problems
    kinds = {p.kind for p in report.problems}
    assert kinds == {"worker-only", "uncompressed"}


def test_wrong_types_are_errors_with_the_hosts_fix(bundle):
    wasm_file = named(bundle, WASM)
    report = _doctor(Host(bundle, types={".wasm": "application/octet-stream",
                                         ".mjs": "text/plain"}))
    assert {("content-type", wasm_file), ("content-type", "bundle.mjs")} <= _errors(report)
    assert not report.ok
    problem = next(p for p in report.problems if p.path == wasm_file)
    assert "application/wasm" in problem.message and "application/wasm" in problem.fix


def test_spa_fallback_for_a_missing_wasm_fails_naming_it(bundle):
    wasm_file = named(bundle, WASM)
    with hosting(Host(bundle, spa_fallback=True, hidden={wasm_file})) as url:
        result = run_cli("doctor", url)
    assert result.returncode == 1, result.stdout + result.stderr
    assert wasm_file in result.stdout and "HTML page" in result.stdout
    report = _doctor(Host(bundle, spa_fallback=True, hidden={wasm_file}))
    assert {("html-instead", wasm_file), ("spa-fallback", "__bundle_doctor_missing__.wasm")
            } <= _errors(report)


def test_an_error_page_in_place_of_a_later_part_is_named(tmp_path, runtime_dist):
    root = _build(tmp_path / "dist", runtime_dist, max_file_size="8MiB")
    part = named(root, WASM) + ".part1"
    report = _doctor(Host(root, spa_fallback=True, hidden={part}))
    assert ("html-instead", part) in _errors(report)


def test_missing_file_is_a_real_404_error(bundle):
    model_file = named(bundle, MODEL)
    report = _doctor(Host(bundle, hidden={model_file}))
    assert _errors(report) == {("missing", model_file)}


def test_no_isolation_and_no_worker_fails(tmp_path, runtime_dist):
    root = _build(tmp_path / "dist", runtime_dist, coi_worker=False)
    assert not (root / "coi-serviceworker.js").exists()
    assert "coi-serviceworker" not in (root / "index.html").read_text()
    report = _doctor(Host(root, isolation=False))
    assert _errors(report) == {("no-isolation", "index.html")}
    assert _doctor(Host(root)).ok


def test_stale_bytes_and_oversized_files(bundle):
    model_file, wasm_file = named(bundle, MODEL), named(bundle, WASM)
    stale = bytearray((bundle / model_file).read_bytes())
    stale[-1] ^= 0xFF
    report = _doctor(Host(bundle, replace={model_file: bytes(stale)}), max_file_size=10 * MIB)
    assert _errors(report) == {("stale", model_file), ("too-big", wasm_file)}
    fix = next(p.fix for p in report.problems if p.kind == "too-big")
    assert "--max-file-size" in fix


def test_wrong_encodings(bundle):
    model_file = named(bundle, MODEL)
    gzipped = (bundle / (model_file + ".gz")).read_bytes()
    brotli_bytes = (bundle / "bundle.mjs.br").read_bytes()
    report = _doctor(Host(bundle, replace={model_file: gzipped, "bundle.mjs": brotli_bytes,
                                           "app.mjs": (bundle / "app.mjs").read_bytes()},
                          encoding={"app.mjs": "br"}))
    assert _errors(report) == {("unencoded", model_file), ("unencoded", "bundle.mjs"),
                               ("wrong-encoding", "app.mjs")}
    assert gzip.decompress(gzipped) == (bundle / model_file).read_bytes()


def test_cache_headers(bundle):
    report = _doctor(Host(bundle, cache=lambda path: "public, max-age=31536000"))
    assert ("cache-stable", "bundle.json") in _errors(report)
    report = _doctor(Host(bundle, cache=lambda path: "max-age=600"))  # GitHub Pages
    assert report.ok
    # hashed names not cached as immutable, stable ones not revalidated: warnings, not errors
    assert {p.kind for p in report.problems} == {"cache-stable", "cache-hashed", "uncompressed"}


def test_hosts_are_told_apart_by_their_headers():
    assert detect_host({"server": "Netlify", "x-nf-request-id": "1"}) == "netlify"
    assert detect_host({"server": "cloudflare", "cf-ray": "1"}) == "cloudflare"
    assert detect_host({"server": "Vercel", "x-vercel-id": "1"}) == "vercel"
    assert detect_host({"server": "GitHub.com", "x-github-request-id": "1"}) == "github-pages"
    assert detect_host({"server": "AmazonS3", "x-amz-cf-id": "1"}) == "s3"
    assert detect_host({"server": "nginx/1.25.3"}) == "nginx"
    assert detect_host({"server": "SimpleHTTP/0.6"}) == "unknown"


def test_a_folder_that_is_no_bundle_is_one_clear_error(tmp_path):
    (tmp_path / "index.html").write_text("<!doctype html><p>hello")
    with hosting(Host(tmp_path, spa_fallback=True)) as url:
        with pytest.raises(BundlerError, match="bundle.json is not a bundle's manifest"):
            doctor(url)
        result = run_cli("doctor", url)
    assert result.returncode == 2 and result.stderr.startswith("Error: ")


def test_a_bundle_json_without_a_files_table_is_checked_from_its_variants(bundle):
    wasm_file = named(bundle, WASM)
    model_file = named(bundle, MODEL)
    legacy = json.loads((bundle / "bundle.json").read_text())
    del legacy["files"]
    report = _doctor(Host(bundle, replace={"bundle.json": json.dumps(legacy).encode()},
                          types={".wasm": "text/html"}))
    assert _errors(report) == {("content-type", wasm_file)}  # no sha256 to check without files
    checked = {row[0] for row in report.rows}
    assert {model_file, wasm_file, named(bundle, RUNTIME_MODULE), "index.html",
            "bundle.mjs"} <= checked


def test_the_sessions_are_listed_and_each_ones_model_is_checked(bundle):
    model_file = named(bundle, MODEL)
    data = json.loads((bundle / "bundle.json").read_text())
    (session,) = data["sessions"]
    decoder = {**session, "name": "decoder",
               "variants": [{**session["variants"][0], "file": "models/decoder.onnx"}]}
    two = {**data, "sessions": [session, decoder]}
    del two["files"]  # checked from the sessions' variants: the decoder's file is missing
    report = _doctor(Host(bundle, replace={"bundle.json": json.dumps(two).encode()}))
    assert report.sessions == [data["name"], "decoder"] == report.to_json()["sessions"]
    checked = {row[0]: row for row in report.rows}
    assert model_file in checked and checked["models/decoder.onnx"][1] == "404"
    # a version 1 bundle.json (no sessions): its one model, named after the bundle
    version_1 = {key: value for key, value in data.items() if key != "sessions"}
    version_1.update({key: session[key] for key in ("inputs", "outputs", "variants",
                                                    "default_variant")}, schema_version=1)
    report = _doctor(Host(bundle, replace={"bundle.json": json.dumps(version_1).encode()}))
    assert report.ok and report.sessions == [data["name"]]
    with hosting(Host(bundle)) as url:
        result = run_cli("doctor", url)
    assert f"sessions: {data['name']})" in result.stdout, result.stdout


def test_a_packed_model_is_checked_as_the_bytes_it_unpacks_to(tmp_path, runtime_dist):
    root = tmp_path / "dist"
    build(models.wide_dense(tmp_path), BuildOptions(output=root, runtime_dir=runtime_dist,
                                                    verify=False, execution_providers=("wasm",)))
    files = json.loads((root / "bundle.json").read_text())["files"]
    packed = next(entry["packed"] for entry in files if "packed" in entry)
    assert _errors(_doctor(Host(root, negotiate=True))) == set()
    planes = bytearray(gzip.decompress((root / packed["path"]).read_bytes()))
    planes[len(planes) // 2] ^= 0x01
    report = _doctor(Host(root, replace={packed["path"]: gzip.compress(bytes(planes))}))
    assert ("stale", packed["path"]) in _errors(report)
