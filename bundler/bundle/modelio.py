"""Model files in and out: read, check, save, copy, walk, size, hash, and the native CPU session.

The one place that knows how ONNX files are stored (inline weights or external data, protobuf's
2 GB limit), which element types exist and how they are spelled in numpy and in onnxruntime-web,
and how onnxruntime is opened. onnxruntime's own log lines never reach the terminal: its default
logger is set to fatal-only here, and its errors become the tool's own one-line messages.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal

import numpy as np
import onnx
import onnxruntime as ort
from google.protobuf.message import DecodeError

from bundler.errors import ConfigError, ModelError, first_line

ort.set_default_logger_severity(4)

PROTOBUF_LIMIT = onnx.checker.MAXIMUM_PROTOBUF
# Weights in external data past this many bytes take the large-model path (is_large); lowered
# by the tests (and to try the path on a small model), never raised past protobuf's limit.
LARGE_ENV = "BUNDLER_LARGE_MODEL_BYTES"


@dataclasses.dataclass(frozen=True)
class ElementType:
    """One tensor element type: its onnx enum, the name onnxruntime-web (and bundle.json) uses,
    and its numpy dtype (None where numpy has none)."""

    onnx_type: int
    name: str
    numpy: type | None


ELEMENT_TYPES = (
    ElementType(onnx.TensorProto.FLOAT, "float32", np.float32),
    ElementType(onnx.TensorProto.FLOAT16, "float16", np.float16),
    ElementType(onnx.TensorProto.DOUBLE, "float64", np.float64),
    ElementType(onnx.TensorProto.INT8, "int8", np.int8),
    ElementType(onnx.TensorProto.UINT8, "uint8", np.uint8),
    ElementType(onnx.TensorProto.INT16, "int16", np.int16),
    ElementType(onnx.TensorProto.UINT16, "uint16", np.uint16),
    ElementType(onnx.TensorProto.INT32, "int32", np.int32),
    ElementType(onnx.TensorProto.UINT32, "uint32", np.uint32),
    ElementType(onnx.TensorProto.INT64, "int64", np.int64),
    ElementType(onnx.TensorProto.UINT64, "uint64", np.uint64),
    ElementType(onnx.TensorProto.BOOL, "bool", np.bool_),
    ElementType(onnx.TensorProto.STRING, "string", None),
)
TYPE_NAMES = {element.onnx_type: element.name for element in ELEMENT_TYPES}
NUMPY_TYPES = {element.name: element.numpy for element in ELEMENT_TYPES if element.numpy}

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
class Signature:
    """The model's graph inputs (weights left out) and outputs, as the JS API sees them."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]


def tensor_dims(value_type: onnx.TypeProto.Tensor) -> tuple[Dim, ...] | None:
    """The dims as the JS API sees them: sizes, symbolic names, "?" for unknown; None: no shape."""
    if not value_type.HasField("shape"):
        return None
    # Some exporters (paddle2onnx) write dim_value -1 for a dim they leave open.
    return tuple(
        d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else (d.dim_param or "?")
        for d in value_type.shape.dim
    )


_NOT_TENSORS = {"sequence_type": "a sequence", "map_type": "a map", "optional_type": "an optional",
                "sparse_tensor_type": "a sparse tensor"}


def type_text(value_type: onnx.TypeProto) -> str:
    """ONNX's notation for a type: tensor(float), seq(tensor(float)), map(int64,tensor(float))."""
    kind = value_type.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        element = onnx.TensorProto.DataType.Name(getattr(value_type, kind).elem_type).lower()
        return f"{'sparse_' if kind == 'sparse_tensor_type' else ''}tensor({element})"
    if kind == "sequence_type":
        return f"seq({type_text(value_type.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({type_text(value_type.optional_type.elem_type)})"
    if kind == "map_type":
        key = onnx.TensorProto.DataType.Name(value_type.map_type.key_type).lower()
        return f"map({key},{type_text(value_type.map_type.value_type)})"
    return "unknown"


