"""The trusted reference server: one long-lived process per verifier (per
GPU) that never sees candidate code. It loads tasks, makes input sets from
the seeds it is given, computes reference outputs, and times the eager and
torch.compile baselines with the same protocol as the candidate.

Run as `python -m kforge_harness.reference_server FD` where FD is a
connected Unix socket to the C++ verifier (frames, protocol.py).
"""

import collections
import gc
import math
import os
import socket
import sys
import time
import traceback

import torch

from . import launch_record, protocol, task_inputs, timing
from .device import make_current

# Tasks kept loaded (module, models, compiled models, input pools).
MAX_TASKS = 16
# Deferred prepare answers kept for their fetch; one per epoch in the making.
MAX_PENDING = 16


# Models kept per task: each reference epoch draws a new init seed, so
# without a bound a long job would keep every epoch's weights on the GPU.
# Two batches' epochs can be in use at once, each with a few init variants.
MAX_MODELS = 8


class LoadedTask:
    def __init__(self, source, device):
        self.module = task_inputs.load_task(source)
        self.device = torch.device(device)
        self.models = collections.OrderedDict()  # key of init inputs -> eager model
        self.compiled = {}     # key of init inputs -> torch.compile'd model
        # set name -> (init key, [inputs on device], (init_inputs, init_seed, dtype))
        self.sets = {}

    def keep_models(self, keys):
        """Drops the models (and compiled ones) whose keys are not in `keys`."""
        for key in [k for k in self.models if k not in keys]:
            del self.models[key]
            self.compiled.pop(key, None)

    def device_bytes(self):
        """Bytes this task keeps on its device: models and kept input sets."""
        tensors = [t for m in self.models.values() for t in (*m.parameters(), *m.buffers())]
        tensors += [x for _, inputs, _ in self.sets.values() for x in inputs
                    if isinstance(x, torch.Tensor)]
        return sum(t.numel() * t.element_size() for t in tensors if t.device.type != "cpu")

    def model(self, init_inputs, init_seed, dtype):
        key = repr((init_inputs, init_seed, dtype))
        if key in self.models:
            self.models.move_to_end(key)
        else:
            torch.manual_seed(init_seed)
            model = self.module.Model(*init_inputs).to(self.device)
            if dtype:
                model = model.to(getattr(torch, dtype))
            self.models[key] = model.eval()
            while len(self.models) > MAX_MODELS:
                old, _ = self.models.popitem(last=False)
                self.compiled.pop(old, None)
        return key, self.models[key]


class _Clock:
    """Seconds spent per part of a prepare, each part ended by a device
    synchronisation so the GPU's queued work is counted where it ran."""

    def __init__(self, device):
        self.cuda = str(device).startswith("cuda")
        self.parts = {}
        self.last = time.perf_counter()

    def lap(self, part):
        if self.cuda:
            torch.cuda.synchronize()
        now = time.perf_counter()
        self.parts[part] = round(self.parts.get(part, 0.0) + now - self.last, 4)
        self.last = now


