"""A speech export's decoding and front-end configs as the bundle ships them. An export can leave
out what Whisper's decoding needs: a model saved from its config alone (random weights, or a
fine-tune saved without its processor) gets a generation_config.json with config.json's ids
only (no <|notimestamps|>, languages or tasks), and no preprocessor_config.json. Where so, the
missing keys are filled as Whisper's own checkpoints have them, from the tokenizer's special
tokens and config.json, and only those: transformers' generate() given the completed
generation config decodes what the bundle decodes.

The completed files are written to the user cache under their content's digest, so the build,
its native reference and the bundle's two twins all read the same bytes."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bundler.errors import ConfigError
from bundler.tasks.logmel import SETTINGS, LogMelSpec

GENERATION, FRONT_END = "generation_config.json", "preprocessor_config.json"
START, END = "<|startoftranscript|>", "<|endoftext|>"
NO_TIMESTAMPS, TASKS = "<|notimestamps|>", ("translate", "transcribe")
LANGUAGE_TOKEN = re.compile(r"<\|[a-z]{2,3}\|>")  # <|en|>, <|haw|>, <|yue|>
# <|endoftext|>'s id in GPT-2's vocabulary, which only the English-only Whisper models use (the
# multilingual ones have a token more before it); their tokenizers list the language tokens too
ENGLISH_ONLY_END = 50256


def special_tokens(tokenizer: Mapping[str, Any]) -> dict[str, int]:
    """tokenizer.json's added tokens, by content."""
    return {str(token["content"]): int(token["id"])
            for token in tokenizer.get("added_tokens") or () if "content" in token}


def completed_generation(generation: Mapping[str, Any], config: Mapping[str, Any],
                         tokens: Mapping[str, int]) -> tuple[dict[str, Any], list[str]]:
    """`generation` with what Whisper's decoding needs filled where missing, and the keys
    filled: the start and end ids from config.json (else the tokenizer), no_timestamps_token_id
    from <|notimestamps|>, and, unless `is_multilingual` is false, lang_to_id from the language
    tokens after <|startoftranscript|> and task_to_id from <|translate|> and <|transcribe|>
    (`is_multilingual` is taken as false for OpenAI's English-only vocabulary)."""
    found = dict(generation)
    for key, token in (("decoder_start_token_id", START), ("eos_token_id", END),
                       ("no_timestamps_token_id", NO_TIMESTAMPS)):
        if found.get(key) is None:
            value = config.get(key) if key != "no_timestamps_token_id" else None
            if value is None and token in tokens:
                value = tokens[token]
            if value is None:
                raise ConfigError(f"{GENERATION} has no {key} and the tokenizer no {token}"
                                  " token: not a Whisper-style model's (give the"
                                  f" {GENERATION} of its checkpoint)")
            found[key] = value
    if "is_multilingual" not in found and tokens.get(END) == ENGLISH_ONLY_END:
        found["is_multilingual"] = False
    if found.get("is_multilingual") is not False:
        start = found["decoder_start_token_id"]
        if not found.get("lang_to_id"):
            found["lang_to_id"] = {token: index for token, index in sorted(
                tokens.items(), key=lambda item: item[1])
                if index > start and LANGUAGE_TOKEN.fullmatch(token)}
        if not found.get("task_to_id") and found["lang_to_id"]:
            found["task_to_id"] = {task: tokens[f"<|{task}|>"] for task in TASKS
                                   if f"<|{task}|>" in tokens}
        found.setdefault("is_multilingual", bool(found["lang_to_id"]))
    filled = [key for key, value in found.items() if generation.get(key) != value]
    return found, filled


def front_end(config: Mapping[str, Any]) -> dict[str, Any]:
    """WhisperFeatureExtractor's settings (LogMelSpec's defaults) at config.json's mel bins: a
    preprocessor_config.json for a folder without one."""
    spec = LogMelSpec(feature_size=int(config.get("num_mel_bins") or LogMelSpec.feature_size))
    return {"feature_extractor_type": "WhisperFeatureExtractor",
            **{name: getattr(spec, name) for name in SETTINGS}, "return_attention_mask": False}


def _cached(name: str, content: dict[str, Any]) -> Path:
    from bundler.site.runtime import cache_root

    data = json.dumps(content, indent=2, sort_keys=True).encode() + b"\n"
    target = cache_root() / "speech-configs" / hashlib.sha256(data).hexdigest()[:24] / name
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = target.with_suffix(".partial")
        scratch.write_bytes(data)
        scratch.replace(target)
    return target


def complete_speech_files(files: Mapping[str, Path], config: Mapping[str, Any]
                          ) -> tuple[dict[str, Path], list[str]]:
    """The folder's text files with its generation and front-end configs completed (see the
    module), and a line per file completed saying what was filled."""
    tokens = special_tokens(json.loads(files["tokenizer.json"].read_text(encoding="utf-8")))
    given = files.get(GENERATION)
    generation = json.loads(given.read_text(encoding="utf-8")) if given else {}
    completed, filled = completed_generation(generation, config, tokens)
    found, notes = dict(files), []
    if filled:
        found[GENERATION] = _cached(GENERATION, completed)
        notes.append(f"{GENERATION} {'lacks' if given else 'is missing:'} {', '.join(filled)}:"
                     " filled from config.json and the tokenizer's special tokens, as Whisper's"
                     " checkpoints have them")
    if FRONT_END not in files:
        settings = front_end(config)
        found[FRONT_END] = _cached(FRONT_END, settings)
        notes.append(f"no {FRONT_END}: Whisper's log-mel front end, {settings['feature_size']}"
                     " mel bins (config.json's num_mel_bins)")
    return found, notes
