// task-demo.mjs: the demo page of a task bundle (index.html's #task section). Images: a file
// picker, drag-and-drop and the webcam (frames per second shown), boxes drawn on a canvas. Audio: a
// file picker, drag-and-drop and the microphone, chunk scores and speech segments on a timeline;
// speech to text: a recording's timed segments, or the microphone's utterances as they are said.
// Text: semantic search over pasted paragraphs (embed), a text's labels (classify), its entities
// (tokens) or a chat (generate: text/chat-demo.mjs).
// Labels come from the model: they reach the page as text only (textContent, canvas fillText).
import { KINDS, segments } from './tasks/index.mjs';

const $ = (id) => document.getElementById(id);
const COLOURS = ['#e6194b', '#3cb44b', '#4363d8', '#f58231', '#911eb4', '#008080', '#9a6324'];

function listResults(lines) {
  $('task-results').replaceChildren(...lines.map((text) => {
    const item = document.createElement('li');
    item.textContent = text;
    return item;
  }));
}

// The source drawn on the canvas, with the detections' boxes and labels.
async function drawImage(source, found) {
  const bitmap = source instanceof Blob ? await createImageBitmap(source) : source;
  const canvas = $('task-view');
  const width = bitmap.displayWidth ?? bitmap.videoWidth ?? bitmap.width;
  const height = bitmap.displayHeight ?? bitmap.videoHeight ?? bitmap.height;
  canvas.width = width;
  canvas.height = height;
  const context = canvas.getContext('2d');
  context.drawImage(bitmap, 0, 0, width, height);
  context.lineWidth = Math.max(2, width / 300);
  context.font = `${Math.max(12, Math.round(width / 40))}px system-ui, sans-serif`;
  context.textBaseline = 'top';
  for (const { label, index, score, box } of found) {
    const colour = COLOURS[index % COLOURS.length];
    context.strokeStyle = colour;
    context.strokeRect(box.x, box.y, box.width, box.height);
    const text = `${label} ${score.toFixed(2)}`;
    const size = context.measureText(text);
    context.fillStyle = colour;
    context.fillRect(box.x, Math.max(0, box.y - 18), size.width + 6, 18);
    context.fillStyle = '#fff';
    context.fillText(text, box.x + 3, Math.max(0, box.y - 17));
  }
  if (source instanceof Blob) bitmap.close();
}

async function detectObjects(model, source) {
  const found = await model.detect(source);
  await drawImage(source, found);
  listResults(found.length ? found.map(({ label, score, box }) => `${label}: ${
    score.toFixed(3)} at x ${Math.round(box.x)}, y ${Math.round(box.y)}, ${
    Math.round(box.width)}×${Math.round(box.height)}`) : ['Nothing found above the threshold.']);
}

async function classifyImage(model, source) {
  const classes = await model.classify(source);
  await drawImage(source, []);
  listResults(classes.map(({ label, score }) => `${label}: ${(100 * score).toFixed(1)} %`));
}

// Chunk scores as bars, segments (score >= threshold) shaded, the newest chunks at the right.
function drawTimeline(chunks, threshold) {
  const canvas = $('task-timeline');
  const context = canvas.getContext('2d');
  context.clearRect(0, 0, canvas.width, canvas.height);
  const shown = chunks.slice(-canvas.width);
  const step = canvas.width / Math.max(shown.length, 1);
  const first = shown[0]?.index ?? 0;
  context.fillStyle = '#cfe3ff';
  for (const segment of segments(shown, threshold)) {
    const at = (seconds) => ((seconds - (shown[0]?.start ?? 0)) / (shown[0] ? shown[0].end
      - shown[0].start : 1)) * step;
    context.fillRect(at(segment.start), 0, at(segment.end) - at(segment.start), canvas.height);
  }
  context.fillStyle = '#3d6fd9';
  for (const chunk of shown) {
    const height = Math.max(0, Math.min(1, chunk.score)) * canvas.height;
    context.fillRect((chunk.index - first) * step, canvas.height - height, Math.max(step, 1),
                     height);
  }
}

function showSegments(chunks, threshold) {
  const found = segments(chunks, threshold);
  listResults(found.length ? found.map(({ start, end }) => `speech ${start.toFixed(2)} s – ${
    end.toFixed(2)} s`) : ['No speech found.']);
  drawTimeline(chunks, threshold);
}

