"""`bundle bench` on text-encoder bundles (a tiny BERT embedder and classifier, WASM): load time,
bytes raw and on the wire, and texts/s of the task's own method on batches of 1 and 8 texts of
the named length, the first call of each batch apart from the later ones; --dim, --profile and
--plot still time the model's single runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundler.bundle import manifest as manifest_file
from tests import encoder_models
from tests.conftest import run_cli

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def encoders(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bench-texts")
    built = {}
    for kind, folder in encoder_models.bert_folders(root / "models").items():
        built[kind] = root / kind
        result = run_cli("build", folder, "-o", built[kind], "--runtime-dir", runtime_dist,
                         "--ep", "wasm", "--variants", "fp32,int8", "--no-verify")
        assert result.returncode == 0, result.stderr
    return built


@pytest.mark.parametrize("kind", ["feature-extraction", "text-classification"])
def test_bench_reports_texts_per_second_per_batch_and_variant(encoders, kind, tmp_path):
    out = tmp_path / "bench.json"
    result = run_cli("bench", encoders[kind], "--prompt-tokens", "12", "--calls", "3",
                     "--json", out)
    assert result.returncode == 0, result.stderr
    assert "batch 8: later calls texts/s" in result.stdout
    report = json.loads(out.read_text(encoding="utf-8"))
    assert (report["tokens_per_text"], report["calls"]) == (12, 3)
    manifest = manifest_file.load(encoders[kind])
    rows = {row["variant"]: row for row in report["results"]}
    assert set(rows) == {"fp32", "int8"}
    for name, row in rows.items():
        assert (row["ep"], row["ran_on"], row["error"]) == ("wasm", "wasm", None)
        assert row["bytes"] == manifest.session().variant(name).bytes
        assert 0 < row["wire_bytes"] <= row["bytes"] and row["load_ms"] > 0
        assert [call["batch"] for call in row["calls"]] == [1, 1, 1, 8, 8, 8]
        for batch in (1, 8):
            calls = [call["ms"] for call in row["calls"] if call["batch"] == batch]
            speeds = row["texts_per_s"][str(batch)]
            assert speeds["first_call"] == pytest.approx(batch * 1000 / calls[0])
            assert speeds["later_calls"] == pytest.approx(
                sum(batch * 1000 / ms for ms in calls[1:]) / 2)
    assert rows["int8"]["wire_bytes"] < rows["fp32"]["wire_bytes"]


def test_a_dim_times_the_encoders_single_runs_instead(encoders):
    result = run_cli("bench", encoders["feature-extraction"], "--variant", "fp32", "--runs", "2",
                     "--dim", "batch_size=2")
    assert result.returncode == 0, result.stderr
    assert "steady median ms" in result.stdout and "texts/s" not in result.stdout
