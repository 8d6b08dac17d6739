"""The zygote: a trusted, single-threaded Python with torch (and Triton)
imported and CUDA untouched (CUDA does not survive fork). It runs stage 1
(static checks: parsing only, never executing candidate code) and forks one
fresh child per candidate, which costs milliseconds instead of the seconds of
a new Python importing torch.

Run as `python -m kforge_harness.zygote FD`; FD is a connected Unix socket to
the C++ verifier. Requests (frames):
  static_check {id, source, require_triton, max_bytes} -> static_result
  spawn {id, config} + one fd (the candidate's channel) -> spawned {id, pid}
  fill_cache {id, dir, device, timeout_s} -> filled {id} | error: fills the
      trusted base Triton cache in a child that never sees candidate code
  build_launchers {id, dir, device, signatures} -> building {id, pid}: a
      child of the same kind makes those launchers into the base cache
      (launchers.py); answered at once, its end comes as `exited`
  ping -> pong {python, torch, triton}
and, unprompted, exited {pid, exit_code | signal} when a child ends.
"""

import os
import select
import time
import signal
import socket
import sys
import traceback

# Everything a child needs is imported here, before any fork.
import torch  # noqa: F401  (pre-imported for the children)
import torch.nn  # noqa: F401
import torch.nn.functional  # noqa: F401

# torch 2.x: importing torch._dynamo rebinds torch.manual_seed (to a copy
# wrapped against tracing). The profiler and Triton may import it lazily;
# imported here, before any fork, every child captures the rebound function
# as the one to guard, and pays nothing for the import.
try:
    import torch._dynamo  # noqa: F401
except Exception:  # torch 1.x has none; a broken one must not stop the zygote
    pass

try:
    import triton  # noqa: F401
    import triton.language  # noqa: F401
    TRITON_VERSION = triton.__version__
except ImportError:
    TRITON_VERSION = ""

from . import (candidate_runner, guards, launchers, protocol, sandbox, static_check,  # noqa: F401
               task_inputs, timing, warmup)


def _static_check(request):
    result = static_check.check_source(request["source"], bool(request.get("require_triton", True)),
                                       int(request.get("max_bytes", 262144)))
    result["type"] = "static_result"
    return result


class ZygoteChannels:
    """The zygote's own channels, which no child keeps: the control socket
    to the verifier and the pipe its SIGCHLD wakes the loop through (a
    candidate holding the pipe could wake the zygote's reaper at will)."""

    def __init__(self, control):
        self.control = control
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_write, False)
        signal.set_wakeup_fd(self.wake_write)
        # A handler must exist for the wakeup fd to see SIGCHLD.
        signal.signal(signal.SIGCHLD, lambda *_: None)

    def leave(self):
        """In a child just forked: drops the channels and the signal setup."""
        self.control.close()
        signal.set_wakeup_fd(-1)
        os.close(self.wake_read)
        os.close(self.wake_write)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _spawn(channels, request, fds):
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        return {"type": "error", "message": f"spawn needs exactly one fd, got {len(fds)}"}
    pid = os.fork()
    if pid == 0:
        channels.leave()
        candidate_runner.run_child(socket.socket(fileno=fds[0]), request["config"])
    os.close(fds[0])
    return {"type": "spawned", "pid": pid}


def _trusted_child(channels, work):
    """Forks a child that never sees candidate code and runs work() in it;
    its pid. The child exits 0, or 1 with the traceback on stderr."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            channels.leave()
            work()
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    return pid


def _fill_cache(channels, request):
    pid = _trusted_child(channels, lambda: warmup.fill_base_cache(request["dir"], request["device"]))
    # Waited for here (the SIGCHLD reaper then finds nothing): this runs once,
    # when the verifier starts, before any candidate is forked.
    deadline = time.monotonic() + float(request.get("timeout_s", 120))
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"type": "error", "message": "filling the Triton base cache timed out"}
        time.sleep(0.02)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return {"type": "error", "message": "filling the Triton base cache failed (see the zygote's log)"}
    return {"type": "filled"}


def _build_launchers(channels, request):
    def build():
        made = launchers.build(request["dir"], request["device"], request["signatures"])
        print(f"kforge: {made} Triton launcher(s) built into the base cache", file=sys.stderr)
    return {"type": "building", "pid": _trusted_child(channels, build)}


def _reap(control):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        message = {"type": "exited", "pid": pid}
        if os.WIFSIGNALED(status):
            message["signal"] = os.WTERMSIG(status)
        else:
            message["exit_code"] = os.WEXITSTATUS(status)
        protocol.send_frame(control, message)


def serve(control):
    channels = ZygoteChannels(control)
    while True:
        ready, _, _ = select.select([control, channels.wake_read], [], [])
        if channels.wake_read in ready:
            os.read(channels.wake_read, 4096)
            _reap(control)
        if control not in ready:
            continue
        try:
            request, _payload, fds = protocol.recv_frame(control, want_fds=True)
        except EOFError:
            return
        kind = request.get("type")
        try:
            if kind == "static_check":
                reply = _static_check(request)
            elif kind == "spawn":
                reply = _spawn(channels, request, fds)
            elif kind == "fill_cache":
                reply = _fill_cache(channels, request)
            elif kind == "build_launchers":
                reply = _build_launchers(channels, request)
            elif kind == "ping":
                reply = {"type": "pong", "python": sys.version.split()[0],
                         "torch": torch.__version__, "triton": TRITON_VERSION}
            else:
                reply = {"type": "error", "message": f"unknown request {kind!r}"}
        except Exception as e:
            reply = {"type": "error", "message": f"{type(e).__name__}: {e}",
                     "traceback": traceback.format_exc(limit=6)}
        reply["id"] = request.get("id")
        protocol.send_frame(control, reply)


def main():
    control = socket.socket(fileno=int(sys.argv[1]))
    serve(control)


if __name__ == "__main__":
    main()
