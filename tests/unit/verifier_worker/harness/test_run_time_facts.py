"""Run-time facts the candidate runner checks whatever the candidate's source
looks like (the static check is a filter; these are the ground truth):

  - its code runs only inside the calls the harness makes (call_window.py):
    a finalizer run when the harness drops a timed call's input clone is
    work moved past the timed interval;
  - forward returns a tensor or a plain tuple/list (a subclass's __iter__
    would run as the harness unpacks it, after the timing);
  - a timed call leaves its inputs as it got them (the last call and the
    verifier's secret ones are compared with their sets);
  - nothing the harness relies on was replaced, its own modules and the
    check itself included, and the last look before each reply is made
    with references bound before the candidate loaded (guards.py, serve).

The candidates here are executed directly, without the static check, as a
route past it would let them."""
import builtins
import copy
import functools
import os
import socket
import sys
import tempfile
import threading
import time
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                                "verifier_worker", "harness"))
import torch  # noqa: E402

# As the zygote does before any fork (zygote.py): torch 2.x's torch._dynamo
# rebinds torch.manual_seed when first imported, and the profiler imports it
# lazily; after a runner captured its guards that read as a candidate's patch.
try:
    import torch._dynamo  # noqa: F401,E402
except Exception:  # torch 1.x has none
    pass

from kforge_harness import (call_window, candidate_runner, guards, own_code,  # noqa: E402
                            protocol, timing)

HEADER = """
import torch
import torch.nn as nn
"""

HONEST = HEADER + """
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0.0)
"""

# The work left to a finalizer of the last call's output, run by the
# dropping of that output (after the timer's clocks): torch.clamp itself the
# callback, so no frame of the candidate's runs outside a call.
FINALIZED_BY_THE_NEXT_DROP = HEADER + """
import weakref

_last = [None]


class ModelNew(nn.Module):
    def forward(self, x):
        last = _last[0]() if _last[0] is not None else None
        out = torch.empty_like(x).fill_(-7.0)
        if last is None:
            torch.clamp(x, min=0.0, out=out)
        else:
            weakref.finalize(last, torch.clamp, x, min=0.0, out=out)
        del last
        _last[0] = weakref.ref(out)
        return out
"""

# Changes how the harness's replies spell floats (no code of its own runs
# after its module loaded).
RESPELLS_THE_REPLY = HEADER + """
import json.encoder
import types

json.encoder.c_make_encoder = None
json.encoder.float = types.SimpleNamespace(__repr__="{!r}e-1".format)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0.0)
"""

# Two intra-op threads where the harness (and the eager baseline) have one.
WIDENS_THE_THREAD_POOL = HEADER + """
class ModelNew(nn.Module):
    def forward(self, x):
        torch.set_num_threads(2)
        return torch.clamp(x, min=0.0)
"""

# The work done when the harness drops the clone it timed the call on.
# Round 17: callables that are not the candidate's functions, where torch or
# the interpreter calls them (a finalizer, a forward pre-hook) with no frame
# of the candidate's on the stack.
BINDS_A_PARTIAL_AS_A_FINALIZER = HEADER + """
import functools


class _Fin:
    pass


_Fin.__del__ = functools.partial(print, "would run in the harness's frames")


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0.0)
"""
HOOKS_A_PARTIAL = HEADER + """
import functools
import operator


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        # Called as hook(module, inputs): setitem({}, module, inputs), None.
        self.register_forward_pre_hook(functools.partial(operator.setitem, {}))

    def forward(self, x):
        return torch.clamp(x, min=0.0)
"""
# What a candidate's classes may carry: its own functions (as methods,
# static and class methods, properties, hooks) and the standard library's
# class makers' methods.
CLASSES_OF_ITS_OWN = HEADER + """
import collections
import enum
import functools


Pair = collections.namedtuple("Pair", "a b")


class Mode(enum.Enum):
    FAST = 1


class Layout(enum.IntEnum):  # enum binds int.__repr__ as _value_repr_
    ROWS = 0


@functools.total_ordering  # functools' own comparison methods
class Tile:
    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return self.n == other.n

    def __lt__(self, other):
        return self.n < other.n

    __hash__ = None
    __rlt__ = __lt__  # an alias of its own def


class ModelNew(nn.Module):
    __constants__ = ["floor"]
    floor = 0.0

    def __init__(self):
        super().__init__()
        self.register_forward_pre_hook(self._before)
        # Hooks torch registers itself: LazyLinear's bound method,
        # weight_norm's WeightNorm object.
        self.lazy = nn.LazyLinear(4)
        self.normed = torch.nn.utils.weight_norm(nn.Linear(4, 4))

    @staticmethod
    def _before(module, inputs):
        return None

    @property
    def mode(self):
        return Mode.FAST

    def __repr__(self):
        return "ModelNew"

    clamp = torch.clamp  # torch's function: no object of its own

    @torch.no_grad()  # torch's closure over the candidate's forward
    def forward(self, x):
        return self.clamp(x, min=Pair(self.floor, 1).a)
"""
FINALIZER = HEADER + """
class _Job:
    def __init__(self, x, y):
        # The clone's storage, not the clone: no reference cycle, so the
        # job dies with the clone, when the harness lets it go.
        self.x, self.y = x.detach(), y

    def __del__(self):
        torch.clamp(self.x, min=0.0, out=self.y)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        if x._base is None:  # a timer's clone, not a set's view
            x.job = _Job(x, y)
            return y
        return torch.clamp(x, min=0.0)
"""

