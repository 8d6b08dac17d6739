"""Functions the harness relies on, captured before candidate code loads and
checked for replacement after it runs. Replacing any of them is reported
(HACK_PATCHED_FUNCTION) and fails the candidate."""

import time

import torch
import torch.nn.functional as F

from . import thread_watch

# (owner, attribute) pairs, resolved at capture time.
_GUARDED = [
    (time, "perf_counter"), (time, "perf_counter_ns"), (time, "time"), (time, "monotonic"),
    (torch, "allclose"), (torch, "isclose"), (torch, "equal"), (torch, "isfinite"),
    (torch, "isnan"), (torch, "manual_seed"), (torch, "empty"), (torch, "empty_like"),
    (torch, "zeros"), (torch, "randn"), (torch, "rand"), (torch, "frombuffer"),
    (torch.Tensor, "clone"), (torch.Tensor, "copy_"), (torch.Tensor, "contiguous"),
    (torch.Tensor, "cpu"), (torch.Tensor, "numpy"), (torch.Tensor, "to"), (torch.Tensor, "view"),
    (torch.Tensor, "__eq__"), (torch.Tensor, "sub"), (torch.Tensor, "abs"),
    (torch.nn.Module, "__call__"), (torch.nn.Module, "to"), (torch.nn.Module, "eval"),
    (torch.cuda, "synchronize"), (torch.cuda, "Event"), (torch.cuda.Event, "record"),
    (torch.cuda.Event, "elapsed_time"), (torch.cuda.Event, "synchronize"),
    (F, "relu"), (F, "linear"), (F, "conv2d"), (F, "softmax"),
    # Wrapped by thread_watch.install (the names a Python version lacks
    # read None before and after).
    *(thread_watch.owner_of(dotted) for dotted in thread_watch.STARTERS),
]


def capture():
    return [(owner, name, getattr(owner, name, None)) for owner, name in _GUARDED]


def replaced(captured):
    """Names of guarded functions that are no longer the captured objects."""
    out = []
    for owner, name, original in captured:
        if getattr(owner, name, None) is not original:
            owner_name = getattr(owner, "__name__", type(owner).__name__)
            out.append(f"{owner_name}.{name}")
    return out
