"""The variant kinds by name, and `make_variant`, which makes one.

Each kind is the module of its name in this package (see kinds.py and spec.py); it is imported
when first asked for, so listing the names never loads onnxruntime.
"""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import Callable
from pathlib import Path

from bundler.bundle.external import save_sharing
from bundler.bundle.modelio import cpu_session, is_large, read_model, save_model
from bundler.errors import BundlerError, ConfigError, QuantizeError, first_line
from bundler.model.tied import (
    share_streamed_copies,
    share_transposed_copies,
    unshare_for_matmuls,
)
from bundler.variants.int4_options import Int4Options
from bundler.variants.kinds import (
    CALIBRATION_METHODS,
    VARIANT_KINDS,
    CalibrationMethod,
    VariantKind,
    module_name,
)
from bundler.variants.metrics import Feeds
from bundler.variants.spec import Job, KindSpec, VariantResult


def kind_spec(kind: str) -> KindSpec:
    """The registered kind named `kind`; a ConfigError naming the choices for any other name."""
    if kind not in VARIANT_KINDS:
        raise ConfigError(f"unknown variant {kind!r}; choose from {', '.join(VARIANT_KINDS)}")
    spec: KindSpec = importlib.import_module(f"{__package__}.{module_name(kind)}").KIND
    return spec


def made_from_large(kind: str) -> bool:
    """Whether `kind` is made from a model past 2 GB (modelio.is_large): fp32, copied file by
    file, and the kinds that read a weight at a time (KindSpec.streamed)."""
    return kind == "fp32" or kind_spec(kind).streamed


def is_quantized(kind: str) -> bool:
    """Whether `kind` computes in lower precision than the model, as its spec says."""
    return kind_spec(kind).quantized


def make_variant(
    kind: VariantKind,
    src: Path,
    dst: Path,
    *,
    calibration: Feeds | None = None,
    calibration_method: CalibrationMethod = "minmax",
    log: Callable[[str], None] = lambda s: None,
    int4: Int4Options | None = None,
) -> VariantResult:
    """Write the `kind` variant of the (already optimised, fp32) model `src` to `dst`.

    `calibration` feeds drive int8-static's calibration, int8's per-channel choice and fp16's
    NaN/Inf check; they are used in the order given, so the result is deterministic. `int4`:
    the int4 kind's settings (default: Int4Options()).
    """
    spec = kind_spec(kind)
    if calibration_method not in CALIBRATION_METHODS:
        raise ConfigError(
            f"unknown calibration method {calibration_method!r};"
            f" choose from {', '.join(CALIBRATION_METHODS)}"
        )
    if spec.needs_calibration and not calibration:
        raise QuantizeError(
            f"{kind} needs calibration inputs for {src.name}: pass calibration feeds,"
            f" or {spec.advice}"
        )
    if not made_from_large(kind) and is_large(src):  # auto leaves it out, saying so
        raise QuantizeError(f"{kind} is not made from a model past 2 GB of weights (it would load"
                            f" every weight into one protobuf); {spec.advice}")
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        # beside dst (the build's work folder): a signal that lands while it is being removed
        # leaves it there, where the build's own folder takes it, not in $TMPDIR
        with tempfile.TemporaryDirectory(prefix="bundler-variant-", dir=dst.parent) as scratch:
            # a tied head kept shared (bundler.model.tied) reads its weight through a Transpose,
            # which no quantizer takes: it gets its own constant for the kind to quantize, unless
            # the kind takes it as it is (KindSpec.takes_tied_heads)
            untie = spec.quantized and not spec.takes_tied_heads
            weightless = read_model(src, load_weights=False) if spec.streamed and is_large(
                src) else None
            model = weightless if weightless is not None else read_model(src) if untie else None
            copies = unshare_for_matmuls(model, src.parent) if untie and model is not None else {}
            if weightless is None and copies:
                src = Path(scratch) / src.name
                save_model(model, src)
            job = Job(src, dst, calibration, calibration_method, log,
                      VariantResult(spec.name, dst), int4 or Int4Options(), weightless)
            spec.make(job)
        # a copy the kind left float is shared again (from a large model by name, its data file
        # rewritten without it: comparing values would read every weight of the variant at once)
        if copies and weightless is not None:
            share_streamed_copies(dst, copies)
        elif copies:
            made = read_model(dst)
            # an EP's own graph (int4 format=per-ep) shares the copy as the variant's does, and
            # its weights stay those of the variant's data file
            graphs = {path: read_model(path) for path in (job.result.graphs or {}).values()}
            if [share_transposed_copies(model) for model in [made, *graphs.values()]][0]:
                if graphs:
                    save_sharing(made, dst, graphs)
                else:
                    save_model(made, dst)
        for graph in [dst, *(job.result.graphs or {}).values()]:
            cpu_session(graph, config=job.result.native_config)  # as every native run opens it
    except BundlerError:
        raise
    except Exception as error:
        raise QuantizeError(
            f"could not make the {kind} variant of {src.name} ({first_line(error, typed=True)});"
            f" {spec.advice}"
        ) from None
    return job.result
