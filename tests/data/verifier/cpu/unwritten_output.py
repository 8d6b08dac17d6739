# Attack S1 (Sakana): returns a fresh, never-written buffer and hopes the
# allocator hands back memory that still holds the right answer.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.empty_like(x)
