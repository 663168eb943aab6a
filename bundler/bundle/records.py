"""The records bundle.json and edge.json are made of, down to their sub-records; every stage of a
build returns these (never a dict), and bundler.bundle.codec writes and reads them.

A variant's `settings` is one record per variant kind (each filled by its module in
bundler/variants/). The records of what measurements ran at (`workload`, `selection.speed`) are
in bundler.bundle.measured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Literal

from bundler.bundle.measured import SpeedRecord


@dataclasses.dataclass
class Tool:
    name: str
    version: str


@dataclasses.dataclass
class RuntimeBuild:
    """A build's ES module, the glue module it imports and its wasm (env.wasm.wasmPaths)."""

    module: str
    mjs: str
    wasm: str  # bundle.mjs fetches it itself (it may be split into parts)


@dataclasses.dataclass
class Encoded:
    """A precompressed sibling of a file (or part)."""

    path: str
    bytes: int


@dataclasses.dataclass
class Packed:
    """A gzip sibling of a model file (or part) whose float runs are byte planes
    (bundler.bundle.planes), which bundle.mjs fetches in place of the plain gzip: smaller, as
    gzip codes the planes of exponents in a few bits a byte."""

    path: str
    bytes: int
    runs: list[list[int]]  # [start, bytes, itemsize] in the piece


@dataclasses.dataclass
class FilePiece:
    path: str
    bytes: int
    sha256: str
    encodings: dict[str, Encoded] | None = None  # "br", "gzip"
    packed: Packed | None = None


@dataclasses.dataclass
class FileEntry(FilePiece):
    """One file a browser may fetch; `parts` when it was split for static hosts (then it has no
    `encodings` of its own: its parts have)."""

    parts: list[FilePiece] | None = None


@dataclasses.dataclass
class NativeReference:
    """The native onnxruntime the browser was checked against."""

    package: str
    version: str


@dataclasses.dataclass
class Runtime:
    package: str
    version: str
    dir: str
    builds: dict[str, RuntimeBuild]
    native_reference: NativeReference | None = None


@dataclasses.dataclass
class Bound:
    """A metric as auto judges its budget by it (bundler.variants.confidence): over `n` rows
    (top1) or samples (cosine, mean_rel), its point `estimate` and the `bound` judged, by
    `method`: "wilson-95-lower" (the lower end of the 95 % Wilson interval), "p5" or "p95" (that
    percentile over the samples)."""

    n: int
    estimate: float | None
    bound: float | None
    method: str


@dataclasses.dataclass(kw_only=True)
class Accuracy:
    """A variant measured natively against fp32 on `samples` inputs from `data`: "validation",
    "calibration-split" or "sample-split" (held out by auto), "sample-held-out" (--sample beside
    --calibration; these, like "validation", vouch for a quantized variant),
    "calibration" or "sample" (the inputs themselves), "check-text" (a text bundle's built-in
    sentences) or "generated" (bundler.variants.budget). A
    metric the model has no value for is null (top1_agreement of a detector, any metric over
    non-finite outputs). `bounds`: what auto judges, per budget key (absent in older builds)."""

    max_abs: float | None
    mean_rel: float | None
    cosine: float | None
    top1_agreement: float | None
    nonfinite: int = 0  # outputs NaN/Inf in the variant but finite in fp32 (absent: older builds)
    samples: int
    data: str
    bounds: dict[str, Bound] | None = None
    # a text-generation variant (absent otherwise): greedy-token agreement with fp32 over the
    # check prompts and its perplexity over fp32's on the check text (bundler.text.quality)
    tokens_agreement: float | None = None
    perplexity_ratio: float | None = None
    # a speech-recognition variant (or combination, in `selection`): its transcripts' word error
    # rate against fp32's (bundler.text.transcripts); tokens_agreement is its token agreement
    word_error_rate: float | None = None


