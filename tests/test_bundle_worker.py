"""load({ worker: true }), the lifecycle of models on one page, and where a bundle can be served
from (a sub-path, another origin), driven in headless Chromium."""

import shutil

import numpy as np
import pytest

from bundler.bundle.files import fetched_path
from bundler.bundle.options import BuildOptions
from bundler.commands.build import build
from bundler.verify.reference import run_native
from tests import models
from tests.frontend import native_probabilities, static_server

pytestmark = pytest.mark.browser

DIGITS = """async ({ url, options }) => {
  const { load } = await import(url);
  const model = await load(options);
  const data = Float32Array.from({ length: 64 }, (_, i) => (i % 9) / 8);
  const out = await model.run({ image: { dims: [1, 1, 8, 8], data } });
  const result = { ep: model.ep, worker: model.worker, inputLeft: data.length,
                   probabilities: Array.from(out.probabilities.data),
                   isolated: crossOriginIsolated };
  await model.release();
  return result;
}"""

LONG_TASKS = """async ({ url, options, runs }) => {
  const { load } = await import(url);
  const model = await load(options);
  const size = 16 * 192 * 192;
  const image = () => ({ dims: [1, 16, 192, 192], data: new Float32Array(size).fill(0.5) });
  await model.run({ image: image() });  // warm-up: the first run compiles and allocates
  const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));
  await nextTask();
  const tasks = [];
  const observer = new PerformanceObserver((list) => tasks.push(...list.getEntries()));
  observer.observe({ type: 'longtask' });
  const started = performance.now();
  let features;
  for (let i = 0; i < runs; i++) {
    await nextTask();  // each run starts a task of its own, as a click handler's would
    features = (await model.run({ image: image() })).features;
  }
  const elapsed = performance.now() - started;
  await new Promise((resolve) => setTimeout(resolve, 200));  // entries arrive after the task
  observer.disconnect();
  await model.release();
  return { ep: model.ep, elapsed, count: tasks.length,
           blocked: tasks.reduce((sum, task) => sum + task.duration, 0),
           features: Array.from(features.data) };
}"""

CYCLES = r"""async ({ urls, cycles, measureAt, options }) => {
  const bundles = await Promise.all(urls.map((url) => import(url)));
  const memory = async () => {
    if (crossOriginIsolated && performance.measureUserAgentSpecificMemory) {
      const timeout = new Promise((resolve) => setTimeout(() => resolve(null), 60000));
      const measured = await Promise.race([performance.measureUserAgentSpecificMemory(), timeout]);
      if (measured) return { source: 'measureUserAgentSpecificMemory', bytes: measured.bytes };
    }
    return { source: 'performance.memory', bytes: performance.memory.usedJSHeapSize };
  };
  const measured = {};
  const digits = { image: { dims: [1, 1, 8, 8], data: new Float32Array(64).fill(0.25) } };
  const multi = { x: { dims: [1, 4], data: [0.1, 0.2, 0.3, 0.4] },
                  ids: { type: 'int64', dims: [1, 3], data: [1, 2, 3] },
                  mask: { dims: [1, 3], data: [1, 0, 1] } };
  for (let cycle = 1; cycle <= cycles; cycle++) {
    // Two models of one bundle (they share its runtime) and one of another, loaded and run at once.
    const [a, b, c] = await Promise.all([bundles[0].load(options), bundles[0].load(options),
                                         bundles[1].load(options)]);
    await Promise.all([a.run(digits), b.run(digits), c.run(multi), a.run(digits), c.run(multi)]);
    await Promise.all([a.release(), b.release(), c.release()]);
    if (measureAt.includes(cycle)) {
      const started = performance.now();
      measured[cycle] = { ...await memory(), ms: performance.now() - started };
    }
  }
  const requests = (name) => performance.getEntriesByType('resource')
    .filter((entry) => entry.name.includes(name)).length;
  return { measured, runtimeImports: requests('/digits/runtime/ort.'),
           wasmFetches: performance.getEntriesByType('resource')
             .filter((entry) => /\.wasm(\.part0)?(\.gz)?$/.test(entry.name)).length };
}"""


@pytest.fixture(scope="module")
def site(tmp_path_factory, runtime_dist):
    """One folder with three bundles: digits, multi_io and heavy_conv."""
    root = tmp_path_factory.mktemp("worker")
    built = {}
    for name, builder in [("digits", None), ("multi", models.multi_io),
                          ("heavy", models.heavy_conv)]:
        model = builder(root / "models") if builder else None
        built[name] = build(model, BuildOptions(output=root / "site" / name, verify=False,
                                                runtime_dir=runtime_dist)).to_json()
    return root / "site", built


@pytest.mark.parametrize("ep", ["wasm", "webgpu"])
def test_worker_mode_matches_native_and_transfers_the_inputs(ep, site, webgpu_browser,
                                                             open_bundle, browser_settings):
    root, built = site
    expected = native_probabilities(root / "digits", built["digits"])
    tolerance = browser_settings.tolerances[ep]
    with open_bundle(webgpu_browser, root) as page:
        url = page.base_url + "digits/bundle.mjs"
        for worker in (True, False):
            result = page.evaluate(DIGITS, {"url": url, "options": {
                "worker": worker, "executionProviders": [ep]}})
            assert (result["ep"], result["worker"]) == (ep, worker)
            np.testing.assert_allclose(result["probabilities"], expected,
                                       atol=tolerance["atol"], rtol=tolerance["rtol"])
            assert result["inputLeft"] == (0 if worker else 64)  # transferred, not copied


