"""The one schema for build options: bundle.toml and command-line flags.

Every key is declared once in SCHEMA with its type; `load_config` reads a TOML file and validates
it, collecting every problem and raising one ConfigError that names the file and the keys. Flags are
merged on top (flags win) by `merge`.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from bundler.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_RUNTIME_VERSION = "1.31.1"
EXECUTION_PROVIDERS = ("webgpu", "wasm")
CONFIG_FILE_NAME = "bundle.toml"

_DIM_PATTERN = re.compile(r"^(?P<key>[^=\s]+)=(?P<value>\d+)$")


@dataclasses.dataclass
class BuildOptions:
    """Everything `bundle build` can be told. Paths are absolute once validated."""

    model: Path | None = None
    output: Path = Path("dist")
    name: str | None = None
    runtime_version: str = DEFAULT_RUNTIME_VERSION
    runtime_dir: Path | None = None
    verify: bool = True
    dims: dict[str, int] = dataclasses.field(default_factory=dict)
    execution_providers: tuple[str, ...] = EXECUTION_PROVIDERS


def _path(value: Any, base: Path) -> Path:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a path string, got {value!r}")
    return (base / value).resolve()


def _string(value: Any, base: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


def _bool(value: Any, base: Path) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _dims(value: Any, base: Path) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise ValueError(f'expected a table like {{ batch = 1, "image:2" = 224 }}, got {value!r}')
    dims = {}
    for key, size in value.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"dimension {key!r} must be a non-negative integer, got {size!r}")
        dims[str(key)] = size
    return dims


def _execution_providers(value: Any, base: Path) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ValueError(f"expected a list from {list(EXECUTION_PROVIDERS)}, got {value!r}")
    unknown = [ep for ep in value if ep not in EXECUTION_PROVIDERS]
    if unknown:
        raise ValueError(
            f"unknown execution provider {unknown[0]!r};"
            f" expected one of {list(EXECUTION_PROVIDERS)}"
        )
    return tuple(dict.fromkeys(value))


SCHEMA: dict[str, tuple[str, Callable[[Any, Path], Any]]] = {
    "model": ("model", _path),
    "output": ("output", _path),
    "name": ("name", _string),
    "runtime_version": ("runtime_version", _string),
    "runtime_dir": ("runtime_dir", _path),
    "verify": ("verify", _bool),
    "dims": ("dims", _dims),
    "execution_providers": ("execution_providers", _execution_providers),
}


def validate(values: Mapping[str, Any], source: str, base: Path) -> dict[str, Any]:
    """Check `values` (from `source`, resolved against `base`) against SCHEMA; one error for all."""
    problems: list[str] = []
    checked: dict[str, Any] = {}
    for key, value in values.items():
        if key not in SCHEMA:
            known = ", ".join(sorted(SCHEMA))
            problems.append(f"unknown key {key!r} (known keys: {known})")
            continue
        field, convert = SCHEMA[key]
        try:
            checked[field] = convert(value, base)
        except ValueError as error:
            problems.append(f"key {key!r}: {error}")
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems))
    return checked


def load_config(path: Path) -> dict[str, Any]:
    """Read and validate a bundle.toml; relative paths in it are relative to the file."""
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid TOML ({error})") from None
    return validate(data, str(path), path.parent.resolve())


def find_config(explicit: Path | None, cwd: Path) -> Path | None:
    """The config to use: the one given, else ./bundle.toml when present."""
    if explicit is not None:
        return explicit
    default = cwd / CONFIG_FILE_NAME
    return default if default.is_file() else None


def merge(config: Mapping[str, Any], flags: Mapping[str, Any]) -> BuildOptions:
    """Options from the config file with the flags that were given (not None) on top."""
    values = dict(config)
    values.update({key: value for key, value in flags.items() if value is not None})
    if "dims" in config and "dims" in flags and flags["dims"] is not None:
        values["dims"] = {**config["dims"], **flags["dims"]}
    return BuildOptions(**values)


def parse_dims(texts: Iterable[str], flag: str = "--dim") -> dict[str, int]:
    """`NAME=VALUE` (a symbolic dim by name) or `INPUT:AXIS=VALUE` (one axis of one input)."""
    dims: dict[str, int] = {}
    for text in texts:
        match = _DIM_PATTERN.match(text.strip())
        if not match:
            raise ConfigError(
                f"{flag} {text!r}: expected NAME=VALUE or INPUT:AXIS=VALUE with a non-negative"
                " integer VALUE, e.g. --dim batch=1 or --dim image:2=224"
            )
        key = match["key"]
        if ":" in key and not key.rsplit(":", 1)[1].isdigit():
            raise ConfigError(f"{flag} {text!r}: the AXIS in INPUT:AXIS=VALUE must be an integer")
        dims[key] = int(match["value"])
    return dims
