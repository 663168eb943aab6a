"""`bundle build`: model -> static web app folder, written atomically.

The inputs are checked and the runtime fetched first, before any folder is made; then the stages
run in order into a temporary folder beside the output (copy the runtime -> prepare the model and
fit it to that runtime -> optimize -> quantize and measure the variants -> verify in the browser,
and for `auto`, choose -> render the site); only a complete build is moved into place.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from pathlib import Path
from typing import Any

import onnxruntime as ort

from bundler import __version__
from bundler.bundle import manifest as manifest_file
from bundler.bundle.files import rename_to_hashed
from bundler.bundle.layout import MODELS_DIR, RUNTIME_DIR, WORK_DIR
from bundler.bundle.manifest import (
    TOOL_NAME,
    EPResult,
    Manifest,
    NativeReference,
    Runtime,
    RuntimeBuild,
    Source,
    Tool,
    Verification,
)
from bundler.bundle.modelio import TensorSpec, input_specs, model_bytes, read_model
from bundler.bundle.options import BuildOptions
from bundler.bundle.staging import check_output, move_into_place, staging_folder
from bundler.console import Reporter
from bundler.errors import BrowserError, ConfigError, VerificationFailed
from bundler.hosting.publish import HostingOptions, add_coi_worker, publish
from bundler.model.analysis import model_warnings
from bundler.model.prepare import CasesFor, check_weights, prepare_model
from bundler.perf.speed import SPEED_COLUMNS, browser_speeds, speed_record, speed_rows
from bundler.resources import example_model
from bundler.site.pages import finish_site, human_bytes, write_modules
from bundler.site.runtime import (
    BUILDS,
    PACKAGE,
    copy_runtime,
    locate_runtime,
    needed_files,
    runtime_version_of,
)
from bundler.tasks.build import shipped_inputs, task_hint, with_task_graph
from bundler.tasks.resolve import resolve_task
from bundler.text.build import (
    complete_text_task,
    ship_text,
    text_answer_problems,
    text_source,
)
from bundler.variants.default import default_to_ship
from bundler.variants.make import MadeVariant, make_variants
from bundler.variants.select import fitting_names, select
from bundler.verify.browser import chromium_executable, load_settings
from bundler.verify.conformance import REPORT_COLUMNS, ConformanceReport, EPCheck, check_bundle
from bundler.verify.reference import Feeds, check_dims
from bundler.verify.samples import load_samples
from bundler.verify.user_inputs import UserInputs, load_user_inputs, reference_for
from bundler.verify.verified import verdict
from bundler.verify.workload import bundle_known, measured_reference

# What inspect warns of that the build itself fits to the runtime (compat), saying so in notes.
FITTED_BY_PREPARE = {"opset", "ir-version"}


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


def _verify(staging: Path, manifest: Manifest, options: BuildOptions, reporter: Reporter,
            title: str = "Browser vs native onnxruntime") -> tuple[ConformanceReport | None,
                                                                   str | None]:
    """The bundle test check on the staged folder, of `manifest` as it stands (written where
    bundle.mjs reads it); (None, why) when there is no browser."""
    manifest.verification = verification_record(None, "")
    manifest_file.dump_module(staging, manifest)
    try:
        report = check_bundle(staging, execution_providers=options.execution_providers,
                              dims=options.dims, reporter=reporter, sample=options.sample,
                              inputs=options.inputs, manifest=manifest)
    except BrowserError as error:
        reason = f"no browser to verify in ({error})"
        reporter.warn(f"{reason}; the bundle is not verified")
        return None, reason
    reporter.table(title, REPORT_COLUMNS, report.rows())
    return report, None


def _check_inputs(source: Path, inputs: tuple[TensorSpec, ...],
                 shipped: tuple[TensorSpec, ...], options: BuildOptions) -> None:
    """The checks that need no work done: they fail before any folder is made. Samples are of
    the `shipped` inputs (an image task's are uint8 pixels)."""
    check_weights(source)
    check_dims(inputs, options.dims)
    for key, path in (("--calibration", options.calibration),
                      ("--validation", options.validation)):
        if path is not None:
            load_samples(path, shipped, key)
    if options.verify and options.target != "edge":  # a Chromium named but missing is a mistake
        chromium_executable(load_settings())


def build(
    model: Path | None = None,
    options: BuildOptions | None = None,
    *,
    force: bool = False,
    reporter: Reporter | None = None,
) -> Manifest | dict[str, Any]:
    """Build the bundle and return its manifest (the content of bundle.json); with target edge,
    the edge folder's (edge.json, see bundler.edge.build)."""
    options = options or BuildOptions()
    reporter = reporter or Reporter()
    plan = options.plan
    is_example = model is None and options.model is None
    # an export folder (model.onnx, config.json, tokenizer files): its model and task
    source, options, text = text_source(Path(model or options.model or example_model()), options)
    output = Path(options.output)
    header = read_model(source, load_weights=False)  # fail fast, before any folder is made
    task = resolve_task(options.task, header)
    complete_text_task(task, text)
    inputs = shipped_inputs(input_specs(header), task)  # an image task's input is uint8 pixels
    user = load_user_inputs(options.sample, options.inputs, inputs)
    _check_inputs(source, input_specs(header), inputs, options)
    for warning in model_warnings(source):  # the same warnings bundle inspect gives
        if warning.code not in FITTED_BY_PREPARE:
            reporter.warn(warning.text())
    if task is not None and options.target == "edge":
        raise ConfigError("--task builds a web app (classify/detect/stream); it does not apply to"
                          " --target edge")
    if (hint := task_hint(options.task, header)) is not None:
        reporter.info(hint)
    if options.target == "edge":
        from bundler.edge.build import build_edge

        return build_edge(source, options, force=force, is_example=is_example, reporter=reporter)
    check_output(output, source, force)
    files = needed_files(options.execution_providers)
    with reporter.step(f"Fetching {PACKAGE} {options.runtime_version}"):
        dist = locate_runtime(options.runtime_dir, options.runtime_version, files)
    runtime_version = runtime_version_of(dist) or options.runtime_version
    with staging_folder(output) as staging:
        work = staging / WORK_DIR
        hosting = HostingOptions(options.max_file_size, options.hosts, options.coi_worker)
        shipped = copy_runtime(dist, staging / RUNTIME_DIR, files)
        with reporter.step(f"Checking {source}"):
            prepared = work / "source.onnx"
            notes = prepare_model(with_task_graph(source, task, work), prepared, reporter,
                                  runtime_version,
                                  _cases_for(options, user) if options.verify else None)
        for note in notes:
            reporter.info(note)
        variants, optimization, inputs, outputs, workload = make_variants(
            prepared, work, staging / MODELS_DIR, options, source_bytes=model_bytes(source),
            is_example=is_example, reporter=reporter, user=user, task=task,
        )
        for variant in variants:
            variant.entry.file = MODELS_DIR + rename_to_hashed(staging / variant.entry.file).name
        ship_text(task, text, staging)
        manifest = Manifest(
            name=options.name or source.stem,
            tool=Tool(TOOL_NAME, __version__),
            runtime=Runtime(
                package=PACKAGE,
                version=runtime_version,
                dir=RUNTIME_DIR,
                builds={ep: RuntimeBuild(**{role: RUNTIME_DIR + shipped[name] for role, name
                                            in dataclasses.asdict(BUILDS[ep]).items()})
                        for ep in options.execution_providers},
                native_reference=NativeReference("onnxruntime", ort.__version__),
            ),
            inputs=list(inputs),
            outputs=list(outputs),
            variants=[variant.entry for variant in variants],
            # auto: the first candidate while the candidates are checked, then the chosen one
            default_variant=default_to_ship([v.entry.name for v in variants], plan.default),
            source=Source(source.name, model_bytes(source)),
            optimization=optimization,
            notes=notes,
            verification=verification_record(None, ""),
            hosting=hosting.record(),
            task=task,
            workload=None if workload is None else workload.to_json(),
        )
        write_modules(staging, manifest)
        if plan.auto:
            _choose_auto(staging, manifest, variants, options, user, reporter)
        add_coi_worker(staging, hosting)
        with reporter.step("Splitting and compressing for static hosts"):
            publish(staging, manifest, hosting)
        report, reason = (_verify(staging, manifest, options, reporter) if options.verify
                          else (None, "built with --no-verify"))
        if report is not None:  # a text task's answers too (embed, classify)
            report.problems += text_answer_problems(staging, manifest,
                                                    list(options.execution_providers), reporter)
        manifest.verification = verification_record(report, reason)
        shutil.rmtree(work)
        finish_site(staging, manifest, options.templates)
        move_into_place(staging, output)
    _summarise(manifest, output, reporter, verification_wanted=options.verify)
    if options.strict and (failures := strict_failures(report, manifest.verification)):
        raise VerificationFailed(f"--strict: {failures[0]}" + (
            f" (and {len(failures) - 1} more)" if len(failures) > 1 else "")
            + f"; the bundle is in {output}/")
    return manifest


def _choose_auto(staging: Path, manifest: Manifest, variants: list[MadeVariant],
                 options: BuildOptions, user: UserInputs, reporter: Reporter) -> None:
    """Check the candidates in the browser, time those that may ship (unless the objective is
    size) and keep the chosen ones in `manifest` and `staging`."""
    report = (_verify(staging, manifest, options, reporter, "Browser check of the"
                      " candidates")[0] if options.verify else None)
    fitting = fitting_names(variants, report, options.max_error)
    speeds: dict[str, dict[str, float]] = {}
    if options.objective == "size" or report is None or len(fitting) < 2 \
            or "wasm" not in options.execution_providers:
        why = ("the objective is size" if options.objective == "size" else
               "no browser check" if report is None else
               "one candidate or none fits" if len(fitting) < 2 else "no WASM runtime shipped")
        record = speed_record(None, why)
    else:  # at the sizes accuracy was measured at (the build's record, as bench reads it)
        reference, timed = measured_reference(staging / manifest.variant(fitting[0]).file,
                                              manifest, bundle_known(manifest), user)
        speeds, record = browser_speeds(staging, manifest, fitting, reference.feeds, reporter)
        record = {**record, **timed.to_json()}
    choice = select(variants, report, options.max_error, options.objective, speeds,
                    options.execution_providers, record)
    for name in choice.dropped:
        (staging / manifest.variant(name).file).unlink()
    manifest.variants = [v for v in manifest.variants if v.name not in choice.dropped]
    manifest.default_variant = choice.chosen
    manifest.selection = choice.selection
    reporter.table(f"auto ({options.objective}): the candidates", SPEED_COLUMNS,
                   speed_rows(choice.selection.candidates, record))
    if choice.selection.note:  # the inputs cannot show the budget: fp32 ships
        reporter.warn(choice.selection.note)
    reporter.info(f"auto: shipping {choice.chosen}")


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


def _cases_for(options: BuildOptions, user: UserInputs) -> CasesFor:
    """The inputs a model file is checked on: the user's, else generated ones it accepts."""

    def cases(model: Path) -> list[Feeds]:
        inputs = input_specs(read_model(model, load_weights=False))
        return [case.feeds for case in reference_for(model, inputs, options.dims, user).cases]

    return cases


def rerender(previous: Path, output: Path, templates: Path | None) -> Manifest:
    """A new build in `output` that is `previous` with its pages rendered again (for a change of
    the templates only): the models and runtime are linked, not rebuilt."""
    manifest = manifest_file.load(previous)
    with staging_folder(output) as staging:
        for folder in (RUNTIME_DIR, MODELS_DIR):
            shutil.copytree(previous / folder, staging / folder, copy_function=_link_or_copy)
        add_coi_worker(staging, HostingOptions.of(manifest.hosting))
        write_modules(staging, manifest)
        finish_site(staging, manifest, templates)
        move_into_place(staging, output)
    return manifest


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def summary(manifest: Manifest) -> str:
    """One line about a build: what ships and what the model takes and gives."""
    variants = ", ".join(f"{variant.name} {human_bytes(variant.bytes)}"
                         for variant in manifest.variants)
    inputs = ", ".join(spec.name for spec in manifest.inputs)
    outputs = ", ".join(spec.name for spec in manifest.outputs)
    return f"{manifest.name}: {variants}; inputs {inputs} -> outputs {outputs}"


def _summarise(manifest: Manifest, output: Path, reporter: Reporter,
               verification_wanted: bool) -> None:
    verification = manifest.verification
    if verification.status == "not_done" and verification_wanted:
        reporter.warn(f"not verified in the browser: {verification.reason}"
                      f" ({verification.hint})")
    elif verification.status == "failed":
        for variant, results in (verification.results or {}).items():
            for ep, entry in results.items():
                if not entry.passed:
                    why = entry.error or (f"worst abs error {entry.max_abs_error}"
                                          if entry.max_abs_error is not None else
                                          "NaN or infinity where native onnxruntime differs")
                    reporter.warn(f"{variant} on {ep} failed browser verification ({why});"
                                  " load() skips it unless told ignoreVerification: true")
        for problem in verification.problems or []:
            reporter.warn(problem)
    reporter.info(f"Built {output}/ ({summary(manifest)})")

