// Text generation in the browser (and Node): model.generate()'s loop over a decoder with past
// key/values (an optimum `text-generation-with-past` export, or a merged decoder switched by
// `use_cache_branch`). The twin of bundler/text/generate.py, step for step: a zero-length past at
// step 0, then each step's `present.*` fed back as the next `past_key_values.*`; position_ids
// from the attention mask; tokens chosen by the sampling spec (sampling.mjs); EOS ids from
// generation_config.json, else config.json. Messages go through the chat template (chat.mjs).
//
// TODO (issue 32, item 3): on WebGPU the present.* outputs should stay on the GPU
// (preferredOutputLocation 'gpu-buffer'); model.run() hands back CPU data (and the worker posts
// it), so the cache makes a round trip per step for now.
import { chatTemplate, renderChat, specialTokens } from './chat.mjs';
import { createSampler } from './sampling.mjs';

const PAST = /^past_key_values\.(\d+)\.(key|value)$/;
const ZEROS = {
  float32: Float32Array, float16: Uint16Array, float64: Float64Array,
};

// The cache layout from the model's inputs (bundle.json's) and, for the dims the export left
// symbolic, config.json (grouped-query attention: num_key_value_heads), as generate.py's
// cache_layout.
export function cacheLayout(inputs, config = {}) {
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
  return {
    layers, kvHeads: dims[0], headSize: dims[1], type: first.type,
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

/** The ids that end a generation: generation_config.json's eos_token_id, else config.json's. */
export function eosIds(config = {}, generationConfig = {}) {
  const value = generationConfig.eos_token_id ?? config.eos_token_id;
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value.map(Number) : [Number(value)];
}

// The streamed text: the whole new sequence decoded each step and its new suffix emitted,
// holding back a tail of U+FFFD (a byte-level token may end inside a UTF-8 character; the next
// one completes it) and a tail that may be the start of a stop string. finish() emits the rest,
// so the pieces joined are the returned text.
function textStream(stops, onToken) {
  let emitted = '';
  const emit = (text) => {
    if (!text.startsWith(emitted)) return; // an earlier piece re-decoded differently: wait
    const piece = text.slice(emitted.length);
    if (piece) {
      emitted = text;
      onToken?.(piece);
    }
  };
  const held = (text) => {
    let keep = text.length - (text.match(/\uFFFD+$/u)?.[0].length ?? 0);
    for (const stop of stops) {
      for (let k = Math.min(stop.length - 1, keep); k > 0; k -= 1) {
        if (text.slice(keep - k, keep) === stop.slice(0, k)) {
          keep -= k;
          break;
        }
      }
    }
    return text.slice(0, keep);
  };
  return {
    push: (text) => emit(held(text)),
    finish(text) {
      emit(text);
      return emitted.length === text.length ? text : emitted;
    },
  };
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

function aborted(signal) {
  const error = new Error('generation aborted');
  error.name = 'AbortError';
  if (signal.reason !== undefined) error.cause = signal.reason;
  return error;
}

/**
 * Generates after `input` (a prompt, or chat messages) with `run(feeds) -> outputs` (a loaded
 * model's run). `files`: { config, generationConfig, tokenizerConfig } (parsed JSON);
 * `inputs`: the model's input specs. Returns { text, tokenIds, promptIds, timings }.
 */
export async function generate({ run, inputs, tokenizer, files }, input, options = {}) {
  const {
    maxNewTokens = 32, stop = [], signal = null, onToken = null, ...sampling
  } = options;
  if (!(Number.isInteger(maxNewTokens) && maxNewTokens >= 0)) {
    throw new RangeError(`maxNewTokens must be an integer >= 0, got ${maxNewTokens}`);
  }
  const stops = (typeof stop === 'string' ? [stop] : Array.from(stop)).filter(Boolean);
  const sampler = createSampler({ doSample: sampling.temperature > 0, ...sampling });
  const layout = cacheLayout(inputs, files.config);
  const eos = new Set(eosIds(files.config, files.generationConfig));
  const { text: prompt, special } = promptText(input, files.tokenizerConfig ?? {});
  const encoded = tokenizer.encode([prompt], special === null ? {} : { addSpecialTokens: special });
  const promptIds = Array.from(encoded.input_ids, Number);
  if (promptIds.length === 0) throw new Error('generation needs a prompt of at least one token');

  const seen = [...promptIds];
  const tokenIds = [];
  const stream = textStream(stops, onToken);
  let past = emptyPast(layout);
  let pending = promptIds;
  let text = '';
  const started = performance.now();
  let firstTokenMs = null;
  while (tokenIds.length < maxNewTokens) {
    if (signal?.aborted) throw aborted(signal);
    const length = seen.length;
    const feeds = {
      input_ids: { data: BigInt64Array.from(pending, BigInt), dims: [1, pending.length] },
      attention_mask: { data: new BigInt64Array(length).fill(1n), dims: [1, length] },
      ...past,
    };
    if (layout.positionIds) { // the mask is all ones: positions are the running count
      const positions = new BigInt64Array(pending.length);
      for (let i = 0; i < pending.length; i += 1) positions[i] = BigInt(length - pending.length + i);
      feeds.position_ids = { data: positions, dims: [1, pending.length] };
    }
    if (layout.cacheBranch) {
      feeds.use_cache_branch = { data: [tokenIds.length > 0], dims: [1] };
    }
    const outputs = await run(feeds);
    if (signal?.aborted) throw aborted(signal);
    const logits = outputs.logits;
    const vocab = logits.dims[logits.dims.length - 1];
    const rows = logits.data.length / vocab;
    const token = sampler.next(logits.data.subarray((rows - 1) * vocab, rows * vocab), seen);
    if (firstTokenMs === null) firstTokenMs = performance.now() - started;
    // each present.* is the next step's past; the replaced past is let go (plain arrays here)
    past = {};
    for (const [name, value] of Object.entries(outputs)) {
      if (name.startsWith('present.')) {
        past[name.replace('present', 'past_key_values')] = value;
      } else if (name !== 'logits') {
        value?.dispose?.();
      }
    }
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
  text = stream.finish(text);
  const total = performance.now() - started;
  const decodeSteps = tokenIds.length - 1;
  return {
    text,
    tokenIds,
    promptIds,
    timings: {
      firstTokenMs,
      prefillTokensPerS: firstTokenMs ? (promptIds.length * 1000) / firstTokenMs : null,
      decodeTokensPerS: decodeSteps > 0 ? (decodeSteps * 1000) / (total - firstTokenMs) : null,
    },
  };
}
