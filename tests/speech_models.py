"""A tiny random-weight Whisper exported by optimum as users export one
(`--task automatic-speech-recognition-with-past`: encoder_model.onnx and decoder_model_merged.onnx),
for the speech-to-text tests. Nothing is downloaded: the config has Whisper's real front end
(80 mel bins, 1,500 encoder positions for 30 s), the vocabulary is Whisper's layout at a small
size (a byte-level BPE trained here on the speech sentences, then <|endoftext|>,
<|startoftranscript|>, language tokens, <|translate|>, <|transcribe|>, <|startoflm|>,
<|startofprev|>, <|nospeech|>, <|notimestamps|> and the timestamps <|0.00|>..<|30.00|>), saved as
a WhisperTokenizerFast folder beside the export, with a generation_config.json as the hub's
Whisper checkpoints have it.

Random weights give degenerate text; two things keep the decoding meaningful for the tests:
weights at 10x transformers' init spread (logits far apart, so greedy choices are not decided by
float noise between torch and onnxruntime), and the timestamp tokens outnumbering text tokens, so
the timestamp rules (pairs, monotonic, the sum-of-probabilities rule) all act on the output."""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

OPSET = 18
LANGUAGES = ("en", "zh", "de", "es", "ru", "ko", "fr", "ja")  # Whisper's first eight, its order
SPECIALS_BEFORE = ["<|endoftext|>", "<|startoftranscript|>", *(f"<|{c}|>" for c in LANGUAGES),
                   "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
                   "<|nospeech|>", "<|notimestamps|>"]
TIMESTAMPS = [f"<|{i * 0.02:.2f}|>" for i in range(1501)]
TEXT = """\
The quick brown fox jumps over the lazy dog.
Speech recognition in the browser needs the same features as the native model.
Whisper listens to thirty seconds of audio at a time, sixteen thousand samples a second.
Please call Stella and ask her to bring these things with her from the store.
Six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack.
"""


@dataclasses.dataclass
class SpeechExport:
    folder: Path  # encoder_model.onnx, decoder_model_merged.onnx, configs, tokenizer
    model: Any  # the torch WhisperForConditionalGeneration it was exported from

    @property
    def generation_config(self) -> dict[str, Any]:
        return json.loads((self.folder / "generation_config.json").read_text(encoding="utf-8"))


def tokenizer(folder: Path) -> Path:
    """Whisper's vocabulary layout at a small size, saved by WhisperTokenizerFast."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import WhisperTokenizerFast

    model = Tokenizer(models.BPE(unk_token=None))
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = decoders.ByteLevel()
    model.post_processor = processors.ByteLevel(trim_offsets=False)
    model.train_from_iterator(TEXT.splitlines() * 4, trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    model.add_special_tokens(SPECIALS_BEFORE)
    model.add_tokens(TIMESTAMPS)  # not special: Whisper's timestamps decode as text
    fast = WhisperTokenizerFast(
        tokenizer_object=model, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
        unk_token="<|endoftext|>", pad_token="<|endoftext|>",
        additional_special_tokens=SPECIALS_BEFORE[1:], model_max_length=1024)
    fast.save_pretrained(folder)
    return folder


def _ids(folder: Path) -> dict[str, int]:
    from transformers import WhisperTokenizerFast

    fast = WhisperTokenizerFast.from_pretrained(folder)
    names = SPECIALS_BEFORE + TIMESTAMPS[:1] + TIMESTAMPS[-1:]
    ids = {name: fast.convert_tokens_to_ids(name) for name in names}
    ids["vocab"] = len(fast)
    first = ids["<|endoftext|>"]
    assert [ids[n] for n in SPECIALS_BEFORE] == list(range(first, first + len(SPECIALS_BEFORE)))
    assert ids[TIMESTAMPS[-1]] == ids["<|notimestamps|>"] + 1501 == ids["vocab"] - 1
    return ids


def generation_config(ids: dict[str, int], max_length: int = 96,
                      languages: Sequence[str] = LANGUAGES) -> dict[str, Any]:
    """generation_config.json as Whisper checkpoints ship it, at this vocabulary's ids."""
    eos = ids["<|endoftext|>"]
    space = 220 if ids["vocab"] > 220 else 1
    return {
        "decoder_start_token_id": ids["<|startoftranscript|>"], "bos_token_id": eos,
        "eos_token_id": eos, "pad_token_id": eos, "max_length": max_length,
        "is_multilingual": True,
        "lang_to_id": {f"<|{code}|>": ids[f"<|{code}|>"] for code in languages},
        "task_to_id": {"translate": ids["<|translate|>"], "transcribe": ids["<|transcribe|>"]},
        "no_timestamps_token_id": ids["<|notimestamps|>"],
        "prev_sot_token_id": ids["<|startofprev|>"],
        "max_initial_timestamp_index": 50,
        "begin_suppress_tokens": [space, eos],
        # a few text tokens as Whisper's list has punctuation, and the specials it suppresses
        "suppress_tokens": [1, 2, 7, 11, 13, ids["<|translate|>"], ids["<|transcribe|>"],
                            ids["<|startoflm|>"], ids["<|startofprev|>"], ids["<|nospeech|>"]],
        "forced_decoder_ids": [[1, None], [2, ids["<|transcribe|>"]]],
        "return_timestamps": False,
    }


