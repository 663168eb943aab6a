"""Every build option, declared once: its type, default, help, flag and bundle.toml key.

`BuildOptions` is the declaration: each field carries an `Option` (how to check a value, its help
and flag). From it come the click options (`bundler.cli`), the bundle.toml schema and the
validation of a `BuildOptions` made in Python, all with the same one-line errors naming the key
(and the file). A field left None was not given; `__post_init__` puts in the declared default.

Which variants ship: `quantize` names one kind (default fp32) and `variants` lists more; both
given, every one of them ships and `quantize`'s kind is the default unless `default_variant`
says otherwise. With `quantize = "auto"`, `variants` are the candidates and auto chooses the
default, so `default_variant` cannot be given with it. (The rule is
`bundler.variants.plan.variants_to_make`.)
"""

from __future__ import annotations

import copy
import dataclasses
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from bundler.errors import ConfigError
from bundler.hosting.registry import HOST_NAMES
from bundler.hosting.sizes import DEFAULT_MAX_FILE_SIZE, parse_size
from bundler.tasks.kinds.registry import GENERIC, TASK_KINDS
from bundler.tasks.spec import TaskSpec, parse_task
from bundler.variants.budget import parse_budget
from bundler.variants.int4_options import Int4Options, parse_int4
from bundler.variants.kinds import (
    CALIBRATION_METHODS,
    OBJECTIVES,
    QUANTIZE_CHOICES,
    VARIANT_KINDS,
    CalibrationMethod,
    Objective,
    QuantizeChoice,
    VariantKind,
)
from bundler.variants.per_session import parse_session_quantize, session_plan
from bundler.variants.plan import VariantPlan, variants_to_make

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_RUNTIME_VERSION = "1.31.1"
CONFIG_FILE_NAME = "bundle.toml"

ExecutionProvider = Literal["webgpu", "wasm"]
ModelFormat = Literal["onnx", "ort"]
Target = Literal["web", "edge"]

EXECUTION_PROVIDERS: tuple[ExecutionProvider, ...] = get_args(ExecutionProvider)
FORMATS: tuple[ModelFormat, ...] = get_args(ModelFormat)
TARGETS: tuple[Target, ...] = get_args(Target)

_DIM_PATTERN = re.compile(r"^(?P<key>[^=\s]+)=(?P<value>\d+)$")

Parse = Callable[[Any, Path], Any]


def parse_dims(texts: Iterable[str]) -> dict[str, int]:
    """`NAME=VALUE` (a symbolic dim by name) or `INPUT:AXIS=VALUE` (one axis of one input)."""
    dims: dict[str, int] = {}
    for text in texts:
        match = _DIM_PATTERN.match(str(text).strip())
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


# Checks: each takes the value and the folder relative paths are relative to, returns the checked
# value, raises ValueError saying what was expected. They accept their own output, so a checked
# value can be checked again.

def _path(value: Any, base: Path) -> Path:
    if isinstance(value, Path):
        return (base / value).resolve()
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


def _one_of(choices: tuple[str, ...]) -> Parse:
    def check(value: Any, base: Path) -> str:
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    return check


def _names(choices: tuple[str, ...]) -> Parse:
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


def _inputs(value: Any, base: Path) -> dict[str, Path | int | float | bool]:
    """Fixed input values: from flags ["sr=16000", "ids=ids.npy"], or a table
    { sr = 16000, ids = "ids.npy" } (a string there is always a path)."""
    from bundler.verify.user_inputs import parse_input_value

    if isinstance(value, list | tuple):
        pairs = [str(text).split("=", 1) for text in value]
        if any(len(pair) != 2 or not pair[0].strip() for pair in pairs):
            raise ValueError("expected NAME=VALUE (a number) or NAME=FILE.npy, e.g. sr=16000")
        return {name.strip(): parse_input_value(text, base) for name, text in pairs}
    if not isinstance(value, Mapping):
        raise ValueError(f'expected a table like {{ sr = 16000, ids = "ids.npy" }}, got {value!r}')
    inputs: dict[str, Path | int | float | bool] = {}
    for name, item in value.items():
        if isinstance(item, str | Path):
            item = _path(item, base)
            if not item.is_file():
                raise ValueError(f"input {name!r}: {item} does not exist")
        elif not isinstance(item, int | float | bool):
            raise ValueError(f"input {name!r}: expected a number or an .npy path, got {item!r}")
        inputs[str(name)] = item
    return inputs


