'use client';
// A client component: the server render imports the bundle too (its "node" entry, where load()
// rejects with code 'unsupported-environment'), so load() is called in useEffect, on the client.
import { useEffect, useState } from 'react';
import { load } from 'digits';

export default function Digits() {
  const [state, setState] = useState({ state: 'loading', text: 'loading…' });
  useEffect(() => {
    // ?worker runs the model in a Web Worker; ?ep=wasm or ?ep=webgpu picks the execution provider.
    const params = new URLSearchParams(location.search);
    let model;
    (async () => {
      model = await load({
        worker: params.has('worker'),
        ...(params.get('ep') && { executionProviders: [params.get('ep')] }),
      });
      const data = Float32Array.from({ length: 64 }, (_, i) => (i % 9) / 8); // an 8x8 test image
      const result = await model.run({ image: { dims: [1, 1, 8, 8], data } });
      setState({ state: 'done', text: JSON.stringify({
        ep: model.ep, worker: model.worker, probabilities: Array.from(result.probabilities.data),
      }) });
    })().catch((error) => setState({ state: 'error', text: `${error.name}: ${error.message}` }));
    return () => { model?.release(); };
  }, []);
  return <pre id="output" data-state={state.state}>{state.text}</pre>;
}
