// The task API of a loaded model (see docs/how-to/task-apps.md): model.classify(), model.detect(),
// model.stream(), model.embed() and model.tokens() call these with the model and bundle.json's `task` record (checked by
// taskOf in bundle.core.mjs). load() imports this module only for a bundle built with --task.
import { DECODING_KINDS } from '../bundle.core.mjs';
import { AudioStream, segments } from './audio.mjs';
import { topClasses } from './classify.mjs';
import { detections } from './detect.mjs';
import { forWorker, runOnImage } from './image.mjs';
import * as text from './text.mjs';

export { segments };

// The task kinds, keyed by bundle.json's task.kind (bundler/tasks/kinds/ is their Python side):
// the model method each answers through and what it is fed. What dispatches on the kind (the
// demo page) looks it up here.
export const KINDS = {
  'image-classification': { method: 'classify', media: 'image' },
  'object-detection': { method: 'detect', media: 'image' },
  'audio-stream': { method: 'stream', media: 'audio' },
  'feature-extraction': { method: 'embed', media: 'text' },
  'text-classification': { method: 'classify', media: 'text' },
  'token-classification': { method: 'tokens', media: 'text' },
  'text-generation': { method: 'generate', media: 'text' },
  'automatic-speech-recognition': { method: 'transcribe', media: 'audio' },
};

// On this page, or in the model's worker: the source is then sent there (an ImageBitmap of it,
// transferred; a Blob as it is) and read, resized and run in the worker.
async function onImage(model, source, task) {
  if (!model.worker) return runOnImage((feeds) => model.run(feeds), source, task);
  const sent = await forWorker(source);
  return model._runImage(sent.source, task, sent.transfer);
}

// An image, or (a text-classification bundle) a text or texts.
export async function classify(model, task, source, { topK, pairs } = {}) {
  if (task.kind === 'text-classification') {
    return text.classify(model, task, source, { topK, pairs });
  }
  const { output } = await onImage(model, source, task);
  return topClasses(output, task, topK);
}

export async function detect(model, task, source, { threshold } = {}) {
  const { output, place, width, height } = await onImage(model, source, task);
  return detections(output, task, place, width, height, threshold);
}

export function stream(model, task) {
  return new AudioStream(model, task);
}

export function embed(model, task, texts, options) {
  return text.embed(model, task, texts, options);
}

export function tokens(model, task, texts) {
  return text.tokens(model, task, texts);
}

export function generate(model, task, input, options) {
  return text.generate(model, task, input, options);
}

// Speech to text: { text, tokens, windows, segments? } (web/text/transcribe.mjs).
export function transcribe(model, task, audio, options) {
  return text.transcribe(model, task, audio, options);
}

// Live speech to text: the final transcripts of a MediaStream's utterances (web/text/listen.mjs).
export function listen(model, task, stream, options) {
  return text.listen(model, stream, options);
}

// A first run at load (load({ warmUp }), on by default for the decoding kinds): shaders compiled
// and kernels picked before the first call, so that its time to first token is not theirs.
export async function warmUp(model, task) {
  if (DECODING_KINDS.includes(task?.kind)) await text.warmUp(model, task);
}
