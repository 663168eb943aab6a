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
//              3. the post-processor adds the special tokens and gives token_type_ids (where it
//                 gives none: 0 for the text, 1 for the pair; RobertaProcessing: 0 for both);
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
// - The Precompiled normalizer (sentencepiece's charsmap: XLM-RoBERTa, T5, mBART...) is
//   approximated by the library with NFKC; the wrapper gives it sentencepiece's own rules
//   (exactPrecompiled below), as the Python library applies them.
// - Strip trims String.trim's whitespace (U+FEFF but not U+0085); the wrapper trims Unicode's
//   White_Space, as Python.
// - Lowercase and BertNormalizer lowercase with String.toLowerCase, which writes a final sigma
//   (ς) where Python lowercases each character alone (σ); BertNormalizer's CJK split misses
//   ideographs beyond U+FFFF. The wrapper lowercases per character and splits by code point.
// - BertPreTokenizer splits at the browser's \p{P} and \s; the Python library's punctuation
//   tables are older (Unicode 8) and its whitespace is Unicode's White_Space. The wrapper splits
//   by the Python library's sets (bertPieces).
// - Unigram: the library's lattice breaks near-ties otherwise and has no byte fallback; the
//   wrapper finds a word's pieces as Rust does (bestPieces).
// - Punctuation, Digits and WhitespaceSplit split by Rust's character classes and behaviors,
//   and Split by every behavior (splitBy); added tokens are found as Rust finds them
//   (single_word, lstrip and rstrip: addedTokenSplit); the ByteFallback and ByteLevel decoders
//   read bytes as Rust's do.
// The library also reads a few tokenizer_config.json keys that the Python tokenizers library
// ignores (remove_space, do_lowercase_and_remove_accent, additional_special_tokens,
// clean_up_tokenization_spaces with a default of true): it is given only the token names, so both
// sides follow tokenizer.json and the settings above alike.

import { BertPreTokenizer, Tokenizer } from './tokenizers.mjs';

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
 * sentencepiece's normalization from its precompiled charsmap (base64), as the Python tokenizers
 * library applies it (spm_precompiled): the charsmap is a double-array trie over UTF-8 bytes whose
 * values point into a blob of NUL-ended replacements. Each grapheme under 6 UTF-8 bytes is replaced
 * whole by the replacement of its shortest prefix in the trie, if any; otherwise each of its
 * characters by its own, if any.
 */
