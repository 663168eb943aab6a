"""A text task run end to end natively, from texts to embeddings, labels or entities: the
reference `bundle test` compares model.embed(), model.classify() and model.tokens() with
(web/tasks/text.mjs is the browser twin). The texts are tokenized (truncated to the task's
max_length) with the Python tokenizer of the bundle's own tokenizer files and run in length
groups (`length_groups`), each group padded to its longest text; the rows come back in the
caller's order.

Length groups, the one spec (web/tasks/text.mjs's lengthGroups is its twin, tested on the same
cases): the texts are ordered by token count, shortest first (ties in the caller's order), and
cut into runs of that order. A run takes the next text (the longest so far) while it holds fewer
than GROUP_TEXTS texts and its padded tokens (texts x longest) stay within GROUP_PADDING times its
real tokens; else the next text starts a new run. A batch padded to its longest text spends the
padding's compute for nothing (sentence-transformers sorts by length for the same reason), and the
bounds keep each run's waste and memory small while similar lengths still share one run.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bundler.bundle.records import Task
from bundler.errors import ConfigError
from bundler.tasks.classify import top_classes
from bundler.tasks.kinds.registry import kind_of
from bundler.text.entities import Model, entities, token_spans

if TYPE_CHECKING:
    from bundler.text.tokenizer import TextTokenizer

Run = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
GROUP_TEXTS = 32  # the most texts in one run
GROUP_PADDING = 1.125  # a run's padded tokens over its real tokens, at most


def length_groups(lengths: Sequence[int]) -> list[list[int]]:
    """The runs of texts with these token counts, as indices into `lengths` (see the module)."""
    groups: list[list[int]] = []
    real = 0
    for index in sorted(range(len(lengths)), key=lambda i: (lengths[i], i)):
        length = lengths[index]
        group = groups[-1] if groups else []
        if not group or len(group) >= GROUP_TEXTS or \
                (len(group) + 1) * length > GROUP_PADDING * (real + length):
            groups.append([index])
            real = length
        else:
            group.append(index)
            real += length
    return groups


def pooled(hidden: np.ndarray, mask: np.ndarray, pooling: str | None, normalize: bool | None
           ) -> list[Any]:
    """[batch, tokens, size] -> one row per text: the mean of the tokens the attention mask
    keeps, the first kept token's vector (cls), the kept tokens' maximum per dimension (max),
    the last kept token's vector (last), or (none) every kept token's; [batch, size] (model:
    pooled in the graph) -> its rows. Rows scaled to length 1 when `normalize`. Float64
    arithmetic, float32 values, as the browser's twin does."""
    hidden = np.asarray(hidden, np.float64)
    if pooling == "model":
        rows = hidden
    else:
        keep = np.asarray(mask, np.float64)[:, :, None] > 0
        # cls and last: the first and last tokens the mask keeps (a tokenizer may pad on the
        # left, or on the right: sentence-transformers' lasttoken looks for the mask's last 1)
        first = np.argmax(keep[:, :, 0], axis=1)
        last = keep.shape[1] - 1 - np.argmax(keep[:, ::-1, 0], axis=1)
        if pooling == "none":
            return [hidden[i, keep[i, :, 0]].astype(np.float32).tolist()
                    for i in range(hidden.shape[0])]
        if pooling in ("cls", "last"):
            rows = hidden[np.arange(hidden.shape[0]), first if pooling == "cls" else last]
        elif pooling == "max":
            rows = np.where(keep, hidden, -np.inf).max(axis=1)
        else:
            rows = (hidden * keep).sum(axis=1) / np.maximum(keep.sum(axis=1), 1e-9)
    if normalize:
        rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return rows.astype(np.float32).tolist()


