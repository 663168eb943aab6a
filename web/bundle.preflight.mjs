// bundle.preflight.mjs: whether a variant fits this device, said before a byte of it is fetched,
// and what load() would download. The manifest gives each variant's `memory` record (its largest
// tensor and the estimates of bundler/variants/footprint.py); here they meet the browser's limits:
// wasm32's 4 GiB heap, navigator.deviceMemory where the browser gives it, and on WebGPU the
// adapter's maxBufferSize and maxStorageBufferBindingSize. The checks are pure (unit-tested under
// Node, tests/js/preflight.test.mjs); environment() and preflightOf() read the browser.

import { BundleError, graphFor, pickSession, pickVariant, planAttempts, verificationReason }
  from './bundle.core.mjs';
import { cachedBytes, fetchedPieces } from './bundle.fetch.mjs';

export const WASM32_HEAP = 4 * 2 ** 30; // wasm32 addresses 4 GiB at most
const GIB = 2 ** 30;
// Chrome rounds navigator.deviceMemory down to a power of two and caps it at 8 (GB): 8 says
// "8 GB or more", so it limits nothing.
const DEVICE_MEMORY_CAP = 8;
const ADAPTER_LIMITS = ['maxBufferSize', 'maxStorageBufferBindingSize'];

export function formatBytes(bytes) {
  if (bytes >= GIB) return `${(bytes / GIB).toFixed(2)} GiB`;
  return bytes >= 2 ** 20 ? `${(bytes / 2 ** 20).toFixed(1)} MiB` : `${bytes} bytes`;
}

// The checks of a variant's memory record on `ep` against the limits `env` gives ({ deviceMemory
// (GB), adapterLimits }): [{ limit, value, need, what, fits }], the bytes each limit allows and
// the estimate compared with it.
export function limitChecks(memory, ep, env = {}) {
  const checks = [{ limit: 'the wasm32 heap', value: WASM32_HEAP, need: memory.heap,
                    what: 'estimated wasm heap' }];
  const { deviceMemory } = env;
  if (typeof deviceMemory === 'number' && deviceMemory > 0 && deviceMemory < DEVICE_MEMORY_CAP) {
    checks.push({ limit: 'navigator.deviceMemory', value: deviceMemory * GIB, need: memory.peak,
                  what: 'estimated peak memory' });
  }
  for (const name of ep === 'webgpu' ? ADAPTER_LIMITS : []) {
    const value = env.adapterLimits?.[name];
    if (value) {
      checks.push({ limit: `the WebGPU adapter's ${name}`, value, need: memory.largest_tensor,
                    what: 'largest tensor' });
    }
  }
  return checks.map((check) => ({ ...check, fits: check.need <= check.value }));
}

// A bundle built before the memory record has no estimate: nothing is checked.
const checksOf = (variant, ep, env) => (variant.memory ? limitChecks(variant.memory, ep, env) : []);
const fitsOn = (variant, ep, env) => checksOf(variant, ep, env).every((check) => check.fits);

// The fallback reason of a variant that does not fit: the first limit it exceeds, and the
// session's smallest variant that would fit on `ep`, if any.
export function tooLargeReason(session, variant, ep, env, checks) {
  const failed = checks.find((check) => !check.fits);
  const other = session.variants
    .filter((v) => v !== variant && v.memory && fitsOn(v, ep, env)
      && !missingFeatures(v, ep, env).length)
    .sort((a, b) => a.bytes - b.bytes)[0];
  const instead = other ? `the variant '${other.name}' would fit (load({ variant: '${other.name}' }))`
    : `no variant of this bundle fits on ${ep}`;
  return { ep, code: 'too-large', detail: `${ep} skipped: variant '${variant.name}' needs ${
    formatBytes(failed.need)} (${failed.what}) but ${failed.limit} is ${
    formatBytes(failed.value)}; ${instead}` };
}

// The WebGPU features a variant needs (`requires`: fp16's shader-f16) that the adapter lacks
// (`env.features`, the adapter's feature names); none on WASM, which runs every variant.
export function missingFeatures(variant, ep, env = {}) {
  if (ep !== 'webgpu') return [];
  return (variant.requires ?? []).filter((name) => !(env.features ?? []).includes(name));
}

// A variant the adapter cannot run (fp16 without shader-f16: onnxruntime-web creates the session,
// then every run fails) is swapped before anything is fetched: for the session's WASM default,
// else its first variant, that needs nothing the adapter lacks and did not fail verification
// there; `variantReason` says so. A variant asked for by name is not swapped: the EP is skipped.
function withFeatures(manifest, session, attempt, env, options) {
  const { ep, variant } = attempt;
  const missing = missingFeatures(variant, ep, env);
  if (!missing.length) return attempt;
  const needs = `variant '${variant.name}' needs the WebGPU feature ${missing.join(', ')}, which`
    + ' this adapter lacks';
  const usable = (v) => !missingFeatures(v, ep, env).length
    && !(options.ignoreVerification ? null : verificationReason(manifest, session, v, ep));
  const instead = options.variant === undefined
    ? [pickVariant(session, 'wasm'), ...session.variants].find(usable) : undefined;
  if (!instead) {
    const why = options.variant === undefined ? 'no other variant runs there'
      : 'asked for by name';
    return { ep, reason: { ep, code: 'feature-missing', detail: `${ep} skipped: ${needs} (${why})` } };
  }
  return { ep, variant: instead, variantReason: { ep, code: 'feature-missing', variant: variant.name,
    detail: `${ep}: ${needs}; loaded '${instead.name}' instead` } };
}

