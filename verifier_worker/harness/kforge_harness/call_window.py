"""Where the candidate's code may run: its module's own code, building
ModelNew, and forward in a call the harness made. Anywhere else is work
moved out of that call, past the end of the timed interval and of the
profiler's record: a finalizer (`__del__`, a weakref callback) run when the
harness drops an input clone, an output container's `__iter__` run as the
harness unpacks it, a property read by the harness's checks. Red teams took
2.7-4x over eager for a plain clamp ReLU so, with right outputs and no flag.
This is the run-time fact, whatever the hook: once `arm`ed, a trace hook on
the harness's thread sees every Python frame start between the harness's
calls, and one of the candidate's source is an offence (HACK_CONCURRENCY,
as work beside the call is).

The hook is off inside `call` (CPython then traces nothing: the candidate's
calls run at full speed) and on the harness's own thread only: its warm-up
threads call forward on purpose, and other threads are thread_watch's.
`sys.settrace`, not `sys.setprofile`: a trace hook sees Python frames only,
not each C call, so the timer's clock reads around a call cost nothing
more.

    window = CallWindow()
    window.set_candidate("/w/candidate.py")
    window.arm()
    out = window.call(model, x)      # forward may run here
    del x                            # a __del__ of the candidate's runs here
    window.offenders()               # ["Job.__del__ at candidate.py:14"]
"""

import os
import sys

_settrace = sys.settrace

# Offences kept, the first few: a finalizer on every clone would otherwise
# grow the list by one per trial.
_MAX_SEEN = 4


class CallWindow:
    def __init__(self):
        self.candidate_file = None
        self.seen = []
        self._armed = False

    def set_candidate(self, path):
        self.candidate_file = os.path.abspath(path)

    def arm(self):
        """From now on, the candidate's code runs only inside `call`."""
        self._armed = True
        _settrace(self._hook)

    def disarm(self):
        self._armed = False
        _settrace(None)

    def call(self, fn, *args):
        """fn(*args), the candidate's code allowed to run meanwhile."""
        if not self._armed:
            return fn(*args)
        _settrace(None)
        try:
            return fn(*args)
        finally:
            _settrace(self._hook)

    def offenders(self):
        return list(self.seen)

    def _hook(self, frame, event, arg):
        # Only "call" events reach a global trace hook; returning None asks
        # for no line events in the frame.
        code = frame.f_code
        if code.co_filename == self.candidate_file and len(self.seen) < _MAX_SEEN:
            self.seen.append(f"{code.co_qualname if hasattr(code, 'co_qualname') else code.co_name}"
                             f" at {os.path.basename(self.candidate_file)}:{frame.f_lineno}")
        return None
