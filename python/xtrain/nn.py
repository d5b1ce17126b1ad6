"""xtrain.nn: layers whose compute runs in xtrain's C++ kernels.

MultiScaleAttention is the Python twin of the C++ layer src/xtrain/nn/multiscale_attention.*: the
same parameters (`qkv`: d -> 3d, `proj`: d -> d, both with bias; `W_qkv` and `W_o` in the design
page's names), the same layout of the qkv output (q | k | v, each head-major) and one call into the
attention kernel registry (xtrain.ops.attention, forward and backward in C++), so with the same
weights both give the same numbers. The definition: shared/design/multiscale-attention.md.
"""
import torch

from . import ops

__all__ = ["MultiScaleAttention", "head_groups"]


def head_groups(num_heads, windows):
    """[(window, heads)]: the heads split over the windows as numpy.array_split does (8 heads over
    [8, 16, 32] -> [(8, 3), (16, 3), (32, 2)]). ValueError for a window < 1 or fewer heads than windows."""
    windows = [int(w) for w in windows]
    if not windows or any(w < 1 for w in windows):
        raise ValueError(f"MultiScaleAttention: window_size must be windows >= 1, got {windows}")
    if num_heads < len(windows):
        raise ValueError(f"MultiScaleAttention: num_heads ({num_heads}) must be >= the number of windows "
                         f"({len(windows)}, window_size={windows}): each window needs a head")
    base, extra = divmod(num_heads, len(windows))
    return [(w, base + (s < extra)) for s, w in enumerate(windows)]


class MultiScaleAttention(torch.nn.Module):
    """Multi-head self-attention where each head sees the exact multi-scale partition of the sequence.

    MultiScaleAttention(embed_dim, num_heads, window_size=[8, 16, 32], causal=True, dropout=0.0,
                        bias=True, batch_first=True, kernel="auto", device=None, dtype=None)

    window_size: an int or a list; heads are split over the windows as numpy.array_split does;
    None or [] gives dense (ordinary) attention. causal: each position sees itself and the past only;
    False: both sides. dropout: on the attention weights and on the output, in training only (as the
    C++ layer and GPT-2 do). kernel: "auto" or a name from xtrain.ops.kernels().
    forward(x): [B, T, embed_dim] ([T, B, embed_dim] when batch_first=False) -> the same shape.
    """

    def __init__(self, embed_dim, num_heads, window_size=(8, 16, 32), causal=True, dropout=0.0, bias=True,
                 batch_first=True, kernel="auto", device=None, dtype=None):
        super().__init__()
        if num_heads <= 0 or embed_dim <= 0 or embed_dim % num_heads:
            raise ValueError(f"MultiScaleAttention: num_heads ({num_heads}) must be > 0 and divide embed_dim "
                             f"({embed_dim})")
        if isinstance(window_size, int):
            window_size = [window_size]
        self.windows = [] if window_size is None else [int(w) for w in window_size]
        if self.windows:
            head_groups(num_heads, self.windows)  # raises on bad windows
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"MultiScaleAttention: dropout must be in [0, 1), got {dropout}")
        if not isinstance(kernel, str) or not kernel:
            raise ValueError(f'MultiScaleAttention: kernel must be a name from xtrain.ops.kernels() or "auto", '
                             f"got {kernel!r}")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.causal, self.dropout, self.batch_first, self.kernel = bool(causal), float(dropout), batch_first, kernel
        factory = {"device": device, "dtype": dtype}
        self.qkv = torch.nn.Linear(embed_dim, 3 * embed_dim, bias=bias, **factory)
        self.proj = torch.nn.Linear(embed_dim, embed_dim, bias=bias, **factory)

    @property
    def W_qkv(self):  # noqa: N802 (the design page's name)
        return self.qkv

    @property
    def W_o(self):  # noqa: N802
        return self.proj

    @property
    def head_groups(self):
        """[(window, heads)] as the kernels split them; [] for dense attention."""
        return head_groups(self.num_heads, self.windows) if self.windows else []

    def kernel_for(self, x):
        """The registered kernel forward(x) runs."""
        B, T = self._batch_time(x)
        q = x.new_empty((B, self.num_heads, T, self.head_dim))
        return ops.kernel_for(q, self.kernel, self.windows, self.causal, self._attn_dropout())

    def _attn_dropout(self):
        return self.dropout if self.training else 0.0

    def _batch_time(self, x):
        if x.dim() != 3 or x.size(2) != self.embed_dim:
            layout = "[B, T, " if self.batch_first else "[T, B, "
            raise ValueError(f"MultiScaleAttention: input must be {layout}{self.embed_dim}] (batch_first="
                             f"{self.batch_first}), got {list(x.shape)}")
        return (x.size(0), x.size(1)) if self.batch_first else (x.size(1), x.size(0))

    def forward(self, x):
        B, T = self._batch_time(x)
        if not self.batch_first:
            x = x.transpose(0, 1)
        C, NH, HS = self.embed_dim, self.num_heads, self.head_dim
        # [B, T, 3C] -> [3, B, NH, T, HS]: q, k, v are strided views (the kernels read any strides).
        heads = self.qkv(x).view(B, T, 3, NH, HS).permute(2, 0, 3, 1, 4)
        y = ops.attention(heads[0], heads[1], heads[2], self.kernel, self.windows, self.causal, self._attn_dropout())
        y = self.proj(y.transpose(1, 2).reshape(B, T, C))
        y = torch.nn.functional.dropout(y, self.dropout, self.training)
        return y if self.batch_first else y.transpose(0, 1)

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, window_size={self.windows}, "
                f"causal={self.causal}, dropout={self.dropout}, batch_first={self.batch_first}, "
                f"kernel={self.kernel!r}")
