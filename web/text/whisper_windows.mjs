// Long audio for Whisper, the browser (and Node) side of bundler/text/whisper_windows.py, whose
// docstring is the spec: 30 s windows with a stride (transformers' ASR pipeline chunk_iter) and
// the merge of each window's tokens into chunks (its tokenizer's _decode_asr).
import { TIME_PRECISION } from './whisper.mjs';

export const RATE = 16000;
const SEGMENT_POSITIONS = 1500;

/** The windows over `samples` samples at 16 kHz: {start, end, left, right} in samples. */
export function windows(samples, chunkS = 30, strideS = null) {
  const stride = Math.round((strideS ?? chunkS / 6) * RATE);
  const chunk = Math.round(chunkS * RATE);
  if (chunk < 2 * stride) throw new Error('the window must be longer than its two strides');
  const found = [];
  for (let start = 0; start < samples; start += chunk - 2 * stride) {
    const end = Math.min(start + chunk, samples);
    const last = start + chunk >= samples;
    const left = start === 0 ? 0 : stride;
    const right = last ? 0 : stride;
    if (end - start > left) found.push({ start, end, left, right });
    if (last) break;
  }
  return found;
}

/** A window's (length, left stride, right stride) in seconds. */
export const strideSeconds = ({ start, end, left, right }) => [(end - start) / RATE, left / RATE, right / RATE];

/** The longest-common-sequence join of overlapping token sequences. */
export function lcsMerge(sequences) {
  if (sequences.length === 0) return [];
  let left = [...sequences[0]];
  const total = [];
  for (const right of sequences.slice(1)) {
    const n = left.length;
    const m = right.length;
    let best = 0;
    let cut = [n, n, 0, 0];
    for (let i = 1; i < n + m; i++) {
      const leftStart = Math.max(0, n - i);
      const leftStop = Math.min(n, n + m - i);
      const rightStart = Math.max(0, i - n);
      let matches = 0;
      for (let k = 0; k < leftStop - leftStart; k++) if (left[leftStart + k] === right[rightStart + k]) matches++;
      const score = matches / i + i / 10000;
      if (matches > 1 && score > best) {
        best = score;
        cut = [leftStart, leftStop, rightStart, Math.min(m, i)];
      }
    }
    total.push(...left.slice(0, Math.floor((cut[0] + cut[1]) / 2)));
    left = right.slice(Math.floor((cut[2] + cut[3]) / 2));
  }
  return total.concat(left);
}

// Python's round(x, 2) for the times here (none is a decimal tie)
const round2 = (x) => Number(x.toFixed(2));

/** The merged chunks ({tokens, start, end, language}) of each window's tokens and strides. */
export function merge(outputs, strides, settings, timestamps) {
  const begin = settings.timestampBegin;
  const eos = settings.eos;
  const languages = new Map(Object.entries(settings.langToId).map(([token, id]) => [id, token.slice(2, -2)]));
  const newChunk = (language = null) => ({ tokens: [], start: null, end: null, language });
  const chunks = [];
  let chunk = newChunk();
  let pending = [];
  let offset = 0;
  let skip = false;
  outputs.forEach((tokens, index) => {
    const [length, left, right] = strides[index];
    offset -= left;
    const first = left ? begin + left / TIME_PRECISION : begin;
    let last = null;
    if (right) {
      const rightStart = length - right;
      for (let i = tokens.length - 1; i >= 0; i--) {
        const token = tokens[i];
        if (token >= begin) {
          if (last !== null && (token - begin) * TIME_PRECISION < rightStart) break;
          last = token;
        }
      }
    }
    let current = [];
    let top = 0;
    let earlier = 0;
    let penultimate = 0;
    tokens.forEach((token, i) => {
      if (token >= eos && token < begin) {
        const language = languages.get(token);
        if (language === undefined) return;
        if (chunk.language && language !== chunk.language && !timestamps) {
          chunk.tokens = lcsMerge([...pending, current]);
          chunks.push(chunk);
          pending = [];
          current = [];
          chunk = newChunk();
        }
        chunk.language = language;
      } else if (token >= begin) {
        const stamp = (token - begin) * TIME_PRECISION;
        if (stamp < top) { // a later decoding call of the same window
          const single = i >= 2 && !(tokens[i - 1] >= begin && tokens[i - 2] >= begin);
          if (single) earlier += TIME_PRECISION * SEGMENT_POSITIONS;
          else {
            top = penultimate;
            earlier += penultimate;
          }
        }
        penultimate = top;
        top = stamp;
        const time = round2((token - begin) * TIME_PRECISION + offset + earlier);
        if (last && token >= last) skip = true;
        else if (skip || (pending.length && token < first)) skip = false;
        else if (chunk.start === null) chunk.start = time;
        else if (time !== chunk.start) {
          chunk.end = time;
          chunk.tokens = lcsMerge([...pending, current]);
          chunks.push(chunk);
          pending = [];
          current = [];
          chunk = newChunk(chunk.language);
        }
      } else {
        current.push(token);
      }
    });
    offset += length - right;
    if (current.length) pending.push(current);
    else if (!pending.some((p) => p.length)) {
      chunk = newChunk(chunk.language);
      pending = [];
    }
  });
  if (pending.length) {
    chunk.tokens = lcsMerge(pending);
    chunks.push(chunk);
  }
  return chunks;
}
