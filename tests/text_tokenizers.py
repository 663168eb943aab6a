"""Small tokenizers of the three families, trained here on a few lines of text (no hub downloads):
byte-level BPE (GPT-2/RoBERTa), WordPiece (BERT: lowercase, accents stripped) and Unigram
(SentencePiece/T5: Metaspace; and a sentencepiece model converted by transformers as XLM-RoBERTa's,
with its Precompiled normalizer); and the configurations real models ship besides (Llama's
SentencePiece-style BPE with byte fallback, Llama-3 / Qwen2 / GPT-4o split regexes, cased BERT,
added tokens, the Whitespace pre-tokenizer, Split's behaviors, WordLevel), and Unigram vocabularies
written here with near-tied and tied segmentations. Each is saved as an export folder has it:
tokenizer.json, tokenizer_config.json and special_tokens_map.json.
"""

from __future__ import annotations

import io
import json
import math
import random
from collections.abc import Callable
from pathlib import Path

from tokenizers import (
    AddedToken,
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
Привет, мир! Это предложение на русском языке. Γειά σου κόσμε, σας κόσμος.
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


def _metaspace_unigram(specials: list[str], extra: normalizers.Normalizer, *,
                       before: bool = False) -> Tokenizer:
    """A Unigram trained here with Metaspace pieces, normalized by NFKC and collapsed spaces with
    `extra` after NFKC (`before`: ahead of it)."""
    tokenizer = Tokenizer(models.Unigram())
    steps = [normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")]
    steps.insert(0 if before else 1, extra)
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.train_from_iterator(LINES, trainers.UnigramTrainer(
        vocab_size=300, special_tokens=specials, unk_token="<unk>", show_progress=False))
    return tokenizer


def unigram(folder: Path) -> Path:
    """T5-style: NFKC, lowercase and collapsed spaces, Metaspace, A </s> B </s>; truncates on the
    left."""
    tokenizer = _metaspace_unigram(["<pad>", "</s>", "<unk>"], normalizers.Lowercase())
    eos = ("</s>", tokenizer.token_to_id("</s>"))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[eos])
    config = {"model_max_length": 40, "truncation_side": "left", "eos_token": "</s>",
              "pad_token": "<pad>", "unk_token": "<unk>"}
    return _save(tokenizer, folder, config, {"eos_token": "</s>"})


def nmt_unigram(folder: Path) -> Path:
    """As tokenizers' own SentencePieceUnigramTokenizer writes one: sentencepiece's Nmt rules
    (which @huggingface/tokenizers lacks: web/text/tokenizer.mjs rewrites them), NFKC and
    collapsed spaces, Metaspace, <s> A </s>."""
    tokenizer = _metaspace_unigram(["<pad>", "<s>", "</s>", "<unk>"], normalizers.Nmt(),
                                   before=True)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B </s>",
        special_tokens=[(token, tokenizer.token_to_id(token)) for token in ("<s>", "</s>")])
    config = {"model_max_length": 48, "bos_token": "<s>", "eos_token": "</s>",
              "pad_token": "<pad>", "unk_token": "<unk>"}
    return _save(tokenizer, folder, config, {"eos_token": "</s>"})


def sentencepiece_xlmr(folder: Path) -> Path:
    """XLM-RoBERTa-style, as real multilingual encoders ship it: a sentencepiece Unigram model
    (nmt_nfkc normalization, so tokenizer.json holds a Precompiled charsmap) converted and saved by
    transformers, <s> A </s></s> B </s>, <mask> with lstrip."""
    import sentencepiece
    from transformers import XLMRobertaTokenizerFast

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(LINES), model_writer=model, vocab_size=300, model_type="unigram",
        normalization_rule_name="nmt_nfkc", character_coverage=1.0, hard_vocab_limit=False,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)  # as XLM-R's
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sentencepiece.bpe.model").write_bytes(model.getvalue())
    XLMRobertaTokenizerFast(vocab_file=str(folder / "sentencepiece.bpe.model"),
                            model_max_length=64).save_pretrained(folder)
    return folder


# A Unigram vocabulary written here, not trained (training is not deterministic, so a trained one
# holds near-ties only by chance): "▁ab" (-7) against "▁a" + "b", one ulp (8.9e-16) more, where
# adding "c"'s -20 rounds both paths to one sum (-27; the library's own lattice compares those
# sums and kept the first); "▁xy" against "▁x" + "y", exactly equal (the first is kept). Other
# lowercase letters score -12; the rest of the text is unknown (unk -30, fused).
NEAR_TIE = math.nextafter(-7.0, 0.0) - -3.0
TIED_PIECES = {**{letter: -12.0 for letter in "▁abcdefghijklmnopqrstuvwxyz"},
               "▁ab": -7.0, "▁a": -3.0, "b": NEAR_TIE, "c": -20.0,
               "▁xy": -7.0, "▁x": -3.0, "y": -4.0}
