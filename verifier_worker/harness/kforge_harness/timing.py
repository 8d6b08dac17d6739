"""The calibrated timing protocol, shared by the trusted reference server
(baselines) and the candidate runner. Everything it calls is bound when this
module is imported, before any candidate code loads, so a candidate that
patches `time` or `torch.cuda` afterwards cannot change what is measured (and
the guards report the attempt).

Per trial: (GPU) clone the trial's inputs (so a candidate that writes into
its inputs cannot carry work to the next call through them; the allocator
may still hand a clone the same address, so caches keyed on values or
pointers are the fresh-input probes' job), synchronise the device, queue an
L2 flush
(zeroing a 256 MiB buffer), record a start event, call, record an end event,
wait for the end event, synchronise the whole device. The trial's host time
is its event time plus how long that device-wide synchronise still waited
past the end event: work hidden on another stream or thread shows up as host
time far above event time. The time before the GPU takes the call up is left
out: another process's kernels on a shared GPU stretch it to a time slice on
every call (2.45 ms beside a matmul loop on an H100, for a 0.073 ms kernel),
the trusted reference's as much as the candidate's, and work the call hides
cannot run before the call. Inputs rotate through a pool of separate
allocations.

Trials run by budget (`Budget`): a warm-up of at least `warmup_ms` and
`warmup_calls`, then trials until the side has spent `min_ms` in trials and
has `min_trials` trials and the standard error of the mean is within
`target_rel_stderr` of the mean (of the trimmed mean, with `trim_fraction`:
the statistic the verdict reports, whose standard error the few slow trials
of a microsecond kernel do not inflate), or until `max_ms` / `max_trials`.
A trial's cost is its wall time, everything included (clone, flush, call,
check), as triton.testing.do_bench sizes its repetitions by the time of a
flush plus a call: counted in kernel time alone, a 20 us kernel took 5000
trials and 1.5 s of wall time to reach 100 ms, with no better mean than 300
trials give.
"""

import gc
import math
import time

import torch

_perf_counter_ns = time.perf_counter_ns
_process_time_ns = time.process_time_ns
_gc_disable, _gc_enable, _gc_isenabled = gc.disable, gc.enable, gc.isenabled
# torch.cuda.Event's own functions, not looked up on the class at each call.
_event_record = torch.cuda.Event.record
_event_elapsed = torch.cuda.Event.elapsed_time
_cuda_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event
_event_synchronize = torch.cuda.Event.synchronize
# The same two waits as torch's C functions, for the stretch the host clock
# reads (end event to device idle): no Python frame runs there. With the
# call window's trace hook on between calls (call_window.py), torch's Python
# wrappers were traced, and on CPython 3.12, where turning a trace hook on
# re-instruments each code object at its next run, they added 0.07 ms to
# that stretch on every call: a correct 0.073 ms Tanh kernel read 0.14 ms of
# host time and failed the host-time check. Absent from a CPU-only torch.
_c_event_synchronize = getattr(getattr(torch._C, "_CudaEventBase", None), "synchronize", None)
_c_cuda_synchronize = getattr(torch._C, "_cuda_synchronize", None)
_cuda_current_device = torch.cuda.current_device
_cuda_sleep = getattr(torch.cuda, "_sleep", None)
_cuda_properties = torch.cuda.get_device_properties
_zeros = torch.zeros
_Tensor = torch.Tensor
_clone = torch.Tensor.clone
_sqrt = math.sqrt
_sorted = sorted

_equal = torch.equal
_view = torch.Tensor.view
_element_size = torch.Tensor.element_size
_is_complex = torch.Tensor.is_complex
_type = type
# A tensor's bits, for an exact comparison (NaN payloads included).
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class ChangedAfterTheClock(Exception):
    """A timed call's output changed between the clock's stop and the end of
    its check: work done past the timed interval."""


def _snapshot(out, _type=_type, _tensor=torch.Tensor, _clone=torch.Tensor.clone):
    """(output tensor, its copy) pairs of a plain tensor or a plain tuple or
    list of them, taken with functions bound at import; anything else the
    check refuses."""
    if _type(out) is _tensor:
        return [(out, _clone(out))]
    if _type(out) in (tuple, list):
        return [(o, _clone(o)) for o in out if _type(o) is _tensor]
    return []


