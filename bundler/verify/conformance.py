"""Does the browser compute what native onnxruntime computes? (`bundle test`, build verification)

The bundle folder is served on 127.0.0.1; headless Chromium loads it through `bundle.mjs` on each
execution provider with seeded inputs, and the outputs are compared with native onnxruntime (CPU)
running the same model file on the same inputs. A second browser without WebGPU checks that the
default `load()` falls back to WASM and still computes the right numbers.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bundler.bundle.layout import MANIFEST_FILE
from bundler.bundle.manifest import Manifest, Variant
from bundler.bundle.manifest import load as load_manifest
from bundler.bundle.modelio import NUMPY_TYPES, TensorSpec, sha256_of
from bundler.console import Reporter
from bundler.errors import first_line
from bundler.hosting.publish import assembled
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.verify.browser import BrowserSettings, launch, load_settings, playwright_session
from bundler.verify.harness import harness_call
from bundler.verify.reference import NotRunnable, Reference, check_dims, fingerprint_mismatch
from bundler.verify.tolerance import Tolerance, tolerance_for
from bundler.verify.user_inputs import InputValue, UserInputs, load_user_inputs, reference_for
from bundler.verify.verified import verdict

REPORT_COLUMNS = ("check", "variant", "ran on", "output", "worst abs error",
                  "worst normalised error", "result")


@dataclasses.dataclass
class OutputCheck:
    output: str
    max_abs_error: float
    max_normalized_error: float
    passed: bool
    note: str = ""


@dataclasses.dataclass
class EPCheck:
    """One page load: `ep` asked for (None: the default load()), what ran, and the comparison."""

    label: str
    variant: str
    requested: list[str] | None
    used_ep: str | None = None
    fallback_reason: str | None = None
    fallback_reasons: list[dict[str, str]] = dataclasses.field(default_factory=list)
    outputs: list[OutputCheck] = dataclasses.field(default_factory=list)
    error: str | None = None
    # The EP could not create a session: "runtime" when this onnxruntime-web build has no kernel
    # for an op (the same everywhere, so load() skips it), "device" when the device lacks a
    # feature (shader-f16, say: another device may have it, so load() still tries it).
    unsupported: str | None = None
    # The variant needs a WebGPU feature (shader-f16) this adapter lacks: bundle.mjs did not try
    # it, so the check says nothing about the variant (auto does not hold it against it).
    missing_feature: bool = False
    # It failed at build time too, and bundle.json says so, so load() does not use it.
    known: bool = False

    @property
    def acceptable(self) -> bool:
        """Fine for the bundle as shipped: passed, or an EP that load() skips or falls back from."""
        return self.passed or self.unsupported is not None or self.known

    @property
    def passed(self) -> bool:
        return self.error is None and all(check.passed for check in self.outputs)

    @property
    def worst_abs_error(self) -> float | None:
        return max((c.max_abs_error for c in self.outputs), default=None)


@dataclasses.dataclass
class ConformanceReport:
    directory: Path
    dims: dict[str, int] = dataclasses.field(default_factory=dict)
    checks: list[EPCheck] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    console: list[str] = dataclasses.field(default_factory=list)
    external_requests: list[str] = dataclasses.field(default_factory=list)
    not_done: NotRunnable | None = None

    @property
    def ok(self) -> bool:
        """Verified, as bundler.verify.verified defines it (without the task check)."""
        return verdict(self).status == "passed"

    def to_json(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "ok": self.ok,
            "dims": self.dims,
            "not_done": None if self.not_done is None else {
                "reason": self.not_done.reason, "hint": self.not_done.hint,
            },
            "problems": self.problems,
            "external_requests": self.external_requests,
            "checks": [
                {**dataclasses.asdict(check), "passed": check.passed} for check in self.checks
            ],
            "console": self.console,
        }

    def rows(self) -> list[list[str]]:
        rows = []
        for check in self.checks:
            ran = check.used_ep or "-"
            if check.error:
                kind = f"UNSUPPORTED ({check.unsupported})" if check.unsupported else "ERROR"
                rows.append([check.label, check.variant, ran, "-", "-", "-",
                             f"{kind}: {check.error[:160]}"])
            for out in check.outputs:
                rows.append([
                    check.label, check.variant, ran, out.output, f"{out.max_abs_error:.3g}",
                    f"{out.max_normalized_error:.3g}", ("pass" if out.passed else "FAIL")
                    + (f" ({out.note})" if out.note else "")
                    + (" (known at build: load() skips it)" if check.known and not out.passed
                       else ""),
                ])
        return rows


def integrity_problems(manifest: Manifest, models: Mapping[str, Path]) -> list[str]:
    """What is wrong with the given variants' files (file name -> path) against `bundle.json`."""
    problems = []
    listed = {entry.path: entry.sha256 for entry in manifest.files or []}
    for variant in manifest.session().variants:
        if variant.file not in models:
            continue
        path = models[variant.file]
        # its external data files lie beside it (assembled() puts split ones back there), and
        # its graphs of other EPs are checked against `files`, whose sha256 they have
        held = [(variant.file, path, variant.sha256),
                *((graph, models.get(graph, path.parent / Path(graph).name), listed.get(graph))
                  for graph in variant.graph_files()[1:]),
                *((data, path.parent / Path(data).name, listed.get(data))
                  for data in variant.data or [])]
        for file, copy, sha256 in held:
            if not copy.is_file():
                problems.append(f"variant {variant.name}: {file} is missing")
            elif sha256 is not None and sha256_of(copy) != sha256:
                problems.append(
                    f"variant {variant.name}: {file} does not match the sha256 in"
                    f" {MANIFEST_FILE} (the file was changed after the build)"
                )
    return problems