BYTE_PIECES = [f"<0x{byte:02X}>" for byte in range(256)]
SENTENCEPIECE_DECODER = decoders.Sequence([  # Llama/Mistral's: bytes joined, the first space cut
    decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
    decoders.Strip(" ", 1, 0)])


def _tied_unigram(folder: Path, byte_fallback: bool) -> Path:
    specials = ["<unk>", "<s>", "</s>"]
    vocab = [(token, 0.0) for token in specials] + list(TIED_PIECES.items())
    if byte_fallback:  # sentencepiece's byte pieces score 0
        vocab += [(piece, 0.0) for piece in BYTE_PIECES]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=byte_fallback))
    tokenizer.add_special_tokens(specials)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = SENTENCEPIECE_DECODER if byte_fallback else decoders.Metaspace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B </s>",
        special_tokens=[(token, tokenizer.token_to_id(token)) for token in ("<s>", "</s>")])
    config = {"model_max_length": 48, "bos_token": "<s>", "eos_token": "</s>",
              "unk_token": "<unk>", "pad_token": "</s>"}
    return _save(tokenizer, folder, config, {"eos_token": "</s>"})


def tied_unigram(folder: Path) -> Path:
    """Unigram from TIED_PIECES, unknown characters as <unk>, Metaspace, <s> A </s>."""
    return _tied_unigram(folder, byte_fallback=False)


def tied_unigram_bytes(folder: Path) -> Path:
    """tied_unigram with byte fallback: unknown characters as their UTF-8 byte pieces."""
    return _tied_unigram(folder, byte_fallback=True)


def _llama_model() -> models.BPE:
    """BPE trained here on Llama's normalized text ("▁" for spaces, no pre-tokenizer), laid out as
    Llama's: <unk> <s> </s>, the 256 byte pieces, then the pieces; byte fallback, unknowns fused."""
    trained = Tokenizer(models.BPE())
    trained.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                               normalizers.Replace(" ", "▁")])
    trained.train_from_iterator(LINES, trainers.BpeTrainer(vocab_size=400, show_progress=False))
    model = json.loads(trained.to_str())["model"]
    pieces = ["<unk>", "<s>", "</s>", *BYTE_PIECES, *sorted(model["vocab"], key=model["vocab"].get)]
    return models.BPE({piece: i for i, piece in enumerate(pieces)},
                      [tuple(merge) for merge in model["merges"]], unk_token="<unk>",
                      byte_fallback=True, fuse_unk=True)


def _llama(folder: Path, metaspace: bool) -> Path:
    tokenizer = Tokenizer(_llama_model())
    tokenizer.add_special_tokens(["<unk>", "<s>", "</s>"])
    if metaspace:  # as transformers converts Llama since 4.38: the prefix on the first piece only
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
    else:
        tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                                     normalizers.Replace(" ", "▁")])
    tokenizer.decoder = SENTENCEPIECE_DECODER
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s>:1 $B:1", special_tokens=[("<s>", 1)])
    config = {"model_max_length": 2048, "bos_token": "<s>", "eos_token": "</s>",
              "unk_token": "<unk>", "padding_side": "left", "legacy": True}
    return _save(tokenizer, folder, config, {"bos_token": "<s>", "eos_token": "</s>",
                                             "unk_token": "<unk>"})


def llama(folder: Path) -> Path:
    """Llama/Mistral (sentencepiece BPE converted): Prepend and Replace normalizers, no
    pre-tokenizer, byte fallback, ByteFallback + Fuse + Strip decoder, <s> A; no pad token."""
    return _llama(folder, metaspace=False)


def llama_metaspace(folder: Path) -> Path:
    """llama as converted since transformers 4.38: Metaspace (prepend "first", no split)."""
    return _llama(folder, metaspace=True)


# The split regexes of tiktoken-style tokenizers: Llama-3's (GPT-4's cl100k), Qwen2's (digits one
# by one) and GPT-4o's o200k (case classes, contractions after words).
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
O200K_SPLIT = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n/]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+"])


