"""One bundle measured in headless Chromium: cold load, first result, run times, bytes, memory.

Each execution provider × variant gets a fresh browser context (nothing cached, as on a first
visit) on the blank harness page, which loads nothing itself: the page then imports bundle.mjs and
calls load() as an app does (web/dev/bench.mjs). The cold load is split by load()'s progress
events and by timing WebAssembly's compile and instantiate calls; the bytes are the page's
resource timing entries.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from bundler.perf.profile import Profile, aggregate, trace_events
from bundler.perf.stats import Latency, summarise
from bundler.server.bundle_server import HARNESS_PATH
from bundler.verify.harness import harness_call, harness_init_script

RUN_BATCH = 5  # runs per page call, so progress shows between them
PROFILE_END = "onnx-bundler: profile end"
BENCH_MODULE = "bench.mjs"
_LOADED = "__benchLoad"

@dataclasses.dataclass
class ColdLoad:
    """Milliseconds from navigation, and the split of load() (None where not measurable)."""

    navigation_to_ready_ms: float  # navigation start -> session ready
    load_ms: float  # bundle.mjs import + load() -> ready
    time_to_first_result_ms: float  # navigation start -> first output (inputs decoded aside)
    fetch_ms: float | None  # first request -> last byte before ready (incl. the sha256 checks)
    wasm_compile_ms: float | None  # WebAssembly compile/instantiate calls on the page
    session_ms: float | None  # load()'s session stage less the wasm compile in it
    bytes_transferred: int
    requests: int


@dataclasses.dataclass
class PageResult:
    ep: str
    variant: str
    ran_on: str | None = None
    error: str | None = None
    threads: int | None = None
    cross_origin_isolated: bool | None = None
    cold: ColdLoad | None = None
    latency: Latency | None = None
    memory: dict[str, int] | None = None
    adapter: dict[str, str] | None = None
    profile: Profile | None = None
    inputs: dict[str, list[int]] | None = None  # the dims of the tensors the page ran
    outputs: dict[str, list[int]] | None = None  # and of those the first run gave

    def to_json(self) -> dict[str, Any]:
        data = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        data["cold"] = None if self.cold is None else {
            key: (round(value, 3) if isinstance(value, float) else value)
            for key, value in dataclasses.asdict(self.cold).items()}
        data["latency"] = None if self.latency is None else self.latency.to_json()
        data["profile"] = None if self.profile is None else self.profile.to_json()
        return data


def _cold(loaded: Mapping[str, Any]) -> ColdLoad:
    resources = loaded["resources"]
    ready = loaded["ready"]
    stages = loaded["stages"]
    compile_ms = loaded["compile"]["ms"] if loaded["compile"]["calls"] else None
    session = stages.get("session")
    session_ms = None if session is None else max(
        0.0, session["end"] - session["start"] - (compile_ms or 0.0))
    fetch_ms = (max(r["end"] for r in resources) - min(r["start"] for r in resources)
                if resources else None)
    return ColdLoad(
        navigation_to_ready_ms=ready, load_ms=ready - loaded["started"],
        time_to_first_result_ms=ready + loaded["firstRun"], fetch_ms=fetch_ms,
        wasm_compile_ms=compile_ms, session_ms=session_ms,
        bytes_transferred=sum(int(r["bytes"]) for r in resources), requests=len(resources))


def _memory(context: Any, page: Any) -> dict[str, int] | None:
    """The page's JS heap and ArrayBuffer backing stores (the wasm memory among them), as
    Chromium's DevTools protocol reports them; None where it does not."""
    try:
        usage = context.new_cdp_session(page).send("Runtime.getHeapUsage")
    except Exception:  # noqa: BLE001 - not Chromium, or an older protocol
        return None
    names = {"usedSize": "js_heap_used_bytes", "totalSize": "js_heap_total_bytes",
             "backingStorageSize": "backing_store_bytes"}
    return {names[key]: int(value) for key, value in usage.items() if key in names}


