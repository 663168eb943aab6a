// ops_page.mjs: tests/test_ops_data.py's page (copied into the served site). Every one-node
// model runs through the bundle's own session path (bundle.session.mjs's openSession, as load()
// opens one) with its internal session options: optimisation off, and once with WebGPU's CPU
// fallback disabled (strict), once with it allowed (loose).

const typed = (f) => (f.type === 'float32' ? Float32Array.from(f.data)
  : f.type === 'int32' ? Int32Array.from(f.data)
    : f.type === 'int64' ? BigInt64Array.from(f.data.map(BigInt)) : Uint8Array.from(f.data));

export async function runAll({ base, build, ep, cases }) {
  const { openSession } = await import(new URL('bundle.session.mjs', base).href);
  const urls = (path) => new URL(path, base).href;
  const runtime = { module: urls(build.module), mjs: urls(build.mjs),
                    wasm: { entry: { path: build.wasm }, urls } };
  const attempt = async (model, feeds, strict) => {
    const sessionOptions = { graphOptimizationLevel: 'disabled' };
    if (strict) sessionOptions.extra = { session: { disable_cpu_ep_fallback: '1' } };
    const session = await openSession({ runtime, model: { entry: { path: model }, urls }, ep,
                                        numThreads: 1, models: new Map(), sessionOptions });
    try {
      const inputs = Object.fromEntries(Object.entries(feeds).map(
        ([name, f]) => [name, { type: f.type, dims: f.dims, data: typed(f) }]));
      const out = await session.run(inputs);
      return Object.fromEntries(Object.entries(out).map(
        ([k, t]) => [k, { dims: [...t.dims], data: Array.from(t.data, Number) }]));
    } finally {
      await session.release();
    }
  };
  const results = {};
  for (const c of cases) {
    const result = {};
    for (const strict of [true, false]) {
      try {
        result[strict ? 'strict' : 'loose'] = await attempt(c.url, c.feeds, strict);
      } catch (error) {
        result[strict ? 'strictError' : 'looseError'] = String(error?.message ?? error);
      }
    }
    results[c.name] = result;
  }
  return results;
}
