"""The bundle.json contract cannot drift: every field of bundler.bundle's dataclasses is typed in
bundle.d.ts (optional there when it may be left out) and documented in
docs/reference/bundle-json.md."""

from __future__ import annotations

import dataclasses
import re
import typing

import pytest

from bundler.bundle import manifest, measured, records
from bundler.bundle.codec import to_json
from bundler.perf.speed import speed_record
from bundler.resources import resource
from tests.conftest import ROOT

DTS = (resource("web") / "bundle.d.ts").read_text(encoding="utf-8")
BUNDLE_JSON_DOCS = (ROOT / "docs" / "reference" / "bundle-json.md").read_text(encoding="utf-8")


def _members(body: str) -> dict[str, tuple[bool, str]]:
    """Top-level `name?: type;` members of a TypeScript object type body: name -> (optional,
    type text)."""
    members: dict[str, tuple[bool, str]] = {}
    depth, start = 0, 0
    for index, char in enumerate(body + ";"):
        if char in "{(<[":
            depth += 1
        elif char in "})>]":
            depth -= 1
        elif char == ";" and depth == 0:
            member = body[start:index].strip()
            start = index + 1
            match = re.match(r"(?s)^(?:/\*\*.*?\*/\s*)?(\w+)(\??):\s*(.*)$", member)
            if match:
                members[match[1]] = (match[2] == "?", match[3].strip())
    return members


def _interface(name: str) -> dict[str, tuple[bool, str]]:
    match = re.search(rf"export interface {name}\b[^{{]*\{{", DTS)
    assert match, f"bundle.d.ts has no interface {name}"
    depth, index = 1, match.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(DTS[index], 0)
        index += 1
    return _members(DTS[match.end():index - 1])


def _inline(type_text: str) -> dict[str, tuple[bool, str]]:
    assert type_text.startswith("{") and type_text.endswith("}"), type_text
    return _members(type_text[1:-1])


MANIFEST_TS = _interface("Manifest")
TYPES = {
    manifest.Manifest: MANIFEST_TS,
    manifest.Session: _interface("Session"),
    manifest.Variant: _interface("Variant"),
    manifest.EPResult: _interface("VerificationResult"),
    manifest.Tool: _inline(MANIFEST_TS["tool"][1]),
    manifest.Runtime: _inline(MANIFEST_TS["runtime"][1]),
    manifest.Source: _inline(MANIFEST_TS["source"][1]),
    manifest.Selection: _inline(MANIFEST_TS["selection"][1]),
    manifest.Verification: _inline(MANIFEST_TS["verification"][1]),
    manifest.RuntimeBuild: _interface("RuntimeBuild"),
    manifest.FilePiece: _interface("FilePiece"),
    manifest.FileEntry: {**_interface("FilePiece"), **_interface("FileEntry")},  # extends it
    manifest.Task: _interface("Task"),
    manifest.NativeReference: _inline(_inline(MANIFEST_TS["runtime"][1])["native_reference"][1]),
    manifest.Accuracy: _interface("VariantAccuracy"),
    manifest.Bound: _interface("AccuracyBound"),
    manifest.SelectionCandidate: _interface("SelectionCandidate"),
    manifest.Optimization: _interface("Optimization"),
    manifest.OptimizationStep: _interface("OptimizationStep"),
    manifest.Hosting: _inline(MANIFEST_TS["hosting"][1]),
    manifest.Fingerprint: _interface("VariantReference"),
    records.OutputFingerprint: _interface("OutputFingerprint"),
    records.Memory: _interface("VariantMemory"),
    manifest.Workload: _interface("Workload"),
    manifest.SpeedRecord: _interface("SpeedRecord"),
    measured.GuessedDim: _interface("GuessedDim"),
    **{settings: _interface(settings.__name__) for settings in typing.get_args(
        records.VariantSettings)},
}


def _optional(field: dataclasses.Field) -> bool:
    return field.default is not dataclasses.MISSING or \
        field.default_factory is not dataclasses.MISSING  # type: ignore[misc]


@pytest.mark.parametrize("record", list(TYPES), ids=lambda record: record.__name__)
def test_every_field_is_typed_in_bundle_d_ts(record: type) -> None:
    typed = TYPES[record]
    fields = {field.name: field for field in dataclasses.fields(record)}
    assert set(fields) <= set(typed), f"missing in bundle.d.ts: {set(fields) - set(typed)}"
    extra = set(typed) - set(fields)
    assert not extra, f"bundle.d.ts types fields bundle.json never has: {extra}"
    for name, field in fields.items():
        if _optional(field):
            assert typed[name][0], f"{record.__name__}.{name} may be left out: mark it ?"
        elif type(None) in typing.get_args(typing.get_type_hints(record)[name]):
            assert re.search(r"\bnull\b", typed[name][1]), \
                f"{record.__name__}.{name} is written as null when it has no value: add | null"


def test_every_field_is_documented_in_the_docs() -> None:
    section = BUNDLE_JSON_DOCS
    for record in TYPES:
        for field in dataclasses.fields(record):
            assert re.search(rf'[`".]{field.name}[`"]', section), \
                f"{record.__name__}.{field.name} is not in docs/reference/bundle-json.md"


