// profile.mjs: onnxruntime-web's own profile of a bundle (`bundle bench --profile`,
// bundler/perf/page.py): loaded through bundle.mjs with its internal session-options hook, run
// `runs` times and released, which ends the profile; onnxruntime-web prints the trace to the
// console, and `end` is logged after it.

import { openBundle } from './harness.mjs';

export async function profileRuns({ base, variant, ep, threads, feeds, runs, end }) {
  const { load, decode } = await openBundle(base);
  const options = { executionProviders: [ep], variant, ignoreVerification: true,
                    __sessionOptions: { enableProfiling: true } };
  if (threads !== null) options.numThreads = threads;
  const model = await load(options);
  const inputs = decode(feeds);
  try {
    for (let i = 0; i < runs; i++) await model.run(inputs);
  } finally {
    await model.release();
  }
  console.log(end);
}
