"""YOLOv8n as Ultralytics builds it (yolov8.yaml at scale n: depth 0.33, width 0.25) and exports
it: Conv-BN-SiLU, C2f, SPPF, the FPN/PAN neck and the decoupled Detect head whose export decodes
the DFL distributions to xywh boxes in input pixels and applies the class sigmoid, giving
output0 [1, 4 + 80, anchors]. 3.16 M parameters; the weights are torch's seeded initialisation
with a class prior of 2 % (Ultralytics' prior keeps an untrained model's scores under 1e-3, where
any tolerance passes), the batch norms' statistics those of random images."""

from __future__ import annotations

import torch
from torch import nn

CLASSES = 80
REG_MAX = 16
STRIDES = (8, 16, 32)
CLASS_PRIOR_LOGIT = -4.0


class Conv(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel: int = 1, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, bias=False)
        self.bn = nn.BatchNorm2d(c_out, eps=0.001, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, channels: int, shortcut: bool) -> None:
        super().__init__()
        self.cv1 = Conv(channels, channels, 3)
        self.cv2 = Conv(channels, channels, 3)
        self.add = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    def __init__(self, c_in: int, c_out: int, repeats: int, shortcut: bool) -> None:
        super().__init__()
        self.c = c_out // 2
        self.cv1 = Conv(c_in, 2 * self.c)
        self.cv2 = Conv((2 + repeats) * self.c, c_out)
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(repeats))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = list(self.cv1(x).chunk(2, 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        hidden = c_in // 2
        self.cv1 = Conv(c_in, hidden)
        self.cv2 = Conv(hidden * 4, c_out)
        self.m = nn.MaxPool2d(5, 1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = [self.cv1(x)]
        y.extend(self.m(y[-1]) for _ in range(3))
        return self.cv2(torch.cat(y, 1))


class Detect(nn.Module):
    def __init__(self, channels: tuple[int, ...]) -> None:
        super().__init__()
        box, cls = max(16, channels[0] // 4, REG_MAX * 4), max(channels[0], min(CLASSES, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(Conv(c, box, 3), Conv(box, box, 3),
                                               nn.Conv2d(box, 4 * REG_MAX, 1)) for c in channels)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(c, cls, 3), Conv(cls, cls, 3),
                                               nn.Conv2d(cls, CLASSES, 1)) for c in channels)
        self.dfl = nn.Conv2d(REG_MAX, 1, 1, bias=False).requires_grad_(False)
        self.dfl.weight.data[:] = torch.arange(REG_MAX, dtype=torch.float).view(1, REG_MAX, 1, 1)
        for head in self.cv3:  # a class prior of 2 %: a few boxes over the 0.25 threshold
            head[-1].bias.data[:] = CLASS_PRIOR_LOGIT

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        maps = [torch.cat((b(x), c(x)), 1) for x, b, c in zip(features, self.cv2, self.cv3,
                                                                 strict=True)]
        points, strides = [], []
        for x, stride in zip(maps, STRIDES, strict=True):
            height, width = x.shape[2:]
            sy, sx = torch.meshgrid(torch.arange(height, dtype=torch.float32) + 0.5,
                                    torch.arange(width, dtype=torch.float32) + 0.5, indexing="ij")
            points.append(torch.stack((sx, sy), -1).view(-1, 2))
            strides.append(torch.full((height * width, 1), float(stride)))
        anchors, scale = torch.cat(points).transpose(0, 1), torch.cat(strides).transpose(0, 1)
        flat = torch.cat([x.view(x.shape[0], 4 * REG_MAX + CLASSES, -1) for x in maps], 2)
        distribution, scores = flat.split((4 * REG_MAX, CLASSES), 1)
        batch, _, count = distribution.shape
        distance = self.dfl(distribution.view(batch, 4, REG_MAX, count).transpose(2, 1)
                            .softmax(1)).view(batch, 4, count)
        left_top, right_bottom = distance.chunk(2, 1)
        x1y1, x2y2 = anchors.unsqueeze(0) - left_top, anchors.unsqueeze(0) + right_bottom
        boxes = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * scale
        return torch.cat((boxes, scores.sigmoid()), 1)


class YOLOv8(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.ModuleList([
            Conv(3, 16, 3, 2), Conv(16, 32, 3, 2), C2f(32, 32, 1, True), Conv(32, 64, 3, 2),
            C2f(64, 64, 2, True), Conv(64, 128, 3, 2), C2f(128, 128, 2, True),
            Conv(128, 256, 3, 2), C2f(256, 256, 1, True), SPPF(256, 256)])
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.top_down4, self.top_down3 = C2f(384, 128, 1, False), C2f(192, 64, 1, False)
        self.down3, self.bottom_up4 = Conv(64, 64, 3, 2), C2f(192, 128, 1, False)
        self.down4, self.bottom_up5 = Conv(128, 128, 3, 2), C2f(384, 256, 1, False)
        self.detect = Detect((64, 128, 256))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x, saved = images, {}
        for index, layer in enumerate(self.backbone):
            x = layer(x)
            saved[index] = x
        p4 = self.top_down4(torch.cat((self.up(saved[9]), saved[6]), 1))
        p3 = self.top_down3(torch.cat((self.up(p4), saved[4]), 1))
        n4 = self.bottom_up4(torch.cat((self.down3(p3), p4), 1))
        n5 = self.bottom_up5(torch.cat((self.down4(n4), saved[9]), 1))
        return self.detect([p3, n4, n5])


def yolov8n() -> YOLOv8:
    from tests.realsize_models import DETECTOR_SIZE, calibrate_batch_norms

    model = YOLOv8()
    calibrate_batch_norms(model, torch.rand(4, 3, DETECTOR_SIZE, DETECTOR_SIZE))
    return model
