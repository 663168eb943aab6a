// bundle.mjs: loads the bundled model with onnxruntime-web and runs it.
//
//   import { load } from './bundle.mjs';
//   const model = await load();                  // WebGPU when the browser has it, else WASM
//   const out = await model.run({ image: { type: 'float32', dims: [1, 1, 8, 8], data } });
//
// Everything comes from this bundle (models/, runtime/): nothing is fetched from any other origin.
// Files are found through bundle.files.mjs (URLs that an app's bundler rewrites to where it
// emitted them), or under load({ baseUrl }). The contract is documented in onnx-bundler's
// docs/reference/bundle-mjs.md.

import {
  BundleError,
  checkOptions,
  checkSchemaVersion,
  DECODING_KINDS,
  graphFor,
  importFailure,
  makeFeeds,
  noExecutionProvider,
  pickSession,
  sessionFailure,
  taskOf,
} from './bundle.core.mjs';
import { manifest as MANIFEST, urls as FILE_URLS, modules as TEXT_MODULES } from './bundle.files.mjs';
import { fetchFile, fetchedPath, stored } from './bundle.fetch.mjs';
import { environment, planFits, preflightOf, refusal } from './bundle.preflight.mjs';
import { fetchJson, openSession, withSessionConfig } from './bundle.session.mjs';
import { WorkerSession } from './bundle.worker-session.mjs';

export { BundleError, ERROR_CODES, SCHEMA_VERSION, sessionsOf } from './bundle.core.mjs';
export { clearCache } from './bundle.fetch.mjs';

const MODULE_URL = import.meta.url;

// The task API's modules (web/tasks/), for a bundle built with --task: imported while load()
// fetches the model, not on the way to it, and not at all for a bundle without a task.
function importTaskApi(manifest) {
  if (!manifest.task) return null;
  const imported = import('./tasks/index.mjs');
  imported.catch(() => {}); // awaited once the session is open: a failure surfaces there
  return imported;
}

// A decoder's KV cache (text generation's, a speech model's decoder session's: present.*, the
// outputs of the session `spec` opens): on WebGPU it stays on the GPU between steps.
function deviceOutputs(manifest, spec) {
  if (!DECODING_KINDS.includes(manifest.task?.kind)) return [];
  return spec.outputs.map((output) => output.name).filter((name) => name.startsWith('present.'));
}

function folderUrl(baseUrl) {
  const base = new URL(baseUrl, globalThis.location?.href ?? MODULE_URL);
  if (!base.pathname.endsWith('/')) base.pathname += '/';
  return base;
}

// A bundle file's URL: where the app's bundler put it, or under baseUrl when one is given.
function fileUrl(path, base) {
  if (base) return new URL(path, base).href;
  const url = FILE_URLS[path];
  if (!url) throw new BundleError('fetch-failed', `${path} is not a file of this bundle`);
  // Absolute, also where a bundler's stand-in for URL gives a path (Turbopack: /_next/static/…).
  return new URL(url.href, globalThis.location?.href ?? MODULE_URL).href;
}

// A file as bundle.session.mjs fetches it: its entry of bundle.json's `files` (bytes, sha256,
// the parts a static host needed it split into) and the URL of each piece.
function fileRequest(manifest, path, base) {
  const entry = manifest.files?.find((file) => file.path === path) ?? { path };
  const pieces = entry.parts ?? [entry];
  return { entry, urls: Object.fromEntries(pieces.map((piece) => [fetchedPath(piece),
    fileUrl(fetchedPath(piece), base)])) };
}

// What load(options) would try and fetch, and whether it fits, before fetching any of it
// (bundle.preflight.mjs; docs/reference/bundle-mjs.md).
export async function preflight(options = {}) {
  const eps = checkOptions(options);
  const manifest = await loadManifest(options.baseUrl === undefined ? undefined
    : folderUrl(options.baseUrl).href);
  return preflightOf(manifest, eps, options, await environment(eps));
}

