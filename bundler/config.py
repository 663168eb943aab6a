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
from bundler.hostconfig import HOSTS
from bundler.hosting import DEFAULT_MAX_FILE_SIZE, parse_size

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_RUNTIME_VERSION = "1.31.1"
EXECUTION_PROVIDERS = ("webgpu", "wasm")
CONFIG_FILE_NAME = "bundle.toml"

_DIM_PATTERN = re.compile(r"^(?P<key>[^=\s]+)=(?P<value>\d+)$")


VARIANT_KINDS = ("fp32", "fp16", "int8-weights", "int8", "int8-static", "int4")
QUANTIZE_CHOICES = (*VARIANT_KINDS, "auto")
CALIBRATION_METHODS = ("minmax", "percentile", "entropy")
FORMATS = ("onnx", "ort")


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
    optimize: bool = True
    fix_dims: dict[str, int] = dataclasses.field(default_factory=dict)
    quantize: str = "fp32"
    variants: tuple[str, ...] = ()
    default_variant: str | dict[str, str] | None = None
    calibration: Path | None = None
    calibration_method: str = "minmax"
    validation: Path | None = None
    max_error: str | None = None
    format: str = "onnx"
    templates: Path | None = None
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    hosts: tuple[str, ...] = HOSTS
    coi_worker: bool = True

    @property
    def kinds(self) -> tuple[str, ...]:
        """The variants to make: the candidates of `auto`, or what ships."""
        if self.quantize == "auto":
            return self.variants or VARIANT_KINDS
        return self.variants or (self.quantize,)


def _path(value: Any, base: Path) -> Path:
    if isinstance(value, Path):
        return value.resolve()
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a path string, got {value!r}")
    return (base / value).resolve()


def _folder(value: Any, base: Path) -> Path:
    path = _path(value, base)
    if not path.is_dir():
        raise ValueError(f"{path} is not a folder")
    return path


def _string(value: Any, base: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


def _bool(value: Any, base: Path) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _one_of(choices: tuple[str, ...]) -> Callable[[Any, Path], str]:
    def check(value: Any, base: Path) -> str:
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    return check


def _names(choices: tuple[str, ...]) -> Callable[[Any, Path], tuple[str, ...]]:
    """A list, or a comma-separated string, of names from `choices` (order kept, no repeats)."""

    def check(value: Any, base: Path) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list | tuple) or not value:
            raise ValueError(f"expected a list from {', '.join(choices)}, got {value!r}")
        unknown = [item for item in value if item not in choices]
        if unknown:
            raise ValueError(f"unknown {unknown[0]!r}; expected some of {', '.join(choices)}")
        return tuple(dict.fromkeys(value))

    return check


def _dims(value: Any, base: Path) -> dict[str, int]:
    if isinstance(value, list | tuple):  # from flags: ["batch=1", "image:2=224"]
        return parse_dims(value)
    if not isinstance(value, Mapping):
        raise ValueError(f'expected a table like {{ batch = 1, "image:2" = 224 }}, got {value!r}')
    dims = {}
    for key, size in value.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"dimension {key!r} must be a non-negative integer, got {size!r}")
        dims[str(key)] = size
    return dims


def _default_variant(value: Any, base: Path) -> str | dict[str, str]:
    """A variant name, or per EP: a table {webgpu = "fp16", wasm = "int8"} or "webgpu=fp16,…"."""
    if isinstance(value, str) and "=" in value:
        pairs = [part.split("=", 1) for part in value.split(",") if part.strip()]
        value = {ep.strip(): name.strip() for ep, name in pairs}
    if isinstance(value, str) and value.strip():
        return value
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"expected a variant name or a table of EP = variant, got {value!r}")
    unknown = [ep for ep in value if ep not in EXECUTION_PROVIDERS]
    if unknown:
        raise ValueError(f"unknown execution provider {unknown[0]!r};"
                         f" expected {', '.join(EXECUTION_PROVIDERS)}")
    return {ep: str(value[ep]) for ep in EXECUTION_PROVIDERS if ep in value}


def _hosts(value: Any, base: Path) -> tuple[str, ...]:
    """One host, "all", or a list of hosts."""
    if value == "all":
        return HOSTS
    return _names(HOSTS)(value, base)


