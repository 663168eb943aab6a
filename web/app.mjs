// app.mjs: the demo page of a bundle. Loads the model through bundle.mjs, builds an input control
// per model input (a drawing canvas for small one-channel images, an image picker for NCHW images,
// generated values otherwise), runs it and shows timings and an output summary.
import { load } from './bundle.mjs';

const $ = (id) => document.getElementById(id);
const status = $('status');

// Model files are untrusted input: their strings (input names, ...) reach the page as text only.
function element(tag, { className, text } = {}, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  node.append(...children);
  return node;
}

const note = (text) => element('span', { className: 'muted', text });

function setStatus(text, state) {
  status.textContent = text;
  status.dataset.state = state;
}

function dimsFor(spec, manifest) {
  const known = manifest.verification?.dims ?? {};
  return spec.shape.map((d, axis) => (typeof d === 'number'
    ? d
    : known[`${spec.name}:${axis}`] ?? known[d] ?? (axis >= 2 && spec.shape.length === 4 ? 224 : 1)));
}

function isImage(spec) {
  return spec.shape?.length === 4 && [1, 3].includes(spec.shape[1]) && spec.type === 'float32';
}

function isDrawable(spec) {
  const [, channels, height, width] = spec.shape ?? [];
  return isImage(spec) && channels === 1 && typeof height === 'number' && height <= 32 &&
    typeof width === 'number' && width <= 32;
}

function generated(spec, dims) {
  const count = dims.reduce((a, b) => a * b, 1);
  const ints = /int/.test(spec.type);
  const data = Array.from({ length: count }, () => (ints ? Math.floor(Math.random() * 8) : Math.random()));
  if (spec.type === 'bool') return { type: spec.type, dims, data: data.map((v) => v > 0.5) };
  return { type: spec.type, dims, data: dims.length === 0 && ints ? [1] : data };
}

function drawingControl(spec, dims, container) {
  const [, , height, width] = dims;
  const canvas = document.createElement('canvas');
  canvas.width = width * 20;
  canvas.height = height * 20;
  canvas.className = 'draw';
  const ctx = canvas.getContext('2d');
  const clear = () => { ctx.fillStyle = '#000'; ctx.fillRect(0, 0, canvas.width, canvas.height); };
  clear();
  let drawing = false;
  let touched = false;
  const point = (event) => {
    const rect = canvas.getBoundingClientRect();
    return [(event.clientX - rect.left) * (canvas.width / rect.width),
      (event.clientY - rect.top) * (canvas.height / rect.height)];
  };
  canvas.addEventListener('pointerdown', (event) => {
    drawing = true;
    touched = true;
    ctx.beginPath();
    ctx.moveTo(...point(event));
  });
  canvas.addEventListener('pointermove', (event) => {
    if (!drawing) return;
    ctx.strokeStyle = '#fff';
    ctx.lineWidth = canvas.width / 9;
    ctx.lineCap = 'round';
    ctx.lineTo(...point(event));
    ctx.stroke();
  });
  const stop = () => {
    if (drawing) $('run').click();
    drawing = false;
  };
  canvas.addEventListener('pointerup', stop);
  canvas.addEventListener('pointerleave', stop);
  const reset = document.createElement('button');
  reset.textContent = 'Clear';
  reset.addEventListener('click', () => { clear(); touched = false; });
  container.append(canvas, element('br'), reset, ' ', note('Draw a digit (or any shape) here.'));
  return () => {
    if (!touched) return generated(spec, dims);
    const pixels = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
    const cell = canvas.width / width;
    const data = new Float32Array(height * width);
    for (let y = 0; y < canvas.height; y++) {
      for (let x = 0; x < canvas.width; x++) {
        data[Math.floor(y / cell) * width + Math.floor(x / cell)] += pixels[(y * canvas.width + x) * 4] / 255;
      }
    }
    return { type: spec.type, dims, data: data.map((v) => v / (cell * cell)) };
  };
}

function imageControl(spec, dims, container) {
  const [, channels, height, width] = dims;
  const picker = document.createElement('input');
  picker.type = 'file';
  picker.accept = 'image/*';
  let pixels = null;
  picker.addEventListener('change', async () => {
    const bitmap = await createImageBitmap(picker.files[0]);
    const canvas = new OffscreenCanvas(width, height);
    const ctx = canvas.getContext('2d');
    ctx.drawImage(bitmap, 0, 0, width, height);
    const rgba = ctx.getImageData(0, 0, width, height).data;
    pixels = new Float32Array(channels * height * width);
    for (let c = 0; c < channels; c++) {
      for (let i = 0; i < height * width; i++) {
        pixels[c * height * width + i] = (channels === 1
          ? (rgba[i * 4] + rgba[i * 4 + 1] + rgba[i * 4 + 2]) / 3
          : rgba[i * 4 + c]) / 255;
      }
    }
  });
  container.append(picker, ' ', note(`image resized to ${width}×${height}, scaled to [0, 1]`));
  return () => (pixels ? { type: spec.type, dims, data: pixels } : generated(spec, dims));
}

