# ReLU as (x + |x|) / 2, exact in floating point (task: KernelBench level1/19_ReLU).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x + torch.abs(x)) * 0.5
