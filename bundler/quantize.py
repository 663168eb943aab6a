"""Smaller variants of an optimised fp32 model, how far each strays from it, and which to ship.

Every variant keeps the model's float32 inputs and outputs, so the JS API does not change, and
uses only ops onnxruntime-web runs (int4's MatMulNBits is onnxruntime's own contrib op, which
both its WASM and WebGPU EPs implement).
"""

from __future__ import annotations

import contextlib
import heapq
import io
import logging
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
from onnxruntime.transformers import float16

from bundler.errors import BundlerError, ConfigError, QuantizeError, first_line
from bundler.modelio import (
    copy_model,
    cpu_session,
    model_bytes,
    read_model,
    save_model,
    walk_nodes,
)
from bundler.options import VARIANT_KINDS

Feeds = list[dict[str, np.ndarray]]

CALIBRATION_METHODS = {
    "minmax": CalibrationMethod.MinMax,
    "percentile": CalibrationMethod.Percentile,
    "entropy": CalibrationMethod.Entropy,
}

# On top of the converter's defaults: ops that fail or lose too much in float16.
_FP16_KEEP_FLOAT32 = ("Resize", "TopK", "NonMaxSuppression", "CumSum", "Range", "RoiAlign")
# Below this many elements a weight is not worth a DequantizeLinear (first convs, tiny heads).
_MIN_WEIGHT_ELEMENTS = 1024
# Attention/LSTM would become com.microsoft CPU-only ops.
_DYNAMIC_OP_TYPES = ("Conv", "MatMul", "Gather")
_INT4_BLOCK = 32
_MAX_EXCLUDED_NODES = 8

_ADVICE = {
    "fp32": "check that the file is readable",
    "fp16": "try int8-weights, or keep fp32",
    "int8-weights": "try fp16",
    "int8": "try int8-weights",
    "int8-static": "try int8 or int8-weights, or other calibration inputs",
    "int4": "try int8-weights",
}


@dataclass
class VariantResult:
    kind: str
    path: Path
    notes: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path.name,
            "notes": self.notes,
            "settings": self.settings,
        }


@dataclass
class _Job:
    src: Path
    dst: Path
    calibration: Feeds | None
    method: str
    log: Callable[[str], None]
    result: VariantResult

    def note(self, text: str) -> None:
        # Library errors quote the temporary paths they were given; bundle.json must not.
        text = text.replace(f"{self.dst.parent}{os.sep}", "")
        self.result.notes.append(text)
        self.log(f"{self.result.kind}: {text}")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The quantizers print progress and log advice to the root logger; keep the CLI clean."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        root.setLevel(level)


def _name_nodes(model: onnx.ModelProto) -> None:
    """Give unnamed nodes stable names: the quantizers exclude nodes by name."""
    taken = {node.name for node in model.graph.node}
    for index, node in enumerate(model.graph.node):
        if not node.name:
            node.name = _fresh(f"{node.op_type}_{index}", taken)


def _fresh(name: str, taken: set[str]) -> str:
    candidate, suffix = name, 1
    while candidate in taken:
        candidate, suffix = f"{name}_{suffix}", suffix + 1
    taken.add(candidate)
    return candidate


def _is_large(path: Path) -> bool:
    return model_bytes(path) >= onnx.checker.MAXIMUM_PROTOBUF


def make_variant(
    kind: str,
    src: Path,
    dst: Path,
    *,
    calibration: Feeds | None = None,
    calibration_method: str = "minmax",
    log: Callable[[str], None] = lambda s: None,
) -> VariantResult:
    """Write the `kind` variant of the (already optimised, fp32) model `src` to `dst`.

    `calibration` feeds drive int8-static's calibration, int8's per-channel choice and fp16's
    NaN/Inf check; they are used in the order given, so the result is deterministic.
    """
    if kind not in VARIANT_KINDS:
        raise ConfigError(f"unknown variant {kind!r}; choose from {', '.join(VARIANT_KINDS)}")
    if calibration_method not in CALIBRATION_METHODS:
        raise ConfigError(
            f"unknown calibration method {calibration_method!r};"
            f" choose from {', '.join(CALIBRATION_METHODS)}"
        )
    job = _Job(src, dst, calibration, calibration_method, log, VariantResult(kind, dst))
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        _BUILDERS[kind](job)
        cpu_session(dst)
    except BundlerError:
        raise
    except Exception as error:
        raise QuantizeError(
            f"could not make the {kind} variant of {src.name} ({first_line(error, typed=True)});"
            f" {_ADVICE[kind]}"
        ) from None
    return job.result


