"""`bundle bench`: how fast a built bundle is in headless Chromium, per execution provider and
variant, beside native onnxruntime on the same model file and inputs.

The model runs at the dims it is used at (bundler.verify.workload: the task's size, --dim, the
build's record of the user's data or --dim, else a guess that one warning line names); every row
says which, and the JSON holds the dims each page ran. Per EP × variant, in a fresh browser context:
the cold load (navigation -> session ready, split into fetch, wasm compile and session
creation), the first run, the warm-up (mean of the first 10 runs), the steady state (median and
p90 of the runs after the first 15), the bytes the page fetched and the memory Chromium reports.
Natively: the same runs with 1 thread and all cores. With `profile`, per-operator time in the
browser and natively. Nothing is timed against a limit: the figures are reported, never judged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnxruntime as ort

from bundler.bundle.manifest import Manifest
from bundler.bundle.manifest import load as load_manifest
from bundler.bundle.options import EXECUTION_PROVIDERS
from bundler.console import Reporter
from bundler.errors import BundlerError, ConfigError
from bundler.hosting.publish import assembled
from bundler.perf.generation import COLUMNS as GENERATION_COLUMNS
from bundler.perf.generation import (
    DEFAULT_CALLS,
    DEFAULT_NEW_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    GenerationResult,
    bench_generation,
)
from bundler.perf.native import all_cores, native_latency
from bundler.perf.page import PageResult, measure_page, profile_page
from bundler.perf.plot import require_matplotlib, write_plot
from bundler.perf.profile import Profile, native_profile, profile_rows
from bundler.perf.speech import COLUMNS as SPEECH_COLUMNS
from bundler.perf.speech import SpeechResult, bench_speech
from bundler.perf.stats import SETTLE_RUNS, WARMUP_RUNS, Latency, ratio, total_runs
from bundler.perf.texts import COLUMNS as TEXTS_COLUMNS
from bundler.perf.texts import TextsResult, bench_texts
from bundler.server.bundle_server import serve_directory
from bundler.tasks.kinds.automatic_speech_recognition import NAME as SPEECH_RECOGNITION
from bundler.tasks.kinds.registry import kind_of
from bundler.tasks.kinds.text_generation import NAME as TEXT_GENERATION
from bundler.verify.browser import (
    BrowserSettings,
    chromium_executable,
    launch,
    load_settings,
    playwright_session,
)
from bundler.verify.conformance import encode_feeds, integrity_problems
from bundler.verify.reference import NotRunnable, check_dims
from bundler.verify.workload import Workload, bundle_known, inputs_label, measured_reference

DEFAULT_RUNS = 20
PROFILE_RUNS = 10  # profiled runs; the first half are not counted
SWIFTSHADER_NOTE = ("WebGPU ran on SwiftShader, a CPU emulation of a GPU: its figures are not GPU"
                    " figures (run bundle bench on a machine with a GPU for those)")
COLUMNS = ("EP", "variant", "inputs (dims from)", "model bytes",
           "cold load ms (fetch / compile / session)", "first result ms", "first run ms",
           "warm-up mean ms", "steady median ms", "steady p90 ms",
           "native ms 1 thread / all cores", "browser / native")
PROFILE_COLUMNS = ("op type", "nodes", "ms per run", "share", "provider")


@dataclasses.dataclass
class NativeFigures:
    one_thread: Latency
    all_cores: Latency
    cores: int
    profile: Profile | None = None

    def to_json(self) -> dict[str, Any]:
        return {"threads_1": self.one_thread.to_json(), "all_cores": self.all_cores.to_json(),
                "cores": self.cores,
                "profile": None if self.profile is None else self.profile.to_json()}


@dataclasses.dataclass
class BenchReport:
    directory: Path
    manifest: Manifest
    dims: dict[str, int]
    workload: Workload
    steady_runs: int
    browser_version: str = ""
    results: list[PageResult] = dataclasses.field(default_factory=list)
    native: dict[str, NativeFigures] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)

    def browser_vs_native(self, result: PageResult) -> dict[str, float | None]:
        native = self.native.get(result.variant)
        steady = None if result.latency is None else result.latency.steady_median_ms
        return {
            "threads_1": ratio(steady, native and native.one_thread.steady_median_ms),
            "all_cores": ratio(steady, native and native.all_cores.steady_median_ms),
        }

    def to_json(self) -> dict[str, Any]:
        manifest = self.manifest
        return {
            "directory": str(self.directory),
            "model": manifest.name,
            "variants": [{"name": v.name, "kind": v.kind, "bytes": v.bytes}
                         for v in manifest.session().variants],
            "runtime": {"package": manifest.runtime.package, "version": manifest.runtime.version},
            "native_runtime": {"package": "onnxruntime", "version": ort.__version__},
            "machine": {"cpu_count": all_cores(), "platform": platform.platform(),
                        "processor": platform.machine()},
            "browser": {"name": "chromium", "version": self.browser_version},
            "dims": self.dims,
            **{key: value for key, value in self.workload.to_json().items() if key != "dims"},
            "runs": {"steady": self.steady_runs, "total": total_runs(self.steady_runs),
                     "warmup_mean_of_first": WARMUP_RUNS, "steady_after": SETTLE_RUNS},
            "results": [{**result.to_json(), "dims_source": self.workload.dims_source,
                         "bytes": manifest.session().variant(result.variant).bytes,
                         "browser_vs_native": self.browser_vs_native(result)}
                        for result in self.results],
            "native": {name: figures.to_json() for name, figures in self.native.items()},
            "notes": self.notes,
        }

    def rows(self) -> list[list[str]]:
        rows = []
        for result in self.results:
            bytes_ = str(self.manifest.session().variant(result.variant).bytes)
            inputs = (f"{inputs_label(result.inputs or self.workload.inputs)}"
                      f" ({self.workload.dims_source})")
            if result.error or result.cold is None or result.latency is None:
                rows.append([result.ep, result.variant, inputs, bytes_,
                             f"ERROR: {result.error}"[:160], *["-"] * (len(COLUMNS) - 5)])
                continue
            cold, latency = result.cold, result.latency
            split = " / ".join(_ms(value) for value in (cold.fetch_ms, cold.wasm_compile_ms,
                                                          cold.session_ms))
            native = self.native.get(result.variant)
            rows.append([
                result.ep if result.ran_on == result.ep else f"{result.ep} (ran {result.ran_on})",
                result.variant, inputs, bytes_, f"{_ms(cold.navigation_to_ready_ms)} ({split})",
                _ms(cold.time_to_first_result_ms), _ms(latency.first_run_ms),
                _ms(latency.warmup_mean_ms), _ms(latency.steady_median_ms),
                _ms(latency.steady_p90_ms),
                "-" if native is None else f"{_ms(native.one_thread.steady_median_ms)} /"
                f" {_ms(native.all_cores.steady_median_ms)}",
                _times(self.browser_vs_native(result)["threads_1"]),
            ])
        return rows


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _writable(path: Path | None, flag: str) -> None:
    if path is not None and not path.parent.is_dir():
        raise ConfigError(f"{flag} {path}: {path.parent} is not a folder")


def _chosen(manifest: Manifest, execution_providers: Sequence[str],
            variants: Sequence[str] | None) -> tuple[list[str], list[str]]:
    unknown_ep = [ep for ep in execution_providers if ep not in EXECUTION_PROVIDERS]
    if unknown_ep:
        raise ConfigError(f"--ep: unknown {unknown_ep[0]!r}; expected some of"
                          f" {', '.join(EXECUTION_PROVIDERS)}")
    missing = [ep for ep in execution_providers if ep not in manifest.runtime.builds]
    if missing:
        raise ConfigError(f"--ep {missing[0]}: this bundle has no runtime for it (it has"
                          f" {', '.join(manifest.runtime.builds)})")
    names = [variant.name for variant in manifest.session().variants]
    unknown = [name for name in variants or () if name not in names]
    if unknown:
        raise ConfigError(f"--variant: this bundle has no variant {unknown[0]!r} (it has"
                          f" {', '.join(names)})")
    return list(dict.fromkeys(execution_providers)), list(dict.fromkeys(variants or names))


def bench(
    directory: Path,
    *,
    execution_providers: Sequence[str] | None = None,
    variants: Sequence[str] | None = None,
    runs: int = DEFAULT_RUNS,
    threads: int | None = None,
    dims: Mapping[str, int] | None = None,
    json_path: Path | None = None,
    plot_path: Path | None = None,
    profile: bool = False,
    reporter: Reporter | None = None,
    settings: BrowserSettings | None = None,
    generation: GenerationLengths | None = None,
    audio: Path | None = None,
) -> BenchReport | list[GenerationResult] | list[SpeechResult] | list[TextsResult]:
    """Measure the bundle in `directory` (on `execution_providers`, default: every EP it ships;
    `variants`, default: all); write the JSON and the plot where asked. A text-generation
    bundle is measured by its generate() calls instead (bundler.perf.generation), at
    `generation`'s lengths (calls: its `calls`); a speech-recognition bundle by its
    transcribe() calls of `audio` (a .wav; default: the build's check audio); a text encoder
    by its task method's calls on texts of `generation`'s prompt length (bundler.perf.texts),
    unless `profile`, `plot_path` or `dims` ask for its session's single runs."""
    if runs < 1:
        raise ConfigError(f"--runs: expected at least 1, got {runs}")
    if threads is not None and threads < 1:
        raise ConfigError(f"--threads: expected at least 1, got {threads}")
    _writable(json_path, "--json")
    _writable(plot_path, "--plot")
    if plot_path is not None:
        require_matplotlib()
    manifest = load_manifest(directory)
    eps, names = _chosen(manifest, execution_providers or list(manifest.runtime.builds),
                         variants)
    kind = manifest.task.kind if manifest.task is not None else None
    if kind in (TEXT_GENERATION, SPEECH_RECOGNITION):
        if profile or plot_path is not None or dims:
            raise ConfigError(f"--profile, --plot and --dim are not for {kind} bundles; it is"
                              " measured by its calls (" + (
                                  "--prompt-tokens, --new-tokens" if kind == TEXT_GENERATION
                                  else "--audio") + ", --calls)")
        lengths = generation or GenerationLengths()
        settings, reporter = settings or load_settings(), reporter or Reporter()
        chromium_executable(settings)
        if kind == SPEECH_RECOGNITION:
            return _speech(directory, manifest, eps, names, audio, lengths.calls, threads,
                           settings, reporter, json_path)
        return _generation(directory, manifest, eps, names, lengths, threads, settings,
                           reporter, json_path)
    if audio is not None:
        raise ConfigError("--audio is for a speech-recognition bundle")
    if (kind not in (None, TEXT_GENERATION) and kind_of(kind).media == "text"
            and not (profile or plot_path is not None or dims)):
        settings, reporter = settings or load_settings(), reporter or Reporter()
        chromium_executable(settings)
        return _texts(directory, manifest, eps, names, generation or GenerationLengths(),
                      threads, settings, reporter, json_path)
    check_dims(manifest.session().inputs, dims or {})
    known = bundle_known(manifest, dims)
    reporter = reporter or Reporter()
    settings = settings or load_settings()
    chromium_executable(settings)  # a Chromium named but missing: before any work
    with contextlib.ExitStack() as stack:
        models = {name: stack.enter_context(assembled(directory, manifest,
                                                      manifest.session().variant(name).file))
                  for name in names}
        problems = integrity_problems(manifest, {manifest.session().variant(n).file: p
                                                  for n, p in models.items()})
        if problems:
            raise BundlerError(problems[0])
        try:
            reference, workload = measured_reference(models[names[0]], manifest, known)
        except NotRunnable as error:
            raise ConfigError(f"cannot bench: {error.reason}; pass {error.hint}") from None
        report = BenchReport(directory, manifest, reference.dims, workload, runs)
        if (warning := report.workload.warning()) is not None:
            reporter.warn(warning)
        count = total_runs(runs)
        for name in names:
            with reporter.step(f"Native onnxruntime: {name}, 1 thread and {all_cores()} cores"):
                report.native[name] = NativeFigures(
                    native_latency(models[name], reference.feeds, 1, count),
                    native_latency(models[name], reference.feeds, 0, count), all_cores(),
                    native_profile(models[name], reference.feeds) if profile else None)
        _in_browser(report, eps, names, threads, reference.feeds, settings, reporter, profile)
    _finish(report, reporter, json_path, plot_path)
    return report


@dataclasses.dataclass(frozen=True)
class GenerationLengths:
    """What a text-generation bundle is measured at (bench's --prompt-tokens, --new-tokens,
    --calls)."""

    prompt_tokens: int = DEFAULT_PROMPT_TOKENS
    new_tokens: int = DEFAULT_NEW_TOKENS
    calls: int = DEFAULT_CALLS


def _generation(directory: Path, manifest: Manifest, eps: list[str], names: list[str],
                lengths: GenerationLengths, threads: int | None, settings: BrowserSettings,
                reporter: Reporter, json_path: Path | None) -> list[GenerationResult]:
    results, version = bench_generation(
        directory, manifest, eps, names, prompt_tokens=lengths.prompt_tokens,
        new_tokens=lengths.new_tokens, calls=lengths.calls, threads=threads, settings=settings,
        reporter=reporter)
    reporter.table(f"{directory}: {manifest.name} generating in Chromium {version}"
                   f" ({lengths.calls} calls, greedy; bytes on the wire: as fetched, gzip)",
                   GENERATION_COLUMNS, [result.row() for result in results])
    _finish_calls(directory, manifest, version, results, "generated", reporter, json_path, {
        "prompt_tokens": lengths.prompt_tokens, "new_tokens": lengths.new_tokens,
        "calls": lengths.calls, "threads": threads})
    return results


def _texts(directory: Path, manifest: Manifest, eps: list[str], names: list[str],
           lengths: GenerationLengths, threads: int | None, settings: BrowserSettings,
           reporter: Reporter, json_path: Path | None) -> list[TextsResult]:
    results, version = bench_texts(directory, manifest, eps, names,
                                   tokens=lengths.prompt_tokens, calls=lengths.calls,
                                   threads=threads, settings=settings, reporter=reporter)
    reporter.table(f"{directory}: {manifest.name} on texts of {lengths.prompt_tokens} tokens in"
                   f" Chromium {version} ({lengths.calls} calls per batch; bytes on the wire: as"
                   " fetched, gzip)", TEXTS_COLUMNS,
                   [result.row(lengths.prompt_tokens) for result in results])
    _finish_calls(directory, manifest, version, results, "ran texts", reporter, json_path, {
        "tokens_per_text": lengths.prompt_tokens, "calls": lengths.calls, "threads": threads})
    return results


def _speech(directory: Path, manifest: Manifest, eps: list[str], names: list[str],
            audio: Path | None, calls: int, threads: int | None, settings: BrowserSettings,
            reporter: Reporter, json_path: Path | None) -> list[SpeechResult]:
    from bundler.text.transcripts import CHECK_SECONDS, RATE, check_audio

    if audio is not None and (audio.suffix.lower() != ".wav" or not audio.is_file()):
        raise ConfigError(f"--audio {audio}: expected a .wav file")
    samples = check_audio(audio)[0][0]  # read and at 16 kHz
    what = audio.name if audio else f"the build's check audio ({CHECK_SECONDS:g} s)"
    results, version = bench_speech(directory, manifest, eps, names, samples=samples, rate=RATE,
                                    calls=calls, threads=threads, settings=settings,
                                    reporter=reporter)
    reporter.table(f"{directory}: {manifest.name} transcribing {what} in Chromium {version}"
                   f" ({calls} calls; real-time factor: audio seconds per second; bytes on the"
                   " wire: as fetched, gzip)", SPEECH_COLUMNS, [r.row() for r in results])
    _finish_calls(directory, manifest, version, results, "transcribed", reporter, json_path, {
        "audio": what, "audio_seconds": samples.size / RATE, "calls": calls,
        "threads": threads})
    return results


def _finish_calls(directory: Path, manifest: Manifest, version: str,
                  results: Sequence[GenerationResult | SpeechResult | TextsResult], done: str,
                  reporter: Reporter, json_path: Path | None, measured: dict[str, Any]) -> None:
    """The JSON of a bench by calls, and its failures: an error when no page ran."""
    if json_path is not None:
        json_path.write_text(json.dumps({
            "directory": str(directory), "model": manifest.name,
            "runtime": {"package": manifest.runtime.package, "version": manifest.runtime.version},
            "browser": {"name": "chromium", "version": version}, **measured,
            "results": [result.to_json() for result in results]}, indent=2) + "\n",
            encoding="utf-8")
    failed = [result for result in results if result.error]
    if failed and len(failed) == len(results):
        raise BundlerError(f"no EP and variant {done} in the browser: {failed[0].ep}"
                           f" {failed[0].variant}: {failed[0].error}")
    for result in failed:
        reporter.warn(f"{result.variant} on {result.ep} did not run: {result.error}")


def _in_browser(report: BenchReport, eps: list[str], names: list[str], threads: int | None,
                feeds: Mapping[str, Any], settings: BrowserSettings, reporter: Reporter,
                profile: bool) -> None:
    manifest = report.manifest
    encoded = encode_feeds(feeds, manifest.session().inputs)
    timeout = settings.timeouts_ms["load"] + settings.timeouts_ms["run"]
    count = total_runs(report.steady_runs)
    with serve_directory(report.directory) as base_url, playwright_session() as playwright, \
            launch(playwright, settings, webgpu="webgpu" in eps) as browser:
        report.browser_version = browser.version
        for ep in eps:
            for name in names:
                with reporter.step(f"Chromium: {name} on {ep}"):
                    result = measure_page(browser, base_url, ep, name, encoded, count, threads,
                                          timeout, lambda what, ep=ep, name=name:
                                          reporter.info(f"  {name} on {ep}: {what}"))
                    if profile and result.error is None:
                        request = {"variant": name, "threads": threads, "feeds": encoded}
                        try:
                            result.profile = profile_page(browser, base_url, request, ep,
                                                          PROFILE_RUNS, timeout)
                        except Exception as error:  # noqa: BLE001 - the timings still count
                            reporter.warn(f"no browser profile of {name} on {ep}: {error}")
                report.results.append(result)


def _finish(report: BenchReport, reporter: Reporter, json_path: Path | None,
            plot_path: Path | None) -> None:
    adapters = [r.adapter for r in report.results if r.adapter]
    if any("swiftshader" in " ".join(adapter.values()).lower() for adapter in adapters):
        report.notes.append(SWIFTSHADER_NOTE)
    threads = {r.threads for r in report.results if r.threads}
    if threads:
        report.notes.append(f"browser WASM threads: {', '.join(map(str, sorted(threads)))}"
                            f"; native: 1 thread and {all_cores()} cores")
    title = f"{report.directory}: {report.manifest.name} in Chromium {report.browser_version}"
    reporter.table(title, COLUMNS, report.rows())
    for result in report.results:
        if result.profile is not None:
            reporter.table(f"Browser profile: {result.variant} on {result.ep} (top op types)",
                           PROFILE_COLUMNS, profile_rows(result.profile))
            if result.profile.fallback_nodes:
                reporter.warn(f"{result.variant} on {result.ep}: nodes run by the CPU instead:"
                              f" {', '.join(result.profile.fallback_nodes[:10])}")
    for name, figures in report.native.items():
        if figures.profile is not None:
            reporter.table(f"Native profile: {name} (1 thread, top op types)", PROFILE_COLUMNS,
                           profile_rows(figures.profile))
    for note in report.notes:
        reporter.info(f"Note: {note}")
    if json_path is not None:
        json_path.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    if plot_path is not None:
        write_plot(plot_path, title, [
            (r.ep, r.variant, r.latency and r.latency.steady_median_ms,
             r.latency and r.latency.steady_p90_ms,
             report.native[r.variant].one_thread.steady_median_ms,
             report.manifest.session().variant(r.variant).bytes) for r in report.results])
    failed = [r for r in report.results if r.error]
    if failed and len(failed) == len(report.results):
        raise BundlerError(f"no EP and variant ran in the browser: {failed[0].ep}"
                           f" {failed[0].variant}: {failed[0].error}")
    for result in failed:
        reporter.warn(f"{result.variant} on {result.ep} did not run: {result.error}")
