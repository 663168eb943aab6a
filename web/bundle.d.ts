// Types of bundle.mjs (see the onnx-bundler README for the contract).

export type ExecutionProvider = 'webgpu' | 'wasm';
export type TensorType =
  | 'float32' | 'float16' | 'float64' | 'int8' | 'uint8' | 'int16' | 'uint16'
  | 'int32' | 'uint32' | 'int64' | 'uint64' | 'bool' | 'string';
export type TypedArray =
  | Float32Array | Float64Array | Int8Array | Uint8Array | Int16Array | Uint16Array
  | Int32Array | Uint32Array | BigInt64Array | BigUint64Array;

export interface TensorSpec { name: string; type: TensorType; shape: (number | string)[] | null; }

export interface Variant { name: string; file: string; bytes: number; sha256: string; }

export interface Manifest {
  name: string;
  tool: { name: string; version: string };
  runtime: { package: string; version: string; dir: string;
             builds: Partial<Record<ExecutionProvider,
                                    { module: string; mjs: string; wasm: string }>> };
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  variants: Variant[];
  files?: { path: string; bytes: number; sha256: string }[];
  default_variant: string | Partial<Record<ExecutionProvider, string>>;
  verification: {
    status: 'passed' | 'failed' | 'not_done';
    reason?: string;
    hint?: string;
    dims?: Record<string, number>;
    results?: Record<string, Partial<Record<ExecutionProvider, {
      passed: boolean; max_abs_error: number | null; max_normalized_error: number | null;
      error?: string;
    }>>>;
  };
}

export interface ProgressEvent { stage: 'manifest' | 'runtime' | 'model' | 'session';
                                 loaded: number; total: number; }

export interface LoadOptions {
  executionProviders?: ExecutionProvider[];
  variant?: string;
  onProgress?: (event: ProgressEvent) => void;
  baseUrl?: string | URL;
  ignoreVerification?: boolean;
  numThreads?: number;
  /** Run the session in a dedicated module worker (WebGPU or WASM); run() then transfers the
   *  input buffers to it (they are detached afterwards). */
  worker?: boolean;
}

export interface PlainTensor {
  type?: TensorType;
  dims?: number[];
  data: TypedArray | number[] | bigint[] | boolean[] | string[];
}

export interface OutputTensor { type: TensorType; dims: number[]; data: TypedArray | string[]; }

export interface Model {
  readonly ep: ExecutionProvider;
  readonly fallbackReason: string | null;
  readonly variant: string;
  readonly inputs: TensorSpec[];
  readonly outputs: TensorSpec[];
  readonly manifest: Manifest;
  readonly loadMs: number;
  /** true when the session runs in a Web Worker (load({ worker: true })). */
  readonly worker: boolean;
  run(feeds: Record<string, PlainTensor | number | bigint | boolean | object>):
    Promise<Record<string, OutputTensor>>;
  release(): Promise<void>;
}

export function load(options?: LoadOptions): Promise<Model>;
export function loadManifest(baseUrl?: string | URL): Promise<Manifest>;
