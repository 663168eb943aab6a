// The Whisper long-audio spec's Node side for tests/test_whisper_windows.py: reads a JSON table
// (argv[2]) and prints, as JSON, web/text/whisper_windows.mjs's windows, joins and merges of it.
import { readFileSync } from 'node:fs';
import { settingsOf } from '../../web/text/whisper.mjs';
import { lcsMerge, merge, strideSeconds, windows } from '../../web/text/whisper_windows.mjs';

const table = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const settings = settingsOf(table.config);
process.stdout.write(JSON.stringify({
  windows: table.windows.map(([samples, chunkS, strideS]) => windows(samples, chunkS, strideS)
    .map((w) => ({ ...w, stride: strideSeconds(w) }))),
  joins: table.joins.map(lcsMerge),
  merges: table.merges.map(({ outputs, strides, timestamps }) => merge(outputs, strides, settings, timestamps)),
}));
