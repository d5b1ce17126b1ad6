#!/usr/bin/env python3
"""Reference for tests/compress/quant_test.cpp (quantisation arithmetic), from PyTorch 1.13:
- per-channel int8 weights: PerChannelMinMaxObserver(per_channel_symmetric, qint8) qparams and
  torch.quantize_per_channel's int_repr / dequantize;
- uint8 activations: MinMaxObserver and MovingAverageMinMaxObserver (per_tensor_affine, quint8,
  averaging_constant 0.01) over three batches, and torch.quantize_per_tensor's int_repr;
- fake quantisation: torch.fake_quantize_per_tensor_affine / _per_channel_affine, forward and the
  straight-through gradient;
- percentile: torch.quantile of all calibration values (the C++ histogram is checked to a bin);
- entropy: TensorRT's KL-divergence threshold (Migacz 2017; as in NVIDIA pytorch-quantization's
  _compute_amax_entropy), written here independently with torch ops over torch.histc's histogram.
Writes fixtures/quant.pt. Run with /usr/bin/python3."""
import math
import os

import torch
from torch.ao.quantization import MinMaxObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver

BINS = 4096  # the C++ SignedHistogram: BINS over [-R, R], folded to BINS // 2 over [0, R]


def entropy_threshold_bin(hist, levels, start=128):
    """TensorRT: the i >= start minimising KL(P_i || Q_i), last one on ties."""
    bins = hist.clone().double()
    bins[0] = bins[1]
    n = len(bins)
    best, best_i = math.inf, n
    for i in range(start, n + 1):
        p = bins[:i].clone()
        p[i - 1] += bins[i:].sum()
        level = torch.div(torch.arange(i) * levels, i, rounding_mode="floor")
        nz = (bins[:i] != 0).double()
        sums = torch.zeros(levels, dtype=torch.double).index_add_(0, level, bins[:i])
        counts = torch.zeros(levels, dtype=torch.double).index_add_(0, level, nz)
        q = torch.where(nz > 0, sums[level] / counts[level].clamp_min(1), torch.zeros_like(p))
        pn, qn = p / p.sum(), q / q.sum()
        mask = pn > 0
        if bool((qn[mask] == 0).any()):
            kl = math.inf
        else:
            kl = float((pn[mask] * torch.log(pn[mask] / qn[mask])).sum())
        if kl <= best:
            best, best_i = kl, i
    return best_i


def main():
    torch.manual_seed(11)
    out = {}
    # Weights: a Linear [16, 24] and a Conv2d [6, 3, 3, 3]; one all-zero channel (eps floor).
    for name, shape in (("linear", (16, 24)), ("conv", (6, 3, 3, 3))):
        w = torch.randn(shape) * 0.3
        w[1] = 0.0
        obs = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
        obs(w)
        scale, zp = obs.calculate_qparams()
        q = torch.quantize_per_channel(w, scale.float(), zp, 0, torch.qint8)
        out[f"w.{name}"], out[f"w.{name}.scale"] = w, scale.float()
        out[f"w.{name}.q"], out[f"w.{name}.dq"] = q.int_repr(), q.dequantize()

    # Activations: three batches, the first holding the largest |x| (the histogram's range).
    batches = [torch.randn(64, 32) * 2.0, torch.randn(64, 32) * 1.5 + 0.3, torch.randn(64, 32).relu() * 1.2]
    batches[0][0, 0] = -7.5
    mm = MinMaxObserver(dtype=torch.quint8, qscheme=torch.per_tensor_affine)
    ma = MovingAverageMinMaxObserver(averaging_constant=0.01, dtype=torch.quint8, qscheme=torch.per_tensor_affine)
    for i, b in enumerate(batches):
        out[f"act.batch{i}"] = b
        mm(b)
        ma(b)
    for name, obs in (("minmax", mm), ("moving", ma)):
        scale, zp = obs.calculate_qparams()
        out[f"act.{name}.min"], out[f"act.{name}.max"] = obs.min_val, obs.max_val
        out[f"act.{name}.scale"], out[f"act.{name}.zero_point"] = scale.float(), zp
    scale, zp = float(out["act.minmax.scale"]), int(out["act.minmax.zero_point"])
    out["act.q"] = torch.quantize_per_tensor(batches[1], scale, zp, torch.quint8).int_repr()

    data = torch.cat([b.reshape(-1) for b in batches])
    for p in (99.0, 99.9):
        out[f"percentile.{p}.lo"] = torch.quantile(data, 1 - p / 100).reshape(1)
        out[f"percentile.{p}.hi"] = torch.quantile(data, p / 100).reshape(1)
    R = float(batches[0].abs().max())
    hist = torch.histc(data, BINS, -R, R).double()
    folded = hist[BINS // 2:] + hist[:BINS // 2].flip(0)
    out["entropy.radius"] = torch.tensor([R], dtype=torch.double)
    out["entropy.bin_signed"] = torch.tensor([entropy_threshold_bin(folded, 128)])
    relu = torch.cat([b.reshape(-1).relu() for b in batches])
    relu_r = float(relu.abs().max())
    relu_hist = torch.histc(relu, BINS, -relu_r, relu_r).double()
    out["entropy.relu_radius"] = torch.tensor([relu_r], dtype=torch.double)
    out["entropy.bin_relu"] = torch.tensor([entropy_threshold_bin(relu_hist[BINS // 2:] + relu_hist[:BINS // 2].flip(0), 256)])

    # Fake quantisation, forward and straight-through gradient.
    x = (torch.randn(8, 12) * 3).requires_grad_()
    g = torch.randn(8, 12)
    y = torch.fake_quantize_per_tensor_affine(x, 0.05, 37, 0, 255)  # saturates both ends
    y.backward(g)
    out["fq.x"], out["fq.grad_out"], out["fq.y"], out["fq.grad"] = x.detach(), g, y.detach(), x.grad
    w = (torch.randn(5, 7) * 0.5).requires_grad_()
    s = torch.tensor([0.004, 0.01, 0.002, 0.02, 0.008])
    gw = torch.randn(5, 7)
    yw = torch.fake_quantize_per_channel_affine(w, s, torch.zeros(5, dtype=torch.int32), 0, -128, 127)
    yw.backward(gw)
    out["fqc.w"], out["fqc.scale"], out["fqc.grad_out"] = w.detach(), s, gw
    out["fqc.y"], out["fqc.grad"] = yw.detach(), w.grad

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "quant.pt")
    torch.save(out, path)
    print(f"wrote {path} ({len(out)} tensors)")


if __name__ == "__main__":
    main()