def _hosts(value: Any, base: Path) -> tuple[str, ...]:
    """One host, "all", or a list of hosts."""
    return HOST_NAMES if value == "all" else _names(HOST_NAMES)(value, base)


def _size(value: Any, base: Path) -> int:
    return parse_size(value)


def _budget(value: Any, base: Path) -> str:
    try:
        return str(parse_budget(_string(value, base)))
    except ConfigError as error:
        raise ValueError(error.message) from None


@dataclasses.dataclass(frozen=True)
class Option:
    """How one option is checked and offered on the command line."""

    parse: Parse
    help: str
    default: Any = None
    flag: str | None = None  # as typed on the command line; default --key-with-dashes
    repeatable: bool = False  # a flag given once per value: --dim a=1 --dim b=2
    switch: bool = False  # --key/--no-key
    on_command_line: bool = True  # False: given as an argument, or in bundle.toml only
    choices: tuple[str, ...] = ()  # the values the flag takes, when it takes one of a few

    def flags(self, key: str) -> list[str]:
        name = self.flag or "--" + key.replace("_", "-")
        if self.switch:
            return [f"{name}/--no-{name.removeprefix('--')}"]
        return name.split("/")


def option(parse: Parse, help: str, **settings: Any) -> Any:
    return dataclasses.field(default=None, metadata={"option": Option(parse, help, **settings)})