def _fp32(job: _Job) -> None:
    copy_model(job.src, job.dst)
    job.result.settings = {"weights": "float32"}


def _reads(node: onnx.NodeProto) -> Iterator[str]:
    """The names a node reads, including those its subgraphs capture from the outer graph."""
    yield from node.input
    for attribute in node.attribute:
        for subgraph in [attribute.g, *attribute.graphs]:
            for inner in subgraph.node:
                yield from _reads(inner)


def _sort_topologically(graph: onnx.GraphProto) -> None:
    """Stable topological sort, in place: the float16 converter appends its Casts at the end.

    (onnx_ir's sort cannot load models with map types; onnxruntime's ignores subgraph captures.)
    """
    nodes = list(graph.node)
    producer = {name: index for index, node in enumerate(nodes) for name in node.output if name}
    waiting = [
        {producer[name] for name in _reads(node) if name in producer} - {index}
        for index, node in enumerate(nodes)
    ]
    users: list[list[int]] = [[] for _ in nodes]
    for index, deps in enumerate(waiting):
        for dep in deps:
            users[dep].append(index)
    ready = [index for index, deps in enumerate(waiting) if not deps]
    heapq.heapify(ready)
    order = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for user in users[index]:
            waiting[user].discard(index)
            if not waiting[user]:
                heapq.heappush(ready, user)
    if len(order) != len(nodes):
        raise ValueError("the converted graph has a cycle")
    del graph.node[:]
    graph.node.extend(nodes[index] for index in order)


_FLOAT16_MAX = float(np.finfo(np.float16).max)


def _fp16(job: _Job) -> None:
    model = read_model(job.src)
    op_types = {node.op_type for node in walk_nodes(model.graph)}
    ml_ops = {node.op_type for node in walk_nodes(model.graph) if node.domain == "ai.onnx.ml"}
    blocked = sorted(set(float16.DEFAULT_OP_BLOCK_LIST) | set(_FP16_KEEP_FLOAT32) | ml_ops)
    with _quiet():
        converted = float16.convert_float_to_float16(
            model, keep_io_types=True, op_block_list=blocked
        )
    _sort_topologically(converted.graph)
    save_model(converted, job.dst)
    job.result.settings = {"keep_io_types": True, "op_block_list": blocked}
    kept = sorted(op_types & set(blocked))
    if kept:
        job.note(f"kept {', '.join(kept)} in float32")
    if not job.calibration:
        job.note("no feeds given, so the NaN/Inf check did not run")
        return
    half = {
        value.name
        for value in converted.graph.value_info
        if value.type.tensor_type.elem_type == TensorProto.FLOAT16
    }
    name, peak = _largest_activation(job.src, half, job.calibration)
    if peak > _FLOAT16_MAX:
        raise QuantizeError(
            f"the fp16 variant of {job.src.name} would give Inf/NaN: activation {name!r} reaches"
            f" {peak:.3g} on the feeds, beyond float16's {_FLOAT16_MAX:g}; use int8-weights or fp32"
        )
    if measure(job.src, job.dst, job.calibration).nonfinite:
        raise QuantizeError(
            f"the fp16 variant of {job.src.name} gives NaN/Inf outputs where fp32 gives finite"
            " ones; use int8-weights or fp32"
        )
    largest = f" (largest float16 activation: {name} {peak:.3g})" if name else ""
    job.note(
        f"no NaN/Inf on {len(job.calibration)} feeds{largest}; onnxruntime's CPU EP runs most"
        " float16 ops in float32, so native metrics mostly reflect weight rounding"
    )


