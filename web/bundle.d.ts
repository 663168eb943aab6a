// Types of bundle.mjs (see onnx-bundler's docs/reference/bundle-mjs.md).

export type ExecutionProvider = 'webgpu' | 'wasm';
export type TensorType =
  | 'float32' | 'float16' | 'float64' | 'int8' | 'uint8' | 'int16' | 'uint16'
  | 'int32' | 'uint32' | 'int64' | 'uint64' | 'bool' | 'string';

/** Float16Array where the browser has it (onnxruntime-web then returns one), else Uint16Array. */
export interface Float16Data extends ArrayBufferView {
  readonly length: number;
  [index: number]: number;
}

/** The typed array of each element type, as run() returns it. */
export interface DataOf {
  float32: Float32Array; float64: Float64Array; float16: Float16Data | Uint16Array;
  int8: Int8Array; uint8: Uint8Array; int16: Int16Array; uint16: Uint16Array;
  int32: Int32Array; uint32: Uint32Array; int64: BigInt64Array; uint64: BigUint64Array;
  bool: Uint8Array; string: string[];
}

/** What run() takes as data for each element type (plain arrays are converted). */
export interface FeedDataOf {
  float32: Float32Array | readonly number[]; float64: Float64Array | readonly number[];
  float16: Float16Data | Uint16Array | readonly number[];
  int8: Int8Array | readonly number[]; uint8: Uint8Array | Uint8ClampedArray | readonly number[];
  int16: Int16Array | readonly number[]; uint16: Uint16Array | readonly number[];
  int32: Int32Array | readonly number[]; uint32: Uint32Array | readonly number[];
  int64: BigInt64Array | readonly (number | bigint)[];
  uint64: BigUint64Array | readonly (number | bigint)[];
  bool: Uint8Array | readonly boolean[] | readonly number[]; string: readonly string[];
}

/** One input as a plain tensor (an ort.Tensor of the right type and dims is taken too). */
export interface Feed<T extends TensorType, Dims extends readonly number[] = readonly number[]> {
  type?: T;
  dims: Dims;
  data: FeedDataOf[T];
}

/** An input whose dims the model fixes: `dims` may be left out. */
export interface FixedFeed<T extends TensorType, Dims extends readonly number[]> {
  type?: T;
  dims?: Dims;
  data: FeedDataOf[T];
}

/** What a 0-d input also takes: the value itself. */
export interface ScalarOf {
  float32: number; float64: number; float16: number; int8: number; uint8: number; int16: number;
  uint16: number; int32: number; uint32: number; int64: number | bigint; uint64: number | bigint;
  bool: boolean | number; string: string;
}

export interface Output<T extends TensorType, Dims extends readonly number[] = number[]> {
  type: T;
  dims: Dims;
  data: DataOf[T];
}

export interface TensorSpec { name: string; type: TensorType; shape: (number | string)[] | null; }

/** A variant against fp32, natively; a metric the model has no value for is null
 * (top1_agreement of a model without class scores). nonfinite is absent in older bundles.
 * data: the inputs measured on; bounds: what auto judges its budget by, per budget key. */
export interface VariantAccuracy {
  max_abs: number | null; mean_rel: number | null; cosine: number | null;
  top1_agreement: number | null; nonfinite?: number; samples: number;
  data: 'validation' | 'calibration-split' | 'sample-split' | 'sample-held-out' | 'calibration'
    | 'sample' | 'check-text' | 'generated';
  bounds?: Partial<Record<'top1' | 'cosine' | 'mean_rel' | DecodedKey
    | `${DecodedKey}_per_sample`, AccuracyBound>>;
  /** A text-generation bundle's (measured on generation): the share of fp32's greedy tokens
   * kept before the first that differs, and the perplexity over fp32's on the check text. */
  tokens_agreement?: number | null; perplexity_ratio?: number | null;
  word_error_rate?: number | null;
}

/** A task bundle's decoded answers agreeing with fp32's: labels, boxes matched by IoU, speech
 * frames (each `_per_sample` too, where samples have several: recorded, not judged). */
