"""Small models for the exporter's tests: every ``_c10d_functional`` collective, and models
the exporter must refuse (a rank-dependent program, an op without a lowering)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn as nn


REDUCE_OPS = ("sum", "avg", "max", "min", "product")


def uneven_splits(rows: int, n: int, rank: int) -> tuple[list[int], list[int]]:
    """All-to-all splits of ``rows`` rows that differ from rank to rank and keep every rank's
    row count: rank r sends one row more to r + 1 and one less to r + 2; returns (output
    splits, input splits) of ``rank``."""

    def sends(src: int) -> list[int]:
        s = [rows // n] * n
        s[(src + 1) % n] += 1
        s[(src + 2) % n] -= 1
        return s

    return [sends(j)[rank] for j in range(n)], sends(rank)


class Collectives(nn.Module):
    """Calls every functional collective on the world group: all-reduce with each reduce op,
    all-gather and reduce-scatter along dims 0 and 1 (reduce-scatter with each reduce op),
    the coalesced forms, broadcast from two sources, and an all-to-all whose splits differ
    from rank to rank. Each result is returned on its own, so that a wrong one is named.

    Every rank must see different data (:func:`build_collectives` draws each rank's input
    from its own seed): on equal inputs a wrong rank order or a wrong reduction computes the
    same thing as the right one. The values are small integers, so that every result,
    sums and products included, is exact in f32 whatever the order of reduction."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randint(-1, 2, (8, 8)).float())

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        group = dist.group.WORLD
        n, rank = dist.get_world_size(), dist.get_rank()
        h = x @ self.w
        out = [funcol.all_reduce(h, op, group) for op in REDUCE_OPS]
        out += list(funcol.all_reduce_coalesced([h, h * 2], "max", group))
        out.append(funcol.all_gather_tensor(h, 0, group))
        out.append(funcol.all_gather_tensor(h, 1, group))
        out += list(funcol.all_gather_into_tensor_coalesced([h, x], group))
        # Each chunk of a reduce-scatter's input is another multiple of h: a chunk taken by
        # the wrong rank shows.
        stacked0 = torch.cat([h * (i + 1) for i in range(n)], dim=0)
        stacked1 = torch.cat([h - i for i in range(n)], dim=1)
        out += [funcol.reduce_scatter_tensor(stacked0, op, 0, group) for op in REDUCE_OPS]
        out.append(funcol.reduce_scatter_tensor(stacked1, "sum", 1, group))
        out += list(funcol.reduce_scatter_tensor_coalesced([stacked0, stacked0 + 1], "avg", [0, 0], group))
        out.append(funcol.broadcast(h, n - 1, group))
        out.append(funcol.broadcast(h, 1, group))
        outs, ins = uneven_splits(h.shape[0], n, rank)
        out.append(funcol.all_to_all_single(h, outs, ins, group))
        return tuple(out)

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randint(-2, 3, (8, 8)).float(),)


def make_collectives() -> Collectives:
    return Collectives()


def build_collectives() -> tuple[Collectives, tuple[torch.Tensor, ...]]:
    """The builder of the functional-collective program (``--ranks N``): the model on every
    rank, each rank's input from its own seed."""
    model = Collectives()
    g = torch.Generator().manual_seed(1000 + dist.get_rank())
    return model, (torch.randint(-2, 3, (8, 8), generator=g).float(),)


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
