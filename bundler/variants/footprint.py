"""A variant's `memory` record: what load() compares with the browser's limits before it fetches
a byte of the variant (web/bundle.preflight.mjs).

The tensor sizes are read from the model's dims and element types, never from its weights, so a
model whose weights are in external data is not loaded to size it. The estimates:

- heap: the model's bytes + HEAP_MARGIN. onnxruntime-web copies the model into the wasm heap to
  create the session (both the WASM and the WebGPU build); wasm32 caps that heap at 4 GiB.
- peak: the model's bytes + heap, i.e. twice the model plus the margin: the fetched buffer is
  still alive on the page while its copy in the heap is read.
- folded (int4 format=qdq and int8-weights on WASM, whose session_config folds their quantized
  weights into float32 at load): the heap also holds those float32 weights, 4 bytes per 4-bit
  or 8-bit value.
- WebGPU keeps `weights` on the GPU; each initializer is one buffer, so `largest_tensor` is what
  the adapter's maxBufferSize and maxStorageBufferBindingSize are compared with.
"""

from __future__ import annotations

import math
from pathlib import Path

import onnx

from bundler.bundle.modelio import walk_nodes
from bundler.bundle.records import Memory
from bundler.model.analysis import tensor_bytes

# The wasm module's own memory, onnxruntime's arenas and the activations of a modest input: a
# floor, not a bound (a model's activations at a large input can exceed it).
HEAP_MARGIN = 64 * 2**20


def footprint(model_path: Path, model_bytes: int, folded: bool = False) -> Memory:
    """The memory record of the ONNX model at `model_path` (its weights may be external, they are
    not read), shipped as `model_bytes` bytes (the file, and its external data, as fetched);
    `folded`: its quantized weights become float32 at load."""
    model = onnx.load(str(model_path), load_external_data=False)
    sizes = tensor_bytes(model)
    heap = model_bytes + HEAP_MARGIN + (_folded_bytes(model) if folded else 0)
    return Memory(largest_tensor=max(sizes, default=0), weights=sum(sizes), heap=heap,
                  peak=model_bytes + heap)


def _folded_bytes(model: onnx.ModelProto) -> int:
    """The float32 bytes of the graph's quantized initializers once dequantized: the 4-bit ones,
    and those a DequantizeLinear reads (int8-weights)."""
    four_bits = (onnx.TensorProto.INT4, onnx.TensorProto.UINT4)
    dequantized = {node.input[0] for node in walk_nodes(model.graph)
                   if node.op_type == "DequantizeLinear"}
    return sum(4 * math.prod(tensor.dims) for tensor in model.graph.initializer
               if tensor.data_type in four_bits or tensor.name in dequantized)
