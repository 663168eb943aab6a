// bundle.session.mjs: imports an onnxruntime-web build and runs one model on one execution
// provider. bundle.mjs uses it on the page, bundle.worker.mjs inside a Web Worker. It knows no file
// names: every URL comes resolved from bundle.mjs. A failure to import the runtime or to create
// the session carries `stage` ('runtime' or 'session'): load() then tries the next EP, while a
// model that cannot be fetched (BundleError 'fetch-failed') fails on every EP.

import { BundleError, runtimeDidNotStart, serialised } from './bundle.core.mjs';

const runtimes = new Map(); // module URL -> Promise of that onnxruntime-web build, set up
const restarts = new Map(); // module URL -> how often it was dropped: its wasm did not start

function threadCount(requested) {
  // Threads need SharedArrayBuffer, which browsers give only to cross-origin isolated contexts.
  if (!globalThis.crossOriginIsolated) return 1;
  return requested ?? Math.max(1, Math.min(4, (navigator.hardwareConcurrency ?? 2) >> 1));
}

// One import per runtime build per page (or worker), however many models load it. The module is
// imported from its URL, which bundlers emit as an asset: they must not bundle onnxruntime-web
// themselves (it locates its own glue and wasm through the explicit wasmPaths below).
function importRuntime({ module, mjs, wasm }, numThreads) {
  if (!runtimes.has(module)) {
    const url = new URL(module);
    if (restarts.has(module)) url.searchParams.set('restart', restarts.get(module)); // anew
    const imported = import(/* webpackIgnore: true */ /* @vite-ignore */ url.href).then((ort) => {
      ort.env.wasm.wasmPaths = { mjs, wasm };
      ort.env.wasm.proxy = false;
      ort.env.wasm.numThreads = threadCount(numThreads);
      return ort;
    });
    imported.catch(() => runtimes.delete(module)); // a failed import may be tried again
    runtimes.set(module, imported);
  }
  return runtimes.get(module);
}

// onnxruntime-web remembers a failed start of its wasm (a failed fetch of the .wasm, say) for the
// life of the module, so the next load() imports a new instance of it.
function dropRuntime(module) {
  runtimes.delete(module);
  restarts.set(module, (restarts.get(module) ?? 0) + 1);
}

async function fetchOk(url) {
  let response;
  try {
    response = await fetch(url);
  } catch (error) {
    throw new BundleError('fetch-failed', `cannot fetch ${url}: ${error.message ?? error}`,
      { cause: error });
  }
  if (!response.ok) {
    throw new BundleError('fetch-failed', `cannot fetch ${url}: HTTP ${response.status}`);
  }
  return response;
}

export async function fetchJson(url) {
  const response = await fetchOk(url);
  try {
    return await response.json();
  } catch (error) {
    throw new BundleError('fetch-failed', `${url} is not valid JSON (${error.message})`);
  }
}

async function fetchBytes(url, expected, onProgress, stage) {
  const response = await fetchOk(url);
  const total = Number(response.headers.get('content-length')) || expected || 0;
  if (!response.body) {
    const buffer = new Uint8Array(await response.arrayBuffer());
    onProgress?.({ stage, loaded: buffer.byteLength, total: buffer.byteLength });
    return buffer;
  }
  const reader = response.body.getReader();
  const chunks = [];
  let loaded = 0;
  onProgress?.({ stage, loaded, total });
  for (;;) {
    let next;
    try {
      next = await reader.read();
    } catch (error) {
      throw new BundleError('fetch-failed', `fetching ${url} failed after ${loaded} bytes:` +
        ` ${error.message ?? error}`, { cause: error });
    }
    if (next.done) break;
    chunks.push(next.value);
    loaded += next.value.byteLength;
    onProgress?.({ stage, loaded, total });
  }
  const bytes = new Uint8Array(loaded);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

// A session of one model on one EP. run() takes tensors as plain { type, dims, data } (or an
// ort.Tensor) and gives plain { type, dims, data } with typed-array data. Calls go through the
// runtime module's queue (see serialised in bundle.core.mjs).
class Session {
  constructor(ort, session) {
    this._ort = ort;
    this._session = session;
  }

  run(feeds) {
    const { Tensor } = this._ort;
    const tensors = {};
    for (const [name, value] of Object.entries(feeds)) {
      tensors[name] = value instanceof Tensor
        ? value
        : new Tensor(value.type, value.data, value.dims);
    }
    const session = this._session;
    return serialised(this._ort, async () => {
      const outputs = await session.run(tensors);
      const plain = {};
      for (const [name, tensor] of Object.entries(outputs)) {
        plain[name] = { type: tensor.type, dims: [...tensor.dims], data: tensor.data };
      }
      return plain;
    });
  }

  async release() {
    const session = this._session;
    this._session = null;
    if (session) await serialised(this._ort, () => session.release());
  }
}

function atStage(stage, error) {
  return Object.assign(error instanceof Error ? error : new Error(String(error)), { stage });
}

// runtime: { module, mjs, wasm } URLs; model: { url, bytes }. `models` caches fetched model bytes
// by URL across the EPs one load() tries.
export async function openSession({ runtime, model, ep, numThreads, onProgress, models }) {
  let ort;
  try {
    onProgress?.({ stage: 'runtime', loaded: 0, total: 1 });
    ort = await importRuntime(runtime, numThreads);
    onProgress?.({ stage: 'runtime', loaded: 1, total: 1 });
  } catch (error) {
    throw atStage('runtime', error);
  }
  if (!models.has(model.url)) {
    models.set(model.url, await fetchBytes(model.url, model.bytes, onProgress, 'model'));
  }
  try {
    onProgress?.({ stage: 'session', loaded: 0, total: 1 });
    const session = await serialised(ort, () => ort.InferenceSession.create(
      models.get(model.url), { executionProviders: [ep], graphOptimizationLevel: 'all' }));
    onProgress?.({ stage: 'session', loaded: 1, total: 1 });
    return new Session(ort, session);
  } catch (error) {
    if (runtimeDidNotStart(error)) dropRuntime(runtime.module);
    throw atStage('session', error);
  }
}
