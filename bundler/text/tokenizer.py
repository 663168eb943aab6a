"""Text to model inputs (and ids back to text) with the `tokenizers` library, as a bundle does it.

The browser twin is web/text/tokenizer.mjs (over @huggingface/tokenizers); both follow the rules
below, written once here, so a bundle's page feeds a model the ids its Python reference feeds.
tests/test_text_tokenizer.py checks the two on tests/data/text_corpus.json.

Settings (`Settings.read`): from tokenizer_config.json, with special_tokens_map.json filling keys
it lacks; a token may be written as a string or as {"content": ...}.

    model_max_length       the cap on a row's length; absent or >= 1e9 (transformers writes 1e30
                           for "unknown") means no cap
    pad_token              its id pads; without one (or one not in the vocabulary) the id is
                           tokenizer.json's padding.pad_id, else 0 (padding is masked out anyway)
    padding_side           "right" (default) or "left"
    truncation_side        "right" (default: the end is cut) or "left" (the start is cut)
    add_special_tokens     the default of encode's argument (true when absent)
    clean_up_tokenization_spaces   decode joins " ." -> "." and the like (false when absent)

tokenizer.json's own "truncation" and "padding" sections are ignored (as transformers does: it sets
them per call): the settings above govern.

Encoding a batch of texts (each with an optional pair); steps 1-3 are what the tokenizers
library does itself (this module calls it with the limit of step 2), spelled out for the
JavaScript side, which implements them over @huggingface/tokenizers:

1. Each text and each pair is tokenized alone, without special tokens.
2. The limit is min(max_length, model_max_length), either may be absent. With a limit, the budget
   is limit - S, where S is the number of special tokens the post-processor adds to one text (or to
   a pair) when special tokens are added, else 0; a limit under S is an error. Truncation is the
   tokenizers library's "longest_first": a lone text keeps `budget` tokens; for a pair of lengths
   (short, long), nothing is cut when short + long <= budget, else long keeps
   max(short, budget - short) (short if short > budget) and short keeps its length, and when these
   still exceed the budget, the first text of the pair keeps budget // 2 and the second
   budget // 2 + budget % 2 (or the other way round when the first is the longer). Tokens are
   cut from the truncation side.
3. The tokenizer's post-processor (tokenizer.json's template, BERT, RoBERTa...) adds the special
   tokens and gives token_type_ids. Where it gives none (no post-processor, ByteLevel), the
   text's tokens have type 0 and the pair's type 1; RobertaProcessing gives 0 to both.
4. Rows are padded to the longest in the batch, on the padding side, with the pad id;
   attention_mask is 1 for tokens and 0 for padding, token_type_ids is 0 for padding. Every
   array is int64, shaped [batch, longest].

Decoding: the library's decoder, skipping special tokens (added tokens marked special) unless told
not to, then the clean-up above when the setting is on. Empty ids decode to "".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Encoding, Tokenizer

from bundler.errors import ConfigError, ModelError

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
NO_CAP = 10**9  # model_max_length at or over this means "no cap"
FEED_NAMES = ("input_ids", "attention_mask", "token_type_ids")
SIDES = ("right", "left")
# tokenizer.json's steps (by part) that the browser's side cannot take: @huggingface/tokenizers
# 0.2.0 has none of them ("Unknown Normalizer type") and web/text/tokenizer.mjs does not supply
# them, so a bundle would give its model other ids in the page than in Python.
BROWSER_LACKS = {"normalizer": ("ByteLevel",),
                 "pre_tokenizer": ("CharDelimiterSplit", "UnicodeScripts")}
# Where each part keeps the steps of a Sequence.
SEQUENCE_KEYS = {"normalizer": "normalizers", "pre_tokenizer": "pretokenizers"}
# transformers' clean_up_tokenization, which @huggingface/tokenizers applies alike.
CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
            (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _read_json(path: Path, required: bool) -> dict[str, Any]:
    if not path.is_file():
        if required:
            raise ConfigError(f"{path}: not found; a text model's folder needs the {path.name}"
                              " its tokenizer was saved with (tokenizer.save_pretrained(folder))")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path}: cannot be read as JSON ({error}); save the tokenizer again"
                          " with tokenizer.save_pretrained(folder)") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: holds {type(data).__name__}, not a JSON object; save the"
                          " tokenizer again with tokenizer.save_pretrained(folder)")
    return data


def _steps(step: Any, key: str) -> list[dict[str, Any]]:
    """A tokenizer.json part's steps, those inside a Sequence included."""
    if not isinstance(step, dict):
        return []
    return [step] + [inner for nested in step.get(key) or [] for inner in _steps(nested, key)]


