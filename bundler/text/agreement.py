"""What the build's check and `bundle test` compare a text-generation bundle on: per prompt, the
native reference loop's greedy tokens for N steps (the browser's must be the same ids), and the
teacher-forced logits (the browser runs its own loop fed the native tokens, step by step through
its cache, and must give native's logits of the same steps within the tolerance table's
`generation-logits` row).

Only each step's top logits travel (PROBES of them, at native's top ids): a real vocabulary's
full rows for every step of every prompt would be megabytes of JSON, and the top ones are those
that decide a token. The bound is relative to the step's logit range (max - min of native's
full row), so one number serves models whose logits are of any scale. The comparison is
bundler.tasks.kinds.spec's close_logits. A speech bundle's windows are compared the same way,
their steps teacher-forced call by call over each side's own encoding
(bundler.text.whisper_bundle), within the `transcript-logits` row."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from bundler.text.generate import Decoder, eos_ids, generate, prompt_ids, read_config

if TYPE_CHECKING:
    from bundler.text.tokenizer import TextTokenizer

PROBES = 8  # logits compared per step: native's top ones


class Stepped(Protocol):
    """A decoder stepped through its cache: bundler.text.generate.Decoder, or a speech decoder
    over one encoding (bundler.text.whisper_run.Encoding)."""

    def run(self, ids: Sequence[int], past: Any, mask: np.ndarray) -> tuple[np.ndarray, Any]:
        """Logits [len(ids), vocab] of `ids` after `past` (None: the first step) and the new
        past; `mask` covers past and ids."""
        ...


def stepwise_logits(decoder: Stepped, prompt: Sequence[int], new: Sequence[int]) -> np.ndarray:
    """Each step's logits [len(new), vocab] of the loop fed `prompt`, then `new` one id a step
    through the cache: as the browser computes them. Not one pass over the whole sequence: a
    dynamically quantized variant scales its activations per run, so one pass over many
    positions and one position at a time differ by more than any browser error."""
    rows, past, fed = [], None, list(prompt)
    for step in range(len(new)):
        mask = np.ones((1, len(prompt) + step), np.int64)
        logits, past = decoder.run(fed, past, mask)
        rows.append(logits[-1])
        fed = [new[step]]
    return np.stack(rows) if rows else np.zeros((0, 0), np.float32)


def probes(rows: np.ndarray, raw: np.ndarray | None = None) -> dict[str, list]:
    """Each step's top PROBES ids of `rows` [steps, vocab] (`at`, the lowest id first on ties),
    their values (`logits`, float64) and the step's logit `range`: max - min of `raw`'s row
    (the logits before any processing; default `rows`)."""
    rows = np.asarray(rows, np.float64)
    raw = rows if raw is None else np.asarray(raw, np.float64)
    at = np.argsort(-rows, axis=1, kind="stable")[:, :PROBES]
    return {"at": at.tolist(), "logits": np.take_along_axis(rows, at, axis=1).tolist(),
            "range": (raw.max(axis=1) - raw.min(axis=1)).tolist()}


def spread(expected: Sequence[Sequence[float]], scale: Sequence[float],
           at: Sequence[Sequence[int]], rows: np.ndarray) -> float:
    """How far another native run of the same teacher-forced steps (`rows` [steps, vocab]) is
    from the probed one: the worst |rows - `expected`| at the probed ids `at`, relative to each
    step's logit range `scale`."""
    other = np.take_along_axis(np.asarray(rows, np.float64), np.asarray(at), axis=1)
    return float(np.max(np.abs(other - np.asarray(expected, np.float64))
                        / np.maximum(np.asarray(scale, np.float64), 1e-12)[:, None],
                        initial=0.0))


def native_generations(session: Any, folder: Path, tokenizer: TextTokenizer,
                       prompts: Sequence[str], steps: int, basic: Any | None = None
                       ) -> tuple[list[dict], dict[str, Any]]:
    """(native's answer per prompt: its greedy `tokens`, the teacher-forced `logits` at the
    probed ids `at` and each step's logit `range`; the page's item: the prompts, `steps` and
    what to feed its teacher-forced runs) with `folder`'s config.json and generation_config.json.
    `basic`: the same variant at ORT_ENABLE_BASIC; each answer then has native's `spread`, its
    worst disagreement with itself on the same teacher-forced ids (|basic - full| at the probes,
    relative to the step's range), which the comparison's tolerance adds (a QDQ variant's fused
    integer kernels round differently from its unfused graph, and onnxruntime-web from both)."""
    config = read_config(folder)
    decoder = Decoder(session, config)
    eos = eos_ids(config, read_config(folder, "generation_config.json"))
    answers, teacher = [], []
    for prompt in prompts:
        ids, _ = prompt_ids(tokenizer, prompt, config, steps)
        new = generate(decoder, ids, steps, None, eos).ids
        probed = probes(stepwise_logits(decoder, ids, new))
        answer = {"tokens": new, **probed}
        if basic is not None:
            answer["spread"] = spread(probed["logits"], probed["range"], probed["at"],
                                      stepwise_logits(Decoder(basic, config), ids, new))
        answers.append(answer)
        teacher.append({"ids": ids + new, "prompt": len(ids), "at": probed["at"]})
    return answers, {"texts": list(prompts), "steps": steps, "teacher": teacher}