def test_worker_keeps_the_page_free_of_long_tasks(site, plain_browser, open_bundle,
                                                  browser_settings):
    root, built = site
    image = np.full((1, 16, 192, 192), 0.5, dtype=np.float32)
    expected = run_native(root / "heavy" / built["heavy"]["sessions"][0]["variants"][0]["file"],
                          {"image": image})["features"].reshape(-1)
    measured = {}
    with open_bundle(plain_browser, root) as page:
        for worker in (True, False):
            measured[worker] = page.evaluate(LONG_TASKS, {
                "url": page.base_url + "heavy/bundle.mjs", "runs": 5,
                "options": {"worker": worker, "executionProviders": ["wasm"]}})
            np.testing.assert_allclose(measured[worker]["features"], expected, atol=1e-4,
                                       rtol=1e-3)
    on_page, in_worker = measured[False], measured[True]
    print(f"long tasks over 5 runs: on the page {on_page['count']} ({on_page['blocked']:.0f} ms"
          f" of {on_page['elapsed']:.0f} ms), in a worker {in_worker['count']}"
          f" ({in_worker['blocked']:.0f} ms of {in_worker['elapsed']:.0f} ms)")
    assert on_page["count"] >= 3 and on_page["blocked"] > 0.5 * on_page["elapsed"]
    assert in_worker["blocked"] < 0.1 * on_page["blocked"]


@pytest.mark.parametrize(("ep", "cycles"), [("wasm", 50), ("webgpu", 3)])
def test_load_release_cycles_share_the_runtime_and_do_not_grow(ep, cycles, site, webgpu_browser,
                                                               open_bundle):
    """Three models at once (two of one bundle, sharing its runtime) loaded, run concurrently and
    released, again and again. (WebGPU sessions take seconds each on SwiftShader: fewer cycles.)"""
    root, _ = site
    with open_bundle(webgpu_browser, root) as page:
        page.page.set_default_timeout(600_000)
        result = page.evaluate(CYCLES, {
            "urls": [page.base_url + "digits/bundle.mjs", page.base_url + "multi/bundle.mjs"],
            "cycles": cycles, "measureAt": [10, 50] if cycles == 50 else [],
            "options": {"executionProviders": [ep]}})
    assert result["runtimeImports"] == 1  # one import of the runtime for all of the loads
    # one wasm per bundle (a split one counted by its first part; fetched as the gzip sibling)
    assert result["wasmFetches"] == 2
    if result["measured"]:
        early, late = result["measured"]["10"], result["measured"]["50"]
        print(f"memory ({early['source']}): after 10 cycles {early['bytes'] / 2**20:.1f} MiB,"
              f" after 50 {late['bytes'] / 2**20:.1f} MiB")
        # 40 more cycles of 3 sessions: keeping even one model file (9 KB) or session a cycle
        # would show; 8 MiB is room for the allocator and the JIT settling.
        assert late["bytes"] - early["bytes"] < 8 * 2**20


def test_workers_end_with_release(site, webgpu_browser, open_bundle):
    root, _ = site
    with open_bundle(webgpu_browser, root) as page:
        for _ in range(3):
            page.evaluate(DIGITS, {"url": page.base_url + "digits/bundle.mjs",
                                   "options": {"worker": True, "executionProviders": ["wasm"]}})
        page.page.wait_for_timeout(500)
        assert page.page.workers == []


def test_bundle_under_a_sub_path_of_a_plain_static_server(site, tmp_path, plain_browser):
    root, built = site
    host = tmp_path / "host"
    shutil.copytree(root / "digits", host / "some" / "sub" / "path")
    shutil.copytree(root / "digits", host / "mirror")
    expected = native_probabilities(root / "digits", built["digits"])
    with static_server(host, {}) as url:
        page = plain_browser.new_page()
        requests = []
        page.on("request", lambda request: requests.append(request.url))
        page.goto(url + "some/sub/path/index.html")
        # the third load bypasses Cache Storage, so its files must really come from the mirror
        for options in ({"worker": False}, {"worker": True},
                        {"baseUrl": url + "mirror/", "cache": False}):
            result = page.evaluate(DIGITS, {"url": url + "some/sub/path/bundle.mjs",
                                            "options": options})
            assert result["ep"] == "wasm" and not result["isolated"]  # no COOP/COEP: 1 thread
            np.testing.assert_allclose(result["probabilities"], expected, atol=1e-4, rtol=1e-3)
        page.close()
    # With baseUrl, bundle.json and the files come from there.
    model = built["digits"]["sessions"][0]["variants"][0]["file"]
    fetched = fetched_path(next(e for e in built["digits"]["files"] if e["path"] == model))
    assert url + "mirror/bundle.json" in requests and url + "mirror/" + fetched in requests


def test_bundle_imported_by_a_page_on_another_origin(site, webgpu_browser, open_bundle,
                                                     browser_settings):
    root, built = site
    expected = native_probabilities(root / "digits", built["digits"])
    cors = {"Access-Control-Allow-Origin": "*", "Cross-Origin-Resource-Policy": "cross-origin"}
    with static_server(root, cors) as other_origin, open_bundle(webgpu_browser, root) as page:
        assert not other_origin.startswith(page.base_url)
        for ep in ("wasm", "webgpu"):
            tolerance = browser_settings.tolerances[ep]
            for worker in (False, True):
                result = page.evaluate(DIGITS, {"url": other_origin + "digits/bundle.mjs",
                                                "options": {"worker": worker,
                                                            "executionProviders": [ep]}})
                assert (result["ep"], result["worker"], result["isolated"]) == (ep, worker, True)
                np.testing.assert_allclose(result["probabilities"], expected,
                                           atol=tolerance["atol"], rtol=tolerance["rtol"])
        outside = [u for u in page.requests if not u.startswith((page.base_url, other_origin))]
        assert all(u.startswith("blob:") for u in outside), outside

