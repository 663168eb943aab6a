"""text-generation: a decoder-only language model with a KV cache (an optimum
`text-generation-with-past` export, one model.onnx or a merged decoder), prompt or chat messages
in, new tokens out: model.generate() (web/text/generate.mjs; its native twin is
bundler/text/generate.py, the reference loop the build's check compares greedy tokens with)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler.errors import ConfigError
from bundler.tasks.kinds.spec import (
    FLOATS,
    ModelIO,
    TaskKind,
    close_logits,
    same_count,
    same_tokens,
)
from bundler.tasks.kinds.text import LOGITS, TOKEN_IDS

if TYPE_CHECKING:
    import onnx

    from bundler.bundle.modelio import TensorSpec
    from bundler.bundle.records import Task
    from bundler.console import Reporter
    from bundler.tasks.check import TaskComparison
    from bundler.tasks.spec import TaskSpec

NAME = "text-generation"
PAST = re.compile(r"^past_key_values\.\d+\.(key|value)$")
# Greedy tokens the build's check and `bundle test` compare per check prompt (--steps).
CHECK_STEPS = 32


def has_past(names: list[str]) -> bool:
    return any(PAST.match(name) for name in names)


def _looks_like(inputs: list[TensorSpec], outputs: list[TensorSpec]) -> str | None:
    names = [spec.name for spec in inputs]
    logits = next((s for s in outputs if s.name == LOGITS and s.type in FLOATS), None)
    if TOKEN_IDS in names and has_past(names) and logits is not None:
        return f"token ids {TOKEN_IDS}, past_key_values.* in, {LOGITS} out"
    return None


def _resolve(spec: TaskSpec, model: ModelIO) -> Task:
    from bundler.bundle.records import Task

    names = [s.name for s in model.inputs]
    outputs = [s.name for s in model.outputs]
    missing = [name for name in (TOKEN_IDS, "attention_mask") if name not in names]
    if missing or not has_past(names) or LOGITS not in outputs:
        raise ConfigError(f"task {NAME}: the model is not a decoder with past (it takes"
                          f" {', '.join(names)}; gives {', '.join(outputs)}): export it with"
                          " optimum-cli export onnx --task text-generation-with-past")
    return Task(kind=NAME, input=TOKEN_IDS, output=LOGITS, max_length=spec.max_length)


def compare_generations(native: list[dict], browser: list[dict], result: TaskComparison,
                        tolerance: float) -> None:
    """Per prompt, the same token ids, and each teacher-forced logit within `tolerance` times its
    step's logit range (`worst_score_difference`: the worst such ratio), plus native's own
    spread where measured (a quantized variant's: the worst of its prompts'); native's answers
    are bundler.text.agreement's."""
    if not same_count(native, browser, result, "generations"):
        return
    spread = max((float(want.get("spread", 0.0)) for want in native), default=0.0)
    for index, (want, got) in enumerate(zip(native, browser, strict=True)):
        what = f"prompt {index}"
        if not (same_tokens(list(want["tokens"]), list(got["tokens"]), result, what)
                and close_logits(want["logits"], want["range"], got["logits"], result,
                                 tolerance, spread, what)):
            return


def report_generations(reporter: Reporter, source: Path, task: Task,
                       result: dict[str, Any]) -> None:
    """A row per prompt: its new token ids and text."""
    rows = [[prompt, " ".join(map(str, ids)), text] for prompt, ids, text in zip(
        result["texts"], result["tokens"], result.get("generated", [""] * len(result["texts"])),
        strict=True)]
    reporter.table(f"{source}: generations", ["prompt", "token ids", "text"], rows)


def _with_new_slices(model: onnx.ModelProto, task: Task) -> onnx.ModelProto:
    # imported here: onnx takes most of a second to import, and every command imports the kinds
    # before it installs its signal handlers (bundler.interrupts)
    from bundler.text.slices import with_new_slices

    return with_new_slices(model, task)


KIND = TaskKind(
    name=NAME,
    settings=("max_length",),
    media="text",
    method="generate",
    answers="tokens",
    heading="Generate text",
    web_module="text.mjs",
    looks_like=_looks_like,
    resolve=_resolve,
    preprocess=_with_new_slices,
    preprocess_optional=True,
    compare=compare_generations,
    report=report_generations,
    compared=("prompts", "worst logit difference / range"),
)