// bundle.json: the copy built into bundle.files.mjs, or the one under baseUrl.
export async function loadManifest(baseUrl) {
  if (baseUrl === undefined) return checkSchemaVersion(structuredClone(MANIFEST));
  return checkSchemaVersion(await fetchJson(new URL('bundle.json', folderUrl(baseUrl))));
}

// Feeds are checked here and handed on as plain tensors; the session (on this page or in the
// worker) makes its own runtime's tensors of them.
class PlainTensor {
  constructor(type, data, dims) {
    this.type = type;
    this.data = data;
    this.dims = [...dims];
  }
}

// A text bundle's tokenizer and config files, and its text modules, fetched while the model is:
// the warm-up and the first call need them, and asked for only then they would come after the
// session. path -> promise of the bytes, for Model._file.
function fetchTextEarly(manifest, base) {
  const files = new Map();
  for (const path of Object.values(manifest.task?.files ?? {})) {
    const { entry, urls } = fileRequest(manifest, path, base);
    const fetching = fetchFile(entry, urls, null, { stage: 'text' });
    fetching.catch(() => {}); // a failure is met again, and reported, when the file is read
    files.set(path, fetching);
  }
  if (files.size) {
    for (const imported of Object.values(TEXT_MODULES)) imported().catch(() => {});
  }
  return files;
}

class Model {
  constructor({ session, ep, fallbackReasons, variant, variantReason, manifest, loadMs, worker,
                opened, taskApi, base, spec, textFiles = new Map() }) {
    this.ep = ep;
    this.fallbackReasons = fallbackReasons;
    this.fallbackReason = fallbackReasons.length
      ? fallbackReasons.map((reason) => reason.detail).join('; ')
      : null;
    this.session = spec.name; // the session of the pipeline this model runs
    this.variant = variant.name;
    // why not the default variant on this EP (fp16 where the adapter lacks shader-f16), or null
    this.variantReason = variantReason ?? null;
    this.manifest = manifest;
    this.inputs = spec.inputs;
    this.outputs = spec.outputs;
    this.loadMs = loadMs;
    this.worker = worker;
    this.threads = opened.threads; // wasm threads: more than 1 only when cross-origin isolated
    this.crossOriginIsolated = opened.crossOriginIsolated;
    this._session = session;
    this._taskApi = taskApi;
    this._base = base;
    this._textFiles = textFiles; // path -> promise of bytes: fetched during load (fetchTextEarly)
  }

  async run(feeds) {
    const outputs = await this._live().run(makeFeeds(PlainTensor, this.inputs, feeds));
    const plain = {};
    for (const spec of this.outputs) plain[spec.name] = outputs[spec.name];
    return plain;
  }

  async release() {
    const session = this._session;
    const decoder = this._decoder; // a speech model's second session (load() opened it)
    this._session = null;
    this._decoder = null;
    await Promise.all([session?.release(), decoder?.release()]);
  }

  // Internal, for text generation (web/text/generate.mjs): run() where `feeds` may hold handles
  // of kept outputs ({ kept }) and the outputs named in `keep` stay with the session (on WebGPU,
  // on the GPU) as such handles, until _drop() disposes them; only the outputs in `fetch` are
  // answered (null: all). Not part of the API.
  async _step(feeds, keep, fetch = null) {
    const session = this._live();
    const kept = Object.keys(feeds).filter((name) => feeds[name]?.kept !== undefined);
    const plain = Object.fromEntries(Object.entries(feeds).filter(([n]) => !kept.includes(n)));
    const tensors = makeFeeds(PlainTensor, this.inputs.filter((s) => !kept.includes(s.name)),
      plain);
    for (const name of kept) tensors[name] = feeds[name];
    return session.run(tensors, { keep, fetch });
  }

  async _drop(ids) {
    if (ids.length) await this._session?.drop(ids);
  }

