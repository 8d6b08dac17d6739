"""What the candidate's code may ask of the interpreter, as a run-time fact:
a Python audit hook (PEP 578), installed before the candidate loads and, by
design, impossible to remove. The static check reads names; a red team kept
finding spellings it could not read (a module passed as an argument, code
compiled by typing.ForwardRef, a function's code swapped in place) and then
reached the harness's timer, its output unpacking or a shell. Whatever the
spelling, those routes end in a few interpreter events, and each event is
judged by who asked for it, read off the stack when it happens:

  - new code: compile, exec, eval, code objects and functions made from
    them, a function's __code__ or defaults replaced. Refused when the
    nearest frame outside the standard library is the candidate's (the
    candidate called typing, which compiled its string). Imports, and the
    code generator of namedtuple, are left alone; Triton
    and torch making code of their own are theirs.
  - the interpreter's insides: frames (sys._getframe, sys._current_frames),
    generator and traceback frames and code, the garbage collector's object
    lists, ctypes.
    Refused when the candidate's own frame asks, or the standard library
    asks for it (inspect.currentframe, ctypes.CDLL): judged by the nearest
    frame past it. The modules that read a frame for their own ends and
    hand none back (warnings, namedtuple, enum, typing) are theirs.
  - files: the candidate's own code opening one (its own source aside),
    or anyone past the libraries opening a process's memory (/proc/*/mem).
  - trace and profile functions (sys.settrace, which hands over every
    frame), by their audit event.
  - what no event reports, refused by wrappers installed before the
    candidate loads (_guard): torch's operator library (torch.library),
    threading's trace setters, getattr of a denied name, and torch
    storages over raw addresses (_new_with_weak_ptr, _set_cdata, resize_
    under a live view).
  - processes: os.system, exec*, spawn*, posix_spawn, fork, subprocess.
    Allowed only from Triton's frames (ptxas, the C compiler of its
    launchers) and the harness's: a library the candidate calls has no
    reason to start programs (torch.utils.collect_env.run ran a shell).

A refused event raises in the candidate's code and is kept: the runner
fails the candidate (HACK_INTROSPECTION, or HACK_SUBPROCESS for processes)
at its next look, whatever the candidate did with the exception.

    audit = Audit(harness_dir, triton_dir)
    audit.install()                    # before the guarded functions are captured
    audit.set_candidate("/w/candidate.py")   # from here on, events are judged
    audit.offenders()                  # [("HACK_SUBPROCESS", "subprocess.Popen asked by ...")]
"""

import os
import re
import sys
import sysconfig
import types
from _thread import get_ident as _get_ident

from . import call_window, thread_watch

_getframe = sys._getframe
_ModuleType = type(sys)
# Objects whose code says whose they are.
_CODE_OF = {types.FunctionType: lambda f: f.__code__, types.CodeType: lambda c: c,
            types.FrameType: lambda f: f.f_code, types.GeneratorType: lambda g: g.gi_code,
            types.CoroutineType: lambda c: c.cr_code,
            types.AsyncGeneratorType: lambda a: a.ag_code}
_HARNESS_PACKAGE = __name__.rpartition(".")[0] + "."
_WINDOW_CALL = call_window.CallWindow.call.__code__
_addaudithook = sys.addaudithook

NEW_CODE = frozenset(["compile", "exec", "code.__new__", "function.__new__"])
# A trace or profile function is handed every frame that runs, the
# harness's callers included. Judged by the event, whatever function object
# raised it: a red team called the original sys.settrace that the call
# window keeps (reached through functools.cached_property reading a
# module's __builtins__, then getattr) past the wrapper on sys.settrace.
# The call window sets its hook twice a call: its frame is the harness's,
# one memoised look.
TRACING = frozenset(["sys.settrace", "sys.setprofile"])
INSIDES = frozenset(["sys._getframe", "sys._current_frames", "gc.get_objects",
                     "gc.get_referrers", "gc.get_referents", "object.__getattr__", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata",
                     "ctypes.addressof", "ctypes.call_function", "ctypes.string_at",
                     "ctypes.wstring_at", "ctypes.create_string_buffer"])
