"""Text bundles from optimum export folders in headless Chromium: the build checks embed() and
classify() against the Python reference, the browser's answers equal Python's (WASM, the worker,
WebGPU), the demo page searches and labels, and `bundle test` catches a drifted twin."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from bundler.bundle import manifest as manifest_file
from bundler.bundle.modelio import cpu_session
from bundler.text.reference import GROUP_TEXTS, length_groups, pooled, run_text
from bundler.text.samples import CHECK_TEXTS
from bundler.text.tokenizer import TextTokenizer
from bundler.verify.reference import run_native
from bundler.verify.tolerance import tolerance_for
from tests import encoder_models
from tests.conftest import run_cli

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def text_bundles(tmp_path_factory, runtime_dist) -> dict[str, Path]:
    """Each export folder built as users build it (`bundle build DIR`, the browser check on)."""
    root = tmp_path_factory.mktemp("text")
    folders = {**encoder_models.bert_folders(root / "models"),
               "roberta": encoder_models.roberta_folder(root / "models"),
               "xlmr": encoder_models.xlmr_folder(root / "models")}
    built = {}
    for kind, folder in folders.items():
        output = root / kind
        result = run_cli("build", folder, "-o", output, "--runtime-dir", runtime_dist,
                         "--variants", "fp32,int8")
        assert result.returncode == 0, result.stderr
        built[kind] = output
    return built | {f"{kind}-folder": folder for kind, folder in folders.items()}


def _reference(directory: Path, folder: Path, texts, variant: str = "fp32", **task_fields):
    manifest = manifest_file.load(directory)
    task = manifest.task
    for key, value in task_fields.items():
        setattr(task, key, value)
    session = cpu_session(directory / manifest.session().variant(variant).file)
    return run_text(lambda feeds: run_native(session, feeds), task,
                    TextTokenizer.from_folder(folder), [s.name for s in manifest.session().inputs],
                    texts)


def test_the_build_checked_every_variant_and_ships_the_text_files(text_bundles):
    for name, kind, limit in (("feature-extraction", "feature-extraction", 128),
                              ("text-classification", "text-classification", 128),
                              ("roberta", "feature-extraction", 48),
                              ("xlmr", "feature-extraction", 64)):
        bundle = json.loads((text_bundles[name] / "bundle.json").read_text(encoding="utf-8"))
        assert bundle["verification"]["status"] == "passed", bundle["verification"]
        # fused, though the bundle ships WebGPU: the check above ran the fused graph on both EPs
        steps = {step["name"]: step for step in bundle["optimization"]["steps"]}
        assert steps["transformer-fusions"]["status"] == "ok", steps["transformer-fusions"]
        task = bundle["task"]
        assert task["kind"] == kind and task["max_length"] == limit
        assert set(task["files"]) >= {"config.json", "tokenizer.json", "tokenizer_config.json",
                                      "special_tokens_map.json"}
        listed = {entry["path"]: entry for entry in bundle["files"]}
        for path in task["files"].values():  # hashed and compressed like every file
            assert path.startswith("text/") and path in listed
            assert "gzip" in listed[path]["encodings"]
        files_module = (text_bundles[name] / "bundle.files.mjs").read_text(encoding="utf-8")
        assert task["files"]["tokenizer.json"] + ".gz" in files_module
    labels = json.loads((text_bundles["text-classification"] / "bundle.json").read_text())
    assert labels["task"]["labels"] == list(encoder_models.LABELS.values())
    assert labels["task"]["activation"] == "softmax"


EMBED = """async ({ url, options, texts, settings }) => {
  const { load } = await import(url);
  const model = await load(options);
  const rows = await model.embed(texts, settings);
  const one = await model.embed(texts[0]);
  const ep = model.ep;
  await model.release();
  const plain = (row) => (ArrayBuffer.isView(row) ? Array.from(row) : row.map(plain));
  return { ep, rows: rows.map(plain), one: one.map(plain),
           typed: rows.every((row) => row instanceof Float32Array) };
}"""


@pytest.mark.parametrize("options", [
    {"executionProviders": ["wasm"]},
    {"executionProviders": ["wasm"], "worker": True},
    {"executionProviders": ["webgpu"]},
], ids=["wasm", "worker", "webgpu"])
def test_embed_equals_the_python_reference(text_bundles, webgpu_browser, open_bundle, options):
    directory = text_bundles["feature-extraction"]
    folder = text_bundles["feature-extraction-folder"]
    texts = list(CHECK_TEXTS)
    for settings in ({}, {"pooling": "cls", "normalize": False}):
        native = _reference(directory, folder, texts, **settings)["embeddings"]
        with open_bundle(webgpu_browser, directory) as page:
            got = page.evaluate(EMBED, {"url": page.base_url + "bundle.mjs", "options": options,
                                        "texts": texts, "settings": settings})
        assert got["ep"] == options["executionProviders"][0] and got["typed"]
        assert len(got["rows"]) == len(texts)
        for row, want in zip(got["rows"], native, strict=True):
            cosine = np.dot(row, want) / (np.linalg.norm(row) * np.linalg.norm(want))
            assert cosine >= 0.9999
            np.testing.assert_allclose(row, want, atol=1e-4)
        # one text alone (no padding) is the same row as in the batch
        np.testing.assert_allclose(got["one"][0], _reference(directory, folder, texts[:1])[
            "embeddings"][0], atol=1e-5)
    norms = np.linalg.norm(np.asarray(got["rows"]), axis=1)
    assert not np.allclose(norms, 1)  # normalize false kept the lengths


GROUPED = """async ({ url, base, texts, cases }) => {
  const { load } = await import(url);
  const { lengthGroups } = await import(base + 'tasks/text.mjs');
  const model = await load({ executionProviders: ['wasm'] });
  const runs = [];
  const run = model.run.bind(model);
  model.run = (feeds) => { runs.push(feeds.input_ids.dims); return run(feeds); };
  const rows = await model.embed(texts);
  const alone = [];
  for (const text of texts) alone.push(Array.from((await model.embed(text))[0]));
  await model.release();
  return { rows: rows.map((row) => Array.from(row)), alone, runs,
           groups: cases.map((lengths) => lengthGroups(lengths)) };
}"""


def test_embed_runs_texts_in_length_groups_and_answers_in_order(text_bundles, webgpu_browser,
                                                                 open_bundle):
    """Mixed lengths, long and short interleaved: embed() runs the texts in bundler.text.reference's
    length groups (the twins cut the same groups) and each row is its own text's, as embedding
    that text alone gives it, and equals the Python reference's."""
    directory = text_bundles["feature-extraction"]
    folder = text_bundles["feature-extraction-folder"]
    long, short = CHECK_TEXTS[-1], list(CHECK_TEXTS[:-1])
    texts = [text for pair in zip(short, [long * (1 + i % 3) for i in range(len(short))],
                                  strict=True) for text in pair]
    tokenizer = TextTokenizer.from_folder(folder)
    task = manifest_file.load(directory).task
    lengths = tokenizer.encode(texts, max_length=task.max_length).attention_mask.sum(axis=1)
    cases = [lengths.tolist(), [7] * (GROUP_TEXTS + 3), [40, 3, 9, 3, 10, 41, 2, 9], []]
    native = _reference(directory, folder, texts)["embeddings"]
    with open_bundle(webgpu_browser, directory) as page:
        got = page.evaluate(GROUPED, {"url": page.base_url + "bundle.mjs",
                                      "base": page.base_url, "texts": texts, "cases": cases})
    assert got["groups"] == [length_groups(case) for case in cases]
    groups = length_groups(lengths.tolist())
    assert len(groups) > 1 and len(got["groups"][1]) == 2  # the size bound cut 35 equal texts
    # the model ran once per group, each at its longest text's length
    assert got["runs"][:len(groups)] == [[len(group), max(lengths[i] for i in group)]
                                          for group in groups]
    np.testing.assert_allclose(got["rows"], native, atol=1e-5)
    np.testing.assert_allclose(got["rows"], got["alone"], atol=1e-5)
    # the same rows as one batch padded to the longest text
    session = cpu_session(directory / manifest_file.load(directory).session().variant(
        "fp32").file)
    batch = tokenizer.encode(texts, max_length=task.max_length)
    hidden = run_native(session, batch.to_feeds(
        [s.name for s in manifest_file.load(directory).session().inputs]))[task.output]
    np.testing.assert_allclose(native, pooled(hidden, batch.attention_mask, task.pooling,
                                              task.normalize), atol=1e-5)