function inputControls(model) {
  const controls = {};
  for (const spec of model.inputs) {
    const block = element('div', { className: 'input-block' },
      element('strong', {}, element('code', { text: spec.name })), element('br'));
    $('input-controls').append(block);
    const dims = spec.shape === null ? [] : dimsFor(spec, model.manifest);
    if (isDrawable(spec)) controls[spec.name] = drawingControl(spec, dims, block);
    else if (isImage(spec)) controls[spec.name] = imageControl(spec, dims, block);
    else {
      block.append(note(`generated, shape [${dims.join(', ')}]`));
      controls[spec.name] = () => generated(spec, dims);
    }
  }
  return () => Object.fromEntries(Object.entries(controls).map(([name, make]) => [name, make()]));
}

function topK(data, k) {
  return [...data.keys()].sort((a, b) => data[b] - data[a]).slice(0, k);
}

function showOutputs(model, outputs) {
  let prediction = '';
  for (const spec of model.outputs) {
    const row = document.querySelector(`tr[data-output="${CSS.escape(spec.name)}"]`);
    const tensor = outputs[spec.name];
    const values = Array.from(tensor.data.slice(0, 8), (v) => (typeof v === 'number' ? +v.toPrecision(4) : String(v)));
    row.children[2].textContent = `[${tensor.dims.join(', ')}]`;
    row.children[3].textContent = values.join(', ') + (tensor.data.length > 8 ? ', …' : '');
    const classes = tensor.dims.at(-1);
    const scores = tensor.type.startsWith('float') && classes >= 2 && tensor.dims.length <= 2;
    if (scores) {
      const best = topK(Array.from(tensor.data.slice(0, classes)), 3);
      row.children[4].textContent = best.map((i) => `${i} (${(+tensor.data[i]).toPrecision(3)})`).join(', ');
      if (!prediction) prediction = `Predicted class: ${best[0]}`;
    } else {
      row.children[4].textContent = '–';
    }
  }
  $('prediction').textContent = prediction;
}

async function main() {
  let model;
  try {
    model = await load({
      onProgress: ({ stage, loaded, total }) => {
        const percent = total ? ` ${Math.round((100 * loaded) / total)}%` : '';
        setStatus(`Loading: ${stage}${percent}`, 'loading');
      },
    });
  } catch (error) {
    setStatus(`Could not load the model: ${error.message}`, 'error');
    return;
  }
  const name = model.ep === 'webgpu' ? 'WebGPU' : 'WASM';
  setStatus(model.fallbackReason
    ? `${model.fallbackReason} — running on ${name}`
    : `Running on ${name} (variant ${model.variant})`, model.fallbackReason ? 'fallback' : 'ready');
  if (model.manifest.task) { // a task bundle: its own demo (task-demo.mjs)
    const { startTaskDemo } = await import('./task-demo.mjs');
    await startTaskDemo(model, { setStatus });
    document.body.dataset.ready = 'true';
    return;
  }
  const feeds = inputControls(model);
  const timings = { load: model.loadMs, first: null, median: null };
  const showTimings = () => {
    const ms = (v) => (v === null ? '–' : `${v.toFixed(1)} ms`);
    $('timings').textContent = `load ${ms(timings.load)} · first run ${ms(timings.first)} · median ${ms(timings.median)}`;
  };
  const runOnce = async () => {
    const started = performance.now();
    const outputs = await model.run(feeds());
    const elapsed = performance.now() - started;
    if (timings.first === null) timings.first = elapsed;
    showOutputs(model, outputs);
    return elapsed;
  };
  const guard = (action) => async () => {
    $('run').disabled = $('benchmark').disabled = true;
    try {
      await action();
    } catch (error) {
      setStatus(`Run failed: ${error.message}`, 'error');
    } finally {
      $('run').disabled = $('benchmark').disabled = false;
      showTimings();
    }
  };
  $('run').addEventListener('click', guard(runOnce));
  $('benchmark').addEventListener('click', guard(async () => {
    const times = [];
    for (let i = 0; i < 10; i++) times.push(await runOnce());
    times.sort((a, b) => a - b);
    timings.median = times[Math.floor(times.length / 2)];
  }));
  $('run').disabled = $('benchmark').disabled = false;
  showTimings();
  document.body.dataset.ready = 'true';
}

main();
