"""Graph optimisation that stays portable to onnxruntime-web (WASM and WebGPU).

onnxslim (constant folding, dead-node and identity removal, its standard-op fusions), then
onnxruntime's offline optimiser at ORT_ENABLE_BASIC only: the extended and layout levels emit
com.microsoft CPU-only ops and NCHWc, which the browser EPs cannot run. Last, a weight that is
another's transpose (a tied LM head folded into its own copy) is shared again
(bundler.model.tied). Before all of them, a text encoder named by its export folder's config.json
gets onnxruntime's transformer fusions, kept to the ops both browser EPs run
(bundler.model.fusions). Each step that fails, breaks the model or changes what it computes
falls back to the model before it, and the report says which and why: every step's result is run
on the source's generated reference inputs (bundler.verify.reference) and must give the source's
outputs, shapes included (onnxslim once folded a Reshape to a model's wrongly declared output
shape, dropping an axis).
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx
import onnxruntime as ort
import onnxslim

from bundler.bundle.modelio import (
    build_machine_limit,
    copy_model,
    cpu_session,
    is_large,
    large_threshold,
    model_bytes,
    read_model,
    save_model,
    signature,
    tensor_dims,
    walk_nodes,
)
from bundler.errors import ConfigError, ModelError, first_line
from bundler.model.fusions import attention_refused, encoder_shape, fuse_encoder, typed
from bundler.model.outputs import beyond_tolerance
from bundler.model.shape_plumbing import fold_shape_plumbing, is_decoder
from bundler.model.tied import share_transposed_copies
from bundler.verify.reference import Case, NotRunnable, native_reference, run_native

# MatMul+Add stays unfused (no Gemm) so the weight-only quantizers, which target MatMul, still
# apply to the result; the browser EPs run either form equally well.
_SLIM_SKIPPED_FUSIONS = ["FusionGemm"]
_ORT_DISABLED_OPTIMIZERS = ["MatMulAddFusion"]

# The steps a large model skips (all of them: each needs the weights in one ModelProto).
LARGE_SKIPPED = ("transformer-fusions", "fix-dims", "onnxslim", "shape-plumbing",
                 "onnxruntime-basic", "tied-weights")

Status = Literal["ok", "fell back", "skipped"]


@dataclass
class StepResult:
    name: str
    status: Status
    detail: str = ""


@dataclass
class OptimizeReport:
    steps: list[StepResult]
    nodes_before: int
    nodes_after: int
    bytes_before: int
    bytes_after: int


def _interface(model: onnx.ModelProto, shapes: bool) -> tuple[dict[str, str], dict[str, str]]:
    """What the JS API sees: graph inputs (type and shape) and outputs (type), by name."""
    weights = {tensor.name for tensor in model.graph.initializer}

    def describe(value: onnx.ValueInfoProto, with_shape: bool) -> str:
        tensor = value.type.tensor_type
        kind = onnx.TensorProto.DataType.Name(tensor.elem_type).lower()
        if not with_shape:
            return kind
        return f"{kind}[{','.join(map(str, tensor_dims(tensor) or ()))}]"

    inputs = {v.name: describe(v, shapes) for v in model.graph.input if v.name not in weights}
    outputs = {v.name: describe(v, False) for v in model.graph.output}
    return inputs, outputs


def _check_interface(before: onnx.ModelProto, after: onnx.ModelProto, shapes: bool) -> None:
    for role, old, new in zip(
        ("inputs", "outputs"), _interface(before, shapes), _interface(after, shapes), strict=True
    ):
        if list(old.items()) == list(new.items()):
            continue
        changes = [
            f"{name} {spec} -> {new[name]}" if name in new else f"dropped {name}"
            for name, spec in old.items()
            if new.get(name) != spec
        ]
        changes += [f"added {name}" for name in new if name not in old]
        raise ValueError(f"it changed the graph {role}: {'; '.join(changes) or 'their order'}")


def _check_loads(model: onnx.ModelProto, workdir: Path, cases: Sequence[Case] = ()) -> None:
    """It loads in onnxruntime and gives each case's outputs (bundler.model.outputs' bound)."""
    path = workdir / "check.onnx"
    save_model(model, path)
    session = cpu_session(path, level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    for case in cases:
        for name, got in run_native(session, case.feeds).items():
            _check_output(name, case.outputs[name], got)


def _check_output(name: str, want: np.ndarray, got: np.ndarray) -> None:
    if want.shape != got.shape:
        raise ValueError(f"it changed what the model computes: {name} has shape"
                         f" {list(got.shape)}, not {list(want.shape)}")
    if not np.issubdtype(want.dtype, np.floating):
        if not np.array_equal(want, got):
            raise ValueError(f"it changed what the model computes: {name}'s values differ")
        return
    finite = np.isfinite(want)
    if not np.array_equal(finite, np.isfinite(got)):
        raise ValueError(f"it changed what the model computes: {name}'s non-finite values moved")
    if (worst := beyond_tolerance(want[finite], got[finite])) is not None:
        raise ValueError(f"it changed what the model computes: {name} differs by {worst:.3g}")


def _reference_cases(src: Path, model: onnx.ModelProto, fix_dims: dict[str, int] | None
                     ) -> tuple[Case, ...]:
    """The source's outputs on generated inputs at the sizes it runs at; () when none runs
    (then the steps are checked for loading only)."""
    try:
        return native_reference(src, signature(model).inputs, fix_dims or {}).cases
    except NotRunnable:
        return ()


def _fix_dims(model: onnx.ModelProto, fix_dims: dict[str, int]) -> onnx.ModelProto:
    declared = {
        dim.dim_param
        for value in model.graph.input
        for dim in value.type.tensor_type.shape.dim
        if dim.dim_param
    }
    unknown = sorted(set(fix_dims) - declared)
    if unknown:
        raise ConfigError(
            f"fix_dims names {', '.join(unknown)}, which no model input has; its symbolic dims"
            f" are: {', '.join(sorted(declared)) or 'none'}"
        )
    bad = sorted(name for name, value in fix_dims.items() if value < 1)
    if bad:
        raise ConfigError(
            f"fix_dims values must be positive integers (got {bad[0]}={fix_dims[bad[0]]})"
        )
    # imported here: onnxruntime.tools imports torch (about a second), which no other build needs
    from onnxruntime.tools.onnx_model_utils import make_dim_param_fixed

    fixed = copy.deepcopy(model)
    for name in sorted(fix_dims):
        make_dim_param_fixed(fixed.graph, name, fix_dims[name])
    # strict: a value the graph cannot take (a position table with fewer rows) is refused here
    return onnx.shape_inference.infer_shapes(fixed, strict_mode=True)


def _slim(model: onnx.ModelProto) -> onnx.ModelProto:
    slim = onnxslim.slim(copy.deepcopy(model), skip_fusion_patterns=_SLIM_SKIPPED_FUSIONS)
    _keep_unnamed_dims(model, slim)
    return slim


def _keep_unnamed_dims(before: onnx.ModelProto, after: onnx.ModelProto) -> None:
    """onnxslim names the unnamed dims of the graph's inputs and outputs (x_d0, ...). The page's
    API and `--dim INPUT:AXIS` know them as unnamed, so their names are cleared again."""
    for old_values, new_values in ((before.graph.input, after.graph.input),
                                   (before.graph.output, after.graph.output)):
        old_dims = {value.name: tensor_dims(value.type.tensor_type) or () for value in old_values}
        for value in new_values:
            new_dims = value.type.tensor_type.shape.dim
            if len(old_dims.get(value.name, ())) != len(new_dims):
                continue
            for old, new in zip(old_dims[value.name], new_dims, strict=True):
                if old == "?" and new.dim_param:
                    new.Clear()


def _ort_basic(model: onnx.ModelProto, workdir: Path) -> onnx.ModelProto:
    source, optimized = workdir / "ort_in.onnx", workdir / "ort_out.onnx"
    save_model(model, source)
    cpu_session(
        source,
        level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        optimized_path=optimized,
        disabled_optimizers=_ORT_DISABLED_OPTIMIZERS,
    )
    result = onnx.load_model(optimized)
    # onnxruntime stamps every domain it knows (com.microsoft.nchwc, ...) into the opset list
    used = {node.domain for function in result.functions for node in function.node}
    used |= {node.domain for node in walk_nodes(result.graph)}
    kept = [o for o in result.opset_import if o.domain in used | {"", "ai.onnx"}]
    del result.opset_import[:]
    result.opset_import.extend(kept)
    return result


def _share_tied(model: onnx.ModelProto, step: Callable[..., onnx.ModelProto],
                steps: list[StepResult]) -> onnx.ModelProto:
    """The tied-weights step (bundler.model.tied), its detail naming what it kept shared."""
    shared: list[tuple[str, str, int]] = []

    def run(current: onnx.ModelProto) -> onnx.ModelProto:
        result = copy.deepcopy(current)
        shared.extend(share_transposed_copies(result))
        return result

    result = step("tied-weights", model, run)
    if steps[-1].status != "ok":
        return result
    if not shared:
        steps[-1] = StepResult("tied-weights", "skipped", "no weight is another's transpose")
        return model
    steps[-1].detail = "; ".join(f"{copy} is {original} transposed: shared ({saved} bytes less)"
                                 for copy, original, saved in shared)
    return result


def _fuse(model: onnx.ModelProto, config: dict[str, Any] | None, eps: Sequence[str],
          step: Callable[..., onnx.ModelProto], steps: list[StepResult]) -> onnx.ModelProto:
    """The transformer-fusions step (bundler.model.fusions), its detail naming the fused ops."""
    shape = encoder_shape(config)
    if shape is None:
        steps.append(StepResult("transformer-fusions", "skipped",
                                "no BERT-style encoder named by config.json"))
        return model
    fused_ops: list[str] = []
    refused = attention_refused(eps)

    def run(current: onnx.ModelProto) -> onnx.ModelProto:
        result, detail = fuse_encoder(current, shape, attention=not refused)
        fused_ops.append(detail)
        return result

    result = step("transformer-fusions", model, run)
    if steps[-1].status == "ok":
        steps[-1].detail = (f"{shape[0]}, {shape[1]} heads x {shape[2]}: {fused_ops[0]}"
                            f" ({steps[-1].detail})" + (f"; {refused}" if refused else ""))
    return result


def _fold(model: onnx.ModelProto, step: Callable[..., onnx.ModelProto],
          steps: list[StepResult]) -> onnx.ModelProto:
    """The shape-plumbing step (bundler.model.shape_plumbing), for a decoder with past only; after
    onnxslim, before onnxruntime's basic pass, which folds what it made constant."""
    if not is_decoder(model):
        steps.append(StepResult("shape-plumbing", "skipped", "not a decoder with past"))
        return model
    details: list[str] = []

    def run(current: onnx.ModelProto) -> onnx.ModelProto:
        result, detail = fold_shape_plumbing(current)
        details.append(detail)
        return result

    result = step("shape-plumbing", model, run)
    if steps[-1].status == "ok":
        steps[-1].detail = details[0]
    return result