def _largest_activation(model: Path, names: set[str], feeds: Feeds) -> tuple[str, float]:
    """The tensor among `names` with the largest finite |value| when `model` runs on `feeds`.

    onnxruntime's CPU EP has few float16 kernels and runs float16 chains in float32, so an fp16
    variant overflowing in the browser can look fine natively; the fp32 activations tell."""
    probe = read_model(model)
    computed = {out for node in probe.graph.node for out in node.output}
    watched = sorted((names & computed) - {value.name for value in probe.graph.output})
    if not watched:
        return "", 0.0
    probe.graph.output.extend(helper.make_empty_tensor_value_info(name) for name in watched)
    peak, where = 0.0, ""
    with tempfile.TemporaryDirectory(prefix="bundler-fp16-") as tmp:
        path = Path(tmp) / model.name
        save_model(probe, path)
        session = cpu_session(path)
        for feed in feeds:
            for name, value in zip(watched, session.run(watched, feed), strict=True):
                finite = np.abs(value[np.isfinite(value)]) if value.size else value
                if finite.size and float(finite.max()) > peak:
                    peak, where = float(finite.max()), name
    return where, peak


def _weight_axis(node: onnx.NodeProto, rank: int) -> int | None:
    """The output-channel axis of the node's weight (input 1), or None if not handled."""
    if node.op_type == "Conv":
        return 0 if rank >= 3 else None
    if rank != 2:
        return None
    if node.op_type == "Gemm":
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    return 1  # MatMul: [K, N]


def _int8_weights(job: _Job) -> None:
    model = read_model(job.src)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:  # DequantizeLinear's axis attribute
        model = onnx.version_converter.convert_version(model, 13)
    graph = model.graph
    weights = {tensor.name: tensor for tensor in graph.initializer}
    overridable = {value.name for value in graph.input}
    axes: dict[str, int] = {}
    left_float = set()
    for node in graph.node:
        if node.op_type not in ("Conv", "Gemm", "MatMul") or len(node.input) < 2:
            continue
        name = node.input[1]
        tensor = weights.get(name)
        axis = None if tensor is None else _weight_axis(node, len(tensor.dims))
        if (
            tensor is None
            or axis is None
            or name in overridable
            or tensor.data_type != TensorProto.FLOAT
            or int(np.prod(tensor.dims)) < _MIN_WEIGHT_ELEMENTS
        ):
            left_float.add(name)
        else:
            axes.setdefault(name, axis)
    if not axes:
        raise QuantizeError(
            f"{job.src.name} has no Conv, Gemm or MatMul weight of {_MIN_WEIGHT_ELEMENTS}+"
            " elements to store as int8, so int8-weights would equal fp32; use fp16 instead"
        )

    taken = set(weights) | {out for node in graph.node for out in node.output}
    taken |= {value.name for value in graph.input}
    initializers, dequantize = [], []
    for tensor in graph.initializer:
        if tensor.name not in axes:
            initializers.append(tensor)
            continue
        w, axis = numpy_helper.to_array(tensor), axes[tensor.name]
        others = tuple(i for i in range(w.ndim) if i != axis)
        scale = (np.abs(w).max(axis=others) / 127).astype(np.float32)
        scale[scale == 0] = 1  # an all-zero channel quantizes to zeros whatever the scale
        broadcast = [1] * w.ndim
        broadcast[axis] = -1
        q = np.clip(np.rint(w / scale.reshape(broadcast)), -127, 127).astype(np.int8)
        names = [_fresh(f"{tensor.name}_{s}", taken) for s in ("quantized", "scale", "zero_point")]
        initializers += [
            numpy_helper.from_array(q, names[0]),
            numpy_helper.from_array(scale, names[1]),
            numpy_helper.from_array(np.zeros(scale.shape, np.int8), names[2]),
        ]
        dequantize.append(
            helper.make_node(
                "DequantizeLinear",
                names,
                [tensor.name],
                _fresh(f"{tensor.name}_DequantizeLinear", taken),
                axis=axis,
            )
        )
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    nodes = dequantize + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    save_model(model, job.dst)

    job.result.settings = {
        "scheme": "int8 symmetric per output channel (scale = max|w| / 127), DequantizeLinear",
        "compute": "float32",
        "op_types": ["Conv", "Gemm", "MatMul"],
        "min_elements": _MIN_WEIGHT_ELEMENTS,
        "weights_int8": len(axes),
        "weights_float32": len(left_float - set(axes)),
    }
    job.note(
        f"stored {len(axes)} weights as int8; {len(left_float - set(axes))} small or"
        " non-constant weights stay float32"
    )