@dataclasses.dataclass
class OptimizationStep:
    name: str
    status: str  # "applied", "skipped" or "fell back" (bundler.model.optimize)
    detail: str


@dataclasses.dataclass
class Optimization:
    """The graph optimisation every variant was made from (bundler.model.optimize)."""

    enabled: bool
    kept_original: str | None = None  # why the optimised graph was not shipped
    nodes_before: int | None = None
    nodes_after: int | None = None
    steps: list[OptimizationStep] | None = None


@dataclasses.dataclass
class Hosting:
    """How the folder was prepared for static hosts (bundler.hosting.publish)."""

    max_file_size: int
    hosts: list[str]
    coi_worker: bool


class _Settings(Mapping[str, object]):
    """A variant kind's record of what its quantizer did (its module in bundler/variants/ fills
    it). It reads as the mapping it is written as, too (`settings["bits"]`, equal to that dict),
    for the tests and tools that read bundle.json's JSON."""

    def __getitem__(self, key: str) -> object:
        if key not in self._keys():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def _keys(self) -> list[str]:
        return [field.name for field in dataclasses.fields(self)]  # type: ignore[arg-type]


# eq=False: equality is the Mapping's (a record equals the dict of its fields)
_settings = dataclasses.dataclass(kw_only=True, eq=False)


@_settings
class Fp32Settings(_Settings):
    weights: str  # "float32"


@_settings
class Fp16Settings(_Settings):
    keep_io_types: bool
    op_block_list: list[str]  # operators kept in float32


@_settings
class Int8WeightsSettings(_Settings):
    scheme: str
    compute: str
    op_types: list[str]
    min_elements: int  # smaller weights stay float32
    weights_int8: int
    weights_float32: int


@_settings
class Int8Settings(_Settings):
    mode: str  # "dynamic"
    weight_type: str
    per_channel: bool
    op_types: list[str]


@_settings
class Int8StaticSettings(_Settings):
    format: str  # "QDQ"
    activation_type: str
    weight_type: str
    per_channel: bool
    calibration_method: str
    calibration_samples: int
    nodes_excluded: list[str]


@_settings
class Int4Settings(_Settings):
    op: str  # "com.microsoft.MatMulNBits", "DequantizeLinear" (format qdq) or
    # "com.microsoft.DynamicQuantizeMatMul" (format int8)
    bits: int
    block_size: int
    symmetric: bool
    matmuls_int4: int
    matmuls_float32: int
    # --int4 (absent in older builds): MatMulNBits' accuracy_level (0: the EP's default), the
    # LM head in 4 bits, how many embedding tables are (GatherBlockQuantized)
    accuracy_level: int = 0
    lm_head: bool = True
    embeddings: int = 0
    format: str = "nbits"  # or "qdq": DequantizeLinear of int4 blocks into MatMul (opset 21),
    # or "int8": those blocks requantized to int8 at load, into DynamicQuantizeMatMul, or
    # "per-ep": int8's graph on WASM and qdq's on WebGPU (Variant.graphs), one set of weights


# Read by trying each in turn: no kind's keys are a subset of another's.
VariantSettings = (Fp32Settings | Fp16Settings | Int8WeightsSettings | Int8Settings
                   | Int8StaticSettings | Int4Settings)


@dataclasses.dataclass(kw_only=True)
class Memory:
    """What load() compares with the browser's limits before it fetches a byte of a variant
    (bundler.variants.footprint; the estimates are explained in docs/reference/bundle-json.md)."""

    largest_tensor: int  # bytes of its largest initializer: one WebGPU buffer
    weights: int  # bytes of all its initializers: what WebGPU keeps on the GPU
    heap: int  # estimated wasm heap: the model's bytes + a margin (wasm32 allows 4 GiB)
    peak: int  # estimated page memory while the session is created: the fetched bytes + heap


