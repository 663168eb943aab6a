// Whisper's log-mel front end: what transformers' WhisperFeatureExtractor feeds a Whisper encoder.
// The spec is bundler/tasks/logmel.py (its docstring gives each step); this computes the same
// numbers in float64 and rounds to float32 at the end. Runs in the browser and under Node.
import { resample } from './audio.mjs';

const LOG_FLOOR = 1e-10;
const DYNAMIC_RANGE = 8.0;
const MAX_FREQUENCY = 8000.0;
const DEFAULTS = { feature_size: 80, sampling_rate: 16000, hop_length: 160, chunk_length: 30,
                   n_fft: 400, padding_value: 0.0 };

// The spec of a preprocessor_config.json object (missing keys: Whisper's defaults); mel_filters,
// when given ([feature_size][bins] or its transpose), is kept as a Float64Array [mels * bins].
export function logMelSpec(config = {}) {
  const spec = {};
  for (const [name, fallback] of Object.entries(DEFAULTS)) {
    const value = config[name] === undefined ? fallback : config[name]; // null is no number
    const ok = name === 'padding_value' ? Number.isFinite(value)
      : Number.isInteger(value) && value > 0;
    if (!ok) {
      const wanted = name === 'padding_value' ? 'a number' : 'a positive integer';
      throw new TypeError(`preprocessor_config.json: ${name} must be ${wanted}, got ${
        JSON.stringify(value)}`);
    }
    spec[name] = value;
  }
  if (spec.n_fft % 2) {
    throw new TypeError(`preprocessor_config.json: n_fft must be even, got ${spec.n_fft}`);
  }
  spec.n_samples = spec.chunk_length * spec.sampling_rate;
  spec.nb_max_frames = Math.floor(spec.n_samples / spec.hop_length);
  spec.mel_filters = config.mel_filters == null ? melFilters(spec)
    : givenFilters(config.mel_filters, spec.feature_size, spec.n_fft / 2 + 1);
  return spec;
}


// exp(-2πi (a b mod period) / period) for a < rows, b < cols, as cos and -sin tables [rows * cols]
function unitRoots(rows, cols, period) {
  const re = new Float64Array(rows * cols);
  const im = new Float64Array(rows * cols);
  for (let a = 0; a < rows; a++) {
    for (let b = 0; b < cols; b++) {
      const angle = (2 * Math.PI * ((a * b) % period)) / period;
      re[a * cols + b] = Math.cos(angle);
      im[a * cols + b] = -Math.sin(angle);
    }
  }
  return [re, im];
}
function givenFilters(rows, mels, bins) {
  const out = new Float64Array(mels * bins);
  const transposed = rows.length === bins && mels !== bins; // transformers' own: [bins][mels]
  const [outer, inner] = transposed ? [bins, mels] : [mels, bins];
  if (!Array.isArray(rows) || rows.length !== outer || rows.some((row) => row?.length !== inner)) {
    throw new TypeError(`preprocessor_config.json: mel_filters must be ${mels} x ${bins}`);
  }
  for (let i = 0; i < outer; i++) {
    for (let j = 0; j < inner; j++) out[transposed ? j * bins + i : i * bins + j] = rows[i][j];
  }
  return out;
}

const LOGSTEP = 27.0 / Math.log(6.4);
export const hertzToMel = (hertz) => (hertz >= 1000.0 ? 15.0 + Math.log(hertz / 1000.0) * LOGSTEP
  : (3.0 * hertz) / 200.0);
export const melToHertz = (mel) => (mel >= 15.0 ? 1000.0 * Math.exp((mel - 15.0) / LOGSTEP)
  : (200.0 * mel) / 3.0);

// Slaney's triangles, area-normalised, from 0 Hz to 8 kHz: Float64Array [feature_size * bins].
export function melFilters({ feature_size: mels, sampling_rate: rate, n_fft: nFft }) {
  const bins = nFft / 2 + 1;
  const low = hertzToMel(0.0);
  const high = hertzToMel(MAX_FREQUENCY);
  const edges = new Float64Array(mels + 2);
  // numpy's linspace: start + i * step, the last point exactly the stop
  const melStep = (high - low) / (mels + 1);
  for (let i = 0; i < mels + 2; i++) {
    edges[i] = melToHertz(i === mels + 1 ? high : low + i * melStep);
  }
  const top = Math.floor(rate / 2);
  const binStep = top / (bins - 1);
  const out = new Float64Array(mels * bins);
  for (let m = 0; m < mels; m++) {
    const area = 2.0 / (edges[m + 2] - edges[m]);
    for (let k = 0; k < bins; k++) {
      const frequency = k === bins - 1 ? top : k * binStep;
      const down = (frequency - edges[m]) / (edges[m + 1] - edges[m]);
      const up = (edges[m + 2] - frequency) / (edges[m + 2] - edges[m + 1]);
      out[m * bins + k] = Math.max(0.0, Math.min(down, up)) * area;
    }
  }
  return out;
}

