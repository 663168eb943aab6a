// The text tasks: model.embed() (feature-extraction), model.classify() on texts
// (text-classification), model.tokens() (token-classification: entities, web/tasks/entities.mjs)
// and model.generate() (text-generation, web/text/generate.mjs). The spec is
// bundler/text/reference.py: the texts are tokenized (truncated to task.max_length) by the
// bundle's own tokenizer files (task.files, shipped in text/) and run in length groups
// (lengthGroups), each padded to its longest text; the token vectors are pooled (masked mean, the
// first or last kept token's, the masked maximum, none, or in the model) and scaled to length 1,
// or the logits scored (softmax, or sigmoid for a multi-label model) and ranked with the labels;
// the rows come back in the caller's order.
import { topClasses } from './classify.mjs';
import { entities, modelOf, tokenSpans } from './entities.mjs';

const tokenizers = new WeakMap(); // model -> the promise of its tokenizer, read once
// Only text bundles carry text/, so its modules come through the model (bundle.files.mjs lists
// those the bundle has): the other bundles' app builds never look for them.
const TOKENIZER_MODULE = 'text/tokenizer.mjs';
const GENERATE_MODULE = 'text/generate.mjs'; // only text-generation bundles carry it
const TRANSCRIBE_MODULE = 'text/transcribe.mjs'; // only speech-recognition bundles carry it
const LISTEN_MODULE = 'text/listen.mjs'; // and this one

export async function readJson(model, task, name) {
  const path = task.files?.[name];
  if (!path) return {};
  return JSON.parse(new TextDecoder().decode(await model._file(path)));
}

export function tokenizerOf(model, task) {
  if (!tokenizers.has(model)) {
    const made = (async () => {
      const { loadTokenizer } = await model._textModule(TOKENIZER_MODULE);
      const [json, config, special] = await Promise.all(['tokenizer.json',
        'tokenizer_config.json', 'special_tokens_map.json'].map((name) => readJson(model, task,
        name)));
      return loadTokenizer(json, config, special);
    })();
    made.catch(() => tokenizers.delete(model)); // a failed read is tried again next call
    tokenizers.set(model, made);
  }
  return tokenizers.get(model);
}

function textsOf(texts) {
  const list = typeof texts === 'string' ? [texts] : Array.from(texts ?? []);
  if (list.length === 0 || list.some((text) => typeof text !== 'string')) {
    throw new TypeError('give a text or an array of texts');
  }
  return list;
}

// bundler/text/reference.py's length_groups, with its bounds: the runs of texts with these token
// counts (shortest first, ties in order), as indices into `lengths`.
const GROUP_TEXTS = 32;
const GROUP_PADDING = 1.125;
export function lengthGroups(lengths) {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[a] - lengths[b] || a - b);
  const groups = [];
  let real = 0;
  for (const index of order) {
    const length = lengths[index];
    const group = groups.at(-1);
    if (!group || group.length >= GROUP_TEXTS
        || (group.length + 1) * length > GROUP_PADDING * (real + length)) {
      groups.push([index]);
      real = length;
    } else {
      group.push(index);
      real += length;
    }
  }
  return groups;
}

// The texts (each with its pair, or pairs null) through the model in length groups: per group,
// its indices into `texts`, the model's output, the group's attention mask and token ids, and the
// tokenizer.
async function* runTexts(model, task, texts, pairs = null) {
  const tokenizer = await tokenizerOf(model, task);
  const maxLength = task.max_length ?? null;
  const all = tokenizer.encode(texts, { maxLength, pairs });
  const lengths = texts.map((_, row) => all.attention_mask
    .subarray(row * all.dims[1], (row + 1) * all.dims[1]).reduce((n, v) => n + Number(v), 0));
  for (const group of lengthGroups(lengths)) {
    const batch = tokenizer.encode(group.map((i) => texts[i]),
      { maxLength, pairs: pairs && group.map((i) => pairs[i]) });
    const feeds = {};
    for (const spec of model.inputs) {
      if (!(spec.name in batch) || spec.name === 'dims') {
        throw new TypeError(`the model's input '${spec.name}' is not one a tokenizer gives`);
      }
      feeds[spec.name] = { data: batch[spec.name], dims: batch.dims };
    }
    // a copy: a worker's run() takes the feeds' buffers (transferred, detached here)
    const [mask, ids] = [batch.attention_mask.slice(), batch.input_ids.slice()];
    const outputs = await model.run(feeds);
    yield { group, output: outputs[task.output], mask, ids, tokenizer };
  }
}

