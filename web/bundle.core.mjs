// bundle.core.mjs: the pure part of bundle.mjs: its errors and their codes, the checks of options,
// of bundle.json's schema_version and of feeds, the sessions of a manifest (version 1 or 2) and the
// choice of session and of variant per execution provider, the queue that keeps one
// onnxruntime-web module to one call at a time, and text generation's KV cache on WASM. No DOM,
// no fetch, so it is unit-tested under Node (tests/js/).

export const SCHEMA_VERSION = 2; // the newest bundle.json layout this module reads
export const EXECUTION_PROVIDERS = ['webgpu', 'wasm'];
// The task kinds that decode step by step with a KV cache (present.* kept on the device, a
// warm-up at load by default).
export const DECODING_KINDS = ['text-generation', 'automatic-speech-recognition'];

// Stable codes of BundleError (and of the entries of model.fallbackReasons), each with its meaning:
// docs/reference/errors.md is generated from this list.
export const ERROR_CODES = [
  'bad-option', // load() options: wrong type or value
  'schema-version', // bundle.json is newer than this bundle.mjs (or its version is not a number)
  'fetch-failed', // bundle.json, the model or a runtime module could not be fetched
  'integrity', // a fetched file does not match its sha256 in bundle.json
  'not-bundled', // fallback reason: the bundle was built without this EP
  'webgpu-unavailable', // fallback reason: no navigator.gpu, or no adapter
  'verification-failed', // fallback reason: the EP computed wrong numbers at build time
  'runtime-unsupported', // fallback reason: this onnxruntime-web build has no kernel for an op
  'session-failed', // fallback reason: session creation failed otherwise (a device feature, ...)
  'no-execution-provider', // load(): every EP was skipped or failed; see error.reasons
  'too-large', // load(), before any download: no variant it may try fits this device's limits
  'feature-missing', // variant/fallback reason: the variant needs a WebGPU feature (shader-f16)
  'input-name', // run(): a missing or unknown input (or feeds that are not an object)
  'input-type', // run(): wrong element type or data
  'input-shape', // run(): dims that do not fit the model or the data
  'released', // run() after release()
  'worker-failed', // load({ worker: true }): the worker did not start (its script did not load)
  'unsupported-environment', // load() under Node.js or on the server side of SSR (node.mjs)
  'wrong-task', // classify(), detect() or stream() on a bundle built for another task
  'bad-source', // classify(), detect() or transcribe(): not an image (audio) source, or empty
];

export class BundleError extends Error {
  constructor(code, message, { reasons, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'BundleError';
    this.code = code;
    if (reasons !== undefined) this.reasons = reasons;
  }
}

const messageOf = (error) => String(error?.message ?? error);

// --- options and manifest ---------------------------------------------------------------------

export function checkOptions(options) {
  if (options === null || typeof options !== 'object') {
    throw new BundleError('bad-option', `load(options): options must be an object, got ${
      JSON.stringify(options)}`);
  }
  const eps = options.executionProviders ?? EXECUTION_PROVIDERS;
  const known = EXECUTION_PROVIDERS.map((ep) => `'${ep}'`).join(', ');
  if (typeof eps === 'string') {
    throw new BundleError('bad-option', `executionProviders must be an array (tried in order),` +
      ` not the string '${eps}': write executionProviders: ['${eps}']`);
  }
  const unknown = Array.isArray(eps) ? eps.filter((ep) => !EXECUTION_PROVIDERS.includes(ep)) : [];
  if (!Array.isArray(eps) || eps.length === 0 || unknown.length) {
    throw new BundleError('bad-option', `executionProviders must be an array of some of ${known};` +
      ` got ${JSON.stringify(eps)}`);
  }
  if (options.session !== undefined && typeof options.session !== 'string') {
    throw new BundleError('bad-option', `session must be a session name (a string), got ${
      JSON.stringify(options.session)}`);
  }
  if (options.variant !== undefined && typeof options.variant !== 'string') {
    throw new BundleError('bad-option', `variant must be a variant name (a string), got ${
      JSON.stringify(options.variant)}`);
  }
  const threads = options.numThreads;
  if (threads !== undefined && !(Number.isInteger(threads) && threads >= 1)) {
    throw new BundleError('bad-option', `numThreads must be a positive integer, got ${
      JSON.stringify(threads)}`);
  }
  if (options.cache !== undefined && typeof options.cache !== 'boolean') {
    throw new BundleError('bad-option', `cache must be true or false, got ${
      JSON.stringify(options.cache)}`);
  }
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') {
    throw new BundleError('bad-option', 'onProgress must be a function');
  }
  if (options.worker !== undefined && typeof options.worker !== 'boolean') {
    throw new BundleError('bad-option', `worker must be true or false, got ${
      JSON.stringify(options.worker)}`);
  }
  return eps;
}

