// What the decoding loops share (model.generate() in generate.mjs, model.transcribe() in
// transcribe.mjs): the KV cache kept by the session between steps, the text streamed as it is
// decoded, the error an aborted call rejects with, and the build check's teacher forcing.
//
// The cache stays with the session (run's `keep`, see bundle.session.mjs): on WebGPU each
// present.* stays in its GPU buffer and goes back in as the next step's past, and the past it
// replaces is disposed at once (its buffer returns to onnxruntime's pool), so the live GPU buffers
// stay flat however long the decoding. On WASM every output fetched is copied out of the
// runtime's memory into a new array and every input into it at each step (onnxruntime-web has no
// output binding on WASM); what keeping saves there is the cache's trip through plain arrays and,
// in worker mode, through messages. (Text generation on WASM fetches each step's new key/value
// slices instead where the model has them: bundle.core.mjs's AppendedCache.)

/**
 * The past of one decoding: run() feeds it after the caller's feeds, keeps the `presents` named
 * (handles, see bundle.session.mjs) and makes those in `adopted` the next past, dropping the past
 * each replaces; a kept present that is not adopted (a merged Whisper decoder's placeholder
 * cross-attention outputs on its cached branch) is dropped at once. release() drops the last.
 * `past`: the first step's plain (zero-length) past, nothing to drop.
 */
export class KeptCache {
  constructor(step, drop, past) {
    this._step = step;
    this._drop = drop;
    this._past = { ...past };
  }

  /** The step's outputs (the presents as handles). */
  async run(feeds, presents, adopted = presents) {
    const outputs = await this._step({ ...feeds, ...this._past }, presents);
    const dropped = [];
    for (const name of presents) {
      const value = outputs[name];
      if (adopted.includes(name)) {
        const pastName = name.replace('present', 'past_key_values');
        if (this._past[pastName]?.kept !== undefined) dropped.push(this._past[pastName].kept);
        this._past[pastName] = value;
      } else if (value?.kept !== undefined) {
        dropped.push(value.kept);
      }
    }
    await this._drop(dropped);
    return outputs;
  }

  async release() {
    const ids = Object.values(this._past).map((value) => value.kept)
      .filter((id) => id !== undefined);
    this._past = {};
    await this._drop(ids);
  }
}

/**
 * The streamed text: the whole new sequence decoded each step and its new suffix emitted,
 * holding back a tail of U+FFFD (a byte-level token may end inside a UTF-8 character, the next
 * one completes it) and a tail that may be the start of a stop string. finish() emits the rest,
 * so the pieces joined are the returned text.
 */
export function textStream(stops, onPiece) {
  let emitted = '';
  const emit = (text) => {
    if (!text.startsWith(emitted)) return; // an earlier piece re-decoded differently: wait
    const piece = text.slice(emitted.length);
    if (piece) {
      emitted = text;
      onPiece?.(piece);
    }
  };
  const held = (text) => {
    let keep = text.length - (text.match(/\uFFFD+$/u)?.[0].length ?? 0);
    for (const stop of stops) {
      for (let k = Math.min(stop.length - 1, keep); k > 0; k -= 1) {
        if (text.slice(keep - k, keep) === stop.slice(0, k)) {
          keep -= k;
          break;
        }
      }
    }
    return text.slice(0, keep);
  };
  return {
    push: (text) => emit(held(text)),
    finish(text) {
      emit(text);
      return emitted.length === text.length ? text : emitted;
    },
  };
}

/**
 * Teacher forcing, for the build's check (bundler/text/agreement.py): the logits a decoding loop
 * computes when fed `ids` (the prompt's `promptLength` ids, then one id a step), each step's at
 * the ids `at[step]`; one step per row of `at`. `lastLogits(pending, length)`: the logits [vocab]
 * of the last of `pending`, fed after the steps so far (`length` ids in all).
 */
export async function teacherForced(lastLogits, ids, promptLength, at) {
  const rows = [];
  let pending = ids.slice(0, promptLength);
  for (let i = 0; i < at.length; i += 1) {
    const logits = await lastLogits(pending, promptLength + i);
    rows.push(at[i].map((id) => logits[id]));
    pending = [ids[promptLength + i]];
  }
  return rows;
}

/** The error a call stopped by its AbortSignal rejects with (name 'AbortError'). */
export function aborted(signal, what = 'generation') {
  const error = new Error(`${what} aborted`);
  error.name = 'AbortError';
  if (signal.reason !== undefined) error.cause = signal.reason;
  return error;
}

/** Throws the AbortError when `signal` (an AbortSignal, or null) is aborted. */
export function checkSignal(signal, what) {
  if (signal?.aborted) throw aborted(signal, what);
}
