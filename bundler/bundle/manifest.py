"""bundle.json: the one reader and writer of the bundle's manifest.

The manifest is a tree of records (bundler.bundle.records); `load` reads and checks a folder's
bundle.json (naming the key that is wrong), `dump` writes it with bundle.files.mjs. `schema_version`
starts at 1; bundle.mjs refuses a manifest whose version is newer than the one it knows, and so
does `load`.

Planned next shape (schema_version 2, for a pipeline of sessions such as an encoder and a decoder
with a tokenizer): `sessions: [{name, inputs, outputs, variants, default_variant}]` plus
`tokenizer` and per-file `external_data` parts in `files`; today's top-level inputs, outputs,
variants and default_variant are then its one session, which is how a reader of version 2 reads
a version 1 bundle (docs/reference/bundle-json.md).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from bundler.bundle.codec import JSON, Invalid, versioned_json
from bundler.bundle.codec import from_json as _decode
from bundler.bundle.files import files_module
from bundler.bundle.layout import FILES_MODULE, MANIFEST_FILE, TEXT_ENTRY_MODULES
from bundler.bundle.measured import SpeedRecord, Workload
from bundler.bundle.modelio import TensorSpec
from bundler.bundle.records import (
    Accuracy,
    Bound,
    Encoded,
    EPResult,
    FileEntry,
    FilePiece,
    Fingerprint,
    Hosting,
    NativeReference,
    Optimization,
    OptimizationStep,
    Runtime,
    RuntimeBuild,
    Selection,
    SelectionCandidate,
    Source,
    Task,
    Tool,
    Variant,
    Verification,
)
from bundler.errors import ModelError
from bundler.variants.default import default_variant

SCHEMA_VERSION = 1
TOOL_NAME = "onnx-bundler"
__all__ = ["Accuracy", "Bound", "EPResult", "Encoded", "FileEntry", "FilePiece", "Fingerprint",
           "Hosting", "Manifest", "NativeReference", "Optimization", "OptimizationStep", "Runtime",
           "RuntimeBuild", "Selection", "SelectionCandidate", "Source", "SpeedRecord", "Task",
           "Tool", "Variant", "Verification", "Workload"]


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
    optimization: Optimization
    notes: list[str]
    verification: Verification
    selection: Selection | None = None
    hosting: Hosting | None = None
    files: list[FileEntry] | None = None
    task: Task | None = None
    # the input sizes accuracy and auto's timing ran at, and bench runs at (bundler.verify.workload)
    workload: Workload | None = None
    schema_version: int = SCHEMA_VERSION

    def variant(self, name: str) -> Variant:
        return next(variant for variant in self.variants if variant.name == name)

    def default_for(self, ep: str) -> Variant:
        """The variant load() picks on `ep` by default."""
        return self.variant(default_variant(self.default_variant, ep))

    def to_json(self) -> JSON:
        return versioned_json(self)


def read_json(path: Path) -> Any:
    """A manifest file parsed; ModelError when it is not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ModelError(f"{path} is not valid JSON ({error}); rebuild the bundle") from None


def check_version(data: Any, source: str, known: int) -> None:
    """ModelError unless `data` is an object of a schema_version this code reads (none: 1)."""
    if not isinstance(data, dict):
        raise ModelError(f"{source} is not a JSON object; rebuild the bundle")
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version > known:
        raise ModelError(f"{source} has schema_version {version!r}, newer than the {known}"
                         f" this onnx-bundler reads; upgrade onnx-bundler or rebuild the bundle")


def decode(kind: type, data: Any, source: str) -> Any:
    """`data` as the record `kind`; ModelError naming the key when it is wrong."""
    try:
        return _decode(kind, data, "", source)
    except Invalid as error:
        raise ModelError(f"{source}: {error}; rebuild the bundle with bundle build") from None


def from_json(data: Any, source: str = MANIFEST_FILE) -> Manifest:
    """Check and convert a parsed bundle.json; ModelError naming the key when it is wrong."""
    check_version(data, source, SCHEMA_VERSION)
    return decode(Manifest, data, source)


def load(directory: Path) -> Manifest:
    """The manifest of a built folder."""
    path = directory / MANIFEST_FILE
    if not directory.is_dir():
        raise ModelError(f"{directory} is not a folder; give a folder made by bundle build")
    if not path.is_file():
        raise ModelError(f"{directory} has no {MANIFEST_FILE}; give a folder made by bundle build")
    return from_json(read_json(path), str(path))


def dumps(record: Any) -> str:
    """A manifest record's file text (bundle.json, edge.json): indented, keys in field order."""
    return json.dumps(record.to_json(), indent=2, ensure_ascii=False) + "\n"


def dump(directory: Path, manifest: Manifest) -> None:
    """Write the manifest's two forms: bundle.json (for tools) and bundle.files.mjs."""
    (directory / MANIFEST_FILE).write_text(dumps(manifest), encoding="utf-8")
    dump_module(directory, manifest)


def dump_module(directory: Path, manifest: Manifest) -> None:
    """Write bundle.files.mjs, the form bundle.mjs reads: the same content and the URLs of the
    model and runtime files (alone: what a browser check of a staged build needs)."""
    modules = [path for path in TEXT_ENTRY_MODULES if (directory / path).is_file()]
    (directory / FILES_MODULE).write_text(files_module(manifest.to_json(), modules),
                                          encoding="utf-8")


def made_by_us(directory: Path, name: str = MANIFEST_FILE) -> bool:
    """Whether `directory` holds a bundle (or with `name` edge.json, an edge folder) this tool
    wrote, so a build may replace it."""
    try:
        data = json.loads((directory / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("tool"), dict) and \
        data["tool"].get("name") == TOOL_NAME
