// Image sources -> the uint8 [1, H, W, 3] the task graph takes. The spec is bundler/tasks/image.py
// (the same geometry and the same float64 arithmetic, in the same order, so the browser and
// Python feed the model the same bytes).
import { BundleError } from '../bundle.core.mjs';
import { OWNER_RESIZES } from './resample.mjs';

const BITMAP_OPTIONS = { colorSpaceConversion: 'none', premultiplyAlpha: 'none',
                         imageOrientation: 'from-image' };

function sizeOf(source) {
  if (typeof VideoFrame !== 'undefined' && source instanceof VideoFrame) {
    return [source.displayWidth, source.displayHeight];
  }
  if (typeof HTMLImageElement !== 'undefined' && source instanceof HTMLImageElement) {
    return [source.naturalWidth, source.naturalHeight];
  }
  if (typeof HTMLVideoElement !== 'undefined' && source instanceof HTMLVideoElement) {
    return [source.videoWidth, source.videoHeight];
  }
  return [source.width, source.height];
}

// What a source is sent to the worker as (load({ worker: true })): a Blob as it is (the worker
// decodes it), anything else as a new ImageBitmap of it, transferred (the caller's source stays
// usable).
export async function forWorker(source) {
  if (source instanceof Blob) return { source, transfer: [] };
  if (source == null || typeof source !== 'object') await toPixels(source); // its bad-source error
  const bitmap = typeof ImageData !== 'undefined' && source instanceof ImageData
    ? await createImageBitmap(source, BITMAP_OPTIONS) : await createImageBitmap(source);
  return { source: bitmap, transfer: [bitmap] };
}

// The RGBA pixels of a source: { data: Uint8ClampedArray, width, height }.
export async function toPixels(source) {
  if (source == null || typeof source !== 'object') {
    throw new BundleError('bad-source', `expected an image, canvas, ImageBitmap, ImageData,
 VideoFrame or Blob, got ${source === null ? 'null' : typeof source}`.replace('\n', ''));
  }
  if (typeof ImageData !== 'undefined' && source instanceof ImageData) {
    return { data: source.data, width: source.width, height: source.height };
  }
  if (source instanceof Blob) {
    let bitmap;
    try {
      bitmap = await createImageBitmap(source, BITMAP_OPTIONS);
    } catch (error) {
      throw new BundleError('bad-source', `the Blob is not an image the browser decodes
 (${error.message ?? error})`.replace('\n', ''));
    }
    try {
      return await toPixels(bitmap);
    } finally {
      bitmap.close();
    }
  }
  const [width, height] = sizeOf(source);
  if (!(width > 0 && height > 0)) {
    throw new BundleError('bad-source', 'the image has no pixels yet (not loaded, or 0 x 0)');
  }
  const canvas = new OffscreenCanvas(width, height);
  const context = canvas.getContext('2d', { willReadFrequently: true });
  context.drawImage(source, 0, 0);
  const { data } = context.getImageData(0, 0, width, height);
  return { data, width, height };
}

const round = (value) => Math.floor(value + 0.5);

const padsFirst = (task) => task.resize === 'letterbox' && task.letterbox_order === 'pad-then-resize';

// pad-then-resize: [width, height] of the padded source and the source's [left, top] in it.
export function canvas(sourceWidth, sourceHeight, task) {
  const [height, width] = task.size;
  const [canvasWidth, canvasHeight] = sourceWidth * height >= sourceHeight * width
    ? [sourceWidth, round(sourceWidth * height / width)]
    : [round(sourceHeight * width / height), sourceHeight];
  if (task.placement === 'top-left') return [canvasWidth, canvasHeight, 0, 0];
  return [canvasWidth, canvasHeight, Math.floor((canvasWidth - sourceWidth) / 2),
          Math.floor((canvasHeight - sourceHeight) / 2)];
}

