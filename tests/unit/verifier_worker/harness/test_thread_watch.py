"""Tests of thread_watch: a thread the candidate's code started is seen,
whatever it runs and also once it ended; a thread started elsewhere is seen
while it runs the candidate's code; threads that torch or the harness start
and that run only their own code, and the harness's warm-up threads, are
not; and the candidate runner fails such a candidate with HACK_CONCURRENCY."""
import functools
import gc
import os
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                                "verifier_worker", "harness"))
import torch  # noqa: E402

from kforge_harness import candidate_runner, guards, protocol, thread_watch  # noqa: E402

# A stand-in for a candidate's module: functions defined in a file of its
# own, which is what the watch recognises.
_SOURCE = """
import threading

def work(box):
    box.append(sum(range(1000)))

def start_worker(box):
    t = threading.Thread(target=work, args=(box,), name="helper")
    t.start()
    return t

def start_library_thread(target):
    t = threading.Thread(target=target, name="library")
    t.start()
    return t

def block(event):
    event.wait(10)
"""


class ThreadWatchTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        path = os.path.join(self.dir.name, "candidate.py")
        with open(path, "w") as f:
            f.write(_SOURCE)
        self.module = {}
        exec(compile(_SOURCE, path, "exec"), self.module)
        self.watch = thread_watch.ThreadWatch()
        self.watch.install()
        self.watch.set_candidate(path)

    def tearDown(self):
        self.watch.uninstall()
        self.dir.cleanup()

    def test_a_thread_the_candidate_started_is_seen_after_it_ended(self):
        box = []
        self.module["start_worker"](box).join()
        self.assertEqual(box, [499500])
        ran = self.watch.offenders()
        self.assertEqual(len(ran), 1, ran)
        self.assertRegex(ran[0], r"thread 'helper' started at candidate\.py:[0-9]+")

    def test_a_thread_the_candidate_started_on_library_code_is_seen(self):
        a, b, out = torch.ones(4), torch.ones(4), torch.zeros(4)
        self.module["start_library_thread"](functools.partial(torch.add, a, b, out=out)).join()
        self.assertEqual(out.tolist(), [2.0] * 4)
        ran = self.watch.offenders()
        self.assertEqual(len(ran), 1, ran)
        self.assertIn("thread 'library' started at candidate.py:", ran[0])

    def test_a_thread_started_elsewhere_on_library_code_is_left_alone(self):
        event = threading.Event()
        t = threading.Thread(target=event.wait, args=(5,))
        t.start()
        self.assertEqual(self.watch.offenders(), [])
        event.set()
        t.join()
        self.assertEqual(self.watch.offenders(), [])

    def test_the_harness_own_threads_may_run_the_candidates_code(self):
        box, event = [], threading.Event()

        def warm():
            with self.watch.harness_thread():
                self.module["work"](box)
                self.module["block"](event)

        t = threading.Thread(target=warm)
        t.start()
        try:
            self.assertEqual(self.watch.offenders(), [])  # looked at mid-forward
        finally:
            event.set()
            t.join()
        self.assertEqual(box, [499500])
        self.assertEqual(self.watch.offenders(), [])

    def test_a_thread_started_elsewhere_is_seen_while_it_runs_the_candidates_code(self):
        event = threading.Event()
        t = threading.Thread(target=self.module["block"], args=(event,))
        t.start()
        try:
            ran = self.watch.offenders()
        finally:
            event.set()
            t.join()
        self.assertEqual(len(ran), 1, ran)
        self.assertRegex(ran[0], r"a thread \([0-9]+\) was running candidate\.py:[0-9]+")

    def test_a_look_leaves_no_garbage_for_the_collector(self):
        # Looked at after every timed call: garbage in cycles would have the
        # collector run inside later timed calls.
        gc.collect()
        gc.disable()
        try:
            for _ in range(100):
                self.watch.offenders()
            self.assertEqual(gc.collect(), 0)
        finally:
            gc.enable()

    def test_uninstall_puts_the_starters_back_and_the_guards_see_the_wrap(self):
        self.watch.uninstall()
        captured = guards.capture()
        self.watch.install()
        self.assertIn("_thread.start_new_thread", guards.replaced(captured))
        self.assertIn("_thread.start_new", guards.replaced(captured))


# Forward returns an empty output and a thread of its own fills it.
_FILLED_BY_A_THREAD = """
import threading
import torch
import torch.nn as nn


def _fill(out, x):
    out.copy_(torch.clamp(x, min=0.0))


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        t = threading.Thread(target=_fill, args=(out, x))
        t.start()
        t.join()
        return out
"""

_PLAIN = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0.0)
"""


class RunnerThreadTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.cwd = os.getcwd()
        os.chdir(self.dir.name)
        self.runner = candidate_runner.Runner(None, {"device": "cpu"})
        self.runner.watch.install()  # as run_child does
        self.runner.guarded = guards.capture()

    def tearDown(self):
        self.runner.watch.uninstall()
        os.chdir(self.cwd)
        self.dir.cleanup()

    def _compile(self, source):
        packer = protocol.TensorPacker()
        packer.add("tiny/in0", torch.randn(4, 8))
        payload = b"".join(bytes(p) for p in packer.payload())
        request = {"type": "compile", "source": source, "init_inputs": [], "init_seed": 1,
                   "set": "tiny", "tensors": packer.entries}
        self.runner.request = request
        return self.runner.compile(request, payload)

    def test_an_output_filled_by_a_thread_of_the_candidates_is_flagged(self):
        with self.assertRaises(candidate_runner.CandidateError) as caught:
            self._compile(_FILLED_BY_A_THREAD)
        self.assertEqual(caught.exception.flag, "HACK_CONCURRENCY")
        self.assertIn("started at candidate.py:", str(caught.exception))

    def test_a_plain_candidate_with_a_background_warm_up_is_not(self):
        header, _ = self._compile(_PLAIN)
        self.assertEqual(header["type"], "compiled")
        entry = {"set": "big", "init_inputs": [], "dtype": "",
                 "tensors": [{"position": 0, "dtype": "float32", "shape": [64, 64]}]}
        self.runner.request = {"type": "warm", "sets": [entry], "background": True}
        self.runner.warm(self.runner.request, b"")
        self.runner._end_warm()  # the harness's threads ran forward: no flag
        self.assertEqual(self.runner.watch.offenders(), [])


if __name__ == "__main__":
    unittest.main()