def _size(value: Any, base: Path) -> int:
    return parse_size(value)


def _budget(value: Any, base: Path) -> str:
    from bundler.quantize import parse_budget

    try:
        return str(parse_budget(_string(value, base)))
    except ConfigError as error:
        raise ValueError(error.message) from None


SCHEMA: dict[str, Callable[[Any, Path], Any]] = {
    "model": _path,
    "output": _path,
    "name": _string,
    "runtime_version": _string,
    "runtime_dir": _path,
    "verify": _bool,
    "dims": _dims,
    "execution_providers": _names(EXECUTION_PROVIDERS),
    "optimize": _bool,
    "fix_dims": _dims,
    "quantize": _one_of(QUANTIZE_CHOICES),
    "variants": _names(VARIANT_KINDS),
    "default_variant": _default_variant,
    "calibration": _path,
    "calibration_method": _one_of(CALIBRATION_METHODS),
    "validation": _path,
    "max_error": _budget,
    "format": _one_of(FORMATS),
    "templates": _folder,
    "max_file_size": _size,
    "hosts": _hosts,
    "coi_worker": _bool,
}
# How flags are spelled where they differ from the key.
FLAG_NAMES = {"execution_providers": "--ep", "dims": "--dim", "fix_dims": "--fix-dim",
              "output": "-o/--output", "hosts": "--host"}


def validate(values: Mapping[str, Any], source: str | None, base: Path) -> dict[str, Any]:
    """Check `values` against SCHEMA, collecting every problem into one ConfigError.

    `source` names the config file; None means the values are command-line flags.
    """
    problems: list[str] = []
    checked: dict[str, Any] = {}
    for key, value in values.items():
        where = f"key {key!r}" if source else FLAG_NAMES.get(key, "--" + key.replace("_", "-"))
        if key not in SCHEMA:
            problems.append(f"unknown key {key!r} (known keys: {', '.join(sorted(SCHEMA))})")
            continue
        try:
            checked[key] = SCHEMA[key](value, base)
        except ValueError as error:
            problems.append(f"{where}: {error}")
        except ConfigError as error:
            problems.append(error.message)
    if problems:
        raise ConfigError((f"{source}: " if source else "") + "; ".join(problems))
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


def load_options(config: Path | None, flags: Mapping[str, Any], cwd: Path | None = None
                 ) -> BuildOptions:
    """The options of one build: `config` (else ./bundle.toml when present) under the flags."""
    cwd = cwd or Path.cwd()
    path = find_config(config, cwd)
    return merge(load_config(path) if path else {}, flags, cwd, source=str(path or "options"))


def _check_combination(options: BuildOptions, source: str) -> None:
    if options.variants and options.quantize not in ("fp32", "auto"):
        raise ConfigError(f"{source}: give quantize or variants, not both (variants lists what"
                          " ships; with quantize = auto it lists the candidates)")


def merge(config: Mapping[str, Any], flags: Mapping[str, Any], cwd: Path | None = None,
          source: str = "options") -> BuildOptions:
    """Options from the (validated) config with the flags that were given (not None) on top;
    flags are validated here, against the same schema."""
    given = validate({key: value for key, value in flags.items() if value is not None},
                     None, (cwd or Path.cwd()).resolve())
    values = {**config, **given}
    for key in ("dims", "fix_dims"):
        if key in config and key in given:
            values[key] = {**config[key], **given[key]}
    options = BuildOptions(**values)
    _check_combination(options, source)
    return options


def parse_dims(texts: Iterable[str]) -> dict[str, int]:
    """`NAME=VALUE` (a symbolic dim by name) or `INPUT:AXIS=VALUE` (one axis of one input)."""
    dims: dict[str, int] = {}
    for text in texts:
        match = _DIM_PATTERN.match(text.strip())
        if not match:
            raise ValueError(
                f"{text!r}: expected NAME=VALUE or INPUT:AXIS=VALUE with a non-negative"
                " integer VALUE, e.g. batch=1 or image:2=224"
            )
        key = match["key"]
        if ":" in key and not key.rsplit(":", 1)[1].isdigit():
            raise ValueError(f"{text!r}: the AXIS in INPUT:AXIS=VALUE must be an integer")
        dims[key] = int(match["value"])
    return dims
