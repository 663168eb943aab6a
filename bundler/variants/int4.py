"""int4: weight-only 4-bit blocks for MatMul weights (onnxruntime's contrib op MatMulNBits, which
both its WASM and WebGPU EPs implement), and by option the token embedding's Gather
(GatherBlockQuantized). Block size, symmetry, accuracy level and whether the LM head and the
embedding are quantized come from `--int4` (bundler/variants/int4_options.py).

format=per-ep makes two graphs over one data file of weights: the int8 form for WASM (the
variant's file) and the qdq form for WebGPU (VariantResult.graphs), whose DequantizeLinear reads
the int8 form's float16 block scales through a Cast that onnxruntime folds at load (both forms:
bundler/variants/int4_int8.py)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable
from pathlib import Path

from onnx import (
    GraphProto,
    ModelProto,
    NodeProto,
    TensorProto,
    helper,
    numpy_helper,
    version_converter,
)
from onnxruntime.quantization import QuantFormat
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

from bundler.bundle.external import StreamedWeights, save_sharing
from bundler.bundle.modelio import load_tensor, read_model, save_model, walk_nodes
from bundler.bundle.records import Int4Settings
from bundler.errors import QuantizeError, first_line
from bundler.variants.int4_int8 import int8_compute, share_scales
from bundler.variants.int4_options import PER_EP_FORMS
from bundler.variants.spec import Job, KindSpec
from bundler.variants.tools import (
    FOLD_DEQUANTIZE,
    attribute,
    drop_repeated_initializers,
    fresh_name,
    graphs_of,
    lift_branch_weights,
    name_nodes,
    quiet,
)

# 4-bit DequantizeLinear blocks need opset 21. The quantizer raises an older model's opset import
# without converting its nodes, which breaks those whose form changed since (ReduceMean's axes
# became an input at 18: a Llama/Qwen2 RMSNorm), so the model is converted first.
QDQ_OPSET = 21
# A large model's float32 weights read per quantizer pass (the rest stay on disk): the peak
# memory of its int4 build is about this plus the blocks made so far of the weight being read.
BATCH_BYTES = 256 * 2**20


def _at_qdq_opset(model: ModelProto, name: str) -> ModelProto:
    current = next((entry.version for entry in model.opset_import
                    if entry.domain in ("", "ai.onnx")), QDQ_OPSET)
    if current >= QDQ_OPSET:
        return model
    try:
        return version_converter.convert_version(model, QDQ_OPSET)
    except Exception as error:
        raise QuantizeError(f"int4 format=qdq needs opset {QDQ_OPSET}, and onnx could not convert"
                            f" {name} from opset {current} ({first_line(error, typed=True)});"
                            " try --int4 format=nbits") from None


def _token_embedding(model: ModelProto) -> tuple[list[str], list[str], int | None]:
    """The Gather nodes of the token embedding (the largest constant float [V, H] table that a
    Gather reads rows of; position tables are smaller), those of other tables, and V, the
    vocabulary."""
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    tables: dict[str, list[str]] = {}
    for node in walk_nodes(model.graph):  # a merged decoder's are in its If branches
        table = weights.get(node.input[0]) if node.op_type == "Gather" else None
        if table is not None and table.data_type == TensorProto.FLOAT and len(table.dims) == 2:
            tables.setdefault(table.name, []).append(node.name)
    if not tables:
        return [], [], None
    largest = max(tables, key=lambda name: weights[name].dims[0])
    others = [node for name, nodes in tables.items() if name != largest for node in nodes]
    return tables[largest], others, int(weights[largest].dims[0])


def gemms_as_matmuls(model: ModelProto) -> int:
    """Rewrite each Gemm of a constant float32 weight (GPT-2's Conv1D, Linear layers exported
    as Gemm) as MatMul + Add, the form MatMulNBits replaces; a transB weight is stored
    transposed. Returns how many were rewritten."""
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    taken = {node.name for node in walk_nodes(model.graph)}
    # innermost first: rewriting a graph's node list copies its nodes, subgraphs included
    return sum(_gemms_as_matmuls(graph, model.graph, weights, taken)
               for graph in reversed(list(graphs_of(model.graph))))


def _gemms_as_matmuls(graph: GraphProto, main: GraphProto, weights: dict[str, TensorProto],
                      taken: set[str]) -> int:
    """gemms_as_matmuls in one graph (`main`'s initializers, which `weights` holds, are those of
    the model; a transposed copy goes there, made once for every graph that reads it)."""
    nodes, rewritten = [], 0
    for node in graph.node:
        weight = weights.get(node.input[1]) if node.op_type == "Gemm" else None
        if (weight is None or weight.data_type != TensorProto.FLOAT or len(weight.dims) != 2
                or attribute(node, "transA", 0) or attribute(node, "alpha", 1.0) != 1.0
                or attribute(node, "beta", 1.0) != 1.0):
            nodes.append(node)
            continue
        name = weight.name
        if attribute(node, "transB", 0):
            name = f"{weight.name}_transposed"
            if name not in weights:
                weights[name] = numpy_helper.from_array(numpy_helper.to_array(weight).T.copy(),
                                                        name)
                main.initializer.append(weights[name])
        bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
        product = f"{node.output[0]}_matmul" if bias else node.output[0]
        nodes.append(helper.make_node("MatMul", [node.input[0], name], [product],
                                      name=fresh_name(f"{node.name}_MatMul", taken)))
        if bias:
            nodes.append(helper.make_node("Add", [product, bias], [node.output[0]],
                                          name=fresh_name(f"{node.name}_Add", taken)))
        rewritten += 1
    if rewritten:
        del graph.node[:]
        graph.node.extend(nodes)
    return rewritten


def hoist_dequantize(model: ModelProto) -> int:
    """Move each DequantizeLinear of constant int4 blocks out of the subgraphs into the main
    graph, once per output (the two If branches of a merged decoder make the same one); how many
    were moved. In a branch, onnxruntime fuses DequantizeLinear + MatMul into MatMulNBits,
    looks for the blocks among the branch's own initializers, and fails at the first run
    ("Missing required weight"), even with session.disable_quant_qdq; out of the branch it folds
    them into float weights at load, as in a graph without branches."""
    constants = {tensor.name for tensor in model.graph.initializer}
    hoisted: dict[str, NodeProto] = {}
    for graph in reversed(list(graphs_of(model.graph))[1:]):  # innermost first (see above)
        kept = []
        for node in graph.node:
            if node.op_type == "DequantizeLinear" and all(
                    name in constants for name in node.input if name):
                hoisted.setdefault(node.output[0], node)
            else:
                kept.append(node)
        if len(kept) != len(graph.node):
            del graph.node[:]
            graph.node.extend(kept)
    if hoisted:  # first: the graph stays in topological order
        nodes = [*hoisted.values(), *model.graph.node]
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    return len(hoisted)


def _read(model: ModelProto, names: Iterable[str], base_dir: Path) -> None:
    """Read the named initializers (of any graph) that are still in external data."""
    wanted = set(names)
    for graph in graphs_of(model.graph):
        for tensor in graph.initializer:
            if tensor.name in wanted and tensor.data_location == TensorProto.EXTERNAL:
                load_tensor(tensor, base_dir)


def _weights_of(model: ModelProto, nodes: set[str]) -> set[str]:
    """The constant each of the named MatMuls (input 1) and Gathers (input 0) reads."""
    return {node.input[0 if node.op_type == "Gather" else 1]
            for node in walk_nodes(model.graph) if node.name in nodes}


def _batches(model: ModelProto, nodes: list[str], limit: int) -> list[set[str]]:
    """`nodes` (MatMuls and Gathers, by name) in groups whose weights total about `limit` bytes
    at most, the nodes reading one weight (a merged decoder's two branches) always together."""
    weights = {tensor.name: tensor for graph in graphs_of(model.graph)
               for tensor in graph.initializer}
    wanted = set(nodes)
    readers: dict[str, set[str]] = {}
    for node in walk_nodes(model.graph):
        if node.name in wanted:
            readers.setdefault(node.input[0 if node.op_type == "Gather" else 1], set()).add(
                node.name)
    batches: list[set[str]] = []
    used = limit
    for name, group in readers.items():
        size = 4 * math.prod(weights[name].dims)
        if used + size > limit:
            batches.append(set())
            used = 0
        batches[-1] |= group
        used += size
    return batches


def make(job: Job) -> None:
    options = job.int4
    block = options.block_size
    weightless = job.weightless  # a large model: its weights are read a batch at a time
    model = read_model(job.src) if weightless is None else weightless
    # int8: the qdq form, then int8_compute; per-ep: both, one graph each
    qdq = options.format in ("qdq", "int8", "per-ep")
    requantize = options.format in ("int8", "per-ep")
    if requantize and weightless is not None:
        raise QuantizeError(f"int4 format={options.format} is not made from a model past 2 GB"
                            f" of weights ({job.src.name}); use --int4 format=qdq")
    if qdq:
        model = _at_qdq_opset(model, job.src.name)
    name_nodes(model)
    if weightless is not None:  # a transposed Gemm weight is rewritten from its values
        for node in walk_nodes(model.graph):
            if node.op_type == "Gemm":
                _read(model, node.input[1:2], job.src.parent)
    lift_branch_weights(model)
    gemms = gemms_as_matmuls(model)
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    gathers, other_gathers, vocabulary = _token_embedding(model)
    outputs = {value.name for value in model.graph.output}
    eligible, skipped, heads = [], [], []
    for node in walk_nodes(model.graph):
        if node.op_type != "MatMul":
            continue
        weight = weights.get(node.input[1])
        if (
            weight is None
            or weight.data_type != TensorProto.FLOAT
            or len(weight.dims) != 2
            or weight.dims[0] % block != 0
        ):
            skipped.append(node.name)
        elif outputs & set(node.output) or weight.dims[1] == vocabulary:  # the LM head
            heads.append(node.name)
            (eligible if options.lm_head else skipped).append(node.name)
        else:
            eligible.append(node.name)
    if not eligible:
        raise QuantizeError(
            f"int4 is not applicable to {job.src.name}: it has no MatMul or Gemm with a constant"
            f" float32 [K, N] weight whose K is a multiple of {block}"
            + (" (the LM head is kept float: --int4 lm_head=false)" if heads else "")
            + "; use int8-weights instead"
        )
    gathers = gathers if options.embeddings else []
    # the quantizer takes every Gather of a constant table unless excluded by name; it writes
    # GatherBlockQuantized in its QOperator form only, so with qdq the table is a second pass
    passes = [(("MatMul",), QuantFormat.QDQ), (("Gather",), QuantFormat.QOperator)] if qdq else [
        (("MatMul", "Gather"), QuantFormat.QOperator)]
    passes = [(op_types, quant_format, {*(eligible if "MatMul" in op_types else []),
                                        *(gathers if "Gather" in op_types else [])})
              for op_types, quant_format in passes if "MatMul" in op_types or gathers]
    with contextlib.ExitStack() as stack:
        streamed = None if weightless is None else stack.enter_context(
            StreamedWeights(model, job.dst, job.src.parent))
        # a large model's weights are quantized a batch at a time, the rest of the graph
        # excluded, and each batch's blocks written out before the next batch is read
        batches = [(op_types, quant_format, batch)
                   for op_types, quant_format, taken in passes
                   for batch in ([taken] if streamed is None
                                 else _batches(model, taken, BATCH_BYTES))]
        for index, (op_types, quant_format, batch) in enumerate(batches):
            if streamed is not None:
                _read(model, _weights_of(model, batch), job.src.parent)
            quantizer = MatMulNBitsQuantizer(
                model,
                bits=4,
                block_size=block,
                is_symmetric=options.symmetric,
                accuracy_level=options.accuracy_level or None,
                nodes_to_exclude=(skipped + other_gathers if streamed is None else
                                  sorted({n.name for n in walk_nodes(model.graph)} - batch)),
                op_types_to_quantize=tuple(op for op in op_types if op == "MatMul" or gathers),
                quant_axes=(("MatMul", 0), ("Gather", 1)),
                quant_format=quant_format,
            )
            with quiet():
                quantizer.process()
            model = quantizer.model.model
            drop_repeated_initializers(model)
            if streamed is not None:  # what later batches read stays
                later = set().union(*(nodes for *_, nodes in batches[index + 1:]))
                streamed.offload(model, _weights_of(model, later))
        hoisted = hoist_dequantize(model) if qdq else 0
        webgpu = None
        if options.format == "per-ep":  # the qdq form, before int8_compute rewrites the model
            webgpu = ModelProto()
            webgpu.CopyFrom(model)
        requantized = int8_compute(model) if requantize else 0
        if webgpu is not None:
            share_scales(webgpu, model)
            graph = job.dst.with_name(f"{job.dst.stem}.webgpu{job.dst.suffix}")
            save_sharing(model, job.dst, {graph: webgpu})
            job.result.graphs = {"webgpu": graph}
        elif streamed is None:
            save_model(model, job.dst)
        else:
            streamed.finish(model)
    if qdq:
        # Left as is, onnxruntime fuses DequantizeLinear + MatMul back into MatMulNBits, which
        # decodes at 0.10-0.15x fp32 on WASM; folded into float weights at load it runs at
        # 0.97x (docs/benchmarks.md). Native sessions open it the same way, so tokens agree.
        # WebGPU runs it as it is: folding there would put fp32's weights on the GPU. Except
        # where the blocks were read from inside subgraphs (a merged decoder's If branches):
        # hoisted out of them (hoist_dequantize), unfolded they would be dequantized on every
        # run, so they are folded there too (4-bit on the wire, float32 on the GPU).
        # format=int8 folds on both: WebGPU has no DynamicQuantizeMatMul and runs it on the CPU,
        # where it needs its int8 weight as a constant. format=per-ep gives WebGPU the qdq form.
        job.result.session_config = {"wasm": dict(FOLD_DEQUANTIZE)}
        if hoisted or (requantized and options.format == "int8"):
            job.result.session_config["webgpu"] = dict(FOLD_DEQUANTIZE)
    ops = {"qdq": "DequantizeLinear", "int8": "com.microsoft.DynamicQuantizeMatMul"}
    job.result.settings = Int4Settings(
        # per-ep: each EP's form's op, "wasm: com.microsoft.DynamicQuantizeMatMul, webgpu: ..."
        op=", ".join(f"{ep}: {ops[form]}" for ep, form in PER_EP_FORMS.items())
        if options.format == "per-ep" else ops.get(options.format, "com.microsoft.MatMulNBits"),
        bits=4,
        block_size=block,
        symmetric=options.symmetric,
        matmuls_int4=len(eligible),
        matmuls_float32=len(skipped),
        accuracy_level=options.accuracy_level,
        lm_head=options.lm_head and bool(heads),
        embeddings=len(gathers),
        format=options.format,
    )
    head = ("; the LM head in 4 bits" if heads and options.lm_head
            else "; the LM head kept float32" if heads else "")
    table = ("; token embedding in 4 bits" if gathers
             else "; token embedding kept float32" if vocabulary else "")
    if gemms:
        job.note(f"{gemms} Gemm nodes rewritten as MatMul + Add for MatMulNBits")
    job.note(f"{len(eligible)} MatMul weights as 4-bit blocks of {block}; {len(skipped)} MatMuls"
             f" stay float32{head}{table}")
    if requantized:
        job.note(f"{requantized} MatMuls compute in int8 (DynamicQuantizeMatMul) on weights"
                 " requantized from the blocks at load"
                 + ("; on WebGPU, a graph of its own runs them as DequantizeLinear + MatMul over"
                    " the same weights" if options.format == "per-ep" else ""))


KIND = KindSpec(
    name="int4",
    keeps_float="compute, weights other than eligible MatMuls'",
    needs_calibration=False,
    quantized=True,
    advice="try int8-weights",
    make=make,
    streamed=True,
)
