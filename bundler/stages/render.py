"""The render stage: the model's TypeScript types and the pages (bundler.site.pages), written
once per build from the manifest as it stands after the browser check."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bundler.bundle.layout import DECLARATION_FILES
from bundler.bundle.manifest import Manifest
from bundler.bundle.typings import declarations
from bundler.site.pages import render_pages


@dataclasses.dataclass(frozen=True)
class Rendered:
    files: tuple[str, ...]  # written, relative to the bundle folder


def render(staging: Path, manifest: Manifest, templates: Path | None) -> Rendered:
    types = declarations(manifest)
    for name in DECLARATION_FILES:
        (staging / name).write_text(types, encoding="utf-8")
    return Rendered((*DECLARATION_FILES, *render_pages(staging, manifest, templates)))
