// bundle.mjs: loads the bundled model with onnxruntime-web and runs it.
//
//   import { load } from './bundle.mjs';
//   const model = await load();                  // WebGPU when the browser has it, else WASM
//   const out = await model.run({ image: { type: 'float32', dims: [1, 1, 8, 8], data } });
//
// Everything comes from this bundle (models/, runtime/): nothing is fetched from any other origin.
// Files are found through bundle.files.mjs (URLs an app's bundler rewrites to where it emitted
// them), or under load({ baseUrl }). The contract is documented in the README of onnx-bundler.
import { manifest as MANIFEST, urls as FILE_URLS } from './bundle.files.mjs';
import { openSession } from './bundle.session.mjs';

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

function folderUrl(baseUrl) {
  const base = new URL(baseUrl, globalThis.location?.href ?? MODULE_URL);
  if (!base.pathname.endsWith('/')) base.pathname += '/';
  return base;
}

// A bundle file's URL: where the app's bundler put it, or under baseUrl when one is given.
function fileUrl(path, base) {
  if (base) return new URL(path, base).href;
  const url = FILE_URLS[path];
  if (!url) throw new Error(`${path} is not a file of this bundle (see bundle.files.mjs)`);
  return url.href;
}

function runtimeUrls(build, base) {
  return { module: fileUrl(build.module, base), mjs: fileUrl(build.mjs, base),
           wasm: fileUrl(build.wasm, base) };
}

function describe(spec) {
  return spec.shape === null ? spec.type : `${spec.type} [${spec.shape.join(', ')}]`;
}