def _split_byte_level(folder: Path, pattern: str, specials: list[str],
                      normalizer: normalizers.Normalizer | None = None) -> Path:
    """Byte-level BPE whose words come from `pattern` (Split, isolated; ByteLevel without its own
    regex), as tiktoken-converted tokenizers are; the first special token starts each text."""
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(LINES, trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    bos = specials[0]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos}:1 $B:1",
        special_tokens=[(bos, tokenizer.token_to_id(bos))])
    config = {"model_max_length": 4096, "bos_token": bos, "eos_token": specials[1],
              "pad_token": specials[1], "clean_up_tokenization_spaces": True}
    return _save(tokenizer, folder, config, {"bos_token": bos, "eos_token": specials[1]})


def llama3(folder: Path) -> Path:
    """Llama-3: the cl100k split regex, <|begin_of_text|> A; clean-up of decoded spaces on."""
    return _split_byte_level(folder, LLAMA3_SPLIT, ["<|begin_of_text|>", "<|end_of_text|>"])


def qwen2(folder: Path) -> Path:
    """Qwen2: NFC, its split regex (each digit alone)."""
    return _split_byte_level(folder, QWEN2_SPLIT, ["<|im_start|>", "<|endoftext|>"],
                             normalizers.NFC())


def o200k(folder: Path) -> Path:
    """GPT-4o's o200k split regex (upper/lower case classes, case-insensitive contractions)."""
    return _split_byte_level(folder, O200K_SPLIT, ["<|startoftext|>", "<|endoftext|>"])


def cased_wordpiece(folder: Path) -> Path:
    """Cased BERT with other BertNormalizer options (no lowercase, accents stripped, CJK not
    split) and words cut by WhitespaceSplit, Punctuation and Digits(individual_digits)."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(),
        pre_tokenizers.Digits(individual_digits=True)])
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(LINES, trainers.WordPieceTrainer(
        vocab_size=400, special_tokens=specials, show_progress=False))
    tokenizer.post_processor = processors.BertProcessing(
        ("[SEP]", tokenizer.token_to_id("[SEP]")), ("[CLS]", tokenizer.token_to_id("[CLS]")))
    config = {"model_max_length": 32, "do_lower_case": False, "pad_token": "[PAD]",
              "unk_token": "[UNK]", "clean_up_tokenization_spaces": True}
    return _save(tokenizer, folder, config, {"pad_token": "[PAD]", "unk_token": "[UNK]"})


# Added tokens with each flag (ADDED_TEXTS in the corpus use them): stripping the spaces beside
# them, matched in the normalized text, a whole word only, and special ones inside text.
ADDED_TOKENS = [AddedToken("<ent>", lstrip=True, rstrip=True), AddedToken("[nl]", rstrip=True),
                AddedToken("Zürich", normalized=True), AddedToken("ok", single_word=True),
                AddedToken("hello world", normalized=False)]
ADDED_SPECIAL = [AddedToken("<sep2>", lstrip=True, special=True),
                 AddedToken("<|tool|>", special=True, normalized=False)]


def prefix_space_bpe(folder: Path) -> Path:
    """Byte-level BPE with add_prefix_space (each text starts as a word after a space), NFKC and
    lowercase, and ADDED_TOKENS / ADDED_SPECIAL."""
    tokenizer = _byte_level(["<s>", "<pad>", "</s>", "<unk>"])
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>")),
        add_prefix_space=True)
    tokenizer.add_tokens(ADDED_TOKENS)
    tokenizer.add_special_tokens(ADDED_SPECIAL)
    config = {"model_max_length": 48, "bos_token": "<s>", "eos_token": "</s>",
              "pad_token": "<pad>", "add_prefix_space": True}
    return _save(tokenizer, folder, config, {"pad_token": "<pad>"})



def whitespace_bpe(folder: Path) -> Path:
    """BPE as the tokenizers quicktour trains one: the Whitespace pre-tokenizer (\\w+|[^\\w\\s]+
    with Unicode's classes), [UNK] for what it has not seen, BPEDecoder; no post-processor."""
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.decoder = decoders.BPEDecoder()
    tokenizer.train_from_iterator(LINES, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["[UNK]", "[PAD]"], show_progress=False))
    return _save(tokenizer, folder, {"pad_token": "[PAD]"}, {})


def word_level(folder: Path) -> Path:
    """A WordLevel model (one id per word, the unknown token named in tokenizer.json only) over
    the Whitespace pre-tokenizer."""
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(LINES, trainers.WordLevelTrainer(
        vocab_size=300, special_tokens=["[UNK]", "[PAD]"], show_progress=False))
    return _save(tokenizer, folder, {"pad_token": "[PAD]"}, {})


