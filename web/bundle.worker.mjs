// bundle.worker.mjs: the dedicated module worker behind load({ worker: true }). It holds one
// session (on WebGPU too: a worker has navigator.gpu) and answers bundle.mjs's messages:
//   { id, type: 'open', options }  -> { id, result: null } (progress as { id, progress })
//   { id, type: 'run', feeds, keep, fetch } -> { id, result: outputs } (output buffers
//     transferred; the outputs named in keep stay here, as handles; fetch: only these outputs)
//   { id, type: 'drop', ids }      -> { id, result: null } (kept outputs disposed)
//   { id, type: 'image', source, task } -> { id, result: { output, place, width, height } }
//                                     (a task's image read, fitted and run here; tasks/image.mjs)
//   { id, type: 'release' }        -> { id, result: null }
// A failure answers { id, error: { name, message, code, stage } } (see bundle.session.mjs).
import { BundleError } from './bundle.core.mjs';
import { openSession } from './bundle.session.mjs';
import { runOnImage } from './tasks/image.mjs';

let session = null;
const models = new Map();

function buffersOf(tensors) {
  const buffers = new Set();
  for (const { data } of Object.values(tensors)) {
    if (ArrayBuffer.isView(data) && data.buffer instanceof ArrayBuffer) buffers.add(data.buffer);
  }
  return [...buffers];
}

const handlers = {
  async open(id, { options }) {
    await session?.release();
    session = null;
    session = await openSession({
      ...options, models, onProgress: (progress) => postMessage({ id, progress }),
    });
    models.clear(); // the session holds the model now
    return session.opened;
  },
  async run(id, { feeds, keep, fetch }) {
    if (!session) throw new BundleError('released', 'this model was released; load() it again');
    return session.run(feeds, { keep, fetch });
  },
  async drop(id, { ids }) {
    session?.drop(ids);
    return null;
  },
  async image(id, { source, task }) {
    if (!session) throw new BundleError('released', 'this model was released; load() it again');
    try {
      return await runOnImage((feeds) => session.run(feeds), source, task);
    } finally {
      source.close?.(); // the ImageBitmap bundle.mjs made and transferred (a Blob has no close)
    }
  },
  async release() {
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
      const sent = { run: result, image: { output: result?.output } }[message.type];
      postMessage({ id: message.id, result }, sent ? buffersOf(sent) : []);
    } catch (error) {
      const { name, message: text = String(error), code, stage } = error ?? {};
      postMessage({ id: message.id, error: { name, message: text, code, stage } });
    }
  });
};
