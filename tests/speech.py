"""Real speech for the tests, made here: eSpeak NG (the library and voices that the
espeakng-loader wheel ships, driven through its C API with ctypes) reads English sentences aloud
at its own 22,050 Hz, as 16-bit mono."""

from __future__ import annotations

import ctypes
import functools

import numpy as np

AUDIO_OUTPUT_SYNCHRONOUS = 2  # synthesise inside espeak_Synth, the samples to the callback
CHARS_UTF8 = 1
END_PAUSE = 0x1000  # a pause at the end of the text, as a sentence would have

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Speech recognition in the browser needs the same features as the native model.",
    "Whisper listens to thirty seconds of audio at a time, sixteen thousand samples a second.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "Six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack.",
)

_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                             ctypes.c_void_p)


@functools.cache
def _engine() -> tuple[ctypes.CDLL, int]:
    import espeakng_loader  # the test extra's wheel

    library = ctypes.CDLL(str(espeakng_loader.get_library_path()))
    library.espeak_Initialize.restype = ctypes.c_int
    rate = library.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0,
                                     str(espeakng_loader.get_data_path()).encode(), 0)
    assert rate > 0, "eSpeak NG did not start"
    assert library.espeak_SetVoiceByName(b"en") == 0, "eSpeak NG has no English voice"
    return library, rate


@functools.cache
def speak(text: str) -> tuple[np.ndarray, int]:
    """`text` read aloud: float32 samples in [-1, 1] (read-only) and their rate. Read once per
    process: eSpeak NG's output depends on what it read before (the same sentence again comes
    out a few samples longer), so a test's audio would depend on which tests ran first."""
    library, rate = _engine()
    chunks: list[np.ndarray] = []

    def collect(wave, count, events) -> int:  # noqa: ANN001 (ctypes hands raw pointers)
        if count > 0:
            chunks.append(np.ctypeslib.as_array(wave, (count,)).copy())
        return 0

    callback = _CALLBACK(collect)  # kept alive until espeak_Synth returns
    library.espeak_SetSynthCallback(callback)
    data = text.encode() + b"\0"
    error = library.espeak_Synth(data, ctypes.c_size_t(len(data)), 0, 1, 0,
                                 CHARS_UTF8 | END_PAUSE, None, None)
    assert error == 0, f"espeak_Synth failed ({error})"
    samples = np.concatenate(chunks).astype(np.float32) / 32768.0
    samples.flags.writeable = False
    return samples, rate


@functools.cache
def speech(seconds: float) -> tuple[np.ndarray, int]:
    """At least `seconds` of speech (the sentences over again as needed), cut to that length."""
    parts, total = [], 0
    while True:
        for sentence in SENTENCES:
            samples, rate = speak(sentence)
            parts.append(samples)
            total += samples.size
            if total >= seconds * rate:
                joined = np.concatenate(parts)[:int(seconds * rate)]
                joined.flags.writeable = False
                return joined, rate
