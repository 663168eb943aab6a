// Unit tests of web/bundle.core.mjs (bundle.mjs's errors, option checks, variant choice, feed
// validation and queue) under Node, with onnxruntime-web's own Tensor from $ORT_WEB_DIST (the
// cached onnxruntime-web dist/). Run by tests/test_bundle_node.py.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';

import {
  AppendedCache,
  BundleError,
  ERROR_CODES,
  SCHEMA_VERSION,
  checkOptions,
  checkSchemaVersion,
  graphFor,
  makeFeeds,
  noExecutionProvider,
  pickSession,
  pickVariant,
  planAttempts,
  runtimeDidNotStart,
  serialised,
  sessionFailure,
  sessionsOf,
  taskOf,
} from '../../web/bundle.core.mjs';

if (!process.env.ORT_WEB_DIST) throw new Error('set ORT_WEB_DIST to an onnxruntime-web dist/');
const ort = await import(pathToFileURL(path.join(process.env.ORT_WEB_DIST, 'ort.wasm.min.mjs')));

const rejects = (fn, code, message) => assert.throws(fn, (error) => {
  assert.ok(error instanceof BundleError, `a BundleError, not ${error}`);
  assert.ok(error instanceof Error);
  assert.equal(error.code, code, error.message);
  assert.ok(ERROR_CODES.includes(error.code));
  if (message !== undefined) assert.match(error.message, message);
  return true;
});

describe('load() options', () => {
  test('the default is webgpu then wasm', () => {
    assert.deepEqual(checkOptions({}), ['webgpu', 'wasm']);
    assert.deepEqual(checkOptions({ executionProviders: ['wasm'] }), ['wasm']);
  });

  test('a string EP list says how to write it', () => {
    rejects(() => checkOptions({ executionProviders: 'wasm' }), 'bad-option',
      /executionProviders must be an array.*not the string 'wasm'.*\['wasm'\]/);
  });

  test('unknown, empty or non-array EP lists and bad values are bad options', () => {
    rejects(() => checkOptions({ executionProviders: ['cuda'] }), 'bad-option', /"cuda"/);
    rejects(() => checkOptions({ executionProviders: [] }), 'bad-option');
    rejects(() => checkOptions({ executionProviders: { wasm: true } }), 'bad-option');
    rejects(() => checkOptions({ numThreads: 0 }), 'bad-option', /numThreads/);
    rejects(() => checkOptions({ variant: 8 }), 'bad-option', /variant/);
    rejects(() => checkOptions({ onProgress: 'log' }), 'bad-option', /onProgress/);
    rejects(() => checkOptions(null), 'bad-option');
  });
});

describe('schema_version', () => {
  test('a missing schema_version is version 1; 1 and 2 are read', () => {
    assert.equal(SCHEMA_VERSION, 2);
    const manifest = { name: 'm' };
    assert.equal(checkSchemaVersion(manifest), manifest);
    checkSchemaVersion({ schema_version: 1 });
    checkSchemaVersion({ schema_version: 2 });
  });

  test('a newer version is refused, naming both versions', () => {
    rejects(() => checkSchemaVersion({ schema_version: 3 }), 'schema-version',
      /schema_version 3.*schema_version 2 at most/);
  });

  test('a version that is not a positive integer is refused', () => {
    rejects(() => checkSchemaVersion({ schema_version: '1' }), 'schema-version', /"1"/);
    rejects(() => checkSchemaVersion({ schema_version: 0 }), 'schema-version');
  });
});

const builds = { webgpu: { module: 'runtime/ort.webgpu.min.mjs' },
                 wasm: { module: 'runtime/ort.wasm.min.mjs' } };
const variant = (name) => ({ name, file: `models/${name}.onnx`, bytes: 10, sha256: 'x' });
const bundle = (extra = {}) => ({ runtime: { builds }, variants: [variant('fp32'), variant('int8')],
                                  default_variant: 'fp32', ...extra });

