"""auto's fallback on a bundle of several sessions (a speech model's encoder and decoder), without a
browser: where the final check rejects the chosen combination on an EP, the next of the ranking
ships there (bundler.stages.combine.choice_of), each session's default becomes its variant of
the combination each EP ships, and the files of the variants no EP ships are set aside and come
back when one does (bundler.stages.choose). tests/test_auto_fallback_browser.py builds it."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from bundler.bundle.manifest import Session, Variant
from bundler.console import Reporter
from bundler.errors import QuantizeError
from bundler.stages.choose import Chosen, fall_back, gone, shipping
from bundler.stages.combine import choice_of
from bundler.variants.budget import parse_budget
from bundler.variants.metrics import Metrics
from bundler.variants.select import Candidate

BUDGET = parse_budget("tokens>=0.9,wer<=0.05")
# (encoder, decoder) -> (bytes, token agreement with fp32's transcript); the last two are
# outside the budget
COMBINATIONS = {("fp32", "fp32"): (1000, 1.0), ("fp32", "int8"): (600, 0.95),
                ("int8", "int8"): (300, 0.92), ("int8", "fp32"): (700, 0.85),
                ("int8", "int4"): (200, 0.5)}
WHY = "automatic-speech-recognition answers differ from the Python reference (…)"


def _name(encoder: str, decoder: str) -> str:
    return f"encoder={encoder},decoder={decoder}"


def _candidates() -> list[Candidate]:
    return [Candidate(_name(*kinds), size, Metrics(0.0, 0.0, 1.0, None, tokens=tokens, wer=0.0),
                      True, fp32=kinds == ("fp32", "fp32"))
            for kinds, (size, tokens) in COMBINATIONS.items()]


def test_a_rejected_combination_gives_way_to_the_next_on_its_ep_only() -> None:
    """Rejected on WASM, the smallest combination within the budget gives way there to the next
    smallest; WebGPU keeps it. Rejected down to fp32 everywhere, fp32 ships; fp32 rejected too,
    nothing is left: one clear error, which fall_back takes as the build failing."""
    choose_with = functools.partial(choice_of, _candidates(), BUDGET, "size", ("webgpu", "wasm"))
    assert choose_with({}).chosen == _name("int8", "int8")
    choice = choose_with({"wasm": {_name("int8", "int8")}})
    assert choice.chosen == {"webgpu": _name("int8", "int8"), "wasm": _name("fp32", "int8")}
    assert choice.dropped == [_name("fp32", "fp32"), _name("int8", "fp32"), _name("int8", "int4")]
    assert choice.selection.chosen == _name("fp32", "int8")  # the WASM one
    assert [c.name for c in choice.selection.candidates if c.chosen] == [
        _name("fp32", "int8"), _name("int8", "int8")]
    quantized = {_name(*kinds) for kinds in COMBINATIONS if kinds != ("fp32", "fp32")}
    assert choose_with({"wasm": quantized, "webgpu": quantized}).chosen == _name("fp32", "fp32")
    with pytest.raises(QuantizeError, match="^auto: no combination of the sessions' variants is"
                                            " within the budget tokens>=0.9,wer<=0.05"):
        choose_with({"wasm": {*quantized, _name("fp32", "fp32")}})


def _variant(session: str, kind: str) -> Variant:
    return Variant(kind, kind, f"models/{session}.{kind}.onnx", 1, "0" * 64, 1.0, None, {}, [],
                   None)


def _shipped(staging: Path) -> set[str]:
    return {path.name for path in (staging / "models").iterdir()}


def test_each_session_ships_its_part_of_each_eps_combination(tmp_path: Path) -> None:
    """The fallback rounds of a build on WebGPU and WASM: each session's default is its variant
    of the combination each EP ships (a map per EP where they differ), only the variants some EP
    ships are in models/, a variant set aside comes back when an EP ships it again, the notes say
    why per round, and a failing combination of fp32 variants stays."""
    kinds = {"encoder": ("fp32", "int8"), "decoder": ("fp32", "int8", "int4")}
    variants = {session: {kind: _variant(session, kind) for kind in made}
                for session, made in kinds.items()}
    (tmp_path / "models").mkdir()
    for made in variants.values():
        for variant in made.values():
            (tmp_path / variant.file).write_bytes(b"onnx")
    every = Chosen(
        tuple(Session(session, [], [], list(made.values()), "fp32")
              for session, made in variants.items()),
        reselect=functools.partial(choice_of, _candidates(), BUDGET, "size", ("webgpu", "wasm")),
        candidates={_name(e, d): {"encoder": variants["encoder"][e],
                                  "decoder": variants["decoder"][d]} for e, d in COMBINATIONS})
    assert every.reselect is not None
    chosen = shipping(tmp_path, every, every.reselect({}))
    assert [s.default_variant for s in chosen.sessions] == ["int8", "int8"]
    assert _shipped(tmp_path) == {"encoder.int8.onnx", "decoder.int8.onnx"}

    instead = fall_back(tmp_path, chosen, {"wasm": WHY}, Reporter())
    assert instead is not None and gone(chosen, instead) == []
    assert [s.default_variant for s in instead.sessions] == [
        {"webgpu": "int8", "wasm": "fp32"}, "int8"]
    assert [[v.name for v in s.variants] for s in instead.sessions] == [["fp32", "int8"], ["int8"]]
    assert _shipped(tmp_path) == {"encoder.fp32.onnx", "encoder.int8.onnx", "decoder.int8.onnx"}
    assert instead.notes == (f"auto: {_name('int8', 'int8')} did not ship on wasm: it failed the"
                             f" final check ({WHY})",)

    # WebGPU fails its combination too: both EPs ship the encoder's fp32 with the int8 decoder
    again = fall_back(tmp_path, instead, {"webgpu": WHY}, Reporter())
    assert again is not None and gone(instead, again) == ["models/encoder.int8.onnx"]
    assert [s.default_variant for s in again.sessions] == ["fp32", "int8"]
    assert again.rejected == {"wasm": {_name("int8", "int8")}, "webgpu": {_name("int8", "int8")}}
    assert len(again.notes) == 2

    last = fall_back(tmp_path, again, {"wasm": WHY, "webgpu": WHY}, Reporter())
    assert last is not None and last.choice == _name("fp32", "fp32")
    assert [s.default_variant for s in last.sessions] == ["fp32", "fp32"]
    assert fall_back(tmp_path, last, {"wasm": WHY}, Reporter()) is None  # fp32 that fails stays
