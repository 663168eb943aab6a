// Unit tests of bundle.fetch.mjs's unpack (bundler/bundle/planes.py's layout undone) and of the
// check page's reuse of a transcript's own steps as teacher-forced rows, under Node. Run by
// tests/test_bundle_node.py; planes.py's side is tests/test_planes.py, both together in
// tests/test_hosting_browser.py.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { unpack } from '../../web/bundle.fetch.mjs';
import { teacherRows } from '../../web/dev/conformance.mjs';

test('unpack puts float32 and float16 runs back from their byte planes, at odd offsets', () => {
  const plain = new Uint8Array(31).map((_, i) => (i * 37) & 0xff);
  new DataView(plain.buffer).setFloat32(3, 1.0, true); // 0x3f800000, rotated 0x7f000000
  new DataView(plain.buffer).setFloat32(7, -2.5, true);
  const runs = [[3, 8, 4], [13, 6, 2]];
  // planes.py's pack, written out: each value rotated left by a bit, lowest byte's plane first
  const packed = plain.slice();
  for (const [start, length, itemsize] of runs) {
    const count = length / itemsize;
    for (let i = 0; i < count; i += 1) {
      const view = new DataView(plain.buffer, start + i * itemsize, itemsize);
      const value = itemsize === 4 ? view.getUint32(0, true) : view.getUint16(0, true);
      const rotated = itemsize === 4 ? ((value << 1) | (value >>> 31)) >>> 0
        : ((value << 1) | (value >>> 15)) & 0xffff;
      for (let b = 0; b < itemsize; b += 1) {
        packed[start + b * count + i] = (rotated >>> (8 * b)) & 0xff;
      }
    }
  }
  assert.equal(packed[3 + 3 * 2], 0x7f); // 1.0's exponent, alone in the top plane
  assert.notDeepEqual(packed, plain);
  assert.deepEqual(unpack(packed, runs), plain);
});

test('a transcript step is a teacher row where its call has native\'s prompt and tokens', () => {
  const teacher = [[
    { seek: 0, ids: [1, 2, 10, 11, 12], prompt: 2, at: [[10, 20], [11, 20], [12, 20]] },
    { seek: 300, ids: [1, 2, 30], prompt: 2, at: [[30], [40]] }]];
  const steps = teacherRows(teacher);
  const logits = (value) => Float32Array.from({ length: 50 }, (_, id) => id + value);
  steps.record(0, 0, [1, 2], [], logits(0));
  steps.record(0, 0, [1, 2], [10], logits(100));
  steps.record(0, 0, [1, 2], [10, 11], logits(200));
  steps.record(0, 0, [1, 2], [10, 11, 12], logits(300)); // past the probed steps
  steps.record(0, 300, [1, 2], [], logits(0));
  steps.record(0, 300, [1, 2], [31], logits(0)); // parted from native: this call runs forced
  assert.deepEqual(steps.rows(), [[[[10, 20], [111, 120], [212, 220]], null]]);
  const other = teacherRows(teacher);
  other.record(0, 0, [1, 3], [], logits(0)); // another prompt
  assert.deepEqual(other.rows(), [[null, null]]);
});
