"""`bundle bench` on a text-generation bundle: per EP and variant, in a fresh Chromium page,
load() (its time, warm-up included, and the bytes fetched: raw and on the wire), then
model.generate() called `calls` times on one prompt of a named length (in the bundle's own
tokens) for a named number of new tokens, greedily. Each call's time to first token, prefill
tokens/s and decode tokens/s come from generate()'s own timings; the first call and the mean of
the later ones are reported apart. Nothing is judged: the figures are reported.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bundler.bundle.manifest import Manifest
from bundler.console import Reporter
from bundler.errors import ConfigError
from bundler.perf.calls import cold_pages, mean, number
from bundler.perf.page import BENCH_MODULE
from bundler.verify.browser import BrowserSettings
from bundler.verify.harness import harness_call

DEFAULT_PROMPT_TOKENS = 16
DEFAULT_NEW_TOKENS = 64
DEFAULT_CALLS = 3  # the first call and two later ones
WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "seven",
         "small", "birds", "sing", "in", "the", "old", "garden", "near", "our", "house")
COLUMNS = ("EP", "variant", "model bytes (on the wire)", "load ms", "prompt / new tokens",
           "first call: first token ms", "prefill tok/s", "decode tok/s",
           "later calls: first token ms", "prefill tok/s", "decode tok/s")

@dataclasses.dataclass
class Call:
    """One generate() call's figures (generate()'s `timings`)."""

    prompt_tokens: int
    new_tokens: int
    first_token_ms: float | None
    prefill_tokens_per_s: float | None
    decode_tokens_per_s: float | None

    @classmethod
    def from_page(cls, run: dict[str, Any]) -> Call:
        return cls(run["promptTokens"], run["newTokens"], run["firstTokenMs"],
                   run["prefillTokensPerS"], run["decodeTokensPerS"])


@dataclasses.dataclass
class GenerationResult:
    ep: str
    variant: str
    bytes: int
    wire_bytes: int | None  # the variant's files as fetched (gzip siblings where written)
    runtime_wire_bytes: int | None  # the EP's wasm as fetched
    ran_on: str | None = None
    load_ms: float | None = None
    calls: list[Call] = dataclasses.field(default_factory=list)
    error: str | None = None

    def later(self) -> dict[str, float | None]:
        """The mean of each figure over the calls after the first (None with one call)."""
        rest = self.calls[1:]
        return {key: mean([getattr(call, key) for call in rest]) for key in
                ("first_token_ms", "prefill_tokens_per_s", "decode_tokens_per_s")}

    def to_json(self) -> dict[str, Any]:
        first = dataclasses.asdict(self.calls[0]) if self.calls else None
        return {"ep": self.ep, "ran_on": self.ran_on, "variant": self.variant,
                "bytes": self.bytes, "wire_bytes": self.wire_bytes,
                "runtime_wire_bytes": self.runtime_wire_bytes, "load_ms": self.load_ms,
                "first_call": first, "later_calls": self.later() if self.calls[1:] else None,
                "calls": [dataclasses.asdict(call) for call in self.calls], "error": self.error}

    def row(self) -> list[str]:
        sizes = f"{self.bytes} ({'-' if self.wire_bytes is None else self.wire_bytes})"
        if self.error or not self.calls:
            return [self.ep, self.variant, sizes, f"ERROR: {self.error}"[:160],
                    *["-"] * (len(COLUMNS) - 4)]
        first, later = self.calls[0], self.later()
        ep = self.ep if self.ran_on in (None, self.ep) else f"{self.ep} (ran {self.ran_on})"
        return [ep, self.variant, sizes, number(self.load_ms),
                f"{first.prompt_tokens} / {first.new_tokens}",
                number(first.first_token_ms), number(first.prefill_tokens_per_s),
                number(first.decode_tokens_per_s), number(later["first_token_ms"]),
                number(later["prefill_tokens_per_s"]), number(later["decode_tokens_per_s"])]


def prompt_of(directory: Path, manifest: Manifest, tokens: int) -> str:
    """A plain-words prompt that the bundle's tokenizer makes exactly `tokens` ids of (special
    tokens included, as generate() encodes it); ConfigError when no prefix of the sentence
    makes that many."""
    from bundler.text.reference import bundle_tokenizer

    assert manifest.task is not None
    with tempfile.TemporaryDirectory(prefix="bundle-bench-") as scratch:
        tokenizer = bundle_tokenizer(directory, manifest.task, Path(scratch))
        # Prefixes of a plain sentence, a character longer each time: a token count moves by
        # about one per step, so the first prefix of `tokens` tokens is found.
        sentence = " ".join(WORDS)
        while len(sentence) < tokens * 16:
            sentence += " " + " ".join(WORDS)
        for end in range(1, len(sentence) + 1):
            text = sentence[:end].rstrip()
            count = len(tokenizer.encode([text]).input_ids[0])
            if count == tokens:
                return text
            if count > tokens + 2:
                break
    raise ConfigError(f"--prompt-tokens {tokens}: no prompt of plain words makes exactly"
                      f" {tokens} tokens with this bundle's tokenizer; try another length")


def bench_generation(directory: Path, manifest: Manifest, eps: Sequence[str],
                     names: Sequence[str], *, prompt_tokens: int, new_tokens: int, calls: int,
                     threads: int | None, settings: BrowserSettings, reporter: Reporter
                     ) -> tuple[list[GenerationResult], str]:
    """(a result per EP × variant, the browser's version)."""
    if prompt_tokens < 1 or new_tokens < 1 or calls < 1:
        raise ConfigError("--prompt-tokens, --new-tokens and --runs take 1 or more")
    pages, version = cold_pages(
        directory, eps, names, call=harness_call(BENCH_MODULE, "generationRuns"),
        arguments={"prompt": prompt_of(directory, manifest, prompt_tokens),
                   "newTokens": new_tokens, "calls": calls},
        timeout_ms=settings.timeouts_ms["load"] + settings.timeouts_ms["run"] * calls,
        threads=threads, settings=settings, reporter=reporter, doing="generating")
    results = []
    for page in pages:
        variant = manifest.session().variant(page.variant)
        wire, with_runtime = manifest.wire_bytes(variant), manifest.wire_bytes(variant, page.ep)
        result = GenerationResult(page.ep, page.variant, variant.bytes, wire, None if wire is None
                                  or with_runtime is None else with_runtime - wire,
                                  page.ran_on, page.load_ms,
                                  [Call.from_page(run) for run in page.runs], page.error)
        short = [call.new_tokens for call in result.calls if call.new_tokens < new_tokens]
        if short:
            reporter.warn(f"{page.variant} on {page.ep}: a call ended at its end-of-text token"
                          f" after {min(short)} of {new_tokens} new tokens")
        results.append(result)
    return results, version
