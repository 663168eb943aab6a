"""The bundle.mjs contract and the demo page, driven in headless Chromium."""

import json
import shutil

import numpy as np
import pytest

from bundler.bundle import manifest as manifest_file
from bundler.bundle.files import fetched_path
from bundler.verify.reference import run_native
from tests import models
from tests.sessions import add_session

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def contract_bundles(tmp_path_factory, runtime_dist):
    from bundler.bundle.options import BuildOptions
    from bundler.commands.build import build

    root = tmp_path_factory.mktemp("contract")
    built = {}
    for name in ["multi_io", "scalar_input", "digits", "ml_classifier", "hostile_names"]:
        model = None if name == "digits" else getattr(models, name)(root / "models")
        output = root / "site" / name
        manifest = build(model, BuildOptions(output=output, verify=False, runtime_dir=runtime_dist))
        built[name] = (output, manifest.to_json())
    # As a verified build records it (the WebGPU build has no ai.onnx.ml kernels):
    directory, manifest = built["ml_classifier"]
    unmeasured = {"max_abs_error": None, "max_normalized_error": None}
    manifest["verification"] = {"status": "passed", "results": {"fp32": {
        "webgpu": {"passed": False, "unsupported": "runtime", **unmeasured,
                   "error": "webgpu session creation failed: No Op registered for"
                            " LinearClassifier with domain_version of 1"},
        "wasm": {"passed": True, **unmeasured}}}}
    manifest_file.dump(directory, manifest_file.from_json(manifest))  # and bundle.files.mjs
    return root / "site", built


RUN = """async ({ url, options, feeds }) => {
  const { load } = await import(url);
  const model = await load(options);
  const out = await model.run(feeds);
  const plain = Object.fromEntries(Object.entries(out).map(
    ([k, t]) => [k, { type: t.type, dims: t.dims, data: Array.from(t.data, Number) }]));
  return { ep: model.ep, fallbackReason: model.fallbackReason, variant: model.variant,
           inputs: model.inputs, outputs: plain };
}"""


def test_plain_arrays_int64_and_scalars_are_converted(contract_bundles, webgpu_browser,
                                                      open_bundle):
    site, built = contract_bundles
    directory, manifest = built["multi_io"]
    x = [[0.1, 0.2, 0.3, 0.4], [0.5, -0.6, 0.7, 0.8]]
    ids = [[0, 1, 7], [3, 3, 2]]
    mask = [[1, 0, 1], [1, 1, 1]]
    feeds = {"x": {"dims": [2, 4], "data": sum(x, [])},
             "ids": {"type": "int64", "dims": [2, 3], "data": sum(ids, [])},
             "mask": {"dims": [2, 3], "data": sum(mask, [])}}
    with open_bundle(webgpu_browser, directory) as page:
        result = page.evaluate(RUN, {"url": page.base_url + "bundle.mjs",
                                     "options": {"executionProviders": ["wasm"]}, "feeds": feeds})
        assert all(url.startswith(page.base_url) for url in page.requests), page.requests
    native = run_native(directory / manifest["sessions"][0]["variants"][0]["file"], {
        "x": np.array(x, np.float32), "ids": np.array(ids, np.int64),
        "mask": np.array(mask, np.int32)})
    assert result["ep"] == "wasm" and result["fallbackReason"] is None
    assert result["inputs"] == manifest["sessions"][0]["inputs"]
    assert result["outputs"]["y"]["dims"] == [2, 2]
    np.testing.assert_allclose(result["outputs"]["y"]["data"], native["y"].ravel(), atol=1e-5)
    assert result["outputs"]["count"] == {"type": "int32", "dims": [2],
                                          "data": native["count"].tolist()}

    scalar_dir, _ = built["scalar_input"]
    with open_bundle(webgpu_browser, scalar_dir) as page:
        result = page.evaluate(RUN, {"url": page.base_url + "bundle.mjs",
                                     "options": {"executionProviders": ["wasm"]},
                                     "feeds": {"x": {"data": [1, 2, 3]}, "scale": 2,
                                               "step": {"dims": [], "data": [3]}}})
    assert result["outputs"]["y"]["data"] == [5.0, 7.0, 9.0]