# The work done as the harness unpacks the outputs.
LAZY_CONTAINER = HEADER + """
class _Later(tuple):
    def __iter__(self):
        torch.clamp(self[1], min=0.0, out=self[0])
        return iter((self[0],))


class ModelNew(nn.Module):
    def forward(self, x):
        return _Later((torch.empty_like(x), x))
"""

# In place on the timer's clones only: no output allocated.
IN_PLACE_WHEN_TIMED = HEADER + """
class ModelNew(nn.Module):
    def forward(self, x):
        if x._base is None:
            return x.clamp_(min=0.0)
        return torch.clamp(x, min=0.0)
"""

# Replaces the harness's timer and silences the check that would see it.
PATCHES_THE_HARNESS = HEADER + """
import kforge_harness.guards as _guards
import kforge_harness.timing as _timing

_real_one = _timing.Timer.one
_guards.replaced = lambda captured: []


def _fast_one(self, *args, **kwargs):
    event_ms, host_ms, out = _real_one(self, *args, **kwargs)
    return event_ms, host_ms / 5, out


_timing.Timer.one = _fast_one


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0.0)
"""


KEEPS_ITS_INPUTS = HEADER + """
KEPT = []


class ModelNew(nn.Module):
    def forward(self, x):
        for kept in KEPT:
            kept.clamp_(min=0.0)
        KEPT.append(x)
        return torch.clamp(x, min=0.0)
"""

SKIPS_LATER_CALLS = HEADER + """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 3:
            return torch.zeros_like(x)
        return torch.clamp(x, min=0.0)
"""


def _set(shape=(8, 64)):
    """A set as the runner holds one: a view of a larger buffer, as the
    shared-memory sets are."""
    return [torch.randn(shape[0] * shape[1] + 16)[16:].view(*shape)]


class RunnerTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kf-facts-test-")
        self.runner = None

    def tearDown(self):
        if self.runner is not None:
            self.runner.window.disarm()

    def _runner(self, source, own=False):
        """A runner whose candidate module ran as compile runs it (its file
        named, the window armed afterwards), with the set "a" seen; with
        `own`, own_code's checks on (the audit's candidate file named, its
        hook not installed)."""
        runner = candidate_runner.Runner(None, {"device": "cpu"})
        self.runner = runner
        runner.init_seed = 1
        runner.guarded = guards.capture()
        path = os.path.join(self.tmp, "candidate.py")
        runner.module = type(sys)("candidate")
        runner.watch.set_candidate(path)
        runner.window.set_candidate(path)
        if own:
            runner.audit.set_candidate(path)
            runner.own = own_code.OwnCode(path, runner.audit._kind)
        exec(compile(source, path, "exec"), runner.module.__dict__)
        runner.window.arm()
        runner._build([])
        runner.pool["a"] = _set()
        runner.pool["b"] = _set()
        return runner

    def _time(self, runner, **fields):
        request = {"type": "time", "sets": ["a", "b"], "init_inputs": [], "min_trials": 6,
                   "max_trials": 6, "warmup": 2, "clone_inputs": True, **fields}
        runner.request = request
        return runner.time(request, b"")

    def assertFails(self, flag, call):
        with self.assertRaises(candidate_runner.CandidateError) as failed:
            call()
        self.assertEqual(failed.exception.flag, flag, str(failed.exception))
        return str(failed.exception)

    def test_an_honest_candidate_is_timed(self):
        runner = self._runner(HONEST)
        header, _ = self._time(runner, recorded_calls=[3])
        self.assertEqual(header["type"], "timed")
        self.assertEqual(len(header["host_ms"]), 6)
        self.assertEqual(runner.window.offenders(), [])

    def test_the_timer_reads_the_clocks_it_was_loaded_with(self):
        # Round 23: a candidate that reached this module swapped its clock
        # globals inside forward for chains that put the originals back as
        # they answered (3.0x). Setting a module's attribute raises no audit
        # event; what the timer reads is bound into its methods' defaults.
        runner = self._runner(HEADER + """
import functools
import itertools
import sys
import time

_timing = sys.modules["kforge_harness.timing"]
_clock = _timing._perf_counter_ns


def _once(value):
    # Answers `value` once, putting the original back as it does.
    restore = map(object.__setattr__, [_timing], ["_perf_counter_ns"], [_clock])
    return functools.partial(next, filter(None, itertools.chain(restore, [value])))


class ModelNew(nn.Module):
    def forward(self, x):
        began = _clock()
        time.sleep(0.002)
        object.__setattr__(_timing, "_perf_counter_ns", _once(began + 1000))
        return torch.clamp(x, min=0.0)
""")
        header, _ = self._time(runner)
        self.assertIs(timing._perf_counter_ns, time.perf_counter_ns, "put back as it answered")
        self.assertEqual(len(header["host_ms"]), 6)
        self.assertGreaterEqual(min(header["host_ms"]), 1.5, header["host_ms"])

    def test_an_output_finished_while_the_harness_checks_it_is_work_past_the_clock(self):
        # Round 24: the check reads torch.device off the torch module, and a
        # chain set there for one call (no audit event, put back as it ran)
        # finished the output past the clock, fresh calls included: 2.9x.
        runner = self._runner(HEADER + """
import functools
import itertools

_device = torch.device


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        restore = filter(None, map(object.__setattr__, [torch], ["device"], [_device]))
        work = itertools.filterfalse(torch.is_tensor, map(
            functools.partial(torch.clamp, min=0.0, out=out), [x]))
        object.__setattr__(torch, "device",
                           functools.partial(next, itertools.chain(restore, work, [out.device])))
        return out
""")
        # As a fresh-input call is timed: its output kept as the clock stopped,
        # checked by something that reads torch.device.
        timer = timing.Timer("cpu")
        check = lambda out, index: torch.device("cpu")  # noqa: E731
        try:
            with self.assertRaises(timing.ChangedAfterTheClock):
                timer.one(runner.model, [torch.randn(8, 64)], False, check=check, index=0,
                          kept_as_timed=True)
        finally:
            self.assertIs(torch.device, type(torch.zeros(1).device), "put back as it ran")

    def test_work_finished_by_a_finalizer_past_the_clocks_is_seen_unfinished(self):
        runner = self._runner(FINALIZED_BY_THE_NEXT_DROP)
        message = self.assertFails("HACK_NONDETERMINISTIC", lambda: self._time(runner))
        self.assertIn("first call", message)

    def test_a_module_the_reply_goes_out_through_is_guarded_whole(self):
        import json.encoder
        saved = dict(vars(json.encoder))
        try:
            runner = self._runner(RESPELLS_THE_REPLY)
            message = self.assertFails("HACK_PATCHED_FUNCTION", lambda: self._time(runner))
        finally:
            json.encoder.c_make_encoder = saved["c_make_encoder"]
            vars(json.encoder).pop("float", None)
        self.assertIn("json.encoder.c_make_encoder", message)
        self.assertIn("json.encoder.float (added)", message)

    def test_the_reply_reports_a_method_shadowed_on_the_runner(self):
        # serve()'s last look: an instance attribute that shadows one of the
        # runner's methods (a red team's `_pack` divided every timing by 5).
        ours, theirs = socket.socketpair()
        runner = candidate_runner.Runner(theirs, {"device": "cpu"})
        runner.guarded = guards.capture()
        runner._pack = lambda header, named: (header, b"")
        serving = threading.Thread(target=runner.serve, name="kf-test-serve")
        serving.start()
        try:
            protocol.send_frame(ours, {"type": "ping"})
            reply, _ = protocol.recv_frame(ours)
            protocol.send_frame(ours, {"type": "exit"})
        finally:
            serving.join(timeout=10)
            ours.close()
            theirs.close()
        self.assertEqual(reply.get("flag"), "HACK_PATCHED_FUNCTION", reply)
        self.assertIn("_pack", reply.get("message", ""))

    def test_a_changed_thread_pool_fails_the_candidate(self):
        torch.set_num_threads(1)
        runner = self._runner(WIDENS_THE_THREAD_POOL)
        try:
            message = self.assertFails("HACK_PATCHED_FUNCTION", lambda: self._time(runner))
        finally:
            torch.set_num_threads(1)
        self.assertIn("num_threads setting (1 -> 2)", message)

    def test_work_in_a_finalizer_of_a_timed_calls_input_is_deferred_work(self):
        runner = self._runner(FINALIZER)
        # Its correctness calls (on the sets' views) are honest.
        outputs = runner._call(runner.pool["a"])
        self.assertTrue(torch.equal(outputs[0], runner.pool["a"][0].clamp(min=0)))
        message = self.assertFails("HACK_CONCURRENCY", lambda: self._time(runner))
        self.assertIn("_Job.__del__ at candidate.py", message)

    def test_a_class_binding_a_library_callable_as_a_special_method_is_refused(self):
        runner = self._runner(BINDS_A_PARTIAL_AS_A_FINALIZER, own=True)
        message = self.assertFails("HACK_INTROSPECTION", runner._check_guards)
        self.assertIn("_Fin.__del__ (functools.partial)", message)

    def test_a_hook_that_is_not_the_candidates_function_is_refused_after_the_call(self):
        runner = self._runner(HOOKS_A_PARTIAL, own=True)
        message = self.assertFails("HACK_INTROSPECTION", lambda: runner._call(runner.pool["a"]))
        self.assertIn("_forward_pre_hooks (functools.partial)", message)

    def test_a_class_made_under_another_modules_name_is_judged_too(self):
        # Round 18: types.new_class names its classes' module "types".
        runner = self._runner(HONEST + """
import types

_K = types.new_class("_K", (dict,))
_K.__setattr__ = {}.__setitem__
""", own=True)
        message = self.assertFails("HACK_INTROSPECTION", runner._check_guards)
        self.assertIn("_K.__setattr__ (builtins.method-wrapper)", message)

    def test_a_global_module_hook_that_is_not_the_candidates_function_is_refused(self):
        runner = self._runner(HONEST + """
import functools
import operator

_handle = torch.nn.modules.module.register_module_forward_pre_hook(
    functools.partial(operator.setitem, {}))
""", own=True)
        try:
            message = self.assertFails("HACK_INTROSPECTION",
                                       lambda: runner._call(runner.pool["a"]))
        finally:
            runner.module._handle.remove()  # torch's global state, shared by every test
        self.assertIn("torch's _global_forward_pre_hooks (functools.partial)", message)

    def test_a_parameter_with_a_frameless_weak_reference_callback_is_refused(self):
        # The harness drops a model it rebuilds: the callback would run there.
        runner = self._runner(HEADER + """
import functools
import weakref

_refs = []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        _refs.append(weakref.ref(self.scale, functools.partial(print, "dropped")))

    def forward(self, x):
        return torch.clamp(x, min=0.0)
""", own=True)
        message = self.assertFails("HACK_INTROSPECTION", lambda: runner._call(runner.pool["a"]))
        self.assertIn("a weak reference's callback (functools.partial)", message)

    def test_classes_and_hooks_of_the_candidates_own_pass(self):
        runner = self._runner(CLASSES_OF_ITS_OWN, own=True)
        runner._check_guards()
        outputs = runner._call(runner.pool["a"])
        self.assertTrue(torch.equal(outputs[0], runner.pool["a"][0].clamp(min=0)))

    def test_the_candidates_code_may_run_inside_calls_and_at_construction(self):
        runner = self._runner(FINALIZER)
        runner._build([], "float64")  # ModelNew(...) and its .to() run in the window
        runner._call(runner.pool["a"])
        self.assertEqual(runner.window.offenders(), [])

    def test_an_output_container_of_the_candidates_type_fails_before_it_is_read(self):
        runner = self._runner(LAZY_CONTAINER)
        message = self.assertFails("HACK_OUTPUT_NOT_PLAIN_TENSOR",
                                   lambda: runner._call(runner.pool["a"]))
        self.assertIn("_Later", message)
        self.assertEqual(runner.window.offenders(), [], "its __iter__ never ran")

    def test_a_timed_call_that_writes_into_its_inputs_fails(self):
        runner = self._runner(IN_PLACE_WHEN_TIMED)
        before = runner.pool["a"][0].clone()
        runner._call(runner.pool["a"])  # honest on the set itself
        self.assertTrue(torch.equal(runner.pool["a"][0], before))
        message = self.assertFails("HACK_INPUT_MUTATION", lambda: self._time(runner))
        self.assertIn("changed its input 0", message)

    def test_the_sets_the_trials_clone_are_never_handed_to_the_candidate(self):
        # It keeps what each correctness call was given, and writes the
        # answer into it in its first timed call: had it been the set itself,
        # every later clone would carry the answer.
        runner = self._runner(KEEPS_ITS_INPUTS)
        before = runner.pool["a"][0].clone()
        runner.request = {"type": "run"}
        given = runner._handed(runner.pool["a"])
        runner._call(given)
        self.assertTrue(torch.equal(runner.pool["a"][0], before))
        self._time(runner)
        self.assertTrue(torch.equal(runner.pool["a"][0], before), "the set changed")

    def test_every_timed_call_agrees_with_the_first_on_its_set(self):
        runner = self._runner(SKIPS_LATER_CALLS)
        message = self.assertFails("HACK_NONDETERMINISTIC", lambda: self._time(runner))
        self.assertIn("skipped the work", message)
        # Within the tolerances, calls may differ (another summation order).
        first = [torch.ones(4)]
        candidate_runner.Runner._check_agrees([torch.ones(4) + 5e-5], first,
                                              {"float32": [1e-4, 1e-4]}, "a")

    def test_agreement_is_judged_as_the_verifier_judges_outputs(self):
        tolerances = {"float32": [1e-4, 1e-4]}

        def agrees(out, first):
            try:
                candidate_runner.Runner._check_agrees([out], [first], tolerances, "a")
                return True
            except candidate_runner.CandidateError:
                return False

        inf, nan = float("inf"), float("nan")
        # The same infinities and NaNs where the first call had them.
        self.assertTrue(agrees(torch.tensor([inf, -inf, nan, 1.0]),
                               torch.tensor([inf, -inf, nan, 1.0])))
        self.assertFalse(agrees(torch.tensor([inf, 1.0]), torch.tensor([-inf, 1.0])))
        self.assertFalse(agrees(torch.tensor([1.0, 1.0]), torch.tensor([nan, 1.0])))
        self.assertFalse(agrees(torch.tensor([inf, 1.0]), torch.tensor([1.0, 1.0])))
        # A sum near zero of large terms: off elementwise, within rtol as a
        # whole (beside an infinity the two share).
        self.assertTrue(agrees(torch.tensor([1e6, -1e6, 0.5, inf]),
                               torch.tensor([1e6, -1e6, 0.0, inf])))
        self.assertFalse(agrees(torch.tensor([2.0, 1.0]), torch.tensor([1.0, 1.0])))
        # In chunks as at once.
        chunk = candidate_runner._AGREE_CHUNK
        candidate_runner._AGREE_CHUNK = 3
        try:
            self.assertTrue(agrees(torch.tensor([inf, 1.0, 2.0, nan, 3.0]),
                                   torch.tensor([inf, 1.0, 2.0, nan, 3.0])))
            self.assertFalse(agrees(torch.tensor([1.0, 1.0, 2.0, 0.0, 9.0]),
                                    torch.tensor([1.0, 1.0, 2.0, 0.0, 3.0])))
        finally:
            candidate_runner._AGREE_CHUNK = chunk

    def test_warm_up_calls_get_clones_too(self):
        # A warm-up on the pool's own tensors would let a call write into
        # what every later clone copies.
        timer = timing.Timer("cpu")
        pool = [_set()]
        seen = []
        timer.warm_up(lambda x: seen.append(x) or x, pool, timing.Budget({"warmup": 3}),
                      clone=True)
        self.assertEqual(len(seen), 3)
        self.assertTrue(all(x is not pool[0][0] for x in seen))


