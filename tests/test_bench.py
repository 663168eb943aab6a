"""`bundle bench`: the figures it reports, in Chromium and natively (never judged against a time),
and the statistics and profile aggregation behind them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundler.commands.bench import bench
from bundler.perf.profile import aggregate, native_profile
from bundler.perf.stats import SETTLE_RUNS, WARMUP_RUNS, percentile, summarise, total_runs
from bundler.verify.reference import native_reference
from tests import models, task_models
from tests.conftest import BuildBundle, run_cli

LATENCY_FIELDS = ("first_run_ms", "warmup_mean_ms", "steady_median_ms", "steady_p90_ms")


def test_summarise_keeps_first_run_warm_up_and_steady_state_apart() -> None:
    runs = [50.0, 30.0, *([20.0] * 8), *([12.0] * 5), 10.0, 11.0, 9.0, 30.0]
    latency = summarise(runs)
    assert latency.first_run_ms == 50.0
    assert latency.warmup_mean_ms == pytest.approx(sum(runs[:WARMUP_RUNS]) / WARMUP_RUNS)
    assert latency.steady_runs == len(runs) - SETTLE_RUNS == 4
    assert latency.steady_median_ms == pytest.approx(10.5)
    assert latency.steady_p90_ms == 30.0
    assert total_runs(20) == SETTLE_RUNS + 20


def test_summarise_few_runs_uses_the_second_half_as_steady_state() -> None:
    latency = summarise([9.0, 5.0, 4.0, 6.0])
    assert latency.steady_runs == 2
    assert latency.steady_median_ms == 5.0
    assert latency.steady_p90_ms >= latency.steady_median_ms
    assert percentile([3.0], 0.9) == 3.0


def test_profile_aggregates_by_op_type_and_node_and_finds_webgpu_fallbacks() -> None:
    def node(name: str, op: str, provider: str, dur: int, ts: int) -> dict:
        return {"cat": "Node", "name": f"{name}_kernel_time", "dur": dur, "ts": ts,
                "args": {"op_name": op, "provider": provider}}

    events = []
    for run in range(3):
        start = run * 1000
        events += [{"cat": "Session", "name": "model_run", "ts": start, "dur": 900},
                   node("conv1", "Conv", "WebGpuExecutionProvider", 300 if run else 5000,
                        start + 10),
                   node("conv2", "Conv", "WebGpuExecutionProvider", 100, start + 400),
                   node("shape", "Shape", "CPUExecutionProvider", 20, start + 600)]
    profile = aggregate(events, "browser", runs=2, ep="webgpu")
    assert profile.runs == 2
    assert [op.name for op in profile.by_op_type] == ["Conv", "Shape"]
    assert profile.by_op_type[0].total_ms == pytest.approx(0.4)  # the first run left out
    assert profile.by_op_type[0].nodes == 2
    assert profile.by_node[0].name == "conv1"
    assert profile.fallback_nodes == ["shape"]
    assert aggregate(events, "browser", runs=2, ep="wasm").fallback_nodes == []


def test_native_profile_times_every_operator(tmp_path: Path) -> None:
    model = models.conv_stack(tmp_path)
    reference = native_reference(model, _inputs(model), {})
    profile = native_profile(model, reference.feeds, runs=2)
    assert profile.source == "native" and profile.kernel_ms > 0
    assert "Conv" in {op.op_type for op in profile.by_node}
    assert abs(sum(op.share for op in profile.by_op_type) - 1.0) < 0.01


def _inputs(model: Path):
    from bundler.bundle.modelio import input_specs, read_model

    return input_specs(read_model(model, load_weights=False))


def test_bench_in_chromium_reports_every_figure(build_bundle: BuildBundle,
                                                tmp_path: Path) -> None:
    bundle, _ = build_bundle(models.conv_stack(tmp_path), quantize="fp32")
    out = tmp_path / "bench.json"
    plot = tmp_path / "bench.png"
    bench(bundle, execution_providers=("wasm",), runs=3, json_path=out, plot_path=plot,
          profile=True)
    report = json.loads(out.read_text())
    assert report["runs"] == {"steady": 3, "total": SETTLE_RUNS + 3,
                              "warmup_mean_of_first": WARMUP_RUNS, "steady_after": SETTLE_RUNS}
    (result,) = report["results"]
    assert (result["ep"], result["ran_on"], result["variant"]) == ("wasm", "wasm", "fp32")
    assert result["error"] is None
    latency = result["latency"]
    assert all(latency[key] > 0 for key in LATENCY_FIELDS)
    assert latency["steady_p90_ms"] >= latency["steady_median_ms"]
    assert len(latency["runs_ms"]) == SETTLE_RUNS + 3 and latency["steady_runs"] == 3
    cold = result["cold"]
    assert cold["time_to_first_result_ms"] > cold["navigation_to_ready_ms"] >= cold["load_ms"] > 0
    assert cold["bytes_transferred"] >= result["bytes"] and cold["requests"] >= 3
    assert all(cold[key] is None or cold[key] >= 0
               for key in ("fetch_ms", "wasm_compile_ms", "session_ms"))
    assert result["threads"] >= 1
    assert result["memory"] is None or result["memory"]["js_heap_used_bytes"] > 0
    assert result["browser_vs_native"]["threads_1"] > 0
    native = report["native"]["fp32"]
    assert native["threads_1"]["steady_median_ms"] > 0 and native["cores"] >= 1
    assert native["profile"]["by_op_type"] and result["profile"]["by_op_type"]
    assert result["profile"]["source"] == "browser" and result["profile"]["fallback_nodes"] == []
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_bench_cli_on_webgpu_says_swiftshader_is_not_a_gpu(build_bundle: BuildBundle,
                                                             tmp_path: Path) -> None:
    bundle, _ = build_bundle(models.conv_stack(tmp_path))
    out = tmp_path / "webgpu.json"
    result = run_cli("bench", bundle, "--ep", "webgpu", "--runs", "1", "--json", out)
    assert result.returncode == 0, result.stderr
    assert "steady median ms" in result.stdout
    report = json.loads(out.read_text())
    (webgpu,) = report["results"]
    assert webgpu["error"] is None and webgpu["ran_on"] == "webgpu", webgpu
    assert "swiftshader" in json.dumps(webgpu["adapter"]).lower()
    assert any("not GPU figures" in note for note in report["notes"])
    assert "not GPU figures" in result.stderr


def test_bench_of_one_variant_of_several(build_bundle: BuildBundle, tmp_path: Path) -> None:
    bundle, _ = build_bundle(models.conv_stack(tmp_path), quantize="fp32", variants=("int8",))
    out = tmp_path / "int8.json"
    result = run_cli("bench", bundle, "--variant", "int8", "--ep", "wasm", "--runs", "1",
                     "--json", out)
    assert result.returncode == 0, result.stderr
    (int8,) = json.loads(out.read_text())["results"]
    assert (int8["variant"], int8["error"]) == ("int8", None)


def test_bench_of_a_task_bundle_measures_at_the_task_size(build_bundle: BuildBundle,
                                                          tmp_path: Path) -> None:
    model = task_models.detector(tmp_path / "model", symbolic_size=True)
    bundle, manifest = build_bundle(model, task={"kind": "object-detection", "size": [96, 80]})
    assert manifest["sessions"][0]["inputs"][0]["shape"] == [1, 96, 80, 3]
    out = tmp_path / "task.json"
    result = run_cli("bench", bundle, "--ep", "wasm", "--runs", "1", "--json", out)
    assert result.returncode == 0, result.stderr
    assert "guessed" not in result.stderr
    assert "images 1x96x80x3" in result.stdout and "(task-size)" in result.stdout
    report = json.loads(out.read_text())
    assert (report["inputs"], report["dims_source"], report["guessed"]) == (
        {"images": [1, 96, 80, 3]}, "task-size", [])
    (row,) = report["results"]
    # what the page reports of the tensors it ran, and of what the model gave back
    assert row["inputs"] == {"images": [1, 96, 80, 3]} and row["dims_source"] == "task-size"
    assert row["outputs"] == {"output0": [1, 6, 6]}


def test_bench_says_when_it_guessed_the_size_and_measures_at_dim(build_bundle: BuildBundle,
                                                                 tmp_path: Path) -> None:
    bundle, _ = build_bundle(models.symbolic_hw(tmp_path))  # --no-verify: no record of sizes
    guessed, given = tmp_path / "guessed.json", tmp_path / "given.json"
    result = run_cli("bench", bundle, "--ep", "wasm", "--runs", "1", "--json", guessed)
    assert result.returncode == 0, result.stderr
    (warning,) = [line for line in result.stderr.splitlines() if "guessed size" in line]
    report = json.loads(guessed.read_text())
    assert report["dims_source"] == "guess"
    size = report["dims"]["height"]
    assert [(g["input"], g["axis"], g["dim"], g["value"]) for g in report["guessed"]] == [
        ("image", 2, "height", size), ("image", 3, "width", size)]
    assert f"input image 1x3x{size}x{size}: height={size} (axis 2)" in warning
    assert "--dim height=VALUE --dim width=VALUE" in warning
    (row,) = report["results"]
    assert row["inputs"] == {"image": [1, 3, size, size]} and row["dims_source"] == "guess"

    result = run_cli("bench", bundle, "--ep", "wasm", "--runs", "1", "--dim", "height=41",
                     "--dim", "width=27", "--json", given)
    assert result.returncode == 0, result.stderr
    assert "guessed size" not in result.stderr
    assert "image 1x3x41x27" in result.stdout and "(--dim)" in result.stdout
    report = json.loads(given.read_text())
    assert (report["dims_source"], report["guessed"]) == ("--dim", [])
    (row,) = report["results"]
    # the page ran 41x27 tensors: the 3x3 stride-2 conv gave 20x13 features
    assert row["inputs"] == {"image": [1, 3, 41, 27]}
    assert row["outputs"] == {"features": [1, 2, 20, 13]}
