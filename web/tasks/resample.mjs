// Owner-exact uint8 resizes: OpenCV's INTER_LINEAR (cv2-linear) and Pillow's BILINEAR
// (pil-bilinear), in their own integer arithmetic. The spec is bundler/tasks/resample.py; these
// compute the same bytes. Input: pixels with `stride` bytes a pixel (4: RGBA); output: RGB.

const CV_COEF_SCALE = 2048;
const PIL_PRECISION_BITS = 22;
const PIL_HALF = 1 << (PIL_PRECISION_BITS - 1);

// cvRound on a non-negative float: round half to even.
function roundHalfEven(value) {
  const rounded = Math.round(value);
  return rounded - value === 0.5 && rounded % 2 !== 0 ? rounded - 1 : rounded;
}

// Per output position of an axis size -> count: index0, index1, weight0, weight1.
export function cv2LinearTable(size, count, clampFraction) {
  const index0 = new Int32Array(count);
  const index1 = new Int32Array(count);
  const weight0 = new Int32Array(count);
  const weight1 = new Int32Array(count);
  const scale = 1 / (count / size);
  for (let i = 0; i < count; i++) {
    let fraction = Math.fround((i + 0.5) * scale - 0.5);
    const index = Math.floor(fraction);
    fraction = Math.fround(fraction - index);
    if (clampFraction && (index < 0 || index >= size - 1)) fraction = 0;
    index0[i] = Math.min(Math.max(index, 0), size - 1);
    index1[i] = Math.min(Math.max(index + 1, 0), size - 1);
    weight1[i] = roundHalfEven(fraction * CV_COEF_SCALE);
    weight0[i] = roundHalfEven(Math.fround(1 - fraction) * CV_COEF_SCALE);
  }
  return { index0, index1, weight0, weight1 };
}

function halveCv2(data, sourceWidth, stride, width, height) {
  const out = new Uint8Array(width * height * 3);
  for (let v = 0; v < height; v++) {
    const top = 2 * v * sourceWidth;
    const bottom = top + sourceWidth;
    for (let u = 0; u < width; u++) {
      const a = (top + 2 * u) * stride;
      const c = (bottom + 2 * u) * stride;
      for (let k = 0; k < 3; k++) {
        const total = data[a + k] + data[a + stride + k] + data[c + k] + data[c + stride + k];
        out[(v * width + u) * 3 + k] = (total + 2) >> 2;
      }
    }
  }
  return out;
}

export function resizeCv2Linear(data, sourceWidth, sourceHeight, stride, width, height) {
  if (sourceWidth === 2 * width && sourceHeight === 2 * height) {
    return halveCv2(data, sourceWidth, stride, width, height);
  }
  const xs = cv2LinearTable(sourceWidth, width, true);
  const ys = cv2LinearTable(sourceHeight, height, false);
  // The horizontal pass of each source row read, as ints (S >> 4, as the vertical pass takes it).
  const slot = new Int32Array(sourceHeight).fill(-1);
  let rows = 0;
  for (let v = 0; v < height; v++) {
    if (slot[ys.index0[v]] < 0) slot[ys.index0[v]] = rows++;
    if (slot[ys.index1[v]] < 0) slot[ys.index1[v]] = rows++;
  }
  const line = width * 3;
  const horizontal = new Int32Array(rows * line);
  for (let y = 0; y < sourceHeight; y++) {
    if (slot[y] < 0) continue;
    const row = y * sourceWidth;
    const target = slot[y] * line;
    for (let u = 0; u < width; u++) {
      const a = (row + xs.index0[u]) * stride;
      const b = (row + xs.index1[u]) * stride;
      const w0 = xs.weight0[u];
      const w1 = xs.weight1[u];
      for (let k = 0; k < 3; k++) {
        horizontal[target + u * 3 + k] = (data[a + k] * w0 + data[b + k] * w1) >> 4;
      }
    }
  }
  const out = new Uint8Array(height * line);
  for (let v = 0; v < height; v++) {
    const top = slot[ys.index0[v]] * line;
    const bottom = slot[ys.index1[v]] * line;
    const b0 = ys.weight0[v];
    const b1 = ys.weight1[v];
    const target = v * line;
    for (let i = 0; i < line; i++) {
      const value = (((horizontal[top + i] * b0) >> 16) + ((horizontal[bottom + i] * b1) >> 16)
        + 2) >> 2;
      out[target + i] = value > 255 ? 255 : value;
    }
  }
  return out;
}

