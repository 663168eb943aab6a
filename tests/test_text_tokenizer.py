"""Tokenization for text bundles: bundler.text.tokenizer (Python, tokenizers) and
web/text/tokenizer.mjs (JavaScript, @huggingface/tokenizers) encode and decode
tests/data/text_corpus.json alike, for byte-level BPE, WordPiece and Unigram tokenizers trained
here (tests/text_tokenizers.py), in Node and in Chromium from the files a bundle ships."""

from __future__ import annotations

import json
import shutil
import subprocess
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bundler.bundle.layout import RESERVED, TEXT_DIR, TEXT_FILES
from bundler.errors import ConfigError, ModelError
from bundler.site.npmtools import node_executable
from bundler.text.tokenizer import Settings, TextTokenizer, TokenBatch
from bundler.text.web import web_files
from tests.conftest import ROOT
from tests.text_tokenizers import all_families, random_texts

CORPUS = json.loads((ROOT / "tests" / "data" / "text_corpus.json").read_text(encoding="utf-8"))
# The corpus, and random texts in batches of 8 (seeded: the same every run).
RANDOM = random_texts(800)
CASES: list[dict[str, Any]] = [*CORPUS["cases"], *(
    {"name": f"random texts {start}-{start + 7}", "texts": RANDOM[start:start + 8]}
    for start in range(0, len(RANDOM), 8))]
# "family/case" -> why the two libraries differ there (docs/explanation/tokenization.md)
KNOWN: dict[str, str] = CORPUS["known_differences"]
PARITY_MODULE = ROOT / "tests" / "js" / "text_parity.mjs"


