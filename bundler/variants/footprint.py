"""A variant's `memory` record: what load() compares with the browser's limits before it fetches
a byte of the variant (web/bundle.preflight.mjs).

The tensor sizes are read from the model's dims and element types, never from its weights, so a
model whose weights are in external data is not loaded to size it. The estimates:

- heap: the model's bytes + HEAP_MARGIN. onnxruntime-web copies the model into the wasm heap to
  create the session (both the WASM and the WebGPU build); wasm32 caps that heap at 4 GiB.
- peak: the model's bytes + heap, i.e. twice the model plus the margin: the fetched buffer is
  still alive on the page while its copy in the heap is read.
- WebGPU keeps `weights` on the GPU; each initializer is one buffer, so `largest_tensor` is what
  the adapter's maxBufferSize and maxStorageBufferBindingSize are compared with.
"""

from __future__ import annotations

from pathlib import Path

import onnx

from bundler.bundle.records import Memory
from bundler.model.analysis import tensor_bytes

# The wasm module's own memory, onnxruntime's arenas and the activations of a modest input: a
# floor, not a bound (a model's activations at a large input can exceed it).
HEAP_MARGIN = 64 * 2**20


def footprint(model_path: Path, model_bytes: int) -> Memory:
    """The memory record of the ONNX model at `model_path` (its weights may be external, they are
    not read), shipped as `model_bytes` bytes (the file, and its external data, as fetched)."""
    sizes = tensor_bytes(onnx.load(str(model_path), load_external_data=False))
    heap = model_bytes + HEAP_MARGIN
    return Memory(largest_tensor=max(sizes, default=0), weights=sum(sizes), heap=heap,
                  peak=model_bytes + heap)
