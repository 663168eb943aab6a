"""Our speech-to-text bundle vs transformers.js 4.3.1 on the same Whisper export and WAV files, in
one Chromium.

    PYTHONPATH=. python benchmarks/asr_vs_transformersjs.py [--small] [--vocab trained|openai]
        [--rounds 3] [--calls 3] [--seconds 5,20] [--dtypes fp32,fp32+q4,fp32+q8,q8] [--keep DIR]

Exports a Whisper-tiny-sized model (4 + 4 layers x 384, 6 heads, openai/whisper-tiny's
dimensions; `--small`: the test suite's 2 + 2 x 64) with seeded random weights and a vocabulary
trained here (tests/speech_models.py: 1,817 ids, weights at 10x transformers' init spread;
`--vocab openai`: OpenAI's multilingual vocabulary, 51,865 ids as openai/whisper-tiny has them, its
generation_config.json and transformers' default init, tests/whisper_vocab.py, which downloads
openai-whisper's sdist from PyPI once) by optimum (`automatic-speech-recognition-with-past`),
into a folder laid out as transformers.js reads it (configs and tokenizer at the top,
onnx/encoder_model.onnx and onnx/decoder_model_merged.onnx), and per dtype (DTYPES: each
session's, the same on both sides) makes transformers.js's quantized files as its conversion
script does (text_exports.py: `_quantized` its q8, `_q4` its q4) and builds the export as our user
would ask for that dtype (`bundle build --ep wasm` and DTYPES' options). It writes speech read by
eSpeak NG (tests/speech.py) at 16 kHz as WAV files, and in one headless Chromium (1 WASM thread
for both, a fresh context per load, our side and transformers.js in turn) transcribes each file
(`language: 'en'`, greedy), measuring per file and dtype:

- load ms (import -> ready) and bytes on the wire, in all and per part (runtime wasm, encoder,
  decoder, the rest: scripts, configs, tokenizer);
- real-time factor: seconds of audio per second of transcribe() (higher is better), on the first
  call and on later calls;
- encoder ms (the time in the encoder session's run()), per call and per run, the runs of each
  session per call, and decode tokens/s (decoder runs per second of the decoder session's run()),
  on later calls;
- our real-time factor at their runs: with random weights the transcripts differ, and where the
  model emits a timestamp token our call decodes again from it (OpenAI's seek rule, which our
  native reference follows too) where transformers.js's short-form generate() does not, so the
  measured factors can compare unequal work; this row prices their runs at our per-run times.

transformers.js runs offline as its Whisper example calls it (asr_pages.mjs says why not through
`pipeline()`), with each session's dtype, from npm, local models only, its default wasm served
from here (tjs_bench.py, shared with text_vs_transformersjs.py). The local server compresses
nothing: our bundle fetches its gzip siblings, transformers.js's files come as they are (a CDN
may compress its .wasm: 26.9 MB as it is). Prints both figures, the ratio (ours / theirs) and
issue 24's targets: a real-time factor at least as good, at most half the bytes.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from text_exports import quantize_q4, quantize_q8
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
# dtype: (our build's options, as a user asks for it; transformers.js's dtype of each session).
# fp32+q4 is what its Whisper example ships (fp32 encoder, q4 decoder), q8 its WASM default.
DTYPES: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "fp32": ({"variants": ["fp32"]}, {"encoder_model": "fp32", "decoder_model_merged": "fp32"}),
    "fp32+q4": ({"quantize": "int4"}, {"encoder_model": "fp32", "decoder_model_merged": "q4"}),
    "fp32+q8": ({"quantize": "int8"}, {"encoder_model": "fp32", "decoder_model_merged": "q8"}),
    "q8": ({"quantize": "int8", "session_quantize": {"encoder": "int8"}},
           {"encoder_model": "q8", "decoder_model_merged": "q8"}),
}
# transformers.js's file of a dtype: onnx/NAME{suffix}.onnx, made by its quantizer
THEIR_FILES = {"fp32": ("", None), "q8": ("_quantized", quantize_q8), "q4": ("_q4", quantize_q4)}
PARTS = ("runtime wasm", "encoder", "decoder", "the rest")
# (higher is better, issue 24's target ratio ours / theirs or None)
# (the parts of the bytes first: they start with "bytes" too)
TARGETS = {"real-time factor at": (True, None), "real-time factor": (True, 1.0),
           "bytes: ": (False, None), "bytes": (False, 0.5), "load ms": (False, None),
           "encoder ms": (False, None), "runs per call": (False, None),
           "decode tok/s": (True, None)}


def _site(work: Path, small: bool, vocab: str, seconds: list[float], dtypes: list[str],
          reporter: TerminalReporter) -> Path:
    """work/site: models/whisper (transformers.js's layout, with its files of each dtype),
    ours/DTYPE (the bundles), audio/*.wav, tjs/ and raw/. Kept exports and builds are reused."""
    from tests import speech_models, whisper_vocab
    from tests.speech import speech

    site = work / "site"
    export, folder = work / "export", site / "models" / "whisper"
    if not (export / "onnx" / ONNX_FILES[1]).is_file():
        shutil.rmtree(export, ignore_errors=True)
        with reporter.step("Exporting a Whisper with optimum"
                           f" ({'the suite' if small else 'whisper-tiny'}'s size, {vocab}"
                           " vocabulary)"):
            make = whisper_vocab.whisper if vocab == "openai" else speech_models.whisper
            make(export, size=speech_models.TEST_SIZE if small else speech_models.WHISPER_TINY)
    if not (folder / "onnx" / ONNX_FILES[1]).is_file():
        (folder / "onnx").mkdir(parents=True, exist_ok=True)
        for path in (export / "onnx").iterdir():
            target = folder / "onnx" / path.name if path.name in ONNX_FILES else folder / path.name
            if path.suffix == ".json" or path.name in ONNX_FILES:
                shutil.copyfile(path, target)
    for dtype in dtypes:
        ours, theirs = DTYPES[dtype]
        for name, kind in theirs.items():
            suffix, quantize = THEIR_FILES[kind]
            target = folder / "onnx" / f"{name}{suffix}.onnx"
            if quantize is not None and not target.is_file():
                with reporter.step(f"transformers.js's {kind} of {name}"):
                    quantize(folder / "onnx" / f"{name}.onnx", target)
        bundle = site / "ours" / dtype
        if not (bundle / "bundle.json").is_file():
            with reporter.step(f"bundle build --ep wasm, {dtype}: {ours}"):
                build(export / "onnx", merge({}, {
                    "output": str(bundle), "execution_providers": ["wasm"], **ours,
                    "runtime_dir": str(fetch_runtime(DEFAULT_RUNTIME_VERSION))}),
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


def _part(url: str) -> str:
    """Which of PARTS a fetched URL is (ours: runtime/*.wasm, models/decoder.*.onnx* and the
    primary session's models/KIND.*.onnx*; theirs: tjs/*.wasm, onnx/decoder_model*.onnx,
    onnx/encoder_model*.onnx; their configs and tokenizer, beside onnx/, are the rest)."""
    name = url.rsplit("/", 1)[-1]
    if ".wasm" in name:
        return PARTS[0]
    if ".onnx" in name:
        return PARTS[2] if name.startswith("decoder") else PARTS[1]
    return PARTS[3]


def _figures(loads: list[dict], seconds: float) -> dict[str, float | None]:
    """One side's medians over its fresh loads (later calls: over all of them)."""
    first = [load["results"][0] for load in loads]
    later = [r for load in loads for r in load["results"][1:]] or first
    parts = [{part: sum(size for url, size in load["fetched"] if _part(url) == part)
              for part in PARTS} for load in loads]
    return {
        "load ms": median([load["loadMs"] for load in loads]),
        "bytes": median([float(load["bytes"]) for load in loads]),
        **{f"bytes: {part}": median([float(p[part]) for p in parts]) for part in PARTS},
        "real-time factor, first call": median([seconds * 1000 / r["ms"] for r in first]),
        "real-time factor, later calls": median([seconds * 1000 / r["ms"] for r in later]),
        "encoder ms, later calls": median([r["encoderMs"] for r in later]),
        "encoder ms per run, later calls": median(
            [r["encoderMs"] / r["encoderRuns"] for r in later if r["encoderRuns"]]),
        "runs per call: encoder": median([float(r["encoderRuns"]) for r in later]),
        "runs per call: decoder": median([float(r["decoderRuns"]) for r in later]),
        "decode tok/s, later calls": median(
            [r["decoderRuns"] * 1000 / r["decoderMs"] for r in later if r["decoderMs"]]),
    }


def _at_their_runs(ours: list[dict], theirs: list[dict], seconds: float) -> float | None:
    """Our real-time factor on later calls had each call run the encoder and the decoder as
    many times as transformers.js's did: with random weights the two transcripts differ, and a
    timestamp token the model emits makes our call decode again from it (OpenAI's seek rule;
    transformers.js's short-form generate() does not), so the measured factors compare unequal
    work. Our time per encoder run and per decoder run, times their runs, plus our time outside
    both."""
    later = [r for load in ours for r in load["results"][1:]]
    their = [r for load in theirs for r in load["results"][1:]]
    if not later or not their:
        return None
    encoder_runs = median([float(r["encoderRuns"]) for r in their])
    decoder_runs = median([float(r["decoderRuns"]) for r in their])
    factors = []
    for r in later:
        if not (r["encoderRuns"] and r["decoderRuns"]):
            continue
        rest = r["ms"] - r["encoderMs"] - r["decoderMs"]
        ms = (r["encoderMs"] / r["encoderRuns"] * encoder_runs
              + r["decoderMs"] / r["decoderRuns"] * decoder_runs + rest)
        factors.append(seconds * 1000 / ms)
    return median(factors) if factors else None


def _row(metric: str, ours: float | None, theirs: float | None) -> list[str]:
    higher, target = next(value for key, value in TARGETS.items() if metric.startswith(key))
    return row(metric, ours, theirs, higher, target)


def _agreement(ours: list[dict], theirs: list[dict]) -> str:
    """Both sides' first transcript and decoder runs: a check that they ran the same model."""
    a, b = ours[0]["results"][0], theirs[0]["results"][0]
    return (f"decoder runs ours {a['decoderRuns']}, theirs {b['decoderRuns']}; same text:"
            f" {a['text'].strip() == b['text'].strip()}; ours ran encoder {ours[0]['variant']},"
            f" decoder {ours[0]['decoderVariant']} on {ours[0]['ep']} with"
            f" {ours[0]['threads']} thread(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="the test suite's tiny Whisper")
    parser.add_argument("--vocab", choices=("trained", "openai"), default="trained",
                        help="the suite's small trained vocabulary, or OpenAI's (51,865 ids)"
                             " with transformers' default init")
    parser.add_argument("--seconds", default="5,20", help="lengths of the speech files")
    parser.add_argument("--rounds", type=int, default=3, help="fresh loads of each side")
    parser.add_argument("--calls", type=int, default=3, help="calls per load (1 first, then"
                                                             " later calls)")
    parser.add_argument("--dtypes", default=",".join(DTYPES),
                        help=f"each session's dtype on both sides: {', '.join(DTYPES)}")
    parser.add_argument("--keep", type=Path, default=None, help="keep (and reuse) the work here")
    args = parser.parse_args()
    seconds = [float(value) for value in args.seconds.split(",")]
    dtypes = args.dtypes.split(",")
    unknown = [dtype for dtype in dtypes if dtype not in DTYPES]
    if unknown:
        parser.error(f"--dtypes: unknown {unknown[0]!r}; choose from {', '.join(DTYPES)}")
    reporter = TerminalReporter()
    work = (args.keep or Path(tempfile.mkdtemp(prefix="asr-vs-tjs-"))) / (
        ("small" if args.small else "tiny") + ("-openai" if args.vocab == "openai" else ""))
    site = _site(work, args.small, args.vocab, seconds, dtypes, reporter)
    tables: list[tuple[str, list[list[str]], str]] = []
    with serve_directory(site) as base, playwright_session() as playwright, \
            launch(playwright, load_settings(), webgpu=False) as browser:
        for length, dtype in ((length, dtype) for length in seconds for dtype in dtypes):
            common: dict[str, Any] = {"audio": f"{base}audio/{_wav_name(length)}",
                                      "calls": args.calls}
            sides = {
                "ours": ("oursTranscribe", {**common, "base": f"{base}ours/{dtype}/"}),
                "transformers.js": ("theirsTranscribe", {
                    **common, "lib": f"{base}tjs/transformers.min.js", "models": "/models/",
                    "ort": f"{base}tjs/", "name": "whisper", "dtype": DTYPES[dtype][1]}),
            }
            loads = interleaved(browser, base, PAGES, sides, f"{length:g} s, {dtype}",
                                args.rounds, 600_000, reporter)
            ours = _figures(loads["ours"], length)
            theirs = _figures(loads["transformers.js"], length)
            equal = "real-time factor at their runs, later calls"
            ours[equal] = _at_their_runs(loads["ours"], loads["transformers.js"], length)
            theirs[equal] = theirs["real-time factor, later calls"]
            tables.append((f"{length:g} s of speech, {dtype}, 1 WASM thread; median of"
                           f" {args.rounds} fresh loads x {args.calls} calls",
                           [_row(metric, ours[metric], theirs[metric]) for metric in ours],
                           _agreement(loads["ours"], loads["transformers.js"])))
    for title, rows, note in tables:
        reporter.table(title, ("metric", "ours", "transformers.js 4.3.1", "ours / theirs",
                               "target"), rows)
        reporter.info(note)


if __name__ == "__main__":
    main()
