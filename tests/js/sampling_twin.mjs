// The sampling spec's Node side for tests/test_text_sampling.py: reads a JSON table of cases
// (argv[2]) and prints, as JSON, the tokens web/text/sampling.mjs draws for each, its exp64 on
// a grid and the PRNG's first outputs, for the test to compare with the Python side's.
import { readFileSync } from 'node:fs';
import { createSampler, exp64, mulberry32 } from '../../web/text/sampling.mjs';

const table = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const revive = (vector) => Float32Array.from(vector, (value) => (value === null ? -Infinity : value));

const tokens = table.cases.map(({ steps, logits, prompt, options }) => {
  const vectors = logits.map(revive);
  const sampler = createSampler(options);
  const seen = [...prompt];
  const drawn = [];
  for (let step = 0; step < steps; step++) {
    const token = sampler.next(vectors[step % vectors.length], seen);
    drawn.push(token);
    seen.push(token);
  }
  return drawn;
});
const random = mulberry32(table.prng.seed);
const uint32 = Array.from({ length: table.prng.count }, () => random.nextUint32());
const uniforms = Array.from({ length: table.prng.count }, () => random.uniform());
process.stdout.write(JSON.stringify({ tokens, exp: table.exp.map(exp64), uint32, uniforms }));
