"""token-classification in Python: the task told from config.json, the grouping of tagged tokens
into entities (transformers' aggregation_strategy="simple"), the tokens' character offsets by
bundler.text.entities' alignment (equal to the tokenizers library's offset mapping on plain text)
and `bundle run --text`, on a DistilBertForTokenClassification exported by optimum."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bundler.bundle.modelio import cpu_session
from bundler.bundle.options import BuildOptions
from bundler.bundle.records import Task
from bundler.text.build import text_source
from bundler.text.entities import entities, token_spans
from bundler.text.reference import run_text
from bundler.text.tokenizer import TextTokenizer
from bundler.verify.reference import run_native
from tests import encoder_models, text_tokenizers
from tests.conftest import run_cli

TAGS = list(encoder_models.TAGS.values())
PLAIN = ["The quick brown fox jumps over the lazy dog.", "Café, naïve résumé in Zürich!",
         "It wasn't the dog's fault; they're tired.", "Numbers like 12345 and 3.14 too",
         "Dvořák and Ångström met in São Paulo", "東京は日本の首都です。", ""]


@pytest.fixture(scope="module")
def tagger(tmp_path_factory) -> Path:
    return encoder_models.tagger_folder(tmp_path_factory.mktemp("tagger"))


def _logits(tags: list[str | None], score: float = 4.0) -> np.ndarray:
    """One row per token, `score` on its tag's logit (None: a row of zeros, all tags alike)."""
    rows = np.zeros((len(tags), len(TAGS)))
    for row, tag in zip(rows, tags, strict=True):
        if tag is not None:
            row[TAGS.index(tag)] = score
    return rows


def test_tagged_tokens_group_as_transformers_simple_aggregation():
    text = "Ada Lovelace met Paris Hilton in Paris"
    words = [(0, 3), (4, 12), (13, 16), (17, 22), (23, 29), (30, 32), (33, 38)]
    # [CLS] Ada Lovelace met Paris Hilton in Paris [SEP]: a B- starts a group, an I- of another
    # type too, special tokens (no span) are dropped without ending a group, O is dropped
    spans = [None, *words, None]
    tags = ["B-PER", "B-PER", "I-PER", "O", "B-PER", "I-LOC", "O", "I-LOC", "B-LOC"]
    found = entities(text, spans, _logits(tags), TAGS)
    top = float(np.exp(4) / (np.exp(4) + 4))
    assert found == [
        {"entity": "PER", "score": pytest.approx(top), "start": 0, "end": 12,
         "word": "Ada Lovelace"},
        {"entity": "PER", "score": pytest.approx(top), "start": 17, "end": 22, "word": "Paris"},
        {"entity": "LOC", "score": pytest.approx(top), "start": 23, "end": 29, "word": "Hilton"},
        {"entity": "LOC", "score": pytest.approx(top), "start": 33, "end": 38, "word": "Paris"}]
    # a group's score is its tokens' mean; a tie takes the lowest index (O: dropped); a label
    # without B-/I- is a type of its own
    mixed = _logits(["B-LOC", "I-LOC", None])
    mixed[1, TAGS.index("I-LOC")] = 1.0
    spans = [(0, 3), (4, 12), (13, 16)]
    found = entities(text, spans, mixed, TAGS)
    scores = np.exp(mixed[:2].max(axis=1)) / np.exp(mixed[:2]).sum(axis=1)
    assert [e["word"] for e in found] == ["Ada Lovelace"]
    assert found[0]["score"] == pytest.approx(scores.mean())
    plain = entities(text, spans[:1], np.zeros((1, 3)), ["MISC", "O", "DATE"])
    assert plain == [{"entity": "MISC", "score": pytest.approx(1 / 3), "start": 0, "end": 3,
                      "word": "Ada"}]