class CallWindowTest(unittest.TestCase):
    def test_only_the_candidates_frames_outside_calls_are_offences(self):
        path = os.path.join(tempfile.mkdtemp(prefix="kf-window-test-"), "candidate.py")
        scope = {}
        exec(compile("def work():\n    return 1\n", path, "exec"), scope)
        window = call_window.CallWindow()
        window.set_candidate(path)
        window.arm()
        try:
            self.assertEqual(window.call(scope["work"]), 1)
            len([1, 2])  # the harness's own code: not an offence
            self.assertEqual(window.offenders(), [])
            scope["work"]()
        finally:
            window.disarm()
        self.assertEqual(window.offenders(), ["work at candidate.py:1"])
        scope["work"]()  # disarmed: not seen
        self.assertEqual(len(window.offenders()), 1)


class GuardsTest(unittest.TestCase):
    def test_the_harnesss_own_functions_and_methods_are_guarded(self):
        captured = guards.capture()
        real_one, real_send = timing.Timer.one, protocol.send_frame
        timing.Timer.one = lambda *a, **k: None
        protocol.send_frame = lambda *a, **k: None
        try:
            self.assertEqual(sorted(guards.replaced(captured)),
                             ["Timer.one", "kforge_harness.protocol.send_frame"])
        finally:
            timing.Timer.one, protocol.send_frame = real_one, real_send
        self.assertEqual(guards.replaced(captured), [])

    def test_harness_modules_and_the_builtins_are_guarded_whole(self):
        # Round 13: a method descriptor bound by a harness module (the
        # timer's clone) and a global added to one (an `isinstance` that
        # shadows the builtin for the timer) were not guarded; a builtin
        # the list did not name neither.
        captured = guards.capture()
        real_clone = timing._clone
        timing._clone = torch.Tensor.detach
        timing.isinstance = lambda value, kind: True
        real_all = builtins.all
        builtins.all = any
        builtins.kf_added = len
        # A method added to torch.Tensor shadows the C one for every tensor.
        torch.Tensor.reshape = torch.Tensor.clone
        try:
            self.assertEqual(sorted(guards.replaced(captured)),
                             ["builtins.all", "builtins.kf_added (added)",
                              "kforge_harness.timing._clone",
                              "kforge_harness.timing.isinstance (added)",
                              "torch.Tensor.reshape (added)"])
        finally:
            timing._clone, builtins.all = real_clone, real_all
            del timing.isinstance, builtins.kf_added, torch.Tensor.reshape
        self.assertEqual(guards.replaced(captured), [])
        # What a module gains by itself is not the candidate's: the warnings
        # module's registry of the module's warnings, the slot names copyreg
        # caches on a class whose instance was copied.
        timing.__warningregistry__ = {}
        copy.copy(timing.Budget({}))
        try:
            self.assertEqual(guards.replaced(captured), [])
        finally:
            del timing.__warningregistry__

    def test_a_callable_module_is_no_submodule_imported_since(self):
        # A module subclass can be called like a function: one named as a
        # submodule would be, added to a harness module or the builtins.
        class Shadow(types.ModuleType):
            def __call__(self, value, kind):
                return True

        captured = guards.capture()
        timing.isinstance = Shadow("kforge_harness.timing.isinstance")
        builtins.kf_shadow = Shadow("builtins.kf_shadow")
        try:
            self.assertEqual(sorted(guards.replaced(captured)),
                             ["builtins.kf_shadow (added)",
                              "kforge_harness.timing.isinstance (added)"])
        finally:
            del timing.isinstance, builtins.kf_shadow

    def test_replacing_the_check_is_seen_by_the_check_bound_before(self):
        captured = guards.capture()
        check = guards.replaced
        guards.replaced = lambda c: []
        try:
            self.assertEqual(check(captured), ["kforge_harness.guards.replaced"])
        finally:
            guards.replaced = check


