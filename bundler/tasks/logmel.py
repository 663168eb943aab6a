"""Whisper's log-mel front end (the spec; web/tasks/logmel.mjs is the browser's twin, computing the
same numbers in float64 and rounding to float32 at the end): what transformers'
`WhisperFeatureExtractor` feeds a Whisper encoder, within 1e-4 of it (tests/test_logmel.py).

Settings come from the model's preprocessor_config.json (`spec_of`): feature_size (mel bins, 80
or 128), sampling_rate (16000), hop_length (160), chunk_length (30 s), n_fft (400),
padding_value (0.0), and optionally mel_filters (the matrix some exports carry, [feature_size]
[1 + n_fft / 2] or its transpose). n_samples = chunk_length * sampling_rate (480,000) and
nb_max_frames = n_samples // hop_length (3,000).

1. Samples at any rate are resampled to sampling_rate by the audio task's linear resampler
   (bundler.tasks.audio.resample), cut to the first n_samples, and padded with padding_value to
   n_samples (the extractor's padding="max_length", truncation=True).
2. The signal is reflect-padded by n_fft / 2 on each side (center=True, pad_mode="reflect": the
   mirror without the edge sample) and cut into 1 + n_samples // hop_length frames of n_fft
   samples, every hop_length.
3. Each frame times the periodic Hann window w[n] = 0.5 - 0.5 cos(2 pi n / n_fft) goes through
   an exact real DFT (bins 0 .. n_fft / 2); the power |X[k]|^2 of each bin.
4. Mel filters, unless given: Slaney's mel scale (m = 3 f / 200 below 1 kHz, 15 + ln(f / 1000)
   * 27 / ln(6.4) above), feature_size + 2 points evenly spaced in mels from 0 Hz to 8 kHz (8 kHz
   whatever the rate, as the extractor), triangles over the bin frequencies k * (sampling_rate //
   2) / (n_fft / 2), each scaled by 2 / (its upper - its lower edge in Hz) (Slaney's area
   normalisation). mel = filters @ power.
5. log10(max(mel, 1e-10)); the last frame dropped (nb_max_frames remain); x = max(x, max(x) -
   8.0) over the whole matrix; (x + 4) / 4. The result: float32 [feature_size, nb_max_frames].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from bundler.errors import ConfigError
from bundler.tasks.audio import resample

LOG_FLOOR = 1e-10  # the extractor's mel_floor: silence gives log10(1e-10) = -10 before scaling
DYNAMIC_RANGE = 8.0  # log10 units kept below the loudest bin
MAX_FREQUENCY = 8000.0  # the extractor's top mel edge, fixed whatever the sampling rate
SETTINGS = ("feature_size", "sampling_rate", "hop_length", "chunk_length", "n_fft",
            "padding_value")


@dataclass(frozen=True)
class LogMelSpec:
    feature_size: int = 80
    sampling_rate: int = 16000
    hop_length: int = 160
    chunk_length: int = 30
    n_fft: int = 400
    padding_value: float = 0.0
    mel_filters: np.ndarray | None = None  # [feature_size, 1 + n_fft // 2] when given

    @property
    def n_samples(self) -> int:
        return self.chunk_length * self.sampling_rate

    @property
    def nb_max_frames(self) -> int:
        return self.n_samples // self.hop_length


def spec_of(config: Mapping[str, Any]) -> LogMelSpec:
    """The spec of a preprocessor_config.json dict (missing keys: Whisper's defaults)."""
    values: dict[str, Any] = {}
    for name in SETTINGS:
        if name not in config:
            continue
        value = config[name]
        if name == "padding_value":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"preprocessor_config.json: padding_value must be a number, "
                                  f"got {value!r}")
            values[name] = float(value)
        elif isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"preprocessor_config.json: {name} must be a positive integer, "
                              f"got {value!r}")
        else:
            values[name] = value
    if values.get("n_fft", 400) % 2:
        raise ConfigError(f"preprocessor_config.json: n_fft must be even, got {values['n_fft']}")
    spec = LogMelSpec(**values)
    if config.get("mel_filters") is not None:
        spec = LogMelSpec(**values, mel_filters=_given_filters(config["mel_filters"], spec))
    return spec


