#!/usr/bin/env python3
"""Reference for tests/models/gpt_test.cpp: the xtrain GPT written independently in plain PyTorch
(nanoGPT's textbook attention: q@kᵀ·scale, masked_fill, softmax, @v), parameters named as xtrain
names them. Writes fixtures/gpt.pt: weights ("param.<name>"), tokens, logits, loss and the gradient
of every parameter for the tied model; logits/loss/wte+lm_head grads for an untied twin; a greedy
and a sampled continuation (the sampling is xtrain's: temperature, top-k, torch.multinomial with a
CPU generator). Run with /usr/bin/python3 (python3-torch 1.13.1)."""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

L, C, NH, T, V, B = 2, 32, 4, 16, 128, 2
HS = C // NH


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)), persistent=False)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(b, t, NH, HS).transpose(1, 2)
        k = k.view(b, t, NH, HS).transpose(1, 2)
        v = v.view(b, t, NH, HS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))
        att = att.masked_fill(self.mask[:t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, C)
        return self.proj(y)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(C, 4 * C)
        self.proj = nn.Linear(4 * C, C)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = nn.LayerNorm(C), Attention(), nn.LayerNorm(C), Mlp()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, tied):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList([Block() for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = None if tied else nn.Linear(C, V, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        return x @ self.wte.weight.t() if self.lm_head is None else self.lm_head(x)


def randomise(model):
    # Not GPT-2's 0.02 init: weights ~ N(0, 1/fan_in) and embeddings ~ N(0, 0.25) put GELU inputs,
    # attention scores and logits at O(1), where a wrong approximation or scale shows; LayerNorm
    # weights/biases and Linear biases are random too, so a swapped parameter shows as well.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln1.weight") or name.endswith("ln2.weight") or name == "ln_f.weight":
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif name.startswith("wte") or name.startswith("wpe"):
                p.copy_(0.5 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / math.sqrt(p.shape[1]))


def continuation(model, prompt, n, temperature, top_k, seed):
    g = torch.Generator().manual_seed(seed)
    tokens, margins = list(prompt), []
    with torch.no_grad():
        for _ in range(n):
            ctx = torch.tensor([tokens[-T:]])
            logits = model(ctx)[0, -1, :].unsqueeze(0) / temperature
            top2 = torch.topk(logits, 2).values[0]
            margins.append(float(top2[0] - top2[1]))
            if top_k > 0:
                kth = torch.topk(logits, top_k).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = F.softmax(logits, dim=-1)
            tokens.append(int(torch.multinomial(probs, 1, generator=g)))
    return tokens[len(prompt):], min(margins)


def main():
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    out = {"config": torch.tensor([L, C, NH, T, V, B])}
    model = GPT(tied=True)
    randomise(model)
    idx = torch.randint(0, V, (B, T))
    targets = torch.randint(0, V, (B, T))
    logits = model(idx)
    loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))
    loss.backward()
    out.update(idx=idx, targets=targets, logits=logits.detach(), loss=loss.detach())
    for name, p in model.named_parameters():
        out["param." + name] = p.detach().clone()
        out["grad." + name] = p.grad.clone()

    untied = GPT(tied=False)
    untied.load_state_dict(model.state_dict(), strict=False)
    with torch.no_grad():
        untied.lm_head.weight.copy_(0.5 * torch.randn(V, C))
    logits_u = untied(idx)
    loss_u = F.cross_entropy(logits_u.view(-1, V), targets.view(-1))
    loss_u.backward()
    out["untied.param.lm_head.weight"] = untied.lm_head.weight.detach().clone()
    out["untied.logits"], out["untied.loss"] = logits_u.detach(), loss_u.detach()
    out["untied.grad.wte.weight"] = untied.wte.weight.grad.clone()
    out["untied.grad.lm_head.weight"] = untied.lm_head.weight.grad.clone()

    # Generation: prompt + n > T, so the context is cropped. top_k=1 is greedy decoding.
    prompt, n = [3, 14, 15, 92, 65], 24
    greedy, margin = continuation(model, prompt, n, 1.0, 1, 0)
    sample, _ = continuation(model, prompt, n, 0.8, 10, 4321)
    print(f"greedy continuation: smallest top-1/top-2 logit gap {margin:.3g} (must dwarf fp32 noise)")
    assert margin > 1e-4
    out["gen.prompt"] = torch.tensor(prompt)
    out["gen.greedy"] = torch.tensor(greedy)
    out["gen.sample"] = torch.tensor(sample)  # temperature 0.8, top_k 10, seed 4321
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "gpt.pt")
    torch.save(out, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes), loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
