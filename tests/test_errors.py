"""Bad input: one line saying what is wrong, exit != 0, no traceback, no output folder."""

from pathlib import Path

import pytest

from tests import models
from tests.conftest import run_cli


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def bad_models(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n" * 20)
    good = models.multi_io(tmp_path)
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    external = models.external_data(tmp_path / "external")
    (external.parent / "external_data.weights").unlink()
    return {
        "missing": (tmp_path / "nope.onnx", "model not found"),
        "directory": (tmp_path, "has no model.onnx"),
        "empty": (empty, "is empty"),
        "text": (text, "is not an ONNX model"),
        "truncated": (truncated, "is not an ONNX model"),
        "external data missing": (external, "external data file 'external_data.weights'"),
    }


@pytest.mark.parametrize("case", ["missing", "directory", "empty", "text", "truncated",
                                  "external data missing"])
def test_bad_model_gives_one_line_and_leaves_nothing(tmp_path, case):
    model, expected = bad_models(tmp_path)[case]
    output = tmp_path / "out" / "dist"
    result = run_cli("build", model, "-o", output, "--no-verify")
    assert_one_line_error(result, expected)
    assert not (tmp_path / "out").exists()


def test_unknown_config_key_names_key_and_file(tmp_path):
    config = tmp_path / "bundle.toml"
    config.write_text('modle = "model.onnx"\n')
    result = run_cli("build", "--config", config, "-o", tmp_path / "dist", "--no-verify")
    assert_one_line_error(result, str(config), "unknown key 'modle'")
    assert not (tmp_path / "dist").exists()


def test_config_in_the_current_folder_is_read(tmp_path):
    (tmp_path / "bundle.toml").write_text("verify = 3\n")
    result = run_cli("build", "-o", "dist", cwd=tmp_path)
    assert_one_line_error(result, "bundle.toml", "key 'verify'")


def test_bad_dim_is_rejected_before_anything_is_written(tmp_path):
    result = run_cli("build", models.multi_io(tmp_path), "-o", tmp_path / "dist", "--dim", "batch")
    assert_one_line_error(result, "--dim: 'batch'", "NAME=VALUE")
    assert not (tmp_path / "dist").exists()


def test_bundle_test_on_a_folder_that_is_not_a_bundle(tmp_path):
    assert_one_line_error(run_cli("test", tmp_path), "has no bundle.json")


def test_refuses_a_non_empty_folder_it_did_not_make(tmp_path):
    output = tmp_path / "site"
    output.mkdir()
    (output / "keep.txt").write_text("mine")
    result = run_cli("build", models.multi_io(tmp_path), "-o", output, "--no-verify")
    assert_one_line_error(result, "not empty", "--force")
    assert (output / "keep.txt").read_text() == "mine"
