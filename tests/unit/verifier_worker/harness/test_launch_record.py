"""What launch_record reports of a model call, and the timing budget's stop
rule, run for real on the CPU (torch's profiler records host-side ATen ops
on any device; GPU kernels appear only on a GPU)."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "verifier_worker", "harness"))

import torch  # noqa: E402

from kforge_harness import launch_record, timing  # noqa: E402


def ops(record):
    return {name for kind, name, _, _ in record["launches"] if kind == "op"}


class LaunchRecordTest(unittest.TestCase):
    def test_tensor_arithmetic_is_recorded_by_operator(self):
        x = torch.randn(64, 64)
        out, record = launch_record.record(lambda: x * (x > 0), "cpu")
        self.assertTrue(torch.equal(out, torch.relu(x)))
        self.assertTrue(record["intact"])
        self.assertIn("aten::mul", ops(record))
        self.assertIn("aten::gt", ops(record))

    def test_allocation_and_copies_are_recorded_as_what_they_are(self):
        x = torch.randn(8, 8)

        def call():
            y = torch.empty_like(x)
            y.copy_(x.t().contiguous())
            return torch.zeros(3), y

        _, record = launch_record.record(call, "cpu")
        recorded = ops(record)
        self.assertIn("aten::empty_like", recorded)
        self.assertIn("aten::copy_", recorded)
        self.assertIn("aten::zeros", recorded)
        self.assertNotIn("aten::mul", recorded)

    def test_counts_repeat_calls_of_one_operator(self):
        x = torch.randn(4)
        _, record = launch_record.record(lambda: x.add(1).add(2).add(3), "cpu")
        calls = {name: n for kind, name, n, _ in record["launches"] if kind == "op"}
        self.assertEqual(calls["aten::add"], 3)


class BudgetTest(unittest.TestCase):
    def test_a_steady_side_stops_at_its_minimum_time(self):
        budget = timing.Budget({"min_trials": 5, "max_trials": 1000, "min_ms": 10,
                                "max_ms": 1000, "target_rel_stderr": 0.01})
        times = [1.0] * 10
        n, total, mean, m2 = 0, 0.0, 0.0, 0.0
        while not budget.done(n, total, mean, m2):
            t = times[n % len(times)]
            n += 1
            total += t
            delta = t - mean
            mean += delta / n
            m2 += delta * (t - mean)
        self.assertEqual(n, 10)  # 10 ms reached, no spread

    def test_a_noisy_side_runs_on_until_its_mean_is_known_or_the_cap(self):
        budget = timing.Budget({"min_trials": 5, "max_trials": 100000, "min_ms": 10,
                                "max_ms": 400, "target_rel_stderr": 0.005})
        n, total, mean, m2 = 0, 0.0, 0.0, 0.0
        while not budget.done(n, total, mean, m2):
            t = 1.0 if n % 2 else 3.0  # CV 50%: needs ~10,000 trials for 0.5%
            n += 1
            total += t
            delta = t - mean
            mean += delta / n
            m2 += delta * (t - mean)
        self.assertGreaterEqual(total, 400)
        self.assertLess(total, 404)

    def test_timer_runs_the_budget_and_clones_inputs_per_call(self):
        seen = []

        def fn(x):
            seen.append(x.data_ptr())
            x.add_(1)  # a mutation must not reach the next call
            return x.clone()

        pool = [[torch.zeros(4)]]
        budget = timing.Budget({"min_trials": 4, "max_trials": 4, "clone_inputs": True})
        _, host_ms, out, _ = timing.Timer("cpu").run(fn, pool, budget)
        self.assertEqual(len(host_ms), 4)
        self.assertTrue(torch.equal(out, torch.ones(4)))
        self.assertTrue(torch.equal(pool[0][0], torch.zeros(4)))


if __name__ == "__main__":
    unittest.main()
