"""Which sandbox layer does CUDA initialisation trip on? Forks a child per
variant, confines it (with one layer switched off), then initialises CUDA
and runs a kernel. Diagnostic for the GPU machine; prints a table.

usage: python3 scripts/gpu-sandbox-probe.py
"""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "verifier_worker", "harness"))
import torch  # noqa: E402

from kforge_harness import sandbox  # noqa: E402


def probe(name, patch, memory_bytes=8 << 30, max_open_files=256):
    work = tempfile.mkdtemp()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        patch()
        result = {}
        try:
            result["report"] = sandbox.confine({"work_dir": work, "device": "cuda:0",
                                                "max_open_files": max_open_files,
                                                "max_file_bytes": 1 << 26, "max_processes": 64,
                                                "memory_bytes": memory_bytes})
            x = torch.ones(1024, device="cuda")
            result["cuda"] = float((x * 2).sum().item())
        except BaseException as e:
            result["error"] = f"{type(e).__name__}: {str(e)[:160]}"
        os.write(w, json.dumps(result).encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 1 << 20)
    os.waitpid(pid, 0)
    result = json.loads(data)
    print(f"{name:28s} {'OK' if 'cuda' in result else 'FAIL'}  {result.get('error', '')}  "
          f"{result.get('report', {}).get('skipped', '')}", flush=True)


noop = lambda *a, **k: None  # noqa: E731
probe("full sandbox", lambda: None)
probe("+ /proc write", lambda: sandbox.EXTRA_WRITABLE.append(("/proc", "write")))
probe("+ /proc/self write", lambda: sandbox.EXTRA_WRITABLE.append((f"/proc/{os.getpid()}", "write")))
probe("+ /sys write", lambda: sandbox.EXTRA_WRITABLE.append(("/sys", "write")))
probe("+ /dev/char all", lambda: sandbox.EXTRA_WRITABLE.append(("/dev/char", "all")))
