"""The KV cache on WebGPU (SwiftShader): over 1,000 generated tokens the present.* outputs stay in
GPU buffers, fed back as the next step's past and disposed when replaced, so the live GPU buffer
count stays flat, and the tokens still equal the native loop's; load()'s warm-up compiles the
shaders before the first call.

The page's GPUDevice.createBuffer / GPUBuffer.destroy and createComputePipeline are wrapped by an
init script (onnxruntime's WebGPU backend calls them through emscripten's bindings), so the
counts are the browser's own, not the runtime's bookkeeping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bundler.bundle import manifest as manifest_file
from bundler.bundle.modelio import cpu_session
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.text.generate import prompt_generations
from bundler.text.tokenizer import TextTokenizer
from tests import decoder_models
from tests.conftest import run_cli

pytestmark = pytest.mark.browser

STEPS = 1000
PROMPT = "A"  # this model's greedy run from it varies to the end (from others it settles)

COUNTERS = """(() => {
  if (!globalThis.GPUDevice) return;
  const live = new Set();
  let pipelines = 0;
  const create = GPUDevice.prototype.createBuffer;
  GPUDevice.prototype.createBuffer = function (descriptor) {
    const buffer = create.call(this, descriptor);
    live.add(buffer);
    return buffer;
  };
  const destroy = GPUBuffer.prototype.destroy;
  GPUBuffer.prototype.destroy = function () {
    live.delete(this);
    return destroy.call(this);
  };
  for (const name of ['createComputePipeline', 'createComputePipelineAsync']) {
    const made = GPUDevice.prototype[name];
    GPUDevice.prototype[name] = function (...args) {
      pipelines += 1;
      return made.apply(this, args);
    };
  }
  globalThis.gpuCounts = () => ({ buffers: live.size, pipelines });
})();"""

LONG_RUN = """async ({ url, prompt, steps }) => {
  const { load } = await import(url);
  const model = await load({ executionProviders: ['webgpu'] });
  const buffers = [];
  const run = await model.generate(prompt, { maxNewTokens: steps,
    onToken: () => buffers.push(gpuCounts().buffers) });
  const afterRun = gpuCounts().buffers;
  // the same loop with the replaced pasts never disposed: what the count above would show
  model._drop = async () => {};
  const before = gpuCounts().buffers;
  await model.generate(prompt, { maxNewTokens: 50 });
  const leaked = gpuCounts().buffers - before;
  await model.release();
  return { ep: model.ep, tokenIds: run.tokenIds, buffers, afterRun, leaked,
           released: gpuCounts().buffers };
}"""

WARM_UP = """async ({ url, prompt, warmUp }) => {
  const { load } = await import(url);
  const model = await load({ executionProviders: ["webgpu"], warmUp });
  const before = gpuCounts().pipelines;
  const run = await model.generate(prompt, { maxNewTokens: 4 });
  const compiled = gpuCounts().pipelines - before;
  await model.release();
  return { compiled, tokenIds: run.tokenIds };
}"""


@pytest.fixture(scope="module")
def long_bundle(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path
                ) -> dict[str, Path]:
    """The test GPT-2 with room for 1,100 positions, built unchecked (the test checks it)."""
    root = tmp_path_factory.mktemp("long")
    folder = decoder_models.gpt2_folder(root / "model", positions=1100).folder
    result = run_cli("build", folder, "-o", root / "bundle", "--runtime-dir", runtime_dist,
                     "--variants", "fp32", "--no-verify")
    assert result.returncode == 0, result.stderr
    return {"bundle": root / "bundle", "folder": folder}


@pytest.fixture
def counted(webgpu_browser: Any, long_bundle: dict[str, Path]) -> Iterator[Any]:
    """counted(script, arg): `script` run on a fresh page (its own GPU device and shader cache)
    of the bundle, with the counters; `arg` gets the url of bundle.mjs."""
    with serve_directory(long_bundle["bundle"]) as base_url:
        def run(script: str, arg: dict[str, Any]) -> Any:
            context = webgpu_browser.new_context()
            try:
                context.add_init_script(COUNTERS)
                page = context.new_page()
                page.set_default_timeout(600_000)  # 1,000 SwiftShader steps on a busy machine
                page.goto(base_url + HARNESS_PATH.lstrip("/"))
                return page.evaluate(script, {**arg, "url": base_url + "bundle.mjs"})
            finally:
                context.close()

        yield run


def test_a_thousand_tokens_keep_the_gpu_buffer_count_flat(long_bundle, counted):
    manifest = manifest_file.load(long_bundle["bundle"])
    session = cpu_session(long_bundle["bundle"] / manifest.session().variant("fp32").file)
    tokenizer = TextTokenizer.from_folder(long_bundle["folder"])
    native = prompt_generations(session, long_bundle["folder"], tokenizer, [PROMPT], STEPS)[0]
    assert len(native) == STEPS and len(set(native[-100:])) > 10  # no EOS, not one token looping
    got = counted(LONG_RUN, {"prompt": PROMPT, "steps": STEPS})
    assert got["ep"] == "webgpu"
    assert got["tokenIds"] == native
    buffers = got["buffers"]
    assert len(buffers) > STEPS // 2  # sampled all along the run
    # onnxruntime's pool fills as the cache grows into larger size classes, then stays; a
    # kept past never disposed adds 4 buffers (2 layers x key, value) a token
    assert max(buffers) - buffers[len(buffers) // 10] < 64, buffers[::50]
    assert got["leaked"] >= 4 * 40  # the count sees a leak where there is one
    assert got["released"] == 0  # release() disposes the last cache too


def test_the_warm_up_compiles_the_shaders_before_the_first_call(counted):
    cold = counted(WARM_UP, {"prompt": PROMPT, "warmUp": False})
    warm = counted(WARM_UP, {"prompt": PROMPT, "warmUp": True})
    assert warm["tokenIds"] == cold["tokenIds"]
    assert cold["compiled"] > 10 and warm["compiled"] <= cold["compiled"] // 4, (cold, warm)
