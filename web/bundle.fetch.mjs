// bundle.fetch.mjs: fetches one file of bundle.json's `files` table for bundle.mjs (or several
// at once, fetchFiles: a model's graph and its external data files).
//
//   const bytes = await fetchFile(entry, (path) => url, onProgress, { stage: 'model' });
//
// - A file split into parts (entry.parts) is fetched in parts, all at once, put back together.
// - A file (or part) with a gzip sibling is fetched as that sibling and decompressed here as it
//   arrives (DecompressionStream), so a static host that compresses nothing still sends gzip's
//   bytes; a host that adds Content-Encoding to the sibling is fine too (the bytes arrive plain).
//   A model's piece with a packed sibling (its float weights as byte planes, smaller gzipped:
//   bundler/bundle/planes.py) is fetched as that one instead, and its planes put back (unpack).
// - Progress counts the file's real bytes (entry.bytes) across all parts, also when the server
//   sends a compressed body (its Content-Length is then the compressed size, not the total).
// - Every part (a file not in parts: the whole) is checked against its sha256; a mismatch is
//   fetched once more past the HTTP cache (a stale copy), then rejected with an Error whose code
//   is 'integrity'.
// - Checked bytes are kept in Cache Storage under their sha256, so the next visit transfers
//   nothing and a new build fetches exactly the files whose content changed. A full quota keeps
//   them in memory only (a warning, not a failure); { cache: false } skips Cache Storage.

import { BundleError } from './bundle.core.mjs';

const CACHE_NAME = 'onnx-bundler';
const KEY_PREFIX = '/__onnx-bundler__/sha256/';

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, '0')).join('');
}

let warnedInsecure = false;

async function matches(bytes, sha256) {
  if (!sha256) return true;
  if (!globalThis.crypto?.subtle) { // only secure contexts (https, localhost) have it
    if (!warnedInsecure) console.warn('bundle: not a secure context, sha256 not checked');
    warnedInsecure = true;
    return true;
  }
  return hex(await crypto.subtle.digest('SHA-256', bytes)) === sha256;
}

function cacheKey(sha256) {
  return new URL(KEY_PREFIX + sha256, globalThis.location?.origin ?? 'https://bundle.invalid');
}

async function openCache(wanted) {
  if (!wanted || !globalThis.caches) return null;
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return null; // opaque origins and some private modes refuse Cache Storage
  }
}

// The sibling a piece of a file is fetched as: packed, else gzip, where the build wrote one.
const siblingOf = (piece) => piece.packed ?? piece.encodings?.gzip;

// The path a piece of a file is fetched from: its sibling, else the piece itself.
// bundle.files.mjs lists the same paths (asset_paths in bundler/bundle/files.py).
export function fetchedPath(piece) {
  return siblingOf(piece)?.path ?? piece.path;
}

// What goes over the wire for a file: per piece (its parts, or itself), the path fetched and its
// bytes as sent.
export function fetchedPieces(entry) {
  return (entry.parts ?? [entry]).map((piece) => ({
    path: fetchedPath(piece), bytes: siblingOf(piece)?.bytes ?? piece.bytes ?? 0 }));
}

// bundler/bundle/planes.py's unpack, in place: each run [start, bytes, itemsize] of byte planes
// (lowest byte first) back into its little-endian values, each rotated right by a bit.
export function unpack(bytes, runs) {
  for (const [start, length, itemsize] of runs) {
    const count = length / itemsize;
    const planes = bytes.slice(start, start + length);
    if (itemsize === 4) {
      for (let i = 0, at = start; i < count; i += 1, at += 4) {
        const rotated = planes[i] | (planes[count + i] << 8) | (planes[2 * count + i] << 16)
          | (planes[3 * count + i] << 24);
        const value = (rotated >>> 1) | (rotated << 31);
        bytes[at] = value;
        bytes[at + 1] = value >>> 8;
        bytes[at + 2] = value >>> 16;
        bytes[at + 3] = value >>> 24;
      }
    } else {
      for (let i = 0, at = start; i < count; i += 1, at += 2) {
        const rotated = planes[i] | (planes[count + i] << 8);
        const value = (rotated >>> 1) | (rotated << 15);
        bytes[at] = value;
        bytes[at + 1] = value >>> 8;
      }
    }
  }
  return bytes;
}

const isGzip = (bytes) => bytes.byteLength >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;

function decompressor() {
  if (typeof DecompressionStream !== 'function') {
    throw new BundleError('unsupported-environment', 'this browser has no DecompressionStream,'
      + ' which the bundle needs for its compressed model and runtime files');
  }
  return new DecompressionStream('gzip');
}

// The body's bytes, gunzipped while they arrive where `sibling` says the file was sent as gzip
// and the body's first bytes are gzip's (a host that added Content-Encoding sends them plain).
// `onBytes` gets the count of the file's real bytes so far: for a gzip body the count sent,
// scaled by `realPerSent`. Returns null for a body that is not valid gzip (the sha256 check then
// refuses it); a failed transfer throws.
async function readBody(response, sibling, onBytes, realPerSent) {
  const reader = (response.body ?? new Blob([await response.arrayBuffer()]).stream()).getReader();
  let failed = null; // the transfer's own error, told apart from a gunzip error
  const read = async () => {
    try {
      return await reader.read();
    } catch (error) {
      failed = error;
      throw error;
    }
  };
  let pending = await read();
  const compressed = Boolean(sibling) && !pending.done && isGzip(pending.value);
  const scale = compressed ? realPerSent : 1;
  let sent = 0;
  const body = new ReadableStream({
    async pull(controller) {
      const { done, value } = pending ?? await read();
      pending = null;
      if (done) {
        controller.close();
        return;
      }
      sent += value.byteLength;
      onBytes(Math.round(sent * scale));
      controller.enqueue(value);
    },
  });
  try {
    const plain = compressed ? body.pipeThrough(decompressor()) : body;
    return new Uint8Array(await new Response(plain).arrayBuffer());
  } catch (error) {
    if (failed) throw failed;
    if (error instanceof BundleError) throw error;
    return null; // not valid gzip
  }
}

