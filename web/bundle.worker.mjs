// bundle.worker.mjs: the dedicated module worker behind load({ worker: true }). It holds one
// session (on WebGPU too: a worker has navigator.gpu) and answers bundle.mjs's messages:
//   { id, type: 'open', options }  -> { id, result: null } (progress as { id, progress })
//   { id, type: 'run', feeds, keep, fetch } -> { id, result: outputs } (output buffers
//     transferred; the outputs named in keep stay here, as handles; fetch: only these outputs)
//   { id, type: 'drop', ids }      -> { id, result: null } (kept outputs disposed)
//   { id, type: 'image', source, task } -> { id, result: { output, place, width, height } }
//                                     (a task's image read, fitted and run here; tasks/image.mjs)
//   { id, type: 'openCache', layout, past } -> { id, result: cache } (a text generation's KV
//     cache kept here, beside the session, on WASM: bundle.core.mjs's AppendedCache)
//   { id, type: 'cacheStep', cache, feeds } -> { id, result: logits } (feeds without the past,
//     transferred; the logits' buffer transferred back)
//   { id, type: 'releaseCache', cache } -> { id, result: null }
//   { id, type: 'release' }        -> { id, result: null } (its caches released too)
// A failure answers { id, error: { name, message, code, stage } } (see bundle.session.mjs).
import { AppendedCache, BundleError } from './bundle.core.mjs';
import { openSession } from './bundle.session.mjs';
import { runOnImage } from './tasks/image.mjs';

let session = null;
const models = new Map();
const caches = new Map(); // id -> AppendedCache
let nextCache = 0;

function live() {
  if (!session) throw new BundleError('released', 'this model was released; load() it again');
  return session;
}

function buffersOf(tensors) {
  const buffers = new Set();
  for (const { data } of Object.values(tensors)) {
    if (ArrayBuffer.isView(data) && data.buffer instanceof ArrayBuffer) buffers.add(data.buffer);
  }
  return [...buffers];
}

const handlers = {
  async open(id, { options }) {
    caches.clear();
    await session?.release();
    session = null;
    session = await openSession({
      ...options, models, onProgress: (progress) => postMessage({ id, progress }),
    });
    models.clear(); // the session holds the model now
    return session.opened;
  },
  async run(id, { feeds, keep, fetch }) {
    return live().run(feeds, { keep, fetch });
  },
  async drop(id, { ids }) {
    session?.drop(ids);
    return null;
  },
  async image(id, { source, task }) {
    try {
      return await runOnImage((feeds) => live().run(feeds), source, task);
    } finally {
      source.close?.(); // the ImageBitmap bundle.mjs made and transferred (a Blob has no close)
    }
  },
  // The cache's steps run here: the page's cache would send the whole past with every step (its
  // arrays then detached on the page, transferred) and get the presents back, whole.
  async openCache(id, { layout, past }) {
    caches.set(nextCache, new AppendedCache((feeds, fetch) => live().run(feeds, { fetch }),
      layout, past));
    return nextCache++;
  },
  async cacheStep(id, { cache, feeds }) {
    live(); // a released session took its caches along
    return caches.get(cache).run(feeds);
  },
  async releaseCache(id, { cache }) {
    await caches.get(cache)?.release();
    caches.delete(cache);
    return null;
  },
  async release() {
    caches.clear();
    await session?.release();
    session = null;
    return null;
  },
};

// Messages are handled one at a time, in order (one session runs one call at a time).
let queue = Promise.resolve();
self.onmessage = ({ data: message }) => {
  queue = queue.then(async () => {
    try {
      const result = await handlers[message.type](message.id, message);
      const sent = { run: result, cacheStep: { logits: result },
                     image: { output: result?.output } }[message.type];
      postMessage({ id: message.id, result }, sent ? buffersOf(sent) : []);
    } catch (error) {
      const { name, message: text = String(error), code, stage } = error ?? {};
      postMessage({ id: message.id, error: { name, message: text, code, stage } });
    }
  });
};