// planAttempts (bundle.core.mjs) with the device: per EP, { ep, variant, checks } (and
// `variantReason` when the default variant needs a feature the adapter lacks and another was
// picked) or, where the manifest, the environment (`envs[ep]`, with its `reason` when the EP is
// unavailable), a missing feature or a limit rules it out, with `reason` too.
export function planFits(manifest, eps, options, envs) {
  const session = pickSession(manifest, options.session);
  return planAttempts(manifest, eps, options).map((planned) => {
    const env = envs[planned.ep] ?? {};
    if (planned.reason) return { ...planned, checks: [] };
    if (env.reason) return { ...planned, checks: checksOf(planned.variant, planned.ep, env),
      reason: env.reason };
    const attempt = withFeatures(manifest, session, planned, env, options);
    const { ep, variant } = attempt;
    if (attempt.reason) return { ...attempt, checks: [] };
    const checks = checksOf(variant, ep, env);
    if (checks.every((check) => check.fits)) return { ...attempt, checks };
    return { ...attempt, checks, reason: tooLargeReason(session, variant, ep, env, checks) };
  });
}

// load()'s refusal, before any model byte is fetched, of a plan (planFits) in which no EP fits
// and a limit is why (not only EPs the bundle or the browser lacks); null when some EP fits.
export function refusal(plan) {
  if (!plan.every((attempt) => attempt.reason)) return null;
  if (!plan.some((attempt) => attempt.reason.code === 'too-large')) return null;
  const reasons = plan.map((attempt) => attempt.reason);
  return new BundleError('too-large', 'this model does not fit this device (refused before'
    + ` downloading it): ${reasons.map((reason) => reason.detail).join('; ')}`, { reasons });
}

// --- the browser ------------------------------------------------------------------------------

async function webgpuEnvironment() {
  const reason = (detail) => ({ reason: { ep: 'webgpu', code: 'webgpu-unavailable',
    detail: `WebGPU unavailable: ${detail}` } });
  if (!globalThis.navigator?.gpu) return reason('navigator.gpu is missing');
  try {
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return reason('no adapter (requestAdapter() returned null)');
    const limits = Object.fromEntries(ADAPTER_LIMITS.map((name) => [name, adapter.limits[name]]));
    return { adapterLimits: limits, features: [...adapter.features] };
  } catch (error) {
    return reason(`requestAdapter() failed: ${error.message ?? error}`);
  }
}

// What limits this browser sets per EP of `eps` (planFits' `envs`).
export async function environment(eps) {
  const deviceMemory = globalThis.navigator?.deviceMemory;
  const envs = {};
  for (const ep of eps) {
    envs[ep] = { deviceMemory, ...(ep === 'webgpu' ? await webgpuEnvironment() : {}) };
  }
  return envs;
}

const entryOf = (manifest, path) => manifest.files?.find((file) => file.path === path) ?? { path };

// A file load() would fetch: its bytes over the wire (the gzip siblings' sizes where the build wrote
// them) and whether Cache Storage holds it already (looked up by sha256, nothing read).
async function fileOf(manifest, path, cache) {
  const entry = entryOf(manifest, path);
  const wire = fetchedPieces(entry).reduce((sum, piece) => sum + piece.bytes, 0);
  const cached = await cachedBytes(entry, cache);
  return { path, bytes: entry.bytes ?? 0, wire, cached: cached > 0 };
}

// model.preflight(): per EP load() would try, the variant, what it would download, what is
// cached, the memory record and the limits it was checked against.
export async function preflightOf(manifest, eps, options, envs) {
  const session = pickSession(manifest, options.session);
  const cache = options.cache !== false;
  const plan = planFits(manifest, eps, options, envs);
  const report = await Promise.all(plan.map(async ({ ep, variant, checks, reason,
                                                    variantReason }) => {
    const build = manifest.runtime.builds[ep];
    const paths = variant && build
      ? [graphFor(variant, ep), ...(variant.data ?? []), build.wasm] : [];
    const files = await Promise.all(paths.map((path) => fileOf(manifest, path, cache)));
    const sum = (list, key) => list.reduce((total, file) => total + file[key], 0);
    return {
      ep, variant: variant?.name ?? null, fits: !reason, reason: reason ?? null,
      variantReason: variantReason ?? null, files,
      download: sum(files.filter((file) => !file.cached), 'wire'),
      cached: sum(files.filter((file) => file.cached), 'bytes'),
      memory: variant?.memory ?? null, checks,
    };
  }));
  return { session: session.name, fits: report.some((entry) => entry.fits), eps: report };
}
