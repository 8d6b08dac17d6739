"""Tests of the reference server's per-task state: each reference epoch
draws a new init seed, so the models it keeps are bounded, and a model
dropped for room is made again with the same weights; after a prepare only
the models of the sets kept for timing stay, and other tasks go while the
server is over its device budget (MultiInputOptions.reference_device_bytes);
a set whose model would be over MultiInputOptions.max_model_bytes is left
out with the reason."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                                "verifier_worker", "harness"))
import torch  # noqa: E402

from kforge_harness import protocol, reference_server, task_inputs  # noqa: E402

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



def _prepare_request(sets, **extra):
    return {"type": "prepare", "task_key": "k", "source": TASK, "device": "cpu",
            "init_seed": 3, "max_set_bytes": 1 << 20, "sets": sets, **extra}


def _spec(name, seed, **fields):
    return {"name": name, "seed": seed, "distribution": "normal", "value_scale": 1.0,
            "size_scale": 1.0, "ragged": False, "batch_one": False, "dtype": "",
            "same_shape": False, "require_finite": name != "task_inputs", **fields}


class PrepareRoomTest(unittest.TestCase):
    def test_only_the_models_of_the_sets_kept_for_timing_stay(self):
        server = reference_server.ReferenceServer(None)
        header, _ = server.prepare(_prepare_request(
            [_spec("task_inputs", 42, same_shape=True), _spec("float64", 5, dtype="float64")]))
        self.assertTrue(all(r["ok"] for r in header["sets"]), header["sets"])
        task = server.tasks["k"]
        kept_key = task.sets["task_inputs"][0]
        self.assertEqual(list(task.models), [kept_key], "the float64 set's model is dropped")

    def test_other_tasks_go_least_recently_used_first_while_over_the_budget(self):
        server = reference_server.ReferenceServer(None)
        sizes = {"a": 300, "b": 300, "k": 300}
        for key in ("a", "b"):
            server.task(key, TASK, "cpu")
        original = reference_server.LoadedTask.device_bytes
        by_task = {id(server.tasks[k]): k for k in ("a", "b")}
        try:
            reference_server.LoadedTask.device_bytes = (
                lambda t: sizes[by_task.get(id(t), "k")])
            server.prepare(_prepare_request([_spec("task_inputs", 42, same_shape=True)],
                                            device_budget_bytes=650))
        finally:
            reference_server.LoadedTask.device_bytes = original
        self.assertEqual(list(server.tasks), ["b", "k"], "a (least recent) went; k never does")

    def test_a_set_whose_model_is_over_the_bound_is_left_out_with_the_reason(self):
        server = reference_server.ReferenceServer(None)
        original = task_inputs.model_bytes
        try:
            # Counted on the meta device on torch 2.x; this stands for it on
            # any version: the larger set's model is the large one.
            task_inputs.model_bytes = (
                lambda module, spec: 3 << 30 if spec.get("size_scale", 1.0) > 1 else 1 << 30)
            header, _ = server.prepare(_prepare_request(
                [_spec("task_inputs", 42, same_shape=True),
                 _spec("larger_x1.5", 6, size_scale=1.5)], max_model_bytes=2 << 30))
        finally:
            task_inputs.model_bytes = original
        results = {r["name"]: r for r in header["sets"]}
        self.assertTrue(results["task_inputs"]["ok"])
        self.assertFalse(results["larger_x1.5"]["ok"])
        self.assertIn("3.00 GiB of parameters, over max_model_bytes (2.00 GiB)",
                      results["larger_x1.5"]["message"])


class ModelBytesTest(unittest.TestCase):
    def test_parameters_are_counted_without_being_allocated(self):
        module = task_inputs.load_task(TASK)
        counted = task_inputs.model_bytes(module, {"name": "task_inputs", "seed": 1})
        if hasattr(torch, "get_default_device"):
            self.assertEqual(counted, (8 * 8 + 8) * 4)  # nn.Linear(8, 8), float32
        else:
            self.assertEqual(counted, 0, "torch 1.x: unknown, the build decides")


if __name__ == "__main__":
    unittest.main()
