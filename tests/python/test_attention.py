"""xtrain.ops.attention and xtrain.nn.MultiScaleAttention against a dense masked reference written
here in plain torch from shared/design/multiscale-attention.md (pooled levels, the causal and
bidirectional key rules, the log(size) bias, one softmax), independent of the C++ kernels.

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python/test_attention.py -q
"""
import math

import numpy
import pytest
import torch

import xtrain.nn
import xtrain.ops


# ---- the reference, from the design page ---------------------------------------------------------

def down(x, a):
    return x // a * a


def up(x, a):
    return -(-x // a) * a


def segments(a, b, level):
    """Level `level`'s segments m covering [a, b) (a aligned; b aligned or the end of the sequence)."""
    return [(level, m) for m in range(a >> level, up(b, 1 << level) >> level)]


def causal_keys(i, n, w):
    out, e, level = [], i + 1, 0
    while True:
        s = max(0, down(e - w * (1 << level), 1 << (level + 1)))
        out += segments(s, e, level)
        if s == 0:
            return out
        e, level = s, level + 1


def bidirectional_keys(i, n, w):
    s = max(0, down(i - w // 2, 2))
    f = min(n, up(i + 1 + (w + 1) // 2, 2))
    out, level = segments(s, f, 0), 1
    while s > 0 or f < n:
        ns = max(0, down(s - (w // 2) * (1 << level), 1 << (level + 1)))
        nf = min(n, up(f + (w // 2) * (1 << level), 1 << (level + 1)))
        out += segments(ns, s, level)
        if f < n:
            out += segments(f, nf, level)
        s, f, level = ns, nf, level + 1
    return out


def pooling(n, dtype):
    """P [R, n] with row (level, m) = the mean over seg(level, m); rows in level order; sizes [R]."""
    rows, index = [], {}
    level = 0
    while True:
        width = 1 << level
        for m in range(up(n, width) // width):
            index[(level, m)] = len(rows)
            rows.append((m * width, min((m + 1) * width, n)))
        if width >= n:
            break
        level += 1
    P = torch.zeros(len(rows), n, dtype=dtype)
    for r, (a, b) in enumerate(rows):
        P[r, a:b] = 1.0 / (b - a)
    sizes = torch.tensor([b - a for a, b in rows], dtype=dtype)
    return P, sizes, index


def mask_for(n, w, causal):
    P, sizes, index = pooling(n, torch.float64)
    mask = torch.zeros(n, len(sizes), dtype=torch.bool)
    for i in range(n):
        keys = causal_keys(i, n, w) if causal else bidirectional_keys(i, n, w)
        for key in keys:
            assert not mask[i, index[key]], f"segment {key} counted twice for query {i}"
            mask[i, index[key]] = True
        # The rule must partition [0, i] (causal) or [0, n) exactly: a check of this reference.
        covered = mask[i].double() @ (P > 0).double()  # how often each position is counted
        want = torch.zeros(n, dtype=torch.float64)
        want[: i + 1 if causal else n] = 1
        assert torch.equal(covered, want), f"n={n} w={w} query {i}: not an exact partition"
    return mask


def reference_attention(q, k, v, windows, causal):
    """q, k, v [B, NH, T, HS] -> [B, NH, T, HS], ordinary autograd, heads split as numpy.array_split."""
    B, NH, T, HS = q.shape
    P, sizes, _ = pooling(T, q.dtype)
    groups = numpy.array_split(numpy.arange(NH), len(windows))
    outs = []
    for h in range(NH):
        w = next(windows[s] for s, g in enumerate(groups) if h in g)
        kp, vp = P @ k[:, h], P @ v[:, h]
        score = q[:, h] @ kp.transpose(-1, -2) / math.sqrt(HS) + sizes.log()
        score = score.masked_fill(~mask_for(T, w, causal), float("-inf"))
        outs.append(score.softmax(-1) @ vp)
    return torch.stack(outs, 1)


def qkv(shape, dtype=torch.float32, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g, dtype=dtype).requires_grad_(grad) for _ in range(3)]


def assert_close(got, want, rtol, atol, what):
    err = (got.double() - want.double()).abs()
    bound = atol + rtol * want.double().abs()
    worst = (err - bound).argmax()
    assert bool((err <= bound).all()), (f"{what}: |diff| {err.flatten()[worst]:.3g} > {bound.flatten()[worst]:.3g} "
                                        f"at {numpy.unravel_index(worst.item(), err.shape)}")


# ---- xtrain.ops ----------------------------------------------------------------------------------

def test_kernels_lists_the_registry():
    names = xtrain.ops.kernels()
    for name in ("ms_fused_cpu", "ms_reference", "dense_flash_cpu", "dense_composite"):
        assert name in names, names
    assert "auto" not in names and len(set(names)) == len(names)
    # Highest priority first: the fused CPU kernels before the composite, the O(T^2) reference last.
    assert names.index("ms_fused_cpu") < names.index("dense_composite") < names.index("ms_reference")
    q = torch.zeros(1, 2, 8, 4)
    assert xtrain.ops.kernel_for(q, windows=[2]) == "ms_fused_cpu"
    assert xtrain.ops.kernel_for(q) == "dense_flash_cpu"


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("kernel", ["auto", "ms_reference"])
@pytest.mark.parametrize("T,windows", [(1, [2]), (5, [8, 2]), (37, [3, 4, 2]), (70, [4, 8])])
def test_attention_equals_dense_reference(causal, kernel, T, windows):
    q, k, v = qkv((2, 4, T, 8), grad=True)
    got = xtrain.ops.attention(q, k, v, kernel=kernel, windows=windows, causal=causal)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    want = reference_attention(q64, k64, v64, windows, causal)
    assert got.shape == want.shape and got.dtype == torch.float32
    assert_close(got, want, 1e-5, 1e-6, "output")  # fp32 against a float64 reference
    dy = torch.randn_like(want)
    got_grads = torch.autograd.grad(got, (q, k, v), dy.float())
    want_grads = torch.autograd.grad(want, (q64, k64, v64), dy)
    for name, a, b in zip("qkv", got_grads, want_grads):
        assert_close(a, b, 1e-4, 1e-5, f"d{name}")  # fp32 sums over up to (w+1)(L+1) keys


@pytest.mark.parametrize("causal", [True, False])
def test_attention_gradcheck_float64(causal):
    q, k, v = qkv((1, 3, 9, 2), dtype=torch.float64, seed=1, grad=True)
    fn = lambda a, b, c: xtrain.ops.attention(a, b, c, windows=[2, 3], causal=causal)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k, v), eps=1e-6, atol=1e-7)


def test_attention_bf16_tracks_float64():
    q, k, v = qkv((1, 2, 33, 16), seed=2)
    got = xtrain.ops.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), windows=[4, 8])
    assert got.dtype == torch.bfloat16
    want = reference_attention(q.bfloat16().double(), k.bfloat16().double(), v.bfloat16().double(), [4, 8], True)
    assert_close(got, want, 1e-2, 1e-2, "bf16 output")  # bf16 has 8 bits of mantissa


def test_bad_input_raises_value_error_and_the_interpreter_survives():
    q = torch.zeros(2, 3, 4)
    with pytest.raises(ValueError, match=r"\[2, 3, 4\]"):
        xtrain.ops.attention(q, q, q, windows=[2])
    a, b = torch.zeros(1, 2, 8, 4), torch.zeros(1, 2, 9, 4)
    with pytest.raises(ValueError, match=r"\[1, 2, 9, 4\]"):
        xtrain.ops.attention(a, b, a, windows=[2])
    with pytest.raises(ValueError, match=r'unknown kernel "ms_fused_cpuu".*ms_fused_cpu'):
        xtrain.ops.attention(a, a, a, kernel="ms_fused_cpuu", windows=[2])
    with pytest.raises(ValueError, match="ms_fused_cpu"):  # a dense call to a multi-scale kernel
        xtrain.ops.attention(a, a, a, kernel="ms_fused_cpu")
    with pytest.raises(ValueError, match="window"):
        xtrain.ops.attention(a, a, a, windows=[2, 4, 8])  # 2 heads, 3 windows
    assert xtrain.ops.attention(a, a, a, windows=[2]).shape == a.shape  # still alive


# ---- xtrain.nn.MultiScaleAttention ---------------------------------------------------------------

def module_reference(m, x):
    """The module's definition with the reference attention: qkv, heads, attention, concat, W_o."""
    B, T, C = x.shape
    H = m.num_heads
    q, k, v = (x.double() @ m.qkv.weight.double().t() + m.qkv.bias.double()).split(C, -1)
    heads = [t.reshape(B, T, H, C // H).transpose(1, 2) for t in (q, k, v)]
    y = reference_attention(*heads, m.windows, m.causal).transpose(1, 2).reshape(B, T, C)
    return y @ m.proj.weight.double().t() + m.proj.bias.double()


def test_seed_call():
    torch.manual_seed(0)
    attn = xtrain.nn.MultiScaleAttention(embed_dim=512, num_heads=8, window_size=[8, 16, 32])
    assert [h for _, h in attn.head_groups] == [len(g) for g in numpy.array_split(numpy.arange(8), 3)] == [3, 3, 2]
    assert attn.W_qkv.weight.shape == (1536, 512) and attn.W_o.weight.shape == (512, 512)
    assert attn.qkv.bias is not None and attn.proj.bias is not None
    assert sum(p.numel() for p in attn.parameters()) == 4 * 512 * 512 + 4 * 512  # as nn.MultiheadAttention
    x = torch.randn(2, 50, 512, requires_grad=True)
    y = attn(x)
    assert y.shape == x.shape
    assert_close(y, module_reference(attn, x.detach()), 1e-4, 1e-5, "seed call output")
    y.square().sum().backward()
    assert x.grad is not None and all(p.grad is not None and p.grad.abs().sum() > 0 for p in attn.parameters())


def test_module_gradcheck_float64():
    torch.manual_seed(1)
    m = xtrain.nn.MultiScaleAttention(6, 3, window_size=[2, 3], causal=False, dtype=torch.float64)
    x = torch.randn(2, 7, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(m, (x,), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("causal", [True, False])
def test_module_equals_reference_and_batch_first(causal):
    torch.manual_seed(2)
    m = xtrain.nn.MultiScaleAttention(32, 4, window_size=[4, 8], causal=causal)
    x = torch.randn(3, 21, 32)
    y = m(x)
    assert_close(y, module_reference(m, x), 1e-4, 1e-5, "module output")
    m.batch_first = False
    assert torch.equal(m(x.transpose(0, 1)).transpose(0, 1), y)


def test_causality():
    torch.manual_seed(3)
    m = xtrain.nn.MultiScaleAttention(32, 4, window_size=[2, 4, 8])
    x = torch.randn(2, 45, 32)
    y = m(x)
    for i in (0, 7, 16, 30, 43):
        x2 = x.clone()
        x2[:, i + 1:] = torch.randn_like(x2[:, i + 1:]) * 10
        y2 = m(x2)
        assert torch.equal(y2[:, : i + 1], y[:, : i + 1]), f"output at <= {i} changed with inputs after it"
        if i + 1 < x.size(1):
            assert not torch.equal(y2[:, i + 1:], y[:, i + 1:])
    bi = xtrain.nn.MultiScaleAttention(32, 4, window_size=[2, 4, 8], causal=False)
    x2 = x.clone()
    x2[:, 30:] += 1
    assert not torch.equal(bi(x2)[:, :30], bi(x)[:, :30])  # the check can fail: bidirectional sees ahead


def test_module_dropout_only_in_training():
    torch.manual_seed(4)
    m = xtrain.nn.MultiScaleAttention(16, 2, window_size=[4], dropout=0.3)
    x = torch.randn(2, 12, 16)
    torch.manual_seed(5)
    a = m(x)
    torch.manual_seed(5)
    assert torch.equal(m(x), a)  # the masks come from torch's generator
    m.eval()
    assert_close(m(x), module_reference(m, x), 1e-4, 1e-5, "eval output")
    assert not torch.allclose(a, m(x))


def test_module_bad_arguments():
    with pytest.raises(ValueError, match=r"\[B, T, 512\].*got \[2, 5, 64\]"):
        xtrain.nn.MultiScaleAttention(512, 8)(torch.zeros(2, 5, 64))
    with pytest.raises(ValueError, match="num_heads"):
        xtrain.nn.MultiScaleAttention(512, 2, window_size=[8, 16, 32])
    with pytest.raises(ValueError, match="divide"):
        xtrain.nn.MultiScaleAttention(100, 8)
    m = xtrain.nn.MultiScaleAttention(16, 2, window_size=[4], kernel="nope")
    with pytest.raises(ValueError, match='unknown kernel "nope"'):
        m(torch.zeros(1, 4, 16))


@pytest.mark.parametrize("causal", [True, False])
def test_module_without_windows_is_ordinary_attention(causal):
    torch.manual_seed(6)
    m = xtrain.nn.MultiScaleAttention(16, 2, window_size=None, causal=causal)
    assert m.head_groups == [] and m.kernel_for(torch.zeros(1, 9, 16)) == "dense_flash_cpu"
    x = torch.randn(2, 9, 16)
    q, k, v = (x.double() @ m.qkv.weight.double().t() + m.qkv.bias.double()).split(16, -1)
    q, k, v = (t.reshape(2, 9, 2, 8).transpose(1, 2) for t in (q, k, v))
    score = q @ k.transpose(-1, -2) / math.sqrt(8)
    if causal:
        score = score.masked_fill(torch.ones(9, 9, dtype=torch.bool).triu(1), float("-inf"))
    y = (score.softmax(-1) @ v).transpose(1, 2).reshape(2, 9, 16) @ m.proj.weight.double().t() + m.proj.bias.double()
    assert_close(m(x), y, 1e-4, 1e-5, "dense module output")
