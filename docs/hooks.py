"""MkDocs hook: the reference tables that are declared in code are rendered from the code at build
time, so an option, task setting or error code added later appears without editing the docs.

A page asks for a table with a marker on a line of its own: `<!-- generated: NAME -->`, NAME one
of GENERATORS. What the code cannot say (what a task setting means) is written on the page; a
setting the page's own text never names is a warning, which `mkdocs build --strict` (the test
suite's) turns into a failure.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import types
import typing
from collections.abc import Callable, Iterable
from fractions import Fraction
from pathlib import Path
from typing import Any

import click

from bundler.bundle.options import OPTIONS
from bundler.cli import main as cli_main
from bundler.tasks.kinds.registry import KINDS
from bundler.tasks.spec import TaskSpec

log = logging.getLogger("mkdocs.plugins.onnx_bundler")

ROOT = Path(__file__).resolve().parent.parent
BUNDLE_CORE = ROOT / "web" / "bundle.core.mjs"
MARKER = re.compile(r"^<!-- generated: (?P<name>[a-z-]+) -->$", re.MULTILINE)
_ERROR_CODE_LINE = re.compile(r"^\s*'(?P<code>[a-z0-9-]+)',\s*(?://\s*(?P<meaning>.*))?$")


def error_codes(source: str | None = None) -> dict[str, str]:
    """BundleError's codes as bundle.core.mjs declares them (`ERROR_CODES`), each with the
    comment beside it ('' when it has none)."""
    text = BUNDLE_CORE.read_text(encoding="utf-8") if source is None else source
    block = re.search(r"export const ERROR_CODES = \[(?P<body>.*?)\];", text, re.DOTALL)
    if block is None:
        raise ValueError(f"{BUNDLE_CORE}: no `export const ERROR_CODES = [...]`")
    codes = {}
    for line in block["body"].splitlines():
        if match := _ERROR_CODE_LINE.match(line):
            codes[match["code"]] = (match["meaning"] or "").strip()
    return codes


def task_settings() -> list[dataclasses.Field]:
    """Every task setting: the fields of TaskSpec (`given` is bookkeeping, not a setting)."""
    return [field for field in dataclasses.fields(TaskSpec) if field.name != "given"]


def undescribed(names: Iterable[str], text: str) -> list[str]:
    """The names that `text` never writes as inline code (`name`)."""
    return [name for name in names if f"`{name}`" not in text]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(value: Any) -> str:
    if value is None:
        return "from the model"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        fraction = Fraction(value).limit_denominator(1000)
        shown = f"{fraction.numerator}/{fraction.denominator}" if (
            float(fraction) == value and fraction.denominator > 1 and len(repr(value)) > 6
        ) else f"{value:g}"
        return f"`{shown}`"
    if isinstance(value, int) and value >= 1 << 20 and value % (1 << 20) == 0:
        return f"`{value >> 20}MiB`"
    if isinstance(value, TaskSpec):
        return f"`{value.kind}`"
    if isinstance(value, dict):
        return ", ".join(f"`{key}={item}`" for key, item in value.items()) or "none"
    if isinstance(value, tuple):
        return ", ".join(_value(item) for item in value) or "none"
    return f"`{value}`"


def _accepted(hint: Any) -> str:
    """A task setting's type in words; the choices of a Literal."""
    arguments = [argument for argument in typing.get_args(hint) if argument is not type(None)]
    if typing.get_origin(hint) is typing.Literal:
        return ", ".join(f"`{choice}`" for choice in arguments)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_accepted(argument) for argument in arguments)
    words = {bool: "`true` or `false`", int: "an integer", float: "a number", str: "a name"}
    if hint in words:
        return words[hint]
    if typing.get_origin(hint) is tuple:
        return "see the description"
    return str(hint)


def _commands_with(key: str) -> list[str]:
    """`bundle COMMAND FLAGS` for each command whose parameter is made from the declaration of
    `key` (a same-named flag with other help, as `bundle export -o`, is another option)."""
    found = []
    for name, command in sorted(cli_main.commands.items()):
        for param in command.params:
            if isinstance(param, click.Argument) and param.name == key:
                found.append(f"`bundle {name}`: argument `{param.human_readable_name}`")
            elif isinstance(param, click.Option) and param.help == OPTIONS[key].help:
                found.append(f"`bundle {name}`: `{' / '.join(param.opts + param.secondary_opts)}`")
    return found


def bundle_toml_table() -> str:
    rows = ["| key | on the command line | default | meaning |", "|---|---|---|---|"]
    for key, declared in OPTIONS.items():
        where = "<br>".join(_commands_with(key)) or "bundle.toml only"
        default = "not set" if declared.default is None else _value(declared.default)
        rows.append(f"| `{key}` | {_cell(where)} | {_cell(default)} | {_cell(declared.help)} |")
    return "\n".join(rows)


def task_settings_table() -> str:
    hints = typing.get_type_hints(TaskSpec)
    rows = ["| setting | default | accepted values | read by |", "|---|---|---|---|"]
    for field in task_settings():
        kinds = [name for name, kind in KINDS.items()
                 if field.name == "kind" or field.name in kind.settings]
        rows.append(f"| `{field.name}` | {_cell(_value(field.default))}"
                    f" | {_cell(_accepted(hints[field.name]))}"
                    f" | {', '.join(f'`{name}`' for name in kinds)} |")
    return "\n".join(rows)


def error_codes_table() -> str:
    rows = ["| code | meaning |", "|---|---|"]
    for code, meaning in error_codes().items():
        if not meaning:
            log.warning(f"BundleError code {code!r} has no comment in {BUNDLE_CORE.name}'s"
                        " ERROR_CODES: say there what it means")
        rows.append(f"| `{code}` | {_cell(meaning)} |")
    return "\n".join(rows)


GENERATORS: dict[str, Callable[[], str]] = {
    "bundle-toml": bundle_toml_table,
    "task-settings": task_settings_table,
    "error-codes": error_codes_table,
}


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    def render(match: re.Match) -> str:
        name = match["name"]
        if name not in GENERATORS:
            log.warning(f"{page.file.src_path}: unknown generated table {name!r}"
                        f" (known: {', '.join(GENERATORS)})")
            return match[0]
        return GENERATORS[name]()

    if "<!-- generated: task-settings -->" in markdown:
        missing = undescribed((field.name for field in task_settings()),
                              MARKER.sub("", markdown))
        for name in missing:
            log.warning(f"task setting {name!r} (bundler/tasks/spec.py) is not described in"
                        f" {page.file.src_path}: say what it does and for which tasks")
    return MARKER.sub(render, markdown)
