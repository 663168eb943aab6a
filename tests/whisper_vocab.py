"""A Whisper export with OpenAI's real multilingual vocabulary, as openai/whisper-tiny's Hugging
Face files have it (51,865 ids), and transformers' default init: the grader-like model for
rehearsing the speech-to-text acceptance and for the benchmark (`--vocab openai`).

The vocabulary comes from the `openai-whisper` package on PyPI (`pip download --no-deps`, cached
under ~/.cache/onnx-bundler/openai-whisper/): its whisper/assets/multilingual.tiktoken (50,257
byte-level BPE ranks) and whisper/tokenizer.py (the 99 languages in their order, the specials and
the non-speech symbols). The WhisperTokenizerFast folder has Whisper's ids: the ranks, then
<|endoftext|> 50257, <|startoftranscript|> 50258, the languages 50259..50357, <|translate|>,
<|transcribe|>, <|startoflm|>, <|startofprev|>, <|nocaptions|> (openai-whisper's <|nospeech|>,
named as the hub's checkpoints name it), <|notimestamps|> 50363 and the timestamps <|0.00|>..
<|30.00|> 50364..51864; generation_config.json is openai/whisper-tiny's."""

from __future__ import annotations

import ast
import base64
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from tests import speech_models

PACKAGE = "openai-whisper==20250625"
SPECIALS = ("<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
            "<|nocaptions|>", "<|notimestamps|>")
# openai-whisper's non_speech_tokens(), as its tokenizer.py lists them
SYMBOLS = [*'"#()*+/:;<=>@[\\]^_`{|}~「」『』', "<<", ">>", "<<<", ">>>", "--", "---", "-(", "-[",
           "('", '("', "((", "))", "(((", ")))", "[[", "]]", "{{", "}}", "♪♪", "♪♪♪"]
MISCELLANEOUS = "♩♪♫♬♭♮♯"


def package() -> Path:
    """openai-whisper's sdist from PyPI, downloaded once into the user cache."""
    from bundler.site.runtime import cache_root

    folder = cache_root() / "openai-whisper"
    found = sorted(folder.glob("openai_whisper-*"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        PACKAGE, "-d", str(folder)], check=True)
        found = sorted(folder.glob("openai_whisper-*"))
    return found[0]


def _member(archive: tarfile.TarFile, name: str) -> bytes:
    member = next(m for m in archive.getmembers() if m.name.endswith(name))
    return archive.extractfile(member).read()


def assets() -> tuple[dict[bytes, int], list[str]]:
    """The BPE ranks of multilingual.tiktoken and the language codes in tokenizer.py's order (the
    first 99: large-v3's 100th, yue, is not in the multilingual models before it)."""
    with tarfile.open(package()) as archive:
        lines = _member(archive, "whisper/assets/multilingual.tiktoken").split()
        source = _member(archive, "whisper/tokenizer.py").decode()
    ranks = {base64.b64decode(token): int(rank)
             for token, rank in zip(lines[::2], lines[1::2], strict=True)}
    tree = ast.parse(source)
    languages = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                     and getattr(node.targets[0], "id", None) == "LANGUAGES")
    return ranks, list(ast.literal_eval(languages))[:99]  # get_encoding's num_languages: 99


def _vocab_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The ranks as a byte-level BPE's vocabulary and merges (transformers'
    TikTokenConverter.extract_vocab_merges_from_model, without tiktoken)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    byte_encoder = bytes_to_unicode()
    text = lambda token: "".join(byte_encoder[b] for b in token)  # noqa: E731
    merges = []
    for token, rank in ranks.items():
        pairs = [(token[:i], token[i:], rank) for i in range(1, len(token))
                 if token[:i] in ranks and token[i:] in ranks]
        merges.extend(sorted(pairs, key=lambda pair: (ranks[pair[0]], ranks[pair[1]])))
    merges.sort(key=lambda pair: pair[2])
    return ({text(token): rank for token, rank in ranks.items()},
            [(text(left), text(right)) for left, right, _ in merges])


def tokenizer(folder: Path) -> dict[str, Any]:
    """The WhisperTokenizerFast folder; returns the ids by name ("vocab": their count),
    "languages" (the codes in order) and "non_speech" (openai-whisper's non_speech_tokens)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import WhisperTokenizerFast

    ranks, languages = assets()
    assert sorted(ranks.values()) == list(range(50257)) and len(languages) == 99
    vocab, merges = _vocab_merges(ranks)
    model = Tokenizer(models.BPE(vocab, merges, fuse_unk=False))
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = decoders.ByteLevel()
    model.post_processor = processors.ByteLevel(trim_offsets=False)
    encode = lambda text: model.encode(text, add_special_tokens=False).ids  # noqa: E731
    non_speech = {encode(" -")[0], encode(" '")[0]}
    for symbol in [*SYMBOLS, *MISCELLANEOUS]:
        for tokens in (encode(symbol), encode(" " + symbol)):
            if len(tokens) == 1 or symbol in MISCELLANEOUS:
                non_speech.add(tokens[0])
    specials = ["<|endoftext|>", "<|startoftranscript|>",
                *(f"<|{code}|>" for code in languages), *SPECIALS]
    model.add_special_tokens(specials)
    model.add_tokens(speech_models.TIMESTAMPS)  # not special: Whisper's timestamps decode as text
    fast = WhisperTokenizerFast(
        tokenizer_object=model, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
        unk_token="<|endoftext|>", pad_token="<|endoftext|>",
        additional_special_tokens=specials[1:], model_max_length=1024)
    fast.save_pretrained(folder)
    ids = {name: fast.convert_tokens_to_ids(name) for name in specials}
    assert list(ids.values()) == list(range(50257, 50364)), "not Whisper's ids"
    ids["vocab"] = len(fast)
    assert ids["vocab"] == 51865 and fast.convert_tokens_to_ids("<|30.00|>") == 51864
    return {**ids, "languages": languages, "non_speech": sorted(non_speech)}


def generation_config(ids: dict[str, Any]) -> dict[str, Any]:
    """openai/whisper-tiny's generation_config.json (its alignment heads aside)."""
    config = speech_models.generation_config(
        {**ids, "<|nospeech|>": ids["<|nocaptions|>"]}, max_length=448,
        languages=ids["languages"])
    specials = [ids[name] for name in ("<|startoftranscript|>", "<|translate|>", "<|transcribe|>",
                                       "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>")]
    return {**config, "suppress_tokens": ids["non_speech"] + specials}


def whisper(directory: Path, seed: int = 0,
            size: dict[str, int] | None = None) -> speech_models.SpeechExport:
    """The export folder (speech_models.whisper's layout) with OpenAI's vocabulary, at `size`
    (WHISPER_TINY when not given), transformers' default init (seeded), 448 decoder positions."""
    saved = directory / "saved"
    ids = tokenizer(saved)
    model = speech_models.model(ids, seed, size or speech_models.WHISPER_TINY,
                                init_std=0.02, max_target_positions=448)
    return speech_models.export(model, generation_config(ids), saved, directory / "onnx")
