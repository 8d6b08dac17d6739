"""What launch_record reports of a model call, and the timing budget's stop
rule, run for real on the CPU (torch's profiler records host-side ATen ops
on any device; GPU kernels appear only on a GPU)."""

import math
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
        _, host_ms, out, _, _ = timing.Timer("cpu").run(fn, pool, budget)
        self.assertEqual(len(host_ms), 4)
        self.assertTrue(torch.equal(out, torch.ones(4)))
        self.assertTrue(torch.equal(pool[0][0], torch.zeros(4)))


if __name__ == "__main__":
    unittest.main()


class TrimmedStopRuleTest(unittest.TestCase):
    @staticmethod
    def _run(budget, sample):
        n, total, mean, m2, samples = 0, 0.0, 0.0, 0.0, []
        while not budget.done(n, total, mean, m2, samples):
            t = sample(n)
            samples.append(t)
            n += 1
            total += t
            delta = t - mean
            mean += delta / n
            m2 += delta * (t - mean)
        return n

    def test_rare_slow_trials_do_not_keep_a_short_kernel_running_when_the_mean_is_trimmed(self):
        # A 30 us kernel whose every 20th trial is 10x slower (a launch
        # hiccup): the plain mean's standard error stays above 0.5% for
        # thousands of trials; the trimmed mean's is tiny once past the
        # minimum.
        def sample(i):
            return 0.3 if i % 20 == 0 else 0.03 + 0.0003 * ((i * 7) % 5)

        request = {"min_trials": 50, "max_trials": 5000, "min_ms": 0, "max_ms": 100000,
                   "target_rel_stderr": 0.005}
        plain = self._run(timing.Budget(request), sample)
        trimmed = self._run(timing.Budget(dict(request, trim_fraction=0.1)), sample)
        self.assertEqual(plain, 5000)
        self.assertLessEqual(trimmed, 64)
        self.assertEqual(trimmed % timing.TRIMMED_CHECK_EVERY, 0)

    def test_the_trimmed_standard_error_matches_a_hand_computed_one(self):
        # 10 samples, 10% trimmed: one from each end is cut (the kept mean is
        # 5.5) and winsorized (values 2..9 with 2 and 9 twice: mean 5.5,
        # squared deviations 66.5, variance 66.5 / 9);
        # se = sqrt(66.5 / 9) / (0.8 sqrt(10)).
        samples = [1, 2, 3, 4, 5, 6, 7, 8, 9, 100]
        want = math.sqrt(66.5 / 9) / (0.8 * math.sqrt(10)) / 5.5
        self.assertAlmostEqual(timing.trimmed_rel_stderr(samples, 0.1), want, places=12)