async function analyseAudio(model, file) {
  const context = new AudioContext();
  try {
    const audio = await context.decodeAudioData(await file.arrayBuffer());
    const stream = model.stream();
    const chunks = [...await stream.push(audio.getChannelData(0), audio.sampleRate),
                    ...await stream.flush()];
    showSegments(chunks, model.manifest.task.score_threshold ?? 0.5);
  } finally {
    await context.close();
  }
}

// A Start/Stop button for a live device (webcam, microphone): `begin(media)` starts using the
// stream and returns what to do on stop.
function liveToggle(button, device, constraints, setStatus, begin) {
  let stop = null;
  const show = (on) => {
    button.textContent = `${on ? 'Stop' : 'Start'} ${device}`;
    button.setAttribute('aria-pressed', String(on));
  };
  return async () => {
    if (stop) {
      stop();
      return;
    }
    let media;
    try {
      media = await navigator.mediaDevices.getUserMedia(constraints);
    } catch (error) {
      setStatus(`No ${device}: ${error.message}`, 'error');
      return;
    }
    let finish = () => {};
    stop = () => {
      media.getTracks().forEach((track) => track.stop());
      finish();
      stop = null;
      show(false);
    };
    show(true);
    finish = await begin(media, () => stop !== null);
  };
}

// The webcam: one frame analysed at a time, as fast as the model goes.
function webcam(model, button, setStatus, analyse) {
  return liveToggle(button, 'webcam', { video: true }, setStatus, async (media, running) => {
    const video = document.createElement('video');
    video.muted = true;
    video.srcObject = media;
    await video.play();
    let frames = 0;
    const started = performance.now();
    (async () => {
      while (running()) {
        // A frame a display refresh at most: the page repaints and takes input between runs
        // (model runs and bitmaps resolve as microtasks, which alone would starve it).
        await new Promise((resolve) => requestAnimationFrame(resolve));
        if (!running()) break;
        const frame = await createImageBitmap(video);
        await analyse(model, frame);
        frame.close();
        frames++;
        $('task-rate').textContent = `${(frames / ((performance.now() - started) / 1000))
          .toFixed(1)} frames/s`;
      }
    })();
    return () => {};
  });
}

// The microphone: samples pushed as they come (at the device's rate; resampled by stream()).
function microphone(model, button, setStatus) {
  return liveToggle(button, 'microphone', { audio: true }, setStatus, async (media) => {
    const context = new AudioContext();
    const input = context.createMediaStreamSource(media);
    const processor = context.createScriptProcessor(4096, 1, 1);
    const stream = model.stream();
    const chunks = [];
    const threshold = model.manifest.task.score_threshold ?? 0.5;
    processor.onaudioprocess = async (event) => {
      chunks.push(...await stream.push(event.inputBuffer.getChannelData(0).slice(),
                                       context.sampleRate));
      showSegments(chunks, threshold);
    };
    input.connect(processor);
    processor.connect(context.destination);
    return () => context.close();
  });
}

// The microphone transcribed live (automatic-speech-recognition, model.listen()): each utterance
// ended by a silence as a line with its times, the one being spoken below them as partial text.
function liveTranscription(model, button, setStatus) {
  return liveToggle(button, 'microphone', { audio: true }, setStatus, async (media) => {
    const stop = new AbortController();
    const finals = [];
    let partial = '';
    const show = () => {
      listResults(partial ? [...finals, partial] : finals);
      if (partial) $('task-results').lastElementChild.dataset.partial = 'true';
    };
    model.listen(media, {
      signal: stop.signal,
      onPartial: ({ text }) => { partial = `… ${text}`; show(); },
      onFinal: ({ start, end, text }) => {
        partial = '';
        finals.push(`${start.toFixed(2)} s – ${end.toFixed(2)} s: ${text || '(no words)'}`);
        show();
      },
    }).catch((error) => setStatus(`Could not transcribe: ${error.message}`, 'error'));
    listResults(['Listening…']);
    return () => stop.abort();
  });
}

