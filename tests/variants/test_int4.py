"""int4: MatMulNBits for MatMul weights."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from bundler.bundle.external import INLINE_BELOW
from bundler.bundle.modelio import cpu_session, model_bytes, model_files, signature
from bundler.errors import QuantizeError
from bundler.variants.footprint import footprint
from bundler.variants.int4_options import Int4Options
from bundler.variants.metrics import measure
from bundler.variants.registry import make_variant
from bundler.verify.reference import native_reference
from tests import models
from tests.variants.helpers import as_large, feeds, ops, ratio


def test_int4_makes_matmulnbits(optimized: dict[str, Path], tmp_path: Path) -> None:
    dst = tmp_path / "int4.onnx"
    result = make_variant("int4", optimized["transformer"], dst)

    # 6 projections + head; q @ k^T and probs @ v have no constant weight
    assert ops(dst)["MatMulNBits"] == 7 and ops(dst)["MatMul"] == 2
    nbits = next(node for node in onnx.load(dst).graph.node if node.op_type == "MatMulNBits")
    attributes = {a.name: a.i for a in nbits.attribute}
    assert nbits.domain == "com.microsoft"
    assert attributes["bits"] == 4 and attributes["block_size"] == 32
    assert result.settings["matmuls_int4"] == 7 and result.settings["matmuls_float32"] == 2
    assert ratio(dst, optimized["transformer"]) <= 0.2
    metrics = measure(optimized["transformer"], dst, feeds("transformer"))
    assert 0.9 <= metrics.cosine < 0.999  # 4 bits is visibly lossy: the budget decides


def test_int4_names_unnamed_matmuls(tmp_path: Path) -> None:
    src = models.external_data(tmp_path)  # one unnamed MatMul, K = 64
    dst = tmp_path / "int4.onnx"
    make_variant("int4", src, dst)
    assert ops(dst) == Counter({"MatMulNBits": 1})


def test_int4_with_no_eligible_matmul(optimized: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(QuantizeError, match="no MatMul or Gemm with a constant .* multiple of 32"):
        make_variant("int4", optimized["odd_k"], tmp_path / "int4.onnx")


def test_int4_quantizes_a_gemm_head_and_leaves_convolutions(optimized: dict[str, Path],
                                                             tmp_path: Path) -> None:
    dst = tmp_path / "int4.onnx"
    result = make_variant("int4", optimized["cnn"], dst)
    assert ops(dst)["MatMulNBits"] == 1 and ops(dst)["Gemm"] == 0
    assert ops(dst)["Conv"] == ops(optimized["cnn"])["Conv"]
    assert result.notes[0] == "1 Gemm nodes rewritten as MatMul + Add for MatMulNBits"


def test_int4_settings_reach_the_graph_and_the_record(decoder: Path, tmp_path: Path) -> None:
    dst = tmp_path / "int4.onnx"
    options = Int4Options(block_size=64, symmetric=False, accuracy_level=4, embeddings=True)
    result = make_variant("int4", decoder, dst, int4=options)
    graph = onnx.load(dst).graph
    nbits = [node for node in graph.node if node.op_type == "MatMulNBits"]
    # GPT-2's 8 Conv1D Gemms (rewritten as MatMul + Add) and the LM head; q @ k^T, p @ v stay
    assert len(nbits) == 9 and ops(dst)["Gemm"] == 0 and ops(dst)["MatMul"] == 4
    for node in nbits:
        attributes = {a.name: a.i for a in node.attribute}
        assert attributes["block_size"] == 64 and attributes["accuracy_level"] == 4
        assert len(node.input) >= 4 and node.input[3]  # zero points: asymmetric
    assert ops(dst)["GatherBlockQuantized"] >= 1  # the token embedding
    assert dict(result.settings) == {
        "op": "com.microsoft.MatMulNBits", "bits": 4, "block_size": 64, "symmetric": False,
        "matmuls_int4": 9, "matmuls_float32": 4, "accuracy_level": 4, "lm_head": True,
        "embeddings": ops(dst)["GatherBlockQuantized"], "format": "nbits"}
    assert ratio(dst, decoder) < 0.35  # blocks of 64 with zero points; wpe stays float


def test_int4_keeps_the_lm_head_float_when_told(decoder: Path, tmp_path: Path) -> None:
    dst = tmp_path / "int4.onnx"
    result = make_variant("int4", decoder, dst, int4=Int4Options(lm_head=False))
    graph = onnx.load(dst).graph
    # the tied head reads the embedding table through a Transpose (bundler.model.tied): float,
    # and shared with the embedding's Gather, as in the optimised model
    transposes = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "Transpose"}
    heads = [n for n in graph.node if n.op_type == "MatMul" and n.input[1] in transposes]
    assert [transposes[n.input[1]] for n in heads] == ["transformer.wte.weight"]
    assert sum(t.name.startswith("transformer.wte.weight") for t in graph.initializer) == 1
    assert result.settings["lm_head"] is False and result.settings["matmuls_int4"] == 8
    assert ops(dst)["GatherBlockQuantized"] == 0
    assert "the LM head kept float32" in result.notes[-1]


def test_int4_quantizes_a_shared_tied_head_as_its_own_copy(decoder: Path, tmp_path: Path):
    dst = tmp_path / "int4.onnx"
    make_variant("int4", decoder, dst)
    graph = onnx.load(dst).graph
    assert ops(decoder)["Transpose"] > ops(dst)["Transpose"]  # the head's Transpose is gone
    names = [t.name for t in graph.initializer if t.name.startswith("transformer.wte.weight")]
    assert sorted(names) == ["transformer.wte.weight", "transformer.wte.weight_transposed_Q4",
                             "transformer.wte.weight_transposed_scales"]


def test_int4_of_a_large_model_ships_a_tied_head_it_leaves_float_once(
        decoder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The head left float by int4, from a model past the large-model size, is shared with the
    embedding again as from memory (a Transpose of it), and its copy's bytes leave the data file:
    the variant is the one made in memory, value for value and within alignment in bytes."""
    options = Int4Options(lm_head=False)
    whole = tmp_path / "whole.onnx"
    expected = make_variant("int4", decoder, whole, int4=options)
    large = as_large(decoder, tmp_path / "large", monkeypatch)
    dst = tmp_path / "streamed.onnx"
    result = make_variant("int4", large, dst, int4=options)
    assert result.settings == expected.settings and result.settings["lm_head"] is False
    model = onnx.load(dst, load_external_data=False)
    graph = model.graph
    transposes = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "Transpose"}
    heads = [n for n in graph.node if n.op_type == "MatMul" and n.input[1] in transposes]
    assert [transposes[n.input[1]] for n in heads] == ["transformer.wte.weight"]
    assert [t.name for t in graph.initializer if t.name.startswith("transformer.wte")] == [
        "transformer.wte.weight"]
    table = 4 * math.prod(next(t.dims for t in graph.initializer
                               if t.name == "transformer.wte.weight"))
    assert model_bytes(dst) == pytest.approx(model_bytes(whole), abs=table / 8)  # not + table
    feeds = native_reference(whole, signature(model).inputs, {}).feeds
    for got, want in zip(cpu_session(dst, config=result.native_config).run(None, feeds),
                         cpu_session(whole, config=expected.native_config).run(None, feeds),
                         strict=True):
        np.testing.assert_array_equal(got, want)


