"""The operator support data (bundler/data/ops-1.31.1.json) against the runtime it describes.

Each one-node model of tests/op_models.py runs in headless Chromium on the runtime files of a
real bundle. WebGPU: onnxruntime-web's session option `session.disable_cpu_ep_fallback` makes
session creation fail when any node would run on the CPU EP, so an op the data claims for WebGPU
must create, run and match native onnxruntime with it, an op it does not claim must fail with it
and still run without it (the CPU fallback), and an ai.onnx.ml op must fail either way. WASM:
every op the CPU data claims must run and match. The page (tests/js/ops_page.mjs) opens each
session through the bundle's own session path with its internal session options.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from bundler.bundle.options import BuildOptions
from bundler.commands.build import build
from bundler.model.opsupport import load_support, schema_version
from bundler.verify.harness import harness_call
from tests.op_models import CASES, OpCase, feeds

pytestmark = pytest.mark.browser

TYPES = {np.dtype(np.float32): "float32", np.dtype(np.int32): "int32",
         np.dtype(np.int64): "int64", np.dtype(np.bool_): "bool"}

OPS_PAGE = Path(__file__).parent / "js" / "ops_page.mjs"


@pytest.fixture(scope="module")
def op_site(tmp_path_factory, runtime_dist) -> tuple[Path, dict]:
    site = tmp_path_factory.mktemp("ops") / "site"
    # unsplit files: the page names the runtime's files by path, not by bundle.json's parts
    manifest = build(None, BuildOptions(output=site, verify=False, runtime_dir=runtime_dist,
                                        max_file_size="64MiB")).to_json()
    for case in CASES:
        case.save(site / "ops")
    return site, manifest


def _claim(case: OpCase, target: str) -> str:
    domain = case.domain or "ai.onnx"
    version = schema_version(domain, case.op, 1 if case.domain else case.opset)
    return load_support().status(target, domain, case.op, version)


def _native(case: OpCase) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(case.model().SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds(case)), strict=True))


def _run_in_browser(browser, open_bundle, site: Path, manifest: dict, ep: str) -> dict:
    cases = [{"name": case.name, "url": f"ops/{case.name}.onnx",
              "feeds": {name: {"type": TYPES[value.dtype], "dims": list(value.shape),
                               "data": value.astype(np.float64).ravel().tolist()}
                        for name, value in feeds(case).items()}} for case in CASES]
    shutil.copyfile(OPS_PAGE, site / OPS_PAGE.name)
    with open_bundle(browser, site) as page:
        return page.evaluate(harness_call(f"/{OPS_PAGE.name}", "runAll"), {
            "base": page.base_url, "build": manifest["runtime"]["builds"][ep], "ep": ep,
            "cases": cases})


def _mismatch(case: OpCase, got: dict, atol: float, rtol: float) -> str | None:
    for name, expected in _native(case).items():
        value = np.asarray(got[name]["data"], dtype=np.float64).reshape(got[name]["dims"])
        if value.shape != expected.shape or not np.allclose(
                value, expected.astype(np.float64), atol=atol, rtol=rtol):
            return f"{case.name}: output {name} {value.ravel()[:6]} != {expected.ravel()[:6]}"
    return None


def test_webgpu_claims_match_the_runtime(op_site, webgpu_browser, open_bundle, browser_settings):
    site, manifest = op_site
    results = _run_in_browser(webgpu_browser, open_bundle, site, manifest, "webgpu")
    tolerance = browser_settings.tolerances["webgpu"]
    wrong = []
    for case in CASES:
        claim, result = _claim(case, "webgpu"), results[case.name]
        if claim == "supported":
            if "strict" not in result:
                wrong.append(f"{case.name}: claimed for WebGPU, but with CPU fallback disabled:"
                             f" {result.get('strictError')}")
            elif problem := _mismatch(case, result["strict"], **tolerance):
                wrong.append(problem)
        elif claim == "fallback":
            if "strict" in result:
                wrong.append(f"{case.name}: not claimed for WebGPU, yet it ran with CPU fallback"
                             " disabled")
            elif "loose" not in result:
                wrong.append(f"{case.name}: should fall back to CPU, but: {result['looseError']}")
            elif problem := _mismatch(case, result["loose"], **tolerance):
                wrong.append(problem)
        elif "strict" in result or "loose" in result:
            wrong.append(f"{case.name}: claimed unsupported in the WebGPU build, yet it ran")
    assert not wrong, "\n".join(wrong)
    claims = [_claim(case, "webgpu") for case in CASES]
    assert claims.count("supported") >= 20 and claims.count("fallback") >= 10
    assert claims.count("unsupported") >= 1


def test_wasm_claims_match_the_runtime(op_site, webgpu_browser, open_bundle, browser_settings):
    site, manifest = op_site
    results = _run_in_browser(webgpu_browser, open_bundle, site, manifest, "wasm")
    tolerance = browser_settings.tolerances["wasm"]
    wrong = []
    for case in CASES:
        assert _claim(case, "wasm") == "supported", case.name
        result = results[case.name]
        if "loose" not in result:
            wrong.append(f"{case.name}: claimed for WASM, but: {result['looseError']}")
        elif problem := _mismatch(case, result["loose"], **tolerance):
            wrong.append(problem)
    assert not wrong, "\n".join(wrong)


LOAD = """async ({ url, eps, feeds }) => {
  const { load } = await import(url);
  try {
    const model = await load({ executionProviders: eps });
    const out = await model.run(feeds);
    return { ep: model.ep, outputs: Object.fromEntries(Object.entries(out).map(
      ([k, t]) => [k, { dims: t.dims, data: Array.from(t.data, Number) }])) };
  } catch (error) {
    return { error: String(error?.message ?? error) };
  }
}"""


def test_what_inspect_says_holds_through_bundle_mjs(tmp_path, build_bundle, webgpu_browser,
                                                    open_bundle, browser_settings):
    """An op inspect reports as falling back runs on WebGPU with load() forced to it (its CPU
    fallback inside the session); an op it reports unsupported there makes load() fail."""
    from bundler.model.analysis import analyse

    cases = {case.name: case for case in CASES}
    for name, status in [("Mod", "fallback"), ("ai.onnx.ml.Normalizer", "unsupported")]:
        case = cases[name]
        model = case.save(tmp_path / "models")
        webgpu = analyse(model).to_json()["targets"]["webgpu"]
        assert [entry["op"] for entry in webgpu[status]] == [case.op]
        directory, _ = build_bundle(model, name=name, optimize=False)
        values = feeds(case)
        plain = {k: {"type": TYPES[v.dtype], "dims": list(v.shape),
                     "data": v.astype(np.float64).ravel().tolist()} for k, v in values.items()}
        with open_bundle(webgpu_browser, directory) as page:
            result = page.evaluate(LOAD, {"url": page.base_url + "bundle.mjs", "eps": ["webgpu"],
                                          "feeds": plain})
        if status == "fallback":
            assert result.get("ep") == "webgpu", result
            assert _mismatch(case, result["outputs"], **browser_settings.tolerances["webgpu"]
                             ) is None
        else:
            assert "webgpu session creation failed" in result["error"], result
