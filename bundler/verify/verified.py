"""What "verified" means: one definition for `bundle build`, `bundle test` and `--strict`.

A bundle is verified ("passed") when, on the inputs of the check (the user's `--sample`/`--input`,
else generated ones), all of these hold: every model file matches the sha256 in bundle.json and,
where the check ran on the same sizes and inputs as the build, native onnxruntime's outputs of it
match the fingerprint recorded at build time; the bundle ships a runtime for every execution
provider asked for; each shipped variant, on each of those EPs, ran in headless Chromium through
bundle.mjs and its outputs match native onnxruntime (CPU) within the tolerance of
bundler.verify.tolerance (playwright.config.py's, per EP; a quantized variant's relative to each
output's range), or that EP could not create a session (unsupported by this onnxruntime-web build or
by the device), or it already failed at build time so that load() skips it, with at least one run
passing; in a Chromium without WebGPU the default load() fell back to WASM and computed the same;
and the page requested nothing outside 127.0.0.1. On a task bundle, `bundle test` also checks the
task's answers (labels, scores, boxes, chunks) on each EP against the Python reference; the build
does not run that check. `--strict` asks more: every variant on every requested EP, and the
fallback, passed (an unsupported EP fails it). "not_done" means the check could not run (no browser,
`--no-verify`, or no input size at which the model runs natively); "failed" is anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from bundler.tasks.check import TaskComparison
    from bundler.verify.conformance import ConformanceReport, EPCheck

Status = Literal["passed", "failed", "not_done"]


@dataclass(frozen=True)
class Verdict:
    status: Status
    covers: tuple[str, ...]  # what the check looked at (nothing when not done)
    failed: tuple[EPCheck, ...] = ()  # browser runs that count against the bundle
    failed_tasks: tuple[TaskComparison, ...] = ()


def verdict(report: ConformanceReport | None, task: Sequence[TaskComparison] | None = None, *,
            every_ep: bool = False) -> Verdict:
    """The verdict on `report` (None: the check did not run) and, when given, the task check;
    `every_ep` (--strict): every run must have passed, an unsupported EP included."""
    if report is None or report.not_done is not None:
        return Verdict("not_done", ())
    covers = ("model files", "outputs in Chromium", "no outside requests")
    if any(check.requested is None for check in report.checks):
        covers += ("fallback to WASM",)
    if task is not None:
        covers += ("task answers",)
    failed = tuple(check for check in report.checks
                   if not (check.passed if every_ep else check.acceptable))
    failed_tasks = tuple(entry for entry in task or () if not entry.passed)
    ok = (not report.problems and not report.external_requests and not failed
          and not failed_tasks and any(check.passed for check in report.checks))
    return Verdict("passed" if ok else "failed", covers, failed, failed_tasks)