def test_int4_as_dequantize_linear_blocks(decoder: Path, tmp_path: Path) -> None:
    dst = tmp_path / "int4.onnx"
    result = make_variant("int4", decoder, dst, int4=Int4Options(format="qdq"))
    model = onnx.load(dst)
    assert ops(dst)["MatMulNBits"] == 0 and ops(dst)["DequantizeLinear"] == 9
    assert next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 21
    blocks = next(t for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT4)
    assert blocks.dims  # the weights are stored as int4, not dequantized into float
    assert result.settings["format"] == "qdq" and result.settings["op"] == "DequantizeLinear"
    assert ratio(dst, decoder) < 0.6
    assert result.session_config == {"wasm": {"session.disable_quant_qdq": "1"}}


def test_int4_qdq_session_config_folds_the_blocks_natively(decoder: Path,
                                                           tmp_path: Path) -> None:
    """Opened with its session_config, onnxruntime folds the DequantizeLinear blocks into float
    MatMul weights (what bundle.mjs does on WASM); opened plainly, it fuses them to MatMulNBits."""
    dst = tmp_path / "int4.onnx"
    config = make_variant("int4", decoder, dst, int4=Int4Options(format="qdq")).native_config
    folded, fused = tmp_path / "folded.onnx", tmp_path / "fused.onnx"
    cpu_session(dst, optimized_path=folded, config=config)
    cpu_session(dst, optimized_path=fused)
    assert ops(folded)["MatMulNBits"] == 0 and ops(folded)["DequantizeLinear"] == 0
    assert ops(fused)["MatMulNBits"] == 9
    assert make_variant("int4", decoder, tmp_path / "nbits.onnx").session_config is None


