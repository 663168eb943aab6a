"""The task a bundle is built for, and its settings: `--task KIND`, `--task KEY=VALUE` (repeat),
or a `[task]` table in bundle.toml. Checked here once (one-line errors naming the key); resolved
against the model by `bundler.tasks.resolve` into bundle.json's `task` record.

This module is the spec both pipelines follow (`bundler/tasks/*.py` and `web/tasks/*.mjs`):
  - image: the source's RGB pixels are fitted to `size` (stretch, letterbox or center-crop) with
    `filter` (`bilinear`: half-pixel centres, no antialias; `nearest`; `antialias`; `cv2-linear`
    and `pil-bilinear`: OpenCV's and Pillow's own fixed-point resizes, see
    bundler.tasks.resample), as uint8 [1, H, W, 3]; a letterbox resizes then pads
    (`letterbox_order = resize-then-pad`, Ultralytics' LetterBox) or pads the source to the
    model's aspect ratio then resizes (`pad-then-resize`, cv2.copyMakeBorder then
    cv2.dnn.blobFromImage); the graph (see bundler.tasks.graph) does the rest (cast, channel
    order, scale, mean/std, layout).
  - classification: softmax over the scores (unless `softmax = false`), top-k with labels.
  - detection: boxes decoded from the `output_layout`, NMS (`nms = per-class`, Ultralytics'
    default, or `class-agnostic`, cv2.dnn.NMSBoxes), mapped back to the source's pixels.
  - audio-stream: samples resampled (linear) to `sample_rate`, cut into `chunk_size` chunks, each
    given with the last `context_size` samples before it; the state outputs are fed back as the
    state inputs of the next chunk.
  - text (bundler.text): the texts tokenized (truncated to `max_length`, padded to the longest);
    feature-extraction pools the token vectors (`pooling`: the attention-masked mean, the first
    kept token's, the masked maximum per dimension, the last kept token's, none: every token's,
    or model: the output is one vector per text already, pooled in the graph as optimum's
    sentence-transformers export does) and scales each vector to length 1 (`normalize`);
    text-classification takes softmax (sigmoid for a multi-label model) over the logits, top-k
    with config.json's id2label; token-classification takes softmax per token and groups the
    tokens into entities by their B-/I- tags (bundler.text.entities).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from bundler.tasks.kinds.registry import GENERIC, TASK_KINDS

TaskKindName = Literal[TASK_KINDS]  # type: ignore[valid-type]  # the registry's names
ResizeMode = Literal["stretch", "letterbox", "center-crop"]
ResizeFilter = Literal["bilinear", "nearest", "antialias", "cv2-linear", "pil-bilinear"]
LetterboxOrder = Literal["resize-then-pad", "pad-then-resize"]
NmsMode = Literal["per-class", "class-agnostic"]
Placement = Literal["centre", "top-left"]
Layout = Literal["NCHW", "NHWC"]
ChannelOrder = Literal["RGB", "BGR"]
OutputLayout = Literal["yolov8", "yolov5", "nms-inside"]
Pooling = Literal["mean", "cls", "max", "last", "model", "none"]

METADATA_LABELS = "metadata"  # labels = "metadata": from the model's metadata_props (names)


def _float(value: Any) -> float:
    """A number, or a fraction written NUMERATOR/DENOMINATOR ("1/255")."""
    expected = f"expected a number or a fraction like 1/255, got {value!r}"
    if isinstance(value, bool):
        raise ValueError(expected)
    try:
        if isinstance(value, str) and "/" in value:
            numerator, _, denominator = value.partition("/")
            top, bottom = float(numerator), float(denominator)
            if bottom == 0:
                raise ZeroDivisionError
            return top / bottom
        return float(value)
    except ZeroDivisionError:
        raise ValueError(f"{value!r} divides by zero") from None
    except (TypeError, ValueError):
        raise ValueError(expected) from None


def _int(value: Any, low: int = 1) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"expected an integer >= {low}, got {value!r}")
    return value


def _fraction(value: Any) -> float:
    number = _float(value)
    if not 0 <= number <= 1:
        raise ValueError(f"expected a number from 0 to 1, got {value!r}")
    return number


def _choice(choices: tuple[str, ...]) -> Any:
    def check(value: Any) -> str:
        value = "centre" if value == "center" and "centre" in choices else value
        if isinstance(value, str) and value.upper() in choices:
            value = value.upper()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    return check


def _numbers(count: int, positive: bool = False) -> Any:
    def check(value: Any) -> tuple[float, ...]:
        if isinstance(value, str):
            value = [part for part in value.replace("x", ",").split(",") if part.strip()]
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = [value]
        if isinstance(value, list | tuple) and len(value) == 1:  # one number for every channel
            value = list(value) * count
        if not isinstance(value, list | tuple) or len(value) != count:
            raise ValueError(f"expected {count} numbers, got {value!r}")
        numbers = tuple(_float(item) for item in value)
        if positive and any(number <= 0 for number in numbers):
            raise ValueError(f"expected numbers > 0, got {value!r}")
        return numbers

    return check


def _size(value: Any) -> tuple[int, int]:
    """HEIGHTxWIDTH, one number (a square) or [height, width]."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value, value]
    if isinstance(value, str):
        value = [part for part in value.replace("x", ",").split(",") if part.strip()]
        value = value * 2 if len(value) == 1 else value
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ValueError(f"expected HEIGHTxWIDTH, e.g. 224x224, got {value!r}")
    height, width = (_int(item) for item in value)
    return height, width


