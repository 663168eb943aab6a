"""Float weights laid out for the wire: each run of float32, float16 or bfloat16 values in a
model file, stored as byte planes of its values rotated left by one bit, so that one plane holds
the exponents.

A model's float weights are near-random bytes to gzip (fp32: 0.93 of their size): only the
exponent is predictable, and it straddles two bytes. Rotated, the exponent fills the top byte of
each value (float32, bfloat16) or most of it (float16: 5 exponent and 3 mantissa bits), and the
planes put those bytes side by side, which gzip then codes in 2-3 bits each. A Whisper-tiny
decoder at fp32 (118 MB): 109.4 MB gzipped, about 97 MB packed.

The runs are where the file's float tensors lie, found by their bytes in it (bundle.json's
`packed.runs`, per part of a split file); a run is [start, bytes, itemsize]. bundle.fetch.mjs
undoes the layout after gunzipping (`unpack`, the same steps as here) and checks the sha256 of
the plain bytes, so a wrong run can cost bytes but never a wrong model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError

Run = list[int]  # [start, bytes, itemsize], a JSON list in bundle.json

_ITEMSIZE = {onnx.TensorProto.FLOAT: 4, onnx.TensorProto.FLOAT16: 2,
             onnx.TensorProto.BFLOAT16: 2}
_UNSIGNED = {4: np.dtype("<u4"), 2: np.dtype("<u2")}
MIN_RUN_BYTES = 1 << 16  # smaller tensors are not worth a run in bundle.json


def _tensors(graph: onnx.GraphProto) -> list[onnx.TensorProto]:
    """The tensors of `graph` and its subgraphs in the order protobuf writes them: each node's
    attributes (Constant values, If/Loop bodies) first, the initializers after."""
    found = []
    for node in graph.node:
        for attribute in node.attribute:
            # protobuf's field order: t, g, tensors, graphs
            if attribute.HasField("t"):
                found.append(attribute.t)
            if attribute.HasField("g"):
                found += _tensors(attribute.g)
            found += attribute.tensors
            for subgraph in attribute.graphs:
                found += _tensors(subgraph)
    return found + list(graph.initializer)


def float_runs(path: Path) -> list[Run]:
    """The runs of float values in the ONNX file `path`, in file order: each float tensor of at
    least MIN_RUN_BYTES stored inline (raw_data), found by its bytes from the previous one on;
    none for a file that is not a model (it is shipped as it is)."""
    data = path.read_bytes()
    try:
        model = onnx.load_model_from_string(data)
    except DecodeError:
        return []
    runs: list[Run] = []
    cursor = 0
    for tensor in _tensors(model.graph):
        itemsize = _ITEMSIZE.get(tensor.data_type)
        raw = tensor.raw_data
        if itemsize is None or len(raw) < MIN_RUN_BYTES:
            continue
        start = data.find(raw, cursor)
        if start < 0:  # out of the order _tensors expects: look from the start
            start = data.find(raw)
        if start >= 0:
            runs.append([start, len(raw), itemsize])
            cursor = start + len(raw)
    runs.sort()
    # a tensor found twice at one place (equal contents) or overlapping another: keep the first
    return [run for index, run in enumerate(runs)
            if index == 0 or run[0] >= runs[index - 1][0] + runs[index - 1][1]]


def runs_within(runs: list[Run], start: int, end: int) -> list[Run]:
    """`runs` cut to the bytes [start, end) of their file (a part of it) and counted from
    `start`; a value cut in two by the bounds stays out."""
    within = []
    for first, length, itemsize in runs:
        low = first + -(-max(start - first, 0) // itemsize) * itemsize
        high = first + (min(first + length, end) - first) // itemsize * itemsize
        if high > low:
            within.append([low - start, high - low, itemsize])
    return within


def _rotated(values: np.ndarray, itemsize: int, left: bool) -> np.ndarray:
    bits = itemsize * 8
    shift, back = (1, bits - 1) if left else (bits - 1, 1)
    return (values << shift) | (values >> back)


def pack(data: bytes, runs: list[Run]) -> bytes:
    """`data` with each run's values rotated left by a bit and stored as byte planes, lowest
    byte first."""
    out = bytearray(data)
    for start, length, itemsize in runs:
        values = np.frombuffer(data, _UNSIGNED[itemsize], length // itemsize, start)
        planes = _rotated(values, itemsize, left=True).view(np.uint8).reshape(-1, itemsize).T
        out[start:start + length] = planes.tobytes()
    return bytes(out)


def unpack(data: bytes, runs: list[Run]) -> bytes:
    """pack()'s inverse."""
    out = bytearray(data)
    for start, length, itemsize in runs:
        planes = np.frombuffer(data, np.uint8, length, start).reshape(itemsize, -1)
        values = np.ascontiguousarray(planes.T).view(_UNSIGNED[itemsize]).reshape(-1)
        out[start:start + length] = _rotated(values, itemsize, left=False).tobytes()
    return bytes(out)

