"""Load and check an ONNX model, and describe its inputs and outputs (names, types, shapes)."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from bundler.errors import ModelError

#  onnx element type -> the type name onnxruntime-web's Tensor uses (and bundle.json records).
TYPE_NAMES = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.UINT8: "uint8",
    onnx.TensorProto.INT16: "int16",
    onnx.TensorProto.UINT16: "uint16",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.UINT32: "uint32",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.UINT64: "uint64",
    onnx.TensorProto.BOOL: "bool",
    onnx.TensorProto.STRING: "string",
}

Dim = int | str


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One graph input or output. `shape` is None when the rank is unknown; a dim is an int when
    fixed and a string when symbolic ("?" when it has no name)."""

    name: str
    type: str
    shape: tuple[Dim, ...] | None

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "type": self.type,
            "shape": None if self.shape is None else list(self.shape),
        }

    @classmethod
    def from_json(cls, data: dict) -> TensorSpec:
        shape = data["shape"]
        return cls(data["name"], data["type"], None if shape is None else tuple(shape))


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    path: Path
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    opsets: dict[str, int]
    op_counts: dict[str, int]
    external_data: tuple[str, ...]
    bytes: int


def tensor_dims(value_type: onnx.TypeProto.Tensor) -> tuple[Dim, ...] | None:
    """The dims as the JS API sees them: sizes, symbolic names, "?" for unknown; None: no shape."""
    if not value_type.HasField("shape"):
        return None
    # Some exporters (paddle2onnx) write dim_value -1 for a dim they leave open.
    return tuple(
        d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else (d.dim_param or "?")
        for d in value_type.shape.dim
    )


def tensor_spec(value: onnx.ValueInfoProto, role: str) -> TensorSpec:
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        raise ModelError(
            f"{role} {value.name!r} is a {kind or 'value of unknown type'}, not a tensor;"
            " onnxruntime-web takes and returns tensors only"
        )
    element = value.type.tensor_type.elem_type
    if element not in TYPE_NAMES:
        name = onnx.TensorProto.DataType.Name(element)
        raise ModelError(f"{role} {value.name!r} has element type {name}, which onnxruntime-web"
                         " does not support")
    return TensorSpec(value.name, TYPE_NAMES[element], tensor_dims(value.type.tensor_type))


def _external_locations(model: onnx.ModelProto) -> tuple[str, ...]:
    locations = {
        entry.value
        for tensor in onnx.external_data_helper._get_all_tensors(model)
        if tensor.data_location == onnx.TensorProto.EXTERNAL
        for entry in tensor.external_data
        if entry.key == "location"
    }
    return tuple(sorted(locations))


def _count_ops(graph: onnx.GraphProto, counts: collections.Counter) -> None:
    for node in graph.node:
        counts[f"{node.domain}.{node.op_type}" if node.domain else node.op_type] += 1
        for attribute in node.attribute:
            for subgraph in [attribute.g, *attribute.graphs]:
                _count_ops(subgraph, counts)


def read_model(path: Path, *, load_weights: bool = True) -> onnx.ModelProto:
    """Parse the file, with one clear error for each way it can be unusable."""
    if not path.exists():
        raise ModelError(f"model not found: {path} (give the path of an .onnx file)")
    if path.is_dir():
        raise ModelError(f"{path} is a directory; give the path of an .onnx file inside it")
    size = path.stat().st_size
    if size == 0:
        raise ModelError(f"{path} is empty (0 bytes); export the model again")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, ValueError, RuntimeError, OSError) as error:
        raise ModelError(
            f"{path} is not an ONNX model (it does not parse as ONNX protobuf: {error});"
            " it may be truncated or another kind of file — export it again"
        ) from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelError(f"{path} is not an ONNX model (no graph in it); export it again")
    missing = [
        location for location in _external_locations(model)
        if not (path.parent / location).is_file()
    ]
    if missing:
        raise ModelError(
            f"{path} keeps its weights in external data file {missing[0]!r}, which is missing"
            f" (expected at {path.parent / missing[0]}); keep it next to the model"
        )
    if load_weights:
        try:
            onnx.load_external_data_for_model(model, str(path.parent))
        except (OSError, ValueError) as error:
            raise ModelError(f"{path}: cannot read its external data ({error})") from None
    return model


def check_model(path: Path) -> list[str]:
    """onnx.checker on the file; returns its complaint (if any) instead of raising, because
    exporters produce models the checker rejects and onnxruntime runs. The caller decides."""
    try:
        onnx.checker.check_model(str(path))
    except onnx.checker.ValidationError as error:
        return [str(error).strip().splitlines()[0]]
    return []


def model_files(path: Path) -> list[Path]:
    """The model file and its external data files."""
    model = onnx.load(str(path), load_external_data=False)
    return [path, *(path.parent / location for location in _external_locations(model))]


def model_bytes(path: Path) -> int:
    """The file's size plus that of its external data files."""
    return sum(file.stat().st_size for file in model_files(path))


def input_specs(model: onnx.ModelProto) -> tuple[TensorSpec, ...]:
    """The graph inputs that are not initializers: what the caller feeds."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    return tuple(tensor_spec(value, "input") for value in model.graph.input
                 if value.name not in initializers)


def describe(model: onnx.ModelProto, path: Path) -> ModelInfo:
    counts: collections.Counter = collections.Counter()
    _count_ops(model.graph, counts)
    return ModelInfo(
        path=path,
        inputs=input_specs(model),
        outputs=tuple(tensor_spec(value, "output") for value in model.graph.output),
        opsets={entry.domain or "ai.onnx": entry.version for entry in model.opset_import},
        op_counts=dict(sorted(counts.items())),
        external_data=_external_locations(model),
        bytes=model_bytes(path),
    )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
