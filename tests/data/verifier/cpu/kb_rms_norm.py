# RMS normalisation over the feature dimension (dim 1) as a multiply by the
# reciprocal square root (task: KernelBench level1/36_RMSNorm_).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean_square = torch.sum(x * x, dim=1, keepdim=True) / self.num_features
        return x * torch.rsqrt(mean_square + self.eps)
