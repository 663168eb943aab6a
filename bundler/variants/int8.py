"""int8: dynamic quantization of Conv, MatMul and Gather (onnxruntime's quantize_dynamic), with
per-channel or per-tensor weights, whichever measures better on the feeds.

From a model past 2 GB (Job.weightless) the quantizer takes the graph read without its weights
and reads each weight it quantizes from the source's data files when it gets to it; the model
holds the int8 weights it made (a quarter of the float32 bytes), never the float32 ones, and
StreamedWeights writes them, then copies the float weights it left (norms, biases) a weight at a
time.

A token table that a tied LM head reads through a Transpose is stored first, once, as int8 per
row behind a DequantizeLinear folded at load (int8_tied): the lookup and the head read it as
float, where quantize_dynamic made two int8 tables of it."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import (
    QuantType,
    base_quantizer,
    onnx_quantizer,
    quant_utils,
    quantize_dynamic,
)
from onnxruntime.quantization.onnx_quantizer import ONNXQuantizer
from onnxruntime.quantization.quant_utils import (
    QuantizationMode,
    add_infer_metadata,
    update_opset_version,
)

from bundler.bundle.external import StreamedWeights, infer_shapes
from bundler.bundle.modelio import (
    load_tensor,
    move_model,
    read_model,
    read_values,
    save_model,
    walk_nodes,
)
from bundler.bundle.records import Int8Settings
from bundler.variants.int8_tied import store_tied_tables, tables_first
from bundler.variants.int8_weights import SESSION_CONFIG
from bundler.variants.metrics import measure
from bundler.variants.spec import Job, KindSpec
from bundler.variants.tools import FOLD_DEQUANTIZE, attribute, is_large, quiet

# Attention/LSTM would become com.microsoft CPU-only ops.
_OP_TYPES = ("Conv", "MatMul", "Gather")
# a merged decoder's layers are inside an If's branches (use_cache_branch): without
# EnableSubgraph, its int8 file was its fp32 one
_EXTRA_OPTIONS = {"EnableSubgraph": True}
# The quantizer's modules that read a weight's values and reload the model to infer its shapes
# (each imported tensor_proto_to_array and save_and_reload_model_with_shape_infer by name).
_QUANTIZER_MODULES = (base_quantizer, onnx_quantizer, quant_utils)
_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)


def _with_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """What quantize_dynamic's load_model_with_shape_infer makes of a file (a copy with its
    shapes inferred and the quantizer's mark that they are), from the graph read without its
    weights: the weights in external data stay there."""
    inferred = infer_shapes(model)
    add_infer_metadata(inferred)
    return inferred


@contextlib.contextmanager
def _weights_left_on_disk(base_dir: Path) -> Iterator[None]:
    """Have the quantizer read a weight in external data from `base_dir` when it quantizes it
    (its own reader looks in the working directory), into a copy, so the model's tensor stays
    on disk; and infer shapes without the weights where it saves the model to a temporary
    folder and loads it back whole (after rewriting Gemms, after raising the opset)."""
    read = quant_utils.tensor_proto_to_array
    reload = quant_utils.save_and_reload_model_with_shape_infer

    def values(initializer: onnx.TensorProto) -> np.ndarray:
        if initializer.data_type not in _FLOATS:
            return read(initializer)  # its error: it quantizes float weights only
        return read_values(initializer, base_dir)

    for module in _QUANTIZER_MODULES:
        module.tensor_proto_to_array = values
        module.save_and_reload_model_with_shape_infer = _with_shapes
    try:
        yield
    finally:
        for module in _QUANTIZER_MODULES:
            module.tensor_proto_to_array = read
            module.save_and_reload_model_with_shape_infer = reload


def _transposed_gemm_weights(model: onnx.ModelProto) -> set[str]:
    """The weights the quantizer transposes as it rewrites each Gemm as a MatMul (transB=1,
    alpha = beta = 1, transA=0), which it reads with onnx's own reader."""
    return {node.input[1] for node in walk_nodes(model.graph) if node.op_type == "Gemm"
            and attribute(node, "transB", 0) == 1 and attribute(node, "transA", 0) == 0
            and attribute(node, "alpha", 1.0) == attribute(node, "beta", 1.0) == 1.0}


