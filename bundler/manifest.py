"""bundle.json: the one reader and writer of the bundle's manifest.

The manifest is a tree of dataclasses; `load` reads and checks a folder's bundle.json (naming the
key that is wrong), `dump` writes it. `schema_version` starts at 1; bundle.mjs refuses a manifest
whose version is newer than the one it knows, and so does `load`. Nested records whose content
is owned by one stage (accuracy, settings, optimisation steps, fingerprints) stay plain JSON.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal

from bundler.errors import ModelError
from bundler.files import FILES_MODULE, files_module
from bundler.modelio import TensorSpec
from bundler.variants.default import default_variant

SCHEMA_VERSION = 1
MANIFEST_FILE = "bundle.json"
TOOL_NAME = "onnx-bundler"

JSON = dict[str, Any]


@dataclasses.dataclass
class Tool:
    name: str
    version: str


@dataclasses.dataclass
class RuntimeBuild:
    """A build's ES module, the glue module it imports and its wasm (env.wasm.wasmPaths)."""

    module: str
    mjs: str
    wasm: str  # bundle.mjs fetches it itself (it may be split into parts)


@dataclasses.dataclass
class Encoded:
    """A precompressed sibling of a file (or part)."""

    path: str
    bytes: int


@dataclasses.dataclass
class FilePiece:
    path: str
    bytes: int
    sha256: str
    encodings: dict[str, Encoded] | None = None  # "br", "gzip"


@dataclasses.dataclass
class FileEntry:
    """One file a browser may fetch; `parts` when it was split for static hosts."""

    path: str
    bytes: int
    sha256: str
    parts: list[FilePiece] | None = None
    encodings: dict[str, Encoded] | None = None


@dataclasses.dataclass
class NativeReference:
    """The native onnxruntime the browser was checked against."""

    package: str
    version: str


@dataclasses.dataclass
class Runtime:
    package: str
    version: str
    dir: str
    builds: dict[str, RuntimeBuild]
    native_reference: NativeReference | None = None


@dataclasses.dataclass
class Variant:
    name: str
    kind: str
    file: str
    bytes: int
    sha256: str
    ratio: float
    accuracy: JSON | None
    settings: JSON
    notes: list[str]
    reference: JSON | None


@dataclasses.dataclass
class Source:
    file: str
    bytes: int


@dataclasses.dataclass
class EPResult:
    passed: bool
    max_abs_error: float | None
    max_normalized_error: float | None
    error: str | None = None
    unsupported: Literal["runtime", "device"] | None = None


@dataclasses.dataclass
class Verification:
    status: Literal["passed", "failed", "not_done"]
    reason: str | None = None
    hint: str | None = None
    dims: dict[str, int] | None = None
    results: dict[str, dict[str, EPResult]] | None = None
    fallback: EPResult | None = None
    problems: list[str] | None = None


@dataclasses.dataclass
class Selection:
    mode: str
    budget: str
    chosen: str  # the default (the WASM one when default_variant is a map per EP)
    candidates: list[JSON]
    objective: str | None = None  # "balanced", "speed" or "size"
    speed: JSON | None = None  # how the candidates' speeds were measured, or why they were not


@dataclasses.dataclass
class Task:
    """What the task API (classify, detect, stream) needs: bundler.tasks.spec's settings,
    resolved against the model. The numeric preprocessing (scale, mean/std, channel order,
    layout) is in the shipped graph already; it is recorded for the reader."""

    kind: Literal["image-classification", "object-detection", "audio-stream"]
    input: str
    output: str
    size: list[int] | None = None  # [height, width] of the image the graph takes
    resize: Literal["stretch", "letterbox", "center-crop"] | None = None
    filter: Literal["bilinear", "nearest", "antialias", "cv2-linear", "pil-bilinear"] | None = None
    pad_value: int | None = None
    placement: Literal["centre", "top-left"] | None = None
    letterbox_order: Literal["resize-then-pad", "pad-then-resize"] | None = None
    crop_fraction: float | None = None
    layout: Literal["NCHW", "NHWC"] | None = None
    channels: Literal["RGB", "BGR"] | None = None
    scale: float | None = None
    mean: list[float] | None = None
    std: list[float] | None = None
    labels: list[str] | None = None
    softmax: bool | None = None
    top_k: int | None = None
    score_threshold: float | None = None
    iou_threshold: float | None = None
    max_detections: int | None = None
    output_layout: Literal["yolov8", "yolov5", "nms-inside"] | None = None
    nms: Literal["per-class", "class-agnostic"] | None = None
    sample_rate: int | None = None
    chunk_size: int | None = None
    context_size: int | None = None  # samples of the previous chunk given before each chunk
    state: dict[str, str] | None = None  # state input -> the output fed back into it
    sample_rate_input: str | None = None  # an int64 input given the sample rate


@dataclasses.dataclass
class Manifest:
    name: str
    tool: Tool
    runtime: Runtime
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    variants: list[Variant]
    default_variant: str | dict[str, str]
    source: Source
    optimization: JSON
    notes: list[str]
    verification: Verification
    selection: Selection | None = None
    hosting: JSON | None = None  # bundler.hosting.publish.HostingOptions, as JSON
    files: list[FileEntry] | None = None
    task: Task | None = None
    # the input sizes accuracy and auto's timing ran at, and bench runs at (bundler.workload)
    workload: JSON | None = None
    schema_version: int = SCHEMA_VERSION

    def variant(self, name: str) -> Variant:
        return next(variant for variant in self.variants if variant.name == name)

    def default_for(self, ep: str) -> Variant:
        """The variant load() picks on `ep` by default."""
        return self.variant(default_variant(self.default_variant, ep))

    def to_json(self) -> JSON:
        data = _to_json(self)
        return {"schema_version": data.pop("schema_version"), **data}