def _changed(kept, _equal=_equal, _view=_view, _size=_element_size, _complex=_is_complex,
             _bits=_BITS):
    for original, copy in kept:
        ints = None if _complex(original) else _bits.get(_size(original))
        if not (_equal(_view(original, ints), _view(copy, ints)) if ints is not None
                else _equal(original, copy)):
            return True
    return False


# Twice the 50-60 MB L2 of an H100/H200.
L2_FLUSH_BYTES = 256 << 20


class Budget:
    """How long one side is timed; every field has the proto's meaning
    (kforge.v1.TimingProtocol)."""

    def __init__(self, request):
        self.warmup_ms = float(request.get("warmup_ms", 0.0))
        self.warmup_calls = int(request.get("warmup", 0))
        self.min_trials = max(1, int(request.get("min_trials", request.get("trials", 1))))
        self.max_trials = max(self.min_trials, int(request.get("max_trials", self.min_trials)))
        self.min_ms = float(request.get("min_ms", 0.0))
        self.max_ms = float(request.get("max_ms", 0.0))
        self.target_rel_stderr = float(request.get("target_rel_stderr", 0.0))
        self.trim_fraction = min(0.45, max(0.0, float(request.get("trim_fraction", 0.0))))
        self.flush_l2 = bool(request.get("flush_l2", False))
        self.clone_inputs = bool(request.get("clone_inputs", False))
        self.launch_cover_ms = max(0.0, float(request.get("launch_cover_ms", 0.0)))

    def done(self, n, spent_ms, mean, m2, samples=None):
        """Whether a side with n trials that took spent_ms of wall time
        (running mean and sum of squared deviations m2 of the samples, and
        the samples themselves for a trimmed mean) has what it needs."""
        if n >= self.max_trials or (self.max_ms > 0 and spent_ms >= self.max_ms):
            return True
        if n < self.min_trials or spent_ms < self.min_ms:
            return False
        if self.target_rel_stderr <= 0 or n < 2 or mean <= 0:
            return True
        if self.trim_fraction > 0 and samples is not None:
            # Sorting every trial would cost more than a short kernel: the
            # rule is looked at every TRIMMED_CHECK_EVERY trials.
            if n % TRIMMED_CHECK_EVERY:
                return False
            return trimmed_rel_stderr(samples, self.trim_fraction) <= self.target_rel_stderr
        stderr = _sqrt(m2 / (n - 1) / n)
        return stderr <= self.target_rel_stderr * mean


TRIMMED_CHECK_EVERY = 16


def trimmed_rel_stderr(samples, trim_fraction):
    """Standard error of the trimmed mean over the trimmed mean (Tukey and
    McLaughlin: the winsorized standard deviation over (1 - 2g) sqrt(n)),
    with the same cut as kforge's TimingStats (floor(g n) from each end)."""
    n = len(samples)
    s = _sorted(samples)
    k = int(trim_fraction * n)
    if n - 2 * k < 2:
        return float("inf")
    kept = s[k:n - k]
    trimmed_mean = sum(kept) / len(kept)
    if trimmed_mean <= 0:
        return float("inf")
    winsorized = [s[k]] * k + kept + [s[n - k - 1]] * k
    w_mean = sum(winsorized) / n
    w_var = sum((x - w_mean) ** 2 for x in winsorized) / (n - 1)
    return _sqrt(w_var) / ((1 - 2 * trim_fraction) * _sqrt(n)) / trimmed_mean


