"""`bundle test`: prove in headless Chromium that a built folder computes what native onnxruntime
computes, print the table, write the report, and fail with one line when anything is off. With
--validation, also the shipped variant's agreement with fp32 on the user's inputs
(bundler.variants.holdout)."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from bundler.bundle import manifest as manifest_file
from bundler.bundle.codec import to_json
from bundler.bundle.manifest import Manifest
from bundler.bundle.options import EXECUTION_PROVIDERS
from bundler.console import Reporter
from bundler.errors import BundlerError, ConfigError
from bundler.tasks.check import TaskComparison, TaskInput, check_task, columns
from bundler.tasks.kinds.text_generation import CHECK_STEPS
from bundler.tasks.kinds.text_generation import NAME as TEXT_GENERATION
from bundler.variants.holdout import COLUMNS as HELD_OUT_COLUMNS
from bundler.variants.holdout import check_held_out
from bundler.verify.browser import load_settings
from bundler.verify.conformance import REPORT_COLUMNS, ConformanceReport, check_bundle
from bundler.verify.user_inputs import InputValue
from bundler.verify.verified import Verdict, verdict


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
    task_files: Sequence[Path] = (),
    prompts: Sequence[str] = (),
    steps: int | None = None,
    validation: Path | None = None,
    original: Path | None = None,
) -> ConformanceReport:
    """Run the check (on the user's `sample` and `inputs` where given), and on a task bundle the
    task check (on `task_files`, else inputs made in code; a text-generation bundle on `prompts`
    for `steps` tokens where given); with `validation`, the default
    variant's agreement with fp32 (the bundle's, else `original`) on it, judged by the budget;
    raise BundlerError (one line) unless all passed."""
    if report is not None and not report.parent.is_dir():
        raise ConfigError(f"--report {report}: {report.parent} is not a folder")
    for path in task_files:
        if not path.is_file():
            raise ConfigError(f"{path}: no such file (--image/--audio)")
    manifest, task_inputs = _task_inputs(directory, task_files, prompts, steps)
    reporter = reporter or Reporter()
    held_out = [] if validation is None else check_held_out(directory, validation, original)
    result = check_bundle(directory, execution_providers=execution_providers, dims=dims,
                          check_fallback=check_fallback, reporter=reporter, sample=sample,
                          inputs=inputs)
    task = _task_check(directory, manifest, task_inputs, execution_providers, reporter, steps)
    outcome = verdict(result, task or None)  # no task answers: not a task bundle
    if report is not None:
        report.write_text(json.dumps({**result.to_json(), "task": [
            {**dataclasses.asdict(entry), "passed": entry.passed} for entry in task],
            "validation": [{"variant": entry.variant, "against": entry.against,
                            **to_json(entry.metrics.accuracy(
                                samples=len(entry.metrics.per_sample), data="validation")),
                            "failures": entry.failures} for entry in held_out],
            "verified": {"status": outcome.status, "covers": list(outcome.covers)}}, indent=2)
            + "\n", encoding="utf-8")
    reporter.table(f"{directory}: browser vs native onnxruntime", REPORT_COLUMNS, result.rows())
    if task:
        assert manifest.task is not None  # task answers: a task bundle
        kind = manifest.task.kind
        reporter.table(f"{directory}: task answers, browser vs Python reference", columns(kind),
                       [entry.row(kind) for entry in task])
    if held_out:
        reporter.table(f"{directory}: the shipped variant against fp32 on --validation (native)",
                       HELD_OUT_COLUMNS, [entry.row() for entry in held_out])
    for url in result.external_requests:
        reporter.warn(f"the page requested {url}, outside the bundle's origin")
    if outcome.status != "passed":
        raise BundlerError(_why_not(result, outcome))
    if failed := [entry for entry in held_out if entry.failures]:
        raise BundlerError(f"{failed[0].variant} misses the budget on --validation"
                           f" ({failed[0].failures[0]})")
    reporter.info("All checks passed.")
    return result


def _why_not(result: ConformanceReport, outcome: Verdict) -> str:
    """The one line saying what failed, the most basic first."""
    if result.not_done is not None:
        return f"cannot test: {result.not_done.reason}; pass {result.not_done.hint}"
    if result.problems:
        more = len(result.problems) - 1
        return result.problems[0] + (f" (and {more} more problems)" if more else "")
    if result.external_requests:
        return (f"the page made {len(result.external_requests)} request(s) outside 127.0.0.1,"
                f" e.g. {result.external_requests[0]}")
    if not result.ok:
        return ("the browser does not compute what native onnxruntime computes (see the table"
                " above)")
    failed = outcome.failed_tasks[0]
    return (f"the browser's task answers differ from the Python reference on {failed.ep}"
            f" ({failed.file}: {failed.error})")


def _task_inputs(directory: Path, files: Sequence[Path], prompts: Sequence[str],
                 steps: int | None) -> tuple[Manifest, list[TaskInput]]:
    """The bundle's manifest and what its task check runs on; ConfigError for inputs its task
    does not take."""
    manifest = manifest_file.load(directory)
    generation = manifest.task is not None and manifest.task.kind == TEXT_GENERATION
    if (prompts or steps is not None) and not generation:
        raise ConfigError(f"{directory} is not a text-generation bundle; --prompt and --steps"
                          " need one")
    if manifest.task is None:
        if files:
            raise ConfigError(f"{directory} was built without --task; --image/--audio/"
                              "--text-file need a task bundle")
        return manifest, []
    inputs = [TaskInput(path.name, path.read_bytes()) for path in files]
    if prompts:
        inputs.append(TaskInput("--prompt", json.dumps(list(prompts), ensure_ascii=False)
                                .encode("utf-8")))
    return manifest, inputs or [TaskInput.made(manifest.task)]


def _task_check(directory: Path, manifest: Manifest, inputs: Sequence[TaskInput],
                execution_providers: Sequence[str], reporter: Reporter, steps: int | None
                ) -> list[TaskComparison]:
    if manifest.task is None:
        return []
    with tempfile.TemporaryDirectory(prefix="bundle-task-") as scratch:
        return check_task(directory, manifest, inputs, execution_providers, load_settings(),
                          reporter, Path(scratch), steps=steps or CHECK_STEPS)