def _int8_dynamic(job: _Job) -> None:
    graph = read_model(job.src, load_weights=False).graph
    has_conv = any(node.op_type == "Conv" for node in walk_nodes(graph))
    # onnxruntime's ConvInteger only has a uint8 x uint8 kernel
    weight_type = QuantType.QUInt8 if has_conv else QuantType.QInt8

    def quantize(per_channel: bool, dst: Path) -> None:
        with _quiet():
            quantize_dynamic(
                job.src,
                dst,
                per_channel=per_channel,
                weight_type=weight_type,
                op_types_to_quantize=list(_DYNAMIC_OP_TYPES),
                use_external_data_format=_is_large(job.src),
            )

    per_channel = True
    quantize(True, job.dst)
    if job.calibration:
        with tempfile.TemporaryDirectory(prefix="bundler-int8-") as tmp:
            per_tensor_path = Path(tmp) / job.dst.name
            quantize(False, per_tensor_path)
            channel = measure(job.src, job.dst, job.calibration).cosine
            tensor = measure(job.src, per_tensor_path, job.calibration).cosine
            per_channel = channel > tensor
            if not per_channel:
                copy_model(per_tensor_path, job.dst)
        job.note(
            f"per-channel weights: cosine {channel:.6g}, per-tensor: {tensor:.6g};"
            f" kept {'per-channel' if per_channel else 'per-tensor'}"
        )
    else:
        job.note("no feeds given, so per-channel weights were used without comparing")
    if has_conv:
        job.note("uint8 weights: onnxruntime has no int8 ConvInteger")
    job.result.settings = {
        "mode": "dynamic",
        "weight_type": weight_type.name,
        "per_channel": per_channel,
        "op_types": list(_DYNAMIC_OP_TYPES),
    }


class _FeedReader(CalibrationDataReader):
    def __init__(self, feeds: Feeds) -> None:
        self._feeds = feeds
        self._next = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self._next >= len(self._feeds):
            return None
        self._next += 1
        return self._feeds[self._next - 1]

    def rewind(self) -> None:
        self._next = 0

    def __len__(self) -> int:
        return len(self._feeds)


def _failing_node(error: BaseException, model: onnx.ModelProto) -> onnx.NodeProto | None:
    """The node a quantizer crash happened on. Its exceptions do not name it, but the innermost
    frame that holds the node (or an op quantizer's `.node`, or a bias info's `.node_name`) does."""
    nodes = {node.name: node for node in model.graph.node if node.name}
    frames = []
    traceback = error.__traceback__
    while traceback is not None:
        frames.append(traceback.tb_frame)
        traceback = traceback.tb_next
    for frame in reversed(frames):
        for value in list(frame.f_locals.values()):
            for candidate in (value, getattr(value, "node", None)):
                if isinstance(candidate, onnx.NodeProto) and candidate.name in nodes:
                    return nodes[candidate.name]
            name = getattr(value, "node_name", None)
            if isinstance(name, str) and name in nodes:
                return nodes[name]
    return None


def _int8_static(job: _Job) -> None:
    if not job.calibration:
        raise QuantizeError(
            f"int8-static needs calibration inputs for {job.src.name}: pass calibration feeds,"
            " or use int8 (dynamic), which needs none"
        )
    per_channel, excluded = True, []
    with tempfile.TemporaryDirectory(prefix="bundler-calibrate-") as tmp:
        named = Path(tmp) / "named.onnx"
        model = read_model(job.src)
        _name_nodes(model)
        save_model(model, named)
        while True:
            try:
                with _quiet():
                    quantize_static(
                        named,
                        job.dst,
                        _FeedReader(job.calibration),
                        quant_format=QuantFormat.QDQ,
                        per_channel=per_channel,
                        activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8,
                        nodes_to_exclude=list(excluded),
                        calibrate_method=CALIBRATION_METHODS[job.method],
                        # retries reuse the ranges instead of calibrating again
                        calibration_cache_path=Path(tmp) / "ranges.json",
                        use_external_data_format=_is_large(named),
                    )
                cpu_session(job.dst)  # the quantizer can also write a model that does not load
                break
            except Exception as error:
                node = _failing_node(error, model)
                where = f" at {node.name} ({node.op_type})" if node is not None else ""
                failed = (
                    f"{'per-channel' if per_channel else 'per-tensor'} QDQ failed"
                    f" ({first_line(error, typed=True)}{where})"
                )
                if per_channel:
                    per_channel = False
                    job.note(f"{failed}; retried per-tensor")
                elif (
                    node is not None
                    and node.name not in excluded
                    and len(excluded) < _MAX_EXCLUDED_NODES
                ):
                    excluded.append(node.name)
                    job.note(f"{failed}; retried leaving {node.name} in float32")
                else:
                    raise
    job.result.settings = {
        "format": "QDQ",
        "activation_type": QuantType.QUInt8.name,
        "weight_type": QuantType.QInt8.name,
        "per_channel": per_channel,
        "calibration_method": job.method,
        "calibration_samples": len(job.calibration),
        "nodes_excluded": excluded,
    }