// Where the source lies in the model's input: { scale_x, scale_y, left, top, width, height }.
export function geometry(sourceWidth, sourceHeight, task) {
  const [height, width] = task.size;
  if (padsFirst(task)) {
    const [canvasWidth, canvasHeight, left, top] = canvas(sourceWidth, sourceHeight, task);
    const scaleX = width / canvasWidth;
    const scaleY = height / canvasHeight;
    return { scale_x: scaleX, scale_y: scaleY, left: left * scaleX, top: top * scaleY,
             width: sourceWidth * scaleX, height: sourceHeight * scaleY };
  }
  if (task.resize === 'stretch') {
    return { scale_x: width / sourceWidth, scale_y: height / sourceHeight, left: 0, top: 0,
             width, height };
  }
  const pick = task.resize === 'letterbox' ? Math.min : Math.max;
  let ratio = pick(width / sourceWidth, height / sourceHeight);
  if (task.resize === 'center-crop') ratio /= task.crop_fraction ?? 1;
  const newWidth = round(sourceWidth * ratio);
  const newHeight = round(sourceHeight * ratio);
  const topLeft = task.resize === 'letterbox' && task.placement === 'top-left';
  return {
    scale_x: newWidth / sourceWidth, scale_y: newHeight / sourceHeight,
    left: topLeft ? 0 : Math.floor((width - newWidth) / 2),
    top: topLeft ? 0 : Math.floor((height - newHeight) / 2),
    width: newWidth, height: newHeight,
  };
}

// Per output position along one axis: inside, index0, index1, fraction.
function axis(count, start, extent, scale, size, bilinear) {
  const inside = new Uint8Array(count);
  const index0 = new Int32Array(count);
  const index1 = new Int32Array(count);
  const fraction = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    const position = i - start;
    inside[i] = position >= 0 && position < extent ? 1 : 0;
    if (bilinear) {
      const coordinate = Math.min(Math.max((position + 0.5) / scale - 0.5, 0), size - 1);
      index0[i] = Math.floor(coordinate);
      index1[i] = Math.min(index0[i] + 1, size - 1);
      fraction[i] = coordinate - index0[i];
    } else {
      index0[i] = Math.max(Math.min(Math.floor((position + 0.5) / scale), size - 1), 0);
      index1[i] = index0[i];
    }
  }
  return { inside, index0, index1, fraction };
}

// antialias: the source indices and weights per output position (see image.py's docstring).
function antialiasWeights(count, start, scale, size) {
  const spread = Math.max(1 / scale, 1);
  const taps = [];
  for (let i = 0; i < count; i++) {
    const centre = (i - start + 0.5) / scale;
    const first = Math.max(Math.floor(centre - spread + 0.5), 0);
    const last = Math.min(Math.floor(centre + spread + 0.5), size);
    const weights = [];
    let total = 0;
    for (let j = first; j < last; j++) {
      const weight = Math.max(0, 1 - Math.abs((j - centre + 0.5) / spread));
      weights.push(weight);
      total += weight;
    }
    taps.push({ first, weights: weights.map((weight) => (total > 0 ? weight / total : weight)) });
  }
  return taps;
}

const toByte = (value) => Math.min(Math.max(Math.floor(value + 0.5), 0), 255);

// Rows then columns, each pass rounded to byte values; only the columns and rows inside.
function antialias({ data, width: sourceWidth, height: sourceHeight }, place, xs, ys, out) {
  const [height, width] = [ys.inside.length, xs.inside.length];
  const columns = antialiasWeights(width, place.left, place.scale_x, sourceWidth);
  const rows = new Float64Array(sourceHeight * width * 3);
  for (let y = 0; y < sourceHeight; y++) {
    for (let u = 0; u < width; u++) {
      if (!xs.inside[u]) continue;
      const { first, weights } = columns[u];
      for (let k = 0; k < 3; k++) {
        let sum = 0;
        for (let t = 0; t < weights.length; t++) {
          sum += data[(y * sourceWidth + first + t) * 4 + k] * weights[t];
        }
        rows[(y * width + u) * 3 + k] = toByte(sum);
      }
    }
  }
  const lines = antialiasWeights(height, place.top, place.scale_y, sourceHeight);
  for (let v = 0; v < height; v++) {
    if (!ys.inside[v]) continue;
    const { first, weights } = lines[v];
    for (let u = 0; u < width; u++) {
      if (!xs.inside[u]) continue;
      for (let k = 0; k < 3; k++) {
        let sum = 0;
        for (let t = 0; t < weights.length; t++) {
          sum += rows[((first + t) * width + u) * 3 + k] * weights[t];
        }
        out[(v * width + u) * 3 + k] = toByte(sum);
      }
    }
  }
}

// The last padded canvas: webcam frames of one size reuse it (only the source part is rewritten).
let lastCanvas = { key: null, padded: null };