// [batch, tokens, size] -> a Float32Array per text (pooling 'none': an array of them, one per
// kept token); [batch, size] (pooling 'model': pooled in the graph) -> its rows; float64 sums,
// as the Python reference.
export function pooled(output, mask, pooling, normalize) {
  const pooledInModel = pooling === 'model';
  const [batch, tokens, size] = pooledInModel ? [output.dims[0], 1, output.dims[1]] : output.dims;
  const data = output.data;
  const rows = [];
  for (let b = 0; b < batch; b += 1) {
    const kept = [];
    if (pooledInModel) kept.push(0); // the one row: its mean is itself
    else for (let t = 0; t < tokens; t += 1) if (mask[b * tokens + t] !== 0n) kept.push(t);
    const vector = (t) => data.subarray((b * tokens + t) * size, (b * tokens + t + 1) * size);
    if (pooling === 'none') {
      rows.push(kept.map((t) => Float32Array.from(vector(t))));
      continue;
    }
    let row;
    if (pooling === 'max') {
      row = new Float64Array(size).fill(-Infinity);
      for (const t of kept) {
        const values = vector(t);
        for (let i = 0; i < size; i += 1) row[i] = Math.max(row[i], values[i]);
      }
    } else {
      // cls and last: the first and last kept tokens (left padding: not token 0)
      const used = { cls: kept.slice(0, 1), last: kept.slice(-1) }[pooling] ?? kept;
      row = new Float64Array(size);
      for (const t of used) {
        const values = vector(t);
        for (let i = 0; i < size; i += 1) row[i] += values[i];
      }
      const count = Math.max(used.length, 1e-9);
      for (let i = 0; i < size; i += 1) row[i] /= count;
    }
    if (normalize) {
      const length = Math.max(Math.sqrt(row.reduce((total, v) => total + v * v, 0)), 1e-12);
      for (let i = 0; i < size; i += 1) row[i] /= length;
    }
    rows.push(Float32Array.from(row));
  }
  return rows;
}

export async function embed(model, task, texts, { pooling, normalize } = {}) {
  const list = textsOf(texts);
  const pool = pooling ?? task.pooling ?? 'mean';
  if ((pool === 'model') !== (task.pooling === 'model')) {
    throw new TypeError(task.pooling === 'model'
      ? `this bundle's output ${task.output} is pooled in the model: no pooling '${pool}'`
      : `this bundle's output ${task.output} is one vector per token: pooling 'model' needs a`
        + ' model that pools');
  }
  const scaled = pool !== 'none' && (normalize ?? task.normalize ?? true);
  const rows = new Array(list.length);
  for await (const { group, output, mask } of runTexts(model, task, list)) {
    pooled(output, mask, pool, scaled).forEach((row, i) => { rows[group[i]] = row; });
  }
  return rows;
}

// One text: its top classes; an array of texts: a list of them per text. `pairs`: a second text
// per text (one string for one text), encoded with it as one input: a cross-encoder's passages.
export async function classify(model, task, texts, { topK, pairs } = {}) {
  const list = textsOf(texts);
  const second = pairs === undefined || pairs === null ? null : textsOf(pairs);
  if (second && (second.length !== list.length || typeof texts !== typeof pairs)) {
    throw new TypeError('give one pair per text: a string with a text, an array with an array');
  }
  const answers = new Array(list.length);
  for await (const { group, output } of runTexts(model, task, list, second)) {
    const classes = output.dims[1];
    group.forEach((index, row) => {
      answers[index] = topClasses({
        dims: [1, classes], data: output.data.subarray(row * classes, (row + 1) * classes),
      }, task, topK);
    });
  }
  return typeof texts === 'string' ? answers[0] : answers;
}