def _int4(job: _Job) -> None:
    model = read_model(job.src)
    _name_nodes(model)
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    eligible, skipped = [], []
    for node in model.graph.node:
        if node.op_type != "MatMul":
            continue
        weight = weights.get(node.input[1])
        if (
            weight is not None
            and weight.data_type == TensorProto.FLOAT
            and len(weight.dims) == 2
            and weight.dims[0] % _INT4_BLOCK == 0
        ):
            eligible.append(node.name)
        else:
            skipped.append(node.name)
    if not eligible:
        raise QuantizeError(
            f"int4 is not applicable to {job.src.name}: it has no MatMul with a constant float32"
            f" [K, N] weight whose K is a multiple of {_INT4_BLOCK}; use int8-weights instead"
        )
    quantizer = MatMulNBitsQuantizer(
        model,
        bits=4,
        block_size=_INT4_BLOCK,
        is_symmetric=True,
        nodes_to_exclude=skipped,
        op_types_to_quantize=("MatMul",),
    )
    with _quiet():
        quantizer.process()
    save_model(quantizer.model.model, job.dst)
    job.result.settings = {
        "op": "com.microsoft.MatMulNBits",
        "bits": 4,
        "block_size": _INT4_BLOCK,
        "symmetric": True,
        "matmuls_int4": len(eligible),
        "matmuls_float32": len(skipped),
    }
    job.note(f"{len(eligible)} MatMul weights as 4-bit blocks; {len(skipped)} MatMuls stay float32")


_BUILDERS: dict[str, Callable[[_Job], None]] = {
    "fp32": _fp32,
    "fp16": _fp16,
    "int8-weights": _int8_weights,
    "int8": _int8_dynamic,
    "int8-static": _int8_static,
    "int4": _int4,
}


# --- accuracy ----------------------------------------------------------------------------------


def _rounded(value: float | None) -> float | None:
    if value is None or not np.isfinite(value):
        return None
    return float(f"{value:.6g}")


@dataclass(frozen=True)
class Metrics:
    """How a candidate's float outputs differ from the reference's, over all feeds.

    `nonfinite` counts output values that are NaN/Inf in the candidate but finite in the
    reference; the other fields are computed where both are finite.
    """

    max_abs: float
    mean_rel: float
    cosine: float
    top1_agreement: float | None
    nonfinite: int = 0

    def to_json(self) -> dict[str, float | int | None]:
        return {
            "max_abs": _rounded(self.max_abs),
            "mean_rel": _rounded(self.mean_rel),
            "cosine": _rounded(self.cosine),
            "top1_agreement": _rounded(self.top1_agreement),
            "nonfinite": self.nonfinite,
        }


def _run_all(
    model: Path,
    feeds: Feeds,
    level: ort.GraphOptimizationLevel = ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
) -> tuple[list[str], list[list[np.ndarray]]]:
    try:
        session = cpu_session(model, level=level)
        names = [output.name for output in session.get_outputs()]
        return names, [session.run(names, feed) for feed in feeds]
    except Exception as error:
        raise QuantizeError(
            f"{model.name} does not run in onnxruntime on the given feeds"
            f" ({first_line(error, typed=True)})"
        ) from None