function concat(chunks, length) {
  if (chunks.length === 1) return chunks[0];
  const bytes = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

async function fetchPiece(piece, url, onBytes) {
  const sibling = siblingOf(piece);
  const realPerSent = sibling ? piece.bytes / sibling.bytes : 1;
  const report = (loaded) => onBytes(Math.min(loaded, piece.bytes ?? loaded));
  for (const mode of ['default', 'reload']) {
    let bytes;
    try {
      const response = await fetch(url, { cache: mode });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      bytes = await readBody(response, sibling, report, realPerSent);
      if (bytes && piece.packed && bytes.byteLength === piece.bytes) unpack(bytes, sibling.runs);
    } catch (error) {
      if (error instanceof BundleError) throw error;
      throw new BundleError('fetch-failed', `cannot fetch ${url}: ${error.message ?? error}`,
        { cause: error });
    }
    if (bytes && await matches(bytes, piece.sha256)) return bytes;
  }
  throw new BundleError('integrity', `${piece.path}: the bytes served at ${url} do not match the` +
    ' sha256 in bundle.json (a corrupted or stale copy); refusing to use them');
}

const storing = new Set(); // Cache Storage writes under way

async function remember(store, sha256, bytes) {
  try {
    await store.put(cacheKey(sha256), new Response(bytes));
  } catch (error) {
    const why = error?.name === 'QuotaExceededError' ? 'the storage quota is full' : error;
    console.warn(`bundle: kept in memory only, not in Cache Storage (${why})`);
  }
}

// The bytes of `entry` that Cache Storage holds (its size when it is there, else 0), looked up by
// sha256 without reading them (bundle.preflight.mjs).
export async function cachedBytes(entry, cache = true) {
  const store = await openCache(cache && entry.sha256);
  if (!store) return 0;
  try {
    return (await store.match(cacheKey(entry.sha256))) ? entry.bytes ?? 0 : 0;
  } catch {
    return 0;
  }
}

export async function fetchFile(entry, urls, onProgress, { stage, cache = true } = {}) {
  const urlOf = typeof urls === 'function' ? urls : (path) => urls[path];
  const total = entry.bytes ?? 0;
  const report = (loaded) => onProgress?.({ stage, loaded, total: Math.max(total, loaded) });
  const store = await openCache(cache && entry.sha256);
  if (store) {
    const hit = await store.match(cacheKey(entry.sha256));
    if (hit) {
      const bytes = new Uint8Array(await hit.arrayBuffer());
      if (await matches(bytes, entry.sha256)) {
        report(bytes.byteLength);
        return bytes;
      }
      await store.delete(cacheKey(entry.sha256));
    }
  }
  const pieces = entry.parts ?? [entry];
  const loaded = pieces.map(() => 0);
  report(0);
  const buffers = await Promise.all(pieces.map((piece, index) => fetchPiece(
    piece, urlOf(fetchedPath(piece)), (bytes) => {
      loaded[index] = bytes;
      report(loaded.reduce((sum, count) => sum + count, 0));
    })));
  const whole = concat(buffers, buffers.reduce((sum, bytes) => sum + bytes.byteLength, 0));
  // Parts each checked against their own sha256 make the whole that bundle.json lists: hashing
  // it once more (a second pass over a 100 MB model, in the load time) is only for parts without
  // one.
  const partsChecked = pieces.every((piece) => piece.sha256);
  if (pieces.length > 1 && !partsChecked && !(await matches(whole, entry.sha256))) {
    throw new BundleError('integrity', `${entry.path}: its parts put together do not match the` +
      ' sha256 in bundle.json; refusing to use them');
  }
  if (store) {
    const write = remember(store, entry.sha256, whole).finally(() => storing.delete(write));
    storing.add(write);
  }
  return whole;
}

// Several files fetched at once as one stage (a model's graph and its external data files):
// `requests` are { entry, urls } (fileRequest in bundle.mjs). Progress counts the bytes of all of
// them ({ stage, loaded, total }) and says which file moved ({ file: { path, loaded, total } }).
export function fetchFiles(requests, onProgress, { stage, cache = true } = {}) {
  const totals = requests.map(({ entry }) => entry.bytes ?? 0);
  const loaded = requests.map(() => 0);
  const sum = (counts) => counts.reduce((total, count) => total + count, 0);
  return Promise.all(requests.map(({ entry, urls }, index) => fetchFile(entry, urls,
    onProgress && ((event) => {
      loaded[index] = event.loaded;
      totals[index] = event.total;
      onProgress({ stage, loaded: sum(loaded), total: sum(totals),
                   file: { path: entry.path, loaded: event.loaded, total: event.total } });
    }), { stage, cache })));
}

// Resolves once the Cache Storage writes started so far are done. The bytes are handed on
// without waiting for their write (100-150 ms for a 15 MB .wasm), so that it overlaps the wasm
// compile and the session creation; load() waits for it before it resolves.
export function stored() {
  return Promise.all(storing);
}

export async function clearCache() {
  return globalThis.caches ? caches.delete(CACHE_NAME) : false;
}
