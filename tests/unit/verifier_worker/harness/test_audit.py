"""The audit hook (kforge_harness/audit.py): what the candidate's code asks
of the interpreter, judged by who asks. Each case runs in a fresh
interpreter, since an audit hook, once added, cannot be removed."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HARNESS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..",
                           "verifier_worker", "harness")

# Runs `CANDIDATE` as the harness runs a candidate's module: the hook
# installed first, the candidate's file named, then its code executed; each
# probe function it defines is called and reported (ok, or the error).
DRIVER = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, sys.argv[1])
    from kforge_harness import audit
    work = sys.argv[2]
    path = os.path.join(work, "candidate.py")
    with open(path) as f:
        source = f.read()
    hook = audit.Audit(os.path.join(sys.argv[1], "kforge_harness"))
    hook.install()
    hook.set_candidate(path)
    # Modules the candidate may not import, handed to it as other spellings
    # (a value held by a library, a parameter) would: the probes judge what
    # it asks of them.
    import ctypes, inspect, threading, torch.fx
    from kforge_harness import call_window
    scope = {"__name__": "candidate", "SYS": sys, "INSPECT": inspect, "CTYPES": ctypes,
             "FX": torch.fx, "ORIGINAL_SETTRACE": call_window._settrace,
             "THREADING": threading}
    from torch.ao.quantization.utils import getattr_from_fqn
    scope["FQN"] = getattr_from_fqn
    exec(compile(source, path, "exec"), scope)
    results = {}
    window = call_window.CallWindow()  # not armed: its call frame, no trace hook
    for name, probe in list(scope.items()):
        if name.startswith("probe_"):
            try:
                # probe_in_window_*: called as the harness calls the
                # candidate's model, through the call window's frame.
                window.call(probe) if name.startswith("probe_in_window_") else probe()
                results[name] = "ok"
            except Exception as e:
                results[name] = f"{type(e).__name__}: {e}"
    print(json.dumps({"results": results, "seen": hook.offenders()}))
""")

