"""Decode speed of a generation bundle's variants in Chromium on 1 WASM thread, side by side.

    python benchmarks/generation_variants.py [--layers 6] [--hidden 512] [--vocab 8000]
                                             [--new-tokens 64] [--rounds 3]

Exports a random-weight GPT-2 (LAYERS x HIDDEN, a byte-level BPE tokenizer of about VOCAB tokens
trained here on seeded made-up words) with optimum (`text-generation-with-past`), builds it as a
text-generation bundle with fp32, int4 (block 32, symmetric) and int8 (dynamic), and a second
bundle whose int4 has `accuracy_level=4` (int8 compute in MatMulNBits), then in one headless
Chromium page loads all four on WASM with 1 thread and runs model.generate() greedily in
interleaved rounds after a warm-up call each: decode tokens/s (later calls, median over rounds),
first-token ms and bytes, with ratios to fp32. Not a test: run by hand (about 8 minutes on 2
shared cores, most of it the two builds; the browser part about 2).

Measured (2026-12-06, this machine, Chromium, onnxruntime-web 1.31.1, defaults: 6x512, vocab
8000, prompt 64 tokens, 64 new): decode tok/s on later calls fp32 36.4, int4 3.5 (0.10x),
int8 dynamic 32.0 (0.88x), int4 accuracy_level=4 4.2 (0.12x); bytes 109.6 MB, 32.0 MB, 27.8 MB.
MatMulNBits is 10x slower than fp32 on onnxruntime-web's WASM: int4 saves bytes, not time.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import string
import tempfile
from pathlib import Path

from bundler.bundle.options import merge
from bundler.commands.build import build
from bundler.console import TerminalReporter
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.text.tokenizer import TextTokenizer
from bundler.verify.browser import launch, load_settings, playwright_session

PROMPT = ("The quick brown fox jumps over the lazy dog while the farmer counts his sheep, one by"
          " one, before the sun sets behind the hills.")

RUN = """async ({ base, models, prompt, newTokens, rounds }) => {
  const loaded = [];
  for (const { bundle, variant } of models) {
    const { load } = await import(base + bundle + '/bundle.mjs');
    const model = await load({ executionProviders: ['wasm'], numThreads: 1, variant });
    const first = await model.generate(prompt, { maxNewTokens: newTokens });  // warm-up
    loaded.push({ model, first: first.timings, runs: [] });
  }
  for (let round = 0; round < rounds; round++) {
    for (const entry of loaded) {
      const run = await entry.model.generate(prompt, { maxNewTokens: newTokens });
      const { tokenIds } = run;
      entry.runs.push({ ...run.timings, tokens: tokenIds.length, threads: entry.model.threads });
    }
  }
  for (const entry of loaded) await entry.model.release();
  return loaded.map(({ first, runs }) => ({ first, runs }));
}"""


def tokenizer_folder(folder: Path, vocab: int) -> int:
    """A GPT-2-style byte-level BPE of about `vocab` tokens, trained on seeded made-up words,
    saved in `folder`; its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    rng = random.Random(0)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9)))
             for _ in range(vocab * 3)]
    lines = [" ".join(rng.choices(words, k=12)) for _ in range(vocab)] + [PROMPT]
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    token = "<|endoftext|>"
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "model_max_length": 1024, "bos_token": token, "eos_token": token, "unk_token": token,
        "tokenizer_class": "GPT2Tokenizer"}), encoding="utf-8")
    return tokenizer.get_vocab_size()


def export(directory: Path, layers: int, hidden: int, vocab: int) -> Path:
    """The export folder: model.onnx with past, config files and the tokenizer."""
    import torch
    from optimum.exporters.onnx import main_export
    from transformers import GPT2Config, GPT2LMHeadModel

    tokens = directory / "tokenizer"
    size = tokenizer_folder(tokens, vocab)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=size, n_positions=512, n_embd=hidden, n_layer=layers,
                        n_head=hidden // 64, eos_token_id=0, bos_token_id=0)
    saved, folder = directory / "saved", directory / "onnx"
    GPT2LMHeadModel(config).save_pretrained(saved)
    main_export(str(saved), folder, task="text-generation-with-past", opset=17,
                local_files_only=True, do_validation=False)
    shutil.rmtree(saved)
    for path in tokens.iterdir():
        shutil.copyfile(path, folder / path.name)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--other-int4", action="append", default=[], metavar="KEY=VALUE",
                        help="--int4 settings of the second int4 (default accuracy_level=4)")
    args = parser.parse_args()
    reporter = TerminalReporter()
    other = args.other_int4 or ["accuracy_level=4"]
    with tempfile.TemporaryDirectory(prefix="bench-generation-") as scratch:
        root = Path(scratch)
        with reporter.step(f"Exporting GPT-2 {args.layers}x{args.hidden}, vocab ~{args.vocab}"):
            folder = export(root / "export", args.layers, args.hidden, args.vocab)
        bundles = {"a": "fp32,int4,int8", "b": "int4"}
        manifests = {}
        for name, variants in bundles.items():
            flags = {"output": str(root / "serve" / name), "variants": variants, "verify": False}
            if name == "b":
                flags["int4"] = tuple(other)
            manifests[name] = build(folder, merge({}, flags), reporter=reporter)
        models = [("a", "fp32"), ("a", "int4"), ("a", "int8"), ("b", "int4")]
        labels = ["fp32", "int4", "int8 (dynamic)", f"int4 {','.join(other)}"]
        prompt_tokens = len(TextTokenizer.from_folder(folder).encode([PROMPT]).input_ids[0])
        settings = load_settings()
        with reporter.step("Generating in Chromium (WASM, 1 thread)"), \
                serve_directory(root / "serve") as base_url, playwright_session() as driver, \
                launch(driver, settings, webgpu=False) as browser:
            page = browser.new_page()
            page.set_default_timeout(600_000)
            page.goto(base_url + HARNESS_PATH.lstrip("/"))
            results = page.evaluate(RUN, {
                "base": base_url, "prompt": PROMPT, "newTokens": args.new_tokens,
                "rounds": args.rounds,
                "models": [{"bundle": b, "variant": v} for b, v in models]})
    decode = [statistics.median(r["decodeTokensPerS"] for r in result["runs"])
              for result in results]
    rows = []
    for label, (bundle, variant), result, speed in zip(labels, models, results, decode,
                                                       strict=True):
        entry = manifests[bundle].variant(variant)
        accuracy = entry.accuracy
        rows.append([
            label, str(entry.bytes), f"{entry.bytes / manifests['a'].variant('fp32').bytes:.2f}",
            f"{result['first']['decodeTokensPerS']:.1f}", f"{speed:.1f}",
            f"{speed / decode[0]:.2f}x",
            f"{statistics.median(r['firstTokenMs'] for r in result['runs']):.0f}",
            str(result["runs"][0]["tokens"]), str(result["runs"][0]["threads"]),
            "-" if accuracy is None else f"{accuracy.tokens_agreement}",
            "-" if accuracy is None else f"{accuracy.perplexity_ratio}",
        ])
    reporter.table(
        f"GPT-2 {args.layers}x{args.hidden}, vocab ~{args.vocab}: prompt {prompt_tokens} tokens,"
        f" {args.new_tokens} new, greedy; Chromium"
        f" WASM 1 thread; later calls: median of {args.rounds} interleaved rounds",
        ["variant", "bytes", "size vs fp32", "decode tok/s (1st call)", "decode tok/s",
         "vs fp32", "first token ms", "tokens", "threads", "tokens agreement",
         "perplexity x"], rows)


if __name__ == "__main__":
    main()
