"""How a variant of a text-generation model generates compared with fp32, natively: what auto
judges a generation bundle's candidates by and bundle.json's `accuracy` records.

- `tokens`: greedy-token agreement over CHECK_STEPS steps on the check prompts: the share of
  fp32's new tokens that the variant reproduces before it first parts from them (after that the
  two continue different texts, so later matches mean nothing), over all prompts.
- `perplexity`: the variant's perplexity over fp32's (a ratio; 1 is unchanged) on the check text,
  teacher-forced, one sentence at a time; on the user's held-out texts instead where the build
  was given them (`--validation texts.txt`, recorded as `validation`).
- cosine, top1, max_abs and mean_rel: of the teacher-forced logits of the check text, one row
  per position (top1: the same next token predicted).

Everything goes through the export's own tokenizer: real text, never random ids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from bundler.bundle.modelio import cpu_session
from bundler.errors import QuantizeError, first_line
from bundler.tasks.kinds.text_generation import CHECK_STEPS
from bundler.text.generate import (
    Decoder,
    eos_ids,
    generate,
    max_positions,
    prompt_ids,
    read_config,
)
from bundler.text.samples import CHECK_PROMPTS, CHECK_TEXTS
from bundler.variants.metrics import Metrics, compare_runs

MEASURED_ON = "check-text"  # bundle.json's accuracy.data for these
# The check text: the check sentences, each teacher-forced alone and cut to this many tokens.
CHECK_TEXT = tuple(text for text in CHECK_TEXTS if text)
MAX_TOKENS = 64


@dataclasses.dataclass(frozen=True)
class GenerationCheck:
    """fp32's runs on the check prompts and text, made once and compared with each variant."""

    folder: Path
    prompts: list[list[int]]
    texts: list[list[int]]
    tokens: list[list[int]]  # fp32's greedy new tokens per prompt
    logits: list[np.ndarray]  # fp32's teacher-forced logits per text, [tokens, vocab]
    eos: tuple[int, ...]
    steps: int
    data: str = MEASURED_ON  # the texts': "check-text", or "validation" (the user's)

    @property
    def nll(self) -> float:
        return _nll(self.logits, self.texts)


def _decoder(model: Path, folder: Path, config: Mapping[str, str] | None = None) -> Decoder:
    try:
        return Decoder(cpu_session(model, threads=1, config=config), read_config(folder))
    except Exception as error:
        raise QuantizeError(f"{model.name} does not run as a decoder in onnxruntime"
                            f" ({first_line(error, typed=True)})") from None


def _teacher_forced(decoder: Decoder, ids: Sequence[int]) -> np.ndarray:
    logits, _ = decoder.run(ids, None, np.ones((1, len(ids)), np.int64))
    return np.asarray(logits, np.float32)


def _nll(logits: list[np.ndarray], texts: list[list[int]]) -> float:
    """Mean negative log-likelihood of each next token of the texts (float64)."""
    total, count = 0.0, 0
    for rows, ids in zip(logits, texts, strict=True):
        rows = rows[:-1].astype(np.float64)
        top = rows.max(axis=-1, keepdims=True)
        log_z = np.log(np.exp(rows - top).sum(axis=-1)) + top[:, 0]
        total += float((log_z - rows[np.arange(len(rows)), ids[1:]]).sum())
        count += len(rows)
    return total / max(count, 1)


def reference(model: Path, folder: Path, steps: int = CHECK_STEPS,
              texts: Sequence[str] | None = None) -> GenerationCheck:
    """fp32's (`model`'s) greedy tokens on the check prompts and logits on the check text, or on
    `texts` (held-out text given with --validation), with the export `folder`'s tokenizer,
    config.json and generation_config.json."""
    from bundler.text.tokenizer import TextTokenizer

    tokenizer = TextTokenizer.from_folder(folder)
    config = read_config(folder)
    eos = eos_ids(config, read_config(folder, "generation_config.json"))
    # cut to the model's positions (a small model may have fewer than prompt + steps)
    prompts = [prompt_ids(tokenizer, p, config, steps)[0] for p in CHECK_PROMPTS]
    longest = min(MAX_TOKENS, max_positions(config) or MAX_TOKENS)
    ids_of = [[int(i) for i in tokenizer.encode([t]).input_ids[0]][:longest]
              for t in (CHECK_TEXT if texts is None else texts)]
    tokenized = [ids for ids in ids_of if len(ids) >= 2]  # one token predicts nothing
    if not tokenized:
        raise QuantizeError("--validation: no text of two tokens or more to measure perplexity"
                            " on (one text per line)")
    decoder = _decoder(model, folder)
    tokens = [generate(decoder, ids, steps, None, eos).ids for ids in prompts]
    logits = [_teacher_forced(decoder, ids) for ids in tokenized]
    return GenerationCheck(folder, prompts, tokenized, tokens, logits, eos, steps,
                           MEASURED_ON if texts is None else "validation")


def agreement(want: Sequence[Sequence[int]], got: Sequence[Sequence[int]]) -> float:
    """The share of `want`'s tokens that `got` reproduces before first parting from them."""
    kept = total = 0
    for a, b in zip(want, got, strict=True):
        same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                    min(len(a), len(b)))
        kept, total = kept + same, total + len(a)
    return kept / total if total else 1.0


def generation_judge(model: Path, folder: Path, texts: Sequence[str] | None = None
                     ) -> Callable[[Path, Mapping[str, str] | None], tuple[Metrics, int, str]]:
    """fp32's runs made once, and how each variant is measured against them (make_variants'
    judge): its Metrics on the check texts, or on held-out `texts` (--validation)."""
    check = reference(model, folder, texts=texts)
    return lambda variant, config: (measure_generation(check, variant, config), len(check.texts),
                                    check.data)


def measure_generation(check: GenerationCheck, variant: Path,
                       config: Mapping[str, str] | None = None) -> Metrics:
    """`variant` (opened with `config`, its session config entries) against fp32's runs in
    `check`: the logits metrics on the check text and the generation's `tokens` and
    `perplexity` (see the module)."""
    decoder = _decoder(variant, check.folder, config)
    tokens = [generate(decoder, ids, check.steps, None, check.eos).ids for ids in check.prompts]
    logits = [_teacher_forced(decoder, ids) for ids in check.texts]
    metrics = compare_runs(["logits"], [[rows] for rows in check.logits],
                           [[rows] for rows in logits], variant.name)
    return dataclasses.replace(
        metrics, measured_on=check.data, tokens=agreement(check.tokens, tokens),
        steps=sum(map(len, check.tokens)),
        perplexity=float(np.exp(_nll(logits, check.texts) - check.nll)))
