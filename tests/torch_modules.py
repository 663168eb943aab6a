"""Small PyTorch modules for the export tests, loaded as `tests.torch_modules:NAME`."""

from __future__ import annotations

import torch
from torch import nn


def small_cnn() -> nn.Module:
    """image [batch, 1, 8, 8] -> (scores [batch, 4], features [batch, 6]); dropout and batch
    norm, so eval mode matters."""
    torch.manual_seed(0)

    class SmallCnn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(1, 6, 3, padding=1)
            self.norm = nn.BatchNorm2d(6)
            self.drop = nn.Dropout(0.5)
            self.head = nn.Linear(6, 4)

        def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            features = self.drop(torch.relu(self.norm(self.conv(image)))).mean(dim=(2, 3))
            return self.head(features), features

    return SmallCnn()


class TokenMixer(nn.Module):
    """ids [batch, seq] int64 -> [batch, seq, 8]: an embedding and a cumulative mean over seq."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.embed = nn.Embedding(16, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        steps = torch.arange(1, ids.shape[1] + 1, dtype=x.dtype).reshape(1, -1, 1)
        return x.cumsum(1) / steps


class SignSwitch(nn.Module):
    """Python control flow on a value: tracing keeps one branch, so ONNX is wrong elsewhere."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return -x


class FixedBatch(nn.Module):
    """Reshapes with the traced batch size: exports, but fails at other batch sizes."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(int(x.shape[0]), 3, 2) * 3


class FlatBatch(nn.Module):
    """Flattens with the traced batch size: at another batch it runs with the wrong shape."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(int(x.shape[0]), -1)
