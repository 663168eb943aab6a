// The JavaScript side of tests/test_text_tokenizer.py: encodes and decodes the corpus with
// web/text/tokenizer.mjs, in Node (`node text_parity.mjs INPUT.json TOKENIZER_MODULE_URL`, JSON on
// stdout) or in a page (`runCorpus(module, input)`). Input: {families: {name: {tokenizer, config,
// special}}, cases: [...]}; output: {family: {cases: [one result per case], vocabulary: [each id
// of the vocabulary decoded alone]}}.

/** Each case's batch, and each row's ids (padding left out) decoded with and without the special
 * tokens; an error as {error}. */
export function runCorpus({ loadTokenizer }, { families, cases }) {
  const results = {};
  for (const [name, files] of Object.entries(families)) {
    const tokenizer = loadTokenizer(files.tokenizer, files.config, files.special);
    const size = files.tokenizer.added_tokens.reduce((most, token) => Math.max(most, token.id + 1),
      tokenizer.library.model.vocab.length);
    const vocabulary = Array.from({ length: size }, (_, id) => tokenizer.decode([id]));
    const encoded = cases.map((c) => {
      try {
        const batch = tokenizer.encode(c.texts, {
          pairs: c.pairs ?? null, maxLength: c.max_length ?? null,
          addSpecialTokens: c.add_special_tokens ?? null,
        });
        const [rows, width] = batch.dims;
        const table = (data) => Array.from({ length: rows },
          (_, r) => Array.from(data.subarray(r * width, (r + 1) * width), Number));
        const ids = table(batch.input_ids);
        const mask = table(batch.attention_mask);
        const kept = ids.map((row, r) => row.filter((_, j) => mask[r][j] === 1));
        return {
          input_ids: ids, attention_mask: mask, token_type_ids: table(batch.token_type_ids),
          dims: batch.dims,
          decoded: kept.map((row) => tokenizer.decode(row)),
          decoded_special: kept.map((row) => tokenizer.decode(row, { skipSpecialTokens: false })),
        };
      } catch (error) {
        return { error: String(error.message ?? error) };
      }
    });
    results[name] = { cases: encoded, vocabulary };
  }
  return results;
}

if (typeof process !== 'undefined' && import.meta.url === `file://${process.argv[1]}`) {
  const { readFileSync } = await import('node:fs');
  const input = JSON.parse(readFileSync(process.argv[2], 'utf8'));
  const module = await import(process.argv[3]);
  process.stdout.write(JSON.stringify(runCorpus(module, input)));
}
