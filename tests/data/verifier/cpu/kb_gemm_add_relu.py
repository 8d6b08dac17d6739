# GEMM + bias + ReLU as one addmm and a clamp (task: KernelBench
# level2/76_Gemm_Add_ReLU). The layers are built in the reference's order
# (Linear without bias, then the bias parameter) so that the same seed gives
# the same weights.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = torch.addmm(self.bias, x, self.gemm.weight.t())
        return torch.clamp_min(y, 0.0)
