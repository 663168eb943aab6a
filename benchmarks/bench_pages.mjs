// bench_pages.mjs: benchmarks/bench_pages.py's pages written by hand (onnxruntime-web imported
// directly, the fp32 model), measured by the same harness as the bundle (web/dev/bench.mjs,
// served at /__bundler__/dev/). Copied next to the raw runtime files it loads.

import { coldLoadOf, interleaved } from '/__bundler__/dev/bench.mjs';
import { decodeTensors, openBundle } from '/__bundler__/dev/harness.mjs';

async function rawSession(ort, model, eps, base) {
  return ort.InferenceSession.create(new URL(model, base).href, { executionProviders: eps });
}

function ortTensors(ort, tensors) {
  return Object.fromEntries(Object.entries(tensors).map(([name, { type, data, dims }]) => [
    name, new ort.Tensor(type, data, dims)]));
}

// base: the bundle's folder, whose bundle.core.mjs decodes the inputs (after `ready`).
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

// Steady state: the bundle and both pages in one page (their own runtime instances), warmed up,
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
