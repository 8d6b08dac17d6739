# LeakyReLU as a select (task: KernelBench level1/20_LeakyReLU). The
# constructor keeps the reference's signature and default.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, x, x * self.negative_slope)
