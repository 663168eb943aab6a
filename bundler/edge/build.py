"""`bundle build --target edge`: a folder for native onnxruntime on devices (ORT Mobile, minimal
and reduced-operator builds, Jetson, Raspberry Pi), not for the browser.

    edge/
      edge.json                               the manifest (variants, inputs/outputs, checks)
      models/<variant>.ort                    ORT format, optimised for the CPU EP
      required_operators_and_types.config     for onnxruntime's reduced-size build (its
                                              build.py --include_ops_by_config FILE
                                              --enable_reduced_operator_type_support)

Every variant is made as for the web (optimise, quantize, measure against fp32), converted to
ORT format at onnxruntime's extended level (what its own converter does for ARM: all passes but
the x86-only NCHWc layout), so the saved graph has the fused QDQ kernels (QLinearConv, ...) a
minimal build cannot make at load time, and shipped only once the .ort file loads natively and
matches within 1e-4: the fp32 one against the original model, a quantized one against its own
.onnx. (The web's `--format ort` stays at the basic level, for the browser's kernels.)
int8-static is the recommended default (integer compute is what pays on CPUs without a GPU);
it needs calibration data, so without `--calibration` only fp32 ships, with a warning.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort

from bundler import __version__
from bundler.bundle.edge import (
    EdgeManifest,
    EdgeRuntime,
    EdgeSession,
    EdgeVariant,
    OrtCheck,
    RequiredOperators,
    dump_edge,
)
from bundler.bundle.layout import EDGE_MANIFEST, EDGE_OPERATORS_CONFIG, MODELS_DIR, WORK_DIR
from bundler.bundle.manifest import TOOL_NAME, Fingerprint, Source, Tool, Variant
from bundler.bundle.modelio import TensorSpec, cpu_session, model_bytes, sha256_of
from bundler.bundle.options import BuildOptions
from bundler.bundle.staging import check_output, move_into_place, staging_folder
from bundler.console import Reporter
from bundler.errors import ConfigError, QuantizeError, first_line
from bundler.model.prepare import prepare_model
from bundler.variants.default import default_to_ship
from bundler.variants.make import make_variants
from bundler.variants.ort_format import save_ort
from bundler.variants.registry import is_quantized
from bundler.verify.reference import NotRunnable, fingerprint, native_reference
from bundler.verify.samples import generated_samples
from bundler.verify.tolerance import tolerance_for

EDGE_OUTPUT = Path("edge")
RECOMMENDED = "int8-static"
ORT_CHECK = tolerance_for("ort-edge")  # .ort against the .onnx it was made from
CHECK_SAMPLES = 4


def _kinds(options: BuildOptions, has_calibration: bool, reporter: Reporter) -> tuple[str, ...]:
    if options.plan.auto:
        raise ConfigError("--quantize auto chooses by a browser check; for --target edge give"
                          " --variants (e.g. fp32,int8-static) or --quantize KIND")
    if options.variants or options.quantize is not None:
        return options.kinds
    if not has_calibration:
        reporter.warn(f"{RECOMMENDED}, the recommended edge default, needs --calibration data;"
                      " shipping fp32 only")
        return ("fp32",)
    return ("fp32", RECOMMENDED)


def to_edge_ort(model: Path, destination: Path) -> None:
    try:
        save_ort(model, destination, level=ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED)
    except Exception as error:  # noqa: BLE001 - onnxruntime raises unrelated types
        raise QuantizeError(f"could not convert {model.name} to ORT format"
                            f" ({first_line(error)})") from None


def _fingerprint(model: Path, inputs: tuple[TensorSpec, ...], dims: dict[str, int]
                 ) -> Fingerprint | None:
    try:
        return fingerprint(native_reference(model, inputs, dims), dims)
    except NotRunnable:
        return None


def check_ort(ort_file: Path, original: Path, samples: list[dict[str, np.ndarray]]) -> float:
    """Load `ort_file` natively, run it and `original` on `samples`; the worst absolute
    difference, or QuantizeError when it is beyond ORT_CHECK (nothing ships then)."""
    try:
        converted = cpu_session(ort_file)
    except Exception as error:  # noqa: BLE001 - onnxruntime raises unrelated types
        raise QuantizeError(f"{ort_file.name} does not load in onnxruntime ({first_line(error)});"
                            " nothing was shipped") from None
    reference = cpu_session(original)
    names = [output.name for output in reference.get_outputs()]
    worst = 0.0
    for feeds in samples:
        for name, want, got in zip(names, reference.run(names, feeds), converted.run(names, feeds),
                                   strict=True):
            want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
            if want.shape != got.shape or not np.allclose(got, want, atol=ORT_CHECK.atol,
                                                          rtol=ORT_CHECK.rtol, equal_nan=True):
                raise QuantizeError(
                    f"{ort_file.name} differs from {original.name} on output {name!r} beyond"
                    f" {ORT_CHECK.atol}; ship the .onnx instead (--target web)")
            if want.size:
                worst = max(worst, float(np.nanmax(np.abs(got - want), initial=0.0)))
    return worst


def _required_operators(models: list[Path], staging: Path) -> dict[str, dict[str, list[str]]]:
    """Write the reduced-build config for all shipped .ort files; returns its operators."""
    from onnxruntime.tools.ort_format_model.utils import create_config_from_models

    config = staging / EDGE_OPERATORS_CONFIG
    logging.getLogger("ort_format_model.utils").setLevel(logging.WARNING)  # its "Created" line
    create_config_from_models(models, config, enable_type_reduction=True)
    # Its comments name the model files: keep them relative, so the build is reproducible.
    text = config.read_text(encoding="utf-8").replace(f"{staging}/", "")
    config.write_text(text, encoding="utf-8")
    operators: dict[str, dict[str, list[str]]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            domain, opset, ops = line.split(";", 2)
            names = [op.split("{", 1)[0] for op in _split_ops(ops)]
            operators.setdefault(domain, {})[opset] = names
    return operators


def _split_ops(ops: str) -> list[str]:
    """'Conv{"inputs": {"0": ["float"]}},Relu' -> its entries (commas inside braces kept)."""
    entries, depth, current = [], 0, ""
    for char in ops:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            entries.append(current)
            current = ""
        else:
            current += char
    return [*entries, current] if current else entries


def _ship_ort(entry: Variant, work: Path, staging: Path, prepared: Path,
              samples: list[dict[str, np.ndarray]], inputs: tuple[TensorSpec, ...],
              dims: dict[str, int], source_bytes: int) -> EdgeVariant:
    """Convert a variant's .onnx (in `work`) to models/<name>.ort, check it natively against
    the original model (fp32) or its own .onnx (quantized); its edge.json entry."""
    onnx_file = work / entry.file
    shipped = staging / MODELS_DIR / f"{entry.name}.ort"
    to_edge_ort(onnx_file, shipped)
    fp32 = not is_quantized(entry.kind)
    worst = check_ort(shipped, prepared if fp32 else onnx_file, samples)
    size = shipped.stat().st_size
    check = OrtCheck(against="original model" if fp32 else onnx_file.name,
                     max_abs_error=float(f"{worst:.3g}"), tolerance=ORT_CHECK.atol,
                     samples=len(samples))
    return EdgeVariant.checked(dataclasses.replace(
        entry, file=MODELS_DIR + shipped.name, bytes=size, sha256=sha256_of(shipped),
        ratio=round(size / source_bytes, 4), reference=_fingerprint(shipped, inputs, dims),
        graphs=None), check)  # one .ort (int4 format=per-ep: WASM's form, the CPU's)


def build_edge(source: Path, options: BuildOptions, *, force: bool, is_example: bool,
               reporter: Reporter) -> EdgeManifest:
    output = EDGE_OUTPUT if options.output == BuildOptions().output else Path(options.output)
    check_output(output, source, force, EDGE_MANIFEST)
    has_calibration = bool(options.calibration) or is_example
    kinds = _kinds(options, has_calibration, reporter)
    edge_options = dataclasses.replace(options, format="onnx", quantize=None, variants=kinds)
    source_bytes = model_bytes(source)
    with staging_folder(output) as staging:
        work = staging / WORK_DIR
        with reporter.step(f"Checking {source}"):
            prepared = work / "source.onnx"
            notes = prepare_model(source, prepared, reporter)
        made, optimization, inputs, outputs, *_ = make_variants(
            prepared, work, work / MODELS_DIR, edge_options, source_bytes=source_bytes,
            is_example=is_example, reporter=reporter)
        # Sizes the model runs at: those the reference search found (a detector fails at 1x1).
        recorded = made[0].entry.reference
        dims = recorded.dims if recorded else options.dims
        samples = generated_samples(prepared, inputs, dims, count=CHECK_SAMPLES)
        (staging / MODELS_DIR).mkdir()
        variants = []
        for variant in made:
            with reporter.step(f"Converting {variant.entry.name} to ORT format and checking it"):
                variants.append(_ship_ort(variant.entry, work, staging, prepared, samples, inputs,
                                          options.dims, source_bytes))
        names = [variant.name for variant in variants]
        default = default_to_ship(names, options.default_variant, RECOMMENDED)
        if not isinstance(default, str) or default not in names:
            raise ConfigError(f"default_variant {default!r} is not one of the shipped variants"
                              f" ({', '.join(names)}); --target edge takes one name")
        operators = _required_operators(
            [staging / file for file in sorted(v.file for v in variants)], staging)
        name = options.name or source.stem
        manifest = EdgeManifest(
            name=name,
            tool=Tool(TOOL_NAME, __version__),
            target="edge",
            runtime=EdgeRuntime(package="onnxruntime", converted_with=ort.__version__,
                                format="ort", optimization_level="extended",
                                load_with=f"onnxruntime >= {ort.__version__} (full, mobile or a"
                                          f" minimal build with {EDGE_OPERATORS_CONFIG})"),
            sessions=(EdgeSession(name, list(inputs), list(outputs), variants, default),),
            required_operators=RequiredOperators(EDGE_OPERATORS_CONFIG, operators),
            source=Source(source.name, source_bytes),
            optimization=optimization,
            notes=notes,
        )
        dump_edge(staging, manifest)
        shutil.rmtree(work)
        move_into_place(staging, output)
    reporter.info(f"Built {output}/ for native onnxruntime: "
                  + ", ".join(f"{v.name} {v.bytes} B" for v in manifest.session().variants)
                  + f"; default {default}; reduced-build config {EDGE_OPERATORS_CONFIG}")
    return manifest
