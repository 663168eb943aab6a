"""Write the static web app: bundle.mjs and its modules (+ the demo's app.mjs), package.json and
index.html (bundle.json is the build's last write, bundler.bundle.manifest).

A user template folder (`templates` in bundle.toml, `--templates DIR`) customises the app: each
`NAME.j2` in it is rendered to NAME (so `index.html.j2` replaces the page; it may extend the
shipped one as "bundler/index.html.j2" and override its blocks), and every other file (styles,
images, an own app.mjs) is copied as it is. Files whose names are part of the bundle's contract
cannot be replaced.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import jinja2

from bundler.bundle.layout import PACKAGE_JSON, RESERVED, TASKS_DIR, WEB_FILES
from bundler.bundle.manifest import Manifest
from bundler.errors import ConfigError
from bundler.bundle.files import package_json, sessions_of
from bundler.resources import resource
from bundler.tasks.kinds.registry import KINDS

TEMPLATE_SUFFIX = ".j2"


def human_bytes(count: int) -> str:
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


def user_files(templates: Path) -> list[Path]:
    """The files of a template folder, relative to it, sorted; hidden ones (.git, editor swap
    files) left out."""
    return sorted(
        path.relative_to(templates) for path in templates.rglob("*")
        if path.is_file() and not any(part.startswith(".")
                                      for part in path.relative_to(templates).parts)
    )


def _environment(templates: Path | None) -> jinja2.Environment:
    shipped = jinja2.FileSystemLoader(str(resource("templates")))
    loaders: list[jinja2.BaseLoader] = [shipped, jinja2.PrefixLoader({"bundler": shipped})]
    if templates is not None:
        loaders.insert(0, jinja2.FileSystemLoader(str(templates)))
    environment = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.filters["human_bytes"] = human_bytes
    environment.filters["shape"] = _shape
    # the page's task section: each kind's heading and what it is fed
    environment.globals["task_kinds"] = {name: {"heading": kind.heading, "media": kind.media}
                                         for name, kind in KINDS.items()}
    return environment


def _render(environment: jinja2.Environment, name: str, manifest: dict[str, Any],
            templates: Path | None) -> str:
    try:
        # `session`: the primary session's inputs, outputs and variants (the one the page runs)
        return environment.get_template(name).render(manifest=manifest,
                                                     session=sessions_of(manifest)[0])
    except jinja2.TemplateSyntaxError as error:
        raise ConfigError(f"template {error.filename or name}:{error.lineno}: {error.message}"
                          ) from None
    except jinja2.TemplateError as error:
        raise ConfigError(f"template {name} in {templates or 'the package'}: {error}") from None


def write_modules(directory: Path, name: str, runtime_version: str) -> None:
    """Copy the browser modules (what the browser check runs) and write package.json (of the
    bundle `name`, which imports onnxruntime-web `runtime_version`)."""
    web = resource("web")
    (directory / TASKS_DIR).mkdir(exist_ok=True)
    for module in WEB_FILES:
        shutil.copyfile(web / module, directory / module)
    (directory / PACKAGE_JSON).write_text(
        package_json(name, runtime_version), encoding="utf-8")


def render_pages(directory: Path, manifest: Manifest, templates: Path | None = None
                 ) -> list[str]:
    """Render the page(s) for the model described by `manifest` (templates see it as
    bundle.json's content) and copy the template folder's other files; returns the paths
    written, relative to `directory`."""
    environment = _environment(templates)
    pages = {"index.html.j2"}
    written = []
    for relative in user_files(templates) if templates is not None else []:
        if relative.parts[0] in RESERVED or relative.with_suffix("").as_posix() in RESERVED:
            raise ConfigError(f"template folder {templates}: {relative} would replace the"
                              f" bundle's own {relative.parts[0]}; rename it")
        if relative.suffix == TEMPLATE_SUFFIX:
            pages.add(relative.as_posix())
        else:
            (directory / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(templates / relative, directory / relative)
            written.append(relative.as_posix())
    for name in sorted(pages):
        html = _render(environment, name, manifest.to_json(), templates)
        target = directory / name.removesuffix(TEMPLATE_SUFFIX)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(html, encoding="utf-8")
        written.append(name.removesuffix(TEMPLATE_SUFFIX))
    return written
