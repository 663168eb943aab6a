"""A built bundle folder as the native commands see it: its manifest and a variant's model file."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from bundler.bundle import manifest as manifest_file
from bundler.bundle.edge import EdgeManifest, load_edge
from bundler.bundle.layout import EDGE_MANIFEST, MANIFEST_FILE
from bundler.bundle.manifest import Manifest, Variant
from bundler.errors import ModelError
from bundler.variants.default import default_variant


def bundled_model(directory: Path, variant: str | None = None, session: str | None = None
                  ) -> tuple[Manifest | EdgeManifest, Variant, Path]:
    """(manifest, variant entry, model path) of `variant` (default: the default variant) of the
    session `session` (default: the primary one), from a web bundle's bundle.json or an edge
    folder's edge.json."""
    manifest: Manifest | EdgeManifest
    if (directory / EDGE_MANIFEST).is_file() and not (directory / MANIFEST_FILE).is_file():
        manifest = load_edge(directory)
    else:
        manifest = manifest_file.load(directory)
    chosen = manifest.session(session)
    # the default on WASM: native runs on CPU kernels, as the WASM build does
    name = variant or default_variant(chosen.default_variant, "wasm")
    entries: dict[str, Variant] = {entry.name: entry for entry in chosen.variants}
    if name not in entries:
        raise ModelError(f"{directory} has no variant {name!r} (it has: {', '.join(entries)})")
    path = directory / entries[name].file
    if not path.is_file() and not _split(directory, manifest, entries[name].file):
        raise ModelError(f"{path} is missing; rebuild the bundle")
    return manifest, entries[name], path


def _split(directory: Path, manifest: Manifest | EdgeManifest, relative: str) -> bool:
    """Whether the build split the file `relative` into parts (all there) for static hosts."""
    from bundler.hosting.publish import parts_of

    parts = parts_of(directory, manifest, relative) if isinstance(manifest, Manifest) else []
    return bool(parts) and all(part.is_file() for part in parts)


@contextlib.contextmanager
def native_model(directory: Path, manifest: Manifest | EdgeManifest | None, model: Path
                 ) -> Iterator[Path]:
    """A bundle's model file `model` as native onnxruntime opens it, for the time of the with:
    itself, or where the build split it (or its external data files) into parts for static
    hosts (models over --max-file-size, 25 MiB by default), put back together in a temporary
    folder. `manifest` None: a model file given as it is."""
    from bundler.hosting.publish import assembled

    if not isinstance(manifest, Manifest):
        yield model
        return
    with assembled(directory, manifest, model.relative_to(directory).as_posix()) as path:
        yield path


def model_or_bundle(source: Path, variant: str | None = None, session: str | None = None
                    ) -> tuple[Path, Manifest | EdgeManifest | None, Variant | None]:
    """A model file as given, or the model of a bundle folder: (path, manifest, variant)."""
    if source.is_dir():
        manifest, entry, path = bundled_model(source, variant, session)
        return path, manifest, entry
    for flag, value in (("--variant", variant), ("--session", session)):
        if value is not None:
            raise ModelError(f"{flag} needs a bundle folder; {source} is a model file")
    return source, None, None
