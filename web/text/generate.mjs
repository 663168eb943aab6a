// Text generation in the browser (and Node): model.generate()'s loop over a decoder with past
// key/values (an optimum `text-generation-with-past` export, or a merged decoder switched by
// `use_cache_branch`). The twin of bundler/text/generate.py, step for step: a zero-length past at
// step 0, then each step's `present.*` fed back as the next `past_key_values.*`; position_ids
// from the attention mask; tokens chosen by the sampling spec (sampling.mjs); EOS ids from
// generation_config.json, else config.json. Messages go through the chat template (chat.mjs).
// The KV cache stays with the session (decoding.mjs's KeptCache: on WebGPU on the GPU), except on
// WASM for a model that also outputs each step's new key/value slice (present_new.*, added at
// build time by bundler/text/slices.py): there it is kept in arrays (bundle.core.mjs's
// AppendedCache), on the page or, in worker mode, in the worker beside the session.
import { AppendedCache } from '../bundle.core.mjs';
import { chatTemplate, renderChat, specialTokens } from './chat.mjs';
import {
  checkSignal, KeptCache, teacherForced as forced, textStream,
} from './decoding.mjs';
import { createSampler } from './sampling.mjs';

const PAST = /^past_key_values\.(\d+)\.(key|value)$/;
const ZEROS = {
  float32: Float32Array, float16: Uint16Array, float64: Float64Array,
};

// The cache layout from the model's inputs (bundle.json's) and, for the dims the export left
// symbolic, config.json (grouped-query attention: num_key_value_heads), as generate.py's
// cache_layout; `slices`: the present_new.* outputs, one per present, when the model has them
// (its `outputs`), else null.
export function cacheLayout(inputs, config = {}, outputs = []) {
  const byName = new Map(inputs.map((spec) => [spec.name, spec]));
  const past = inputs.map((spec) => PAST.exec(spec.name)).filter(Boolean);
  const layers = new Set(past.map((match) => Number(match[1]))).size;
  if (!layers || !byName.has('input_ids') || !byName.has('attention_mask')) {
    throw new Error('not a decoder with past: it needs input_ids, attention_mask and'
      + ' past_key_values.N.key/value inputs');
  }
  const first = byName.get('past_key_values.0.key');
  const heads = config.num_attention_heads ?? config.n_head;
  const hidden = config.hidden_size ?? config.n_embd;
  const stated = [config.num_key_value_heads ?? heads,
    config.head_dim ?? (hidden && heads ? Math.floor(hidden / heads) : undefined)];
  const dims = [1, 3].map((axis, i) => {
    const fromModel = Number.isInteger(first.shape?.[axis]) ? first.shape[axis] : undefined;
    const value = fromModel ?? stated[i];
    if (!Number.isInteger(value)) {
      throw new Error(`the model's past leaves axis ${axis} symbolic and config.json does not`
        + ' state it');
    }
    return value;
  });
  if (!(first.type in ZEROS)) throw new Error(`past_key_values.0.key is ${first.type}`);
  const presents = [];
  for (let layer = 0; layer < layers; layer += 1) {
    presents.push(`present.${layer}.key`, `present.${layer}.value`);
  }
  const named = new Set(outputs.map((spec) => spec.name));
  const slices = presents.map((name) => name.replace('present.', 'present_new.'));
  return {
    layers, kvHeads: dims[0], headSize: dims[1], type: first.type, presents,
    slices: slices.every((name) => named.has(name)) ? slices : null,
    positionIds: byName.has('position_ids'), cacheBranch: byName.has('use_cache_branch'),
  };
}

function emptyPast(layout) {
  const past = {};
  for (let layer = 0; layer < layout.layers; layer += 1) {
    for (const kind of ['key', 'value']) {
      past[`past_key_values.${layer}.${kind}`] = {
        data: new ZEROS[layout.type](0), dims: [1, layout.kvHeads, 0, layout.headSize],
      };
    }
  }
  return past;
}

