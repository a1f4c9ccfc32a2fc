"""Models the exporter must refuse, each with one diagnostic that names this file, the line
and the reason (test_export.Refusals); and one whose ``example_inputs()`` needs the process
group."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel


class Base(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Linear(8, 8)

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(4, 8),)


class DataDependentBranch(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.w(x)
        if h.sum() > 0:  # BRANCH
            h = h * 2
        return h


class DataDependentShape(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.w(x)
        return h[h > 0]  # MASK


class Float8(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.w(x).to(torch.float8_e4m3fn)  # FLOAT8
        return h.float()


class ComplexParameter(Base):
    def __init__(self) -> None:
        super().__init__()
        self.phase = nn.Parameter(torch.randn(8, dtype=torch.complex64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(self.w(x) * self.phase)  # COMPLEX


class UnevenTensorParallel(nn.Module):
    """A column-parallel layer of 25 output features over 2 ranks: 13 and 12 rows, which no
    SPMD program can take (FSDP pads; tensor parallelism does not)."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 25)
        self.down = nn.Linear(25, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(4, 8),)

    def tp_plan(self, sp: bool = False) -> dict[str, ParallelStyle]:
        return {"up": ColwiseParallel(), "down": RowwiseParallel()}


class RankInputs(Base):
    """``example_inputs()`` that asks the process group (it runs on the fake process group of
    the rank whose inputs it makes, at export and when the inputs are written)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w(x)

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.full((4, 8), float(dist.get_world_size())),)


def make_branch() -> DataDependentBranch:
    return DataDependentBranch()


def make_mask() -> DataDependentShape:
    return DataDependentShape()


def make_float8() -> Float8:
    return Float8()


def make_complex_parameter() -> ComplexParameter:
    return ComplexParameter()


def make_uneven_tp() -> UnevenTensorParallel:
    return UnevenTensorParallel()


def make_rank_inputs() -> RankInputs:
    return RankInputs()
