"""The verify stage: the browser check (bundler.verify.conformance) of a staged bundle, and what
bundle.json and --strict make of it (bundler.verify.verified says what "verified" means)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path

from bundler.bundle import manifest as manifest_file
from bundler.bundle.manifest import EPResult, Manifest, Session, Verification
from bundler.bundle.options import BuildOptions
from bundler.console import Reporter
from bundler.errors import BrowserError
from bundler.text.build import text_answer_problems
from bundler.verify.conformance import REPORT_COLUMNS, ConformanceReport, EPCheck, check_bundle
from bundler.verify.verified import verdict

NOT_VERIFIED = "built with --no-verify"


@dataclasses.dataclass(frozen=True)
class Verified:
    """The browser check's report, or why there is none."""

    report: ConformanceReport | None
    reason: str | None = None
    answers: Mapping[tuple[str, str], str] = dataclasses.field(default_factory=dict)  # failed

    @property
    def record(self) -> Verification:
        return verification_record(self.report, self.reason)

    def failed_defaults(self, session: Session) -> dict[str, str]:
        """Per EP, why the variant load() opens there by default failed the check: its outputs
        against native onnxruntime, or its task's answers (not an EP load() skips, nor one the
        adapter lacks a feature for)."""
        failed: dict[str, str] = {}
        for check in self.report.checks if self.report is not None else []:
            if check.requested is not None and not check.acceptable \
                    and not check.missing_feature \
                    and check.variant == session.default_for(check.label).name:
                failed.setdefault(check.label, check.error or "its outputs differ from native"
                                  " onnxruntime beyond the tolerance")
        for (variant, ep), why in self.answers.items():
            if variant == session.default_for(ep).name:
                failed.setdefault(ep, why)
        return failed


def pending() -> Verification:
    """The verification of a manifest in progress (the check has not run yet)."""
    return verification_record(None, "")


def verify(staging: Path, manifest: Manifest, options: BuildOptions, reporter: Reporter,
           title: str = "Browser vs native onnxruntime", answers: bool = True) -> Verified:
    """The bundle test check on the staged folder that `manifest` (in progress) describes; it is
    written where bundle.mjs reads it (bundle.files.mjs), not as bundle.json."""
    if not options.verify:
        return Verified(None, NOT_VERIFIED)
    manifest_file.dump_module(staging, manifest)
    try:
        report = check_bundle(staging, execution_providers=options.execution_providers,
                              dims=options.dims, reporter=reporter, sample=options.sample,
                              inputs=options.inputs, manifest=manifest)
    except BrowserError as error:
        reason = f"no browser to verify in ({error})"
        reporter.warn(f"{reason}; the bundle is not verified")
        return Verified(None, reason)
    reporter.table(title, REPORT_COLUMNS, report.rows())
    if not answers:
        return Verified(report)
    # a text task's answers too (embed, classify, generate): problems if they differ
    failed = text_answer_problems(staging, manifest, list(options.execution_providers), reporter)
    report.problems += [f"{variant} on {ep}: {why}" for (variant, ep), why in failed.items()]
    return Verified(report, answers=failed)


def _significant(value: float | None) -> float | None:
    """Three significant digits; None for no value or an infinite one (JSON has no Infinity)."""
    return None if value is None or not math.isfinite(value) else float(f"{value:.3g}")


def verification_record(report: ConformanceReport | None, reason: str | None) -> Verification:
    """What bundle.json says about the build-time browser check (docs/reference/bundle-json.md)."""
    if report is None:
        return Verification("not_done", reason=reason, hint="run: bundle test DIR")
    if report.not_done is not None:
        return Verification("not_done", reason=report.not_done.reason,
                            hint=f"pass {report.not_done.hint} to bundle build or bundle test")
    results: dict[str, dict[str, EPResult]] = {}
    fallback = None
    for check in report.checks:
        entry = EPResult(
            passed=check.passed,
            max_abs_error=_significant(check.worst_abs_error),
            max_normalized_error=_significant(
                max((c.max_normalized_error for c in check.outputs), default=None)),
            error=check.error or None,
            unsupported=check.unsupported,
        )
        if check.requested is None:
            fallback = entry
        else:
            results.setdefault(check.variant, {})[check.label] = entry
    return Verification(verdict(report).status, dims=report.dims, results=results,
                        fallback=fallback, problems=report.problems or None)


def strict_failures(report: ConformanceReport | None, verification: Verification) -> list[str]:
    """Why a --strict build fails (bundler.verify.verified's verdict with every_ep), in
    bundle.json's order: every requested EP, and the fallback, must have passed the browser
    check."""
    outcome = verdict(report, every_ep=True)
    if report is None or outcome.status == "not_done":
        return [f"not verified in the browser ({verification.reason})"]
    # per variant, as verification.results lists them
    runs: dict[str, list[EPCheck]] = {c.variant: [] for c in report.checks
                                      if c.requested is not None}
    for check in outcome.failed:
        if check.requested is not None:
            runs[check.variant].append(check)
    failures = [f"{check.variant} on {check.label} did not pass the browser check"
                + (f" ({check.error})" if check.error else "")
                for checks in runs.values() for check in checks]
    if any(check.requested is None for check in outcome.failed):
        failures.append("the fallback to WASM did not pass the browser check")
    return failures + report.problems + [f"the page requested {url}, outside 127.0.0.1"
                                         for url in report.external_requests]
