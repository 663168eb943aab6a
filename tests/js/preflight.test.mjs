// Unit tests of web/bundle.preflight.mjs's pure part: a variant's memory record against the
// browser's limits, the EPs load() skips as too large and its refusal before any download. Run
// by tests/test_bundle_node.py.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ERROR_CODES } from '../../web/bundle.core.mjs';
import { WASM32_HEAP, limitChecks, missingFeatures, planFits, refusal } from '../../web/bundle.preflight.mjs';

const MIB = 2 ** 20;
const GIB = 2 ** 30;

// A variant of `bytes` whose memory record is footprint.py's: heap = bytes + 64 MiB, peak =
// bytes + heap.
function variant(name, bytes, largest = bytes) {
  const heap = bytes + 64 * MIB;
  return { name, file: `models/${name}.onnx`, bytes,
           memory: { largest_tensor: largest, weights: bytes, heap, peak: bytes + heap } };
}

function manifest(variants, builds = ['wasm', 'webgpu']) {
  return {
    schema_version: 2,
    runtime: { builds: Object.fromEntries(builds.map((ep) => [ep, { wasm: `runtime/${ep}.wasm` }])) },
    sessions: [{ name: 'model', inputs: [], outputs: [], variants,
                 default_variant: variants[0].name }],
  };
}

const failing = (checks) => checks.filter((check) => !check.fits).map((check) => check.limit);

describe('limitChecks', () => {
  test('the wasm32 heap is 4 GiB on every EP', () => {
    const big = variant('fp32', 4.5 * GIB).memory;
    assert.deepEqual(failing(limitChecks(big, 'wasm')), ['the wasm32 heap']);
    assert.deepEqual(failing(limitChecks(big, 'webgpu')), ['the wasm32 heap']);
    const small = variant('int8', 1 * GIB).memory;
    assert.deepEqual(failing(limitChecks(small, 'wasm')), []);
    assert.equal(limitChecks(small, 'wasm')[0].value, WASM32_HEAP);
  });

  test('navigator.deviceMemory limits the peak, except at its cap of 8', () => {
    const memory = variant('fp32', 300 * MIB).memory; // peak 664 MiB
    assert.deepEqual(failing(limitChecks(memory, 'wasm', { deviceMemory: 0.5 })),
      ['navigator.deviceMemory']);
    const [, check] = limitChecks(memory, 'wasm', { deviceMemory: 0.5 });
    assert.equal(check.value, 0.5 * GIB);
    assert.equal(check.need, 664 * MIB);
    assert.deepEqual(failing(limitChecks(memory, 'wasm', { deviceMemory: 1 })), []);
    assert.equal(limitChecks(variant('x', 9 * GIB).memory, 'wasm', { deviceMemory: 8 })
      .filter((check) => check.limit === 'navigator.deviceMemory').length, 0);
  });

  test("the WebGPU adapter's buffer limits take the largest tensor, on WebGPU only", () => {
    const memory = variant('fp32', 1 * GIB, 300 * MIB).memory;
    const adapterLimits = { maxBufferSize: 256 * MIB, maxStorageBufferBindingSize: 128 * MIB };
    assert.deepEqual(failing(limitChecks(memory, 'webgpu', { adapterLimits })),
      ["the WebGPU adapter's maxBufferSize", "the WebGPU adapter's maxStorageBufferBindingSize"]);
    assert.deepEqual(failing(limitChecks(memory, 'wasm', { adapterLimits })), []);
    const fits = variant('int4', 200 * MIB, 100 * MIB).memory;
    assert.deepEqual(failing(limitChecks(fits, 'webgpu', { adapterLimits })), []);
  });
});

describe('planFits and the refusal', () => {
  const low = { deviceMemory: 1 }; // 1 GiB: fp32's 2.06 GiB peak does not fit, int8's does
  const bundle = manifest([variant('fp32', 1 * GIB), variant('int8', 256 * MIB)]);

  test('an EP whose variant does not fit is skipped, naming the variant that would', () => {
    const plan = planFits(bundle, ['webgpu', 'wasm'], {}, { webgpu: low, wasm: low });
    assert.deepEqual(plan.map((attempt) => attempt.reason.code), ['too-large', 'too-large']);
    assert.match(plan[1].reason.detail, /^wasm skipped: variant 'fp32' needs 2\.06 GiB \(estimated peak memory\) but navigator\.deviceMemory is 1\.00 GiB; the variant 'int8' would fit \(load\(\{ variant: 'int8' \}\)\)$/);
    const error = refusal(plan);
    assert.equal(error.code, 'too-large');
    assert.ok(ERROR_CODES.includes(error.code));
    assert.match(error.message, /^this model does not fit this device \(refused before downloading it\): webgpu skipped/);
    assert.deepEqual(error.reasons, plan.map((attempt) => attempt.reason));
  });

  test('the variant asked for is checked, and one EP that fits is enough', () => {
    const plan = planFits(bundle, ['webgpu', 'wasm'], { variant: 'int8' },
      { webgpu: low, wasm: low });
    assert.deepEqual(plan.map((attempt) => [attempt.ep, attempt.variant.name, attempt.reason]),
      [['webgpu', 'int8', undefined], ['wasm', 'int8', undefined]]);
    const mixed = planFits(bundle, ['webgpu', 'wasm'], {},
      { webgpu: { deviceMemory: 4 }, wasm: low });
    assert.equal(mixed[0].reason, undefined);
    assert.equal(mixed[1].reason.code, 'too-large');
    assert.equal(refusal(mixed), null);
  });

  test('with no variant that fits, it says so', () => {
    const only = manifest([variant('fp32', 5 * GIB)], ['wasm']);
    const [attempt] = planFits(only, ['wasm'], {}, { wasm: {} });
    assert.match(attempt.reason.detail, /the wasm32 heap is 4\.00 GiB; no variant of this bundle fits on wasm$/);
    assert.equal(refusal([attempt]).code, 'too-large');
  });

  test('an unavailable EP keeps its own reason, and without a too-large one there is no refusal', () => {
    const unavailable = { reason: { ep: 'webgpu', code: 'webgpu-unavailable', detail: 'WebGPU unavailable: x' } };
    const plan = planFits(bundle, ['webgpu', 'wasm'], {}, { webgpu: unavailable, wasm: {} });
    assert.equal(plan[0].reason.code, 'webgpu-unavailable');
    assert.equal(plan[1].reason, undefined);
    const webgpuOnly = planFits(bundle, ['webgpu'], {}, { webgpu: unavailable });
    assert.equal(refusal(webgpuOnly), null); // load() then says no-execution-provider
    const notBundled = planFits(manifest([variant('fp32', 5 * GIB)], ['wasm']), ['webgpu', 'wasm'],
      {}, { webgpu: {}, wasm: {} });
    assert.deepEqual(notBundled.map((attempt) => attempt.reason.code), ['not-bundled', 'too-large']);
    assert.equal(refusal(notBundled).code, 'too-large');
  });

  test('a variant built before the memory record is not checked', () => {
    const old = manifest([{ name: 'fp32', file: 'models/fp32.onnx', bytes: 5 * GIB }]);
    const plan = planFits(old, ['wasm'], {}, { wasm: { deviceMemory: 0.25 } });
    assert.deepEqual(plan[0].checks, []);
    assert.equal(plan[0].reason, undefined);
  });
});

