"""Tests of task_inputs' size budget: sets are scaled until inputs and
outputs fit max_set_bytes."""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                                "verifier_worker", "harness"))
import torch  # noqa: E402

from kforge_harness import task_inputs  # noqa: E402


def _module(source):
    module = types.ModuleType("task")
    exec(compile(source, "task.py", "exec"), module.__dict__)  # noqa: S102 - a test task
    return module


SMALL_K_MATMUL = """
import torch
M = 4096
N = 4096
K = 16
class Model(torch.nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)
def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]
def get_init_inputs():
    return []
"""

RELU = """
import torch
B = 64
D = 4096
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.rand(B, D)]
def get_init_inputs():
    return []
"""


class FitToBudgetTest(unittest.TestCase):
    def test_elementwise_sets_count_outputs_as_large_as_inputs(self):
        # 1 MiB of input, 1 MiB of output: fits 2 MiB, not 1 MiB.
        self.assertEqual(task_inputs.fit_to_budget(_module(RELU), {}, 2 << 20)["fit_scale"], 1.0)
        self.assertLess(task_inputs.fit_to_budget(_module(RELU), {}, 1 << 20)["fit_scale"], 1.0)

    @unittest.skipUnless(hasattr(torch, "get_default_device"),
                         "needs the meta device context of torch 2.x (the GPU machine's torch)")
    def test_an_output_far_larger_than_the_inputs_is_counted(self):
        # Inputs of 512 KiB make a 64 MiB output: a 16 MiB budget must scale
        # the set down although its inputs alone would fit many times over.
        spec = task_inputs.fit_to_budget(_module(SMALL_K_MATMUL), {}, 16 << 20)
        self.assertLess(spec["fit_scale"], 1.0)
        self.assertEqual(task_inputs.fit_to_budget(_module(SMALL_K_MATMUL), {}, 80 << 20)["fit_scale"],
                         1.0)


if __name__ == "__main__":
    unittest.main()
