"""Inputs made in code for a task check when the user gives no files (`bundle test` on a task
bundle): a picture with shapes, colours, a gradient and noise, and a sound with two tone bursts
between near-silence. Deterministic, so a check is repeatable."""

from __future__ import annotations

import io
import wave

import numpy as np


def picture(height: int, width: int, seed: int = 0) -> np.ndarray:
    """An RGB uint8 [h, w, 3] picture: a red disc on the left, a blue square on the right, a
    gradient behind and some noise (so resizing has detail to get right)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    image = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1),
                      np.full_like(x, 60)], axis=-1).astype(np.float64) * 0.3
    disc = (x - width * 0.3) ** 2 + (y - height * 0.5) ** 2 < (min(height, width) * 0.25) ** 2
    image[disc] = (230, 30, 30)
    square = (abs(x - width * 0.75) < width * 0.12) & (abs(y - height * 0.4) < height * 0.2)
    image[square] = (20, 40, 220)
    image += rng.normal(0, 12, image.shape)
    return image.clip(0, 255).astype(np.uint8)


def speech_like(seconds: float, rate: int) -> np.ndarray:
    """Bursts of a 220 Hz tone with harmonics (0.3-0.8 s, 1.2-1.6 s), faint noise between: what
    a voice-activity model should find two segments in."""
    t = np.arange(int(seconds * rate)) / rate
    tone = sum(np.sin(2 * np.pi * 220 * k * t) / k for k in (1, 2, 3))
    bursts = ((t > 0.3) & (t < 0.8)) | ((t > 1.2) & (t < 1.6))
    noise = np.random.default_rng(0).normal(0, 0.003, t.size)
    return (0.5 * tone * bursts + noise).astype(np.float32)


def png_bytes(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def wav_bytes(samples: np.ndarray, rate: int) -> bytes:
    """16-bit mono PCM."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(rate)
        file.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return buffer.getvalue()
