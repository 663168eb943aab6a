"""The corpus in Chromium: every bundle through its bundle.mjs, every original model through a
hand-written onnxruntime-web page, in one browser with WebGPU (SwiftShader) and one without.

One server over the parent folder of all bundles. Pages are reused across cases, because a fresh
page pays about a second (WASM) or two (WebGPU) before its first session, while one more runtime
instance in a warm page costs 0.2 to 0.7 s: each bundle still imports its own bundle.mjs and so its
own copy of the runtime, as on its own site. A page is replaced after a few bundles (every runtime
instance keeps its memory) and after any error other than an onnxruntime status, which leaves the
runtime as it was; a case that failed that way on a reused page is run again on a fresh one.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from onnx_corpus import (
    BUNDLES_DIR,
    HAND_DIR,
    Built,
    DataSet,
    Run,
    data_sets,
    encode,
    judge,
)

from bundler.errors import first_line
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.site.runtime import BUILDS
from bundler.verify.browser import BrowserSettings, launch, load_settings, playwright_session

BROWSERS = ("webgpu", "wasm")  # a Chromium with the WebGPU flags, and one without them
BUNDLES_PER_PAGE = 10

_CODEC_JS = """
  const typed = {
    float32: Float32Array, float64: Float64Array, float16: globalThis.Float16Array ?? Uint16Array,
    int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array,
    int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
    bool: Uint8Array,
  };
  const decode = ({ type, dims, data }) => {
    if (type === 'string') return { type, dims, data };
    const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
    return { type, dims, data: new typed[type](bytes.buffer) };
  };
  const encode = ({ type, dims, data }) => {
    if (type === 'string') return { type, dims: [...dims], data: [...data] };
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    let text = '';
    for (let i = 0; i < bytes.length; i += 0x8000) {
      text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return { type, dims: [...dims], data: btoa(text) };
  };
  const encodeAll = (outputs) =>
    Object.fromEntries(Object.entries(outputs).map(([name, t]) => [name, encode(t)]));
  const message = (error) => String(error?.message ?? error);
  const deadline = (promise, ms, what) => Promise.race([promise, new Promise((_, reject) =>
    setTimeout(() => reject(new Error(`${what}: no answer after ${ms} ms`)), ms))]);
"""

# The bundle as a user's page uses it: load() from its bundle.mjs, then run(); once per entry of
# `attempts` (load() options).
_BUNDLE_JS = "async ({ moduleUrl, attempts, dataSets, timeoutMs }) => {" + _CODEC_JS + """
  const { load } = await import(moduleUrl);
  const results = [];
  for (const options of attempts) {
    const started = performance.now();
    try {
      const model = await deadline(load(options), timeoutMs, 'load()');
      const outputs = [];
      for (const feeds of dataSets) {
        const inputs = Object.fromEntries(Object.entries(feeds).map(([n, f]) => [n, decode(f)]));
        outputs.push(encodeAll(await deadline(model.run(inputs), timeoutMs, 'run()')));
      }
      await model.release();
      results.push({ ep: model.ep, fallbackReason: model.fallbackReason, outputs,
                     ms: performance.now() - started });
    } catch (error) {
      results.push({ error: message(error), ms: performance.now() - started });
    }
  }
  return results;
}"""

# The baseline: the minimal page onnxruntime-web's documentation describes, on the original model.
_HAND_JS = "async ({ runtimeUrl, modelUrl, ep, dataSets, timeoutMs }) => {" + _CODEC_JS + """
  const started = performance.now();
  try {
    const ort = await import(runtimeUrl);
    ort.env.wasm.wasmPaths = new URL('./', runtimeUrl).href;
    const bytes = new Uint8Array(await (await fetch(modelUrl)).arrayBuffer());
    const session = await deadline(
      ort.InferenceSession.create(bytes, { executionProviders: [ep] }), timeoutMs, 'create()');
    const outputs = [];
    for (const feeds of dataSets) {
      const inputs = Object.fromEntries(Object.entries(feeds).map(([name, feed]) => {
        const { type, dims, data } = decode(feed);
        return [name, new ort.Tensor(type, data, dims)];
      }));
      outputs.push(encodeAll(await deadline(session.run(inputs), timeoutMs, 'run()')));
    }
    await session.release();
    return [{ ep, fallbackReason: null, outputs, ms: performance.now() - started }];
  } catch (error) {
    return [{ error: message(error), ms: performance.now() - started }];
  }
}"""

# Starts `source` and returns at once; the result lands in window.__corpus, which Playwright
# waits for with its own timeout (so a page whose main thread hangs cannot hang the run).
_START_JS = """([source, arg]) => {
  window.__corpus = undefined;
  (0, eval)(source)(arg).then(
    (value) => { window.__corpus = { value }; },
    (error) => { window.__corpus = { value: [{ error: String(error) }] }; });
}"""


def _clean(result: dict[str, Any]) -> bool:
    """No error, or one onnxruntime returned as a status (the runtime is still usable)."""
    return "error" not in result or "ERROR_CODE" in result["error"]


class _Tab:
    """One page of the harness, reused for up to `limit` cases."""

    def __init__(self, browser: Any, base_url: str, limit: int, timeout_ms: int) -> None:
        self.browser = browser
        self.base_url = base_url
        self.limit = limit
        self.timeout_ms = timeout_ms
        self.context: Any = None
        self.page: Any = None
        self.uses = 0

    def call(self, script: str, arg: dict[str, Any]) -> list[dict[str, Any]]:
        """The script's results; on a reused page, a result that may have come from a runtime an
        earlier case broke is checked again on a fresh page."""
        reused = self.page is not None and self.uses < self.limit
        results = self._call(script, arg)
        if all(_clean(result) for result in results):
            return results
        self.close()
        return self._call(script, arg) if reused else results

    def _call(self, script: str, arg: dict[str, Any]) -> list[dict[str, Any]]:
        if self.page is None or self.uses >= self.limit:
            self.close()
            self.context = self.browser.new_context()
            self.page = self.context.new_page()
            self.page.goto(self.base_url + HARNESS_PATH.lstrip("/"))
        self.uses += 1
        try:
            self.page.evaluate(_START_JS, [script, {**arg, "timeoutMs": self.timeout_ms}])
            # the page's own deadlines cover a load() and each run; this one a hung page
            handle = self.page.wait_for_function("() => window.__corpus",
                                                 timeout=self.timeout_ms * 4)
            return handle.json_value()["value"]
        except Exception as error:  # noqa: BLE001 - Playwright's errors: timeouts, crashed pages
            self.close()
            return [{"error": first_line(str(error))}]

    def close(self) -> None:
        if self.context is not None:
            self.context.close()
        self.context = self.page = None
        self.uses = 0


def _runs(item: Built, page: str, browser_ep: str, modes: Sequence[str],
          expected: Sequence[DataSet], results: list[dict[str, Any]],
          settings: BrowserSettings) -> list[Run]:
    if len(results) == 1 < len(modes):  # the page failed before any attempt
        results = results * len(modes)
    runs = []
    for mode, result in zip(modes, results, strict=True):
        outcome, detail, worst = judge(expected, result, settings)
        runs.append(Run(item.case, page, browser_ep, mode, outcome, result.get("ep"), detail,
                        worst, round(result.get("ms", 0.0) / 1000, 3)))
    return runs


def _case_runs(item: Built, browser_ep: str, base_url: str, hand_tab: _Tab, bundle_tab: _Tab,
               settings: BrowserSettings) -> list[Run]:
    case = item.case
    expected = data_sets(case)
    feeds = [{tensor.name: encode(tensor) for tensor in data_set.inputs} for data_set in expected]
    hand = hand_tab.call(_HAND_JS, {
        "runtimeUrl": f"{base_url}{HAND_DIR}/runtime/{BUILDS[browser_ep].module}",
        "modelUrl": f"{base_url}{HAND_DIR}/{case.key}/model.onnx",
        "ep": browser_ep, "dataSets": feeds})
    runs = _runs(item, "hand", browser_ep, ["forced"], expected, hand, settings)
    attempts = {"default": {}, "forced": {"executionProviders": [browser_ep]}}
    if item.status != "built":
        return runs + [Run(case, "bundle", browser_ep, mode, "not built", detail=item.line)
                       for mode in attempts]
    results = bundle_tab.call(_BUNDLE_JS, {
        "moduleUrl": f"{base_url}{BUNDLES_DIR}/{case.key}/bundle.mjs",
        "attempts": list(attempts.values()), "dataSets": feeds})
    return runs + _runs(item, "bundle", browser_ep, list(attempts), expected, results, settings)


SLOTS = (("hand", "forced"), ("bundle", "default"), ("bundle", "forced"))


def _browser_runs(browser_ep: str, built: Sequence[Built], base_url: str,
                  settings: BrowserSettings, deadline: float | None, timeout_ms: int,
                  progress: Callable[[list[Run]], None] | None) -> list[Run]:
    runs: list[Run] = []
    with playwright_session() as playwright, \
            launch(playwright, settings, webgpu=browser_ep == "webgpu") as browser:
        hand_tab = _Tab(browser, base_url, len(built), timeout_ms)
        bundle_tab = _Tab(browser, base_url, BUNDLES_PER_PAGE, timeout_ms)
        for item in built:
            if deadline is not None and time.monotonic() > deadline:
                case_runs = [Run(item.case, page, browser_ep, mode, "not run",
                                 detail="time budget spent") for page, mode in SLOTS]
            else:
                case_runs = _case_runs(item, browser_ep, base_url, hand_tab, bundle_tab, settings)
            runs += case_runs
            if progress:
                progress(case_runs)
        hand_tab.close()
        bundle_tab.close()
    return runs


def run_all(built: Sequence[Built], root: Path, *, deadline: float | None = None,
            settings: BrowserSettings | None = None, timeout_ms: int = 60_000,
            progress: Callable[[list[Run]], None] | None = None) -> list[Run]:
    """Every case on both browsers, hand page and bundle; cases not started before `deadline`
    (a time.monotonic() value) are recorded as not run. The two browsers run side by side, each
    driven from its own thread (Playwright's sync API wants one driver per thread), so both
    cores work."""
    settings = settings or load_settings()
    with serve_directory(root) as base_url, \
            concurrent.futures.ThreadPoolExecutor(len(BROWSERS)) as pool:
        futures = [pool.submit(_browser_runs, browser_ep, built, base_url, settings, deadline,
                               timeout_ms, progress) for browser_ep in BROWSERS]
        return [run for future in futures for run in future.result()]
