"""fp16: float16 weights and compute; inputs, outputs and the ops that fail or lose too much in
float16 stay float32. Refused when an activation would overflow float16 on the feeds.

From a model past 2 GB (Job.weightless) the converter rewrites the graph read without its
weights: it only retypes a float initializer in external data (it has no values to convert),
and each one it retyped is then read from the source's data files a block at a time, converted
with the converter's own rounding and written to the variant's data file (StreamedWeights)."""

from __future__ import annotations

import contextlib
import heapq
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnxruntime.transformers import float16

from bundler.bundle.external import StreamedWeights, graph_beside, read_blocks
from bundler.bundle.modelio import cpu_session, node_reads, read_model, save_model, walk_nodes
from bundler.bundle.records import Fp16Settings
from bundler.errors import QuantizeError
from bundler.variants.metrics import Feeds, measure
from bundler.variants.spec import Job, KindSpec
from bundler.variants.tools import quiet

# On top of the converter's defaults: ops that fail or lose too much in float16.
_KEEP_FLOAT32 = ("Resize", "TopK", "NonMaxSuppression", "CumSum", "Range", "RoiAlign")


def _sort_topologically(graph: onnx.GraphProto) -> None:
    """Stable topological sort, in place: the float16 converter appends its Casts at the end.

    (onnx_ir's sort cannot load models with map types; onnxruntime's ignores subgraph captures.)
    """
    nodes = list(graph.node)
    producer = {name: index for index, node in enumerate(nodes) for name in node.output if name}
    waiting = [
        {producer[name] for name in node_reads(node) if name in producer} - {index}
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


SHADER_F16 = "shader-f16"  # the WebGPU feature of float16 in shaders
_FLOAT16_MAX = float(np.finfo(np.float16).max)


# float32 bytes of a large model's weight read, converted and written at a time
HALF_BLOCK = 16 * 2**20


@contextlib.contextmanager
def _value_infos_from_dims() -> Iterator[None]:
    """Have the converter describe each initializer it makes float16 by its dims. It takes the
    shape from the values (numpy_helper.to_array), which for a weight in external data reads the
    float32 bytes, from the working directory, as float16, and fails; the dims are that shape,
    so a model in memory is converted as before, with one copy of each weight fewer."""
    from_values = float16.make_value_info_from_tensor
    float16.make_value_info_from_tensor = lambda tensor: helper.make_tensor_value_info(
        tensor.name, tensor.data_type, tensor.dims)
    try:
        yield
    finally:
        float16.make_value_info_from_tensor = from_values


def _external_floats(model: onnx.ModelProto) -> set[str]:
    """The float32 initializers (of any graph) whose values are in external data. The converter
    requires float initializers' names to be unique across graphs, so names tell them apart."""
    return {tensor.name for tensor in onnx.external_data_helper._get_initializer_tensors(model)
            if tensor.data_type == TensorProto.FLOAT
            and tensor.data_location == TensorProto.EXTERNAL}


def _write_halves(model: onnx.ModelProto, floats: set[str], source_dir: Path,
                  streamed: StreamedWeights) -> None:
    """Write each of `floats` that the converter retyped to float16 (its data still the
    source's float32 bytes) converted, HALF_BLOCK at a time, as the converter converts a weight
    it holds (convert_np_to_float16, value by value, so blocks give the same values)."""
    for tensor in onnx.external_data_helper._get_initializer_tensors(model):
        if tensor.name in floats and tensor.data_type == TensorProto.FLOAT16:
            halves = (float16.convert_np_to_float16(np.frombuffer(block, np.float32)).tobytes()
                      for block in read_blocks(tensor, source_dir, HALF_BLOCK))
            streamed.write(tensor, halves, 2 * math.prod(tensor.dims))


def make(job: Job) -> None:
    model = read_model(job.src) if job.weightless is None else job.weightless
    floats = _external_floats(model)
    op_types = {node.op_type for node in walk_nodes(model.graph)}
    ml_ops = {node.op_type for node in walk_nodes(model.graph) if node.domain == "ai.onnx.ml"}
    blocked = sorted(set(float16.DEFAULT_OP_BLOCK_LIST) | set(_KEEP_FLOAT32) | ml_ops)
    with quiet(), _value_infos_from_dims():
        converted = float16.convert_float_to_float16(
            model, keep_io_types=True, op_block_list=blocked
        )
    _sort_topologically(converted.graph)
    if job.weightless is None:
        save_model(converted, job.dst)
    else:
        with StreamedWeights(converted, job.dst, job.src.parent) as streamed:
            streamed.offload(converted)  # the weights the source held inline, converted
            _write_halves(converted, floats, job.src.parent, streamed)
            streamed.finish(converted)
    job.result.settings = Fp16Settings(keep_io_types=True, op_block_list=blocked)
    # float16 in WGSL needs the adapter's shader-f16: load() picks another variant where it lacks it
    job.result.requires = [SHADER_F16]
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
    probe = read_model(model, load_weights=False)  # a large model's weights stay on disk
    computed = {out for node in probe.graph.node for out in node.output}
    watched = sorted((names & computed) - {value.name for value in probe.graph.output})
    if not watched:
        return "", 0.0
    probe.graph.output.extend(helper.make_empty_tensor_value_info(name) for name in watched)
    peak, where = 0.0, ""
    with graph_beside(probe, model.parent) as path:
        session = cpu_session(path)
        for feed in feeds:
            for name, value in zip(watched, session.run(watched, feed), strict=True):
                finite = np.abs(value[np.isfinite(value)]) if value.size else value
                if finite.size and float(finite.max()) > peak:
                    peak, where = float(finite.max()), name
    return where, peak


KIND = KindSpec(
    name="fp16",
    keeps_float=f"inputs, outputs, {', '.join(_KEEP_FLOAT32)}, ai.onnx.ml ops",
    needs_calibration=False,
    quantized=True,
    advice="try int8-weights, or keep fp32",
    make=make,
    streamed=True,
    takes_tied_heads=True,  # the table and its Transpose become float16 together
)
