"""ONNX's backend test models as a corpus: does every one build, and does the bundle compute the
suite's expected outputs in Chromium wherever a hand-written onnxruntime-web page does?

    python benchmarks/onnx_backend_corpus.py [--budget 600] [--json corpus.json]
                                             [--category simple] [--only Conv] [--no-optimize]

Builds each model of onnx/backend/test/data/{pytorch-converted,pytorch-operator,simple} with the
library API (verify off: the suite brings its own inputs and expected outputs), then in one
Chromium with WebGPU (SwiftShader) and one without, runs each bundle through the default `load()`
and through `load()` forced to that browser's EP, and the original model through a minimal page
that imports onnxruntime-web's own module. Prints, per category, how many were built, refused,
matched, mismatched (wrong numbers) and errored, the refusals, and the cases the hand-written
page matches but the bundle does not.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import onnxruntime as ort
from onnx_corpus import (  # the engine beside this script (its folder is first on sys.path)
    CATEGORIES,
    Built,
    Run,
    build_all,
    bundle_losses,
    cases,
    stage_hand_page,
)
from onnx_corpus_browser import BROWSERS, run_all

from bundler.bundle.options import DEFAULT_RUNTIME_VERSION
from bundler.console import TerminalReporter
from bundler.site.runtime import fetch_runtime

OUTCOMES = ("matched", "mismatched", "errored", "not built", "not run")
COLUMNS = ("page", "browser", "load()", "models", "built", "refused", "matched",
           "mismatched (wrong numbers)", "errored", "not run")
PAGE_ROWS = (("bundle", "default"), ("bundle", "forced"), ("hand", "forced"))


def _rows(category: str, built: Sequence[Built], runs: Sequence[Run]) -> list[list[str]]:
    built_here = [item for item in built if item.case.category == category]
    made = sum(item.status == "built" for item in built_here)
    rows = []
    for browser in BROWSERS:
        for page, mode in PAGE_ROWS:
            counts = collections.Counter(
                run.outcome for run in runs if run.case.category == category
                and run.browser == browser and run.page == page and run.mode == mode)
            label = ("default (no options)" if mode == "default"
                     else f"executionProviders: ['{browser}']")
            rows.append([
                "bundle.mjs" if page == "bundle" else "hand-written", f"{browser} browser",
                label if page == "bundle" else f"InferenceSession ['{browser}']",
                str(len(built_here)),
                str(made) if page == "bundle" else "-",
                str(len(built_here) - made) if page == "bundle" else "-",
                str(counts["matched"]), str(counts["mismatched"]), str(counts["errored"]),
                str(counts["not run"]),
            ])
    return rows


def _summary(built: Sequence[Built], runs: Sequence[Run]) -> dict[str, Any]:
    def count(page: str, mode: str, outcome: str) -> int:
        return sum(run.page == page and run.mode == mode and run.outcome == outcome
                   for run in runs)

    return {
        "models": len(built),
        "built": sum(item.status == "built" for item in built),
        "refused": sum(item.status == "refused" for item in built),
        "crashed": sum(item.status == "crashed" for item in built),
        "runs_per_page": len(built) * len(BROWSERS),
        **{f"{page}_{mode}_{outcome.replace(' ', '_')}": count(page, mode, outcome)
           for page, mode in PAGE_ROWS for outcome in OUTCOMES},
        "bundle_losses": sum(1 for _ in bundle_losses(runs)),
    }


def _report(built: Sequence[Built], runs: Sequence[Run], reporter: TerminalReporter,
            build_seconds: float, run_seconds: float, optimize: bool) -> dict[str, Any]:
    for category in sorted({item.case.category for item in built}, key=CATEGORIES.index):
        reporter.table(f"{category}: suite's expected outputs, in Chromium", COLUMNS,
                       _rows(category, built, runs))
    refusals = collections.defaultdict(list)
    for item in built:
        if item.status != "built":
            refusals[(item.status, _shape_of(item.line))].append(item.case.key)
    reporter.table("Refused (or crashed) at build time, by message", ("status", "models", "line"),
                   [[status, f"{len(keys)}: {', '.join(keys[:3])}" + (" …" if len(keys) > 3
                                                                       else ""), line]
                    for (status, line), keys in sorted(refusals.items(),
                                                       key=lambda kv: -len(kv[1]))])
    losses = list(bundle_losses(runs))
    reporter.table("Matched by the hand-written page but not by the bundle",
                   ("model", "browser", "load()", "bundle outcome", "why"),
                   [[bundle.case.key, bundle.browser, bundle.mode, bundle.outcome, bundle.detail]
                    for _, bundle in losses])
    wrong = [run for run in runs if run.outcome == "mismatched"]
    reporter.table("Wrong numbers (must be none)", ("page", "model", "browser", "load()", "ran on",
                                                    "detail"),
                   [[run.page, run.case.key, run.browser, run.mode, run.ep or "-", run.detail]
                    for run in wrong])
    summary = _summary(built, runs)
    reporter.info(
        f"default load(): the bundle matched {summary['bundle_default_matched']} of"
        f" {summary['runs_per_page']} runs, the hand-written page"
        f" {summary['hand_forced_matched']}; wrong numbers: bundle"
        f" {summary['bundle_default_mismatched'] + summary['bundle_forced_mismatched']},"
        f" hand page {summary['hand_forced_mismatched']}; {len(losses)} bundle losses."
        f" Built {summary['built']} of {summary['models']} in {build_seconds:.0f} s"
        f" (optimizer {'on' if optimize else 'off'}), browser runs {run_seconds:.0f} s.")
    return summary


def _shape_of(line: str) -> str:
    """The refusal line without the model's own path, so equal refusals group together."""
    return line.split(": ", 1)[1] if line.startswith("/") and ": " in line else line


