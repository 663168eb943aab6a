// bundle.fetch.mjs: fetches one file of bundle.json's `files` table for bundle.mjs.
//
//   const bytes = await fetchFile(entry, (path) => url, onProgress, { stage: 'model' });
//
// - A file split into parts (entry.parts) is fetched part by part and put back together.
// - A file (or part) with a gzip sibling is fetched as that sibling and decompressed here
//   (DecompressionStream), so a static host that compresses nothing still sends gzip's bytes; a
//   host that adds Content-Encoding to the sibling is fine too (the bytes are then plain).
// - Progress counts the file's real bytes (entry.bytes) across all parts, also when the server
//   sends a compressed body (its Content-Length is then the compressed size, not the total).
// - Every part and the whole are checked against their sha256; a mismatch is fetched once more
//   past the HTTP cache (a stale copy), then rejected with an Error whose code is 'integrity'.
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

// The path a piece of a file is fetched from: its gzip sibling where the build wrote one, else
// the piece itself. bundle.files.mjs lists the same paths (asset_paths in bundler/files.py).
export function fetchedPath(piece) {
  return piece.encodings?.gzip?.path ?? piece.path;
}

const isGzip = (bytes) => bytes.byteLength >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;

async function gunzip(bytes) {
  if (typeof DecompressionStream !== 'function') {
    throw new BundleError('unsupported-environment', 'this browser has no DecompressionStream,'
      + ' which the bundle needs for its compressed model and runtime files');
  }
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  try {
    return new Uint8Array(await new Response(stream).arrayBuffer());
  } catch {
    return null; // not valid gzip: the sha256 check refuses it
  }
}

// The body's bytes; `onBytes` gets the count of the file's real bytes so far, so that for a
// gzip body (whose first bytes say so) the compressed count is scaled by `realPerSent`.
async function readBody(response, onBytes, realPerSent) {
  if (!response.body) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    onBytes(bytes.byteLength * (isGzip(bytes) ? realPerSent : 1));
    return bytes;
  }
  const reader = response.body.getReader();
  const chunks = [];
  let loaded = 0;
  let scale = 1;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!chunks.length && isGzip(value)) scale = realPerSent;
    chunks.push(value);
    loaded += value.byteLength;
    onBytes(Math.round(loaded * scale));
  }
  return concat(chunks, loaded);
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
  const sibling = piece.encodings?.gzip;
  const realPerSent = sibling ? piece.bytes / sibling.bytes : 1;
  const report = (loaded) => onBytes(Math.min(loaded, piece.bytes ?? loaded));
  for (const mode of ['default', 'reload']) {
    let bytes;
    try {
      const response = await fetch(url, { cache: mode });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      bytes = await readBody(response, report, realPerSent);
    } catch (error) {
      throw new BundleError('fetch-failed', `cannot fetch ${url}: ${error.message ?? error}`,
        { cause: error });
    }
    if (sibling && isGzip(bytes)) bytes = await gunzip(bytes);
    if (bytes && await matches(bytes, piece.sha256)) return bytes;
  }
  throw new BundleError('integrity', `${piece.path}: the bytes served at ${url} do not match the` +
    ' sha256 in bundle.json (a corrupted or stale copy); refusing to use them');
}

async function remember(store, sha256, bytes) {
  try {
    await store.put(cacheKey(sha256), new Response(bytes));
  } catch (error) {
    const why = error?.name === 'QuotaExceededError' ? 'the storage quota is full' : error;
    console.warn(`bundle: kept in memory only, not in Cache Storage (${why})`);
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
  const buffers = [];
  let done = 0;
  report(0);
  for (const piece of pieces) {
    const bytes = await fetchPiece(piece, urlOf(fetchedPath(piece)),
      (loaded) => report(done + loaded));
    buffers.push(bytes);
    done += bytes.byteLength;
  }
  const whole = concat(buffers, done);
  if (pieces.length > 1 && !(await matches(whole, entry.sha256))) {
    throw new BundleError('integrity', `${entry.path}: its parts put together do not match the` +
      ' sha256 in bundle.json; refusing to use them');
  }
  if (store) await remember(store, entry.sha256, whole);
  return whole;
}

export async function clearCache() {
  return globalThis.caches ? caches.delete(CACHE_NAME) : false;
}