@dataclasses.dataclass
class Variant:
    name: str
    kind: str
    file: str
    bytes: int
    sha256: str
    ratio: float
    accuracy: Accuracy | None
    settings: VariantSettings
    notes: list[str]
    reference: Fingerprint | None
    # The external data files the graph `file` keeps its weights in (models/fp32.1a2b3c4d.data),
    # each also in `files`; the graph names each by its file name, which bundle.mjs passes to
    # onnxruntime-web as externalData's `path`. None: the weights are inline.
    data: list[str] | None = None
    memory: Memory | None = None  # absent: built before preflight (load() then checks no memory)
    # Per EP, onnxruntime session config entries the variant is opened with there, by bundle.mjs
    # (as `extra`) and natively (the CPU EP runs as WASM's): int4 format=qdq's {"wasm":
    # {"session.disable_quant_qdq": "1"}} folds its DequantizeLinear blocks into float weights
    # at load on WASM only (WebGPU runs it as it is, weights in 4 bits). None: none.
    session_config: dict[str, dict[str, str]] | None = None
    # The WebGPU features the variant needs on the webgpu EP (fp16: ["shader-f16"]; without it
    # onnxruntime-web opens the session and then fails every run). On an adapter without them
    # load() loads another variant there (web/bundle.preflight.mjs) and says why. None: none.
    requires: list[str] | None = None
    # Per EP, the graph that EP opens instead of `file` (int4 format=per-ep: {"webgpu":
    # "models/int4.webgpu.1a2b3c4d.onnx"}, its qdq form beside the int8 form in `file`), each
    # also in `files`; it names the same `data` files, so a client fetches its EP's graph and
    # the shared weights. Native runs of it open it with `session_config`'s "wasm" entries, as
    # they open `file`. None: every EP opens `file`.
    graphs: dict[str, str] | None = None

    def config_for(self, ep: str) -> dict[str, str] | None:
        """The session config entries on `ep` ("wasm", "webgpu"; native runs take "wasm")."""
        return (self.session_config or {}).get(ep)

    def graph_for(self, ep: str) -> str:
        """The graph file `ep` opens ("wasm", "webgpu"; checked natively with "wasm"'s config)."""
        return (self.graphs or {}).get(ep, self.file)

    def files_of(self, ep: str | None = None) -> list[str]:
        """The files load() fetches for the variant on `ep` (None: WASM's, `file`): the graph
        that EP opens and the data files."""
        return [self.file if ep is None else self.graph_for(ep), *(self.data or [])]

    def graph_files(self) -> list[str]:
        """The variant's graphs: `file` first, then those of other EPs (`graphs`)."""
        return [self.file, *sorted((self.graphs or {}).values())]

    def every_file(self) -> list[str]:
        """Every file of the variant: its graphs (`file` first) and data files."""
        return [*self.graph_files(), *(self.data or [])]


@dataclasses.dataclass
class Source:
    file: str
    bytes: int


@dataclasses.dataclass
class EPResult:
    passed: bool
    max_abs_error: float | None
    max_normalized_error: float | None
    error: str | None = None
    unsupported: Literal["runtime", "device"] | None = None


@dataclasses.dataclass
class Verification:
    status: Literal["passed", "failed", "not_done"]
    reason: str | None = None
    hint: str | None = None
    dims: dict[str, int] | None = None
    results: dict[str, dict[str, EPResult]] | None = None
    fallback: EPResult | None = None
    problems: list[str] | None = None


@dataclasses.dataclass(kw_only=True)
class SelectionCandidate:
    """A candidate of `auto` (bundler.variants.select; for a bundle of several sessions, a
    combination of their variants named "encoder=fp32,decoder=int8"): its size, whether it kept
    the budget (`budget` says why not, or how it did), whether it passed in the browser, its
    accuracy (kept here, since a candidate that does not ship leaves `variants`), its
    steady-state ms per run where timed, and whether it ships."""

    name: str
    bytes: int
    within_budget: bool
    budget: str
    browser_verified: bool
    accuracy: Accuracy | None = None
    wasm_ms: float | None = None
    webgpu_ms: float | None = None
    # a combination of several sessions' variants (a speech model's), timed natively: its
    # transcription of the check audio in ms, onnxruntime CPU on one thread
    native_ms: float | None = None
    chosen: bool