def test_int4_int8_form_ships_blocks_and_computes_in_int8(decoder: Path, tmp_path: Path) -> None:
    """format=int8: the same 4-bit blocks on the wire, each weight requantized per column to int8
    by a QuantizeLinear that folds at load with them, into onnxruntime's DynamicQuantizeMatMul
    (the int8 variant's kernel on WASM)."""
    qdq, int8 = tmp_path / "qdq.onnx", tmp_path / "int8.onnx"
    make_variant("int4", decoder, qdq, int4=Int4Options(format="qdq"))
    result = make_variant("int4", decoder, int8, int4=Int4Options(format="int8"))
    assert ops(int8)["DynamicQuantizeMatMul"] == 9 and ops(int8)["QuantizeLinear"] == 9
    assert ops(int8)["DequantizeLinear"] == 9 and ops(int8)["MatMul"] == ops(qdq)["MatMul"] - 9
    assert result.settings["op"] == "com.microsoft.DynamicQuantizeMatMul"
    assert result.session_config == {"wasm": {"session.disable_quant_qdq": "1"},
                                     "webgpu": {"session.disable_quant_qdq": "1"}}
    int4_bytes = sum(math.prod(t.dims) for t in onnx.load(int8).graph.initializer
                     if t.data_type == onnx.TensorProto.INT4)
    assert int4_bytes == sum(math.prod(t.dims) for t in onnx.load(qdq).graph.initializer
                             if t.data_type == onnx.TensorProto.INT4)
    model = onnx.load(int8)
    scales = {t.name: t.data_type for t in model.graph.initializer}
    dequantized = [n for n in model.graph.node if n.op_type == "DequantizeLinear"]
    # the block scales in float16 (a fifth of the bytes at block 32 in float32); at this tiny
    # size the per-column scales added outweigh what that saves, not at a real one
    assert {scales[n.input[1]] for n in dequantized} == {onnx.TensorProto.FLOAT16}
    assert ratio(int8, qdq) < 1.1
    folded = tmp_path / "folded.onnx"
    cpu_session(int8, optimized_path=folded, config=result.native_config)
    model = onnx.load(folded)
    constants = {t.name: t.data_type for t in model.graph.initializer}
    matmuls = [n for n in model.graph.node if n.op_type == "DynamicQuantizeMatMul"]
    assert len(matmuls) == 9
    assert ops(folded)["QuantizeLinear"] == ops(folded)["DequantizeLinear"] == 0
    assert {constants[n.input[1]] for n in matmuls} == {onnx.TensorProto.INT8}
    inputs = signature(onnx.load(decoder)).inputs
    reference = native_reference(decoder, inputs, {}).feeds
    got = cpu_session(int8, config=result.native_config).run(None, reference)[0].ravel()
    want = cpu_session(qdq, config=result.native_config).run(None, reference)[0].ravel()
    assert got @ want / np.linalg.norm(got) / np.linalg.norm(want) > 0.999


def test_int4_qdq_folded_on_wasm_counts_float32_weights_in_the_heap(decoder: Path,
                                                                    tmp_path: Path) -> None:
    dst = tmp_path / "int4.onnx"
    make_variant("int4", decoder, dst, int4=Int4Options(format="qdq"))
    size = dst.stat().st_size
    plain, folded = footprint(dst, size), footprint(dst, size, folded=True)
    blocks = sum(math.prod(t.dims) for t in onnx.load(dst).graph.initializer
                 if t.data_type == onnx.TensorProto.INT4)
    assert blocks > 0 and folded.heap - plain.heap == 4 * blocks > size
    assert folded.weights == plain.weights  # on WebGPU the blocks stay 4-bit


