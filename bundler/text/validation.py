"""Real texts as the validation data of a text bundle (`--validation texts.txt` or `.jsonl`, at
build time and in `bundle test`): each text tokenized alone by the bundle's own tokenizer
(batch 1, so no padding; truncated to the task's max_length) into one feed, so that `auto` judges
its candidates on the text the bundle will be given (embeddings by cosine, labels by agreement),
not on generated ids. A text bundle given no data is measured on the built-in check sentences
(`check-text`), which are real text, though too few to show a top-1 or label budget. A
text-generation bundle's texts are its held-out text for perplexity (bundler.text.quality).

.txt: one text per line (blank lines are skipped, so a text cannot span lines); .jsonl: one JSON
value per line, a string or an object with a "text" string.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bundler.bundle.records import Task
from bundler.errors import ConfigError

if TYPE_CHECKING:
    from bundler.text.tokenizer import TextTokenizer

TEXT_SUFFIXES = (".txt", ".jsonl")
# one forward pass per text
TEXT_KINDS = ("feature-extraction", "text-classification", "token-classification")
# its texts are teacher-forced for perplexity at build time (bundler.text.quality), not fed
GENERATION_KIND = "text-generation"


def is_text_file(path: Path | None) -> bool:
    return path is not None and path.suffix.lower() in TEXT_SUFFIXES


def read_texts(path: Path, key: str = "--validation") -> list[str]:
    """The texts of a .txt or .jsonl file; a one-line ConfigError naming what is wrong."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"{key} {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{key} {path}: cannot read it as UTF-8 text ({error})") from None
    texts = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if path.suffix.lower() == ".txt":
            texts.append(line)
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{key} {path}: line {number} is not JSON ({error.msg})") from None
        text = value.get("text") if isinstance(value, dict) else value
        if not isinstance(text, str):
            raise ConfigError(f"{key} {path}: line {number} is neither a string nor an object"
                              " with a \"text\" string")
        texts.append(text)
    if not texts:
        raise ConfigError(f"{key} {path}: no texts in it (one text per line)")
    return texts


def check_text_task(path: Path, task: Task | None, key: str = "--validation",
                    kinds: Sequence[str] = (*TEXT_KINDS, GENERATION_KIND)) -> None:
    """A ConfigError unless `task` is one of `kinds`, the tasks a file of texts can validate."""
    if task is not None and task.kind == GENERATION_KIND and GENERATION_KIND not in kinds:
        raise ConfigError(f"{key} {path}: a text-generation bundle's texts are judged when it"
                          " is built (bundle build --validation: perplexity on them); here a"
                          f" file of texts validates {' or '.join(kinds)}")
    if task is None or task.kind not in kinds:
        raise ConfigError(f"{key} {path}: a file of texts validates a text bundle"
                          f" ({', '.join(kinds)}, built from its export folder);"
                          f" this one is {task.kind if task else 'not a task bundle'}: give an"
                          " .npz of its inputs")


def text_feeds(path: Path, task: Task | None, tokenizer: TextTokenizer,
               input_names: Sequence[str], key: str = "--validation"
               ) -> list[dict[str, np.ndarray]]:
    """One feed per text of `path`, tokenized by `tokenizer` (the bundle's)."""
    check_text_task(path, task, key, TEXT_KINDS)
    assert task is not None
    return tokenized(read_texts(path, key), task, tokenizer, input_names)


def tokenized(texts: Sequence[str], task: Task, tokenizer: TextTokenizer,
              input_names: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """One feed per text: each encoded alone (no padding), truncated to the task's max_length."""
    return [tokenizer.encode([text], max_length=task.max_length).to_feeds(input_names)
            for text in texts]


def check_text_feeds(task: Task | None, tokenizer_folder: Path | None,
                     input_names: Sequence[str]) -> list[dict[str, np.ndarray]] | None:
    """The built-in check sentences (bundler.text.samples) as feeds, for a text bundle given no
    data: real text, if few (None for other bundles)."""
    if task is None or task.kind not in TEXT_KINDS or tokenizer_folder is None:
        return None
    from bundler.text.samples import CHECK_TEXTS
    from bundler.text.tokenizer import TextTokenizer

    return tokenized(CHECK_TEXTS, task, TextTokenizer.from_folder(tokenizer_folder), input_names)
