"""Small text encoders exported by optimum as users export them (`optimum-cli export onnx`):
real architectures (BERT, RoBERTa) at 2 layers x 128 with seeded random weights, and a
tokenizer trained here (BERT's WordPiece on the check sentences, saved by transformers; RoBERTa's
byte-level BPE, padding on the left, from tests/text_tokenizers.py). A folder per
model: model.onnx, config.json, tokenizer.json, tokenizer_config.json, special_tokens_map.json."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bundler.text.samples import CHECK_TEXTS

SEED = 0
LABELS = {0: "negative", 1: "neutral", 2: "positive"}
SMALL = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 256, "max_position_embeddings": 128}
# Words enough for WordPiece to learn pieces of every script the check sentences use.
CORPUS = [*CHECK_TEXTS, "The quick brown fox jumps over the lazy dog.",
          "Sphinx of black quartz, judge my vow.", "Les sanglots longs des violons de l'automne",
          "Über den Wipfeln ist Ruh, in allen Gipfeln spürest du kaum einen Hauch.",
          "東京は日本の首都です。", "Привет, как дела?", "مرحبا بالعالم", "🙂 👍🏽 ❤️"] * 4


def _bert_tokenizer(directory: Path):
    """A WordPiece tokenizer as BERT's, trained on CORPUS, as transformers saves it."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import WordPieceTrainer
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer.train_from_iterator(CORPUS, WordPieceTrainer(vocab_size=600, special_tokens=special))
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tokenizer.decoder = decoders.WordPiece()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]",
                                   pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                                   mask_token="[MASK]", model_max_length=128)
    fast.save_pretrained(directory)
    return fast


def _export(model, tokenizer_at: Path, task: str, target: Path) -> Path:
    """optimum's export of `model` saved locally with the tokenizer in `tokenizer_at`."""
    from optimum.exporters.onnx import main_export

    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        saved = Path(scratch) / "saved"
        shutil.copytree(tokenizer_at, saved)
        model.save_pretrained(saved)
        main_export(str(saved), target, task=task, opset=17, local_files_only=True,
                    do_validation=False)
    return target


def bert_folders(directory: Path) -> dict[str, Path]:
    """{"feature-extraction": folder of a BertModel, "text-classification": folder of a
    BertForSequenceClassification with 3 labels}."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertModel

    tokens = directory / "bert-tokenizer"
    size = len(_bert_tokenizer(tokens))
    torch.manual_seed(SEED)
    encoder = BertModel(BertConfig(vocab_size=size, **SMALL)).eval()
    torch.manual_seed(SEED)
    classifier = BertForSequenceClassification(BertConfig(
        vocab_size=size, id2label=LABELS, label2id={v: k for k, v in LABELS.items()},
        **SMALL)).eval()
    # scores apart as a trained head's are (at the initial 0.02 scale all are near 1/3, and
    # the order of the labels is then noise)
    torch.nn.init.normal_(classifier.classifier.weight, std=2.0)
    return {"feature-extraction": _export(encoder, tokens, "feature-extraction",
                                          directory / "bert-embed"),
            "text-classification": _export(classifier, tokens, "text-classification",
                                           directory / "bert-classify")}


TAGS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}


def tagger_folder(directory: Path) -> Path:
    """A DistilBertForTokenClassification (input_ids and attention_mask) with BIO tags in
    id2label and BERT's WordPiece tokenizer, for token-classification."""
    import torch
    from transformers import DistilBertConfig, DistilBertForTokenClassification

    tokens = directory / "bert-tokenizer"
    size = len(_bert_tokenizer(tokens))
    torch.manual_seed(SEED)
    tagger = DistilBertForTokenClassification(DistilBertConfig(
        vocab_size=size, dim=128, n_layers=2, n_heads=2, hidden_dim=256,
        max_position_embeddings=128, id2label=TAGS,
        label2id={v: k for k, v in TAGS.items()})).eval()
    # tags apart as a trained head's are, so that each text has entities of several tokens
    torch.nn.init.normal_(tagger.classifier.weight, std=2.0)
    return _export(tagger, tokens, "token-classification", directory / "distilbert-tag")


def roberta_folder(directory: Path) -> Path:
    """A RobertaModel (input_ids and attention_mask only, positions after the padding index)
    with a byte-level BPE tokenizer that pads on the left, for feature-extraction."""
    from transformers import RobertaConfig, RobertaModel

    from tests.text_tokenizers import byte_level_bpe

    return _roberta_family(RobertaConfig, RobertaModel, byte_level_bpe(
        directory / "roberta-tokenizer"), 48, directory / "roberta-embed")


def xlmr_folder(directory: Path) -> Path:
    """An XLMRobertaModel with a sentencepiece Unigram tokenizer as multilingual encoders ship it
    (nmt_nfkc's Precompiled charsmap, <s> A </s>), for feature-extraction."""
    from transformers import XLMRobertaConfig, XLMRobertaModel

    from tests.text_tokenizers import sentencepiece_xlmr

    return _roberta_family(XLMRobertaConfig, XLMRobertaModel, sentencepiece_xlmr(
        directory / "xlmr-tokenizer"), 64, directory / "xlmr-embed")


def roberta_tagger_folder(directory: Path) -> Path:
    """A RobertaForTokenClassification with BIO tags in id2label and a byte-level BPE tokenizer
    (padding on the left), for token-classification."""
    from transformers import RobertaConfig, RobertaForTokenClassification

    from tests.text_tokenizers import byte_level_bpe

    return _roberta_family(RobertaConfig, RobertaForTokenClassification, byte_level_bpe(
        directory / "roberta-tokenizer"), 48, directory / "roberta-tag",
        task="token-classification", id2label=TAGS, label2id={v: k for k, v in TAGS.items()})


