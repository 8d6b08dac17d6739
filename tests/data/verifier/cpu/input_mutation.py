# Attack S3: computes in place and returns the input itself, so the
# "output" costs no allocation and the input is destroyed.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x.clamp_(min=0.0)
        return x
