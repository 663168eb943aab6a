// token-classification's answer: a text's tokens placed in it and its entities grouped from the
// per-token labels. The spec is bundler/text/entities.py (its docstring has the rules in full);
// this is its twin, over the tokenizer's decoder only (@huggingface/tokenizers 0.2.0 has no offset
// mapping). Spans are computed in code points, as Python's; entities() gives UTF-16 offsets, the
// ones text.slice() takes.

const RUN_TOKENS = 4; // the most tokens a byte-level character is decoded across
const REPLACEMENT = '\ufffd';
const OUTSIDE = 'O';
const BLANK = /^[\p{Z}\p{Cc}\p{Cf}]$/u;
const MARKS = /\p{Mn}/gu;

/** One character's (or a piece's) folding: NFKD, lowercased, NFKD again, combining marks dropped. */
export const fold = (text) => text.normalize('NFKD').toLowerCase().normalize('NFKD')
  .replace(MARKS, '');
const blank = (char) => BLANK.test(char);

function strip(piece) {
  const chars = Array.from(piece);
  while (chars.length && blank(chars.at(-1))) chars.pop();
  const start = chars.findIndex((char) => !blank(char));
  return start < 0 ? '' : chars.slice(start).join('');
}

/** What the alignment reads of a tokenizer's model (web/text/tokenizer.mjs's loadTokenizer):
 * WordPiece's continuing_subword_prefix ('' for the other models), the unknown token's id. */
export function modelOf(tokenizer) {
  const { model } = tokenizer.library;
  const prefix = model.config?.type === 'WordPiece' ? model.config.continuing_subword_prefix : '';
  return { prefix: prefix || '', unknown: model.unk_token_id ?? null };
}

// Step 2: per run of tokens (its positions in `ids`), its folded piece as an array of code
// points; null for a special token.
function pieces(tokenizer, ids, { prefix, unknown }) {
  const decode = (list, skip) => tokenizer.decode(list, { skipSpecialTokens: skip });
  const runs = [];
  let at = 0;
  while (at < ids.length) {
    if (ids[at] !== unknown && decode([ids[at]], true) === '' && decode([ids[at]], false) !== '') {
      runs.push(null);
      at += 1;
      continue;
    }
    let end = at + 1;
    let piece = decode(ids.slice(at, end), false);
    while (piece.includes(REPLACEMENT) && end < ids.length && end - at < RUN_TOKENS) {
      end += 1;
      piece = decode(ids.slice(at, end), false);
    }
    if (prefix && piece.startsWith(prefix)) piece = piece.slice(prefix.length);
    const positions = Array.from({ length: end - at }, (_, i) => at + i);
    runs.push({ positions, piece: Array.from(Array.from(strip(piece), fold).join('')) });
    at = end;
  }
  return runs;
}

const matchesAt = (folded, piece, at) => at + piece.length <= folded.length
  && piece.every((char, i) => folded[at + i] === char);

/** Each token's [start, end] in `text` (code points), null for a special token (step 3). */
export function tokenSpans(tokenizer, text, ids, model = modelOf(tokenizer)) {
  const folded = [];
  const origin = [];
  const chars = Array.from(text);
  chars.forEach((char, index) => {
    for (const part of fold(char)) {
      folded.push(part);
      origin.push(index);
    }
  });
  const spans = new Array(ids.length).fill(null);
  const runs = pieces(tokenizer, ids.map(Number), model);
  let cursor = 0;
  runs.forEach((run, number) => {
    if (run === null) return;
    const { positions, piece } = run;
    while (cursor < folded.length && blank(folded[cursor])) cursor += 1;
    let span;
    let end;
    if (piece.length === 0 || matchesAt(folded, piece, cursor)) {
      end = cursor + piece.length;
      if (piece.length) span = [origin[cursor], origin[end - 1] + 1];
      else span = cursor < origin.length ? [origin[cursor], origin[cursor]] : [chars.length, chars.length];
    } else {
      const following = runs.slice(number + 1).find((r) => r !== null && r.piece.length)?.piece;
      end = cursor + 1;
      while (end < folded.length && !blank(folded[end])
             && !(following && matchesAt(folded, following, end))) end += 1;
      end = Math.min(end, folded.length);
      span = cursor < folded.length ? [origin[cursor], origin[end - 1] + 1]
        : [chars.length, chars.length];
    }
    cursor = end;
    for (const position of positions) spans[position] = span;
  });
  return spans;
}

function splitLabel(label) {
  return label.startsWith('B-') || label.startsWith('I-') ? [label[0], label.slice(2)]
    : ['I', label];
}

/** The entities of one text from its tokens' spans (code points) and logits (an array of rows,
 * one per token): {entity, score, start, end, word}, start and end in UTF-16 code units. */
export function entities(text, spans, logits, labels) {
  const groups = [];
  spans.forEach((span, t) => {
    if (span === null) return;
    const row = Float64Array.from(logits[t], Number);
    let max = -Infinity;
    for (const value of row) max = Math.max(max, value);
    const exp = row.map((value) => Math.exp(value - max));
    const sum = exp.reduce((total, value) => total + value, 0);
    let best = 0;
    for (let i = 1; i < exp.length; i += 1) if (exp[i] > exp[best]) best = i;
    const label = labels && best < labels.length ? labels[best] : String(best);
    const [tag, kind] = splitLabel(label);
    let last = groups.at(-1);
    if (!last || tag === 'B' || last.entity !== kind) {
      last = { entity: kind, scores: [], start: span[0], end: span[1] };
      groups.push(last);
    }
    last.scores.push(exp[best] / sum);
    last.end = span[1];
  });
  const units = [0];
  for (const char of text) units.push(units.at(-1) + char.length);
  return groups.filter((group) => group.entity !== OUTSIDE).map((group) => {
    const [start, end] = [units[group.start], units[group.end]];
    return { entity: group.entity,
             score: group.scores.reduce((a, b) => a + b, 0) / group.scores.length,
             start, end, word: text.slice(start, end) };
  });
}