REJECT = """async ({ url, feeds }) => {
  const { load, BundleError } = await import(url);
  const model = await load({ executionProviders: ['wasm'] });
  try { await model.run(feeds); return null; } catch (error) {
    return { message: error.message, code: error.code,
             isBundleError: error instanceof BundleError };
  }
}"""


@pytest.mark.parametrize(("feeds", "code", "message"), [
    ({"x": {"dims": [1, 4], "data": [0, 0, 0, 0]}}, "input-name",
     "missing input 'ids' (int64 [batch, 3])"),
    ({"nope": 1}, "input-name", "unknown input 'nope'; this model takes: 'x' (float32 [batch, 4])"),
    ({"x": {"type": "int32", "dims": [1, 4], "data": [0, 0, 0, 0]}}, "input-type",
     "input 'x': expected float32, got int32"),
    ({"x": {"dims": [1, 5], "data": [0, 0, 0, 0, 0]}}, "input-shape",
     "input 'x': expected shape [batch, 4], got [1, 5]"),
    ({"x": {"dims": [1, 4], "data": [0, 0, 0]}}, "input-shape",
     "input 'x': dims [1, 4] hold 4 values, data has 3"),
])
def test_bad_feeds_reject_naming_the_input(contract_bundles, webgpu_browser, open_bundle, feeds,
                                           code, message):
    _, built = contract_bundles
    directory, _ = built["multi_io"]
    complete = {"x": {"dims": [1, 4], "data": [0, 0, 0, 0]},
                "ids": {"dims": [1, 3], "data": [0, 0, 0]},
                "mask": {"dims": [1, 3], "data": [0, 0, 0]}}
    feeds = feeds if "missing" in message or "unknown" in message else {**complete, **feeds}
    if "unknown" in message:
        feeds = {**complete, **feeds}
    with open_bundle(webgpu_browser, directory) as page:
        got = page.evaluate(REJECT, {"url": page.base_url + "bundle.mjs", "feeds": feeds})
    assert got is not None and got["message"].startswith(message), got
    assert got["code"] == code and got["isBundleError"], got


PROBE = """async ({ url, options }) => {
  const { load } = await import(url);
  const stages = [];
  try {
    const model = await load({ ...options, onProgress: (e) => stages.push(e.stage) });
    return { ep: model.ep, fallbackReason: model.fallbackReason,
             fallbackReasons: model.fallbackReasons, stages };
  } catch (error) {
    return { error: error.message, code: error.code, reasons: error.reasons ?? null };
  }
}"""


def test_default_load_prefers_webgpu_and_reports_progress(contract_bundles, webgpu_browser,
                                                          open_bundle):
    _, built = contract_bundles
    with open_bundle(webgpu_browser, built["digits"][0]) as page:
        result = page.evaluate(PROBE, {"url": page.base_url + "bundle.mjs", "options": {}})
    assert result["ep"] == "webgpu" and result["fallbackReason"] is None
    assert result["fallbackReasons"] == []
    assert {"manifest", "runtime", "model", "session"} <= set(result["stages"])


def test_without_webgpu_load_falls_back_and_says_why(contract_bundles, plain_browser, open_bundle):
    _, built = contract_bundles
    with open_bundle(plain_browser, built["digits"][0]) as page:
        fallback = page.evaluate(PROBE, {"url": page.base_url + "bundle.mjs", "options": {}})
        forced = page.evaluate(PROBE, {"url": page.base_url + "bundle.mjs",
                                       "options": {"executionProviders": ["webgpu"]}})
    assert fallback["ep"] == "wasm"
    assert fallback["fallbackReason"].startswith("WebGPU unavailable")
    [reason] = fallback["fallbackReasons"]
    assert reason["ep"] == "webgpu" and reason["code"] == "webgpu-unavailable"
    assert reason["detail"] == fallback["fallbackReason"]
    assert forced["error"].startswith("no execution provider could run this model: WebGPU")
    assert forced["code"] == "no-execution-provider"
    assert [r["code"] for r in forced["reasons"]] == ["webgpu-unavailable"]


