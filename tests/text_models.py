"""Tiny random-weight decoders exported by optimum as users export them
(`--task text-generation-with-past`), for the generation tests: a GPT-2 and a Llama with
grouped-query attention. Each comes with its torch model, to compare with transformers'
own generate()."""

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


def gpt2(directory: Path) -> Export:
    """GPT-2, 2 layers x 64, 4 heads. Weights 10x transformers' init spread, so that logits are
    far apart and greedy choices are not decided by float noise."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4,
                        initializer_range=0.2, eos_token_id=VOCAB - 1, bos_token_id=VOCAB - 1)
    return _export(GPT2LMHeadModel(config), directory)


def llama(directory: Path) -> Export:
    """Llama, 2 layers x 64, 4 query heads sharing 2 KV heads (grouped-query attention)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=128, initializer_range=0.2,
                         eos_token_id=[VOCAB - 2, VOCAB - 1], bos_token_id=1)
    return _export(LlamaForCausalLM(config), directory)