def browser_difference(tokenizer_json: dict[str, Any]) -> str | None:
    """Why the browser's tokenizer (web/text/tokenizer.mjs) cannot give the ids this
    tokenizer.json gives in Python, or None: a step it lacks (BROWSER_LACKS), or a BPE model with
    dropout, which tokenizes at random on each call in Python too."""
    for part, lacking in BROWSER_LACKS.items():
        for step in _steps(tokenizer_json.get(part), SEQUENCE_KEYS[part]):
            if step.get("type") in lacking:
                return (f"its {part} {step['type']} is one the browser's tokenizer"
                        " (@huggingface/tokenizers) does not have")
    dropout = (tokenizer_json.get("model") or {}).get("dropout")
    if isinstance(dropout, (int, float)) and dropout > 0:
        return f"its BPE model has dropout {dropout}, which tokenizes a text at random"
    return None


@dataclass(frozen=True)
class Settings:
    """What tokenizer_config.json (and special_tokens_map.json) say about encoding and decoding."""

    model_max_length: int | None = None
    pad_token: str | None = None
    padding_side: str = "right"
    truncation_side: str = "right"
    add_special_tokens: bool = True
    clean_up_tokenization_spaces: bool = False

    @classmethod
    def read(cls, config: dict[str, Any], special_tokens: dict[str, Any] | None = None,
             where: str = CONFIG_FILE) -> Settings:
        merged = {**(special_tokens or {}), **config}
        cap = merged.get("model_max_length")
        cap = int(cap) if isinstance(cap, (int, float)) and not isinstance(cap, bool) else None
        sides = {}
        for key in ("padding_side", "truncation_side"):
            side = merged.get(key) or "right"
            if side not in SIDES:
                raise ConfigError(f"{where}: {key} is {side!r}; it must be 'right' or 'left'")
            sides[key] = side
        return cls(model_max_length=cap if cap is not None and 0 < cap < NO_CAP else None,
                   pad_token=_token_text(merged.get("pad_token")),
                   add_special_tokens=merged.get("add_special_tokens", True) is not False,
                   clean_up_tokenization_spaces=merged.get("clean_up_tokenization_spaces")
                   is True, **sides)


@dataclass(frozen=True)
class TokenBatch:
    """A batch of encoded texts: int64 arrays shaped [batch, longest]."""

    input_ids: np.ndarray
    attention_mask: np.ndarray
    token_type_ids: np.ndarray

    def to_feeds(self, input_names: Iterable[str]) -> dict[str, np.ndarray]:
        """The arrays a model with these input names takes, by name."""
        feeds = {}
        for name in input_names:
            if name not in FEED_NAMES:
                raise ModelError(f"the model's input {name!r} is not one a tokenizer gives"
                                 f" ({', '.join(FEED_NAMES)})")
            feeds[name] = getattr(self, name)
        return feeds