def _roberta_family(config_class, model_class, tokens: Path, max_length: int,
                    target: Path, task: str = "feature-extraction", **head: Any) -> Path:
    """A RoBERTa-family encoder for the tokenizer in `tokens`, its special tokens' ids in its
    config, `max_length` tokens (positions start after the padding index), exported for `task`
    (`head`: the config's id2label and label2id of a head)."""
    import torch
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokens / "tokenizer.json"))
    torch.manual_seed(SEED)
    config = config_class(vocab_size=tokenizer.get_vocab_size(), type_vocab_size=1,
                          pad_token_id=tokenizer.token_to_id("<pad>"),
                          bos_token_id=tokenizer.token_to_id("<s>"),
                          eos_token_id=tokenizer.token_to_id("</s>"),
                          **{**SMALL, "max_position_embeddings": max_length + 2}, **head)
    model = model_class(config).eval()
    if hasattr(model, "classifier"):  # tags apart, as in tagger_folder
        torch.nn.init.normal_(model.classifier.weight, std=2.0)
    return _export(model, tokens, task, target)


SENTENCE_MAX_LENGTH = 24  # the models' max_seq_length, below the tokenizer's 128
# sentence-transformers before 5.x wrote these, and most hub repositories have them still
LEGACY_POOLING = {"pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
                  "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
                  "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False}


def sentence_transformers_folders(directory: Path) -> dict[str, Path]:
    """A BERT (SMALL, seeded random weights, the WordPiece tokenizer) saved as
    sentence-transformers models are, max_seq_length SENTENCE_MAX_LENGTH, each with its ONNX file
    as their hub repositories ship it (onnx/model.onnx, optimum's transformers export:
    last_hidden_state): {"cls": CLS pooling + Normalize, as sentence-transformers 5 saves it,
    "mean": mean pooling without Normalize, in the files of sentence-transformers before 5
    (pooling_mode_* keys, sentence_bert_config.json's max_seq_length over the tokenizer's 128),
    "cls-export": optimum's sentence-transformers export of the cls model (`--library
    sentence_transformers`: token_embeddings and sentence_embedding, no modules.json)}."""
    import torch
    from optimum.exporters.onnx import main_export
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import models as modules
    from transformers import BertConfig, BertModel

    tokens = directory / "bert-tokenizer"
    vocabulary = len(_bert_tokenizer(tokens))
    torch.manual_seed(SEED)
    encoder = BertModel(BertConfig(vocab_size=vocabulary, **SMALL)).eval()
    saved = Path(shutil.copytree(tokens, directory / "bert-saved", dirs_exist_ok=True))
    encoder.save_pretrained(saved)
    folders = {}
    for pooling, normalize in (("cls", True), ("mean", False)):
        transformer = modules.Transformer(str(saved), max_seq_length=SENTENCE_MAX_LENGTH)
        pooled = modules.Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling)
        model = SentenceTransformer(modules=[transformer, pooled, *(
            [modules.Normalize()] if normalize else [])], device="cpu")
        target = folders[pooling] = directory / f"sbert-{pooling}"
        model.save(str(target))
        with tempfile.TemporaryDirectory(dir=directory) as scratch:
            main_export(str(target), scratch, task="feature-extraction",
                        library_name="transformers", opset=17, local_files_only=True,
                        do_validation=False)
            (target / "onnx").mkdir()
            shutil.move(Path(scratch) / "model.onnx", target / "onnx" / "model.onnx")
    _legacy(folders["mean"])
    folders["cls-export"] = directory / "sbert-cls-export"
    main_export(str(folders["cls"]), folders["cls-export"], task="feature-extraction",
                library_name="sentence_transformers", opset=17, local_files_only=True,
                do_validation=False)
    return folders


def _legacy(folder: Path) -> None:
    """A mean-pooling model's files rewritten as sentence-transformers before 5 wrote them."""
    listed = json.loads((folder / "modules.json").read_text())
    for module in listed:
        module["type"] = "sentence_transformers.models." + module["type"].rsplit(".", 1)[-1]
    (folder / "modules.json").write_text(json.dumps(listed))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": SMALL["hidden_size"], **LEGACY_POOLING}))
    (folder / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": SENTENCE_MAX_LENGTH, "do_lower_case": False}))
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["model_max_length"] = SMALL["max_position_embeddings"]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def cross_encoder_folders(directory: Path) -> tuple[Path, Path]:
    """(the saved model, its optimum export) of a cross-encoder reranker: a
    BertForSequenceClassification with one label (a pair's relevance logit), SMALL, seeded
    random weights, the WordPiece tokenizer ([CLS] A [SEP] B [SEP], token types 0 and 1)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    tokens = directory / "bert-tokenizer"
    vocabulary = len(_bert_tokenizer(tokens))
    torch.manual_seed(SEED)
    # weights 10x the usual scale: the first token's vector depends on the pair's second text
    # as a trained model's does (at 0.02 it is near the same for every passage)
    model = BertForSequenceClassification(BertConfig(vocab_size=vocabulary, num_labels=1,
                                                     initializer_range=0.2, **SMALL)).eval()
    saved = Path(shutil.copytree(tokens, directory / "reranker-saved", dirs_exist_ok=True))
    model.save_pretrained(saved)
    return saved, _export(model, tokens, "text-classification", directory / "reranker")