def test_the_json_reader_covers_every_field_type() -> None:
    # A field type manifest.from_json cannot read would fail only on the bundle that has it.
    for record in TYPES:
        for name, kind in typing.get_type_hints(record).items():
            assert "Callable" not in str(kind), (record.__name__, name)
    data = manifest.Manifest(
        name="m", tool=manifest.Tool("onnx-bundler", "0"),
        runtime=manifest.Runtime("onnxruntime-web", "1", "runtime/",
                                 {"wasm": manifest.RuntimeBuild("runtime/ort.wasm.min.1.mjs",
                                                                "runtime/g.2.mjs",
                                                                "runtime/g.3.wasm")}),
        sessions=(manifest.Session("m", [], [], default_variant={"wasm": "fp32"}, variants=[
            manifest.Variant(
                "fp32", "fp32", "models/fp32.1.onnx", 2, "0" * 64, 1.0,
                manifest.Accuracy(max_abs=0.0, mean_rel=0.0, cosine=1.0, top1_agreement=0.5,
                                  samples=4, data="generated",
                                  bounds={"top1": manifest.Bound(4, 0.5, 0.15,
                                                                 "wilson-95-lower")}),
                {"weights": "float32"}, [], None, data=["models/fp32.1.data"],
                memory=records.Memory(largest_tensor=8, weights=8, heap=10, peak=12))]),
            manifest.Session("m2", [], [], [], "fp32")),
        source=manifest.Source("m.onnx", 1), notes=[],
        optimization=manifest.Optimization(True, nodes_before=2, nodes_after=1, steps=[
            manifest.OptimizationStep("fold", "applied", "")]),
        verification=manifest.Verification(
            "failed", dims={"batch": 1},
            results={"fp32": {"wasm": manifest.EPResult(False, 0.5, 2.0, "x", "runtime")}},
            fallback=manifest.EPResult(True, None, None), problems=["p"]),
        selection=manifest.Selection("auto", "cosine>=0.999", "fp32", [
            manifest.SelectionCandidate(name="fp32", bytes=2, within_budget=True, budget="b",
                                        browser_verified=True, wasm_ms=1.5, chosen=True)],
            note="n"),
        files=[manifest.FileEntry("models/m.1.onnx", 2, "0" * 64,
                                  parts=[manifest.FilePiece("models/m.1.onnx.part0", 2, "1" * 64,
                                                            {"br": manifest.Encoded("p.br", 1)})],
                                  encodings={"gzip": manifest.Encoded("m.gz", 1)})],
        hosting=manifest.Hosting(1, ["nginx"], True),
        task=manifest.Task("object-detection", "images", "output0", size=[32, 32],
                           resize="letterbox", mean=[0.0, 0.0, 0.0], labels=["a"],
                           state={"h": "hn"}, softmax=True, scale=0.5),
    ).to_json()
    assert manifest.from_json(data).to_json() == data


def test_the_typed_sub_records_read_what_older_builds_wrote() -> None:
    # A reference without seed, requested_dims or nonfinite (before 2026-12-04) and a workload
    # without dim_sources (before it was recorded) load with their defaults; what the current
    # writer writes reads back to the same JSON.
    old_reference = {"dims": {"batch": 1}, "outputs": {"y": {
        "dims": [1, 2], "sample": [0.5, None], "sum": 0.5, "abs_sum": 0.5}}}
    reference = manifest.decode(records.Fingerprint, old_reference, "bundle.json")
    assert (reference.seed, reference.requested_dims, reference.inputs) == (0, {}, None)
    assert reference.outputs["y"].nonfinite == 0 and reference.outputs["y"].sample[1] is None
    written = records.Fingerprint(seed=0, requested_dims={"h": 8}, dims={"h": 8},
                                  outputs=reference.outputs, inputs="ab")
    assert list(to_json(written)) == ["seed", "requested_dims", "dims", "outputs", "inputs"]
    assert manifest.decode(records.Fingerprint, to_json(written), "x") == written
    old_workload = {"inputs": {"x": [1, 3]}, "dims": {"n": 1}, "dims_source": "model",
                    "guessed": [{"input": "x", "axis": 1, "dim": "x:1", "value": 3}]}
    workload = measured.Workload.from_json(old_workload)
    assert workload.dim_sources == {}
    assert workload.guessed == (measured.GuessedDim("x", 1, "x:1", 3),)
    assert list(workload.to_json()) == ["inputs", "dims", "dims_source", "dim_sources", "guessed"]
    assert measured.Workload.from_json(workload.to_json()) == workload


def test_selection_speed_is_written_with_the_keys_it_always_had() -> None:
    # selection.speed was an open dict (tolerances, then how it was timed, then the workload's
    # keys merged in): the typed record writes the same keys in the same order, and reads back
    # (the speed cache stores it as JSON, older entries without the workload's keys included).
    workload = measured.Workload(inputs={"x": [1, 8]}, dims={"n": 8}, dims_source="--dim",
                                dim_sources={"n": "--dim"})
    timed = speed_record("median ms").at(workload)
    assert to_json(timed) == {
        "tie_tolerance": 0.05, "balanced_smaller": 0.3, "balanced_slower": 0.1,
        "measured": "median ms",
        "not_measured_on": {"webgpu": "SwiftShader is not a GPU: WebGPU gets the WASM choice"},
        "inputs": {"x": [1, 8]}, "dims": {"n": 8}, "dims_source": "--dim",
        "dim_sources": {"n": "--dim"}, "guessed": []}
    assert list(to_json(timed))[3:] == ["measured", "not_measured_on", *workload.to_json()]
    assert measured.SpeedRecord.from_json(to_json(timed)) == timed
    assert timed.workload() == workload
    untimed = speed_record(None, "the objective is size")
    assert to_json(untimed) == {"tie_tolerance": 0.05, "balanced_smaller": 0.3,
                                "balanced_slower": 0.1, "not_measured": "the objective is size"}
    assert untimed.workload() is None
    cached = measured.SpeedRecord.from_json(to_json(speed_record("median ms")))
    assert cached.workload() is None and cached.measured == "median ms"
    with pytest.raises(ValueError, match="tie_tolerance"):
        measured.SpeedRecord.from_json({"measured": "median ms"})
