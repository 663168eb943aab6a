// model.transcribe() (automatic-speech-recognition): the browser (and Node) twin of
// bundler/text/whisper_run.py's transcribe(), step for step. The audio is resampled to 16 kHz and
// cut into 30 s windows with strides (whisper_windows.mjs); each window's log-mel features
// (tasks/logmel.mjs) go through the `encoder` session, then the merged `decoder` session decodes
// greedily by the spec (whisper.mjs): step 0 feeds the prompt with zero-length pasts and
// use_cache_branch false, and its present.N.encoder.* are the cross-attention cache of every
// later step, which feeds one token with use_cache_branch true and takes the new
// present.N.decoder.*. The windows' tokens are merged into chunks as the native side does.
// The cache stays with the decoder's session (decoding.mjs's KeptCache; on WebGPU on the GPU).
import { audioOf, resample } from '../tasks/audio.mjs';
import { logMel, logMelSpec } from '../tasks/logmel.mjs';
import {
  checkSignal, KeptCache, teacherForced as forced, textStream,
} from './decoding.mjs';
import {
  choose, detectLanguage, languageId, needsLanguage, processLogits, prompt, segments, settingsOf,
  settledLength, WINDOW_FRAMES,
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
  const pastNames = past.map((spec) => spec.name);
  const presents = pastNames.map((name) => name.replace('past_key_values', 'present'));
  return { names: pastNames, presents, heads, size, type: first.type,
           selfAttention: presents.filter((name) => name.includes('.decoder.')) };
}

function emptyPast(layout) {
  const past = {};
  for (const name of layout.names) {
    past[name] = { data: new ZEROS[layout.type](0), dims: [1, layout.heads, 0, layout.size] };
  }
  return past;
}

const WHAT = 'transcription'; // the AbortError's message

// What one transcribe() or window() call took (its result's `timings`): the encoder's runs, the
// decoder's steps, and when the first text came, from the call's start.
class Clock {
  constructor(seconds) {
    this.started = performance.now();
    this.seconds = seconds;
    this.encoderMs = 0;
    this.decoderMs = 0;
    this.steps = 0;
    this.firstTextMs = null;
  }

  async time(part, work) {
    const started = performance.now();
    try {
      return await work();
    } finally {
      this[part] += performance.now() - started;
    }
  }

  text() {
    this.firstTextMs ??= performance.now() - this.started;
  }

  timings() {
    const totalMs = performance.now() - this.started;
    return {
      audioSeconds: this.seconds, totalMs, encoderMs: this.encoderMs, decoderMs: this.decoderMs,
      decoderSteps: this.steps,
      decoderStepsPerS: this.decoderMs > 0 ? this.steps * 1000 / this.decoderMs : null,
      firstTextMs: this.firstTextMs,
      // audio seconds per second of compute: above 1 is faster than real time
      realTimeFactor: totalMs > 0 ? this.seconds * 1000 / totalMs : null,
    };
  }
}

// One decoding call's decoder steps over one encoding (whisper_run.WhisperSessions.step): step 0
// feeds the prompt with zero-length pasts and keeps every present; each later step feeds one
// token and keeps the new self-attention cache (the cached branch's cross-attention outputs are
// placeholders, dropped at once: the cross-attention cache is step 0's).
class Decoding extends KeptCache {
  constructor(decoder, layout, hidden) {
    super((feeds, keep) => decoder._step(feeds, keep), (ids) => decoder._drop(ids),
      emptyPast(layout));
    this._layout = layout;
    this._hidden = hidden;
    this._worker = decoder.worker;
    this._steps = 0;
  }

  // The logits of the last id of `ids`, after the steps so far.
  async logits(ids) {
    const { data, dims } = this._hidden;
    const cached = this._steps > 0;
    const feeds = {
      input_ids: { data: BigInt64Array.from(ids, BigInt), dims: [1, ids.length] },
      // The cached branch reads the cross-attention cache, not the hidden states: none are sent
      // (whisper_run.py's step). A worker's run() takes the feeds' buffers (transferred,
      // detached here): it gets a copy.
      encoder_hidden_states: cached ? { data: new data.constructor(0), dims: [1, 0, dims[2]] }
        : { data: this._worker ? data.slice() : data, dims },
      use_cache_branch: { data: [cached], dims: [1] },
    };
    const { presents, selfAttention } = this._layout;
    const outputs = await this.run(feeds, presents, this._steps === 0 ? presents : selfAttention);
    this._steps += 1;
    const logits = outputs.logits;
    const vocab = logits.dims[logits.dims.length - 1];
    return logits.data.subarray(logits.data.length - vocab);
  }
}

/**
 * A transcriber over a speech bundle's two sessions (loaded models: `encoder` runs the log-mel
 * features, `decoder` is stepped with its cache kept) and its files ({ tokenizer, generation,
 * preprocessor }): transcribe() any audio; window() one window of at most 30 s, for a caller
 * that cuts the audio itself (live transcription).
 */
