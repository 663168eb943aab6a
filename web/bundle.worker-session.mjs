// bundle.worker-session.mjs: the page's side of load({ worker: true }): a session whose
// open/run/release are messages to bundle.worker.mjs, a dedicated module worker (one per model),
// with the same API as bundle.session.mjs's. bundle.mjs imports it.

import { BundleError } from './bundle.core.mjs';

const MODULE_URL = import.meta.url;

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

// An error as bundle.worker.mjs sends it ({ name, message, code, stage }) made an Error again.
function revived({ name, message, code, stage }) {
  const error = code ? new BundleError(code, message) : new Error(message);
  if (!code && name) error.name = name;
  if (stage) error.stage = stage;
  return error;
}

// The page's side of bundle.worker.mjs: the same open/run/release as bundle.session.mjs.
export class WorkerSession {
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
      if (data.error) call.reject(revived(data.error));
      else call.resolve(data.result);
    };
    this._worker.onerror = (event) => {
      event.preventDefault();
      this._fail(new BundleError('worker-failed', `the model's worker failed: ${
        event.message || 'its script did not load'}`));
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
    this.opened = await this._call('open', { options }, { onProgress });
    return this;
  }

  // Input buffers are transferred to the worker (detached here afterwards) and outputs come back
  // the same way: nothing is copied.
  run(tensors, { keep = [], fetch = null } = {}) {
    const plain = {};
    for (const [name, tensor] of Object.entries(tensors)) {
      plain[name] = tensor.kept === undefined
        ? { type: tensor.type, dims: [...tensor.dims], data: tensor.data }
        : tensor; // a handle of an output the worker kept
    }
    return this._call('run', { feeds: plain, keep, fetch }, { transfer: transferables(plain) });
  }

  drop(ids) {
    return this._call('drop', { ids });
  }

  // A text generation's KV cache kept in the worker, beside the session, on WASM (bundle.core.mjs's
  // AppendedCache, from `past`): its id. A step's feeds (transferred) hold no past, and the
  // logits come back.
  openCache(layout, past) {
    return this._call('openCache', { layout, past });
  }

  cacheStep(cache, feeds) {
    return this._call('cacheStep', { cache, feeds }, { transfer: transferables(feeds) });
  }

  releaseCache(cache) {
    return this._call('releaseCache', { cache });
  }

  // A task's image, read and run in the worker (see tasks/index.mjs).
  runImage(source, task, transfer) {
    return this._call('image', { source, task }, { transfer });
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
    this._fail(new BundleError('released', 'this model was released; load() it again'));
  }
}