describe('variant choice', () => {
  test('the default variant, one per EP when it is a map, or the one asked for', () => {
    const perEp = bundle({ default_variant: { webgpu: 'fp32', wasm: 'int8' } });
    assert.equal(pickVariant(perEp, 'webgpu').name, 'fp32');
    assert.equal(pickVariant(perEp, 'wasm').name, 'int8');
    assert.equal(pickVariant(bundle({ default_variant: { webgpu: 'int8' } }), 'wasm').name, 'int8');
    assert.equal(pickVariant(perEp, 'webgpu', 'int8').name, 'int8');
    assert.deepEqual(planAttempts(perEp, ['webgpu', 'wasm']).map((a) => a.variant.name),
      ['fp32', 'int8']);
  });

  test('a variant with a graph per EP opens that graph there, its file elsewhere', () => {
    const variant = { name: 'int4', file: 'models/int4.a.onnx', data: ['models/int4.c.data'],
                      graphs: { webgpu: 'models/int4.webgpu.b.onnx' } };
    assert.equal(graphFor(variant, 'webgpu'), 'models/int4.webgpu.b.onnx');
    assert.equal(graphFor(variant, 'wasm'), 'models/int4.a.onnx');
    assert.equal(graphFor({ name: 'fp32', file: 'models/fp32.onnx' }, 'webgpu'), 'models/fp32.onnx');
  });

  test('the default-variant rule holds on the cases bundler.variants.default is tested on', () => {
    const cases = JSON.parse(readFileSync(new URL('../data/default_variant_cases.json',
      import.meta.url), 'utf8'));
    assert.ok(cases.length >= 6);
    for (const { default_variant: defaults, ep, picks } of cases) {
      const names = typeof defaults === 'string' ? [defaults] : Object.values(defaults);
      const manifest = bundle({ default_variant: defaults, variants: names.map(variant) });
      assert.equal(pickVariant(manifest, ep).name, picks, JSON.stringify({ defaults, ep }));
    }
  });

  test('an unknown variant is a bad option, before any EP is looked at', () => {
    const wasmOnly = bundle({ runtime: { builds: { wasm: builds.wasm } } });
    assert.throws(() => planAttempts(wasmOnly, ['webgpu', 'wasm'], { variant: 'int4' }),
      (error) => error.code === 'bad-option' && /unknown variant 'int4'.*fp32, int8/.test(error.message));
  });

  test('an EP the bundle lacks is skipped with a reason', () => {
    const [webgpu, wasm] = planAttempts(bundle({ runtime: { builds: { wasm: builds.wasm } } }),
      ['webgpu', 'wasm']);
    assert.deepEqual(webgpu.reason, { ep: 'webgpu', code: 'not-bundled',
      detail: 'webgpu skipped: this bundle was built without it' });
    assert.equal(wasm.variant.name, 'fp32');
  });

  test('an EP that failed verification is skipped unless ignoreVerification', () => {
    const manifest = bundle({ verification: { results: { fp32: {
      webgpu: { passed: false, max_abs_error: 0.5 }, wasm: { passed: true } } } } });
    const [webgpu, wasm] = planAttempts(manifest, ['webgpu', 'wasm']);
    assert.equal(webgpu.reason.code, 'verification-failed');
    assert.match(webgpu.reason.detail, /failed verification.*worst abs error 0.5/);
    assert.equal(wasm.reason, undefined);
    const forced = planAttempts(manifest, ['webgpu'], { ignoreVerification: true });
    assert.equal(forced[0].variant.name, 'fp32');
  });

  test('a runtime without the kernels is skipped; a device without a feature is tried', () => {
    const manifest = bundle({ verification: { results: {
      fp32: { webgpu: { passed: false, unsupported: 'runtime', error: 'No Op registered' } },
      int8: { webgpu: { passed: false, unsupported: 'device', error: 'shader-f16' } } } } });
    const [runtime] = planAttempts(manifest, ['webgpu']);
    assert.equal(runtime.reason.code, 'runtime-unsupported');
    assert.match(runtime.reason.detail, /cannot run this model \(No Op registered\)/);
    const [device] = planAttempts(manifest, ['webgpu'], { variant: 'int8' });
    assert.equal(device.variant.name, 'int8');
  });
});

