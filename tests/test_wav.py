"""read_wav (bundler/tasks/audio.py), which every --audio and check recording goes through, on
.wav files as recorders and libraries write them: scipy's integer and float files, 24-bit PCM in
the extensible header (sox and most recorders past 16 bits), several channels averaged; and one
clear line for what it does not read."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from scipy.io import wavfile

from bundler.errors import ConfigError
from bundler.tasks.audio import read_wav

RATE = 22050
SIGNAL = (0.9 * np.sin(np.arange(4000) / 7.0)).astype(np.float64)
STEREO = np.stack([SIGNAL, -0.5 * SIGNAL], axis=1)
AVERAGED = STEREO.mean(axis=1)


@pytest.mark.parametrize(("kind", "scale", "offset", "step"), [
    (np.float32, 1.0, 0.0, 0.0), (np.float64, 1.0, 0.0, 0.0),
    (np.int16, 2**15, 0.0, 2**-15), (np.int32, 2**31, 0.0, 2**-31),
    (np.uint8, 128, 128, 2**-7)])
def test_scipy_files_read_as_their_samples(tmp_path: Path, kind, scale, offset, step) -> None:
    path = tmp_path / "speech.wav"
    values = STEREO * scale + offset
    if np.issubdtype(kind, np.integer):
        values = np.clip(np.round(values), np.iinfo(kind).min, np.iinfo(kind).max)
    wavfile.write(path, RATE, values.astype(kind))
    samples, rate = read_wav(path)
    assert rate == RATE and samples.dtype == np.float32 and samples.shape == (len(SIGNAL),)
    # the format's own rounding, then float32's (6e-8 of the value)
    assert np.abs(samples - AVERAGED).max() <= step + 1e-7


def _extensible_24_bit(samples: np.ndarray, rate: int) -> bytes:
    """[frames, channels] in [-1, 1] as 24-bit PCM in WAVE_FORMAT_EXTENSIBLE, byte by byte."""
    frames, channels = samples.shape
    ints = np.clip(np.round(samples * 2**23), -2**23, 2**23 - 1).astype("<i4").reshape(-1)
    data = b"".join(int(v).to_bytes(4, "little", signed=True)[:3] for v in ints)
    block = 3 * channels
    guid = struct.pack("<H", 1) + bytes.fromhex("000000001000800000aa00389b71")
    fmt = struct.pack("<HHIIHHHHI", 0xFFFE, channels, rate, rate * block, block, 24, 22, 24,
                      3) + guid
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"LIST" + struct.pack("<I", 5) + b"INFO!" + b"\0"  # an odd chunk, padded
    body += b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_24_bit_extensible_files_read_as_their_samples(tmp_path: Path) -> None:
    path = tmp_path / "recorder.wav"
    path.write_bytes(_extensible_24_bit(STEREO, 48000))
    samples, rate = read_wav(path)
    assert rate == 48000 and np.abs(samples - AVERAGED).max() <= 2**-23 + 1e-7
    assert np.abs(samples - AVERAGED).max() > 0  # 24-bit rounding, not the float signal


def test_what_is_not_read_is_refused_in_one_line(tmp_path: Path) -> None:
    mp3 = tmp_path / "speech.mp3"
    mp3.write_bytes(b"ID3\x04" + bytes(200))
    with pytest.raises(ConfigError, match=r"not a \.wav file .* ffmpeg -i FILE speech\.wav"):
        read_wav(mp3)
    adpcm = tmp_path / "adpcm.wav"
    wavfile.write(adpcm, RATE, SIGNAL.astype(np.float32))
    data = bytearray(adpcm.read_bytes())
    data[20:22] = struct.pack("<H", 2)  # Microsoft ADPCM's tag
    adpcm.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match="32-bit format 0x2 samples; give PCM of 8, 16, 24"):
        read_wav(adpcm)
    with pytest.raises(ConfigError, match="no such file"):
        read_wav(tmp_path / "missing.wav")
