"""A built bundle folder as the native commands see it: its manifest and a variant's model file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bundler import manifest as manifest_file
from bundler.errors import ModelError
from bundler.variants.default import default_variant

EDGE_MANIFEST = "edge.json"  # bundler.edge writes it (not imported: that pulls in the build)


def bundled_model(directory: Path, variant: str | None = None) -> tuple[dict[str, Any],
                                                                         dict[str, Any], Path]:
    """(manifest, variant entry, model path) of `variant` (default: the default variant), from
    a web bundle's bundle.json or an edge folder's edge.json."""
    edge = directory / EDGE_MANIFEST
    if edge.is_file() and not (directory / manifest_file.MANIFEST_FILE).is_file():
        try:
            manifest = json.loads(edge.read_text(encoding="utf-8"))
        except ValueError as error:
            raise ModelError(f"{edge} is not valid JSON ({error}); rebuild it") from None
    else:
        manifest = manifest_file.load(directory).to_json()
    # the default on WASM: native runs on CPU kernels, as the WASM build does
    name = variant or default_variant(manifest["default_variant"], "wasm")
    entries = {entry["name"]: entry for entry in manifest["variants"]}
    if name not in entries:
        raise ModelError(f"{directory} has no variant {name!r} (it has: {', '.join(entries)})")
    path = directory / entries[name]["file"]
    if not path.is_file():
        raise ModelError(f"{path} is missing; rebuild the bundle")
    return manifest, entries[name], path


def model_or_bundle(source: Path, variant: str | None = None) -> tuple[Path, dict[str, Any] | None,
                                                                        dict[str, Any] | None]:
    """A model file as given, or the model of a bundle folder: (path, manifest, variant)."""
    if source.is_dir():
        manifest, entry, path = bundled_model(source, variant)
        return path, manifest, entry
    if variant is not None:
        raise ModelError(f"--variant needs a bundle folder; {source} is a model file")
    return source, None, None