@dataclasses.dataclass
class Selection:
    mode: str
    budget: str
    chosen: str  # the default (the WASM one when default_variant is a map per EP)
    candidates: list[SelectionCandidate]
    objective: str | None = None  # "balanced", "speed" or "size"
    speed: SpeedRecord | None = None  # how the candidates were timed, or why they were not
    note: str | None = None  # why the data given cannot show the budget, when it cannot


@dataclasses.dataclass
class Task:
    """What the task API (classify, detect, stream) needs: bundler.tasks.spec's settings,
    resolved against the model. The numeric preprocessing (scale, mean/std, channel order,
    layout) is in the shipped graph already; it is recorded for the reader."""

    kind: str  # a name in bundler.tasks.kinds.registry, not generic
    input: str
    output: str
    size: list[int] | None = None  # [height, width] of the image the graph takes
    resize: Literal["stretch", "letterbox", "center-crop"] | None = None
    filter: Literal["bilinear", "nearest", "antialias", "cv2-linear", "pil-bilinear"] | None = None
    pad_value: int | None = None
    placement: Literal["centre", "top-left"] | None = None
    letterbox_order: Literal["resize-then-pad", "pad-then-resize"] | None = None
    crop_fraction: float | None = None
    layout: Literal["NCHW", "NHWC"] | None = None
    channels: Literal["RGB", "BGR"] | None = None
    scale: float | None = None
    mean: list[float] | None = None
    std: list[float] | None = None
    labels: list[str] | None = None
    softmax: bool | None = None
    top_k: int | None = None
    score_threshold: float | None = None
    iou_threshold: float | None = None
    max_detections: int | None = None
    output_layout: Literal["yolov8", "yolov5", "nms-inside"] | None = None
    nms: Literal["per-class", "class-agnostic"] | None = None
    sample_rate: int | None = None
    chunk_size: int | None = None
    context_size: int | None = None  # samples of the previous chunk given before each chunk
    state: dict[str, str] | None = None  # state input -> the output fed back into it
    sample_rate_input: str | None = None  # an int64 input given the sample rate
    # feature-extraction ("model": the output is one vector per text, pooled in the graph)
    pooling: Literal["mean", "cls", "max", "last", "model", "none"] | None = None
    normalize: bool | None = None  # feature-extraction: rows of length 1
    max_length: int | None = None  # text: tokens kept per text
    activation: Literal["softmax", "sigmoid"] | None = None  # text-classification's scores
    files: dict[str, str] | None = None  # text: tokenizer.json, config.json, ... -> bundle path


@dataclasses.dataclass(kw_only=True)
class OutputFingerprint:
    """One output of a fingerprint: its dims, evenly spaced samples (null where not finite) and
    the sums of its finite values."""

    dims: list[int]
    sample: list[float | None]
    sum: float
    abs_sum: float
    nonfinite: int = 0  # values NaN or infinite (absent: older builds)


@dataclasses.dataclass(kw_only=True)
class Fingerprint:
    """A variant's `reference`: a compact record of its native outputs at build time
    (bundler.verify.reference.fingerprint), so `bundle test` notices a model file that changed."""

    seed: int = 0  # of the generated inputs (absent: older builds, 0)
    requested_dims: dict[str, int] = dataclasses.field(default_factory=dict)  # --dim
    dims: dict[str, int]  # the sizes it ran at
    outputs: dict[str, OutputFingerprint]  # per output ("CASE/NAME" for an If-steered case)
    inputs: str | None = None  # sha256 of the user's inputs it ran on (None: generated ones)
