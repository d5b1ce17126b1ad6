#!/usr/bin/env python3
"""Reference for tests/checkpoint/safetensors*_test.cpp: safetensors written and read from the
format's spec alone (struct + json + numpy/torch; not xtrain's code, and the `safetensors` package is
not installed): an 8-byte little-endian header length N, N bytes of JSON {name: {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__": {str: str}} padded with spaces, then the bytes.

  gen_safetensors.py                 writes fixtures/safetensors/:
    dtypes.safetensors + dtypes.pt     one tensor per dtype (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL,
                                       a scalar, an empty tensor), data in an order unlike the
                                       names'; the .pt (torch.save) holds the same values
    gpt2_tiny.safetensors              a tiny GPT-2 in the Hugging Face layout (transformer.h.N...,
                                       Conv1D weights [in, out], the causal-mask buffers attn.bias
                                       of older checkpoints, no lm_head: tied), 32 positions
    gpt2_tiny_io.pt                    config [L, C, NH, V, n_positions], tokens [B, T] (T = 16) and
                                       the logits of that GPT-2, written from GPT-2's definition
  gen_safetensors.py read IN OUT.pt  reads IN, torch.save's its tensors to OUT.pt and prints the
                                     metadata as JSON (the check of xtrain's writer)

Run with /usr/bin/python3 (python3-torch 1.13.1)."""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

NUMPY = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
         "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
TORCH = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
         torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
         torch.bool: "BOOL"}
HERE = os.path.dirname(os.path.abspath(__file__))


