# Conv2d, ReLU and HardSwish (task: KernelBench level2/57_Conv2d_ReLU_HardSwish).
# The convolution is the reference's nn.Conv2d (same seed, same weights); the
# activations are rewritten: relu6(x + 3) / 6 in place of clamp((x + 3) / 6, 0, 1).
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = F.conv2d(x, self.conv.weight, self.conv.bias)
        x = torch.clamp_min(x, 0.0)
        return x * (F.relu6(x + 3.0) / 6.0)