@pytest.mark.parametrize("family", ["wordpiece", "byte_level_bpe"])
def test_token_offsets_equal_the_tokenizers_offset_mapping_on_plain_text(family, tmp_path):
    tokenizer = TextTokenizer.from_folder(getattr(text_tokenizers, family)(tmp_path))
    # byte-level BPE places a character split across tokens and a run of spaces otherwise
    # (the module says how): its texts here are single-spaced ASCII
    texts = PLAIN if family == "wordpiece" else [t for t in PLAIN if t.isascii()]
    for text in texts:
        encoding = tokenizer.tokenizer.encode(text)
        special = encoding.special_tokens_mask
        wanted = [None if s else tuple(o) for o, s in zip(encoding.offsets, special,
                                                          strict=True)]
        assert token_spans(tokenizer, text, encoding.ids) == wanted, text


def test_a_token_the_text_does_not_spell_spans_up_to_the_next_token(tmp_path):
    tokenizer = TextTokenizer.from_folder(text_tokenizers.wordpiece(tmp_path))
    text = "fox ⅻ🦊! jumps"  # not in the vocabulary: [UNK], spanning up to the "!"
    encoding = tokenizer.tokenizer.encode(text)
    assert "[UNK]" in encoding.tokens
    assert token_spans(tokenizer, text, encoding.ids) == [
        None if s else tuple(o) for o, s in zip(encoding.offsets, encoding.special_tokens_mask,
                                                strict=True)]


def test_the_task_is_inferred_and_entities_equal_transformers_pipeline(tagger):
    from optimum.onnxruntime import ORTModelForTokenClassification
    from transformers import AutoTokenizer, pipeline

    source, options, _ = text_source(tagger, BuildOptions())
    assert options.task.kind == "token-classification" and options.task.labels == tuple(TAGS)
    _, asked, _ = text_source(tagger, BuildOptions(task=["token-classification"]))
    assert asked.task.labels == tuple(TAGS)
    session = cpu_session(source)
    task = Task(kind="token-classification", input="input_ids", output="logits", labels=TAGS)
    texts = ["The cat sat on the mat.", "Stock markets fell sharply after the announcement.",
             "Le chat dort au soleil près de la fenêtre.", "Über den Wipfeln ist Ruh"]
    ours = run_text(lambda feeds: run_native(session, feeds), task,
                    TextTokenizer.from_folder(tagger), [i.name for i in session.get_inputs()],
                    texts)["entities"]
    theirs = pipeline("token-classification", aggregation_strategy="simple",
                      model=ORTModelForTokenClassification.from_pretrained(tagger),
                      tokenizer=AutoTokenizer.from_pretrained(tagger))(texts)
    assert sum(len(found) for found in ours) >= 8
    for text, found, want in zip(texts, ours, theirs, strict=True):
        assert [(e["entity"], e["start"], e["end"], e["word"]) for e in found] == [
            (e["entity_group"], e["start"], e["end"], text[e["start"]:e["end"]]) for e in want]
        assert [e["score"] for e in found] == pytest.approx([float(e["score"]) for e in want],
                                                            abs=1e-5)


def test_a_tagger_without_id2label_asks_for_task(tagger, tmp_path):
    import shutil

    from bundler.errors import ConfigError

    folder = Path(shutil.copytree(tagger, tmp_path / "tagger"))
    config = json.loads((folder / "config.json").read_text())
    del config["id2label"], config["label2id"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="text-classification, token-classification,"):
        text_source(folder, BuildOptions())


