"""Training scripts that parallelize their model themselves, knowing nothing of commlir: no
``example_inputs``, ``tp_plan`` or ``fsdp_units``; their own ``DeviceMesh``,
``parallelize_module`` and ``fully_shard``, and a training step written as forward, loss and
``loss.backward()``. Each builder is what the exporter calls on every rank (test_user.py)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


class Block(nn.Module):
    def __init__(self, dim: int = 64, hidden: int = 96) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(dim)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.w2(F.silu(self.w1(self.norm(x))))


class Net(nn.Module):
    """Two blocks between an input projection and an output of 25 features (25 rows: FSDP2
    pads its shards)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Linear(24, 64)
        self.layers = nn.ModuleList([Block(), Block()])
        self.out = nn.Linear(64, 25, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x)
        for layer in self.layers:
            h = layer(h)
        return self.out(h)


def train_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = F.mse_loss(model(x), y)
    loss.backward()
    return loss


def data(dp_rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + dp_rank)
    return torch.randn(2, 8, 24, generator=g), torch.randn(2, 8, 25, generator=g)


def build_fsdp(device: str = "cuda"):
    """FSDP2 over 2 ranks, the output layer its own unit."""
    mesh = init_device_mesh(device, (2,), mesh_dim_names=("dp",))
    model = Net()
    fully_shard(model.out, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return train_step, model, data(dist.get_rank())


def build_2d(device: str = "cuda"):
    """Sequence-parallel blocks (nn.RMSNorm under SequenceParallel) on the inner mesh
    dimension, FSDP2 on the outer one, on 4 ranks."""
    mesh = init_device_mesh(device, (2, 2), mesh_dim_names=("dp", "tp"))
    model = Net()
    for block in model.layers:
        parallelize_module(block, mesh["tp"], {
            "norm": SequenceParallel(),
            "w1": ColwiseParallel(input_layouts=Shard(1)),
            "w2": RowwiseParallel(output_layouts=Shard(1)),
        })
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return train_step, model, data(mesh["dp"].get_local_rank())


def build_tp_forward(device: str = "cuda"):
    """Inference: tensor parallelism only, no training step (the program is the forward)."""
    mesh = init_device_mesh(device, (2,), mesh_dim_names=("tp",))
    model = Net()
    for block in model.layers:
        parallelize_module(block, mesh, {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
    return model, (data(0)[0],)


def build_hsdp(device: str = "cuda"):
    """HSDP: FSDP2 on a 2-D (replicate, shard) mesh of 4 ranks."""
    mesh = init_device_mesh(device, (2, 2), mesh_dim_names=("replicate", "shard"))
    model = Net()
    fully_shard(model.out, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return train_step, model, data(dist.get_rank())


def build_fsdp_dim1(device: str = "cuda"):
    """FSDP2 sharding the weights on dim 1 where it splits (``shard_placement_fn``)."""
    mesh = init_device_mesh(device, (2,), mesh_dim_names=("dp",))
    model = Net()
    fully_shard(model, mesh=mesh,
                shard_placement_fn=lambda p: Shard(1) if p.ndim == 2 and p.shape[1] % 2 == 0 else None)
    return train_step, model, data(dist.get_rank())


def build_flattened(device: str = "cuda"):
    """FSDP2 over a flattened mesh dimension (torchtitan's ``dp_shard_cp`` kind)."""
    mesh = init_device_mesh(device, (2, 2), mesh_dim_names=("a", "b"))
    model = Net()
    fully_shard(model, mesh=mesh["a", "b"]._flatten("dp"))
    return train_step, model, data(dist.get_rank())
