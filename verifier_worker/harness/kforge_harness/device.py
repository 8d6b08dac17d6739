"""Which CUDA device a harness process works on.

Work on tensors follows their device, but Triton launches a kernel on the
*current* device, and CUDA events, streams and torch.cuda.synchronize()
without an argument use it too. A process of the verifier of cuda:N that
touched cuda:0 first (anything that asks for the current stream does)
launched candidates' kernels on cuda:0 with pointers on cuda:N: "Pointer
argument (at 0) cannot be accessed from Triton (cpu tensor?)".
"""

import torch


def make_current(device):
    """Makes `device` ("cuda:N") the current CUDA device; nothing for the
    CPU, or for "cuda" without an index (already the current one)."""
    if not str(device).startswith("cuda"):
        return
    target = torch.device(device)
    if target.index is not None:
        torch.cuda.set_device(target)
