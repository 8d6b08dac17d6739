"""Tests of the harness's warm-ups. The warm request's
(MultiInputOptions.warm_variant_sets): forward runs once per listed
signature, in its own thread, on inputs of those shapes and dtypes made by
the harness; the compile reply is what the recorded call returned, whatever
a warm-up call does afterwards; a warm-up that raises is left for the set's
own run to report. The timed runs' fresh-input calls: each fresh set once,
at its secret call among the trials and timed as one."""
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                                "verifier_worker", "harness"))
import torch  # noqa: E402

from kforge_harness import candidate_runner, guards, protocol, timing  # noqa: E402

# A model keeping state between calls (`last`); each candidate below adds
# its module's globals and forward.
_MODEL = """
import threading
import torch
import torch.nn as nn

{globals}


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.last = None

    def forward(self, x, k):
"""

CANDIDATE = _MODEL.format(globals="CALLS = []") + """\
        CALLS.append((threading.current_thread().name, tuple(x.shape), x.dtype, k, self.scale))
        if x.shape[0] == 3:
            raise RuntimeError("three rows are not supported")
        if self.last is not None:
            self.last.fill_(7.0)  # an unrecorded call rewriting what an earlier one returned
        self.last = x * k
        return self.last
"""


def _runner():
    runner = candidate_runner.Runner(None, {"device": "cpu"})
    runner.init_seed = 1
    runner.guarded = guards.capture()
    return runner


def _entry(name, shape, dtype="float32", scale=2, k=3):
    return {"set": name, "init_inputs": [scale], "dtype": "",
            "scalars": [[1, k, "int"]],
            "tensors": [{"position": 0, "dtype": dtype, "shape": list(shape)}]}


class CompileWarmUpTest(unittest.TestCase):
    def _compile(self, runner, warm):
        """compile, then warm: (warm's header, compile's (header, parts)), x."""
        packer = protocol.TensorPacker()
        x = torch.arange(8, dtype=torch.float32).reshape(2, 4)
        packer.add("tiny/in0", x)
        payload = b"".join(bytes(p) for p in packer.payload())
        request = {"type": "compile", "source": CANDIDATE, "init_inputs": [2], "init_seed": 1,
                   "set": "tiny", "tensors": packer.entries,
                   "scalars": {"tiny": [[1, 3, "int"]]}}
        runner.request = request
        cwd = os.getcwd()
        os.chdir(self.tmp)
        try:
            compiled = runner.compile(request, payload)
            runner.request = {"type": "warm", "sets": warm}
            warmed, _ = runner.warm(runner.request, b"")
            return warmed, compiled, x
        finally:
            os.chdir(cwd)

    def setUp(self):
        import tempfile
        self.tmp = tempfile.mkdtemp(prefix="kf-warm-test-")

    def test_each_signature_runs_once_in_a_thread_of_its_own_on_inputs_made_here(self):
        runner = _runner()
        header, _, _ = self._compile(runner, [_entry("ragged_shape", (5, 7)),
                                              _entry("bfloat16", (2, 4), "bfloat16"),
                                              _entry("larger", (4, 8), scale=5)])
        self.assertEqual(header["type"], "warmed")
        self.assertNotIn("warm_error", header)
        self.assertGreaterEqual(header["warm_s"], 0)
        calls = runner.module.CALLS
        self.assertEqual(calls[0][0], threading.current_thread().name, "the recorded call first")
        warm = sorted(calls[1:], key=lambda c: c[0])
        self.assertEqual([(c[0], c[1], c[2], c[3], c[4]) for c in warm],
                         [("kf-warm-bfloat16", (2, 4), torch.bfloat16, 3, 2),
                          ("kf-warm-larger", (4, 8), torch.float32, 3, 5),
                          ("kf-warm-ragged_shape", (5, 7), torch.float32, 3, 2)])
        self.assertEqual(runner.model.scale, 2, "the compiled model is still the tiny set's")

    def test_the_reply_is_what_the_recorded_call_returned(self):
        runner = _runner()
        _, (header, parts), x = self._compile(runner, [_entry("ragged_shape", (5, 7))])
        out = protocol.unpack_tensors(header["tensors"], b"".join(bytes(p) for p in parts))
        self.assertTrue(torch.equal(out["run0/out0"], x * 3),
                        "a warm-up call rewrote the returned tensor after it was packed")

    def test_a_warm_up_that_raises_is_left_to_the_sets_own_run(self):
        runner = _runner()
        header, _, _ = self._compile(runner, [_entry("batch_3", (3, 4)),
                                              _entry("ragged_shape", (5, 7))])
        self.assertEqual(header["type"], "warmed")
        self.assertNotIn("warm_error", header, "the CPU has no context to lose")
        self.assertIn(("kf-warm-ragged_shape", (5, 7)),
                      [(c[0], c[1]) for c in runner.module.CALLS], "the others still ran")

    def test_integer_inputs_are_zeros_and_floats_are_not_the_sets_values(self):
        runner = _runner()
        runner.module = type(sys)("candidate")
        generator = torch.Generator()
        generator.manual_seed(5)
        ints = runner._warm_inputs(_entry("idx", (6,), "int64"), generator)
        self.assertTrue(torch.equal(ints[0], torch.zeros(6, dtype=torch.int64)))
        self.assertEqual(ints[1], 3)
        floats = runner._warm_inputs(_entry("f", (1000,)), generator)
        self.assertAlmostEqual(floats[0].std().item(), 1.0, delta=0.15)