  // Internal, for text generation on WASM in worker mode (web/text/generate.mjs): an appended KV
  // cache (bundle.core.mjs's AppendedCache) kept in the worker, beside the session, from `past`
  // (zero-length), as { run(feeds) -> logits, release() }: a step's feeds are its ids, mask and
  // positions, not the cache. Not part of the API.
  async _workerCache(layout, past) {
    const typed = (feeds) => makeFeeds(PlainTensor,
      this.inputs.filter((spec) => spec.name in feeds), feeds);
    const id = await this._live().openCache(layout, typed(past));
    return {
      run: async (feeds) => this._live().cacheStep(id, typed(feeds)),
      release: async () => { // after model.release() the worker is gone, and the cache with it
        await this._session?.releaseCache(id);
      },
    };
  }

  _live() {
    if (!this._session) {
      throw new BundleError('released', 'this model was released; load() it again');
    }
    return this._session;
  }

  _runImage(source, task, transfer) {
    return this._live().runImage(source, task, transfer);
  }

  // A text module the bundle carries (web/tasks/text.mjs: text/tokenizer.mjs, text/generate.mjs),
  // imported through bundle.files.mjs, where an app's bundler sees the import.
  _textModule(path) {
    const imported = TEXT_MODULES[path];
    if (!imported) {
      return Promise.reject(new BundleError('wrong-task', `this bundle does not carry ${path}`));
    }
    return imported();
  }

  // A bundle file's bytes (a text task's tokenizer files, web/tasks/text.mjs).
  async _file(path) {
    const early = this._textFiles.get(path);
    this._textFiles.delete(path); // read once: the tokenizer keeps what it needs
    const fetchNow = () => {
      const { entry, urls } = fileRequest(this.manifest, path, this._base);
      return fetchFile(entry, urls, null, { stage: 'text' });
    };
    return early ? early.catch(fetchNow) : fetchNow(); // a failed early fetch is tried again
  }

  // The task API (bundle built with --task; see web/tasks/): labels, boxes, streamed audio,
  // embeddings. classify() takes an image, or text(s) for a text-classification bundle.
  async classify(source, options) {
    const text = this.manifest.task?.kind === 'text-classification';
    const task = taskOf(this.manifest, text ? 'text-classification' : 'image-classification',
      'classify');
    return this._taskApi.classify(this, task, source, options);
  }

  async detect(source, options) {
    const task = taskOf(this.manifest, 'object-detection', 'detect');
    return this._taskApi.detect(this, task, source, options);
  }

  stream() {
    const task = taskOf(this.manifest, 'audio-stream', 'stream');
    return this._taskApi.stream(this, task);
  }

  async embed(texts, options) {
    const task = taskOf(this.manifest, 'feature-extraction', 'embed');
    return this._taskApi.embed(this, task, texts, options);
  }

  // A text's entities (token-classification): { entity, score, start, end, word }.
  async tokens(texts) {
    const task = taskOf(this.manifest, 'token-classification', 'tokens');
    return this._taskApi.tokens(this, task, texts);
  }

  // A prompt or chat messages continued (text-generation): { text, tokenIds, timings }.
  async generate(input, options) {
    const task = taskOf(this.manifest, 'text-generation', 'generate');
    return this._taskApi.generate(this, task, input, options);
  }

  // Speech to text (automatic-speech-recognition): { text, tokens, windows, segments? }.
  async transcribe(audio, options) {
    const task = taskOf(this.manifest, 'automatic-speech-recognition', 'transcribe');
    if (!this._decoder) {
      throw new BundleError('released', 'this model was released; load() it again');
    }
    return this._taskApi.transcribe(this, task, audio, options);
  }

  // Live speech to text of a MediaStream (web/text/listen.mjs): the final transcripts.
  async listen(stream, options) {
    const task = taskOf(this.manifest, 'automatic-speech-recognition', 'listen');
    if (!this._decoder) {
      throw new BundleError('released', 'this model was released; load() it again');
    }
    return this._taskApi.listen(this, task, stream, options);
  }
}

// The kinds whose pipeline runs a second session beside the primary one, and its name.
const SECOND_SESSION = { 'automatic-speech-recognition': 'decoder' };

