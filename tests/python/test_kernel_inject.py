"""xtrain.ops.linear (the routed GEMM of src/xtrain/kernels/linear.h) and its injection into a module's
torch.nn.Linear by xtrain.initialize (python/xtrain/inject.py, config key xtrain.python.kernel_inject).

References are independent: torch's float64 linear for the op, and for training the same engine with
injection off (PyTorch's own linear) and a plain torch.optim loop."""
import pytest
import torch
from torch import nn

import xtrain
from conftest import clone_model, rel_diff
from models import MLP, TinyGPT, adamw_config, gpt_data, mlp_data
from xtrain.inject import inject_kernels, is_injected, remove

EPS32 = torch.finfo(torch.float32).eps


def gemm_bound(a, b):
    """The classic bound on a float32 dot product's rounding error (Higham, Accuracy and Stability of
    Numerical Algorithms, 3.1): |fl(a·b) - a·b| <= gamma_K |a|·|b| with gamma_K ~ K u, per element of
    a @ b.T; K is the summed dimension. x2 for safety (oneDNN blocks the sum, which only lowers it)."""
    k = a.shape[-1]
    return 2 * k * EPS32 * (a.double().abs() @ b.double().abs().transpose(-1, -2)) + 1e-30


def assert_within(got, want, bound, what):
    err = (got.double() - want).abs()
    worst = float((err / bound).max())
    assert worst <= 1.0, f"{what}: error {float(err.max()):.3g} is {worst:.2f}x the fp32 GEMM bound"


@pytest.mark.parametrize("x_shape,out,bias", [((7, 13), 5, True), ((3, 9, 24), 40, True), ((2, 5, 17), 11, False),
                                              ((64, 96), 128, True), ((1, 1, 8), 3, False)])
def test_linear_forward_and_gradients_match_float64(x_shape, out, bias):
    g = torch.Generator().manual_seed(sum(x_shape) + out)
    x = torch.randn(*x_shape, generator=g, requires_grad=True)
    w = torch.randn(out, x_shape[-1], generator=g, requires_grad=True)
    b = torch.randn(out, generator=g, requires_grad=True) if bias else None
    y = xtrain.ops.linear(x, w, b)
    assert y.dtype == torch.float32 and y.shape == (*x_shape[:-1], out)
    assert "LinearBiasFunction" in y.grad_fn.name() if bias else "LinearFunction" in y.grad_fn.name()
    dy = torch.randn(y.shape, generator=g)
    y.backward(dy)

    xd, wd, dyd = x.detach().double(), w.detach().double(), dy.double()
    ref = nn.functional.linear(xd, wd, b.detach().double() if bias else None)
    xs, dys = x.detach().reshape(-1, x_shape[-1]), dy.reshape(-1, out)
    assert_within(y.detach(), ref, gemm_bound(x.detach(), w.detach()) + (ref.abs() * EPS32 if bias else 0), "y")
    assert_within(x.grad, dyd @ wd, gemm_bound(dy, w.detach().t()), "dx")
    assert_within(w.grad, dys.double().t() @ xs.double(), gemm_bound(dys.t(), xs.t()), "dw")
    if bias:
        db = dys.double().sum(0)
        assert_within(b.grad, db, dys.shape[0] * EPS32 * dys.double().abs().sum(0) + 1e-30, "db")


def test_linear_bf16_tracks_float64():
    g = torch.Generator().manual_seed(3)
    x, w, b = torch.randn(6, 32, generator=g), torch.randn(24, 32, generator=g), torch.randn(24, generator=g)
    y = xtrain.ops.linear(x.bfloat16(), w.bfloat16(), b.bfloat16())
    ref = nn.functional.linear(x.bfloat16().double(), w.bfloat16().double(), b.bfloat16().double())
    assert y.dtype == torch.bfloat16
    # fp32 accumulation, one bf16 rounding of the result: 2^-8 relative, plus the fp32 sum.
    assert_within(y, ref, ref.abs() * 2.0 ** -8 + gemm_bound(x, w), "bf16 y")


def _strided(t, transpose):
    """t itself, or the same values held transposed in memory (unit stride in dim -2)."""
    return t.transpose(-2, -1).contiguous().transpose(-2, -1) if transpose else t


@pytest.mark.parametrize("a_shape,n,ta,tb", [((4, 9, 16), 7, False, False), ((2, 3, 17, 8), 17, False, True),
                                             ((2, 2, 5, 33), 6, True, False), ((1, 2, 2, 4, 6), 3, True, True)])