def run_text(run: Run, task: Task, tokenizer: TextTokenizer, input_names: Sequence[str],
             texts: Sequence[str], *, top_k: int | None = None,
             pairs: Sequence[str] | None = None) -> dict[str, Any]:
    """{"texts", "embeddings": a row per text} for feature-extraction, {"texts", "classes": the
    top classes per text} for text-classification, {"texts", "entities": per text, its
    entities (bundler.text.entities)} for token-classification. `pairs`: a second text per text,
    encoded with it as one input (a cross-encoder's query and passage), text-classification's."""
    kind = kind_of(task.kind)
    if kind.media != "text" or kind.answers is None:
        raise ConfigError(f"--text: this bundle's task is {task.kind}, not a text task")
    if pairs is not None and kind.name != "text-classification":
        raise ConfigError(f"--pair: text pairs are scored by a text-classification bundle (a"
                          f" cross-encoder); this one is {task.kind}")
    lengths = tokenizer.encode(list(texts), pairs, max_length=task.max_length
                               ).attention_mask.sum(axis=1)
    model = Model.of(tokenizer)
    rows: list[Any] = [None] * len(texts)
    for group in length_groups(lengths.tolist()):
        batch = tokenizer.encode([texts[i] for i in group], None if pairs is None else
                                 [pairs[i] for i in group], max_length=task.max_length)
        output = run(batch.to_feeds(list(input_names)))[task.output]
        if kind.name == "feature-extraction":
            answers = pooled(output, batch.attention_mask, task.pooling, task.normalize)
        elif kind.name == "token-classification":
            answers = [_entities(tokenizer, texts[index], ids[keep > 0], logits[keep > 0],
                                 task, model)
                       for index, ids, keep, logits in zip(group, batch.input_ids,
                                                           batch.attention_mask,
                                                           np.asarray(output), strict=True)]
        else:
            answers = [top_classes(row, task, top_k) for row in np.asarray(output)]
        for index, answer in zip(group, answers, strict=True):
            rows[index] = answer
    paired = {} if pairs is None else {"pairs": list(pairs)}
    return {"texts": list(texts), **paired, kind.answers: rows}


def _entities(tokenizer: TextTokenizer, text: str, ids: np.ndarray, logits: np.ndarray,
              task: Task, model: Model) -> list[dict[str, Any]]:
    return entities(text, token_spans(tokenizer, text, ids.tolist(), model), logits,
                    task.labels)


def bundle_tokenizer(directory: Path, task: Task, scratch: Path) -> TextTokenizer:
    """The Python tokenizer of a built bundle's shipped text files (under their names in the
    export folder again)."""
    from bundler.text.tokenizer import TextTokenizer

    folder = scratch / "tokenizer"
    folder.mkdir(parents=True, exist_ok=True)
    for name, path in (task.files or {}).items():
        shutil.copyfile(directory / path, folder / name)
    return TextTokenizer.from_folder(folder)


def run_generation(session: Any, directory: Path, task: Task, prompts: Sequence[str],
                   max_new_tokens: int) -> dict[str, Any]:
    """{"texts", "tokens": the new ids per prompt, "generated": their text, "truncated": the
    prompt's first ids dropped to fit the model}: a text-generation bundle's greedy continuation
    by the native reference loop (bundler.text.generate), with the bundle's own tokenizer and
    config files; `session` an onnxruntime InferenceSession."""
    import tempfile

    from bundler.text.generate import prompt_generations, prompt_ids, read_config

    with tempfile.TemporaryDirectory(prefix="bundle-text-") as scratch:
        folder = Path(scratch) / "tokenizer"
        tokenizer = bundle_tokenizer(directory, task, Path(scratch))
        tokens = prompt_generations(session, folder, tokenizer, prompts, max_new_tokens)
        config = read_config(folder)
        truncated = [prompt_ids(tokenizer, prompt, config, max_new_tokens)[1]
                     for prompt in prompts]
    return {"texts": list(prompts), "tokens": tokens,
            "generated": [tokenizer.decode(ids) for ids in tokens], "truncated": truncated}
