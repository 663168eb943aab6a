"""Native onnxruntime (CPU EP) on the same model file and inputs as the browser."""

from __future__ import annotations

import os
import time
from pathlib import Path

from bundler.bundle.modelio import cpu_session
from bundler.errors import ModelError, first_line
from bundler.perf.stats import Latency, summarise
from bundler.verify.reference import Feeds


def all_cores() -> int:
    return os.cpu_count() or 1


def native_latency(model: Path, feeds: Feeds, threads: int, runs: int) -> Latency:
    """`runs` consecutive runs of one session with `threads` intra-op threads."""
    try:
        session = cpu_session(model, threads=threads)
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            session.run(None, dict(feeds))
            times.append((time.perf_counter() - started) * 1000)
    except Exception as error:  # noqa: BLE001 - onnxruntime raises several unrelated types
        raise ModelError(f"{model.name} does not run in native onnxruntime"
                         f" ({first_line(error, typed=True)})") from None
    return summarise(times)
