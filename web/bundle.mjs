// bundle.mjs: loads the bundled model with onnxruntime-web and runs it.
//
//   import { load } from './bundle.mjs';
//   const model = await load();                  // WebGPU when the browser has it, else WASM
//   const out = await model.run({ image: { type: 'float32', dims: [1, 1, 8, 8], data } });
//
// Everything comes from this folder (bundle.json, models/, runtime/): nothing is fetched from any
// other origin. The contract is documented in the README of onnx-bundler.

import { fetchFile } from './bundle.fetch.mjs';

export { clearCache } from './bundle.fetch.mjs';

const MODULE_URL = import.meta.url;
const EXECUTION_PROVIDERS = ['webgpu', 'wasm'];
const TYPED_ARRAYS = {
  float32: Float32Array,
  float64: Float64Array,
  float16: globalThis.Float16Array ?? Uint16Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
  bool: Uint8Array,
};

const runtimes = new Map(); // EP -> Promise of the imported onnxruntime-web build

function folderUrl(baseUrl) {
  const base = baseUrl === undefined
    ? new URL('./', MODULE_URL)
    : new URL(baseUrl, globalThis.location?.href ?? MODULE_URL);
  if (!base.pathname.endsWith('/')) base.pathname += '/';
  return base;
}

function describe(spec) {
  return spec.shape === null ? spec.type : `${spec.type} [${spec.shape.join(', ')}]`;
}