// A dropped recording transcribed (automatic-speech-recognition): its segments with their times.
async function transcribeAudio(model, file) {
  const context = new AudioContext();
  try {
    const audio = await context.decodeAudioData(await file.arrayBuffer());
    const { text, segments: found } = await model.transcribe(audio.getChannelData(0),
      { sampleRate: audio.sampleRate, timestamps: true });
    const timed = (found ?? []).map(({ start, end, text: said }) => `${
      start?.toFixed(2) ?? '?'} s – ${end?.toFixed(2) ?? '?'} s: ${said}`);
    listResults(timed.length ? timed : [text || 'No speech found.']);
  } finally {
    await context.close();
  }
}

// What the demo does with a file or a live frame, by the kind's model method; the live device,
// by what the kind is fed (see KINDS in tasks/index.mjs).
const ANALYSE = { classify: classifyImage, detect: detectObjects, stream: analyseAudio,
  transcribe: transcribeAudio };
const LIVE = { image: webcam, audio: microphone };

// The paragraphs ranked by cosine similarity to the query (rows of length 1 unless the bundle
// was built with normalize=false: divided by their lengths here).
async function searchParagraphs(model, query) {
  const paragraphs = $('task-paragraphs').value.split('\n').filter((line) => line.trim());
  if (!paragraphs.length) {
    listResults(['Paste some paragraphs to search, one a line.']);
    return;
  }
  const [wanted, ...rows] = await model.embed([query, ...paragraphs]);
  const length = (row) => Math.sqrt(row.reduce((sum, value) => sum + value * value, 0)) || 1;
  const cosine = (row) => row.reduce((sum, value, i) => sum + value * wanted[i], 0)
    / (length(row) * length(wanted));
  const ranked = paragraphs.map((text, i) => ({ text, score: cosine(rows[i]) }))
    .sort((a, b) => b.score - a.score);
  listResults(ranked.map(({ text, score }) => `${score.toFixed(3)}  ${text}`));
}

async function labelText(model, text) {
  const classes = await model.classify(text);
  listResults(classes.map(({ label, score }) => `${label}: ${(100 * score).toFixed(1)} %`));
}

// Each entity with its span in the text (offsets in UTF-16 units, as text.slice() takes).
async function findEntities(model, text) {
  const found = await model.tokens(text);
  listResults(found.length ? found.map(({ entity, score, start, end, word }) => (
    `${entity} ${start}-${end} “${word}”: ${(100 * score).toFixed(1)} %`))
    : ['No entities in this text.']);
}

const TEXT_METHODS = { embed: searchParagraphs, classify: labelText, tokens: findEntities };

function startTextDemo(model, method, setStatus) {
  const run = $('task-run');
  const analyse = () => TEXT_METHODS[method](model, $('task-text').value).catch(
    (error) => setStatus(`Could not analyse the text: ${error.message}`, 'error'));
  run.addEventListener('click', analyse);
  $('task-text').addEventListener('keydown', (event) => event.key === 'Enter' && analyse());
  run.disabled = false;
}

export async function startTaskDemo(model, { setStatus }) {
  const { method, media } = KINDS[model.manifest.task.kind];
  if (method === 'generate') { // a chat (text/chat-demo.mjs, which generation bundles carry)
    const { startChatDemo } = await import('./text/chat-demo.mjs');
    await startChatDemo(model, { setStatus });
    return;
  }
  if (media === 'text') {
    startTextDemo(model, method, setStatus);
    return;
  }
  const analyse = (file) => ANALYSE[method](model, file)
    .catch((error) => setStatus(`Could not analyse ${file.name ?? 'it'}: ${error.message}`,
                                'error'));
  const picker = $('task-file');
  picker.addEventListener('change', () => picker.files[0] && analyse(picker.files[0]));
  const drop = $('task-drop');
  drop.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault();
      picker.click();
    }
  });
  drop.addEventListener('click', () => picker.click());
  drop.addEventListener('dragover', (event) => {
    event.preventDefault();
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (event) => {
    event.preventDefault();
    drop.classList.remove('over');
    const [file] = event.dataTransfer.files;
    if (file) analyse(file);
  });
  const live = $('task-live');
  picker.disabled = false;
  const start = method === 'transcribe' ? liveTranscription : LIVE[media];
  live.addEventListener('click', start(model, live, setStatus, ANALYSE[method]));
  live.disabled = !navigator.mediaDevices;
}