@dataclasses.dataclass
class BuildOptions:
    """Everything `bundle build` can be told. Paths are absolute once checked."""

    model: Path | None = option(_path, "The ONNX model (default: the shipped example).",
                                on_command_line=False)
    output: Path = option(_path, "Output folder (default: dist).", default=Path("dist"),
                          flag="-o/--output")
    name: str | None = option(_string, "Model name shown on the page and in bundle.json.")
    runtime_version: str = option(_string, "onnxruntime-web version from npm (default: the"
                                  " tested pin).", default=DEFAULT_RUNTIME_VERSION)
    runtime_dir: Path | None = option(_path, "Use this onnxruntime-web dist/ or npm pack tarball"
                                      " (offline).")
    verify: bool = option(_bool, "Check the bundle in headless Chromium against native"
                          " onnxruntime (default).", default=True, switch=True)
    dims: dict[str, int] = option(_dims, "Size of a symbolic dim: NAME=VALUE, or INPUT:AXIS=VALUE"
                                  " for an unnamed one (repeat); give the size the model is used"
                                  " at, which bench and auto time.", default={}, flag="--dim",
                                  repeatable=True)
    execution_providers: tuple[ExecutionProvider, ...] = option(
        _names(EXECUTION_PROVIDERS), "Execution providers to ship, in order of preference"
        " (repeat).", default=EXECUTION_PROVIDERS, flag="--ep", repeatable=True)
    optimize: bool = option(_bool, "Graph optimisation (onnxslim + onnxruntime basic passes;"
                            " default on).", default=True, switch=True)
    fix_dims: dict[str, int] = option(_dims, "Fix a symbolic dim in the shipped model:"
                                      " NAME=VALUE (repeat).", default={}, flag="--fix-dim",
                                      repeatable=True)
    quantize: QuantizeChoice | None = option(_one_of(QUANTIZE_CHOICES), "fp32 (default), fp16,"
                                       " int8-weights, int8, int8-static, int4 or auto.")
    variants: tuple[VariantKind, ...] = option(_names(VARIANT_KINDS), "More variants to ship: a"
                                               " comma list, beside --quantize K (with"
                                               " --quantize auto: the candidates).", default=())
    default_variant: str | dict[str, str] | None = option(
        _default_variant, "Variant load() picks (default: --quantize K, else the first of"
        " --variants): NAME, or per EP: webgpu=fp16,wasm=int8. Not with auto.")
    session_quantize: dict[str, str] = option(
        parse_session_quantize, "One session's own --quantize choice: SESSION=KIND (repeat), e.g."
        " decoder=int8; the others follow --quantize (a speech model's encoder keeps fp32 unless"
        " named).", default={}, repeatable=True)
    calibration: Path | None = option(_path, ".npz with one array per input (samples on axis 0)"
                                      " for int8-static and accuracy.")
    calibration_method: CalibrationMethod = option(_one_of(CALIBRATION_METHODS), "minmax"
                                                   " (default), percentile, entropy.",
                                                   default="minmax")
    validation: Path | None = option(_path, ".npz of real inputs (a text bundle: .txt or .jsonl"
                                     " of texts, one a line; a speech-recognition bundle: a"
                                     " .wav or a folder of them) to measure accuracy on and judge"
                                     " auto's candidates by (default: --sample beside"
                                     " --calibration, else for auto a held-out part of the"
                                     " calibration data; else that data).")
    int4: Int4Options = option(parse_int4, "How int4 quantizes, as KEY=VALUE (repeat):"
                               " block_size (16-256), symmetric, accuracy_level (0-4; 4: int8"
                               " compute), lm_head, embeddings (quantize the LM head / the"
                               " token embedding), format (nbits, qdq, int8: 4-bit on the"
                               " wire, int8 kernels on WASM, or per-ep: int8 on WASM and qdq"
                               " on WebGPU over one set of weights).",
                               default=Int4Options(), repeatable=True)
    max_error: str | None = option(_budget, "Accuracy budget for auto, e.g."
                                   " cosine>=0.999,top1>=0.99 (a --task bundle's default judges"
                                   " its answers: labels, boxes or frames>=0.99; a"
                                   " text-generation bundle's tokens>=0.9,perplexity<=1.05).")
    objective: Objective = option(_one_of(OBJECTIVES), "What auto ships: balanced (default: the"
                                  " fastest in the browser within --max-error, unless another is"
                                  " 30% smaller and at most 10% slower), speed or size.",
                                  default="balanced")
    format: ModelFormat = option(_one_of(FORMATS), "onnx (default) or ort (ORT format).",
                                 default="onnx")
    templates: Path | None = option(_folder, "Folder of your own templates and files for the app"
                                    " (NAME.j2 is rendered to NAME, other files are copied).")
    sample: Path | None = option(_path, ".npz of real inputs (one array per input, samples on"
                                 " axis 0) for the browser check and the accuracy measurement.")
    inputs: dict[str, Path | int | float | bool] = option(
        _inputs, "Set an input for the checks: NAME=VALUE (a number fills it) or NAME=FILE.npy"
        " (repeat).", default={}, flag="--input", repeatable=True)
    strict: bool = option(_bool, "Exit non-zero when an execution provider fails the browser"
                          " check (for CI; default: exit 0 with a warning).", default=False,
                          switch=True)
    max_file_size: int = option(_size, "Split model and .wasm files bigger than this into parts"
                                " (default 25MiB, Cloudflare Pages' limit).",
                                default=DEFAULT_MAX_FILE_SIZE)
    # `bundle serve --host` is the address to listen on, so only `bundle build` offers the flag.
    hosts: tuple[str, ...] = option(_hosts, "Write the config files of this static host only:"
                                    f" {', '.join(HOST_NAMES)} or all (default).",
                                    default=HOST_NAMES, flag="--host", on_command_line=False,
                                    choices=(*HOST_NAMES, "all"))
    coi_worker: bool = option(_bool, "Ship coi-serviceworker.js, which gives threads where the"
                              " host cannot set COOP/COEP (default on).", default=True,
                              switch=True)
    # On `bundle build` only (bundle serve serves the web app), hence given its flag there.
    target: Target = option(_one_of(TARGETS), "web (default: the browser app) or edge (.ort files"
                            " for native onnxruntime and a reduced-build config, in edge/).",
                            default="web", on_command_line=False)

    task: TaskSpec = option(parse_task, f"The app's task: {GENERIC} (default),"
                            f" {', '.join(TASK_KINDS[1:-1])} or {TASK_KINDS[-1]};"
                            " then its settings as KEY=VALUE"
                            " (repeat: --task object-detection --task labels=labels.txt).",
                            default=TaskSpec(), repeatable=True)

    def __post_init__(self) -> None:
        # dataclasses.replace() hands the defaults back in: they need no checking. A setting
        # equal to its default but given (int4's format=nbits) is kept: what a task defaults
        # to may differ (a text-generation bundle's int4 is per-ep, int8 or qdq unless given).
        given = {key: value for key, declared in OPTIONS.items()
                 if (value := getattr(self, key)) is not None
                 and (value != declared.default or getattr(value, "given", ()))}
        checked = validate(given, Path.cwd())
        for key, declared in OPTIONS.items():
            setattr(self, key, checked[key] if key in checked else copy.copy(declared.default))
        variants_to_make(self.quantize, self.variants, self.default_variant)  # checks them

    @property
    def plan(self) -> VariantPlan:
        """The variants to make (what ships, or the candidates of auto) and the default."""
        return variants_to_make(self.quantize, self.variants, self.default_variant)

    @property
    def kinds(self) -> tuple[VariantKind, ...]:
        return self.plan.kinds

    def plan_of(self, session: str, task_kind: str | None) -> VariantPlan:
        """The plan of one session of the bundle (bundler.variants.per_session)."""
        return session_plan(session, self.quantize, self.variants, self.default_variant,
                            self.session_quantize, task_kind)


