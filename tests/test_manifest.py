"""bundle.json has one reader and writer: typed, versioned, checked key by key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundler.bundle import manifest
from bundler.errors import ModelError


@pytest.fixture
def written(build_bundle) -> tuple[Path, dict]:
    return build_bundle(None)


def test_a_written_manifest_reads_back_to_the_same_json(written) -> None:
    directory, data = written
    loaded = manifest.load(directory)
    assert loaded.to_json() == data
    assert manifest.dumps(loaded) == (directory / "bundle.json").read_text(encoding="utf-8")
    assert next(iter(data)) == "schema_version" and data["schema_version"] == 1
    assert loaded.inputs[0].shape == ("batch", 1, 8, 8)
    assert loaded.default_for("wasm").kind == "fp32"


def test_a_newer_schema_version_is_refused_naming_it(written) -> None:
    directory, data = written
    (directory / "bundle.json").write_text(json.dumps({**data, "schema_version": 2}))
    with pytest.raises(ModelError, match="schema_version 2, newer than the 1"):
        manifest.load(directory)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["variants"][0].update(sha256=3), r"variants\[0\]\.sha256: expected a string"),
    (lambda d: d["runtime"].pop("builds"), r"runtime: missing key 'builds'"),
    (lambda d: d["verification"].update(status="maybe"), r"verification\.status: expected one"),
    (lambda d: d.pop("inputs"), r"missing key 'inputs'"),
])
def test_a_wrong_key_is_named(written, change, message) -> None:
    directory, data = written
    change(data)
    (directory / "bundle.json").write_text(json.dumps(data))
    with pytest.raises(ModelError, match=message):
        manifest.load(directory)


def test_not_json_and_not_a_bundle_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="has no bundle.json"):
        manifest.load(tmp_path)
    (tmp_path / "bundle.json").write_text("{not json")
    with pytest.raises(ModelError, match="is not valid JSON"):
        manifest.load(tmp_path)
    assert not manifest.made_by_us(tmp_path)
