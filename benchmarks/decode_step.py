"""Where a decode step's time goes on 1 WASM thread: the run, the cache's copies, the loop.

    PYTHONPATH=. python benchmarks/decode_step.py BUNDLE [--variant int8] [--prompt-tokens 16]
        [--new-tokens 64] [--calls 8] [--pasts 16,80] [--reps 20] [--prototype]
        [--options NAME=JSON ...] [--baseline OTHER_BUNDLE]

BUNDLE: a merged-decoder text-generation bundle folder (text_vs_transformersjs.py's
`site/ours/decoder`). In one headless Chromium page it loads the bundle on WASM (1 thread,
`--variant`), calls generate() once on each model, then measures, all in the renderers' CPU time
(the scheduler's schedstat: other jobs taking the cores stretch wall times, which swung 2x
between identical calls on the shared 2-core machine, not CPU time), wall time beside it:

1. generate() of `--new-tokens` after a `--prompt-tokens` prompt, `--calls` calls: per decode
   step, the wall time inside onnxruntime-web's `session.run` (the kernels and the copies of the
   inputs into its memory and of the outputs out of it) and around it (generate.mjs's loop:
   feeds, sampling, the text, the kept cache's handles).
2. One decode step (1 new token) on a past of each of `--pasts` tokens, `--reps` x 4 in turn
   (medians): fetching every output as generate() does, and fetching the logits alone (the
   presents are computed but not copied out: the difference is their copy out of the runtime's
   memory), beside a plain JavaScript copy of the cache's bytes into 24 new arrays.
3. `--options`: generate() on further loads of the bundle whose sessions take more
   InferenceSession options (`load()`'s internal `__sessionOptions`), e.g.
   `--options nomempattern='{"enableMemPattern": false}'`, in rounds with the default (each
   model once a round, the order alternating): CPU per call against the default's in the same
   round (each step has a new past length, which a fixed-shape step would hide).
   `--baseline`: another bundle of the same model (built by another version) in the same rounds.
4. A pre-allocated logits output (run's fetches): whether onnxruntime-web fills it on WASM.
5. `--prototype`: the variant's model with outputs `present_new.N.key/value` (each step's new
   key/value slice) beside `present.N.*`, written here (prototype()); one step on it both ways,
   and a greedy loop on it in rounds, fetching `present.*` as today or the logits and the slices
   appended in JavaScript to two arrays per tensor reused in turn: CPU per call, and whether
   both loops give generate()'s tokens.

Not a test: run by hand (2-3 minutes). Results: docs/benchmarks.md, "Where a decode step's time
goes on WASM".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

import text_exports

from bundler.console import TerminalReporter
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.verify.browser import launch, load_settings, playwright_session

SETUP = """async ({ base, variant, prompt, newTokens, options, prototype, baseline }) => {
  const { load } = await import(base + 'bundle.mjs');
  const models = {};
  for (const [name, sessionOptions] of Object.entries({ default: undefined, ...options })) {
    models[name] = await load({ executionProviders: ['wasm'], numThreads: 1, variant,
                                __sessionOptions: sessionOptions });
    await models[name].generate(prompt, { maxNewTokens: newTokens }); // the first call
  }
  if (baseline) { // another build of the same model (another version of the bundle's modules)
    const other = await import(baseline + 'bundle.mjs');
    models.baseline = await other.load({ executionProviders: ['wasm'], numThreads: 1, variant });
    await models.baseline.generate(prompt, { maxNewTokens: newTokens });
  }
  const { _ort: ort, _session: session } = models.default._session;
  const names = session.inputNames.filter((name) => name.startsWith('past_key_values.'));
  const shape = models.default.inputs.find((spec) => spec.name === names[0]).shape;
  const [heads, size] = [shape[1], shape[3]];
  // one decode step's feeds on a past of `past` tokens
  const feedsAt = (past) => {
    const feeds = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from([42n]), [1, 1]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(past + 1).fill(1n), [1, past + 1]),
    };
    if (session.inputNames.includes('position_ids')) {
      feeds.position_ids = new ort.Tensor('int64', BigInt64Array.from([BigInt(past)]), [1, 1]);
    }
    if (session.inputNames.includes('use_cache_branch')) {
      feeds.use_cache_branch = new ort.Tensor('bool', [true], [1]);
    }
    for (const name of names) {
      const data = new Float32Array(heads * past * size);
      for (let i = 0; i < data.length; i += 1) data[i] = Math.sin(i) * 0.5;
      feeds[name] = new ort.Tensor('float32', data, [1, heads, past, size]);
    }
    return feeds;
  };
  const feeds = {};
  const modes = {
    all: (past) => session.run(feeds[past]),
    logits: (past) => session.run(feeds[past], ['logits']),
    copy: async (past) => { // the cache's bytes into new arrays, as a run's outputs are copied
      for (const name of names) {
        new Float32Array(feeds[past][name].data.length).set(feeds[past][name].data);
      }
    },
  };
  let protoGenerate = null;
  if (prototype) {
    // the decoder that also outputs each step's new key/value slice (present_new.N.*): fetched
    // instead of the presents, and appended to the past in two arrays reused in turn
    const bytes = new Uint8Array(await (await fetch(prototype)).arrayBuffer());
    const proto = await ort.InferenceSession.create(bytes, {
      executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
    const slices = names.map((name) => name.replace('past_key_values.', 'present_new.'));
    const buffers = Object.fromEntries(names.map((name) => [name, [0, 1].map(() =>
      new Float32Array(heads * 1024 * size))]));
    const presents = names.map((name) => name.replace('past_key_values.', 'present.'));
    const promptIds = (await models.default.generate(prompt, { maxNewTokens: 1 })).promptIds;
    // a greedy generate() on the prototype: `fetched` 'presents' (today's loop) or 'slices'
    protoGenerate = async (fetched) => {
      let past = Object.fromEntries(names.map((name) => [name,
        new ort.Tensor('float32', new Float32Array(0), [1, heads, 0, size])]));
      let length = 0;
      let pending = promptIds;
      const tokens = [];
      while (tokens.length < newTokens) {
        const count = pending.length;
        const outputs = await proto.run({
          input_ids: new ort.Tensor('int64', BigInt64Array.from(pending, BigInt), [1, count]),
          attention_mask: new ort.Tensor('int64', new BigInt64Array(length + count).fill(1n),
            [1, length + count]),
          position_ids: new ort.Tensor('int64', BigInt64Array.from(pending, (_, i) =>
            BigInt(length + i)), [1, count]),
          use_cache_branch: new ort.Tensor('bool', [length > 0], [1]),
          ...past,
        }, ['logits', ...(fetched === 'presents' ? presents : slices)]);
        const next = {};
        names.forEach((name, i) => {
          if (fetched === 'presents') {
            next[name] = outputs[presents[i]];
            return;
          }
          const from = past[name].data;
          const slice = outputs[slices[i]].data;
          const into = buffers[name][tokens.length % 2];
          const total = length + count;
          for (let head = 0; head < heads; head += 1) {
            into.set(from.subarray(head * length * size, (head + 1) * length * size),
              head * total * size);
            into.set(slice.subarray(head * count * size, (head + 1) * count * size),
              (head * total + length) * size);
          }
          next[name] = new ort.Tensor('float32', into.subarray(0, heads * total * size),
            [1, heads, total, size]);
        });
        past = next;
        const logits = outputs.logits.data;
        const vocab = logits.length / count;
        let best = 0;
        for (let id = 1; id < vocab; id += 1) {
          if (logits[(count - 1) * vocab + id] > logits[(count - 1) * vocab + best]) best = id;
        }
        tokens.push(best);
        pending = [best];
        length += count;
      }
      return tokens;
    };
    await protoGenerate('presents');
    await protoGenerate('slices');
    modes.protoAll = (past) => proto.run(feeds[past]);
    modes.protoNew = async (past) => {
      const outputs = await proto.run(feeds[past], ['logits', ...slices]);
      names.forEach((name, i) => {
        const from = feeds[past][name].data;
        const into = buffers[name][past % 2];
        const slice = outputs[slices[i]].data;
        for (let head = 0; head < heads; head += 1) {
          into.set(from.subarray(head * past * size, (head + 1) * past * size),
            head * (past + 1) * size);
          into.set(slice.subarray(head * size, (head + 1) * size),
            (head * (past + 1) + past) * size);
        }
      });
    };
  }
  const run = session.run.bind(session);
  globalThis.decodeStep = {
    protoGenerate: (fetched) => protoGenerate(fetched),
    // generate() on one model: its timings, tokens, and per decode step the time inside
    // onnxruntime-web's session.run (default model) and around it
    async generate(name) {
      const marks = [];
      const timedRun = async (...args) => {
        const start = performance.now();
        const outputs = await run(...args);
        marks.push([start, performance.now()]);
        return outputs;
      };
      if (name === 'default') session.run = timedRun;
      try {
        const { timings, tokenIds } = await models[name].generate(prompt,
          { maxNewTokens: newTokens });
        const inRun = [];
        const around = [];
        for (let i = 1; i < marks.length - 1; i += 1) { // marks[0]: the prefill
          inRun.push(marks[i][1] - marks[i][0]);
          around.push(marks[i + 1][0] - marks[i][1]);
        }
        return { timings, tokenIds, inRun, around };
      } finally {
        session.run = run;
      }
    },
    // `reps` decode steps on a past of `past` tokens, as `mode` runs them
    async step(past, mode, reps) {
      feeds[past] ??= feedsAt(past);
      const start = performance.now();
      for (let rep = 0; rep < reps; rep += 1) await modes[mode](past);
      return (performance.now() - start) / reps;
    },
    // a pre-allocated logits output (run's fetches): does the run fill it on WASM?
    async preallocated(past) {
      feeds[past] ??= feedsAt(past);
      const vocab = models.default.outputs.find((spec) => spec.name === 'logits').shape[2];
      const expected = (await session.run(feeds[past], ['logits'])).logits.data;
      const given = new ort.Tensor('float32', new Float32Array(vocab), [1, 1, vocab]);
      const answered = (await session.run(feeds[past], { logits: given })).logits;
      return {
        returnedGiven: answered === given,
        givenFilled: given.data.every((value, i) => value === expected[i]),
        answerRight: answered.data.every((value, i) => value === expected[i]),
      };
    },
    cacheBytes: (past) => names.length * heads * past * size * 4,
  };
}"""


MODES = ("all", "logits", "copy", "protoAll", "protoNew")


def prototype(bundle: Path, manifest: dict, variant: str, path: Path) -> None:
    """The bundle's `variant` of a merged decoder (one If on use_cache_branch) at `path`, with
    outputs present_new.N.key/value: the key/value of the tokens fed this step (the cached
    branch's Concat's second input; the first step's present itself)."""
    import onnx
    from onnx import TensorProto, helper

    entry = next(v for v in manifest["sessions"][0]["variants"] if v["name"] == variant)
    stored = next(f for f in manifest["files"] if f["path"] == entry["file"])
    pieces = [part["path"] for part in stored.get("parts", [stored])]
    model = onnx.load_from_string(b"".join((bundle / piece).read_bytes() for piece in pieces))
    (node,) = model.graph.node
    branches = {attribute.name: attribute.g for attribute in node.attribute}
    cached, first = branches["then_branch"], branches["else_branch"]
    producers = {output: n for n in cached.node for output in n.output}
    presents = [output for output in model.graph.output if output.name.startswith("present.")]
    for present in presents:
        concat = producers[present.name]
        assert concat.op_type == "Concat", concat.op_type
        cached.output.append(helper.make_tensor_value_info(concat.input[1], TensorProto.FLOAT,
                                                           None))
        alias = f"{present.name}/new"  # a branch cannot name one value as two outputs
        first.node.append(helper.make_node("Identity", [present.name], [alias]))
        first.output.append(helper.make_tensor_value_info(alias, TensorProto.FLOAT, None))
        name = present.name.replace("present.", "present_new.")
        node.output.append(name)
        model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    onnx.save(model, path)


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, pending = set(), [root]
    while pending:
        pid = pending.pop()
        for child in children.get(pid, []):
            found.add(child)
            pending.append(child)
    return found


def renderer_cpu_ms() -> float:
    """CPU time of this process's Chromium renderers so far (all their threads, from the
    scheduler's /proc/PID/task/TID/schedstat, in ns): unlike wall time, not stretched by other
    jobs taking the cores, which on a shared machine swing wall times by 2x."""
    total = 0
    for pid in _descendants(os.getpid()):
        try:
            if b"--type=renderer" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            for task in Path(f"/proc/{pid}/task").iterdir():
                total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            continue  # a process or thread that ended meanwhile
    return total / 1e6


def measured(page: Any, expression: str, *argument: Any) -> tuple[Any, float]:
    """The page's answer to `expression` and the renderers' CPU ms it took."""
    before = renderer_cpu_ms()
    answer = page.evaluate(expression, list(argument))
    return answer, renderer_cpu_ms() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--variant", default="int8")
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--pasts", default="16,80")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--options", action="append", default=[], metavar="NAME=JSON",
                        help="a further model whose session takes these InferenceSession options")
    parser.add_argument("--baseline", type=Path, help="another bundle of the same model, its"
                        " generate() timed in the rounds beside the default's")
    parser.add_argument("--prototype", action="store_true",
                        help="also time a prototype of the variant's model that outputs each"
                        " step's new key/value slice (present_new.N.*) beside present.N.*")
    args = parser.parse_args()
    options = {name: json.loads(value) for name, value in
               (item.split("=", 1) for item in args.options)}
    pasts = [int(past) for past in args.pasts.split(",")]
    reporter = TerminalReporter()
    manifest = json.loads((args.bundle / "bundle.json").read_text(encoding="utf-8"))
    tokenizer = args.bundle / manifest["task"]["files"]["tokenizer.json"]
    prompt = text_exports.prompt_of(tokenizer, args.prompt_tokens, text_exports.corpus(400_000))
    names = ["default", *options, *(["baseline"] if args.baseline else [])]
    calls: dict[str, list[dict]] = {name: [] for name in names}
    steps: dict[tuple[int, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="decode-step-") as scratch:
        root = Path(scratch)
        shutil.copytree(args.bundle, root / "bundle", copy_function=os.link)  # links: no copies
        if args.baseline:
            shutil.copytree(args.baseline, root / "baseline", copy_function=os.link)
        if args.prototype:
            with reporter.step("Writing the prototype (present_new.N.* outputs)"):
                prototype(args.bundle, manifest, args.variant, root / "prototype.onnx")
        with serve_directory(root) as base, playwright_session() as playwright, \
                launch(playwright, load_settings(), webgpu=False) as browser, \
                reporter.step("Decoding in Chromium (WASM, 1 thread)"):
            page = browser.new_page()
            page.set_default_timeout(1_800_000)
            page.goto(base + HARNESS_PATH.lstrip("/"))
            page.evaluate(SETUP, {"base": base + "bundle/", "variant": args.variant,
                                  "prompt": prompt, "newTokens": args.new_tokens,
                                  "options": options,
                                  "prototype": base + "prototype.onnx" if args.prototype
                                  else None,
                                  "baseline": base + "baseline/" if args.baseline else None})
            for call in range(args.calls):
                for name in names if call % 2 == 0 else names[::-1]:  # the first alternating
                    answer, cpu = measured(page, "([name]) => decodeStep.generate(name)", name)
                    calls[name].append({**answer, "cpu": cpu})
            proto: dict[str, list[tuple[list[int], float]]] = {"presents": [], "slices": []}
            for call in range(args.calls if args.prototype else 0):
                for fetched in ("presents", "slices")[::1 if call % 2 == 0 else -1]:
                    proto[fetched].append(measured(page, "([fetched]) =>"
                                                   " decodeStep.protoGenerate(fetched)", fetched))
            for _ in range(args.reps):
                for past in pasts:
                    for mode in MODES[:5 if args.prototype else 3]:
                        wall, cpu = measured(page, "([past, mode]) => decodeStep.step(past, mode,"
                                             " 4)", past, mode)
                        steps.setdefault((past, mode), []).append((wall, cpu / 4))
            cache = {past: page.evaluate("(past) => decodeStep.cacheBytes(past)", past)
                     for past in pasts}
            pre = page.evaluate("(past) => decodeStep.preallocated(past)", pasts[-1])
    _report(reporter, args, calls, steps, cache, pre)
    if args.prototype:
        paired = [new[1] / old[1] for new, old in zip(proto["slices"], proto["presents"],
                                                      strict=True)]
        same = all(tokens == calls["default"][0]["tokenIds"]
                   for tokens, _ in proto["presents"] + proto["slices"])
        reporter.table(f"A greedy loop on the prototype, {args.calls} rounds: CPU ms per call",
                       ("fetched", "CPU ms (median)", "vs presents in the same round",
                        "tokens = generate()'s"),
                       [["logits + present.* (as today)",
                         f"{statistics.median(c for _, c in proto['presents']):,.0f}", "1.00x",
                         str(same)],
                        ["logits + present_new.*, appended in JS",
                         f"{statistics.median(c for _, c in proto['slices']):,.0f}",
                         f"{statistics.median(paired):.3f}x ({min(paired):.2f}-{max(paired):.2f})",
                         str(same)]])


def _report(reporter: TerminalReporter, args: argparse.Namespace, calls: dict[str, list[dict]],
            steps: dict[tuple[int, str], list[tuple[float, float]]], cache: dict[int, int],
            pre: dict[str, bool]) -> None:
    median = statistics.median
    default = calls["default"]
    in_run = median(ms for call in default for ms in call["inRun"])
    around = median(ms for call in default for ms in call["around"])
    step = in_run + around
    tokens = len(default[0]["tokenIds"])
    reporter.table(
        f"generate(), {args.variant}: {args.prompt_tokens} prompt tokens, {tokens} new, median"
        f" per decode step over {args.calls} later calls (wall ms)", ("part", "ms", "share"),
        [["onnxruntime-web session.run", f"{in_run:.2f}", f"{in_run / step:.0%}"],
         ["the loop around it", f"{around:.2f}", f"{around / step:.0%}"]])
    rows = []
    modes = [mode for mode in MODES if any(key[1] == mode for key in steps)]
    for past in sorted({past for past, _ in steps}):
        wall = {mode: median(w for w, _ in steps[past, mode]) for mode in modes}
        cpu = {mode: median(c for _, c in steps[past, mode]) for mode in modes}
        out = cpu["all"] - cpu["logits"]
        row = [str(past), f"{cache[past] / 1e6:.2f}", f"{cpu['all']:.2f} ({wall['all']:.2f})",
               f"{cpu['logits']:.2f} ({wall['logits']:.2f})", f"{out:.2f} ({out / cpu['all']:.0%})",
               f"{cpu['copy']:.2f} ({wall['copy']:.2f})"]
        if "protoNew" in cpu:
            row += [f"{cpu['protoAll']:.2f} ({wall['protoAll']:.2f})",
                    f"{cpu['protoNew']:.2f} ({wall['protoNew']:.2f})",
                    f"{cpu['protoNew'] / cpu['all']:.2f}x"]
        rows.append(row)
    columns = ("past tokens", "cache MB", "run, all outputs", "run, logits only",
               "copy out (difference)", "plain JS copy of the cache")
    if "protoNew" in modes:
        columns += ("prototype, all outputs", "prototype, new slices appended in JS",
                    "new slices / all outputs")
    reporter.table(f"One decode step: CPU ms (wall ms), median of {args.reps} x 4 steps", columns,
                   rows)
    rows = []
    for name, runs in calls.items():
        paired = [run["cpu"] / base["cpu"] for run, base in zip(runs, default, strict=True)]
        rows.append([name, f"{median(run['timings']['decodeTokensPerS'] for run in runs):.1f}",
                     f"{median(run['cpu'] for run in runs):,.0f}",
                     f"{median(paired):.3f}x ({min(paired):.2f}-{max(paired):.2f})",
                     str(all(run["tokenIds"] == default[0]["tokenIds"] for run in runs))])
    reporter.table(f"generate() per session's options, {args.calls} rounds (each model once a"
                   " round, the first alternating)",
                   ("options", "decode tok/s (wall, median)", "CPU ms per call (median)",
                    "CPU vs default in the same round: median (range)", "same tokens"), rows)
    reporter.info(f"A pre-allocated logits output on WASM: the run answered it:"
                  f" {pre['returnedGiven']}; its data holds the logits: {pre['givenFilled']};"
                  f" the answer holds them: {pre['answerRight']}")


if __name__ == "__main__":
    main()