export type DecodedKey = 'labels' | 'boxes' | 'frames';

/** A metric over n rows (top1) or samples: its estimate and the bound auto judges it by. */
export interface AccuracyBound {
  n: number; estimate: number | null; bound: number | null;
  method: 'wilson-95-lower' | 'p5' | 'p95';
}

/** A candidate of --quantize auto, shipped or not. */
export interface SelectionCandidate {
  name: string; bytes: number; within_budget: boolean; budget: string;
  browser_verified: boolean; accuracy?: VariantAccuracy; wasm_ms?: number;
  webgpu_ms?: number; native_ms?: number; chosen: boolean;
}

export interface Variant {
  name: string; kind?: string; file: string; bytes: number; sha256: string; ratio?: number;
  accuracy?: VariantAccuracy | null; settings?: VariantSettings; notes?: string[];
  reference?: VariantReference | null;
  /** The external data files `file` keeps its weights in (each an entry of `files`), absent when
   * the weights are inline. bundle.mjs passes each to onnxruntime-web as `externalData`. */
  data?: string[];
  /** What load() checks against the device's limits before fetching the variant (absent in
   * bundles built before it). */
  memory?: VariantMemory | null;
  /** Per EP, onnxruntime session config entries the variant is opened with there (natively as
   * on wasm), e.g. int4 format=qdq's "session.disable_quant_qdq" "1" on wasm (absent: none). */
  session_config?: Partial<Record<'wasm' | 'webgpu', Record<string, string>>>;
  /** The WebGPU features the variant needs on webgpu, e.g. fp16's "shader-f16". On an adapter
   * without them load() loads another variant there and says why in model.variantReason. */
  requires?: string[];
  /** Per EP, the graph that EP opens instead of `file` (each an entry of `files`), naming the
   * same `data` files: int4 format=per-ep's qdq form on webgpu (absent: every EP opens `file`). */
  graphs?: Partial<Record<'wasm' | 'webgpu', string>>;
}

/** A variant's bytes as load() needs them: its largest initializer, all of them, and the
 * estimated wasm heap and peak page memory (docs/reference/bundle-json.md). */
export interface VariantMemory { largest_tensor: number; weights: number; heap: number;
                                 peak: number; }

/** What a variant's quantizer did: one record per kind (fp32, fp16, int8-weights, int8,
 * int8-static, int4). */
export type VariantSettings = Fp32Settings | Fp16Settings | Int8WeightsSettings | Int8Settings
  | Int8StaticSettings | Int4Settings;
export interface Fp32Settings { weights: string }
export interface Fp16Settings { keep_io_types: boolean; op_block_list: string[] }
export interface Int8WeightsSettings {
  scheme: string; compute: string; op_types: string[]; min_elements: number;
  weights_int8: number; weights_float32: number;
}
export interface Int8Settings {
  mode: string; weight_type: string; per_channel: boolean; op_types: string[];
}
export interface Int8StaticSettings {
  format: string; activation_type: string; weight_type: string; per_channel: boolean;
  calibration_method: string; calibration_samples: number; nodes_excluded: string[];
}
export interface Int4Settings {
  op: string; bits: number; block_size: number; symmetric: boolean; matmuls_int4: number;
  matmuls_float32: number;
  /** --int4 (absent in older bundles): MatMulNBits' accuracy_level, the LM head in 4 bits, the
   * embedding tables stored in 4 bits, and nbits (MatMulNBits), qdq (DequantizeLinear), int8
   * (DynamicQuantizeMatMul) or per-ep (int8 on wasm, qdq on webgpu: Variant.graphs). */
  accuracy_level?: number; lm_head?: boolean; embeddings?: number;
  format?: 'nbits' | 'qdq' | 'int8' | 'per-ep';
}

/** A variant's native outputs at build time, so bundle test notices a changed model file; seed
 * and requested_dims are absent in older bundles, inputs when the fingerprint was taken on
 * generated inputs. */