def split_behaviors(folder: Path) -> Path:
    """BPE whose words come from Split steps with each behavior: inverted (the words kept, the
    spaces removed), merged with the previous piece (","), with the next ("." "!" "?") and
    contiguous (digits); the NFD + StripAccents + Lowercase + Strip normalizers."""
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                                 normalizers.Lowercase(), normalizers.Strip()])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\S+"), behavior="removed", invert=True),
        pre_tokenizers.Split(",", behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[.!?]"), behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"\d"), behavior="contiguous")])
    tokenizer.decoder = decoders.BPEDecoder()
    tokenizer.train_from_iterator(LINES, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["[UNK]", "[PAD]"], show_progress=False))
    return _save(tokenizer, folder, {"pad_token": "[PAD]"}, {})


def metaspace_first(folder: Path) -> Path:
    """Unigram with Metaspace's prepend_scheme "first" (T5 and Llama as transformers converts
    them with legacy=False) and added tokens matched in the normalized text, inside which the
    mark goes to the text's first piece only."""
    tokenizer = _metaspace_unigram(["<pad>", "</s>", "<unk>"], normalizers.Lowercase())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tokenizer.decoder = decoders.Metaspace(prepend_scheme="first")
    tokenizer.add_tokens(ADDED_TOKENS)
    tokenizer.add_special_tokens(ADDED_SPECIAL)
    config = {"model_max_length": 40, "eos_token": "</s>", "pad_token": "<pad>",
              "unk_token": "<unk>"}
    return _save(tokenizer, folder, config, {"eos_token": "</s>"})

FAMILIES: dict[str, Callable[[Path], Path]] = {
    "bpe": byte_level_bpe, "gpt2": gpt2, "wordpiece": wordpiece, "unigram": unigram,
    "nmt": nmt_unigram, "sentencepiece": sentencepiece_xlmr, "ties": tied_unigram,
    "ties_bytes": tied_unigram_bytes, "llama": llama, "llama_metaspace": llama_metaspace,
    "llama3": llama3, "qwen2": qwen2, "o200k": o200k, "cased_wordpiece": cased_wordpiece,
    "prefix_space_bpe": prefix_space_bpe, "whitespace_bpe": whitespace_bpe,
    "word_level": word_level, "split_behaviors": split_behaviors,
    "metaspace_first": metaspace_first}


def all_families(root: Path) -> dict[str, Path]:
    """Each family's folder under `root`."""
    return {name: make(root / name) for name, make in FAMILIES.items()}


# Blocks random texts draw from: scripts, marks, spaces and controls, emoji and their modifiers,
# private use, unassigned and astral code points.
RANDOM_POOLS = [range(0x20, 0x7F), range(0xA0, 0x250), range(0x300, 0x370), range(0x370, 0x400),
                range(0x400, 0x500), range(0x590, 0x600),
                range(0x600, 0x700), range(0x2E00, 0x2E60), range(0x900, 0x980),
                range(0xE00, 0xF00), range(0x1100, 0x1200),
                range(0x2000, 0x2070), range(0x3000, 0x3100), range(0x4E00, 0x4E80),
                range(0xAC00, 0xAC80), range(0xD7B0, 0xD800), range(0xFF00, 0xFFF0),
                range(0x1F1E6, 0x1F200), range(0x1F300, 0x1F700), range(0x1F3FB, 0x1F400),
                [0x200D, 0xFE0F, 0x20E3, 0x0, 0x7, 0xD, 0xA, 0x9, 0x85, 0xAD, 0xFEFF, 0x2581,
                 0x1680, 0x180E, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0x20, 0x20, 0xA0],
                range(0x20000, 0x20010), range(0xE000, 0xE010), range(0x378, 0x37A),
                range(0x10000, 0x10040), range(0x1D400, 0x1D420), range(0xFB00, 0xFB10)]
SPECIAL_TEXTS = ["<s>", "</s>", "[CLS]", "[SEP]", "<mask>", "<pad>", "<unk>", "[MASK]"]


def random_texts(count: int, seed: int = 0) -> list[str]:
    """`count` texts of up to 25 characters drawn from RANDOM_POOLS (every fifth with a special
    token inside), the same for a seed."""
    generator = random.Random(seed)
    texts = []
    for index in range(count):
        text = "".join(chr(generator.choice(generator.choice(RANDOM_POOLS)))
                       for _ in range(generator.randint(0, 25)))
        if index % 5 == 4:
            middle = len(text) // 2
            text = text[:middle] + generator.choice(SPECIAL_TEXTS) + text[middle:]
        texts.append(text)
    return texts