def test_bundle_run_text_prints_the_entities(tagger, tmp_path):
    built = run_cli("build", tagger, "-o", tmp_path / "dist", "--no-verify", "--variants", "fp32")
    assert built.returncode == 0, built.stderr
    manifest = json.loads((tmp_path / "dist" / "bundle.json").read_text())
    assert manifest["task"]["kind"] == "token-classification"
    assert manifest["task"]["labels"] == TAGS
    text = "The cat sat on the mat."
    result = run_cli("run", tmp_path / "dist", "--ep", "cpu", "--text", text, "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["texts"] == [text] and printed["entities"][0]
    assert all(e["word"] == text[e["start"]:e["end"]] for e in printed["entities"][0])
    table = run_cli("run", tmp_path / "dist", "--ep", "cpu", "--text", text)
    assert table.returncode == 0 and printed["entities"][0][0]["word"] in table.stdout


# Texts the two twins place alike for every family, where the tokenizers library's offset mapping
# is not the spec: accents, byte-level characters split across tokens, runs of spaces, emoji
# beyond U+FFFF, unknown tokens, ligatures that fold to two letters.
TWIN_TEXTS = [*PLAIN, "Café naïve résumé, Dvořák ⅻ🦊! quickly   jumps", "ﬁne ﬂags 👨‍👩‍👧 🇫🇷 ok",
              "Привет, мир! Γειά σου κόσμε", "tabs\tand\nnew lines", "  leading and trailing  "]


def test_node_places_tokens_and_groups_entities_as_python(tmp_path):
    import shutil
    import subprocess

    from bundler.site.npmtools import node_executable
    from bundler.text.entities import utf16_offsets
    from bundler.text.web import web_files
    from tests.conftest import ROOT

    for name, source in web_files().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, tmp_path / name)
    families = {name: getattr(text_tokenizers, name)(tmp_path / name)
                for name in ("wordpiece", "byte_level_bpe", "unigram")}
    read = lambda path: json.loads(path.read_text()) if path.is_file() else {}  # noqa: E731
    rng = np.random.default_rng(0)
    text = TWIN_TEXTS[7]
    spans = [None, (0, 4), (5, 10), (11, 17), (17, 18), (19, 25), (26, 28), (28, 29), (30, 37),
             (40, 45), None]
    cases = [{"text": text, "spans": spans, "logits": rng.normal(0, 3, (len(spans), 5)).tolist(),
              "labels": TAGS} for _ in range(20)]
    table = {"texts": TWIN_TEXTS, "cases": cases, "families": {
        name: {"tokenizer": read(folder / "tokenizer.json"),
               "config": read(folder / "tokenizer_config.json"),
               "special": read(folder / "special_tokens_map.json")}
        for name, folder in families.items()}}
    (tmp_path / "table.json").write_text(json.dumps(table, ensure_ascii=False))
    web = ROOT / "web" / "tasks" / "entities.mjs"
    result = subprocess.run([str(node_executable()), str(ROOT / "tests" / "js" /
                                                          "entities_twin.mjs"),
                             str(tmp_path / "table.json"),
                             (tmp_path / "text" / "tokenizer.mjs").as_uri(), web.as_uri()],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    node = json.loads(result.stdout)
    for name, folder in families.items():
        tokenizer = TextTokenizer.from_folder(folder)
        for text, got in zip(TWIN_TEXTS, node["spans"][name], strict=True):
            ids = tokenizer.encode([text]).input_ids[0].tolist()
            assert got["ids"] == ids
            want = [list(span) if span else None for span in token_spans(tokenizer, text, ids)]
            assert got["spans"] == want, (name, text)
    grouped = 0
    for case, got in zip(cases, node["entities"], strict=True):
        want = utf16_offsets(case["text"], entities(case["text"], case["spans"],
                                                    np.asarray(case["logits"]), TAGS))
        assert [{**e, "score": pytest.approx(e["score"], abs=1e-12)} for e in want] == got
        grouped += sum(e["end"] - e["start"] > 6 for e in got)
    assert grouped  # some entity groups several tokens


def test_variants_are_judged_by_each_tokens_label():
    from bundler.variants.budget import default_budget
    from bundler.variants.decoded import decoder

    task = Task(kind="token-classification", input="input_ids", output="logits", labels=TAGS)
    decode = decoder(task)
    assert decode is not None
    fp32 = [[_logits(["B-PER", "I-PER", "O"])[None]], [_logits(["B-LOC"])[None]]]
    variant = [[_logits(["B-PER", "O", "O"])[None]], [_logits(["B-LOC"])[None]]]
    (agreement,) = decode(["logits"], fp32, variant)
    assert (agreement.key, agreement.agreeing, agreement.n) == ("labels", 3, 4)
    assert "labels" in str(default_budget("token-classification"))
