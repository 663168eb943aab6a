"""`bundle test`: prove in headless Chromium that a built folder computes what native onnxruntime
computes, print the table, write the report, and fail with one line when anything is off."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from bundler.conformance import REPORT_COLUMNS, ConformanceReport, check_bundle
from bundler.console import Reporter
from bundler.errors import BundlerError
from bundler.options import EXECUTION_PROVIDERS
from bundler.user_inputs import InputValue


def check(
    directory: Path,
    *,
    execution_providers: Sequence[str] = EXECUTION_PROVIDERS,
    dims: Mapping[str, int] | None = None,
    report: Path | None = None,
    check_fallback: bool = True,
    reporter: Reporter | None = None,
    sample: Path | None = None,
    inputs: Mapping[str, InputValue] | None = None,
) -> ConformanceReport:
    """Run the check (on the user's `sample` and `inputs` where given); raise BundlerError (one
    line) unless it passed."""
    reporter = reporter or Reporter()
    result = check_bundle(directory, execution_providers=execution_providers, dims=dims,
                          check_fallback=check_fallback, reporter=reporter, sample=sample,
                          inputs=inputs)
    if report is not None:
        report.write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    reporter.table(f"{directory}: browser vs native onnxruntime", REPORT_COLUMNS, result.rows())
    for url in result.external_requests:
        reporter.warn(f"the page requested {url}, outside the bundle's origin")
    if result.not_done is not None:
        raise BundlerError(f"cannot test: {result.not_done.reason}; pass {result.not_done.hint}")
    if result.problems:
        more = len(result.problems) - 1
        raise BundlerError(result.problems[0] + (f" (and {more} more problems)" if more else ""))
    if result.external_requests:
        raise BundlerError(f"the page made {len(result.external_requests)} request(s) outside"
                           f" 127.0.0.1, e.g. {result.external_requests[0]}")
    if not result.ok:
        raise BundlerError("the browser does not compute what native onnxruntime computes"
                           " (see the table above)")
    reporter.info("All checks passed.")
    return result
