"""The shipped model must load in the pinned onnxruntime-web: fit its IR version and opsets.

A model saved by a newer `onnx` package is stamped with an IR version (and maybe opsets) newer
than the runtime accepts, although it rarely uses anything new: then the stamps are lowered (the
same schemas, so an exact relabel) or, where an operator changed, onnx's version converter
rewrites it. ai.onnx opsets older than onnxruntime implements (< 7) are raised the same way.
Every conversion is checked natively against the original (`verify_fit`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import defs, version_converter

from bundler.bundle.modelio import cpu_session, walk_nodes
from bundler.errors import ModelError, first_line
from bundler.verify.reference import run_native
from bundler.verify.tolerance import tolerance_for

AI_ONNX = "ai.onnx"


@dataclasses.dataclass(frozen=True)
class RuntimeLimits:
    """The newest IR version and opset per domain a runtime build loads."""

    ir_version: int
    opsets: dict[str, int]


# Measured in headless Chromium: InferenceSession.create on a model stamped with each version
# (1.31.1: "Unsupported model IR version: 14, max supported IR version: 13"; "Current official
# support for domain ai.onnx is till opset 26", "... ai.onnx.ml is till opset 5").
WEB_RUNTIME_LIMITS: dict[str, RuntimeLimits] = {
    "1.31.1": RuntimeLimits(ir_version=13, opsets={AI_ONNX: 26, "ai.onnx.ml": 5}),
}
# onnxruntime has no kernels for older ai.onnx opsets ("Could not find an implementation for
# Add(6)"); the version converter raises such models to this one.
OLDEST_IMPLEMENTED_OPSET = 7
# Element types and the IR version that introduced them (onnx docs/IR.md).
_TYPE_IR = {
    onnx.TensorProto.FLOAT8E4M3FN: 9, onnx.TensorProto.FLOAT8E4M3FNUZ: 9,
    onnx.TensorProto.FLOAT8E5M2: 9, onnx.TensorProto.FLOAT8E5M2FNUZ: 9,
    onnx.TensorProto.UINT4: 10, onnx.TensorProto.INT4: 10, onnx.TensorProto.FLOAT4E2M1: 11,
}
def limits_for(runtime_version: str) -> RuntimeLimits | None:
    return WEB_RUNTIME_LIMITS.get(runtime_version)


@dataclasses.dataclass
class Fit:
    """What fitting did: `notes` for bundle.json; `converted` when the version converter rewrote
    operators (rather than only relabelling versions), `raised_from` an opset onnxruntime cannot
    run natively (so the original is checked with onnx's reference evaluator)."""

    model: onnx.ModelProto
    notes: list[str]
    converted: bool = False
    raised_from: int | None = None

    @property
    def changed(self) -> bool:
        return bool(self.notes)


def _domain(name: str) -> str:
    return name or AI_ONNX


def _nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    yield from walk_nodes(model.graph)
    for function in model.functions:
        yield from function.node


def _newest_schema_used(model: onnx.ModelProto, domain: str, version: int) -> tuple[int, str]:
    """The highest `since_version` among the schemas the model's `domain` nodes resolve to at
    `version`, and that operator: lowering the opset down to it keeps every schema the same."""
    newest, which = 1, ""
    for node in _nodes(model):
        if _domain(node.domain) != domain:
            continue
        try:
            since = defs.get_schema(node.op_type, version, node.domain).since_version
        except defs.SchemaError:
            continue  # a local function or an operator onnx does not know: not versioned here
        if since > newest:
            newest, which = since, node.op_type
    return newest, which


def _set_opset(model: onnx.ModelProto, domain: str, version: int) -> None:
    for entry in [*model.opset_import, *(i for f in model.functions for i in f.opset_import)]:
        if _domain(entry.domain) == domain:
            entry.version = version


def _needs_newer(what: str, runtime_version: str, needs: str,
                 has: Callable[[RuntimeLimits], bool], detail: str = "") -> ModelError:
    """The one error for a model the runtime is too old for: what it uses, and which runtime
    version would load it."""
    newer = [version for version, limits in WEB_RUNTIME_LIMITS.items() if has(limits)]
    which = (f"onnxruntime-web {newer[0]} has it (--runtime-version {newer[0]})" if newer else
             f"no onnxruntime-web release this tool knows ({', '.join(WEB_RUNTIME_LIMITS)}) has"
             " it")
    return ModelError(f"the model uses {what}{f' ({detail})' if detail else ''}, which needs"
                      f" {needs}; onnxruntime-web {runtime_version} lacks it and {which};"
                      " export the model for an older opset")


def _fit_opset(model: onnx.ModelProto, domain: str, version: int, limit: int,
               runtime_version: str, fit: Fit) -> onnx.ModelProto:
    newest, operator = _newest_schema_used(model, domain, version)
    if newest <= limit:
        _set_opset(model, domain, limit)
        fit.notes.append(f"{domain} opset {version} -> {limit} for onnxruntime-web"
                         f" {runtime_version} (its newest); the model uses no operator newer,"
                         " so only the stamp changed")
        return model
    needs, detail = f"{domain} opset {newest}", ""
    if domain == AI_ONNX:
        try:
            converted = version_converter.convert_version(model, limit)
        except Exception as error:  # noqa: BLE001 - the converter raises bare RuntimeErrors
            detail = f"onnx's version converter: {first_line(error, limit=120)}"
        else:
            fit.converted = True
            fit.notes.append(f"ai.onnx opset {version} -> {limit} for onnxruntime-web"
                             f" {runtime_version} (its newest) with onnx's version converter"
                             f" ({operator} of opset {newest} rewritten)")
            return converted
    raise _needs_newer(operator, runtime_version, needs,
                       lambda limits: limits.opsets.get(domain, 0) >= newest, detail)


def _raise_old_opset(model: onnx.ModelProto, version: int, fit: Fit) -> onnx.ModelProto:
    try:
        raised = version_converter.convert_version(model, OLDEST_IMPLEMENTED_OPSET)
    except Exception as error:  # noqa: BLE001 - the converter raises bare RuntimeErrors
        raise ModelError(f"the model is stamped ai.onnx opset {version}, older than any"
                         f" onnxruntime implements ({OLDEST_IMPLEMENTED_OPSET}), and onnx's"
                         f" version converter cannot raise it ({first_line(error)});"
                         " export it again with a current exporter") from None
    fit.converted, fit.raised_from = True, version
    fit.notes.append(f"ai.onnx opset {version} -> {OLDEST_IMPLEMENTED_OPSET} with onnx's version"
                     " converter (onnxruntime implements no older opset)"
                     + ("; PRelu slopes unsqueezed to apply per channel, as before opset 7"
                        if _per_channel_prelu(raised) else ""))
    return raised


def _per_channel_prelu(model: onnx.ModelProto) -> int:
    """Before opset 7 a 1-D PRelu slope applied along the channel axis (1); from 7 it broadcasts
    from the last axis, which the version converter leaves as it was. Unsqueeze such slopes to
    [C, 1, ...] (rank known from shape inference); returns how many were."""
    inferred = onnx.shape_inference.infer_shapes(model).graph
    ranks = {value.name: len(value.type.tensor_type.shape.dim)
             for value in [*inferred.input, *inferred.value_info]
             if value.type.tensor_type.HasField("shape")}
    ranks.update({tensor.name: len(tensor.dims) for tensor in model.graph.initializer})
    changed = 0
    for index, node in reversed(list(enumerate(model.graph.node))):
        if node.op_type != "PRelu":
            continue
        rank = ranks.get(node.input[0], 0)
        if rank <= 2 or ranks.get(node.input[1]) != 1:
            continue
        unsqueezed = f"{node.input[1]}__per_channel_{index}"
        model.graph.node.insert(index, onnx.helper.make_node(
            "Unsqueeze", [node.input[1]], [unsqueezed], axes=list(range(1, rank - 1))))
        node.input[1] = unsqueezed
        changed += 1
    return changed


def _types_used(model: onnx.ModelProto) -> set[int]:
    values = [*model.graph.input, *model.graph.output, *model.graph.value_info]
    found = {v.type.tensor_type.elem_type for v in values if v.type.HasField("tensor_type")}
    return found | {tensor.data_type for tensor in model.graph.initializer}


def _fit_ir(model: onnx.ModelProto, limit: int, runtime_version: str, fit: Fit) -> None:
    needed = max((_TYPE_IR.get(t, 0) for t in _types_used(model)), default=0)
    needed = max(needed, onnx.helper.find_min_ir_version_for(list(model.opset_import), True))
    if needed > limit:
        raise _needs_newer("element types or opsets of a newer IR version", runtime_version,
                           f"IR version {needed}", lambda limits: limits.ir_version >= needed)
    fit.notes.append(f"IR version {model.ir_version} -> {limit} for onnxruntime-web"
                     f" {runtime_version} (its newest); the model uses nothing newer")
    model.ir_version = limit


def fit_runtime(model: onnx.ModelProto, runtime_version: str) -> Fit:
    """`model` restamped (or converted) to what onnxruntime-web `runtime_version` loads, or a
    ModelError naming what the model needs. Versions not in WEB_RUNTIME_LIMITS are only raised
    from opsets onnxruntime does not implement."""
    fit = Fit(model, [])
    opsets = {_domain(entry.domain): entry.version for entry in model.opset_import}
    if opsets.get(AI_ONNX, OLDEST_IMPLEMENTED_OPSET) < OLDEST_IMPLEMENTED_OPSET:
        fit.model = _raise_old_opset(fit.model, opsets[AI_ONNX], fit)
    limits = limits_for(runtime_version)
    if limits is None:
        return fit
    for domain, limit in limits.opsets.items():
        if opsets.get(domain, 0) > limit:
            fit.model = _fit_opset(fit.model, domain, opsets[domain], limit, runtime_version, fit)
    if fit.model.ir_version > limits.ir_version:
        _fit_ir(fit.model, limits.ir_version, runtime_version, fit)
    return fit


def _runner(model: Path, by_reference_evaluator: bool
            ) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """Runs `model` on feeds: in onnxruntime (quiet: failures are reported, not logged), or in
    onnx's reference evaluator for an opset onnxruntime cannot run."""
    if by_reference_evaluator:
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(str(model))
        return lambda feeds: dict(zip(evaluator.output_names, evaluator.run(None, feeds),
                                      strict=True))
    session = cpu_session(model)
    return lambda feeds: run_native(session, feeds)


def original_runs(original: Path, fit: Fit, feeds: dict[str, np.ndarray]) -> bool:
    """Does the model before fitting run on `feeds` (in what verify_fit runs it in)?"""
    try:
        _runner(original, fit.raised_from is not None)(feeds)
    except Exception:  # noqa: BLE001 - either runner raises several types
        return False
    return True


def _broken(fit: Fit, what: str) -> ModelError:
    return ModelError(f"{what} after the conversion the runtime needs ({fit.notes[0]}); export"
                      " the model for the runtime's opsets instead")


def verify_fit(original: Path, fitted: Path, fit: Fit,
               cases: Sequence[dict[str, np.ndarray]]) -> str:
    """Check `fitted` against `original` on `cases`; returns the note saying so, or raises a
    ModelError naming the output that differs. The original runs in onnxruntime, or in onnx's
    reference evaluator when onnxruntime cannot run its opset."""
    evaluator = "onnx's reference evaluator" if fit.raised_from else "onnxruntime"
    run_original = _runner(original, fit.raised_from is not None)
    run_fitted = _runner(fitted, False)
    for case in cases:
        try:
            expected = run_original(case)
        except Exception as error:  # noqa: BLE001 - either runner raises several types
            raise _broken(fit, f"the original does not run in {evaluator}"
                               f" ({first_line(error)}), so nothing verifies") from None
        try:
            got = run_fitted(case)
        except Exception as error:  # noqa: BLE001 - onnxruntime raises several unrelated types
            raise _broken(fit, f"the model does not run ({first_line(error)})") from None
        for name, value in got.items():
            if not _agrees(np.asarray(value), np.asarray(expected[name])):
                raise _broken(fit, f"output {name!r} differs from the original's")
    bound = tolerance_for("conversion")
    return (f"conversion verified: same outputs as the original ({evaluator}) on {len(cases)}"
            f" input case(s), |diff| <= {bound.atol:g} + {bound.rtol:g}·|original|, integers"
            " exactly")


def _agrees(got: np.ndarray, expected: np.ndarray) -> bool:
    """|converted - original| <= atol + rtol * |original|, integer and bool outputs exactly."""
    if got.shape != expected.shape:
        return False
    if not np.issubdtype(expected.dtype, np.floating):
        return bool(np.array_equal(got, expected))
    bound = tolerance_for("conversion")
    return bool(np.allclose(got, expected, atol=bound.atol, rtol=bound.rtol, equal_nan=True))