def test_int4_quantizes_a_merged_decoders_branches_once(tmp_path: Path) -> None:
    """A merged decoder (optimum's, one If on use_cache_branch) keeps its MatMuls in the two
    branches, which read the same weights: each is quantized, head and embedding included, and
    shipped once; with past, the variant computes what the unmerged int4 one does."""
    from bundler.model.optimize import optimize
    from tests import decoder_models

    merged = tmp_path / "merged.onnx"
    optimize(decoder_models.gpt2_merged(tmp_path / "m").onnx, merged)
    assert [node.op_type for node in onnx.load(merged).graph.node][-1] == "If"
    dst = tmp_path / "int4.onnx"
    options = Int4Options(format="qdq", embeddings=True)
    result = make_variant("int4", merged, dst, int4=options)
    assert result.settings["matmuls_int4"] == 2 * 9 and result.settings["embeddings"] == 2
    model = onnx.load(dst)
    names = [t.name for t in model.graph.initializer]
    assert len(names) == len(set(names))
    blocks = [t for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT4]
    assert len(blocks) == 9 + 1  # the 9 MatMul weights and the token table, once each
    table = next(t.name for t in onnx.load(merged).graph.initializer
                 if t.name.startswith("transformer.wte.weight"))
    floats = {t.name for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
    assert {table, f"{table}_transposed"}.isdisjoint(floats)  # neither copy stays float
    assert ratio(dst, merged) < 0.45
    # the blocks' DequantizeLinear nodes are moved out of the branches (in them onnxruntime's
    # fusion into MatMulNBits fails at the first run) and folded at load on both EPs
    assert [node.op_type for node in model.graph.node].count("DequantizeLinear") == 9
    assert result.session_config == {ep: {"session.disable_quant_qdq": "1"}
                                     for ep in ("wasm", "webgpu")}


def test_int4_qdq_of_a_merged_decoder_generates_natively(tmp_path: Path) -> None:
    """Run through both branches (the prompt without past, then each step with it) by the
    reference loop, opened as every native run opens it: close to fp32."""
    from bundler.model.optimize import optimize
    from bundler.text.quality import measure_generation, reference
    from bundler.variants.int4_options import for_generation
    from tests import decoder_models

    export = decoder_models.gpt2_folder(tmp_path / "model", merged=True)
    merged = tmp_path / "merged.onnx"
    optimize(export.onnx, merged)
    dst = tmp_path / "int4.onnx"
    made = make_variant("int4", merged, dst, int4=for_generation(Int4Options()))
    metrics = measure_generation(reference(merged, export.folder), dst, made.native_config)
    assert metrics.cosine > 0.9 and metrics.perplexity < 1.5 and metrics.tokens > 0


def test_int4_qdq_converts_an_older_opset_first(tmp_path: Path) -> None:
    """A Llama's RMSNorm exported at opset 17 has ReduceMean with an `axes` attribute, which
    opset 21 (4-bit DequantizeLinear) no longer allows: the model is converted, not only its
    opset import raised (which made an invalid model on an optimum Qwen2 export)."""
    from bundler.model.optimize import optimize
    from tests import decoder_models

    source = decoder_models.llama(tmp_path / "llama").onnx
    assert "ReduceMean" in ops(source)
    optimized = tmp_path / "optimized.onnx"
    optimize(source, optimized)
    dst = tmp_path / "int4.onnx"
    result = make_variant("int4", optimized, dst, int4=Int4Options(format="qdq"))
    model = onnx.load(dst)
    assert next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) == 21
    assert all(not any(a.name == "axes" for a in node.attribute)
               for node in model.graph.node if node.op_type == "ReduceMean")
    cpu_session(dst, config=result.native_config)  # it loads: the invalid model did not
    reference = native_reference(dst, signature(model).inputs, {})
    assert np.isfinite(reference.cases[0].outputs["logits"]).all()


