// model.listen() (automatic-speech-recognition): live transcription of a MediaStream. The audio
// is captured at the AudioContext's rate (an AudioWorklet, or a ScriptProcessor where worklets
// cannot run), cut into utterances by a speech detector (the frames' energy, or a voice-activity
// bundle's model.stream() when one is given), and each utterance goes through model.transcribe()
// (which resamples it to 16 kHz with tasks/audio.mjs's resampler): again and again while it
// grows (partial text), and once more when a silence ends it (final text).
const DEFAULTS = { silenceMs: 600, prerollMs: 200, partialMs: 1000, maxSeconds: 28,
                   threshold: 0.01 };
const FRAME_MS = 20; // the energy detector's frame
const KEPT_SECONDS = 2; // audio kept before speech starts: a late voice-activity answer's preroll
const WORKLET = 'onnx-bundler-capture';
// Posts its input's first channel in blocks of 2,048 samples (16 render quanta): fewer messages.
// Asked 'flush', it posts what it holds and then 'flushed': every block before is delivered then.
const WORKLET_SOURCE = `registerProcessor('${WORKLET}', class extends AudioWorkletProcessor {
  constructor() {
    super();
    this.block = new Float32Array(2048);
    this.used = 0;
    this.port.onmessage = () => {
      this.port.postMessage(this.block.slice(0, this.used));
      this.used = 0;
      this.port.postMessage('flushed');
    };
  }
  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (!channel) return true;
    let from = 0;
    while (from < channel.length) {
      const count = Math.min(channel.length - from, this.block.length - this.used);
      this.block.set(channel.subarray(from, from + count), this.used);
      this.used += count;
      from += count;
      if (this.used === this.block.length) {
        this.port.postMessage(this.block);
        this.block = new Float32Array(2048);
        this.used = 0;
      }
    }
    return true;
  }
});`;

// The captured samples, as absolute positions since the capture began, kept from the current
// utterance's start (or a little before now when nobody speaks); decide() opens and ends
// utterances from the detector's answers.
export class Utterances {
  constructor(rate, { silenceMs, prerollMs, maxSeconds } = DEFAULTS) {
    this.rate = rate;
    this.silence = Math.round((silenceMs * rate) / 1000);
    this.preroll = Math.round((prerollMs * rate) / 1000);
    this.max = Math.round(maxSeconds * rate);
    this.buffer = new Float32Array(rate);
    this.base = 0; // the absolute position of buffer[0]
    this.length = 0;
    this.start = null; // where the utterance being spoken starts; null in silence
    this.floor = 0; // where the last utterance ended: the next one cannot start before it
    this.quiet = 0;
  }

  get end() { return this.base + this.length; }

  append(samples) {
    if (this.start === null) { // keep what a late answer's preroll may need, drop the rest
      const keep = Math.max(this.floor, this.end - this.preroll - KEPT_SECONDS * this.rate);
      if (keep > this.base) {
        this.buffer.copyWithin(0, keep - this.base, this.length);
        this.length -= keep - this.base;
        this.base = keep;
      }
    }
    if (this.length + samples.length > this.buffer.length) {
      const grown = new Float32Array(Math.max(2 * this.buffer.length, this.length + samples.length));
      grown.set(this.buffer.subarray(0, this.length));
      this.buffer = grown;
    }
    this.buffer.set(samples, this.length);
    this.length += samples.length;
  }

  // The detector's answer for the `span` samples that end at `upTo`: the utterance it ends
  // ({ start, end, audio }), or null.
  decide(upTo, span, speech) {
    if (this.start === null) {
      if (speech) {
        this.start = Math.max(this.base, this.floor, upTo - span - this.preroll);
        this.quiet = 0;
      }
      return null;
    }
    this.quiet = speech ? 0 : this.quiet + span;
    if (this.quiet >= this.silence || upTo - this.start >= this.max) return this.cut(upTo);
    return null;
  }

  // The utterance being spoken up to `upTo`, ended there.
  cut(upTo = this.end) {
    const utterance = { start: this.start, end: upTo, audio: this.current(upTo) };
    this.start = null;
    this.floor = upTo;
    this.quiet = 0;
    return utterance;
  }

