// model.transcribe() (automatic-speech-recognition): the browser (and Node) twin of
// bundler/text/whisper_run.py's transcribe(), step for step. The audio is resampled to 16 kHz and
// cut into 30 s windows with strides (whisper_windows.mjs); each window's log-mel features
// (tasks/logmel.mjs) go through the `encoder` session, then the merged `decoder` session decodes
// greedily by the spec (whisper.mjs): step 0 feeds the prompt with zero-length pasts and
// use_cache_branch false, and its present.N.encoder.* are the cross-attention cache of every
// later step, which feeds one token with use_cache_branch true and takes the new
// present.N.decoder.*. The windows' tokens are merged into chunks as the native side does.
import { logMel, logMelSpec } from '../tasks/logmel.mjs';
import { resample } from '../tasks/audio.mjs';
import {
  choose, detectLanguage, languageId, needsLanguage, processLogits, prompt, segments, settingsOf,
  WINDOW_FRAMES,
} from './whisper.mjs';
import { merge, RATE, strideSeconds, windows } from './whisper_windows.mjs';

const PAST = /^past_key_values\.(\d+)\.(decoder|encoder)\.(key|value)$/;
const ZEROS = { float32: Float32Array, float16: Uint16Array };

// The decoder's cache layout, from its inputs: [1, heads, past, headSize] per layer and part.
export function cacheLayout(inputs) {
  const names = new Set(inputs.map((spec) => spec.name));
  const past = inputs.filter((spec) => PAST.test(spec.name));
  if (!past.length || !['input_ids', 'encoder_hidden_states', 'use_cache_branch']
    .every((name) => names.has(name))) {
    throw new Error('not a merged Whisper decoder: it needs input_ids, encoder_hidden_states,'
      + ' use_cache_branch and past_key_values.N.decoder/encoder.key/value inputs');
  }
  const first = past[0];
  const [, heads, , size] = first.shape;
  if (!Number.isInteger(heads) || !Number.isInteger(size) || !(first.type in ZEROS)) {
    throw new Error(`${first.name} is ${first.type} ${JSON.stringify(first.shape)}: the heads`
      + ' and head size must be fixed, the type float');
  }
  return { names: past.map((spec) => spec.name), heads, size, type: first.type };
}

function emptyPast(layout) {
  const past = {};
  for (const name of layout.names) {
    past[name] = { data: new ZEROS[layout.type](0), dims: [1, layout.heads, 0, layout.size] };
  }
  return past;
}

// The sessions of one transcription: encode() and step(), as whisper_run.WhisperSessions.
class Sessions {
  constructor(encoder, decoder, task) {
    this.encoder = encoder;
    this.decoder = decoder;
    this.input = task.input;
    this.output = task.output;
    this.layout = cacheLayout(decoder.inputs);
  }

  async encode(features, mels) {
    const outputs = await this.encoder.run({ // a worker takes the buffer: a window is fed again
      [this.input]: { data: this.encoder.worker ? features.slice() : features,
                      dims: [1, mels, WINDOW_FRAMES] },
    });
    return outputs[this.output];
  }

  // The logits of the last id of `ids` after `past` (null: step 0) and the new past. A model in
  // a worker (load({ worker: true })) takes the feeds' buffers (transferred, detached here), so
  // it is given copies of what later steps feed again.
  async step(ids, hidden, past) {
    const kept = (tensor) => (this.decoder.worker
      ? { data: tensor.data.slice(), dims: tensor.dims } : { data: tensor.data, dims: tensor.dims });
    const feeds = {
      input_ids: { data: BigInt64Array.from(ids, BigInt), dims: [1, ids.length] },
      encoder_hidden_states: kept(hidden),
      use_cache_branch: { data: [past !== null], dims: [1] },
      ...Object.fromEntries(Object.entries(past ?? emptyPast(this.layout))
        .map(([name, tensor]) => [name, kept(tensor)])),
    };
    const outputs = await this.decoder.run(feeds);
    const next = { ...(past ?? {}) };
    for (const [name, value] of Object.entries(outputs)) {
      if (name.startsWith('present.') && (past === null || name.includes('.decoder.'))) {
        next[name.replace('present', 'past_key_values')] = { data: value.data, dims: value.dims };
      }
    }
    const { data, dims } = outputs.logits;
    const vocab = dims[dims.length - 1];
    return { logits: data.subarray(data.length - vocab), past: next };
  }
}