def measure(reference: Path, candidate: Path, feeds: Feeds) -> Metrics:
    """Compare `candidate` with `reference` (CPU EP) on every feed, over all float outputs.

    max_abs: worst |a - b|. mean_rel: mean |a - b| relative to the output's range in the
    reference (max - min), worst over outputs. cosine: of each flattened output, worst over
    outputs. top1_agreement: share of rows with the same argmax over the last axis, over the
    outputs that look like class scores (float, rank 2, last dim >= 2); None if there are none.
    """
    if not feeds:
        raise QuantizeError("measure needs at least one feed")
    names, ref_runs = _run_all(reference, feeds)
    cand_names, cand_runs = _run_all(candidate, feeds)
    if cand_names != names:
        raise QuantizeError(
            f"{candidate.name} has outputs {cand_names}, but {reference.name} has {names}"
        )
    max_abs, mean_rel, cosine = 0.0, 0.0, 1.0
    nonfinite, rows, agreeing, compared = 0, 0, 0, 0
    for index, name in enumerate(names):
        refs = [run[index] for run in ref_runs]
        cands = [run[index] for run in cand_runs]
        if not np.issubdtype(refs[0].dtype, np.floating):
            continue
        for a, b in zip(refs, cands, strict=True):
            if a.shape != b.shape:
                raise QuantizeError(
                    f"output {name!r} of {candidate.name} has shape {b.shape}, not {a.shape}"
                )
        compared += 1
        a = np.concatenate([r.ravel() for r in refs]).astype(np.float64)
        b = np.concatenate([c.ravel() for c in cands]).astype(np.float64)
        finite = np.isfinite(a)
        nonfinite += int(np.count_nonzero(finite & ~np.isfinite(b)))
        both = finite & np.isfinite(b)
        a, b = a[both], b[both]
        if a.size:
            error = np.abs(a - b)
            spread = float(a.max() - a.min()) or 1.0
            max_abs = max(max_abs, float(error.max()))
            mean_rel = max(mean_rel, float(error.mean()) / spread)
            norms = float(np.linalg.norm(a) * np.linalg.norm(b))
            if norms:
                cosine = min(cosine, float(a @ b) / norms)
            elif np.any(a) or np.any(b):
                cosine = 0.0
        if refs[0].ndim == 2 and refs[0].shape[-1] >= 2:
            for r, c in zip(refs, cands, strict=True):
                rows += r.shape[0]
                agreeing += int(np.count_nonzero(r.argmax(-1) == c.argmax(-1)))
    if not compared:
        raise QuantizeError(
            f"{reference.name} has no float outputs, so there is no error to measure"
        )
    return Metrics(
        max_abs=max_abs,
        mean_rel=mean_rel,
        cosine=cosine,
        top1_agreement=agreeing / rows if rows else None,
        nonfinite=nonfinite,
    )


def native_latency_ms(model: Path, feeds: Feeds, threads: int = 1, repeats: int = 10) -> float:
    """Median wall time of one session.run (CPU EP, `threads` intra-op threads), after a warm-up."""
    if not feeds:
        raise QuantizeError("native_latency_ms needs at least one feed")
    try:
        session = cpu_session(model, threads=threads)
        session.run(None, feeds[0])
        times = []
        for index in range(repeats):
            feed = feeds[index % len(feeds)]
            start = time.perf_counter()
            session.run(None, feed)
            times.append(time.perf_counter() - start)
    except Exception as error:
        raise QuantizeError(
            f"{model.name} does not run in onnxruntime ({first_line(error, typed=True)})"
        ) from None
    return statistics.median(times) * 1000


# --- error budget and the automatic choice -----------------------------------------------------

# key -> (operator, Metrics field)
_BUDGET_TERMS = {
    "cosine": (">=", "cosine"),
    "top1": (">=", "top1_agreement"),
    "max_abs": ("<=", "max_abs"),
    "mean_rel": ("<=", "mean_rel"),
}
_ACCEPTED = ", ".join(f"{key}{op}" for key, (op, _) in _BUDGET_TERMS.items())
_TERM = re.compile(r"^\s*([A-Za-z_0-9]+)\s*(>=|<=|=>|=<|>|<|==|=)\s*(\S+)\s*$")


@dataclass(frozen=True)
class Budget:
    """Bounds a variant's Metrics must meet; a top1 bound holds vacuously when top1 is n/a."""

    terms: tuple[tuple[str, float], ...]

    def failures(self, metrics: Metrics) -> list[str]:
        failed = []
        if metrics.nonfinite:
            failed.append(f"{metrics.nonfinite} NaN/Inf values where the reference is finite")
        for key, bound in self.terms:
            op, attribute = _BUDGET_TERMS[key]
            value = getattr(metrics, attribute)
            if value is None:
                continue
            if not (value >= bound if op == ">=" else value <= bound):
                failed.append(f"{key} {value:.6g} is not {op} {bound:g}")
        return failed

    def accepts(self, metrics: Metrics) -> bool:
        return not self.failures(metrics)

    def explain(self, metrics: Metrics) -> str:
        failed = self.failures(metrics)
        if failed:
            return "; ".join(failed)
        return f"within budget ({self})"

    def __str__(self) -> str:
        return ",".join(f"{key}{_BUDGET_TERMS[key][0]}{bound:g}" for key, bound in self.terms)


