"""`bundle bench` on a speech-recognition bundle: per EP and encoder variant (the decoder on its
default for that EP, as load() opens it), in a fresh Chromium page, load() (its time, warm-up
included, and both sessions' bytes: raw and on the wire), then model.transcribe() called
`calls` times on the same audio. Each call's figures come from transcribe()'s own `timings`:
the real-time factor (audio seconds per second), the encoder's ms, the decoder's steps per
second and when the first text streamed. Nothing is judged: the figures are reported."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bundler.bundle.manifest import Manifest
from bundler.console import Reporter
from bundler.perf.calls import cold_pages, mean, number
from bundler.perf.page import BENCH_MODULE
from bundler.text.whisper_bundle import DECODER, ENCODER
from bundler.verify.browser import BrowserSettings
from bundler.verify.harness import harness_call

FIGURES = ("real_time_factor", "total_ms", "encoder_ms", "decoder_steps_per_s", "first_text_ms")
COLUMNS = ("EP", "encoder / decoder variant", "bytes (on the wire)", "load ms", "audio s",
           "first call: real-time factor", "ms", "encoder ms", "decoder steps/s",
           "first text ms", "later calls: real-time factor", "ms", "encoder ms",
           "decoder steps/s", "first text ms")


@dataclasses.dataclass
class SpeechCall:
    """One transcribe() call's figures (its `timings`)."""

    audio_seconds: float
    total_ms: float
    encoder_ms: float
    decoder_ms: float
    decoder_steps: int
    decoder_steps_per_s: float | None
    first_text_ms: float | None
    real_time_factor: float | None

    @classmethod
    def from_page(cls, run: dict[str, Any]) -> SpeechCall:
        return cls(run["audioSeconds"], run["totalMs"], run["encoderMs"], run["decoderMs"],
                   run["decoderSteps"], run["decoderStepsPerS"], run["firstTextMs"],
                   run["realTimeFactor"])


@dataclasses.dataclass
class SpeechResult:
    ep: str
    variant: str  # the encoder's
    decoder_variant: str
    bytes: int  # both sessions' variants
    wire_bytes: int | None
    runtime_wire_bytes: int | None
    ran_on: str | None = None
    load_ms: float | None = None
    calls: list[SpeechCall] = dataclasses.field(default_factory=list)
    error: str | None = None

    def later(self) -> dict[str, float | None]:
        """The mean of each figure over the calls after the first (None with one call)."""
        return {key: mean([getattr(call, key) for call in self.calls[1:]]) for key in FIGURES}

    def to_json(self) -> dict[str, Any]:
        return {"ep": self.ep, "ran_on": self.ran_on, "variant": self.variant,
                "decoder_variant": self.decoder_variant, "bytes": self.bytes,
                "wire_bytes": self.wire_bytes, "runtime_wire_bytes": self.runtime_wire_bytes,
                "load_ms": self.load_ms,
                "first_call": dataclasses.asdict(self.calls[0]) if self.calls else None,
                "later_calls": self.later() if self.calls[1:] else None,
                "calls": [dataclasses.asdict(call) for call in self.calls], "error": self.error}

    def row(self) -> list[str]:
        names = f"{self.variant} / {self.decoder_variant}"
        sizes = f"{self.bytes} ({'-' if self.wire_bytes is None else self.wire_bytes})"
        if self.error or not self.calls:
            return [self.ep, names, sizes, f"ERROR: {self.error}"[:160],
                    *["-"] * (len(COLUMNS) - 4)]
        first, later = self.calls[0], self.later()
        ep = self.ep if self.ran_on in (None, self.ep) else f"{self.ep} (ran {self.ran_on})"
        return [ep, names, sizes, number(self.load_ms), number(first.audio_seconds),
                *(number(getattr(first, key)) for key in FIGURES),
                *(number(later[key]) for key in FIGURES)]


def bench_speech(directory: Path, manifest: Manifest, eps: Sequence[str], names: Sequence[str],
                 *, samples: np.ndarray, rate: int, calls: int, threads: int | None,
                 settings: BrowserSettings, reporter: Reporter
                 ) -> tuple[list[SpeechResult], str]:
    """(a result per EP × encoder variant, the browser's version); `samples` mono at `rate`."""
    seconds = samples.size / rate
    # transcribe() decodes a step per token: allow the model's longest decoding per 30 s window
    run_ms = settings.timeouts_ms["run"] * max(1, int(np.ceil(seconds / 30)))
    pages, version = cold_pages(
        directory, eps, names, call=harness_call(BENCH_MODULE, "transcriptionRuns"),
        arguments={"samples": base64.b64encode(samples.astype("<f4").tobytes()).decode("ascii"),
                   "rate": rate, "calls": calls},
        timeout_ms=settings.timeouts_ms["load"] + run_ms * calls, threads=threads,
        settings=settings, reporter=reporter, doing="transcribing")
    results = []
    for page in pages:
        encoder = manifest.session(ENCODER).variant(page.variant)
        decoding = manifest.session(DECODER)  # the variant the page opened, else the default
        decoder = (decoding.variant(page.about["decoderVariant"]) if page.about.get(
            "decoderVariant") else decoding.default_for(page.ep))
        wires = [manifest.wire_bytes(encoder), manifest.wire_bytes(decoder)]
        with_runtime = manifest.wire_bytes(encoder, page.ep)
        wire = None if None in wires else sum(wires)  # type: ignore[arg-type]
        results.append(SpeechResult(
            page.ep, page.variant, decoder.name,
            encoder.bytes + decoder.bytes, wire,
            None if with_runtime is None or wires[0] is None else with_runtime - wires[0],
            page.ran_on, page.load_ms, [SpeechCall.from_page(run) for run in page.runs],
            page.error))
    return results, version
