"""What "verified" means (bundler.verify.verified): the one verdict behind bundle build's record,
bundle test's exit status and --strict, on recorded checks (no browser needed)."""

from __future__ import annotations

from pathlib import Path

from bundler.bundle.manifest import Verification
from bundler.stages.verify import strict_failures, verification_record
from bundler.tasks.check import TaskComparison
from bundler.verify.conformance import ConformanceReport, EPCheck, OutputCheck
from bundler.verify.reference import NotRunnable
from bundler.verify.verified import verdict


def _run(ep: str, variant: str = "fp32", *, passed: bool = True, unsupported: str | None = None,
         known: bool = False, fallback: bool = False) -> EPCheck:
    check = EPCheck(label="fallback" if fallback else ep, variant=variant,
                    requested=None if fallback else [ep], used_ep=ep, known=known,
                    unsupported=unsupported)
    check.outputs.append(OutputCheck("y", 0.0 if passed else 1.0, 0.0 if passed else 9.0, passed))
    if unsupported:
        check.outputs.clear()
        check.error = "no kernel"
    return check


def _report(*checks: EPCheck, **fields) -> ConformanceReport:
    return ConformanceReport(Path("dist"), checks=list(checks), **fields)


def test_not_done_without_a_check_or_when_the_model_does_not_run() -> None:
    assert verdict(None).status == "not_done"
    not_run = _report(not_done=NotRunnable("no size runs", "--dim h=224"))
    assert verdict(not_run).status == "not_done" and not verification_record(not_run, None).results
    assert strict_failures(None, Verification("not_done", reason="built with --no-verify")) == [
        "not verified in the browser (built with --no-verify)"]


def test_passed_covers_the_outputs_the_files_the_requests_and_the_fallback() -> None:
    report = _report(_run("webgpu"), _run("wasm"), _run("wasm", fallback=True))
    outcome = verdict(report)
    assert outcome.status == "passed" and report.ok
    assert outcome.covers == ("model files", "outputs in Chromium", "no outside requests",
                              "fallback to WASM")
    assert verification_record(report, None).status == "passed"
    assert strict_failures(report, Verification("passed")) == []


def test_an_unsupported_ep_passes_but_not_strictly() -> None:
    report = _report(_run("webgpu", unsupported="runtime"), _run("wasm"))
    assert verdict(report).status == "passed"
    assert verdict(report, every_ep=True).status == "failed"
    assert strict_failures(report, Verification("passed")) == [
        "fp32 on webgpu did not pass the browser check (no kernel)"]


def test_a_failure_known_at_build_time_does_not_fail_bundle_test() -> None:
    assert verdict(_report(_run("webgpu", passed=False, known=True), _run("wasm"))).status \
        == "passed"
    assert verdict(_report(_run("webgpu", passed=False), _run("wasm"))).status == "failed"


def test_no_passing_run_problems_and_outside_requests_fail() -> None:
    assert verdict(_report(_run("webgpu", unsupported="device"))).status == "failed"
    assert verdict(_report(_run("wasm"), problems=["fp32.onnx is missing"])).status == "failed"
    outside = _report(_run("wasm"), external_requests=["https://cdn.example/ort.wasm"])
    assert verdict(outside).status == "failed"
    assert verification_record(outside, None).status == "failed"
    assert strict_failures(outside, Verification("failed")) == [
        "the page requested https://cdn.example/ort.wasm, outside 127.0.0.1"]


def test_strict_failures_in_bundle_json_order() -> None:
    report = _report(_run("webgpu", "fp32"), _run("webgpu", "int8", passed=False),
                     _run("wasm", "fp32", passed=False), _run("wasm", "int8"),
                     _run("wasm", "fp32", fallback=True, passed=False), problems=["changed"])
    assert strict_failures(report, Verification("failed")) == [
        "fp32 on wasm did not pass the browser check",
        "int8 on webgpu did not pass the browser check",
        "the fallback to WASM did not pass the browser check",
        "changed"]


def test_the_task_check_counts_when_it_ran() -> None:
    report = _report(_run("wasm"))
    wrong = TaskComparison("wasm", "fp32", "cat.png", error="labels differ")
    outcome = verdict(report, [TaskComparison("wasm", "fp32", "dog.png"), wrong])
    assert outcome.status == "failed" and outcome.failed_tasks == (wrong,)
    assert outcome.covers[-1] == "task answers"
    assert verdict(report, [TaskComparison("wasm", "fp32", "dog.png")]).status == "passed"
    assert "task answers" not in verdict(report).covers