// One text: its entities; an array of texts: a list of them per text (bundler/text/entities.py).
export async function tokens(model, task, texts) {
  const list = textsOf(texts);
  const answers = new Array(list.length);
  for await (const { group, output, mask, ids, tokenizer } of runTexts(model, task, list)) {
    const [, length, labels] = output.dims;
    const aligned = modelOf(tokenizer);
    group.forEach((index, row) => {
      const kept = [];
      for (let t = 0; t < length; t += 1) if (mask[row * length + t] !== 0n) kept.push(t);
      const logits = kept.map((t) => output.data.subarray((row * length + t) * labels,
        (row * length + t + 1) * labels));
      const rowIds = kept.map((t) => Number(ids[row * length + t]));
      const text = list[index];
      answers[index] = entities(text, tokenSpans(tokenizer, text, rowIds, aligned), logits,
        task.labels);
    });
  }
  return typeof texts === 'string' ? answers[0] : answers;
}

// What web/text/generate.mjs runs on: the model's steps with its cache kept by the session (on
// WebGPU on the GPU; Model._step) or, in worker mode on WASM, a cache kept in the worker
// (Model._workerCache), and the bundle's config files.
async function decoderOf(model, task) {
  const [module, config, generationConfig, tokenizerConfig] = await Promise.all([
    model._textModule(GENERATE_MODULE),
    ...['config.json', 'generation_config.json', 'tokenizer_config.json'].map(
      (name) => readJson(model, task, name)),
  ]);
  const decoder = {
    step: (feeds, keep, fetch) => model._step(feeds, keep, fetch),
    drop: (ids) => model._drop(ids),
    workerCache: (layout, past) => model._workerCache(layout, past),
    inputs: model.inputs, outputs: model.outputs, ep: model.ep, worker: model.worker,
    files: { config, generationConfig, tokenizerConfig },
  };
  return { module, decoder };
}

// A prompt or chat messages continued by a text-generation bundle (web/text/generate.mjs, imported
// only by such a bundle, which ships it).
export async function generate(model, task, input, options) {
  const [tokenizer, { module, decoder }] = await Promise.all([
    tokenizerOf(model, task), decoderOf(model, task)]);
  return module.generate({ ...decoder, tokenizer }, input, options);
}

// Internal, for the build's check (web/dev/conformance.mjs): generate.mjs's teacherForced().
export async function teacherForced(model, task, { ids, prompt, at }) {
  const { module, decoder } = await decoderOf(model, task);
  return module.teacherForced(decoder, ids, prompt, at);
}

// Speech to text (automatic-speech-recognition, web/text/transcribe.mjs): a Transcriber over the
// model's `encoder` session and the `decoder` session load() opened beside it (model._decoder),
// made once per model. Live transcription uses its window().
const transcribers = new WeakMap();
export function transcriberOf(model, task) {
  if (!transcribers.has(model)) {
    const made = (async () => {
      const [tokenizer, module, generation, preprocessor] = await Promise.all([
        tokenizerOf(model, task), model._textModule(TRANSCRIBE_MODULE),
        readJson(model, task, 'generation_config.json'),
        readJson(model, task, 'preprocessor_config.json')]);
      return new module.Transcriber(model, model._decoder, task,
        { tokenizer, generation, preprocessor });
    })();
    made.catch(() => transcribers.delete(model)); // a failed read is tried again next call
    transcribers.set(model, made);
  }
  return transcribers.get(model);
}

export async function transcribe(model, task, audio, options) {
  return (await transcriberOf(model, task)).transcribe(audio, options);
}

// Internal, for the build's check (web/dev/conformance.mjs): transcribe.mjs's teacherForced().
export async function teacherForcedSpeech(model, task, audio, sampleRate, cases, known) {
  return (await transcriberOf(model, task)).teacherForced(audio, sampleRate, cases, known);
}

// load()'s warm-up: text generation's first steps, or a speech model's encoder and decoder.
export async function warmUp(model, task) {
  if (task.kind === 'automatic-speech-recognition') {
    // one session of the pipeline loaded alone (load({ session })) has no transcriber to warm
    if (model._decoder) await (await transcriberOf(model, task)).warmUp();
    return;
  }
  const [, { module, decoder }] = await Promise.all([
    tokenizerOf(model, task), decoderOf(model, task)]);
  await module.warmUp(decoder);
}

// Live speech to text from a MediaStream (web/text/listen.mjs): utterances through transcribe().
export async function listen(model, stream, options) {
  const module = await model._textModule(LISTEN_MODULE);
  return module.listen(model, stream, options);
}
