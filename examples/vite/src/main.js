// The bundle of the example model (`bundle build --name digits`), a dependency in package.json.
import { load } from 'digits';

// ?worker runs the model in a Web Worker; ?ep=wasm or ?ep=webgpu picks the execution provider.
const params = new URLSearchParams(location.search);
const output = document.getElementById('output');
try {
  const model = await load({
    worker: params.has('worker'),
    ...(params.get('ep') && { executionProviders: [params.get('ep')] }),
  });
  const data = Float32Array.from({ length: 64 }, (_, i) => (i % 9) / 8); // an 8x8 test image
  const result = await model.run({ image: { dims: [1, 1, 8, 8], data } });
  output.textContent = JSON.stringify({
    ep: model.ep, worker: model.worker, probabilities: Array.from(result.probabilities.data),
  });
  output.dataset.state = 'done';
  await model.release();
} catch (error) {
  output.textContent = `${error.name}: ${error.message}`;
  output.dataset.state = 'error';
}
