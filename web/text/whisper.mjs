// The Whisper decoding spec's browser (and Node) side: prompt, suppressions, timestamp rules,
// greedy choice and segments, the same as bundler/text/whisper.py, whose docstring is the spec
// (steps 1-6). Scores are float64 widened from the model's float32 logits; the
// sum-of-probabilities rule uses sampling.mjs's exp64, bit-identical to the Python side.
import { exp64 } from './sampling.mjs';

export const TIME_PRECISION = 0.02; // seconds per timestamp token
export const FRAME_SECONDS = 0.01; // seconds per log-mel frame
export const INPUT_STRIDE = 2; // feature frames per encoder position
export const WINDOW_FRAMES = 3000; // frames in one decoding call's input
const LANGUAGE_NAMES = {
  english: 'en', chinese: 'zh', german: 'de', spanish: 'es', russian: 'ru', korean: 'ko',
  french: 'fr', japanese: 'ja', portuguese: 'pt', turkish: 'tr', polish: 'pl', italian: 'it',
  dutch: 'nl', arabic: 'ar', hindi: 'hi',
};

/** Spec step 1: the settings of a generation_config.json object. */
export function settingsOf(config) {
  for (const key of ['decoder_start_token_id', 'eos_token_id', 'no_timestamps_token_id']) {
    if (config[key] === undefined || config[key] === null) {
      throw new Error(`generation_config.json lacks ${key}: not a Whisper generation config`);
    }
  }
  const eos = config.eos_token_id;
  return {
    decoderStart: config.decoder_start_token_id,
    eos: Array.isArray(eos) ? eos[0] : eos,
    noTimestamps: config.no_timestamps_token_id,
    timestampBegin: config.no_timestamps_token_id + 1,
    langToId: config.lang_to_id ?? {},
    taskToId: config.task_to_id ?? {},
    suppressTokens: config.suppress_tokens ?? [],
    beginSuppressTokens: config.begin_suppress_tokens ?? [],
    maxInitialTimestampIndex: config.max_initial_timestamp_index ?? null,
    maxLength: config.max_length || 448,
    forcedDecoderIds: config.forced_decoder_ids ?? [],
  };
}

/** The id of a language: a code ("en"), a token ("<|en|>") or a name ("english"). */
export function languageId(settings, language) {
  if (Object.keys(settings.langToId).length === 0) {
    throw new Error(`language '${language}' cannot be given: this model is English-only (its generation_config.json has no lang_to_id); leave it out`);
  }
  const key = language.toLowerCase();
  const token = key.startsWith('<|') ? key : `<|${LANGUAGE_NAMES[key] ?? key}|>`;
  if (!(token in settings.langToId)) {
    const known = Object.keys(settings.langToId).map((t) => t.slice(2, -2)).sort().join(', ');
    throw new Error(`language '${language}' is not one of this model's: ${known}`);
  }
  return settings.langToId[token];
}

const forcedOf = (settings, use) => (use ? new Map(settings.forcedDecoderIds) : new Map());

/** Spec step 2: the prompt ids (`language`: an id or null; `detected`: the detected id). */
export function prompt(settings, language, task, timestamps, detected = null) {
  const forced = forcedOf(settings, task == null && language == null);
  let ids = [settings.decoderStart];
  for (let position = 1; forced.has(position); position++) ids.push(forced.get(position));
  if (language != null) ids.splice(1, 1, language);
  else if (detected != null && (ids.length <= 1 || ids[1] == null)) ids.splice(1, 1, detected);
  const taskIds = Object.values(settings.taskToId);
  if (task != null) {
    if (Object.keys(settings.taskToId).length === 0) {
      throw new Error(`task '${task}' cannot be given: this model is English-only (its generation_config.json has no task_to_id); leave it out`);
    }
    if (!(task in settings.taskToId)) throw new Error(`task '${task}' is not one of ${Object.keys(settings.taskToId).sort()}`);
    ids.push(settings.taskToId[task]);
  } else if (language != null && 'transcribe' in settings.taskToId
             && !ids.some((i) => taskIds.includes(i))) {
    ids.push(settings.taskToId.transcribe);
  }
  if (!timestamps && ids[ids.length - 1] !== settings.noTimestamps) ids.push(settings.noTimestamps);
  else if (timestamps && ids[ids.length - 1] === settings.noTimestamps) ids = ids.slice(0, -1);
  return ids.filter((i) => i != null);
}

/** Whether the language must be detected (a multilingual model, none given or forced). */
export function needsLanguage(settings, language, task) {
  const forced = forcedOf(settings, task == null);
  return Object.keys(settings.langToId).length > 0 && language == null && forced.get(1) == null;
}

/** The language id of the logits after <|startoftranscript|>: argmax over language tokens. */
export function detectLanguage(settings, logits) {
  const ids = Object.values(settings.langToId).sort((a, b) => a - b);
  let best = ids[0];
  for (const id of ids) if (logits[id] > logits[best]) best = id;
  return best;
}