export async function loadManifest(baseUrl) {
  if (baseUrl === undefined) return structuredClone(MANIFEST);
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

// Validated inputs are plain { type, dims, data }, or an ort.Tensor as given: a session (on the page
// or in the worker) turns them into its runtime's tensors.
function isOrtTensor(value) {
  return typeof value?.location === 'string' && Array.isArray(value.dims) && 'type' in value;
}

function makeTensor(spec, value) {
  if (isOrtTensor(value)) {
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
  return { type: spec.type, dims: [...dims], data };
}

function makeFeeds(inputs, feeds) {
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
    tensors[spec.name] = makeTensor(spec, feeds[spec.name]);
  }
  return tensors;
}

// load({ worker: true }): the session lives in a dedicated module worker, one per model. The
// worker is created with a literal relative URL on import.meta.url, the form bundlers recognise,
// so they emit bundle.worker.mjs as a chunk of its own.
function startWorker() {
  try {
    return [new Worker(new URL('./bundle.worker.mjs', import.meta.url), { type: 'module' }), null];
  } catch (error) {
    if (error?.name !== 'SecurityError') throw error;
  }
  // A worker's script must be same-origin: imported from another origin, start the worker from a
  // blob: module that imports bundle.worker.mjs (so the bundle's host must send CORS headers).
  const source = `import ${JSON.stringify(new URL('./bundle.worker.mjs', MODULE_URL).href)};`;
  const blobUrl = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
  return [new Worker(blobUrl, { type: 'module' }), blobUrl];
}

function transferables(tensors) {
  const buffers = new Set();
  for (const { data } of Object.values(tensors)) {
    if (ArrayBuffer.isView(data) && data.buffer instanceof ArrayBuffer) buffers.add(data.buffer);
  }
  return [...buffers];
}

class WorkerSession {
  constructor() {
    [this._worker, this._blobUrl] = startWorker();
    this._calls = new Map(); // id -> { resolve, reject, onProgress }
    this._nextId = 0;
    this._worker.onmessage = ({ data }) => {
      const call = this._calls.get(data.id);
      if (!call) return;
      if (data.progress) {
        call.onProgress?.(data.progress);
        return;
      }
      this._calls.delete(data.id);
      if (data.error) call.reject(Object.assign(new Error(data.error.message), { name: data.error.name }));
      else call.resolve(data.result);
    };
    this._worker.onerror = (event) => {
      event.preventDefault?.();
      this._fail(new Error(`the model's worker failed: ${event.message || 'its script did not load'}`));
    };
  }

  _fail(error) {
    for (const call of this._calls.values()) call.reject(error);
    this._calls.clear();
  }

  _call(type, message = {}, { transfer = [], onProgress } = {}) {
    const id = this._nextId++;
    return new Promise((resolve, reject) => {
      this._calls.set(id, { resolve, reject, onProgress });
      this._worker.postMessage({ ...message, id, type }, transfer);
    });
  }

  async open(options, onProgress) {
    await this._call('open', { options }, { onProgress });
    return this;
  }

  // Input buffers are transferred to the worker (detached here afterwards), outputs come back the
  // same way: nothing is copied.
  run(tensors) {
    const plain = {};
    for (const [name, tensor] of Object.entries(tensors)) {
      plain[name] = { type: tensor.type, dims: [...tensor.dims], data: tensor.data };
    }
    return this._call('run', { feeds: plain }, { transfer: transferables(plain) });
  }

  async release() {
    try {
      await this._call('release');
    } finally {
      this.terminate();
    }
  }

  terminate() {
    this._worker.terminate();
    if (this._blobUrl) URL.revokeObjectURL(this._blobUrl);
    this._fail(new Error('this model was released; load() it again'));
  }
}

class Model {
  constructor({ session, ep, fallbackReason, variant, manifest, loadMs, worker }) {
    this.ep = ep;
    this.fallbackReason = fallbackReason;
    this.variant = variant.name;
    this.manifest = manifest;
    this.inputs = manifest.inputs;
    this.outputs = manifest.outputs;
    this.loadMs = loadMs;
    this.worker = worker;
    this._session = session;
    this._queue = Promise.resolve(); // one session must not run two calls at once
  }

  run(feeds) {
    let tensors;
    try {
      if (!this._session) throw new Error('this model was released; load() it again');
      tensors = makeFeeds(this.inputs, feeds);
    } catch (error) {
      return Promise.reject(error);
    }
    const session = this._session;
    const result = this._queue.then(async () => {
      const outputs = await session.run(tensors);
      const plain = {};
      for (const spec of this.outputs) plain[spec.name] = outputs[spec.name];
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
  const base = options.baseUrl === undefined ? null : folderUrl(options.baseUrl);
  const onProgress = options.onProgress;
  const eps = options.executionProviders ?? EXECUTION_PROVIDERS;
  const unknown = eps.filter((ep) => !EXECUTION_PROVIDERS.includes(ep));
  if (!Array.isArray(eps) || eps.length === 0 || unknown.length) {
    throw new Error(`executionProviders must list some of ${EXECUTION_PROVIDERS.join(', ')};` +
      ` got ${JSON.stringify(eps)}`);
  }
  onProgress?.({ stage: 'manifest', loaded: 0, total: 1 });
  const manifest = await loadManifest(base?.href);
  onProgress?.({ stage: 'manifest', loaded: 1, total: 1 });

  const reasons = [];
  const models = new Map(); // model bytes by URL, fetched once across the EPs tried
  const worker = options.worker ? new WorkerSession() : null;
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
    const request = {
      runtime: runtimeUrls(manifest.runtime.builds[ep], base),
      model: { url: fileUrl(variant.file, base), bytes: variant.bytes },
      ep,
      numThreads: options.numThreads,
    };
    try {
      const session = worker
        ? await worker.open(request, onProgress)
        : await openSession({ ...request, onProgress, models });
      return new Model({
        session, ep, variant, manifest, worker: worker !== null,
        fallbackReason: reasons.length ? reasons.join('; ') : null,
        loadMs: performance.now() - started,
      });
    } catch (error) {
      reasons.push(`${ep} session creation failed: ${error?.message ?? error}`);
    }
  }
  worker?.terminate();
  throw new Error(`no execution provider could run this model: ${reasons.join('; ')}`);
}
