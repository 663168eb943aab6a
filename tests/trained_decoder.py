"""A tiny GPT-2 trained here until it counts: given "1 2 3 4" it goes on " 5 6 7 8 …". Its
byte-level tokenizer is trained on the same counting text (every number below TOP is one token;
any other text falls back to bytes),
and the model is exported by optimum with past as the suite's other decoders are, so that a test
can check a generation bundle's output for content, not only for agreement with native.

The chat template joins the messages' contents, so a chat (the demo page's) reaches the model as
the counting it was trained on."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tests import decoder_models
from tests.text_tokenizers import _save

TOP = 100  # counts up to 99
WINDOW = 16  # numbers in one training sequence
TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"


def counting(first: int, count: int) -> str:
    return " ".join(str(number) for number in range(first, first + count))


def _tokenizer(folder: Path) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    lines = [counting(first, min(WINDOW, TOP - first)) for first in range(TOP)]
    tokenizer.train_from_iterator(lines * 2, trainers.BpeTrainer(
        vocab_size=500, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # the build's check prompts too
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    token = "<|endoftext|>"
    config = {"model_max_length": 128, "bos_token": token, "eos_token": token,
              "unk_token": token, "chat_template": TEMPLATE}
    _save(tokenizer, folder, config, {"bos_token": token, "eos_token": token})
    return tokenizer


def _train(tokenizer: Any, steps: int = 300, target: float = 0.02) -> Any:
    """A 2 x 48 GPT-2 trained on windows of the counting until the mean loss of the last 10 steps
    is under `target` (about 60-100 steps; `steps` at most)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=tokenizer.get_vocab_size(), n_positions=128, n_embd=48,
                        n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        eos_token_id=0, bos_token_id=0)
    model = GPT2LMHeadModel(config)
    windows = [tokenizer.encode(counting(first, WINDOW)).ids for first in range(TOP - WINDOW + 1)]
    assert len({len(window) for window in windows}) == 1  # one token a number
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    draw, losses = random.Random(0), []
    for _ in range(steps):
        batch = torch.tensor([draw.choice(windows) for _ in range(16)])
        loss = model(batch, labels=batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if len(losses) >= 10 and sum(losses[-10:]) / 10 < target:
            break
    else:
        raise AssertionError(f"the counter did not learn: loss {losses[-1]:.3f} after {steps}")
    return model


def counter_folder(directory: Path) -> decoder_models.Export:
    """The trained counter as an optimum export folder with its tokenizer files beside
    model.onnx."""
    import shutil

    tokens = directory / "tokenizer"
    export = decoder_models._export(_train(_tokenizer(tokens)), directory)
    for path in tokens.iterdir():
        shutil.copyfile(path, export.folder / path.name)
    config = json.loads((export.folder / "config.json").read_text(encoding="utf-8"))
    assert config["model_type"] == "gpt2"
    return export
