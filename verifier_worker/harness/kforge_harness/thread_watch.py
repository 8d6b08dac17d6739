"""Threads that run the candidate's code beside the thread the harness calls
it on (attack T2): work finished, or launched, after forward has returned,
outside the timed interval; a thread holding the GIL can also hold back the
harness's clock reads. The candidate may not import threading
(static_policy), but a library it may use can start threads, so this is the
run-time fact, whatever started the thread: a thread the harness did not
start has no reason to run the candidate's code.

Two views, both looked at after every call (`offenders`):
  - every thread started through Python (_thread, threading) once
    `install` ran carries a profile hook that notes the first call into the
    candidate's source on it, so a thread that did its work and ended
    before the look is still seen;
  - the stacks of the threads alive at the look, for threads started
    natively (torch's C++) that are running the candidate's code then.
Threads that never enter the candidate's source (torch's, Triton's) are
not the candidate's doing and are left alone. The harness's own warm-up
threads call forward on purpose: each runs inside `harness_thread()`.

    watch = ThreadWatch()
    watch.install()                   # before the guarded functions are captured
    watch.set_candidate("/w/candidate.py")
    def warm_up():                    # a thread of the harness's
        with watch.harness_thread():
            model(*inputs)
    watch.offenders()                 # ["thread 'Thread-3' ran candidate.py:12", ...]
"""

import _thread
import contextlib
import os
import sys
import threading

_setprofile = sys.setprofile
_current_frames = sys._current_frames
_get_ident = _thread.get_ident

# Where each Python version starts a thread: _thread's functions, and
# threading's module-level aliases of them (bound when threading loaded).
_STARTERS = [(_thread, "start_new_thread"), (_thread, "start_joinable_thread"),
             (threading, "_start_new_thread"), (threading, "_start_joinable_thread")]


class ThreadWatch:
    def __init__(self):
        self.candidate_file = None
        self.seen = []            # "thread 'name' ran candidate.py:N", once per thread
        self._seen_idents = set()
        self._harness_idents = set()  # the harness's threads, while they run
        self._installed = []          # (owner, name, original starter)

    def install(self):
        """Wraps every thread starter Python has, so each thread started from
        now on is watched. A candidate's process installs it for good; a
        test undoes it with `uninstall`."""
        self._installed = []
        for owner, name in _STARTERS:
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
        """The calling thread is the harness's while inside: unwatched."""
        ident = _get_ident()
        _setprofile(None)
        self._harness_idents.add(ident)
        try:
            yield
        finally:
            self._harness_idents.discard(ident)

    def offenders(self):
        """What ran the candidate's code on a thread not the harness's, and
        not the caller's: [] when nothing did."""
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
            line = self._candidate_line(frame)
            if line is not None:
                self._note(ident, line)
        return list(self.seen)

    # -- internals ------------------------------------------------------

    def _wrap(self, start):
        watch = self

        def start_watched(function, *rest, **kwargs):
            def run(*args, **kw):
                _setprofile(watch._profile)
                try:
                    return function(*args, **kw)
                finally:
                    _setprofile(None)

            return start(run, *rest, **kwargs)

        start_watched.__wrapped__ = start
        return start_watched

    def _profile(self, frame, event, arg):
        if (event == "call" and frame.f_code.co_filename == self.candidate_file
                and _get_ident() not in self._harness_idents):
            self._note(_get_ident(), frame.f_lineno)
            _setprofile(None)  # one sighting is enough; the thread runs on unhooked

    def _candidate_line(self, frame):
        while frame is not None:
            if frame.f_code.co_filename == self.candidate_file:
                return frame.f_lineno
            frame = frame.f_back
        return None

    def _note(self, ident, line):
        if ident in self._seen_idents:
            return
        self._seen_idents.add(ident)
        name = next((t.name for t in threading.enumerate() if t.ident == ident), str(ident))
        self.seen.append(f"thread '{name}' ran {os.path.basename(self.candidate_file)}:{line}")
