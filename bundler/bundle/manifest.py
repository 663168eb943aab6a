"""bundle.json: the one reader and writer of the bundle's manifest.

The manifest is a tree of records (bundler.bundle.records); `load` reads and checks a folder's
bundle.json (naming the key that is wrong), `dump` writes it with bundle.files.mjs.

schema_version 2 (what a build writes): the bundle is a pipeline of `sessions`, each one ONNX model
with its inputs, outputs, variants and per-EP default; a single-model bundle is a pipeline of one,
named after the model. Version 1 had that one session's inputs, outputs, variants and
default_variant at the top level: `from_json` reads it as one session (`upgraded`), so every
reader sees sessions. A version this code does not know is refused, naming it, and so does
bundle.mjs. Code written for one model reads `manifest.session()`, the primary session
(docs/reference/bundle-json.md).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from bundler.bundle.codec import JSON, Invalid, versioned_json
from bundler.bundle.codec import from_json as _decode
from bundler.bundle.files import SESSION_KEYS, files_module, sessions_of
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
    Packed,
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

SCHEMA_VERSION = 2
TOOL_NAME = "onnx-bundler"
__all__ = ["Accuracy", "Bound", "EPResult", "Encoded", "FileEntry", "FilePiece", "Fingerprint",
           "Hosting", "Manifest", "NativeReference", "Optimization", "OptimizationStep", "Packed",
           "Runtime", "RuntimeBuild", "Selection", "SelectionCandidate", "Session", "Source",
           "SpeedRecord", "Task", "Tool", "Variant", "Verification", "Workload"]


@dataclasses.dataclass
class Session:
    """One ONNX model of the bundle's pipeline (an encoder, a decoder, or the only model): its
    inputs and outputs, the variants it ships (each one `file`, an entry of the bundle's `files`)
    and the variant loaded by default (a name, or a map from EP to name)."""

    name: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    variants: list[Variant]
    default_variant: str | dict[str, str]

    def variant(self, name: str) -> Variant:
        return next(variant for variant in self.variants if variant.name == name)

    def default_for(self, ep: str) -> Variant:
        """The variant load() picks on `ep` by default."""
        return self.variant(default_variant(self.default_variant, ep))


class Pipeline:
    """What bundle.json and edge.json share: the bundle's `name` and its `sessions`, found by
    name."""

    name: str
    sessions: tuple[Session, ...]

    def session(self, name: str | None = None) -> Session:
        """The session `name`; without one, the primary session (the only one, or the first):
        the one model that code written for single-model bundles reads. ModelError naming the
        sessions there are when none is named `name`."""
        if name is None:
            return self.sessions[0]
        found = next((session for session in self.sessions if session.name == name), None)
        if found is None:
            raise ModelError(f"{self.name} has no session {name!r} (it has: "
                             f"{', '.join(session.name for session in self.sessions)})")
        return found


@dataclasses.dataclass
class Manifest(Pipeline):
    name: str
    tool: Tool
    runtime: Runtime
    sessions: tuple[Session, ...]
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

    def to_json(self) -> JSON:
        return versioned_json(self)

    def wire_bytes(self, variant: Variant, ep: str | None = None) -> int | None:
        """The bytes load() fetches for `variant` (its graph and data files) and, given `ep`,
        that EP's graph (Variant.graphs) and runtime wasm (fetched_bytes of each). None for a
        bundle without a files table."""
        if self.files is None:
            return None
        paths = variant.files_of(ep)
        if ep is not None and ep in self.runtime.builds:
            paths.append(self.runtime.builds[ep].wasm)
        return sum(self.fetched_bytes(path) for path in paths)

    def fetched_bytes(self, path: str) -> int:
        """The bytes load() fetches for the file `path`: each part as fetched, its packed or
        gzip sibling where the build wrote one (bundle.fetch.mjs); 0 for a file not in the files
        table."""
        entry = next((entry for entry in self.files or [] if entry.path == path), None)
        if entry is None:
            return 0
        total = 0
        for piece in entry.parts or [entry]:
            sibling = piece.packed or (piece.encodings or {}).get("gzip")
            total += sibling.bytes if sibling else piece.bytes
        return total


def read_json(path: Path) -> Any:
    """A manifest file parsed; ModelError when it is not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ModelError(f"{path} is not valid JSON ({error}); rebuild the bundle") from None


def check_version(data: Any, source: str, known: int) -> int:
    """The schema_version of `data` (none: 1); ModelError naming it unless it is an object of a
    version this code reads (1 to `known`)."""
    if not isinstance(data, dict):
        raise ModelError(f"{source} is not a JSON object; rebuild the bundle")
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelError(f"{source} has schema_version {version!r}, not a version of this layout"
                         f" (1 to {known}); rebuild the bundle")
    if version > known:
        raise ModelError(f"{source} has schema_version {version!r}, newer than the {known}"
                         f" this onnx-bundler reads; upgrade onnx-bundler or rebuild the bundle")
    return version


def upgraded(data: dict[str, Any], version: int) -> dict[str, Any]:
    """A parsed manifest in the layout of schema_version 2: a version 1 one's top-level inputs,
    outputs, variants and default_variant become its one session, named after the model (a key
    it lacks stays missing, so decoding names it). Its schema_version goes: the record's is the
    layout it now has, which is what a rewrite of the file writes."""
    if version >= 2:
        return data
    rest = {key: value for key, value in data.items()
            if key not in (*SESSION_KEYS, "schema_version")}
    return {**rest, "sessions": sessions_of(data)}


def check_sessions(pipeline: Pipeline, source: str) -> None:
    """ModelError unless the pipeline has sessions, each named once."""
    names = [session.name for session in pipeline.sessions]
    if not names:
        raise ModelError(f"{source}: sessions is empty; rebuild the bundle with bundle build")
    if len(set(names)) < len(names):
        raise ModelError(f"{source}: sessions names a session twice ({', '.join(names)});"
                         " rebuild the bundle with bundle build")


def decode(kind: type, data: Any, source: str) -> Any:
    """`data` as the record `kind`; ModelError naming the key when it is wrong."""
    try:
        return _decode(kind, data, "", source)
    except Invalid as error:
        raise ModelError(f"{source}: {error}; rebuild the bundle with bundle build") from None


def from_json(data: Any, source: str = MANIFEST_FILE) -> Manifest:
    """Check and convert a parsed bundle.json; ModelError naming the key when it is wrong."""
    version = check_version(data, source, SCHEMA_VERSION)
    manifest: Manifest = decode(Manifest, upgraded(data, version), source)
    check_sessions(manifest, source)
    return manifest


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