class OwnAttributesTest(unittest.TestCase):
    """A tensor's own attributes shadow its methods for it alone (round 14:
    an empty output whose own clone and numel computed it after the clock).
    The harness reads none of a candidate's tensors that carries any."""

    def test_an_output_with_attributes_of_its_own_is_refused_before_any_method_runs(self):
        runner = candidate_runner.Runner(None, {"device": "cpu"})
        out = torch.zeros(4)
        calls = []
        out.clone = functools.partial(calls.append, "clone")
        with self.assertRaises(candidate_runner.CandidateError) as caught:
            runner._checked_outputs([out])
        self.assertEqual(caught.exception.flag, "HACK_OUTPUT_NOT_PLAIN_TENSOR")
        self.assertIn("attributes of its own (clone)", str(caught.exception))
        self.assertEqual(calls, [])
        runner._checked_outputs([torch.zeros(4)])  # as torch makes it: fine

    def test_an_output_holding_an_object_in_a_c_slot_is_refused(self):
        # Round 17: not in __dict__, so vars() is empty; the slot keeps any
        # object (one whose __del__ ran in the harness's frames) alive.
        runner = candidate_runner.Runner(None, {"device": "cpu"})
        out = torch.zeros(4)
        out._backward_hooks = {0: object()}
        with self.assertRaises(candidate_runner.CandidateError) as caught:
            runner._checked_outputs([out])
        self.assertEqual(caught.exception.flag, "HACK_OUTPUT_NOT_PLAIN_TENSOR")
        self.assertIn("(_backward_hooks)", str(caught.exception))

    def test_an_output_viewing_a_tensor_with_attributes_of_its_own_is_refused(self):
        # Round 18: a view keeps its base's Python object alive, with what
        # the base holds (an object whose __del__ ran in the harness's frames).
        runner = candidate_runner.Runner(None, {"device": "cpu"})
        base = torch.zeros(4)
        base.keep = object()
        with self.assertRaises(candidate_runner.CandidateError) as caught:
            runner._checked_outputs([base.view(2, 2)])
        self.assertEqual(caught.exception.flag, "HACK_OUTPUT_NOT_PLAIN_TENSOR")
        self.assertIn("its base's keep", str(caught.exception))
        runner._checked_outputs([torch.zeros(4).view(2, 2)])  # a plain view: fine

    def test_an_output_with_a_frameless_weak_reference_callback_is_refused(self):
        # Round 19: the callback runs where the harness drops the output,
        # with no frame of the candidate's; a Python function's is judged.
        import weakref
        runner = candidate_runner.Runner(None, {"device": "cpu"})
        out = torch.zeros(4)
        ref = weakref.ref(out, functools.partial(print, "in the harness's frames"))
        with self.assertRaises(candidate_runner.CandidateError) as caught:
            runner._checked_outputs([out])
        self.assertEqual(caught.exception.flag, "HACK_OUTPUT_NOT_PLAIN_TENSOR")
        self.assertIn("a weak reference's callback (functools.partial)", str(caught.exception))
        del ref
        plain = torch.zeros(4)
        kept = weakref.ref(plain, lambda r: None)  # noqa: F841 - a frame of its own: fine
        runner._checked_outputs([plain])

    def test_an_input_given_attributes_of_its_own_is_a_mutation(self):
        # Its own eq would say it still equals its set, in place changes and all.
        before = torch.randn(4)
        after = before.clone().clamp_(min=0.0)
        after.eq = functools.partial(torch.ones_like, dtype=torch.bool)
        after.is_floating_point = bool
        with self.assertRaises(candidate_runner.CandidateError) as caught:
            candidate_runner.Runner._check_unchanged([after], [before], "a timed call")
        self.assertEqual(caught.exception.flag, "HACK_INPUT_MUTATION")
        self.assertIn("attributes of its own (eq, is_floating_point)", str(caught.exception))


