// Streaming audio: resampling, chunking and the state carried between chunks. The spec is
// bundler/tasks/audio.py. And audio sources read as mono samples (model.transcribe()).

import { BundleError } from '../bundle.core.mjs';

export function resample(samples, fromRate, toRate) {
  if (fromRate === toRate || samples.length === 0) return Float32Array.from(samples);
  const count = Math.floor((samples.length * toRate) / fromRate);
  const out = new Float32Array(count);
  const last = samples.length - 1;
  for (let i = 0; i < count; i++) {
    const position = (i * fromRate) / toRate;
    const index = Math.floor(position);
    const fraction = position - index;
    out[i] = samples[index] * (1 - fraction) + samples[Math.min(index + 1, last)] * fraction;
  }
  return out;
}

// An AudioBuffer's channels averaged into one (the mono mixdown), each sample's sum in float64.
function mixdown(buffer) {
  const channels = Array.from({ length: buffer.numberOfChannels }, (_, c) => buffer.getChannelData(c));
  if (channels.length === 1) return channels[0];
  const mono = new Float32Array(buffer.length);
  for (let i = 0; i < mono.length; i++) {
    let sum = 0;
    for (const channel of channels) sum += channel[i];
    mono[i] = sum / channels.length;
  }
  return mono;
}

const isAudioBuffer = (source) => typeof source?.getChannelData === 'function'
  && Number.isInteger(source.numberOfChannels) && source.sampleRate > 0;

/**
 * { samples, rate } of an audio source: a Float32Array of mono samples at `sampleRate`, an
 * AudioBuffer (its channels mixed down to mono, at its own sampleRate), or a Blob/File of an
 * encoded recording, decoded by the browser's decodeAudioData at `decodeRate` (it resamples to
 * the rate of the context it decodes in). A Blob needs a page's AudioContext: a worker has none,
 * so decode there first and pass the AudioBuffer's samples.
 */
export async function audioOf(source, sampleRate, decodeRate) {
  if (source instanceof Float32Array) {
    if (!(sampleRate > 0)) throw new RangeError(`bad sampleRate ${sampleRate}`);
    return { samples: source, rate: sampleRate };
  }
  if (isAudioBuffer(source)) return { samples: mixdown(source), rate: source.sampleRate };
  if (typeof Blob === 'undefined' || !(source instanceof Blob)) {
    throw new BundleError('bad-source', 'expected a Float32Array of mono samples, an AudioBuffer,'
      + ' or a Blob/File of a recording');
  }
  const Context = globalThis.OfflineAudioContext ?? globalThis.AudioContext;
  if (!Context) {
    throw new BundleError('bad-source', 'decoding a Blob needs the page\'s AudioContext, which'
      + ' this context (a worker?) lacks: decode it on the page and pass an AudioBuffer\'s samples');
  }
  const context = globalThis.OfflineAudioContext
    ? new Context(1, 1, decodeRate) : new Context({ sampleRate: decodeRate });
  try {
    return { samples: mixdown(await context.decodeAudioData(await source.arrayBuffer())),
             rate: decodeRate };
  } catch (error) {
    throw new BundleError('bad-source', `the Blob is not audio the browser decodes (${
      error?.message ?? error})`, { cause: error });
  } finally {
    if (context.close) await context.close();
  }
}

const ARRAYS = { float32: Float32Array, float16: Uint16Array, float64: Float64Array,
                 int64: BigInt64Array, int32: Int32Array };

function zeros(spec) {
  const dims = (spec.shape ?? []).map((dim) => (typeof dim === 'number' ? dim : 1));
  const size = dims.reduce((a, b) => a * b, 1);
  return { type: spec.type, dims, data: new (ARRAYS[spec.type] ?? Float32Array)(size) };
}

// model.stream(): push(samples, sampleRate) -> the results of the chunks completed;
// flush() runs the last partial chunk (zero-padded); reset() starts over.
export class AudioStream {
  constructor(model, task) {
    this._model = model;
    this._task = task;
    this._specs = Object.fromEntries(model.inputs.map((spec) => [spec.name, spec]));
    this._queue = Promise.resolve();
    this.reset();
  }

  reset() {
    this._pending = new Float32Array(0);
    this._context = new Float32Array(this._task.context_size ?? 0);
    this._index = 0;
    this._state = Object.fromEntries(Object.keys(this._task.state ?? {}).map(
      (name) => [name, zeros(this._specs[name])]));
  }

  // Calls run one after the other, in the order they were made (the state is sequential).
  push(samples, sampleRate = this._task.sample_rate) {
    const resampled = resample(samples, sampleRate, this._task.sample_rate);
    const joined = new Float32Array(this._pending.length + resampled.length);
    joined.set(this._pending);
    joined.set(resampled, this._pending.length);
    const chunk = this._task.chunk_size;
    const whole = Math.floor(joined.length / chunk) * chunk;
    this._pending = joined.slice(whole);
    return this._serial(async () => {
      const results = [];
      for (let at = 0; at < whole; at += chunk) {
        results.push(await this._chunk(joined.slice(at, at + chunk)));
      }
      return results;
    });
  }

  flush() {
    if (this._pending.length === 0) return this._serial(async () => []);
    const chunk = new Float32Array(this._task.chunk_size);
    chunk.set(this._pending);
    this._pending = new Float32Array(0);
    return this._serial(async () => [await this._chunk(chunk)]);
  }

  _serial(work) {
    const result = this._queue.then(work);
    this._queue = result.catch(() => {});
    return result;
  }

  async _chunk(samples) {
    const task = this._task;
    const spec = this._specs[task.input];
    const given = new Float32Array(this._context.length + samples.length);
    given.set(this._context);
    given.set(samples, this._context.length);
    if (this._context.length) this._context = given.slice(given.length - this._context.length);
    const dims = spec.shape?.length === 2 ? [1, given.length] : [given.length];
    const feeds = { [task.input]: { type: 'float32', dims, data: given }, ...this._state };
    if (task.sample_rate_input) {
      const rate = zeros(this._specs[task.sample_rate_input]);
      rate.data.fill(rate.type === 'int64' ? BigInt(task.sample_rate) : task.sample_rate);
      feeds[task.sample_rate_input] = rate;
    }
    const outputs = await this._model.run(feeds);
    this._state = Object.fromEntries(Object.entries(task.state ?? {}).map(
      ([name, output]) => [name, outputs[output]]));
    const values = Array.from(outputs[task.output].data, Number);
    const index = this._index++;
    return { index, start: (index * task.chunk_size) / task.sample_rate,
             end: ((index + 1) * task.chunk_size) / task.sample_rate,
             score: values.length ? values[0] : 0, values };
  }
}

// Runs of chunks scoring >= threshold, as { start, end } in seconds.
export function segments(chunks, threshold) {
  const found = [];
  for (const chunk of chunks) {
    if (chunk.score < threshold) continue;
    const last = found[found.length - 1];
    if (last && last.end === chunk.start) last.end = chunk.end;
    else found.push({ start: chunk.start, end: chunk.end });
  }
  return found;
}
