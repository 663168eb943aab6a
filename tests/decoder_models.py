"""Tiny random-weight decoders exported by optimum as users export them
(`--task text-generation-with-past`), for the generation tests: a GPT-2 and a Llama with
grouped-query attention, and a Qwen2 (grouped-query attention, q/k/v biases, tied LM head).
Each comes with its torch model, to compare with transformers' own generate(), and a GPT-2
merged decoder (`use_cache_branch`), as older optimum versions export."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

OPSET = 17
VOCAB = 512


@dataclasses.dataclass
class Export:
    folder: Path  # model.onnx, config.json, generation_config.json
    model: Any  # the torch model it was exported from

    @property
    def onnx(self) -> Path:
        return self.folder / "model.onnx"


def _export(model: Any, directory: Path) -> Export:
    from optimum.exporters.onnx import main_export

    saved, folder = directory / "saved", directory / "onnx"
    model.save_pretrained(saved)
    main_export(str(saved), folder, task="text-generation-with-past", opset=OPSET,
                local_files_only=True, do_validation=False)
    shutil.rmtree(saved)
    return Export(folder, model.eval())


def _gpt2(vocab: int = VOCAB, eos: int = VOCAB - 1, positions: int = 128) -> Any:
    """GPT-2, 2 layers x 64, 4 heads, `positions` long at most. Weights 10x transformers' init
    spread, so that logits are far apart and greedy choices are not decided by float noise."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=vocab, n_positions=positions, n_embd=64, n_layer=2, n_head=4,
                        initializer_range=0.2, eos_token_id=eos, bos_token_id=eos)
    return GPT2LMHeadModel(config)


def gpt2(directory: Path) -> Export:
    return _export(_gpt2(), directory)


def gpt2_merged(directory: Path) -> Export:
    """The same GPT-2 as one merged decoder: a no-past decoder with present outputs and the
    with-past one, joined by optimum's merge_decoders under an If on `use_cache_branch`."""
    return _merge(_export(_gpt2(), directory), directory)


def _no_past(export: Export, directory: Path) -> Path:
    """The same model exported without past inputs (present outputs only): optimum's
    decoder_model.onnx, in directory/first."""
    from optimum.exporters.onnx import main_export
    from optimum.exporters.onnx.model_configs import GPT2OnnxConfig

    saved, first = directory / "saved", directory / "first"
    export.model.save_pretrained(saved)
    no_past = GPT2OnnxConfig(export.model.config, task="text-generation", use_past=True,
                             use_past_in_inputs=False)
    main_export(str(saved), first, task="text-generation-with-past", opset=OPSET,
                custom_onnx_configs={"model": no_past}, local_files_only=True,
                do_validation=False)
    shutil.rmtree(saved)
    return first / "model.onnx"


def _merge(export: Export, directory: Path) -> Export:
    from optimum.onnx.graph_transformations import merge_decoders

    first = _no_past(export, directory)
    merge_decoders(first, export.onnx, save_path=export.onnx)
    shutil.rmtree(first.parent)
    return export


def _two_files(export: Export, directory: Path) -> Export:
    """The folder as optimum leaves it unmerged: decoder_model.onnx (no past) and
    decoder_with_past_model.onnx, no model.onnx."""
    first = _no_past(export, directory)
    shutil.move(first, export.folder / "decoder_model.onnx")
    shutil.rmtree(first.parent)
    export.onnx.rename(export.folder / "decoder_with_past_model.onnx")
    return export


def _llama(vocab: int = VOCAB, eos: list[int] | None = None) -> Any:
    """Llama, 2 layers x 64, 4 query heads sharing 2 KV heads (grouped-query attention)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=128, initializer_range=0.2,
                         eos_token_id=eos or [vocab - 2, vocab - 1], bos_token_id=1)
    return LlamaForCausalLM(config)


def llama(directory: Path) -> Export:
    return _export(_llama(), directory)


def _qwen2(vocab: int = VOCAB, eos: list[int] | None = None) -> Any:
    """Qwen2, 2 layers x 64, 4 query heads sharing 2 KV heads, biases on q/k/v, the LM head
    tied to the token embedding (as Qwen2's small models have it)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(2)
    config = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=128, initializer_range=0.2,
                         tie_word_embeddings=True, eos_token_id=eos or [vocab - 1],
                         bos_token_id=vocab - 1)
    return Qwen2ForCausalLM(config)


def qwen2(directory: Path) -> Export:
    return _export(_qwen2(), directory)


# A chat template of the ChatML form (Qwen2's), for messages through generate().
CHAT_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n'"
                 " + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def gpt2_folder(directory: Path, merged: bool = False, family: str = "gpt2",
                positions: int = 128, two_files: bool = False) -> Export:
    """An export folder as users have it: the GPT-2 (or `family` "llama" / "qwen2": the Llama /
    the Qwen2) above at the vocabulary of a GPT-2-style byte-level tokenizer trained here
    (tests/text_tokenizers.py), its files beside model.onnx, a chat template in
    tokenizer_config.json; `merged`: as one merged decoder (GPT-2); `two_files`: as
    decoder_model.onnx + decoder_with_past_model.onnx (GPT-2); `positions`: the GPT-2's maximum
    length."""
    import json

    from tests import text_tokenizers

    tokens = text_tokenizers.gpt2(directory / "tokenizer")
    vocab = json.loads((tokens / "tokenizer.json").read_text(encoding="utf-8"))
    size = len(vocab["model"]["vocab"]) + sum(1 for t in vocab["added_tokens"]
                                               if t["id"] >= len(vocab["model"]["vocab"]))
    eos = next(t["id"] for t in vocab["added_tokens"] if t["content"] == "<|endoftext|>")
    families = {"llama": lambda: _llama(size, [eos]), "qwen2": lambda: _qwen2(size, [eos]),
                "gpt2": lambda: _gpt2(size, eos, positions)}
    model = families[family]()
    export = _export(model, directory)
    if merged:
        export = _merge(export, directory)
    elif two_files:
        export = _two_files(export, directory)
    config = json.loads((tokens / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = CHAT_TEMPLATE
    (tokens / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    for path in tokens.iterdir():
        shutil.copyfile(path, export.folder / path.name)
    return export
