"""fp16 from Python: {"fp16": {"enabled": true, ...}} through xtrain.initialize keeps fp16 parameters over an fp32
master, scales the loss dynamically by DeepSpeed's rules (an overflowing step is skipped: weights, optimizer and
schedule untouched; the scale halves once hysteresis is used up and doubles after loss_scale_window clean steps;
the reference is DeepSpeed's DynamicLossScaler.update written out below from reference/deepspeed.md), and tracks
fp32 training (torch.optim.AdamW) within fp16's rounding. LibTorch 1.13 has no fp16 matmul on the CPU, so the
model is a two-layer linear net written with broadcast multiply and sum (ops it has for fp16)."""
import pytest
import torch
from torch import nn

import xtrain
from models import adamw_config, mlp_data


class HalfFriendlyNet(nn.Module):
    def __init__(self, d_in=8, hidden=16, d_out=4):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(d_in, hidden) / d_in ** 0.5)
        self.b1 = nn.Parameter(torch.zeros(hidden))
        self.w2 = nn.Parameter(torch.randn(hidden, d_out) / hidden ** 0.5)
        self.b2 = nn.Parameter(torch.zeros(d_out))

    def forward(self, x, y):
        h = (x[:, :, None] * self.w1).sum(1) + self.b1
        out = (h[:, :, None] * self.w2).sum(1) + self.b2
        return nn.functional.mse_loss(out.float(), y.float())


class DeepSpeedDynamicLossScaler:
    """DeepSpeed's DynamicLossScaler.update (ZeRO path), reference/deepspeed.md section a.4."""

    def __init__(self, scale, window, hysteresis, min_scale=1.0):
        self.scale, self.window, self.hysteresis, self.min_scale = scale, window, hysteresis, min_scale
        self.cur_hysteresis, self.cur_iter, self.last_overflow_iter = hysteresis, 0, -1

    def update(self, overflow):
        if overflow:
            if self.hysteresis == 1 or self.cur_hysteresis == 1:
                self.scale = max(self.scale / 2, self.min_scale)
            else:
                self.cur_hysteresis -= 1
            self.last_overflow_iter = self.cur_iter
        elif (self.cur_iter - self.last_overflow_iter) % self.window == 0:
            self.cur_hysteresis = self.hysteresis
            self.scale *= 2
        self.cur_iter += 1


FP16 = {"enabled": True, "initial_scale_power": 4, "hysteresis": 2, "loss_scale_window": 3}


def test_overflow_is_skipped_and_the_scale_follows_deepspeed():
    cfg = adamw_config(16, fp16=FP16, zero_optimization={"stage": 1},
                       scheduler={"type": "WarmupLR", "params": {"warmup_num_steps": 20, "warmup_min_lr": 0.001,
                                                                  "warmup_max_lr": 0.01}})
    torch.manual_seed(0)
    model = HalfFriendlyNet()
    engine, *_ = xtrain.initialize(model=model, config=cfg)
    assert model.w1.dtype == torch.float16  # the fp16 path really runs
    ref = DeepSpeedDynamicLossScaler(16.0, 3, 2)
    x, y = mlp_data(16)
    # x·2e4: the scaled gradients pass fp16's 65504 (an overflow); the clean steps stay far below it.
    plan = [False, True, False, True, True, False, False, False, False, False, False, True, False]
    skipped, scales = 0, []
    for k, overflow in enumerate(plan, start=1):
        before = [p.detach().clone() for p in model.parameters()]
        lr_before = engine.get_lr()[0]
        engine.backward(engine(x * (2e4 if overflow else 1.0), y))
        assert engine.step()
        ref.update(overflow)
        skipped += overflow
        scales.append(engine.loss_scale)
        step = engine.last_step()
        assert step["skipped"] == overflow, f"step {k}"
        assert engine.loss_scale == ref.scale, f"step {k}: scale {engine.loss_scale}, DeepSpeed {ref.scale}"
        assert engine.global_steps == k and engine.skipped_steps == skipped, f"step {k}"
        unchanged = all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
        assert unchanged == overflow, f"step {k}: weights {'moved' if overflow else 'did not move'}"
        if overflow:
            assert engine.get_lr()[0] == lr_before, f"step {k}: the schedule moved on a skipped step"
    assert min(scales) == 4.0 and scales[-1] == 16.0 and skipped == 4  # halved twice, then grew back


@pytest.mark.parametrize("stage", [0, 2])
def test_fp16_tracks_fp32(stage):
    steps, lr = 10, 1e-2
    x, y = mlp_data(16 * steps, seed=3)
    torch.manual_seed(1)
    ref = HalfFriendlyNet()
    half = HalfFriendlyNet()
    half.load_state_dict(ref.state_dict())
    opt = torch.optim.AdamW(ref.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    engine, *_ = xtrain.initialize(model=half, config=adamw_config(16, lr=lr, fp16=FP16,
                                                                  zero_optimization={"stage": stage}))
    for k in range(steps):
        xb, yb = x[16 * k:16 * k + 16], y[16 * k:16 * k + 16]
        opt.zero_grad()
        want = ref(xb, yb)
        want.backward()
        opt.step()
        got = engine(xb, yb)
        engine.backward(got)
        engine.step()
        assert not engine.last_step()["skipped"]
        # The C++ mixed-precision tracking test's bound (MixedPrecision.Bf16TracksFp32: 5% per step); fp16 weights
        # and activations round each value to 2^-11 and Adam carries the differences on (2.7% seen at step 6).
        assert abs(got.item() - want.item()) <= 0.05 * want.item(), f"step {k + 1}: fp16 {got.item()} fp32 {want.item()}"
    assert half.w1.dtype == torch.float16
    drift = max(float((a.float() - b).abs().max()) for a, b in zip(half.parameters(), ref.parameters()))
    assert 0 < drift < 2e-2, drift  # fp16 rounding, and Adam's sign-like steps where a gradient is near zero
