// conformance.mjs: `bundle test`'s page (bundler/verify/conformance.py, bundler/tasks/check.py). Loads
// the bundle with the given load() options, runs it and gives back what it computed.

import { encodeTensors, fromBase64, messageOf, openBundle } from './harness.mjs';

// Every case (base64 feeds) run once; the outputs go back base64, with the EP and fallback.
export async function runCases({ base, options, cases }) {
  const { load, decode } = await openBundle(base);
  let model;
  try {
    model = await load(options);
    const outputs = [];
    for (const feeds of cases) outputs.push(encodeTensors(await model.run(decode(feeds))));
    return { ep: model.ep, fallbackReason: model.fallbackReason,
             fallbackReasons: model.fallbackReasons, variant: model.variant, outputs };
  } catch (error) { // a BundleError: its code and reasons go back, not only its English
    return { error: { code: error?.code ?? null, message: messageOf(error),
                      reasons: error?.reasons ?? [] } };
  } finally {
    await model?.release();
  }
}

const PROGRESS = 'progress: '; // console lines bundler/tasks/check.py reports as they come
const PROGRESS_STEPS = 50;

// teacherRows: the rows teacher forcing would compute for `teacher` (per window, native's calls
// { seek, ids, prompt, at }), read from a transcript's own steps (`record`, transcribe()'s
// _onStep) where its call at that seek has native's prompt and tokens so far: the same inputs,
// so the same logits, and a window whose tokens are native's is not decoded a second time (half
// the check's decoder steps, hours of them on Whisper-tiny over SwiftShader). rows(): per
// window, per call, its rows, or null where the transcript parted from native before the
// call's last probed step.
export function teacherRows(teacher) {
  const rows = teacher.map((calls) => calls.map(() => []));
  const same = (ids, from, tokens) => tokens.every((id, i) => id === ids[from + i]);
  const record = (window, seek, prompt, generated, logits) => {
    const index = teacher[window]?.findIndex((call) => call.seek === seek) ?? -1;
    const call = teacher[window]?.[index];
    const step = generated.length;
    if (!call || step >= call.at.length || rows[window][index].length !== step
        || prompt.length !== call.prompt || !same(call.ids, 0, prompt)
        || !same(call.ids, call.prompt, generated)) return;
    rows[window][index].push(call.at[step].map((id) => logits[id]));
  };
  return { record, rows: () => rows.map((calls, window) => calls.map((found, index) => (
    found.length === teacher[window][index].at.length ? found : null))) };
}

// The task API's answers: items are { file } (an image file, base64) or, for 'audio-stream',
// { samples (float32, base64), rate }.
// One task answer per item through the bundle's own method (`method`: the task kind's, see
// web/tasks/index.mjs's KINDS).
export async function runTask({ base, options, method, items }) {
  const { load } = await openBundle(base);
  let model;
  try {
    model = await load(options);
    const results = [];
    for (const item of items) {
      if (method === 'stream') {
        const stream = model.stream();
        const samples = new Float32Array(fromBase64(item.samples).buffer);
        results.push([...await stream.push(samples, item.rate), ...await stream.flush()]);
      } else if (method === 'transcribe') {  // each case's transcript of the samples, and
        // its windows' logits teacher-forced on native's tokens (item.teacher: per case)
        const samples = new Float32Array(fromBase64(item.samples).buffer);
        const text = await import(new URL('tasks/text.mjs', base).href);
        const transcripts = [];
        const known = [];
        for (const [index, options] of item.cases.entries()) {
          const steps = teacherRows(item.teacher[index]);
          let shown = -1;
          let taken = 0;
          const onStep = (window, ...step) => {
            // long work shows progress: the check reports these lines, one as a window starts
            // and one every PROGRESS_STEPS of its decoder steps (seconds each over SwiftShader)
            taken = window === shown ? taken + 1 : 0;
            if (window !== shown || taken % PROGRESS_STEPS === 0) {
              shown = window;
              console.info(`${PROGRESS}transcript ${index + 1} of ${item.cases.length}, window`
                           + ` ${window + 1} of ${item.teacher[index].length}`
                           + (taken ? `, ${taken} decoder steps` : ''));
            }
            steps.record(window, ...step);
          };
          transcripts.push(await model.transcribe(samples, { sampleRate: item.rate, ...options,
                                                             _onStep: onStep }));
          known.push(steps.rows());
        }
        const logits = await text.teacherForcedSpeech(model, model.manifest.task, samples,
          item.rate, item.teacher, known);
        results.push(transcripts.map((transcript, index) => ({ ...transcript,
                                                                logits: logits[index] })));
      } else if (method === 'generate') {  // greedy token ids, teacher-forced logits per prompt
        const text = await import(new URL('tasks/text.mjs', base).href);
        const answer = [];
        for (const [index, prompt] of item.texts.entries()) {
          const { tokenIds } = await model.generate(prompt, { maxNewTokens: item.steps });
          const logits = await text.teacherForced(model, model.manifest.task,
            item.teacher[index]);
          answer.push({ tokens: tokenIds, logits });
        }
        results.push(answer);
      } else if (item.texts) {  // embed() rows as plain arrays, classify() per text
        const answer = await model[method](item.texts, { topK: 5 });
        results.push(answer.map((row) => (ArrayBuffer.isView(row) ? Array.from(row) : row)));
      } else {
        const blob = new Blob([fromBase64(item.file)]);
        results.push(await model[method](blob, { topK: 5 }));  // detect() ignores topK
      }
    }
    return { ep: model.ep, results };
  } catch (error) {
    return { error: messageOf(error) };
  } finally {
    await model?.release();
  }
}
