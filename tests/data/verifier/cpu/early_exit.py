# Attack T9: exit with status 0 before the harness can check anything.
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        os._exit(0)
        return torch.zeros_like(x)