def compare(name: str, browser: np.ndarray, native: np.ndarray,
            tolerance: Tolerance) -> OutputCheck:
    """np.allclose-style: passes when |browser - native| <= atol + rtol * |native| everywhere, or
    with `range_fraction`, when |browser - native| <= atol + range_fraction * the native output's
    range. Integer and boolean outputs must be equal."""
    atol, rtol, range_fraction = tolerance.atol, tolerance.rtol, tolerance.range_fraction
    if browser.shape != native.shape:
        return OutputCheck(name, float("inf"), float("inf"), False,
                           f"shape {list(browser.shape)} != native {list(native.shape)}")
    if browser.size == 0:
        return OutputCheck(name, 0.0, 0.0, True)
    if not np.issubdtype(native.dtype, np.floating):  # integers and booleans: exactly
        same = bool(np.array_equal(browser, native))
        worst = 0.0 if same else float(np.abs(browser.astype(np.float64) - native).max())
        return OutputCheck(name, worst, 0.0 if same else float("inf"), same,
                           "" if same else "integer output differs")
    actual = browser.astype(np.float64)
    expected = native.astype(np.float64)
    both_nan = np.isnan(actual) & np.isnan(expected)
    same_inf = np.isinf(expected) & (actual == expected)
    diff = np.where(both_nan | same_inf, 0.0, np.abs(actual - expected))
    diff = np.where(np.isnan(diff), np.inf, diff)
    if range_fraction is not None:
        finite = expected[np.isfinite(expected)]
        spread = float(np.ptp(finite)) if finite.size else 0.0
        normalized = diff / (atol + range_fraction * spread)
    else:
        normalized = diff / (atol + rtol * np.where(np.isfinite(expected), np.abs(expected), 0.0))
    worst_normalized = float(normalized.max())
    return OutputCheck(name, float(diff.max()), worst_normalized, worst_normalized <= 1.0)


def encode_feeds(feeds: Mapping[str, np.ndarray], inputs: Sequence[TensorSpec]) -> dict:
    types = {spec.name: spec.type for spec in inputs}
    return {
        name: {
            "type": types[name],
            "dims": list(value.shape),
            "data": base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii"),
        }
        for name, value in feeds.items()
    }


def _decode_output(encoded: Mapping[str, Any]) -> np.ndarray:
    dtype = np.uint16 if encoded["type"] == "float16" else NUMPY_TYPES[encoded["type"]]
    data = np.frombuffer(base64.b64decode(encoded["data"]), dtype=dtype)
    if encoded["type"] == "float16":
        data = data.view(np.float16)
    return data.reshape(encoded["dims"])


