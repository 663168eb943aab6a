// Unit tests of web/text/listen.mjs's Utterances: where an utterance starts (its preroll, never
// before the last one's end), what ends it (the silence, the longest length) and the samples it
// holds. Run by tests/test_bundle_node.py.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Utterances } from '../../web/text/listen.mjs';

const RATE = 1000; // samples a second: milliseconds are samples
const SETTINGS = { silenceMs: 300, prerollMs: 100, maxSeconds: 2 };

// `count` samples whose values are their absolute positions, from `from`.
const ramp = (from, count) => Float32Array.from({ length: count }, (_, i) => from + i);

// Appends 50 samples at a time, answering speech where `speaking(position)`; the ended ones.
function run(utterances, total, speaking) {
  const ended = [];
  for (let at = 0; at < total; at += 50) {
    utterances.append(ramp(at, 50));
    const found = utterances.decide(at + 50, 50, speaking(at));
    if (found) ended.push(found);
  }
  return ended;
}

describe('Utterances', () => {
  test('an utterance starts its preroll before the speech and ends after the silence', () => {
    const ended = run(new Utterances(RATE, SETTINGS), 3000, (at) => at >= 1000 && at < 1500);
    assert.equal(ended.length, 1);
    const [{ start, end, audio }] = ended;
    assert.deepEqual([start, end], [900, 1800]); // 100 of preroll, 300 of silence
    assert.deepEqual(Array.from(audio), Array.from(ramp(900, 900)));
  });

  test('a pause shorter than the silence keeps one utterance', () => {
    const ended = run(new Utterances(RATE, SETTINGS), 3000,
      (at) => (at >= 500 && at < 800) || (at >= 1000 && at < 1200));
    assert.deepEqual(ended.map(({ start, end }) => [start, end]), [[400, 1500]]);
  });

  test('the next utterance never starts before the last one ended, the longest is cut', () => {
    const utterances = new Utterances(RATE, { ...SETTINGS, silenceMs: 100 });
    const ended = run(utterances, 6000, (at) => (at >= 500 && at < 1000) || at >= 1150);
    assert.deepEqual(ended.map(({ start, end }) => [start, end]),
      [[400, 1100], [1100, 3100], [3100, 5100]]);
    assert.equal(utterances.start, 5100); // still speaking
    assert.deepEqual(Array.from(utterances.cut().audio), Array.from(ramp(5100, 900)));
  });
});