def tensor_spec(value: onnx.ValueInfoProto, role: str) -> TensorSpec:
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        what = _NOT_TENSORS.get(kind or "", "a value of unknown type")
        raise ModelError(
            f"{role} {value.name!r} is {what} ({type_text(value.type)}), not a"
            " tensor; onnxruntime-web's JavaScript API takes and returns tensors only, so"
            f" export the model with a tensor {role} (sequences and maps can stay inside)"
        )
    element = value.type.tensor_type.elem_type
    if element not in TYPE_NAMES:
        name = onnx.TensorProto.DataType.Name(element)
        raise ModelError(f"{role} {value.name!r} has element type {name}, which onnxruntime-web"
                         " does not support")
    return TensorSpec(value.name, TYPE_NAMES[element], tensor_dims(value.type.tensor_type))


def input_specs(model: onnx.ModelProto) -> tuple[TensorSpec, ...]:
    """The graph inputs that are not weights: what a caller feeds (outputs left unchecked, so
    also for a model whose ZipMap output is not a tensor yet)."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    return tuple(tensor_spec(value, "input") for value in model.graph.input
                 if value.name not in initializers)


def signature(model: onnx.ModelProto) -> Signature:
    return Signature(
        inputs=input_specs(model),
        outputs=tuple(tensor_spec(value, "output") for value in model.graph.output),
    )


def external_locations(model: onnx.ModelProto) -> tuple[str, ...]:
    locations = {
        entry.value
        for tensor in onnx.external_data_helper._get_all_tensors(model)
        if tensor.data_location == onnx.TensorProto.EXTERNAL
        for entry in tensor.external_data
        if entry.key == "location"
    }
    return tuple(sorted(locations))


def read_model(path: Path, *, load_weights: bool = True) -> onnx.ModelProto:
    """Parse the file, with one clear error for each way it can be unusable."""
    if not path.exists():
        raise ModelError(f"model not found: {path} (give the path of an .onnx file)")
    if path.is_dir():
        raise ModelError(f"{path} is a directory; give the path of an .onnx file inside it")
    size = path.stat().st_size
    if size == 0:
        raise ModelError(f"{path} is empty (0 bytes); export the model again")
    if size > PROTOBUF_LIMIT:
        raise ModelError(
            f"{path} is {size / 2**30:.1f} GiB in one file, past protobuf's 2 GB limit, so it"
            " cannot be parsed; save it with its weights as external data"
            " (onnx.save_model(model, path, save_as_external_data=True))"
        )
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, ValueError, RuntimeError, OSError) as error:
        raise ModelError(
            f"{path} is not an ONNX model (it does not parse as ONNX protobuf:"
            f" {first_line(error)}); it may be truncated or another kind of file — export it again"
        ) from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelError(f"{path} is not an ONNX model (no graph in it); export it again")
    missing = [
        location for location in external_locations(model)
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


def load_tensor(tensor: onnx.TensorProto, base_dir: Path) -> None:
    """Read the external data of one tensor of a model read without its weights into it, in
    place: after, it holds its values and names no data file (onnx would otherwise read the
    file again, relative to the working directory, and write the values back to it on save)."""
    onnx.external_data_helper.load_external_data_for_tensor(tensor, str(base_dir))
    tensor.data_location = onnx.TensorProto.DEFAULT
    del tensor.external_data[:]


def read_values(tensor: onnx.TensorProto, base_dir: Path) -> np.ndarray:
    """The values of a tensor of a model read without its weights: where it names a data file,
    read from `base_dir` into a copy, so the model's own tensor stays in external data (a weight
    a quantizer replaces by its int8 form is never held whole in the model)."""
    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        return onnx.numpy_helper.to_array(tensor)
    copy = onnx.TensorProto()
    copy.CopyFrom(tensor)
    load_tensor(copy, base_dir)
    return onnx.numpy_helper.to_array(copy)


def check_model(path: Path) -> list[str]:
    """onnx.checker on the file; returns its complaint (if any) instead of raising, because
    exporters produce models the checker rejects and onnxruntime runs. The caller decides."""
    try:
        onnx.checker.check_model(str(path))
    except onnx.checker.ValidationError as error:
        return [first_line(error)]
    return []


@functools.lru_cache(maxsize=64)
def _files_of(path: Path, stamp: tuple[int, int, int]) -> tuple[Path, ...]:
    model = onnx.load(str(path), load_external_data=False)
    return (path, *(path.parent / location for location in external_locations(model)))


def model_files(path: Path) -> list[Path]:
    """The model file and its external data files (parsed once per version of the file)."""
    stat = path.stat()
    return list(_files_of(path.resolve(), (stat.st_mtime_ns, stat.st_size, stat.st_ino)))


def model_bytes(path: Path) -> int:
    """The file's size plus that of its external data files."""
    return sum(file.stat().st_size for file in model_files(path))