  current(upTo = this.end) {
    return this.buffer.slice(this.start - this.base, upTo - this.base);
  }
}

// Speech where a frame's RMS reaches `threshold` (full scale 1).
class Energy {
  constructor(rate, threshold) {
    this.frame = Math.round((FRAME_MS * rate) / 1000);
    this.threshold = threshold;
    this.pending = new Float32Array(0);
    this.position = 0;
  }

  async push(samples) {
    const joined = new Float32Array(this.pending.length + samples.length);
    joined.set(this.pending);
    joined.set(samples, this.pending.length);
    const answers = [];
    let at = 0;
    for (; at + this.frame <= joined.length; at += this.frame) {
      let sum = 0;
      for (let i = at; i < at + this.frame; i++) sum += joined[i] * joined[i];
      this.position += this.frame;
      answers.push({ upTo: this.position, span: this.frame,
                     speech: Math.sqrt(sum / this.frame) >= this.threshold });
    }
    this.pending = joined.slice(at);
    return answers;
  }
}

// Speech where a voice-activity bundle's chunk scores reach its score_threshold. Its stream()
// resamples each push: pushes of whole 10 ms give whole samples at its rate, nothing lost.
class VoiceActivity {
  static check(vad) {
    if (typeof vad?.stream !== 'function' || vad.manifest?.task?.kind !== 'audio-stream') {
      throw new TypeError('listen({ vad }): give a model loaded from an audio-stream bundle');
    }
  }

  constructor(vad, rate) {
    this.stream = vad.stream();
    this.threshold = vad.manifest.task.score_threshold ?? 0.5;
    this.rate = rate;
    this.step = rate % 100 === 0 ? rate / 100 : 1;
    this.pending = new Float32Array(0);
  }

  async push(samples) {
    const joined = new Float32Array(this.pending.length + samples.length);
    joined.set(this.pending);
    joined.set(samples, this.pending.length);
    const whole = joined.length - (joined.length % this.step);
    this.pending = joined.slice(whole);
    const chunks = await this.stream.push(joined.subarray(0, whole), this.rate);
    return chunks.map(({ start, end, score }) => ({
      upTo: Math.round(end * this.rate), span: Math.round((end - start) * this.rate),
      speech: score >= this.threshold }));
  }
}

// Mono blocks of `stream`'s audio to onSamples(block) until the returned stop() resolves: the
// blocks captured before it was called are all delivered by then (the worklet's are messages that
// a busy page may not have read yet), none after.
async function capture(context, stream, how, onSamples) {
  let open = true;
  const source = context.createMediaStreamSource(stream);
  const sink = context.createGain(); // pulled by the destination, and silent
  sink.gain.value = 0;
  sink.connect(context.destination);
  let node = null;
  if (how !== 'script-processor' && context.audioWorklet) {
    const url = URL.createObjectURL(new Blob([WORKLET_SOURCE], { type: 'text/javascript' }));
    try {
      await context.audioWorklet.addModule(url);
      node = new AudioWorkletNode(context, WORKLET, { channelCount: 1,
                                                     channelCountMode: 'explicit' });
      node.port.onmessage = (event) => {
        if (event.data === 'flushed') open = false;
        else if (open) onSamples(event.data);
      };
    } catch (error) {
      if (how === 'worklet') throw error;
      node = null; // a page whose CSP refuses blob: modules: the ScriptProcessor
    } finally {
      URL.revokeObjectURL(url);
    }
  }
  if (node === null) {
    node = context.createScriptProcessor(4096, 1, 1);
    node.onaudioprocess = (event) => open && onSamples(event.inputBuffer.getChannelData(0)
      .slice());
  }
  source.connect(node);
  node.connect(sink);
  const flushed = node.port && new Promise((resolve) => {
    node.port.addEventListener('message', (event) => event.data === 'flushed' && resolve());
  });
  return {
    async stop() {
      if (node.port) { // a second at most: a closed context's worklet answers nothing
        node.port.postMessage('flush');
        await Promise.race([flushed, new Promise((resolve) => { setTimeout(resolve, 1000); })]);
      }
      open = false;
      source.disconnect();
      node.disconnect();
      sink.disconnect();
    },
  };
}

