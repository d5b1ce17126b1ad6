#!/usr/bin/env python3
"""Reference for tests/models/vit_test.cpp: a tiny Vision Transformer in plain PyTorch, written
from the paper's definition with torch's own layers (the patch embedding is nn.functional.conv2d
with kernel = stride = patch; attention is F.multi_head_attention_forward, nn.MultiheadAttention's), parameters
named as xtrain's models::Vit so the C++ test loads them by name. Two models: class-token pool on
a non-square 8x12 image with 2 channels (grid 2x3), and mean pool on 1x8x8 (grid 2x2). Also the
xtrain.data.image_size resize: F.interpolate(bilinear, align_corners=False) of normalised u8
images. Writes fixtures/vit.pt. Run with /usr/bin/python3."""
import os

import torch
import torch.nn.functional as F

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def make_params(channels, patch, d, layers, ratio, tokens, classes, cls):
    """Weights drawn at a larger scale than training's init so every term matters."""
    p = {"patch_embed.weight": torch.randn(d, channels * patch * patch) * 0.2, "patch_embed.bias": torch.randn(d) * 0.1}
    if cls:
        p["cls_token"] = torch.randn(1, 1, d) * 0.5
    p["pos_embed"] = torch.randn(1, tokens, d) * 0.5
    for i in range(layers):
        b = f"blocks.{i}."
        for ln in ("ln1", "ln2"):
            p[b + ln + ".weight"] = 1 + torch.randn(d) * 0.1
            p[b + ln + ".bias"] = torch.randn(d) * 0.1
        p[b + "attn.qkv.weight"] = torch.randn(3 * d, d) * 0.3
        p[b + "attn.qkv.bias"] = torch.randn(3 * d) * 0.1
        p[b + "attn.proj.weight"] = torch.randn(d, d) * 0.2
        p[b + "attn.proj.bias"] = torch.randn(d) * 0.1
        p[b + "mlp.fc.weight"] = torch.randn(ratio * d, d) * 0.2
        p[b + "mlp.fc.bias"] = torch.randn(ratio * d) * 0.1
        p[b + "mlp.proj.weight"] = torch.randn(d, ratio * d) * 0.2
        p[b + "mlp.proj.bias"] = torch.randn(d) * 0.1
    p["ln_f.weight"] = 1 + torch.randn(d) * 0.1
    p["ln_f.bias"] = torch.randn(d) * 0.1
    p["head.weight"] = torch.randn(classes, d) * 0.3
    p["head.bias"] = torch.randn(classes) * 0.1
    return {k: v.requires_grad_() for k, v in p.items()}


def vit_forward(p, x, patch, heads, layers, cls):
    d = p["pos_embed"].shape[2]
    w = p["patch_embed.weight"].view(d, x.shape[1], patch, patch)
    h = F.conv2d(x, w, p["patch_embed.bias"], stride=patch)  # [B, d, gh, gw]
    h = h.flatten(2).transpose(1, 2)  # [B, gh*gw, d], patches row-major
    if cls:
        h = torch.cat([p["cls_token"].expand(x.shape[0], 1, d), h], 1)
    h = h + p["pos_embed"]
    for i in range(layers):
        b = f"blocks.{i}."
        # torch's own multi-head attention (nn.MultiheadAttention's function) on the fixture's tensors.
        a = F.layer_norm(h, (d,), p[b + "ln1.weight"], p[b + "ln1.bias"], 1e-5)
        y, _ = F.multi_head_attention_forward(
            a.transpose(0, 1), a.transpose(0, 1), a.transpose(0, 1), d, heads,
            p[b + "attn.qkv.weight"], p[b + "attn.qkv.bias"], None, None, False, 0.0,
            p[b + "attn.proj.weight"], p[b + "attn.proj.bias"], training=False, need_weights=False)
        h = h + y.transpose(0, 1)
        m = F.layer_norm(h, (d,), p[b + "ln2.weight"], p[b + "ln2.bias"], 1e-5)
        m = F.gelu(F.linear(m, p[b + "mlp.fc.weight"], p[b + "mlp.fc.bias"]), approximate="tanh")
        h = h + F.linear(m, p[b + "mlp.proj.weight"], p[b + "mlp.proj.bias"])
    h = F.layer_norm(h, (d,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    pooled = h[:, 0] if cls else h.mean(1)
    return F.linear(pooled, p["head.weight"], p["head.bias"])


def case(prefix, channels, image, patch, d, heads, layers, ratio, classes, cls, batch):
    gh, gw = image[0] // patch, image[1] // patch
    p = make_params(channels, patch, d, layers, ratio, gh * gw + (1 if cls else 0), classes, cls)
    x = torch.randn(batch, channels, *image)
    target = torch.randint(0, classes, (batch,))
    logits = vit_forward(p, x, patch, heads, layers, cls)
    loss = F.cross_entropy(logits, target)
    loss.backward()
    out = {prefix + "input": x, prefix + "target": target, prefix + "logits": logits.detach(),
           prefix + "loss": loss.detach()}
    for k, v in p.items():
        out[prefix + "param." + k] = v.detach().clone()
        out[prefix + "grad." + k] = v.grad.clone()
    return out


def resize_case():
    # Fashion-MNIST's normalisation (datasets.cpp kFashionNorm) is applied by the test's own
    # ImageDataset: the fixture stores u8 pixels and the resized normalised floats.
    mean, std = 0.2860, 0.3530
    pixels = torch.randint(0, 256, (3, 5, 7), dtype=torch.uint8)
    x = ((pixels.double() / 255 - mean) / std).float().unsqueeze(1)
    return {"resize.pixels": pixels, "resize.mean": torch.tensor(mean, dtype=torch.float64),
            "resize.std": torch.tensor(std, dtype=torch.float64),
            "resize.up": F.interpolate(x, size=(11, 11), mode="bilinear", align_corners=False),
            "resize.down": F.interpolate(x, size=(3, 3), mode="bilinear", align_corners=False)}


def main():
    torch.manual_seed(2026)
    torch.set_num_threads(1)
    out = {}
    out.update(case("cls.", 2, (8, 12), 4, 16, 2, 2, 2, 5, True, 3))
    out.update(case("mean.", 1, (8, 8), 4, 12, 3, 1, 4, 4, False, 2))
    out.update(resize_case())
    path = os.path.join(FIXTURES, "vit.pt")
    torch.save(out, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes); cls logits {out['cls.logits'][0].tolist()}")


if __name__ == "__main__":
    main()
