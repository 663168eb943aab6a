"""Sentence-transformers models (BGE, E5, all-MiniLM...): `bundle build DIR` reads the folder's
modules.json, 1_Pooling/config.json and sentence_bert_config.json for feature-extraction's
pooling, normalize and max_length, or takes optimum's sentence-transformers export's own pooled
output (sentence_embedding); `bundle run --text` and embed() in Chromium give what
SentenceTransformer(folder).encode() gives."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from bundler.bundle.options import BuildOptions
from bundler.errors import ConfigError
from bundler.text.build import text_source
from bundler.text.folder import max_length
from bundler.text.reference import pooled
from bundler.text.samples import CHECK_TEXTS
from tests import encoder_models
from tests.conftest import run_cli

# the check sentences and one over max_seq_length (24 tokens): truncated as encode() truncates
TEXTS = [*CHECK_TEXTS, "the quick brown fox jumps over the lazy dog " * 6]
MIN_COSINE = 0.9999


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    return encoder_models.sentence_transformers_folders(tmp_path_factory.mktemp("sbert"))


@pytest.fixture(scope="module")
def encoded(folders) -> dict[str, np.ndarray]:
    """SentenceTransformer(folder).encode(TEXTS) of the cls and mean models."""
    from sentence_transformers import SentenceTransformer

    return {name: SentenceTransformer(str(folders[name]), device="cpu").encode(TEXTS)
            for name in ("cls", "mean")}


def _assert_cosines(rows, want: np.ndarray) -> None:
    rows = np.asarray(rows, np.float64)
    assert rows.shape == want.shape
    cosines = (rows * want).sum(axis=1) / (np.linalg.norm(rows, axis=1)
                                           * np.linalg.norm(want, axis=1))
    assert cosines.min() >= MIN_COSINE, cosines


def test_the_folder_sets_pooling_normalize_and_max_length(folders):
    expected = {"cls": ("cls", True), "mean": ("mean", False)}
    for name, (pooling, normalize) in expected.items():
        _, options, folder = text_source(folders[name], BuildOptions())
        task = options.task
        assert (task.kind, task.pooling, task.normalize) == ("feature-extraction", pooling,
                                                             normalize)
        assert folder is not None and max_length(folder) == encoder_models.SENTENCE_MAX_LENGTH
    # the flags win over the folder
    _, options, _ = text_source(folders["cls"], BuildOptions(task=["pooling=mean"]))
    assert (options.task.pooling, options.task.normalize) == ("mean", True)
    # optimum's sentence-transformers export: the task from its sentence_embedding output
    _, options, folder = text_source(folders["cls-export"], BuildOptions())
    assert options.task.kind == "feature-extraction" and "pooling" not in options.task.given
    assert folder is not None and max_length(folder) == encoder_models.SENTENCE_MAX_LENGTH


def _with_pooling(folders, tmp_path, mode) -> Path:
    folder = Path(shutil.copytree(folders["cls"], tmp_path / "sbert"))
    config = folder / "1_Pooling" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "pooling_mode": mode}))
    return folder


@pytest.mark.parametrize("mode, named", [("weightedmean", "weightedmean"),
                                         (["cls", "mean"], "cls \\+ mean")])
def test_a_pooling_not_done_here_is_one_line_naming_it(folders, tmp_path, mode, named):
    folder = _with_pooling(folders, tmp_path, mode)
    with pytest.raises(ConfigError, match=f"pooling \\({named}\\) is not one bundle build does"):
        text_source(folder, BuildOptions())
    result = run_cli("build", folder, "-o", tmp_path / "dist", "--no-verify")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    error = result.stderr.strip().splitlines()
    assert len(error) == 1 and "give --task pooling=mean, cls, max or last" in error[0]
    assert "--library sentence_transformers" in error[0]
    _, options, _ = text_source(folder, BuildOptions(task=["pooling=max"]))  # given: it builds
    assert options.task.pooling == "max"


def test_a_dense_module_past_the_pooling_asks_for_the_sentence_transformers_export(folders,
                                                                                  tmp_path):
    folder = Path(shutil.copytree(folders["cls"], tmp_path / "sbert"))
    listed = json.loads((folder / "modules.json").read_text())
    listed.insert(2, {"idx": 2, "name": "2", "path": "2_Dense",
                      "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(listed))
    with pytest.raises(ConfigError, match=r"2_Dense \(Dense\) comes after the pooling.*"
                                          r"--library sentence_transformers"):
        text_source(folder, BuildOptions())


@pytest.mark.parametrize("mode", ["cls", "mean", "max", "lasttoken"])
def test_each_pooling_is_the_sentence_transformers_module(mode):
    """pooled() against sentence-transformers' own Pooling module, on padded rows."""
    import torch
    from sentence_transformers.models import Pooling

    generator = np.random.default_rng(0)
    hidden = generator.normal(size=(3, 7, 16)).astype(np.float32)
    mask = np.array([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5], np.int64)
    want = Pooling(16, pooling_mode=mode)({"token_embeddings": torch.from_numpy(hidden),
                                           "attention_mask": torch.from_numpy(mask)})
    want = want["sentence_embedding"].numpy()
    setting = {"cls": "cls", "mean": "mean", "max": "max", "lasttoken": "last"}[mode]
    np.testing.assert_allclose(pooled(hidden, mask, setting, False), want, atol=1e-6)
    np.testing.assert_allclose(pooled(want, mask, "model", False), want, atol=0)


