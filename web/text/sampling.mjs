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

const POWER = new DataView(new ArrayBuffer(8));

/** 2**k for an integer k in the normal range, built from its bits (exact). */
function powerOfTwo(k) {
  POWER.setUint32(0, (k + 1023) << 20);
  POWER.setUint32(4, 0);
  return POWER.getFloat64(0);
}

/** The spec's exp for x <= 0. */
export function exp64(x) {
  if (!(x >= EXP_FLOOR)) return 0;
  const k = Math.floor(x / LN2 + 0.5);
  const r = (x - k * LN2_HI) - k * LN2_LO;
  let p = COEFFICIENTS[DEGREE];
  for (let n = DEGREE - 1; n >= 0; n--) p = p * r + COEFFICIENTS[n];
  return p * powerOfTwo(k);
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

/** Step 5: scores below the k-th largest (duplicates counted) become -inf (in place). */
export function topKFilter(scores, topK) {
  if (!(topK > 0 && topK < scores.length)) return scores;
  const threshold = Float64Array.from(scores).sort().reverse()[topK - 1];
  for (let i = 0; i < scores.length; i++) if (scores[i] < threshold) scores[i] = -Infinity;
  return scores;
}

/** Step 6: keeps the shortest prefix (score descending, id ascending) whose weight reaches
 * topP of the total; the rest become -inf (in place). */
export function topPFilter(scores, topP) {
  if (topP >= 1) return scores;
  const order = [];
  for (let i = 0; i < scores.length; i++) if (Number.isFinite(scores[i])) order.push(i);
  order.sort((a, b) => (scores[a] > scores[b] ? -1 : scores[a] < scores[b] ? 1 : a - b));
  const top = scores[order[0]];
  const running = new Float64Array(order.length);
  let sum = 0;
  for (let j = 0; j < order.length; j++) running[j] = sum += exp64(scores[order[j]] - top);
  let keep = order.length;
  const target = topP * sum;
  for (let j = 0; j < order.length; j++) if (running[j] >= target) { keep = j + 1; break; }
  const kept = new Set(order.slice(0, keep));
  for (let i = 0; i < scores.length; i++) if (!kept.has(i)) scores[i] = -Infinity;
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
      const scores = Float64Array.from(logits, Math.fround); // float32 -> float64, exact
      penalize(scores, seen, settings.repetitionPenalty);
      if (greedy) return argmax(scores);
      for (let i = 0; i < scores.length; i++) scores[i] = scores[i] / settings.temperature;
      topPFilter(topKFilter(scores, settings.topK), settings.topP);
      return draw(scores, random.uniform());
    },
  };
}