def optimize(
    src: Path,
    dst: Path,
    *,
    fix_dims: dict[str, int] | None = None,
    config: dict[str, Any] | None = None,
    execution_providers: Sequence[str] = ("wasm",),
    log: Callable[[str], None] = lambda s: None,
) -> OptimizeReport:
    """Optimise the model at `src` into `dst` (plus `dst.data` only if over 2 GB). `config`: a
    text model's config.json (what the transformer fusions need); `execution_providers`: the EPs
    the bundle ships (attention is fused for WASM only, see bundler.model.fusions). A large model
    (is_large) is copied as it is, every step recorded as skipped: each loads all the weights."""
    if is_large(src):
        copy_model(src, dst)
        nodes = len(read_model(src, load_weights=False).graph.node)
        reason = (f"weights past {large_threshold()} bytes in external data: this step loads"
                  " them all into one protobuf")
        return OptimizeReport([StepResult(name, "skipped", reason) for name in LARGE_SKIPPED],
                              nodes, nodes, model_bytes(src), model_bytes(dst))
    model = read_model(src)
    nodes_before, bytes_before = len(model.graph.node), model_bytes(src)
    cases: tuple[Case, ...] = ()
    steps: list[StepResult] = []

    with tempfile.TemporaryDirectory(prefix="bundler-optimize-") as tmp:
        workdir = Path(tmp)
        try:
            _check_loads(model, workdir)
        except Exception as error:
            if limit := build_machine_limit(first_line(error)):
                copy_model(src, dst)  # every step needs native onnxruntime
                return OptimizeReport([StepResult("load", "fell back", limit)], nodes_before,
                                      nodes_before, bytes_before, model_bytes(dst))
            raise ModelError(
                f"{src.name} does not load in onnxruntime ({first_line(error, typed=True)});"
                " export it again"
                " with a supported opset"
            ) from None
        cases = _reference_cases(src, model, fix_dims)

        def step(
            name: str,
            current: onnx.ModelProto,
            run: Callable[[onnx.ModelProto], onnx.ModelProto],
            detail: str = "",
        ) -> onnx.ModelProto:
            try:
                result = run(current)
                _check_interface(current, result, shapes=name != "fix-dims")
                _check_loads(result, workdir, cases)
            except ConfigError:
                raise
            except Exception as error:
                reason = first_line(error, typed=True)
                steps.append(StepResult(name, "fell back", f"kept the previous model: {reason}"))
                log(f"optimize: {name} fell back ({reason})")
                return current
            detail = detail or f"{len(current.graph.node)} -> {len(result.graph.node)} nodes"
            steps.append(StepResult(name, "ok", detail))
            log(f"optimize: {name} ok" + (f" ({detail})" if detail else ""))
            return result

        if fix_dims:
            model = step(
                "fix-dims",
                model,
                lambda m: _fix_dims(m, fix_dims),
                ", ".join(f"{name}={value}" for name, value in sorted(fix_dims.items())),
            )
        else:
            steps.append(StepResult("fix-dims", "skipped", "no fix_dims given"))
        # first: its patterns are those of the exporter's graph, which the later steps rewrite
        model = _fuse(model, config, execution_providers, step, steps)
        model = step("onnxslim", model, _slim)
        model = _fold(model, step, steps)
        model = step("onnxruntime-basic", model, lambda m: _ort_basic(m, workdir))
        model = _share_tied(model, step, steps)
        if any(s.name == "transformer-fusions" and s.status == "ok" for s in steps):
            model = step("fused-op-types", model, typed, "typed every value for the quantizers")

        save_model(model, dst)
        try:
            cpu_session(dst)
        except Exception as error:
            reason = first_line(error, typed=True)
            copy_model(src, dst)
            model = read_model(dst, load_weights=False)
            steps.append(StepResult("validate", "fell back", f"wrote the input as is: {reason}"))
            log(f"optimize: the result does not load ({reason}); wrote the input unchanged")
        else:
            steps.append(StepResult("validate", "ok", "loads in onnxruntime"))

    return OptimizeReport(
        steps=steps,
        nodes_before=nodes_before,
        nodes_after=len(model.graph.node),
        bytes_before=bytes_before,
        bytes_after=model_bytes(dst),
    )