class TextTokenizer:
    """A tokenizer.json with its settings; encodes batches and decodes ids (see the module)."""

    def __init__(self, tokenizer: Tokenizer, settings: Settings | None = None,
                 files: tuple[str, ...] = (TOKENIZER_FILE,)) -> None:
        self.settings = settings or Settings()
        pad = self.settings.pad_token
        pad_id = tokenizer.token_to_id(pad) if pad is not None else None
        if pad_id is None:
            pad_id = (tokenizer.padding or {}).get("pad_id", 0)
        self.pad_id = int(pad_id)
        tokenizer.no_truncation()  # encode sets it per call; tokenizer.json's sections are ignored
        tokenizer.no_padding()
        self.tokenizer = tokenizer
        self.files = files

    @classmethod
    def from_folder(cls, folder: Path) -> TextTokenizer:
        """The tokenizer saved in `folder` (tokenizer.json, and the optional tokenizer_config.json
        and special_tokens_map.json)."""
        folder = Path(folder)
        path = folder / TOKENIZER_FILE
        _read_json(path, required=True)  # one clear line for a missing or broken file
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as error:  # the library raises its own Exception for a bad model
            raise ConfigError(f"{path}: the tokenizers library cannot load it"
                              f" ({str(error).splitlines()[0][:200]}); save it again with a"
                              " recent tokenizers/transformers") from None
        config = _read_json(folder / CONFIG_FILE, required=False)
        special = _read_json(folder / SPECIAL_TOKENS_FILE, required=False)
        files = tuple(name for name in (TOKENIZER_FILE, CONFIG_FILE, SPECIAL_TOKENS_FILE)
                      if (folder / name).is_file())
        return cls(tokenizer, Settings.read(config, special, str(folder / CONFIG_FILE)), files)

    def special_count(self, pair: bool, add_special_tokens: bool = True) -> int:
        """The number of special tokens added to one text (or a pair)."""
        return self.tokenizer.num_special_tokens_to_add(pair) if add_special_tokens else 0

    def limit(self, max_length: int | None, pair: bool, add_special_tokens: bool) -> int | None:
        """A row's greatest length (step 2), or None for no limit."""
        caps = [cap for cap in (max_length, self.settings.model_max_length) if cap is not None]
        if not caps:
            return None
        limit, specials = min(caps), self.special_count(pair, add_special_tokens)
        if limit < specials:
            raise ConfigError(f"max_length {limit} leaves no room for text: the tokenizer adds"
                              f" {specials} special tokens to each {'pair' if pair else 'text'}")
        return limit

    def encode(self, texts: Sequence[str], pairs: Sequence[str] | None = None, *,
               max_length: int | None = None,
               add_special_tokens: bool | None = None) -> TokenBatch:
        """The batch of `texts` (with `pairs`, one per text), truncated and padded as the module
        says; add_special_tokens None follows the settings. Not thread-safe: it sets the
        library's truncation for the call."""
        if isinstance(texts, str) or (pairs is not None and isinstance(pairs, str)):
            raise TypeError("encode takes a sequence of texts; wrap one text in a list")
        if pairs is not None and len(pairs) != len(texts):
            raise ConfigError(f"{len(texts)} texts but {len(pairs)} pairs: give one pair per text")
        special = self.settings.add_special_tokens if add_special_tokens is None \
            else add_special_tokens
        limit = self.limit(max_length, pairs is not None, special)
        # Steps 1-3 are the library's own: its truncation (longest_first, special tokens
        # counted) is the rule web/text/tokenizer.mjs implements.
        if limit is None:
            self.tokenizer.no_truncation()
        else:
            self.tokenizer.enable_truncation(limit, strategy="longest_first",
                                             direction=self.settings.truncation_side)
        inputs = list(texts) if pairs is None else list(zip(texts, pairs, strict=True))
        return self._padded(self.tokenizer.encode_batch(inputs, add_special_tokens=special))

    def _padded(self, rows: list[Encoding]) -> TokenBatch:
        longest = max((len(row.ids) for row in rows), default=0)
        ids = np.full((len(rows), longest), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), longest), dtype=np.int64)
        types = np.zeros((len(rows), longest), dtype=np.int64)
        for index, row in enumerate(rows):
            n = len(row.ids)
            where = slice(longest - n, longest) if self.settings.padding_side == "left" \
                else slice(0, n)
            ids[index, where] = row.ids
            mask[index, where] = 1
            types[index, where] = row.type_ids
        return TokenBatch(ids, mask, types)

    def decode(self, ids: Sequence[int] | np.ndarray, skip_special_tokens: bool = True) -> str:
        """The text of one row of `ids` (see the module for the rules)."""
        row = np.asarray(ids)
        if row.ndim != 1:
            raise TypeError(f"decode takes one row of ids, not an array shaped {row.shape}")
        text = self.tokenizer.decode([int(i) for i in row], skip_special_tokens=skip_special_tokens)
        if self.settings.clean_up_tokenization_spaces:
            for before, after in CLEAN_UP:
                text = text.replace(before, after)
        return text