// Per output position of an axis size -> count: first source index, taps used, and the integer
// weights (`taps` a position).
export function pilBilinearTable(size, count) {
  const scale = size / count;
  const support = Math.max(scale, 1);
  const inverse = 1 / support;
  const taps = Math.ceil(support) * 2 + 1;
  const first = new Int32Array(count);
  const used = new Int32Array(count);
  const weights = new Int32Array(count * taps);
  const values = new Float64Array(taps);
  for (let i = 0; i < count; i++) {
    const centre = (i + 0.5) * scale;
    const low = Math.max(Math.trunc(centre - support + 0.5), 0);
    const high = Math.min(Math.trunc(centre + support + 0.5), size);
    let total = 0;
    for (let j = low; j < high; j++) {
      values[j - low] = Math.max(0, 1 - Math.abs((j - centre + 0.5) * inverse));
      total += values[j - low];
    }
    for (let j = 0; j < high - low; j++) {
      const value = total !== 0 ? values[j] / total : values[j];
      weights[i * taps + j] = Math.trunc(0.5 + value * (1 << PIL_PRECISION_BITS));
    }
    first[i] = low;
    used[i] = high - low;
  }
  return { first, used, weights, taps };
}

const pilByte = (total) => {
  const value = total >> PIL_PRECISION_BITS;
  return value < 0 ? 0 : value > 255 ? 255 : value;
};

// One pass of Pillow's resample along the rows (axis 0) or the columns (axis 1): RGB out.
function pilPass(data, width, height, stride, axis, count) {
  const { first, used, weights, taps } = pilBilinearTable(axis === 0 ? height : width, count);
  const [outWidth, outHeight] = axis === 0 ? [width, count] : [count, height];
  const out = new Uint8ClampedArray(outWidth * outHeight * 3); // as the source: one element kind
  const step = axis === 0 ? width * stride : stride; // source bytes between taps
  for (let y = 0; y < outHeight; y++) {
    for (let x = 0; x < outWidth; x++) {
      const i = axis === 0 ? y : x;
      let at = axis === 0 ? (first[i] * width + x) * stride : (y * width + first[i]) * stride;
      let red = PIL_HALF;
      let green = PIL_HALF;
      let blue = PIL_HALF;
      for (let t = i * taps, end = t + used[i]; t < end; t++, at += step) {
        const weight = weights[t];
        red = (red + Math.imul(data[at], weight)) | 0; // < 2^31: 255 * 2^22 + 2^21 at most
        green = (green + Math.imul(data[at + 1], weight)) | 0;
        blue = (blue + Math.imul(data[at + 2], weight)) | 0;
      }
      const target = (y * outWidth + x) * 3;
      out[target] = pilByte(red);
      out[target + 1] = pilByte(green);
      out[target + 2] = pilByte(blue);
    }
  }
  return out;
}

export function resizePilBilinear(data, sourceWidth, sourceHeight, stride, width, height) {
  const shrink = sourceHeight - height;
  const verticalFirst = shrink > 0 && shrink > (sourceWidth - width) * 2;
  let current = { data, width: sourceWidth, height: sourceHeight, stride };
  for (const axis of verticalFirst ? [0, 1] : [1, 0]) {
    const count = axis === 0 ? height : width;
    if ((axis === 0 ? current.height : current.width) === count) continue;
    const out = pilPass(current.data, current.width, current.height, current.stride, axis, count);
    current = { data: out, stride: 3, width: axis === 0 ? current.width : count,
                height: axis === 0 ? count : current.height };
  }
  if (current.stride === 3) return current.data;
  const out = new Uint8Array(width * height * 3); // neither axis changed: the RGB of the source
  for (let p = 0; p < width * height; p++) {
    for (let k = 0; k < 3; k++) out[p * 3 + k] = data[p * stride + k];
  }
  return out;
}

export const OWNER_RESIZES = { 'cv2-linear': resizeCv2Linear, 'pil-bilinear': resizePilBilinear };
