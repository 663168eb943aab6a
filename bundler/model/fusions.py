"""Transformer fusions for a text encoder's graph, kept to the ops both browser EPs run.

onnxruntime's transformer optimiser (python fusions only, opt_level 0: its native levels emit
CPU-only ops) rewrites a BERT-style encoder's attention blocks into com.microsoft
MultiHeadAttention (not Attention, whose packed QKV weight the int8 variant's MatMul quantizer
would leave in float32: MultiHeadAttention keeps the Q, K and V MatMuls outside it), the
residual adds and LayerNormalizations into SkipLayerNormalization, and erf-Gelu into Gelu. Which
model it is comes from the export folder's config.json (model_type, num_attention_heads,
hidden_size). Fusions whose op onnxruntime-web's WebGPU EP lacks (EmbedLayerNormalization,
BiasGelu) are turned off, and a result holding any other op that is not supported on both the
WASM and the WebGPU EP (bundler/data/ops-<version>.json) is refused. A bundle that ships the
WebGPU EP is not fused at all: onnxruntime-web 1.31.1's WebGPU MultiHeadAttention refuses the
key_padding_mask input that a padded batch needs ("not implemented for webgpu"), found by the
build's browser check.
The fusions match patterns and trust config.json's sizes, so the result must also give the same
outputs as the graph before on a padded batch of token ids, or it is refused.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from bundler.bundle.modelio import walk_nodes
from bundler.model.opsupport import load_support

CONTRIB = "com.microsoft"
# config.json model_type -> the optimiser's model type. Only encoders: the GPT-2 fusions need the
# past/present layout the merged decoder does not keep (issue 32's decoder is left as it is).
ENCODERS = {"bert": "bert", "roberta": "bert", "xlm-roberta": "bert", "camembert": "bert",
            "distilbert": "bert", "mpnet": "bert", "electra": "bert"}


def unfused_eps(eps: Sequence[str]) -> str:
    """Why a bundle shipping `eps` is not fused; "" when it is."""
    if "webgpu" in eps:
        return ("the bundle ships WebGPU, whose MultiHeadAttention (onnxruntime-web 1.31.1) has no"
                " key_padding_mask")
    return ""


def encoder_shape(config: dict[str, Any] | None) -> tuple[str, int, int] | None:
    """(optimiser model type, heads, hidden size) of a config.json naming a supported encoder;
    None for any other model."""
    if not config or config.get("model_type") not in ENCODERS:
        return None
    heads = config.get("num_attention_heads", config.get("n_heads"))
    hidden = config.get("hidden_size", config.get("dim"))
    if not isinstance(heads, int) or not isinstance(hidden, int) or hidden % heads:
        return None
    return ENCODERS[config["model_type"]], heads, hidden


def fuse_encoder(model: onnx.ModelProto, shape: tuple[str, int, int]) -> tuple[onnx.ModelProto,
                                                                                 str]:
    """The fused model (`model` is left as it is) and a detail naming the fused ops it holds;
    ValueError when it holds an op one browser EP cannot run, nothing was fused, or its outputs
    differ."""
    from onnxruntime.transformers.fusion_options import AttentionMaskFormat, FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    model_type, heads, hidden = shape
    options = FusionOptions(model_type)
    options.enable_embed_layer_norm = False  # no WebGPU kernel
    options.enable_bias_gelu = False  # no WebGPU kernel
    options.use_multi_head_attention = True  # Q, K, V stay MatMuls (see the module's docstring)
    # A raw 0/1 mask: the mask-index form needs right padding and a ReduceSum the EPs differ on.
    options.attention_mask_format = AttentionMaskFormat.AttentionMask
    fused = optimize_model(copy.deepcopy(model), model_type=model_type, num_heads=heads,
                           hidden_size=hidden, optimization_options=options, opt_level=0,
                           only_onnxruntime=False).model
    counts = Counter(node.op_type for node in walk_nodes(fused.graph) if node.domain == CONTRIB)
    support = load_support()
    refused = sorted(op for op in counts if any(
        support.status(target, CONTRIB, op, 1) != "supported" for target in ("wasm", "webgpu")))
    if refused:
        raise ValueError(f"it made {', '.join(refused)}, which a browser EP cannot run")
    if not counts.get("MultiHeadAttention"):
        raise ValueError(f"no attention block matched {model_type}'s pattern ({heads} heads,"
                         f" hidden {hidden})")
    _check_same_outputs(model, fused, _vocab(model))
    return fused, ", ".join(f"{count} {op}" for op, count in sorted(counts.items()))


def typed(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every value's type and shape: the int8 quantizer needs them, and onnx's own
    inference (onnxslim's too) stops at contrib ops. onnxruntime's symbolic inference knows them."""
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    result = SymbolicShapeInference.infer_shapes(copy.deepcopy(model), auto_merge=True)
    if result is None:
        raise ValueError("onnxruntime's symbolic shape inference gave up")
    return result


TOLERANCE = 1e-3  # of the largest output value: fused kernels reorder float sums


def _vocab(model: onnx.ModelProto) -> int:
    """The rows of the largest 2-D weight a Gather reads: the token embedding's vocabulary."""
    weights = {t.name: t.dims for t in model.graph.initializer if len(t.dims) == 2}
    rows = [weights[node.input[0]][0] for node in walk_nodes(model.graph)
            if node.op_type == "Gather" and node.input[0] in weights]
    return int(max(rows, default=2))


def _feeds(model: onnx.ModelProto, vocab: int) -> dict[str, np.ndarray]:
    """Two rows of 8 tokens, the second padded after 5: what the fused mask handling must keep."""
    weights = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(0)
    mask = np.array([[1] * 8, [1] * 5 + [0] * 3], np.int64)
    known = {"input_ids": rng.integers(0, vocab, (2, 8)), "attention_mask": mask,
             "token_type_ids": np.zeros((2, 8), np.int64),
             "position_ids": np.tile(np.arange(8), (2, 1))}
    feeds = {}
    for value in model.graph.input:
        if value.name in weights:
            continue
        if value.name not in known:
            raise ValueError(f"it cannot check the fused graph: input {value.name} is not a"
                             " text encoder's")
        dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        feeds[value.name] = known[value.name].astype(dtype)
    return feeds


def _check_same_outputs(before: onnx.ModelProto, after: onnx.ModelProto, config_vocab: int
                        ) -> None:
    feeds = _feeds(before, config_vocab)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    runs = [ort.InferenceSession(m.SerializeToString(), options,
                                 providers=["CPUExecutionProvider"]).run(None, feeds)
            for m in (before, after)]
    for value, want, got in zip(before.graph.output, *runs, strict=True):
        worst = float(np.max(np.abs(np.asarray(got, np.float64) - want), initial=0.0))
        if worst > TOLERANCE * max(1.0, float(np.max(np.abs(want), initial=0.0))):
            raise ValueError(f"the fused graph's {value.name} differs by {worst:.3g}")