export interface VariantReference {
  seed?: number; requested_dims?: Record<string, number>; dims: Record<string, number>;
  outputs: Record<string, OutputFingerprint>; inputs?: string;
}

/** One output of a reference: evenly spaced samples (null where not finite) and the sums of its
 * finite values; nonfinite is absent in older bundles. */
export interface OutputFingerprint {
  dims: number[]; sample: (number | null)[]; sum: number; abs_sum: number; nonfinite?: number;
}

/** The graph optimisation every variant was made from. */
export interface Optimization {
  enabled: boolean; kept_original?: string; nodes_before?: number; nodes_after?: number;
  steps?: OptimizationStep[];
}
export interface OptimizationStep { name: string; status: string; detail: string; }

export interface VerificationResult {
  passed: boolean; max_abs_error: number | null; max_normalized_error: number | null;
  error?: string; unsupported?: 'runtime' | 'device';
}

/** A file (or part) a browser may fetch, and its precompressed siblings. */
export interface FilePiece {
  path: string; bytes: number; sha256: string;
  encodings?: Partial<Record<'br' | 'gzip', { path: string; bytes: number }>>;
  /** gzip of the piece with its float runs ([start, bytes, itemsize]) as byte planes. */
  packed?: { path: string; bytes: number; runs: [number, number, number][] };
}
/** An entry of bundle.json's files; `parts` when it was split for static hosts. */
export interface FileEntry extends FilePiece { parts?: FilePiece[]; }

/** A runtime build: its ES module, and the glue and wasm (fetched as wasmBinary). */
export interface RuntimeBuild { module: string; mjs: string; wasm: string; }

/** One model of the bundle's pipeline: its inputs, outputs, variants and the default variant
 *  (a name, or one per EP). */
export interface Session {
  name: string;
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  variants: Variant[];
  default_variant: string | Partial<Record<ExecutionProvider, string>>;
}

export interface Manifest {
  schema_version?: number;
  name: string;
  tool: { name: string; version: string };
  runtime: { package: string; version: string; dir: string;
             builds: Partial<Record<ExecutionProvider, RuntimeBuild>>;
             /** The native onnxruntime the browser's outputs were checked against. */
             native_reference?: { package: string; version: string } };
  /** Every file a browser may fetch (not bundle.json, bundle.files.mjs or host configs). */
  files?: FileEntry[];
  hosting?: { max_file_size: number; hosts: string[]; coi_worker: boolean };
  /** The pipeline's models (one for a single-model bundle, named after it): load() loads the
   *  first unless given `session`. A version 1 bundle.json has the one session's keys at the top
   *  level instead, and bundle.mjs reads it as one session (sessionsOf). */
  sessions: Session[];
  selection?: { mode: 'auto'; budget: string; chosen: string;
                candidates: SelectionCandidate[];
                /** What auto optimised, and how the candidates' speeds were measured. */
                objective?: 'balanced' | 'speed' | 'size'; speed?: SpeedRecord;
                /** Why the inputs given cannot show the budget (then fp32 ships). */
                note?: string };
  source?: { file: string; bytes: number };
  optimization?: Optimization;
  notes?: string[];
  verification: {
    status: 'passed' | 'failed' | 'not_done';
    reason?: string;
    hint?: string;
    dims?: Record<string, number>;
    results?: Record<string, Partial<Record<ExecutionProvider, VerificationResult>>>;
    fallback?: VerificationResult;
    problems?: string[];
  };
  /** The task the bundle was built for with --task (absent: generic). */
  task?: Task;
  /** The input sizes the build measured accuracy and auto's speed at (bundle bench too). */
  workload?: Workload;
}

/** Where a measurement's input sizes came from (see the docs of bundle bench). */
export type DimsSource = 'task-size' | '--dim' | 'sample' | 'model' | 'guess';

/** bundle.json's workload: each input's shape as measured, each symbolic dim's size (by the
 * key --dim takes), where they came from (all together and each), and the dims guessed
 * (dim_sources is absent in bundles built before it was recorded). */