export async function load(options = {}) {
  const started = performance.now();
  const eps = checkOptions(options);
  if (options.warmUp !== undefined && typeof options.warmUp !== 'boolean') {
    throw new BundleError('bad-option', `warmUp must be true or false, got ${
      JSON.stringify(options.warmUp)}`);
  }
  const base = options.baseUrl === undefined ? null : folderUrl(options.baseUrl);
  const onProgress = options.onProgress;
  onProgress?.({ stage: 'manifest', loaded: 0, total: 1 });
  const manifest = await loadManifest(base?.href);
  onProgress?.({ stage: 'manifest', loaded: 1, total: 1 });

  const spec = pickSession(manifest, options.session); // an unknown name fails here
  const taskApi = importTaskApi(manifest);
  // (a speech model's second session, loaded by this load(), reads none of them)
  const textFiles = options.session === undefined ? fetchTextEarly(manifest, base) : new Map();
  const warmUp = options.warmUp ?? DECODING_KINDS.includes(manifest.task?.kind);
  const reasons = [];
  const models = new Map(); // model bytes by URL, fetched once across the EPs tried
  const worker = options.worker ? new WorkerSession() : null;
  try {
    // The limits are checked before a byte is fetched: rather than download what cannot run.
    const plan = planFits(manifest, eps, options, await environment(eps));
    const refused = refusal(plan);
    if (refused) throw refused;
    for (const attempt of plan) {
      const { ep, variant } = attempt;
      if (attempt.reason) {
        reasons.push(attempt.reason);
        continue;
      }
      const build = manifest.runtime.builds[ep];
      const request = {
        runtime: { module: fileUrl(build.module, base), mjs: fileUrl(build.mjs, base),
                   wasm: fileRequest(manifest, build.wasm, base) },
        // an EP's own graph where the variant has one (int4 format=per-ep's qdq form on
        // WebGPU), reading the same data files
        model: fileRequest(manifest, graphFor(variant, ep), base),
        data: (variant.data ?? []).map((path) => fileRequest(manifest, path, base)),
        ep,
        numThreads: options.numThreads,
        cache: options.cache !== false,
        // __sessionOptions: internal, for onnx-bundler's harness (web/dev/profile.mjs), not part
        // of the API; the variant's own session config entries (int4 format=qdq) go into it.
        sessionOptions: withSessionConfig(options.__sessionOptions, variant.session_config?.[ep]),
        deviceOutputs: deviceOutputs(manifest, spec),
      };
      let session;
      try {
        session = worker
          ? await worker.open(request, onProgress)
          : await openSession({ ...request, onProgress, models, waitStored: false });
      } catch (error) {
        // A runtime that does not import or a session that is not created: the next EP. A model
        // that cannot be fetched fails on every EP, and bytes that fail their sha256 are never
        // swapped for other ones: load() rejects.
        if (error?.code === 'integrity') throw error;
        if (error?.stage === 'runtime') reasons.push(importFailure(ep, error));
        else if (error?.stage === 'session') reasons.push(sessionFailure(ep, error));
        else throw error;
        continue;
      }
      const model = new Model({
        session, spec, ep, variant, variantReason: attempt.variantReason, manifest,
        fallbackReasons: reasons, worker: worker !== null,
        opened: session.opened, taskApi: await taskApi, base, loadMs: 0, textFiles,
      });
      if (SECOND_SESSION[manifest.task?.kind] && options.session === undefined) {
        // a speech model runs its decoder session beside the encoder: opened on the same EPs
        try {
          // on the EP the encoder got, in its default variant (fp32 for now)
          model._decoder = await load({ ...options, session: SECOND_SESSION[manifest.task.kind],
            executionProviders: [ep], variant: undefined, warmUp: false });
        } catch (error) {
          await model.release().catch(() => {});
          throw error;
        }
      }
      if (warmUp) {
        try {
          await model._taskApi.warmUp(model, manifest.task);
        } catch (error) {
          await model.release().catch(() => {}); // the session, and a worker's, not left behind
          throw error;
        }
      }
      await stored(); // the files kept in Cache Storage (the writes overlapped the warm-up)
      model.loadMs = performance.now() - started; // the warm-up is part of the load
      return model;
    }
  } catch (error) {
    worker?.terminate();
    throw error;
  }
  worker?.terminate();
  throw noExecutionProvider(reasons);
}