def large_threshold() -> int:
    """The size past which a model with external data is built from its graph alone: protobuf's
    2 GB, or $BUNDLER_LARGE_MODEL_BYTES when that is lower."""
    given = os.environ.get(LARGE_ENV, "")
    try:
        return min(int(given), PROTOBUF_LIMIT) if given else PROTOBUF_LIMIT
    except ValueError:
        raise ConfigError(f"${LARGE_ENV} is {given!r}; give a number of bytes") from None


def is_large(path: Path) -> bool:
    """A model whose weights, kept in external data, are past large_threshold(): no step of the
    build may load them into one ModelProto (it could not be serialized past 2 GB)."""
    files = model_files(path)
    return len(files) > 1 and sum(file.stat().st_size for file in files) > large_threshold()


def write_graph(model: onnx.ModelProto, data_dir: Path, dst: Path) -> None:
    """Write `model`, read without its weights (its tensors name data files in `data_dir`), to
    `dst` with a copy of each data file beside it under the same name: onnxruntime refuses data
    outside the graph's folder, symbolic links to it included. A copy, not a hard link, so that
    nothing written in the build's scratch folder can reach the user's own files."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    for location in external_locations(model):
        source, target = data_dir / location, dst.parent / location
        if target.resolve() != source.resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)  # copied in blocks, never read whole
    onnx.save_model(model, dst)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_DATA_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data",
                "uint64_data")


def held_values(tensor: onnx.TensorProto) -> np.ndarray | None:
    """The tensor's values when this copy of it holds them, else None: its data may be external
    (a model read with load_external_data=False) or left out of a copy made for its shapes only.
    Code that reads weights from such a copy goes through here, never numpy_helper directly."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return None
    count = int(np.prod(tensor.dims, dtype=np.int64))
    if count and not tensor.raw_data and not any(getattr(tensor, f) for f in _DATA_FIELDS):
        return None
    try:
        return onnx.numpy_helper.to_array(tensor)
    except ValueError:  # stored data that disagrees with the dims: not values to rely on
        return None


def walk_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of the graph and of its subgraphs (If, Loop, Scan bodies)."""
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            for subgraph in [attribute.g, *attribute.graphs]:
                yield from walk_nodes(subgraph)


def node_reads(node: onnx.NodeProto) -> Iterator[str]:
    """The names a node reads, including those its subgraphs capture from the outer graph."""
    yield from node.input
    for inner in (n for a in node.attribute for g in [a.g, *a.graphs] for n in g.node):
        yield from node_reads(inner)


def save_model(model: onnx.ModelProto, path: Path) -> None:
    """Write `model` to `path`; weights go to `<name>.data` beside it only past protobuf's 2 GB."""
    data = path.with_name(path.name + ".data")
    # onnx appends to an existing external data file instead of replacing it
    data.unlink(missing_ok=True)
    if model.ByteSize() < PROTOBUF_LIMIT:
        onnx.save_model(model, path)
    else:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=data.name, size_threshold=1024)


