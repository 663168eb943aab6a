"""How fast each candidate of `--quantize auto` runs in the browser, for select.py.

Short on purpose (it runs during the build): one headless Chromium page loads every candidate on
the WASM EP through bundle.mjs, runs each WARMUP_RUNS times (the JIT's warm-up), then times them
in SPEED_ROUNDS interleaved rounds, so that machine noise hits them all alike; a candidate's speed
is the median of its rounds. WebGPU is not timed: the build's Chromium has only SwiftShader, whose
figures are not GPU figures, so WebGPU gets the WASM choice. The inputs are those of the sizes
the accuracy was measured at (bundle.json's `workload`), recorded with the speeds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import statistics
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bundler.bundle.codec import to_json
from bundler.bundle.manifest import Manifest, SelectionCandidate
from bundler.bundle.measured import SpeedRecord
from bundler.console import Reporter
from bundler.errors import first_line
from bundler.perf.page import BENCH_MODULE
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.site.runtime import cache_root
from bundler.variants.select import BALANCED_SLOWER, BALANCED_SMALLER, SPEED_TIE
from bundler.verify.browser import BrowserSettings, launch, load_settings, playwright_session
from bundler.verify.conformance import encode_feeds
from bundler.verify.harness import harness_call
from bundler.verify.reference import Feeds

WARMUP_RUNS = 15
SPEED_ROUNDS = 9
SPEED_EP = "wasm"


def _measurement_key(manifest: Manifest, names: Sequence[str], encoded: Any,
                     settings: BrowserSettings) -> str:
    """What the timings depend on: the candidates' bytes, the runtime, the inputs, the browser
    settings and this protocol."""
    files = {variant.name: variant.sha256 for variant in manifest.session().variants
             if variant.name in names}
    text = json.dumps([files, manifest.runtime.version, encoded, dataclasses.asdict(settings),
                       WARMUP_RUNS, SPEED_ROUNDS, SPEED_EP], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def browser_speeds(directory: Path, manifest: Manifest, names: Sequence[str], feeds: Feeds,
                   reporter: Reporter, settings: BrowserSettings | None = None
                   ) -> tuple[dict[str, dict[str, float]], SpeedRecord]:
    """({"wasm": {variant: steady ms}}, the record of how) for the variants `names` of the
    (rendered) bundle in `directory`. A candidate that does not run is left out (say why).

    Timings are noisy, and a build must give the same files for the same model and options: so
    the first measurement of the same candidate files, runtime, inputs and settings is kept in
    the user cache and reused (delete ~/.cache/onnx-bundler/speeds/ to measure again)."""
    settings = settings or load_settings()
    cached = cache_root() / "speeds" / (
        _measurement_key(manifest, names, encode_feeds(feeds, manifest.session().inputs), settings)
        + ".json")
    if cached.is_file():
        with contextlib.suppress(ValueError, KeyError):
            stored = json.loads(cached.read_text(encoding="utf-8"))
            reporter.info(f"auto: speeds as first measured for these files ({cached})")
            return stored["speeds"], SpeedRecord.from_json(stored["record"])
    speeds, record = _measure(directory, manifest, names, feeds, reporter, settings)
    cached.parent.mkdir(parents=True, exist_ok=True)
    temporary = cached.with_name(f".{cached.name}.{os.getpid()}")
    temporary.write_text(json.dumps({"speeds": speeds, "record": to_json(record)}),
                         encoding="utf-8")
    temporary.replace(cached)
    return speeds, record


def _measure(directory: Path, manifest: Manifest, names: Sequence[str], feeds: Feeds,
             reporter: Reporter, settings: BrowserSettings
             ) -> tuple[dict[str, dict[str, float]], SpeedRecord]:
    timeout = settings.timeouts_ms["load"] + settings.timeouts_ms["run"]
    encoded = encode_feeds(feeds, manifest.session().inputs)
    with serve_directory(directory) as base_url, playwright_session() as playwright, \
            launch(playwright, settings, webgpu=False) as browser, \
            reporter.step(f"auto: timing {', '.join(names)} on {SPEED_EP} in Chromium"):
        context = browser.new_context()
        try:
            page = context.new_page()
            page.set_default_timeout(timeout * len(names))
            page.goto(urllib.parse.urljoin(base_url, HARNESS_PATH))
            timed = page.evaluate(harness_call(BENCH_MODULE, "timeVariants"), {
                "base": base_url, "names": list(names), "feeds": encoded,
                "warmup": WARMUP_RUNS, "rounds": SPEED_ROUNDS})
        finally:
            context.close()
        version = browser.version
    for name, error in timed["errors"].items():
        reporter.warn(f"auto: {name} could not be timed ({first_line(error)})")
    speeds = {name: round(statistics.median(times), 2) for name, times in timed["times"].items()}
    return {SPEED_EP: speeds}, speed_record(
        f"median ms per run on {SPEED_EP} of {SPEED_ROUNDS} interleaved rounds after"
        f" {WARMUP_RUNS} warm-up runs each, in one page of Chromium {version},"
        f" {timed['threads']} thread(s)")


def speed_record(measured: str | None, reason: str | None = None) -> SpeedRecord:
    """bundle.json's selection.speed: how speeds were measured (or why not) and the rule's
    tolerances (the workload timed at is added by the caller, SpeedRecord.at)."""
    tolerances = SpeedRecord(tie_tolerance=SPEED_TIE, balanced_smaller=BALANCED_SMALLER,
                             balanced_slower=BALANCED_SLOWER)
    if measured:
        return dataclasses.replace(tolerances, measured=measured, not_measured_on={
            "webgpu": "SwiftShader is not a GPU: WebGPU gets the WASM choice"})
    return dataclasses.replace(tolerances, not_measured=reason)


def speed_rows(candidates: Sequence[SelectionCandidate],
               record: SpeedRecord) -> list[list[str]]:
    """Rows for the build report's table of auto's candidates (`record`: selection.speed)."""
    workload = record.workload()
    inputs = f"{workload.label()} ({workload.dims_source})" if workload else "-"
    rows = []
    for c in candidates:
        ms = getattr(c, f"{SPEED_EP}_ms")
        rows.append([c.name, inputs, str(c.bytes), "yes" if c.within_budget else "no",
                     "yes" if c.browser_verified else "no", "-" if ms is None else str(ms),
                     "SHIPS" if c.chosen else ""])
    return rows


SPEED_COLUMNS = ("candidate", "inputs (dims from)", "bytes", "within budget", "passed in browser",
                 f"{SPEED_EP} ms (steady median)", "")
