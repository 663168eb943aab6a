"""int8: dynamic quantization of Conv, MatMul and Gather (onnxruntime's quantize_dynamic), with
per-channel or per-tensor weights, whichever measures better on the feeds."""

from __future__ import annotations

import tempfile
from pathlib import Path

from onnxruntime.quantization import QuantType, quantize_dynamic

from bundler.bundle.modelio import copy_model, read_model, walk_nodes
from bundler.bundle.records import Int8Settings
from bundler.variants.metrics import measure
from bundler.variants.spec import Job, KindSpec
from bundler.variants.tools import is_large, quiet

# Attention/LSTM would become com.microsoft CPU-only ops.
_OP_TYPES = ("Conv", "MatMul", "Gather")


def make(job: Job) -> None:
    graph = read_model(job.src, load_weights=False).graph
    has_conv = any(node.op_type == "Conv" for node in walk_nodes(graph))
    # onnxruntime's ConvInteger only has a uint8 x uint8 kernel
    weight_type = QuantType.QUInt8 if has_conv else QuantType.QInt8

    def quantize(per_channel: bool, dst: Path) -> None:
        with quiet():
            quantize_dynamic(
                job.src,
                dst,
                per_channel=per_channel,
                weight_type=weight_type,
                op_types_to_quantize=list(_OP_TYPES),
                use_external_data_format=is_large(job.src),
                # a merged decoder's layers are inside an If's branches (use_cache_branch):
                # without this, its int8 file was its fp32 one
                extra_options={"EnableSubgraph": True},
            )

    per_channel = True
    quantize(True, job.dst)
    if job.calibration:
        with tempfile.TemporaryDirectory(prefix="bundler-int8-") as tmp:
            per_tensor_path = Path(tmp) / job.dst.name
            quantize(False, per_tensor_path)
            channel = measure(job.src, job.dst, job.calibration).cosine
            tensor = measure(job.src, per_tensor_path, job.calibration).cosine
            per_channel = channel > tensor
            if not per_channel:
                copy_model(per_tensor_path, job.dst)
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


KIND = KindSpec(
    name="int8",
    keeps_float=f"ops other than {', '.join(_OP_TYPES)}",
    needs_calibration=False,
    quantized=True,
    advice="try int8-weights",
    make=make,
)
