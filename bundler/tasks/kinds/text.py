"""What the text kinds share (feature-extraction, text- and token-classification): the token-ids
input, their resolution against the model, and the browser-vs-native comparison of embeddings. The
pipeline is bundler.text.reference (Python) and web/tasks/text.mjs (browser); the tokenizer and
config files come from the export folder (bundler.text.folder)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler.errors import ConfigError
from bundler.tasks.kinds.spec import FLOATS, ModelIO, same_count
from bundler.verify.tolerance import tolerance_for

if TYPE_CHECKING:
    from bundler.bundle.modelio import TensorSpec
    from bundler.bundle.records import Task
    from bundler.console import Reporter
    from bundler.tasks.check import TaskComparison
    from bundler.tasks.spec import TaskSpec

TOKEN_IDS = "input_ids"
LOGITS = "logits"
TEXT_SETTINGS = ("input", "output", "max_length")
# Embeddings from the browser and from native onnxruntime (of the same variant) agree to this
# cosine similarity per row, or the check fails (bundler.verify.tolerance's one table).
MIN_COSINE = 1 - tolerance_for("task-embeddings").atol


def looks_like_text(rank: int, logits: bool | None = None) -> Any:
    """A kind's looks_like: token ids in, a float output of `rank` dims first out; `logits`:
    that output is (True) or is not (False) named "logits", as optimum names a head's scores
    (a tagger's [batch, tokens, labels] and an encoder's token vectors have the same rank)."""

    def looks_like(inputs: list[TensorSpec], outputs: list[TensorSpec]) -> str | None:
        ids = next((s for s in inputs if s.name == TOKEN_IDS and s.type == "int64"), None)
        if any(s.name.startswith("past_key_values.") for s in inputs):
            return None  # a decoder with a KV cache: text-generation's
        first = outputs[0]
        if logits is not None and (first.name == LOGITS) != logits:
            return None
        if ids is not None and first.type in FLOATS and len(first.shape or ()) == rank:
            return f"token ids {ids.name}, {first.name} of {rank} dims"
        return None

    return looks_like


def resolve_text(spec: TaskSpec, model: ModelIO, rank: int, **kind_fields: Any) -> Task:
    """The task record of a text kind: the token-ids input, the float output of `rank` dims it
    reads (the one named by `output`, else the first such), and `kind_fields`."""
    from bundler.bundle.records import Task

    names = [s.name for s in model.inputs]
    token_ids = spec.input or TOKEN_IDS
    if token_ids not in names:
        raise ConfigError(f"task {spec.kind}: the model has no input {token_ids!r} (it has:"
                          f" {', '.join(names)}); give input=NAME")
    output = spec.output or next((s.name for s in model.outputs if s.type in FLOATS
                                  and len(s.shape or ()) == rank), None)
    if output is None:
        raise ConfigError(f"task {spec.kind}: the model has no float output of {rank} dims"
                          f" (it has: {', '.join(s.name for s in model.outputs)}); give"
                          " output=NAME")
    return Task(kind=spec.kind, input=token_ids, output=output,
                max_length=spec.max_length, **kind_fields)


def cosine(a: list[float], b: list[float]) -> float:
    import numpy as np

    x, y = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    if x.shape != y.shape:
        return -1.0
    scale = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y / scale) if scale else float(np.array_equal(x, y))


def compare_embeddings(native: list[Any], browser: list[Any], result: TaskComparison,
                       tolerance: float) -> None:
    """One row per text, each within cosine MIN_COSINE of native's (`tolerance` is for scores;
    an embedding's scale is the model's own, so its direction is what is compared)."""
    if not same_count(native, browser, result, "embeddings"):
        return
    lowest = min((cosine(a, b) for a, b in zip(native, browser, strict=True)), default=1.0)
    result.worst_score_difference = 1 - lowest
    if lowest < MIN_COSINE:
        result.error = f"an embedding's cosine to native is {lowest:.6f} (< {MIN_COSINE})"


def report_texts(reporter: Reporter, source: Path, task: Task, result: dict[str, Any]) -> None:
    """`bundle run --text`: a row per text."""
    if "classes" in result:
        texts = [f"{text} | {pair}" for text, pair in zip(result["texts"], result["pairs"],
                                                          strict=True)] \
            if "pairs" in result else result["texts"]
        rows = [[text, ", ".join(f"{c['label']} {c['score']:.4f}" for c in classes)]
                for text, classes in zip(texts, result["classes"], strict=True)]
        reporter.table(f"{source}: labels", ["text", "top labels"], rows)
        return
    rows = [[text, f"{len(row)}", ", ".join(f"{v:.4f}" for v in _flat(row)[:4]) + ", ..."]
            for text, row in zip(result["texts"], result["embeddings"], strict=True)]
    pooling = "pooled in the model" if task.pooling == "model" else f"{task.pooling} pooling"
    reporter.table(f"{source}: embeddings ({pooling})", ["text", "size", "values"], rows)


def _flat(row: Any) -> list[float]:
    return [v for item in row for v in _flat(item)] if isinstance(row, list) else [row]
