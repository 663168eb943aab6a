// harness.mjs: what onnx-bundler's own pages share (conformance, bench, profile; served at
// /__bundler__/dev/ by bundler/server/bundle_server.py, never shipped in a bundle). Tensors cross from Python
// as { type, dims, data: base64 }; the bundle is always opened through its own bundle.mjs.

export function fromBase64(text) {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

export function toBase64(array) {
  const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

// typedArrays: bundle.core.mjs's TYPED_ARRAYS (tensor type -> typed array class).
export function decodeTensors(encoded, typedArrays) {
  return Object.fromEntries(Object.entries(encoded).map(([name, { type, dims, data }]) => [
    name, { type, dims, data: new typedArrays[type](fromBase64(data).buffer) }]));
}

export function encodeTensors(tensors) {
  return Object.fromEntries(Object.entries(tensors).map(([name, { type, dims, data }]) => [
    name, { type, dims, data: toBase64(data) }]));
}

// The dims of tensors as the page holds them (what a run really took or gave).
export function dimsOf(tensors) {
  return Object.fromEntries(Object.entries(tensors).map(
    ([name, tensor]) => [name, Array.from(tensor.dims, Number)]));
}

export function messageOf(error) {
  return String(error?.message ?? error);
}

// The bundle served at `base` (its folder's URL): { load, TYPED_ARRAYS, decode(encoded) }.
export async function openBundle(base) {
  const [{ load }, { TYPED_ARRAYS }] = await Promise.all([
    import(new URL('bundle.mjs', base).href), import(new URL('bundle.core.mjs', base).href)]);
  return { load, TYPED_ARRAYS, decode: (encoded) => decodeTensors(encoded, TYPED_ARRAYS) };
}