export interface Workload {
  inputs: Record<string, number[]>;
  dims: Record<string, number>;
  dims_source: DimsSource;
  dim_sources?: Record<string, DimsSource>;
  guessed?: GuessedDim[];
}

/** bundle.json's selection.speed: auto's tolerances, and how the candidates were timed
 * (`measured`; the EPs not timed and why in `not_measured_on`) at which input sizes (the keys of
 * Workload), or why they were not timed (`not_measured`). */
export interface SpeedRecord {
  tie_tolerance: number;
  balanced_smaller: number;
  balanced_slower: number;
  measured?: string;
  not_measured_on?: Partial<Record<ExecutionProvider, string>>;
  not_measured?: string;
  inputs?: Record<string, number[]>;
  dims?: Record<string, number>;
  dims_source?: DimsSource;
  dim_sources?: Record<string, DimsSource>;
  guessed?: GuessedDim[];
}

/** A dim the build guessed (the --dim key that sets it, and the size it ran at). */
export interface GuessedDim { input: string; axis: number; dim: string; value: number }

/** bundle.json's task: the settings classify(), detect(), stream(), embed() and tokens()
 *  follow. */
export interface Task {
  kind: 'image-classification' | 'object-detection' | 'audio-stream' | 'feature-extraction'
    | 'text-classification' | 'token-classification';
  input: string;
  output: string;
  size?: [number, number];
  resize?: 'stretch' | 'letterbox' | 'center-crop';
  filter?: 'bilinear' | 'nearest' | 'antialias' | 'cv2-linear' | 'pil-bilinear';
  letterbox_order?: 'resize-then-pad' | 'pad-then-resize';
  pad_value?: number;
  placement?: 'centre' | 'top-left';
  crop_fraction?: number;
  layout?: 'NCHW' | 'NHWC';
  channels?: 'RGB' | 'BGR';
  scale?: number;
  mean?: number[];
  std?: number[];
  labels?: string[];
  softmax?: boolean;
  top_k?: number;
  score_threshold?: number;
  iou_threshold?: number;
  max_detections?: number;
  output_layout?: 'yolov8' | 'yolov5' | 'nms-inside';
  nms?: 'per-class' | 'class-agnostic';
  sample_rate?: number;
  chunk_size?: number;
  context_size?: number;
  state?: Record<string, string>;
  sample_rate_input?: string;
  pooling?: 'mean' | 'cls' | 'max' | 'last' | 'model' | 'none';
  normalize?: boolean;
  max_length?: number;
  activation?: 'softmax' | 'sigmoid';
  /** a text task's tokenizer and config files: each name in the export folder, its bundle path */
  files?: Record<string, string>;
}

/** The stable codes of BundleError and of model.fallbackReasons (docs/reference/errors.md). */
export type ErrorCode =
  | 'bad-option' | 'schema-version' | 'fetch-failed' | 'integrity' | 'not-bundled'
  | 'webgpu-unavailable' | 'verification-failed' | 'runtime-unsupported' | 'session-failed'
  | 'no-execution-provider' | 'too-large' | 'feature-missing' | 'input-name' | 'input-type' | 'input-shape' | 'released'
  | 'worker-failed' | 'unsupported-environment' | 'wrong-task' | 'bad-source';

/** Why load() skipped an EP or fell back from it. */
export interface FallbackReason { ep: ExecutionProvider; code: ErrorCode; detail: string; }
/** Why load() loaded another variant than the default on an EP: code 'feature-missing', the
 * default `variant` it did not load (fp16 where the adapter lacks shader-f16) and the detail. */
export interface VariantReason extends FallbackReason { variant: string; }

/** What load() and run() reject with. */
export class BundleError extends Error {
  readonly name: 'BundleError';
  readonly code: ErrorCode;
  /** With code 'no-execution-provider' or 'too-large': why each EP was skipped or failed. */
  readonly reasons?: FallbackReason[];
}
export const ERROR_CODES: readonly ErrorCode[];
/** The newest bundle.json schema_version this bundle.mjs reads. */
export const SCHEMA_VERSION: number;

