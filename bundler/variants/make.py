"""The model files a bundle ships: optimise once, make each variant, measure it against fp32.

`make_variants` runs the graph optimisation, then for every planned kind (fp32, fp16, int8, …)
writes the file into the bundle's models/ folder and measures it natively against the original
fp32 model on real inputs when the user gave some (calibration or validation data), else on
generated ones (and says that accuracy is then unknown) at the dims the model is used at
(bundler.verify.workload: the task's size, --dim, else a guess it warns of). For `auto`, select.py
chooses among them once the browser verification has run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
from onnx import TensorProto

from bundler.bundle.external import external_tensors, point_at, ship_external
from bundler.bundle.manifest import Bound, Optimization, OptimizationStep, Task, Variant
from bundler.bundle.modelio import (
    TensorSpec,
    copy_model,
    is_large,
    model_files,
    read_model,
    save_model,
    sha256_of,
    signature,
)
from bundler.bundle.options import BuildOptions
from bundler.console import Reporter
from bundler.errors import QuantizeError
from bundler.model.optimize import OptimizeReport, optimize
from bundler.resources import example_calibration
from bundler.tasks.kinds.text_generation import NAME as TEXT_GENERATION
from bundler.text.generate import read_config
from bundler.text.slices import PAST as PAST_PREFIX
from bundler.text.tokenizer import TextTokenizer
from bundler.text.transcripts import is_audio
from bundler.text.validation import check_text_feeds, is_text_file, read_texts, text_feeds
from bundler.variants.budget import DECODED_TERMS
from bundler.variants.decoded import decoder
from bundler.variants.footprint import footprint
from bundler.variants.int4_options import for_decoder, for_generation
from bundler.variants.metrics import Metrics, measure, native_latency_ms
from bundler.variants.ort_format import to_ort_format
from bundler.variants.plan import VariantPlan
from bundler.variants.registry import is_quantized, kind_spec, make_variant
from bundler.verify.reference import Feeds, NotRunnable, fingerprint, resolve_shapes
from bundler.verify.samples import generated_samples, load_samples, split_samples
from bundler.verify.user_inputs import UserInputs, reference_for
from bundler.verify.workload import Workload, known_dims, measured

HELD_OUT_SAMPLE = "sample-held-out"  # --sample beside --calibration: not calibrated on
GENERATED_NOTE = (
    "accuracy unknown: measured on generated inputs, not real data; pass --calibration"
    " (or --validation) with real samples"
)
CHECK_TEXT = "check-text"  # a text bundle given no data: the built-in check sentences
CHECK_TEXT_NOTE = ("measured on the built-in check sentences; pass --validation texts.txt (one"
                   " text a line) with real texts of your own")
# A variant's file and session config entries -> its Metrics, and how many inputs of what data
# (bundle.json's accuracy.samples and accuracy.data) they were measured on.
Judge = Callable[[Path, Mapping[str, str] | None], tuple[Metrics, int, str]]
MAX_GROWTH = 1.1  # an optimised model this much (and 64 KB) larger than its input is not shipped
VARIANT_COLUMNS = ("variant", "inputs (dims from)", "measured on (n)", "kept in float32", "bytes",
                   "ratio", "max_abs", "mean_rel (p95)", "cosine (p5)", "top1 (95% lower)",
                   "task answers (95% lower)", "tokens", "perplexity x", "native ms (1 thread)",
                   "notes")


@dataclasses.dataclass
class Samples:
    calibration: list[Feeds] | None
    validation: list[Feeds] | None
    source: str  # bundle.json's accuracy.data ("validation", "sample-held-out", …) or "none"
    note: str | None = None
    workload: Workload | None = None  # what the validation samples are (bundler.verify.workload)


@dataclasses.dataclass
class MadeVariant:
    entry: Variant  # its bundle.json entry
    metrics: Metrics | None
    latency_ms: float | None  # shown, not recorded: bundle.json must not change between builds


# Measured on a 13.6 MB conv detector in Chromium (benchmarks/bench_pages.py --large): 59 ms per
# run from the .ort against 24.5 ms from the .onnx; fp32 ran alike in both formats.
ORT_QDQ_WARNING = ("--format ort: onnxruntime-web ran int8-static about 2.4x slower from an .ort"
                   " file than from the .onnx (measured on a conv detector); leave out --format"
                   " ort for the web (the edge target's .ort is not affected)")

def _samples(options: BuildOptions, source_model: Path, inputs: Sequence[TensorSpec],
             is_example: bool, reporter: Reporter, user: UserInputs,
             task: Task | None, text_folder: Path | None = None, on_text: bool = False
             ) -> Samples:
    """The samples accuracy is measured on: the user's data, else generated ones at the dims the
    model is used at (bundler.verify.workload). --validation judges every candidate; else
    --sample given beside --calibration does (int8-static is calibrated on the calibration data
    alone); else, for `auto`, the inputs given are split: int8-static is calibrated on one part
    and every candidate judged on the other."""
    calibration_path = options.calibration or (example_calibration() if is_example else None)
    calibration = (load_samples(calibration_path, inputs, "--calibration")
                   if calibration_path else None)
    # a text-generation bundle's texts are its perplexity's (bundler.text.quality), not feeds
    held_out_text = on_text and is_text_file(options.validation)
    validation = (None if not options.validation or is_audio(options.validation)
                  or held_out_text else
                  text_feeds(options.validation, task, TextTokenizer.from_folder(text_folder),
                             [spec.name for spec in inputs])
                  if is_text_file(options.validation) and text_folder is not None else
                  load_samples(options.validation, inputs, "--validation"))
    given = calibration or list(user.samples)
    source = "calibration" if calibration else "sample"
    if validation:
        source = "validation"
    elif calibration and user.samples:  # the user's own held-out inputs: judge on them
        validation, source = list(user.samples), HELD_OUT_SAMPLE
    elif options.plan.auto and given:
        parts = split_samples(given)
        if parts is not None:
            calibration, validation = parts
            source = f"{source}-split"
    measured_on = validation or list(user.samples) or calibration
    known = known_dims(inputs, task=task, given=options.dims,
                       sample=measured_on[0] if measured_on else user.fixed)
    if measured_on:
        workload = (_one_text(inputs, task, options, user) if is_text_file(options.validation)
                    else measured(inputs, measured_on[0], known))
        return Samples(calibration or list(user.samples) or None, measured_on, source,
                       workload=workload)
    if not _any_quantized(options.kinds) and not options.verify:
        return Samples(None, None, "none")  # --no-verify runs nothing natively it need not
    names = [spec.name for spec in inputs]
    if (texts := check_text_feeds(task, text_folder, names)) is not None:
        generated = None  # int8-static is calibrated on generated ids, judged on the text
        with contextlib.suppress(NotRunnable):
            generated = generated_samples(source_model, inputs, known.dims, user.fixed)
        return Samples(generated, texts, CHECK_TEXT, CHECK_TEXT_NOTE,
                       _one_text(inputs, task, options, user))
    try:
        generated = generated_samples(source_model, inputs, known.dims, user.fixed)
    except NotRunnable as error:
        return Samples(None, None, "none", f"no accuracy measured: {error.reason}; pass"
                       f" {error.hint} or --calibration")
    if on_text:  # accuracy is measured on the check text (bundler.text.quality)
        return Samples(generated, generated, "generated", None,
                       measured(inputs, generated[0], known))
    if _any_quantized(options.kinds):
        reporter.warn(GENERATED_NOTE)
    return Samples(generated, generated, "generated", GENERATED_NOTE,
                   measured(inputs, generated[0], known))


def _one_text(inputs: Sequence[TensorSpec], task: Task | None, options: BuildOptions,
              user: UserInputs) -> Workload:
    """A text bundle's workload: one text of the task's length (bundler.verify.workload), which
    auto times and bench runs at; its texts are measured each at its own length, as embed() and
    classify() run one text."""
    known = known_dims(inputs, task=task, given=options.dims, sample=user.fixed)
    shapes = resolve_shapes(inputs, known.dims)
    return measured(inputs, {name: np.zeros(shape) for name, shape in shapes.items()}, known)


def _any_quantized(kinds: Sequence[str]) -> bool:
    return any(is_quantized(kind) for kind in kinds)


def _optimize(source: Path, destination: Path, options: BuildOptions,
              reporter: Reporter, text_folder: Path | None = None) -> Optimization:
    if not options.optimize:
        copy_model(source, destination)
        return Optimization(enabled=False)
    config = None if text_folder is None else read_config(text_folder, "config.json")
    report: OptimizeReport = optimize(source, destination, fix_dims=options.fix_dims or None,
                                      config=config,
                                      execution_providers=options.execution_providers)
    for step in report.steps:
        if step.status == "fell back":
            reporter.warn(f"optimize: {step.name} fell back ({step.detail})")
    if report.bytes_after > max(report.bytes_before * MAX_GROWTH, report.bytes_before + 65536):
        # Folding can inline constants into every branch of a subgraph; bytes cost downloads.
        copy_model(source, destination)
        reporter.warn(f"optimize: the result grew {report.bytes_after / report.bytes_before:.2f}x"
                      " in bytes; shipping the model unoptimised")
        return Optimization(enabled=True, kept_original="the optimised graph was larger",
                            steps=_steps(report))
    if all(step.status == "skipped" for step in report.steps) and report.steps:
        reporter.info(f"Not optimised: {report.steps[0].detail}")
        return Optimization(enabled=True, nodes_before=report.nodes_before,
                            nodes_after=report.nodes_after, steps=_steps(report))
    reporter.info(f"Optimised: {report.nodes_before} -> {report.nodes_after} nodes,"
                  f" {report.bytes_before} -> {report.bytes_after} bytes")
    return Optimization(enabled=True, nodes_before=report.nodes_before,
                        nodes_after=report.nodes_after, steps=_steps(report))


def _steps(report: OptimizeReport) -> list[OptimizationStep]:
    return [OptimizationStep(step.name, step.status, step.detail) for step in report.steps]


def _row(variant: MadeVariant, workload: Workload | None) -> list[str]:
    """A row of the variant table: each judged metric as its estimate and, in brackets, the
    bound auto judges it by (bundler.variants.confidence)."""
    entry = variant.entry
    accuracy = entry.accuracy

    def number(key: str, bound: str | None = None) -> str:
        value = None if accuracy is None else getattr(accuracy, key)
        text = "-" if value is None else f"{value:.4g}"
        judged = None if accuracy is None or bound is None else (accuracy.bounds or {}).get(bound)
        return text if judged is None or judged.bound is None else f"{text} ({judged.bound:.4g})"

    inputs = "-" if workload is None else f"{workload.label()} ({workload.dims_source})"
    measured_on = "-" if accuracy is None else f"{accuracy.data} ({accuracy.samples})"
    return [entry.name, inputs, measured_on, kind_spec(entry.kind).keeps_float, str(entry.bytes),
            f"{entry.ratio:.3f}", number("max_abs"), number("mean_rel", "mean_rel"),
            number("cosine", "cosine"), number("top1_agreement", "top1"),
            answers(accuracy and accuracy.bounds),
            number("tokens_agreement"), number("perplexity_ratio"),
            "-" if variant.latency_ms is None else f"{variant.latency_ms:.2f}",
            "; ".join(entry.notes)]


def answers(bounds: dict[str, Bound] | None) -> str:
    """A task bundle's decoded agreement (bundler.variants.decoded), e.g. "boxes 0.98 (0.95)"."""
    bounds = bounds or {}
    return "; ".join(f"{key} {bounds[key].estimate:.4g} ({bounds[key].bound:.4g})"
                     for key in DECODED_TERMS if key in bounds
                     and bounds[key].estimate is not None and bounds[key].bound is not None) or "-"


