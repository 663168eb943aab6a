"""preflight() and load()'s `too-large` refusal in Chromium, on real builds: a 120 MB model of
zeros (a few hundred KB on the wire) on a page whose navigator.deviceMemory says 0.25 GB is
refused before any request for models/, and a small bundle's bytes are counted as cached once a
load() has stored them; an EP whose adapter cannot hold the largest tensor is skipped for the other.
"""

import pytest

from tests import models

pytestmark = pytest.mark.browser

# What a low-memory device says (an init script runs before the page's own scripts).
LOW_MEMORY = "Object.defineProperty(Navigator.prototype, 'deviceMemory', { get: () => 0.25 });"
# A WebGPU adapter whose buffers hold 16 bytes at most.
TINY_BUFFERS = ("Object.defineProperty(GPUAdapter.prototype, 'limits', { get: () =>"
                " ({ maxBufferSize: 16, maxStorageBufferBindingSize: 16 }) });")

PREFLIGHT_AND_LOAD = """async ({ url, options }) => {
  const { load, preflight } = await import(url);
  const before = await preflight(options);
  try {
    const model = await load(options);
    const ep = model.ep;
    await model.release();
    return { before, ep, after: await preflight(options) };
  } catch (error) {
    return { before, error: error.message, code: error.code, reasons: error.reasons ?? null };
  }
}"""


PROBE = """async ({ url }) => {
  const { load } = await import(url);
  const model = await load();
  const result = { ep: model.ep, fallbackReasons: model.fallbackReasons };
  await model.release();
  return result;
}"""


@pytest.fixture(scope="module")
def preflight_bundles(tmp_path_factory, runtime_dist):
    from bundler.bundle.options import BuildOptions
    from bundler.commands.build import build

    root = tmp_path_factory.mktemp("preflight")
    built = {}
    for name in ["zeros_table", "multi_io"]:
        model = getattr(models, name)(root / "models")
        output = root / "site" / name
        manifest = build(model, BuildOptions(output=output, verify=False, runtime_dir=runtime_dist))
        built[name] = (output, manifest)
    return built


def test_a_model_too_large_for_the_device_is_refused_before_any_model_request(
        preflight_bundles, webgpu_browser, open_bundle):
    directory, manifest = preflight_bundles["zeros_table"]
    [variant] = manifest.session().variants
    assert variant.memory is not None and variant.memory.largest_tensor == 120_000_000
    with open_bundle(webgpu_browser, directory) as page:
        page.page.add_init_script(LOW_MEMORY)
        page.page.reload()
        result = page.evaluate(PREFLIGHT_AND_LOAD, {"url": page.base_url + "bundle.mjs",
                                                    "options": {}})
        requested = list(page.requests)
    assert result["code"] == "too-large", result
    assert [reason["code"] for reason in result["reasons"]] == ["too-large", "too-large"]
    assert ("navigator.deviceMemory is 256.0 MiB; no variant of this bundle fits on wasm"
            in result["error"])
    assert not any("/models/" in url for url in requested), requested
    before = result["before"]
    assert before["fits"] is False
    for entry in before["eps"]:
        assert entry["variant"] == "fp32" and entry["fits"] is False
        assert entry["memory"]["peak"] == variant.memory.peak
        deviceMemory = next(c for c in entry["checks"] if c["limit"] == "navigator.deviceMemory")
        assert deviceMemory == {"limit": "navigator.deviceMemory", "value": 2**28,
                                "need": variant.memory.peak, "what": "estimated peak memory",
                                "fits": False}
        model, wasm = entry["files"]
        assert model["path"] == variant.file and model["bytes"] == variant.bytes
        assert 0 < model["wire"] < 1_000_000  # the gzip siblings of its parts
        assert entry["download"] == model["wire"] + wasm["wire"] and entry["cached"] == 0


def test_preflight_counts_the_bytes_to_download_and_those_cached_after_a_load(
        preflight_bundles, plain_browser, open_bundle):
    directory, manifest = preflight_bundles["multi_io"]
    options = {"executionProviders": ["wasm"]}
    with open_bundle(plain_browser, directory) as page:
        result = page.evaluate(PREFLIGHT_AND_LOAD, {"url": page.base_url + "bundle.mjs",
                                                    "options": options})
    assert result.get("ep") == "wasm", result
    [before], [after] = result["before"]["eps"], result["after"]["eps"]
    assert before["fits"] and before["reason"] is None and before["cached"] == 0
    assert before["download"] == sum(file["wire"] for file in before["files"]) > 0
    assert [file["path"] for file in before["files"]] == [
        manifest.session().variants[0].file, manifest.runtime.builds["wasm"].wasm]
    assert after["download"] == 0
    assert after["cached"] == sum(file["bytes"] for file in after["files"]) > 0


def test_an_ep_whose_adapter_cannot_hold_the_largest_tensor_is_skipped_for_the_next(
        preflight_bundles, webgpu_browser, open_bundle):
    directory, manifest = preflight_bundles["multi_io"]
    with open_bundle(webgpu_browser, directory) as page:
        page.page.add_init_script(TINY_BUFFERS)
        page.page.reload()
        result = page.evaluate(PROBE, {"url": page.base_url + "bundle.mjs"})
    assert result["ep"] == "wasm", result
    [reason] = result["fallbackReasons"]
    largest = manifest.session().variants[0].memory.largest_tensor
    assert largest > 16 and reason["code"] == "too-large" and reason["ep"] == "webgpu"
    assert reason["detail"] == (
        f"webgpu skipped: variant 'fp32' needs {largest} bytes (largest tensor) but the WebGPU"
        " adapter's maxBufferSize is 16 bytes; no variant of this bundle fits on webgpu")
