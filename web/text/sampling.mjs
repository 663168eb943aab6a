// The sampling spec's browser (and Node) side: logits -> token id, bit-identical to
// bundler/text/sampling.py, whose docstring is the spec (steps 1-7, exp64, mulberry32). Plain
// ESM with no imports. Every value goes through float64 +, -, *, /, comparisons and Math.floor in
// the spec's order; Math.exp is not used (engines differ in its last bit).

const LN2 = 0.6931471805599453;
const LN2_HI = 6.93147180369123816490e-01;
const LN2_LO = 1.90821492927058770002e-10;
const EXP_FLOOR = -700;
const DEGREE = 13;
const COEFFICIENTS = [1];
for (let n = 1; n <= DEGREE; n++) COEFFICIENTS.push(COEFFICIENTS[n - 1] / n);
const [C0, C1, C2, C3, C4, C5, C6, C7, C8, C9, C10, C11, C12, C13] = COEFFICIENTS;

// 2**k for k in [-1011, 1], built from its bits (exact): POWERS[k + 1011].
const POWERS = new Float64Array(1013);
{
  const bits = new DataView(new ArrayBuffer(8));
  for (let k = -1011; k <= 1; k++) {
    bits.setUint32(0, (k + 1023) << 20);
    bits.setUint32(4, 0);
    POWERS[k + 1011] = bits.getFloat64(0);
  }
}

/** The spec's exp for x <= 0. */
export function exp64(x) {
  if (!(x >= EXP_FLOOR)) return 0;
  const k = Math.floor(x / LN2 + 0.5);
  const r = (x - k * LN2_HI) - k * LN2_LO;
  // Horner's form written out: p = p * r + c[n] for n = 12 down to 0, as sampling.py loops
  let p = C13 * r + C12;
  p = p * r + C11; p = p * r + C10; p = p * r + C9; p = p * r + C8; p = p * r + C7;
  p = p * r + C6; p = p * r + C5; p = p * r + C4; p = p * r + C3; p = p * r + C2;
  p = p * r + C1; p = p * r + C0;
  return p * POWERS[k + 1011];
}

/** The spec's PRNG: uint32 outputs and float64 uniforms in [0, 1). */
export function mulberry32(seed) {
  let state = seed >>> 0;
  const nextUint32 = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    const a = state;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t = (t + Math.imul(t ^ (t >>> 7), t | 61)) ^ t;
    return (t ^ (t >>> 14)) >>> 0;
  };
  const uniform = () => {
    const high = nextUint32() >>> 5;
    const low = nextUint32() >>> 6;
    return (high * 67108864 + low) / 9007199254740992;
  };
  return { nextUint32, uniform };
}

/** Step 2: scores of seen ids, < 0 multiplied by the penalty, others divided by it (in place). */
export function penalize(scores, seen, penalty) {
  if (penalty === 1) return scores;
  for (const id of new Set(seen)) {
    const value = scores[id];
    scores[id] = value < 0 ? value * penalty : value / penalty;
  }
  return scores;
}

/** Step 3: the highest score, lowest id on ties. */
export function argmax(scores) {
  let best = 0;
  for (let i = 1; i < scores.length; i++) if (scores[i] > scores[best]) best = i;
  return best;
}

/** The k-th largest of `values`, duplicates counted: the least of a min-heap of the k largest
 * (one comparison for most values), or a sort when k is large. */
function kthLargest(values, k) {
  if (k > 1024) return Float64Array.from(values).sort()[values.length - k];
  const heap = Float64Array.from(values.subarray ? values.subarray(0, k) : values.slice(0, k));
  const down = (start) => {
    for (let i = start; ;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let least = i;
      if (left < k && heap[left] < heap[least]) least = left;
      if (right < k && heap[right] < heap[least]) least = right;
      if (least === i) return;
      [heap[i], heap[least]] = [heap[least], heap[i]];
      i = least;
    }
  };
  for (let i = (k >> 1) - 1; i >= 0; i--) down(i);
  for (let i = k; i < values.length; i++) {
    if (values[i] > heap[0]) {
      heap[0] = values[i];
      down(0);
    }
  }
  return heap[0];
}

/** Step 5: scores below the k-th largest (duplicates counted) become -inf (in place). */
export function topKFilter(scores, topK) {
  if (!(topK > 0 && topK < scores.length)) return scores;
  const threshold = kthLargest(scores, topK);
  for (let i = 0; i < scores.length; i++) if (scores[i] < threshold) scores[i] = -Infinity;
  return scores;
}

