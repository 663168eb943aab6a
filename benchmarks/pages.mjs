// pages.mjs: the benchmarks' pages written by hand (onnxruntime-web imported directly, without
// bundle.mjs: what they compare the bundle with), on the same harness as the bundle
// (web/dev/*.mjs, served at /__bundler__/dev/). A benchmark copies it into the folder it serves.

import { coldLoadOf, interleaved } from '/__bundler__/dev/bench.mjs';
import { decodeTensors, openBundle } from '/__bundler__/dev/harness.mjs';

async function rawSession(ort, model, eps, base) {
  return ort.InferenceSession.create(new URL(model, base).href, { executionProviders: eps });
}

function ortTensors(ort, tensors) {
  return Object.fromEntries(Object.entries(tensors).map(([name, { type, data, dims }]) => [
    name, new ort.Tensor(type, data, dims)]));
}

// bench_pages.py: a hand-written page's cold load. base: the bundle's folder, whose
// bundle.core.mjs decodes the inputs (after `ready`).
export function rawColdLoad({ base, module, model, eps, feeds }, importStarted) {
  return coldLoadOf(async () => {
    const started = performance.now();
    const ort = await import(new URL(module, base).href);
    const session = await rawSession(ort, model, eps, base);
    const ready = performance.now();
    const { TYPED_ARRAYS } = await import(new URL('bundle.core.mjs', base).href);
    const tensors = ortTensors(ort, decodeTensors(feeds, TYPED_ARRAYS));
    const runStarted = performance.now();
    await session.run(tensors);
    const firstRun = performance.now() - runStarted;
    return { ep: eps.join('+'), variant: 'fp32 (original)', threads: ort.env.wasm.numThreads,
             crossOriginIsolated, started, ready, firstRun, stages: {},
             run: () => session.run(tensors) };
  }, importStarted);
}

// bench_pages.py's steady state: the bundle and both pages in one page (their own runtime instances), warmed up,
// then run in turn, round after round, so that machine noise hits all alike.
export async function interleavedPages({ base, feeds, warmup, rounds }) {
  const { load, decode } = await openBundle(base);
  const inputs = decode(feeds);
  const bundle = await load();
  const raw = async (module, eps) => {
    const ort = await import(new URL(module, base).href);
    const session = await rawSession(ort, '../raw/detector.onnx', eps, base);
    const tensors = ortTensors(ort, inputs);
    return () => session.run(tensors);
  };
  return interleaved({ 'bundle': () => bundle.run(inputs),
                       'docs page': await raw('../raw/ort.webgpu.min.mjs', ['webgpu', 'wasm']),
                       'wasm page': await raw('../raw/ort.wasm.min.mjs', ['wasm']) },
  warmup, rounds);
}

// runtime_builds.py: the model on the WASM EP of each runtime build (name -> { module, mjs,
// wasm }), each in its own runtime instance: the first result's ms and the interleaved runs.
export async function timeBuilds({ base, modules, model, feeds, runs }) {
  const { TYPED_ARRAYS } = await import(new URL('bundle.core.mjs', base).href);
  const bytes = new Uint8Array(await (await fetch(new URL(model, base))).arrayBuffer());
  const first = {};
  const sessions = {};
  for (const [name, { module, mjs, wasm }] of Object.entries(modules)) {
    const started = performance.now();
    const ort = await import(new URL(module, base).href);
    ort.env.wasm.wasmPaths = { mjs: new URL(mjs, base).href, wasm: new URL(wasm, base).href };
    const session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'] });
    const tensors = ortTensors(ort, decodeTensors(feeds, TYPED_ARRAYS));
    await session.run(tensors);
    sessions[name] = () => session.run(tensors);
    first[name] = performance.now() - started;
  }
  const times = await interleaved(sessions, 0, runs);
  return Object.fromEntries(Object.keys(sessions).map(
    (name) => [name, { first: first[name], times: times[name] }]));
}

// matmul_forms.py: each model (name -> { file, config: InferenceSession's `extra` }) in its own session on one WASM runtime instance
// (`module`, 1 thread), run on x [1, M, hidden] for each M of `rows`: { M: { name: [ms] } },
// warmed up, then interleaved run by run.
export async function timeForms({ base, module, hidden, rows, models, warmup, rounds }) {
  const ort = await import(new URL(module, base).href);
  ort.env.wasm.numThreads = 1;
  const sessions = {};
  for (const [name, { file, config }] of Object.entries(models)) {
    sessions[name] = await ort.InferenceSession.create(new URL(file, base).href,
      { executionProviders: ['wasm'], extra: config });
  }
  const result = {};
  for (const m of rows) {
    const data = Float32Array.from({ length: m * hidden }, (_, i) => Math.sin(i) * 0.5);
    const x = new ort.Tensor('float32', data, [1, m, hidden]);
    result[m] = await interleaved(Object.fromEntries(Object.entries(sessions).map(
      ([name, session]) => [name, () => session.run({ x })])), warmup, rounds);
  }
  return result;
}