/** Spec step 3: the step's float64 scores after the suppressions and timestamp rules. */
export function processLogits(logits, generated, settings, timestamps) {
  const scores = Float64Array.from(logits);
  if (generated.length === 0) for (const id of settings.beginSuppressTokens) scores[id] = -Infinity;
  for (const id of settings.suppressTokens) scores[id] = -Infinity;
  if (timestamps) timestampRules(scores, generated, settings);
  return scores;
}

function timestampRules(scores, generated, settings) {
  const begin = settings.timestampBegin;
  const n = generated.length;
  scores[settings.noTimestamps] = -Infinity;
  const last = n >= 1 && generated[n - 1] >= begin;
  const penultimate = n < 2 || generated[n - 2] >= begin;
  if (last) {
    if (penultimate) scores.fill(-Infinity, begin);
    else scores.fill(-Infinity, 0, settings.eos);
  }
  let lastStamp = -1;
  for (const token of generated) if (token >= begin) lastStamp = token;
  if (lastStamp >= 0) scores.fill(-Infinity, begin, last && !penultimate ? lastStamp : lastStamp + 1);
  if (n === 0) {
    scores.fill(-Infinity, 0, begin);
    if (settings.maxInitialTimestampIndex != null) {
      scores.fill(-Infinity, Math.min(scores.length, begin + settings.maxInitialTimestampIndex + 1));
    }
  }
  let top = -Infinity;
  let bestText = -Infinity;
  for (let i = 0; i < scores.length; i++) {
    if (scores[i] > top) top = scores[i];
    if (i < begin && scores[i] > bestText) bestText = scores[i];
  }
  if (top === -Infinity) return;
  let stampWeight = 0;
  for (let i = begin; i < scores.length; i++) stampWeight += exp64(scores[i] - top);
  if (stampWeight > exp64(bestText - top)) scores.fill(-Infinity, 0, begin);
}

/** Spec step 4: the argmax, the lowest id on ties. */
export function choose(scores) {
  let best = 0;
  for (let i = 1; i < scores.length; i++) if (scores[i] > scores[best]) best = i;
  return best;
}

/** Timestamp steps in `frames` frames, as transformers computes it in float32. */
export function framesToPositions(frames) {
  const f = Math.fround;
  return Math.trunc(f(f(f(frames) * f(FRAME_SECONDS)) / f(TIME_PRECISION)));
}

/**
 * How many of a call's tokens so far `segments()` keeps whatever the call decodes next: the
 * tokens after its last timestamp pair are a segment not closed yet, dropped (seek goes back to
 * the pair) unless the call ends on a single timestamp; before any pair, all of them are kept.
 */
export function settledLength(generated, settings) {
  const begin = settings.timestampBegin;
  for (let i = generated.length - 1; i > 0; i--) {
    if (generated[i] >= begin && generated[i - 1] >= begin) return i + 1;
  }
  return generated.length;
}

/** Spec step 5: one call's segments ({start, end, tokens}) and the frames to move `seek` on. */
export function segments(generated, settings, seek = 0, frames = WINDOW_FRAMES) {
  const tokens = [...generated];
  if (tokens.length && tokens[tokens.length - 1] === settings.eos) tokens.pop();
  const offset = seek * TIME_PRECISION / INPUT_STRIDE;
  const begin = settings.timestampBegin;
  const isStamp = tokens.map((t) => t >= begin);
  const n = tokens.length;
  const singleEnding = n >= 2 ? !isStamp[n - 2] && isStamp[n - 1] : false;
  const cuts = [];
  for (let i = 0; i + 1 < n; i++) if (isStamp[i] && isStamp[i + 1]) cuts.push(i + 1);
  if (cuts.length === 0) {
    const stamps = tokens.filter((t) => t >= begin);
    const lastStamp = stamps[stamps.length - 1];
    const position = stamps.length && lastStamp !== begin ? lastStamp - begin : framesToPositions(frames);
    return { segments: [{ start: offset, end: offset + position * TIME_PRECISION, tokens }], advance: frames };
  }
  if (singleEnding) cuts.push(n);
  else cuts[cuts.length - 1] += 1; // the last pair's second timestamp stays with its segment
  const found = [];
  let previous = 0;
  cuts.forEach((cut, index) => {
    const piece = tokens.slice(previous, cut);
    const endToken = index < cuts.length - 1 || singleEnding ? piece[piece.length - 1] : piece[piece.length - 2];
    found.push({
      start: offset + (piece[0] - begin) * TIME_PRECISION,
      end: offset + (endToken - begin) * TIME_PRECISION,
      tokens: piece,
    });
    previous = cut;
  });
  const advance = singleEnding ? frames : (tokens[previous - 2] - begin) * INPUT_STRIDE;
  return { segments: found, advance };
}