// pad-then-resize: the source padded (RGBA) to its canvas, then stretched to the input.
function fitPadded({ data, width: sourceWidth, height: sourceHeight }, task) {
  const [canvasWidth, canvasHeight, left, top] = canvas(sourceWidth, sourceHeight, task);
  const key = [canvasWidth, canvasHeight, left, top, sourceWidth, sourceHeight,
               task.pad_value ?? 114].join();
  if (lastCanvas.key !== key) {
    lastCanvas = { key, padded: new Uint8ClampedArray(canvasWidth * canvasHeight * 4)
      .fill(task.pad_value ?? 114) };
  }
  const { padded } = lastCanvas;
  for (let y = 0; y < sourceHeight; y++) {
    padded.set(data.subarray(y * sourceWidth * 4, (y + 1) * sourceWidth * 4),
               ((top + y) * canvasWidth + left) * 4);
  }
  const stretched = { ...task, resize: 'stretch', letterbox_order: null };
  const { data: fitted } = fitImage({ data: padded, width: canvasWidth, height: canvasHeight },
                                    stretched);
  return { data: fitted, place: geometry(sourceWidth, sourceHeight, task) };
}

// cv2-linear, pil-bilinear: the whole source resized by the owner's arithmetic, then placed.
function fitOwner({ data, width: sourceWidth, height: sourceHeight }, task, place, out) {
  const [height, width] = task.size;
  if (Math.min(place.width, place.height) < 1) return; // too thin: nothing but padding
  const resized = OWNER_RESIZES[task.filter](data, sourceWidth, sourceHeight, 4, place.width,
                                             place.height);
  const first = Math.max(place.left, 0);
  const last = Math.min(place.left + place.width, width);
  for (let v = Math.max(place.top, 0); v < Math.min(place.top + place.height, height); v++) {
    const row = (v - place.top) * place.width - place.left;
    out.set(resized.subarray((row + first) * 3, (row + last) * 3), (v * width + first) * 3);
  }
}

// RGBA pixels -> { data: Uint8Array [H * W * 3] RGB, place } for the graph's uint8 input.
export function fitImage(pixels, task) {
  if (padsFirst(task)) return fitPadded(pixels, task);
  const { data, width: sourceWidth, height: sourceHeight } = pixels;
  const [height, width] = task.size;
  const place = geometry(sourceWidth, sourceHeight, task);
  if (Object.hasOwn(OWNER_RESIZES, task.filter)) {
    const out = new Uint8Array(height * width * 3).fill(task.pad_value ?? 114);
    fitOwner(pixels, task, place, out);
    return { data: out, place };
  }
  const bilinear = task.filter !== 'nearest';
  const ys = axis(height, place.top, place.height, place.scale_y, sourceHeight, bilinear);
  const xs = axis(width, place.left, place.width, place.scale_x, sourceWidth, bilinear);
  const out = new Uint8Array(height * width * 3).fill(task.pad_value ?? 114);
  if (task.filter === 'antialias') {
    antialias(pixels, place, xs, ys, out);
    return { data: out, place };
  }
  for (let v = 0; v < height; v++) {
    if (!ys.inside[v]) continue;
    const fy = ys.fraction[v];
    const row0 = ys.index0[v] * sourceWidth;
    const row1 = ys.index1[v] * sourceWidth;
    for (let u = 0; u < width; u++) {
      if (!xs.inside[u]) continue;
      const fx = xs.fraction[u];
      const a = (row0 + xs.index0[u]) * 4;
      const b = (row0 + xs.index1[u]) * 4;
      const c = (row1 + xs.index0[u]) * 4;
      const d = (row1 + xs.index1[u]) * 4;
      const target = (v * width + u) * 3;
      for (let k = 0; k < 3; k++) {
        const top = data[a + k] * (1 - fx) + data[b + k] * fx;
        const bottom = data[c + k] * (1 - fx) + data[d + k] * fx;
        const value = Math.floor(top * (1 - fy) + bottom * fy + 0.5);
        out[target + k] = Math.min(Math.max(value, 0), 255);
      }
    }
  }
  return { data: out, place };
}

// Runs `run` (a model's or a session's) on a source: { output (plain tensor), place, width,
// height }. In the worker mode this runs in the worker (bundle.worker.mjs's 'image' message).
export async function runOnImage(run, source, task) {
  const pixels = await toPixels(source);
  const { data, place } = fitImage(pixels, task);
  const [height, width] = task.size;
  const outputs = await run({ [task.input]: { type: 'uint8', dims: [1, height, width, 3], data } });
  return { output: outputs[task.output], place, width: pixels.width, height: pixels.height };
}