// The feeds of a step: `pending`, the last of the `length` tokens so far (all attended to).
function stepFeeds(layout, pending, length, steps) {
  const feeds = {
    input_ids: { data: BigInt64Array.from(pending, BigInt), dims: [1, pending.length] },
    attention_mask: { data: new BigInt64Array(length).fill(1n), dims: [1, length] },
  };
  if (layout.positionIds) { // the mask is all ones: positions are the running count
    const positions = new BigInt64Array(pending.length);
    for (let i = 0; i < pending.length; i += 1) positions[i] = BigInt(length - pending.length + i);
    feeds.position_ids = { data: positions, dims: [1, pending.length] };
  }
  if (layout.cacheBranch) feeds.use_cache_branch = { data: [steps > 0], dims: [1] };
  return feeds;
}

// The KV cache of one generation kept by the session (decoding.mjs's KeptCache): run() feeds the
// step's inputs after the past and keeps the presents as the next past. The first step's
// zero-length past is plain. A model with present_new.* outputs answers only the logits and the
// presents (on WebGPU the slices would be read back from the GPU for nothing).
class Cache extends KeptCache {
  constructor(step, drop, layout, past) {
    const fetch = layout.slices ? ['logits', ...layout.presents] : null;
    super((feeds, keep) => step(feeds, keep, fetch), drop, past);
    this._presents = layout.presents;
  }

  async run(feeds) {
    return (await super.run(feeds, this._presents)).logits;
  }
}

function layoutOf({ inputs, outputs, files }) {
  return cacheLayout(inputs, files.config, outputs);
}

// The cache a decoding runs with, as { run(pending, length) -> logits, release() }: `pending`
// the last of the `length` tokens so far. Kept by the session (Cache), or on WASM for a model
// with slices in arrays (AppendedCache): in worker mode in the worker (Model._workerCache), so
// that a step's message carries its ids, not the whole cache.
async function openCache({ step, drop, ep, worker, workerCache }, layout) {
  const past = emptyPast(layout);
  let cache;
  if (!layout.slices || ep !== 'wasm') cache = new Cache(step, drop, layout, past);
  else if (worker) cache = await workerCache(layout, past);
  else cache = new AppendedCache((feeds, fetch) => step(feeds, [], fetch), layout, past);
  let steps = 0;
  return {
    run: (pending, length) => cache.run(stepFeeds(layout, pending, length, steps++)),
    release: () => cache.release(),
  };
}

/**
 * A first run at load (load's warmUp): a one-token prefill and one step with its past, so that
 * both the shaders (WebGPU) and the kernels of both branches are ready before the first call.
 */
export async function warmUp(decoder) {
  const cache = await openCache(decoder, layoutOf(decoder));
  try {
    await cache.run([0], 1);
    await cache.run([0], 2);
  } finally {
    await cache.release();
  }
}

/**
 * The logits the loop computes when fed `ids` (the prompt's `promptLength` ids, then one id a
 * step), each step's at the ids `at[step]`: the teacher-forced logits the build's check compares
 * with native's (bundler/text/agreement.py; decoding.mjs's teacherForced).
 */
export async function teacherForced(decoder, ids, promptLength, at) {
  const cache = await openCache(decoder, layoutOf(decoder));
  try {
    return await forced(async (pending, length) => {
      const logits = await cache.run(pending, length);
      const vocab = logits.dims[logits.dims.length - 1];
      return logits.data.subarray(logits.data.length - vocab);
    }, ids, promptLength, at);
  } finally {
    await cache.release();
  }
}

/** The positions the model has (max_position_embeddings; GPT-2: n_positions), or null. */
export function maxPositions(config = {}) {
  const value = config.max_position_embeddings ?? config.n_positions;
  return Number.isInteger(value) && value > 0 ? value : null;
}

/**
 * { ids, dropped }: the prompt's ids that leave room for `maxNewTokens` in the model's positions;
 * a longer prompt loses its first ids. The twin of generate.py's fit_prompt.
 */
export function fitPrompt(ids, config, maxNewTokens) {
  const limit = maxPositions(config);
  if (limit === null || ids.length + maxNewTokens <= limit) return { ids, dropped: 0 };
  const room = limit - maxNewTokens;
  if (room < 1) {
    throw new RangeError(`${maxNewTokens} new tokens leave no room for a prompt in the model's`
      + ` ${limit} positions`);
  }
  return { ids: ids.slice(ids.length - room), dropped: ids.length - room };
}

/** The ids that end a generation: generation_config.json's eos_token_id, else config.json's. */
export function eosIds(config = {}, generationConfig = {}) {
  const value = generationConfig.eos_token_id ?? config.eos_token_id;
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value.map(Number) : [Number(value)];
}

