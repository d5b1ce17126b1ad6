#!/usr/bin/env python3
"""Reference for tests/models/resnet_test.cpp and mlp_test.cpp: the image classifiers in plain
torch.nn (no torchvision), parameter names as xtrain's. ResNet-18 has 11M parameters, too many to
store, so both sides compute every parameter and BN buffer from its name by the same rule
(`rule_value` below; tests/models/model_fixture.h mirrors it) and only inputs and outputs are
stored: eval-mode logits, train-mode logits/loss, a few gradients, BN running stats after the
train step. Writes fixtures/resnet.pt and fixtures/mlp.pt. Run with /usr/bin/python3."""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def rule_value(name, shape, amp, offset):
    """offset + amp * (2u - 1) with u = frac(sin(12.9898 * i + phase) * 43758.5453), i the flat
    index, all in float64, then rounded to float32: a decorrelated pseudo-random sequence in
    [offset - amp, offset + amp). phase = 0.1 * (sum of the name's bytes mod 61)."""
    n = math.prod(shape)
    phase = 0.1 * (sum(name.encode()) % 61)
    s = (torch.arange(n, dtype=torch.float64) * 12.9898 + phase).sin() * 43758.5453
    u = s - s.floor()
    return ((2 * u - 1) * amp + offset).to(torch.float32).reshape(shape)


def resnet_rule(name, shape):
    """(amp, offset) per tensor: convs sqrt(6/fan_in) (uniform with Kaiming's variance 2/fan_in),
    fc 1/sqrt(512), BN weight 1±0.2, BN bias ±0.1, running_mean ±0.1, running_var 1±0.5."""
    if len(shape) == 4:
        return math.sqrt(6.0 / (shape[1] * shape[2] * shape[3])), 0.0
    if name.startswith("fc."):
        return 1.0 / math.sqrt(512), 0.0
    if name.endswith("running_mean"):
        return 0.1, 0.0
    if name.endswith("running_var"):
        return 0.5, 1.0
    if name.endswith("weight"):
        return 0.2, 1.0
    return 0.1, 0.0


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        cin = 64
        for i, (w, s) in enumerate(zip((64, 128, 256, 512), (1, 2, 2, 2))):
            setattr(self, f"layer{i + 1}", nn.Sequential(BasicBlock(cin, w, s), BasicBlock(w, w, 1)))
            cin = w
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        for i in range(4):
            y = getattr(self, f"layer{i + 1}")(y)
        return self.fc(y.mean((2, 3)))


def resnet_fixture():
    model = ResNet18(10)
    out = {}
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            t.copy_(rule_value(name, t.shape, *resnet_rule(name, t.shape)))
            out["head." + name] = t.reshape(-1)[:8].clone()  # diagnoses a rule mismatch by name
    x = torch.randn(4, 1, 28, 28)
    target = torch.tensor([3, 1, 7, 0])
    model.eval()
    with torch.no_grad():
        out["eval.logits"] = model(x)
    model.train()
    logits = model(x)
    loss = F.cross_entropy(logits, target)
    loss.backward()
    out.update({"input": x, "target": target, "train.logits": logits.detach(), "train.loss": loss.detach()})
    params = dict(model.named_parameters())
    for name in ("conv1.weight", "bn1.weight", "bn1.bias", "layer2.0.downsample.0.weight", "layer3.1.bn1.bias",
                 "layer4.1.bn2.weight", "fc.weight", "fc.bias"):
        out["grad." + name] = params[name].grad.clone()
    buffers = dict(model.named_buffers())
    for name in ("bn1.running_mean", "bn1.running_var", "layer4.1.bn2.running_var"):
        out["after." + name] = buffers[name].clone()
    return out


def mlp_fixture():
    # MlpClassifier(in 64, hidden [32, 16], 10 classes): weights stored directly (3K values).
    model = nn.ModuleDict({"hidden": nn.ModuleList([nn.Linear(64, 32), nn.Linear(32, 16)]), "head": nn.Linear(16, 10)})

    def forward(x):
        y = x.reshape(x.shape[0], -1)
        for layer in model["hidden"]:
            y = F.relu(layer(y))
        return model["head"](y)

    x = torch.randn(4, 1, 8, 8)
    target = torch.tensor([9, 0, 4, 4])
    logits = forward(x)
    loss = F.cross_entropy(logits, target)
    loss.backward()
    out = {"input": x, "target": target, "logits": logits.detach(), "loss": loss.detach()}
    for name, p in model.named_parameters():
        out["param." + name] = p.detach().clone()
        out["grad." + name] = p.grad.clone()
    return out


def main():
    torch.manual_seed(2024)
    torch.set_num_threads(1)
    for name, out in (("resnet.pt", resnet_fixture()), ("mlp.pt", mlp_fixture())):
        path = os.path.join(FIXTURES, name)
        torch.save(out, path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    r = torch.load(os.path.join(FIXTURES, "resnet.pt"))
    print("resnet eval logits", r["eval.logits"][0], "train loss", float(r["train.loss"]))


if __name__ == "__main__":
    main()