def copy_model(src: Path, dst: Path) -> None:
    """Copy a model file; one with external data is rewritten so its data is named after `dst`
    (a large one, is_large, keeps its data files' names)."""
    if src.resolve() == dst.resolve():
        return
    if model_bytes(src) == src.stat().st_size:
        dst.with_name(dst.name + ".data").unlink(missing_ok=True)
        shutil.copyfile(src, dst)
    elif is_large(src):  # its data files are copied as they are, the weights never parsed
        write_graph(read_model(src, load_weights=False), src.parent, dst)
    else:
        save_model(read_model(src), dst)


def move_model(src: Path, dst: Path) -> None:
    """Move a model file and its data files over `dst` (of the same name, in another folder)
    and its data files: each data file keeps its place beside the graph, so the graph finds it.
    A rename, where copy_model would copy (a large model's data is gigabytes)."""
    if src.name != dst.name:
        raise ValueError(f"move_model keeps the name: {src.name} is not {dst.name}")
    for file in model_files(dst) if dst.exists() else []:
        file.unlink()
    for file in model_files(src):
        target = dst.parent / file.relative_to(src.resolve().parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        file.replace(target)


def session_options(config: Mapping[str, str] | None = None, threads: int = 0
                    ) -> ort.SessionOptions:
    """Options of a native session that logs nothing (its errors are raised and reported by the
    caller), with `config`'s session config entries (a variant's `session_config` for the EP,
    as bundle.mjs opens it) and `threads` intra-op threads (0: onnxruntime's choice)."""
    options = ort.SessionOptions()
    options.log_severity_level = 4
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, value)
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return options


def cpu_session(
    model: Path,
    *,
    level: ort.GraphOptimizationLevel = ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    threads: int = 0,
    optimized_path: Path | None = None,
    save_format: Literal["ONNX", "ORT"] = "ONNX",
    disabled_optimizers: list[str] | None = None,
    config: Mapping[str, str] | None = None,
) -> ort.InferenceSession:
    """A CPU-EP session that logs nothing (its errors are raised and reported by the caller);
    with `optimized_path`, onnxruntime also writes the graph there; `config`: session config
    entries (a variant's `session_config`, opened the way bundle.mjs opens it)."""
    options = session_options(config, threads)
    options.graph_optimization_level = level
    if optimized_path is not None:
        options.optimized_model_filepath = str(optimized_path)
        options.add_session_config_entry("session.save_model_format", save_format)
        if save_format == "ONNX":
            options.add_session_config_entry(
                "session.optimized_model_external_initializers_file_name",
                optimized_path.name + ".data",
            )
    return ort.InferenceSession(
        str(model),
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=disabled_optimizers or [],
    )


def native_load_error(path: Path) -> str | None:
    """Why native onnxruntime cannot load the model, in one line; None when it loads."""
    try:
        cpu_session(path)
    except Exception as error:  # noqa: BLE001 - onnxruntime raises several unrelated types
        return first_line(error)
    return None


_MISSING_LOCALE = re.compile(r"Failed to construct locale with name:\s*([\w.@-]+)")


def build_machine_limit(load_error: str) -> str | None:
    """When native onnxruntime cannot load a model because of this machine rather than the
    model, what is missing and how to add it; None otherwise. (StringNormalizer asks the C
    library for a locale, en_US.UTF-8 by default, that minimal images lack; the browser's runtime
    brings its own.)"""
    missing = _MISSING_LOCALE.search(load_error)
    if missing is None:
        return None
    locale = missing[1]
    return (f"this machine lacks the locale {locale} that StringNormalizer uses natively (the"
            f" browser's runtime has its own); install it (locale-gen {locale}) to check the model"
            " natively")