export class Transcriber {
  constructor(encoder, decoder, task, files) {
    this.encoder = encoder;
    this.decoder = decoder;
    this.task = task;
    this.tokenizer = files.tokenizer;
    this.settings = settingsOf(files.generation);
    this.spec = logMelSpec(files.preprocessor);
    this.layout = cacheLayout(decoder.inputs);
  }

  async _encode(features, signal, clock) {
    checkSignal(signal, WHAT);
    const outputs = await clock.time('encoderMs', () => this.encoder.run({
      [this.task.input]: { data: features, dims: [1, this.spec.feature_size, WINDOW_FRAMES] },
    }));
    return outputs[this.task.output];
  }

  // One decoder step's logits, timed.
  async _step(decoding, ids, clock) {
    const logits = await clock.time('decoderMs', () => decoding.logits(ids));
    clock.steps += 1;
    return logits;
  }

  // The language detected on an encoding: the logits after <|startoftranscript|>.
  async _detect(hidden, signal, clock) {
    checkSignal(signal, WHAT);
    const decoding = new Decoding(this.decoder, this.layout, hidden);
    try {
      return detectLanguage(this.settings,
        await this._step(decoding, [this.settings.decoderStart], clock));
    } finally {
      await decoding.release();
    }
  }

  // One decoding call (whisper_run.decode_call): the prompt, then a token a step until eos;
  // onToken(token, generated) after each.
  async _call(features, seek, run, detected, onToken, clock) {
    const { settings } = this;
    const hidden = await this._encode(features, run.signal, clock);
    let found = detected;
    if (found === null && needsLanguage(settings, run.language, run.task)) {
      found = await this._detect(hidden, run.signal, clock);
    }
    const ids = prompt(settings, run.language, run.task, run.timestamps, found);
    const generated = [];
    const decoding = new Decoding(this.decoder, this.layout, hidden);
    try {
      let pending = ids;
      while (ids.length + generated.length < settings.maxLength) {
        checkSignal(run.signal, WHAT);
        const logits = await this._step(decoding, pending, clock);
        run.onStep?.(seek, ids, generated, logits);
        const token = choose(processLogits(logits, generated, settings, run.timestamps));
        generated.push(token);
        onToken(token, generated);
        if (token === settings.eos) break;
        pending = [token];
      }
    } finally {
      await decoding.release();
    }
    return generated;
  }

  // The run's settings from transcribe()'s options.
  // (`_onStep(seek, prompt, generated, logits)`: each decoding step's logits, internal, for the
  // build's check: see teacherForced.)
  _run({ language = null, task = null, timestamps = false, signal = null, _onStep = null }) {
    return { language: language == null ? null : languageId(this.settings, language), task,
             timestamps, signal, onStep: _onStep };
  }

  /**
   * One window (whisper_run.transcribe_window): `samples` at 16 kHz, at most 30 s, decoded in
   * calls from `seek` on (each on the features zero-padded to 30 s) until seek reaches the end.
   * { tokens, text, segments }: the window's tokens (timestamps included; what the native run
   * gives), its text, and its segments ({ start, end, tokens }, seconds from the window's
   * start). onText(piece) gets the text as it is decoded, a segment not closed yet held back
   * (see _window); the pieces joined are `text`, the text of `tokens`.
   * `timings`: see transcribe().
   */
  async window(samples, options = {}) {
    const clock = new Clock(samples.length / RATE);
    return { ...await this._window(samples, options, clock), timings: clock.timings() };
  }

  async _window(samples, options, clock) {
    const run = this._run(options);
    const mels = this.spec.feature_size;
    const features = logMel(samples, RATE, this.spec);
    const total = features.length / mels;
    const detected = needsLanguage(this.settings, run.language, run.task)
      ? await this._detect(await this._encode(this._padded(features, 0, total), run.signal,
        clock), run.signal, clock)
      : null;
    // The text streams as the window's segments keep it: a call's tokens after its last
    // timestamp pair are a segment not closed yet, which segments() drops when the call ends
    // without closing it (seek goes back and decodes that audio again), so their text waits
    // until the segment closes or the call ends; the text before the pair streams at once.
    const { eos } = this.settings;
    const textOf = (tokens) => tokens.filter((token) => token < eos); // no special or timestamp
    const kept = []; // the text tokens of the segments of the calls so far
    const stream = textStream([], (piece) => {
      clock.text(); // the first text a caption could show
      options.onText?.(piece);
    });
    const onToken = (token, generated) => {
      options.onToken?.(token);
      const settled = generated.slice(0, settledLength(generated, this.settings));
      stream.push(this.tokenizer.decode([...kept, ...textOf(settled)]));
    };
    const found = [];
    for (let seek = 0; seek < total;) {
      const frames = Math.min(WINDOW_FRAMES, total - seek);
      const generated = await this._call(this._padded(features, seek, total), seek, run,
        detected, onToken, clock);
      const made = segments(generated, this.settings, seek, frames);
      found.push(...made.segments);
      for (const segment of made.segments) kept.push(...textOf(segment.tokens));
      stream.push(this.tokenizer.decode(kept)); // a last segment closed by the call's end
      seek += made.advance;
    }
    return { tokens: found.flatMap((segment) => segment.tokens),
             text: stream.finish(this.tokenizer.decode(kept)), segments: found };
  }

