"""Owner-exact uint8 resizes (the spec; web/tasks/resample.mjs is the browser's twin, in the same
integer arithmetic): RGB uint8 [h, w, 3] -> [height, width, 3], byte for byte what the owner's
library gives.

cv2-linear, OpenCV's `cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)` on
uint8 (checked against opencv-python 4.12 and 5.1 on x86-64):
  - the same size: a copy; exactly half in both directions: INTER_AREA's fast path, each pixel
    (a + b + c + d + 2) >> 2 of its 2 x 2 block;
  - otherwise, per output column, f = float32((x + 0.5) * scale - 0.5) with scale = 1 / (width
    / w) in float64, x0 = floor(f), f -= x0; x0 < 0: x0 = 0, f = 0; x0 >= w - 1: x0 = w - 1,
    f = 0; weights round-half-even(float32(1 - f) * 2048) and round-half-even(f * 2048)
    (INTER_RESIZE_COEF_BITS = 11); rows the same, except that f is kept when the row index is
    clamped (only the rows read are clamped to 0 .. h - 1);
  - the horizontal pass is an int: S = p[x0] * a0 + p[x1] * a1; the vertical pass is
    VResizeLinearVec_32s8u's: ((S0 >> 4) * b0 >> 16) + ((S1 >> 4) * b1 >> 16) + 2 >> 2, clipped
    to 0-255 (the vectorised pass, which both versions use for every pixel, however narrow the
    image; the scalar (S0 b0 + S1 b1 + 2^21) >> 22 differs on ~9% of random pixels).
pil-bilinear, Pillow 13's `Image.resize((width, height), Image.Resampling.BILINEAR)` on RGB
(src/libImaging/Resample.c): per axis, scale = h / height, support = max(scale, 1); output i
reads the source from xmin = int(c - support + 0.5) (at least 0) to int(c + support + 0.5) (at
most h), c = (i + 0.5) * scale, with weights max(0, 1 - |(j - c + 0.5) * (1 / support)|) divided by
their sum, as integers int(0.5 + weight * 2^22); a pass adds 2^21 + sum(p * k) and keeps
(that >> 22) clipped to 0-255. An axis whose size does not change has no pass. The vertical
pass comes first when the height shrinks by more than twice as many pixels as the width (Pillow
13; Pillow 12 and earlier always run the horizontal pass first).
"""

from __future__ import annotations

import math

import numpy as np

CV_COEF_SCALE = 2048  # OpenCV's INTER_RESIZE_COEF_SCALE, 1 << INTER_RESIZE_COEF_BITS
PIL_PRECISION_BITS = 22  # Pillow's PRECISION_BITS for 8-bit images


def cv2_linear_table(size: int, count: int, clamp_fraction: bool
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(index0, index1, weight0, weight1) per output position of an axis `size` -> `count`;
    clamp_fraction: the columns' rule (f = 0 where the index is clamped), else the rows'."""
    scale = 1.0 / (count / size)
    fraction = ((np.arange(count, dtype=np.float64) + 0.5) * scale - 0.5).astype(np.float32)
    index = np.floor(fraction)
    fraction = (fraction - index).astype(np.float32)
    index = index.astype(np.int64)
    if clamp_fraction:
        fraction[(index < 0) | (index >= size - 1)] = 0
    index0 = index.clip(0, size - 1)
    index1 = (index + 1).clip(0, size - 1)
    weight1 = np.rint(fraction * np.float32(CV_COEF_SCALE)).astype(np.int64)
    weight0 = np.rint((np.float32(1) - fraction) * np.float32(CV_COEF_SCALE)).astype(np.int64)
    return index0, index1, weight0, weight1


def resize_cv2_linear(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    source_height, source_width = pixels.shape[:2]
    if (source_width, source_height) == (width, height):
        return pixels.copy()
    source = pixels.astype(np.int64)
    if (source_width, source_height) == (2 * width, 2 * height):
        total = source[0::2, 0::2] + source[0::2, 1::2] + source[1::2, 0::2] + source[1::2, 1::2]
        return ((total + 2) >> 2).astype(np.uint8)
    x0, x1, a0, a1 = cv2_linear_table(source_width, width, clamp_fraction=True)
    y0, y1, b0, b1 = cv2_linear_table(source_height, height, clamp_fraction=False)
    rows = np.unique(np.concatenate([y0, y1]))  # only the rows read
    slot = np.zeros(source_height, np.int64)
    slot[rows] = np.arange(len(rows))
    horizontal = source[rows][:, x0] * a0[None, :, None] + source[rows][:, x1] * a1[None, :, None]
    top, bottom = horizontal[slot[y0]] >> 4, horizontal[slot[y1]] >> 4
    value = ((top * b0[:, None, None]) >> 16) + ((bottom * b1[:, None, None]) >> 16) + 2 >> 2
    return value.clip(0, 255).astype(np.uint8)


def pil_bilinear_table(size: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(first source index [count], integer weights [count, taps]) of an axis `size` ->
    `count`."""
    scale = float(size) / count
    support = max(scale, 1.0)
    taps = math.ceil(support) * 2 + 1
    inverse = 1.0 / support  # Pillow multiplies by the inverse
    first = np.zeros(count, np.int64)
    weights = np.zeros((count, taps), np.int64)
    for i in range(count):
        centre = (i + 0.5) * scale
        low = max(int(centre - support + 0.5), 0)
        high = min(int(centre + support + 0.5), size)
        values = [max(0.0, 1.0 - abs((j - centre + 0.5) * inverse)) for j in range(low, high)]
        total = 0.0
        for value in values:  # summed in order, as Pillow does
            total += value
        if total != 0.0:
            values = [value / total for value in values]
        first[i] = low
        weights[i, :len(values)] = [int(0.5 + value * (1 << PIL_PRECISION_BITS))
                                    for value in values]
    return first, weights


def _pil_pass(source: np.ndarray, axis: int, count: int) -> np.ndarray:
    first, weights = pil_bilinear_table(source.shape[axis], count)
    limit = source.shape[axis] - 1
    total = np.full((*source.shape[:axis], count, *source.shape[axis + 1:]),
                    1 << (PIL_PRECISION_BITS - 1), np.int64)
    for tap in range(weights.shape[1]):  # weight 0 past a window: the clamped index adds 0
        taken = np.take(source, np.minimum(first + tap, limit), axis=axis)
        shape = [1] * source.ndim
        shape[axis] = count
        total += taken * weights[:, tap].reshape(shape)
    return (total >> PIL_PRECISION_BITS).clip(0, 255)


def resize_pil_bilinear(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    source_height, source_width = pixels.shape[:2]
    value = pixels.astype(np.int64)
    shrink = source_height - height
    vertical_first = shrink > 0 and shrink > (source_width - width) * 2
    for axis in ((0, 1) if vertical_first else (1, 0)):
        count = height if axis == 0 else width
        if value.shape[axis] != count:
            value = _pil_pass(value, axis, count)
    return value.astype(np.uint8)
