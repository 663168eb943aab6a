"""preflight() and load()'s `too-large` refusal in Chromium, on real builds: a 120 MB model of
zeros (a few hundred KB on the wire) on a page whose navigator.deviceMemory says 0.25 GB is
refused before any request for models/, and a small bundle's bytes are counted as cached once a
load() has stored them; an EP whose adapter cannot hold the largest tensor is skipped for the other.
An fp16 default on WebGPU is loaded only where the adapter has shader-f16.
"""

import pytest

from tests import models, quant_models

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
    output = root / "site" / "fp16"
    model = quant_models.mlp_classifier(root / "models" / "mlp.onnx")
    built["fp16"] = (output, build(model, BuildOptions(
        output=output, runtime_dir=runtime_dist, variants=("fp32", "fp16"),
        default_variant={"webgpu": "fp16", "wasm": "fp32"})))  # verified: the build's check too
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


# headless Chromium's SwiftShader adapter has no shader-f16 (requestDevice refuses it), and no
# other adapter runs here: a page whose adapter reports the feature is this stub of the browser's
# feature list (onnxruntime-web then asks the device for it, which SwiftShader refuses).
REPORTS_SHADER_F16 = ("{ const real = Object.getOwnPropertyDescriptor(GPUAdapter.prototype,"
                      " 'features').get; Object.defineProperty(GPUAdapter.prototype, 'features',"
                      " { get() { return new Set([...real.call(this), 'shader-f16']); } }); }")

LOAD_AND_RUN = """async ({ url, options }) => {
  const { load, preflight } = await import(url);
  const planned = await preflight(options);
  try {
    const model = await load(options);
    const out = await model.run({ x: { dims: [2, 64], data: new Float32Array(128).fill(0.25) } });
    const result = { ep: model.ep, variant: model.variant, variantReason: model.variantReason,
                     fallbackReasons: model.fallbackReasons, logits: Array.from(out.logits.data) };
    await model.release();
    return { planned, ...result };
  } catch (error) {
    return { planned, error: error.message, code: error.code };
  }
}"""


def _fp16_page(bundles, browser, open_bundle, options, init_script=None):
    directory, manifest = bundles["fp16"]
    with open_bundle(browser, directory) as page:
        if init_script:
            page.page.add_init_script(init_script)
            page.page.reload()
        result = page.evaluate(LOAD_AND_RUN, {"url": page.base_url + "bundle.mjs",
                                              "options": options})
        # the file names fetched, without a compressed (or packed) sibling's suffix
        models_requested = [url.split("/models/")[1].removesuffix(".gz").removesuffix(".br")
                            .removesuffix(".planes") for url in page.requests if "/models/" in url]
    files = {variant.name: variant.file.split("/")[1] for variant in manifest.session().variants}
    return result, models_requested, files


def test_an_fp16_default_on_an_adapter_without_shader_f16_loads_another_variant_on_webgpu(
        preflight_bundles, webgpu_browser, open_bundle):
    _, manifest = preflight_bundles["fp16"]
    fp16 = manifest.session().variant("fp16")
    assert fp16.requires == ["shader-f16"]
    assert manifest.session().variant("fp32").requires is None
    # the build's own check (SwiftShader) recorded fp16 on WebGPU as unsupported by the device
    assert manifest.verification.results["fp16"]["webgpu"].unsupported == "device"
    assert manifest.verification.results["fp16"]["wasm"].passed
    result, requested, files = _fp16_page(preflight_bundles, webgpu_browser, open_bundle, {})
    detail = ("webgpu: variant 'fp16' needs the WebGPU feature shader-f16, which this adapter"
              " lacks; loaded 'fp32' instead")
    assert result.get("ep") == "webgpu" and result["variant"] == "fp32", result
    assert result["variantReason"] == {"ep": "webgpu", "code": "feature-missing",
                                       "variant": "fp16", "detail": detail}
    assert result["fallbackReasons"] == [] and len(result["logits"]) == 20
    webgpu = result["planned"]["eps"][0]
    assert webgpu["variant"] == "fp32" and webgpu["variantReason"]["detail"] == detail
    assert files["fp16"] not in requested and files["fp32"] in requested  # fp16 never fetched
    # asked for by name, fp16 is not swapped: WebGPU is skipped and WASM runs it
    result, requested, _ = _fp16_page(preflight_bundles, webgpu_browser, open_bundle,
                                      {"variant": "fp16"})
    assert result.get("ep") == "wasm" and result["variant"] == "fp16", result
    [reason] = result["fallbackReasons"]
    assert reason["code"] == "feature-missing" and reason["detail"].endswith(
        "which this adapter lacks (asked for by name)")


def test_an_adapter_that_reports_shader_f16_gets_the_fp16_variant(
        preflight_bundles, webgpu_browser, open_bundle):
    result, requested, files = _fp16_page(preflight_bundles, webgpu_browser, open_bundle, {},
                                          REPORTS_SHADER_F16)
    webgpu = result["planned"]["eps"][0]
    assert webgpu["variant"] == "fp16" and webgpu["variantReason"] is None, webgpu
    assert files["fp16"] in requested  # load() fetched fp16 for WebGPU …
    # … and onnxruntime-web asked SwiftShader's device for the feature, which it has not got
    assert result.get("ep") == "wasm" and result["variant"] == "fp32", result
    [reason] = result["fallbackReasons"]
    assert reason["code"] == "session-failed" and "shader-f16" in reason["detail"]