def test_matmul_forward_and_gradients_match_float64(a_shape, n, ta, tb):
    g = torch.Generator().manual_seed(sum(a_shape) + n)
    a = _strided(torch.randn(*a_shape, generator=g), ta).requires_grad_()
    b = _strided(torch.randn(*a_shape[:-2], a_shape[-1], n, generator=g), tb).requires_grad_()
    c = xtrain.ops.matmul(a, b)
    assert c.shape == (*a_shape[:-1], n) and "MatmulFunction" in c.grad_fn.name(), c.grad_fn.name()
    dc = torch.randn(c.shape, generator=g)
    c.backward(dc)
    ad, bd, dcd = a.detach().double(), b.detach().double(), dc.double()
    tr = lambda t: t.transpose(-2, -1)  # noqa: E731
    assert_within(c.detach(), ad @ bd, gemm_bound(a.detach(), tr(b.detach())), "c")
    assert_within(a.grad, dcd @ tr(bd), gemm_bound(dc, b.detach()), "da")
    assert_within(b.grad, tr(ad) @ dcd, gemm_bound(tr(a.detach()), tr(dc)), "db")


def test_matmul_falls_back_to_torch_where_it_cannot_route():
    a, b = torch.randn(2, 3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    assert "MatmulFunction" not in xtrain.ops.matmul(a, b).grad_fn.name()  # 3-D @ 2-D broadcasts
    a1 = torch.randn(1, 3, 4, requires_grad=True)
    b2 = torch.randn(2, 4, 5, requires_grad=True)
    c = xtrain.ops.matmul(a1, b2)  # broadcast batch: PyTorch's, same values
    assert "MatmulFunction" not in c.grad_fn.name() and torch.equal(c, torch.matmul(a1, b2))
    ad = torch.randn(2, 3, 4, dtype=torch.float64)
    assert torch.equal(xtrain.ops.matmul(ad, ad.transpose(1, 2)), ad @ ad.transpose(1, 2))
    with pytest.raises(ValueError):
        xtrain.ops.matmul(torch.randn(2, 3, 4), torch.randn(2, 5, 6))


def test_matmul_bf16_tracks_float64():
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(3, 8, 32, generator=g), torch.randn(3, 32, 12, generator=g)
    c = xtrain.ops.matmul(a.bfloat16(), b.bfloat16())
    ref = a.bfloat16().double() @ b.bfloat16().double()
    assert c.dtype == torch.bfloat16
    assert_within(c, ref, ref.abs() * 2.0 ** -8 + gemm_bound(a, b.transpose(-2, -1)), "bf16 c")


def test_linear_bad_input_raises_value_error():
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    with pytest.raises(ValueError, match=r"xtrain.ops.linear: input .* and weight .* must agree"):
        xtrain.ops.linear(x, torch.randn(3, 7))
    with pytest.raises(ValueError, match=r"bias must be \[out\] = \[3\]"):
        xtrain.ops.linear(x, w, torch.randn(4))
    with pytest.raises(ValueError, match="one dtype"):
        xtrain.ops.linear(x, w.double())
    with pytest.raises(ValueError, match="must agree"):
        xtrain.ops.linear(x, torch.randn(8))
    assert xtrain.ops.linear(x, w).shape == (4, 3)  # the interpreter survives


class MyLinear(nn.Linear):
    """A subclass: its own forward (here the same math), which injection must leave alone."""

    def forward(self, x):
        return super().forward(x)


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.mine = MyLinear(16, 16)
        self.out = nn.Linear(16, 4, bias=False)

    def forward(self, x, y):
        h = torch.tanh(self.mine(torch.tanh(self.fc(x))))
        return nn.functional.mse_loss(self.out(h), y)


def test_engine_injects_exact_cpu_linears_only():
    torch.manual_seed(1)
    model = Mixed()
    keys = list(model.state_dict())
    seen = []
    model.fc.register_forward_hook(lambda m, i, o: seen.append(o.grad_fn.name()))
    engine, *_ = xtrain.initialize(model=model, config=adamw_config(4))
    assert engine.module is model and list(model.state_dict()) == keys
    assert is_injected(model.fc) and is_injected(model.out)
    assert not is_injected(model.mine) and "forward" not in vars(model.mine)  # subclass left as is
    x, y = mlp_data(4)
    engine.backward(engine(x, y))
    assert engine.step()
    assert len(seen) == 1 and "LinearBiasFunction" in seen[0], seen  # the hook fired, on xtrain's node
    remove(model)
    assert not is_injected(model.fc) and "forward" not in vars(model.fc)


def test_config_key_turns_injection_off():
    model = MLP()
    cfg = adamw_config(4, xtrain={"python": {"kernel_inject": False}})
    engine, *_ = xtrain.initialize(model=model, config=cfg)
    assert not is_injected(model.fc1) and not is_injected(model.fc2)
    assert xtrain.load_config(adamw_config(4)).kernel_inject is True
    with pytest.raises(xtrain.ConfigError, match="kernel_inject"):
        xtrain.load_config(adamw_config(4, xtrain={"python": {"kernel_injct": False}}))


def gpt_run(inject, steps=20, zero=0, seed=6):
    torch.manual_seed(seed)
    model = TinyGPT()
    cfg = adamw_config(2, xtrain={"python": {"kernel_inject": inject}},
                       zero_optimization={"stage": zero, "stage3_param_persistence_threshold": 100})
    engine, *_ = xtrain.initialize(model=model, config=cfg)
    idx, tgt = gpt_data(2 * steps)
    losses = []
    for i in range(steps):
        engine.backward(engine(idx[2 * i:2 * i + 2], tgt[2 * i:2 * i + 2]))
        engine.step()
        losses.append(engine.last_step()["loss"])
    return model, losses, engine


def test_injected_training_tracks_pytorch_linear():
    """20 AdamW steps of a tiny GPT, injection on against off. The two differ only in the GEMMs'
    summation order (oneDNN's blocking against OpenBLAS's), ~1e-7 relative per result; measured: losses
    within 1.6e-7 relative, every tensor within 5e-7. Bounds 1e-5 leave 20x for other machines and still
    fail on a real error (a wrong transpose, a missing bias gradient or a gradient scaled by 2 moves
    the losses by percent within a few steps). One exception: the key third of qkv.bias. Its true
    gradient is exactly zero (softmax ignores a constant added to all of a query's scores), so both runs
    see rounding noise there and AdamW, which divides by the gradient's own RMS, steps it by up to lr per
    step in a direction the noise picks: it only has to stay within lr * steps of where it started."""
    model_on, on, _ = gpt_run(True)
    model_off, off, _ = gpt_run(False)
    assert is_injected(model_on.blocks[0].qkv) and not is_injected(model_off.blocks[0].qkv)
    assert on[-1] < 0.9 * on[0]  # it trains
    for i, (a, b) in enumerate(zip(on, off)):
        assert abs(a - b) <= 1e-5 * abs(b), f"step {i + 1}: injected {a}, PyTorch's linear {b}"
    torch.manual_seed(6)
    start = TinyGPT()
    for (name, a), b, s in zip(model_on.named_parameters(), model_off.parameters(), start.parameters()):
        if name.endswith("qkv.bias"):
            d = a.numel() // 3
            assert rel_diff([a[:d], a[2 * d:]], [b[:d], b[2 * d:]]) < 1e-5, name
            assert float((a[d:2 * d] - s[d:2 * d]).abs().max()) <= 1e-2 * 20 * 1.01, name
        else:
            assert rel_diff([a], [b]) < 1e-5, name


def test_zero3_with_injection_equals_stage0():
    """ZeRO-3's unit forward wraps the injected one: units gathered around xtrain's linear kernel give
    the stage-0 run (the same kernels, so to the same tolerance as without injection)."""
    m0, l0, _ = gpt_run(True, steps=6)
    m3, l3, e3 = gpt_run(True, steps=6, zero=3)
    assert [u for u, _ in e3._c.units] == ["blocks.0", "blocks.1"]
    assert is_injected(m3.blocks[0].qkv) and m3.blocks[0].qkv.weight.numel() == 0
    assert l3 == pytest.approx(l0, rel=1e-6)


def test_other_dtypes_and_devices_are_left_as_is():
    model = nn.ModuleDict({"f64": nn.Linear(4, 4).double(), "f16": nn.Linear(4, 4).half(),
                           "meta": nn.Linear(4, 4, device="meta"), "bf16": nn.Linear(4, 4).bfloat16()})
    assert inject_kernels(model) == ["bf16"]


def test_inject_kernels_on_a_plain_module_and_unit_linear():
    """inject_kernels by hand: a Sequential of Linears (each Linear is itself patched) matches torch."""
    torch.manual_seed(2)
    seq = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 4))
    ref = clone_model(seq)
    assert inject_kernels(seq) == ["0", "2"] and inject_kernels(seq) == []  # twice: nothing new
    x = torch.randn(5, 8)
    y, want = seq(x), ref(x)
    y.sum().backward()
    want.sum().backward()
    assert rel_diff([y], [want]) < 1e-5
    assert rel_diff([p.grad for p in seq.parameters()], [p.grad for p in ref.parameters()]) < 1e-5


