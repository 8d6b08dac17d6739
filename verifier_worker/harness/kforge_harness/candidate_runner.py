"""Runs one candidate in a freshly forked, sandboxed child of the zygote.

The C++ verifier drives it over a private socket (protocol.py), one request
at a time:
  compile  {source, init_inputs, init_seed, device} + tiny inputs: executes
           the module, builds ModelNew as the reference was built (same init
           inputs, same seed), and calls it once on the tiny inputs, the
           first call it ever gets: Triton kernels compile (and autotune)
           in it, and with `attribute` it runs under the profiler
           (launch_record) and its launches come back with the outputs for
           stage 3
  warm     {sets: shapes and dtypes of later sets, no values}: forward runs
           once per entry, in threads, on random inputs made here, so those
           sets' compiles overlap; nothing of it is recorded or returned but
           an error that left the GPU unusable. With `background` the reply
           comes at once and the threads go on beside later requests; a run
           with `after_warm`, and every time, probe and attribute request,
           first waits for them
  run      {set, init_inputs} + inputs: poisons free memory, runs the model
           (the first call on these inputs recorded when `attribute` is
           set; then more when asked) and returns the outputs, the launches
           and, when asked, the inputs as they are afterwards (the verifier
           checks they are unchanged)
  time     {sets, budget, fresh_calls} + inputs of sets the candidate has
           never seen: timed trials over input sets already sent, by
           budget (timing.Budget), with each fresh set timed at a secret
           call among them; returns per-trial times, the fresh calls'
           times and outputs, the last output for a re-check, and the
           process's CPU and wall time over the whole
  attribute {set}: one recorded call on a set already sent (after timing)
  ping     -> pong: a spare process, kept ready before its candidate
           arrives, is checked alive before it is used
  exit
Results never travel on stdout or stderr; the verifier never reads them.
"""

import os
import sys
import time
import traceback
import types
from _thread import get_ident as _get_ident

from . import (audit, call_window, guards, launch_record, launchers, own_code, protocol, sandbox,
               task_inputs, thread_watch, timing, warmup)
from .device import make_current


class CandidateError(Exception):
    """A failure of the candidate (not of the harness), with a flag if any."""

    def __init__(self, message, flag=""):
        super().__init__(message)
        self.flag = flag


def _short_traceback(exc):
    # Only frames from the candidate module, so the message names its lines.
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    keep = [line for line in lines if "kforge_harness" not in line]
    return "".join(keep[-12:]).strip()


