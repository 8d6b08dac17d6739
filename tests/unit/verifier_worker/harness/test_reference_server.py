"""Tests of the reference server's per-task state: each reference epoch
draws a new init seed, so the models it keeps are bounded, and a model
dropped for room is made again with the same weights."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                                "verifier_worker", "harness"))
import torch  # noqa: E402

from kforge_harness import reference_server  # noqa: E402

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.randn(2, 8)]


def get_init_inputs():
    return [8]
"""


class LoadedTaskTest(unittest.TestCase):
    def test_models_are_bounded_and_a_dropped_one_comes_back_the_same(self):
        task = reference_server.LoadedTask(TASK, "cpu")
        first_key, first = task.model([8], 1, "")
        weights = first.linear.weight.detach().clone()
        task.compiled[first_key] = first  # stands for its torch.compile'd twin
        for seed in range(2, 2 + reference_server.MAX_MODELS):
            task.model([8], seed, "")
        self.assertEqual(len(task.models), reference_server.MAX_MODELS)
        self.assertNotIn(first_key, task.models, "the least recently used one is dropped")
        self.assertNotIn(first_key, task.compiled, "and its compiled twin with it")
        key, again = task.model([8], 1, "")
        self.assertEqual(key, first_key)
        self.assertTrue(torch.equal(again.linear.weight, weights))


if __name__ == "__main__":
    unittest.main()
