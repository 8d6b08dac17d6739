"""Which Python threads exist in a process that runs what a candidate's
process runs (torch, a Triton kernel's first and later calls, the profiler
the harness records calls with), beyond those present before: the facts a
run-time check for a candidate's own threads must not take for the
candidate's.

  python3 bench/python_threads_probe.py
"""
import importlib.util
import os
import sys
import tempfile
import threading
import traceback

_current_frames = sys._current_frames


def describe(baseline):
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in _current_frames().items():
        if ident in baseline or ident == threading.get_ident():
            continue
        top = traceback.extract_stack(frame)[-1]
        out.append(f"{names.get(ident, '?')} at {os.path.basename(top.filename)}:{top.lineno}")
    return out or ["none"]


SOURCE = '''
import torch, triton, triton.language as tl

@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)

def run(x):
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
'''


def main():
    baseline = set(_current_frames())
    print("threads at start:", len(baseline))
    import torch
    print("after import torch:", describe(baseline))
    import triton  # noqa: F401
    print("after import triton:", describe(baseline))
    path = os.path.join(tempfile.mkdtemp(), "candidate_probe.py")
    with open(path, "w") as f:
        f.write(SOURCE)
    spec = importlib.util.spec_from_file_location("candidate_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(1 << 20, device="cuda")
    module.run(x)
    torch.cuda.synchronize()
    print("after a Triton kernel's first call (compile):", describe(baseline))
    for _ in range(10):
        module.run(x)
    torch.cuda.synchronize()
    print("after ten more calls:", describe(baseline))
    module.run(torch.randn(3, 1000, device="cuda", dtype=torch.bfloat16))
    torch.cuda.synchronize()
    print("after a second specialisation:", describe(baseline))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        module.run(x)
        torch.cuda.synchronize()
    print("inside and after the profiler:", describe(baseline), len(prof.events()), "events")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        module.run(x)
    torch.cuda.synchronize()
    spin = threading.Thread(target=lambda: sum(range(10 ** 8)), name="candidate-spin")
    spin.start()
    print("with a thread of the candidate's own:", describe(baseline))
    spin.join()
    print("after it ended:", describe(baseline))


if __name__ == "__main__":
    main()