describe('sessions', () => {
  const session = (name, variants, defaults) => ({
    name, inputs: [{ name: `${name}_in`, type: 'float32', shape: [1] }], outputs: [],
    variants: variants.map(variant), default_variant: defaults });
  const pipeline = (extra = {}) => ({ schema_version: 2, name: 'whisper', runtime: { builds },
    sessions: [session('encoder', ['fp32'], 'fp32'),
               session('decoder', ['fp32', 'int8'], { wasm: 'int8', webgpu: 'fp32' })],
    ...extra });

  test('a version 1 manifest is one session named after the bundle, of its top-level keys', () => {
    const old = bundle({ name: 'digits', inputs: [], outputs: [] });
    const [only] = sessionsOf(old);
    assert.deepEqual(Object.keys(only), ['name', 'inputs', 'outputs', 'variants',
      'default_variant']);
    assert.equal(only.name, 'digits');
    assert.equal(only.variants, old.variants);
    assert.equal(pickSession(old).name, 'digits');
    assert.deepEqual(pickSession(old, 'digits'), pickSession(old));
  });

  test('a pipeline\'s sessions are picked by name; the first by default', () => {
    const manifest = pipeline();
    assert.deepEqual(sessionsOf(manifest).map((s) => s.name), ['encoder', 'decoder']);
    assert.equal(pickSession(manifest).name, 'encoder');
    assert.equal(pickSession(manifest, 'decoder').inputs[0].name, 'decoder_in');
    assert.deepEqual(planAttempts(manifest, ['webgpu', 'wasm'], { session: 'decoder' })
      .map((a) => a.variant.name), ['fp32', 'int8']);
    assert.throws(() => planAttempts(manifest, ['wasm'], { session: 'joiner' }),
      (error) => error.code === 'bad-option' &&
        /unknown session 'joiner'; this bundle has: encoder, decoder/.test(error.message));
    assert.throws(() => planAttempts(manifest, ['wasm'], { variant: 'int8' }),
      (error) => error.code === 'bad-option' && /unknown variant 'int8'/.test(error.message));
    rejects(() => checkOptions({ session: 1 }), 'bad-option', /session must be a session name/);
  });

  test('verification results are the primary session\'s', () => {
    const failed = { results: { fp32: { wasm: { passed: false, max_abs_error: 1 } } } };
    const manifest = pipeline({ verification: failed });
    assert.equal(planAttempts(manifest, ['wasm'])[0].reason.code, 'verification-failed');
    assert.equal(planAttempts(manifest, ['wasm'], { session: 'decoder', variant: 'fp32' })[0]
      .variant.name, 'fp32');
  });
});

