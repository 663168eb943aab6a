"""int8-static: QDQ quantization calibrated on the feeds (onnxruntime's quantize_static). When the
quantizer crashes or writes a model that does not load, it retries per-tensor, then leaving the
failing node in float32, and notes what it used. Tensors calibration cannot range (inputs empty in a
feed: a cache's first step; a causal mask's -inf) get no QDQ: their readers stay float32."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)

from bundler.bundle.modelio import cpu_session, read_model, save_model
from bundler.bundle.records import Int8StaticSettings
from bundler.errors import first_line
from bundler.variants.metrics import Feeds
from bundler.variants.spec import Job, KindSpec
from bundler.variants.tools import is_large, name_nodes, quiet

_METHODS = {
    "minmax": CalibrationMethod.MinMax,
    "percentile": CalibrationMethod.Percentile,
    "entropy": CalibrationMethod.Entropy,
}
_MAX_EXCLUDED_NODES = 8


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


def _readers_of_empty_inputs(model: onnx.ModelProto, feeds: Feeds) -> list[str]:
    """The nodes that read a graph input which is empty in some feed (a decoder's past key/values
    on the first step). Calibration gives such a tensor no range (a NaN zero point), and on WebGPU
    onnxruntime-web 1.31.1 fails the run at a DequantizeLinear of an empty tensor; left in
    float32, its readers put no QDQ on it."""
    empty = {name for feed in feeds for name, value in feed.items() if value.size == 0}
    return [node.name for node in model.graph.node if empty & set(node.input)]


def _readers_of_unranged(model: onnx.ModelProto, quantized: onnx.ModelProto) -> list[str]:
    """The nodes of `model` that produce or read an activation the quantizer gave an infinite or
    zero scale: its calibrated range was not finite (an attention mask's -inf or float32 minimum,
    added to the scores), and every value quantizes to one level, which made an optimum Qwen2's
    int8-static attention uniform."""
    scales = {tensor.name: tensor for tensor in quantized.graph.initializer}
    unranged = set()
    for node in quantized.graph.node:
        if node.op_type == "QuantizeLinear" and node.input[1] in scales:
            scale = numpy_helper.to_array(scales[node.input[1]])
            if not np.all(np.isfinite(scale) & (scale > 0)):
                unranged.add(node.input[0])
    return [node.name for node in model.graph.node
            if unranged & (set(node.input) | set(node.output))]


def make(job: Job) -> None:
    feeds = job.calibration or []  # never empty: the registry checks needs_calibration
    per_channel, excluded = True, []
    with tempfile.TemporaryDirectory(prefix="bundler-calibrate-") as tmp:
        named = Path(tmp) / "named.onnx"
        model = read_model(job.src)
        name_nodes(model)
        save_model(model, named)
        kept_float = _readers_of_empty_inputs(model, feeds)
        if kept_float:
            job.note(f"{len(kept_float)} nodes reading inputs empty in calibration (a cache's"
                     " first step) stay float32")
        while True:
            try:
                with quiet():
                    quantize_static(
                        named,
                        job.dst,
                        _FeedReader(feeds),
                        quant_format=QuantFormat.QDQ,
                        per_channel=per_channel,
                        activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8,
                        nodes_to_exclude=kept_float + excluded,
                        calibrate_method=_METHODS[job.method],
                        # retries reuse the ranges instead of calibrating again
                        calibration_cache_path=Path(tmp) / "ranges.json",
                        use_external_data_format=is_large(named),
                    )
                cpu_session(job.dst)  # the quantizer can also write a model that does not load
                unranged = _readers_of_unranged(model, read_model(job.dst))
                if not unranged or set(unranged) <= set(kept_float):
                    break
                kept_float += [name for name in unranged if name not in kept_float]
                job.note(f"retried leaving the {len(unranged)} producers and readers of"
                         " activations without a finite range (a causal mask's -inf) in float32")
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
    job.result.settings = Int8StaticSettings(
        format="QDQ",
        activation_type=QuantType.QUInt8.name,
        weight_type=QuantType.QInt8.name,
        per_channel=per_channel,
        calibration_method=job.method,
        calibration_samples=len(feeds),
        nodes_excluded=excluded,
    )


KIND = KindSpec(
    name="int8-static",
    keeps_float="ops without a QDQ kernel, nodes the quantizer failed on, readers of inputs"
    " empty in calibration and of activations without a finite range",
    needs_calibration=True,
    quantized=True,
    advice="try int8 or int8-weights, which need no calibration",
    make=make,
)
