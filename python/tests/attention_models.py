"""Small attention models for the checks against PyTorch (``test_attention``): self- and
cross-attention through ``F.scaled_dot_product_attention``, causal or not, with odd sequence
lengths, grouped kv heads written the two ways models write them (``enable_gqa=True``, and
torchtitan's ``repeat_kv``), and a masked one that must keep PyTorch's math attention."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """torchtitan's ``repeat_kv``: each kv head ``n_rep`` times in place (``B×S×H×D``)."""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        x[:, :, :, None, :]
        .expand(bs, slen, n_kv_heads, n_rep, head_dim)
        .reshape(bs, slen, n_kv_heads * n_rep, head_dim)
    )


class Attention(nn.Module):
    """Attention of ``n_heads`` query heads over ``n_kv_heads`` key/value heads, projected
    from ``x`` (and from ``memory`` for cross-attention, whose length differs). ``kv`` is how
    grouped heads reach SDPA: ``"gqa"`` (``enable_gqa=True``) or ``"repeat_kv"``."""

    def __init__(
        self,
        dim: int = 24,
        n_heads: int = 6,
        n_kv_heads: int = 2,
        seq: int = 13,
        mem_seq: int | None = None,
        batch: int = 2,
        causal: bool = True,
        kv: str = "gqa",
        scale: float | None = None,
        masked: bool = False,
    ) -> None:
        super().__init__()
        self.head_dim = dim // n_heads
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.dim, self.seq, self.mem_seq, self.batch = dim, seq, mem_seq, batch
        self.causal, self.kv, self.scale = causal, kv, scale
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        if masked:
            keys = mem_seq or seq
            # A band: each query sees itself and the two keys before it.
            i = torch.arange(seq)[:, None]
            j = torch.arange(keys)[None, :]
            self.register_buffer("mask", (j <= i) & (j >= i - 2), persistent=False)
        else:
            self.mask = None

    def forward(self, x: torch.Tensor, *memory: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        src = memory[0] if memory else x
        t = src.shape[1]
        q = self.wq(x).view(b, s, self.n_heads, self.head_dim)
        k = self.wk(src).view(b, t, self.n_kv_heads, self.head_dim)
        v = self.wv(src).view(b, t, self.n_kv_heads, self.head_dim)
        gqa = self.n_kv_heads != self.n_heads
        if self.kv == "repeat_kv":
            k, v = repeat_kv(k, self.n_heads // self.n_kv_heads), repeat_kv(v, self.n_heads // self.n_kv_heads)
            gqa = False
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        o = F.scaled_dot_product_attention(
            q, k, v, attn_mask=self.mask, is_causal=self.causal, scale=self.scale, enable_gqa=gqa
        )
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        x = torch.randn(self.batch, self.seq, self.dim)
        if self.mem_seq is None:
            return (x,)
        return (x, torch.randn(self.batch, self.mem_seq, self.dim))


def make_gqa_causal() -> Attention:
    """6 query heads over 2 kv heads (``enable_gqa``), causal, 13 positions."""
    return Attention()


def make_gqa_full() -> Attention:
    """6 query heads over 3 kv heads (``enable_gqa``), not causal, 7 positions, scale 0.3."""
    return Attention(n_kv_heads=3, seq=7, causal=False, scale=0.3)


def make_repeat_kv() -> Attention:
    """torchtitan's ``repeat_kv``: 6 query heads over 2 kv heads repeated in place, causal."""
    return Attention(kv="repeat_kv", seq=5)


def make_cross() -> Attention:
    """Cross-attention, 5 queries over 7 keys (top-left causal), one kv head per query head."""
    return Attention(n_kv_heads=6, seq=5, mem_seq=7)


def make_masked() -> Attention:
    """A banded boolean mask: PyTorch's math attention (``compute.softmax``), forward and
    backward."""
    return Attention(seq=7, causal=False, masked=True)