describe('the WebGPU features a variant requires', () => {
  const fp16 = { ...variant('fp16', 512 * MIB), requires: ['shader-f16'] };
  // fp16 is the default on WebGPU, int8 on WASM; fp32 comes first in the list
  const bundle = manifest([variant('fp32', 1 * GIB), fp16, variant('int8', 256 * MIB)]);
  bundle.sessions[0].default_variant = { webgpu: 'fp16', wasm: 'int8' };
  const withF16 = { features: ['timestamp-query', 'shader-f16'] };
  const without = { features: ['timestamp-query'] };
  const names = (plan) => plan.map((attempt) => [attempt.ep, attempt.variant?.name ?? null]);

  test('an adapter with the feature gets the variant, with no reason', () => {
    const plan = planFits(bundle, ['webgpu', 'wasm'], {}, { webgpu: withF16, wasm: {} });
    assert.deepEqual(names(plan), [['webgpu', 'fp16'], ['wasm', 'int8']]);
    assert.equal(plan[0].variantReason, undefined);
    assert.deepEqual(missingFeatures(fp16, 'webgpu', withF16), []);
  });

  test("one without it gets the WASM default there, and the reason, on WebGPU only", () => {
    const plan = planFits(bundle, ['webgpu', 'wasm'], {}, { webgpu: without, wasm: {} });
    assert.deepEqual(names(plan), [['webgpu', 'int8'], ['wasm', 'int8']]);
    assert.deepEqual(plan[0].variantReason, { ep: 'webgpu', code: 'feature-missing', variant: 'fp16',
      detail: "webgpu: variant 'fp16' needs the WebGPU feature shader-f16, which this adapter"
        + " lacks; loaded 'int8' instead" });
    assert.ok(ERROR_CODES.includes(plan[0].variantReason.code));
    assert.equal(plan[0].reason, undefined);
    assert.deepEqual(missingFeatures(fp16, 'wasm', without), []); // WASM runs every variant
  });

  test('the swap skips a variant that failed verification there, and the limits check the swap', () => {
    const failed = { ...bundle, verification: { results: { int8: { webgpu: { passed: false } } } } };
    const plan = planFits(failed, ['webgpu'], {}, { webgpu: without });
    assert.deepEqual(names(plan), [['webgpu', 'fp32']]);
    // int8's largest tensor does not fit either: fp16 alone would, but not on this adapter
    const wide = manifest([variant('fp32', 1 * GIB), fp16, variant('int8', 256 * MIB, 700 * MIB)]);
    wide.sessions[0].default_variant = 'fp16';
    const small = planFits(wide, ['webgpu'], {},
      { webgpu: { ...without, adapterLimits: { maxBufferSize: 600 * MIB } } });
    assert.equal(small[0].reason.code, 'too-large'); // fp32's 1 GiB tensor, not fp16's
    assert.match(small[0].reason.detail, /variant 'fp32' needs 1\.00 GiB \(largest tensor\)/);
    assert.match(small[0].reason.detail, /no variant of this bundle fits on webgpu$/); // not fp16
  });

  test('a variant asked for by name is not swapped: the EP is skipped', () => {
    const plan = planFits(bundle, ['webgpu', 'wasm'], { variant: 'fp16' },
      { webgpu: without, wasm: {} });
    assert.deepEqual(names(plan), [['webgpu', null], ['wasm', 'fp16']]);
    assert.deepEqual(plan[0].reason, { ep: 'webgpu', code: 'feature-missing', detail:
      "webgpu skipped: variant 'fp16' needs the WebGPU feature shader-f16, which this adapter"
        + ' lacks (asked for by name)' });
    assert.equal(refusal(plan), null);
  });

  test('with no other variant to run there, WebGPU is skipped', () => {
    const only = manifest([fp16]);
    const plan = planFits(only, ['webgpu', 'wasm'], {}, { webgpu: without, wasm: {} });
    assert.deepEqual(names(plan), [['webgpu', null], ['wasm', 'fp16']]);
    assert.match(plan[0].reason.detail, /lacks \(no other variant runs there\)$/);
  });
});