@pytest.fixture(scope="module")
def bundles(folders, tmp_path_factory, runtime_dist) -> dict[str, Path]:
    """Each folder built as users build it (the browser check on, fp32)."""
    root = tmp_path_factory.mktemp("sbert-bundles")
    built = {}
    for name, folder in folders.items():
        result = run_cli("build", folder, "-o", root / name, "--runtime-dir", runtime_dist,
                         "--variants", "fp32")
        assert result.returncode == 0, result.stderr
        built[name] = root / name
    return built


SOURCES = {"cls": "cls", "mean": "mean", "cls-export": "cls"}  # bundle -> the model it is


@pytest.mark.browser
def test_bundle_run_text_equals_sentence_transformers(bundles, encoded):
    records = {name: json.loads((bundles[name] / "bundle.json").read_text())
               for name in bundles}
    for record in records.values():
        assert record["verification"]["status"] == "passed", record["verification"]
    assert {name: (record["task"]["output"], record["task"]["pooling"],
                   record["task"]["normalize"], record["task"]["max_length"])
            for name, record in records.items()} == {
        "cls": ("last_hidden_state", "cls", True, 24),
        "mean": ("last_hidden_state", "mean", False, 24),
        "cls-export": ("sentence_embedding", "model", False, 24)}
    texts = [arg for text in TEXTS for arg in ("--text", text)]
    for name, source in SOURCES.items():
        result = run_cli("run", bundles[name], "--ep", "cpu", *texts, "--json")
        assert result.returncode == 0, result.stderr
        _assert_cosines(json.loads(result.stdout)["embeddings"], encoded[source])
    # the two poolings differ: the comparison above tells them apart
    cosines = (encoded["cls"] * encoded["mean"]).sum(axis=1) / np.linalg.norm(
        encoded["mean"], axis=1)
    assert cosines.max() < 0.999, cosines


EMBED = """async ({ url, ep, texts }) => {
  const { load } = await import(url);
  const model = await load({ executionProviders: [ep] });
  const rows = await model.embed(texts);
  let refused = null;
  if (model.manifest.task.pooling === 'model') {
    try {
      await model.embed(texts, { pooling: 'mean' });
    } catch (error) {
      refused = error.message;
    }
  }
  const opened = model.ep;
  await model.release();
  return { ep: opened, rows: rows.map((row) => Array.from(row)), refused };
}"""


@pytest.mark.browser
@pytest.mark.parametrize("ep", ["wasm", "webgpu"])
def test_embed_in_chromium_equals_sentence_transformers(bundles, encoded, webgpu_browser,
                                                        open_bundle, ep):
    for name, source in SOURCES.items():
        with open_bundle(webgpu_browser, bundles[name]) as page:
            got = page.evaluate(EMBED, {"url": page.base_url + "bundle.mjs", "ep": ep,
                                        "texts": TEXTS})
        assert got["ep"] == ep
        _assert_cosines(got["rows"], encoded[source])
        if name == "cls-export":
            assert "is pooled in the model" in got["refused"]


POOLED = """async ({ base, hidden, mask, dims }) => {
  const { pooled } = await import(base + 'tasks/text.mjs');
  const output = { dims, data: Float32Array.from(hidden) };
  const ids = BigInt64Array.from(mask.map(BigInt));
  const rows = {};
  for (const pooling of ['mean', 'cls', 'max', 'last']) {
    rows[pooling] = pooled(output, ids, pooling, true).map((row) => Array.from(row));
  }
  const model = { dims: [dims[0], dims[1] * dims[2]], data: output.data };
  rows.model = pooled(model, ids, 'model', true).map((row) => Array.from(row));
  return rows;
}"""