@pytest.fixture(scope="module")
def families(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return all_families(tmp_path_factory.mktemp("tokenizers"))


def unpadded(batch: TokenBatch) -> list[list[int]]:
    """Each row's ids without its padding."""
    return [row[mask == 1].tolist()
            for row, mask in zip(batch.input_ids, batch.attention_mask, strict=True)]


def python_results(tokenizer: TextTokenizer) -> list[dict[str, Any]]:
    """What runCorpus (tests/js/text_parity.mjs) gives, from the Python side."""
    results = []
    for case in CASES:
        try:
            batch = tokenizer.encode(case["texts"], case.get("pairs"),
                                     max_length=case.get("max_length"),
                                     add_special_tokens=case.get("add_special_tokens"))
        except ConfigError as error:
            results.append({"error": str(error)})
            continue
        kept = unpadded(batch)
        results.append({
            "input_ids": batch.input_ids.tolist(), "attention_mask": batch.attention_mask.tolist(),
            "token_type_ids": batch.token_type_ids.tolist(), "dims": list(batch.input_ids.shape),
            "decoded": [tokenizer.decode(row) for row in kept],
            "decoded_special": [tokenizer.decode(row, skip_special_tokens=False) for row in kept]})
    return results


@pytest.fixture(scope="module")
def site(families: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out as a text bundle (text/ from web_files()) with the parity module and
    the corpus input."""
    root = tmp_path_factory.mktemp("site")
    for name, source in web_files().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, root / name)
    shutil.copyfile(PARITY_MODULE, root / PARITY_MODULE.name)
    read = lambda path: json.loads(path.read_text()) if path.is_file() else {}  # noqa: E731
    inputs = {"cases": CASES, "families": {
        name: {"tokenizer": read(folder / "tokenizer.json"),
               "config": read(folder / "tokenizer_config.json"),
               "special": read(folder / "special_tokens_map.json")}
        for name, folder in families.items()}}
    (root / "input.json").write_text(json.dumps(inputs, ensure_ascii=False))
    (root / "index.html").write_text("<!doctype html><meta charset=utf-8><title>parity</title>")
    return root


@pytest.fixture(scope="module")
def python_side(families: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Each family's results on the Python side (once for the Node and the Chromium test):
    {"vocabulary": each id decoded alone, "cases": python_results}."""
    sides = {}
    for family, folder in families.items():
        tokenizer = TextTokenizer.from_folder(folder)
        sides[family] = {"vocabulary": [tokenizer.decode([i]) for i in
                                        range(tokenizer.tokenizer.get_vocab_size())],
                         "cases": python_results(tokenizer)}
    return sides


def assert_parity(python: dict[str, dict[str, Any]], js: dict[str, dict[str, Any]]) -> None:
    """Every case equal on both sides, but the known differences, which must still differ; and
    each id of the vocabulary decoded alone alike."""
    mismatched, still_known = [], set()
    for family, expected in python.items():
        mismatched += [f"{family}/vocabulary: id {i} decodes to {want!r} in Python, {got!r} in JS"
                       for i, (want, got) in enumerate(zip(expected["vocabulary"],
                                                           js[family]["vocabulary"], strict=True))
                       if want != got]
        for case, want, got in zip(CASES, expected["cases"], js[family]["cases"], strict=True):
            key = f"{family}/{case['name']}"
            if want != got:
                if key in KNOWN:
                    still_known.add(key)
                    continue
                fields = [name for name in want.keys() | got.keys()
                          if want.get(name) != got.get(name)]
                mismatched.append(f"{key}: {', '.join(sorted(fields))}:"
                                  f" python {[want.get(f) for f in fields]}"
                                  f" js {[got.get(f) for f in fields]}"[:600])
    assert not mismatched, "\n".join(mismatched)
    assert still_known == set(KNOWN), f"known differences that are gone: {set(KNOWN) - still_known}"


def test_node_encodes_and_decodes_as_python(site: Path,
                                            python_side: dict[str, dict[str, Any]]) -> None:
    result = subprocess.run(
        [str(node_executable()), str(site / PARITY_MODULE.name), str(site / "input.json"),
         (site / "text" / "tokenizer.mjs").as_uri()],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert_parity(python_side, json.loads(result.stdout))


@pytest.mark.browser
def test_chromium_encodes_and_decodes_as_python(site: Path,
                                                 python_side: dict[str, dict[str, Any]],
                                                 plain_browser: Any, open_bundle: Any) -> None:
    with open_bundle(plain_browser, site, "index.html") as page:
        # as one JSON string: Playwright's transfer of the result as an object took longer than
        # the tokenizing itself
        js = page.evaluate("""async () => {
          const input = await (await fetch('input.json')).json();
          const { runCorpus } = await import('./text_parity.mjs');
          return JSON.stringify(runCorpus(await import('./text/tokenizer.mjs'), input));
        }""")
        assert all(url.startswith(page.base_url) for url in page.requests), page.requests
    assert_parity(python_side, json.loads(js))


def test_bert_words_split_as_the_python_librarys_on_every_code_point(site: Path) -> None:
    """BertPreTokenizer's whitespace and punctuation in JavaScript (web/text/tokenizer.mjs's
    bertPieces, which corrects the browser's \\p{P} by a table) are the Python library's."""
    from tokenizers.pre_tokenizers import BertPreTokenizer

    result = subprocess.run(
        [str(node_executable()), str(site / PARITY_MODULE.name), "bert-splits",
         (site / "text" / "tokenizer.mjs").as_uri()], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    javascript = {point: pieces for point, pieces in json.loads(result.stdout)}
    bert = BertPreTokenizer()
    python = {}
    for point in range(0x110000):
        if not 0xD800 <= point < 0xE000:
            pieces = len(bert.pre_tokenize_str(f"a{chr(point)}b"))
            if pieces != 1:
                python[point] = pieces
    differing = sorted(javascript.keys() ^ python.keys()) + sorted(
        point for point in javascript.keys() & python.keys() if javascript[point] != python[point])
    assert not differing, [f"U+{point:04X}: python {python.get(point, 1)} pieces,"
                           f" javascript {javascript.get(point, 1)}" for point in differing[:40]]


def test_accents_are_stripped_as_the_python_librarys_on_every_code_point(site: Path) -> None:
    """StripAccents and BertNormalizer's strip_accents in JavaScript (web/text/tokenizer.mjs's
    stripAccents and bertStripAccents, the browser's mark classes corrected by tables) remove the
    code points the Python library removes."""
    from tokenizers.normalizers import BertNormalizer, StripAccents

    result = subprocess.run(
        [str(node_executable()), str(site / PARITY_MODULE.name), "accent-marks",
         (site / "text" / "tokenizer.mjs").as_uri()], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    javascript = [set(points) for points in json.loads(result.stdout)]
    bert = BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                          lowercase=False)
    python: list[set[int]] = [set(), set()]
    for point in range(0x110000):
        if not 0xD800 <= point < 0xE000:
            for removed, normalizer in zip(python, (StripAccents(), bert), strict=True):
                if normalizer.normalize_str(chr(point)) == "":
                    removed.add(point)
    for name, js, py in zip(("StripAccents", "BertNormalizer"), javascript, python, strict=True):
        assert js == py, (name, [f"U+{point:04X}" for point in sorted(js ^ py)[:40]])


def test_unigram_near_ties_are_broken_as_the_python_librarys(site: Path,
                                                              families: dict[str, Path]) -> None:
    """TIED_PIECES (tests/text_tokenizers.py) really hold a near-tie that @huggingface/tokenizers'
    own lattice breaks otherwise than the Python library ("▁ab c" for "▁a b c": the two paths
    are one ulp apart, and adding "c" rounds them to one sum) and an exact tie both break alike;
    web/text/tokenizer.mjs (bestPieces) gives the Python library's pieces. The parity tests run
    the whole corpus on this vocabulary; this one keeps the vocabulary a real near-tie."""
    from tokenizers import Tokenizer

    text = "abc xyz Zabc"
    python = Tokenizer.from_file(str(families["ties"] / "tokenizer.json")).encode(
        text, add_special_tokens=False).tokens
    assert python == ["▁a", "b", "c", "▁xy", "z", "▁", "Z", "a", "b", "c"]
    script = f"""
      import {{ readFileSync }} from 'node:fs';
      import {{ Tokenizer }} from '{(site / "text" / "tokenizers.mjs").as_uri()}';
      import {{ loadTokenizer }} from '{(site / "text" / "tokenizer.mjs").as_uri()}';
      const json = JSON.parse(readFileSync({json.dumps(str(families["ties"] / "tokenizer.json"))}));
      const own = new Tokenizer(json, {{}});
      own.pre_tokenizer.pre_tokenize_text = (word) => word.split(' ').map((w) => `▁${{w}}`);
      process.stdout.write(JSON.stringify([own.tokenize({text!r}),
        loadTokenizer(json).library.tokenize({text!r})]));"""
    result = subprocess.run([str(node_executable()), "--input-type=module", "-e", script],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    library, ours = json.loads(result.stdout)
    assert ours == python
    assert library[:2] == ["▁ab", "c"] and library[2:] == python[3:]


def test_the_corpus_keeps_its_unnormalised_texts() -> None:
    # An editor that saves text as NFC would quietly turn the NFD half of the pairs into the other.
    texts = [text for case in CORPUS["cases"] for text in case["texts"]]
    assert "cafe\u0301" in texts and not unicodedata.is_normalized("NFC", "".join(texts))


def test_python_side_encodes_and_decodes_as_transformers(families: dict[str, Path]) -> None:
    """The settings are read as transformers reads them: its fast tokenizer on the same folder
    gives the same batches and texts; but where max_length exceeds model_max_length, which
    transformers allows (with a warning) and we cap (a model has no positions past it)."""
    import warnings

    from transformers import PreTrainedTokenizerFast

    for family, folder in families.items():
        ours = TextTokenizer.from_folder(folder)
        theirs = PreTrainedTokenizerFast.from_pretrained(str(folder))
        padding = theirs.pad_token is not None  # transformers cannot pad without one
        for case, expected in zip(CASES, python_results(ours), strict=True):
            over_cap = (case.get("max_length") or 0) > (ours.settings.model_max_length or 1e9)
            if "error" in expected or not case["texts"] or over_cap:
                continue
            options = {} if case.get("add_special_tokens") is None else {
                "add_special_tokens": case["add_special_tokens"]}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                batch = theirs(case["texts"], case.get("pairs"), padding=padding,
                               truncation="longest_first", max_length=case.get("max_length"),
                               return_token_type_ids=True, **options)
            mask = expected["attention_mask"]
            for name in ("input_ids", "attention_mask", "token_type_ids"):
                rows = expected[name] if padding else [
                    [value for value, kept in zip(row, keep, strict=True) if kept]
                    for row, keep in zip(expected[name], mask, strict=True)]
                assert batch[name] == rows, (family, case["name"], name)
            for row, keep, text in zip(batch["input_ids"], batch["attention_mask"],
                                       expected["decoded"], strict=True):
                kept = [i for i, k in zip(row, keep, strict=True) if k]
                assert theirs.decode(kept, skip_special_tokens=True) == text, (family, row)


def test_rows_are_cut_to_the_limit_with_their_special_tokens(families: dict[str, Path]) -> None:
    wordpiece = TextTokenizer.from_folder(families["wordpiece"])  # model_max_length 32
    assert wordpiece.encode(["fox " * 100]).input_ids.shape == (1, 32)
    batch = wordpiece.encode(["fox " * 100, "a"], ["fox " * 100] * 2, max_length=9)
    cls, sep = (wordpiece.tokenizer.token_to_id(token) for token in ("[CLS]", "[SEP]"))
    first, second = unpadded(batch)
    assert len(first) == len(second) == 9 and first[0] == cls and first[-1] == sep
    assert first.count(sep) == 2 and first.index(sep) == 4  # 3 + 3 tokens: longest_first halves
    assert second[:3] == [cls, wordpiece.tokenizer.token_to_id("a"), sep]
    with pytest.raises(ConfigError, match="no room"):
        wordpiece.encode(["a"], ["b"], max_length=2)


def test_padding_fills_the_pad_id_on_the_configured_side(families: dict[str, Path]) -> None:
    bpe = TextTokenizer.from_folder(families["bpe"])  # pads on the left
    texts = ["a", "a longer text"]
    short, longest = (bpe.encode([text]).input_ids.shape[1] for text in texts)
    batch = bpe.encode(texts)
    assert batch.input_ids.dtype == np.int64 and batch.input_ids.shape == (2, longest)
    assert batch.attention_mask[0].tolist() == [0] * (longest - short) + [1] * short
    assert batch.input_ids[0, :longest - short].tolist() == [bpe.pad_id] * (longest - short)
    assert unpadded(batch)[0] == unpadded(bpe.encode(texts[:1]))[0]
    assert bpe.pad_id == bpe.tokenizer.token_to_id("<pad>")
    assert set(batch.to_feeds(["input_ids", "attention_mask"])) == {"input_ids", "attention_mask"}
    with pytest.raises(ModelError, match="position_ids"):
        batch.to_feeds(["input_ids", "position_ids"])


def test_settings_read_as_transformers_writes_them() -> None:
    settings = Settings.read({"model_max_length": 1e30, "pad_token": {"content": "[PAD]"}},
                             {"pad_token": "<other>", "padding_side": "left"})
    assert (settings.model_max_length, settings.pad_token, settings.padding_side) == \
        (None, "[PAD]", "left")
    with pytest.raises(ConfigError, match="padding_side"):
        Settings.read({"padding_side": "middle"})


def test_a_folder_without_a_readable_tokenizer_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tokenizer\.json: not found"):
        TextTokenizer.from_folder(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ConfigError, match="cannot be read as JSON"):
        TextTokenizer.from_folder(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"model": {"type": "Nope"}}')
    with pytest.raises(ConfigError, match="cannot load it"):
        TextTokenizer.from_folder(tmp_path)


def test_a_bundle_ships_the_library_under_reserved_names() -> None:
    files = web_files()
    assert set(files) == set(TEXT_FILES) and all(path.is_file() for path in files.values())
    assert TEXT_DIR.rstrip("/") in RESERVED
    assert "export" in files[TEXT_FILES[1]].read_text(encoding="utf-8")
