"""Speech to text beyond one window, and its decoder on WebGPU (SwiftShader), in headless
Chromium: model.transcribe() of 75 s of speech read by eSpeak NG gives the native run's tokens
for every 30 s window (with strides), with and without timestamps, on WASM; with the decoder
session on WebGPU, a short recording gives the native tokens while the decoder's KV cache stays
in GPU buffers, each disposed when replaced (the live buffer count stays flat; with disposal off
it grows by the cache's size a token). `bundle test --audio` on the 75 s recording compares every
window's teacher-forced logits. An int8 decoder passes the build's check on both EPs.

On SwiftShader the encoder takes close to a minute a window on a busy machine, so the WebGPU
test runs the encoder on WASM and only the decoder (the KV cache) on WebGPU."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bundler.bundle import manifest as manifest_file
from bundler.tasks.audio import read_wav
from bundler.tasks.samples import wav_bytes
from bundler.text.whisper_bundle import bundle_sessions, transcripts
from tests import speech_models
from tests.conftest import run_cli
from tests.speech import speech
from tests.test_text_generation_webgpu import COUNTERS

pytestmark = pytest.mark.browser

LONG = 75.0  # four windows
SHORT = 4.0
CASES = [{"language": "en", "task": "transcribe", "timestamps": False},
         {"language": "en", "task": "transcribe", "timestamps": True}]

LONG_RUN = """async ({ url, samples, rate, cases }) => {
  const { load } = await import(url);
  const audio = new Float32Array(Uint8Array.from(atob(samples), (c) => c.charCodeAt(0)).buffer);
  const model = await load({ executionProviders: ['wasm'] });
  const results = [];
  for (const options of cases) {
    results.push(await model.transcribe(audio, { sampleRate: rate, ...options }));
  }
  await model.release();
  return { ep: model.ep, results };
}"""

ON_GPU = """async ({ url, samples, rate, options }) => {
  const { load } = await import(url);
  const audio = new Float32Array(Uint8Array.from(atob(samples), (c) => c.charCodeAt(0)).buffer);
  const model = await load({ executionProviders: ['wasm'], warmUp: false });
  await model._decoder.release(); // the decoder session on WebGPU instead
  model._decoder = await load({ session: 'decoder', executionProviders: ['webgpu'] });
  const buffers = [];
  const result = await model.transcribe(audio, { sampleRate: rate, ...options,
    onToken: () => buffers.push(gpuCounts().buffers) });
  // the replaced pasts never disposed, for 20 tokens: what the count above would show
  model._decoder._drop = async () => {};
  const before = gpuCounts().buffers;
  const controller = new AbortController();
  let chosen = 0;
  await model.transcribe(audio, { sampleRate: rate, ...options, signal: controller.signal,
    onToken: () => { chosen += 1; if (chosen === 20) controller.abort(); } }).catch(() => {});
  const leaked = gpuCounts().buffers - before;
  const ep = model._decoder.ep;
  await model.release();
  return { ep, result, buffers, leaked, released: gpuCounts().buffers };
}"""


def _encoded(seconds: float) -> tuple[np.ndarray, int, str]:
    samples, rate = speech(seconds)
    audio = np.asarray(samples, np.float32)
    return audio, rate, base64.b64encode(audio.tobytes()).decode()


def _same(result: dict[str, Any], want: dict[str, Any], case: dict[str, Any]) -> None:
    assert result["windows"] == want["windows"]
    assert result["tokens"] == want["tokens"] and result["text"] == want["text"]
    if case["timestamps"]:
        assert [(s["start"], s["end"], s["tokens"]) for s in result["segments"]] == [
            (c.start, c.end, c.tokens) for c in want["chunks"]]


def test_75_seconds_give_the_native_tokens_window_by_window(
        tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path, plain_browser: Any,
        open_bundle: Any) -> None:
    built = speech_models.built(tmp_path_factory.getbasetemp(), runtime_dist,
                                *speech_models.WASM_BUILD)
    audio, rate, encoded = _encoded(LONG)
    native = [speech_models.native(built, audio, rate, case) for case in CASES]
    assert all(len(want["windows"]) == 4 for want in native)
    assert all(len(window) > 4 for want in native for window in want["windows"])
    assert len(native[1]["chunks"]) >= 3  # timestamps merged across windows
    with open_bundle(plain_browser, built["bundle"]) as page:
        page.page.set_default_timeout(600_000)
        got = page.evaluate(LONG_RUN, {"url": page.base_url + "bundle.mjs", "rate": rate,
                                       "cases": CASES, "samples": encoded})
    assert got["ep"] == "wasm"
    for result, want, case in zip(got["results"], native, CASES, strict=True):
        _same(result, want, case)


def test_bundle_test_compares_every_windows_teacher_forced_logits(
        tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path, tmp_path: Path) -> None:
    """`bundle test --audio` on the 75 s recording: in every window, each decoding call (those
    that start past the window's beginning too) run again in the browser on its own encoding,
    fed native's tokens, gives native's logits within tolerance."""
    built = speech_models.built(tmp_path_factory.getbasetemp(), runtime_dist,
                                *speech_models.WASM_BUILD)
    audio, rate, _ = _encoded(LONG)
    recording = tmp_path / "long.wav"
    recording.write_bytes(wav_bytes(audio, rate))
    directory = built["bundle"]
    manifest = manifest_file.load(directory)
    native = transcripts(directory, manifest, bundle_sessions(directory, manifest),
                         *read_wav(recording), steps=True)
    calls = [call for case in native for window in case["steps"] for call in window["teacher"]]
    assert all(len(case["steps"]) == 4 for case in native)
    assert any(call["seek"] > 0 for call in calls), calls  # a window took several calls
    report = tmp_path / "report.json"
    result = run_cli("test", directory, "--audio", recording, "--ep", "wasm", "--no-fallback",
                     "--report", report)
    assert result.returncode == 0, result.stdout + result.stderr
    [entry] = json.loads(report.read_text(encoding="utf-8"))["task"]
    assert entry["passed"] and 0 < entry["worst_score_difference"] <= 0.01, entry


def test_the_decoder_on_webgpu_keeps_its_cache_on_the_gpu(
        tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path, webgpu_browser: Any,
        open_bundle: Any) -> None:
    # the check of the build is the WASM test's (the WebGPU runtime shipped, not checked here)
    built = speech_models.built(tmp_path_factory.getbasetemp(), runtime_dist, "--no-verify")
    audio, rate, encoded = _encoded(SHORT)
    case = CASES[0]
    want = speech_models.native(built, audio, rate, case)
    with open_bundle(webgpu_browser, built["bundle"]) as page:
        page.page.set_default_timeout(600_000)  # SwiftShader on a busy machine
        page.page.evaluate(COUNTERS)  # before the runtime makes its GPU device
        got = page.evaluate(ON_GPU, {"url": page.base_url + "bundle.mjs", "rate": rate,
                                     "options": case, "samples": encoded})
    assert got["ep"] == "webgpu"
    _same(got["result"], want, case)
    buffers = got["buffers"]
    assert len(buffers) > 20
    # onnxruntime's pool fills as the cache grows into larger size classes, then stays; a kept
    # past never disposed leaves up to 4 buffers a token (2 layers x key, value of the
    # self-attention) the pool cannot reuse: 46 over 20 tokens here. Without a leak the pool's
    # own growth after the first quarter reached 17 buffers in one run here
    assert max(buffers) - buffers[len(buffers) // 4] < 24, buffers
    assert got["leaked"] >= 30, got["leaked"]
    assert got["released"] == 0  # release() disposes the last cache too


def test_an_int8_decoder_passes_its_check_on_webgpu_and_wasm(
        tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> None:
    """`--quantize int8` on both EPs (the default): the decoder's one int8 token table, which
    WASM folds into a float table at load and WebGPU dequantizes as it runs, gives native's
    transcripts in the build's check on each EP, the encoder fp32 beside it."""
    folder = speech_models.exported(tmp_path_factory.getbasetemp())
    output = tmp_path_factory.mktemp("int8-both") / "bundle"
    result = run_cli("build", folder, "-o", output, "--runtime-dir", runtime_dist,
                     "--quantize", "int8")
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = manifest_file.load(output)
    decoder = manifest.session("decoder")
    assert [decoder.default_for(ep).kind for ep in ("webgpu", "wasm")] == ["int8", "int8"]
    rows = [line for line in result.stdout.splitlines() if "fp32 / int8" in line]
    assert [("webgpu" in row, "pass" in row) for row in rows] == [(True, True), (False, True)]