def _bool(value: Any) -> bool:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _state(value: Any) -> tuple[tuple[str, str], ...]:
    """State pairs INPUT=OUTPUT: a table { h = "hn" }, a list or a comma string "h=hn,c=cn"."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, Mapping):
        value = [f"{key}={item}" for key, item in value.items()]
    if not isinstance(value, list | tuple):
        raise ValueError(f"expected INPUT=OUTPUT pairs, e.g. state=stateN, got {value!r}")
    pairs = []
    for item in value:
        name, sep, output = str(item).partition("=")
        if not sep or not name.strip() or not output.strip():
            raise ValueError(f"expected INPUT=OUTPUT, got {item!r}")
        pairs.append((name.strip(), output.strip()))
    return tuple(pairs)


def _labels(value: Any, base: Path) -> tuple[str, ...] | str:
    """A text file (one label a line), a list of labels, or "metadata"."""
    if value == METADATA_LABELS:
        return METADATA_LABELS
    if isinstance(value, list | tuple):
        if not value or not all(isinstance(item, str) for item in value):
            raise ValueError(f"expected a list of strings, got {value!r}")
        return tuple(value)
    if not isinstance(value, str | Path) or not str(value):
        raise ValueError(f"expected a labels file, a list of labels or \"metadata\", got {value!r}")
    path = (base / value).resolve()
    if not path.is_file():
        raise ValueError(f"{path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text (one label a line)") from None
    labels = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not labels:
        raise ValueError(f"{path} has no labels (one label a line)")
    return labels


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a name, got {value!r}")
    return value.strip()


def _crop_fraction(value: Any) -> float:
    number = _float(value)
    if not 0 < number <= 1:
        raise ValueError(f"expected a number above 0, at most 1, got {value!r}")
    return number


def _byte(value: Any) -> int:
    number = _int(value, 0)
    if number > 255:
        raise ValueError(f"expected an integer from 0 to 255, got {value!r}")
    return number


# key -> check(value) or check(value, base) for paths; every key a TaskSpec field.
_SETTINGS: dict[str, Any] = {
    "kind": _choice(TASK_KINDS),
    "input": _text,
    "output": _text,
    "size": _size,
    "resize": _choice(get_args(ResizeMode)),
    "filter": _choice(get_args(ResizeFilter)),
    "pad_value": _byte,
    "placement": _choice(get_args(Placement)),
    "letterbox_order": _choice(get_args(LetterboxOrder)),
    "layout": _choice(get_args(Layout)),
    "channels": _choice(get_args(ChannelOrder)),
    "crop_fraction": _crop_fraction,
    "scale": _float,
    "mean": _numbers(3),
    "std": _numbers(3, positive=True),
    "labels": _labels,
    "softmax": _bool,
    "top_k": _int,
    "score_threshold": _fraction,
    "iou_threshold": _fraction,
    "max_detections": _int,
    "output_layout": _choice(get_args(OutputLayout)),
    "nms": _choice(get_args(NmsMode)),
    "sample_rate": _int,
    "chunk_size": _int,
    "context_size": lambda value: _int(value, 0),
    "state": _state,
    "pooling": _choice(get_args(Pooling)),
    "normalize": _bool,
    "max_length": _int,
}


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """What was asked for; None: not given (resolved from the model, or the kind's default)."""

    kind: TaskKindName = GENERIC
    input: str | None = None  # the image or audio input (default: the first float input)
    output: str | None = None  # the scores or boxes output (default: the first output)
    size: tuple[int, int] | None = None  # (height, width) the model takes
    resize: ResizeMode | None = None  # default: letterbox for detection, stretch otherwise
    filter: ResizeFilter = "bilinear"
    pad_value: int = 114
    placement: Placement = "centre"
    letterbox_order: LetterboxOrder = "resize-then-pad"
    crop_fraction: float = 1.0  # center-crop: the part of the resized image kept (0.875: 256->224)
    layout: Layout | None = None  # default: from the input's shape (3 on axis 1: NCHW)
    channels: ChannelOrder = "RGB"
    scale: float = 1 / 255
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    labels: tuple[str, ...] | str | None = None
    softmax: bool = True
    top_k: int = 5
    score_threshold: float = 0.25
    iou_threshold: float = 0.7  # Ultralytics' predict() defaults
    max_detections: int = 300
    output_layout: OutputLayout = "yolov8"
    nms: NmsMode = "per-class"
    sample_rate: int = 16000
    chunk_size: int = 512
    context_size: int = 0  # samples of the previous chunk put before each one (Silero VAD: 64)
    state: tuple[tuple[str, str], ...] = ()
    pooling: Pooling = "mean"  # feature-extraction: token vectors -> one row per text
    normalize: bool = True  # feature-extraction: rows scaled to length 1
    max_length: int | None = None  # text: tokens kept per text (default: the model's maximum)
    given: tuple[str, ...] = ()  # the keys that were given (a merge keeps the later ones)

    def merged(self, later: TaskSpec) -> TaskSpec:
        """`later`'s given settings over this one's (flags over bundle.toml)."""
        values = {key: getattr(later, key) for key in later.given}
        return dataclasses.replace(self, **values,
                                   given=tuple(dict.fromkeys((*self.given, *later.given))))


def parse_task(value: Any, base: Path) -> TaskSpec:
    """A kind ("object-detection"), a table { kind = ..., labels = ... } or, from repeated
    --task flags, a list of a kind and KEY=VALUE settings."""
    if isinstance(value, TaskSpec):
        return value
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list | tuple):
        table: dict[str, Any] = {}
        for item in value:
            key, sep, text = str(item).partition("=")
            if sep:
                table[key.strip().replace("-", "_")] = text.strip()
            else:
                table["kind"] = key.strip()
        value = table
    if not isinstance(value, Mapping):
        raise ValueError(f'expected a task kind or a table like {{ kind = "object-detection" }},'
                         f" got {value!r}")
    settings: dict[str, Any] = {}
    for key, item in value.items():
        if key not in _SETTINGS:
            raise ValueError(f"unknown task setting {key!r} (known: {', '.join(_SETTINGS)})")
        check = _SETTINGS[key]
        try:
            settings[key] = check(item, base) if check is _labels else check(item)
        except ValueError as error:
            raise ValueError(f"task setting {key!r}: {error}") from None
    return TaskSpec(**settings, given=tuple(settings))