export interface ProgressEvent { stage: 'manifest' | 'runtime' | 'model' | 'session';
                                 loaded: number; total: number;
                                 /** Stage 'model': the file (the graph, or one of its external
                                  * data files) whose bytes moved, loaded/total being summed
                                  * over all of them. */
                                 file?: { path: string; loaded: number; total: number }; }

export interface LoadOptions<VariantName extends string = string,
                             SessionName extends string = string> {
  executionProviders?: readonly ExecutionProvider[];
  /** The session of the pipeline to load (default: the first, the only one of most bundles). */
  session?: SessionName;
  variant?: VariantName;
  onProgress?: (event: ProgressEvent) => void;
  baseUrl?: string | URL;
  ignoreVerification?: boolean;
  numThreads?: number;
  /** false: do not read or write Cache Storage (default true). */
  cache?: boolean;
  /** Run the session in a dedicated module worker (on WebGPU or WASM); run() then transfers the
   *  input buffers to it, so they are detached afterwards. */
  worker?: boolean;
  /** Run the model once at load (default: true for a text-generation or speech-recognition
   *  bundle, else false), so the first generate() or transcribe() does not compile the shaders;
   *  loadMs includes it. */
  warmUp?: boolean;
}

export interface BundleModel<Inputs, Outputs> {
  readonly ep: ExecutionProvider;
  readonly fallbackReason: string | null;
  readonly fallbackReasons: FallbackReason[];
  /** The session loaded (its name in manifest.sessions). */
  readonly session: string;
  readonly variant: string;
  /** Why `variant` is not the default variant of the EP in use, or null when it is. */
  readonly variantReason: VariantReason | null;
  readonly inputs: TensorSpec[];
  readonly outputs: TensorSpec[];
  readonly manifest: Manifest;
  readonly loadMs: number;
  /** wasm threads the page got: 1 unless it is cross-origin isolated. */
  readonly threads: number;
  readonly crossOriginIsolated: boolean;
  /** true when the session runs in a Web Worker (load({ worker: true })). */
  readonly worker: boolean;
  run(feeds: Inputs): Promise<Outputs>;
  release(): Promise<void>;
  /** image-classification bundles: the top classes, by score. */
  classify(source: ImageSource, options?: { topK?: number }): Promise<Classification[]>;
  /** text-classification bundles: a text's top labels, or a list of them per text (`pairs`: a
   * second text per text, encoded with it: a cross-encoder's query and passage). */
  classify(text: string, options?: { topK?: number; pairs?: string }): Promise<Classification[]>;
  classify(texts: string[], options?: { topK?: number; pairs?: string[] }
  ): Promise<Classification[][]>;
  /** feature-extraction bundles: one vector per text (pooling 'none': one per token; a bundle
   * whose output is pooled in the model, task.pooling 'model', takes no other pooling). */
  embed(texts: string | string[],
    options?: { pooling?: 'mean' | 'cls' | 'max' | 'last' | 'model'; normalize?: boolean }
  ): Promise<Float32Array[]>;
  embed(texts: string | string[], options: { pooling: 'none' }): Promise<Float32Array[][]>;
  /** token-classification bundles: a text's entities, or a list of them per text. */
  tokens(text: string): Promise<Entity[]>;
  tokens(texts: string[]): Promise<Entity[][]>;
  /** object-detection bundles: boxes in the source's pixels, by score. */
  detect(source: ImageSource, options?: { threshold?: number }): Promise<Detection[]>;
  /** audio-stream bundles: chunks in, results out, state carried between them. */
  stream(): AudioStream;
  /** text-generation bundles: a prompt, or chat messages through the chat template, continued. */
  generate(input: string | ChatMessage[], options?: GenerateOptions): Promise<Generation>;
  /** Speech to text (a bundle built with --task automatic-speech-recognition): mono samples at
   *  `sampleRate` (16 kHz when not given), an AudioBuffer (mixed down to mono, at its own rate)
   *  or a Blob/File of a recording (decoded by the page's Web Audio at 16 kHz, so not inside a
   *  worker), resampled, in 30 s windows with strides, greedy tokens by the Whisper decoding
   *  spec. */
  transcribe(audio: Float32Array | AudioBuffer | Blob, options?: TranscribeOptions
  ): Promise<Transcript>;
  /** Live speech to text (automatic-speech-recognition bundles): a MediaStream's audio cut into
   *  utterances, each transcribed as it grows (onPartial) and when a silence ends it (onFinal),
   *  until `signal` aborts or its tracks end. Resolves to the final transcripts. */
  listen(stream: MediaStream, options?: ListenOptions): Promise<FinalTranscript[]>;
}

