"""`bundle bench` on a text-generation bundle (the suite's tiny GPT-2, WASM): load time, bytes raw
and on the wire, and each generate() call's time to first token, prefill and decode tokens/s at
the named prompt and output lengths, the first call apart from the later ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundler.bundle import manifest as manifest_file
from bundler.commands.build import summary
from bundler.perf.generation import prompt_of
from bundler.site.pages import human_bytes
from bundler.text.tokenizer import TextTokenizer
from tests import decoder_models
from tests.conftest import run_cli

pytestmark = pytest.mark.browser

CALL_FIGURES = ("first_token_ms", "prefill_tokens_per_s", "decode_tokens_per_s")


@pytest.fixture(scope="module")
def generation(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bench-generation")
    folder = decoder_models.gpt2_folder(root / "model", False, "gpt2").folder
    bundle = root / "bundle"
    result = run_cli("build", folder, "-o", bundle, "--runtime-dir", runtime_dist, "--ep", "wasm",
                     "--variants", "fp32,int4", "--no-verify")
    assert result.returncode == 0, result.stderr
    return {"bundle": bundle, "folder": folder}


@pytest.mark.parametrize("tokens", [1, 7, 16])
def test_the_prompt_has_the_named_length_in_the_bundles_tokens(generation, tokens):
    manifest = manifest_file.load(generation["bundle"])
    text = prompt_of(generation["bundle"], manifest, tokens)
    tokenizer = TextTokenizer.from_folder(generation["folder"])
    assert len(tokenizer.encode([text]).input_ids[0]) == tokens


def test_bench_reports_first_and_later_calls_per_variant(generation, tmp_path):
    out = tmp_path / "bench.json"
    result = run_cli("bench", generation["bundle"], "--prompt-tokens", "12", "--new-tokens", "8",
                     "--calls", "3", "--json", out)
    assert result.returncode == 0, result.stderr
    assert "decode tok/s" in result.stdout and "first token ms" in result.stdout
    report = json.loads(out.read_text(encoding="utf-8"))
    assert (report["prompt_tokens"], report["new_tokens"], report["calls"]) == (12, 8, 3)
    manifest = manifest_file.load(generation["bundle"])
    rows = {row["variant"]: row for row in report["results"]}
    assert set(rows) == {"fp32", "int4"}
    for name, row in rows.items():
        assert (row["ep"], row["ran_on"], row["error"]) == ("wasm", "wasm", None)
        assert row["bytes"] == manifest.session().variant(name).bytes
        assert 0 < row["wire_bytes"] <= row["bytes"] and row["runtime_wire_bytes"] > 0
        assert row["load_ms"] > 0
        assert len(row["calls"]) == 3 and row["first_call"] == row["calls"][0]
        for call in row["calls"]:
            assert call["prompt_tokens"] == 12 and 0 < call["new_tokens"] <= 8
            assert call["first_token_ms"] > 0 and call["prefill_tokens_per_s"] > 0
        later = row["later_calls"]
        assert later["first_token_ms"] == pytest.approx(
            sum(call["first_token_ms"] for call in row["calls"][1:]) / 2)
        if min(call["new_tokens"] for call in row["calls"]) > 1:
            assert all(row["first_call"][key] > 0 and later[key] > 0 for key in CALL_FIGURES)
    assert rows["int4"]["wire_bytes"] < rows["fp32"]["wire_bytes"]


def test_bench_refuses_the_figures_of_single_runs_on_a_generation_bundle(generation):
    result = run_cli("bench", generation["bundle"], "--profile")
    assert result.returncode != 0
    assert "--profile, --plot and --dim are not for text-generation bundles" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_build_summary_says_the_default_bytes_on_the_wire_per_ep(generation):
    manifest = manifest_file.load(generation["bundle"])
    fp32 = manifest.session().variant("fp32")
    model, total = manifest.wire_bytes(fp32), manifest.wire_bytes(fp32, "wasm")
    assert model is not None and total is not None and 0 < model < total
    assert (f"; on the wire by default: wasm fp32 {human_bytes(model)} + runtime"
            f" {human_bytes(total - model)};") in summary(manifest)
