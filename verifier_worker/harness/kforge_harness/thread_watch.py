"""Threads of the candidate's beside the thread the harness calls it on
(attack T2): work finished, or launched, after forward has returned,
outside the timed interval; a thread holding the GIL can also hold back the
harness's clock reads. The candidate may not import threading
(static_policy), but a library it may use can start threads, so this is the
run-time fact, whatever does the starting: a kernel has no reason to run
anything beside the call it was given.

Two views, both looked at after every call (`offenders`):
  - a thread started through Python (_thread, threading) once `install`
    ran, while the starting thread's stack held a frame of the candidate's
    source (forward, or the module's own code at import), is the
    candidate's, whatever it runs (its code, or a library function handed
    to it) and whether or not it has ended by the look;
  - the stacks of the threads alive at the look: a thread started some
    other way (natively, by torch's C++) that is running the candidate's
    code then.
Threads that torch, Triton or the harness start outside the candidate's
frames, and that never run its code, are left alone. The harness's own
warm-up threads call forward on purpose: each runs inside
`harness_thread()`. Nothing is hooked into the threads themselves: the
only cost is a look at the stack when a thread starts, and the look after
a call.

    watch = ThreadWatch()
    watch.install()                   # before the guarded functions are captured
    watch.set_candidate("/w/candidate.py")
    def warm_up():                    # a thread of the harness's
        with watch.harness_thread():
            model(*inputs)
    watch.offenders()                 # ["thread 'Thread-3' started at candidate.py:12", ...]
"""

import _thread
import contextlib
import os
import sys

_current_frames = sys._current_frames
_getframe = sys._getframe
_get_ident = _thread.get_ident

# Where each Python version starts a thread: _thread's functions (with the
# old alias start_new), and threading's module-level aliases of them (bound
# when threading loaded).
STARTERS = ["_thread.start_new_thread", "_thread.start_new", "_thread.start_joinable_thread",
            "threading._start_new_thread", "threading._start_joinable_thread"]


def owner_of(dotted):
    """("_thread.start_new") -> (the _thread module, "start_new")."""
    import threading  # noqa: F401 - loaded, so its aliases can be named
    module, name = dotted.rsplit(".", 1)
    return sys.modules[module], name


class ThreadWatch:
    def __init__(self):
        self.candidate_file = None
        self.seen = []            # what was found, once per thread
        self._seen_idents = set()
        self._harness_idents = set()  # the harness's threads, while they run
        self._installed = []          # (owner, name, original starter)

    def install(self):
        """Wraps every thread starter Python has. A candidate's process
        installs it for good; a test undoes it with `uninstall`."""
        self._installed = []
        for dotted in STARTERS:
            owner, name = owner_of(dotted)
            original = getattr(owner, name, None)
            if original is not None:
                self._installed.append((owner, name, original))
                setattr(owner, name, self._wrap(original))

    def uninstall(self):
        for owner, name, original in self._installed:
            setattr(owner, name, original)
        self._installed = []

    def set_candidate(self, path):
        self.candidate_file = os.path.abspath(path)

    @contextlib.contextmanager
    def harness_thread(self):
        """The calling thread is the harness's while inside."""
        ident = _get_ident()
        self._harness_idents.add(ident)
        try:
            yield
        finally:
            self._harness_idents.discard(ident)

    def offenders(self):
        """What the candidate ran, or had run, on a thread not the caller's
        and not the harness's: [] when nothing."""
        if self.candidate_file is None:
            return []
        frames = _current_frames()
        # This very frame is among them: held in a local it would make a
        # reference cycle a call, and the garbage collector's passes over
        # them landed in timed calls (a 0.03 ms CPU call measured 0.07 ms).
        frames.pop(_get_ident(), None)
        for ident, frame in frames.items():
            if ident in self._harness_idents or ident in self._seen_idents:
                continue
            line = candidate_line(frame, self.candidate_file)
            if line is not None:
                self._seen_idents.add(ident)
                self.seen.append(f"a thread ({ident}) was running "
                                 f"{os.path.basename(self.candidate_file)}:{line}")
        return list(self.seen)

    # -- internals ------------------------------------------------------

    def _wrap(self, start):
        watch = self

        def start_watched(function, *rest, **kwargs):
            if watch.candidate_file is not None:
                line = candidate_line(_getframe(1), watch.candidate_file)
                if line is not None:
                    watch.seen.append(f"thread {_describe(function)} started at "
                                      f"{os.path.basename(watch.candidate_file)}:{line}")
            return start(function, *rest, **kwargs)

        start_watched.__wrapped__ = start
        return start_watched


def candidate_line(frame, candidate_file):
    """The line of the innermost frame of `candidate_file` on the stack
    that `frame` ends, or None (audit.py names the line of a refusal so)."""
    while frame is not None:
        if frame.f_code.co_filename == candidate_file:
            return frame.f_lineno
        frame = frame.f_back
    return None


def _describe(function):
    """threading.Thread's name for its bootstrap method, else the function's."""
    thread = getattr(function, "__self__", None)
    name = getattr(thread, "name", None)
    if isinstance(name, str):
        return repr(name)
    return getattr(function, "__qualname__", type(function).__name__)