@pytest.mark.parametrize("form", ["nbits", "qdq", "qdq-merged"])
def test_int4_of_a_large_model_is_made_a_batch_of_weights_at_a_time(
        decoder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str) -> None:
    """From a model past the large-model size, int4 reads its weights a batch at a time and
    writes them to a data file as it goes (no protobuf of them all): the same variant, value for
    value, as the one made from the model in memory, its weights in external data."""
    import bundler.variants.int4 as int4
    from bundler.model.optimize import optimize
    from bundler.text.quality import reference
    from tests import decoder_models

    source = decoder
    if form == "qdq-merged":
        export = decoder_models.gpt2_folder(tmp_path / "model", merged=True)
        source = tmp_path / "merged.onnx"
        optimize(export.onnx, source)
    options = Int4Options(format=form.split("-")[0], embeddings=True)
    whole = tmp_path / "whole.onnx"
    expected = make_variant("int4", source, whole, int4=options)
    large = as_large(source, tmp_path / "large", monkeypatch)
    monkeypatch.setattr(int4, "BATCH_BYTES", 64 * 1024)  # several batches of this small model
    dst = tmp_path / "streamed.onnx"
    result = make_variant("int4", large, dst, int4=options)
    assert result.settings == expected.settings and result.session_config == \
        expected.session_config
    assert model_files(dst) == [dst, dst.with_name("streamed.onnx.data")]
    graph = onnx.load(dst, load_external_data=False)
    external = [t for t in graph.graph.initializer
                if t.data_location == onnx.TensorProto.EXTERNAL]
    inline = [t for t in onnx.external_data_helper._get_initializer_tensors(graph)
              if t.data_location != onnx.TensorProto.EXTERNAL]
    assert external and all(len(t.raw_data) < INLINE_BELOW for t in inline)  # the graph alone
    assert model_bytes(dst) == pytest.approx(model_bytes(whole), rel=0.02)  # alignment
    made, wanted = cpu_session(dst, config=result.native_config), cpu_session(
        whole, config=expected.native_config)
    feeds = native_reference(whole, signature(graph).inputs, {}).feeds
    for got, want in zip(made.run(None, feeds), wanted.run(None, feeds), strict=True):
        np.testing.assert_array_equal(got, want)
    if form == "qdq-merged":  # greedy tokens, the prompt through one branch, each step the other
        runs = [reference(path, export.folder) for path in (dst, whole)]
        assert runs[0].tokens == runs[1].tokens and all(runs[0].tokens)
        for got, want in zip(runs[0].logits, runs[1].logits, strict=True):
            np.testing.assert_array_equal(got, want)


def test_a_generation_bundles_int4_format_follows_its_eps() -> None:
    """int8 speed on WASM wherever WASM runs it: format=int8 on WASM alone, per-ep beside
    WebGPU; qdq on WebGPU alone and past 2 GB (neither int8 nor per-ep is made there)."""
    from bundler.variants.int4_options import for_generation, parse_int4

    assert for_generation(Int4Options()).format == "per-ep"  # both EPs, the default
    assert for_generation(Int4Options(), ("webgpu", "wasm"), large=True).format == "qdq"
    assert for_generation(Int4Options(), ("wasm",)).format == "int8"
    assert for_generation(Int4Options(), ("wasm",), large=True).format == "qdq"
    assert for_generation(Int4Options(), ("webgpu",)).format == "qdq"
    assert for_generation(Int4Options(), ("wasm",)).embeddings
    given = parse_int4(["format=nbits"])
    assert for_generation(given, ("wasm",)).format == "nbits"  # what is given stays
    assert for_generation(given).format == "nbits"


def test_a_decoders_int4_has_its_token_table_in_4_bits_and_the_qdq_form() -> None:
    """Any decoder's (a speech model's): the table a tied head shares in 4 bits, and qdq, which
    WASM folds into float weights at load (fp32's speed and the native graph's tokens, where
    MatMulNBits decoded 7-10x slower); what is given stays."""
    from bundler.variants.int4_options import for_decoder, parse_int4

    assert (for_decoder(Int4Options()).format, for_decoder(Int4Options()).embeddings) == (
        "qdq", True)
    assert Int4Options().format == "nbits" and not Int4Options().embeddings  # other models'
    given = for_decoder(parse_int4(["format=nbits", "embeddings=false"]))
    assert (given.format, given.embeddings) == ("nbits", False)