def _page_error(text: str) -> str:
    """A page failure (a timeout, a crash) without Playwright's wrapping."""
    return first_line(re.sub(r"^(Page\.evaluate: )?(Error: )?", "", text.strip()))


class _Session:
    """One browser (with or without WebGPU) loading pages from one served bundle."""

    def __init__(self, browser: Any, base_url: str, settings: BrowserSettings,
                 report: ConformanceReport) -> None:
        self.browser = browser
        self.base_url = base_url
        self.settings = settings
        self.report = report

    def run(self, label: str, options: dict[str, Any],
            cases: list[dict]) -> tuple[dict | None, str | None]:
        context = self.browser.new_context()
        page = context.new_page()
        timeouts = self.settings.timeouts_ms
        page.set_default_timeout(timeouts["load"] + timeouts["run"])
        page.on("console", lambda message: self.report.console.append(
            f"[{label}] {message.type}: {message.text}"))
        page.on("pageerror", lambda error: self.report.console.append(
            f"[{label}] pageerror: {error}"))
        page.on("request", self._watch_request)
        try:
            page.goto(self.base_url + HARNESS_PATH.lstrip("/"))
            result = page.evaluate(harness_call("conformance.mjs", "runCases"),
                                   {"base": self.base_url, "options": options, "cases": cases})
            return result, None
        except Exception as error:  # noqa: BLE001 - Playwright errors and timeouts alike
            return None, _page_error(str(error))
        finally:
            context.close()

    def _watch_request(self, request: Any) -> None:
        url = request.url
        if not url.startswith((self.base_url, "data:", "blob:")):
            self.report.external_requests.append(url)


# bundle.mjs's codes for an EP that could not create a session -> EPCheck.unsupported.
_UNSUPPORTED = {"runtime-unsupported": "runtime", "session-failed": "device",
                "feature-missing": "device"}


def _check(session: _Session, label: str, variant: Variant, requested: list[str] | None,
           expect_ep: str, reference: Reference, inputs: Sequence[TensorSpec],
           outputs: Sequence[TensorSpec]) -> EPCheck:
    options: dict[str, Any] = {}
    if requested is not None:
        options = {"executionProviders": requested, "variant": variant.name,
                   "ignoreVerification": True}
    check = EPCheck(label=label, variant=variant.name, requested=requested)
    cases = [encode_feeds(case.feeds, inputs) for case in reference.cases]
    result, page_error = session.run(label, options, cases)
    if result is None or "error" in result:
        failure = (result or {}).get("error") or {"message": page_error, "reasons": []}
        # Asked for one EP, load() gives its one reason: bundle.mjs's code says why it failed.
        reason = next((r for r in failure["reasons"] if r["ep"] == expect_ep), None)
        if requested is not None and reason is not None:
            check.error = first_line(reason["detail"])
            check.unsupported = _UNSUPPORTED.get(reason["code"])
            check.missing_feature = reason["code"] == "feature-missing"
        else:
            check.error = first_line(failure["message"])
        return check
    check.used_ep = result["ep"]
    check.fallback_reason = result["fallbackReason"]
    check.fallback_reasons = result["fallbackReasons"]
    check.variant = result["variant"]
    if check.used_ep != expect_ep:
        check.error = f"ran on {check.used_ep}, expected {expect_ep}"
        if check.fallback_reason:
            check.error += f" ({check.fallback_reason})"
        return check
    tolerance = tolerance_for("browser", variant.kind, expect_ep, session.settings)
    for case, browser_outputs in zip(reference.cases, result["outputs"], strict=True):
        for spec in outputs:
            name = f"{spec.name} [{case.label}]" if case.label else spec.name
            if spec.name not in browser_outputs:
                check.outputs.append(OutputCheck(name, float("inf"), float("inf"), False,
                                                 "missing from the browser's outputs"))
                continue
            browser = _decode_output(browser_outputs[spec.name])
            check.outputs.append(compare(name, browser, case.outputs[spec.name], tolerance))
    return check


