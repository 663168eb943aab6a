"""`bundle build DIR` on an optimum export folder: the model, config and tokenizer files read,
the task told from config.json and the outputs, and a one-line error naming what is missing."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from bundler.bundle.options import BuildOptions
from bundler.bundle.records import Task
from bundler.errors import ConfigError
from bundler.tasks.spec import TaskSpec
from bundler.text.build import complete_text_task, text_source
from bundler.text.folder import max_length, read_folder
from tests import encoder_models
from tests.conftest import run_cli


@pytest.fixture(scope="session")
def text_folders(tmp_path_factory) -> dict[str, Path]:
    return encoder_models.bert_folders(tmp_path_factory.mktemp("text-models"))


def _copy(folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(folder, tmp_path / folder.name))


def test_the_task_comes_from_config_json(text_folders):
    for kind, folder in text_folders.items():
        source, options, read = text_source(folder, BuildOptions())
        assert source == folder / "model.onnx" and options.task.kind == kind
        assert options.name == folder.name and read is not None
        assert set(read.files) == {"config.json", "tokenizer.json", "tokenizer_config.json",
                                   "special_tokens_map.json"}
    _, options, _ = text_source(text_folders["text-classification"], BuildOptions())
    assert options.task.labels == tuple(encoder_models.LABELS.values())


def test_task_flags_win_over_the_folder(text_folders):
    asked = BuildOptions(task=["feature-extraction", "pooling=cls"])
    _, options, _ = text_source(text_folders["text-classification"], asked)
    assert options.task.kind == "feature-extraction" and options.task.pooling == "cls"
    _, options, _ = text_source(text_folders["feature-extraction"],
                                BuildOptions(task=["pooling=cls", "normalize=false"]))
    assert (options.task.kind, options.task.pooling, options.task.normalize) == (
        "feature-extraction", "cls", False)


def test_the_fp32_model_of_a_transformers_js_folder_is_the_source(text_folders, tmp_path):
    folder = _copy(text_folders["feature-extraction"], tmp_path)
    (folder / "onnx").mkdir()
    (folder / "model.onnx").rename(folder / "onnx" / "model.onnx")
    shutil.copy(folder / "onnx" / "model.onnx", folder / "onnx" / "model_quantized.onnx")
    assert read_folder(folder).model == folder / "onnx" / "model.onnx"


def test_a_transformers_js_speech_folder_gives_its_two_sessions(text_folders, tmp_path):
    """transformers.js keeps a Whisper export's files in onnx/, beside quantized siblings: the
    fp32 encoder and merged decoder are the sessions, not the decoder alone."""
    folder = _copy(text_folders["feature-extraction"], tmp_path)
    (folder / "onnx").mkdir()
    for name in ("encoder_model.onnx", "decoder_model_merged.onnx",
                 "decoder_model_merged_quantized.onnx"):
        shutil.copy(folder / "model.onnx", folder / "onnx" / name)
    (folder / "model.onnx").unlink()
    read = read_folder(folder)
    assert read.model == folder / "onnx" / "encoder_model.onnx"
    assert read.sessions == {"decoder": folder / "onnx" / "decoder_model_merged.onnx"}


@pytest.mark.parametrize("missing", ["model.onnx", "config.json", "tokenizer.json"])
def test_a_missing_file_is_named_in_one_line(text_folders, tmp_path, missing):
    folder = _copy(text_folders["feature-extraction"], tmp_path)
    (folder / missing).unlink()
    with pytest.raises(ConfigError, match=f"has no {missing}"):
        read_folder(folder)
    result = run_cli("build", folder, "-o", tmp_path / "dist")
    assert result.returncode != 0 and f"has no {missing}" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_an_unclear_task_asks_for_task(text_folders, tmp_path):
    folder = _copy(text_folders["text-classification"], tmp_path)
    config = json.loads((folder / "config.json").read_text())
    del config["id2label"], config["label2id"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="give --task feature-extraction, text-classification,"):
        text_source(folder, BuildOptions())


def test_a_text_task_needs_the_folder_and_reads_its_limits(text_folders):
    folder = read_folder(text_folders["text-classification"])
    assert max_length(folder) == 128 and folder.activation == "softmax"
    task = Task(kind="text-classification", input="input_ids", output="logits")
    completed = complete_text_task(task, folder)
    assert completed is not None and (completed.max_length, completed.activation) == (128,
                                                                                   "softmax")
    assert task.max_length is None  # a new record: the check stage's result is not edited
    with pytest.raises(ConfigError, match="needs the export folder"):
        complete_text_task(task, None)
    multi = dict(folder.config, problem_type="multi_label_classification")
    assert type(folder)(folder.folder, folder.model, multi, folder.files).activation == "sigmoid"
    # one label (a cross-encoder's relevance logit): sigmoid, as transformers' pipeline scores it
    single = dict(folder.config, id2label={"0": "LABEL_0"})
    assert type(folder)(folder.folder, folder.model, single, folder.files).activation == "sigmoid"
    assert TaskSpec().pooling == "mean"


def test_max_length_without_model_max_length_counts_the_positions(text_folders, tmp_path):
    """RoBERTa-family positions start after the padding index: 2 of 50 are no token's."""
    folder = _copy(text_folders["feature-extraction"], tmp_path)
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 1e30}))
    config = json.loads((folder / "config.json").read_text())
    assert max_length(read_folder(folder)) == config["max_position_embeddings"] == 128
    config.update(model_type="roberta", max_position_embeddings=50, pad_token_id=1)
    (folder / "config.json").write_text(json.dumps(config))
    assert max_length(read_folder(folder)) == 48