export interface ListenOptions {
  language?: string;
  task?: 'transcribe' | 'translate';
  timestamps?: boolean;
  /** The utterance being spoken, transcribed again every `partialMs` of new audio. */
  onPartial?: (transcript: LiveTranscript) => void;
  /** An utterance ended by a silence (or by stop), transcribed. */
  onFinal?: (transcript: FinalTranscript) => void;
  /** Stops listening: the utterance being spoken is transcribed, then listen() resolves. */
  signal?: AbortSignal;
  /** A model loaded from an audio-stream (voice-activity) bundle: speech is where its chunk
   *  scores reach its score_threshold. Without it, where a 20 ms frame's RMS reaches `threshold`. */
  vad?: BundleModel<any, any>;
  /** RMS of a speech frame for the energy detector (default 0.01, full scale 1). */
  threshold?: number;
  /** Silence that ends an utterance (default 600). */
  silenceMs?: number;
  /** Audio kept before the speech starts (default 200). */
  prerollMs?: number;
  /** New audio between partial transcripts (default 1000). */
  partialMs?: number;
  /** Longest utterance, cut there (default 28). */
  maxSeconds?: number;
  /** 'auto' (the default): an AudioWorklet, a ScriptProcessor where worklets cannot run. */
  capture?: 'auto' | 'worklet' | 'script-processor';
}

export interface LiveTranscript extends Transcript {
  /** Seconds from the capture's start. */
  start: number;
  end: number;
}

export interface FinalTranscript extends LiveTranscript {
  /** The utterance's captured samples at `sampleRate`, which `text` is the transcript of. */
  audio: Float32Array;
  sampleRate: number;
}

export interface ChatMessage { role: string; content: string }

export interface GenerateOptions {
  /** New tokens at most (default 32); EOS (generation_config.json) ends a run sooner. */
  maxNewTokens?: number;
  /** > 0 samples (seeded, the spec of docs/explanation/generation.md); 0 or absent: greedy. */
  temperature?: number;
  topK?: number;
  topP?: number;
  repetitionPenalty?: number;
  /** The sampler's uint32 seed (default 0): the same seed draws the same tokens as Python. */
  seed?: number;
  /** Strings that end the run; the text is cut before the first one found. */
  stop?: string | string[];
  signal?: AbortSignal;
  /** Each new piece of text as it is decoded; the pieces joined are the returned text. */
  onToken?: (piece: string) => void;
}

export interface TranscribeOptions {
  /** Hz of `audio` (default 16000). */
  sampleRate?: number;
  /** A code ('en'), a token ('<|en|>') or a name ('english'); detected when not given (a
   *  multilingual model). */
  language?: string;
  task?: 'transcribe' | 'translate';
  /** Timestamp tokens decoded, and the transcript's `segments` given. */
  timestamps?: boolean;
  /** Each token id as it is chosen. */
  onToken?: (id: number) => void;
  /** Each window's text as it is decoded, whole characters only: the pieces of a window joined
   *  are its text (the transcript's text for audio of one window). */
  onText?: (piece: string, window: number) => void;
  /** Stops the call between decoder steps: it rejects with an Error named AbortError. */
  signal?: AbortSignal;
}

export interface TranscriptSegment {
  start: number | null; end: number | null; text: string; tokens: number[];
}