def test_load_skips_an_ep_that_failed_verification_unless_forced(tmp_path, contract_bundles,
                                                                 webgpu_browser, open_bundle):
    _, built = contract_bundles
    directory = tmp_path / "digits"
    shutil.copytree(built["digits"][0], directory)
    manifest = {**built["digits"][1], "verification": {"status": "failed", "results": {
        "fp32": {"webgpu": {"passed": False, "max_abs_error": 0.5, "max_normalized_error": 0.5},
                 "wasm": {"passed": True, "max_abs_error": 0.0, "max_normalized_error": 0.0}}}}}
    manifest_file.dump(directory, manifest_file.from_json(manifest))  # and bundle.files.mjs
    with open_bundle(webgpu_browser, directory) as page:
        skipped = page.evaluate(PROBE, {"url": page.base_url + "bundle.mjs", "options": {}})
        forced = page.evaluate(PROBE, {"url": page.base_url + "bundle.mjs",
                                       "options": {"ignoreVerification": True}})
    assert skipped["ep"] == "wasm"
    assert "webgpu skipped: it failed verification" in skipped["fallbackReason"]
    assert [r["code"] for r in skipped["fallbackReasons"]] == ["verification-failed"]
    assert forced["ep"] == "webgpu"


def test_bundle_works_under_a_sub_path(contract_bundles, plain_browser, open_bundle):
    site, built = contract_bundles
    with open_bundle(plain_browser, site) as page:
        result = page.evaluate(PROBE, {"url": page.base_url + "scalar_input/bundle.mjs",
                                       "options": {}})
    assert result["ep"] == "wasm", result


def test_demo_page_draws_runs_and_predicts(contract_bundles, webgpu_browser, open_bundle, tmp_path):
    _, built = contract_bundles
    with open_bundle(webgpu_browser, built["digits"][0], path="index.html") as page:
        page.page.wait_for_selector("body[data-ready=true]")
        assert page.page.text_content("#status").startswith("Running on WebGPU")
        canvas = page.page.locator("canvas.draw").bounding_box()
        page.page.mouse.move(canvas["x"] + canvas["width"] * 0.5, canvas["y"] + 20)
        page.page.mouse.down()
        page.page.mouse.move(canvas["x"] + canvas["width"] * 0.5,
                             canvas["y"] + canvas["height"] - 20, steps=10)
        page.page.mouse.up()
        page.page.wait_for_function("document.getElementById('prediction').textContent !== ''")
        assert page.page.text_content("#prediction").startswith("Predicted class: ")
        assert "first run" in page.page.text_content("#timings")
        page.page.screenshot(path=str(tmp_path / "demo.png"))


def test_load_skips_an_ep_whose_runtime_build_cannot_run_the_model(contract_bundles,
                                                                   webgpu_browser, open_bundle):
    _, built = contract_bundles
    with open_bundle(webgpu_browser, built["ml_classifier"][0]) as page:
        result = page.evaluate(PROBE, {"url": page.base_url + "bundle.mjs", "options": {}})
        requested = list(page.requests)
    assert result["ep"] == "wasm"
    assert result["fallbackReason"].startswith(
        "webgpu skipped: this onnxruntime-web build cannot run this model")
    assert [r["code"] for r in result["fallbackReasons"]] == ["runtime-unsupported"]
    assert not any("webgpu" in url or "asyncify" in url for url in requested), requested