class Runner:
    def __init__(self, sock, config):
        self.sock = sock
        self.config = config
        self.device = config["device"]
        self.model = None
        self.model_init = None
        self.pool = {}  # set name -> [inputs on device]
        self.request = {}  # the request being served, and the descriptors
        self.fds = []      # that came with it (closed once it is answered)
        self.warming = None  # (threads, errors, entries) of a warm-up running
        # Threads running the candidate's code beside the harness's calls;
        # run_child installs it, so threads started through Python are seen
        # even after they ended.
        self.watch = thread_watch.ThreadWatch()
        # The candidate's code on this thread outside the calls the harness
        # makes (call_window.py); armed once its module has run.
        self.window = call_window.CallWindow()
        # What the candidate's code asks of the interpreter (audit.py); its
        # hook is installed by run_child, for good.
        triton = sys.modules.get("triton")
        self.audit = audit.Audit(os.path.dirname(os.path.abspath(__file__)),
                                 os.path.dirname(os.path.abspath(triton.__file__))
                                 if getattr(triton, "__file__", None) else "")
        self.guarded = ()  # guards.capture(), by run_child before the candidate loads
        self.own = None  # own_code.OwnCode, once the candidate's module is named

    # -- helpers --------------------------------------------------------

    def _make_model(self, init_inputs, dtype):
        """ModelNew as the reference server built Model: same init inputs,
        same seed, same device, same dtype."""
        import torch
        torch.manual_seed(self.init_seed)
        return self.window.call(self._construct, init_inputs, dtype)

    def _construct(self, init_inputs, dtype):
        import torch
        model = self.module.ModelNew(*task_inputs.decode_init_inputs(init_inputs))
        if not isinstance(model, torch.nn.Module):
            raise CandidateError("ModelNew(...) is not a torch.nn.Module")
        model = model.to(self.device)
        if dtype:
            model = model.to(getattr(torch, dtype))
        return model.eval()

    def forward(self, *inputs):
        """The model's forward, in the window where the candidate may run:
        what every call of the harness's goes through, timed or not."""
        return self.window.call(self.model, *inputs)

    @staticmethod
    def _model_key(init_inputs, dtype):
        """What decides a model's build: its init inputs and dtype."""
        return repr((init_inputs, dtype))

    def _build(self, init_inputs, dtype=""):
        key = self._model_key(init_inputs, dtype)
        if self.model is not None and key == self.model_init:
            return
        self.model = self._make_model(init_inputs, dtype)
        self.model_init = key

    def _warm_inputs(self, entry, generator):
        """Inputs of the entry's shapes and dtypes with values of our own:
        normal floats, zeros elsewhere (an index of 0 is always in range)."""
        import torch
        scalars = {int(s[0]): task_inputs.decode_scalar(s[1:]) for s in entry.get("scalars", [])}
        tensors = {}
        for t in entry.get("tensors", []):
            dtype = getattr(torch, t["dtype"])
            shape = [int(d) for d in t["shape"]]
            if dtype.is_floating_point:
                x = torch.randn(shape, generator=generator, device=self.device, dtype=dtype)
            else:
                x = torch.zeros(shape, device=self.device, dtype=dtype)
            tensors[int(t["position"])] = x
        count = len(scalars) + len(tensors)
        return [scalars[i] if i in scalars else tensors[i] for i in range(count)]

    def _model_bytes(self):
        return sum(t.numel() * t.element_size()
                   for t in list(self.model.parameters()) + list(self.model.buffers()))

    def _warm(self, entries, background=False, copy_max_bytes=0):
        """One forward call per entry, in threads, on inputs made here, so
        Triton compiles for those shapes and dtypes overlap instead of each
        set's first (recorded) call compiling in turn. Errors are the set's
        own run's to report, with its real inputs; None, or {set, message}
        when the GPU is unusable afterwards (an illegal address on those
        shapes), which every later call would meet.

        `background`: returns once the threads run (None); _end_warm waits
        for them. Later requests run beside them, so each thread calls a
        copy of the model of its own (built as the model was), not the one
        the recorded runs call, unless the model holds more than
        `copy_max_bytes`."""
        import threading
        import torch
        generator = torch.Generator(device=self.device)
        generator.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        own_copy = background and self._model_bytes() <= copy_max_bytes
        jobs = []
        for entry in entries:
            try:
                key = self._model_key(entry["init_inputs"], entry.get("dtype", ""))
                model = (self.model if key == self.model_init and not own_copy
                         else self._make_model(entry["init_inputs"], entry.get("dtype", "")))
                jobs.append((entry["set"], model, self._warm_inputs(entry, generator)))
            except Exception:  # noqa: BLE001 - the set's own run raises it again
                continue
        errors = {}

        def one(name, model, inputs):
            try:
                # The current CUDA device and grad mode are per thread, and
                # Triton launches on the current device.
                make_current(self.device)
                with self.watch.harness_thread(), torch.no_grad():
                    model(*inputs)
            except Exception as e:  # noqa: BLE001 - see the docstring
                errors[name] = e

        threads = [threading.Thread(target=one, args=job, name=f"kf-warm-{job[0]}")
                   for job in jobs]
        for t in threads:
            t.start()
        self.warming = (threads, errors, entries)
        if background:
            return None
        return self._end_warm()

    def _end_warm(self):
        """Waits for the warm-up's threads; None, or {set, message} as _warm."""
        if self.warming is None:
            return None
        import torch
        threads, errors, entries = self.warming
        self.warming = None
        for t in threads:
            t.join()
        if self.device.startswith("cuda"):
            try:
                torch.cuda.synchronize()
                torch.zeros(1, device=self.device).add_(1).item()
            except Exception as e:  # noqa: BLE001 - the context is gone
                name = next(iter(errors), entries[0]["set"] if entries else "")
                return {"set": name, "message": _short_traceback(errors.get(name, e))}
        self._check_guards()
        return None

    def _poison(self, nbytes):
        """Fills free allocator memory with NaN so an output element the
        candidate never writes cannot pass."""
        import torch
        if nbytes <= 0:
            return
        numel = max(1, nbytes // 4) * 2
        garbage = torch.full((numel,), float("nan"), dtype=torch.float32, device=self.device)
        del garbage

    def _call(self, inputs):
        import torch
        with torch.no_grad():
            result = self.forward(*inputs)
        return self._checked_outputs(result)

    def _recorded_call(self, inputs):
        """A call under the profiler: (outputs, record)."""
        outputs, record = launch_record.record(lambda: self._call(inputs), self.device)
        if not record["intact"]:
            raise CandidateError("the profiler was stopped during forward",
                                 "HACK_INTROSPECTION")
        return outputs, record

    def _checked_outputs(self, result):
        import torch
        # First: with a mode on torch's stacks every torch call below (a
        # tensor's device included) would run what the candidate put there.
        pushed = guards.modes_pushed()
        if pushed:
            raise CandidateError(f"the candidate left {pushed} on torch's stacks: they see every "
                                 "torch call the harness makes on its outputs",
                                 "HACK_TENSOR_SUBCLASS")
        # Exactly a tensor, tuple or list before anything is read from it: a
        # subclass's __iter__ (the candidate's code) would run as the
        # outputs are unpacked, after the call and its timing.
        # (A tensor of a subclass is refused below, as an output.)
        if not isinstance(result, torch.Tensor) and type(result) not in (tuple, list):
            raise CandidateError(f"forward returned a {type(result).__module__}."
                                 f"{type(result).__name__}, not a tensor or a plain tuple or "
                                 "list of them", "HACK_OUTPUT_NOT_PLAIN_TENSOR")
        outputs = task_inputs.as_output_list(result)
        for i, out in enumerate(outputs):
            if type(out) is not torch.Tensor:
                raise CandidateError(f"output {i} is a {type(out).__module__}.{type(out).__name__}, "
                                     "not a plain torch.Tensor", "HACK_OUTPUT_NOT_PLAIN_TENSOR")
            # Before any method of it is called: an attribute of the tensor's
            # own shadows the method of that name for it alone. A red team
            # returned an empty tensor whose own clone, is_floating_point and
            # numel (C-level chains, no frame of its own) ran the matmul when
            # the harness called them after the clock: 5.8x, every check right.
            own = _own_attributes(out)
            if own:
                raise CandidateError(f"output {i} carries attributes of its own ({own}), which "
                                     f"{_WHY_OWN}", "HACK_OUTPUT_NOT_PLAIN_TENSOR")
            if out.device.type != torch.device(self.device).type:
                raise CandidateError(f"output {i} is on {out.device}, expected {self.device}")
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        self._check_own([], "registers")  # the model's hooks, after every call
        self._check_threads()
        return outputs

    def _check_guards(self):
        patched = guards.replaced(self.guarded)
        if patched:
            raise CandidateError("replaced harness functions: " + ", ".join(patched),
                                 "HACK_PATCHED_FUNCTION")
        if self.own is not None:
            # Once a request: every class in the process is looked at.
            self._check_own(self.own.foreign_methods(), "binds as special methods")
        self._check_threads()

    def _check_own(self, foreign, what):
        """own_code.py: what others call must be the candidate's own functions."""
        if self.own is not None and self.model is not None:
            foreign = foreign + self.own.foreign_hooks(self.model)
        if foreign:
            raise CandidateError(f"the candidate {what} or hooks callables that are not functions "
                                 "of its own (they would run without a frame of its own, out of "
                                 "the run-time checks' sight): " + "; ".join(foreign[:6]),
                                 "HACK_INTROSPECTION")

    @staticmethod
    def _handed(inputs):
        """Copies of a set's tensors for a call the harness makes on them
        outside the timer (which clones its own): the pool's tensors, which
        the trials clone, are never the candidate's to keep. A red team kept
        the sets it was handed for correctness and wrote the answers into
        them in its first timed call, so every later clone carried them and
        each compare with its (equally changed) set agreed."""
        import torch
        # torch's clone itself, not the tensor's attribute: with clone_inputs
        # off the pool's tensors are handed to timed calls as they are.
        return [timing._clone(x) if isinstance(x, torch.Tensor) else x for x in inputs]

    @staticmethod
    def _copied(outputs):
        return [timing._clone(out) for out in outputs]

    @staticmethod
    def _check_agrees(outputs, first, tolerances, name):
        """`outputs` within tolerance of `first` (elementwise, or as a whole
        in relative L2, as the verifier compares with the reference)."""
        import torch
        if len(outputs) != len(first):
            raise CandidateError(f"a timed call on {name} returned {len(outputs)} outputs, the "
                                 f"first {len(first)}", "HACK_NONDETERMINISTIC")
        for i, (out, ref) in enumerate(zip(outputs, first)):
            agree = out.shape == ref.shape and out.dtype == ref.dtype
            if agree and not out.is_floating_point():
                agree = bool(torch.equal(out, ref))
            elif agree:
                atol, rtol = tolerances.get(str(out.dtype).replace("torch.", ""), (1e-4, 1e-4))
                agree = _agree(out, ref, atol, rtol)
            if not agree:
                raise CandidateError(f"a timed call's output {i} on {name} differs from the first "
                                     "call's on the same inputs: a timed call skipped the work",
                                     "HACK_NONDETERMINISTIC")

    @staticmethod
    def _check_unchanged(after, before, which):
        """`after` (a call's inputs, as it left them) holds what `before`
        (the set they were cloned from) holds, NaN for NaN."""
        import torch
        for i, (a, b) in enumerate(zip(after, before)):
            if not isinstance(a, torch.Tensor) or a is b:
                continue
            own = _own_attributes(a)
            if own:
                # Its own eq or is_floating_point would answer for it below.
                raise CandidateError(f"{which} gave its input {i} attributes of its own ({own}), "
                                     f"which {_WHY_OWN}", "HACK_INPUT_MUTATION")
            # torch's functions, not the tensors' methods: b is the pool's
            # own, handed to the candidate as it is with clone_inputs off.
            same = a.shape == b.shape and a.dtype == b.dtype and bool(
                (torch.eq(a, b) | (torch.isnan(a) & torch.isnan(b))).all()
                if torch.is_floating_point(a) else torch.eq(a, b).all())
            if not same:
                raise CandidateError(f"{which} changed its input {i}: a timed call may not "
                                     "write into its inputs", "HACK_INPUT_MUTATION")

    def _check_threads(self):
        """After every call: no thread but the harness's ran the candidate's
        code (thread_watch.py), nor did this one outside the harness's calls
        (call_window.py)."""
        ran = self.watch.offenders()
        if ran:
            raise CandidateError("the candidate's code ran on a thread of its own, beside the "
                                 "call the harness timed: " + "; ".join(ran), "HACK_CONCURRENCY")
        refused = self.audit.offenders()
        if refused:
            flag, _ = refused[0]
            raise CandidateError("the interpreter refused the candidate: "
                                 + "; ".join(message for _, message in refused), flag)
        deferred = self.window.offenders()
        if deferred:
            raise CandidateError("the candidate's code ran after forward had returned, outside "
                                 "the call the harness made (and timed): " + "; ".join(deferred),
                                 "HACK_CONCURRENCY")

    def _inputs(self, header, payload, name):
        """The set's inputs in order (_set_inputs), kept in the pool."""
        inputs = self._set_inputs(header, self._unpacked(header, payload, self.device), name)
        self.pool[name] = inputs
        return inputs

    def _unpacked(self, header, payload, device):
        """{name: tensor} of every tensor a request brought, on `device`."""
        tensors = protocol.unpack_tensors(header.get("tensors", []), payload, device)
        tensors.update(protocol.unpack_shared(header.get("shared_tensors", []), self.fds, device))
        return tensors

    @staticmethod
    def _set_inputs(header, tensors, name):
        """One set's inputs in order: its tensors, plain numbers (a scale
        factor) from the header's "scalars"."""
        scalars = {int(s[0]): task_inputs.decode_scalar(s[1:])
                   for s in header.get("scalars", {}).get(name, [])}
        count = len(scalars) + sum(1 for e in tensors if e.startswith(name + "/in"))
        return [scalars[i] if i in scalars else tensors[f"{name}/in{i}"] for i in range(count)]

    def _pack(self, header, named):
        """The reply: `named` tensors into the buffer the verifier offered
        if they fit, else into the payload."""
        offered = None
        if "reply_buffer" in self.request:
            offered = (self.fds[int(self.request["reply_buffer"])],
                       int(self.request["reply_capacity"]))
        entries, parts, in_buffer = protocol.pack_reply(named, offered)
        header["tensors"] = entries
        if in_buffer:
            header["payload_in_reply_buffer"] = True
        return header, parts

    def _reply_outputs(self, header, runs, inputs, record=None):
        for i, x in enumerate(inputs):
            own = _own_attributes(x) if type(x) is timing._Tensor else ""
            if own:
                raise CandidateError(f"the candidate gave its input {i} attributes of its own "
                                     f"({own}), which {_WHY_OWN}",
                                     "HACK_INPUT_MUTATION")
        named = [(f"run{r}/out{i}", out) for r, outputs in enumerate(runs)
                 for i, out in enumerate(outputs)]
        named += [(f"after/in{i}", x) for i, x in enumerate(inputs)
                  if not isinstance(x, (bool, int, float))]
        if record is not None:
            header["launches"] = record["launches"]
        return self._pack(header, named)

    # -- requests ---------------------------------------------------------

    def compile(self, request, payload):
        self.init_seed = int(request["init_seed"])
        self.module = types.ModuleType("candidate")
        self.module.__file__ = "candidate.py"
        # The candidate's source is written into its own directory so Triton
        # (which reads kernel source with inspect) can find it.
        with open("candidate.py", "w") as f:
            f.write(request["source"])
        sys.modules["candidate"] = self.module
        self.watch.set_candidate("candidate.py")
        self.window.set_candidate("candidate.py")
        self.audit.set_candidate("candidate.py")
        self.own = own_code.OwnCode("candidate.py", self.audit._kind)
        code = compile(request["source"], os.path.abspath("candidate.py"), "exec")
        exec(code, self.module.__dict__)
        if not hasattr(self.module, "ModelNew"):
            raise CandidateError("the module defines no ModelNew")
        self.window.arm()
        self._build(request["init_inputs"], request.get("dtype", ""))
        self._check_guards()
        inputs = self._inputs(request, payload, request["set"])
        given = self._handed(inputs)
        self._poison(request.get("poison_bytes", 0))
        # The first call on inputs the candidate has never seen is the
        # recorded one: no earlier call can have told it which calls are
        # watched. (Triton compiles and autotunes in it; that is host work and
        # the candidate's own kernels, which the attribution allows.)
        started = time.perf_counter()
        if request.get("attribute"):
            outputs, record = self._recorded_call(given)
        else:
            outputs, record = self._call(given), None
        call_s = time.perf_counter() - started
        self._check_guards()
        return self._reply_outputs({"type": "compiled", "call_s": call_s}, [outputs], given,
                                   record)

    def warm(self, request, payload):
        """See _warm; after compile, before the first run, or in the
        background (the reply comes at once)."""
        started = time.perf_counter()
        self._after_warm()  # one at a time
        background = bool(request.get("background"))
        warm_error = self._warm(request.get("sets", []), background,
                                int(request.get("copy_max_bytes", 0)))
        header = {"type": "warming" if background else "warmed",
                  "warm_s": time.perf_counter() - started}
        if warm_error is not None:
            header["warm_error"] = warm_error
        return header, b""

    def _after_warm(self):
        """Before a request that must not run beside a background warm-up:
        waits for it; a warm-up that left the GPU unusable fails this one."""
        warm_error = self._end_warm()
        if warm_error is not None:
            raise CandidateError(
                f"{warm_error['message']} (raised while the shapes of {warm_error['set']} "
                "compiled, on inputs of the same shapes; the GPU was unusable after it)")

    def run(self, request, payload):
        if request.get("after_warm"):
            self._after_warm()
        self._build(request["init_inputs"], request.get("dtype", ""))
        given = self._handed(self._inputs(request, payload, request["set"]))
        runs, record = [], None
        call_s = 0.0  # the calls alone, for the verdict's diagnostics
        repeat = int(request.get("repeat", 1))
        for r in range(repeat):
            self._poison(request.get("poison_bytes", 0))
            started = time.perf_counter()
            if r == 0 and request.get("attribute"):
                outputs, record = self._recorded_call(given)
            else:
                outputs = self._call(given)
            call_s += time.perf_counter() - started
            # A later call must not be able to rewrite what this one returned.
            runs.append(self._copied(outputs) if r + 1 < repeat else outputs)
        self._check_guards()
        returned = given if request.get("return_inputs", True) else []
        return self._reply_outputs({"type": "ran", "call_s": call_s}, runs, returned, record)

    def time(self, request, payload):
        # The pool's sets share the task's own shapes and dtype; the model
        # may have been rebuilt for another set (a dtype or size variant).
        self._after_warm()
        self._build(request["init_inputs"], request.get("dtype", ""))
        pool = [self.pool[name] for name in request["sets"]]
        timer = timing.Timer(self.device)
        budget = timing.Budget(request)
        # Only the model is timed, exactly as the reference server times the
        # baselines: each trial's output is checked (plain tensors on the
        # device) after its end event, outside the timed interval, and the
        # verifier re-checks the last one's values.
        # Calls the verifier chose in secret (indices into this run's calls)
        # run under the profiler instead of being timed, on fresh clones like
        # every trial; their outputs and launches go back, so a candidate
        # cannot save its library fallback, or skipped work, for timed calls.
        secret = {int(i) for i in request.get("recorded_calls", [])}
        recorded = []

        def record_call(args, index):
            outputs, record = self._recorded_call(args)
            self._check_unchanged(args, pool[index], "a call the verifier chose in secret")
            # Copied now: the trials after it run the candidate again.
            recorded.append((index, self._copied(outputs), record))

        # Every call's outputs agree with the first call's on the same set
        # (and the verifier compares the last and the recorded ones with the
        # reference): a candidate that skips the work on some timed calls,
        # hoping those are not the ones checked, is seen on the first.
        firsts = {}
        tolerances = request.get("tolerances", {})

        def check(result, index):
            outputs = self._checked_outputs(result)
            first = firsts.get(index)
            if first is None:
                firsts[index] = self._copied(outputs)
            else:
                self._check_agrees(outputs, first, tolerances, request["sets"][index])

        # Sets the candidate has never seen, timed at calls the verifier
        # chose in secret among the trials, in a trial's place and exactly
        # as one (TimingProtocol.fresh_input_probes): a cache keyed on
        # pointers or values misses there, and its real work shows.
        # They stay in host memory, out of the pool, until their call: a
        # Triton kernel reads any device address (and a red team read the
        # process's memory through NumPy, now denied, to compute them all
        # in the first warm-up call); on a GPU the harness copies each to
        # the device right before its call, outside the timed interval.
        fresh_calls, fresh_names, fresh_outputs = {}, {}, {}
        brought = self._unpacked(request, payload, "cpu")
        for entry in request.get("fresh_calls", []):
            call = int(entry["call"])
            fresh_calls[call] = self._set_inputs(request, brought, entry["set"])
            fresh_names[call] = entry["set"]

        def fresh_check(result, call):
            # Copied inside the timer's call, right after its clocks: a later
            # call, or a finalizer run as this call's output is dropped,
            # could otherwise finish (in place) what this one left undone.
            fresh_outputs[call] = self._copied(self._checked_outputs(result))

        import torch
        with torch.no_grad():
            timer.warm_up(self.forward, pool, budget, check=check, clone=budget.clone_inputs)
            event_ms, host_ms, result, index, fresh_times = timer.run(
                self.forward, pool, budget, request.get("start", 0), check=check,
                aside=(secret, record_call), fresh=(fresh_calls, fresh_check))
        # The inputs the last timed call was given (its own clones when
        # budget.clone_inputs), as it left them: no call knows in advance
        # whether it is the last or a secret one, so a candidate that writes
        # into its inputs in timed calls only (as in place of allocating an
        # output: 1.6-1.9x for a ReLU that way) is seen.
        if timer.last_args is not None:
            self._check_unchanged(timer.last_args, pool[index], "the last timed call")
        outputs = task_inputs.as_output_list(result)
        self._check_guards()
        named = [(f"last/out{i}", out) for i, out in enumerate(outputs)]
        records = []
        for n, (pool_index, rec_outputs, record) in enumerate(recorded):
            named += [(f"rec{n}/out{i}", out) for i, out in enumerate(rec_outputs)]
            records.append({"set": request["sets"][pool_index], "launches": record["launches"]})
        fresh_sets, fresh_ms, fresh_cpu_ms = [], [], []
        for call in sorted(fresh_times):
            ev, host, cpu = fresh_times[call]
            fresh_sets.append(fresh_names[call])
            fresh_ms.append(ev if ev is not None else host)
            fresh_cpu_ms.append(cpu)
            named += [(f"{fresh_names[call]}/out{i}", out)
                      for i, out in enumerate(fresh_outputs[call])]
        # The process's CPU time over the request is the verifier's to read,
        # from outside (CandidateSession::CpuTime), not this process's to
        # report.
        return self._pack({"type": "timed", "event_ms": event_ms, "host_ms": host_ms,
                           "last_set": request["sets"][index], "recorded": records,
                           "fresh_sets": fresh_sets, "fresh_ms": fresh_ms,
                           # On the CPU: each fresh call's process CPU time, for
                           # work on threads kept to the few calls the request's
                           # CPU time barely shows (TimingProtocol.cpu_time_margin_ms).
                           **({} if timer.cuda else {"fresh_cpu_ms": fresh_cpu_ms})}, named)

    def attribute(self, request, payload):
        """One recorded call on a set already sent: what forward launches
        after its timed runs."""
        self._after_warm()
        _, record = self._recorded_call(self._handed(self.pool[request["set"]]))
        self._check_guards()
        return {"type": "attributed", "launches": record["launches"]}, b""

    def serve(self):
        # Bound before any candidate code runs, in this frame's locals,
        # which the candidate cannot reach: whatever it replaced, the last
        # look before each reply is the real one and the reply goes out
        # through the real send (guards.py).
        check, captured, send = guards.replaced, self.guarded, protocol.send_frame
        refused = self.audit.offenders
        # The harness's own watchers, by the objects and values they must
        # keep: a red team (through gc, from code torch.fx generated) set
        # the audit's and the call window's candidate file to None, so
        # neither judged anything, and gave the runner an instance
        # attribute `_pack` that shadowed the method packing every reply.
        watchers, candidate_file = (self.audit, self.window, self.watch), os.path.abspath(
            "candidate.py")
        judging, me = self.audit._inside, _get_ident()
        methods = frozenset(name for name, member in vars(Runner).items() if callable(member))
        compiled = False

        def harness_changed(_getattr=getattr, _vars=vars, _sorted=sorted):
            changed = _sorted(methods.intersection(_vars(self)))
            if (self.audit, self.window, self.watch) != watchers:
                changed.append("the runner's watchers")
            elif (self.audit._inside is not judging or me in judging
                  or self.audit._kinds.get(candidate_file, "candidate") != "candidate"):
                # This thread marked as judging an event judges nothing on
                # it; the candidate's file named another kind, neither (a
                # red team set _inside). Another thread's mark is its own:
                # a background warm-up's compile is judged as the reply goes.
                changed.append("the audit's state")
            elif compiled:
                changed += [f"{_getattr(_getattr(w, '__class__', None), '__name__', '?')}"
                            f".candidate_file" for w in watchers
                            if _getattr(w, "candidate_file", None) != candidate_file]
            return changed
        handlers = {"compile": self.compile, "warm": self.warm, "run": self.run,
                    "time": self.time, "attribute": self.attribute,
                    "ping": lambda request, payload: ({"type": "pong"}, b"")}
        while True:
            request, payload, self.fds = protocol.recv_frame(self.sock, want_fds=True)
            self.request = request
            if request.get("type") == "exit":
                return
            compiled = compiled or request.get("type") == "compile"
            handler = handlers.get(request.get("type"))
            try:
                if handler is None:
                    raise ValueError(f"unknown request {request.get('type')!r}")
                header, out = handler(request, payload)
            except CandidateError as e:
                header, out = {"type": "failed", "message": str(e), "flag": e.flag}, b""
            except timing.ChangedAfterTheClock as e:
                header, out = {"type": "failed", "message": str(e),
                               "flag": "HACK_CONCURRENCY"}, b""
            except Exception as e:  # the candidate's code raised
                header, out = {"type": "failed", "message": _short_traceback(e), "flag": ""}, b""
            else:
                # What Triton had to build here, for the verifier to build
                # ahead for the next candidates (launchers.py).
                built = launchers.signatures()
                if built:
                    header["launchers"] = built
            finally:
                # Mappings made from them stay valid; the descriptors go.
                for fd in self.fds:
                    try:
                        os.close(fd)
                    except OSError:
                        pass  # the candidate closed it; its reply says what it broke
                self.fds = []
            patched, asked = check(captured) + harness_changed(), refused()
            if patched:
                header, out = {"type": "failed", "flag": "HACK_PATCHED_FUNCTION",
                               "message": "replaced harness functions: " + ", ".join(patched)}, b""
            elif asked:
                header, out = {"type": "failed", "flag": asked[0][0],
                               "message": "the interpreter refused the candidate: "
                                          + "; ".join(message for _, message in asked)}, b""
            send(self.sock, header, out)


# Elements compared at once: the temporaries of a chunk (three fp32 copies)
# stay near 200 MB whatever the output's size (a level-1 ReLU's is 6.4 GB).
_AGREE_CHUNK = 1 << 24


_TENSOR_SLOTS = ("_backward_hooks", "_post_accumulate_grad_hooks")
_WHY_OWN = ("shadow a tensor's methods or run code where the harness drops the tensor, after "
            "the call")


def _slot_of(tensor, name):
    """A slot's value as torch.Tensor's own descriptor reads it (None where
    this torch has no such slot)."""
    import torch
    for klass in type.__dict__["__mro__"].__get__(torch.Tensor):
        descriptor = type.__dict__["__dict__"].__get__(klass).get(name)
        if descriptor is not None:
            return descriptor.__get__(tensor, torch.Tensor)
    return None


def _own_attributes(tensor, _vars=vars, _type=type, _str=str, _len=len):
    """What a tensor, or a tensor it views, holds of its own (see _held):
    "" for tensors as torch makes them. A view keeps its base's Python
    object alive, with whatever that holds (a red team hung an object with
    a frameless __del__ on the base of the view it returned)."""
    base = tensor
    while base is not None:
        own = _held(base, _vars, _type, _str, _len)
        if own:
            return own if base is tensor else f"its base's {own}"
        base = _slot_of(base, "_base")
    return ""


def _held(tensor, _vars, _type, _str, _len):
    """What a tensor holds in its own __dict__ (a data descriptor of the
    type, which no attribute of the instance shadows): "" for a tensor as
    torch makes it, else the names (those that are strings; no code of the
    candidate's runs to name the others)."""
    own = _vars(tensor)
    # The C slots that hold any object for the tensor (autograd's hook
    # dicts): a red team hung an object whose __del__ was a library's
    # callable on an output's _backward_hooks, to run in the harness's frames.
    slots = [name for name in _TENSOR_SLOTS if _slot_of(tensor, name) is not None]
    slots += [f"a weak reference's callback ({c})" for c in own_code.frameless_callbacks(tensor)]
    if slots:
        return ", ".join(slots)
    if not own:
        return ""
    names = [key for key in own if _type(key) is _str]
    return ", ".join(names) if _len(names) == _len(own) else f"{_len(own)} entries"


def _agree(out, ref, atol, rtol):
    """Elementwise within atol + rtol|ref|, or the whole within rtol in
    relative L2, as reference_set.cc judges outputs: a NaN or infinite
    element of `ref` matches only the same in `out` and stays out of the
    sums."""
    import torch
    o, r = out.reshape(-1), ref.reshape(-1)

    def chunks():  # made one at a time: an fp16 output's float copy is twice its size
        for i in range(0, o.numel(), _AGREE_CHUNK):
            oc, rc = o[i:i + _AGREE_CHUNK].float(), r[i:i + _AGREE_CHUNK].float()
            yield oc, rc, (oc == rc) | (oc.isnan() & rc.isnan())

    if all(bool(((torch.isfinite(rc) & ((oc - rc).abs() <= atol + rtol * rc.abs())) | same).all())
           for oc, rc, same in chunks()):
        return True
    diff_sq = ref_sq = 0.0
    for oc, rc, same in chunks():
        finite = torch.isfinite(rc)
        if not bool((finite | same).all()) or not bool(torch.isfinite(oc[finite]).all()):
            return False
        diff_sq += float((oc[finite] - rc[finite]).double().pow(2).sum())
        ref_sq += float(rc[finite].double().pow(2).sum())
    return ref_sq > 0 and diff_sq ** 0.5 <= rtol * ref_sq ** 0.5


def _keep_freed_memory_in_heap():
    """On the CPU, freed blocks below 32 MiB stay in malloc's heap (instead
    of going back to the kernel, which would hand out zeroed pages), so the
    NaN poison written before each run is what an unwritten output holds."""
    import ctypes
    libc = ctypes.CDLL(None)
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 32 << 20)
    libc.mallopt(m_trim_threshold, 1 << 30)