def test_a_roberta_that_pads_on_the_left_embeds_as_python(text_bundles, webgpu_browser,
                                                          open_bundle):
    """Byte-level BPE, no token_type_ids, left padding: masked mean and the first kept token."""
    directory, folder = text_bundles["roberta"], text_bundles["roberta-folder"]
    texts = [*CHECK_TEXTS, "a long one " * 40]  # over max_length 48: truncated alike
    inputs = manifest_file.load(directory).session().inputs
    assert [spec.name for spec in inputs] == ["input_ids", "attention_mask"]
    for settings in ({}, {"pooling": "cls"}):
        native = _reference(directory, folder, texts, **settings)["embeddings"]
        with open_bundle(webgpu_browser, directory) as page:
            got = page.evaluate(EMBED, {"url": page.base_url + "bundle.mjs", "texts": texts,
                                        "options": {"executionProviders": ["wasm"]},
                                        "settings": settings})
        np.testing.assert_allclose(got["rows"], native, atol=1e-5)
    # one text alone (embed(text), mean pooling) is its row of the left-padded batch
    np.testing.assert_allclose(got["one"][0], _reference(directory, folder, texts)[
        "embeddings"][0], atol=1e-5)


def test_an_xlm_roberta_with_a_sentencepiece_tokenizer_embeds_as_python(text_bundles,
                                                                       webgpu_browser,
                                                                       open_bundle):
    """Multilingual: sentencepiece's Precompiled normaliser, CJK, RTL and emoji, over-long."""
    directory, folder = text_bundles["xlmr"], text_bundles["xlmr-folder"]
    texts = [*CHECK_TEXTS, "東京は日本の首都です。", "مرحبا بالعالم", "ｆｕｌｌｗｉｄｔｈ 🙂",
             "long " * 80]
    native = _reference(directory, folder, texts)["embeddings"]
    with open_bundle(webgpu_browser, directory) as page:
        got = page.evaluate(EMBED, {"url": page.base_url + "bundle.mjs", "texts": texts,
                                    "options": {"executionProviders": ["wasm"]},
                                    "settings": {}})
    np.testing.assert_allclose(got["rows"], native, atol=1e-5)


