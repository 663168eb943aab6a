// Unit tests of web/dev/ (the harness pages' shared code: tensor coding against bundle.core.mjs's
// own typed-array table, bench.mjs's timing helpers) under Node. Run by tests/test_bundle_node.py.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { test } from 'node:test';

import { TYPED_ARRAYS } from '../../web/bundle.core.mjs';
import { interleaved, timeWasmCompile } from '../../web/dev/bench.mjs';
import {
  decodeTensors, dimsOf, encodeTensors, fromBase64, messageOf, toBase64,
} from '../../web/dev/harness.mjs';

test('base64 round-trips every byte value, as Python base64 writes them', () => {
  const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
  assert.equal(toBase64(bytes), Buffer.from(bytes).toString('base64'));
  assert.deepEqual(fromBase64(Buffer.from(bytes).toString('base64')), bytes);
});

test('toBase64 encodes only the view, in chunks past the argument limit', () => {
  const large = new Uint8Array(0x8000 * 3 + 5).map((_, i) => (i * 7) & 0xff);
  assert.equal(toBase64(large), Buffer.from(large).toString('base64'));
  const floats = new Float32Array([1, 2, 3, 4]);
  const middle = floats.subarray(1, 3);
  assert.deepEqual(new Float32Array(fromBase64(toBase64(middle)).buffer), middle);
});

test('decodeTensors gives typed arrays of each type, encodeTensors gives them back', () => {
  const encoded = {
    x: { type: 'float32', dims: [2], data: Buffer.from(new Float32Array([1.5, -2]).buffer)
      .toString('base64') },
    ids: { type: 'int64', dims: [1, 1], data: Buffer.from(new BigInt64Array([-3n]).buffer)
      .toString('base64') },
    mask: { type: 'bool', dims: [3], data: Buffer.from([1, 0, 1]).toString('base64') },
  };
  const tensors = decodeTensors(encoded, TYPED_ARRAYS);
  assert.deepEqual(tensors.x.data, new Float32Array([1.5, -2]));
  assert.deepEqual(tensors.ids.data, new BigInt64Array([-3n]));
  assert.deepEqual(tensors.ids.dims, [1, 1]);
  assert.deepEqual(tensors.mask.data, new Uint8Array([1, 0, 1]));
  assert.deepEqual(encodeTensors(tensors), encoded);
});

test('dimsOf reads dims as numbers, whatever array holds them', () => {
  assert.deepEqual(dimsOf({ a: { dims: [1, 3] }, b: { dims: new BigInt64Array([2n, 5n]) } }),
    { a: [1, 3], b: [2, 5] });
});

test('messageOf gives an error\'s message, or the thrown value as text', () => {
  assert.equal(messageOf(new Error('no model')), 'no model');
  assert.equal(messageOf('plain'), 'plain');
  assert.equal(messageOf(null), 'null');
});

test('interleaved times every run in turn, after its warm-up', async () => {
  const calls = [];
  const run = (name) => async () => { calls.push(name); };
  const times = await interleaved({ a: run('a'), b: run('b') }, 2, 3);
  assert.deepEqual(calls, ['a', 'a', 'b', 'b', 'a', 'b', 'a', 'b', 'a', 'b']);
  assert.deepEqual(Object.keys(times), ['a', 'b']);
  assert.ok(Object.values(times).every((list) => list.length === 3
    && list.every((ms) => ms >= 0)));
});

test('timeWasmCompile counts WebAssembly compile and instantiate calls', async () => {
  const compile = timeWasmCompile();
  const empty = new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]); // the smallest wasm module
  await WebAssembly.instantiate(await WebAssembly.compile(empty));
  assert.equal(compile.calls, 2);
  assert.ok(compile.ms >= 0);
});

test('every harness module imports and exports only functions', async () => {
  const folder = new URL('../../web/dev/', import.meta.url);
  const names = readdirSync(folder).filter((name) => name.endsWith('.mjs'));
  assert.deepEqual(names.sort(), ['bench.mjs', 'conformance.mjs', 'harness.mjs', 'profile.mjs']);
  for (const name of names) {
    const module = await import(new URL(name, folder));
    assert.ok(Object.keys(module).length > 0, name);
    for (const [key, value] of Object.entries(module)) {
      assert.equal(typeof value, 'function', `${name}: ${key}`);
    }
  }
});