CANDIDATE = textwrap.dedent('''
    import collections
    import dataclasses
    import enum
    import functools
    import types
    import typing
    import warnings

    import torch


    Pair = collections.namedtuple("Pair", "a b")
    Color = enum.Enum("Color", "RED GREEN")
    T = typing.TypeVar("T")


    def probe_libraries_that_make_code_or_look_at_frames():
        Pair(1, 2)
        warnings.warn("a candidate may warn")
        functools.lru_cache(maxsize=4)(lambda n: n)(1)
        torch.zeros(2).add_(1)


    def probe_a_dataclass_whose_field_name_is_code():
        # @dataclass pastes annotation names into the text it compiles.
        name = "x=0,**k):pass\\ndef __create_fn__(**k):#"
        dataclasses.dataclass(type("K", (), {"__annotations__": {name: int},
                                             name: dataclasses.field(init=False)}))


    def probe_code_compiled_by_typing():
        typing.Optional["__import__('os')"]


    def _gen():
        yield 1


    def probe_a_function_made_of_a_code_object():
        types.FunctionType(_gen().gi_code, {})


    def probe_a_functions_code_replaced():
        def f():
            return 1
        f.__code__ = probe_libraries_that_make_code_or_look_at_frames.__code__


    def _module(m):
        return m


    def probe_a_class_claiming_another_modules_name():
        # dataclasses._is_type looks sys.modules up by a class's __module__:
        # a red team's claim of "kforge_harness.timing" read the timer's clock.
        K = type("K", (), {})
        type.__setattr__(K, "__mod" + "ule__", "kforge_harness.timing")


    def probe_classes_made_by_the_standard_library_name_the_candidate():
        collections.namedtuple("Point", "x y")(1, 2)
        enum.Enum("Shade", "DARK LIGHT")
        K = type("K", (), {})
        K.__module__ = "candidate"


    def probe_sys_reached_as_a_value():
        _module(torch).sys._getframe()


    def probe_a_shell_through_a_library():
        import torch.utils.collect_env as env
        env.run("true")


    def probe_a_frame_handed_back_by_the_standard_library():
        INSPECT.currentframe()


    def probe_native_code_through_ctypes():
        CTYPES.CDLL(None)


    def probe_an_operator_kernel_registered():
        torch.library.Library("aten", "IMPL").impl("clone", torch.Tensor.detach, "CPU")


    def probe_code_a_library_compiles_for_the_candidate():
        graph = FX.Graph()
        graph.output(graph.placeholder("x"))
        FX.GraphModule(torch.nn.Module(), graph)


    def probe_the_operator_library_opened_directly():
        torch._C._dispatch_library("IMPL", "aten", "", "candidate.py", 1)


    def probe_a_trace_function_handed_every_frame():
        SYS.settrace(lambda frame, event, arg: None)
        SYS.settrace(None)


    def probe_a_trace_function_for_threads_to_come():
        # threading's setters raise no audit event: their wrappers judge.
        THREADING.settrace(lambda frame, event, arg: None)
        THREADING.settrace(None)


    def probe_a_profile_function_for_threads_to_come():
        THREADING.setprofile(lambda frame, event, arg: None)
        THREADING.setprofile(None)


    def probe_the_original_settrace_called():
        # The C function the call window keeps, past the wrapper on sys.
        ORIGINAL_SETTRACE(lambda frame, event, arg: None)
        ORIGINAL_SETTRACE(None)


    def probe_getattr_of_a_denied_name():
        getattr(len, "__se" + "lf__")


    def probe_a_library_reading_a_denied_name_for_the_candidate():
        class Sink:
            pass
        functools.update_wrapper(Sink(), len, assigned=("__se" + "lf__",), updated=())


    def probe_a_private_torch_module_read_by_the_standard_library():
        # Round 15: torch._subclasses (for FakeCopyMode), from functools' frame.
        class Sink:
            pass
        functools.update_wrapper(Sink(), torch, assigned=("_subcl" + "asses",), updated=())


    def probe_a_tensor_method_denied_by_name_read_by_the_standard_library():
        class Sink:
            pass
        functools.update_wrapper(Sink(), torch.Tensor, assigned=("se" + "t_",), updated=())


    def probe_a_denied_torch_setter_read_by_the_standard_library():
        class Sink:
            pass
        functools.update_wrapper(Sink(), torch, assigned=("set_num_" + "threads",), updated=())


    def probe_a_denied_name_read_by_a_library_for_the_candidate():
        # Round 16: torch's getattr_from_fqn reduces getattr over a dotted
        # string from torch's own frame.
        FQN(torch, "_C._EnablePython" + "Dispatcher")


    def probe_a_library_reading_a_modules_dict_for_the_candidate():
        class Catch:
            def update(self, d):
                pass
        class Sink:
            __slots__ = ()
            def __getattr__(self, name):
                return Catch()
            def __setattr__(self, name, value):
                pass
        functools.update_wrapper(Sink(), torch, assigned=(), updated=("__di" + "ct__",))


    def probe_a_decorator_made_with_wraps():
        def deco(f):
            @functools.wraps(f)
            def inner(*a):
                return f(*a)
            return inner
        deco(lambda v: v)(1)


    def probe_an_allowed_module_imported_at_run_time():
        __import__("math").sqrt(4.0)


    def probe_a_storage_made_from_an_address():
        torch.UntypedStorage._new_with_weak_ptr(0)


    def probe_a_storage_shrunk_under_its_tensor():
        x = torch.zeros(64)
        x.storage().resize_(1)


    def probe_the_process_memory_opened():
        open("/proc/self/mem", "rb")


    def probe_a_file_opened():
        open("/etc/hostname")


    class Sink:
        pass


    # Called by the driver with no frame of the candidate's between: who
    # asks is not on the stack (round 17: such a partial, set as a class's
    # __del__, ran in the harness's frames). The harness's guard is the
    # harness's; the original method, which torch made, is not.
    probe_a_harness_closure_read_with_no_frame_of_the_candidates = functools.partial(
        functools.update_wrapper, Sink(), torch.UntypedStorage.resize_,
        ("__clo" + "sure__",), ())
    probe_a_library_functions_globals_read_with_no_frame_of_the_candidates = functools.partial(
        functools.update_wrapper, Sink(), functools.wraps, ("__glo" + "bals__",), ())


    # Round 17 again: inside the harness's call of the candidate's code, a
    # library's frames with no frame of the candidate's before the call
    # window's are the candidate's (torch calling its hook, a partial).
    probe_in_window_a_denied_name_read_with_no_frame_of_the_candidates = functools.partial(
        functools.update_wrapper, Sink(), torch, ("s" + "ys",), ())
    probe_a_denied_name_read_for_the_harness_outside_a_call = functools.partial(
        functools.update_wrapper, Sink(), torch, ("s" + "ys",), ())


    # Round 18: a frame handed over under functools' frame (a property
    # getter that is a frameless chain, read by update_wrapper): functools
    # reads no frame for its own ends.
    class Framed:
        pass


    Framed.here = property(functools.partial(next, map(SYS._getframe, [0, 0])))


    def probe_a_frame_handed_over_under_a_standard_library_frame():
        functools.update_wrapper(Sink(), Framed(), ("here",), ())


    def probe_a_frame_read_off_a_traceback_by_the_standard_library():
        # Round 21: traceback.walk_tb read tb_frame for the candidate (an
        # exception kept by an exit callback), then f_back led up the stack.
        import traceback
        try:
            raise ValueError("kept")
        except ValueError as e:
            kept = e.__traceback__
        list(traceback.walk_tb(kept))


    def probe_a_warning_that_shows_its_line():
        # linecache reads the candidate's own source for the warning's line.
        warnings.warn("shown with its line", RuntimeWarning)
''')


