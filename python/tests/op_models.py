"""Small models that exercise one family of aten ops each, for the check against PyTorch
(``test_against_pytorch``): what a model writes with the PyTorch API, in the aten form the
exporter sees after decomposition."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.tensor import Placement, Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel, SequenceParallel


class Elementwise(nn.Module):
    """Clamps (both bounds, lower only, upper only), powers, absolute values and selects."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.w
        clamped = torch.clamp(y, -0.5, 0.5) + y.clamp(min=0.1) * y.clamp(max=0.2)
        return clamped + y.abs().pow(3) - torch.where(y > 0, y, -y).sqrt()

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(8, 16),)


def make_elementwise() -> Elementwise:
    return Elementwise()


class RMSNormMLP(nn.Module):
    """``torch.nn.RMSNorm`` (PyTorch's fused op, whose DTensor sharding rule leaves a dead
    ``empty_strided`` and an in-place ``add_`` into it in the graph) before a tensor-parallel
    MLP, the norm sequence-parallel."""

    def __init__(self, dim: int = 64, hidden: int = 128) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(dim)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.w2(torch.relu(self.w1(self.norm(x))))

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(2, 16, self.norm.normalized_shape[0]),)

    def tp_plan(self, sp: bool = False) -> dict[str, ParallelStyle]:
        seq = Shard(1) if sp else Replicate()
        plan: dict[str, ParallelStyle] = {
            "w1": ColwiseParallel(input_layouts=seq),
            "w2": RowwiseParallel(output_layouts=seq),
        }
        if sp:
            plan["norm"] = SequenceParallel()
        return plan

    def tp_input_layouts(self, sp: bool = False) -> tuple[Placement, ...]:
        return (Shard(1),) if sp else (Replicate(),)


def make_rmsnorm_mlp() -> RMSNormMLP:
    return RMSNormMLP()


def complex_rope(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """torchtitan's rotary embedding: pairs of the head dimension as complex numbers, times
    the position's complex exponential."""
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == z.ndim - 1 else 1 for i, d in enumerate(z.shape)]
    return torch.view_as_real(z * freqs_cis[: z.shape[1]].view(*shape)).flatten(3).type_as(x)


class ComplexRope(nn.Module):
    """Column-parallel q and k projections, the complex rotary embedding of a complex64
    buffer (``torch.polar``) and of one computed in the forward (``polar`` of a ``pow``),
    and a row-parallel output."""

    def __init__(self, dim: int = 64, heads: int = 4, seq: int = 16) -> None:
        super().__init__()
        self.head_dim, self.seq, self.dim = dim // heads, seq, dim
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.register_buffer("freqs_cis", self.freqs(), persistent=True)

    def freqs(self) -> torch.Tensor:
        half = torch.arange(0, self.head_dim, 2).float() / self.head_dim
        angles = torch.outer(torch.arange(self.seq).float(), 1.0 / (10000.0 ** half))
        return torch.polar(torch.ones_like(angles), angles)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = complex_rope(self.wq(x).view(b, s, -1, self.head_dim), self.freqs_cis)
        k = complex_rope(self.wk(x).view(b, s, -1, self.head_dim), self.freqs())
        return self.wo((q * k).reshape(b, s, -1))

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(2, self.seq, self.dim),)

    def tp_plan(self, sp: bool = False) -> dict[str, ParallelStyle]:
        return {"wq": ColwiseParallel(), "wk": ColwiseParallel(), "wo": RowwiseParallel()}

    def fsdp_units(self) -> list[nn.Module]:
        return [self.wq, self.wk, self.wo]


def make_complex_rope() -> ComplexRope:
    return ComplexRope()


class UnevenMLP(nn.Module):
    """Parameters whose dim 0 does not split over 2 (25 rows) or 4 (25 and 5 rows) ranks:
    FSDP2 pads their shards."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(192, 25)
        self.b = nn.Linear(25, 5, bias=False)
        self.c = nn.Linear(5, 192, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(8, 192),)

    def fsdp_units(self) -> list[nn.Module]:
        return [self.a, self.b]


def make_uneven_mlp() -> UnevenMLP:
    return UnevenMLP()


class ReluMLP(nn.Module):
    """A bf16 training step through a ReLU: wherever rounding moves a pre-activation across
    zero the ReLU's derivative flips, and PyTorch's ``addmm`` (rounded once) flips other
    elements than the program's matmul and add (rounded twice). The first layer's weight
    gradient ends up several percent from PyTorch's, legitimately."""

    def __init__(self, dim: int = 64, hidden: int = 256, tokens: int = 64) -> None:
        super().__init__()
        self.tokens, self.dim = tokens, dim
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.w2(torch.relu(self.w1(x))) ** 2).mean()

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(self.tokens, self.dim, dtype=self.w1.weight.dtype),)

    def tp_plan(self, sp: bool = False) -> dict[str, ParallelStyle]:
        return {"w1": ColwiseParallel(), "w2": RowwiseParallel()}


def make_relu_mlp() -> ReluMLP:
    return ReluMLP()