def _external(path: Path) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each tensor of the graph at `path` in external data -> where its bytes are."""
    return {tensor.name: tuple((entry.key, entry.value) for entry in tensor.external_data)
            for tensor in onnx.load(path, load_external_data=False).graph.initializer
            if tensor.data_location == onnx.TensorProto.EXTERNAL}


def test_int4_per_ep_is_the_int8_form_on_wasm_and_qdq_on_webgpu_over_one_set_of_weights(
        decoder: Path, tmp_path: Path) -> None:
    """format=per-ep: the int8 form's graph (WASM's, the variant's file) and the qdq form's
    (WebGPU's), both naming one data file at the same offsets: a client fetches its EP's small
    graph and the shared weights. The WebGPU graph reads the int8 form's float16 block scales
    through a Cast that folds at load (DequantizeLinear does not: WebGPU runs it, 4-bit)."""
    dst = tmp_path / "int4.onnx"
    result = make_variant("int4", decoder, dst, int4=Int4Options(format="per-ep"))
    webgpu = tmp_path / "int4.webgpu.onnx"
    assert result.graphs == {"webgpu": webgpu} and result.graph_for("wasm") == dst
    data = tmp_path / "int4.onnx.data"
    assert model_files(dst) == [dst, data] and model_files(webgpu) == [webgpu, data]
    shared = _external(webgpu)
    assert shared and all(_external(dst)[name] == where for name, where in shared.items())
    assert webgpu.stat().st_size < data.stat().st_size / 4  # the weights are in `data` alone
    assert ops(dst)["DynamicQuantizeMatMul"] == 9 and ops(webgpu)["DynamicQuantizeMatMul"] == 0
    assert ops(webgpu)["DequantizeLinear"] == 9 and ops(webgpu)["QuantizeLinear"] == 0
    assert result.settings["format"] == "per-ep" and result.settings["op"] == (
        "wasm: com.microsoft.DynamicQuantizeMatMul, webgpu: DequantizeLinear")
    # WASM folds (the int8 weights); WebGPU runs the blocks as they are
    assert result.session_config == {"wasm": {"session.disable_quant_qdq": "1"}}
    # WASM's graph is format=int8's, value for value
    int8 = tmp_path / "int8" / "int4.onnx"
    alone = make_variant("int4", decoder, int8, int4=Int4Options(format="int8"))
    feeds = native_reference(decoder, signature(onnx.load(decoder)).inputs, {}).feeds
    for got, want in zip(cpu_session(dst, config=result.native_config).run(None, feeds),
                         cpu_session(int8, config=alone.native_config).run(None, feeds),
                         strict=True):
        np.testing.assert_array_equal(got, want)
    # WebGPU's: the scale Casts are folded at load, the blocks are not (unfused: MatMul)
    halves = {t.name for t in onnx.load(webgpu, load_external_data=False).graph.initializer
              if t.data_type == onnx.TensorProto.FLOAT16}
    casts = {n.name for n in onnx.load(webgpu, load_external_data=False).graph.node
             if n.op_type == "Cast" and n.input[0] in halves}
    assert len(casts) == 9
    folded = tmp_path / "folded.onnx"
    cpu_session(webgpu, optimized_path=folded, level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    optimized = onnx.load(folded)
    assert casts.isdisjoint(n.name for n in optimized.graph.node)
    assert ops(folded)["DequantizeLinear"] == 9
    qdq = tmp_path / "qdq" / "int4.onnx"
    make_variant("int4", decoder, qdq, int4=Int4Options(format="qdq"))
    got = cpu_session(webgpu, config=result.native_config).run(None, feeds)[0].ravel()
    want = cpu_session(qdq, config=result.native_config).run(None, feeds)[0].ravel()
    assert got @ want / np.linalg.norm(got) / np.linalg.norm(want) > 0.9999  # float16 scales


def test_int4_per_ep_shares_a_head_it_leaves_float_in_both_graphs(decoder: Path,
                                                                   tmp_path: Path) -> None:
    """lm_head=false: the head's float copy is shared with the embedding again (a Transpose of
    it) in each graph, and both still read one data file, which holds the table once."""
    dst = tmp_path / "int4.onnx"
    result = make_variant("int4", decoder, dst, int4=Int4Options(format="per-ep", lm_head=False))
    webgpu = result.graph_for("webgpu")
    data = tmp_path / "int4.onnx.data"
    assert model_files(dst) == [dst, data] and model_files(webgpu) == [webgpu, data]
    for graph in (dst, webgpu):
        names = [t.name for t in onnx.load(graph, load_external_data=False).graph.initializer]
        assert [name for name in names if name.startswith("transformer.wte")] == [
            "transformer.wte.weight"]
    assert _external(webgpu)["transformer.wte.weight"] == _external(dst)["transformer.wte.weight"]
    feeds = native_reference(decoder, signature(onnx.load(decoder)).inputs, {}).feeds
    for graph in (dst, webgpu):
        logits = cpu_session(graph, config=result.native_config).run(None, feeds)[0]
        assert np.isfinite(logits).all()


def test_int4_per_ep_is_not_made_past_2_gb(decoder: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    large = as_large(decoder, tmp_path / "large", monkeypatch)
    with pytest.raises(QuantizeError, match="format=per-ep is not made .* use --int4 format=qdq"):
        make_variant("int4", large, tmp_path / "int4.onnx", int4=Int4Options(format="per-ep"))
