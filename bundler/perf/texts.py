"""`bundle bench` on a text-encoder bundle (feature-extraction, text-classification,
token-classification): per EP and variant, in a fresh Chromium page, load() (its time, and the
bytes fetched: raw and on the wire), then the task's method (embed(), classify(), tokens()) on a
batch of 1 text and on a batch of 8, `calls` calls each, every text of a named length in the
bundle's own tokens (special tokens included). Texts per second is the batch over a call's ms:
tokenizing, the model, pooling or labels, as an app waits for them. The first call of each batch
is reported apart from the mean of the later ones. Nothing is judged: the figures are reported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bundler.bundle.manifest import Manifest
from bundler.console import Reporter
from bundler.errors import ConfigError
from bundler.perf.calls import cold_pages, mean, number
from bundler.perf.generation import prompt_of
from bundler.perf.page import BENCH_MODULE
from bundler.tasks.kinds.registry import kind_of
from bundler.verify.browser import BrowserSettings
from bundler.verify.harness import harness_call

BATCHES = (1, 8)
COLUMNS = ("EP", "variant", "model bytes (on the wire)", "load ms", "tokens per text",
           *(f"batch {batch}: {when} texts/s" for batch in BATCHES
             for when in ("first call", "later calls")))


@dataclasses.dataclass
class TextsResult:
    ep: str
    variant: str
    bytes: int
    wire_bytes: int | None  # the variant's files as fetched (gzip siblings where written)
    ran_on: str | None = None
    load_ms: float | None = None
    calls: list[dict[str, float]] = dataclasses.field(default_factory=list)  # {batch, ms}
    error: str | None = None

    def texts_per_s(self, batch: int) -> tuple[float | None, float | None]:
        """(the first call's texts/s at `batch`, the mean of the later calls')."""
        speeds = [batch * 1000 / call["ms"] for call in self.calls if call["batch"] == batch]
        return (speeds[0] if speeds else None), mean(speeds[1:])

    def to_json(self) -> dict[str, Any]:
        return {"ep": self.ep, "ran_on": self.ran_on, "variant": self.variant,
                "bytes": self.bytes, "wire_bytes": self.wire_bytes, "load_ms": self.load_ms,
                "texts_per_s": {str(batch): dict(zip(("first_call", "later_calls"),
                                                     self.texts_per_s(batch), strict=True))
                                for batch in BATCHES},
                "calls": self.calls, "error": self.error}

    def row(self, tokens: int) -> list[str]:
        sizes = f"{self.bytes} ({'-' if self.wire_bytes is None else self.wire_bytes})"
        if self.error or not self.calls:
            return [self.ep, self.variant, sizes, f"ERROR: {self.error}"[:160],
                    *["-"] * (len(COLUMNS) - 4)]
        ep = self.ep if self.ran_on in (None, self.ep) else f"{self.ep} (ran {self.ran_on})"
        return [ep, self.variant, sizes, number(self.load_ms), str(tokens),
                *(number(speed) for batch in BATCHES for speed in self.texts_per_s(batch))]


def bench_texts(directory: Path, manifest: Manifest, eps: Sequence[str], names: Sequence[str],
                *, tokens: int, calls: int, threads: int | None, settings: BrowserSettings,
                reporter: Reporter) -> tuple[list[TextsResult], str]:
    """(a result per EP × variant, the browser's version)."""
    if tokens < 1 or calls < 1:
        raise ConfigError("--prompt-tokens and --calls take 1 or more")
    assert manifest.task is not None
    text = prompt_of(directory, manifest, tokens)
    pages, version = cold_pages(
        directory, eps, names, call=harness_call(BENCH_MODULE, "textRuns"),
        arguments={"method": kind_of(manifest.task.kind).method, "text": text,
                   "batches": list(BATCHES), "calls": calls},
        timeout_ms=settings.timeouts_ms["load"]
        + settings.timeouts_ms["run"] * calls * len(BATCHES),
        threads=threads, settings=settings, reporter=reporter, doing="running texts")
    results = []
    for page in pages:
        variant = manifest.session().variant(page.variant)
        results.append(TextsResult(page.ep, page.variant, variant.bytes,
                                   manifest.wire_bytes(variant), page.ran_on, page.load_ms,
                                   [dict(run) for run in page.runs], page.error))
    return results, version
