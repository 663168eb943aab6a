"""auto's fallback where its choice fails the build's final check (a text-generation bundle's
teacher-forced logits, in Chromium). Its own module: the build starts its own Playwright driver,
which the sync API refuses beside a module's browser fixture (tests/conftest.py)."""

from __future__ import annotations

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