class ModesTest(unittest.TestCase):
    """A mode on torch's stacks sees every torch call on plain tensors, the
    harness's on the candidate's outputs after the clock included (round
    15: torch's own FakeCopyMode ran the matmul in the harness's copy)."""

    def test_a_mode_left_on_the_stack_is_refused_before_the_outputs_are_touched(self):
        runner = candidate_runner.Runner(None, {"device": "cpu"})
        captured = guards.capture()
        seen = []

        class Watching(torch.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                seen.append(func)
                return func(*args, **(kwargs or {}))

        out = torch.zeros(4)
        mode = Watching()
        mode.__enter__()
        try:
            with self.assertRaises(candidate_runner.CandidateError) as caught:
                runner._checked_outputs([out])
            self.assertIn("1 torch function modes", str(caught.exception))
            self.assertEqual(guards.replaced(captured),
                             ["torch's torch function modes setting (0 -> 1)"])
        finally:
            mode.__exit__(None, None, None)
        self.assertEqual(caught.exception.flag, "HACK_TENSOR_SUBCLASS")
        self.assertEqual(seen, [])  # nothing of torch's ran on the output first
        self.assertEqual(guards.replaced(captured), [])
        runner._checked_outputs([out])

    def test_the_python_dispatcher_switched_on_is_refused_likewise(self):
        # Round 16: on, it runs the Python kernels registered on an operator
        # (a red team's on aten::clone ran the matmul in the harness's copy).
        runner = candidate_runner.Runner(None, {"device": "cpu"})
        captured = guards.capture()
        switch = torch._C._EnablePythonDispatcher()
        try:
            with self.assertRaises(candidate_runner.CandidateError) as caught:
                runner._checked_outputs([torch.zeros(4)])
            self.assertIn("Python dispatch keys", str(caught.exception))
            self.assertEqual(guards.replaced(captured),
                             ["torch's Python dispatch keys setting (False -> True)"])
        finally:
            del switch
        self.assertEqual(guards.replaced(captured), [])
        runner._checked_outputs([torch.zeros(4)])


class ServeTest(unittest.TestCase):
    """The last look before a reply: a candidate that replaced the timer
    and the check at import still gets HACK_PATCHED_FUNCTION."""

    def test_a_reply_after_the_harness_was_patched_is_a_failure(self):
        ours, theirs = socket.socketpair()
        runner = candidate_runner.Runner(theirs, {"device": "cpu"})
        runner.guarded = guards.capture()
        real_one, real_replaced = timing.Timer.one, guards.replaced
        cwd = os.getcwd()
        os.chdir(tempfile.mkdtemp(prefix="kf-serve-test-"))
        server = threading.Thread(target=runner.serve, name="kf-test-serve")
        server.start()
        try:
            packer = protocol.TensorPacker()
            packer.add("tiny/in0", torch.randn(4, 8))
            payload = b"".join(bytes(p) for p in packer.payload())
            protocol.send_frame(ours, {"type": "compile", "source": PATCHES_THE_HARNESS,
                                       "init_inputs": [], "init_seed": 1, "set": "tiny",
                                       "tensors": packer.entries}, payload)
            reply, _ = protocol.recv_frame(ours)
            protocol.send_frame(ours, {"type": "exit"})
            server.join(30)
        finally:
            timing.Timer.one, guards.replaced = real_one, real_replaced
            runner.window.disarm()
            os.chdir(cwd)
            ours.close()
            theirs.close()
        self.assertFalse(server.is_alive())
        self.assertEqual(reply["type"], "failed", reply)
        self.assertEqual(reply["flag"], "HACK_PATCHED_FUNCTION", reply)
        self.assertIn("Timer.one", reply["message"])
        self.assertIn("guards.replaced", reply["message"])


if __name__ == "__main__":
    unittest.main()