function promptText(input, tokenizerConfig) {
  if (typeof input === 'string') return { text: input, special: null };
  if (!Array.isArray(input) || input.some((m) => typeof m?.role !== 'string')) {
    throw new TypeError('generate() takes a prompt string or an array of {role, content} messages');
  }
  const template = chatTemplate(tokenizerConfig);
  // as transformers' apply_chat_template: the template writes the special tokens itself
  return {
    text: renderChat(template, input, {
      addGenerationPrompt: true, tokens: specialTokens(tokenizerConfig),
    }),
    special: false,
  };
}

/**
 * Generates after `input` (a prompt, or chat messages) with the decoder's `step(feeds, keep,
 * fetch) -> outputs` (a loaded model's run, the outputs named in `keep` answered as handles it
 * keeps, only those in `fetch` answered, all when null) and `drop(handles' ids)`. `files`:
 * { config, generationConfig, tokenizerConfig } (parsed JSON); a prompt longer than the model's
 * positions less maxNewTokens loses its first tokens (fitPrompt; `truncatedTokens` says how
 * many). `inputs`, `outputs`: the model's specs; `ep`, `worker`: where it runs; in worker mode
 * `workerCache(layout, past)` opens an AppendedCache in the worker ({ run(feeds), release() }).
 * Returns { text, tokenIds, promptIds, truncatedTokens, timings }.
 */
export async function generate(decoder, input, options = {}) {
  const { tokenizer, files } = decoder;
  const {
    maxNewTokens = 32, stop = [], signal = null, onToken = null, ...sampling
  } = options;
  if (!(Number.isInteger(maxNewTokens) && maxNewTokens >= 0)) {
    throw new RangeError(`maxNewTokens must be an integer >= 0, got ${maxNewTokens}`);
  }
  const stops = (typeof stop === 'string' ? [stop] : Array.from(stop)).filter(Boolean);
  const sampler = createSampler({ doSample: sampling.temperature > 0, ...sampling });
  const layout = layoutOf(decoder);
  const eos = new Set(eosIds(files.config, files.generationConfig));
  const { text: prompt, special } = promptText(input, files.tokenizerConfig ?? {});
  const encoded = tokenizer.encode([prompt], special === null ? {} : { addSpecialTokens: special });
  const fitted = fitPrompt(Array.from(encoded.input_ids, Number), files.config, maxNewTokens);
  const promptIds = fitted.ids;
  if (promptIds.length === 0) throw new Error('generation needs a prompt of at least one token');

  const seen = [...promptIds];
  const tokenIds = [];
  const stream = textStream(stops, onToken);
  const cache = await openCache(decoder, layout);
  let pending = promptIds;
  let text = '';
  const started = performance.now();
  let firstTokenMs = null;
  try {
    while (tokenIds.length < maxNewTokens) {
      checkSignal(signal);
      const logits = await cache.run(pending, seen.length);
      checkSignal(signal);
      const vocab = logits.dims[logits.dims.length - 1];
      const rows = logits.data.length / vocab;
      const token = sampler.next(logits.data.subarray((rows - 1) * vocab, rows * vocab), seen);
      if (firstTokenMs === null) firstTokenMs = performance.now() - started;
      tokenIds.push(token);
      seen.push(token);
      pending = [token];
      text = tokenizer.decode(tokenIds);
      const hit = stops.map((s) => text.indexOf(s)).filter((at) => at >= 0);
      if (hit.length) {
        text = text.slice(0, Math.min(...hit));
        break;
      }
      stream.push(text);
      if (eos.has(token)) break;
    }
  } finally {
    await cache.release();
  }
  text = stream.finish(text);
  const total = performance.now() - started;
  const decodeSteps = tokenIds.length - 1;
  return {
    text,
    tokenIds,
    promptIds,
    truncatedTokens: fitted.dropped, // the prompt's first ids dropped to fit the model
    timings: {
      firstTokenMs,
      prefillTokensPerS: firstTokenMs ? (promptIds.length * 1000) / firstTokenMs : null,
      decodeTokensPerS: decodeSteps > 0 ? (decodeSteps * 1000) / (total - firstTokenMs) : null,
    },
  };
}
