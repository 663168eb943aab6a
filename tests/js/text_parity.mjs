// The JavaScript side of tests/test_text_tokenizer.py: encodes and decodes the corpus with
// web/text/tokenizer.mjs, in Node (`node text_parity.mjs INPUT.json TOKENIZER_MODULE_URL`, JSON on
// stdout; `bert-splits` or `accent-marks` for INPUT.json: bertSplits, accentMarks) or in a page (`runCorpus(module, input)`). Input: {families: {name: {tokenizer, config,
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

/** [code point, pieces] for each code point c that BertPreTokenizer does not keep inside the word
 * `a${c}b` (2 pieces: whitespace, 3: punctuation). */
export function bertSplits({ bertPieces }) {
  const splits = [];
  for (let point = 0; point < 0x110000; point += 1) {
    if (point >= 0xd800 && point < 0xe000) continue;  // surrogates are no characters
    const pieces = bertPieces(`a${String.fromCodePoint(point)}b`).length;
    if (pieces !== 1) splits.push([point, pieces]);
  }
  return splits;
}

/** [the code points stripAccents removes, those bertStripAccents removes] (each alone). */
export function accentMarks({ stripAccents, bertStripAccents }) {
  const removed = [[], []];
  for (let point = 0; point < 0x110000; point += 1) {
    if (point >= 0xd800 && point < 0xe000) continue;
    const character = String.fromCodePoint(point);
    if (stripAccents(character) === '') removed[0].push(point);
    if (bertStripAccents(character) === '') removed[1].push(point);
  }
  return removed;
}

if (typeof process !== 'undefined' && import.meta.url === `file://${process.argv[1]}`) {
  const { readFileSync } = await import('node:fs');
  const module = await import(process.argv[3]);
  const modes = { 'bert-splits': bertSplits, 'accent-marks': accentMarks };
  const result = modes[process.argv[2]]?.(module)
    ?? runCorpus(module, JSON.parse(readFileSync(process.argv[2], 'utf8')));
  process.stdout.write(JSON.stringify(result));
}