def run_child(sock, config):
    """Entry point in the forked child; never returns."""
    code = 0
    try:
        report = sandbox.confine(config)
        if not config["device"].startswith("cuda"):
            _keep_freed_memory_in_heap()
        import torch
        torch.set_num_threads(config.get("threads", 1))
        # Before any candidate code (which may not change it): Triton and
        # CUDA events use the current device, not the tensors' one.
        make_current(config["device"])
        if config.get("warm_up"):
            warmup.warm_process(config["device"])
            launch_record.warm_up(config["device"])
        else:
            # The profiler's first start imports what it needs lazily, and on
            # torch 2.x that import (torch._dynamo) rebinds torch.manual_seed
            # to a wrapped copy: started here, before the guarded functions
            # are captured, it cannot look like the candidate's doing (seen
            # on an H100: a first candidate without a spare process was
            # failed with "replaced harness functions: torch.manual_seed").
            # The CPU needs no CUDA context, so this costs a spare nothing.
            launch_record.warm_up("cpu")
        launchers.record()
        runner = Runner(sock, config)
        runner.watch.install()  # before the capture: the thread starters are guarded too
        runner.audit.install()  # for good: an audit hook cannot be removed
        runner.guarded = guards.capture()
        protocol.send_frame(sock, {"type": "ready", "pid": os.getpid(), **report})
        runner.serve()
    except EOFError:
        pass
    except BaseException:
        try:
            protocol.send_frame(sock, {"type": "failed", "message": traceback.format_exc(limit=6),
                                       "flag": ""})
        except OSError:
            pass
        code = 70
    finally:
        os._exit(code)
