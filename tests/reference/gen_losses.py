#!/usr/bin/env python3
"""Reference for tests/nn/losses_test.cpp. Cross-entropy: torch.nn.functional.cross_entropy with
label_smoothing 0.0 and 0.1. Focal loss: the paper's formula (Lin et al. 2017) written naively
in float64 from softmax probabilities, -alpha_t * (1 - p_t)**gamma * log(p_t), mean over rows.
Gradients wrt the logits by autograd. Rows include a near-certain and a hopeless prediction (the
tails where a naive fp32 formula breaks). Writes fixtures/losses.pt. Run with /usr/bin/python3."""
import os

import torch
import torch.nn.functional as F


def focal_reference(logits, target, gamma, alpha):
    x = logits.detach().double().requires_grad_()
    p = F.softmax(x, dim=1)
    p_t = p[torch.arange(len(target)), target]
    a_t = torch.ones_like(p_t) if alpha is None else alpha.double()[target]
    loss = (-a_t * (1 - p_t) ** gamma * torch.log(p_t)).mean()
    loss.backward()
    return loss.detach(), x.grad


def main():
    torch.manual_seed(7)
    N, V = 12, 7
    logits = 2 * torch.randn(N, V)
    target = torch.randint(0, V, (N,))
    logits[0, target[0]] = 30.0                      # p_t -> 1: (1 - p_t) underflows in fp32
    logits[1] = 0.5 * torch.randn(V)
    logits[1, target[1]], logits[1, (target[1] + 1) % V] = -30.0, 60.0  # p_t = e^-90: fp32 0
    alpha = torch.tensor([0.25, 0.5, 1.0, 0.75, 2.0, 0.1, 1.5])
    out = {"logits": logits, "target": target, "alpha": alpha}

    for name, ls in (("ce0", 0.0), ("ce01", 0.1)):
        x = logits.clone().requires_grad_()
        loss = F.cross_entropy(x, target, label_smoothing=ls)
        loss.backward()
        out[name + ".loss"], out[name + ".grad"] = loss.detach(), x.grad

    for name, gamma, a in (("focal_g0", 0.0, None), ("focal_g2", 2.0, None), ("focal_g2_alpha", 2.0, alpha),
                           ("focal_g05_alpha", 0.5, alpha)):
        loss, grad = focal_reference(logits, target, gamma, a)
        out[name + ".loss"], out[name + ".grad"] = loss, grad
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "losses.pt")
    torch.save(out, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
