"""Write the static web app: bundle.json, bundle.mjs (+ the demo's app.mjs) and index.html."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jinja2

from bundler.resources import resource

MANIFEST_FILE = "bundle.json"
WEB_FILES = ("bundle.mjs", "bundle.d.ts", "app.mjs")


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    (directory / MANIFEST_FILE).write_text(text, encoding="utf-8")


def _human_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _shape(spec: dict[str, Any]) -> str:
    if spec["shape"] is None:
        return "unknown rank"
    return "[" + ", ".join(map(str, spec["shape"])) + "]"


def render_site(directory: Path, manifest: dict[str, Any]) -> None:
    """Copy the browser modules and render index.html for the model described by `manifest`."""
    web = resource("web")
    for name in WEB_FILES:
        shutil.copyfile(web / name, directory / name)
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource("templates"))),
        autoescape=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.filters["human_bytes"] = _human_bytes
    environment.filters["shape"] = _shape
    html = environment.get_template("index.html.j2").render(manifest=manifest)
    (directory / "index.html").write_text(html, encoding="utf-8")