def check_bundle(
    directory: Path,
    *,
    execution_providers: Sequence[str] = ("webgpu", "wasm"),
    dims: Mapping[str, int] | None = None,
    check_fallback: bool = True,
    settings: BrowserSettings | None = None,
    reporter: Reporter | None = None,
    sample: Path | None = None,
    inputs: Mapping[str, InputValue] | None = None,
    manifest: Manifest | None = None,
) -> ConformanceReport:
    """Run the bundle in `directory` in Chromium on each EP and compare with native onnxruntime,
    on the user's `sample` and `inputs` (see user_inputs) where given, else generated inputs.
    `manifest`: the folder's, when the caller has it (a build being staged), else its
    bundle.json."""
    manifest = manifest or load_manifest(directory)
    check_dims(manifest.session().inputs, dims or {})
    user = load_user_inputs(sample, inputs or {}, manifest.session().inputs)
    with contextlib.ExitStack() as stack:
        models = {file: stack.enter_context(assembled(directory, manifest, file))
                  for variant in manifest.session().variants
                  for file in variant.graph_files()}
        return _check_bundle(directory, manifest, models, user, execution_providers, dims,
                             check_fallback, settings or load_settings(), reporter or Reporter())


def _check_bundle(
    directory: Path,
    manifest: Manifest,
    models: Mapping[str, Path],  # variant graph -> a path of the whole model (parts joined)
    user: UserInputs,
    execution_providers: Sequence[str],
    dims: Mapping[str, int] | None,
    check_fallback: bool,
    settings: BrowserSettings,
    reporter: Reporter,
) -> ConformanceReport:
    specs, outputs = manifest.session().inputs, manifest.session().outputs
    report = ConformanceReport(directory=directory)
    report.problems = integrity_problems(manifest, models)
    if report.problems:
        return report
    shipped = [ep for ep in execution_providers if ep in manifest.runtime.builds]
    report.problems += [
        f"this bundle has no runtime for {ep}; rebuild it with that execution provider"
        for ep in execution_providers if ep not in shipped
    ]
    references: dict[str, Reference] = {}  # by graph: an EP's own (Variant.graphs) has its own
    with reporter.step("Running the model natively (onnxruntime CPU) for reference outputs"):
        for variant in manifest.session().variants:
            recorded = variant.reference
            try:
                # The same search as at build time gives the same sizes and cases.
                for graph in variant.graph_files():
                    references[graph] = reference_for(
                        models[graph], specs, dims or (recorded.requested_dims if recorded else {}),
                        user, variant.config_for("wasm"))
            except NotRunnable as not_runnable:
                report.not_done = not_runnable
                return report
            reference = references[variant.file]  # the recorded fingerprint is `file`'s
            if recorded and recorded.dims == reference.dims and recorded.inputs == user.digest:
                changed = fingerprint_mismatch(
                    recorded, reference, tolerance_for("fingerprint", variant.kind).rtol)
                if changed:
                    report.problems.append(
                        f"variant {variant.name}: native outputs of {variant.file} differ"
                        f" from those recorded at build time ({changed}); the model was changed"
                    )
    report.dims = next(iter(references.values())).dims
    with serve_directory(directory) as base_url, playwright_session() as playwright:
        if shipped:
            with reporter.step(f"Comparing in Chromium on {', '.join(shipped)}"), \
                    launch(playwright, settings, webgpu="webgpu" in shipped) as browser:
                session = _Session(browser, base_url, settings, report)
                results = manifest.verification.results or {}
                for ep in shipped:
                    for variant in manifest.session().variants:
                        check = _check(session, ep, variant, [ep], ep,
                                       references[variant.graph_for(ep)], specs, outputs)
                        entry = results.get(variant.name, {}).get(ep)
                        check.known = entry is not None and not entry.passed and \
                            not entry.unsupported
                        report.checks.append(check)
        if check_fallback and "wasm" in manifest.runtime.builds:
            with reporter.step("Checking the fallback to WASM in Chromium without WebGPU"), \
                    launch(playwright, settings, webgpu=False) as browser:
                session = _Session(browser, base_url, settings, report)
                variant = manifest.session().default_for("wasm")
                fallback = _check(session, "fallback", variant, None, "wasm",
                                  references[variant.graph_for("wasm")], specs, outputs)
                if fallback.error is None and "webgpu" in shipped and not fallback.fallback_reason:
                    fallback.error = "fell back to wasm without saying why (fallbackReason empty)"
                report.checks.append(fallback)
    return report