export async function loadManifest(baseUrl) {
  const url = new URL('bundle.json', folderUrl(baseUrl));
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot fetch ${url}: HTTP ${response.status}`);
  return response.json();
}

async function webgpuMissingReason() {
  if (!globalThis.navigator?.gpu) return 'WebGPU unavailable: navigator.gpu is missing';
  try {
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return 'WebGPU unavailable: no adapter (requestAdapter() returned null)';
  } catch (error) {
    return `WebGPU unavailable: requestAdapter() failed: ${error.message ?? error}`;
  }
  return null;
}

function fileEntry(manifest, path) {
  return manifest.files?.find((entry) => entry.path === path) ?? { path };
}

function importRuntime(manifest, base, ep, { numThreads, onProgress, cache }) {
  if (!runtimes.has(ep)) {
    const build = manifest.runtime.builds[ep];
    if (!build) throw new Error(`this bundle ships no runtime for '${ep}'`);
    const wasm = build.wasm && fetchFile(fileEntry(manifest, build.wasm),
      (path) => new URL(path, base), onProgress, { stage: 'runtime', cache });
    const imported = Promise.all([import(new URL(build.module, base).href), wasm]);
    runtimes.set(ep, imported.then(([ort, wasmBinary]) => {
      ort.env.wasm.wasmPaths = new URL(manifest.runtime.dir, base).href;
      // Fetched here (parts, integrity, Cache Storage), so onnxruntime-web fetches no .wasm.
      if (wasmBinary) ort.env.wasm.wasmBinary = wasmBinary;
      ort.env.wasm.proxy = false;
      // Threads need SharedArrayBuffer, which browsers give only to cross-origin isolated pages.
      ort.env.wasm.numThreads = globalThis.crossOriginIsolated
        ? (numThreads ?? Math.max(1, Math.min(4, (navigator.hardwareConcurrency ?? 2) >> 1)))
        : 1;
      return ort;
    }));
    runtimes.get(ep).catch(() => runtimes.delete(ep)); // a failed fetch may be tried again
  }
  return runtimes.get(ep);
}

function pickVariant(manifest, ep, requested) {
  const name = requested ?? (typeof manifest.default_variant === 'string'
    ? manifest.default_variant
    : manifest.default_variant[ep] ?? Object.values(manifest.default_variant)[0]);
  const variant = manifest.variants.find((v) => v.name === name);
  if (!variant) {
    const known = manifest.variants.map((v) => v.name).join(', ');
    throw new Error(`unknown variant '${name}'; this bundle has: ${known}`);
  }
  return variant;
}

function verificationFailure(manifest, variant, ep) {
  const result = manifest.verification?.results?.[variant.name]?.[ep];
  if (!result || result.passed !== false) return null;
  // A device that lacked a feature at build time says nothing about this device.
  if (result.unsupported === 'device') return null;
  if (result.unsupported === 'runtime') {
    return `${ep} skipped: this onnxruntime-web build cannot run this model (${result.error});` +
      ' pass ignoreVerification: true to try it anyway';
  }
  const worst = result.max_abs_error == null ? '' : ` (worst abs error ${result.max_abs_error})`;
  return `${ep} skipped: it failed verification for this model at build time${worst};` +
    ' pass ignoreVerification: true to use it anyway';
}

function toTypedArray(spec, data) {
  const Typed = TYPED_ARRAYS[spec.type];
  if (!Typed) return data; // string tensors take a plain array
  if (data instanceof Typed) return data;
  if (ArrayBuffer.isView(data)) {
    throw new Error(`input '${spec.name}': expected ${Typed.name} data for ${spec.type},` +
      ` got ${data.constructor.name}`);
  }
  if (!Array.isArray(data)) {
    throw new Error(`input '${spec.name}': data must be a typed array or an array of numbers`);
  }
  if (Typed === BigInt64Array || Typed === BigUint64Array) {
    return Typed.from(data, (v) => (typeof v === 'bigint' ? v : BigInt(Math.trunc(v))));
  }
  if (spec.type === 'bool') return Uint8Array.from(data, (v) => (v ? 1 : 0));
  return Typed.from(data);
}

function checkDims(spec, dims) {
  if (!Array.isArray(dims) || dims.some((d) => !Number.isInteger(d) || d < 0)) {
    throw new Error(`input '${spec.name}': dims must be an array of non-negative integers`);
  }
  if (spec.shape === null) return;
  const mismatch = dims.length !== spec.shape.length ||
    spec.shape.some((d, i) => typeof d === 'number' && d !== dims[i]);
  if (mismatch) {
    throw new Error(`input '${spec.name}': expected shape [${spec.shape.join(', ')}],` +
      ` got [${dims.join(', ')}]`);
  }
}

function makeTensor(ort, spec, value) {
  if (value instanceof ort.Tensor || (value?.constructor?.name === 'Tensor' && 'cpuData' in value)) {
    if (value.type !== spec.type) {
      throw new Error(`input '${spec.name}': expected ${spec.type}, got ${value.type}`);
    }
    checkDims(spec, [...value.dims]);
    return value;
  }
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') {
    value = { data: [value], dims: [] };
  }
  if (value === null || typeof value !== 'object' || !('data' in value)) {
    throw new Error(`input '${spec.name}': expected an ort.Tensor or { type, dims, data }` +
      ` (${describe(spec)})`);
  }
  if (value.type !== undefined && value.type !== spec.type) {
    throw new Error(`input '${spec.name}': expected ${spec.type}, got ${value.type}`);
  }
  const data = toTypedArray(spec, value.data);
  let dims = value.dims;
  if (dims === undefined) {
    if (spec.shape === null || spec.shape.some((d) => typeof d !== 'number')) {
      throw new Error(`input '${spec.name}': give dims (shape [${spec.shape?.join(', ')}])`);
    }
    dims = spec.shape;
  }
  checkDims(spec, dims);
  const count = dims.reduce((a, b) => a * b, 1);
  if (data.length !== count) {
    throw new Error(`input '${spec.name}': dims [${dims.join(', ')}] hold ${count} values,` +
      ` data has ${data.length}`);
  }
  return new ort.Tensor(spec.type, data, dims);
}

function makeFeeds(ort, inputs, feeds) {
  if (feeds === null || typeof feeds !== 'object') {
    throw new Error('run(feeds): feeds must be an object mapping input names to tensors');
  }
  const byName = new Map(inputs.map((spec) => [spec.name, spec]));
  for (const name of Object.keys(feeds)) {
    if (!byName.has(name)) {
      throw new Error(`unknown input '${name}'; this model takes: ` +
        inputs.map((s) => `'${s.name}' (${describe(s)})`).join(', '));
    }
  }
  const tensors = {};
  for (const spec of inputs) {
    if (!(spec.name in feeds)) throw new Error(`missing input '${spec.name}' (${describe(spec)})`);
    tensors[spec.name] = makeTensor(ort, spec, feeds[spec.name]);
  }
  return tensors;
}

async function createSession(ort, bytes, ep) {
  return ort.InferenceSession.create(bytes, {
    executionProviders: [ep],
    graphOptimizationLevel: 'all',
  });
}

class Model {
  constructor({ ort, session, ep, fallbackReason, variant, manifest, loadMs }) {
    this.ep = ep;
    this.fallbackReason = fallbackReason;
    this.variant = variant.name;
    this.manifest = manifest;
    this.inputs = manifest.inputs;
    this.outputs = manifest.outputs;
    this.loadMs = loadMs;
    this.threads = ort.env.wasm.numThreads;
    this.crossOriginIsolated = globalThis.crossOriginIsolated === true;
    this._ort = ort;
    this._session = session;
    this._queue = Promise.resolve(); // one session must not run two calls at once
  }

  run(feeds) {
    let tensors;
    try {
      if (!this._session) throw new Error('this model was released; load() it again');
      tensors = makeFeeds(this._ort, this.inputs, feeds);
    } catch (error) {
      return Promise.reject(error);
    }
    const result = this._queue.then(async () => {
      const outputs = await this._session.run(tensors);
      const plain = {};
      for (const spec of this.outputs) {
        const tensor = outputs[spec.name];
        plain[spec.name] = { type: tensor.type, dims: [...tensor.dims], data: tensor.data };
      }
      return plain;
    });
    this._queue = result.catch(() => {});
    return result;
  }

  async release() {
    const session = this._session;
    this._session = null;
    await this._queue;
    await session?.release();
  }
}

export async function load(options = {}) {
  const started = performance.now();
  const base = folderUrl(options.baseUrl);
  const onProgress = options.onProgress;
  const eps = options.executionProviders ?? EXECUTION_PROVIDERS;
  const unknown = eps.filter((ep) => !EXECUTION_PROVIDERS.includes(ep));
  if (!Array.isArray(eps) || eps.length === 0 || unknown.length) {
    throw new Error(`executionProviders must list some of ${EXECUTION_PROVIDERS.join(', ')};` +
      ` got ${JSON.stringify(eps)}`);
  }
  onProgress?.({ stage: 'manifest', loaded: 0, total: 1 });
  const manifest = await loadManifest(base.href);
  onProgress?.({ stage: 'manifest', loaded: 1, total: 1 });

  const reasons = [];
  const modelBytes = new Map();
  for (const ep of eps) {
    if (!manifest.runtime.builds[ep]) {
      reasons.push(`${ep} skipped: this bundle was built without it`);
      continue;
    }
    const variant = pickVariant(manifest, ep, options.variant);
    const failed = options.ignoreVerification ? null : verificationFailure(manifest, variant, ep);
    if (failed) {
      reasons.push(failed);
      continue;
    }
    if (ep === 'webgpu') {
      const missing = await webgpuMissingReason();
      if (missing) {
        reasons.push(missing);
        continue;
      }
    }
    try {
      const fetching = { onProgress, cache: options.cache !== false };
      const ort = await importRuntime(manifest, base, ep,
        { ...fetching, numThreads: options.numThreads });
      if (!modelBytes.has(variant.name)) {
        modelBytes.set(variant.name, await fetchFile(fileEntry(manifest, variant.file),
          (path) => new URL(path, base), onProgress, { ...fetching, stage: 'model' }));
      }
      onProgress?.({ stage: 'session', loaded: 0, total: 1 });
      const session = await createSession(ort, modelBytes.get(variant.name), ep);
      onProgress?.({ stage: 'session', loaded: 1, total: 1 });
      return new Model({
        ort, session, ep, variant, manifest,
        fallbackReason: reasons.length ? reasons.join('; ') : null,
        loadMs: performance.now() - started,
      });
    } catch (error) {
      if (error?.code === 'integrity') throw error; // never fall back to other bytes
      reasons.push(`${ep} session creation failed: ${error?.message ?? error}`);
    }
  }
  throw new Error(`no execution provider could run this model: ${reasons.join('; ')}`);
}
