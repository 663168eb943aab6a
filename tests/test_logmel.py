"""The log-mel twins (bundler/tasks/logmel.py, web/tasks/logmel.mjs) on speech read aloud by eSpeak
NG (tests/speech.py): Python within 1e-4 of transformers' WhisperFeatureExtractor, with 80 and 128
mel bins, on short (padded), long (cut) and silent audio; the JS twin under Node within 1e-4 of
Python on the same, and on 8 kHz, 22.05 kHz and 44.1 kHz audio resampled to 16 kHz."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy.signal import resample_poly
from transformers import WhisperFeatureExtractor

from bundler.errors import ConfigError
from bundler.site.npmtools import node_executable
from bundler.tasks.audio import resample
from bundler.tasks.logmel import LogMelSpec, log_mel, mel_filters, power_spectrogram, spec_of
from tests.speech import speech

LOGMEL = Path(__file__).resolve().parent.parent / "web" / "tasks" / "logmel.mjs"
TOLERANCE = 1e-4
RATE = 16000


def _at(seconds: float, rate: int) -> np.ndarray:
    """`seconds` of speech at `rate` (eSpeak's 22,050 Hz through a polyphase filter)."""
    samples, native = speech(seconds)
    if rate == native:
        return np.array(samples)
    divisor = np.gcd(rate, native)
    return resample_poly(samples, rate // divisor, native // divisor).astype(np.float32)


def _cases() -> dict[str, tuple[np.ndarray, int]]:
    return {"short": (_at(12.0, RATE), RATE), "long": (_at(41.0, RATE), RATE),
            "silence": (np.zeros(5 * RATE, np.float32), RATE),
            "exact": (_at(30.0, RATE), RATE)}


def _extractor(size: int) -> WhisperFeatureExtractor:
    return WhisperFeatureExtractor(feature_size=size)  # Whisper's settings, no download


@pytest.mark.parametrize("size", [80, 128])
def test_python_matches_whisper_feature_extractor(size: int):
    extractor = _extractor(size)
    spec = spec_of(extractor.to_dict())
    assert (spec.feature_size, spec.n_samples, spec.nb_max_frames) == (size, 480000, 3000)
    for name, (samples, rate) in _cases().items():
        want = extractor(samples, sampling_rate=rate, return_tensors="np").input_features[0]
        got = log_mel(samples, rate, spec)
        assert got.shape == want.shape == (size, 3000) and got.dtype == np.float32, name
        assert np.abs(got - want).max() < TOLERANCE, (name, np.abs(got - want).max())
        assert np.ptp(got) > 1.0 or name == "silence", name  # speech, not a flat matrix


def test_the_formula_filters_are_transformers_and_given_filters_are_used():
    extractor = _extractor(80)
    assert np.abs(mel_filters(spec_of({})) - extractor.mel_filters.T).max() < 1e-12
    samples, rate = _cases()["short"]
    plain = log_mel(samples, rate, spec_of({}))
    for given in (extractor.mel_filters.tolist(), extractor.mel_filters.T.tolist()):
        assert np.array_equal(log_mel(samples, rate, spec_of({"mel_filters": given})), plain)
    halved = spec_of({"mel_filters": (extractor.mel_filters / 2).tolist()})
    assert not np.allclose(log_mel(samples, rate, halved), plain, atol=1e-3)  # really used


def test_padding_cutting_and_silence():
    samples, rate = _cases()["long"]
    spec = LogMelSpec()
    assert np.array_equal(log_mel(samples, rate, spec), log_mel(samples[:480000], rate, spec))
    assert not np.array_equal(log_mel(samples, rate, spec), log_mel(samples[:470000], rate, spec))
    # all zeros: every bin at the 1e-10 floor, log10 -10, scaled to (-10 + 4) / 4
    assert np.array_equal(log_mel(np.zeros(100, np.float32), rate, spec),
                          np.full((80, 3000), -1.5, np.float32))
    short = log_mel(_cases()["short"][0], rate, spec)
    assert np.all(short[:, 1300:] == short.min())  # the padded tail sits at max - 8


@pytest.mark.parametrize("config, message", [
    ({"feature_size": 0}, "feature_size must be a positive integer, got 0"),
    ({"hop_length": "160"}, "hop_length must be a positive integer, got '160'"),
    ({"n_fft": 401}, "n_fft must be even, got 401"),
    ({"padding_value": None}, "padding_value must be a number, got None"),
    ({"mel_filters": [[0.0] * 201] * 79}, "mel_filters must be 80 x 201 numbers"),
])
def test_bad_preprocessor_configs_are_one_line_errors(config, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as caught:
        spec_of(config)
    assert "\n" not in str(caught.value)


def test_a_non_positive_sample_rate_is_a_one_line_error():
    with pytest.raises(ConfigError, match="audio sample rate must be positive, got 0"):
        log_mel(np.zeros(10, np.float32), 0, LogMelSpec())


NODE_TWIN = """
import { readFileSync, writeFileSync } from 'node:fs';
import { logMel, logMelSpec } from '%(module)s';
const cases = JSON.parse(readFileSync(process.argv[2], 'utf8'));
for (const { input, output, rate, config } of cases) {
  const bytes = readFileSync(input);
  const samples = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  const features = logMel(samples, rate, logMelSpec(config));
  writeFileSync(output, Buffer.from(features.buffer));
}
const refused = [];
for (const config of [{ n_fft: 401 }, { hop_length: '160' }, { padding_value: null },
                      { mel_filters: [[0]] }]) {
  try { logMelSpec(config); refused.push(null); } catch (error) { refused.push(error.message); }
}
process.stdout.write(JSON.stringify(refused));
"""


def test_javascript_matches_python_under_node(tmp_path):
    cases = {**_cases(), **{f"speech {rate} Hz": (_at(12.0, rate), rate)
                            for rate in (8000, 22050, 44100)}}
    configs = {"80": _extractor(80).to_dict(), "128": _extractor(128).to_dict(),
               "given filters": {"mel_filters": _extractor(80).mel_filters.tolist()}}
    runs, expected = [], []
    for number, (name, (samples, rate)) in enumerate(cases.items()):
        given = tmp_path / f"{number}.f32"
        given.write_bytes(samples.astype(np.float32).tobytes())
        for label, config in configs.items():
            if label != "80" and name not in ("short", "speech 44100 Hz"):
                continue  # the other settings on two inputs: enough to tell them apart
            runs.append({"input": str(given), "rate": rate,
                         "output": str(tmp_path / f"{len(runs)}.out"), "config": config})
            expected.append((f"{name} / {label}", log_mel(samples, rate, spec_of(config))))
    (tmp_path / "cases.json").write_text(json.dumps(runs), encoding="utf-8")
    script = tmp_path / "twin.mjs"
    script.write_text(NODE_TWIN % {"module": LOGMEL.as_uri()}, encoding="utf-8")
    result = subprocess.run([str(node_executable()), str(script), str(tmp_path / "cases.json")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [
        "preprocessor_config.json: n_fft must be even, got 401",
        'preprocessor_config.json: hop_length must be a positive integer, got "160"',
        "preprocessor_config.json: padding_value must be a number, got null",
        "preprocessor_config.json: mel_filters must be 80 x 201"]
    for run, (name, want) in zip(runs, expected, strict=True):
        got = np.fromfile(run["output"], np.float32).reshape(want.shape)
        assert np.abs(got - want).max() < TOLERANCE, (name, np.abs(got - want).max())
    # the resampled inputs went through the audio task's resampler on both sides
    assert resample(cases["speech 8000 Hz"][0], 8000, RATE).size == 12 * RATE


POWER_TWIN = """
import { readFileSync } from 'node:fs';
import { powerSpectrogram } from '%(module)s';
const bytes = readFileSync(process.argv[2]);
const signal = new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8);
const out = JSON.parse(process.argv[3]).map((nFft) => Array.from(
  powerSpectrogram(signal, { n_fft: nFft, hop_length: 7 }).power));
process.stdout.write(JSON.stringify(out));
"""


def test_the_javascript_fft_is_exact_for_any_even_size(tmp_path):
    """The power spectrogram of every frame, for sizes whose halves take each FFT pass (radix 4,
    2, the generic one on 3, 5, 7 and 11) and none (n_fft 2), against numpy's FFT."""
    sizes = [400, 512, 2, 6, 14, 22, 30, 96]
    signal = np.random.default_rng(5).standard_normal(1000)
    (tmp_path / "signal.f64").write_bytes(signal.tobytes())
    script = tmp_path / "power.mjs"
    script.write_text(POWER_TWIN % {"module": LOGMEL.as_uri()}, encoding="utf-8")
    result = subprocess.run([str(node_executable()), str(script), str(tmp_path / "signal.f64"),
                             json.dumps(sizes)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for size, got in zip(sizes, json.loads(result.stdout), strict=True):
        want = power_spectrogram(signal, LogMelSpec(n_fft=size, hop_length=7))
        assert np.abs(np.array(got) - want.ravel()).max() <= 1e-12 * want.max(), size