BLOCKING_CANDIDATE = _MODEL.format(globals="GO = threading.Event()\nSEEN = []") + """\
        SEEN.append((threading.current_thread().name, tuple(x.shape), id(self)))
        if threading.current_thread().name.startswith("kf-warm-"):
            GO.wait(10)  # a compile that lasts until the test lets it end
            self.last = torch.full_like(x, 7.0)  # state a shared model would leak
            return self.last
        self.last = x * k
        return self.last
"""


class BackgroundWarmUpTest(unittest.TestCase):
    """MultiInputOptions.overlap_warm_up: the warm reply comes at once, later
    runs go on beside the warm-up on a model of their own, and a run marked
    after_warm (and every timing request) waits for it to end."""

    def setUp(self):
        import tempfile
        self.tmp = tempfile.mkdtemp(prefix="kf-warm-test-")

    def _compiled(self):
        runner = _runner()
        packer = protocol.TensorPacker()
        packer.add("tiny/in0", torch.ones(2, 4))
        payload = b"".join(bytes(p) for p in packer.payload())
        request = {"type": "compile", "source": BLOCKING_CANDIDATE, "init_inputs": [2],
                   "init_seed": 1, "set": "tiny", "tensors": packer.entries,
                   "scalars": {"tiny": [[1, 3, "int"]]}}
        runner.request = request
        cwd = os.getcwd()
        os.chdir(self.tmp)
        try:
            runner.compile(request, payload)
        finally:
            os.chdir(cwd)
        return runner

    def _run(self, runner, name, x, after_warm=False):
        packer = protocol.TensorPacker()
        packer.add(f"{name}/in0", x)
        payload = b"".join(bytes(p) for p in packer.payload())
        request = {"type": "run", "set": name, "init_inputs": [2], "dtype": "",
                   "tensors": packer.entries, "scalars": {name: [[1, 3, "int"]]},
                   "after_warm": after_warm, "return_inputs": False}
        runner.request = request
        header, parts = runner.run(request, payload)
        return header, protocol.unpack_tensors(header["tensors"], b"".join(bytes(p) for p in parts))

    def test_runs_go_on_beside_the_warm_up_on_a_model_of_their_own(self):
        runner = self._compiled()
        request = {"type": "warm", "background": True, "copy_max_bytes": 1 << 20,
                   "sets": [_entry("ragged_shape", (5, 7))]}
        runner.request = request
        header, _ = runner.warm(request, b"")
        self.assertEqual(header["type"], "warming", "the reply waited for the warm-up")
        x = torch.arange(8, dtype=torch.float32).reshape(2, 4)
        ran, out = self._run(runner, "normal", x)
        self.assertEqual(ran["type"], "ran")
        self.assertTrue(torch.equal(out["run0/out0"], x * 3))
        module = runner.module
        module.GO.set()  # the warm-up's compile ends
        ran, out = self._run(runner, "ragged_shape", torch.ones(5, 7), after_warm=True)
        self.assertEqual(ran["type"], "ran")
        self.assertTrue(torch.equal(out["run0/out0"], torch.full((5, 7), 3.0)))
        warm_models = {m for name, _, m in module.SEEN if name.startswith("kf-warm-")}
        own_models = {m for name, _, m in module.SEEN if not name.startswith("kf-warm-")}
        self.assertEqual(len(warm_models), 1)
        self.assertTrue(warm_models.isdisjoint(own_models), "the warm-up called the runs' model")
        self.assertIsNone(runner.warming)

    def test_a_run_after_the_warm_up_waits_for_it(self):
        runner = self._compiled()
        request = {"type": "warm", "background": True, "copy_max_bytes": 0,
                   "sets": [_entry("ragged_shape", (5, 7))]}
        runner.request = request
        runner.warm(request, b"")
        module = runner.module
        threading.Timer(0.3, module.GO.set).start()
        self._run(runner, "ragged_shape", torch.ones(5, 7), after_warm=True)
        self.assertTrue(module.GO.is_set(), "ran before the warm-up ended")
        names = [name for name, _, _ in module.SEEN]
        self.assertEqual(names[-1], threading.current_thread().name)
        self.assertIsNone(runner.warming)


