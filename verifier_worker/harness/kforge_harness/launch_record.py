"""Records what one model call launched, for the verifier to attribute.

PyTorch's profiler sees two things a candidate cannot hide by how its
source is written: the ATen operators dispatched on the host (any tensor
arithmetic, on any device: `x * (x > 0)` is aten::mul and aten::gt) and,
on a GPU, every kernel, copy and memset that ran (a Triton kernel under its
function's name, cuBLAS and ATen kernels under theirs). This module only
collects names, counts and GPU time; which of them are the candidate's own
work is decided in the verifier (verifier_worker/funnel/launch_attribution),
out of the candidate's reach.

Everything it calls is bound at import, before candidate code loads.
"""

import torch
from torch.profiler import ProfilerActivity
from torch.profiler import profile as _profile

_profiler_enabled = getattr(torch.autograd, "_profiler_enabled", None)
_CUDA_DEVICE_TYPES = ("CUDA", "DeviceType.CUDA")

# Bounds on what one record carries back. Names past MAX_NAMES are counted
# under OVERFLOW, which the verifier treats as library compute.
MAX_NAMES = 256
MAX_NAME_CHARS = 400
OVERFLOW = "kforge: more distinct launches than one record names"


def _is_gpu(event):
    return str(getattr(event, "device_type", "")).split(".")[-1] == "CUDA"


def _summarize(events):
    """[[kind, name, calls, gpu_us]] with kind "kernel" (GPU work) or "op"
    (a host-side ATen operator), one row per distinct name."""
    rows = {}
    for event in events:
        name = str(getattr(event, "name", ""))[:MAX_NAME_CHARS]
        if _is_gpu(event):
            kind = "kernel"
            time_range = getattr(event, "time_range", None)
            gpu_us = float(time_range.elapsed_us()) if time_range is not None else 0.0
        elif name.startswith("aten::"):
            kind, gpu_us = "op", 0.0
        else:
            continue  # runtime calls (cudaLaunchKernel), Python annotations
        row = rows.get((kind, name))
        if row is None:
            if len(rows) >= MAX_NAMES:
                # Fail closed: what is not named could be anything, and the
                # verifier counts this row as library compute.
                row = rows.setdefault(("kernel", OVERFLOW), ["kernel", OVERFLOW, 0, 0.0])
            else:
                row = rows[(kind, name)] = [kind, name, 0, 0.0]
        row[2] += 1
        row[3] += gpu_us
    return list(rows.values())


def record(call, device):
    """Runs call() under the profiler; returns (its result, record) where the
    record is {"launches": [[kind, name, calls, gpu_us], ...], "intact":
    whether the profiler was still on when the call returned}."""
    activities = [ProfilerActivity.CPU]
    if str(device).startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    with _profile(activities=activities) as prof:
        result = call()
        intact = bool(_profiler_enabled()) if _profiler_enabled is not None else True
    return result, {"launches": _summarize(prof.events()), "intact": intact}


def warm_up(device):
    """The profiler's first start (CUPTI on a GPU) costs far more than later
    ones: paid in a spare process before any candidate arrives."""
    x = torch.zeros(8, device=device)
    record(lambda: x.clone(), device)
