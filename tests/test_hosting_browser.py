"""A bundle on static hosts in headless Chromium: a plain host under a sub-path (GitHub Pages-like,
no headers) with the COI worker, and a CDN-like host serving the precompressed siblings; a model
and a runtime split into parts, the persistent cache, and integrity."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest

from bundler.bundle.files import asset_paths, fetched_path
from bundler.bundle.options import BuildOptions
from bundler.commands.build import build
from bundler.hosting.sizes import MIB
from tests import models
from tests.conftest import run_cli
from tests.hostsim import Host, hosting, open_test_page

pytestmark = pytest.mark.browser

LIMIT = 4 * MIB
LOAD = """async ({ options }) => {
  const { load } = await import(new URL('bundle.mjs', location.href).href);
  const events = [];
  try {
    const model = await load({ executionProviders: ['wasm'], ...options,
                               onProgress: (event) => events.push(event) });
    const x = new Float32Array(256).map((_, i) => Math.sin(i));
    const out = await model.run({ x: { data: x, dims: [1, 256] } });
    const result = { y: Array.from(out.y.data), threads: model.threads,
                     isolated: model.crossOriginIsolated, events };
    await model.release();
    return result;
  } catch (error) {
    return { error: String(error.message), code: error.code ?? null };
  }
}"""


@pytest.fixture(scope="module")
def split_bundle(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path
                 ) -> tuple[Path, np.ndarray]:
    work = tmp_path_factory.mktemp("hosting")
    source = models.wide_dense(work)
    root = work / "dist"
    build(source, BuildOptions(output=root, runtime_dir=runtime_dist, verify=False,
                               execution_providers=("wasm",), max_file_size=LIMIT))
    x = np.sin(np.arange(256, dtype=np.float32))[None, :]
    session = onnxruntime.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    return root, session.run(None, {"x": x})[0]


def _entry(root: Path, prefix: str, suffix: str = "") -> dict[str, Any]:
    import json

    manifest = json.loads((root / "bundle.json").read_text())
    return next(entry for entry in manifest["files"]
                if entry["path"].startswith(prefix) and entry["path"].endswith(suffix))


def _matches_native(result: dict[str, Any], expected: np.ndarray) -> None:
    assert "error" not in result, result
    got = np.asarray(result["y"], dtype=np.float32).reshape(expected.shape)
    # fp32 on WASM vs native CPU: summation order differs; allow 1e-5 of the output's range.
    assert np.abs(got - expected).max() <= 1e-5 * np.ptp(expected) + 1e-6


def _check_progress(result: dict[str, Any], stage: str, total: int) -> None:
    events = [event for event in result["events"] if event["stage"] == stage]
    loaded = [event["loaded"] for event in events]
    assert loaded == sorted(loaded) and loaded[-1] == total, loaded
    assert {event["total"] for event in events} == {total}


def _heavy(sent: dict[str, int]) -> dict[str, int]:
    return {path: count for path, count in sent.items()
            if path.startswith("models/") or ".wasm" in path}


def test_plain_host_under_a_sub_path_with_the_coi_worker_and_the_cache(
        split_bundle, plain_browser, browser_settings):
    root, expected = split_bundle
    assert all(path.stat().st_size <= LIMIT for path in root.rglob("*") if path.is_file())
    model, wasm = _entry(root, "models/"), _entry(root, "runtime/ort-wasm-simd-threaded.", ".wasm")
    assert len(model["parts"]) == 2 and len(wasm["parts"]) == 4
    host = Host(root, prefix="/some/sub/path/", isolation=False)
    with hosting(host) as url, open_test_page(
            plain_browser, url, browser_settings.timeouts_ms["load"]) as page:
        first = page.evaluate(LOAD, {"options": {}})
        _matches_native(first, expected)
        assert (first["threads"], first["isolated"]) == (1, False)
        _check_progress(first, "model", model["bytes"])
        _check_progress(first, "runtime", wasm["bytes"])
        # A host that compresses nothing still sends gzip's bytes: the gzip siblings, as they are.
        gzipped = {fetched_path(piece) for entry in (model, wasm) for piece in entry["parts"]}
        fetched = {path: sent for path, sent in _heavy(host.sent).items()
                   if not path.endswith(".mjs")}  # the runtime's ES modules are imported
        assert fetched == {path: (root / path).stat().st_size for path in gzipped}
        assert gzipped <= set(asset_paths(json.loads((root / "bundle.json").read_text())))
        assert sum(fetched.values()) < 0.5 * wasm["bytes"] + model["bytes"]
        assert page.evaluate("navigator.serviceWorker.ready.then(() => true)")
        host.sent.clear()
        host.requested.clear()
        page.reload()
        assert page.evaluate("crossOriginIsolated")
        second = page.evaluate(LOAD, {"options": {"numThreads": 2}})
        _matches_native(second, expected)
        assert (second["threads"], second["isolated"]) == (2, True)
        assert _heavy(host.sent) == {}, host.sent  # from Cache Storage: no model or wasm bytes
        assert host.requested["bundle.files.mjs"] == 1  # stable names are revalidated


def test_cdn_host_with_precompressed_siblings_and_a_tampered_part(
        split_bundle, plain_browser, browser_settings):
    root, expected = split_bundle
    model = _entry(root, "models/")
    host = Host(root, prefix="/cdn/", negotiate=True)
    timeout = browser_settings.timeouts_ms["load"]
    with hosting(host) as url:
        with open_test_page(plain_browser, url, timeout) as page:
            loaded = page.evaluate(LOAD, {"options": {}})
            _matches_native(loaded, expected)
            _check_progress(loaded, "model", model["bytes"])  # real sizes, not the encoded ones
            wasm = _entry(root, "runtime/ort-wasm-simd-threaded.", ".wasm")
            assert sum(_heavy(host.sent).values()) < 0.5 * sum(
                p["bytes"] for p in model["parts"]) + sum(p["bytes"] for p in wasm["parts"])
            part = model["parts"][1]["path"]
            # its packed sibling (the float weights as byte planes): sent as it is
            fetched = fetched_path(model["parts"][1])
            assert fetched == part + ".planes.gz"
            tampered = bytearray(gzip.decompress((root / fetched).read_bytes()))
            tampered[len(tampered) // 2] ^= 0x01
            host.replace[fetched] = gzip.compress(bytes(tampered))
            _matches_native(page.evaluate(LOAD, {"options": {}}), expected)  # checked bytes, cached
        # A visitor with nothing cached (no Cache Storage, no HTTP cache of the immutable names)
        # gets the tampered part: refused, also after clearing the cache and with cache: false.
        with open_test_page(plain_browser, url, timeout) as page:
            refused = page.evaluate(LOAD, {"options": {}})
            assert refused["code"] == "integrity" and part in refused["error"], refused
            assert page.evaluate("""async () => (await import(new URL('bundle.mjs', location.href)
                                    .href)).clearCache()""")  # the runtime's wasm was stored
            assert page.evaluate(LOAD, {"options": {"cache": False}})["code"] == "integrity"
        del host.replace[fetched]
        warnings: list[str] = []  # a full quota: memory only, with a warning
        with open_test_page(plain_browser, url, timeout, before=lambda page: page.on(
                "console", lambda message: warnings.append(message.text))) as page:
            page.context.new_cdp_session(page).send("Storage.overrideQuotaForOrigin", {
                "origin": url.split("/cdn/")[0], "quotaSize": 1024})
            _matches_native(page.evaluate(LOAD, {"options": {}}), expected)
        assert any("the storage quota is full" in text for text in warnings), warnings


def test_bundle_test_checks_a_split_model_natively_and_in_the_browser(split_bundle):
    root, _ = split_bundle
    result = run_cli("test", root, "--ep", "wasm", "--no-fallback")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All checks passed." in result.stderr