describe('the task API', () => {
  test('a method of the bundle\'s task gets its record; another is wrong-task', () => {
    const task = { kind: 'object-detection', labels: ['cat'] };
    assert.equal(taskOf({ task }, 'object-detection', 'detect'), task);
    rejects(() => taskOf({ task }, 'audio-stream', 'stream'), 'wrong-task',
      /^stream\(\) needs a bundle built with --task audio-stream; this one's task is object-detection$/);
    rejects(() => taskOf({}, 'image-classification', 'classify'), 'wrong-task',
      /this one's task is generic$/);
  });
});

describe('why an EP failed', () => {
  test('a missing kernel is runtime-unsupported, onnxruntime\'s message kept', () => {
    const reason = sessionFailure('webgpu', new Error("Can't create a session. ERROR_CODE: 9," +
      ' ERROR_MESSAGE: Could not find an implementation for Foo(1) node with name \'n\''));
    assert.deepEqual(reason, { ep: 'webgpu', code: 'runtime-unsupported', detail:
      "webgpu session creation failed: Could not find an implementation for Foo(1) node with name 'n'" });
    const registered = sessionFailure('webgpu', 'No Op registered for LinearClassifier with' +
      ' domain_version of 1');
    assert.equal(registered.code, 'runtime-unsupported');
    const newer = sessionFailure('wasm', "Can't create a session. ERROR_CODE: 1, ERROR_MESSAGE:" +
      ' Unsupported model IR version: 14, max supported IR version: 13');
    assert.equal(newer.code, 'runtime-unsupported');
  });

  test('any other session failure is session-failed', () => {
    const reason = sessionFailure('webgpu', new Error("Can't create a session. ERROR_CODE: 1," +
      ' ERROR_MESSAGE: the adapter lacks shader-f16'));
    assert.equal(reason.code, 'session-failed');
    assert.equal(reason.detail, 'webgpu session creation failed: the adapter lacks shader-f16');
  });

  test('a wasm that could not be fetched is fetch-failed, and its module must be imported anew', () => {
    const error = new Error('no available backend found. ERR: [wasm] RuntimeError:' +
      ' Aborted(both async and sync fetching of the wasm failed).');
    assert.equal(sessionFailure('wasm', error).code, 'fetch-failed');
    assert.ok(runtimeDidNotStart(error));
    assert.ok(!runtimeDidNotStart(new Error('No Op registered for LinearClassifier')));
  });

  test('no EP left: no-execution-provider with every reason', () => {
    const reasons = [{ ep: 'webgpu', code: 'webgpu-unavailable', detail: 'WebGPU unavailable: x' },
                     { ep: 'wasm', code: 'session-failed', detail: 'wasm session creation failed: y' }];
    const error = noExecutionProvider(reasons);
    assert.ok(error instanceof BundleError);
    assert.equal(error.code, 'no-execution-provider');
    assert.deepEqual(error.reasons, reasons);
    assert.equal(error.message, 'no execution provider could run this model:' +
      ' WebGPU unavailable: x; wasm session creation failed: y');
  });
});

describe('one call at a time per runtime module', () => {
  const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

  test('tasks on one module never overlap, in order, and a failure does not block the queue', async () => {
    const module = {};
    const log = [];
    let running = 0;
    const task = (name, fail = false) => async () => {
      running += 1;
      assert.equal(running, 1, `${name} overlapped another task`);
      await tick();
      log.push(name);
      running -= 1;
      if (fail) throw new Error(name);
      return name;
    };
    const results = await Promise.allSettled([serialised(module, task('a')),
      serialised(module, task('b', true)), serialised(module, task('c'))]);
    assert.deepEqual(log, ['a', 'b', 'c']);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
  });

  test('two modules run side by side', async () => {
    const log = [];
    const slow = (name) => async () => { log.push(`${name} start`); await tick(); log.push(`${name} end`); };
    await Promise.all([serialised({}, slow('a')), serialised({}, slow('b'))]);
    assert.deepEqual(log, ['a start', 'b start', 'a end', 'b end']);
  });
});

const spec = (name, type, shape) => ({ name, type, shape });
const inputs = [spec('x', 'float32', ['batch', 4]), spec('ids', 'int64', ['batch', 3]),
                spec('scale', 'float32', [])];
const good = () => ({ x: { dims: [1, 4], data: new Float32Array(4) },
                      ids: { dims: [1, 3], data: [0, 1, 2] }, scale: 2 });

describe('feeds', () => {
  test('plain arrays, int64 numbers and 0-d scalars become tensors', () => {
    const tensors = makeFeeds(ort.Tensor, inputs, good());
    assert.ok(tensors.x instanceof ort.Tensor);
    assert.deepEqual([...tensors.x.dims], [1, 4]);
    assert.ok(tensors.ids.data instanceof BigInt64Array);
    assert.deepEqual([...tensors.ids.data], [0n, 1n, 2n]);
    assert.deepEqual([...tensors.scale.dims], []);
    assert.deepEqual([...tensors.scale.data], [2]);
  });

  test('an ort.Tensor of the right type is passed as it is', () => {
    const x = new ort.Tensor('float32', new Float32Array(8), [2, 4]);
    const ids = new ort.Tensor('int64', new BigInt64Array(6), [2, 3]);
    const tensors = makeFeeds(ort.Tensor, inputs, { ...good(), x, ids });
    assert.equal(tensors.x, x);
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), ids: new ort.Tensor('int32',
      new Int32Array(3), [1, 3]) }), 'input-type', /^input 'ids': expected int64, got int32/);
  });

  test('dims may be left out when the model fixes them', () => {
    const fixed = [spec('image', 'float32', [1, 2, 2])];
    assert.deepEqual([...makeFeeds(ort.Tensor, fixed, { image: { data: [1, 2, 3, 4] } }).image.dims],
      [1, 2, 2]);
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), x: { data: [1, 2, 3, 4] } }),
      'input-shape', /^input 'x': give dims \(shape \[batch, 4\]\)/);
  });

  test('uint8 takes an ImageData\'s Uint8ClampedArray, float16 its raw bits, bool booleans', () => {
    const tensors = makeFeeds(ort.Tensor, [spec('pixels', 'uint8', [2]), spec('half', 'float16', [1]),
      spec('flags', 'bool', [2])], { pixels: { data: new Uint8ClampedArray([1, 255]) },
      half: { data: new Uint16Array([0x3c00]) }, flags: { data: [true, false] } });
    assert.deepEqual([...tensors.pixels.data], [1, 255]);
    assert.equal(tensors.half.type, 'float16');
    assert.deepEqual([...tensors.flags.data], [1, 0]);
  });

  test('a missing or unknown input is input-name, naming what the model takes', () => {
    const missing = good();
    delete missing.ids;
    rejects(() => makeFeeds(ort.Tensor, inputs, missing), 'input-name',
      /^missing input 'ids' \(int64 \[batch, 3\]\)/);
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), nope: 1 }), 'input-name',
      /^unknown input 'nope'; this model takes: 'x' \(float32 \[batch, 4\]\), 'ids'/);
    rejects(() => makeFeeds(ort.Tensor, inputs, null), 'input-name');
  });

  test('a wrong element type or data is input-type', () => {
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), x: { type: 'int32', dims: [1, 4],
      data: [0, 0, 0, 0] } }), 'input-type', /^input 'x': expected float32, got int32/);
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), x: { dims: [1, 4],
      data: new Int32Array(4) } }), 'input-type', /expected Float32Array data for float32, got Int32Array/);
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), x: { dims: [1, 4], data: 'abcd' } }),
      'input-type');
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), x: [1, 2, 3, 4] }), 'input-type',
      /expected an ort.Tensor or \{ type, dims, data \}/);
    // found by the browser fuzzing: '' became 0 (onnxruntime's numpy refuses it)
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), ids: { type: 'int64', dims: [1, 3],
      data: [0, 0, ''] } }), 'input-type', /^input 'ids': data\[2\] is "", not a finite number/);
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), ids: { type: 'int64', dims: [1, 3],
      data: [0, NaN, 1] } }), 'input-type', /data\[1\] is NaN, not a finite number/);
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), x: { dims: [1, 4],
      data: [0, 1n, 0, null] } }), 'input-type', /^input 'x': data\[1\] is 1n, not a number/);
  });

  test('dims that do not fit the model or the data are input-shape', () => {
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), x: { dims: [1, 5], data: [0, 0, 0, 0, 0] } }),
      'input-shape', /^input 'x': expected shape \[batch, 4\], got \[1, 5\]/);
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), x: { dims: [1, 4], data: [0, 0, 0] } }),
      'input-shape', /^input 'x': dims \[1, 4\] hold 4 values, data has 3/);
    rejects(() => makeFeeds(ort.Tensor, inputs, { ...good(), x: { dims: [1, -4], data: [] } }),
      'input-shape', /non-negative integers/);
  });
});

