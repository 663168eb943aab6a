// A text bundle's tokenizer in the browser (and Node): text to model inputs and ids back to text,
// over @huggingface/tokenizers, whose ES module the bundle ships beside this one
// (text/tokenizers.mjs; no CDN).
//
// The rules are those of bundler/text/tokenizer.py, the Python side, written in full in its
// docstring; in short:
//   settings   tokenizer_config.json, special_tokens_map.json filling the keys it lacks:
//              model_max_length (absent or >= 1e9: no cap), pad_token (else tokenizer.json's
//              padding.pad_id, else 0), padding_side and truncation_side ("right" default),
//              add_special_tokens (default true), clean_up_tokenization_spaces (default false);
//              tokenizer.json's "truncation" and "padding" sections are ignored.
//   encode     1. each text and pair tokenized alone, without special tokens;
//              2. limit = min(maxLength, model_max_length); budget = limit - the special tokens
//                 the post-processor adds (a limit under them is an error); "longest_first"
//                 truncation (keptLengths below), cut on the truncation side;
//              3. the post-processor adds the special tokens and gives token_type_ids (0 where
//                 it gives none);
//              4. rows padded to the longest on the padding side with the pad id; attention_mask
//                 1/0; token_type_ids 0 on padding; BigInt64Array data, dims [batch, longest].
//   decode     the library's decoder, special tokens skipped unless told not to, then the
//              clean-up when the setting is on; no ids decode to "".
//
// Where @huggingface/tokenizers 0.2.0 differs from the Python library, the wrapper makes it agree
// when it can (docs/explanation/tokenization.md lists what is checked and what differs):
// - RobertaProcessing gives token type 0 to both texts of a pair in Python (RoBERTa has one token
//   type); the library gives the second text 1s, so the wrapper sets them to 0.
// - The ByteLevel post-processor (GPT-2) leaves a pair's second text out of the library's
//   encoding, and without a post-processor it gives no token types; the wrapper joins the pair
//   and gives its tokens type 1, as Python does.
// The library also reads a few tokenizer_config.json keys that the Python tokenizers library
// ignores (remove_space, do_lowercase_and_remove_accent, additional_special_tokens,
// clean_up_tokenization_spaces with a default of true): it is given only the token names, so both
// sides follow tokenizer.json and the settings above alike.

import { Tokenizer } from './tokenizers.mjs';

const NO_CAP = 1e9;
const SIDES = ['right', 'left'];
// The config keys @huggingface/tokenizers may read that mean the same on both sides.
const LIBRARY_KEYS = ['bos_token', 'eos_token', 'pad_token', 'unk_token', 'target_lang'];

const tokenText = (value) => {
  const text = value !== null && typeof value === 'object' ? value.content : value;
  return typeof text === 'string' ? text : null;
};

/** The settings of the module's header, from tokenizer_config.json and special_tokens_map.json. */
export function readSettings(config = {}, specialTokens = {}) {
  const merged = { ...(specialTokens ?? {}), ...(config ?? {}) };
  const cap = merged.model_max_length;
  const sides = {};
  for (const key of ['padding_side', 'truncation_side']) {
    const side = merged[key] || 'right';
    if (!SIDES.includes(side)) {
      throw new Error(`tokenizer_config.json: ${key} is '${side}'; it must be 'right' or 'left'`);
    }
    sides[key] = side;
  }
  return {
    model_max_length: typeof cap === 'number' && cap > 0 && cap < NO_CAP ? Math.trunc(cap) : null,
    pad_token: tokenText(merged.pad_token),
    add_special_tokens: merged.add_special_tokens !== false,
    clean_up_tokenization_spaces: merged.clean_up_tokenization_spaces === true,
    ...sides,
  };
}

/** How many tokens a text (and its pair, or null) keep within `budget`: the tokenizers library's
 * longest_first truncation, step 2 of the rules. */
export function keptLengths(first, second, budget) {
  if (second === null || second === undefined) return [Math.min(first, budget), null];
  if (first + second <= budget) return [first, second];
  const [short, long] = first <= second ? [first, second] : [second, first];
  let longKept = short > budget ? short : Math.max(short, budget - short);
  let shortKept = short;
  if (shortKept + longKept > budget) {
    shortKept = Math.floor(budget / 2);
    longKept = shortKept + (budget % 2);
  }
  return first > second ? [longKept, shortKept] : [shortKept, longKept];
}

/**
 * A tokenizer from the parsed tokenizer.json and tokenizer_config.json (and, optionally,
 * special_tokens_map.json): { encode(texts, {pairs, maxLength, addSpecialTokens}) ->
 * {input_ids, attention_mask, token_type_ids, dims}, decode(ids, {skipSpecialTokens}) -> string,
 * settings, padId }.
 */
