// The Node side of tests/test_text_entities.py: web/tasks/entities.mjs on a JSON table (argv[2]):
// {families: {name: {tokenizer, config, special}}, texts: [...], cases: [{text, spans, logits,
// labels}]}, with the tokenizer module's and the entities module's URLs (argv[3], argv[4]);
// prints {spans: {family: [per text: its ids and their spans]}, entities: [per case]}.
import { readFileSync } from 'node:fs';

const table = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { loadTokenizer } = await import(process.argv[3]);
const { entities, tokenSpans } = await import(process.argv[4]);

const spans = {};
for (const [name, files] of Object.entries(table.families)) {
  const tokenizer = loadTokenizer(files.tokenizer, files.config, files.special);
  spans[name] = table.texts.map((text) => {
    const batch = tokenizer.encode([text]);
    const ids = Array.from(batch.input_ids, Number);
    return { ids, spans: tokenSpans(tokenizer, text, ids) };
  });
}
const found = table.cases.map(({ text, spans: given, logits, labels }) => entities(text, given,
  logits, labels));
process.stdout.write(JSON.stringify({ spans, entities: found }));
