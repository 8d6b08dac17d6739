# Attack B1: inherit the reference Model and call its forward.
import torch
import torch.nn as nn


class ModelNew(Model):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return super().forward(x)
