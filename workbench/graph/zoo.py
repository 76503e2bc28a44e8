"""A small model zoo in plain ``torch.nn``: random weights from a fixed seed, nothing downloaded.

    model, example = zoo.get("resnet18")                 # full size: (1, 3, 224, 224)
    model, example = zoo.get("resnet18", width=8, image=32)   # a tiny variant for tests

ResNet-18 / -34 (torchvision's BasicBlock layout), MobileNet-v2 (inverted residuals, ReLU6) and
one BERT-base encoder layer (hidden 768, 12 heads, sequence 128, GELU). Batch-norm statistics
are randomized too, so folding them into the convolutions is actually exercised.

Importing this module imports torch (the optional extra ``torch``).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn


def _randomize_norms(model: nn.Module) -> nn.Module:
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.2, 0.2)
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    return model.eval()


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers: tuple[int, ...], width: int = 64, classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, cin = [], width
        for k, n in enumerate(layers):
            cout = width * 2**k
            blocks = [BasicBlock(cin, cout, 1 if k == 0 else 2)]
            blocks += [BasicBlock(cout, cout, 1) for _ in range(n - 1)]
            stages.append(nn.Sequential(*blocks))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    #: (expansion, channels, repeats, stride) of torchvision's MobileNet-v2
    SETTINGS = (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )

    def __init__(self, width: float = 1.0, classes: int = 1000, last_channel: int = 0):
        super().__init__()

        def ch(c: int) -> int:
            return max(8, int(c * width + 4) // 8 * 8)

        cin, last = ch(32), last_channel or ch(int(1280 * max(1.0, width)))
        layers: list[nn.Module] = [nn.Conv2d(3, cin, 3, 2, 1, bias=False), nn.BatchNorm2d(cin), nn.ReLU6()]
        for t, c, n, s in self.SETTINGS:
            for k in range(n):
                layers.append(InvertedResidual(cin, ch(c), s if k == 0 else 1, t))
                cin = ch(c)
        layers += [nn.Conv2d(cin, last, 1, bias=False), nn.BatchNorm2d(last), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class BertLayer(nn.Module):
    """One BERT encoder layer (post-norm): self-attention, add & norm, GELU MLP, add & norm."""

    def __init__(self, hidden: int = 768, heads: int = 12, intermediate: int = 3072):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.attn_out = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.act = nn.GELU()
        self.output = nn.Linear(intermediate, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def _split(self, x):
        b, s, _ = x.shape
        return x.reshape(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        ctx = ctx.permute(0, 2, 1, 3).reshape(b, s, h)
        x = self.norm1(x + self.attn_out(ctx))
        return self.norm2(x + self.output(self.act(self.intermediate(x))))


def resnet18(width: int = 64, image: int = 224, classes: int = 1000, batch: int = 1):
    return _randomize_norms(ResNet((2, 2, 2, 2), width, classes)), (torch.randn(batch, 3, image, image),)


def resnet34(width: int = 64, image: int = 224, classes: int = 1000, batch: int = 1):
    return _randomize_norms(ResNet((3, 4, 6, 3), width, classes)), (torch.randn(batch, 3, image, image),)


def mobilenet_v2(
    width: float = 1.0, image: int = 224, classes: int = 1000, batch: int = 1, last_channel: int = 0
):
    return _randomize_norms(MobileNetV2(width, classes, last_channel)), (torch.randn(batch, 3, image, image),)


def bert_layer(hidden: int = 768, heads: int = 12, intermediate: int = 3072, seq: int = 128, batch: int = 1):
    return BertLayer(hidden, heads, intermediate).eval(), (torch.randn(batch, seq, hidden),)


MODELS: dict[str, Callable] = {
    "resnet18": resnet18,
    "resnet34": resnet34,
    "mobilenet_v2": mobilenet_v2,
    "bert_layer": bert_layer,
}


#: the tiny variant of each model (what tests, ``workbench tune-model --tiny`` and
#: ``bench/models.py --quick`` build): seconds to import, tune a little and run
TINY: dict[str, dict] = {
    "resnet18": dict(width=8, image=32, classes=10),
    "resnet34": dict(width=8, image=32, classes=10),
    "mobilenet_v2": dict(width=0.25, image=32, classes=10, last_channel=32),
    "bert_layer": dict(hidden=64, heads=4, intermediate=128, seq=16),
}


def names() -> list[str]:
    return list(MODELS)


def get(name: str, seed: int = 0, **size):
    """``(model, example_inputs)``: the model in eval mode with weights drawn from ``seed``;
    ``size`` keywords make a smaller variant (``width``, ``image``, ``seq``, ...)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; the zoo has {', '.join(MODELS)}")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        with torch.no_grad():
            return MODELS[name](**size)
