// asr_pages.mjs: asr_vs_transformersjs.py's pages. Each loads one side (our speech bundle through
// its bundle.mjs, or transformers.js 4.3.1's Whisper processor and model from local files) on the harness page of a fresh context, transcribes the same 16 kHz samples `calls`
// times and returns the figures (text_pages.mjs's measure(): load ms, bytes since the start).
// The encoder's and the decoder's time are what their sessions' run() took, counted the same way
// on both sides: by wrapping run() of each session object.
import { measure, transformersJs } from './text_pages.mjs';

// A 16-bit mono WAV (bundler.tasks.samples.wav_bytes: a 44-byte header) as samples in [-1, 1].
async function samplesOf(url) {
  const bytes = await (await fetch(url)).arrayBuffer();
  const pcm = new Int16Array(bytes, 44);
  return Float32Array.from(pcm, (value) => value / 32768);
}

// `method`: what the session's runs go through (our decoder is stepped by _step(), which keeps
// its cache: web/text/transcribe.mjs).
function counted(session, method = 'run') {
  const record = { ms: 0, runs: 0 };
  const run = session[method].bind(session);
  session[method] = async (...args) => {
    const started = performance.now();
    try {
      return await run(...args);
    } finally {
      record.ms += performance.now() - started;
      record.runs += 1;
    }
  };
  return record;
}

async function timedCall(call, encoder, decoder) {
  const before = { encoderMs: encoder.ms, encoderRuns: encoder.runs, decoderMs: decoder.ms,
                   decoderRuns: decoder.runs };
  const started = performance.now();
  const { text } = await call();
  return { ms: performance.now() - started, encoderMs: encoder.ms - before.encoderMs,
           encoderRuns: encoder.runs - before.encoderRuns,
           decoderMs: decoder.ms - before.decoderMs,
           decoderRuns: decoder.runs - before.decoderRuns, text };
}

export async function oursTranscribe({ base, audio, calls }) {
  const samples = await samplesOf(audio); // before measure(): not counted in the bytes
  return measure(async () => {
    const { load } = await import(new URL('bundle.mjs', base).href);
    const model = await load({ numThreads: 1, executionProviders: ['wasm'] });
    return { model, encoder: counted(model), decoder: counted(model._decoder, '_step'),
             about: { variant: model.variant, decoderVariant: model._decoder.variant, ep: model.ep,
                      threads: model.threads } };
  }, ({ model, encoder, decoder }) => timedCall(
    () => model.transcribe(samples, { language: 'en', task: 'transcribe' }), encoder, decoder),
  calls);
}

// Its Whisper example's calls (a processor, generate(), the tokenizer's batch_decode()): the pipeline's
// own post-processing throws on a transcript of no text tokens, which random weights can give.
// `dtype`: each session's, e.g. { encoder_model: 'fp32', decoder_model_merged: 'q4' }.
export async function theirsTranscribe({ lib, models, ort, name, dtype, audio, calls }) {
  const samples = await samplesOf(audio);
  return measure(async () => {
    const { AutoProcessor, AutoTokenizer, WhisperForConditionalGeneration } = await
    transformersJs({ lib, models, ort });
    const [processor, tokenizer, model] = await Promise.all([AutoProcessor.from_pretrained(name),
      AutoTokenizer.from_pretrained(name),
      WhisperForConditionalGeneration.from_pretrained(name, { dtype, device: 'wasm' })]);
    return { processor, tokenizer, model, encoder: counted(model.sessions.model),
             decoder: counted(model.sessions.decoder_model_merged),
             about: { variant: dtype.encoder_model, decoderVariant: dtype.decoder_model_merged,
                      ep: 'wasm', threads: 1 } };
  }, ({ processor, tokenizer, model, encoder, decoder }) => timedCall(async () => {
    const inputs = await processor(samples);
    const ids = await model.generate({ ...inputs, language: 'en', task: 'transcribe' });
    return { text: tokenizer.batch_decode(ids, { skip_special_tokens: true })[0] };
  }, encoder, decoder), calls);
}

// asr_encoder_cpu.py: each side's encoder opened on this page and warmed up, then left to be
// run one call at a time as globalThis.encoderRuns[name]() (the caller reads the main thread's CPU
// time around each call). sides: name -> { bundle } (our bundle's folder: load() and run()) or
// { model, module, mjs, wasm } (a raw onnxruntime-web session of `model`). All on input_features
// [1, 80, 3000] of `input`, 1 WASM thread.
const ENCODER_INPUTS = {
  tones: (i) => Math.sin(i * 0.37) * 0.8 - 0.2,
  silence: () => -1.5, // Whisper's log-mel of zeros: log10(1e-10), clamped, (x + 4) / 4
};

export async function openEncoders({ base, sides, input, warmup }) {
  const data = Float32Array.from({ length: 80 * 3000 }, (_, i) => ENCODER_INPUTS[input](i));
  globalThis.encoderRuns = {};
  for (const [name, side] of Object.entries(sides)) {
    let run;
    if (side.bundle) {
      const { load } = await import(new URL(`${side.bundle}bundle.mjs`, base).href);
      const model = await load({ numThreads: 1, executionProviders: ['wasm'] });
      const feeds = { input_features: { type: 'float32', dims: [1, 80, 3000], data } };
      run = () => model.run(feeds);
    } else {
      const ort = await import(new URL(side.module, base).href);
      ort.env.wasm.numThreads = 1;
      ort.env.wasm.wasmPaths = { mjs: new URL(side.mjs, base).href,
                                 wasm: new URL(side.wasm, base).href };
      const session = await ort.InferenceSession.create(new URL(side.model, base).href,
        { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
      const feeds = { input_features: new ort.Tensor('float32', data, [1, 80, 3000]) };
      run = () => session.run(feeds);
    }
    for (let i = 0; i < warmup; i++) await run();
    globalThis.encoderRuns[name] = async () => { await run(); };
  }
  return Object.keys(globalThis.encoderRuns);
}
