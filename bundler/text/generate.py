"""The native reference loop for decoder-only language models: what the browser's generation must
reproduce, token for token. It runs an onnxruntime session of an optimum export with past
(`optimum-cli export onnx --task text-generation-with-past`; inputs `input_ids`,
`attention_mask`, optional `position_ids`, `past_key_values.N.key/value` and, for a merged
decoder, `use_cache_branch`; outputs `logits` and `present.N.key/value`), feeding each step's
`present.*` back as the next step's past, and chooses tokens by bundler/text/sampling.py's spec.

The cache layout (layers, KV heads, head size, dtype) comes from the session's input metadata,
with config.json filling the dims the export left symbolic (grouped-query attention:
`num_key_value_heads`). The first step gets a zero-length past; `position_ids` follow the
attention mask as transformers computes them; EOS ids come from generation_config.json, else
config.json.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bundler.errors import ModelError
from bundler.text.sampling import Sampler, SamplingOptions

PAST = re.compile(r"^past_key_values\.(\d+)\.(key|value)$")
DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16,
          "tensor(double)": np.float64}


@dataclasses.dataclass(frozen=True)
class CacheLayout:
    """How a decoder's past key/values look: one key and one value per layer, each
    [batch, kv_heads, past_length, head_size] of `dtype`."""

    layers: int
    kv_heads: int
    head_size: int
    dtype: type
    position_ids: bool
    cache_branch: bool

    def empty(self) -> dict[str, np.ndarray]:
        """The zero-length past of the first step."""
        zero = np.zeros((1, self.kv_heads, 0, self.head_size), self.dtype)
        return {f"past_key_values.{layer}.{kind}": zero
                for layer in range(self.layers) for kind in ("key", "value")}


def read_config(folder: Path, name: str = "config.json") -> dict[str, Any]:
    """A JSON config of an export folder; {} when the folder has none."""
    path = Path(folder) / name
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ModelError(f"cannot read {path}: {error}") from None


def _config_dims(config: dict[str, Any]) -> tuple[int | None, int | None]:
    """KV heads and head size as config.json states them (GPT-2, Llama, Qwen2, Phi, Gemma)."""
    heads = config.get("num_attention_heads", config.get("n_head"))
    kv_heads = config.get("num_key_value_heads", heads)
    head_size = config.get("head_dim")
    hidden = config.get("hidden_size", config.get("n_embd"))
    if head_size is None and hidden and heads:
        head_size = hidden // heads
    return kv_heads, head_size


def cache_layout(session: Any, config: dict[str, Any] | None = None) -> CacheLayout:
    """The cache layout of `session`, from its inputs' metadata and, for symbolic dims, config."""
    inputs = {item.name: item for item in session.get_inputs()}
    past = {PAST.match(name) for name in inputs} - {None}
    layers = sorted({int(match.group(1)) for match in past})
    if not layers or "input_ids" not in inputs or "attention_mask" not in inputs:
        raise ModelError("not a decoder with past: it needs input_ids, attention_mask and"
                         " past_key_values.N.key/value inputs (optimum's"
                         " --task text-generation-with-past)")
    if layers != list(range(len(layers))) or len(past) != 2 * len(layers):
        raise ModelError(f"the past_key_values inputs skip layers: {sorted(inputs)}")
    first = inputs["past_key_values.0.key"]
    if len(first.shape) != 4:
        raise ModelError(f"past_key_values.0.key has shape {first.shape}; expected"
                         " [batch, kv_heads, past_length, head_size]")
    stated = _config_dims(config or {})
    dims = []
    for axis, name, from_config in ((1, "KV heads", stated[0]), (3, "head size", stated[1])):
        from_model = first.shape[axis] if isinstance(first.shape[axis], int) else None
        if from_model and from_config and from_model != from_config:
            raise ModelError(f"config.json gives {from_config} {name} but the model's past has"
                             f" {from_model}")
        if not (from_model or from_config):
            raise ModelError(f"the model's past leaves its {name} symbolic and config.json does"
                             " not state it")
        dims.append(from_model or from_config)
    if first.type not in DTYPES:
        raise ModelError(f"past_key_values.0.key is {first.type}; expected a float tensor")
    return CacheLayout(len(layers), dims[0], dims[1], DTYPES[first.type],
                       "position_ids" in inputs, "use_cache_branch" in inputs)


def eos_ids(config: dict[str, Any], generation_config: dict[str, Any]) -> tuple[int, ...]:
    """The ids that end a generation: generation_config.json's eos_token_id, else config.json's."""
    value = generation_config.get("eos_token_id", config.get("eos_token_id"))
    if value is None:
        return ()
    return tuple(value) if isinstance(value, list) else (int(value),)


def max_positions(config: dict[str, Any]) -> int | None:
    """The positions the model has (max_position_embeddings; GPT-2: n_positions); None when
    config.json does not say."""
    value = config.get("max_position_embeddings", config.get("n_positions"))
    return value if isinstance(value, int) and value > 0 else None


