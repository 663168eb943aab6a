"""token-classification's answer: a text's tokens placed in it, and its entities grouped from the
per-token labels. This module is the spec; web/tasks/entities.mjs is its browser twin (tested on
the same cases), and neither uses a tokenizer's offset mapping (@huggingface/tokenizers 0.2.0
gives none, and two mappings could differ), only its decoder.

Offsets, in code points of the text (the browser's entities give UTF-16 offsets, which JavaScript's
text.slice() takes; the check converts them):

1. Folding: each character of the text, and each token's piece, is folded alone: NFKD, lowercased,
   NFKD again, combining marks (Mn) dropped. A folded character keeps the index of the text's
   character it came from; it may be empty or several. A folded character is *blank* when its
   general category is Z* (spaces, separators), Cc or Cf.
2. Pieces: a token's piece is its id decoded alone (special tokens kept, the tokenizer's clean-up
   as it decodes), with a WordPiece model's continuing_subword_prefix ("##") removed from its
   start, then stripped of blanks at both ends. A token that decodes to "" with special tokens
   skipped is special: it has no span. A byte-level token that ends inside a character decodes
   to U+FFFD: while a run's decode holds U+FFFD, the run takes the next token (at most
   RUN_TOKENS tokens); the run is decoded as one piece, and all its tokens share its span.
3. Matching, a cursor into the folded text from 0: blanks at the cursor are skipped; a piece that
   the folded text holds at the cursor spans those characters (from the first one's text index to
   the last one's + 1) and moves the cursor past them; an empty piece spans nothing at the
   cursor. A piece that does not match (an unknown token, a normalization the folding lacks)
   spans from the cursor to the first blank after it, or to where the next token's piece
   matches, or to the end, whichever comes first (at least one character).

Entities, transformers' TokenClassificationPipeline with aggregation_strategy="simple": the
scores of each token that has a span are the softmax of its logits; its label is the best one
(the lowest index on a tie) and its score that label's. In order, a token joins the group before
it unless its label starts with "B-" or its type (the label without "B-"/"I-") differs; a group's
entity is that type, its score the mean of its tokens' scores, its start the first token's and
its end the last one's, its word the text between. Groups of type "O" are dropped.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bundler.text.tokenizer import TextTokenizer

RUN_TOKENS = 4  # the most tokens a byte-level character is decoded across
REPLACEMENT = "\ufffd"
OUTSIDE = "O"

Span = tuple[int, int]


def fold(text: str) -> str:
    """One character's (or a piece's) folding (step 1)."""
    lowered = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).lower())
    return "".join(c for c in lowered if unicodedata.category(c) != "Mn")


def _blank(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] == "Z" or category in ("Cc", "Cf")


def _strip(piece: str) -> str:
    chars = list(piece)
    while chars and _blank(chars[-1]):
        chars.pop()
    start = next((i for i, c in enumerate(chars) if not _blank(c)), len(chars))
    return "".join(chars[start:])


@dataclass(frozen=True)
class Model:
    """What the alignment reads of a tokenizer's model: WordPiece's continuing_subword_prefix
    ("" for the other models) and the unknown token's id (None: it has none)."""

    prefix: str
    unknown: int | None

    @classmethod
    def of(cls, tokenizer: TextTokenizer) -> Model:
        model = json.loads(tokenizer.tokenizer.to_str()).get("model") or {}
        prefix = model.get("continuing_subword_prefix") if model.get("type") == "WordPiece" \
            else None
        unknown = model.get("unk_token")  # Unigram names its id instead
        return cls(str(prefix or ""), tokenizer.tokenizer.token_to_id(unknown)
                   if isinstance(unknown, str) else model.get("unk_id"))