def test_bad_options_and_a_newer_schema_version_reject_with_their_codes(
        tmp_path, contract_bundles, plain_browser, open_bundle):
    _, built = contract_bundles
    directory = tmp_path / "digits"
    shutil.copytree(built["digits"][0], directory)
    with open_bundle(plain_browser, directory) as page:
        url = page.base_url + "bundle.mjs"
        string_ep = page.evaluate(PROBE, {"url": url, "options": {"executionProviders": "wasm"}})
        variant = page.evaluate(PROBE, {"url": url, "options": {"variant": "int4"}})
        # A bundle.json read from a baseUrl (bundle.mjs's own copy is in bundle.files.mjs)
        (directory / "bundle.json").write_text(
            json.dumps({**built["digits"][1], "schema_version": 3}))
        newer = page.evaluate(PROBE, {"url": url, "options": {"baseUrl": page.base_url}})
    assert string_ep["code"] == "bad-option", string_ep
    assert "not the string 'wasm': write executionProviders: ['wasm']" in string_ep["error"]
    assert variant["code"] == "bad-option" and "unknown variant 'int4'" in variant["error"]
    assert newer["code"] == "schema-version", newer
    assert "schema_version 3" in newer["error"] and "schema_version 2 at most" in newer["error"]


SESSIONS = """async ({ url, options, feeds }) => {
  const { load, loadManifest, sessionsOf } = await import(url);
  const names = sessionsOf(await loadManifest(options.baseUrl)).map((s) => s.name);
  let model;
  try { model = await load({ executionProviders: ['wasm'], ...options }); } catch (error) {
    return { names, code: error.code, error: error.message };
  }
  const out = feeds && await model.run(feeds);
  return { names, session: model.session, variant: model.variant,
           inputs: model.inputs.map((s) => s.name),
           y: out && Array.from(out.y.data, Number) };
}"""


def test_a_pipelines_sessions_are_loaded_by_name_and_version_1_as_one(
        tmp_path, contract_bundles, plain_browser, open_bundle):
    _, built = contract_bundles
    directory = tmp_path / "pipeline"
    shutil.copytree(built["digits"][0], directory)
    scalar_dir, scalar = built["scalar_input"]
    (session,) = scalar["sessions"]
    specs = manifest_file.from_json(scalar).session()
    add_session(directory, "scale", scalar_dir / session["variants"][0]["file"], specs.inputs,
                specs.outputs)
    feeds = {"x": {"data": [1, 2, 3]}, "scale": 2, "step": {"dims": [], "data": [3]}}
    with open_bundle(plain_browser, directory) as page:
        url = page.base_url + "bundle.mjs"
        scale = page.evaluate(SESSIONS, {"url": url, "options": {"session": "scale"},
                                         "feeds": feeds})
        first = page.evaluate(SESSIONS, {"url": url, "options": {}, "feeds": None})
        unknown = page.evaluate(SESSIONS, {"url": url, "options": {"session": "joiner"},
                                           "feeds": None})
        # a version 1 bundle.json (read from baseUrl): its one model, named after the bundle
        data = built["digits"][1]
        old = {key: value for key, value in data.items() if key != "sessions"}
        old.update({key: value for key, value in data["sessions"][0].items() if key != "name"},
                   schema_version=1)
        (directory / "bundle.json").write_text(json.dumps(old))
        version_1 = page.evaluate(SESSIONS, {"url": url, "options": {"baseUrl": page.base_url},
                                             "feeds": None})
    assert scale == {"names": ["digits", "scale"], "session": "scale", "variant": "fp32",
                     "inputs": ["x", "scale", "step"], "y": [5.0, 7.0, 9.0]}, scale
    assert (first["session"], first["inputs"]) == ("digits", ["image"]), first
    assert unknown["code"] == "bad-option", unknown
    assert "unknown session 'joiner'; this bundle has: digits, scale" in unknown["error"]
    assert version_1["names"] == ["digits"] and version_1["session"] == "digits", version_1


RETRY = """async ({ url }) => {
  const { load } = await import(url);
  try {
    const model = await load({ executionProviders: ['wasm'] });
    await model.release();
    return { ep: model.ep };
  } catch (error) { return { code: error.code, reasons: error.reasons }; }
}"""