def _quantize_streamed(model: onnx.ModelProto, source_dir: Path, dst: Path, per_channel: bool,
                       weight_type: QuantType) -> None:
    """quantize_dynamic's steps (onnxruntime 1.32: shapes inferred, the opset raised for the
    weight type, ONNXQuantizer, a topological sort) on `model`, read without its weights from
    `source_dir`, which is left as it was; written to `dst` with StreamedWeights. (The tests
    compare the result with quantize_dynamic's from memory, value for value: a change in its
    steps shows there.)"""
    with _weights_left_on_disk(source_dir):
        inferred = update_opset_version(_with_shapes(model), weight_type)
        # the quantizer reads these whole to transpose them, with onnx's reader (which looks in
        # the working directory): read now, they are held in float32 as from memory (a model of
        # Gemm layers keeps them all; LLM exports have MatMuls)
        transposed = _transposed_gemm_weights(inferred)
        for tensor in onnx.external_data_helper._get_initializer_tensors(inferred):
            if tensor.name in transposed and tensor.data_location == onnx.TensorProto.EXTERNAL:
                load_tensor(tensor, source_dir)
        quantizer = ONNXQuantizer(  # the arguments quantize_dynamic gives it
            inferred, per_channel, False, QuantizationMode.IntegerOps, False, weight_type,
            QuantType.QUInt8, None, [], [], list(_OP_TYPES),
            {**_EXTRA_OPTIONS, "MatMulConstBOnly": True},  # quantize_dynamic's default
        )
        quantizer.quantize_model()
    quantizer.model.topological_sort()
    made = quantizer.model.model
    with StreamedWeights(made, dst, source_dir) as streamed:
        streamed.offload(made)
        streamed.finish(made)


def make(job: Job) -> None:
    # beside dst, as make_variant's scratch folder (a large model's candidate is moved)
    with tempfile.TemporaryDirectory(prefix="bundler-int8-", dir=job.dst.parent) as tmp:
        _make(job, Path(tmp))


def _make(job: Job, scratch: Path) -> None:
    model = read_model(job.src) if job.weightless is None else job.weightless
    has_conv = any(node.op_type == "Conv" for node in walk_nodes(model.graph))
    # onnxruntime's ConvInteger only has a uint8 x uint8 kernel
    weight_type = QuantType.QUInt8 if has_conv else QuantType.QInt8
    model, tables = store_tied_tables(model, job.src.parent)
    # the DequantizeLinear of a tied table folds into its float table at load, on WASM and in
    # every native run (the checks' and the per-channel comparison's); WebGPU runs it as it is
    # (int8-weights' config: float32 compute wherever onnxruntime fuses it with a MatMul)
    config = {"wasm": dict(FOLD_DEQUANTIZE), "webgpu": dict(SESSION_CONFIG)} if tables else None
    source = job.src
    if tables and job.weightless is None:
        source = scratch / job.src.name
        save_model(model, source)

    def quantize(per_channel: bool, dst: Path) -> None:
        with quiet():
            if job.weightless is not None:
                _quantize_streamed(model, job.src.parent, dst, per_channel, weight_type)
            else:
                quantize_dynamic(
                    source,
                    dst,
                    per_channel=per_channel,
                    weight_type=weight_type,
                    op_types_to_quantize=list(_OP_TYPES),
                    use_external_data_format=is_large(source),
                    extra_options=dict(_EXTRA_OPTIONS),
                )
        if tables:
            tables_first(dst, tables)

    per_channel = True
    quantize(True, job.dst)
    if job.calibration:
        per_tensor_path = scratch / "per-tensor" / job.dst.name
        per_tensor_path.parent.mkdir()
        quantize(False, per_tensor_path)
        native = (config or {}).get("wasm")
        channel = measure(job.src, job.dst, job.calibration, config=native).cosine
        tensor = measure(job.src, per_tensor_path, job.calibration, config=native).cosine
        per_channel = channel > tensor
        if not per_channel:
            move_model(per_tensor_path, job.dst)
        job.note(
            f"per-channel weights: cosine {channel:.6g}, per-tensor: {tensor:.6g};"
            f" kept {'per-channel' if per_channel else 'per-tensor'}"
        )
    else:
        job.note("no feeds given, so per-channel weights were used without comparing")
    if has_conv:
        job.note("uint8 weights: onnxruntime has no int8 ConvInteger")
    job.result.settings = Int8Settings(
        mode="dynamic",
        weight_type=weight_type.name,
        per_channel=per_channel,
        op_types=list(_OP_TYPES),
    )
    job.result.session_config = config
    for table, stored in tables.items():
        job.note(f"tied LM head: one int8 table ({table}, {stored / 1e6:.1f} MB, a scale per"
                 " row) that the embedding and the head read as float, folded at load on WASM")


KIND = KindSpec(
    name="int8",
    keeps_float=f"ops other than {', '.join(_OP_TYPES)}",
    needs_calibration=False,
    quantized=True,
    advice="try int8-weights",
    make=make,
    streamed=True,
    takes_tied_heads=True,  # int8_tied
)
