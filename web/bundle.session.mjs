// bundle.session.mjs: imports an onnxruntime-web build and runs one model on one execution
// provider. bundle.mjs uses it on the page, bundle.worker.mjs inside a Web Worker. It knows no file
// names: every URL comes resolved from bundle.mjs. A failure to import the runtime or to create
// the session carries `stage` ('runtime' or 'session'): load() then tries the next EP, while a
// model that cannot be fetched (BundleError 'fetch-failed') fails on every EP.

import { BundleError, runtimeDidNotStart, serialised } from './bundle.core.mjs';
import { fetchFile, fetchFiles, stored } from './bundle.fetch.mjs';

const runtimes = new Map(); // module URL -> Promise of that onnxruntime-web build, set up
const restarts = new Map(); // module URL -> how often it was dropped: its wasm did not start

function threadCount(requested) {
  // Threads need SharedArrayBuffer, which browsers give only to cross-origin isolated contexts.
  if (!globalThis.crossOriginIsolated) return 1;
  return requested ?? Math.max(1, Math.min(4, (navigator.hardwareConcurrency ?? 2) >> 1));
}

// One import per runtime build per page (or worker), however many models load it. The module is
// imported from its URL, which bundlers emit as an asset: they must not bundle onnxruntime-web
// themselves (it locates its glue through the explicit wasmPaths below). The wasm is fetched
// here (in parts where a static host needed them, checked against its sha256, from Cache
// Storage on a later visit) and handed over as wasmBinary.
function importRuntime({ module, mjs, wasm }, numThreads, fetching) {
  if (!runtimes.has(module)) {
    const url = new URL(module);
    if (restarts.has(module)) url.searchParams.set('restart', restarts.get(module)); // anew
    const binary = fetchFile(wasm.entry, wasm.urls, fetching.onProgress,
      { stage: 'runtime', cache: fetching.cache });
    // The runtime imports its wasm glue (mjs) only once a session is created: importing it here
    // fetches it alongside the .wasm instead, and the runtime then finds it imported.
    const imported = Promise.all([
      import(/* webpackIgnore: true */ /* @vite-ignore */ url.href), binary,
      import(/* webpackIgnore: true */ /* @vite-ignore */ mjs),
    ]).then(([ort, wasmBinary]) => {
      ort.env.wasm.wasmPaths = { mjs };
      ort.env.wasm.wasmBinary = wasmBinary;
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

// A session of one model on one EP. run() takes tensors as plain { type, dims, data } (or an
// ort.Tensor) and gives plain { type, dims, data } with typed-array data. Calls go through the
// runtime module's queue (see serialised in bundle.core.mjs).
//
// Kept outputs (text generation's KV cache): run(feeds, { keep }) holds the outputs named in
// `keep` here, as ort tensors (on WebGPU in GPU buffers: the session was created with
// preferredOutputLocation 'gpu-buffer' for them), and answers a handle { type, dims, kept: id }
// for each; a later run takes such a handle as a feed, so the tensor goes back in where it lies,
// never through JavaScript arrays (nor through the worker's messages). drop(ids) disposes them:
// a GPU buffer is given back to onnxruntime's pool then, not when the garbage collector runs.
// `fetch`: the outputs to answer (null: all); on WASM each one fetched is copied out of the
// runtime's memory into a new array, which text generation's cache avoids (text/generate.mjs).
class Session {
  constructor(ort, session, profiling) {
    this._ort = ort;
    this._session = session;
    this._profiling = profiling;
    this._kept = new Map(); // id -> ort.Tensor
    this._nextKept = 0;
    this.opened = { threads: ort.env.wasm.numThreads,
                    crossOriginIsolated: globalThis.crossOriginIsolated === true };
  }

  run(feeds, { keep = [], fetch = null } = {}) {
    const { Tensor } = this._ort;
    const tensors = {};
    for (const [name, value] of Object.entries(feeds)) {
      if (value?.kept !== undefined) {
        tensors[name] = this._kept.get(value.kept);
        if (!tensors[name]) throw new Error(`input '${name}': its kept tensor was dropped`);
        continue;
      }
      tensors[name] = value instanceof Tensor
        ? value
        : new Tensor(value.type, value.data, value.dims);
    }
    const session = this._session;
    return serialised(this._ort, async () => {
      const outputs = await (fetch ? session.run(tensors, fetch) : session.run(tensors));
      const plain = {};
      for (const [name, tensor] of Object.entries(outputs)) {
        if (keep.includes(name)) {
          const id = this._nextKept++;
          this._kept.set(id, tensor);
          plain[name] = { type: tensor.type, dims: [...tensor.dims], kept: id };
        } else {
          // an output left on the GPU (the cache, run() without keep) is read back here
          const onCpu = tensor.location === 'cpu' || tensor.location === 'cpu-pinned';
          const data = onCpu ? tensor.data : await tensor.getData(true);
          plain[name] = { type: tensor.type, dims: [...tensor.dims], data };
        }
      }
      return plain;
    });
  }

  drop(ids) {
    for (const id of ids) {
      this._kept.get(id)?.dispose();
      this._kept.delete(id);
    }
  }

  async release() {
    const session = this._session;
    this._session = null;
    if (!session) return;
    this.drop([...this._kept.keys()]);
    await serialised(this._ort, async () => {
      if (this._profiling) session.endProfiling(); // onnxruntime-web logs the trace
      await session.release();
    });
  }
}

// WASM's outputs are in its own memory and copied out whatever the option says: only WebGPU's
// can stay where they were computed.
function onDevice(ep, names) {
  if (ep !== 'webgpu' || names.length === 0) return {};
  return { preferredOutputLocation: Object.fromEntries(names.map((name) => [name, 'gpu-buffer'])) };
}

function atStage(stage, error) {
  return Object.assign(error instanceof Error ? error : new Error(String(error)), { stage });
}

// A variant's session_config on an EP ({ "session.disable_quant_qdq": "1" }: onnxruntime's
// session config entries) as InferenceSession's `extra`, which onnxruntime-web flattens back into dotted keys,
// merged over `sessionOptions`' own.
export function withSessionConfig(sessionOptions = {}, config = null) {
  if (!config || Object.keys(config).length === 0) return sessionOptions;
  const extra = structuredClone(sessionOptions.extra ?? {});
  for (const [key, value] of Object.entries(config)) {
    const parts = key.split('.');
    let node = extra;
    for (const part of parts.slice(0, -1)) node = node[part] ??= {};
    node[parts.at(-1)] = String(value);
  }
  return { ...sessionOptions, extra };
}

// runtime: { module, mjs, wasm: { entry, urls } }; model: { entry, urls } (see fileRequest in
// bundle.mjs); data: the same for each external data file the graph keeps its weights in (none
// for inline weights). `models` caches fetched model bytes by path across the EPs one load()
// tries.
// sessionOptions: internal, for onnx-bundler's own harness (web/dev/, tests/js/ops_page.mjs):
// more InferenceSession options (enableProfiling: release() then ends the profile first; a
// graphOptimizationLevel; `extra`). Not part of the API. deviceOutputs: the outputs that stay on
// the device on WebGPU (run()'s `keep`; text generation's present.*). waitStored: resolve once
// the Cache Storage writes of the fetched files are done (load() on the page waits for them
// itself, after its warm-up run, which they then overlap).
export async function openSession({ runtime, model, data = [], ep, numThreads, cache, onProgress,
                                    models, sessionOptions = {}, deviceOutputs = [],
                                    waitStored = true }) {
  // The model is fetched while the runtime is fetched and compiled, not after it; its graph and
  // data files all at once, with one progress over their bytes.
  const path = model.entry.path;
  const fetching = models.get(path)
    ?? fetchFiles([model, ...data], onProgress, { stage: 'model', cache });
  if (!models.has(path)) {
    models.set(path, fetching);
    fetching.catch(() => models.delete(path)); // a failed fetch may be tried again
  }
  let ort;
  try {
    ort = await importRuntime(runtime, numThreads, { onProgress, cache }); // progress: its wasm
  } catch (error) {
    throw atStage('runtime', error);
  }
  const [bytes, ...weights] = await fetching;
  // onnxruntime-web finds each data file by `path`, which must equal the location string the
  // graph names for its tensors: the build names each by its own file name (bundle/external.py).
  const externalData = weights.map((file, index) => ({
    path: data[index].entry.path.split('/').pop(), data: file }));
  try {
    onProgress?.({ stage: 'session', loaded: 0, total: 1 });
    const session = await serialised(ort, () => ort.InferenceSession.create(bytes, {
      graphOptimizationLevel: 'all', ...sessionOptions, ...onDevice(ep, deviceOutputs),
      executionProviders: [ep], ...(externalData.length ? { externalData } : {}) }));
    if (waitStored) await stored();
    onProgress?.({ stage: 'session', loaded: 1, total: 1 });
    return new Session(ort, session, sessionOptions.enableProfiling === true);
  } catch (error) {
    if (runtimeDidNotStart(error)) dropRuntime(runtime.module);
    throw atStage('session', error);
  }
}