@pytest.mark.parametrize("missing", ["module", "wasm"])  # ort.wasm.min.*.mjs, its .wasm
def test_load_works_again_once_a_runtime_file_that_failed_to_fetch_is_back(
        tmp_path, contract_bundles, plain_browser, open_bundle, missing):
    _, built = contract_bundles
    directory = tmp_path / "digits"
    shutil.copytree(built["digits"][0], directory)
    manifest = built["digits"][1]
    path = manifest["runtime"]["builds"]["wasm"][missing]
    entry = next(entry for entry in manifest["files"] if entry["path"] == path)
    # the module is imported by its name, the .wasm fetched as its gzip sibling
    runtime_file = directory / (fetched_path(entry) if missing == "wasm" else path)
    with open_bundle(plain_browser, directory) as page:
        url = page.base_url + "bundle.mjs"
        runtime_file.rename(runtime_file.with_suffix(".away"))
        failed = page.evaluate(RETRY, {"url": url})
        runtime_file.with_suffix(".away").rename(runtime_file)
        retried = page.evaluate(RETRY, {"url": url})
    assert failed["code"] == "no-execution-provider", failed
    assert [(r["ep"], r["code"]) for r in failed["reasons"]] == [("wasm", "fetch-failed")]
    assert retried == {"ep": "wasm"}


CONCURRENT = """async ({ url, ep }) => {
  const { load } = await import(url);
  const a = await load({ executionProviders: [ep] });
  const b = await load({ executionProviders: [ep] });
  const image = (i) => ({ dims: [1, 1, 8, 8],
    data: Float32Array.from({ length: 64 }, (_, k) => ((k * (i + 3)) % 17) / 17) });
  const values = (out) => Array.from(out.probabilities.data);
  const alone = [];
  for (let i = 0; i < 8; i++) alone.push(values(await a.run({ image: image(i) })));
  const together = await Promise.all(Array.from({ length: 8 },
    (_, i) => (i % 2 ? a : b).run({ image: image(i) })));
  await Promise.all([a.release(), b.release()]);
  let released = null;
  try { await a.run({ image: image(0) }); } catch (error) { released = error.code; }
  return { eps: [a.ep, b.ep], alone, together: together.map(values), released };
}"""


def test_two_models_on_one_runtime_run_concurrently(contract_bundles, webgpu_browser,
                                                    open_bundle):
    # Unqueued, two sessions of one onnxruntime-web module running at once hang on WebGPU.
    _, built = contract_bundles
    with open_bundle(webgpu_browser, built["digits"][0]) as page:
        page.page.set_default_timeout(120_000)
        result = page.evaluate(CONCURRENT, {"url": page.base_url + "bundle.mjs", "ep": "webgpu"})
    assert result["eps"] == ["webgpu", "webgpu"] and result["released"] == "released"
    # the same session on the same inputs, queued: the same float32 results to rounding
    np.testing.assert_allclose(result["together"], result["alone"], atol=1e-6)


def test_demo_page_shows_model_strings_as_text(contract_bundles, webgpu_browser, open_bundle):
    _, built = contract_bundles
    dialogs = []
    with open_bundle(webgpu_browser, built["hostile_names"][0], path="index.html") as page:
        page.page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.page.wait_for_selector("body[data-ready=true]")
        page.page.click("#run")
        page.page.wait_for_function(
            "document.querySelector('tr[data-output] td:nth-child(4)').textContent !== ''")
        shown = page.page.eval_on_selector_all("#input-controls code",
                                               "els => els.map(e => e.textContent)")
        images = page.page.eval_on_selector_all("img", "els => els.length")
        bold = page.page.eval_on_selector_all("b", "els => els.length")
        row = page.page.locator("tr[data-output] code").text_content()
        status = page.page.text_content("#status")
    assert shown == [models.HOSTILE_INPUT]
    assert row == models.HOSTILE_OUTPUT
    assert images == 0 and bold == 0 and dialogs == []
    assert status.startswith("Running on"), status