# Of those, what hands the asker a frame, the heap or native code: judged
# past a standard-library asker too. (An attribute read, object.__getattr__,
# is the reader's: inspect.signature reads __code__ for dataclasses; but not
# the attributes that hold a frame: traceback.walk_tb read a red team's
# tb_frame for it, then f_back led to the timer's locals, 3.9x.)
HANDED_OVER = INSIDES - {"object.__getattr__"}
FRAME_ATTRIBUTES = frozenset(["tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"])
PROCESSES = frozenset(["os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork",
                       "os.forkpty", "subprocess.Popen", "pty.spawn", "os.startfile"])
# Attributes whose replacement swaps a function's behaviour in place.
FUNCTION_STATE = frozenset(["__code__", "__defaults__", "__kwdefaults__", "__globals__"])
# The harness's own events, raised by the wrappers it installs: getattr of
# a denied name (obj, name), a guarded method called (flag, why).
GETATTR, GUARDED = "kforge.getattr", "kforge.guarded"
WATCHED = NEW_CODE | INSIDES | PROCESSES | TRACING | {"object.__setattr__", "open", GETATTR,
                                                      GUARDED}
# Attribute names that hand over the interpreter (builtins, frames, every
# module, the heap): no standard-library function reads them on a caller's
# behalf but to hand them over.
_PIVOTS = frozenset("""__self__ __globals__ __builtins__ __closure__ __subclasses__ __getstate__ f_back
    f_locals f_globals f_builtins tb_frame gi_frame cr_frame ag_frame sys modules gc builtins
    __import__ getattr setattr _getframe __getattribute__""".split())
# (__getattribute__: object's and type's are a getattr in C, past this
# module's guard: a red team's update_wrapper(assigned=("__getattribute__",))
# of object, read from functools' frame, then read any closure.)
# A process's memory as a file: a red team read (and opened for writing)
# its own through builtins.open, reached by len.__self__.
_PROCESS_MEMORY = re.compile(r"^/(proc/.+/mem|dev/k?mem)$")

# Standard-library modules that make code from checked identifiers, never
# from text a caller chose: their compile and exec are theirs. namedtuple
# checks every name it pastes. Not dataclasses: @dataclass pastes each
# annotation's name into the text it compiles unchecked, and a red team's
# field name closed the generated signature and defined functions of its
# own (the timer's samples divided by 5, a root shell), run as generated
# code under the harness; a candidate's @dataclass is refused.
_CODE_GENERATORS = (os.path.join("collections", "__init__.py"),)
_MAX_SEEN = 24
# Kinds of frame that act for whoever called them.
_ON_BEHALF = ("stdlib", "generated", "library")
# Standard-library functions that read a caller's frame for their own ends
# (its module's name, a warning's location) and hand no frame back: exempt
# at their own calls of sys._getframe only. A red team's property getter, a
# frameless chain (partial(next, map(sys._getframe, [1]))), ran under
# functools.update_wrapper's frame, which a whole-file exemption let hand
# it forward's frame.
_FRAME_READERS = {(os.path.join(*parts[:-1]), parts[-1]) for parts in (
    ("collections", "__init__.py", "namedtuple"), ("enum.py", "_create_"),
    ("typing.py", "_caller"), ("warnings.py", "warn"))}


def _stdlib_dirs():
    dirs = set()
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.realpath(path) + os.sep)
    return tuple(sorted(dirs))


