"""Text bundles validated on real texts (bundler.text.validation): `--validation texts.txt` (or
.jsonl) is tokenized by the bundle's tokenizer, one feed per text, and auto judges its candidates
on it (embeddings by cosine, labels by agreement), at build time and in `bundle test`; optimum
exports of small BERTs (tests/encoder_models.py), real onnxruntime."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from bundler.bundle.options import BuildOptions
from bundler.commands.build import build
from bundler.console import Reporter
from bundler.errors import ConfigError
from bundler.text.samples import CHECK_TEXTS
from bundler.text.validation import read_texts
from bundler.variants.holdout import check_held_out
from tests import encoder_models, task_models

COUNT = 120


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return encoder_models.bert_folders(tmp_path_factory.mktemp("text-models"))


def _texts(path: Path, count: int = COUNT) -> Path:
    """`count` different texts: pairs of the corpus' sentences, of several scripts and lengths."""
    corpus = sorted(set(encoder_models.CORPUS))
    pairs = itertools.islice(itertools.permutations(corpus, 2), count)
    path.write_text("\n".join(f"{a} {b}" for a, b in pairs) + "\n", encoding="utf-8")
    return path


def _auto(folder: Path, output: Path, validation: Path) -> dict:
    return build(folder, BuildOptions(output=output, verify=False, quantize="auto",
                                      variants=("fp32", "int8"), validation=validation,
                                      objective="size"), reporter=Reporter()).to_json()


def test_embeddings_are_judged_on_the_texts_given(folders, tmp_path) -> None:
    manifest = _auto(folders["feature-extraction"], tmp_path / "dist", _texts(tmp_path / "t.txt"))
    for candidate in manifest["selection"]["candidates"]:
        accuracy = candidate["accuracy"]
        assert (accuracy["data"], accuracy["samples"]) == ("validation", COUNT), candidate
        cosine = accuracy["bounds"]["cosine"]
        assert (cosine["n"], cosine["method"]) == (COUNT, "p5")
        assert "top1" not in accuracy["bounds"]  # hidden states have no classes
    # each text runs at its own length; the workload auto times is one text of the task's
    assert manifest["workload"]["dims_source"] == "task-size"


def test_labels_are_judged_on_the_texts_given_at_build_and_in_bundle_test(folders,
                                                                          tmp_path) -> None:
    texts = tmp_path / "t.jsonl"
    texts.write_text("\n".join(json.dumps({"text": t}) for t in
                               read_texts(_texts(tmp_path / "t.txt"))) + "\n", encoding="utf-8")
    folder = folders["text-classification"]
    manifest = _auto(folder, tmp_path / "dist", texts)
    assert manifest["selection"]["budget"] == "cosine>=0.999,labels>=0.99"
    for candidate in manifest["selection"]["candidates"]:
        bounds = candidate["accuracy"]["bounds"]
        assert bounds["labels"]["n"] == bounds["top1"]["n"] == COUNT
        assert bounds["labels"]["method"] == "wilson-95-lower"
    # 120 texts cannot show labels>=0.99 (it takes 381): fp32 ships, and the note says so
    assert manifest["sessions"][0]["default_variant"] == "fp32"
    assert "cannot show labels>=0.99" in manifest["selection"]["note"]
    (result,) = check_held_out(tmp_path / "dist", texts, None)
    assert result.metrics.judged("labels")[:2] == (COUNT, 1.0)
    assert result.failures == []  # fp32 is exact by construction


def test_a_file_of_texts_is_for_text_bundles_only(tmp_path) -> None:
    model = task_models.classifier(tmp_path)
    with pytest.raises(ConfigError, match="a file of texts validates a text bundle"
                                          " .* this one is image-classification: give an .npz"):
        build(model, BuildOptions(output=tmp_path / "dist", verify=False, quantize="auto",
                                  task=["image-classification"],
                                  validation=_texts(tmp_path / "t.txt")))


@pytest.mark.parametrize(("name", "content", "message"), [
    ("a.txt", "\n\n", "no texts in it"),
    ("a.jsonl", '{"text": "fine"}\n{"label": 1}\n', "line 2 is neither a string nor an object"),
    ("a.jsonl", '"fine"\nnot json\n', "line 2 is not JSON"),
])
def test_unreadable_texts_are_one_line(tmp_path, name, content, message) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        read_texts(path)
    assert read_texts(_texts(tmp_path / "ok.txt", 3)) == read_texts(_texts(tmp_path / "ok.txt", 3))


def test_without_data_a_text_bundle_is_measured_on_the_check_sentences(folders,
                                                                       tmp_path) -> None:
    manifest = build(folders["text-classification"],
                     BuildOptions(output=tmp_path / "dist", verify=False, quantize="auto",
                                  variants=("fp32", "int8")), reporter=Reporter()).to_json()
    for candidate in manifest["selection"]["candidates"]:
        accuracy = candidate["accuracy"]
        assert (accuracy["data"], accuracy["samples"]) == ("check-text", len(CHECK_TEXTS))
    # real text, but too few sentences to vouch for labels: fp32 ships, saying what it takes
    assert manifest["selection"]["note"].startswith(
        f"auto: {len(CHECK_TEXTS)} held-out samples (check-text) cannot show labels>=0.99")
