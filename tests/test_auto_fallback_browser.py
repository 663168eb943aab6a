"""auto's fallback where its choice fails the build's final check in Chromium (a text-generation
bundle's teacher-forced logits; a speech bundle's transcript tokens, its choice a combination of
the sessions' variants). Its own module: the build starts its own Playwright driver, which the
sync API refuses beside a module's browser fixture (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundler.verify.tolerance import TOLERANCES, Tolerance
from tests import decoder_models

pytestmark = pytest.mark.browser


def test_auto_ships_the_next_candidate_where_its_choice_fails_the_final_check(
        build_bundle, tmp_path, monkeypatch):
    """Auto chooses before the build's final check, which compares a text-generation bundle's
    teacher-forced logits too: held here to native's own spread alone (tolerance 0; WASM's
    kernels sum in another order than native's, so int8-weights, the smallest and within the
    loose budget, fails it), auto's
    int8-weights is dropped on WASM and fp32 ships there instead, its check passed, the manifest
    saying why."""
    monkeypatch.setitem(TOLERANCES["generation-logits"], "quantized",
                        Tolerance(range_fraction=0.0))
    folder = decoder_models.gpt2_folder(tmp_path / "model").folder
    _, bundle = build_bundle(folder, verify=True, quantize="auto", objective="size",
                             max_error="tokens>=0.5,perplexity<=1.1",
                             variants=("fp32", "int8-weights"), execution_providers=("wasm",))
    assert [c["name"] for c in bundle["selection"]["candidates"] if c["within_budget"]] == [
        "fp32", "int8-weights"]
    assert bundle["verification"]["status"] == "passed", bundle["verification"]
    session = bundle["sessions"][0]
    assert session["default_variant"] == "fp32"
    assert [variant["name"] for variant in session["variants"]] == ["fp32"]
    assert [note for note in bundle["notes"] if note.startswith("auto: int8-weights did not ship"
                                                               " on wasm: it failed the final"
                                                               " check (text-generation")]


def test_auto_ships_the_next_combination_where_its_choice_fails_the_transcript_check(
        build_bundle, whisper_export, monkeypatch):
    """A speech bundle's auto ranks combinations of the encoder's and decoder's variants on
    native transcripts, then the final check compares the browser's transcript tokens with
    native's. Held to no near-tie for a quantized decoder (tolerance 0: the suite's random
    Whisper has near-tied logits, which the int8 decoder's kernels round otherwise on WASM than
    natively, so its tokens part from native's), auto's encoder=fp32,decoder=int8, the smallest
    within the loose budget, fails it on WASM and the fp32 combination ships there instead, its
    check passed, each session on its variant of it (the encoder, which auto does not choose
    for, ships what its plan says), the decoder's int8 file gone, the manifest saying why."""
    monkeypatch.setitem(TOLERANCES["transcript-logits"], "quantized",
                        Tolerance(range_fraction=0.0))
    output, bundle = build_bundle(whisper_export.folder, verify=True, quantize="auto",
                                  objective="size", max_error="tokens>=0,wer<=100",
                                  variants=("fp32", "int8"), execution_providers=("wasm",))
    first, fp32 = "encoder=fp32,decoder=int8", "encoder=fp32,decoder=fp32"
    candidates = bundle["selection"]["candidates"]
    assert [c["name"] for c in candidates if c["within_budget"]] == [fp32, first]
    assert bundle["verification"]["status"] == "passed", bundle["verification"]
    assert [c["name"] for c in candidates if c["chosen"]] == [fp32]
    assert bundle["selection"]["chosen"] == fp32
    assert [(s["name"], s["default_variant"], [v["name"] for v in s["variants"]])
            for s in bundle["sessions"]] == [("encoder", "fp32", ["fp32", "int8"]),
                                             ("decoder", "fp32", ["fp32"])]
    assert {path.name for path in (output / "models").glob("*.onnx")} == {
        Path(v["file"]).name for s in bundle["sessions"] for v in s["variants"]}
    assert [note for note in bundle["notes"] if note.startswith(
        f"auto: {first} did not ship on wasm: it failed the final check"
        " (automatic-speech-recognition answers differ from the Python reference")]
