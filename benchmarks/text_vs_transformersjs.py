"""Our text bundles vs transformers.js 4.3.1 on the same export folders, in one Chromium.

    python benchmarks/text_vs_transformersjs.py [--small] [--rounds 3] [--calls 4] [--keep DIR]
        [--only encoder|decoder] [--dtypes fp32,q8] [--sentences 32] [--prompt-tokens 16]
        [--new-tokens 64] [--encoder 6x384] [--decoder 12x768] [--vocab 8000] [--ep wasm]
        [--q8-variant int8]

Exports, with seeded random weights and tokenizers trained on local text (text_exports.py), a
MiniLM-sized BERT encoder (6 layers x 384, feature-extraction) and a GPT-2-small-sized decoder
(12 x 768, text-generation-with-past, merged) into folders as transformers.js reads them
(onnx/model.onnx, and onnx/model_quantized.onnx made as its conversion script makes q8), builds
each folder with `bundle build --quantize fp32 --variants int8,int8-weights` (our default, fp32,
the dtype matching q8: dynamic int8, and int8-weights, the same bytes decoded with float weights
on WASM; the build's default EPs, or those of `--ep`), and in one headless
Chromium (1 WASM thread for both, a fresh context per load, our side and transformers.js in turn,
A B A B ...) measures per dtype:

- encoder: load ms (import -> ready), sentences/s embedding `--sentences` sentences as one batch
  (mean pooling, normalized) on the first call and on later calls (median), bytes on the wire;
- decoder: load ms, time to first token, prefill and decode tokens/s for a `--prompt-tokens` prompt
  and `--new-tokens` new tokens (greedy), on the first call and later calls, bytes on the wire.

transformers.js runs offline as its docs show it (`pipeline('feature-extraction')`,
`AutoModelForCausalLM.generate()`), from npm (its bundled transformers.min.js), local models only,
its default wasm (the asyncify build of its onnxruntime-web) served from here. Our side loads each
bundle through its bundle.mjs on a page that loads nothing itself. Prints both figures, the ratio
(ours / theirs) and issue 31's and 32's targets. `--keep DIR` reuses the exports and builds there.
`--q8-variant NAME` compares another variant of ours with q8 (`int8-weights`; the bundle's
default with `default`: put a `bundle build` of the export, e.g. `--quantize auto`, at
KEEP/.../site/ours/decoder first).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

import text_exports
from text_exports import Sizes
from tjs_bench import TEXT_PAGES, copy_transformers_js, interleaved, median, row

from bundler.bundle.options import DEFAULT_RUNTIME_VERSION, merge
from bundler.commands.build import build
from bundler.console import TerminalReporter
from bundler.server.bundle_server import serve_directory
from bundler.site.runtime import fetch_runtime
from bundler.verify.browser import launch, load_settings, playwright_session

OUR_VARIANT = {"fp32": None, "q8": "int8"}  # None: the bundle's default (fp32)
OUR_VARIANTS = ("int8", "int8-weights")  # built beside fp32: what --q8-variant picks from
FULL = Sizes(encoder_layers=6, encoder_hidden=384, decoder_layers=12, decoder_hidden=768,
             vocab=8000)
SMALL = Sizes(encoder_layers=2, encoder_hidden=128, decoder_layers=2, decoder_hidden=128,
              vocab=1000)
# (metric, higher is better, target ratio ours/theirs or None); issue 31 (encoders), 32 (decoders)
TARGETS = {"sentences/s": (True, 1.2), "load ms": (False, 0.7), "bytes": (False, 0.8),
           "decode tok/s": (True, 1.2), "first token ms, first call": (False, 0.5)}


def _layers(text: str) -> tuple[int, int]:
    layers, _, hidden = text.partition("x")
    return int(layers), int(hidden)


def _site(work: Path, sizes: Sizes, reporter: TerminalReporter, only: str | None,
          eps: list[str] | None) -> Path:
    """work/site: models/{encoder,decoder} (the export folders), ours/{encoder,decoder} (the
    bundles), tjs/ (transformers.min.js and its wasm), raw/ (the page module). Kept exports and
    builds are reused."""
    site = work / "site"
    lines = text_exports.corpus(400_000 if sizes.vocab < 4000 else 4_000_000)
    makers = {"encoder": (text_exports.encoder, sizes.encoder_layers, sizes.encoder_hidden),
              "decoder": (text_exports.decoder, sizes.decoder_layers, sizes.decoder_hidden)}
    runtime = fetch_runtime(DEFAULT_RUNTIME_VERSION)
    for kind, (make, layers, hidden) in makers.items():
        if only not in (None, kind):
            continue
        folder, bundle = site / "models" / kind, site / "ours" / kind
        if not (folder / "onnx" / "model_quantized.onnx").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.parent.mkdir(parents=True, exist_ok=True)
            with reporter.step(f"Exporting the {kind} ({layers} x {hidden}, vocabulary"
                               f" {sizes.vocab}) with optimum, and its q8"):
                make(folder, layers, hidden, sizes.vocab, lines)
        if not (bundle / "bundle.json").is_file():
            with reporter.step(f"bundle build {kind} --quantize fp32 --variants"
                               f" {','.join(OUR_VARIANTS)}"):
                build(folder, merge({}, {"output": str(bundle), "runtime_dir": str(runtime),
                                         "quantize": "fp32", "variants": list(OUR_VARIANTS),
                                         **({"execution_providers": eps} if eps else {})}),
                      force=True, reporter=reporter)
    copy_transformers_js(site)
    return site


def _interleaved(browser: Any, base: str, kind: str, dtype: str, common: dict, rounds: int,
                 timeout_ms: int, reporter: TerminalReporter) -> dict[str, list[dict]]:
    """Fresh loads of each side in turn (the first side alternates by round)."""
    verb = "Embed" if kind == "encoder" else "Generate"
    sides = {
        "ours": (f"ours{verb}", {**common, "base": f"{base}ours/{kind}/",
                                 "variant": OUR_VARIANT[dtype]}),
        "transformers.js": (f"theirs{verb}", {**common, "lib": f"{base}tjs/transformers.min.js",
                                              "models": "/models/", "ort": f"{base}tjs/",
                                              "name": kind, "dtype": dtype}),
    }
    return interleaved(browser, base, TEXT_PAGES, sides, f"{kind} {dtype}", rounds, timeout_ms,
                       reporter)


def _figures(kind: str, loads: list[dict], batch: int) -> dict[str, float | None]:
    """The metrics of one side: medians over its fresh loads (later calls: over all of them)."""
    first = [load["results"][0] for load in loads]
    later = [r for load in loads for r in load["results"][1:]]
    figures: dict[str, float | None] = {
        "load ms": median([load["loadMs"] for load in loads]),
        "bytes": median([float(load["bytes"]) for load in loads])}
    if kind == "encoder":
        figures["sentences/s, first call"] = median([batch * 1000 / r["ms"] for r in first])
        figures["sentences/s, later calls"] = median([batch * 1000 / r["ms"] for r in later])
        return figures
    for label, calls in (("first call", first), ("later calls", later)):
        figures[f"first token ms, {label}"] = median([r["firstTokenMs"] for r in calls])
        figures[f"prefill tok/s, {label}"] = median(
            [r["promptTokens"] * 1000 / r["firstTokenMs"] for r in calls])
        figures[f"decode tok/s, {label}"] = median([r["decodeTokensPerS"] for r in calls])
    return figures


def _target(metric: str) -> tuple[bool, float | None]:
    for key, (higher, target) in TARGETS.items():
        if metric.startswith(key):
            return higher, target
    return (("/s" in metric), None)


def _row(metric: str, ours: float | None, theirs: float | None, applies: bool) -> list[str]:
    higher, target = _target(metric)
    return row(metric, ours, theirs, higher, target if applies else None)


def _agreement(kind: str, ours: list[dict], theirs: list[dict]) -> str:
    """How alike the two sides' outputs are: a check that both ran the same model."""
    a, b = ours[0]["results"][0], theirs[0]["results"][0]
    if kind == "encoder":
        return f"first embedding, first values: ours {a['first']}, theirs {b['first']}"
    same = sum(1 for x, y in zip(a["tokenIds"], b["tokenIds"], strict=False) if x == y)
    return (f"greedy tokens equal at {same} of {len(a['tokenIds'])} positions; prompt tokens"
            f" ours {a['promptTokens']}, theirs {b['promptTokens']}; ours ran"
            f" {ours[0]['variant']} on {ours[0]['ep']} with {ours[0]['threads']} thread(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true",
                        help=f"small models for a quick run ({SMALL.name})")
    parser.add_argument("--encoder", type=_layers, default=None, metavar="LAYERSxHIDDEN")
    parser.add_argument("--decoder", type=_layers, default=None, metavar="LAYERSxHIDDEN")
    parser.add_argument("--vocab", type=int, default=None)
    parser.add_argument("--only", choices=["encoder", "decoder"], default=None)
    parser.add_argument("--dtypes", default="fp32,q8", help="transformers.js dtypes (fp32, q8)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh loads of each side")
    parser.add_argument("--calls", type=int, default=4, help="calls per load (1 first, then"
                                                             " later calls)")
    parser.add_argument("--sentences", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--ep", default=None, help="our bundles' EPs (default: the build's)")
    parser.add_argument("--keep", type=Path, default=None, help="keep (and reuse) the work here")
    parser.add_argument("--q8-variant", default="int8",
                        help="our variant compared with q8 ('default': the bundle's default)")
    args = parser.parse_args()
    OUR_VARIANT["q8"] = None if args.q8_variant == "default" else args.q8_variant
    base_sizes = SMALL if args.small else FULL
    sizes = Sizes(*(args.encoder or (base_sizes.encoder_layers, base_sizes.encoder_hidden)),
                  *(args.decoder or (base_sizes.decoder_layers, base_sizes.decoder_hidden)),
                  args.vocab or base_sizes.vocab)
    reporter = TerminalReporter()
    work = (args.keep or Path(tempfile.mkdtemp(prefix="text-vs-tjs-"))) / sizes.name
    site = _site(work, sizes, reporter, args.only, args.ep and args.ep.split(","))
    lines = text_exports.corpus(400_000)
    texts = text_exports.sentences(args.sentences)
    kinds = [args.only] if args.only else ["encoder", "decoder"]
    settings = load_settings()
    timeout_ms = 600_000
    tables: list[tuple[str, list[list[str]], str]] = []
    with serve_directory(site) as base, playwright_session() as playwright, \
            launch(playwright, settings, webgpu=False) as browser:
        for kind in kinds:
            common: dict[str, Any]
            if kind == "encoder":
                common = {"texts": texts, "calls": args.calls}
                dims = f"{len(texts)} sentences in one batch, mean pooling, normalized"
            else:
                prompt = text_exports.prompt_of(site / "models/decoder/tokenizer.json",
                                                 args.prompt_tokens, lines)
                common = {"prompt": prompt, "newTokens": args.new_tokens, "calls": args.calls}
                dims = f"{args.prompt_tokens} prompt tokens, {args.new_tokens} new, greedy"
            for dtype in args.dtypes.split(","):
                loads = _interleaved(browser, base, kind, dtype, common, args.rounds,
                                     timeout_ms, reporter)
                ours = _figures(kind, loads["ours"], len(texts))
                theirs = _figures(kind, loads["transformers.js"], len(texts))
                rows = [_row(metric, ours[metric], theirs[metric],
                             _applies(kind, dtype, metric)) for metric in ours]
                tables.append((f"{kind} {_shape(kind, sizes)}, {dtype} (ours:"
                               f" {loads['ours'][0]['variant']}): {dims}; median of"
                               f" {args.rounds} fresh loads x {args.calls} calls", rows,
                               _agreement(kind, loads["ours"], loads["transformers.js"])))
    for title, rows, note in tables:
        reporter.table(title, ("metric", "ours", "transformers.js 4.3.1", "ours / theirs",
                               "target"), rows)
        reporter.info(note)


def _applies(kind: str, dtype: str, metric: str) -> bool:
    """Issue 31's targets are for encoders (throughput, load, bytes), issue 32's for the decoder
    (decode tokens/s on first and later calls, first token on the first call, load); both measured
    on the q8 dtype."""
    if dtype != "q8":
        return False
    if kind == "encoder":
        return metric.startswith(("sentences/s", "load ms", "bytes"))
    return metric.startswith(("decode tok/s", "first token ms, first call", "load ms"))


def _shape(kind: str, sizes: Sizes) -> str:
    if kind == "encoder":
        return f"BERT {sizes.encoder_layers} x {sizes.encoder_hidden}"
    return f"GPT-2 {sizes.decoder_layers} x {sizes.decoder_hidden}"


if __name__ == "__main__":
    main()