class Timer:
    def __init__(self, device):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.flush_buffer = None
        self.cycles_per_ms = None
        self.last_args = None
        # The last call's process CPU time (every thread's) on the CPU, read
        # around its clock; None on a GPU.
        self.last_cpu_ms = None
        self._waits = None

    def _end_waits(self):
        """(wait for an event, wait for the device): C functions where torch
        has them and the device is the current one (the harness makes it so,
        device.make_current), else torch's Python ones."""
        if self._waits is None:
            current = self.device.index is None or self.device.index == _cuda_current_device()
            event = _c_event_synchronize or _event_synchronize
            if _c_cuda_synchronize is not None and current:
                self._waits = (event, _c_cuda_synchronize)
            else:
                self._waits = (event, lambda: _cuda_synchronize(self.device))
        return self._waits

    def _cycles_per_ms(self):
        if self.cycles_per_ms is None:
            # The SM clock at its peak: a sleep of N cycles lasts at least
            # N / peak; a slower clock only makes it longer.
            khz = getattr(_cuda_properties(self.device), "clock_rate", 0) or 2_000_000
            self.cycles_per_ms = float(khz)
        return self.cycles_per_ms

    def _flush(self):
        if self.flush_buffer is None:
            self.flush_buffer = _zeros(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=self.device)
        self.flush_buffer.zero_()

    @staticmethod
    def _fresh(args, clone):
        if not clone:
            return args
        return [_clone(a) if isinstance(a, _Tensor) else a for a in args]

    # What a timed call reads is bound into the defaults of `one` and `_one`
    # when this module loads, not read from its globals at each call:
    # setting a module's attribute raises no audit event, and a red team
    # that reached this module (through torch._import_dotted_name("sys"))
    # swapped _perf_counter_ns inside forward for a chain that put the
    # original back as it answered, so no later check saw a change: a third
    # of every call's time, 3.0x. A function's defaults change only through
    # __defaults__, an audited event; the positional ones are a tuple.
    def one(self, fn, args, flush_l2, clone=False, launch_cover_ms=0.0, check=None, index=None,
            kept_as_timed=False, _isenabled=_gc_isenabled, _disable=_gc_disable,
            _enable=_gc_enable, _snapshot=_snapshot, _changed=_changed):
        """One timed call: (event_ms or None, host_ms, output). With
        `launch_cover_ms`, that much GPU sleep is queued before the start
        event, so a slow host launch does not count as kernel time. On a GPU
        host_ms is event_ms plus what the device-wide synchronise waited for
        past the end event (the module's docstring says why).

        check(output, index), if given, runs right after the clocks are
        read, before this returns: the caller still holds the last call's
        output and nothing of the harness's has been dropped, so no
        finalizer the candidate tied to them has run. A red team returned
        an empty tensor and filled it from a weakref.finalize on the last
        call's output (torch.clamp itself the callback: no frame of the
        candidate's for the call window to see), which ran as the caller
        rebound its variable, past the clock: 2x over eager, every output
        right when checked. The collector is off meanwhile, so a cycle's
        finalizer cannot run there either."""
        collecting = _isenabled()
        _disable()
        try:
            timed = self._one(fn, args, flush_l2, clone, launch_cover_ms)
            # The output as the clock stopped, compared after the check:
            # the check reads attributes any code can set for one call, with
            # no audit event (torch.device, a harness module's function), and
            # a red team's self-restoring chain there finished two thirds of
            # a matmul into the output past the clock, fresh calls included
            # (2.9x, every output right). With `kept_as_timed`, for the calls
            # whose times floor the speedup (the fresh-input calls): a copy
            # on every trial changed the heap under a CPU ReLU's fresh calls
            # (1 run in 5 flagged them 3x slow).
            kept = _snapshot(timed[2]) if check is not None and kept_as_timed else ()
            if check is not None:
                check(timed[2], index)
            if _changed(kept):
                raise ChangedAfterTheClock(
                    "a timed call's output changed after its clock stopped, while the harness "
                    "checked it: work done past the timed interval")
            return timed
        finally:
            if collecting:
                _enable()

    def _one(self, fn, args, flush_l2, clone, launch_cover_ms, _clock=_perf_counter_ns,
             _cpu_clock=_process_time_ns, _new_event=_Event, _record=_event_record,
             _elapsed=_event_elapsed, _synchronize=_cuda_synchronize, _sleep=_cuda_sleep):
        args = self._fresh(args, clone)
        # The last call's inputs as the call left them, for a check that
        # the candidate did not write into them (candidate_runner.time).
        self.last_args = args
        if self.cuda:
            start, end = _new_event(enable_timing=True), _new_event(enable_timing=True)
            wait_event, wait_device = self._end_waits()
            _synchronize(self.device)
            # The flush is queued, not waited for: while the GPU clears L2
            # the host launches the call behind it, so the events time the
            # GPU work and not the Python launch latency of an idle GPU
            # (what do_bench measures too).
            if flush_l2:
                self._flush()
            if launch_cover_ms > 0 and _sleep is not None:
                if flush_l2:
                    # The flush ends first and the sleep alone covers the
                    # launch, as the timings were calibrated with.
                    _synchronize(self.device)
                _sleep(int(launch_cover_ms * self._cycles_per_ms()))
            _record(start)
            out = fn(*args)
            _record(end)
            # Until the timed stream is done, then until the whole device is:
            # the second wait is work the call left elsewhere.
            wait_event(end)
            t_end = _clock()
            wait_device()
            t1 = _clock()
            event_ms = _elapsed(start, end)
            return event_ms, event_ms + (t1 - t_end) / 1e6, out
        c0 = _cpu_clock()
        t0 = _clock()
        out = fn(*args)
        t1 = _clock()
        self.last_cpu_ms = (_cpu_clock() - c0) / 1e6
        return None, (t1 - t0) / 1e6, out

    def warm_up(self, fn, pool, budget, check=None, clone=False):
        """At least budget.warmup_calls calls and budget.warmup_ms of host
        time, untimed, rotating through the pool (check(output, pool index)
        on each, if given); on clones of its inputs
        with `clone`, as the trials: a call handed the pool's own tensors
        could write into them what every later clone would carry (a red
        team's row sums, marked by a NaN payload, reached all 20 trials)."""
        start, i = _perf_counter_ns(), 0
        while (i < budget.warmup_calls
               or (_perf_counter_ns() - start) / 1e6 < budget.warmup_ms):
            self.one(fn, pool[i % len(pool)], False, clone, check=check, index=i % len(pool))
            i += 1
            if budget.warmup_calls == 0 and budget.warmup_ms <= 0:
                break

    def run(self, fn, pool, budget, start_index=0, check=None, aside=None, fresh=None):
        """Trials by budget over pool[(start_index + i) % len(pool)], i
        counting every call. check(output, pool index), if given, runs on
        every trial's output outside the timed interval. aside = (indices,
        callback): the calls at those indices are not timed; callback(fresh
        args, pool index) makes them instead (the candidate runner records
        them). fresh = (calls, check): calls maps a call index to the inputs
        of a set the candidate has never seen (moved to the device here,
        before the call), timed there in place of the pool's set exactly as
        a trial is (the same clone, flush, cover and clocks), and
        check(output, call index) runs on its output in place of `check`.
        Neither counts towards the budget. Returns (event_ms or None,
        host_ms, last timed output, its pool index, {call index: (event_ms
        or None, host_ms, CPU time on the CPU or None)} of the fresh
        calls)."""
        event_ms = [] if self.cuda else None
        host_ms = []
        out, index = None, start_index
        n, spent, mean, m2 = 0, 0.0, 0.0, 0.0
        calls = 0
        set_aside, callback = aside if aside is not None else (frozenset(), None)
        fresh_calls, fresh_check = fresh if fresh is not None else ({}, None)
        fresh_times = {}
        # The last trial's inputs (last_args) and pool index: the loop may end
        # on a fresh call, whose slot is another set's.
        trial_args, trial_index = None, start_index
        samples = event_ms if event_ms is not None else host_ms  # what is judged
        while not budget.done(n, spent, mean, m2, samples) or len(fresh_times) < len(fresh_calls):
            index = (start_index + calls) % len(pool)
            calls += 1
            if calls - 1 in set_aside:
                callback(self._fresh(pool[index], budget.clone_inputs), index)
                continue
            if calls - 1 in fresh_calls:
                args = [a.to(self.device) if isinstance(a, _Tensor) else a
                        for a in fresh_calls[calls - 1]]
                ev, host, _ = self.one(fn, args, budget.flush_l2,
                                       budget.clone_inputs, budget.launch_cover_ms, fresh_check,
                                       calls - 1, kept_as_timed=True)
                fresh_times[calls - 1] = (ev, host, None if self.cuda else self.last_cpu_ms)
                continue
            began = _perf_counter_ns()
            ev, host, out = self.one(fn, pool[index], budget.flush_l2, budget.clone_inputs,
                                     budget.launch_cover_ms, check, index)
            trial_args, trial_index = self.last_args, index
            if event_ms is not None:
                event_ms.append(ev)
            host_ms.append(host)
            sample = ev if ev is not None else host
            n += 1
            delta = sample - mean
            mean += delta / n
            m2 += delta * (sample - mean)
            spent += (_perf_counter_ns() - began) / 1e6
        self.last_args = trial_args
        return event_ms, host_ms, out, trial_index, fresh_times

    def trials(self, fn, pool, count, flush_l2, start_index=0, check=None):
        """Exactly `count` trials (no budget): (event_ms, host_ms, out, index)."""
        budget = Budget({"min_trials": count, "max_trials": count, "flush_l2": flush_l2})
        return self.run(fn, pool, budget, start_index, check)[:4]