def _timed(fresh, trials=6, **fields):
    """A runner whose candidate has seen task_inputs (4x4, ones), and a
    time request of `trials` trials with fresh sets fresh_1, fresh_2, ...
    (twos) of the shapes in `fresh`, {call index: shape}."""
    runner = _runner()
    runner.module = type(sys)("candidate")
    exec(CANDIDATE, runner.module.__dict__)
    runner._build([2])
    runner.pool["task_inputs"] = [torch.ones(4, 4), 3]
    packer = protocol.TensorPacker()
    calls = []
    for i, (call, shape) in enumerate(sorted(fresh.items())):
        name = f"fresh_{i + 1}"
        packer.add(f"{name}/in0", torch.full(shape, 2.0))
        calls.append({"call": call, "set": name})
    payload = b"".join(bytes(p) for p in packer.payload())
    names = [c["set"] for c in calls]
    request = {"type": "time", "sets": ["task_inputs"], "init_inputs": [2], "dtype": "",
               "min_trials": trials, "max_trials": trials, "fresh_calls": calls,
               "tensors": packer.entries, "scalars": {name: [[1, 3, "int"]] for name in names},
               **fields}
    runner.request = request
    return runner, request, payload


class FreshCallsTest(unittest.TestCase):
    def _time(self, runner, request, payload):
        header, parts = runner.time(request, payload)
        self.assertEqual(header["type"], "timed", header)
        return header, protocol.unpack_tensors(header["tensors"],
                                               b"".join(bytes(p) for p in parts))

    def test_each_fresh_set_is_timed_once_at_its_secret_call_among_the_trials(self):
        runner, request, payload = _timed({1: (6, 4), 4: (7, 4)})
        header, out = self._time(runner, request, payload)
        shapes = [c[1] for c in runner.module.CALLS]
        self.assertEqual(shapes, [(4, 4), (6, 4), (4, 4), (4, 4), (7, 4), (4, 4), (4, 4),
                                  (4, 4)])
        self.assertEqual(header["fresh_sets"], ["fresh_1", "fresh_2"])
        self.assertEqual(len(header["fresh_ms"]), 2)
        # On the CPU each fresh call's process CPU time comes too: one
        # thread (this one) ran it, so no more than the call's time took.
        self.assertEqual(len(header["fresh_cpu_ms"]), 2)
        for cpu, wall in zip(header["fresh_cpu_ms"], header["fresh_ms"]):
            self.assertGreaterEqual(cpu, 0)
            self.assertLessEqual(cpu, wall * 1.05 + 0.05)
        self.assertEqual(len(header["host_ms"]), 6, "a fresh call counted as a trial")
        self.assertTrue(torch.equal(out["fresh_1/out0"], torch.full((6, 4), 6.0)))
        self.assertTrue(torch.equal(out["fresh_2/out0"], torch.full((7, 4), 6.0)))
        self.assertTrue(torch.equal(out["last/out0"], torch.full((4, 4), 3.0)))
        # Never in the pool, where the candidate's first call could find them.
        self.assertEqual(set(runner.pool), {"task_inputs"})

    def test_a_fresh_call_is_timed_exactly_as_a_trial(self):
        runner, request, payload = _timed({2: (6, 4)}, clone_inputs=True, flush_l2=True,
                                          launch_cover_ms=0.5)
        seen = []
        one = timing.Timer.one

        def recording(timer, fn, args, flush_l2, clone=False, launch_cover_ms=0.0, *rest, **kw):
            seen.append((tuple(args[0].shape), flush_l2, clone, launch_cover_ms))
            return one(timer, fn, args, flush_l2, clone, launch_cover_ms, *rest, **kw)

        timing.Timer.one = recording
        runner.guarded = guards.capture()  # the test's wrapper, not a candidate's
        try:
            self._time(runner, request, payload)
        finally:
            timing.Timer.one = one
        self.assertEqual(seen[2], ((6, 4), True, True, 0.5))
        self.assertEqual({s[1:] for s in seen}, {(True, True, 0.5)})

    def test_fresh_calls_past_the_budget_are_still_made_and_the_last_trial_is_checked(self):
        # max_ms ends the trials at once; the fresh call at 5 still comes,
        # and the last trial's inputs (not the fresh set's) are what the
        # check of the last timed call compares with its set.
        runner, request, payload = _timed({5: (6, 4)}, max_ms=1e-6, clone_inputs=True)
        header, out = self._time(runner, request, payload)
        self.assertEqual(header["fresh_sets"], ["fresh_1"])
        self.assertEqual(runner.module.CALLS[-1][1], (6, 4))
        self.assertTrue(torch.equal(out["fresh_1/out0"], torch.full((6, 4), 6.0)))

    def test_a_loop_ending_on_a_fresh_call_reports_the_last_trials_set(self):
        # Two sets rotate; max_ms ends the trials at the first, and the
        # fresh call at 3 (set "other"'s slot) still comes, last. The set
        # the verifier re-checks the last output against is the last
        # trial's (call 2: task_inputs), not the fresh call's slot.
        runner, request, payload = _timed({3: (6, 4)}, max_ms=1e-6, clone_inputs=True)
        runner.pool["other"] = [torch.full((4, 4), 5.0), 3]
        request["sets"] = ["task_inputs", "other"]
        header, _ = self._time(runner, request, payload)
        self.assertEqual([c[1] for c in runner.module.CALLS], [(4, 4)] * 3 + [(6, 4)])
        self.assertEqual(header["last_set"], "task_inputs")


if __name__ == "__main__":
    unittest.main()
