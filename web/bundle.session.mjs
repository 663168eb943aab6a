// bundle.session.mjs: imports an onnxruntime-web build and runs one model on one execution
// provider. bundle.mjs uses it on the page, bundle.worker.mjs inside a Web Worker. It knows no file
// names: every URL comes resolved from bundle.mjs.

const runtimes = new Map(); // module URL -> Promise of that onnxruntime-web build, set up

function threadCount(requested) {
  // Threads need SharedArrayBuffer, which browsers give only to cross-origin isolated contexts.
  if (!globalThis.crossOriginIsolated) return 1;
  return requested ?? Math.max(1, Math.min(4, (navigator.hardwareConcurrency ?? 2) >> 1));
}

// One import per runtime build per page (or worker), however many models load it. The module is
// imported from its URL, which bundlers emit as an asset: they must not bundle onnxruntime-web
// themselves (it locates its own glue and wasm through the explicit wasmPaths below).
export function importRuntime({ module, mjs, wasm }, numThreads) {
  if (!runtimes.has(module)) {
    const imported = import(/* webpackIgnore: true */ /* @vite-ignore */ module).then((ort) => {
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

export async function fetchBytes(url, expected, onProgress, stage) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot fetch ${url}: HTTP ${response.status}`);
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
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    loaded += value.byteLength;
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

// A session of one model on one EP. run() takes tensors as plain { type, dims, data } (or this
// runtime's own ort.Tensor) and gives plain { type, dims, data } with typed-array data.
class Session {
  constructor(ort, session) {
    this._ort = ort;
    this._session = session;
  }

  async run(feeds) {
    const tensors = {};
    for (const [name, value] of Object.entries(feeds)) {
      tensors[name] = value instanceof this._ort.Tensor
        ? value
        : new this._ort.Tensor(value.type, value.data, value.dims);
    }
    const outputs = await this._session.run(tensors);
    const plain = {};
    for (const [name, tensor] of Object.entries(outputs)) {
      plain[name] = { type: tensor.type, dims: [...tensor.dims], data: tensor.data };
    }
    return plain;
  }

  async release() {
    const session = this._session;
    this._session = null;
    await session?.release();
  }
}

// runtime: { module, mjs, wasm } URLs; model: { url, bytes }. `models` caches fetched model bytes
// by URL across the EPs one load() tries.
export async function openSession({ runtime, model, ep, numThreads, onProgress, models }) {
  onProgress?.({ stage: 'runtime', loaded: 0, total: 1 });
  const ort = await importRuntime(runtime, numThreads);
  onProgress?.({ stage: 'runtime', loaded: 1, total: 1 });
  if (!models.has(model.url)) {
    models.set(model.url, await fetchBytes(model.url, model.bytes, onProgress, 'model'));
  }
  onProgress?.({ stage: 'session', loaded: 0, total: 1 });
  const session = await ort.InferenceSession.create(models.get(model.url), {
    executionProviders: [ep],
    graphOptimizationLevel: 'all',
  });
  onProgress?.({ stage: 'session', loaded: 1, total: 1 });
  return new Session(ort, session);
}
