"""A bundle of two sessions, made from a built one: what the tests of the multi-session format
load (in Python, in bundle.mjs) until a build makes such pipelines itself."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from bundler.bundle import manifest as manifest_file
from bundler.bundle.modelio import TensorSpec


def add_session(directory: Path, name: str, model: Path, inputs: list[TensorSpec],
                outputs: list[TensorSpec]) -> manifest_file.Manifest:
    """Add `model` to the built bundle in `directory` as a second session `name` (one fp32
    variant, listed in `files` as built files are) and rewrite its manifest."""
    loaded = manifest_file.load(directory)
    primary = loaded.session()
    file = f"models/{name}.onnx"
    shutil.copyfile(model, directory / file)
    data = (directory / file).read_bytes()
    entry = manifest_file.FileEntry(file, len(data), _sha256(data))
    variant = dataclasses.replace(primary.variants[0], name="fp32", kind="fp32", file=file,
                                  bytes=entry.bytes, sha256=entry.sha256, reference=None)
    second = manifest_file.Session(name, inputs, outputs, [variant], "fp32")
    files = sorted([*(loaded.files or []), entry], key=lambda e: e.path)
    rewritten = dataclasses.replace(loaded, sessions=(primary, second), files=files)
    manifest_file.dump(directory, rewritten)
    return rewritten


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()
