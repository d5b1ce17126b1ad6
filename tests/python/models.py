"""Tiny models written in plain torch for the tests (and the 2-rank worker), and their data."""
import math

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in=8, hidden=16, d_out=4):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x, y):
        out = self.fc2(torch.tanh(self.fc1(x)))
        return nn.functional.mse_loss(out.float(), y.float())  # in fp32 under bf16 too


def sequential_mlp():
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (t.view(B, T, self.heads, D // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D // self.heads)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, D))
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab=32, d=16, heads=2, layers=2, T=8):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x))
        return nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def mlp_data(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    return x, torch.sin(x[:, :4] * 2) + 0.1 * torch.randn(n, 4, generator=g)


def gpt_data(n, seed=0, vocab=32, T=8):
    """Sequences counting up by a stride of 1 or 2 (mod vocab): learnable in a few steps."""
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, vocab, (n, 1), generator=g)
    stride = torch.randint(1, 3, (n, 1), generator=g)
    seq = (start + stride * torch.arange(T + 1)) % vocab
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def adamw_config(micro, gas=1, lr=1e-2, wd=0.01, **extra):
    cfg = {"train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": gas,
           "optimizer": {"type": "AdamW", "params": {"lr": lr, "betas": [0.9, 0.999], "eps": 1e-8,
                                                     "weight_decay": wd}}}
    cfg.update(extra)
    return cfg


class XtrainNamedGPT(nn.Module):
    """GPT-2 (pre-LayerNorm, tanh GELU, biases, tied head) in plain torch under the parameter names of
    xtrain's built-in `gpt` (wte, wpe, blocks.N.{ln1, attn.qkv, attn.proj, ln2, mlp.fc, mlp.proj}, ln_f),
    as tests/reference/gen_gpt.py writes it: a model defined in Python that the CLI also knows."""

    def __init__(self, vocab=256, d=32, heads=2, layers=2, T=16):
        super().__init__()
        self.heads = heads
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.blocks = nn.ModuleList(_NamedBlock(d) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def logits(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x, self.heads)
        return self.ln_f(x) @ self.wte.weight.t()

    def forward(self, idx, targets):
        logits = self.logits(idx)
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class _NamedBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.Module()
        self.attn.qkv, self.attn.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Module()
        self.mlp.fc, self.mlp.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, heads):
        B, T, D = x.shape
        q, k, v = self.attn.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (t.view(B, T, heads, D // heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D // heads)
        att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
        x = x + self.attn.proj((att @ v).transpose(1, 2).reshape(B, T, D))
        return x + self.mlp.proj(nn.functional.gelu(self.mlp.fc(self.ln2(x)), approximate="tanh"))