def fit_prompt(ids: Sequence[int], config: dict[str, Any], max_new_tokens: int
               ) -> tuple[list[int], int]:
    """(the prompt's ids that leave room for `max_new_tokens` in the model's positions, how many
    were dropped): a longer prompt loses its first ids (the end of a prompt is what the next
    token follows). web/text/generate.mjs's fitPrompt is the twin."""
    limit = max_positions(config)
    if limit is None or len(ids) + max_new_tokens <= limit:
        return list(ids), 0
    room = limit - max_new_tokens
    if room < 1:
        raise ModelError(f"{max_new_tokens} new tokens leave no room for a prompt in the model's"
                         f" {limit} positions")
    return list(ids[len(ids) - room:]), len(ids) - room


def position_ids(mask: np.ndarray, length: int) -> np.ndarray:
    """transformers' positions: the mask's running count less one (1 where masked), last
    `length` columns."""
    positions = np.cumsum(mask, axis=-1) - 1
    positions[mask == 0] = 1
    return positions[:, -length:].astype(np.int64)


@dataclasses.dataclass
class Generation:
    """The new token ids (an EOS that ended the run included) and each step's seconds; step 0
    is the prefill of the prompt."""

    ids: list[int]
    step_seconds: list[float]

    @property
    def prefill_seconds(self) -> float:
        return self.step_seconds[0] if self.step_seconds else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        later = self.step_seconds[1:]
        return len(later) / sum(later) if later and sum(later) > 0 else 0.0


class Decoder:
    """One export's session and layout; `step` runs new ids against the cache it keeps."""

    def __init__(self, session: Any, config: dict[str, Any] | None = None) -> None:
        self.session = session
        self.layout = cache_layout(session, config)
        self.outputs = [item.name for item in session.get_outputs()]
        if "logits" not in self.outputs:
            raise ModelError(f"the model has no logits output: {self.outputs}")

    def run(self, ids: Sequence[int], past: dict[str, np.ndarray] | None,
            mask: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Logits [len(ids), vocab] of `ids` after `past` (None: the first step) and the cache
        with them. `mask` covers past and ids."""
        feed: dict[str, np.ndarray] = {"input_ids": np.asarray([ids], np.int64),
                                       "attention_mask": mask}
        if self.layout.position_ids:
            feed["position_ids"] = position_ids(mask, len(ids))
        if self.layout.cache_branch:
            feed["use_cache_branch"] = np.array([past is not None])
        feed.update(past if past is not None else self.layout.empty())
        values = dict(zip(self.outputs, self.session.run(self.outputs, feed), strict=True))
        present = {name.replace("present", "past_key_values", 1): value
                   for name, value in values.items() if name.startswith("present.")}
        return values["logits"][0], present


def generate(decoder: Decoder, prompt: Sequence[int], max_new_tokens: int = 32,
             sampling: SamplingOptions | None = None,
             eos: Iterable[int] = ()) -> Generation:
    """Generates up to `max_new_tokens` after `prompt`, greedily or by the sampling spec,
    stopping after an id in `eos`."""
    if not prompt:
        raise ModelError("generation needs a prompt of at least one token")
    sampler, stop = Sampler(sampling), set(eos)
    seen, new, seconds = list(prompt), [], []
    past: dict[str, np.ndarray] | None = None
    pending: list[int] = list(prompt)
    while len(new) < max_new_tokens:
        mask = np.ones((1, len(seen)), np.int64)
        started = time.perf_counter()
        logits, past = decoder.run(pending, past, mask)
        token = sampler.next(logits[-1], seen)
        seconds.append(time.perf_counter() - started)
        new.append(token)
        seen.append(token)
        pending = [token]
        if token in stop:
            break
    return Generation(new, seconds)


def teacher_forced_logits(decoder: Decoder, ids: Sequence[int]) -> np.ndarray:
    """The logits [len(ids), vocab] of the whole sequence in one prefill: row i predicts ids[i+1],
    what a browser run's per-step logits are compared with."""
    logits, _ = decoder.run(ids, None, np.ones((1, len(ids)), np.int64))
    return logits


def prompt_ids(tokenizer: Any, prompt: str, config: dict[str, Any], max_new_tokens: int
               ) -> tuple[list[int], int]:
    """A prompt's ids as model.generate() feeds them (tokenized by `tokenizer`, a TextTokenizer,
    and cut by fit_prompt) and how many of its first ids were dropped."""
    return fit_prompt([int(i) for i in tokenizer.encode([prompt]).input_ids[0]], config,
                      max_new_tokens)


def prompt_generations(session: Any, folder: Path, tokenizer: Any, prompts: Sequence[str],
                       max_new_tokens: int, sampling: SamplingOptions | None = None
                       ) -> list[list[int]]:
    """The new token ids of each prompt, tokenized by `tokenizer` (a TextTokenizer) as
    model.generate() tokenizes a prompt (and cuts it, fit_prompt), with `folder`'s config.json
    and generation_config.json (EOS): what the browser's tokens are compared with."""
    config = read_config(folder)
    decoder = Decoder(session, config)
    eos = eos_ids(config, read_config(folder, "generation_config.json"))
    runs = []
    for prompt in prompts:
        ids, _ = prompt_ids(tokenizer, prompt, config, max_new_tokens)
        runs.append(generate(decoder, ids, max_new_tokens, sampling, eos).ids)
    return runs
