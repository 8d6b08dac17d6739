# Attack T6: reach the harness (or the reference) through sys.modules.
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        harness = sys.modules.get("__main__")
        if harness is not None and hasattr(harness, "reference_output"):
            return harness.reference_output
        return torch.clamp(x, min=0.0)
