"""Small models for the exporter's tests: every ``_c10d_functional`` collective, and models
the exporter must refuse (a rank-dependent program, an op without a lowering)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn as nn


class Collectives(nn.Module):
    """Calls each functional collective on the world group once; the all-to-all with
    rank-dependent splits that keep every rank's row count."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        group = dist.group.WORLD
        n, rank = dist.get_world_size(), dist.get_rank()
        h = x @ self.w
        a = funcol.all_reduce(h, "sum", group)
        b, c = funcol.all_reduce_coalesced([h, h * 2], "max", group)
        g = funcol.all_gather_tensor(h, 0, group)
        g1, g2 = funcol.all_gather_into_tensor_coalesced([h, x], group)
        r = funcol.reduce_scatter_tensor(g, "sum", 0, group)
        r1, r2 = funcol.reduce_scatter_tensor_coalesced([g1, g2], "avg", [0, 0], group)
        bc = funcol.broadcast(h, n - 1, group)
        # Rank r sends 1 + r rows to the next rank and the rest to the others equally.
        rows = h.shape[0]
        ins = [rows // n] * n
        ins[(rank + 1) % n] += 1
        ins[(rank + 2) % n] -= 1
        outs = [0] * n
        for j in range(n):
            pj = [rows // n] * n
            pj[(j + 1) % n] += 1
            pj[(j + 2) % n] -= 1
            outs[j] = pj[rank]
        t = funcol.all_to_all_single(h, outs, ins, group)
        return a + b + c + r + r1 + bc + t, g, r2

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(8, 8),)


def make_collectives() -> Collectives:
    return Collectives()


class RankDependent(nn.Module):
    """Scales by the rank: a program that differs from rank to rank."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return funcol.all_reduce(x @ self.w * (dist.get_rank() + 1), "sum", dist.group.WORLD)

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(4, 8),)


def make_rank_dependent() -> RankDependent:
    return RankDependent()


class Unsupported(nn.Module):
    """Uses ``erf``, which commlir has no op for."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.erf(x @ self.w)

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(4, 8),)


def make_unsupported() -> Unsupported:
    return Unsupported()
