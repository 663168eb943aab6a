// bench.mjs: `bundle bench`'s page and auto's timing (bundler/perf/page.py, speed.py). A cold
// load is started by an init script as the harness page begins to load (so navigation -> ready
// has no Playwright round trip in it); timedRuns() then times the run it left.

import { dimsOf, fromBase64, messageOf, openBundle } from './harness.mjs';

let measuredRun = null; // the last cold load's run(), for timedRuns()

// WebAssembly's compile and instantiate calls on the page, timed from now on.
export function timeWasmCompile() {
  const compile = { ms: 0, calls: 0 };
  for (const name of ['compile', 'compileStreaming', 'instantiate', 'instantiateStreaming']) {
    const original = WebAssembly[name];
    WebAssembly[name] = async function timed(...args) {
      const started = performance.now();
      try { return await original.apply(this, args); } finally {
        compile.ms += performance.now() - started;
        compile.calls += 1;
      }
    };
  }
  return compile;
}

// The page's resource timing entries that started from `start` to `ready`.
export function resourcesBetween(start, ready) {
  return performance.getEntriesByType('resource')
    .filter((entry) => entry.startTime >= start && entry.startTime <= ready)
    .map((entry) => ({ name: entry.name, start: entry.startTime, end: entry.responseEnd,
                       bytes: entry.encodedBodySize, transfer: entry.transferSize }));
}

// A cold load as page.py's measure_loaded reads it. open() resolves to { error } or to the
// figures (started, ready: ms from navigation; firstRun; ...) and run(), the run to time. The
// harness's own import (since importStarted: its time and its requests) is not the page's load:
// it is taken out.
export async function coldLoadOf(open, importStarted) {
  const opening = performance.now();
  const harnessMs = opening - importStarted;
  const compile = timeWasmCompile();
  const { run, ...loaded } = await open();
  if (loaded.error !== undefined) return loaded;
  measuredRun = run;
  return { ...loaded, compile, resources: resourcesBetween(opening, loaded.ready),
           started: loaded.started - harnessMs, ready: loaded.ready - harnessMs };
}

// bundle.mjs's load() as an app calls it (ep, variant, threads, cache: null for the default).
export function bundleColdLoad({ base, ep, variant, threads, feeds, cache }, importStarted) {
  return coldLoadOf(async () => {
    const stages = {};
    const onProgress = ({ stage }) => {
      const now = performance.now();
      stages[stage] ??= { start: now, end: now };
      stages[stage].end = now;
    };
    const started = performance.now();
    const { load, decode } = await openBundle(base);
    const options = { onProgress };
    if (ep !== null) Object.assign(options, { executionProviders: [ep], ignoreVerification: true });
    if (variant !== null) Object.assign(options, { variant, ignoreVerification: true });
    if (threads !== null) options.numThreads = threads;
    if (cache === false) options.cache = false;
    let model;
    try {
      model = await load(options);
    } catch (error) {
      return { error: messageOf(error) };
    }
    const ready = performance.now();
    const inputs = decode(feeds);
    const runStarted = performance.now();
    const outputs = await model.run(inputs);
    const firstRun = performance.now() - runStarted;
    return { ep: model.ep, variant: model.variant, threads: model.threads,
             crossOriginIsolated: model.crossOriginIsolated, started, ready, firstRun, stages,
             inputDims: dimsOf(inputs), outputDims: dimsOf(outputs),
             run: () => model.run(inputs) };
  }, importStarted);
}

export async function timedRuns(count) {
  const times = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await measuredRun();
    times.push(performance.now() - started);
  }
  return times;
}

export async function adapterInfo() {
  const adapter = await globalThis.navigator?.gpu?.requestAdapter?.();
  if (!adapter) return null;
  const info = adapter.info ?? {};
  return { vendor: info.vendor ?? '', architecture: info.architecture ?? '',
           description: info.description ?? '' };
}

// Each of `runs` (name -> async run()) warmed up, then timed in turn, round after round, so that
// machine noise hits all alike: name -> ms per round.
export async function interleaved(runs, warmup, rounds) {
  for (const run of Object.values(runs)) for (let i = 0; i < warmup; i++) await run();
  const times = Object.fromEntries(Object.keys(runs).map((name) => [name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const [name, run] of Object.entries(runs)) {
      const started = performance.now();
      await run();
      times[name].push(performance.now() - started);
    }
  }
  return times;
}

// The variants `names` on `ep`, each loaded and warmed up, then timed interleaved (auto's timing,
// speed.py, and benchmarks/variants.py): name -> ms per round, and each one's load() ms. One that
// does not load or run is left out with its error.
export async function timeVariants({ base, names, ep = 'wasm', feeds, warmup, rounds }) {
  const { load, decode } = await openBundle(base);
  const inputs = decode(feeds);
  const models = {};
  const errors = {};
  const loadMs = {};
  for (const name of names) {
    try {
      const started = performance.now();
      models[name] = await load({ variant: name, executionProviders: [ep],
                                  ignoreVerification: true });
      loadMs[name] = performance.now() - started;
      for (let i = 0; i < warmup; i++) await models[name].run(inputs);
    } catch (error) {
      errors[name] = messageOf(error);
      delete models[name];
    }
  }
  const runs = Object.fromEntries(Object.entries(models).map(
    ([name, model]) => [name, () => model.run(inputs)]));
  const times = await interleaved(runs, 0, rounds);
  const threads = Object.values(models)[0]?.threads ?? null;
  for (const model of Object.values(models)) await model.release();
  return { times, errors, threads, loadMs };
}

// One cold load, then `calls` calls of `call(model)`, each giving its figures
// (bundler/perf/calls.py); `about(model)` adds what the page should say besides.
async function callRuns(url, options, calls, call, about = () => ({})) {
  const { load } = await import(url);
  let model;
  try {
    model = await load(options);
    const runs = [];
    for (let index = 0; index < calls; index += 1) runs.push(await call(model));
    return { ep: model.ep, loadMs: model.loadMs, runs, ...about(model) };
  } catch (error) {
    return { error: messageOf(error) };
  } finally {
    await model?.release();
  }
}

// `bundle bench` on a text-generation bundle (bundler/perf/generation.py): generate() calls of
// the same prompt, each call's timings.
export function generationRuns({ url, options, prompt, newTokens, calls }) {
  return callRuns(url, options, calls, async (model) => {
    const run = await model.generate(prompt, { maxNewTokens: newTokens });
    return { promptTokens: run.promptIds.length, newTokens: run.tokenIds.length,
             ...run.timings };
  });
}

// `bundle bench` on a speech-recognition bundle (bundler/perf/speech.py): transcribe() calls of
// the same samples (float32, base64, at `rate`), each call's timings; and the decoder's variant.
export function transcriptionRuns({ url, options, samples, rate, calls }) {
  const audio = new Float32Array(fromBase64(samples).buffer);
  return callRuns(url, options, calls, async (model) => (await model.transcribe(audio,
    { sampleRate: rate })).timings, (model) => ({ decoderVariant: model._decoder?.variant }));
}

// `bundle bench` on a text-encoder bundle (bundler/perf/texts.py): the task's `method` (embed,
// classify, tokens) on `calls` batches of each size in `batches`, every text `text`; each call's
// batch and ms.
export function textRuns({ url, options, method, text, batches, calls }) {
  const sizes = batches.flatMap((batch) => Array(calls).fill(batch));
  let next = 0;
  return callRuns(url, options, sizes.length, async (model) => {
    const batch = sizes[next];
    next += 1;
    const started = performance.now();
    await model[method](Array(batch).fill(text));
    return { batch, ms: performance.now() - started };
  });
}