export function exactPrecompiled(charsmap) {
  const bytes = Uint8Array.from(atob(charsmap), (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer);
  const trieSize = view.getUint32(0, true);
  const units = new Uint32Array(trieSize / 4);
  for (let i = 0; i < units.length; i += 1) units[i] = view.getUint32(4 + 4 * i, true);
  const blob = bytes.subarray(4 + trieSize);
  const offset = (unit) => (unit >>> 10) << ((unit & 0x200) >>> 6);
  const utf8 = new TextEncoder();
  const text = new TextDecoder();
  const transform = (chunk) => {
    let position = offset(units[0]);
    for (const byte of utf8.encode(chunk)) {
      if (byte === 0) break;
      position ^= byte;
      const unit = units[position];
      if ((unit & 0x800000ff) >>> 0 !== byte) return null;  // the unit's label
      position ^= offset(unit);
      if ((unit >>> 8) & 1) {  // a leaf: the value is where the replacement starts
        const start = units[position] & 0x7fffffff;
        const end = blob.indexOf(0, start);
        return text.decode(blob.subarray(start, end < 0 ? blob.length : end));
      }
    }
    return null;
  };
  const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
  const rewrite = (segment) => {
    const whole = utf8.encode(segment).length < 6 ? transform(segment) : null;
    if (whole !== null) return whole;
    let output = '';
    for (const character of segment) output += transform(character) ?? character;
    return output;
  };
  // Text repeats its graphemes: each is looked up once (a bounded cache: 3.6x faster on sentences).
  const cache = new Map();
  return (input) => {
    let output = '';
    for (const { segment } of graphemes.segment(input)) {
      let rewritten = cache.get(segment);
      if (rewritten === undefined) {
        if (cache.size >= 65536) cache.clear();
        rewritten = rewrite(segment);
        cache.set(segment, rewritten);
      }
      output += rewritten;
    }
    return output;
  };
}

// Lowercasing as the Python library does it: each character alone (no final sigma: 'ΟΔΟΣ' is
// 'οδοσ'), where String.toLowerCase looks at the context ('οδος').
const lowercase = (text) => Array.from(text, (character) => character.toLowerCase()).join('');

// BERT's CJK ideographs (those BertNormalizer puts spaces around), by code point.
const CJK = [[0x4e00, 0x9fff], [0x3400, 0x4dbf], [0x20000, 0x2a6df], [0x2a700, 0x2b73f],
  [0x2b740, 0x2b81f], [0x2b820, 0x2ceaf], [0xf900, 0xfaff], [0x2f800, 0x2fa1f]];
const spacedCJK = (text) => Array.from(text, (character) => {
  const point = character.codePointAt(0);
  return CJK.some(([low, high]) => point >= low && point <= high) ? ` ${character} ` : character;
}).join('');

// Makes the library's normalizers (and those of a Sequence) apply the Python library's rules where
// they differ: Precompiled's charsmap, Strip's whitespace, lowercasing per character, BERT's CJK
// split by code point (the library reads UTF-16 code units, so ideographs beyond U+FFFF were not
// split), accents stripped by the Python library's marks (stripAccents, bertStripAccents).
function exactNormalizers(normalizer) {
  if (!normalizer) return;
  const config = normalizer.config ?? {};
  if (config.type === 'Precompiled' && config.precompiled_charsmap) {
    normalizer.normalize = exactPrecompiled(config.precompiled_charsmap);
  } else if (config.type === 'Lowercase') {
    normalizer.normalize = lowercase;
  } else if (config.type === 'Strip') {
    // Unicode's White_Space (as Rust's char::is_whitespace), where String.trim's set lacks U+0085
    // and adds U+FEFF.
    normalizer.normalize = (text) => {
      if (config.strip_left) text = text.replace(/^\p{White_Space}+/u, '');
      if (config.strip_right) text = text.replace(/\p{White_Space}+$/u, '');
      return text;
    };
  } else if (config.type === 'StripAccents') {
    normalizer.normalize = stripAccents;
  } else if (config.type === 'BertNormalizer') {
    normalizer.normalize = (text) => {  // the library's order of steps, with the ones above
      if (config.clean_text) text = normalizer.clean_text(text);
      if (config.handle_chinese_chars) text = spacedCJK(text);
      if (config.lowercase) {
        text = lowercase(text);
        if (config.strip_accents !== false) text = bertStripAccents(text);
      } else if (config.strip_accents) {
        text = bertStripAccents(text);
      }
      return text;
    };
  }
  for (const step of normalizer.normalizers ?? []) exactNormalizers(step);
}

// Punctuation as the Python library's BertPreTokenizer sees it: ASCII punctuation and Unicode's P
// categories by its own tables, which are older than Unicode 9. NEWER_PUNCTUATION: the code points
// of \p{P} (Unicode 17, as Node 20 knows it) those tables do not call punctuation;
// OLDER_PUNCTUATION: two they call punctuation that Unicode has since moved out of P.
// tests/test_text_tokenizer.py checks the rule against the Python library on every code point.
const NEWER_PUNCTUATION = [
  [0x61D, 0x61D], [0x9FD, 0x9FD], [0xA76, 0xA76], [0xC77, 0xC77], [0xC84, 0xC84],
  [0x1B4E, 0x1B4F], [0x1B7D, 0x1B7F], [0x2E43, 0x2E4F], [0x2E52, 0x2E5D], [0x10D6E, 0x10D6E],
  [0x10EAD, 0x10EAD], [0x10ED0, 0x10ED0], [0x10F55, 0x10F59], [0x10F86, 0x10F89],
  [0x113D4, 0x113D5], [0x113D7, 0x113D8], [0x1144B, 0x1144F], [0x1145A, 0x1145B],
  [0x1145D, 0x1145D], [0x11660, 0x1166C], [0x116B9, 0x116B9], [0x1183B, 0x1183B],
  [0x11944, 0x11946], [0x119E2, 0x119E2], [0x11A3F, 0x11A46], [0x11A9A, 0x11A9C],
  [0x11A9E, 0x11AA2], [0x11B00, 0x11B09], [0x11BE1, 0x11BE1], [0x11C41, 0x11C45],
  [0x11C70, 0x11C71], [0x11EF7, 0x11EF8], [0x11F43, 0x11F4F], [0x11FFF, 0x11FFF],
  [0x12FF1, 0x12FF2], [0x16D6D, 0x16D6F], [0x16E97, 0x16E9A], [0x16FE2, 0x16FE2],
  [0x1E5FF, 0x1E5FF], [0x1E95E, 0x1E95F]];
const OLDER_PUNCTUATION = [[0x166D, 0x166D], [0x111C9, 0x111C9]];
const charClass = (ranges) => ranges.map(([low, high]) => (low === high
  ? `\\u{${low.toString(16)}}` : `\\u{${low.toString(16)}}-\\u{${high.toString(16)}}`)).join('');
const NEWER = charClass(NEWER_PUNCTUATION);
const PUNCTUATION = '\\p{P}\\u0021-\\u002F\\u003A-\\u0040\\u005B-\\u0060\\u007B-\\u007E'
  + charClass(OLDER_PUNCTUATION);
// Words split at Unicode's White_Space (Rust's char::is_whitespace, where \s differs at U+0085
// and U+FEFF) and each punctuation character alone, as the Python library's BertPreTokenizer.
const BERT_PIECES = new RegExp(`(?:(?![${PUNCTUATION}])[^\\p{White_Space}]|[${NEWER}])+`
  + `|(?![${NEWER}])[${PUNCTUATION}]`, 'gu');

/** The pieces BertPreTokenizer splits `text` into, as the Python library does. */
export const bertPieces = (text) => text.match(BERT_PIECES) ?? [];

// Marks as the Python library's accent stripping sees them, by its Unicode tables, which are
// older than the browser's: StripAccents drops the M categories (Rust's is_combining_mark),
// BertNormalizer's strip_accents the nonspacing marks (Mn) after NFD. NEWER_*: the browser's
// marks those tables do not know (U+0ECE LAO YAMAKKAN...); OLDER_*: marks there that Unicode
// has since moved to another category. tests/test_text_tokenizer.py checks both on every code
// point against the Python library.
const NEWER_MARKS = [
  [0x7FD, 0x7FD], [0x897, 0x89F], [0x8CA, 0x8D3], [0x9FE, 0x9FE], [0xAFA, 0xAFF], [0xB55, 0xB55],
  [0xC04, 0xC04], [0xC3C, 0xC3C], [0xCF3, 0xCF3], [0xD00, 0xD00], [0xD3B, 0xD3C], [0xD81, 0xD81],
  [0xEBA, 0xEBA], [0xECE, 0xECE], [0x1715, 0x1715], [0x180F, 0x180F], [0x1ABF, 0x1ADD],
  [0x1AE0, 0x1AEB], [0x1CF7, 0x1CF7], [0x1DF6, 0x1DFA], [0xA82C, 0xA82C], [0xA8FF, 0xA8FF],
  [0x10D24, 0x10D27], [0x10D69, 0x10D6D], [0x10EAB, 0x10EAC], [0x10EFA, 0x10EFF],
  [0x10F46, 0x10F50], [0x10F82, 0x10F85], [0x11070, 0x11070], [0x11073, 0x11074],
  [0x110C2, 0x110C2], [0x11145, 0x11146], [0x111C9, 0x111C9], [0x111CE, 0x111CF],
  [0x11241, 0x11241], [0x1133B, 0x1133B], [0x113B8, 0x113C0], [0x113C2, 0x113C2],
  [0x113C5, 0x113C5], [0x113C7, 0x113CA], [0x113CC, 0x113D0], [0x113D2, 0x113D2],
  [0x113E1, 0x113E2], [0x1145E, 0x1145E], [0x1182C, 0x1183A], [0x11930, 0x11935],
  [0x11937, 0x11938], [0x1193B, 0x1193E], [0x11940, 0x11940], [0x11942, 0x11943],
  [0x119D1, 0x119D7], [0x119DA, 0x119E0], [0x119E4, 0x119E4], [0x11A01, 0x11A0A],
  [0x11A33, 0x11A39], [0x11A3B, 0x11A3E], [0x11A47, 0x11A47], [0x11A51, 0x11A5B],
  [0x11A8A, 0x11A99], [0x11B60, 0x11B67], [0x11D31, 0x11D36], [0x11D3A, 0x11D3A],
  [0x11D3C, 0x11D3D], [0x11D3F, 0x11D45], [0x11D47, 0x11D47], [0x11D8A, 0x11D8E],
  [0x11D90, 0x11D91], [0x11D93, 0x11D97], [0x11EF3, 0x11EF6], [0x11F00, 0x11F01],
  [0x11F03, 0x11F03], [0x11F34, 0x11F3A], [0x11F3E, 0x11F42], [0x11F5A, 0x11F5A],
  [0x13440, 0x13440], [0x13447, 0x13455], [0x1611E, 0x1612F], [0x16F4F, 0x16F4F],
  [0x16F7F, 0x16F87], [0x16FE4, 0x16FE4], [0x16FF0, 0x16FF1], [0x1CF00, 0x1CF2D],
  [0x1CF30, 0x1CF46], [0x1E08F, 0x1E08F], [0x1E130, 0x1E136], [0x1E2AE, 0x1E2AE],
  [0x1E2EC, 0x1E2EF], [0x1E4EC, 0x1E4EF], [0x1E5EE, 0x1E5EF], [0x1E6E3, 0x1E6E3],
  [0x1E6E6, 0x1E6E6], [0x1E6EE, 0x1E6EF], [0x1E6F5, 0x1E6F5]];
const OLDER_MARKS = [
  [0x1CF2, 0x1CF3]];
const NEWER_NONSPACING = [
  [0x7FD, 0x7FD], [0x897, 0x89F], [0x8CA, 0x8E1], [0x9FE, 0x9FE], [0xAFA, 0xAFF], [0xB55, 0xB55],
  [0xC04, 0xC04], [0xC3C, 0xC3C], [0xD00, 0xD00], [0xD3B, 0xD3C], [0xD81, 0xD81], [0xEBA, 0xEBA],
  [0xECE, 0xECE], [0x180F, 0x180F], [0x1885, 0x1886], [0x1ABF, 0x1ADD], [0x1AE0, 0x1AEB],
  [0x1DF6, 0x1DFB], [0xA82C, 0xA82C], [0xA8C5, 0xA8C5], [0xA8FF, 0xA8FF], [0xA9BD, 0xA9BD],
  [0x10D24, 0x10D27], [0x10D69, 0x10D6D], [0x10EAB, 0x10EAC], [0x10EFA, 0x10EFF],
  [0x10F46, 0x10F50], [0x10F82, 0x10F85], [0x11070, 0x11070], [0x11073, 0x11074],
  [0x110C2, 0x110C2], [0x111C9, 0x111C9], [0x111CF, 0x111CF], [0x1123E, 0x1123E],
  [0x11241, 0x11241], [0x1133B, 0x1133B], [0x113BB, 0x113C0], [0x113CE, 0x113CE],
  [0x113D0, 0x113D0], [0x113D2, 0x113D2], [0x113E1, 0x113E2], [0x11438, 0x1143F],
  [0x11442, 0x11444], [0x11446, 0x11446], [0x1145E, 0x1145E], [0x1182F, 0x11837],
  [0x11839, 0x1183A], [0x1193B, 0x1193C], [0x1193E, 0x1193E], [0x11943, 0x11943],
  [0x119D4, 0x119D7], [0x119DA, 0x119DB], [0x119E0, 0x119E0], [0x11A01, 0x11A0A],
  [0x11A33, 0x11A38], [0x11A3B, 0x11A3E], [0x11A47, 0x11A47], [0x11A51, 0x11A56],
  [0x11A59, 0x11A5B], [0x11A8A, 0x11A96], [0x11A98, 0x11A99], [0x11B60, 0x11B60],
  [0x11B62, 0x11B64], [0x11B66, 0x11B66], [0x11C30, 0x11C36], [0x11C38, 0x11C3D],
  [0x11C3F, 0x11C3F], [0x11C92, 0x11CA7], [0x11CAA, 0x11CB0], [0x11CB2, 0x11CB3],
  [0x11CB5, 0x11CB6], [0x11D31, 0x11D36], [0x11D3A, 0x11D3A], [0x11D3C, 0x11D3D],
  [0x11D3F, 0x11D45], [0x11D47, 0x11D47], [0x11D90, 0x11D91], [0x11D95, 0x11D95],
  [0x11D97, 0x11D97], [0x11EF3, 0x11EF4], [0x11F00, 0x11F01], [0x11F36, 0x11F3A],
  [0x11F40, 0x11F40], [0x11F42, 0x11F42], [0x11F5A, 0x11F5A], [0x13440, 0x13440],
  [0x13447, 0x13455], [0x1611E, 0x16120], [0x16129, 0x16129], [0x1612D, 0x1612F],
  [0x16F4F, 0x16F4F], [0x16FE4, 0x16FE4], [0x1CF00, 0x1CF2D], [0x1CF30, 0x1CF46],
  [0x1E000, 0x1E006], [0x1E008, 0x1E018], [0x1E01B, 0x1E021], [0x1E023, 0x1E024],
  [0x1E026, 0x1E02A], [0x1E08F, 0x1E08F], [0x1E130, 0x1E136], [0x1E2AE, 0x1E2AE],
  [0x1E2EC, 0x1E2EF], [0x1E4EC, 0x1E4EF], [0x1E5EE, 0x1E5EF], [0x1E6E3, 0x1E6E3],
  [0x1E6E6, 0x1E6E6], [0x1E6EE, 0x1E6EF], [0x1E6F5, 0x1E6F5], [0x1E944, 0x1E94A]];
const OLDER_NONSPACING = [
  [0x1734, 0x1734], [0x1171E, 0x1171E]];
const marks = (category, newer, older) => new RegExp(
  `(?![${charClass(newer)}])[\\p{${category}}${charClass(older)}]`, 'gu');
const MARK = marks('M', NEWER_MARKS, OLDER_MARKS);
const NONSPACING_MARK = marks('Mn', NEWER_NONSPACING, OLDER_NONSPACING);

/** `text` without its marks, as the Python library's StripAccents normalizer leaves it. */
export const stripAccents = (text) => text.replace(MARK, '');

/** `text` as BertNormalizer's strip_accents leaves it in the Python library. */
export const bertStripAccents = (text) => text.normalize('NFD').replace(NONSPACING_MARK, '');

// One character of a class, as a regular expression's source: the Python library's punctuation
// (Rust's is_punctuation, as BertPreTokenizer's above), its digits (char::is_numeric: any N
// category), its whitespace (char::is_whitespace: White_Space) and its word characters (the
// Rust regex crate's Unicode \w; JavaScript's \w is ASCII's).
const PUNCTUATION_CHAR = `(?:(?![${NEWER}])[${PUNCTUATION}])`;
const NUMERIC_CHAR = '\\p{N}';
const WHITESPACE_CHAR = '\\p{White_Space}';
const WORD_CHARS = '\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}';
// Rust's Whitespace pre-tokenizer: its regex \w+|[^\w\s]+, with Unicode's classes.
const WHITESPACE_WORDS = new RegExp(`[${WORD_CHARS}]+|[^${WORD_CHARS}\\p{White_Space}]+`, 'gu');

// Rust's NormalizedString::split: `text` cut at each match of `pattern` (a global regex: one
// character of a class splits as Rust's char predicates do, each character a match), the
// matches (with `invert`, the rest) placed by the SplitDelimiterBehavior: removed, isolated,
// contiguous (matches in a row as one piece), merged with the previous or the next piece.
const BEHAVIORS = ['removed', 'isolated', 'contiguous', 'mergedwithprevious', 'mergedwithnext'];

function splitBy(pattern, behavior, invert = false) {
  const mode = String(behavior).toLowerCase();
  if (!BEHAVIORS.includes(mode)) {
    throw new Error(`tokenizer.json: unknown split behavior '${behavior}'`);
  }
  return (text) => {
    const parts = [];  // [piece, is a delimiter]
    let last = 0;
    for (const match of text.matchAll(pattern)) {
      if (match[0].length === 0) continue;
      if (match.index > last) parts.push([text.slice(last, match.index), invert]);
      parts.push([match[0], !invert]);
      last = match.index + match[0].length;
    }
    if (last < text.length) parts.push([text.slice(last), invert]);
    if (mode === 'removed') return parts.filter(([, delimiter]) => !delimiter).map(([p]) => p);
    if (mode === 'isolated') return parts.map(([piece]) => piece);
    const next = mode === 'mergedwithnext';
    const pieces = [];
    let previous = false;
    for (const [piece, delimiter] of next ? parts.reverse() : parts) {
      const joins = pieces.length > 0 && (mode === 'contiguous' ? delimiter === previous
        : delimiter && !previous);
      if (joins) pieces[pieces.length - 1] = next ? piece + pieces.at(-1) : pieces.at(-1) + piece;
      else pieces.push(piece);
      previous = delimiter;
    }
    return next ? pieces.reverse() : pieces;
  };
}

// A Unigram model's best segmentation of one word as the Python library finds it (Rust's
// encode_optimized): the best score ending at each position, extended by each vocabulary piece
// starting there (by a strict >, the first found kept), an unknown character scored as the
// library does. The library's lattice compares each path plus the next piece's score instead,
// and that sum can round two paths apart by 1e-15 to a tie, which it breaks otherwise.
// Then, as Rust's Unigram::tokenize: unknown characters in a row are one piece (fuse_unk), and
// with byte_fallback an unknown piece is its UTF-8 byte pieces (<0xE2>...) when the vocabulary
// has them all (the library has no byte fallback for Unigram and gave <unk>).
function bestPieces(model, text) {
  const chars = Array.from(text);
  const best = [{ score: 0, start: -1, unknown: false }];
  for (let start = 0; start < chars.length; start += 1) {
    if (!best[start]) continue;
    const here = best[start].score;
    let single = false;
    for (const piece of model.trie.common_prefix_search(chars, start)) {
      const length = Array.from(piece).length;
      const score = model.scores[model.tokens_to_ids.get(piece)] + here;
      if (!best[start + length] || score > best[start + length].score) {
        best[start + length] = { score, start, unknown: false };
      }
      single ||= length === 1;
    }
    if (!single && (!best[start + 1] || model.unk_score + here > best[start + 1].score)) {
      best[start + 1] = { score: model.unk_score + here, start, unknown: true };
    }
  }
  const path = [];
  for (let end = chars.length; end > 0; end = best[end].start) {
    path.push({ piece: chars.slice(best[end].start, end).join(''), unknown: best[end].unknown });
  }
  const pieces = [];
  let unknown = '';
  for (const step of path.reverse()) {
    if (step.unknown) {
      unknown += step.piece;
      continue;
    }
    if (unknown) pieces.push(...unknownPieces(model, unknown));
    unknown = '';
    pieces.push(step.piece);
  }
  if (unknown) pieces.push(...unknownPieces(model, unknown));
  return pieces;
}

const UTF8 = new TextEncoder();

// An unknown piece's byte pieces where the model falls back to bytes and has them all; else the
// piece (which the library's lookup makes <unk>).
function unknownPieces(model, piece) {
  if (!model.config.byte_fallback) return [piece];
  const bytes = Array.from(UTF8.encode(piece),
    (byte) => `<0x${byte.toString(16).toUpperCase().padStart(2, '0')}>`);
  return bytes.every((name) => model.tokens_to_ids.has(name)) ? bytes : [piece];
}

// `text` cut before each `mark` after its start (Rust's MergedWithNext: "ab▁c▁▁d" -> "ab",
// "▁c", "▁", "▁d").
function cutBefore(text, mark) {
  const pieces = [];
  let start = 0;
  for (let at = text.indexOf(mark, 1); at !== -1; at = text.indexOf(mark, at + mark.length)) {
    pieces.push(text.slice(start, at));
    start = at;
  }
  pieces.push(text.slice(start));
  return pieces.filter(Boolean);
}

// Makes BertPreTokenizer split as the Python library does, and Metaspace split its text into
// words as the Python library's does unless its `split` is false (the library ignores `split`
// and gives the model the whole text: a Unigram lattice over it sums scores in another order,
// and near-tied segmentations came out otherwise). `config`: the step's tokenizer.json record;
// the steps of a Sequence too.
function exactPreTokenizers(preTokenizer, config) {
  if (!preTokenizer) return;
  if (preTokenizer instanceof BertPreTokenizer) preTokenizer.pre_tokenize_text = bertPieces;
  // Rust's own splits where the library differs: Punctuation by its behavior (the library keeps
  // runs together whatever it says; Rust's default is each mark alone), Digits by any numeric
  // character (the library's \d is ASCII's), WhitespaceSplit at Unicode's White_Space (\S
  // differs at U+0085 and U+FEFF), Whitespace by Unicode's word characters (its \w is ASCII's).
  // Split: the library places matches only as isolated or removed (and keeps only the matches
  // when inverted), whatever its behavior says.
  const characters = (source) => new RegExp(source, 'gu');
  const split = {
    Punctuation: () => splitBy(characters(PUNCTUATION_CHAR), config.behavior ?? 'Isolated'),
    Digits: () => splitBy(characters(NUMERIC_CHAR), config.individual_digits ? 'Isolated'
      : 'Contiguous'),
    WhitespaceSplit: () => splitBy(characters(WHITESPACE_CHAR), 'Removed'),
    Whitespace: () => (text) => text.match(WHITESPACE_WORDS) ?? [],
    Split: () => splitBy(preTokenizer.pattern, config.behavior, config.invert === true),
  }[config?.type];
  if (split) preTokenizer.pre_tokenize_text = split();
  if (config?.type === 'Metaspace' && config.split !== false) {
    const whole = preTokenizer.pre_tokenize_text.bind(preTokenizer);
    const mark = config.replacement ?? '\u2581';
    preTokenizer.pre_tokenize_text = (text, options) => whole(text, options)
      .flatMap((piece) => cutBefore(piece, mark));
  }
  (preTokenizer.tokenizers ?? []).forEach((step, index) => exactPreTokenizers(step,
    config?.pretokenizers?.[index]));
}

// Rust's ByteFallback decoder: a run of byte pieces (<0xE5>...) is its text when it is valid UTF-8
// and one U+FFFD per byte when it is not, where the library's TextDecoder replaced only the
// invalid parts (and dropped a leading byte order mark). The steps of a Sequence too.
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const BYTE_PIECE = /^<0x([0-9A-Fa-f]{2})>$/;

function byteFallbackChain(tokens) {
  const output = [];
  let bytes = [];
  const flush = () => {
    if (bytes.length === 0) return;
    try {
      output.push(STRICT_UTF8.decode(Uint8Array.from(bytes)));
    } catch {
      output.push(...bytes.map(() => '\uFFFD'));
    }
    bytes = [];
  };
  for (const token of tokens) {
    const byte = BYTE_PIECE.exec(token);
    if (byte) {
      bytes.push(parseInt(byte[1], 16));
    } else {
      flush();
      output.push(token);
    }
  }
  flush();
  return output;
}

// Rust's ByteLevel decoder: each token's characters read back as the bytes they stand for, or a
// token with a character outside that alphabet (an added token such as "<|tool|>" or "hello
// world") as its UTF-8; all the bytes decoded as one text. The library passes added tokens
// through as they are, so one made of the alphabet's characters ("Zürich") kept its text where
// Rust reads ü as the byte 0xFC (and gives U+FFFD).
const LOSSY_UTF8 = new TextDecoder('utf-8', { ignoreBOM: true });

function byteLevelChain(decoder) {
  return (tokens) => {
    const bytes = [];
    for (const token of tokens) {
      const mapped = Array.from(token, (character) => decoder.byte_decoder[character]);
      if (mapped.every((byte) => byte !== undefined)) bytes.push(...mapped.map(Number));
      else bytes.push(...UTF8.encode(token));
    }
    return [LOSSY_UTF8.decode(Uint8Array.from(bytes))];
  };
}

function exactDecoders(decoder, config) {
  if (!decoder) return;
  if (config?.type === 'ByteFallback') decoder.decode_chain = byteFallbackChain;
  if (config?.type === 'ByteLevel') decoder.decode_chain = byteLevelChain(decoder);
  (decoder.decoders ?? []).forEach((step, index) => exactDecoders(step, config?.decoders?.[index]));
}

// Added tokens found in a text as Rust's AddedVocabulary::find_matches finds them:
// leftmost-longest; one marked single_word only where no word character (Rust's Unicode \w)
// touches it (a discarded match is passed over whole, as Rust's find_iter moves past it); lstrip
// and rstrip take the White_Space beside the token into it (Rust's \s). The library ignores
// single_word and trims its neighbours with String.trimEnd/trimStart (U+FEFF but not U+0085).
const WORD_BEFORE = new RegExp(`[${WORD_CHARS}]$`, 'u');
const WORD_AFTER = new RegExp(`^[${WORD_CHARS}]`, 'u');
const WHITE = /^\p{White_Space}$/u;  // every White_Space character is one UTF-16 unit

function addedTokenSplit(splitter, addedTokens) {
  return (text) => {
    const pieces = [];
    let start = 0;
    let at = 0;
    while (at < text.length) {
      let node = splitter.trie;
      let match = null;
      for (let j = at; j < text.length && (node = node[text[j]]); j += 1) {
        if (node.end) match = node.end;
      }
      if (match === null) {
        at += 1;
        continue;
      }
      const token = addedTokens.get(match);
      let [from, to] = [at, at + match.length];
      if (token.single_word
          && (WORD_BEFORE.test(text.slice(0, from)) || WORD_AFTER.test(text.slice(to)))) {
        at = to;
        continue;
      }
      if (token.lstrip) while (from > start && WHITE.test(text[from - 1])) from -= 1;
      if (token.rstrip) while (to < text.length && WHITE.test(text[to])) to += 1;
      if (from > start) pieces.push(text.slice(start, from));
      pieces.push(match);
      start = at = to;
    }
    if (start < text.length) pieces.push(text.slice(start));
    return pieces;
  };
}

// Metaspace's prepend_scheme "first" prepends the mark only to the piece that starts the text
// (Rust: the piece's original offset is 0). The library prepends to each piece of the first
// section between special tokens, so also to the pieces after a normalized added token inside
// it. Here the normalized split marks whether its first piece is text, and only the
// pre-tokenizer's first call after it (that piece's) keeps the library's section_index.
function prependAtTextStartOnly(library, preTokenizer, config) {
  const steps = [];
  const find = (step, json) => {
    if (!step) return;
    if (json?.type === 'Metaspace' && json.prepend_scheme === 'first') steps.push(step);
    (step.tokenizers ?? []).forEach((inner, index) => find(inner, json?.pretokenizers?.[index]));
  };
  find(preTokenizer, config);
  if (steps.length === 0) return;
  let atStart = false;
  const splitter = library.splitter_normalized;
  const split = splitter.split.bind(splitter);
  splitter.split = (text) => {
    const pieces = split(text);
    atStart = pieces.length > 0 && pieces[0] !== '' && !library.added_tokens_map.has(pieces[0]);
    return pieces;
  };
  for (const step of steps) {
    const own = step.pre_tokenize_text.bind(step);
    step.pre_tokenize_text = (text, options) => {
      const first = atStart;
      atStart = false;
      return own(text, first ? options : { ...options, section_index: -1 });
    };
  }
}

// The steps the Python library has and @huggingface/tokenizers 0.2.0 lacks ("Unknown Normalizer
// type"), written as steps it has that do the same: sentencepiece's Nmt normalizer (tokenizers'
// SentencePieceUnigramTokenizer writes it) drops ASCII control characters and maps other
// whitespace to a space (tests/data/text_corpus.json has every code point it changes).
const NMT_DROPPED = '[\\u0001-\\u0008\\u000B\\u000E-\\u001F\\u007F\\u008F\\u009F]';
const NMT_SPACES = '[\\u0009\\u000A\\u000C\\u000D\\u1680\\u200B-\\u200F\\u2028\\u2029'
  + '\\u2581\\uFEFF\\uFFFD]';
const LIBRARY_STEPS = {
  Nmt: () => ({ type: 'Sequence', normalizers: [
    { type: 'Replace', pattern: { Regex: NMT_DROPPED }, content: '' },
    { type: 'Replace', pattern: { Regex: NMT_SPACES }, content: ' ' }] }),
};

// A normalizer (and those of a Sequence) with those steps rewritten: a copy where any is found.
function libraryNormalizer(step) {
  if (!step) return step ?? null;
  if (LIBRARY_STEPS[step.type]) return LIBRARY_STEPS[step.type](step);
  return step.normalizers ? { ...step, normalizers: step.normalizers.map(libraryNormalizer) }
    : step;
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
  const library = new Tokenizer(
    { ...tokenizerJson, normalizer: libraryNormalizer(tokenizerJson.normalizer) }, libraryConfig);
  exactNormalizers(library.normalizer);
  exactPreTokenizers(library.pre_tokenizer, tokenizerJson.pre_tokenizer);
  exactDecoders(library.decoder, tokenizerJson.decoder);
  if (library.added_tokens.some((token) => token.single_word || token.lstrip || token.rstrip)) {
    // Each token's flags as read (by its text and its normalized text), before the library's
    // own trimming of the neighbours is turned off: the split has taken the spaces.
    const flags = new Map(Array.from(library.added_tokens_map, ([text, token]) => [text,
      { ...token }]));
    for (const splitter of [library.splitter_unnormalized, library.splitter_normalized]) {
      splitter.split = addedTokenSplit(splitter, flags);
    }
    for (const token of library.added_tokens) token.lstrip = token.rstrip = false;
  }
  prependAtTextStartOnly(library, library.pre_tokenizer, tokenizerJson.pre_tokenizer);
  if (tokenizerJson.model?.type === 'Unigram') {
    library.model.tokenize = (word) => bestPieces(library.model, word);
  }
  const padId = (settings.pad_token !== null ? library.token_to_id(settings.pad_token) : undefined)
    ?? tokenizerJson.padding?.pad_id ?? 0;
  // A WordLevel model (which the library loads as its "Legacy" model) names its unknown token in
  // tokenizer.json, where the library looks for it in tokenizer_config.json.
  const unkId = library.model.unk_token_id ?? library.token_to_id(tokenizerJson.model?.unk_token);
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