class Audit:
    def __init__(self, harness_dir, triton_dir=""):
        self.harness_dir = os.path.realpath(harness_dir) + os.sep
        self.triton_dir = os.path.realpath(triton_dir) + os.sep if triton_dir else ""
        self.stdlib_dirs = _stdlib_dirs()
        self.candidate_file = None
        self.seen = []
        # The threads judging an event now (_getframe is audited too): one
        # set for all, each thread's own entry. One flag for all let a
        # warm-up thread's Triton compile, judged while the reply went out,
        # read as a candidate's switch (2x H200: one honest SELU refused,
        # then served from the cache 209 times), and left the other threads'
        # events unjudged meanwhile.
        self._inside = set()
        self._kinds = {}  # co_filename -> kind, memoised
        self._asking_lines = {}  # (code, event) -> its lines that call the event's function
        self._module_rules = {}  # (module name, attribute) -> denied as a dotted name?
        from . import static_policy
        self._denied = frozenset(static_policy.DENIED_ATTRS)

    def install(self):
        _addaudithook(self._hook)
        self._guard_operator_library()
        self._guard_tracing()
        self._guard_raw_storages()
        self._guard_getattr()

    def _guard(self, owner, name, flag, why):
        """Replaces owner.name by a wrapper that refuses it (raises, and
        keeps the refusal) when the nearest frame outside the standard
        library, generated code and the libraries is the candidate's: for
        what no audit event reports. Nothing when owner has no such name."""
        original = getattr(owner, name, None)
        if original is None:
            return
        raise_event = sys.audit

        # Judged in the hook (GUARDED): the wrapper, which any code reaches
        # on torch's or threading's objects, closes over no state of the
        # audit's (a red team read the old one's closure: the live Audit).
        def guarded(*args, **kwargs):
            raise_event(GUARDED, flag, why)
            return original(*args, **kwargs)

        guarded.__name__ = getattr(original, "__name__", name)
        # On a class, a method of the class (original is bound to it) stays
        # one whether reached through the class or an instance; an
        # instance's method binds its instance as before.
        raw = next((vars(k)[name] for k in getattr(owner, "__mro__", ()) if name in vars(k)),
                   None)
        if raw is not None and (isinstance(raw, (classmethod, staticmethod))
                                or type(raw).__name__ == "classmethod_descriptor"):
            guarded = staticmethod(guarded)
        setattr(owner, name, guarded)

    def _guard_operator_library(self):
        """torch's operator library (torch.library.Library, over
        torch._C._dispatch_library) replaces an ATen operator's kernel for
        the whole process, the harness's own calls included, and no audit
        event says so: a red team registered Tensor.detach as aten::clone's
        CPU kernel, so every copy the harness made of an input aliased it
        and the input check compared a tensor with itself (3.9x over eager
        for a plain ReLU). Refused to the candidate; torch registering its
        own (on a lazy import) goes through."""
        try:
            import torch
        except ImportError:
            return
        self._guard(torch._C, "_dispatch_library", "HACK_MONKEYPATCH",
                    "torch.library registers kernels for torch's operators, the harness's own "
                    "included")

    def _guard_tracing(self):
        """A trace or profile function is handed every frame that runs, the
        harness's callers included: a red team set one inside forward (sys
        reached through len.__self__) and walked from its own frame up to
        the timer's and the runner's locals. sys's setters raise an audit
        event, judged whatever function object raised it (TRACING);
        threading's set the hook of threads still to start, with none."""
        import threading
        for name in ("settrace", "setprofile", "settrace_all_threads", "setprofile_all_threads"):
            self._guard(threading, name, "HACK_INTROSPECTION",
                        f"threading.{name} hands a function every frame that runs, the "
                        "harness's included")

    def _guard_getattr(self):
        """getattr with a string is every attribute the static check denies
        by name, and the standard library calls it with strings it is
        handed (functools.update_wrapper's `assigned`: a red team's
        len.__self__). The built-in is replaced by one that raises an audit
        event (GETATTR) for a denied name, or any name of a module, judged
        in the hook (_judge_getattr); it closes over no state of the
        audit's."""
        import builtins
        denied = self._denied  # a frozenset: no state of the audit's
        original, raise_event, module_type = builtins.getattr, sys.audit, _ModuleType
        _isinstance = isinstance

        def guarded_getattr(obj, name, *default):
            if name in denied or _isinstance(obj, module_type):
                raise_event(GETATTR, obj, name)
            return original(obj, name, *default)

        builtins.getattr = guarded_getattr

    def _module_rule(self, obj, name):
        """Whether module.name is what the static check denies as a dotted
        name (DENIED, or private below the module): torch._C,
        torch._subclasses, torch.overrides, torch.set_num_threads."""
        from . import static_module
        module = vars(obj).get("__name__")
        if not isinstance(module, str) or not isinstance(name, str):
            return False
        key = (module, name)
        rule = self._module_rules.get(key)
        if rule is None:
            rule = self._module_rules[key] = (
                static_module._denied_as_spelled(f"{module}.{name}") is not None)
        return rule

    def _judge_getattr(self, obj, name, frame):
        """(flag, why) when getattr(obj, name), asked by `frame`, is refused.
        A module's or a class's __dict__ is its globals or its methods: a
        pivot too (functools.update_wrapper with updated=("__dict__",)
        handed a red team torch's globals); a function's, which
        functools.wraps reads, is not. A name that is not a dunder (set_,
        storage, a module's denied or private member) is the candidate's
        whoever reads it on its behalf: functools.update_wrapper(assigned=
        (name,)) read a red team torch._subclasses and Tensor.set_ from
        functools' frame. Dunders the standard library reads for its own
        ends (enum and copy read __reduce_ex__, inspect __wrapped__) are
        judged by who asks."""
        if not (name in self._denied or (isinstance(obj, _ModuleType)
                                         and self._module_rule(obj, name))):
            return None
        dunder = isinstance(name, str) and name.startswith("__") and name.endswith("__")
        pivot = (name in _PIVOTS or not dunder
                 or (name == "__dict__" and isinstance(obj, (_ModuleType, type))))
        # Whose is it: past the standard library, generated code and
        # libraries (torch.ao's getattr_from_fqn reduces getattr over a
        # dotted string for whoever calls it: a red team's __closure__ of
        # this function, then the live Audit).
        kind = self._nearest(frame, _ON_BEHALF) if pivot else self._kind(frame.f_code.co_filename)
        if kind == "candidate":
            # Raised (by the hook): not an AttributeError, which a
            # library's getattr with a fallback would swallow.
            return ("HACK_INTROSPECTION", f"getattr(..., {name!r}) reaches what the static "
                    "check denies by name")
        # The harness's own objects, whoever asks but the harness: who
        # asked is not always on the stack. A red team's functools.partial(
        # update_wrapper, ...) set as a class's __del__ ran with no frame of
        # its own in the harness's frames, read the __closure__ of the guard
        # on UntypedStorage.resize_ and held the live Audit (2.47x).
        if (pivot and self.harness_owned(obj)
                and self._kind(frame.f_code.co_filename) != "harness"):
            return ("HACK_INTROSPECTION", f"getattr(..., {name!r}) of the harness's "
                    f"{type(obj).__name__}, read on behalf of code that is not the harness's")
        return None

    def _guard_raw_storages(self):
        """torch's storages reach raw memory by methods no audit event
        reports: a storage made from any address (_new_with_weak_ptr, of a
        StorageImpl a red team forged in a bytes object: the whole address
        space as one tensor), one repointed (_set_cdata), and a storage
        shrunk under the tensors that view it (resize_: a clone of such a
        tensor read 32 KiB past the end of its block). The static check
        denies the names; these refuse them at run time, however spelled,
        on the storage classes candidates reach."""
        try:
            import torch
        except ImportError:
            return
        from . import static_policy
        for owner in (getattr(torch, "UntypedStorage", None), getattr(torch, "TypedStorage", None)):
            if owner is None:
                continue
            for name in (static_policy.RAW_STORAGE_ADDRESS_METHODS
                         + static_policy.RAW_STORAGE_FILE_METHODS + ("resize_",)):
                self._guard(owner, name, "HACK_INTROSPECTION",
                            f"{owner.__name__}.{name} reaches memory outside the storage's own")

    def _keep(self, flag, what, frame):
        """Keeps a refusal (the first few) for the runner; its message,
        with the candidate's line on the stack."""
        line = thread_watch.candidate_line(frame, self.candidate_file)
        message = what + (f" (at {os.path.basename(self.candidate_file)}:{line})" if line else "")
        if len(self.seen) < _MAX_SEEN:
            self.seen.append((flag, message))
        return message

    def set_candidate(self, path):
        """From now on events are judged (the candidate's module loads next)."""
        self.candidate_file = os.path.abspath(path)

    def offenders(self):
        return list(self.seen)

    # -- judging ----------------------------------------------------------

    def _kind(self, filename):
        kind = self._kinds.get(filename)
        if kind is not None:
            return kind
        if filename == self.candidate_file:
            kind = "candidate"
        elif filename.startswith("<frozen"):
            kind = "import" if "importlib" in filename else "stdlib"
        elif filename.startswith("<") or not filename or not os.path.isfile(filename):
            # Code made at run time ("<eval_with_key>.3" from torch.fx, ""
            # from torch.jit's type-comment parser): its maker was judged.
            kind = "generated"
        else:
            real = os.path.realpath(filename)
            if real.startswith(self.harness_dir):
                kind = "harness"
            elif self.triton_dir and real.startswith(self.triton_dir):
                kind = "triton"
            elif (real.startswith(self.stdlib_dirs) and "site-packages" not in real
                  and "dist-packages" not in real):
                kind = "stdlib"
            else:
                kind = "library"
        self._kinds[filename] = kind
        return kind

    def harness_owned(self, obj, _type=type, _isinstance=isinstance, _str=str):
        """Whether `obj` is the harness's: a function, frame, generator or
        code object of its files, a method bound to one of its objects, a
        module, class or instance of its package. Its closures, globals,
        frames and bound selves are its state (the Audit itself)."""
        kind = _type(obj)
        code_of = _CODE_OF.get(kind)
        if code_of is not None:
            return self._kind(code_of(obj).co_filename) == "harness"
        if kind is types.MethodType:
            return self.harness_owned(obj.__func__) or self.harness_owned(obj.__self__)
        if kind is _ModuleType:
            name = obj.__name__
        else:
            # The class's own name, read past any metaclass of the candidate's.
            name = type.__dict__["__module__"].__get__(obj if _isinstance(obj, type) else kind)
        return _isinstance(name, _str) and (name + ".").startswith(_HARNESS_PACKAGE)

    def _nearest(self, frame, past=("stdlib", "generated")):
        """The kind of the nearest frame whose kind is not in `past` (the
        standard library and generated code). A module's own code run by an
        import (the import system's frames come first on the way out) is
        "import": the module's, not its importer's, whoever imported it.
        Past such frames, the call window's call of the candidate's code is
        the candidate's: what runs between it and the candidate's frames is
        torch calling what the candidate handed it (a red team's forward
        pre-hook, a functools.partial, read a harness closure so, with no
        frame of its own)."""
        skipped = False
        while frame is not None:
            code = frame.f_code
            kind = self._kind(code.co_filename)
            if kind not in past:
                if kind == "harness" and skipped and code is _WINDOW_CALL:
                    return "candidate"
                return kind
            skipped = True
            frame = frame.f_back
        return "stdlib"

    def _asks_itself(self, frame, event):
        """Whether `frame` is at a line of its own that calls what raised
        `event` (sys._getframe: a line naming _getframe), not running,
        there, something it was handed or an object's finalizer: a frameless
        chain (partial(next, map(sys._getframe, ...))) called as a property
        getter from the harness's getattr, or as a finalizer wherever the
        harness dropped an object, has the harness's frame on top."""
        code = frame.f_code
        key = (code, event)
        lines = self._asking_lines.get(key)
        if lines is None:
            import linecache
            source = linecache.getlines(code.co_filename)
            name = event.rpartition(".")[2]
            lines = frozenset(line for _, _, line in code.co_lines()
                              if line and line <= len(source) and name in source[line - 1])
            self._asking_lines[key] = lines
        return frame.f_lineno in lines

    def _reads_frames_itself(self, frame, event):
        """Whether `frame` is one of _FRAME_READERS at its own call."""
        code = frame.f_code
        return (any(code.co_name == name and code.co_filename.endswith(suffix)
                    for suffix, name in _FRAME_READERS)
                and self._asks_itself(frame, event))

    def _judge(self, event, args, frame):
        """(flag, why) when refused, else None."""
        if event == GETATTR or event == GUARDED:
            # Raised by a wrapper of the harness's: whose is its caller.
            caller = frame.f_back if frame is not None else None
            if caller is None:
                return None
            if event == GETATTR:
                return self._judge_getattr(args[0], args[1], caller)
            if self._nearest(caller, _ON_BEHALF) == "candidate":
                return args[0], args[1]
            return None
        if (event == "object.__setattr__" and len(args) >= 3 and args[1] == "__module__"
                and args[2] != "candidate"
                and self._nearest(frame, _ON_BEHALF) == "candidate"):
            # A class that says it is another module's: dataclasses'
            # _is_type looks sys.modules up by a class's __module__ and read
            # a red team the timer's clock (module "kforge_harness.timing")
            # and the real __import__ ("builtins") by names held as data.
            # The standard library's class makers name the caller's module.
            return ("HACK_INTROSPECTION", f"claims module {str(args[2])[:60]!r} for a class, "
                    "which makes what looks modules up by it read that module")
        if event in NEW_CODE or (event == "object.__setattr__" and len(args) >= 2
                                 and args[1] in FUNCTION_STATE):
            # Past libraries too: torch.fx's GraphModule and torch.jit's
            # type-comment parser compiled text a red team chose (attribute
            # names as strings, a lambda in a type line) and ran it as
            # torch's, then reached gc from the code they made.
            nearest = self._nearest(frame, _ON_BEHALF)
            if nearest == "import":
                return None  # a module's code, loaded by the import system
            if frame is not None and frame.f_code.co_filename.endswith(_CODE_GENERATORS):
                return None
            if nearest == "candidate":
                return ("HACK_INTROSPECTION", "makes or replaces code at run time, out of the "
                        "static check's sight")
            return None
        if event in INSIDES:
            if frame is None:
                return None
            kind = self._kind(frame.f_code.co_filename)
            hands_over = event in HANDED_OVER or (
                event == "object.__getattr__" and len(args) >= 2 and args[1] in FRAME_ATTRIBUTES)
            if kind == "harness" and event in HANDED_OVER and not self._asks_itself(frame, event):
                return ("HACK_INTROSPECTION", "reaches into the interpreter's frames, objects "
                        "or native calls from inside the harness's code, by something the "
                        "candidate handed it")
            if (kind in _ON_BEHALF and hands_over
                    and not self._reads_frames_itself(frame, event)):
                # Asked on someone's behalf: ctypes loading a library,
                # inspect.currentframe handing a frame back, code a library
                # generated. Whose is the nearest frame past them (red teams
                # got the harness's frames through inspect.currentframe, and
                # the heap through code torch.fx generated).
                kind = self._nearest(frame, _ON_BEHALF)
            if kind == "candidate":
                return ("HACK_INTROSPECTION", "reaches into the interpreter's frames, objects "
                        "or native calls")
            return None
        if event == "open":
            return self._judge_open(args, frame)
        if event in TRACING:
            if self._nearest(frame, _ON_BEHALF) == "candidate":
                return ("HACK_INTROSPECTION", "hands a function every frame that runs, the "
                        "harness's included")
            return None
        if event in PROCESSES:
            if self._nearest(frame) not in ("harness", "triton", "import"):
                return ("HACK_SUBPROCESS", "starts a program: only Triton's compilers may")
        return None

    def _judge_open(self, args, frame):
        """A file the candidate's own code opens, directly or through the
        standard library (its own source excepted: linecache reads it for a
        warning's line); a process's memory, whoever opens it past the
        libraries."""
        path = args[0] if args else None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        # Both rules are the candidate's (nearest past the standard library
        # implies nearest past the libraries too): the harness's and the
        # libraries' own opens leave here, before any path is resolved.
        if not isinstance(path, str) or self._nearest(frame, _ON_BEHALF) != "candidate":
            return None  # a descriptor already open, or not asked by the candidate
        if _PROCESS_MEMORY.match(path) or _PROCESS_MEMORY.match(os.path.realpath(path)):
            return ("HACK_INTROSPECTION", f"opens {path}, the memory of a process")
        if (self._nearest(frame) == "candidate"
                and os.path.abspath(path) != self.candidate_file):
            return ("HACK_FILE_ACCESS", f"opens {path}: a candidate reads and writes no file")
        return None

    def _hook(self, event, args, _watched=WATCHED):
        # Every audited event of the process comes here: the common ones
        # leave at the first tests. A frame's f_code is read on every call
        # the window's and the thread watch's hooks look at (6 a timed call:
        # judged, they cost a ReLU 10-15% of its CPU time); a code object
        # alone runs nothing (making a function of one is judged).
        me = _get_ident()
        if (event not in _watched or self.candidate_file is None or me in self._inside
                or (event == "object.__getattr__" and args[1] == "f_code")):
            return
        self._inside.add(me)
        try:
            frame = _getframe(1)  # the Python frame whose call raised the event
            verdict = self._judge(event, args, frame)
            if verdict is None:
                return
            flag, why = verdict
            message = self._keep(flag, why if event in (GETATTR, GUARDED) else f"{event} {why}",
                                 frame)
        finally:
            self._inside.discard(me)
        raise RuntimeError(f"kforge sandbox: {message}")