def pieces(tokenizer: TextTokenizer, ids: Sequence[int], model: Model
           ) -> list[tuple[list[int], str] | None]:
    """Step 2: per run of tokens (its positions in `ids`), its folded piece; None for a special
    token."""
    runs: list[tuple[list[int], str] | None] = []
    prefix = model.prefix
    at = 0
    while at < len(ids):
        if ids[at] != model.unknown and tokenizer.decode([ids[at]]) == "" and \
                tokenizer.decode([ids[at]], False) != "":
            runs.append(None)
            at += 1
            continue
        end = at + 1
        piece = tokenizer.decode(ids[at:end], False)
        while REPLACEMENT in piece and end < len(ids) and end - at < RUN_TOKENS:
            end += 1
            piece = tokenizer.decode(ids[at:end], False)
        if prefix and piece.startswith(prefix):
            piece = piece[len(prefix):]
        runs.append((list(range(at, end)), "".join(fold(c) for c in _strip(piece))))
        at = end
    return runs


def token_spans(tokenizer: TextTokenizer, text: str, ids: Sequence[int],
                model: Model | None = None) -> list[Span | None]:
    """Each token's (start, end) in `text` (code points), None for a special token (step 3);
    `model`: Model.of(tokenizer), read once by a caller that places many texts."""
    model = model or Model.of(tokenizer)
    folded, origin = [], []
    for index, char in enumerate(text):
        for part in fold(char):
            folded.append(part)
            origin.append(index)
    joined = "".join(folded)
    spans: list[Span | None] = [None] * len(ids)
    runs = pieces(tokenizer, [int(i) for i in ids], model)
    cursor = 0
    for number, run in enumerate(runs):
        if run is None:
            continue
        positions, piece = run
        while cursor < len(joined) and _blank(joined[cursor]):
            cursor += 1
        if not piece or joined.startswith(piece, cursor):
            end = cursor + len(piece)
            span = (origin[cursor], origin[end - 1] + 1) if piece else \
                ((origin[cursor], origin[cursor]) if cursor < len(origin) else (len(text),) * 2)
        else:
            following = next((r[1] for r in runs[number + 1:] if r is not None and r[1]), "")
            end = cursor + 1
            while end < len(joined) and not _blank(joined[end]) and not (
                    following and joined.startswith(following, end)):
                end += 1
            end = min(end, len(joined))
            span = (origin[cursor], origin[end - 1] + 1) if cursor < len(joined) else \
                (len(text), len(text))
        cursor = end
        for position in positions:
            spans[position] = span
    return spans


def _split_label(label: str) -> tuple[str, str]:
    """("B" or "I", the type): a label without a B-/I- prefix is an inside tag of itself."""
    if label.startswith(("B-", "I-")):
        return label[0], label[2:]
    return "I", label


def utf16_offsets(text: str, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`found` with its start and end in UTF-16 code units, as the browser gives them (a
    character beyond U+FFFF counts two)."""
    units = [0]
    for char in text:
        units.append(units[-1] + (2 if ord(char) > 0xFFFF else 1))
    return [{**entity, "start": units[entity["start"]], "end": units[entity["end"]]}
            for entity in found]


def entities(text: str, spans: Sequence[Span | None], logits: np.ndarray,
             labels: Sequence[str] | None) -> list[dict[str, Any]]:
    """The entities of one text from its tokens' spans and logits [tokens, labels] (see the
    module)."""
    values = np.asarray(logits, np.float64)
    exp = np.exp(values - values.max(axis=-1, keepdims=True))
    scores = exp / exp.sum(axis=-1, keepdims=True)
    groups: list[dict[str, Any]] = []
    for span, row in zip(spans, scores, strict=True):
        if span is None:
            continue
        best = int(np.argmax(row))
        label = labels[best] if labels and best < len(labels) else str(best)
        tag, kind = _split_label(label)
        last = groups[-1] if groups else None
        if last is None or tag == "B" or last["entity"] != kind:
            groups.append({"entity": kind, "scores": [], "start": span[0], "end": span[1]})
            last = groups[-1]
        last["scores"].append(float(row[best]))
        last["end"] = span[1]
    return [{"entity": group["entity"], "score": float(np.mean(group["scores"])),
             "start": group["start"], "end": group["end"],
             "word": text[group["start"]:group["end"]]}
            for group in groups if group["entity"] != OUTSIDE]