// bundle.json's task record for model.classify(), detect() or stream() (`method`), which need a
// bundle built with --task `kind`.
export function taskOf(manifest, kind, method) {
  const task = manifest.task;
  if (task?.kind !== kind) {
    throw new BundleError('wrong-task', `${method}() needs a bundle built with --task ${kind};`
      + ` this one's task is ${task?.kind ?? 'generic'}`);
  }
  return task;
}

// A bundle.json without schema_version predates the field and has the version 1 layout. Fields
// added later without breaking readers keep the version; only a breaking change raises it.
export function checkSchemaVersion(manifest) {
  const version = manifest?.schema_version ?? 1;
  if (!Number.isInteger(version) || version < 1) {
    throw new BundleError('schema-version', `bundle.json has schema_version ${
      JSON.stringify(version)}; expected a positive integer (at most ${SCHEMA_VERSION})`);
  }
  if (version > SCHEMA_VERSION) {
    throw new BundleError('schema-version', `bundle.json has schema_version ${version}, but this` +
      ` bundle.mjs reads schema_version ${SCHEMA_VERSION} at most: use the bundle.mjs that was` +
      ' built with it (rebuild the bundle)');
  }
  return manifest;
}

// --- which session, which variant on which EP ------------------------------------------------

// The one reading of a manifest's sessions (bundler/bundle/files.py's sessions_of is its twin):
// schema_version 2 lists them; version 1 had its one model's inputs, outputs, variants and
// default_variant at the top level, read as one session named after the bundle.
export function sessionsOf(manifest) {
  if (manifest.sessions) return manifest.sessions;
  const { name, inputs, outputs, variants, default_variant } = manifest;
  return [{ name, inputs, outputs, variants, default_variant }];
}

// The session `name` of the manifest; without a name, the first (the only one of a bundle of one
// model, the primary one of a pipeline).
export function pickSession(manifest, name) {
  const sessions = sessionsOf(manifest);
  if (name === undefined) return sessions[0];
  const session = sessions.find((s) => s.name === name);
  if (!session) {
    throw new BundleError('bad-option', `unknown session '${name}'; this bundle has: ${
      sessions.map((s) => s.name).join(', ')}`);
  }
  return session;
}

// The one default-variant rule, as bundler/variants/default.py's default_variant() says it (the
// cases of tests/data/default_variant_cases.json hold for both), on a session.
export function pickVariant(session, ep, requested) {
  const defaults = session.default_variant;
  const name = requested ?? (typeof defaults === 'string'
    ? defaults
    : defaults[ep] ?? Object.values(defaults)[0]);
  const variant = session.variants.find((v) => v.name === name);
  if (!variant) {
    const known = session.variants.map((v) => v.name).join(', ');
    throw new BundleError('bad-option', `unknown variant '${name}'; this bundle has: ${known}`);
  }
  return variant;
}

// The graph a variant is opened from on `ep`: its own graph there where it has one (`graphs`:
// int4 format=per-ep's qdq form on WebGPU, over the same data files), else its `file`.
export const graphFor = (variant, ep) => variant.graphs?.[ep] ?? variant.file;

