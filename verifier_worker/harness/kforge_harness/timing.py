"""The calibrated timing protocol, shared by the trusted reference server
(baselines) and the candidate runner. Everything it calls is bound when this
module is imported, before any candidate code loads, so a candidate that
patches `time` or `torch.cuda` afterwards cannot change what is measured (and
the guards report the attempt).

Per trial: (GPU) synchronise the device, queue an L2 flush (zeroing a 256 MiB
buffer), record a start event, call, record an end event, synchronise the
whole device; the host clock runs around call + synchronise, so it also sees
what is left of the flush, equally for candidate and baselines. Work hidden on another stream or thread shows up
as host time far above event time. Inputs rotate through a pool of separate
allocations so nothing can be cached by pointer or value.
"""

import time

import torch

_perf_counter_ns = time.perf_counter_ns
_cuda_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event
_zeros = torch.zeros

# Twice the 50-60 MB L2 of an H100/H200.
L2_FLUSH_BYTES = 256 << 20


class Timer:
    def __init__(self, device):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.flush_buffer = None

    def _flush(self):
        if self.flush_buffer is None:
            self.flush_buffer = _zeros(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=self.device)
        self.flush_buffer.zero_()

    def trials(self, fn, pool, count, flush_l2, start_index=0, check=None):
        """Runs fn(*pool[(start_index + i) % len(pool)]) count times.
        check(output), if given, runs on every trial's output outside the
        timed interval (after the end event and the synchronisation).
        Returns (event_ms or None, host_ms, last output, last pool index)."""
        event_ms = [] if self.cuda else None
        host_ms = []
        out = None
        index = start_index
        for i in range(count):
            index = (start_index + i) % len(pool)
            args = pool[index]
            if self.cuda:
                start, end = _Event(enable_timing=True), _Event(enable_timing=True)
                _cuda_synchronize(self.device)
                # The flush is queued, not waited for: while the GPU clears
                # L2 the host launches the call behind it, so the events time
                # the GPU work and not the Python launch latency of an idle
                # GPU (what do_bench measures too).
                if flush_l2:
                    self._flush()
                t0 = _perf_counter_ns()
                start.record()
                out = fn(*args)
                end.record()
                _cuda_synchronize(self.device)
                t1 = _perf_counter_ns()
                event_ms.append(start.elapsed_time(end))
            else:
                t0 = _perf_counter_ns()
                out = fn(*args)
                t1 = _perf_counter_ns()
            host_ms.append((t1 - t0) / 1e6)
            if check is not None:
                check(out)
        return event_ms, host_ms, out, index