function settingsOf(options) {
  const settings = { ...DEFAULTS };
  for (const key of Object.keys(DEFAULTS)) {
    if (options[key] === undefined) continue;
    if (!(typeof options[key] === 'number' && options[key] >= 0)) {
      throw new RangeError(`listen(): ${key} must be a number >= 0, got ${options[key]}`);
    }
    settings[key] = options[key];
  }
  return settings;
}

/**
 * Transcribes `stream` (a MediaStream with an audio track) until `signal` aborts or its tracks
 * end; resolves to the final transcripts, each { text, tokens, windows, segments?, start, end,
 * audio, sampleRate } (seconds from the capture's start; `audio` the utterance's captured samples
 * at `sampleRate`, which `text` is the transcript of). onPartial gets the same without `audio`.
 */
export async function listen(model, stream, options = {}) {
  if (typeof stream?.getAudioTracks !== 'function' || !stream.getAudioTracks().length) {
    throw new TypeError('listen(stream): give a MediaStream with an audio track');
  }
  const { onPartial, onFinal, signal, vad, capture: how = 'auto' } = options;
  if (!['auto', 'worklet', 'script-processor'].includes(how)) {
    throw new RangeError(`listen(): capture must be 'auto', 'worklet' or 'script-processor'`);
  }
  const settings = settingsOf(options);
  if (vad != null) VoiceActivity.check(vad);
  const asked = { language: options.language, task: options.task,
                  timestamps: options.timestamps };
  if (signal?.aborted) return [];
  const context = new AudioContext();
  const rate = context.sampleRate;
  const utterances = new Utterances(rate, settings);
  const detector = vad ? new VoiceActivity(vad, rate) : new Energy(rate, settings.threshold);
  const finals = [];
  let fed = Promise.resolve(); // the captured blocks, handled in order
  let work = Promise.resolve(); // transcriptions, one at a time
  let failure = null;
  let partialFrom = 0; // where the next partial may be made
  let partialPending = false;

  const transcribe = async (audio, start, end) => ({
    ...await model.transcribe(audio, { ...asked, sampleRate: rate }), start: start / rate,
    end: end / rate });
  let stopped;
  const done = new Promise((resolve) => { stopped = resolve; });
  const fail = (error) => { // a failed transcription or detector stops the capture too
    failure ??= error;
    stopped();
  };
  const queue = (job) => { work = work.then(job).catch(fail); };
  const final = ({ start, end, audio }) => queue(async () => {
    const made = { ...await transcribe(audio, start, end), audio, sampleRate: rate };
    finals.push(made);
    onFinal?.(made);
  });
  const partial = () => {
    const { start, end } = utterances;
    if (start === null || partialPending || end - Math.max(start, partialFrom)
      < (settings.partialMs * rate) / 1000) return;
    partialPending = true;
    partialFrom = end;
    const audio = utterances.current();
    queue(async () => {
      try {
        // before the utterance's final, even when it ended meanwhile: the final is queued after
        onPartial?.(await transcribe(audio, start, end));
      } finally {
        partialPending = false;
      }
    });
  };
  let waiting = 0; // blocks captured and not handled yet
  const handle = async (samples) => {
    waiting--;
    utterances.append(samples);
    for (const { upTo, span, speech } of await detector.push(samples)) {
      const ended = utterances.decide(upTo, span, speech);
      if (ended) final(ended);
    }
    if (onPartial && waiting === 0) partial(); // behind the microphone: catch up first
  };

  const tracks = stream.getAudioTracks();
  const onEnded = () => tracks.every((track) => track.readyState === 'ended') && stopped();
  tracks.forEach((track) => track.addEventListener('ended', onEnded));
  signal?.addEventListener('abort', () => stopped(), { once: true });
  let capturing = null;
  try {
    await context.resume();
    capturing = await capture(context, stream, how, (samples) => {
      waiting++;
      fed = fed.then(() => handle(samples)).catch(fail);
    });
    await done;
  } finally {
    await capturing?.stop();
    tracks.forEach((track) => track.removeEventListener('ended', onEnded));
    await context.close().catch(() => {});
    stopped();
  }
  await fed;
  if (!failure && utterances.start !== null) final(utterances.cut());
  await work;
  if (failure) throw failure;
  return finals;
}
