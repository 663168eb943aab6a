"""Our speech-to-text bundle vs transformers.js 4.3.1 on the same Whisper export and WAV files, in
one Chromium.

    python benchmarks/asr_vs_transformersjs.py [--small] [--rounds 3] [--calls 3]
        [--seconds 5,20] [--keep DIR]

Exports a Whisper-tiny-sized model (4 + 4 layers x 384, 6 heads, openai/whisper-tiny's
dimensions; `--small`: the test suite's 2 + 2 x 64) with seeded random weights and a vocabulary
trained here (tests/speech_models.py) by optimum (`automatic-speech-recognition-with-past`),
into a folder laid out as transformers.js reads it (configs and tokenizer at the top,
onnx/encoder_model.onnx and onnx/decoder_model_merged.onnx), builds the export with `bundle build
--ep wasm --variants fp32`, writes speech read by eSpeak NG (tests/speech.py) at 16 kHz as WAV
files, and in one headless Chromium (1 WASM thread for both, a fresh context per load, our side
and transformers.js in turn) transcribes each file (`language: 'en'`, greedy, fp32 on both
sides), measuring per file:

- load ms (import -> ready) and bytes on the wire;
- real-time factor: seconds of audio per second of transcribe() (higher is better), on the first
  call and on later calls;
- encoder ms (the time in the encoder session's run()) and decode tokens/s (decoder runs per
  second of the decoder session's run()), on later calls.

transformers.js runs offline as its docs show it (`pipeline('automatic-speech-recognition')`), from
npm, local models only, its default wasm served from here (tjs_bench.py, shared with
text_vs_transformersjs.py). Prints both figures, the ratio (ours / theirs) and issue 24's targets:
a real-time factor at least as good, at most half the bytes.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from tjs_bench import copy_transformers_js, interleaved, median, row

from bundler.bundle.options import DEFAULT_RUNTIME_VERSION, merge
from bundler.commands.build import build
from bundler.console import TerminalReporter
from bundler.server.bundle_server import serve_directory
from bundler.site.runtime import fetch_runtime
from bundler.tasks.audio import resample
from bundler.tasks.samples import wav_bytes
from bundler.verify.browser import launch, load_settings, playwright_session

PAGES = Path(__file__).with_name("asr_pages.mjs")
RATE = 16_000
ONNX_FILES = ("encoder_model.onnx", "decoder_model_merged.onnx")
# (higher is better, issue 24's target ratio ours / theirs or None)
TARGETS = {"real-time factor": (True, 1.0), "bytes": (False, 0.5), "load ms": (False, None),
           "encoder ms": (False, None), "decode tok/s": (True, None)}


def _site(work: Path, small: bool, seconds: list[float], reporter: TerminalReporter) -> Path:
    """work/site: models/whisper (transformers.js's layout), ours/whisper (the bundle),
    audio/*.wav, tjs/ and raw/. Kept exports and builds are reused."""
    from tests import speech_models
    from tests.speech import speech

    site = work / "site"
    export, folder, bundle = work / "export", site / "models" / "whisper", site / "ours" / "whisper"
    if not (export / "onnx" / ONNX_FILES[1]).is_file():
        shutil.rmtree(export, ignore_errors=True)
        with reporter.step("Exporting a Whisper with optimum"
                           f" ({'the suite' if small else 'whisper-tiny'}'s size)"):
            speech_models.whisper(export, size=None if small else speech_models.WHISPER_TINY)
    if not (folder / "onnx" / ONNX_FILES[1]).is_file():
        (folder / "onnx").mkdir(parents=True, exist_ok=True)
        for path in (export / "onnx").iterdir():
            target = folder / "onnx" / path.name if path.name in ONNX_FILES else folder / path.name
            if path.suffix == ".json" or path.name in ONNX_FILES:
                shutil.copyfile(path, target)
    if not (bundle / "bundle.json").is_file():
        with reporter.step("bundle build --ep wasm --variants fp32"):
            build(export / "onnx", merge({}, {
                "output": str(bundle), "runtime_dir": str(fetch_runtime(DEFAULT_RUNTIME_VERSION)),
                "variants": ["fp32"], "execution_providers": ["wasm"]}),
                force=True, reporter=reporter)
    (site / "audio").mkdir(exist_ok=True)
    for length in seconds:
        samples, rate = speech(length)
        (site / "audio" / _wav_name(length)).write_bytes(
            wav_bytes(resample(np.asarray(samples, np.float32), rate, RATE), RATE))
    copy_transformers_js(site, PAGES)
    return site


def _wav_name(seconds: float) -> str:
    return f"speech-{seconds:g}s.wav"


def _figures(loads: list[dict], seconds: float) -> dict[str, float | None]:
    """One side's medians over its fresh loads (later calls: over all of them)."""
    first = [load["results"][0] for load in loads]
    later = [r for load in loads for r in load["results"][1:]] or first
    return {
        "load ms": median([load["loadMs"] for load in loads]),
        "bytes": median([float(load["bytes"]) for load in loads]),
        "real-time factor, first call": median([seconds * 1000 / r["ms"] for r in first]),
        "real-time factor, later calls": median([seconds * 1000 / r["ms"] for r in later]),
        "encoder ms, later calls": median([r["encoderMs"] for r in later]),
        "decode tok/s, later calls": median(
            [r["decoderRuns"] * 1000 / r["decoderMs"] for r in later if r["decoderMs"]]),
    }


def _row(metric: str, ours: float | None, theirs: float | None) -> list[str]:
    higher, target = next(value for key, value in TARGETS.items() if metric.startswith(key))
    return row(metric, ours, theirs, higher, target)


def _agreement(ours: list[dict], theirs: list[dict]) -> str:
    """Both sides' first transcript and decoder runs: a check that they ran the same model."""
    a, b = ours[0]["results"][0], theirs[0]["results"][0]
    return (f"decoder runs ours {a['decoderRuns']}, theirs {b['decoderRuns']}; same text:"
            f" {a['text'].strip() == b['text'].strip()}; ours ran {ours[0]['variant']} on"
            f" {ours[0]['ep']} with {ours[0]['threads']} thread(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="the test suite's tiny Whisper")
    parser.add_argument("--seconds", default="5,20", help="lengths of the speech files")
    parser.add_argument("--rounds", type=int, default=3, help="fresh loads of each side")
    parser.add_argument("--calls", type=int, default=3, help="calls per load (1 first, then"
                                                             " later calls)")
    parser.add_argument("--keep", type=Path, default=None, help="keep (and reuse) the work here")
    args = parser.parse_args()
    seconds = [float(value) for value in args.seconds.split(",")]
    reporter = TerminalReporter()
    work = (args.keep or Path(tempfile.mkdtemp(prefix="asr-vs-tjs-"))) / (
        "small" if args.small else "tiny")
    site = _site(work, args.small, seconds, reporter)
    tables: list[tuple[str, list[list[str]], str]] = []
    with serve_directory(site) as base, playwright_session() as playwright, \
            launch(playwright, load_settings(), webgpu=False) as browser:
        for length in seconds:
            common: dict[str, Any] = {"audio": f"{base}audio/{_wav_name(length)}",
                                      "calls": args.calls}
            sides = {
                "ours": ("oursTranscribe", {**common, "base": f"{base}ours/whisper/"}),
                "transformers.js": ("theirsTranscribe", {
                    **common, "lib": f"{base}tjs/transformers.min.js", "models": "/models/",
                    "ort": f"{base}tjs/", "name": "whisper"}),
            }
            loads = interleaved(browser, base, PAGES, sides, f"{length:g} s", args.rounds,
                                600_000, reporter)
            ours = _figures(loads["ours"], length)
            theirs = _figures(loads["transformers.js"], length)
            tables.append((f"{length:g} s of speech, fp32, 1 WASM thread; median of {args.rounds}"
                           f" fresh loads x {args.calls} calls",
                           [_row(metric, ours[metric], theirs[metric]) for metric in ours],
                           _agreement(loads["ours"], loads["transformers.js"])))
    for title, rows, note in tables:
        reporter.table(title, ("metric", "ours", "transformers.js 4.3.1", "ours / theirs",
                               "target"), rows)
        reporter.info(note)


if __name__ == "__main__":
    main()