class TiedLM(nn.Module):
    """A tied LM head (h @ wte.weight.t()) and a tanh GELU: the calls inject.functions() serves."""

    def __init__(self, vocab=40, d=24):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, idx, targets):
        h = self.wte(idx)
        h = h + self.out(nn.functional.gelu(self.fc(h), approximate="tanh"))
        logits = h @ self.wte.weight.t()
        return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def test_functions_serve_weight_matmuls_and_tanh_gelu_only():
    torch.manual_seed(3)
    w = nn.Parameter(torch.randn(10, 6))
    x, a = torch.randn(2, 5, 6, requires_grad=True), torch.randn(10, 6)
    names = []
    with xtrain.inject.functions():
        names.append((x @ w.t()).grad_fn.name())
        names.append(torch.matmul(x, w.t()).grad_fn.name())
        names.append((x @ a.t()).grad_fn.name())  # not a parameter: PyTorch's
        w2 = nn.Parameter(torch.randn(6, 10))
        y2 = x @ w2  # a parameter used as [in, out]
        names.append(y2.grad_fn.name())
        g = nn.functional.gelu(x, approximate="tanh")
        names.append(g.grad_fn.name())
        names.append(nn.functional.gelu(x).grad_fn.name())  # exact GELU: PyTorch's
        q = torch.randn(2, 3, 5, 4, requires_grad=True)
        names.append((q @ q.transpose(-2, -1)).grad_fn.name())  # two activations, equal batch dims
        names.append(torch.bmm(x, x.transpose(1, 2)).grad_fn.name())
        names.append((q @ torch.randn(4, 2)).grad_fn.name())  # broadcast 2-D operand: PyTorch's
    assert "LinearFunction" in names[0] and "LinearFunction" in names[1], names
    assert "LinearFunction" not in names[2] and "LinearFunction" in names[3], names
    assert "GeluTanh" in names[4] and "Gelu" in names[5] and "GeluTanh" not in names[5], names
    assert "MatmulFunction" in names[6] and "MatmulFunction" in names[7], names
    assert "MatmulFunction" not in names[8], names
    want2 = x.detach().double() @ w2.detach().double()
    assert_within(y2.detach(), want2, gemm_bound(x.detach(), w2.detach().t()), "x @ w")
    ref = nn.functional.gelu(x.detach().double(), approximate="tanh")
    assert float((g.detach().double() - ref).abs().max()) < 1e-6
    (gx,) = torch.autograd.grad(g.sum(), x)
    xd = x.detach().double().requires_grad_()
    (want,) = torch.autograd.grad(nn.functional.gelu(xd, approximate="tanh").sum(), xd)
    assert float((gx.double() - want).abs().max()) < 1e-6