class ReferenceServer:
    def __init__(self, sock):
        self.sock = sock
        self.tasks = collections.OrderedDict()
        self.profiled = False
        # Prepared answers waiting to be fetched, by ticket (see prepare).
        self.pending = collections.OrderedDict()
        self.next_ticket = 1

    def task(self, key, source, device):
        if key in self.tasks:
            self.tasks.move_to_end(key)
            return self.tasks[key]
        loaded = LoadedTask(source, device)
        self.tasks[key] = loaded
        while len(self.tasks) > MAX_TASKS:
            self.tasks.popitem(last=False)
        return loaded

    def device_info(self, request):
        device = request.get("device", "cpu")
        info = {"type": "device_info", "torch": torch.__version__, "device": "cpu",
                "cuda": torch.cuda.is_available(), "compile": hasattr(torch, "compile")}
        try:
            import triton
            info["triton"] = triton.__version__
        except ImportError:
            info["triton"] = ""
        if device.startswith("cuda"):
            info["device"] = torch.cuda.get_device_name(torch.device(device))
        return info, b""

    def prepare(self, request, fds=()):
        """Input sets and reference outputs. A set the reference itself cannot
        run (a size the task does not support, a dtype it rejects, or values
        that make its output non-finite where the task's own did not) comes
        back with ok false and the reason.

        Where the verifier offers a reply buffer (a memfd) the tensors are
        written straight into it, each copied once from the GPU: gigabytes
        through this socket took seconds a reference epoch. A plan whose
        tensors outgrow the buffer is made again into a payload."""
        task = self.task(request["task_key"], request["source"], request["device"])
        try:
            return self._prepare(task, request, fds)
        finally:
            self._make_room(task, int(request.get("device_budget_bytes", 0)))

    def _make_room(self, current, budget):
        """After a prepare: the models only its variant sets needed go (a
        timing uses the models of the sets kept on the device), then whole
        tasks, least recently used first and never `current`, while what
        this server keeps on the device is over `budget` bytes
        (MultiInputOptions.reference_device_bytes; 0: no bound). Dropped
        models and sets are made again from their seeds when asked for."""
        current.keep_models({key for key, _, _ in current.sets.values()})
        if budget > 0:
            held = {key: t.device_bytes() for key, t in self.tasks.items()}
            total = sum(held.values())
            for key in list(self.tasks):  # least recently used first
                if total <= budget:
                    break
                if self.tasks[key] is not current:
                    total -= held[key]
                    del self.tasks[key]
        if current.device.type == "cuda":
            # Back to the driver: candidates on this GPU need it more than
            # this process's allocator cache does.
            gc.collect()
            torch.cuda.empty_cache()

    def _prepare(self, task, request, fds):
        writer = None
        if "reply_buffer" in request:
            try:
                writer = protocol.BufferWriter(fds[int(request["reply_buffer"])],
                                               int(request["reply_capacity"]))
            except (OSError, ValueError, IndexError):
                writer = None  # no room to map it: the payload below
        if writer is not None:
            try:
                results, timings = self._prepare_sets(task, request, writer)
                return {"type": "prepared", "sets": results, "tensors": writer.entries,
                        "payload_in_reply_buffer": True, "timings": timings}, b""
            except protocol.BufferFull:
                pass
            finally:
                writer.close()
        packer = protocol.TensorPacker()
        results, timings = self._prepare_sets(task, request, packer)
        header, payload = {"type": "prepared", "sets": results,
                           "tensors": packer.entries}, packer.payload()
        if not request.get("defer_payload"):
            return header, payload
        # The GPU work is done (outputs computed and copied to the host); the
        # verifier holds the GPU only until here and fetches the bytes,
        # which can take seconds to cross, without it.
        ticket = self.next_ticket
        self.next_ticket += 1
        self.pending[ticket] = (header, payload)
        while len(self.pending) > MAX_PENDING:
            self.pending.popitem(last=False)  # a verifier that never fetched
        return {"type": "computed", "ticket": ticket, "timings": timings}, b""

    def _prepare_sets(self, task, request, packer):
        """(set results, seconds by part: inputs, forward, copy)."""
        results = []
        clock = _Clock(request["device"])
        for spec in request["sets"]:
            try:
                results.append(self._prepare_set(task, spec, request["init_seed"], packer,
                                                 int(request.get("max_set_bytes", 1 << 28)),
                                                 clock, int(request.get("max_model_bytes", 0))))
            except protocol.BufferFull:
                raise
            except Exception as e:  # the task's own code failed on this variant
                results.append({"name": spec["name"], "ok": False,
                                "message": f"{type(e).__name__}: {e}"})
                clock.lap("failed_s")
        return results, clock.parts

    def fetch(self, request):
        """The answer of a deferred prepare, once."""
        answer = self.pending.pop(int(request.get("ticket", 0)), None)
        if answer is None:
            raise ValueError(f"no prepared answer under ticket {request.get('ticket')!r}")
        return answer

    @staticmethod
    def _make_set(task, spec, init_seed, max_bytes, max_model_bytes=0):
        """(fitted spec, inputs as made, init inputs, changed constants,
        model args, inputs on the device) for one set: its size fitted to its
        budget, its values drawn from its seeds, so the same spec makes the
        same inputs again. With `max_model_bytes`
        (MultiInputOptions.max_model_bytes), a set whose model would hold
        more is refused before anything is made: a candidate builds its
        model in host memory first, under its sandbox's memory limit."""
        spec = task_inputs.fit_to_budget(task.module, spec, int(spec.get("max_bytes") or max_bytes))
        if max_model_bytes > 0:
            weights = task_inputs.model_bytes(task.module, spec)
            if weights > max_model_bytes:
                raise ValueError(
                    f"the model at these sizes holds {weights / 2**30:.2f} GiB of parameters, "
                    f"over max_model_bytes ({max_model_bytes / 2**30:.2f} GiB)")
        init_inputs, inputs, changes = task_inputs.make_inputs(task.module, spec, task.device)
        model_args = (init_inputs, init_seed, spec.get("dtype", ""))
        on_device = [x.to(task.device) if isinstance(x, torch.Tensor) else x for x in inputs]
        return spec, inputs, init_inputs, changes, model_args, on_device

    def _prepare_set(self, task, spec, init_seed, packer, max_bytes, clock, max_model_bytes=0):
        spec, inputs, init_inputs, changes, model_args, on_device = self._make_set(
            task, spec, init_seed, max_bytes, max_model_bytes)
        key, model = task.model(*model_args)
        clock.lap("inputs_s")
        with torch.no_grad():
            outputs = task_inputs.as_output_list(model(*on_device))
        if spec.get("require_finite") and not all(torch.isfinite(o).all() for o in outputs):
            raise ValueError("reference output is not finite for these values")
        clock.lap("forward_s")
        name = spec["name"]
        # Only sets the baselines may be timed on stay on the device; the
        # rest would hold GPU memory for nothing.
        if spec.get("same_shape"):
            task.sets[name] = (key, on_device, model_args)
        else:
            task.sets.pop(name, None)
        scalars = []  # [index, value]: plain numbers among the inputs (a scale factor)
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                packer.add(f"{name}/in{i}", x)
            elif isinstance(x, (bool, int, float)) and math.isfinite(float(x)):
                scalars.append([i] + task_inputs.encode_scalar(x))
            else:
                raise ValueError(f"input {i} is a {type(x).__name__}, neither a tensor nor a number")
        for i, o in enumerate(outputs):
            packer.add(f"{name}/out{i}", o)
        clock.lap("copy_s")
        return {"name": name, "ok": True, "inputs": len(inputs), "outputs": len(outputs),
                "scalars": scalars,
                "fit_scale": spec.get("fit_scale", 1.0),
                "init_inputs": task_inputs.encode_init_inputs(init_inputs),
                "changed_constants": changes}

    def _ensure_sets(self, request):
        """The task and the named sets, rebuilt from `specs` when this
        server dropped them since they were prepared (the task fell out of
        MAX_TASKS, or another epoch of the task replaced a set): inputs are
        made from the same seeds, so they are the same inputs."""
        task = self.tasks.get(request["task_key"])
        missing = [n for n in request["sets"] if task is None or n not in task.sets]
        if not missing:
            return task
        if "specs" not in request or "source" not in request:
            raise ValueError(f"sets {missing} not prepared")
        task = self.task(request["task_key"], request["source"], request["device"])
        specs = {spec["name"]: spec for spec in request["specs"]}
        max_bytes = int(request.get("max_set_bytes", 1 << 28))
        for name in missing:
            *_, model_args, on_device = self._make_set(task, specs[name], request["init_seed"],
                                                       max_bytes)
            key, _ = task.model(*model_args)
            task.sets[name] = (key, on_device, model_args)
        return task

    def _baseline(self, request):
        """(fn, pool) for a baseline over the named sets, or (None, why)
        where the mode is unavailable."""
        task = self._ensure_sets(request)
        pool, model_args = [], None
        for name in request["sets"]:
            _, inputs, model_args = task.sets[name]
            pool.append(inputs)
        key, fn = task.model(*model_args)  # made again if dropped for room
        if request["mode"] == "compile":
            if not hasattr(torch, "compile"):
                return None, f"torch {torch.__version__} has no torch.compile"
            if key not in task.compiled:
                task.compiled[key] = torch.compile(fn)
            fn = task.compiled[key]
        return fn, pool

    def warm(self, request):
        """One untimed call of a baseline: torch.compile's compilation (seconds
        of host work) happens here, while the GPU is shared with candidates'
        correctness runs, not inside the timing that holds the GPU alone."""
        fn, pool = self._baseline(request)
        if fn is None:
            return {"type": "warmed", "unavailable": pool}, b""
        with torch.no_grad():
            fn(*pool[0])
        if str(request["device"]).startswith("cuda"):
            torch.cuda.synchronize(torch.device(request["device"]))
        return {"type": "warmed"}, b""

    def time(self, request):
        """Baseline trials over the named sets' inputs, by budget
        (timing.Budget, the same protocol as the candidate's)."""
        fn, pool = self._baseline(request)
        if fn is None:
            return {"type": "timed", "unavailable": pool}, b""
        if not self.profiled:
            # Candidates are timed in a process that has run the profiler
            # (their correctness runs are recorded), which may leave CUPTI
            # attached: the baselines are timed in the same state.
            launch_record.warm_up(request["device"])
            self.profiled = True
        timer = timing.Timer(request["device"])
        budget = timing.Budget(request)
        with torch.no_grad():
            timer.warm_up(fn, pool, budget)
            event_ms, host_ms = timer.run(fn, pool, budget)[:2]
        return {"type": "timed", "event_ms": event_ms, "host_ms": host_ms}, b""

    def serve(self):
        handlers = {"prepare": self.prepare, "fetch": self.fetch, "time": self.time,
                    "warm": self.warm, "device_info": self.device_info}
        while True:
            try:
                request, _, fds = protocol.recv_frame(self.sock, want_fds=True)
            except EOFError:
                return
            handler = handlers.get(request.get("type"))
            try:
                if handler is None:
                    raise ValueError(f"unknown request {request.get('type')!r}")
                # Baselines are timed with CUDA events, which use the current
                # device: another GPU's stream otherwise.
                make_current(request.get("device", "cpu"))
                # Only a prepare takes descriptors (its reply buffer).
                header, payload = (self.prepare(request, fds) if handler == self.prepare
                                   else handler(request))
            except Exception as e:
                header, payload = {"type": "error", "message": f"{type(e).__name__}: {e}",
                                   "traceback": traceback.format_exc(limit=8)}, b""
            finally:
                for fd in fds:
                    os.close(fd)
            header["id"] = request.get("id")
            protocol.send_frame(self.sock, header, payload)


def main():
    fd = int(sys.argv[1])
    sock = socket.socket(fileno=fd)
    torch.set_grad_enabled(False)
    ReferenceServer(sock).serve()


if __name__ == "__main__":
    main()