def _to_json(value: Any) -> Any:
    if isinstance(value, TensorSpec):
        return value.to_json()
    if dataclasses.is_dataclass(value):
        data = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if item is None and field.default is None:
                continue  # optional and absent: not written
            data[field.name] = _to_json(item)
        return data
    if isinstance(value, dict):
        return {key: _to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_to_json(item) for item in value]
    return value


class _Invalid(Exception):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")


_PRIMITIVES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _from_json(kind: Any, data: Any, where: str) -> Any:
    """`data` checked against the type `kind` and converted to it."""
    origin = typing.get_origin(kind)
    if kind is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if data is None and type(None) in options:
            return None
        for option in (option for option in options if option is not type(None)):
            try:
                return _from_json(option, data, where)
            except _Invalid:
                continue
        raise _Invalid(where, f"unexpected value {data!r}")
    if origin is Literal:
        if data not in typing.get_args(kind):
            raise _Invalid(where, f"expected one of {typing.get_args(kind)}, got {data!r}")
        return data
    if origin is list:
        if not isinstance(data, list):
            raise _Invalid(where, f"expected a list, got {data!r}")
        (item,) = typing.get_args(kind)
        return [_from_json(item, value, f"{where}[{i}]") for i, value in enumerate(data)]
    if origin is dict:
        if not isinstance(data, dict):
            raise _Invalid(where, f"expected an object, got {data!r}")
        _, item = typing.get_args(kind)
        return {key: _from_json(item, value, f"{where}.{key}") for key, value in data.items()}
    if kind is TensorSpec:
        spec = _from_json(dict[str, Any], data, where)
        for key in ("name", "type", "shape"):
            if key not in spec:
                raise _Invalid(where, f"missing {key!r}")
        return TensorSpec.from_json(spec)
    if dataclasses.is_dataclass(kind):
        if not isinstance(data, dict):
            raise _Invalid(where, f"expected an object, got {data!r}")
        hints = typing.get_type_hints(kind)
        values = {}
        for field in dataclasses.fields(kind):
            if field.name in data:
                values[field.name] = _from_json(hints[field.name], data[field.name],
                                                f"{where}.{field.name}".lstrip("."))
            elif field.default is dataclasses.MISSING:
                raise _Invalid(where or "bundle.json", f"missing key {field.name!r}")
        return kind(**values)
    if kind is float and isinstance(data, int | float) and not isinstance(data, bool):
        return float(data)
    if kind in _PRIMITIVES:
        if type(data) is not kind:
            raise _Invalid(where, f"expected {_PRIMITIVES[kind]}, got {data!r}")
        return data
    raise TypeError(f"no JSON reading for {kind!r}")  # a field type this module forgot


def files_from_json(entries: list[JSON]) -> list[FileEntry]:
    """bundle.json's `files` table, from the plain JSON the hosting stage writes."""
    try:
        return _from_json(list[FileEntry], entries, "files")
    except _Invalid as error:
        raise ModelError(f"{MANIFEST_FILE}: {error}") from None


def files_to_json(entries: list[FileEntry] | None) -> list[JSON]:
    return _to_json(entries or [])


def from_json(data: Any, source: str = MANIFEST_FILE) -> Manifest:
    """Check and convert a parsed bundle.json; ModelError naming the key when it is wrong."""
    if not isinstance(data, dict):
        raise ModelError(f"{source} is not a JSON object; rebuild the bundle")
    version = data.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ModelError(f"{source} has schema_version {version!r}, newer than the {SCHEMA_VERSION}"
                         f" this onnx-bundler reads; upgrade onnx-bundler or rebuild the bundle")
    try:
        return _from_json(Manifest, data, "")
    except _Invalid as error:
        raise ModelError(f"{source}: {error}; rebuild the bundle with bundle build") from None


def load(directory: Path) -> Manifest:
    """The manifest of a built folder."""
    path = directory / MANIFEST_FILE
    if not directory.is_dir():
        raise ModelError(f"{directory} is not a folder; give a folder made by bundle build")
    if not path.is_file():
        raise ModelError(f"{directory} has no {MANIFEST_FILE}; give a folder made by bundle build")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ModelError(f"{path} is not valid JSON ({error}); rebuild the bundle") from None
    return from_json(data, str(path))


def dumps(manifest: Manifest) -> str:
    return json.dumps(manifest.to_json(), indent=2, ensure_ascii=False) + "\n"


def dump(directory: Path, manifest: Manifest) -> None:
    """Write the manifest's two forms: bundle.json (for tools) and bundle.files.mjs (for
    bundle.mjs: the same content, and the URLs of the model and runtime files)."""
    (directory / MANIFEST_FILE).write_text(dumps(manifest), encoding="utf-8")
    (directory / FILES_MODULE).write_text(files_module(manifest.to_json()), encoding="utf-8")


def made_by_us(directory: Path) -> bool:
    """Whether `directory` holds a bundle this tool wrote (so a build may replace it)."""
    try:
        data = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("tool"), dict) and \
        data["tool"].get("name") == TOOL_NAME