@pytest.mark.browser
def test_the_browser_twin_pools_as_the_python_reference(bundles, plain_browser, open_bundle):
    generator = np.random.default_rng(1)
    hidden = generator.normal(size=(3, 5, 4)).astype(np.float32)
    mask = np.array([[1] * 5, [0, 0, 1, 1, 1], [1, 1, 0, 0, 0]], np.int64)  # left and right
    with open_bundle(plain_browser, bundles["cls"]) as page:
        got = page.evaluate(POOLED, {"base": page.base_url, "hidden": hidden.ravel().tolist(),
                                     "mask": mask.ravel().tolist(), "dims": list(hidden.shape)})
    for pooling in ("mean", "cls", "max", "last"):
        np.testing.assert_allclose(got[pooling], pooled(hidden, mask, pooling, True), atol=1e-6)
    flat = hidden.reshape(3, -1)
    np.testing.assert_allclose(got["model"], pooled(flat, mask, "model", True), atol=1e-6)


QUERIES = ["where does the cat sleep?", "what did stocks do?", "where does the cat sleep?"]
PASSAGES = ["Le chat dort au soleil près de la fenêtre.", "Stocks fell sharply on Monday.",
            "Stocks fell sharply on Monday."]


@pytest.fixture(scope="module")
def reranker(tmp_path_factory, runtime_dist) -> dict[str, object]:
    """A cross-encoder built as users build it, and transformers' scores of the pairs (the
    sigmoid of the logit, as its text-classification pipeline gives a one-label model's)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    root = tmp_path_factory.mktemp("reranker")
    saved, folder = encoder_models.cross_encoder_folders(root)
    result = run_cli("build", folder, "-o", root / "dist", "--runtime-dir", runtime_dist,
                     "--variants", "fp32")
    assert result.returncode == 0, result.stderr
    tokenizer = AutoTokenizer.from_pretrained(saved)
    model = AutoModelForSequenceClassification.from_pretrained(saved).eval()
    with torch.no_grad():
        logits = model(**tokenizer(QUERIES, PASSAGES, padding=True, return_tensors="pt")).logits
    return {"bundle": root / "dist", "scores": torch.sigmoid(logits[:, 0]).double().numpy()}


@pytest.mark.browser
def test_a_cross_encoder_scores_pairs_as_transformers(reranker):
    want = reranker["scores"]
    # the pairs score apart, and one query's two passages too: a constant would not pass
    assert np.ptp(want) > 1e-2 and abs(want[0] - want[2]) > 1e-3
    bundle = json.loads((reranker["bundle"] / "bundle.json").read_text())
    assert bundle["task"]["activation"] == "sigmoid" and bundle["task"]["labels"] == ["LABEL_0"]
    pairs = [arg for query, passage in zip(QUERIES, PASSAGES, strict=True)
             for arg in ("--text", query, "--pair", passage)]
    result = run_cli("run", reranker["bundle"], "--ep", "cpu", *pairs, "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["pairs"] == PASSAGES
    np.testing.assert_allclose([row[0]["score"] for row in printed["classes"]], want, atol=1e-5)
    lone = run_cli("run", reranker["bundle"], "--ep", "cpu", "--text", QUERIES[0], "--pair", "a",
                   "--pair", "b")
    assert lone.returncode != 0 and "give one --pair per --text" in lone.stderr


RERANK = """async ({ url, ep, queries, passages }) => {
  const { load } = await import(url);
  const model = await load({ executionProviders: [ep] });
  const many = await model.classify(queries, { pairs: passages });
  const one = await model.classify(queries[0], { pairs: passages[0] });
  let refused = null;
  try {
    await model.classify(queries, { pairs: passages.slice(1) });
  } catch (error) {
    refused = error.message;
  }
  const opened = model.ep;
  await model.release();
  return { ep: opened, scores: many.map((classes) => classes[0].score), one: one[0].score,
           refused };
}"""


@pytest.mark.browser
@pytest.mark.parametrize("ep", ["wasm", "webgpu"])
def test_classify_takes_pairs_in_chromium(reranker, webgpu_browser, open_bundle, ep):
    with open_bundle(webgpu_browser, reranker["bundle"]) as page:
        got = page.evaluate(RERANK, {"url": page.base_url + "bundle.mjs", "ep": ep,
                                     "queries": QUERIES, "passages": PASSAGES})
    assert got["ep"] == ep
    np.testing.assert_allclose(got["scores"], reranker["scores"], atol=1e-5)
    np.testing.assert_allclose(got["one"], reranker["scores"][0], atol=1e-5)
    assert "give one pair per text" in got["refused"]
