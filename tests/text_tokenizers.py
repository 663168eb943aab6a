"""Small tokenizers of the three families, trained here on a few lines of text (no hub downloads):
byte-level BPE (GPT-2/RoBERTa), WordPiece (BERT: lowercase, accents stripped) and Unigram
(SentencePiece/T5: Metaspace). Each is saved as an export folder has it: tokenizer.json,
tokenizer_config.json and special_tokens_map.json.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tokenizers import (
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

# Several scripts, so each vocabulary holds some of them; the corpus also has text none saw.
TRAINING_TEXT = """\
The quick brown fox jumps over the lazy dog. It wasn't the dog's fault; they're tired.
Tokenizers split text into pieces: words, sub-words and bytes. Numbers like 12345 and 3.14 too!
Café, naïve, résumé, façade, São Paulo, Zürich, Ångström and Dvořák keep their accents.
Emoji travel too 😀 👍🏽 👨‍👩‍👧 and flags 🇫🇷 appear in chats.
東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.
مرحبا بالعالم، هذه جملة عربية. שלום עולם, זה משפט בעברית.
Привет, мир! Это предложение на русском языке. Γειά σου κόσμε.
Whitespace    runs,	tabs and
new lines are kept by some tokenizers and dropped by others.
"""
LINES = [line for line in TRAINING_TEXT.splitlines() if line.strip()] * 4


def _save(tokenizer: Tokenizer, folder: Path, config: dict, special: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    (folder / "special_tokens_map.json").write_text(json.dumps(special, indent=1))
    return folder


def _byte_level(specials: list[str]) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(LINES, trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return tokenizer


def byte_level_bpe(folder: Path) -> Path:
    """RoBERTa-style: ByteLevel pre-tokenizer and decoder, <s> A </s></s> B </s>; pads left."""
    tokenizer = _byte_level(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>")))
    config = {"model_max_length": 48, "padding_side": "left", "bos_token": "<s>",
              "eos_token": "</s>", "clean_up_tokenization_spaces": False}
    return _save(tokenizer, folder, config, {"pad_token": "<pad>", "unk_token": "<unk>",
                                             "mask_token": {"content": "<mask>", "lstrip": True}})


def gpt2(folder: Path) -> Path:
    """GPT-2-style: byte-level BPE with the ByteLevel post-processor (no special tokens added), no
    pad token and no maximum length."""
    tokenizer = _byte_level(["<|endoftext|>"])
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    token = "<|endoftext|>"
    config = {"model_max_length": 1e30, "bos_token": token, "eos_token": token,
              "unk_token": token}
    return _save(tokenizer, folder, config, {"bos_token": token, "eos_token": token})


def wordpiece(folder: Path) -> Path:
    """BERT-style: BertNormalizer (lowercase, accents stripped, CJK split), [CLS] A [SEP] B [SEP]
    with token types, WordPiece decoder; the clean-up of decoded spaces on."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(LINES, trainers.WordPieceTrainer(
        vocab_size=400, special_tokens=specials, show_progress=False))
    ids = {token: tokenizer.token_to_id(token) for token in ("[CLS]", "[SEP]")}
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=list(ids.items()))
    config = {"model_max_length": 32, "do_lower_case": True, "pad_token": "[PAD]",
              "cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "[UNK]",
              "mask_token": "[MASK]", "clean_up_tokenization_spaces": True}
    return _save(tokenizer, folder, config, {"pad_token": "[PAD]", "unk_token": "[UNK]"})


def unigram(folder: Path) -> Path:
    """T5-style: NFKC and collapsed spaces, Metaspace, A </s> B </s>; truncates on the left."""
    specials = ["<pad>", "</s>", "<unk>"]
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.train_from_iterator(LINES, trainers.UnigramTrainer(
        vocab_size=300, special_tokens=specials, unk_token="<unk>", show_progress=False))
    eos = ("</s>", tokenizer.token_to_id("</s>"))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[eos])
    config = {"model_max_length": 40, "truncation_side": "left", "eos_token": "</s>",
              "pad_token": "<pad>", "unk_token": "<unk>"}
    return _save(tokenizer, folder, config, {"eos_token": "</s>"})


FAMILIES: dict[str, Callable[[Path], Path]] = {
    "bpe": byte_level_bpe, "gpt2": gpt2, "wordpiece": wordpiece, "unigram": unigram}


def all_families(root: Path) -> dict[str, Path]:
    """Each family's folder under `root`."""
    return {name: make(root / name) for name, make in FAMILIES.items()}