export interface Transcript {
  text: string;
  /** The merged text tokens (no special or timestamp tokens). */
  tokens: number[];
  /** Each 30 s window's tokens (timestamps included), as the native run gives them. */
  windows: number[][];
  /** With `timestamps`: the merged chunks, seconds from the audio's start. */
  segments?: TranscriptSegment[];
  /** What the call took (ms from the audio at 16 kHz to the transcript). */
  timings: TranscriptTimings;
}

export interface TranscriptTimings {
  audioSeconds: number;
  totalMs: number;
  /** The encoder's runs and the decoder's steps (the rest: features, logits rules, text). */
  encoderMs: number;
  decoderMs: number;
  decoderSteps: number;
  decoderStepsPerS: number | null;
  /** When the first text streamed (onText's first piece), from the call's start; null when no
   *  text came. */
  firstTextMs: number | null;
  /** Audio seconds per second of the call: above 1 is faster than real time. */
  realTimeFactor: number | null;
}

export interface Generation {
  text: string;
  tokenIds: number[];
  /** The prompt's ids as fed: a prompt longer than the model's positions less maxNewTokens
   *  loses its first ids. */
  promptIds: number[];
  /** How many of the prompt's first ids were dropped to fit (0 when it fitted). */
  truncatedTokens: number;
  timings: { firstTokenMs: number | null; prefillTokensPerS: number | null;
             decodeTokensPerS: number | null };
}

export type ImageSource = HTMLImageElement | HTMLCanvasElement | HTMLVideoElement | ImageBitmap
  | ImageData | VideoFrame | OffscreenCanvas | Blob;
export interface Classification { label: string; index: number; score: number; }
/** An entity of token-classification: tokens grouped by their B-/I- tags (transformers'
 *  aggregation_strategy "simple"); start and end in UTF-16 code units, word = text.slice(start,
 *  end); score: the mean of its tokens' softmax scores. */
export interface Entity { entity: string; score: number; start: number; end: number; word: string; }
export interface Detection {
  label: string; index: number; score: number;
  box: { x: number; y: number; width: number; height: number };
}
export interface AudioChunkResult {
  index: number; start: number; end: number; score: number; values: number[];
}
export interface AudioStream {
  /** Samples at any rate (resampled to the task's sample_rate): the chunks they completed. */
  push(samples: Float32Array, sampleRate?: number): Promise<AudioChunkResult[]>;
  /** The last partial chunk, padded with zeros. */
  flush(): Promise<AudioChunkResult[]>;
  /** Forget the pending samples and the state. */
  reset(): void;
}

/** One limit a variant was checked against: the bytes it allows (`value`) and the estimate
 * compared with it (`need`, `what` it is). */
export interface LimitCheck { limit: string; value: number; need: number; what: string;
                              fits: boolean; }
/** A file load() would fetch: its size, its bytes over the wire and whether it is cached. */
export interface PreflightFile { path: string; bytes: number; wire: number; cached: boolean; }
/** What load() would do on one EP: the variant, the bytes to download and already cached, the
 * memory record, the limits checked and, when it would not load there, why. */
export interface PreflightEP {
  ep: ExecutionProvider; variant: string | null; fits: boolean; reason: FallbackReason | null;
  variantReason: VariantReason | null; files: PreflightFile[]; download: number; cached: number; memory: VariantMemory | null;
  checks: LimitCheck[];
}
export interface Preflight { session: string; fits: boolean; eps: PreflightEP[]; }
/** What load(options) would try, download and whether it fits, before any model byte is
 * fetched. */
export function preflight(options?: Omit<LoadOptions, 'onProgress' | 'worker'>): Promise<Preflight>;
/** Empties the Cache Storage that load() keeps model and .wasm bytes in. */
export function clearCache(): Promise<boolean>;
export function loadManifest(baseUrl?: string | URL): Promise<Manifest>;
/** A manifest's sessions, version 1 (its one model, named after the bundle) or 2. */
export function sessionsOf(manifest: Manifest): Session[];