def tensor_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: the same 16 bits as int16
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        b = tensor_bytes(t)
        header[name] = {"dtype": TORCH[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode())
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        chunk = data[begin:end]
        if e["dtype"] == "BF16":
            t = torch.from_numpy(np.frombuffer(chunk, dtype=np.int16).copy()).view(torch.bfloat16)
        else:
            t = torch.from_numpy(np.frombuffer(chunk, dtype=NUMPY[e["dtype"]]).copy())
        out[name] = t.reshape(e["shape"])
    return out, metadata


def dtype_tensors():
    g = torch.Generator().manual_seed(7)
    r = torch.randn(3, 4, generator=g, dtype=torch.float64)
    # Insertion order = data order; names chosen so that it is not alphabetical.
    return {
        "z.f64": r * 1e3,
        "y.f32": r.float()[:, :3],
        "x.f16": (r * 10).half(),
        "w.bf16": (r * 100).bfloat16().reshape(2, 6),
        "v.i64": torch.tensor([-(2 ** 62), -1, 0, 2 ** 62 + 3]),
        "u.i32": torch.arange(-6, 6, dtype=torch.int32).reshape(2, 2, 3),
        "t.i16": torch.tensor([-32768, -2, 7, 32767], dtype=torch.int16),
        "s.i8": torch.tensor([[-128, -1], [0, 127]], dtype=torch.int8),
        "r.u8": torch.tensor([0, 1, 200, 255], dtype=torch.uint8),
        "q.bool": torch.tensor([True, False, False, True, True]),
        "p.scalar_f32": torch.tensor(3.25),
        "o.empty_f32": torch.zeros(0, 5),
        "a.last_f32": torch.tensor([1.5, -2.5]),
    }


class Gpt2:
    """GPT-2 as Hugging Face's modeling_gpt2 defines it: Conv1D (x @ W + b, W [in, out]), c_attn split
    into q|k|v, scores / sqrt(head size) with the causal mask, softmax, c_proj; MLP c_fc, gelu_new
    (tanh), c_proj; pre-LayerNorm (eps 1e-5); wte + wpe; ln_f; logits = h @ wteᵀ (tied)."""

    def __init__(self, L, C, NH, V, P, g):
        def randn(*shape, scale):
            return torch.randn(*shape, generator=g) * scale

        self.L, self.C, self.NH = L, C, NH
        self.p = {"transformer.wte.weight": randn(V, C, scale=0.5), "transformer.wpe.weight": randn(P, C, scale=0.5)}
        for i in range(L):
            h = "transformer.h.%d." % i
            for ln in ("ln_1", "ln_2"):
                self.p[h + ln + ".weight"] = 1 + randn(C, scale=0.1)
                self.p[h + ln + ".bias"] = randn(C, scale=0.1)
            for conv, n_in, n_out in (("attn.c_attn", C, 3 * C), ("attn.c_proj", C, C),
                                      ("mlp.c_fc", C, 4 * C), ("mlp.c_proj", 4 * C, C)):
                self.p[h + conv + ".weight"] = randn(n_in, n_out, scale=1 / math.sqrt(n_in))
                self.p[h + conv + ".bias"] = randn(n_out, scale=0.1)
        self.p["transformer.ln_f.weight"] = 1 + randn(C, scale=0.1)
        self.p["transformer.ln_f.bias"] = randn(C, scale=0.1)

    def conv1d(self, name, x):
        return x @ self.p[name + ".weight"] + self.p[name + ".bias"]

    def ln(self, name, x):
        return F.layer_norm(x, (self.C,), self.p[name + ".weight"], self.p[name + ".bias"], eps=1e-5)

    def attn(self, h, x):
        b, t, c = x.shape
        hs = c // self.NH
        q, k, v = self.conv1d(h + "attn.c_attn", x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.NH, hs).permute(0, 2, 1, 3) for z in (q, k, v))
        w = q @ k.transpose(-1, -2) / math.sqrt(hs)
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
        w = torch.where(causal, w, torch.tensor(torch.finfo(w.dtype).min))
        y = (F.softmax(w, dim=-1) @ v).permute(0, 2, 1, 3).reshape(b, t, c)
        return self.conv1d(h + "attn.c_proj", y)

    def mlp(self, h, x):
        u = self.conv1d(h + "mlp.c_fc", x)
        gelu_new = 0.5 * u * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * torch.pow(u, 3.0))))
        return self.conv1d(h + "mlp.c_proj", gelu_new)

    def logits(self, idx):
        t = idx.shape[1]
        x = self.p["transformer.wte.weight"][idx] + self.p["transformer.wpe.weight"][torch.arange(t)]
        for i in range(self.L):
            h = "transformer.h.%d." % i
            x = x + self.attn(h, self.ln(h + "ln_1", x))
            x = x + self.mlp(h, self.ln(h + "ln_2", x))
        return self.ln("transformer.ln_f", x) @ self.p["transformer.wte.weight"].t()


def generate():
    out = os.path.join(HERE, "fixtures", "safetensors")
    os.makedirs(out, exist_ok=True)
    tensors = dtype_tensors()
    write(os.path.join(out, "dtypes.safetensors"), tensors, {"format": "pt", "note": "gen_safetensors.py"})
    torch.save(tensors, os.path.join(out, "dtypes.pt"))

    L, C, NH, V, P, B, T = 2, 32, 4, 96, 32, 2, 16
    g = torch.Generator().manual_seed(22)
    model = Gpt2(L, C, NH, V, P, g)
    stored = dict(model.p)
    for i in range(L):  # the causal-mask buffers older GPT-2 checkpoints carry
        stored["transformer.h.%d.attn.bias" % i] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)
    write(os.path.join(out, "gpt2_tiny.safetensors"), stored, {"format": "pt"})
    idx = torch.randint(0, V, (B, T), generator=g)
    with torch.no_grad():
        logits = model.logits(idx)
    torch.save({"config": torch.tensor([L, C, NH, V, P]), "idx": idx, "logits": logits},
               os.path.join(out, "gpt2_tiny_io.pt"))
    print("wrote", out, "logits std %.3f" % logits.std().item())


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "read":
        tensors, metadata = read(sys.argv[2])
        torch.save(tensors, sys.argv[3])
        print(json.dumps(metadata, sort_keys=True))
        return
    if len(sys.argv) != 1:
        sys.exit(__doc__)
    generate()


if __name__ == "__main__":
    main()
