"""edge.json: the manifest of a `--target edge` folder (bundler.edge.build builds it), read and
written only here. It shares bundle.json's records (tool, sessions, variants, source,
optimisation); each variant adds the check of its .ort file against the model it was converted
from. Like bundle.json, schema_version 2 lists `sessions` (one, named after the model, in what
bundle build --target edge writes) and a version 1 edge.json is read as one session.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from bundler.bundle.codec import JSON, versioned_json
from bundler.bundle.layout import EDGE_MANIFEST
from bundler.bundle.manifest import (
    Optimization,
    Pipeline,
    Session,
    Source,
    Tool,
    Variant,
    check_sessions,
    check_version,
    decode,
    dumps,
    read_json,
    upgraded,
)
from bundler.errors import ModelError

EDGE_SCHEMA_VERSION = 2


@dataclasses.dataclass
class OrtCheck:
    """The shipped .ort run natively against the original model (fp32) or its own .onnx."""

    against: str
    max_abs_error: float
    tolerance: float
    samples: int


@dataclasses.dataclass
class EdgeVariant(Variant):
    ort_check: OrtCheck | None = None

    @classmethod
    def checked(cls, variant: Variant, ort_check: OrtCheck) -> EdgeVariant:
        """`variant`'s entry (pointing at its .ort file) with the check of that file."""
        fields = {field.name: getattr(variant, field.name) for field in dataclasses.fields(Variant)}
        return cls(**fields, ort_check=ort_check)


@dataclasses.dataclass
class EdgeSession(Session):
    """A session of an edge folder: its variants are .ort files, one default for every EP."""

    variants: list[EdgeVariant]  # type: ignore[assignment]
    default_variant: str


@dataclasses.dataclass
class EdgeRuntime:
    package: str  # "onnxruntime"
    converted_with: str  # its version
    format: Literal["ort"]
    optimization_level: Literal["extended"]
    load_with: str


@dataclasses.dataclass
class RequiredOperators:
    file: str  # the reduced-build config (bundler.bundle.layout.EDGE_OPERATORS_CONFIG)
    operators: dict[str, dict[str, list[str]]]  # domain -> opset -> operator names


@dataclasses.dataclass
class EdgeManifest(Pipeline):
    name: str
    tool: Tool
    target: Literal["edge"]
    runtime: EdgeRuntime
    sessions: tuple[EdgeSession, ...]  # type: ignore[assignment]
    required_operators: RequiredOperators
    source: Source
    optimization: Optimization
    notes: list[str]
    schema_version: int = EDGE_SCHEMA_VERSION  # absent in folders built before it was written

    def to_json(self) -> JSON:
        return versioned_json(self)


def load_edge(directory: Path) -> EdgeManifest:
    """The edge.json of an edge folder."""
    path = directory / EDGE_MANIFEST
    if not path.is_file():
        raise ModelError(f"{directory} has no {EDGE_MANIFEST}; give a folder made by bundle build"
                         " --target edge")
    data = read_json(path)
    version = check_version(data, str(path), EDGE_SCHEMA_VERSION)
    manifest: EdgeManifest = decode(EdgeManifest, upgraded(data, version), str(path))
    check_sessions(manifest, str(path))
    return manifest


def dump_edge(directory: Path, manifest: EdgeManifest) -> None:
    (directory / EDGE_MANIFEST).write_text(dumps(manifest), encoding="utf-8")
