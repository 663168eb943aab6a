// The Whisper spec's Node side for tests/test_whisper_twin.py: reads a JSON table (argv[2]) of
// decoding calls whose raw logits lie, float32, in a binary file (argv[3]), replays each call's
// greedy loop through web/text/whisper.mjs and prints, as JSON, the prompts, tokens, segments
// and seeks it finds, and its answers to the prompt and language questions of the table.
import { readFileSync } from 'node:fs';
import {
  choose, detectLanguage, framesToPositions, languageId, needsLanguage, processLogits, prompt,
  segments, settingsOf,
} from '../../web/text/whisper.mjs';

const table = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const bytes = readFileSync(process.argv[3]);
const logits = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
const settings = settingsOf(table.config);
const vocab = table.vocab;

const calls = table.calls.map((call) => {
  const language = call.language == null ? null : languageId(settings, call.language);
  const ids = prompt(settings, language, call.task, call.timestamps, call.detected);
  const generated = [];
  for (let step = 0; step < call.steps; step++) {
    const row = logits.subarray((call.first + step) * vocab, (call.first + step + 1) * vocab);
    const token = choose(processLogits(row, generated, settings, call.timestamps));
    generated.push(token);
    if (token === settings.eos || ids.length + generated.length >= settings.maxLength) break;
  }
  return { prompt: ids, generated, ...segments(generated, settings, call.seek, call.frames) };
});
const questions = table.questions.map(({ language, task, timestamps, detected }) => {
  const id = language == null ? null : languageId(settings, language);
  return { needs: needsLanguage(settings, id, task), prompt: prompt(settings, id, task, timestamps, detected) };
});
const detections = table.detections.map((first) => detectLanguage(settings, logits.subarray(first * vocab, (first + 1) * vocab)));
const positions = Array.from({ length: 3001 }, (_, frames) => framesToPositions(frames));
const crafted = table.crafted.map(({ generated, seek, frames }) => segments(generated, settings, seek, frames));
process.stdout.write(JSON.stringify({ calls, questions, detections, positions, crafted }));