def _given_filters(given: Any, spec: LogMelSpec) -> np.ndarray:
    bins = 1 + spec.n_fft // 2
    try:
        filters = np.asarray(given, np.float64)
    except (TypeError, ValueError):
        filters = np.zeros(0)
    if filters.shape == (bins, spec.feature_size) and bins != spec.feature_size:
        filters = filters.T  # transformers' own orientation: [bins, mels]
    if filters.shape != (spec.feature_size, bins):
        raise ConfigError(f"preprocessor_config.json: mel_filters must be {spec.feature_size} x "
                          f"{bins} numbers (feature_size x (1 + n_fft / 2)), got shape "
                          f"{list(filters.shape)}")
    return filters


def hertz_to_mel(hertz: np.ndarray) -> np.ndarray:
    hertz = np.asarray(hertz, np.float64)
    logstep = 27.0 / math.log(6.4)
    return np.where(hertz >= 1000.0, 15.0 + np.log(np.maximum(hertz, 1e-300) / 1000.0) * logstep,
                    3.0 * hertz / 200.0)


def mel_to_hertz(mels: np.ndarray) -> np.ndarray:
    mels = np.asarray(mels, np.float64)
    logstep = math.log(6.4) / 27.0
    return np.where(mels >= 15.0, 1000.0 * np.exp(logstep * (mels - 15.0)), 200.0 * mels / 3.0)


def mel_filters(spec: LogMelSpec) -> np.ndarray:
    """[feature_size, 1 + n_fft // 2] float64: the given filters, or Slaney's (step 4)."""
    if spec.mel_filters is not None:
        return spec.mel_filters
    bins = 1 + spec.n_fft // 2
    edges = mel_to_hertz(np.linspace(hertz_to_mel(np.float64(0.0)),
                                     hertz_to_mel(np.float64(MAX_FREQUENCY)),
                                     spec.feature_size + 2))
    frequencies = np.linspace(0.0, spec.sampling_rate // 2, bins)
    widths = np.diff(edges)
    slopes = edges[None, :] - frequencies[:, None]  # [bins, mels + 2]
    down = -slopes[:, :-2] / widths[:-1]
    up = slopes[:, 2:] / widths[1:]
    triangles = np.maximum(0.0, np.minimum(down, up))
    area = 2.0 / (edges[2:] - edges[:-2])
    return (triangles * area[None, :]).T


def power_spectrogram(signal: np.ndarray, spec: LogMelSpec) -> np.ndarray:
    """[1 + n_fft // 2, frames] float64: steps 2-3 on a signal of n_samples."""
    half = spec.n_fft // 2
    padded = np.pad(np.asarray(signal, np.float64), half, mode="reflect")
    count = 1 + (padded.size - spec.n_fft) // spec.hop_length
    starts = np.arange(count) * spec.hop_length
    frames = padded[starts[:, None] + np.arange(spec.n_fft)[None, :]]
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(spec.n_fft) / spec.n_fft)
    spectrum = np.fft.rfft(frames * window, axis=1)
    return (spectrum.real ** 2 + spectrum.imag ** 2).T


def log_mel(samples: np.ndarray, sample_rate: int, spec: LogMelSpec) -> np.ndarray:
    """float32 [feature_size, nb_max_frames]: the encoder's input_features (batch dim left out)."""
    if sample_rate <= 0:
        raise ConfigError(f"audio sample rate must be positive, got {sample_rate}")
    signal = resample(np.asarray(samples, np.float32), sample_rate, spec.sampling_rate)
    fitted = np.full(spec.n_samples, spec.padding_value, np.float64)
    kept = signal[:spec.n_samples]
    fitted[:kept.size] = kept
    mel = mel_filters(spec) @ power_spectrogram(fitted, spec)
    logs = np.log10(np.maximum(mel, LOG_FLOOR))[:, :spec.nb_max_frames]
    logs = np.maximum(logs, logs.max() - DYNAMIC_RANGE)
    return ((logs + 4.0) / 4.0).astype(np.float32)
