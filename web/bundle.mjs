// bundle.mjs: loads the bundled model with onnxruntime-web and runs it.
//
//   import { load } from './bundle.mjs';
//   const model = await load();                  // WebGPU when the browser has it, else WASM
//   const out = await model.run({ image: { type: 'float32', dims: [1, 1, 8, 8], data } });
//
// Everything comes from this folder (bundle.json, models/, runtime/): nothing is fetched from any
// other origin. The contract is documented in the README of onnx-bundler.

import {
  BundleError,
  checkOptions,
  checkSchemaVersion,
  importFailure,
  makeFeeds,
  noExecutionProvider,
  planAttempts,
  runtimeDidNotStart,
  serialised,
  sessionFailure,
} from './bundle.core.mjs';

export { BundleError, ERROR_CODES, SCHEMA_VERSION } from './bundle.core.mjs';

const MODULE_URL = import.meta.url;

const runtimes = new Map(); // EP -> Promise of the imported onnxruntime-web build
const restarts = new Map(); // EP -> how often its build was dropped because its wasm did not start

function folderUrl(baseUrl) {
  const base = baseUrl === undefined
    ? new URL('./', MODULE_URL)
    : new URL(baseUrl, globalThis.location?.href ?? MODULE_URL);
  if (!base.pathname.endsWith('/')) base.pathname += '/';
  return base;
}

export async function loadManifest(baseUrl) {
  const url = new URL('bundle.json', folderUrl(baseUrl));
  const response = await fetchOk(url);
  try {
    return checkSchemaVersion(await response.json());
  } catch (error) {
    if (error instanceof BundleError) throw error;
    throw new BundleError('fetch-failed', `${url} is not valid JSON (${error.message})`);
  }
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

async function webgpuMissing() {
  const reason = (detail) => ({ ep: 'webgpu', code: 'webgpu-unavailable',
    detail: `WebGPU unavailable: ${detail}` });
  if (!globalThis.navigator?.gpu) return reason('navigator.gpu is missing');
  try {
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return reason('no adapter (requestAdapter() returned null)');
  } catch (error) {
    return reason(`requestAdapter() failed: ${error.message ?? error}`);
  }
  return null;
}

function importRuntime(manifest, base, ep, numThreads) {
  if (!runtimes.has(ep)) {
    const url = new URL(manifest.runtime.builds[ep].module, base);
    if (restarts.has(ep)) url.searchParams.set('restart', restarts.get(ep)); // a new instance
    runtimes.set(ep, import(url.href).then((ort) => {
      ort.env.wasm.wasmPaths = new URL(manifest.runtime.dir, base).href;
      ort.env.wasm.proxy = false;
      // Threads need SharedArrayBuffer, which browsers give only to cross-origin isolated pages.
      ort.env.wasm.numThreads = globalThis.crossOriginIsolated
        ? (numThreads ?? Math.max(1, Math.min(4, (navigator.hardwareConcurrency ?? 2) >> 1)))
        : 1;
      return ort;
    }).catch((error) => {
      runtimes.delete(ep); // a later load() tries again (after a network error, say)
      throw error;
    }));
  }
  return runtimes.get(ep);
}

// onnxruntime-web remembers a failed start of its wasm (a failed fetch of the .wasm, say) for the
// life of the module, so the next load() imports a new instance of it.
function dropRuntime(ep) {
  runtimes.delete(ep);
  restarts.set(ep, (restarts.get(ep) ?? 0) + 1);
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

function createSession(ort, bytes, ep) {
  return serialised(ort, () => ort.InferenceSession.create(bytes, {
    executionProviders: [ep],
    graphOptimizationLevel: 'all',
  }));
}

class Model {
  constructor({ ort, session, ep, fallbackReasons, variant, manifest, loadMs }) {
    this.ep = ep;
    this.fallbackReasons = fallbackReasons;
    this.fallbackReason = fallbackReasons.length
      ? fallbackReasons.map((reason) => reason.detail).join('; ')
      : null;
    this.variant = variant.name;
    this.manifest = manifest;
    this.inputs = manifest.inputs;
    this.outputs = manifest.outputs;
    this.loadMs = loadMs;
    this._ort = ort;
    this._session = session;
  }

  run(feeds) {
    let tensors;
    try {
      if (!this._session) {
        throw new BundleError('released', 'this model was released; load() it again');
      }
      tensors = makeFeeds(this._ort.Tensor, this.inputs, feeds);
    } catch (error) {
      return Promise.reject(error);
    }
    const session = this._session;
    return serialised(this._ort, async () => {
      const outputs = await session.run(tensors);
      const plain = {};
      for (const spec of this.outputs) {
        const tensor = outputs[spec.name];
        plain[spec.name] = { type: tensor.type, dims: [...tensor.dims], data: tensor.data };
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

export async function load(options = {}) {
  const started = performance.now();
  const eps = checkOptions(options);
  const base = folderUrl(options.baseUrl);
  const onProgress = options.onProgress;
  onProgress?.({ stage: 'manifest', loaded: 0, total: 1 });
  const manifest = await loadManifest(base.href);
  onProgress?.({ stage: 'manifest', loaded: 1, total: 1 });

  const reasons = [];
  const modelBytes = new Map();
  for (const attempt of planAttempts(manifest, eps, options)) {
    const { ep, variant } = attempt;
    const skipped = attempt.reason ?? (ep === 'webgpu' ? await webgpuMissing() : null);
    if (skipped) {
      reasons.push(skipped);
      continue;
    }
    let ort;
    try {
      onProgress?.({ stage: 'runtime', loaded: 0, total: 1 });
      ort = await importRuntime(manifest, base, ep, options.numThreads);
      onProgress?.({ stage: 'runtime', loaded: 1, total: 1 });
    } catch (error) {
      reasons.push(importFailure(ep, error));
      continue;
    }
    // A model that cannot be fetched fails on every EP: load() rejects with fetch-failed.
    if (!modelBytes.has(variant.name)) {
      const url = new URL(variant.file, base);
      modelBytes.set(variant.name, await fetchBytes(url, variant.bytes, onProgress, 'model'));
    }
    let session;
    try {
      onProgress?.({ stage: 'session', loaded: 0, total: 1 });
      session = await createSession(ort, modelBytes.get(variant.name), ep);
      onProgress?.({ stage: 'session', loaded: 1, total: 1 });
    } catch (error) {
      if (runtimeDidNotStart(error)) dropRuntime(ep);
      reasons.push(sessionFailure(ep, error));
      continue;
    }
    return new Model({
      ort, session, ep, variant, manifest, fallbackReasons: reasons,
      loadMs: performance.now() - started,
    });
  }
  throw noExecutionProvider(reasons);
}
