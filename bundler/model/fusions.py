"""Transformer fusions for a text encoder's graph, kept to the ops both browser EPs run.

onnxruntime's transformer optimiser (python fusions only, opt_level 0: its native levels emit
CPU-only ops) rewrites a BERT-style encoder's attention blocks into com.microsoft
MultiHeadAttention (not Attention, whose packed QKV weight the int8 variant's MatMul quantizer
would leave in float32: MultiHeadAttention keeps the Q, K and V MatMuls outside it), the
residual adds and LayerNormalizations into SkipLayerNormalization, and erf-Gelu into Gelu. Which
model it is comes from the export folder's config.json (model_type, num_attention_heads,
hidden_size). Fusions whose op onnxruntime-web's WebGPU EP lacks (EmbedLayerNormalization,
BiasGelu) are turned off, and a result holding any other op that is not supported on both the
WASM and the WebGPU EP (bundler/data/ops-<version>.json) is refused. The padding mask reaches
MultiHeadAttention as an additive attention_bias (B, N, S, T), not as key_padding_mask:
onnxruntime-web 1.31.1's WebGPU MultiHeadAttention refuses key_padding_mask ("not implemented for
webgpu", found by the build's browser check), and its kernel reads the bias at the scores' own
index, so the bias is expanded to the full shape rather than broadcast over heads and queries.
Each attention's Q, K and V MatMuls then become one MatMul of the three weights side by side and a
Split. A bundle that ships WebGPU gets no attention fusion, only SkipLayerNormalization and Gelu:
that MultiHeadAttention, given the bias, answers right up to 24 tokens and wrong from 32 (on
SwiftShader, with or without the bias; the unfused graph is right), which the build's task check
on padded check sentences found.
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
from bundler.model.outputs import beyond_tolerance

CONTRIB = "com.microsoft"
# config.json model_type -> the optimiser's model type. Only encoders: the GPT-2 fusions need the
# past/present layout the merged decoder does not keep (issue 32's decoder is left as it is).
ENCODERS = {"bert": "bert", "roberta": "bert", "xlm-roberta": "bert", "camembert": "bert",
            "distilbert": "bert", "mpnet": "bert", "electra": "bert"}


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


def attention_refused(eps: Sequence[str]) -> str:
    """Why a bundle shipping `eps` gets no attention fusion; "" when it does."""
    if "webgpu" in eps:
        return ("no attention fusion: the bundle ships WebGPU, whose MultiHeadAttention"
                " (onnxruntime-web 1.31.1) answers wrong from 32 tokens")
    return ""


def fuse_encoder(model: onnx.ModelProto, shape: tuple[str, int, int], *,
                 attention: bool = True) -> tuple[onnx.ModelProto, str]:
    """The fused model (`model` is left as it is) and a detail naming the fused ops it holds;
    ValueError when it holds an op one browser EP cannot run, nothing was fused, or its outputs
    differ. `attention` False: SkipLayerNormalization and Gelu only."""
    from onnxruntime.transformers.fusion_options import AttentionMaskFormat, FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    model_type, heads, hidden = shape
    options = FusionOptions(model_type)
    options.enable_embed_layer_norm = False  # no WebGPU kernel
    options.enable_bias_gelu = False  # no WebGPU kernel
    options.enable_attention = attention
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
    if attention and not counts.get("MultiHeadAttention") or not counts:
        raise ValueError(f"no attention block matched {model_type}'s pattern ({heads} heads,"
                         f" hidden {hidden})")
    if attention:
        _mask_as_bias(fused.graph)
        _merge_qkv(fused)
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


# What a padded key adds to its scores: onnxruntime's default mask_filter_value, which (unlike
# the exporter's float32 minimum) float16 holds, and exp() of it is 0 all the same.
MASKED = -10000.0


def _mask_as_bias(graph: onnx.GraphProto) -> None:
    """Rewrite, in place, each MultiHeadAttention's key_padding_mask (B, T) into an attention_bias
    (B, N, T, T) made once per mask and head count: 0 where the mask is 1, MASKED where it is 0."""
    from onnx import TensorProto, helper, numpy_helper

    made: dict[tuple[str, int], str] = {}
    index = -1
    while (index := index + 1) < len(graph.node):
        node = graph.node[index]
        if node.op_type != "MultiHeadAttention" or len(node.input) < 5 or not node.input[4]:
            continue
        inputs = [*node.input, "", ""][:max(6, len(node.input))]
        if inputs[5]:
            raise ValueError(f"{node.name} has both a key_padding_mask and an attention_bias")
        heads = next(helper.get_attribute_value(a) for a in node.attribute if a.name == "num_heads")
        key = (inputs[4], heads)
        if key not in made:
            name = f"{inputs[4]}_bias_{heads}"
            made[key] = f"{name}/expanded"
            constants = {"one": np.array(1.0, np.float32), "masked": np.array(MASKED, np.float32),
                         "rows": np.array([0, 1, 1, -1], np.int64),
                         "start": np.array([1], np.int64), "end": np.array([2], np.int64),
                         "heads": np.array([1, heads], np.int64), "last": np.array([1], np.int64)}
            graph.initializer.extend(numpy_helper.from_array(value, f"{name}/{part}")
                                     for part, value in constants.items())
            chain = [  # (op, inputs, output, attributes); names relative to `name`
                ("Cast", [inputs[4]], "float", {"to": TensorProto.FLOAT}),
                ("Sub", ["one", "float"], "inverse", {}),
                ("Mul", ["inverse", "masked"], "keys", {}),
                ("Reshape", ["keys", "rows"], "b11t", {}),  # (B, 1, 1, T)
                ("Shape", [inputs[4]], "shape", {}),
                ("Slice", ["shape", "start", "end"], "t", {}),
                ("Concat", ["heads", "t", "last"], "to", {"axis": 0}),  # [1, N, T, 1]
                ("Expand", ["b11t", "to"], "expanded", {}),
            ]
            local = {part for _, _, part, _ in chain} | set(constants)
            for offset, (op, ins, out, attrs) in enumerate(chain):
                graph.node.insert(index + offset, helper.make_node(
                    op, [f"{name}/{i}" if i in local else i for i in ins], [f"{name}/{out}"],
                    name=f"{name}/{op}", **attrs))
            index += len(chain)
            node = graph.node[index]
        inputs[4], inputs[5] = "", made[key]
        del node.input[:]
        node.input.extend(inputs)


def _merge_qkv(model: onnx.ModelProto) -> None:
    """Each MultiHeadAttention's Q, K and V MatMuls of one input and three weights, rewritten in
    place into one MatMul of the three weights side by side and a Split: one wider matrix product
    (and, in the int8 variant, one MatMulInteger) instead of three."""
    from onnx import helper, numpy_helper

    graph = model.graph
    weights = {t.name: t for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    readers = Counter(name for node in graph.node for name in node.input)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    dropped: set[str] = set()
    for node in list(graph.node):
        if node.op_type != "MultiHeadAttention" or len(node.input) < 3:
            continue
        matmuls = [producer.get(name) for name in node.input[:3]]
        if any(m is None or m.op_type != "MatMul" or m.input[1] not in weights
               or readers[m.output[0]] != 1 for m in matmuls) or len(
                {m.input[0] for m in matmuls}) != 1 or len({id(m) for m in matmuls}) != 3:
            continue
        arrays = [numpy_helper.to_array(weights[m.input[1]]) for m in matmuls]
        if any(a.ndim != 2 for a in arrays) or len({a.shape[0] for a in arrays}) != 1:
            continue
        name = f"{node.name or node.output[0]}/qkv"
        graph.initializer.append(numpy_helper.from_array(np.concatenate(arrays, axis=1),
                                                         f"{name}/weight"))
        widths = np.array([a.shape[1] for a in arrays], np.int64)
        split_inputs = [f"{name}/output"]
        split_attrs: dict[str, Any] = {"axis": -1}
        if opset >= 13:
            graph.initializer.append(numpy_helper.from_array(widths, f"{name}/widths"))
            split_inputs.append(f"{name}/widths")
        else:
            split_attrs["split"] = widths.tolist()
        at = min(list(graph.node).index(m) for m in matmuls)
        for m in matmuls:
            dropped.add(m.input[1])
            graph.node.remove(m)
        graph.node.insert(at, helper.make_node("MatMul", [matmuls[0].input[0], f"{name}/weight"],
                                               [f"{name}/output"], name=f"{name}/MatMul"))
        graph.node.insert(at + 1, helper.make_node("Split", split_inputs,
                                                   [m.output[0] for m in matmuls],
                                                   name=f"{name}/Split", **split_attrs))
    still_read = {name for node in graph.node for name in node.input}
    for tensor in [t for t in graph.initializer if t.name in dropped - still_read]:
        graph.initializer.remove(tensor)




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
        if (worst := beyond_tolerance(want, got)) is not None:
            raise ValueError(f"the fused graph's {value.name} differs by {worst:.3g}")
