"""Small models that exercise one family of aten ops each, for the check against PyTorch
(``test_against_pytorch``): what a model writes with the PyTorch API, in the aten form the
exporter sees after decomposition."""

from __future__ import annotations

import torch
from torch import nn


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
