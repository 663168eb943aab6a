"""Turn the user's model into the browser-ready fp32 file every variant starts from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx

from bundler.bundle.modelio import (
    build_machine_limit,
    check_model,
    input_specs,
    is_large,
    large_threshold,
    model_bytes,
    native_load_error,
    read_model,
    save_model,
    write_graph,
)
from bundler.bundle.options import DEFAULT_RUNTIME_VERSION
from bundler.console import Reporter
from bundler.errors import ModelError
from bundler.model.compat import Fit, fit_runtime, original_runs, verify_fit
from bundler.variants.kinds import VARIANT_KINDS
from bundler.variants.plan import VariantPlan
from bundler.variants.registry import made_from_large
from bundler.verify.reference import Feeds, NotRunnable, input_rules, make_feeds, resolve_shapes


def _strip_zipmap(model: onnx.ModelProto) -> list[str]:
    """ZipMap (sklearn converters put it last) outputs a sequence of maps, which onnxruntime-web
    cannot return; the probability tensor it zips is the same information, so output that."""
    notes = []
    producers = {output: node for node in model.graph.node for output in node.output}
    for value in list(model.graph.output):
        node = producers.get(value.name)
        if node is None or node.op_type != "ZipMap" or node.domain != "ai.onnx.ml":
            continue
        scores = node.input[0]
        model.graph.node.remove(node)
        for other in model.graph.node:
            for i, name in enumerate(other.input):
                if name == scores:
                    other.input[i] = value.name
        for other in model.graph.node:
            for i, name in enumerate(other.output):
                if name == scores:
                    other.output[i] = value.name
        value.type.CopyFrom(onnx.TypeProto())
        value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        notes.append(f"output {value.name!r}: ZipMap removed, so it is the float32 score tensor"
                     " (onnxruntime-web returns tensors only)")
    return notes


def check_weights(source: Path, plan: VariantPlan) -> None:
    """ModelError, from file sizes alone (before gigabytes of weights are read), for a large
    model (is_large: weights in external data past 2 GB) asked for a kind that is not made from
    one (registry.made_from_large: the others load every weight into one protobuf, which cannot
    pass protobuf's 2 GB). `auto` leaves those candidates out instead, each with the reason."""
    refused = [kind for kind in plan.kinds if not made_from_large(kind)]
    if refused and not plan.auto and is_large(source):
        made = ", ".join(kind for kind in VARIANT_KINDS if made_from_large(kind))
        raise ModelError(
            f"{source} holds {model_bytes(source) / 1e9:.2f} GB of weights in external data;"
            f" only {made} are built from a model past 2 GB (the other kinds load every weight"
            f" into one protobuf): leave out {', '.join(refused)}, or quantize it before the"
            " build"
        )


def _prepare_large(source: Path, destination: Path, runtime_version: str) -> list[str]:
    """prepare_model for a large model (is_large): the graph alone is fitted and written, its
    data files copied as they are, so no protobuf holds the weights."""
    model = read_model(source, load_weights=False)
    notes = _strip_zipmap(model)
    try:
        fit = fit_runtime(model, runtime_version)
    except ModelError as error:
        raise ModelError(f"{source}: {error.message}") from None
    if fit.converted:  # the version converter rewrote operators: checking that runs it twice
        raise ModelError(f"{source}: {fit.notes[0]}; a model past 2 GB of weights is not"
                         " converted by the build: export it at that opset")
    write_graph(fit.model, source.parent, destination)
    if load_error := native_load_error(destination):
        raise ModelError(f"{source}: onnxruntime cannot load this model"
                         f" ({build_machine_limit(load_error) or load_error})")
    return [*notes, *fit.notes,
            f"weights past {large_threshold()} bytes in external data: built from the graph"
            " alone, the data files shipped as they are (fp32 only, not optimised)"]


CasesFor = Callable[[Path], list[Feeds]]  # the inputs to check a model file on


def _verified(unfitted: Path, destination: Path, fit: Fit, cases_for: CasesFor | None,
              reporter: Reporter) -> str:
    """The note on how the fitted model was checked against the model before fitting."""
    if cases_for is None:
        return "conversion not verified (--no-verify)"
    try:
        cases = cases_for(destination)
    except NotRunnable as error:
        inputs = input_specs(read_model(unfitted, load_weights=False))
        seeded = make_feeds(inputs, resolve_shapes(inputs, {}), rules=input_rules(unfitted, inputs))
        if fit.converted and original_runs(unfitted, fit, seeded):
            verify_fit(unfitted, destination, fit, [seeded])  # says where the conversion broke
        reporter.warn(f"the conversion is not verified: {error.reason} (pass {error.hint})")
        return f"conversion not verified: {error.reason}"
    return verify_fit(unfitted, destination, fit, cases)


def prepare_model(source: Path, destination: Path, reporter: Reporter,
                  runtime_version: str = DEFAULT_RUNTIME_VERSION,
                  cases_for: CasesFor | None = None) -> list[str]:
    """Check `source`, write the browser-ready copy (weights inline) to `destination`, fitted to
    what onnxruntime-web `runtime_version` loads (see compat) and checked on `cases_for` inputs
    (None: not checked, as with --no-verify).

    Returns notes on what was changed. The onnx checker's complaints are warnings when native
    onnxruntime loads the model anyway (several exporters write models the checker rejects).
    """
    if is_large(source):
        return _prepare_large(source, destination, runtime_version)
    model = read_model(source)
    complaints = check_model(source)
    notes = _strip_zipmap(model)
    destination.parent.mkdir(parents=True, exist_ok=True)
    unfitted = destination.with_name("unfitted.onnx")
    save_model(model, unfitted)  # inline below protobuf's 2 GB, else with external data
    try:
        fit = fit_runtime(model, runtime_version)
    except ModelError as error:
        raise ModelError(f"{source}: {error.message}") from None
    save_model(fit.model, destination)
    if load_error := native_load_error(destination):
        reason = build_machine_limit(load_error) or (complaints[0] if complaints else load_error)
        what = "the browser-ready copy does not load" if (notes or fit.changed) and not \
            native_load_error(source) else "onnxruntime cannot load this model"
        raise ModelError(f"{source}: {what} ({reason})")
    for complaint in complaints:
        reporter.warn(f"onnx.checker: {complaint} (onnxruntime loads the model, so going on)")
    if fit.changed:
        notes += [*fit.notes, _verified(unfitted, destination, fit, cases_for, reporter)]
    unfitted.unlink()
    return notes
