"""Triton launcher stubs that candidates needed, built ahead for the next ones.

Triton compiles, for each kernel signature a process first meets, a C
launcher stub with the host compiler (0.2-0.3 s each on an H100 node, 0.2-0.6
s of a GEMM's or a norm's first call, bench/RESULTS.md). The stub's source
depends only on the kernel's argument types (pointers whatever their dtype,
each integer and float width, each constexpr position), and Triton caches it
under the hash of that source. So:

- in a candidate's process, `record()` notes the argument types of each
  launcher Triton makes (`signatures()`), and the replies carry them back;
- the verifier validates them (`valid()`: a short list of known type names,
  nothing else) and, for new ones, asks the zygote for a trusted child that
  runs `build()`: it writes a kernel of its own with the same argument types
  (an empty body), compiles it and makes its launcher into the verifier's
  base Triton cache, which later sandboxes copy.

Nothing a candidate wrote is ever used: only type names, checked against a
fixed list, reach the source the trusted child compiles; a wrong or made-up
list costs a build, never a wrong launcher (a stub is found by the hash of
its own source).
"""

import os
import re
import shutil
import sys
import tempfile

# Argument types a signature may hold: pointers to any element type, the
# scalar types Triton gives Python values, and constexpr positions.
_ELEMENT = r"(fp8e4nv|fp8e5|fp8e4b15|fp16|bf16|fp32|fp64|i1|i8|i16|i32|i64|u1|u8|u16|u32|u64)"
_TYPE = re.compile(r"(\*k?" + _ELEMENT + r"|i1|i32|i64|u64|fp32|constexpr)")
MAX_ARGS = 64
# Signatures a candidate process notes between two replies at most.
MAX_NOTED = 64

# What each scalar type is made from: a Python value Triton types that way
# (an integer neither 1 nor a multiple of 16, which Triton would specialise).
_VALUES = {"i1": True, "i32": 7, "i64": 2**40 + 7, "u64": 2**63 + 7, "fp32": 0.5,
           "constexpr": 3}
# The torch dtype of a pointer argument's tensor, by element type (float32
# for the others: a launcher takes any pointer the same way).
_ELEMENT_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
                   "i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
                   "u8": "uint8", "fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2"}

_seen = []


def valid(signature):
    """Whether `signature` is a list of known argument type names."""
    return (isinstance(signature, (list, tuple)) and 0 < len(signature) <= MAX_ARGS
            and all(isinstance(t, str) and _TYPE.fullmatch(t) for t in signature))


def record():
    """In a candidate's process, before its code: notes the argument types
    of each launcher Triton makes. Does nothing without Triton's CUDA driver."""
    try:
        from triton.backends.nvidia import driver
    except Exception:  # noqa: BLE001 - no Triton, or another backend
        return
    launcher = getattr(driver, "CudaLauncher", None)
    if launcher is None:
        return
    made = launcher.__init__

    def noting(self, src, metadata, *args, **kwargs):
        signature = getattr(src, "signature", None)
        if isinstance(signature, dict) and not getattr(metadata, "tensordesc_meta", None):
            types = list(signature.values())
            if valid(types) and types not in _seen and len(_seen) < MAX_NOTED:
                _seen.append(types)
        made(self, src, metadata, *args, **kwargs)

    launcher.__init__ = noting


def signatures():
    """The launchers' signatures noted so far (and forgets them)."""
    out = list(_seen)
    _seen.clear()
    return out


def _kernel_source(index, signature):
    params = ", ".join(f"a{i}: tl.constexpr" if t == "constexpr" else f"a{i}"
                       for i, t in enumerate(signature))
    return f"@triton.jit\ndef kf_launcher_{index}({params}):\n    pass\n"


def build(cache_dir, device, signatures_to_build):
    """In a trusted child of the zygote: makes the launcher of each valid
    signature into `cache_dir` (Triton's cache). Returns how many were made."""
    os.environ["TRITON_CACHE_DIR"] = cache_dir
    import triton  # noqa: F401
    from .device import make_current
    make_current(device)
    todo = [list(s) for s in signatures_to_build if valid(s)]
    if not todo:
        return 0
    folder = tempfile.mkdtemp(prefix="kf-launchers-")
    try:
        return _build_in(folder, device, todo)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _build_in(folder, device, todo):
    import torch
    from triton.runtime import driver
    path = os.path.join(folder, "kf_launchers.py")
    with open(path, "w") as f:
        f.write("import triton\nimport triton.language as tl\n\n")
        for i, signature in enumerate(todo):
            f.write(_kernel_source(i, signature) + "\n")
    sys.path.insert(0, folder)
    import kf_launchers  # noqa: E402  (written just above)

    def pointer(element):
        dtype = getattr(torch, _ELEMENT_DTYPES.get(element, "float32"), torch.float32)
        return torch.empty(16, device=device, dtype=dtype)  # no kernel runs

    made = 0
    for i, signature in enumerate(todo):
        args = [pointer(t.lstrip("*k")) if t.startswith("*") else _VALUES[t] for t in signature]
        try:
            # Compiled, never launched: the launcher is made from the
            # compiled kernel (or, failing that, when it is loaded).
            kernel = getattr(kf_launchers, f"kf_launcher_{i}").warmup(*args, grid=(1,))
            try:
                driver.active.launcher_cls(kernel.src, kernel.metadata)
            except Exception:  # noqa: BLE001 - another Triton's launcher API
                kernel.run  # noqa: B018 - loading the kernel makes its launcher
            made += 1
        except Exception as e:  # noqa: BLE001 - a miss costs a candidate time, not a verdict
            print(f"kforge: launcher for {signature} not built: {type(e).__name__}: {e}",
                  file=sys.stderr)
    return made