describe('text generation\'s appended KV cache', () => {
  test('each step fetches the logits and the slices and feeds back the past they make', async () => {
    const layout = { kvHeads: 2, headSize: 1, presents: ['present.0.key', 'present.0.value'],
                     slices: ['present_new.0.key', 'present_new.0.value'] };
    const calls = [];
    // a slice's value: 10 * head + the token's position, negative for values
    const run = async (feeds, fetch) => {
      calls.push({ feeds, fetch });
      const [added, before] = [feeds.input_ids.dims[1], feeds['past_key_values.0.key'].dims[2]];
      const slice = (sign) => Float32Array.from({ length: 2 * added },
        (_, i) => sign * (10 * Math.floor(i / added) + before + (i % added)));
      return { logits: { type: 'float32', dims: [1, added, 3], data: new Float32Array(3 * added) },
               'present_new.0.key': { type: 'float32', dims: [1, 2, added, 1], data: slice(1) },
               'present_new.0.value': { type: 'float32', dims: [1, 2, added, 1], data: slice(-1) } };
    };
    const empty = { data: new Float32Array(0), dims: [1, 2, 0, 1] };
    const cache = new AppendedCache(run, layout,
      { 'past_key_values.0.key': empty, 'past_key_values.0.value': empty });
    const ids = (count) => ({ input_ids: { data: new BigInt64Array(count), dims: [1, count] } });
    const logits = await cache.run(ids(3));
    assert.deepEqual(logits.dims, [1, 3, 3]);
    await cache.run(ids(1));
    await cache.run(ids(1));
    assert.deepEqual(calls.map((call) => call.fetch), Array(3).fill(['logits', ...layout.slices]));
    const key = calls[2].feeds['past_key_values.0.key'];
    assert.deepEqual([key.type, key.dims], ['float32', [1, 2, 4, 1]]);
    assert.deepEqual(Array.from(key.data), [0, 1, 2, 3, 10, 11, 12, 13]);
    assert.deepEqual(Array.from(calls[2].feeds['past_key_values.0.value'].data),
      [-0, -1, -2, -3, -10, -11, -12, -13]);
    // the two arrays used in turn: a step's past is not the array the next step writes
    assert.notEqual(calls[1].feeds['past_key_values.0.key'].data.buffer, key.data.buffer);
  });
});
