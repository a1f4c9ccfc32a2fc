"""A tensor-parallel MLP for `python -m commlir_torch export examples/pytorch/mlp.py:make_model`.

What the exporter asks of a model besides `forward`:
  example_inputs()  the inputs of one step (drawn from the global RNG, which it seeds);
  tp_plan(sp)       the `parallelize_module` plan used with --tp (and --sp);
  fsdp_units()      the submodules `fully_shard` wraps before the root (FSDP2 reference runs).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel


class MLP(nn.Module):
    def __init__(self, dim: int = 256, hidden: int = 1024, tokens: int = 32) -> None:
        super().__init__()
        self.tokens = tokens
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.up(x), approximate="tanh")
        return self.down(h)

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return (torch.randn(self.tokens, self.up.in_features, dtype=self.up.weight.dtype),)

    def tp_plan(self, sp: bool = False) -> dict:
        if sp:  # activations sharded on the token dimension outside the MLP
            return {"up": ColwiseParallel(input_layouts=Shard(0)), "down": RowwiseParallel(output_layouts=Shard(0))}
        return {"up": ColwiseParallel(), "down": RowwiseParallel()}

    def tp_input_layouts(self, sp: bool = False) -> tuple:
        return (Shard(0),) if sp else ()

    def fsdp_units(self) -> list[nn.Module]:
        return [self.up, self.down]


def make_model() -> MLP:
    return MLP()