// Score margins below the top within which top-p first looks for its prefix: sorting only those
// scores gives the same prefix as sorting all of them whenever the prefix lies inside.
const TOP_P_MARGINS = [4, 8, 16, 32, 64, Infinity];

/** Step 6: keeps the shortest prefix (score descending, id ascending) whose weight reaches
 * topP of the total (summed in id order); the rest become -inf (in place). */
export function topPFilter(scores, topP) {
  if (topP >= 1) return scores;
  let top = -Infinity;
  for (let i = 0; i < scores.length; i++) if (scores[i] > top) top = scores[i];
  const weights = new Float64Array(scores.length);
  let total = 0;
  for (let i = 0; i < scores.length; i++) total += weights[i] = exp64(scores[i] - top);
  const target = topP * total;
  const byScore = (a, b) => (scores[a] > scores[b] ? -1 : scores[a] < scores[b] ? 1 : a - b);
  let kept = null;
  for (const margin of TOP_P_MARGINS) {
    const floor = top - margin;
    const order = [];
    for (let i = 0; i < scores.length; i++) {
      if (scores[i] >= floor && scores[i] > -Infinity) order.push(i);
    }
    order.sort(byScore);
    let running = 0;
    for (let j = 0; j < order.length; j++) {
      running += weights[order[j]];
      if (running >= target) { kept = order.slice(0, j + 1); break; }
    }
    if (kept) break;
    if (margin === Infinity) kept = order; // the rounding edge: all finite scores stay
  }
  const keep = new Uint8Array(scores.length);
  for (const id of kept) keep[id] = 1;
  for (let i = 0; i < scores.length; i++) if (!keep[i]) scores[i] = -Infinity;
  return scores;
}

/** Step 7: the inverse-CDF draw of the float64 softmax of `scores` at `uniform`. */
export function draw(scores, uniform) {
  let top = -Infinity;
  for (const value of scores) if (value > top) top = value;
  const weights = new Float64Array(scores.length);
  let total = 0;
  for (let i = 0; i < scores.length; i++) total += weights[i] = exp64(scores[i] - top);
  const target = uniform * total;
  let running = 0;
  let last = -1;
  for (let i = 0; i < scores.length; i++) {
    running += weights[i];
    if (weights[i] > 0) {
      if (running > target) return i;
      last = i;
    }
  }
  return last;
}

/** Checks a call's sampling options (camelCase) and fills the defaults: greedy decoding. */
export function samplingOptions(options = {}) {
  const {
    doSample = false, temperature = 1, topK = 0, topP = 1, repetitionPenalty = 1, seed = 0,
  } = options;
  const fail = (message) => { throw new RangeError(message); };
  if (!(temperature >= 0)) fail(`temperature must be >= 0, got ${temperature}`);
  if (!(Number.isInteger(topK) && topK >= 0)) fail(`topK must be an integer >= 0, got ${topK}`);
  if (!(topP > 0 && topP <= 1)) fail(`topP must be in (0, 1], got ${topP}`);
  if (!(repetitionPenalty > 0)) fail(`repetitionPenalty must be > 0, got ${repetitionPenalty}`);
  if (!(Number.isInteger(seed) && seed >= 0 && seed <= 0xffffffff)) {
    fail(`seed must be an integer in [0, 2**32), got ${seed}`);
  }
  return { doSample: Boolean(doSample), temperature, topK, topP, repetitionPenalty, seed };
}

/** One generation call's token chooser: `next(logits, seen)` applies the spec in order. */
export function createSampler(options = {}) {
  const settings = samplingOptions(options);
  const random = mulberry32(settings.seed);
  const greedy = !settings.doSample || settings.temperature === 0;
  return {
    options: settings,
    next(logits, seen = []) {
      // float32 -> float64, exact; plain arrays are rounded to float32 first, as numpy's cast
      const scores = logits instanceof Float32Array ? new Float64Array(logits)
        : Float64Array.from(logits, (value) => Math.fround(value));
      penalize(scores, seen, settings.repetitionPenalty);
      if (greedy) return argmax(scores);
      for (let i = 0; i < scores.length; i++) scores[i] = scores[i] / settings.temperature;
      topPFilter(topKFilter(scores, settings.topK), settings.topP);
      return draw(scores, random.uniform());
    },
  };
}