OPTIONS: dict[str, Option] = {
    field.name: field.metadata["option"] for field in dataclasses.fields(BuildOptions)
}


def validate(values: Mapping[str, Any], base: Path, source: str | None = None,
             spelling: Callable[[str], str] = lambda key: key) -> dict[str, Any]:
    """Check `values` against OPTIONS, collecting every problem into one ConfigError.

    `source` names the config file the values come from; `spelling` names a key in the messages
    (the flag, for command-line values)."""
    problems: list[str] = []
    checked: dict[str, Any] = {}
    for key, value in values.items():
        if key not in OPTIONS:
            problems.append(f"unknown key {key!r} (known keys: {', '.join(sorted(OPTIONS))})")
            continue
        where = f"key {key!r}" if source else spelling(key)
        try:
            checked[key] = OPTIONS[key].parse(value, base)
        except (ValueError, OSError) as error:  # OSError: a path the OS refuses (too long)
            problems.append(f"{where}: {error}")
        except ConfigError as error:
            problems.append(error.message)
    if problems:
        raise ConfigError((f"{source}: " if source else "") + "; ".join(problems))
    return checked


def flag_of(key: str) -> str:
    return OPTIONS[key].flags(key)[0].split("/")[0]


def load_config(path: Path) -> dict[str, Any]:
    """Read and check a bundle.toml; relative paths in it are relative to the file."""
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid TOML ({error})") from None
    return validate(data, path.parent.resolve(), source=str(path))


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
    return merge(load_config(path) if path else {}, flags, cwd, source=str(path) if path else None)


def merge(config: Mapping[str, Any], flags: Mapping[str, Any], cwd: Path | None = None,
          source: str | None = None) -> BuildOptions:
    """Options from the (checked) config with the flags that were given (not None) on top;
    flags are checked here, against the same declarations."""
    given = validate({key: value for key, value in flags.items() if value is not None},
                     (cwd or Path.cwd()).resolve(), spelling=flag_of)
    values = {**config, **given}
    for key in ("dims", "fix_dims", "inputs", "session_quantize"):
        if key in config and key in given:
            values[key] = {**config[key], **given[key]}
    for key in ("task", "int4"):  # setting by setting
        if key in config and key in given:
            values[key] = config[key].merged(given[key])
    try:
        return BuildOptions(**values)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error.message}" if source else error.message) from None