CLASSIFY = """async ({ url, options, texts, variant }) => {
  const { load } = await import(url);
  const model = await load({ ...options, variant });
  const many = await model.classify(texts, { topK: 3 });
  const one = await model.classify(texts[0]);
  await model.release();
  return { many, one };
}"""


@pytest.mark.parametrize("variant", ["fp32", "int8"])
def test_classify_gives_id2label_labels_equal_to_python(text_bundles, webgpu_browser,
                                                         open_bundle, variant):
    directory = text_bundles["text-classification"]
    folder = text_bundles["text-classification-folder"]
    texts = list(CHECK_TEXTS)
    native = _reference(directory, folder, texts, variant)["classes"]
    with open_bundle(webgpu_browser, directory) as page:
        got = page.evaluate(CLASSIFY, {"url": page.base_url + "bundle.mjs", "texts": texts,
                                       "options": {"executionProviders": ["wasm"]},
                                       "variant": variant})
    assert len(got["many"]) == len(texts)
    for answer, want in zip(got["many"], native, strict=True):
        assert [c["label"] for c in answer] == [c["label"] for c in want]
        assert {c["label"] for c in answer} == set(encoder_models.LABELS.values())
        # the policy's bound: dynamic int8 rounds its scales differently on WASM and x86
        np.testing.assert_allclose([c["score"] for c in answer], [c["score"] for c in want],
                                   atol=tolerance_for("task-scores", variant).atol)
    assert got["one"] == got["many"][0] or [c["label"] for c in got["one"]] == [
        c["label"] for c in got["many"][0]]
    # the scores differ between texts: the answers are the model's, not a constant
    top = [answer[0]["score"] for answer in got["many"]]
    assert max(top) - min(top) > 1e-3


@pytest.mark.parametrize("kind, first", [("feature-extraction", "Le chat dort"),
                                         ("text-classification", None)])
def test_the_demo_page_searches_and_labels(text_bundles, webgpu_browser, open_bundle, kind,
                                           first):
    directory = text_bundles[kind]
    with open_bundle(webgpu_browser, directory, "index.html") as page:
        page.page.wait_for_selector("body[data-ready=true]")
        if first:  # the query is one of the paragraphs: it ranks first, at cosine 1
            page.page.fill("#task-text", "Le chat dort au soleil près de la fenêtre.")
        page.page.click("#task-run")
        page.page.wait_for_selector("#task-results li")
        items = page.page.locator("#task-results li").all_text_contents()
    if first:
        assert items[0].startswith("1.000") and first in items[0] and len(items) == 4
    else:
        assert len(items) == 3 and all(item.split(":")[0] in encoder_models.LABELS.values()
                                       for item in items)


def test_bundle_test_catches_a_drifted_pooling(text_bundles, tmp_path):
    # the real command in a subprocess (this module's Playwright driver is still running)
    directory = text_bundles["feature-extraction"]
    args = ("--ep", "wasm", "--no-fallback")
    result = run_cli("test", directory, *args)
    assert result.returncode == 0, result.stderr
    drifted = tmp_path / "drifted"
    shutil.copytree(directory, drifted)
    module = drifted / "tasks" / "text.mjs"  # the browser's masked mean counts the padding too
    module.write_text(module.read_text().replace("mask[b * tokens + t] !== 0n", "true"))
    for compressed in (drifted / "tasks").glob("text.mjs.*"):
        compressed.unlink()
    result = run_cli("test", drifted, *args)
    assert result.returncode != 0
    assert "task answers differ from the Python reference" in result.stderr.splitlines()[-1]


def test_bundle_run_text_prints_the_python_reference(text_bundles):
    directory = text_bundles["text-classification"]
    texts = ["What a wonderful day!", "Le chat dort."]
    result = run_cli("run", directory, "--ep", "cpu", "--text", texts[0], "--text", texts[1],
                     "--top-k", "2", "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    native = _reference(directory, text_bundles["text-classification-folder"], texts)["classes"]
    assert printed["texts"] == texts and len(printed["classes"]) == 2
    for answer, want in zip(printed["classes"], native, strict=True):
        assert [c["label"] for c in answer] == [c["label"] for c in want[:2]]
    table = run_cli("run", directory, "--ep", "cpu", "--text", texts[0])
    assert table.returncode == 0 and "What a wonderful day!" in table.stdout
    image = run_cli("run", directory, "--text", "a", "--audio", "x.wav")
    assert image.returncode != 0 and "give one of --image, --audio or --text" in image.stderr