// bundle.json's verification is that of the primary session (the one the build checks).
export function verificationReason(manifest, session, variant, ep) {
  if (session.name !== sessionsOf(manifest)[0].name) return null;
  const result = manifest.verification?.results?.[variant.name]?.[ep];
  if (!result || result.passed !== false) return null;
  // A device that lacked a feature at build time says nothing about this device.
  if (result.unsupported === 'device') return null;
  if (result.unsupported === 'runtime') {
    return { ep, code: 'runtime-unsupported', detail: `${ep} skipped: this onnxruntime-web build` +
      ` cannot run this model (${result.error}); pass ignoreVerification: true to try it anyway` };
  }
  const worst = result.max_abs_error == null ? '' : ` (worst abs error ${result.max_abs_error})`;
  return { ep, code: 'verification-failed', detail: `${ep} skipped: it failed verification for` +
    ` this model at build time${worst}; pass ignoreVerification: true to use it anyway` };
}

// What load() tries, in order, for the session `session` names (default: the first): per EP,
// { ep, variant } or { ep, reason } when the manifest alone rules it out (reason: { ep, code,
// detail }, an entry of model.fallbackReasons).
export function planAttempts(manifest, eps, { session: name, variant, ignoreVerification } = {}) {
  const session = pickSession(manifest, name); // an unknown session or variant fails first
  if (variant !== undefined) pickVariant(session, eps[0], variant);
  return eps.map((ep) => {
    if (!manifest.runtime.builds[ep]) {
      return { ep, reason: { ep, code: 'not-bundled',
        detail: `${ep} skipped: this bundle was built without it` } };
    }
    const chosen = pickVariant(session, ep, variant);
    const reason = ignoreVerification ? null : verificationReason(manifest, session, chosen, ep);
    return reason ? { ep, reason } : { ep, variant: chosen };
  });
}

// onnxruntime's words for "this build cannot run this model" (no kernel for an op: status
// NOT_IMPLEMENTED = 9; an IR version or opset newer than the build knows): the same on every
// device, so bundle test records such an EP as unsupported by the runtime.
const MISSING_KERNEL = new RegExp('No Op registered|NOT_IMPLEMENTED|ERROR_CODE: 9\\b|' +
  'Could not find an implementation|Unsupported model IR version|official support for domain');
const SESSION_PREFIX = /^Can't create a session\. ERROR_CODE: \d+, ERROR_MESSAGE: /;

// onnxruntime-web could not start its wasm or backend; "fetching of the wasm failed": the network.
const NOT_STARTED = /no available backend found/;
const FETCH_FAILED = /fetching of the wasm failed|Failed to fetch/;

export const runtimeDidNotStart = (error) => NOT_STARTED.test(messageOf(error));

export function sessionFailure(ep, error) {
  const text = messageOf(error);
  let code = 'session-failed';
  if (MISSING_KERNEL.test(text)) code = 'runtime-unsupported';
  else if (runtimeDidNotStart(error) && FETCH_FAILED.test(text)) code = 'fetch-failed';
  return { ep, code, detail: `${ep} session creation failed: ${text.replace(SESSION_PREFIX, '')}` };
}

export function importFailure(ep, error) {
  return { ep, code: 'fetch-failed', detail: `${ep} skipped: its onnxruntime-web build could not` +
    ` be imported (${messageOf(error)})` };
}

export function noExecutionProvider(reasons) {
  return new BundleError('no-execution-provider', 'no execution provider could run this model: ' +
    reasons.map((reason) => reason.detail).join('; '), { reasons });
}

// --- one call at a time per onnxruntime-web module ----------------------------------------------

// Sessions of one module share its wasm instance, whose asyncify/JSEP state allows one session
// creation or run at a time ("Session already started"), so every model on the page queues here.
const queues = new WeakMap(); // runtime module -> the promise of its last queued task

export function serialised(runtime, task) {
  const result = (queues.get(runtime) ?? Promise.resolve()).then(task);
  queues.set(runtime, result.then(() => {}, () => {}));
  return result;
}

// --- feeds ------------------------------------------------------------------------------------

