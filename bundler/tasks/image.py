"""An image file -> the uint8 [1, H, W, 3] the task graph takes (the spec; web/tasks/image.mjs is
the browser's implementation of the same arithmetic, in the same order, in float64).

Geometry: the source (sw x sh) is scaled by (sx, sy) and placed with its top-left corner at
(left, top) in the H x W input; pixels outside it are `pad_value`.
  stretch:     sx = W / sw, sy = H / sh, at (0, 0)
  letterbox:   r = min(W / sw, H / sh); nw = round(sw * r), nh = round(sh * r); sx = nw / sw,
               sy = nh / sh; centre: left = floor((W - nw) / 2), top = floor((H - nh) / 2);
               top-left: (0, 0) (padding at the bottom and right)
  center-crop: r = max(W / sw, H / sh) / crop_fraction, the same with nw, nh >= W, H (left,
               top <= 0); crop_fraction 0.875 is torchvision's Resize(256) + CenterCrop(224)
where round(v) = floor(v + 0.5). An input pixel (u, v) samples the source at
  x = (u - left + 0.5) / sx - 0.5, y = (v - top + 0.5) / sy - 0.5 (half-pixel centres)
bilinear: x clamped to [0, sw - 1], x0 = floor(x), x1 = min(x0 + 1, sw - 1), fx = x - x0 (the
same for y); value = (p00 * (1 - fx) + p01 * fx) * (1 - fy) + (p10 * (1 - fx) + p11 * fx) * fy,
stored as floor(value + 0.5). nearest: the pixel min(floor((u - left + 0.5) / sx), sw - 1).
antialias (Pillow's and torchvision's bilinear, which widens the triangle when shrinking): per
axis, output i = u - left reads the source around c = (i + 0.5) / sx with f = max(1 / sx, 1):
source pixels j from max(floor(c - f + 0.5), 0) to min(floor(c + f + 0.5), sw) - 1, weights
max(0, 1 - |(j - c + 0.5) / f|) divided by their sum (added in order of j); rows first, each
stored as floor(value + 0.5) clipped to 0-255, then columns the same way on those rows.
cv2-linear and pil-bilinear resize the whole source to nw x nh (W x H for stretch) in OpenCV's
and Pillow's own integer arithmetic (bundler.tasks.resample), then place it at (left, top).
letterbox_order = pad-then-resize (cv2.copyMakeBorder to a square, then cv2.dnn.blobFromImage's
resize): the source is first padded with pad_value to the smallest canvas of the model's aspect
ratio that holds it: cw = sw, ch = round(sw * H / W) when sw * H >= sh * W, else ch = sh,
cw = round(sh * W / H); placed in it at floor((cw - sw) / 2), floor((ch - sh) / 2) (centre) or
(0, 0) (top-left); the canvas is then stretched to W x H with `filter`, so that the padding
blends into the edge pixels as in the owner's pipeline. Its geometry: sx = W / cw, sy = H / ch,
left and top the source's offset in the canvas times sx, sy (fractions of a pixel).
A box in input pixels maps back to the source as x' = (x - left) / sx, w' = w / sx.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from bundler.bundle.manifest import Task
from bundler.errors import ConfigError
from bundler.tasks.resample import resize_cv2_linear, resize_pil_bilinear

OWNER_RESIZES = {"cv2-linear": resize_cv2_linear, "pil-bilinear": resize_pil_bilinear}


@dataclasses.dataclass(frozen=True)
class Geometry:
    """Where the source lies in the model's input (see the module's docstring)."""

    scale_x: float
    scale_y: float
    left: float  # whole pixels, except after pad-then-resize
    top: float
    width: float  # of the scaled source in the input
    height: float

    def to_json(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def _round(value: float) -> int:
    return math.floor(value + 0.5)


def _pads_first(task: Task) -> bool:
    return task.resize == "letterbox" and task.letterbox_order == "pad-then-resize"


def canvas(source_width: int, source_height: int, task: Task) -> tuple[int, int, int, int]:
    """pad-then-resize: (width, height) of the padded source and the source's (left, top) in it."""
    height, width = task.size or (source_height, source_width)
    if source_width * height >= source_height * width:
        canvas_width, canvas_height = source_width, _round(source_width * height / width)
    else:
        canvas_width, canvas_height = _round(source_height * width / height), source_height
    if task.placement == "top-left":
        return canvas_width, canvas_height, 0, 0
    return (canvas_width, canvas_height, (canvas_width - source_width) // 2,
            (canvas_height - source_height) // 2)


def geometry(source_width: int, source_height: int, task: Task) -> Geometry:
    height, width = task.size or (source_height, source_width)
    if _pads_first(task):
        canvas_width, canvas_height, left, top = canvas(source_width, source_height, task)
        scale_x, scale_y = width / canvas_width, height / canvas_height
        return Geometry(scale_x, scale_y, left * scale_x, top * scale_y,
                        source_width * scale_x, source_height * scale_y)
    if task.resize == "stretch":
        return Geometry(width / source_width, height / source_height, 0, 0, width, height)
    ratio = (min if task.resize == "letterbox" else max)(width / source_width,
                                                         height / source_height)
    if task.resize == "center-crop":
        ratio /= task.crop_fraction if task.crop_fraction is not None else 1.0
    new_width, new_height = _round(source_width * ratio), _round(source_height * ratio)
    if task.resize == "letterbox" and task.placement == "top-left":
        left = top = 0
    else:
        left, top = math.floor((width - new_width) / 2), math.floor((height - new_height) / 2)
    return Geometry(new_width / source_width, new_height / source_height, left, top,
                    new_width, new_height)


def _inside(count: int, start: int, extent: int) -> np.ndarray:
    positions = np.arange(count) - start
    return (positions >= 0) & (positions < extent)


def _axis(count: int, start: int, extent: int, scale: float, size: int, bilinear: bool
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per output position along one axis: (inside, index0, index1, fraction)."""
    positions = np.arange(count, dtype=np.float64) - start
    inside = _inside(count, start, extent)
    if bilinear:
        coordinate = np.clip((positions + 0.5) / scale - 0.5, 0, size - 1)
        index0 = np.floor(coordinate).astype(np.int64)
        return inside, index0, np.minimum(index0 + 1, size - 1), coordinate - index0
    index = np.minimum(np.floor((positions + 0.5) / scale), size - 1).clip(0).astype(np.int64)
    return inside, index, index, np.zeros(count)


def _antialias_weights(count: int, start: int, scale: float, size: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(source index, weight) [count, taps] per output position (weight 0 past the window)."""
    position = np.arange(count, dtype=np.float64) - start
    centre = (position + 0.5) / scale
    spread = max(1 / scale, 1.0)
    first = np.maximum(np.floor(centre - spread + 0.5), 0).astype(np.int64)
    last = np.minimum(np.floor(centre + spread + 0.5), size).astype(np.int64)
    taps = int(max((last - first).max(), 1))
    index = first[:, None] + np.arange(taps)[None, :]
    inside = index < last[:, None]
    weights = np.where(inside, np.maximum(0, 1 - np.abs((index - centre[:, None] + 0.5) / spread)),
                       0.0)
    total = np.zeros(count)
    for tap in range(taps):  # summed in order, as web/tasks/image.mjs does
        total = total + weights[:, tap]
    weights = weights / np.where(total > 0, total, 1)[:, None]
    return np.minimum(index, size - 1), weights


def _antialias(pixels: np.ndarray, place: Geometry, height: int, width: int) -> np.ndarray:
    """Rows then columns, each pass rounded to uint8 values (see the module's docstring)."""
    source = pixels.astype(np.float64)
    index, weights = _antialias_weights(width, place.left, place.scale_x, pixels.shape[1])
    rows = np.zeros((pixels.shape[0], width, 3))
    for tap in range(index.shape[1]):
        rows = rows + source[:, index[:, tap]] * weights[None, :, tap, None]
    rows = np.floor(rows + 0.5).clip(0, 255)
    index, weights = _antialias_weights(height, place.top, place.scale_y, pixels.shape[0])
    columns = np.zeros((height, width, 3))
    for tap in range(index.shape[1]):
        columns = columns + rows[index[:, tap]] * weights[:, tap, None, None]
    return np.floor(columns + 0.5).clip(0, 255)


def fit_image(pixels: np.ndarray, task: Task) -> tuple[np.ndarray, Geometry]:
    """RGB uint8 [h, w, 3] -> (uint8 [1, H, W, 3] for the graph, where the source lies in it)."""
    source_height, source_width = pixels.shape[:2]
    if _pads_first(task):
        canvas_width, canvas_height, left, top = canvas(source_width, source_height, task)
        padded = np.full((canvas_height, canvas_width, 3), _pad_value(task), np.uint8)
        padded[top:top + source_height, left:left + source_width] = pixels
        stretched = dataclasses.replace(task, resize="stretch", letterbox_order=None)
        return fit_image(padded, stretched)[0], geometry(source_width, source_height, task)
    height, width = task.size or (source_height, source_width)
    place = geometry(source_width, source_height, task)
    if task.filter in OWNER_RESIZES and min(place.width, place.height) < 1:
        return np.full((1, height, width, 3), _pad_value(task), np.uint8), place  # too thin
    if task.filter in OWNER_RESIZES:
        resized = OWNER_RESIZES[task.filter](pixels, int(place.width), int(place.height))
        inside_y = _inside(height, int(place.top), int(place.height))
        inside_x = _inside(width, int(place.left), int(place.width))
        rows = (np.arange(height) - int(place.top)).clip(0, resized.shape[0] - 1)
        columns = (np.arange(width) - int(place.left)).clip(0, resized.shape[1] - 1)
        return _placed(resized[rows][:, columns], inside_y, inside_x, task), place
    if task.filter == "antialias":
        inside_y = _axis(height, place.top, place.height, place.scale_y, source_height, False)[0]
        inside_x = _axis(width, place.left, place.width, place.scale_x, source_width, False)[0]
        return _placed(_antialias(pixels, place, height, width).astype(np.uint8), inside_y,
                       inside_x, task), place
    bilinear = task.filter != "nearest"
    inside_y, y0, y1, fy = _axis(height, place.top, place.height, place.scale_y,
                                 source_height, bilinear)
    inside_x, x0, x1, fx = _axis(width, place.left, place.width, place.scale_x,
                                 source_width, bilinear)
    source = pixels.astype(np.float64)
    fx, fy = fx[None, :, None], fy[:, None, None]
    top = source[y0][:, x0] * (1 - fx) + source[y0][:, x1] * fx
    bottom = source[y1][:, x0] * (1 - fx) + source[y1][:, x1] * fx
    value = np.floor(top * (1 - fy) + bottom * fy + 0.5).clip(0, 255).astype(np.uint8)
    return _placed(value, inside_y, inside_x, task), place


def _pad_value(task: Task) -> int:
    return task.pad_value if task.pad_value is not None else 114


def _placed(value: np.ndarray, inside_y: np.ndarray, inside_x: np.ndarray, task: Task
            ) -> np.ndarray:
    """`value` where the source lies, the pad value elsewhere, as [1, H, W, 3]."""
    out = np.full(value.shape, _pad_value(task), np.uint8)
    mask = inside_y[:, None] & inside_x[None, :]
    out[mask] = value[mask]
    return out[None]


def read_image(path: Path) -> np.ndarray:
    """An image file's RGB pixels, uint8 [h, w, 3], EXIF orientation applied (as the browser's
    createImageBitmap does)."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return np.asarray(ImageOps.exif_transpose(image).convert("RGB"), np.uint8)
    except FileNotFoundError:
        raise ConfigError(f"--image {path}: no such file") from None
    except (UnidentifiedImageError, OSError) as error:
        raise ConfigError(f"--image {path}: not an image Pillow can read ({error})") from None