def test_a_bare_encoder_file_gets_a_hint_to_build_its_folder(text_folders):
    import onnx

    from bundler.tasks.build import task_hint

    model = onnx.load(str(text_folders["feature-extraction"] / "model.onnx"))
    hint = task_hint(TaskSpec(), model)
    assert hint is not None and "looks like feature-extraction" in hint
    assert "build its export folder" in hint


def test_the_text_files_are_files_of_the_bundle_hashed_and_compressed(text_folders, tmp_path,
                                                                      runtime_dist):
    folder = text_folders["feature-extraction"]
    output = tmp_path / "dist"
    result = run_cli("build", folder, "-o", output, "--runtime-dir", runtime_dist, "--no-verify")
    assert result.returncode == 0, result.stderr
    assert "--fix-dim" not in result.stderr  # a text's length varies: no advice to fix it
    manifest = json.loads((output / "bundle.json").read_text())
    assert [session["name"] for session in manifest["sessions"]] == [folder.name]
    entries = {entry["path"]: entry for entry in manifest["files"]}
    shipped = manifest["task"]["files"]
    assert set(shipped) == {"config.json", "tokenizer.json", "tokenizer_config.json",
                            "special_tokens_map.json"}
    for name, path in shipped.items():
        data = (output / path).read_bytes()
        assert data == (folder / name).read_bytes()
        entry = entries[path]  # like every file: bytes, sha256 (its name carries it)
        digest = hashlib.sha256(data).hexdigest()
        assert (entry["bytes"], entry["sha256"]) == (len(data), digest)
        assert path == f"text/{name.rsplit('.', 1)[0]}.{digest[:8]}.json"
    tokenizer = entries[shipped["tokenizer.json"]]
    assert set(tokenizer["encodings"]) == {"br", "gzip"}  # compressed where that is smaller
    assert (output / tokenizer["encodings"]["gzip"]["path"]).is_file()


def test_a_two_file_decoder_is_merged_once_into_the_cache(tmp_path, monkeypatch):
    import sys

    import onnx

    from tests import decoder_models

    folder = decoder_models.gpt2_folder(tmp_path / "gpt2", two_files=True).folder
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with monkeypatch.context() as without:  # optimum not installed
        without.setitem(sys.modules, "optimum.onnx.graph_transformations", None)
        with pytest.raises(ConfigError, match=r"merging them needs optimum \(pip install"):
            read_folder(folder)
    merged = read_folder(folder).model
    assert merged.is_relative_to(tmp_path / "cache" / "onnx-bundler" / "merged")
    graph = onnx.load(merged, load_external_data=False).graph
    assert "use_cache_branch" in [i.name for i in graph.input]
    assert [node.op_type for node in graph.node].count("If") == 1
    with monkeypatch.context() as without:  # made once: the next build reads it from the cache
        without.setitem(sys.modules, "optimum.onnx.graph_transformations", None)
        assert read_folder(folder).model == merged


def test_speech_recognition_needs_the_export_folder():
    """An encoder .onnx alone has no decoder, tokenizer nor generation config to transcribe with."""
    task = Task(kind="automatic-speech-recognition", input="input_features",
                output="last_hidden_state")
    with pytest.raises(ConfigError, match="needs the export folder .*decoder_model_merged.onnx"):
        complete_text_task(task, None)


@pytest.mark.parametrize("step", [("normalizer", {"type": "ByteLevel"}),
                                  ("pre_tokenizer", {"type": "UnicodeScripts"}),
                                  ("pre_tokenizer", {"type": "CharDelimiterSplit",
                                                     "delimiter": "-"})])
def test_a_tokenizer_with_a_step_the_browser_lacks_is_refused_in_one_line(text_folders, tmp_path,
                                                                         step):
    """The Python library takes the step (here inside a Sequence) and @huggingface/tokenizers
    cannot load it: the build refuses the folder in one line rather than ship a page whose ids
    would differ."""
    from tokenizers import Tokenizer

    from bundler.site.npmtools import node_executable
    from bundler.text.tokenizer import SEQUENCE_KEYS
    from bundler.text.web import tokenizers_library

    part, added = step
    folder = _copy(text_folders["feature-extraction"], tmp_path)
    path = folder / "tokenizer.json"
    tokenizer = json.loads(path.read_text())
    tokenizer[part] = {"type": "Sequence",
                       SEQUENCE_KEYS[part]: [added, *filter(None, [tokenizer[part]])]}
    path.write_text(json.dumps(tokenizer))
    Tokenizer.from_file(str(path))
    script = (f"import {{ Tokenizer }} from '{tokenizers_library().as_uri()}';"
              f" new Tokenizer({json.dumps(tokenizer)}, {{}});")
    browser = subprocess.run([str(node_executable()), "--input-type=module", "-e", script],
                             capture_output=True, text=True, timeout=60)
    assert browser.returncode != 0 and f"type: {added['type']}" in browser.stderr
    why = f"its {part} {added['type']} is one the browser's tokenizer"
    with pytest.raises(ConfigError, match=why):
        read_folder(folder)
    result = run_cli("build", folder, "-o", tmp_path / "dist")
    assert result.returncode != 0 and why in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_bpe_with_dropout_is_refused(tmp_path):
    """BPE dropout makes the Python library tokenize a text at random on each call, so no page
    can give its ids."""
    from tokenizers import Tokenizer

    from bundler.text.tokenizer import browser_difference
    from tests.text_tokenizers import whitespace_bpe

    path = whitespace_bpe(tmp_path) / "tokenizer.json"
    tokenizer = json.loads(path.read_text())
    assert browser_difference(tokenizer) is None
    tokenizer["model"]["dropout"] = 0.5
    python = Tokenizer.from_str(json.dumps(tokenizer))
    assert len({tuple(python.encode("Tokenizers split text").ids) for _ in range(20)}) > 1
    assert "dropout 0.5" in browser_difference(tokenizer)