def _json(built: Sequence[Built], runs: Sequence[Run], summary: dict[str, Any]) -> dict:
    by_case: dict[str, dict[str, Any]] = {}
    for item in built:
        by_case[item.case.key] = {"category": item.case.category, "name": item.case.name,
                                  "build": {"status": item.status, "line": item.line,
                                            "seconds": round(item.seconds, 3)},
                                  "runs": []}
    for run in runs:
        entry = dataclasses.asdict(run)
        entry.pop("case")
        by_case[run.case.key]["runs"].append(entry)
    return {"summary": summary, "cases": list(by_case.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=600.0,
                        help="seconds for the whole run; models not started by then are"
                             " reported as not run (default 600)")
    parser.add_argument("--json", type=Path, help="write every case's results here")
    parser.add_argument("--category", action="append", choices=CATEGORIES)
    parser.add_argument("--only", help="only the models whose name contains this")
    parser.add_argument("--no-optimize", action="store_true",
                        help="build without the graph optimizer")
    parser.add_argument("--keep", type=Path, help="build into this folder and keep it")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds one page may take for load() and the runs (default 60)")
    args = parser.parse_args()
    started = time.monotonic()
    reporter = TerminalReporter()
    ort.set_default_logger_severity(4)  # the refusals are reported below, once each
    selected = [case for case in cases(args.category or CATEGORIES)
                if args.only is None or args.only in case.name]
    dist = fetch_runtime(DEFAULT_RUNTIME_VERSION)
    with tempfile.TemporaryDirectory(prefix="onnx-corpus-") as scratch:
        root = args.keep or Path(scratch)
        with reporter.step(f"Building {len(selected)} models"):
            built = build_all(selected, root, dist, optimize=not args.no_optimize)
        build_seconds = time.monotonic() - started
        stage_hand_page(root, selected, dist)
        done = collections.Counter()

        def progress(case_runs: list[Run]) -> None:
            done[case_runs[0].browser] += 1
            outcomes = ", ".join(f"{run.page} {run.mode} {run.outcome}" for run in case_runs)
            reporter.info(f"[{case_runs[0].browser} {done[case_runs[0].browser]}/{len(built)}]"
                          f" {case_runs[0].case.key}: {outcomes}")

        runs = run_all(built, root, deadline=started + args.budget,
                       timeout_ms=int(args.timeout * 1000), progress=progress)
    summary = _report(built, runs, reporter, build_seconds,
                      time.monotonic() - started - build_seconds, optimize=not args.no_optimize)
    if args.json:
        args.json.write_text(json.dumps(_json(built, runs, summary), indent=2) + "\n")


if __name__ == "__main__":
    main()
