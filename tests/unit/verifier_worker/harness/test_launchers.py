"""Triton launchers built ahead (launchers.py): only known argument type
names are accepted, the trusted kernel is written from them alone, and on a
GPU a launcher built into a cache is what a different kernel with the same
argument types then finds there (no host compiler run)."""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

HARNESS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "verifier_worker",
                       "harness")
sys.path.insert(0, HARNESS)
from kforge_harness import launchers  # noqa: E402


class ValidTest(unittest.TestCase):
    def test_known_type_names_only(self):
        self.assertTrue(launchers.valid(["*fp32", "*kbf16", "i32", "i64", "fp32", "constexpr"]))
        self.assertTrue(launchers.valid(("*fp8e4nv", "u64", "i1")))
        for bad in ([], ["int"], ["fp16"], ["*fp32", 3], "*fp32", ["*fp32):\n    import os#"],
                    ["i32"] * 65, None):
            self.assertFalse(launchers.valid(bad), bad)

    def test_the_kernel_is_written_from_the_names_alone(self):
        source = launchers._kernel_source(4, ["*fp32", "i32", "constexpr", "fp32"])
        self.assertEqual(source, "@triton.jit\ndef kf_launcher_4(a0, a1, a2: tl.constexpr, a3):\n"
                                 "    pass\n")


def _has_gpu_triton():
    try:
        import torch
        import triton  # noqa: F401
        return torch.cuda.is_available()
    except ImportError:
        return False


# Run from a file in a fresh process on a copy of the cache: a kernel with other names
# and another body, but the same argument types, launched once; prints how
# many times Triton ran the host compiler.
CHECK = textwrap.dedent("""
    import sys
    import torch
    import triton
    import triton.language as tl
    import triton.runtime.build as build
    builds = []
    real = build._build
    def counting(*args, **kwargs):
        builds.append(args[0])
        return real(*args, **kwargs)
    build._build = counting
    from triton.runtime import driver
    driver.active.utils  # the driver's own module, from the same cache
    builds.clear()

    @triton.jit
    def other(src, dst, n, scale, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(dst + offsets, tl.load(src + offsets, mask=mask) * scale, mask=mask)

    x = torch.ones(100, device="cuda")
    y = torch.empty_like(x)
    other[(1,)](x, y, 99, 2.0, BLOCK=128)
    torch.cuda.synchronize()
    assert torch.equal(y[:99], torch.full((99,), 2.0, device="cuda"))
    print(len([b for b in builds if "launcher" in b]))
""")


@unittest.skipUnless(_has_gpu_triton(), "needs a GPU and Triton")
class BuildTest(unittest.TestCase):
    def test_a_kernel_with_the_same_argument_types_finds_the_launcher_built(self):
        cache = tempfile.mkdtemp(prefix="kf-launchers-cache-")
        try:
            made = launchers.build(cache, "cuda:0", [["*fp32", "*fp32", "i32", "fp32", "constexpr"],
                                                     ["*fp32", "int"]])
            self.assertEqual(made, 1, "the invalid signature was built")
            for warm in (True, False):
                copy = tempfile.mkdtemp(prefix="kf-launchers-copy-")
                # A file: Triton reads a kernel's source from it.
                check = os.path.join(copy, "kf_check.py")
                with open(check, "w") as f:
                    f.write(CHECK)
                env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(copy, "cache"))
                if warm:
                    shutil.copytree(cache, env["TRITON_CACHE_DIR"])
                out = subprocess.run([sys.executable, check], env=env, capture_output=True,
                                     text=True, timeout=300)
                shutil.rmtree(copy, ignore_errors=True)
                self.assertEqual(out.returncode, 0, out.stderr[-2000:])
                # A cold cache shows the check can see a build at all.
                self.assertEqual(out.stdout.strip().splitlines()[-1], "0" if warm else "1",
                                 f"warm={warm}: {out.stdout}")
        finally:
            shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