// An exact complex DFT of any size n (200 = 4 * 2 * 5 * 5 for Whisper's real 400): Stockham's
// autosort FFT, decimation in frequency, one pass a factor (4s first, then 2, then odd primes).
// A pass of radix p over a length-l sub-sequence at stride s turns x[q + s (j + r m)] (m = l / p)
// into y[q + s (p j + t)] = W_l^(j t) sum_r x[..] W_p^(r t), and the next pass takes (q + s t) as
// its batch: the result lands in order.
export function fftPlan(n) {
  const factors = [];
  for (let rest = n, p = 4; rest > 1;) {
    if (rest % p === 0) { factors.push(p); rest /= p; } else p = p === 4 ? 2 : p === 2 ? 3 : p + 2;
  }
  const passes = [];
  let length = n;
  for (const p of factors) {
    const m = length / p;
    // twiddles W_l^(j t) [m * p] and the radix's own W_p^(r t) [p * p]
    const [twiddleRe, twiddleIm] = unitRoots(m, p, length);
    const [rootRe, rootIm] = unitRoots(p, p, p);
    passes.push({ p, m, twiddleRe, twiddleIm, rootRe, rootIm });
    length = m;
  }
  const radix = Math.max(1, ...factors);
  return { n, passes, re: [new Float64Array(n), new Float64Array(n)],
           im: [new Float64Array(n), new Float64Array(n)],
           sumRe: new Float64Array(radix), sumIm: new Float64Array(radix) };
}

// The DFT of (re, im) [n], in place.
export function fft(plan, re, im) {
  let [xRe, yRe] = [re, plan.re[0]];
  let [xIm, yIm] = [im, plan.im[0]];
  const { sumRe, sumIm } = plan;
  let s = 1;
  for (const { p, m, twiddleRe, twiddleIm, rootRe, rootIm } of plan.passes) {
    for (let j = 0; j < m; j++) {
      for (let q = 0; q < s; q++) {
        if (p === 4) { // W_4 is 1, -i, -1, i: no products
          const a0 = q + s * j;
          const a1 = a0 + s * m;
          const a2 = a1 + s * m;
          const a3 = a2 + s * m;
          const t0Re = xRe[a0] + xRe[a2];
          const t0Im = xIm[a0] + xIm[a2];
          const t1Re = xRe[a0] - xRe[a2];
          const t1Im = xIm[a0] - xIm[a2];
          const t2Re = xRe[a1] + xRe[a3];
          const t2Im = xIm[a1] + xIm[a3];
          const t3Re = xRe[a1] - xRe[a3];
          const t3Im = xIm[a1] - xIm[a3];
          sumRe[0] = t0Re + t2Re;
          sumIm[0] = t0Im + t2Im;
          sumRe[1] = t1Re + t3Im;
          sumIm[1] = t1Im - t3Re;
          sumRe[2] = t0Re - t2Re;
          sumIm[2] = t0Im - t2Im;
          sumRe[3] = t1Re - t3Im;
          sumIm[3] = t1Im + t3Re;
        } else if (p === 2) {
          const a0 = q + s * j;
          const a1 = a0 + s * m;
          sumRe[0] = xRe[a0] + xRe[a1];
          sumIm[0] = xIm[a0] + xIm[a1];
          sumRe[1] = xRe[a0] - xRe[a1];
          sumIm[1] = xIm[a0] - xIm[a1];
        } else {
          for (let t = 0; t < p; t++) {
            let accRe = 0;
            let accIm = 0;
            for (let r = 0; r < p; r++) {
              const a = q + s * (j + r * m);
              const wRe = rootRe[r * p + t];
              const wIm = rootIm[r * p + t];
              accRe += xRe[a] * wRe - xIm[a] * wIm;
              accIm += xRe[a] * wIm + xIm[a] * wRe;
            }
            sumRe[t] = accRe;
            sumIm[t] = accIm;
          }
        }
        for (let t = 0; t < p; t++) {
          const wRe = twiddleRe[j * p + t];
          const wIm = twiddleIm[j * p + t];
          const b = q + s * (p * j + t);
          yRe[b] = sumRe[t] * wRe - sumIm[t] * wIm;
          yIm[b] = sumRe[t] * wIm + sumIm[t] * wRe;
        }
      }
    }
    [xRe, yRe] = [yRe, xRe];
    [xIm, yIm] = [yIm, xIm];
    s *= p;
  }
  if (xRe !== re) {
    re.set(xRe);
    im.set(xIm);
  }
}