export function loadTokenizer(tokenizerJson, tokenizerConfig = {}, specialTokensMap = {}) {
  const settings = readSettings(tokenizerConfig, specialTokensMap);
  const libraryConfig = {};
  for (const key of LIBRARY_KEYS) {
    const value = key === 'target_lang' ? tokenizerConfig?.[key]
      : tokenText(tokenizerConfig?.[key] ?? specialTokensMap?.[key]);
    if (value !== null && value !== undefined) libraryConfig[key] = value;
  }
  const library = new Tokenizer(tokenizerJson, libraryConfig);
  const padId = (settings.pad_token !== null ? library.token_to_id(settings.pad_token) : undefined)
    ?? tokenizerJson.padding?.pad_id ?? 0;
  const unkId = library.model.unk_token_id;
  const processor = tokenizerJson.post_processor ?? {};
  const oneTokenType = [processor, ...(processor.processors ?? [])]
    .some((step) => step?.type === 'RobertaProcessing');
  // What the post-processor adds to an empty text (or pair): the number of special tokens.
  const specialCount = (pair) => (library.post_processor
    ? library.post_processor([], pair ? [] : null, true).tokens.length : 0);
  // As the library's own encode looks tokens up: an added token may come out in its normalized
  // form (added_tokens_map knows both), which the vocabulary does not hold.
  const toId = (token) => library.added_tokens_map?.get(token)?.id ?? library.token_to_id(token)
    ?? unkId;

  const cut = (tokens, keep) => {
    if (keep === null || keep >= tokens.length) return tokens;
    return settings.truncation_side === 'left' ? tokens.slice(tokens.length - keep)
      : tokens.slice(0, keep);
  };

  function budgetFor(maxLength, pair, addSpecial) {
    const caps = [maxLength, settings.model_max_length].filter((cap) => cap !== null && cap !== undefined);
    if (caps.length === 0) return null;
    const limit = Math.min(...caps);
    const specials = addSpecial ? specialCount(pair) : 0;
    if (limit < specials) {
      throw new Error(`max_length ${limit} leaves no room for text: the tokenizer adds ${specials}`
        + ` special tokens to each ${pair ? 'pair' : 'text'}`);
    }
    return limit - specials;
  }

  function encodeRow(text, pair, budget, addSpecial) {
    let first = library.tokenize(text, { add_special_tokens: false });
    let second = pair === null ? null : library.tokenize(pair, { add_special_tokens: false });
    if (budget !== null) {
      const [keep, keepPair] = keptLengths(first.length, second === null ? null : second.length,
        budget);
      first = cut(first, keep);
      if (second !== null) second = cut(second, keepPair);
    }
    // Python's rule where the library gives no token types (no post-processor, ByteLevel, which
    // also leaves the pair unjoined): the text's tokens 0, the pair's 1; RobertaProcessing: 0.
    const joined = library.post_processor ? library.post_processor(first, second, addSpecial)
      : { tokens: first, tokens_pair: second };
    let { tokens, token_type_ids: types } = joined;
    if (types === undefined) {
      const tail = joined.tokens_pair ?? [];
      types = [...new Array(tokens.length).fill(0), ...new Array(tail.length).fill(1)];
      tokens = [...tokens, ...tail];
    }
    if (oneTokenType) types = new Array(tokens.length).fill(0);
    return { ids: tokens.map(toId), types };
  }

  function encode(texts, { pairs = null, maxLength = null, addSpecialTokens = null } = {}) {
    if (!Array.isArray(texts)) throw new TypeError('encode takes an array of texts; wrap one text in an array');
    if (pairs !== null && pairs.length !== texts.length) {
      throw new Error(`${texts.length} texts but ${pairs.length} pairs: give one pair per text`);
    }
    const addSpecial = addSpecialTokens ?? settings.add_special_tokens;
    const budget = budgetFor(maxLength, pairs !== null, addSpecial);
    const rows = texts.map((text, i) => encodeRow(text, pairs === null ? null : pairs[i], budget,
      addSpecial));
    const longest = rows.reduce((most, row) => Math.max(most, row.ids.length), 0);
    const size = texts.length * longest;
    const input_ids = new BigInt64Array(size).fill(BigInt(padId));
    const attention_mask = new BigInt64Array(size);
    const token_type_ids = new BigInt64Array(size);
    rows.forEach((row, r) => {
      const start = r * longest + (settings.padding_side === 'left' ? longest - row.ids.length : 0);
      row.ids.forEach((id, j) => {
        input_ids[start + j] = BigInt(id);
        attention_mask[start + j] = 1n;
        token_type_ids[start + j] = BigInt(row.types[j]);
      });
    });
    return { input_ids, attention_mask, token_type_ids, dims: [texts.length, longest] };
  }

  function decode(ids, { skipSpecialTokens = true } = {}) {
    const list = Array.from(ids, Number);
    if (list.length === 0) return '';  // the library throws on no ids
    return library.decode(list, {
      skip_special_tokens: skipSpecialTokens,
      clean_up_tokenization_spaces: settings.clean_up_tokenization_spaces,
    });
  }

  return { encode, decode, settings, padId, library };
}

/** The arrays of an encoded batch that a model with these input names takes, by name. */
export function toFeeds(batch, inputNames) {
  const feeds = {};
  for (const name of inputNames) {
    if (!['input_ids', 'attention_mask', 'token_type_ids'].includes(name)) {
      throw new Error(`the model's input '${name}' is not one a tokenizer gives`
        + ' (input_ids, attention_mask, token_type_ids)');
    }
    feeds[name] = batch[name];
  }
  return feeds;
}