  // The features [mels * total] from frame `seek` on, zero-padded (or cut) to WINDOW_FRAMES.
  _padded(features, seek, total) {
    const mels = this.spec.feature_size;
    const frames = Math.min(WINDOW_FRAMES, total - seek);
    const piece = new Float32Array(mels * WINDOW_FRAMES);
    for (let m = 0; m < mels; m++) {
      piece.set(features.subarray(m * total + seek, m * total + seek + frames), m * WINDOW_FRAMES);
    }
    return piece;
  }

  /**
   * { text, tokens, windows, segments? } of `audio` (see audioOf in tasks/audio.mjs: a
   * Float32Array at `sampleRate`, an AudioBuffer or a Blob): `windows` each 30 s window's tokens
   * (what the native run is compared on), `tokens` the merged text tokens, `segments` (with
   * timestamps) the merged chunks { start, end, text, tokens }. onText(piece, window) streams
   * each window's text as it is decoded. `timings`: the audio's seconds, the call's ms (from the
   * audio decoded and at 16 kHz), the encoder's and the decoder's ms, the decoder's steps and
   * steps/s, the first streamed text's ms, and the real-time factor (audio seconds per second).
   */
  async transcribe(audio, options = {}) {
    const { sampleRate = RATE, timestamps = false, onText } = options;
    const { signal, spans } = await this._windowsOf(audio, sampleRate);
    const clock = new Clock(signal.length / RATE);
    const outputs = [];
    for (const [index, span] of spans.entries()) {
      const found = await this._window(signal.subarray(span.start, span.end), {
        ...options, onText: onText && ((piece) => onText(piece, index)),
        _onStep: options._onStep && ((...step) => options._onStep(index, ...step)) }, clock);
      outputs.push(found.tokens);
    }
    const chunks = merge(outputs, spans.map(strideSeconds), this.settings, timestamps);
    const tokens = chunks.flatMap((chunk) => chunk.tokens);
    const result = { text: this.tokenizer.decode(tokens), tokens, windows: outputs };
    if (timestamps) {
      result.segments = chunks.map((chunk) => ({
        start: chunk.start, end: chunk.end, text: this.tokenizer.decode(chunk.tokens),
        tokens: chunk.tokens,
      }));
    }
    result.timings = clock.timings();
    return result;
  }

  // The audio (see transcribe()) at 16 kHz, and its windows' spans.
  async _windowsOf(audio, sampleRate) {
    const { samples, rate } = await audioOf(audio, sampleRate, RATE);
    const signal = resample(samples, rate, RATE);
    return { signal, spans: windows(signal.length) };
  }

  /**
   * Internal, for the build's check (web/dev/conformance.mjs): the decoder's logits fed the
   * native run's tokens over this side's own encoding of each call's features (decoding.mjs's
   * teacherForced; bundler/text/whisper_bundle.py's window_steps). `cases[c][w]`: window w's
   * calls { seek, ids, prompt, at } in case c; per case, per window, the rows of its calls in
   * order. A window's call at one seek is encoded once for every case. `known[c][w][k]`: the
   * rows of call k already found (a transcript's own steps, see web/dev/conformance.mjs),
   * which are not run again; null where not.
   */
  async teacherForced(audio, sampleRate, cases, known = []) {
    const { signal, spans } = await this._windowsOf(audio, sampleRate);
    const mels = this.spec.feature_size;
    const features = spans.map((span) => logMel(signal.subarray(span.start, span.end), RATE,
      this.spec));
    const clock = new Clock(0); // not reported
    const encodings = new Map(); // `${window}:${seek}` -> its encoding
    const encoding = async (window, seek) => {
      const key = `${window}:${seek}`;
      if (!encodings.has(key)) {
        const total = features[window].length / mels;
        encodings.set(key, await this._encode(this._padded(features[window], seek, total), null,
          clock));
      }
      return encodings.get(key);
    };
    const answer = [];
    for (const [index, windowCalls] of cases.entries()) {
      const rows = [];
      for (const [window, calls] of windowCalls.entries()) {
        const found = [];
        for (const [call, { seek, ids, prompt: promptLength, at }] of calls.entries()) {
          const done = known[index]?.[window]?.[call];
          if (done) {
            found.push(...done);
            continue;
          }
          const decoding = new Decoding(this.decoder, this.layout, await encoding(window, seek));
          try {
            found.push(...await forced((pending) => decoding.logits(pending), ids, promptLength,
              at));
          } finally {
            await decoding.release();
          }
        }
        rows.push(found);
      }
      answer.push(rows);
    }
    return answer;
  }

  /** A first run (load's warmUp): the encoder on 30 s of silence, a prompt step and one step
   * with its cache, so shaders and kernels of both decoder branches are ready. */
  async warmUp() {
    const hidden = await this._encode(new Float32Array(this.spec.feature_size * WINDOW_FRAMES),
      null, new Clock(0));
    const decoding = new Decoding(this.decoder, this.layout, hidden);
    try {
      await decoding.logits([this.settings.decoderStart]);
      await decoding.logits([this.settings.eos]);
    } finally {
      await decoding.release();
    }
  }
}
