# Attack (a) of the independent suite, without the decoy: ReLU from tensor
# operators, no named torch function a static check could match. Its work is
# aten::gt and aten::mul all the same.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * (x > 0)