// One decoding call (whisper_run.decode_call): the prompt, then a token a step until eos.
async function decodeCall(sessions, features, mels, settings, language, task, timestamps,
  detected, onToken) {
  const hidden = await sessions.encode(features, mels);
  let found = detected;
  if (found === null && needsLanguage(settings, language, task)) {
    found = detectLanguage(settings, (await sessions.step([settings.decoderStart], hidden, null))
      .logits);
  }
  const ids = prompt(settings, language, task, timestamps, found);
  const generated = [];
  let past = null;
  let pending = ids;
  while (ids.length + generated.length < settings.maxLength) {
    const step = await sessions.step(pending, hidden, past);
    past = step.past;
    const token = choose(processLogits(step.logits, generated, settings, timestamps));
    generated.push(token);
    onToken?.(token);
    if (token === settings.eos) break;
    pending = [token];
  }
  return { prompt: ids, generated };
}

// One window's features [mels * frames] (whisper_run.transcribe_window): calls from `seek` on,
// each on the features zero-padded to WINDOW_FRAMES, until seek reaches the end.
async function transcribeWindow(sessions, features, mels, settings, language, task, timestamps,
  onToken) {
  const total = features.length / mels;
  let detected = null;
  if (needsLanguage(settings, language, task)) {
    const hidden = await sessions.encode(features, mels);
    detected = detectLanguage(settings,
      (await sessions.step([settings.decoderStart], hidden, null)).logits);
  }
  const found = [];
  for (let seek = 0; seek < total;) {
    const frames = Math.min(WINDOW_FRAMES, total - seek);
    const piece = new Float32Array(mels * WINDOW_FRAMES);
    for (let m = 0; m < mels; m++) {
      piece.set(features.subarray(m * total + seek, m * total + seek + frames), m * WINDOW_FRAMES);
    }
    const call = await decodeCall(sessions, piece, mels, settings, language, task, timestamps,
      detected, onToken);
    const made = segments(call.generated, settings, seek, frames);
    found.push(...made.segments);
    seek += made.advance;
  }
  return found.flatMap((segment) => segment.tokens);
}

function samplesOf(audio, sampleRate) {
  if (!(audio instanceof Float32Array)) {
    throw new TypeError('transcribe(audio): give the samples as a Float32Array (mono)');
  }
  if (!(sampleRate > 0)) throw new RangeError(`transcribe(): bad sampleRate ${sampleRate}`);
  return resample(audio, sampleRate, RATE);
}

/**
 * { text, tokens, windows, segments? } of `audio` (a Float32Array at `sampleRate`): `windows`
 * each 30 s window's tokens (what the native run is compared on), `tokens` the merged text
 * tokens, `segments` (with timestamps) the merged chunks { start, end, text, tokens }.
 */
export async function transcribe(encoder, decoder, task, files, audio, options = {}) {
  const { sampleRate = RATE, language = null, timestamps = false, onToken } = options;
  const settings = settingsOf(files.generation);
  const spec = logMelSpec(files.preprocessor);
  const languageToken = language == null ? null : languageId(settings, language);
  const sessions = new Sessions(encoder, decoder, task);
  const signal = samplesOf(audio, sampleRate);
  const spans = windows(signal.length);
  const outputs = [];
  for (const span of spans) {
    const features = logMel(signal.subarray(span.start, span.end), RATE, spec);
    outputs.push(await transcribeWindow(sessions, features, spec.feature_size, settings,
      languageToken, options.task ?? null, timestamps, onToken));
  }
  const chunks = merge(outputs, spans.map(strideSeconds), settings, timestamps);
  const tokens = chunks.flatMap((chunk) => chunk.tokens);
  const result = { text: files.tokenizer.decode(tokens), tokens, windows: outputs };
  if (timestamps) {
    result.segments = chunks.map((chunk) => ({
      start: chunk.start, end: chunk.end, text: files.tokenizer.decode(chunk.tokens),
      tokens: chunk.tokens,
    }));
  }
  return result;
}
