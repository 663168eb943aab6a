// The task API of a loaded model (see the README's Task apps): model.classify(), model.detect()
// and model.stream() call these with the model and bundle.json's `task` record.
import { BundleError } from '../bundle.core.mjs';
import { AudioStream, segments } from './audio.mjs';
import { topClasses } from './classify.mjs';
import { detections } from './detect.mjs';
import { runOnImage } from './image.mjs';

export { segments };

function taskOf(model, kind, method) {
  const task = model.manifest.task;
  if (task?.kind !== kind) {
    throw new BundleError('wrong-task', `${method}() needs a bundle built with --task ${kind};`
      + ` this one's task is ${task?.kind ?? 'generic'}`);
  }
  return task;
}

export async function classify(model, source, { topK } = {}) {
  const task = taskOf(model, 'image-classification', 'classify');
  const { output } = await runOnImage(model, source, task);
  return topClasses(output, task, topK);
}

export async function detect(model, source, { threshold } = {}) {
  const task = taskOf(model, 'object-detection', 'detect');
  const { output, place, width, height } = await runOnImage(model, source, task);
  return detections(output, task, place, width, height, threshold);
}

export function stream(model) {
  return new AudioStream(model, taskOf(model, 'audio-stream', 'stream'));
}