def english_only(config: dict[str, Any]) -> dict[str, Any]:
    """`config` (generation_config()) as an English-only checkpoint (whisper-tiny.en) has it:
    no language or task ids, <|notimestamps|> forced at position 1."""
    english = {key: value for key, value in config.items()
               if key not in ("lang_to_id", "task_to_id")}
    return {**english, "is_multilingual": False,
            "forced_decoder_ids": [[1, config["no_timestamps_token_id"]]]}


def from_model_config(config: dict[str, Any]) -> dict[str, Any]:
    """`config` (generation_config()) as a model saved from its config alone has it
    (GenerationConfig.from_model_config): config.json's ids, no Whisper decoding keys."""
    keys = ("decoder_start_token_id", "bos_token_id", "eos_token_id", "pad_token_id",
            "max_length", "begin_suppress_tokens", "suppress_tokens")
    return {key: config[key] for key in keys}


# The suite's size: 2+2 layers x 64, 4 heads. WHISPER_TINY: openai/whisper-tiny's (the benchmark).
TEST_SIZE = {"d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
             "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128}
WHISPER_TINY = {"d_model": 384, "encoder_layers": 4, "decoder_layers": 4,
                "encoder_attention_heads": 6, "decoder_attention_heads": 6,
                "encoder_ffn_dim": 1536, "decoder_ffn_dim": 1536}


def model(ids: dict[str, int], seed: int, size: dict[str, int], init_std: float = 0.2,
          max_target_positions: int = 128) -> Any:
    """Whisper at `size`, real 80-bin front end and 30 s of positions, seeded random weights
    (`init_std`: 10x transformers' 0.02 by default, see the module's docstring)."""
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(seed)
    eos = ids["<|endoftext|>"]
    config = WhisperConfig(
        vocab_size=ids["vocab"], num_mel_bins=80, **size, max_source_positions=1500,
        max_target_positions=max_target_positions, init_std=init_std, pad_token_id=eos,
        bos_token_id=eos, eos_token_id=eos, decoder_start_token_id=ids["<|startoftranscript|>"],
        suppress_tokens=None, begin_suppress_tokens=None)
    return WhisperForConditionalGeneration(config).eval()


def export(model: Any, generation: dict[str, Any], saved: Path, folder: Path,
           merged: bool = True) -> SpeechExport:
    """`model` exported by optimum into `folder` with its config.json, `generation` as
    generation_config.json, preprocessor_config.json and the tokenizer already saved in `saved`
    (a working folder, removed after). `merged=False`: as --no-post-process leaves it,
    decoder_model.onnx and decoder_with_past_model.onnx."""
    from optimum.exporters.onnx import main_export
    from transformers import GenerationConfig, WhisperFeatureExtractor

    model.generation_config = GenerationConfig(**generation)
    model.save_pretrained(saved)
    WhisperFeatureExtractor(feature_size=80).save_pretrained(saved)
    main_export(str(saved), folder, task="automatic-speech-recognition-with-past", opset=OPSET,
                local_files_only=True, do_validation=False, no_post_process=not merged)
    for path in saved.iterdir():
        if not (folder / path.name).exists() and path.suffix in (".json", ".txt"):
            shutil.copyfile(path, folder / path.name)
    shutil.rmtree(saved)
    return SpeechExport(folder, model)


def whisper(directory: Path, seed: int = 0, size: dict[str, int] | None = None,
            merged: bool = True) -> SpeechExport:
    """The export folder: optimum's ONNX files, config.json, preprocessor_config.json,
    generation_config.json and the tokenizer; with the torch model it came from. `size`: the
    WhisperConfig dimensions (TEST_SIZE when not given); `merged`: see export().
    tests/whisper_vocab.py: the same with OpenAI's vocabulary."""
    saved = directory / "saved"
    tokenizer(saved)
    ids = _ids(saved)
    return export(model(ids, seed, size or TEST_SIZE), generation_config(ids), saved,
                  directory / "onnx", merged)


@functools.cache
def exported(root: Path) -> Path:
    """The export folder (whisper()), made once per test session (`root`: its temporary
    folder, pytest's tmp_path_factory.getbasetemp())."""
    return whisper(Path(tempfile.mkdtemp(prefix="asr-export", dir=root)) / "model").folder


# The browser tests' build on WASM: each session with two variants, the encoder's default fp32
# (kept fp32 unless named), the decoder's int4 (--session-quantize), which load() picks on WASM:
# qdq blocks folded into float weights at load, so the browser computes what native does (a
# dynamic int8 decoder rounds its activation scales differently on WASM, and a random model's
# near-tied logits then part the tokens).
WASM_BUILD = ("--ep", "wasm", "--variants", "fp32,int4", "--session-quantize", "decoder=int4")


@functools.cache
def built(root: Path, runtime_dist: Path, *options: str) -> dict[str, Any]:
    """exported() built as users build it (`bundle build DIR`, fp32, with `options`), once per
    test session and options: {"bundle", "folder", "log"} (the build's standard output)."""
    from tests.conftest import run_cli

    folder = exported(root)
    output = Path(tempfile.mkdtemp(prefix="asr", dir=root)) / "bundle"
    result = run_cli("build", folder, "-o", output, "--runtime-dir", runtime_dist,
                     "--variants", "fp32", *options)
    assert result.returncode == 0, result.stderr
    return {"bundle": output, "folder": folder, "log": result.stdout}


def native(bundle: dict[str, Any], samples: np.ndarray, rate: int,
           options: dict[str, Any]) -> dict[str, Any]:
    """The native run (bundler/text/whisper_run.py) over each session's default on WASM (what
    load() opens there, with its session config): each window's tokens, the merged tokens, text
    and chunks, and how many text tokens the calls decoded that their segments dropped."""
    from bundler.bundle import manifest as manifest_file
    from bundler.tasks.logmel import spec_of
    from bundler.text import whisper as spec
    from bundler.text.tokenizer import TextTokenizer
    from bundler.text.whisper_bundle import bundle_sessions
    from bundler.text.whisper_run import transcribe

    # opened as `bundle run` and the check open them (each variant's session config on WASM)
    sessions = bundle_sessions(bundle["bundle"], manifest_file.load(bundle["bundle"]))
    folder = bundle["folder"]
    settings = spec.settings_of(json.loads((folder / "generation_config.json").read_text()))
    features = spec_of(json.loads((folder / "preprocessor_config.json").read_text()))
    language = options.get("language")
    runs, chunks = transcribe(sessions, samples, rate, features, settings,
                              spec.language_id(settings, language) if language else None,
                              options.get("task"), options.get("timestamps", False))
    tokens = [token for chunk in chunks for token in chunk.tokens]
    texts = lambda tokens: sum(token < settings.eos for token in tokens)  # noqa: E731
    # text tokens a call decoded after its last timestamp pair and segments() dropped (seek
    # went back to decode that audio again)
    dropped = sum(texts(call.generated) for run in runs for call in run.calls) - sum(
        texts(run.tokens) for run in runs)
    return {"windows": [run.tokens for run in runs], "tokens": tokens,
            "text": TextTokenizer.from_folder(folder).decode(tokens), "chunks": chunks,
            "dropped": dropped}