// Steps 2-3: the power of bins 0 .. n_fft / 2 of every frame, Float64Array [bins * frames].
export function powerSpectrogram(signal, spec) {
  const nFft = spec.n_fft;
  const half = nFft / 2;
  const bins = half + 1;
  const length = signal.length;
  const padded = new Float64Array(length + nFft); // reflect: the mirror without the edge sample
  for (let i = 0; i < padded.length; i++) {
    const j = i - half;
    padded[i] = signal[j < 0 ? -j : j >= length ? 2 * (length - 1) - j : j];
  }
  const frames = 1 + Math.floor(length / spec.hop_length);
  const window = new Float64Array(nFft);
  for (let i = 0; i < nFft; i++) window[i] = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / nFft);
  // A real frame of n_fft as a complex one of n_fft / 2 (even samples real, odd imaginary): one
  // half-size FFT, then X[k] = E[k] + W^k O[k] with E, O the even and odd samples' DFTs, taken
  // apart as E = (Z[k] + conj Z[h - k]) / 2, O = (Z[k] - conj Z[h - k]) / 2i.
  const plan = fftPlan(half);
  const cos = new Float64Array(bins);
  const sin = new Float64Array(bins);
  for (let k = 0; k < bins; k++) {
    cos[k] = Math.cos((2 * Math.PI * k) / nFft);
    sin[k] = -Math.sin((2 * Math.PI * k) / nFft);
  }
  const zRe = new Float64Array(half);
  const zIm = new Float64Array(half);
  const power = new Float64Array(bins * frames);
  for (let f = 0; f < frames; f++) {
    const start = f * spec.hop_length;
    for (let i = 0; i < half; i++) {
      zRe[i] = padded[start + 2 * i] * window[2 * i];
      zIm[i] = padded[start + 2 * i + 1] * window[2 * i + 1];
    }
    fft(plan, zRe, zIm);
    for (let k = 0; k < bins; k++) {
      const a = k % half;
      const b = (half - k) % half;
      const eRe = (zRe[a] + zRe[b]) / 2;
      const eIm = (zIm[a] - zIm[b]) / 2;
      const oRe = (zIm[a] + zIm[b]) / 2;
      const oIm = (zRe[b] - zRe[a]) / 2;
      const re = eRe + oRe * cos[k] - oIm * sin[k];
      const im = eIm + oRe * sin[k] + oIm * cos[k];
      power[k * frames + f] = re * re + im * im;
    }
  }
  return { power, frames };
}

// The encoder's input_features (batch dim left out): Float32Array [feature_size * nb_max_frames],
// row-major (mel bin by mel bin), from samples (any array of numbers) at sampleRate.
export function logMel(samples, sampleRate, spec) {
  if (!(sampleRate > 0)) throw new RangeError(`bad sample rate: ${sampleRate}`);
  const signal = resample(samples, sampleRate, spec.sampling_rate);
  const fitted = new Float64Array(spec.n_samples).fill(spec.padding_value);
  fitted.set(signal.length > spec.n_samples ? signal.subarray(0, spec.n_samples) : signal);
  const { power, frames } = powerSpectrogram(fitted, spec);
  const mels = spec.feature_size;
  const bins = spec.n_fft / 2 + 1;
  const kept = spec.nb_max_frames; // the last frame dropped
  const logs = new Float64Array(mels * kept);
  const column = new Float64Array(bins);
  // each filter's nonzero bins (a triangle: a few of them); the zeros add nothing
  const first = new Int32Array(mels);
  const last = new Int32Array(mels);
  for (let m = 0; m < mels; m++) {
    first[m] = bins;
    for (let k = 0; k < bins; k++) {
      if (spec.mel_filters[m * bins + k] !== 0) {
        if (first[m] === bins) first[m] = k;
        last[m] = k + 1;
      }
    }
  }
  let top = -Infinity;
  for (let f = 0; f < kept; f++) {
    for (let k = 0; k < bins; k++) column[k] = power[k * frames + f];
    for (let m = 0; m < mels; m++) {
      let sum = 0;
      const row = m * bins;
      for (let k = first[m]; k < last[m]; k++) sum += spec.mel_filters[row + k] * column[k];
      const value = Math.log10(Math.max(sum, LOG_FLOOR));
      logs[m * kept + f] = value;
      if (value > top) top = value;
    }
  }
  const out = new Float32Array(mels * kept);
  const floor = top - DYNAMIC_RANGE;
  for (let i = 0; i < out.length; i++) out[i] = (Math.max(logs[i], floor) + 4.0) / 4.0;
  return out;
}
