"""A text-generation bundle from an optimum export folder in headless Chromium: the build infers
the task and its check passes, model.generate() gives the Python reference loop's tokens greedily
and with seeded sampling, streams text whose pieces join to the result, stops at a stop string,
aborts, and takes chat messages through the template."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bundler.bundle import manifest as manifest_file
from bundler.bundle.modelio import cpu_session
from bundler.text.chat import render_chat, special_tokens
from bundler.text.generate import prompt_generations
from bundler.text.sampling import SamplingOptions
from bundler.text.tokenizer import TextTokenizer
from tests import decoder_models
from tests.conftest import run_cli

pytestmark = pytest.mark.browser

PROMPTS = ["The cat sat on the mat.", "Café, naïve 😀"]
SAMPLING = {"temperature": 0.9, "topK": 40, "topP": 0.95, "repetitionPenalty": 1.1, "seed": 7}


def _build(root: Path, runtime_dist: Path, merged: bool, *flags: str,
           family: str = "gpt2", two_files: bool = False, variants: str = "fp32"
           ) -> dict[str, Path]:
    folder = decoder_models.gpt2_folder(root / "model", merged, family,
                                        two_files=two_files).folder
    output = root / "bundle"
    result = run_cli("build", folder, "-o", output, "--runtime-dir", runtime_dist,
                     "--variants", variants, *flags)
    assert result.returncode == 0, result.stderr
    return {"bundle": output, "folder": folder}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> dict[str, Path]:
    """The GPT-2 folder built as users build it (`bundle build DIR`, no --task, the check on
    WebGPU and WASM)."""
    return _build(tmp_path_factory.mktemp("generation"), runtime_dist, False)


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> dict[str, Path]:
    """The same as one merged decoder (use_cache_branch), WASM only."""
    return _build(tmp_path_factory.mktemp("merged"), runtime_dist, True, "--ep", "wasm")


@pytest.fixture(scope="module")
def int4(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> dict[str, Path]:
    """The GPT-2 with its int4 variant the default beside fp32, checked on both EPs (each variant
    against its own native run, each EP's graph): a two-EP generation bundle's int4 is
    format=per-ep, the int8 form on WASM (its DequantizeLinear blocks folded at load, into int8
    weights) and the qdq form on WebGPU, over one data file of weights."""
    return _build(tmp_path_factory.mktemp("int4"), runtime_dist, False, "--quantize", "int4")


@pytest.fixture(scope="module")
def int4_nbits(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> dict[str, Path]:
    """The GPT-2's int4 as MatMulNBits (format=nbits, given), WASM only."""
    return _build(tmp_path_factory.mktemp("int4-nbits"), runtime_dist, False, "--ep", "wasm",
                  "--quantize", "int4", "--int4", "format=nbits")


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> dict[str, Path]:
    """A Llama with grouped-query attention (2 KV heads for 4), WASM only."""
    return _build(tmp_path_factory.mktemp("llama"), runtime_dist, False, "--ep", "wasm",
                  family="llama")


@pytest.fixture(scope="module")
def two_files(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> dict[str, Path]:
    """The GPT-2 as optimum leaves it unmerged (decoder_model.onnx, decoder_with_past_model.onnx),
    WASM only."""
    return _build(tmp_path_factory.mktemp("two-files"), runtime_dist, False, "--ep", "wasm",
                  two_files=True)


@pytest.fixture(scope="module")
def quantized(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> dict[str, Path]:
    """The GPT-2 with int8 and int8-weights variants beside fp32, WASM only: the check runs
    each variant against its own native run (tokens and teacher-forced logits)."""
    return _build(tmp_path_factory.mktemp("int8"), runtime_dist, False, "--ep", "wasm",
                  variants="fp32,int8,int8-weights")


@pytest.fixture(scope="module")
def qwen2_variants(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path
                   ) -> dict[str, Path]:
    """A Qwen2 (grouped-query attention, q/k/v biases, tied LM head) as int8-weights,
    int8-static and fp16, checked on both EPs: each variant against its own native run."""
    return _build(tmp_path_factory.mktemp("qwen2"), runtime_dist, False, family="qwen2",
                  variants="int8-weights,int8-static,fp16")


def _native(built: dict[str, Path], prompts: list[str], steps: int = 32,
            sampling: SamplingOptions | None = None, variant: str = "fp32",
            ep: str = "wasm") -> list[list[int]]:
    """The reference loop's tokens from the graph `ep` opens, opened as native runs open it."""
    manifest = manifest_file.load(built["bundle"])
    record = manifest.session().variant(variant)
    session = cpu_session(built["bundle"] / record.graph_for(ep), config=record.config_for("wasm"))
    return prompt_generations(session, built["folder"], TextTokenizer.from_folder(built["folder"]),
                              prompts, steps, sampling)


GENERATE = """async ({ url, options, prompts, settings }) => {
  const { load } = await import(url);
  const model = await load(options);
  const runs = [];
  for (const prompt of prompts) {
    const pieces = [];
    const run = await model.generate(prompt, { ...settings, onToken: (p) => pieces.push(p) });
    runs.push({ ...run, pieces });
  }
  await model.release();
  return { ep: model.ep, variant: model.variant, runs };
}"""


PREFLIGHT = """async ({ url, options }) => (await import(url)).preflight(options)"""


def _generate(page: Any, prompts: list[Any], options: dict | None = None,
              **settings: Any) -> dict[str, Any]:
    return page.evaluate(GENERATE, {
        "url": page.base_url + "bundle.mjs", "prompts": prompts, "settings": settings,
        "options": options or {"executionProviders": ["wasm"]}})


@pytest.mark.parametrize("name", ["built", "merged", "llama", "two_files", "quantized",
                                  "int4", "int4_nbits"])
def test_the_build_infers_the_task_checks_tokens_and_ships_the_modules(request, name):
    built = request.getfixturevalue(name)
    bundle = json.loads((built["bundle"] / "bundle.json").read_text(encoding="utf-8"))
    assert bundle["verification"]["status"] == "passed", bundle["verification"]
    task = bundle["task"]
    assert task["kind"] == "text-generation" and task["output"] == "logits"
    assert {"config.json", "generation_config.json", "tokenizer.json"} <= set(task["files"])
    for module in ("generate.mjs", "sampling.mjs", "chat.mjs", "jinja.mjs"):
        assert (built["bundle"] / "text" / module).is_file()
    # the shipped graph is the folded one (bundler/model/shape_plumbing.py): the browser's greedy
    # tokens below are those of the folded decoder
    steps = {step["name"]: step for step in bundle["optimization"]["steps"]}
    assert steps["shape-plumbing"]["status"] == "ok", steps["shape-plumbing"]
    # each present's new key/value slice is an output too (bundler/text/slices.py): the WASM
    # loop below fetches those instead of the whole presents
    outputs = [output["name"] for output in bundle["sessions"][0]["outputs"]]
    presents = [output for output in outputs if output.startswith("present.")]
    assert presents and [output for output in outputs if output.startswith("present_new.")] == [
        output.replace("present.", "present_new.") for output in presents]
    configs = {variant["name"]: variant.get("session_config")
               for variant in bundle["sessions"][0]["variants"]}
    formats = {variant["name"]: variant["settings"].get("format")
               for variant in bundle["sessions"][0]["variants"]}
    if name.startswith("int4"):
        per_ep = name == "int4"
        assert formats["int4"] == ("per-ep" if per_ep else "nbits")
        assert configs["int4"] == ({"wasm": {"session.disable_quant_qdq": "1"}} if per_ep
                                   else None)
    if name == "quantized":  # int8-weights runs float weights on WASM, folded at load, and so
        # does int8's tied token table (its one int8 copy, read as float by the head too)
        folded = {"wasm": {"session.disable_quant_qdq": "1"},
                  "webgpu": {"session.qdq_matmulnbits_accuracy_level": "1"}}
        assert configs["int8-weights"] == configs["int8"] == folded


@pytest.mark.parametrize("options", [
    {"executionProviders": ["wasm"]},
    {"executionProviders": ["wasm"], "worker": True},
    {"executionProviders": ["webgpu"]},
    {"executionProviders": ["webgpu"], "worker": True},
    {"executionProviders": ["wasm"], "fixture": "merged"},
    {"executionProviders": ["wasm"], "fixture": "llama"},
    {"executionProviders": ["wasm"], "fixture": "int4", "variant": "int4"},
    {"executionProviders": ["webgpu"], "fixture": "int4", "variant": "int4"},
    {"executionProviders": ["wasm"], "fixture": "int4", "variant": "int4", "worker": True},
    {"executionProviders": ["wasm"], "fixture": "int4_nbits", "variant": "int4"},
    {"executionProviders": ["wasm"], "fixture": "quantized", "variant": "int8-weights"},
    {"executionProviders": ["wasm"], "fixture": "quantized", "variant": "int8"},
], ids=["wasm", "worker", "webgpu", "webgpu-worker", "merged-decoder", "llama-gqa", "int4-wasm",
        "int4-webgpu", "int4-worker", "int4-nbits-wasm", "int8-weights-wasm", "int8-wasm"])
def test_greedy_tokens_equal_the_python_loop(request, open_bundle, options):
    """fp32's, and a quantized variant's against its own native run."""
    built = request.getfixturevalue(options.pop("fixture", "built"))
    browser = request.getfixturevalue("webgpu_browser" if "webgpu" in options[
        "executionProviders"] else "plain_browser")
    native = _native(built, PROMPTS, variant=options.get("variant", "fp32"),
                     ep=options["executionProviders"][0])
    assert max(map(len, native)) == 32  # the comparison is not cut short by EOS
    tokenizer = TextTokenizer.from_folder(built["folder"])
    with open_bundle(browser, built["bundle"]) as page:
        got = _generate(page, PROMPTS, options, maxNewTokens=32)
    assert got["ep"] == options["executionProviders"][0]
    assert got["variant"] == options.get("variant", "fp32")
    for run, want, prompt in zip(got["runs"], native, PROMPTS, strict=True):
        assert run["tokenIds"] == want
        assert run["promptIds"] == tokenizer.encode([prompt]).input_ids[0].tolist()
        assert run["text"] == tokenizer.decode(want)
        assert "".join(run["pieces"]) == run["text"]  # streamed UTF-8, nothing lost or doubled
        timings = run["timings"]
        assert timings["firstTokenMs"] > 0 and timings["decodeTokensPerS"] > 0


def test_a_two_ep_int4_ships_the_int8_form_to_wasm_and_qdq_to_webgpu(int4, webgpu_browser,
                                                                      open_bundle):
    """The default build for both EPs: WASM fetches the int8 form's graph, WebGPU the qdq form's,
    each with the one shared data file and not the other's graph, and each generates the greedy
    tokens of its own graph run natively."""
    import onnx

    manifest = manifest_file.load(int4["bundle"])
    record = manifest.session().variant("int4")
    assert record.settings["format"] == "per-ep" and record.data
    graphs = {ep: record.graph_for(ep) for ep in ("wasm", "webgpu")}
    assert graphs["wasm"] == record.file and graphs["webgpu"] != record.file
    operators = {ep: {node.op_type for node in onnx.load(int4["bundle"] / graph,
                                                         load_external_data=False).graph.node}
                 for ep, graph in graphs.items()}
    assert "DynamicQuantizeMatMul" in operators["wasm"]
    assert "DynamicQuantizeMatMul" not in operators["webgpu"]
    assert "DequantizeLinear" in operators["webgpu"]
    for ep, other in (("wasm", "webgpu"), ("webgpu", "wasm")):
        options = {"executionProviders": [ep], "variant": "int4"}
        with open_bundle(webgpu_browser, int4["bundle"]) as page:
            planned = page.evaluate(PREFLIGHT, {"url": page.base_url + "bundle.mjs",
                                                "options": options})
            got = _generate(page, PROMPTS[:1], options, maxNewTokens=16)
            fetched = {Path(url).name.removesuffix(".gz").removesuffix(".br")
                       .removesuffix(".planes") for url in page.requests if "/models/" in url}
        assert got["ep"] == ep
        assert got["runs"][0]["tokenIds"] == _native(int4, PROMPTS[:1], 16, variant="int4",
                                                     ep=ep)[0]
        assert {Path(path).name for path in [graphs[ep], *record.data]} <= fetched, fetched
        assert Path(graphs[other]).name not in fetched, fetched
        # preflight() counts what load() fetches there: that graph, the data, the EP's wasm
        assert [file["path"] for file in planned["eps"][0]["files"]] == [
            graphs[ep], *record.data, manifest.runtime.builds[ep].wasm]


def test_seeded_sampling_draws_python_tokens(built, plain_browser, open_bundle):
    options = SamplingOptions(do_sample=True, temperature=0.9, top_k=40, top_p=0.95,
                              repetition_penalty=1.1, seed=7)
    native = _native(built, PROMPTS, 24, options)
    greedy = _native(built, PROMPTS, 24)
    assert native != greedy  # the draw is not the argmax in disguise
    with open_bundle(plain_browser, built["bundle"]) as page:
        got = _generate(page, PROMPTS, maxNewTokens=24, **SAMPLING)
        other = _generate(page, PROMPTS[:1], maxNewTokens=24, **{**SAMPLING, "seed": 8})
    assert [run["tokenIds"] for run in got["runs"]] == native
    assert other["runs"][0]["tokenIds"] != native[0]


STOP_AND_ABORT = """async ({ url, prompt, stop }) => {
  const { load } = await import(url);
  const model = await load({ executionProviders: ['wasm'] });
  const stopped = await model.generate(prompt, { maxNewTokens: 32, stop: [stop] });
  const pieces = [];
  const controller = new AbortController();
  let aborted = null;
  try {
    await model.generate(prompt, { maxNewTokens: 32, signal: controller.signal,
      onToken: (piece) => { pieces.push(piece); if (pieces.length === 2) controller.abort(); } });
  } catch (error) {
    aborted = error.name;
  }
  const after = await model.generate(prompt, { maxNewTokens: 4 });  // the model still works
  await model.release();
  return { stopped, aborted, pieces: pieces.length, after: after.tokenIds.length };
}"""


def test_a_stop_string_cuts_the_text_and_abort_rejects(built, plain_browser, open_bundle):
    tokenizer = TextTokenizer.from_folder(built["folder"])
    full = tokenizer.decode(_native(built, PROMPTS[:1])[0])
    # two characters past the middle, real ones (a random model writes broken UTF-8 too)
    stop = next(full[at:at + 2] for at in range(len(full) // 2, len(full) - 1)
                if full[at:at + 2].strip() and "\ufffd" not in full[at:at + 2])
    with open_bundle(plain_browser, built["bundle"]) as page:
        got = page.evaluate(STOP_AND_ABORT, {"url": page.base_url + "bundle.mjs",
                                             "prompt": PROMPTS[0], "stop": stop})
    assert got["stopped"]["text"] == full[:full.index(stop)]
    assert len(got["stopped"]["tokenIds"]) < 32
    assert got["aborted"] == "AbortError" and got["pieces"] == 2 and got["after"] == 4


WORKER_CACHE = """async ({ url, prompt }) => {
  const sent = [];  // every message the page sends a worker: its type and feeds
  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (message, transfer) {
    sent.push([message.type, Object.keys(message.feeds ?? {})]);
    return post.call(this, message, transfer);
  };
  const { load } = await import(url);
  const onPage = await load({ executionProviders: ['wasm'] });
  const want = (await onPage.generate(prompt, { maxNewTokens: 32 })).tokenIds;
  await onPage.release();
  const model = await load({ executionProviders: ['wasm'], worker: true });
  sent.length = 0;  // not the open's and the warm-up's
  const got = (await model.generate(prompt, { maxNewTokens: 32 })).tokenIds;
  const generated = sent.splice(0);
  const controller = new AbortController();
  let aborted = null;
  let pieces = 0;
  try {
    await model.generate(prompt, { maxNewTokens: 32, signal: controller.signal,
      onToken: () => { pieces += 1; if (pieces === 2) controller.abort(); } });
  } catch (error) {
    aborted = error.name;
  }
  const after = (await model.generate(prompt, { maxNewTokens: 4 })).tokenIds;
  let released = null;
  try {  // released while a step is in the worker: the call rejects, it does not hang
    await model.generate(prompt, { maxNewTokens: 32,
      onToken: () => { if (!released) released = setTimeout(() => model.release(), 0); } });
  } catch (error) {
    released = error.code;
  }
  return { want, got, generated, aborted, pieces, after, released };
}"""


def test_worker_mode_on_wasm_keeps_the_appended_cache_in_the_worker(built, plain_browser,
                                                                    open_bundle):
    """In worker mode on WASM the cache lives in the worker beside the session: each step's
    message carries the new ids, not the past, and the tokens are those of the page's cache.
    Aborting or releasing the model mid-generation still ends the call."""
    with open_bundle(plain_browser, built["bundle"]) as page:
        got = page.evaluate(WORKER_CACHE, {"url": page.base_url + "bundle.mjs",
                                           "prompt": PROMPTS[0]})
    assert got["got"] == got["want"] == _native(built, PROMPTS[:1])[0]
    steps = ["cacheStep"] * len(got["got"])  # one a token
    assert [kind for kind, _ in got["generated"]] == ["openCache", *steps, "releaseCache"]
    fed = {name for _, feeds in got["generated"] for name in feeds}
    assert "input_ids" in fed and not [name for name in fed if name.startswith("past")], fed
    assert (got["aborted"], got["pieces"], len(got["after"])) == ("AbortError", 2, 4)
    assert got["released"] == "released"


def test_messages_go_through_the_chat_template(built, plain_browser, open_bundle):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]
    config = json.loads((built["folder"] / "tokenizer_config.json").read_text(encoding="utf-8"))
    text = render_chat(config["chat_template"], messages, add_generation_prompt=True,
                       tokens=special_tokens(config))
    tokenizer = TextTokenizer.from_folder(built["folder"])
    ids = tokenizer.encode([text], add_special_tokens=False).input_ids[0].tolist()
    with open_bundle(plain_browser, built["bundle"]) as page:
        got = _generate(page, [messages], maxNewTokens=8)
    assert got["runs"][0]["promptIds"] == ids


def test_bundle_run_text_continues_a_prompt_natively(built):
    result = run_cli("run", built["bundle"], "--text", PROMPTS[0], "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["task"] == "text-generation" and answer["tokens"] == _native(built, PROMPTS[:1])


def test_bundle_run_opens_a_qdq_variant_with_its_session_config(int4):
    """`bundle run --variant int4` opens the variant's file (WASM's int8 form) as the build's
    check and the browser's WASM do (its DequantizeLinear blocks folded at load), and says so."""
    result = run_cli("run", int4["bundle"], "--variant", "int4", "--text", PROMPTS[0], "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["session_config"] == {"session.disable_quant_qdq": "1"}
    assert answer["tokens"] == _native(int4, PROMPTS[:1], variant="int4")
    fp32 = json.loads(run_cli("run", int4["bundle"], "--variant", "fp32", "--text", PROMPTS[0],
                              "--json").stdout)
    assert fp32["session_config"] is None


def test_the_demo_page_chats_through_the_template(built, plain_browser, open_bundle):
    """The demo's chat (web/text/chat-demo.mjs) sends the message through the GPT-2's ChatML
    template: its reply is the Python loop's on the rendered prompt."""
    config = json.loads((built["folder"] / "tokenizer_config.json").read_text(encoding="utf-8"))
    text = render_chat(config["chat_template"], [{"role": "user", "content": PROMPTS[0]}],
                       add_generation_prompt=True, tokens=special_tokens(config))
    want = TextTokenizer.from_folder(built["folder"]).decode(_native(built, [text], 8)[0])
    with open_bundle(plain_browser, built["bundle"], "index.html") as opened:
        page = opened.page
        page.wait_for_selector("body[data-ready=true]")
        assert page.text_content("#task-run") == "Send"
        page.click("#chat-settings summary")
        page.fill("#chat-max-new-tokens", "8")
        page.fill("#task-text", PROMPTS[0])
        page.click("#task-run")
        page.wait_for_selector("#chat-stats:has-text('tokens/s')")
        reply = page.text_content("#task-results li[data-role=assistant] span")
    assert reply == want


def test_bundle_test_catches_a_drifted_loop(built, tmp_path):
    # the real command in a subprocess (this module's Playwright driver is still running)
    args = ("--ep", "wasm", "--no-fallback")
    result = run_cli("test", built["bundle"], *args)
    assert result.returncode == 0, result.stderr
    drifted = tmp_path / "drifted"
    shutil.copytree(built["bundle"], drifted)
    module = drifted / "text" / "generate.mjs"  # the positions start at 1, not 0
    source = module.read_text(encoding="utf-8")
    wrong = source.replace("BigInt(length - pending.length + i)",
                           "BigInt(length - pending.length + i + 1)")
    assert wrong != source
    module.write_text(wrong, encoding="utf-8")
    for compressed in (drifted / "text").glob("generate.mjs.*"):
        compressed.unlink()
    result = run_cli("test", drifted, *args)
    assert result.returncode != 0 and "part from native's at step" in result.stdout + result.stderr


def test_bundle_test_takes_prompts_and_steps_and_compares_the_logits(built, tmp_path):
    args = ("--ep", "wasm", "--no-fallback", "--prompt", PROMPTS[1], "--prompt", "Hello",
            "--steps", "12")
    report = tmp_path / "report.json"
    result = run_cli("test", built["bundle"], *args, "--report", report)
    assert result.returncode == 0, result.stdout + result.stderr
    entries = json.loads(report.read_text(encoding="utf-8"))["task"]
    assert [(e["file"], e["native_count"], e["passed"]) for e in entries] == [
        ("--prompt", 2, True)]
    # logits off by 1% with the tokens unchanged: the teacher-forced comparison catches it
    drifted = tmp_path / "drifted"
    shutil.copytree(built["bundle"], drifted)
    module = drifted / "text" / "decoding.mjs"  # its teacher forcing
    source = module.read_text(encoding="utf-8")
    wrong = source.replace("logits[id]))", "logits[id] * 1.01))")
    assert wrong != source
    module.write_text(wrong, encoding="utf-8")
    for compressed in (drifted / "text").glob("decoding.mjs.*"):
        compressed.unlink()
    result = run_cli("test", drifted, *args)
    assert result.returncode != 0
    assert "teacher-forced logits differ at step" in result.stdout + result.stderr


def test_prompt_and_steps_need_a_generation_bundle(build_bundle):
    import bundler.example

    bundle, _ = build_bundle(Path(bundler.example.__file__).parent / "digits.onnx")
    result = run_cli("test", bundle, "--prompt", "Hi")
    assert result.returncode != 0
    assert "not a text-generation bundle; --prompt and --steps need one" in result.stderr


def _two_file_greedy(folder: Path, ids: list[int], steps: int) -> list[int]:
    """Greedy ids as the unmerged export runs: decoder_model.onnx on the prompt, then
    decoder_with_past_model.onnx on each new id with the cache (no EOS stop)."""
    import numpy as np
    import onnxruntime as ort

    def session(name: str) -> Any:
        return ort.InferenceSession(str(folder / name), providers=["CPUExecutionProvider"])

    first, later = session("decoder_model.onnx"), session("decoder_with_past_model.onnx")
    outputs = [o.name for o in first.get_outputs()]
    new: list[int] = []
    feed = {"input_ids": np.array([ids], np.int64)}
    model, past = first, {}
    while len(new) < steps:
        length = len(ids) + len(new)
        count = feed["input_ids"].shape[1]
        feed.update(attention_mask=np.ones((1, length), np.int64),
                    position_ids=np.arange(length - count, length, dtype=np.int64)[None], **past)
        names = {i.name for i in model.get_inputs()}
        values = dict(zip(outputs, model.run(outputs, {k: v for k, v in feed.items()
                                                       if k in names}), strict=True))
        new.append(int(np.argmax(values["logits"][0, -1])))
        past = {name.replace("present", "past_key_values"): value
                for name, value in values.items() if name.startswith("present.")}
        feed, model = {"input_ids": np.array([[new[-1]]], np.int64)}, later
    return new


def test_a_two_file_export_ships_one_merged_decoder(two_files, plain_browser, open_bundle):
    import onnx

    bundle = json.loads((two_files["bundle"] / "bundle.json").read_text(encoding="utf-8"))
    assert len(bundle["sessions"][0]["variants"]) == 1
    names = [i["name"] for i in bundle["sessions"][0]["inputs"]]
    assert "use_cache_branch" in names  # one merged decoder: one set of weights
    tokenizer = TextTokenizer.from_folder(two_files["folder"])
    want = [_two_file_greedy(two_files["folder"], tokenizer.encode([p]).input_ids[0].tolist(), 32)
            for p in PROMPTS]
    with open_bundle(plain_browser, two_files["bundle"]) as page:
        got = _generate(page, PROMPTS, maxNewTokens=32)
    eos = json.loads((two_files["folder"] / "config.json").read_text())["eos_token_id"]
    for run, ids in zip(got["runs"], want, strict=True):
        cut = ids[:ids.index(eos) + 1] if eos in ids else ids
        assert run["tokenIds"] == cut
    sizes = [onnx.load(two_files["folder"] / name, load_external_data=False).ByteSize()
             for name in ("decoder_model.onnx", "decoder_with_past_model.onnx")]
    assert bundle["sessions"][0]["variants"][0]["bytes"] < 0.75 * sum(sizes)  # weights once


def test_a_long_prompt_is_cut_from_the_left_as_in_python(built, plain_browser, open_bundle):
    from bundler.text.generate import fit_prompt, read_config

    tokenizer = TextTokenizer.from_folder(built["folder"])
    prompt = " ".join(f"word{i}" for i in range(150))  # past the GPT-2's 128 positions
    ids = tokenizer.encode([prompt]).input_ids[0].tolist()
    kept, dropped = fit_prompt(ids, read_config(built["folder"]), 8)
    assert dropped > 0 and len(kept) == 120
    native = _native(built, [prompt], 8)[0]
    with open_bundle(plain_browser, built["bundle"]) as page:
        got = _generate(page, [prompt], maxNewTokens=8)["runs"][0]
    assert got["promptIds"] == kept and got["truncatedTokens"] == dropped
    assert got["tokenIds"] == native
    result = run_cli("run", built["bundle"], "--text", prompt, "--json")  # 32 tokens
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["truncated"] == [fit_prompt(ids, read_config(built["folder"]), 32)[1]]
    assert answer["tokens"] == _native(built, [prompt])


def test_every_quantized_variant_of_a_qwen2_passes_the_check_on_both_eps(qwen2_variants):
    """The build's check compares each variant's greedy tokens and outputs in Chromium with its
    own native run. int8-weights had been compared with native onnxruntime's int8-activation
    MatMulNBits, int8-static failed on WebGPU at the empty past's DequantizeLinear; fp16 needs
    shader-f16, which SwiftShader lacks: WebGPU is skipped up front with that reason."""
    bundle = json.loads((qwen2_variants["bundle"] / "bundle.json").read_text(encoding="utf-8"))
    results = bundle["verification"]["results"]
    for name in ("int8-weights", "int8-static", "fp16"):
        for ep in ("wasm", "webgpu"):
            result = results[name][ep]
            if name == "fp16" and ep == "webgpu":
                assert not result["passed"] and "shader-f16" in json.dumps(result), result
            else:
                assert result["passed"], (name, ep, result)