# The wrappers the audit installs on objects any code reaches (builtins,
# torch's storages and operator library, threading): what their closures
# hold. Round 17 read the old ones' (the live Audit, then switched it off).
WRAPPERS = textwrap.dedent("""
    import builtins, json, sys, threading
    sys.path.insert(0, sys.argv[1])
    import torch
    from kforge_harness import audit
    hook = audit.Audit(sys.argv[2])
    hook.install()
    wrappers = {"builtins.getattr": builtins.getattr,
                "UntypedStorage.resize_": torch.UntypedStorage.resize_,
                "threading.settrace": threading.settrace,
                "torch._C._dispatch_library": torch._C._dispatch_library}
    held = {}
    for name, wrapper in wrappers.items():
        function = getattr(wrapper, "__func__", wrapper)
        cells = [c.cell_contents for c in (function.__closure__ or ())]
        held[name] = sorted(type(c).__name__ for c in cells
                            if not isinstance(c, (str, frozenset, type(len), type(lambda: 0))))
    print(json.dumps(held))
""")


class AuditTest(unittest.TestCase):
    def test_the_wrappers_it_installs_hold_none_of_its_state(self):
        run = subprocess.run([sys.executable, "-c", WRAPPERS, HARNESS_DIR,
                              os.path.join(HARNESS_DIR, "kforge_harness")],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        held = json.loads(run.stdout.strip().splitlines()[-1])
        self.assertEqual(set(held), {"builtins.getattr", "UntypedStorage.resize_",
                                     "threading.settrace", "torch._C._dispatch_library"})
        for name, kinds in held.items():
            with self.subTest(name):
                # Strings, built-ins, classes and the wrapped original only:
                # no Audit, no container a refusal could be dropped from.
                self.assertNotIn("Audit", kinds, held)
                self.assertLessEqual(set(kinds), {"type", "method_descriptor",
                                                  "wrapper_descriptor"}, held)

    def test_judged_by_who_asks(self):
        work = tempfile.mkdtemp(prefix="kf-audit-test-")
        with open(os.path.join(work, "candidate.py"), "w") as f:
            f.write(CANDIDATE)
        run = subprocess.run([sys.executable, "-c", DRIVER, HARNESS_DIR, work],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        report = json.loads(run.stdout.strip().splitlines()[-1])
        results = report["results"]
        self.assertEqual(results["probe_libraries_that_make_code_or_look_at_frames"], "ok",
                         report)
        for refused in ("probe_code_compiled_by_typing", "probe_a_function_made_of_a_code_object",
                        "probe_a_functions_code_replaced", "probe_sys_reached_as_a_value",
                        "probe_a_shell_through_a_library",
                        "probe_a_frame_handed_back_by_the_standard_library",
                        "probe_native_code_through_ctypes",
                        "probe_an_operator_kernel_registered",
                        "probe_the_operator_library_opened_directly",
                        "probe_code_a_library_compiles_for_the_candidate",
                        "probe_a_dataclass_whose_field_name_is_code",
                        "probe_a_trace_function_handed_every_frame",
                        "probe_a_trace_function_for_threads_to_come",
                        "probe_a_profile_function_for_threads_to_come",
                        "probe_a_storage_made_from_an_address",
                        "probe_a_storage_shrunk_under_its_tensor",
                        "probe_the_process_memory_opened", "probe_a_file_opened",
                        "probe_the_original_settrace_called", "probe_getattr_of_a_denied_name",
                        "probe_a_library_reading_a_denied_name_for_the_candidate",
                        "probe_a_private_torch_module_read_by_the_standard_library",
                        "probe_a_tensor_method_denied_by_name_read_by_the_standard_library",
                        "probe_a_denied_torch_setter_read_by_the_standard_library",
                        "probe_a_denied_name_read_by_a_library_for_the_candidate",
                        "probe_a_library_reading_a_modules_dict_for_the_candidate",
                        "probe_a_harness_closure_read_with_no_frame_of_the_candidates",
                        "probe_in_window_a_denied_name_read_with_no_frame_of_the_candidates",
                        "probe_a_frame_handed_over_under_a_standard_library_frame",
                        "probe_a_frame_read_off_a_traceback_by_the_standard_library",
                        "probe_a_class_claiming_another_modules_name"):
            with self.subTest(refused):
                self.assertTrue(results[refused].startswith("RuntimeError: kforge sandbox"),
                                results[refused])
        self.assertIn("torch.library", results["probe_the_operator_library_opened_directly"])
        self.assertIn("/proc/self/mem", results["probe_the_process_memory_opened"])
        self.assertEqual(results["probe_a_warning_that_shows_its_line"], "ok", report)
        self.assertEqual(results["probe_an_allowed_module_imported_at_run_time"], "ok", report)
        self.assertEqual(results["probe_a_decorator_made_with_wraps"], "ok", report)
        self.assertEqual(results["probe_classes_made_by_the_standard_library_name_the_candidate"],
                         "ok", report)
        self.assertIn("kforge_harness.timing",
                      results["probe_a_class_claiming_another_modules_name"])
        self.assertIn("of the harness's function",
                      results["probe_a_harness_closure_read_with_no_frame_of_the_candidates"])
        self.assertEqual(
            results["probe_a_library_functions_globals_read_with_no_frame_of_the_candidates"],
            "ok", report)
        # The same read outside a call: the harness's own business.
        self.assertEqual(results["probe_a_denied_name_read_for_the_harness_outside_a_call"],
                         "ok", report)


        flags = [flag for flag, _ in report["seen"]]
        self.assertIn("HACK_SUBPROCESS", flags)
        self.assertIn("HACK_INTROSPECTION", flags)
        self.assertTrue(all("candidate.py:" in message for _, message in report["seen"]),
                        report["seen"])


if __name__ == "__main__":
    unittest.main()