def test_tied_head_model_trains_as_with_pytorch():
    """Injection on against off for a tied head and tanh GELU (bounds as in the GPT test above); the
    tied embedding gets both gradients (lookup and head) through xtrain's linear node."""
    runs = []
    for inject in (True, False):
        torch.manual_seed(4)
        model = TiedLM()
        engine, *_ = xtrain.initialize(model=model, config=adamw_config(
            2, xtrain={"python": {"kernel_inject": inject}}))
        idx, tgt = gpt_data(24, vocab=40)
        losses = []
        for i in range(12):
            engine.backward(engine(idx[2 * i:2 * i + 2], tgt[2 * i:2 * i + 2]))
            engine.step()
            losses.append(engine.last_step()["loss"])
        runs.append((model, losses))
    (m_on, on), (m_off, off) = runs
    assert on[-1] < 0.9 * on[0]
    for i, (a, b) in enumerate(zip(on, off)):
        assert abs(a - b) <= 1e-5 * abs(b), f"step {i + 1}: injected {a}, PyTorch {b}"
    assert rel_diff(list(m_on.parameters()), list(m_off.parameters())) < 1e-5


def test_memory_pool_serves_the_steps_after_warm_up():
    """xtrain.initialize installs the caching allocator: once two steps have run, later steps' blocks
    of 1 MiB and more (activations, gradients) come from its cache, not from the OS."""
    torch.manual_seed(5)
    model = TinyGPT(vocab=64, d=512, heads=4, layers=1, T=32)  # MLP activations [8, 32, 2048]: 2 MiB
    engine, *_ = xtrain.initialize(model=model, config=adamw_config(8))
    idx, tgt = gpt_data(48, vocab=64, T=32)
    stats = []
    for i in range(6):
        engine.backward(engine(idx[8 * i:8 * i + 8], tgt[8 * i:8 * i + 8]))
        engine.step()
        stats.append(xtrain._C.memory_pool_stats())
    assert stats[-1]["installed"] == 1 and stats[0]["os_allocations_1mb"] > 0, stats
    assert stats[-1]["cache_hits"] > stats[2]["cache_hits"]
    assert stats[-1]["os_allocations_1mb"] == stats[2]["os_allocations_1mb"], stats