def _ship_graph(graph: Path, shipped: Path, ep: str) -> Path:
    """An EP's own graph of a variant (VariantResult.graphs), shipped beside the variant's
    `shipped` graph as `int4.webgpu.onnx`: each of its tensors in external data points where
    the shipped graph's tensor of that name points (the same bytes of the same, hashed, data
    files), the rest inline."""
    target = shipped.with_name(f"{shipped.stem}.{ep}{shipped.suffix}")
    model = read_model(graph, load_weights=False)
    placed = external_tensors(shipped)
    for tensor in model.graph.initializer:
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        if tensor.name not in placed:
            raise QuantizeError(f"{target.name}: {tensor.name!r} is in no data file of"
                                f" {shipped.name}")
        point_at(tensor, placed[tensor.name])
    save_model(model, target)  # the graph alone: its weights are in the shared files
    return target


def make_variants(
    source: Path,
    work: Path,
    models_dir: Path,
    options: BuildOptions,
    *,
    source_bytes: int,
    is_example: bool,
    reporter: Reporter,
    user: UserInputs | None = None,
    task: Task | None = None,
    text_folder: Path | None = None,
    external: bool = False,
    plan: VariantPlan | None = None,
    prefix: str = "",
    judge: Judge | None = None,
) -> tuple[list[MadeVariant], Optimization, tuple[TensorSpec, ...], tuple[TensorSpec, ...],
           Workload | None, tuple[str, ...]]:
    """Write every variant of the prepared fp32 `source` into `models_dir`.

    `text_folder`: a text bundle's export folder (its tokenizer reads --validation texts).
    `external`: ship every variant's weights in external data files (bundler.bundle.external), as
    the given model kept them; a variant past protobuf's 2 GB ships them so anyway.
    `plan`: the kinds to make (default: the options'); `prefix`: before each file's name (a
    session's, `decoder.`), where a kind that cannot be made is left out with the reason, as for
    auto; `judge`: how each variant is measured instead of output by output (a speech model's
    session, on its transcripts).
    Returns the variants, the optimisation record, the shipped inputs and outputs, the input
    sizes the accuracy was measured at (None when it was not) and the kinds left out, each with
    why. A text-generation model with its export `text_folder` is measured on generation
    instead (bundler.text.quality).
    """
    optimized = work / f"{prefix}optimized.onnx"
    with reporter.step("Optimising the graph"):
        optimization = _optimize(source, optimized, options, reporter, text_folder)
    info = signature(read_model(optimized, load_weights=False))  # the graph is all it needs
    plan = plan or options.plan
    user = user or UserInputs()
    if text_folder is not None and task is not None and task.kind == TEXT_GENERATION:
        from bundler.text.quality import generation_judge

        held_out = read_texts(options.validation) if is_text_file(options.validation) else None
        with reporter.step("Running fp32 on the check prompts and "
                           + ("the --validation texts" if held_out else "text")):
            judge = generation_judge(source, text_folder, held_out)
    samples = _samples(options, source, info.inputs, is_example, reporter, user, task,
                       text_folder, on_text=judge is not None)
    if samples.workload is not None and (warning := samples.workload.warning()) is not None:
        reporter.warn(warning)
    if samples.validation is None and judge is None and _any_quantized(plan.kinds):
        raise QuantizeError(f"{samples.note}; quantized variants are never shipped unmeasured")
    extension = ".ort" if options.format == "ort" else ".onnx"
    variants: list[MadeVariant] = []
    # A decoder stepped with its past (a speech model's decoder, a text-generation model): its
    # token table in 4 bits, and int4 at fp32 speed on WASM (qdq), for text generation at int8
    # speed (format=int8 on WASM alone, per-ep beside WebGPU) where the model can take it
    # (neither is made past 2 GB) and the format can (.ort has no shared data)
    if task is not None and task.kind == TEXT_GENERATION:
        int4 = for_generation(options.int4, options.execution_providers,
                              large=is_large(optimized) or options.format == "ort")
    elif any(spec.name.startswith(PAST_PREFIX) for spec in info.inputs):
        int4 = for_decoder(options.int4)
    else:
        int4 = options.int4
    if int4.format == "per-ep" and options.format == "ort" and "int4" in plan.kinds:
        raise QuantizeError("int4 format=per-ep ships a graph per EP over one external data"
                            " file, which --format ort has no form of; use --int4 format=int8"
                            " or format=qdq")
    skipped: list[str] = []
    for kind in plan.kinds:
        with reporter.step(f"Making the {prefix}{kind} variant"):
            try:
                result = make_variant(kind, optimized, work / f"{prefix}{kind}.onnx",
                                      calibration=samples.calibration,
                                      calibration_method=options.calibration_method,
                                      int4=int4)
            except QuantizeError as error:
                if not plan.auto and not prefix:
                    raise
                skipped.append(f"{prefix}{kind} left out ({error.message})")
                reporter.warn(f"{'auto: ' if plan.auto else ''}{skipped[-1]}")
                continue
        shipped = models_dir / f"{prefix}{kind}{extension}"
        data: list[Path] = []
        shipped.parent.mkdir(parents=True, exist_ok=True)
        if options.format == "ort":
            if kind == "int8-static":
                reporter.warn(ORT_QDQ_WARNING)
            with reporter.step(f"Converting {kind} to ORT format"):
                to_ort_format(result.path, shipped, samples.validation)
        elif external or len(model_files(result.path)) > 1:
            data = ship_external(result.path, shipped)
        else:
            shutil.copyfile(result.path, shipped)
        graphs = {ep: _ship_graph(graph, shipped, ep)
                  for ep, graph in sorted((result.graphs or {}).items())}
        metrics = latency = None
        measured_on = len(samples.validation or []), samples.source
        if judge is not None:
            with reporter.step(f"Measuring {prefix}{kind} against fp32"):
                metrics, count, data_name = judge(result.path, result.native_config)
            measured_on = count, data_name
        elif samples.validation:
            with reporter.step(f"Measuring {kind} against fp32"):
                decode = decoder(task, generated=samples.source == "generated")
                metrics = dataclasses.replace(measure(source, result.path, samples.validation,
                                                      decode, result.native_config),
                                              measured_on=samples.source)
        if samples.validation and judge is None:
            latency = native_latency_ms(result.path, samples.validation, threads=1,
                                        config=result.native_config)
        reference = None  # a record for bundle test (also with --no-verify); never fails a build
        with contextlib.suppress(NotRunnable):
            reference = fingerprint(reference_for(shipped, info.inputs, options.dims, user,
                                                  result.native_config),
                                    options.dims, inputs=user.digest)
        shipped_bytes = sum(file.stat().st_size for file in [shipped, *data])
        entry = Variant(
            name=kind,
            kind=kind,
            file=f"{models_dir.name}/{shipped.name}",
            bytes=shipped_bytes,
            sha256=sha256_of(shipped),
            ratio=round(shipped_bytes / source_bytes, 4),
            accuracy=None if metrics is None else metrics.accuracy(
                samples=measured_on[0], data=measured_on[1]),
            settings=result.settings,
            notes=result.notes + ([samples.note] if samples.note and is_quantized(kind) else []),
            reference=reference,
            data=[f"{models_dir.name}/{file.name}" for file in data] or None,
            graphs={ep: f"{models_dir.name}/{graph.name}" for ep, graph in graphs.items()}
            or None,
            memory=footprint(result.path, shipped_bytes, folded="session.disable_quant_qdq"
                             in (result.native_config or {})),
            session_config=result.session_config,
            requires=result.requires,
        )
        variants.append(MadeVariant(entry, metrics, latency))
    if not variants:
        raise QuantizeError("auto: no candidate variant could be made; see the warnings above")
    of = f" of {prefix.rstrip('.')}" if prefix else ""
    reporter.table(f"Variants{of} (accuracy against fp32, native onnxruntime)", VARIANT_COLUMNS,
                   [_row(v, samples.workload) for v in variants])
    return variants, optimization, info.inputs, info.outputs, samples.workload, tuple(skipped)
