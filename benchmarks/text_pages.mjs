// text_pages.mjs: text_vs_transformersjs.py's pages. Each function is called on the harness page
// (which loads nothing itself) of a fresh browser context, loads one side (our bundle through its
// bundle.mjs, or transformers.js 4.3.1 from local files), calls it `calls` times and returns the
// figures: load ms (import -> ready), each call's timings, and the bytes fetched since the start
// (in all, and per URL).

// Every fetch of the page since `since` (a fresh context: all of them came over the wire), as
// [url, bytes].
function fetchedSince(since) {
  return performance.getEntriesByType('resource').filter((entry) => entry.startTime >= since)
    .map((entry) => [entry.name, entry.transferSize]);
}

export async function measure(open, call, calls) {
  const started = performance.now();
  const side = await open();
  const loadMs = performance.now() - started;
  const results = [];
  for (let i = 0; i < calls; i += 1) results.push(await call(side));
  const fetched = fetchedSince(started);
  return { loadMs, results, bytes: fetched.reduce((total, [, bytes]) => total + bytes, 0), fetched,
           ...side.about };
}

async function timed(call) {
  const started = performance.now();
  const output = await call();
  return { ms: performance.now() - started, output };
}

// ---- our bundle (bundle.mjs's load(); variant null: the bundle's default) ----

function openOurs({ base, variant }) {
  return async () => {
    const { load } = await import(new URL('bundle.mjs', base).href);
    const options = { numThreads: 1 };
    if (variant) Object.assign(options, { variant, ignoreVerification: true });
    const model = await load(options);
    return { model, about: { variant: model.variant, ep: model.ep, threads: model.threads } };
  };
}

export function oursEmbed({ base, variant, texts, calls }) {
  return measure(openOurs({ base, variant }), async ({ model }) => {
    const { ms, output } = await timed(() => model.embed(texts, { pooling: 'mean',
                                                                  normalize: true }));
    return { ms, first: Array.from(output[0].subarray(0, 4)) };
  }, calls);
}

export function oursGenerate({ base, variant, prompt, newTokens, calls }) {
  return measure(openOurs({ base, variant }), async ({ model }) => {
    const started = performance.now();
    const { tokenIds, promptIds, timings } = await model.generate(prompt, {
      maxNewTokens: newTokens, temperature: 0 });
    // timings: from after the prompt's tokenization to the first token and to the last
    const totalMs = performance.now() - started;
    return { firstTokenMs: timings.firstTokenMs, decodeTokensPerS: timings.decodeTokensPerS,
             totalMs, promptTokens: promptIds.length, tokenIds };
  }, calls);
}

// ---- transformers.js, as its docs show it, offline: local models, its wasm served here ----

export async function transformersJs({ lib, models, ort }) {
  const module = await import(lib);
  const { env } = module;
  env.allowLocalModels = true;
  env.allowRemoteModels = false;
  env.localModelPath = models; // a path: a full URL here is taken for a remote one, and refused
  // the files it would take from jsdelivr by default (the asyncify build), served locally
  env.backends.onnx.wasm.wasmPaths = { mjs: `${ort}ort-wasm-simd-threaded.asyncify.mjs`,
                                       wasm: `${ort}ort-wasm-simd-threaded.asyncify.wasm` };
  env.backends.onnx.wasm.numThreads = 1;
  return module;
}

export function theirsEmbed({ lib, models, ort, name, dtype, texts, calls }) {
  return measure(async () => {
    const { pipeline } = await transformersJs({ lib, models, ort });
    const extractor = await pipeline('feature-extraction', name, { dtype, device: 'wasm' });
    return { extractor, about: { variant: dtype, ep: 'wasm', threads: 1 } };
  }, async ({ extractor }) => {
    const { ms, output } = await timed(() => extractor(texts, { pooling: 'mean',
                                                                normalize: true }));
    return { ms, first: Array.from(output.data.subarray(0, 4)) };
  }, calls);
}

export function theirsGenerate({ lib, models, ort, name, dtype, prompt, newTokens, calls }) {
  return measure(async () => {
    const { AutoTokenizer, AutoModelForCausalLM } = await transformersJs({ lib, models, ort });
    const [tokenizer, model] = await Promise.all([
      AutoTokenizer.from_pretrained(name),
      AutoModelForCausalLM.from_pretrained(name, { dtype, device: 'wasm' })]);
    return { tokenizer, model, about: { variant: dtype, ep: 'wasm', threads: 1 } };
  }, async ({ tokenizer, model }) => {
    const inputs = tokenizer(prompt);
    const promptTokens = inputs.input_ids.dims.at(-1);
    let puts = 0;
    let firstTokenMs = null;
    const started = performance.now();
    // generate() puts the prompt, then each new token: the second put is the first token
    const streamer = {
      put() {
        puts += 1;
        if (puts === 2) firstTokenMs = performance.now() - started;
      },
      end() {},
    };
    const output = await model.generate({ ...inputs, max_new_tokens: newTokens,
                                          do_sample: false, streamer });
    const totalMs = performance.now() - started;
    const tokenIds = output.tolist()[0].slice(promptTokens).map(Number);
    const decodeTokensPerS = tokenIds.length > 1
      ? ((tokenIds.length - 1) * 1000) / (totalMs - firstTokenMs) : null;
    return { firstTokenMs, decodeTokensPerS, totalMs, promptTokens, tokenIds };
  }, calls);
}

// ---- text_side_by_side.py: our bundles (`names`, folders under the root) in one page ----

export async function sideBySide({ names, texts, calls, variant }) {
  const models = [];
  for (const name of names) {
    const { load } = await import(`/${name}/bundle.mjs`);
    const model = await load({ executionProviders: ['wasm'], numThreads: 1, variant,
                               ignoreVerification: true });
    await model.embed(texts); // warm-up: the first call prepares kernels
    models.push(model);
  }
  const ms = names.map(() => []);
  for (let call = 0; call < calls; call += 1) {
    const order = models.map((_, i) => i);
    if (call % 2) order.reverse(); // the first alternates
    for (const i of order) ms[i].push((await timed(() => models[i].embed(texts))).ms);
  }
  await Promise.all(models.map((model) => model.release()));
  return ms;
}
