"""int4: weight-only 4-bit blocks for MatMul weights (onnxruntime's contrib op MatMulNBits, which
both its WASM and WebGPU EPs implement)."""

from __future__ import annotations

from onnx import TensorProto
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

from bundler.bundle.modelio import read_model, save_model
from bundler.bundle.records import Int4Settings
from bundler.errors import QuantizeError
from bundler.variants.spec import Job, KindSpec
from bundler.variants.tools import name_nodes, quiet

_BLOCK = 32


def make(job: Job) -> None:
    model = read_model(job.src)
    name_nodes(model)
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    eligible, skipped = [], []
    for node in model.graph.node:
        if node.op_type != "MatMul":
            continue
        weight = weights.get(node.input[1])
        if (
            weight is not None
            and weight.data_type == TensorProto.FLOAT
            and len(weight.dims) == 2
            and weight.dims[0] % _BLOCK == 0
        ):
            eligible.append(node.name)
        else:
            skipped.append(node.name)
    if not eligible:
        raise QuantizeError(
            f"int4 is not applicable to {job.src.name}: it has no MatMul with a constant float32"
            f" [K, N] weight whose K is a multiple of {_BLOCK}; use int8-weights instead"
        )
    quantizer = MatMulNBitsQuantizer(
        model,
        bits=4,
        block_size=_BLOCK,
        is_symmetric=True,
        nodes_to_exclude=skipped,
        op_types_to_quantize=("MatMul",),
    )
    with quiet():
        quantizer.process()
    save_model(quantizer.model.model, job.dst)
    job.result.settings = Int4Settings(
        op="com.microsoft.MatMulNBits",
        bits=4,
        block_size=_BLOCK,
        symmetric=True,
        matmuls_int4=len(eligible),
        matmuls_float32=len(skipped),
    )
    job.note(f"{len(eligible)} MatMul weights as 4-bit blocks; {len(skipped)} MatMuls stay float32")


KIND = KindSpec(
    name="int4",
    keeps_float="compute, weights other than eligible MatMuls'",
    needs_calibration=False,
    quantized=True,
    advice="try int8-weights",
    make=make,
)