@dataclasses.dataclass(frozen=True)
class Link:
    """A network link that Chromium emulates for a page (DevTools' throttling): every request's
    round trip and the download speed; uploads get a quarter of it."""

    mbit_per_s: float
    round_trip_ms: float = 20.0

    def emulate(self, context: Any, page: Any) -> None:
        devtools = context.new_cdp_session(page)
        devtools.send("Network.enable")
        bytes_per_s = self.mbit_per_s * 1e6 / 8
        devtools.send("Network.emulateNetworkConditions", {
            "offline": False, "latency": self.round_trip_ms,
            "downloadThroughput": bytes_per_s, "uploadThroughput": bytes_per_s / 4})


def measure_page(browser: Any, base_url: str, ep: str | None, variant: str | None,
                 feeds: dict[str, Any], runs: int, threads: int | None, timeout_ms: int,
                 progress: Callable[[str], None], cache: bool = True,
                 link: Link | None = None) -> PageResult:
    """Cold load, first run and `runs` runs in all of `ep` × `variant` through bundle.mjs in a
    fresh context (None: what load() picks by default; `cache` False: load({ cache: false }))."""
    arguments = {"base": base_url, "ep": ep, "variant": variant, "threads": threads,
                 "feeds": feeds, "cache": cache}
    return measure_loaded(browser, base_url, (BENCH_MODULE, "bundleColdLoad"), arguments, runs,
                          timeout_ms, progress,
                          PageResult(ep=ep or "default", variant=variant or "default"), link)


def measure_loaded(browser: Any, base_url: str, cold_load: tuple[str, str],
                   arguments: Mapping[str, Any], runs: int, timeout_ms: int,
                   progress: Callable[[str], None], result: PageResult,
                   link: Link | None = None) -> PageResult:
    """The measurement of a cold load in a fresh context, over `link` where one is given (else
    loopback as it is). `cold_load`: (module, export) as harness_call takes them, a function of
    (`arguments`, importStarted) started as the harness page navigates that returns what
    web/dev/bench.mjs's coldLoadOf returns."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(timeout_ms)
        if link:
            link.emulate(context, page)
        harness = urllib.parse.urljoin(base_url, HARNESS_PATH)
        page.add_init_script(harness_init_script(harness, *cold_load, arguments, _LOADED))
        progress("loading")
        page.goto(harness)
        loaded = page.evaluate(f"() => globalThis.{_LOADED}")
        if "error" in loaded:
            result.error = loaded["error"]
            return result
        result.ran_on, result.threads = loaded["ep"], loaded["threads"]
        result.variant = loaded.get("variant") or result.variant
        result.cross_origin_isolated = loaded["crossOriginIsolated"]
        result.cold = _cold(loaded)
        result.inputs, result.outputs = loaded.get("inputDims"), loaded.get("outputDims")
        times = [loaded["firstRun"]]
        while len(times) < runs:
            progress(f"run {len(times) + 1}/{runs}")
            times += page.evaluate(harness_call(BENCH_MODULE, "timedRuns"),
                                   min(RUN_BATCH, runs - len(times)))
        result.latency = summarise(times)
        result.memory = _memory(context, page)
        if result.ran_on == "webgpu":
            result.adapter = page.evaluate(harness_call(BENCH_MODULE, "adapterInfo"))
    except Exception as error:  # noqa: BLE001 - Playwright errors and timeouts alike
        result.error = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
    finally:
        context.close()
    return result


def profile_page(browser: Any, base_url: str, request: Mapping[str, Any], ep: str,
                 runs: int, timeout_ms: int) -> Profile:
    """onnxruntime-web's own profile of `runs` runs (the first ones not counted) on `ep`,
    through bundle.mjs (web/dev/profile.mjs). `request`: the variant, threads and feeds."""
    context = browser.new_context()
    lines: list[str] = []
    try:
        page = context.new_page()
        page.set_default_timeout(timeout_ms)
        page.on("console", lambda message: lines.append(message.text))
        page.goto(urllib.parse.urljoin(base_url, HARNESS_PATH))
        with page.expect_console_message(lambda message: message.text == PROFILE_END):
            page.evaluate(harness_call("profile.mjs", "profileRuns"), {
                **request, "base": base_url, "ep": ep, "runs": runs, "end": PROFILE_END})
    finally:
        context.close()
    counted = max(1, runs // 2)
    profile = aggregate(trace_events(lines), "browser", counted, ep=ep)
    if ep == "webgpu":
        profile.note = ("WebGPU kernel times are the CPU side of each dispatch (the GPU runs"
                        " them asynchronously)")
    return profile
