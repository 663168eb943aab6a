"""text_vs_transformersjs.py's models: a BERT encoder and a GPT-2 decoder with seeded random
weights, exported by optimum as users export them, into folders laid out as transformers.js reads
a model (config and tokenizer files at the top, onnx/model.onnx and onnx/model_quantized.onnx,
its `q8`), with tokenizers trained here on local text (Python's own sources: no downloads).

The q8 file is made as transformers.js's conversion script (scripts/quantize.py, mode q8) makes
it: onnxruntime's ONNXQuantizer in IntegerOps mode (dynamic int8: DynamicQuantizeLinear +
MatInteger), every op of onnxruntime's IntegerOpsRegistry, per-tensor, no reduced range, uint8
activations, QInt8 weights (QUInt8 where the model has Conv or fused attention ops), subgraphs
included (a merged decoder's If branches), constant MatMul weights only.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import tempfile
from pathlib import Path

SEED = 0
OPSET = 17
QUINT8_OPS = ("Conv", "GroupQueryAttention", "MultiHeadAttention")  # as scripts/quantize.py


@dataclasses.dataclass(frozen=True)
class Sizes:
    encoder_layers: int
    encoder_hidden: int
    decoder_layers: int
    decoder_hidden: int
    vocab: int

    @property
    def name(self) -> str:
        return (f"bert{self.encoder_layers}x{self.encoder_hidden}-gpt2{self.decoder_layers}x"
                f"{self.decoder_hidden}-v{self.vocab}")


def corpus(limit_bytes: int) -> list[str]:
    """Lines of English prose and code from the standard library's sources, the same each time."""
    import json as stdlib

    lines: list[str] = []
    total = 0
    for path in sorted(Path(stdlib.__file__).parent.parent.glob("*.py")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if len(line) > 20:
                lines.append(line)
                total += len(line)
        if total >= limit_bytes:
            break
    return lines


def sentences(count: int) -> list[str]:
    """`count` prose lines (docstring and comment sentences) of 40 to 160 characters."""
    prose = [line.lstrip("#").strip() for line in corpus(4_000_000)
             if re.fullmatch(r"#? ?[A-Z][a-z]+ [A-Za-z ,']+[a-z][.]", line)]
    chosen = [line for line in prose if 40 <= len(line) <= 160]
    if len(chosen) < count:
        raise SystemExit(f"only {len(chosen)} sentences in the corpus, {count} asked")
    return chosen[:: max(1, len(chosen) // count)][:count]


def _wordpiece(folder: Path, vocab: int, lines: list[str]) -> int:
    """A BERT WordPiece tokenizer (lowercase) trained on `lines`, saved by transformers."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import WordPieceTrainer
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer.train_from_iterator(lines, WordPieceTrainer(vocab_size=vocab, special_tokens=special,
                                                          show_progress=False))
    ids = [(token, tokenizer.token_to_id(token)) for token in ("[CLS]", "[SEP]")]
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=ids)
    tokenizer.decoder = decoders.WordPiece()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                            cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                            model_max_length=512).save_pretrained(folder)
    return tokenizer.get_vocab_size()


def _byte_level(folder: Path, vocab: int, lines: list[str]) -> int:
    """A GPT-2 byte-level BPE tokenizer trained on `lines` (no special tokens added)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    token = "<|endoftext|>"
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=[token], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=token, eos_token=token,
                            unk_token=token, model_max_length=1024).save_pretrained(folder)
    return tokenizer.get_vocab_size()


def _export(model, tokenizer_at: Path, task: str, folder: Path, merge: bool = False) -> None:
    """optimum's export of `model` (saved with the tokenizer), laid out as transformers.js reads
    it; `merge`: the decoder as one merged file (a no-past branch and a with-past one under an If
    on use_cache_branch), as optimum's merge_decoders writes it."""
    from optimum.exporters.onnx import main_export

    with tempfile.TemporaryDirectory(dir=folder.parent) as scratch:
        saved, exported = Path(scratch) / "saved", Path(scratch) / "onnx"
        shutil.copytree(tokenizer_at, saved)
        model.save_pretrained(saved)
        main_export(str(saved), exported, task=task, opset=OPSET, local_files_only=True,
                    do_validation=False)
        if merge:
            from optimum.exporters.onnx.model_configs import GPT2OnnxConfig
            from optimum.onnx.graph_transformations import merge_decoders

            first = Path(scratch) / "first"
            no_past = GPT2OnnxConfig(model.config, task="text-generation", use_past=True,
                                     use_past_in_inputs=False)
            main_export(str(saved), first, task=task, opset=OPSET, local_files_only=True,
                        custom_onnx_configs={"model": no_past}, do_validation=False)
            merge_decoders(first / "model.onnx", exported / "model.onnx",
                           save_path=exported / "model.onnx")
        (folder / "onnx").mkdir(parents=True)
        for path in exported.iterdir():
            target = folder / "onnx" if path.name.startswith("model.onnx") else folder
            shutil.move(path, target / path.name)
    quantize_q8(folder / "onnx" / "model.onnx", folder / "onnx" / "model_quantized.onnx")


def quantize_q8(source: Path, target: Path) -> None:
    """transformers.js's q8 (scripts/quantize.py's quantize_q8, default arguments)."""
    import onnx
    from onnxruntime.quantization import QuantizationMode, QuantType
    from onnxruntime.quantization.onnx_quantizer import ONNXQuantizer
    from onnxruntime.quantization.registry import IntegerOpsRegistry

    model = onnx.load_model(source)
    operators: set[str] = set()

    def walk(graph) -> None:
        for node in graph.node:
            operators.add(node.op_type)
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    walk(attribute.g)

    walk(model.graph)
    weight = QuantType.QUInt8 if operators & set(QUINT8_OPS) else QuantType.QInt8
    quantizer = ONNXQuantizer(
        model, False, False, mode=QuantizationMode.IntegerOps, static=False,
        weight_qType=weight, activation_qType=QuantType.QUInt8, tensors_range=None,
        nodes_to_quantize=[], nodes_to_exclude=[],
        op_types_to_quantize=set(IntegerOpsRegistry.keys()),
        extra_options={"EnableSubgraph": True, "MatMulConstBOnly": True})
    quantizer.quantize_model()
    onnx.save_model(quantizer.model.model, target)


def quantize_q4(source: Path, target: Path) -> None:
    """transformers.js's q4 (scripts/quantize.py's quantize_q4, default arguments): onnxruntime's
    MatMulNBitsQuantizer, 4-bit symmetric blocks of 32 of every constant MatMul weight, subgraphs
    included; Conv and Gather stay float."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantizer = MatMulNBitsQuantizer(onnx.load_model(source), block_size=32, is_symmetric=True)
    quantizer.process()
    onnx.save_model(quantizer.model.model, target)


def encoder(folder: Path, layers: int, hidden: int, vocab: int, lines: list[str]) -> Path:
    """A MiniLM-style BertModel (heads of 32, intermediate 4x) for feature-extraction."""
    import torch
    from transformers import BertConfig, BertModel

    tokens = folder.parent / f"{folder.name}-tokenizer"
    size = _wordpiece(tokens, vocab, lines)
    torch.manual_seed(SEED)
    config = BertConfig(vocab_size=size, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=max(1, hidden // 32), intermediate_size=4 * hidden,
                        max_position_embeddings=512)
    _export(BertModel(config).eval(), tokens, "feature-extraction", folder)
    shutil.rmtree(tokens)
    return folder


def decoder(folder: Path, layers: int, hidden: int, vocab: int, lines: list[str]) -> Path:
    """A GPT2LMHeadModel (heads of 64) as a merged decoder with past. Its EOS stays GPT-2's
    default id (50256), outside this vocabulary: both sides generate every token asked for."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tokens = folder.parent / f"{folder.name}-tokenizer"
    size = _byte_level(tokens, vocab, lines)
    torch.manual_seed(SEED)
    config = GPT2Config(vocab_size=size, n_positions=1024, n_embd=hidden, n_layer=layers,
                        n_head=max(1, hidden // 64))
    _export(GPT2LMHeadModel(config).eval(), tokens, "text-generation-with-past", folder,
            merge=True)
    shutil.rmtree(tokens)
    config_json = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert config_json.get("eos_token_id", 50256) >= size, "EOS must be unreachable"
    return folder


def prompt_of(tokenizer_json: Path, tokens: int, lines: list[str]) -> str:
    """A prompt of exactly `tokens` tokens: corpus words added until the count is reached."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    words = " ".join(lines[:200]).split()
    for end in range(1, len(words)):
        text = " ".join(words[:end])
        count = len(tokenizer.encode(text).ids)
        if count == tokens:
            return text
        if count > tokens:
            ids = tokenizer.encode(text).ids[:tokens]
            text = tokenizer.decode(ids)
            if len(tokenizer.encode(text).ids) == tokens:
                return text
    raise SystemExit(f"no prompt of exactly {tokens} tokens found in the corpus")
