# Attack S6: ReLU as the identity. Right whenever the inputs are all
# non-negative, as KernelBench's torch.rand inputs are.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x