DEFAULT_BUDGET = Budget((("cosine", 0.999), ("top1", 0.99)))


def parse_budget(text: str) -> Budget:
    """Parse e.g. "cosine>=0.999,top1>=0.99,max_abs<=0.01,mean_rel<=0.01"."""
    example = "e.g. 'cosine>=0.999,top1>=0.99'"
    if not text.strip():
        raise ConfigError(f"the error budget is empty; give terms like {example} ({_ACCEPTED})")
    terms: dict[str, float] = {}
    for term in text.split(","):
        match = _TERM.match(term)
        if not match:
            raise ConfigError(
                f"error budget term {term.strip()!r} is not KEY>=VALUE or KEY<=VALUE;"
                f" accepted: {_ACCEPTED} ({example})"
            )
        key, op, raw = match.groups()
        key = key.lower()
        if key not in _BUDGET_TERMS:
            raise ConfigError(
                f"error budget term {term.strip()!r} has unknown key {key!r}; accepted: {_ACCEPTED}"
            )
        expected = _BUDGET_TERMS[key][0]
        if op != expected:
            raise ConfigError(
                f"error budget term {term.strip()!r}: {key} takes {expected}"
                f" ({'a lower' if expected == '>=' else 'an upper'} bound)"
            )
        try:
            bound = float(raw)
        except ValueError:
            raise ConfigError(
                f"error budget term {term.strip()!r}: {raw!r} is not a number"
            ) from None
        limits = {"cosine": (-1.0, 1.0), "top1": (0.0, 1.0)}.get(key, (0.0, float("inf")))
        if not limits[0] <= bound <= limits[1]:
            raise ConfigError(
                f"error budget term {term.strip()!r}: {key} must be between"
                f" {limits[0]:g} and {limits[1]:g}"
            )
        if key in terms:
            raise ConfigError(f"error budget names {key} twice; give each key once")
        terms[key] = bound
    return Budget(tuple(terms.items()))


def choose_auto(
    results: list[tuple[str, int, Metrics, bool]], budget: Budget = DEFAULT_BUDGET
) -> str | None:
    """The smallest variant (kind, bytes, metrics, browser_ok) within budget that passed the
    browser check; fp32 if none did and it passed; None if not even fp32 did."""
    order = {kind: index for index, kind in enumerate(VARIANT_KINDS)}
    within = [
        (size, order.get(kind, len(order)), kind)
        for kind, size, metrics, browser_ok in results
        if browser_ok and budget.accepts(metrics)
    ]
    if within:
        return min(within)[2]
    if any(kind == "fp32" and browser_ok for kind, _, _, browser_ok in results):
        return "fp32"
    return None


# --- ORT format ----------------------------------------------------------------------------------


def to_ort_format(src: Path, dst: Path, feeds: Feeds | None = None) -> None:
    """Convert `src` to onnxruntime's .ort format at `dst`, at the portable basic level.

    The result is checked to load and, on `feeds`, to give the outputs `src` gives.
    """
    basic = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    try:
        too_large = _is_large(src)
        if not too_large:
            cpu_session(src, level=basic, optimized_path=dst, save_format="ORT")
            converted = cpu_session(dst, level=basic)
    except Exception as error:
        raise QuantizeError(
            f"could not convert {src.name} to .ort ({first_line(error, typed=True)});"
            " ship the .onnx"
        ) from None
    if too_large:
        raise QuantizeError(
            f"{src.name} is over 2 GB, which the .ort format cannot hold; ship the .onnx"
        )
    if not feeds:
        return
    names, expected = _run_all(src, feeds, level=basic)
    for feed, wanted in zip(feeds, expected, strict=True):
        for name, a, b in zip(names, wanted, converted.run(names, feed), strict=True):
            if a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True):
                raise QuantizeError(
                    f"{dst.name} gives other values than {src.name} for output {name!r};"
                    " ship the .onnx"
                )
