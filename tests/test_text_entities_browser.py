"""token-classification in headless Chromium (WASM): model.tokens() gives the Python reference's
entities (offsets in UTF-16 units), the demo page lists them, and `bundle test --text-file`
catches a drifted twin."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bundler.bundle import manifest as manifest_file
from bundler.bundle.modelio import cpu_session
from bundler.text.entities import utf16_offsets
from bundler.text.reference import run_text
from bundler.text.tokenizer import TextTokenizer
from bundler.verify.reference import run_native
from bundler.verify.tolerance import tolerance_for
from tests import encoder_models
from tests.conftest import run_cli

pytestmark = pytest.mark.browser

# Texts of several lengths (two length groups), with characters beyond U+FFFF before entities
TEXTS = ["The cat sat on the mat.", "🦊🦊 Le chat dort au soleil près de la fenêtre.",
         "Stock markets fell sharply after the announcement in Zürich and São Paulo.", "ok"]


def _built(folder: Path, runtime_dist: Path) -> tuple[Path, Path]:
    """(the bundle, its export folder): built without the browser check, which the tests do."""
    result = run_cli("build", folder, "-o", folder.parent / "dist", "--runtime-dir",
                     runtime_dist, "--variants", "fp32", "--no-verify")
    assert result.returncode == 0, result.stderr
    return folder.parent / "dist", folder


@pytest.fixture(scope="module")
def tagger(tmp_path_factory, runtime_dist) -> tuple[Path, Path]:
    """A DistilBERT tagger with a WordPiece tokenizer."""
    return _built(encoder_models.tagger_folder(tmp_path_factory.mktemp("tagger")), runtime_dist)


@pytest.fixture(scope="module")
def roberta_tagger(tmp_path_factory, runtime_dist) -> tuple[Path, Path]:
    """A RoBERTa tagger with a byte-level BPE tokenizer that pads on the left."""
    return _built(encoder_models.roberta_tagger_folder(tmp_path_factory.mktemp("roberta")),
                  runtime_dist)


TOKENS = """async ({ url, texts }) => {
  const { load } = await import(url);
  const model = await load({ executionProviders: ['wasm'] });
  const many = await model.tokens(texts);
  const one = await model.tokens(texts[1]);
  await model.release();
  return { many, one, words: many.map((found, i) => found.map((e) => texts[i].slice(e.start,
    e.end))) };
}"""


def _reference(directory: Path, folder: Path, texts: list[str]) -> list[list[dict]]:
    manifest = manifest_file.load(directory)
    session = cpu_session(directory / manifest.session().variant("fp32").file)
    return run_text(lambda feeds: run_native(session, feeds), manifest.task,
                    TextTokenizer.from_folder(folder),
                    [s.name for s in manifest.session().inputs], texts)["entities"]


@pytest.mark.parametrize("family", ["tagger", "roberta_tagger"])
def test_tokens_equal_the_python_reference(family, request, plain_browser, open_bundle):
    directory, folder = request.getfixturevalue(family)
    native = _reference(directory, folder, TEXTS)
    with open_bundle(plain_browser, directory) as page:
        got = page.evaluate(TOKENS, {"url": page.base_url + "bundle.mjs", "texts": TEXTS})
    assert got["one"] == got["many"][1]
    assert sum(len(found) for found in native) >= 6
    for text, found, want, words in zip(TEXTS, got["many"], native, got["words"], strict=True):
        want = utf16_offsets(text, want)
        assert [(e["entity"], e["start"], e["end"], e["word"]) for e in found] == [
            (e["entity"], e["start"], e["end"], e["word"]) for e in want]
        assert words == [e["word"] for e in found]  # text.slice(start, end) is the word
        assert [e["score"] for e in found] == pytest.approx(
            [e["score"] for e in want], abs=tolerance_for("task-scores", "fp32").atol)
    # past the emoji, UTF-16 offsets run 2 ahead of code points
    assert any(e["start"] == want["start"] + 2 for e, want in zip(got["many"][1], native[1],
                                                                  strict=True))


def test_the_demo_page_lists_the_entities(tagger, plain_browser, open_bundle):
    directory, folder = tagger
    with open_bundle(plain_browser, directory, "index.html") as page:
        page.page.wait_for_selector("body[data-ready=true]")
        page.page.fill("#task-text", TEXTS[0])
        page.page.click("#task-run")
        page.page.wait_for_selector("#task-results li")
        items = page.page.locator("#task-results li").all_text_contents()
    assert [item.split(":")[0] for item in items] == [
        f"{e['entity']} {e['start']}-{e['end']} “{e['word']}”"
        for e in _reference(directory, folder, TEXTS[:1])[0]]


def test_bundle_test_checks_the_entities_and_catches_a_drifted_twin(tagger, tmp_path):
    directory, _ = tagger
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps(TEXTS, ensure_ascii=False))
    args = ("--ep", "wasm", "--no-fallback", "--text-file", texts)
    result = run_cli("test", directory, *args)
    assert result.returncode == 0, result.stderr
    drifted = tmp_path / "drifted"
    shutil.copytree(directory, drifted)
    module = drifted / "tasks" / "entities.mjs"  # a B- tag no longer starts a new entity
    module.write_text(module.read_text().replace("tag === 'B' ||", ""))
    for compressed in (drifted / "tasks").glob("entities.mjs.*"):
        compressed.unlink()
    result = run_cli("test", drifted, *args)
    assert result.returncode != 0
    assert "task answers differ from the Python reference" in result.stderr.splitlines()[-1]