// The typed array of each element type (also what the bundle test harness decodes with).
export const TYPED_ARRAYS = {
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

// Typed arrays onnxruntime-web also takes as they are: the raw half-float bits, an ImageData's.
const ALSO_ACCEPTED = { float16: [Uint16Array], uint8: [Uint8ClampedArray] };

export function describe(spec) {
  return spec.shape === null ? spec.type : `${spec.type} [${spec.shape.join(', ')}]`;
}

const inputError = (code, spec, text) => new BundleError(code, `input '${spec.name}': ${text}`);

function toData(spec, data) {
  if (spec.type === 'string') {
    if (Array.isArray(data) && data.every((v) => typeof v === 'string')) return data;
    throw inputError('input-type', spec, 'data must be an array of strings');
  }
  const Typed = TYPED_ARRAYS[spec.type];
  if (data instanceof Typed) return data;
  if (ArrayBuffer.isView(data)) {
    if ((ALSO_ACCEPTED[spec.type] ?? []).some((Other) => data instanceof Other)) {
      if (spec.type !== 'uint8') return data;
      return new Uint8Array(data.buffer, data.byteOffset, data.length);
    }
    throw inputError('input-type', spec, `expected ${Typed.name} data for ${spec.type},` +
      ` got ${data.constructor.name}`);
  }
  if (!Array.isArray(data)) {
    throw inputError('input-type', spec, 'data must be a typed array or an array of numbers');
  }
  if (spec.type === 'bool') return Uint8Array.from(data, (v) => (v ? 1 : 0));
  const wide = Typed === BigInt64Array || Typed === BigUint64Array;
  // '' or null would silently become 0 (or NaN); a 64-bit integer needs a finite number
  const odd = data.findIndex((v) => (typeof v === 'number' ? wide && !Number.isFinite(v)
    : !(wide && typeof v === 'bigint')));
  if (odd >= 0) {
    const value = data[odd];
    const shown = typeof value === 'string' ? JSON.stringify(value)
      : typeof value === 'bigint' ? `${value}n` : String(value);
    throw inputError('input-type', spec, `data[${odd}] is ${shown}, not a${
      wide ? ' finite' : ''} number`);
  }
  if (wide) return Typed.from(data, (v) => (typeof v === 'bigint' ? v : BigInt(Math.trunc(v))));
  if (Typed === Uint16Array && spec.type === 'float16') {
    throw inputError('input-type', spec, 'this browser has no Float16Array: give the half-float' +
      ' bits as a Uint16Array');
  }
  return Typed.from(data);
}

function checkDims(spec, dims) {
  if (!Array.isArray(dims) || dims.some((d) => !Number.isInteger(d) || d < 0)) {
    throw inputError('input-shape', spec, 'dims must be an array of non-negative integers');
  }
  if (spec.shape === null) return;
  const mismatch = dims.length !== spec.shape.length ||
    spec.shape.some((d, i) => typeof d === 'number' && d !== dims[i]);
  if (mismatch) {
    throw inputError('input-shape', spec, `expected shape [${spec.shape.join(', ')}],` +
      ` got [${dims.join(', ')}]`);
  }
}

function isTensor(Tensor, value) {
  // A tensor of another onnxruntime-web copy on the page is a Tensor too.
  return value instanceof Tensor || (value?.constructor?.name === 'Tensor' && 'cpuData' in value);
}

function makeTensor(Tensor, spec, value) {
  if (isTensor(Tensor, value)) {
    if (value.type !== spec.type) {
      throw inputError('input-type', spec, `expected ${spec.type}, got ${value.type}`);
    }
    checkDims(spec, [...value.dims]);
    return value;
  }
  if (['number', 'bigint', 'boolean', 'string'].includes(typeof value)) {
    value = { data: [value], dims: [] };
  }
  if (value === null || typeof value !== 'object' || !('data' in value)) {
    throw inputError('input-type', spec, `expected an ort.Tensor or { type, dims, data }` +
      ` (${describe(spec)})`);
  }
  if (value.type !== undefined && value.type !== spec.type) {
    throw inputError('input-type', spec, `expected ${spec.type}, got ${value.type}`);
  }
  const data = toData(spec, value.data);
  let dims = value.dims;
  if (dims === undefined) {
    if (spec.shape === null || spec.shape.some((d) => typeof d !== 'number')) {
      throw inputError('input-shape', spec, `give dims (shape [${spec.shape?.join(', ')}])`);
    }
    dims = spec.shape;
  }
  checkDims(spec, dims);
  const count = dims.reduce((a, b) => a * b, 1);
  if (data.length !== count) {
    throw inputError('input-shape', spec, `dims [${dims.join(', ')}] hold ${count} values,` +
      ` data has ${data.length}`);
  }
  return new Tensor(spec.type, data, dims);
}

// feeds -> { name: Tensor } for session.run, checked against the model's inputs (`Tensor`: the
// runtime's ort.Tensor); a BundleError with an input-* code names the input and what it takes.
export function makeFeeds(Tensor, inputs, feeds) {
  if (feeds === null || typeof feeds !== 'object') {
    throw new BundleError('input-name',
      'run(feeds): feeds must be an object mapping input names to tensors');
  }
  const byName = new Map(inputs.map((spec) => [spec.name, spec]));
  for (const name of Object.keys(feeds)) {
    if (!byName.has(name)) {
      throw new BundleError('input-name', `unknown input '${name}'; this model takes: ` +
        inputs.map((s) => `'${s.name}' (${describe(s)})`).join(', '));
    }
  }
  const tensors = {};
  for (const spec of inputs) {
    if (!(spec.name in feeds)) {
      throw new BundleError('input-name', `missing input '${spec.name}' (${describe(spec)})`);
    }
    tensors[spec.name] = makeTensor(Tensor, spec, feeds[spec.name]);
  }
  return tensors;
}

// --- text generation's KV cache on WASM -------------------------------------------------------

// The KV cache of one text generation kept in arrays (text/generate.mjs, on WASM, for a model that
// also outputs each step's new key/value slice: present_new.*, added at build time by
// bundler/text/slices.py). Each step fetches the logits and the slices only (onnxruntime-web
// copies every output fetched into a new array, the presents as large as the whole cache) and
// appends the slices to the past, in two arrays per tensor used in turn, allocated once (again
// when they fill up): the next step's past is a view of the filled part. It is here, not in
// text/, because every bundle's worker imports this module: in worker mode the cache lives in the
// worker beside the session (bundle.worker.mjs), so a step's message carries the new ids only.
// `run(feeds, fetch) -> outputs`: the session's; `layout`: generate.mjs's cacheLayout; `past`:
// the first step's (zero-length).
export class AppendedCache {
  constructor(run, layout, past) {
    this._run = run;
    this._layout = layout;
    this._past = { ...past };
    this._length = 0; // the tokens in the cache
    this._arrays = new Map(); // past name -> [array, array], the next past written into the other
    this._fetch = ['logits', ...layout.slices];
  }

  /** The logits of a step: `feeds` are all its inputs but the past. */
  async run(feeds) {
    const outputs = await this._run({ ...feeds, ...this._past }, this._fetch);
    const { kvHeads: heads, headSize: size, presents, slices } = this._layout;
    const [before, added] = [this._length, feeds.input_ids.dims[1]];
    const total = before + added;
    slices.forEach((sliceName, index) => {
      const name = presents[index].replace('present', 'past_key_values');
      const { type, data: slice } = outputs[sliceName];
      const old = this._past[name].data;
      let arrays = this._arrays.get(name);
      if (!arrays || arrays[0].length < heads * total * size) { // room for this and more steps
        const room = heads * Math.max(2 * total, 64) * size;
        arrays = [new slice.constructor(room), new slice.constructor(room)];
        this._arrays.set(name, arrays);
      }
      const into = old.buffer === arrays[0].buffer ? arrays[1] : arrays[0];
      for (let head = 0; head < heads; head += 1) { // [1, heads, tokens, size]: per head
        into.set(old.subarray(head * before * size, (head + 1) * before * size),
          head * total * size);
        into.set(slice.subarray(head * added * size, (head + 1) * added * size),
          (head * total + before) * size);
      }
      this._past[name] = { type, data: into.subarray(0, heads * total * size),
                           dims: [1, heads, total, size] };
    });
    this._length = total;
    return outputs.logits;
  }

  async release() {
    this._arrays.clear();
  }
}
