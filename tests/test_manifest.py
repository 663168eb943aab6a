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
    assert next(iter(data)) == "schema_version" and data["schema_version"] == 2
    assert "variants" not in data and [s["name"] for s in data["sessions"]] == [data["name"]]
    assert loaded.session().inputs[0].shape == ("batch", 1, 8, 8)
    assert loaded.session().default_for("wasm").kind == "fp32"


def test_a_variant_with_a_graph_per_ep_reads_back_and_counts_each_eps_files(written) -> None:
    """`graphs` (int4 format=per-ep): per EP, the graph it opens instead of `file`, over the
    same data files; what load() fetches there is that graph, the data and the EP's wasm."""
    directory, data = written
    (session,) = data["sessions"]
    (variant,) = session["variants"]
    files = {entry["path"]: entry for entry in data["files"]}
    graph, wasm = "models/fp32.webgpu.0123abcd.onnx", data["runtime"]["builds"]["webgpu"]["wasm"]
    data["files"] = sorted([*data["files"], {"path": graph, "bytes": 7, "sha256": "0" * 64}],
                           key=lambda entry: entry["path"])
    variant["graphs"] = {"webgpu": graph}
    (directory / "bundle.json").write_text(json.dumps(data))
    loaded = manifest.load(directory)
    assert loaded.to_json() == data
    record = loaded.session().variant(variant["name"])
    assert record.graph_for("webgpu") == graph and record.graph_for("wasm") == variant["file"]
    assert record.files_of("webgpu") == [graph] and record.files_of() == [variant["file"]]
    assert record.every_file() == [variant["file"], graph]

    def wire(path: str) -> int:
        entry = files.get(path, {"bytes": 7})
        return sum((piece.get("encodings") or {}).get("gzip", piece)["bytes"]
                   for piece in entry.get("parts") or [entry])

    assert loaded.wire_bytes(record, "webgpu") == wire(graph) + wire(wasm)
    assert loaded.wire_bytes(record) == wire(variant["file"])


def version_1(data: dict) -> dict:
    """A version 2 manifest of one session written as version 1 wrote it (one model's keys at the
    top level, in its place)."""
    (session,) = data["sessions"]
    rest = {key: value for key, value in data.items() if key not in ("schema_version", "sessions")}
    return {"schema_version": 1, **{k: v for k, v in session.items() if k != "name"}, **rest}


def test_a_version_1_manifest_reads_as_one_session_named_after_the_model(written) -> None:
    directory, data = written
    (directory / "bundle.json").write_text(json.dumps(version_1(data)))
    loaded = manifest.load(directory)
    assert loaded.to_json() == data  # rewritten, it is version 2
    assert loaded.session().name == data["name"] == loaded.session(data["name"]).name
    without_version = version_1(data)
    del without_version["schema_version"]  # older still: no schema_version, layout 1
    (directory / "bundle.json").write_text(json.dumps(without_version))
    assert manifest.load(directory).to_json() == data


def test_two_sessions_load_and_are_picked_by_name(written) -> None:
    directory, data = written
    (session,) = data["sessions"]
    encoder = {**session, "name": "encoder"}
    decoder = {**session, "name": "decoder", "default_variant": {"wasm": "fp32"}}
    (directory / "bundle.json").write_text(json.dumps({**data, "sessions": [encoder, decoder]}))
    loaded = manifest.load(directory)
    assert [s.name for s in loaded.sessions] == ["encoder", "decoder"]
    assert loaded.session().name == "encoder"  # the primary session: the first
    assert loaded.session("decoder").default_for("webgpu").name == "fp32"
    with pytest.raises(ModelError, match=r"no session 'joiner' \(it has: encoder, decoder\)"):
        loaded.session("joiner")
    (directory / "bundle.json").write_text(json.dumps({**data, "sessions": [encoder, encoder]}))
    with pytest.raises(ModelError, match="names a session twice"):
        manifest.load(directory)


@pytest.mark.parametrize(("version", "message"), [
    (3, "schema_version 3, newer than the 2"), (0, "schema_version 0, not a version"),
    ("2", "schema_version '2', not a version")])
def test_a_schema_version_it_does_not_know_is_refused_naming_it(written, version, message) -> None:
    directory, data = written
    (directory / "bundle.json").write_text(json.dumps({**data, "schema_version": version}))
    with pytest.raises(ModelError, match=message):
        manifest.load(directory)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["sessions"][0]["variants"][0].update(sha256=3),
     r"sessions\[0\]\.variants\[0\]\.sha256: expected a string"),
    (lambda d: d["runtime"].pop("builds"), r"runtime: missing key 'builds'"),
    (lambda d: d["verification"].update(status="maybe"), r"verification\.status: expected one"),
    (lambda d: d["sessions"][0].pop("inputs"), r"sessions\[0\]: missing key 'inputs'"),
    (lambda d: d.update(sessions=[]), r"sessions is empty"),
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
