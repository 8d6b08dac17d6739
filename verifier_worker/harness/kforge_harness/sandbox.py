"""Confines a freshly forked candidate process before its code loads.

Applied in this order, each step reported as applied or skipped (with why):
  session      setsid: own process group, so the verifier can kill the whole
               tree at once
  cgroups      join the per-candidate cgroups the verifier made (memory and
               pids limits that CUDA tolerates, unlike RLIMIT_AS)
  rlimits      open files, file size, no core dumps; processes (non-root);
               data size only where no memory cgroup could be joined
  filesystem   own working directory, HOME, TMPDIR and Triton cache (a copy
               of the verifier's trusted base cache, when it has one)
  landlock     writes, creates and deletes only beneath its own directory
               (and to the GPU's device files, which CUDA opens read-write,
               and /dev/shm); reads everywhere but the verifier's secret
               folders (its TLS key and token files), when it has any; where
               the kernel's Landlock has them, no TCP bind or connect (ABI 4)
               and no signals or abstract Unix sockets to processes outside
               the sandbox (ABI 6), whatever system call gets there
  seccomp      no sockets but Unix ones (no network), no ptrace, no new
               sessions or process groups, no mounts or namespaces, no
               signals to processes other than its own group, and none of
               the other doors to those: io_uring (whose socket and connect
               operations no filter sees), signals queued or sent through a
               pidfd, clone3 (its flags are out of a filter's reach: ENOSYS,
               and glibc falls back to clone, whose flags are checked)
"""

import ctypes
import os
import resource
import shutil
import struct
import sys
import tempfile

_libc = ctypes.CDLL(None, use_errno=True)

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


def _errno_message(what):
    err = ctypes.get_errno()
    return f"{what}: {os.strerror(err)}"


# --- seccomp ---------------------------------------------------------------

AUDIT_ARCH_X86_64 = 0xC000003E
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
EPERM, EACCES = 1, 13

# x86_64 syscall numbers refused outright.
DENIED_SYSCALLS = {
    "ptrace": 101, "setsid": 112, "setpgid": 109, "mount": 165, "umount2": 166,
    "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "kexec_load": 246,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "bpf": 321,
    "perf_event_open": 298, "keyctl": 250, "add_key": 248, "request_key": 249,
    "userfaultfd": 323, "reboot": 169, "swapon": 167, "swapoff": 168,
    "acct": 163, "settimeofday": 164, "clock_settime": 227, "adjtimex": 159,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "fanotify_init": 300,
    # Signals by other routes than kill/tgkill/tkill (a red team stopped a
    # process outside with rt_sigqueueinfo), and pidfds, which reach any
    # process by number.
    "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "pidfd_open": 434,
    "pidfd_send_signal": 424, "pidfd_getfd": 438, "process_madvise": 440,
    "process_mrelease": 448,
    # io_uring: its IORING_OP_SOCKET made an AF_INET socket that the socket
    # rule below never saw, and connected it.
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    # The new mount API (mount and umount2 are above).
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "mount_setattr": 442,
    # The kernel's log, read whole (a red team read it through ctypes).
    "syslog": 103,
}
SYS_CLONE, SYS_CLONE3 = 56, 435
ENOSYS = 38
# clone's flags that make namespaces (unshare and setns are denied above).
CLONE_NEW_NAMESPACES = (0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
                        | 0x20000000 | 0x40000000)  # mount cgroup uts ipc user pid net
SYS_SOCKET, SYS_KILL, SYS_TGKILL, SYS_TKILL = 41, 62, 234, 200
AF_UNIX = 1


class _Assembler:
    """A few classic-BPF instructions with labels resolved at the end."""

    LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06

    def __init__(self):
        self.code = []  # (op, k, jt_label, jf_label)
        self.labels = {}

    def label(self, name):
        self.labels[name] = len(self.code)

    def load(self, offset):
        self.code.append((self.LD_ABS, offset, None, None))

    def jump(self, op, k, jt=None, jf=None):
        self.code.append((op, k, jt, jf))

    def ret(self, k):
        self.code.append((self.RET, k, None, None))

    def assemble(self):
        out = []
        for i, (op, k, jt, jf) in enumerate(self.code):
            rel = lambda label: 0 if label is None else self.labels[label] - i - 1
            out.append(struct.pack("<HBBI", op, rel(jt), rel(jf), k & 0xFFFFFFFF))
        return b"".join(out)


def seccomp_program(pid):
    a = _Assembler()
    a.load(4)                                  # seccomp_data.arch
    a.jump(a.JEQ, AUDIT_ARCH_X86_64, "arch_ok", None)
    a.ret(RET_KILL_PROCESS)
    a.label("arch_ok")
    a.load(0)                                  # seccomp_data.nr
    a.jump(a.JGE, 0x40000000, "kill", None)    # x32 ABI
    for nr in sorted(DENIED_SYSCALLS.values()):
        a.jump(a.JEQ, nr, "eperm", None)
    a.jump(a.JEQ, SYS_SOCKET, "socket", None)
    a.jump(a.JEQ, SYS_KILL, "kill_check", None)
    a.jump(a.JEQ, SYS_TGKILL, "self_only", None)
    a.jump(a.JEQ, SYS_TKILL, "eperm", None)
    a.jump(a.JEQ, SYS_CLONE3, "enosys", None)
    a.jump(a.JEQ, SYS_CLONE, "clone_check", None)
    a.ret(RET_ALLOW)
    a.label("enosys")
    a.ret(RET_ERRNO | ENOSYS)
    a.label("clone_check")                     # clone(flags, ...): no new namespaces
    a.load(16)
    a.jump(a.JSET, CLONE_NEW_NAMESPACES, "eperm", "allow")
    a.label("socket")
    a.load(16)                                 # args[0] low 32 bits: domain
    a.jump(a.JEQ, AF_UNIX, "allow", None)
    a.ret(RET_ERRNO | EACCES)
    a.label("kill_check")                      # kill(0 | pid | -pgid, sig)
    a.load(16)
    a.jump(a.JEQ, 0, "allow", None)
    a.jump(a.JEQ, pid, "allow", None)
    a.jump(a.JEQ, -pid, "allow", None)
    a.ret(RET_ERRNO | EPERM)
    a.label("self_only")                       # tgkill(own tgid, ...)
    a.load(16)
    a.jump(a.JEQ, pid, "allow", None)
    a.label("eperm")
    a.ret(RET_ERRNO | EPERM)
    a.label("kill")
    a.ret(RET_KILL_PROCESS)
    a.label("allow")
    a.ret(RET_ALLOW)
    return a.assemble()


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp():
    if os.uname().machine != "x86_64":
        raise OSError(f"seccomp filter is written for x86_64, not {os.uname().machine}")
    program = seccomp_program(os.getpid())
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(_errno_message("prctl(PR_SET_SECCOMP)"))


# --- landlock --------------------------------------------------------------

SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1 << 1, 1 << 2, 1 << 3
LL_REMOVE_DIR, LL_REMOVE_FILE = 1 << 4, 1 << 5
LL_MAKE_ALL = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
LL_REFER, LL_TRUNCATE = 1 << 13, 1 << 14
LL_NET_BIND_TCP, LL_NET_CONNECT_TCP = 1 << 0, 1 << 1
LL_SCOPE_ABSTRACT_UNIX_SOCKET, LL_SCOPE_SIGNAL = 1 << 0, 1 << 1


# Besides its own directory, what a candidate may write: the device files
# CUDA opens read-write ("write": /dev/nvidia*, the data sinks), and CUDA's
# shared-memory files ("all": create and delete too). Its own /proc/<pid> is
# added at confinement (CUDA initialisation writes there; seen on an H100
# with driver 580). Not the rest of /dev: a red team wrote /dev/kmsg (the
# host's kernel log) with all of it writable.
EXTRA_WRITABLE = [("/dev/shm", "all")]
DEVICE_DIR = "/dev"
WRITABLE_DEVICES = ("null", "zero", "full", "random", "urandom")
WRITABLE_DEVICE_PREFIXES = ("nvidia", "dri")


def writable_devices(device_dir=DEVICE_DIR):
    """The entries of /dev a candidate may write: the GPU's (nvidiactl,
    nvidia0..N, nvidia-uvm, nvidia-caps/, dri/) and the data sinks."""
    try:
        entries = sorted(os.listdir(device_dir))
    except OSError:
        return []
    return [os.path.join(device_dir, e) for e in entries
            if e in WRITABLE_DEVICES or e.startswith(WRITABLE_DEVICE_PREFIXES)]


def readable_paths(secret_dirs):
    """Paths beneath which reads are granted so that everything stays
    readable but `secret_dirs`: for each folder on the way from / to a
    secret folder, its other entries. An entry that resolves into a secret
    folder (Kubernetes mounts a Secret as symlinks into a "..data" folder)
    is left out too. [] when there is nothing to hide."""
    secrets = {os.path.realpath(d) for d in secret_dirs if d}
    if not secrets:
        return []

    def hidden(path):
        real = os.path.realpath(path)
        return any(real == s or real.startswith(s.rstrip(os.sep) + os.sep) for s in secrets)

    ancestors = set()
    for secret in secrets:
        parts = secret.split(os.sep)
        for i in range(1, len(parts)):
            ancestors.add(os.sep.join(parts[:i]) or os.sep)
    paths = []
    for folder in sorted(ancestors):
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(folder, entry)
            if path not in ancestors and not hidden(path):
                paths.append(path)
    return paths


def hideable_secret_dirs(secret_dirs, needed):
    """Splits `secret_dirs` into those that can be hidden and those that
    cannot, with why: a folder that is / or holds something a candidate
    needs (its own directory, Python, the harness) stays readable, since
    hiding it would fail every candidate rather than protect a secret."""
    needed_real = [os.path.realpath(p) for p in needed if p]
    hideable, exposed = [], []
    for d in secret_dirs:
        if not d:
            continue
        real = os.path.realpath(d).rstrip(os.sep) + os.sep
        held = [p for p in needed_real if (p.rstrip(os.sep) + os.sep).startswith(real)]
        if real == os.sep or held:
            exposed.append((d, held[0] if held else "/"))
        else:
            hideable.append(d)
    return hideable, exposed


def _add_rule(ruleset, path, allowed):
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        beneath = struct.pack("<Qi", allowed, fd)
        if _libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, 1, beneath, 0) != 0:
            raise OSError(_errno_message(f"landlock_add_rule {path}"))
    finally:
        os.close(fd)


def install_landlock(writable_dir, secret_dirs=()):
    """Confines the filesystem; returns which of "network" and "scope" it
    also confined (those this kernel's Landlock ABI has)."""
    abi = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, 1)
    if abi < 1:
        raise OSError(_errno_message("landlock unavailable"))
    handled = LL_WRITE_FILE | LL_REMOVE_DIR | LL_REMOVE_FILE | LL_MAKE_ALL
    if abi >= 2:
        handled |= LL_REFER
    if abi >= 3:
        handled |= LL_TRUNCATE
    readable = readable_paths(secret_dirs)
    if readable:
        handled |= LL_READ_FILE | LL_READ_DIR
    # struct landlock_ruleset_attr grew a field per ABI: handled_access_net
    # (4) and scoped (6). Handled with no rule granting them, TCP binds and
    # connects, and signals and abstract Unix sockets to anything outside
    # the sandbox, are refused by the kernel itself, by any system call.
    confined = []
    fields = [handled]
    if abi >= 4:
        fields.append(LL_NET_BIND_TCP | LL_NET_CONNECT_TCP)
        confined.append("network")
    if abi >= 6:
        fields.append(LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL)
        confined.append("scope")
    attr = struct.pack(f"<{len(fields)}Q", *fields)
    ruleset = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, attr, len(attr), 0)
    if ruleset < 0:
        raise OSError(_errno_message("landlock_create_ruleset"))
    try:
        write_only = LL_WRITE_FILE | (LL_TRUNCATE if abi >= 3 else 0)
        rules = [(writable_dir, handled)] + [
            (path, handled if kind == "all" else write_only)
            for path, kind in EXTRA_WRITABLE + [(f"/proc/{os.getpid()}", "write")]
            if os.path.isdir(path)]
        # A device file takes file rights only; a folder of them (nvidia-caps,
        # dri) the same rights beneath it.
        rules += [(path, write_only) for path in writable_devices()]
        for path, allowed in rules:
            _add_rule(ruleset, path, allowed)
        for path in readable:
            # A file takes only file rights; anything else (a folder, a
            # device) the read rights that apply beneath it.
            try:
                is_file = os.path.isfile(path)
                _add_rule(ruleset, path, LL_READ_FILE if is_file else LL_READ_FILE | LL_READ_DIR)
            except OSError:
                continue  # vanished, or not openable: it stays unreadable
        if _libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(_errno_message("landlock_restrict_self"))
    finally:
        os.close(ruleset)
    return confined


# --- the rest ----------------------------------------------------------------

def _user_process_count():
    uid, count = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def _set_rlimits(config, joined, applied, skipped):
    limits = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_NOFILE, config["max_open_files"]),
              (resource.RLIMIT_FSIZE, config["max_file_bytes"])]
    if "pids" in joined:
        pass  # the pids cgroup bounds exactly this tree
    elif os.getuid() != 0:
        limits.append((resource.RLIMIT_NPROC, _user_process_count() + config["max_processes"]))
    else:
        skipped.append("process limit (root ignores RLIMIT_NPROC and no pids cgroup was joined)")
    if "memory" not in joined:
        limits.append((resource.RLIMIT_DATA, config["memory_bytes"]))
    for kind, value in limits:
        soft, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))
    applied.append("rlimits")


def _copy_if_there(src, dst):
    try:
        shutil.copy2(src, dst)
    except FileNotFoundError:
        pass


def confine(config):
    """Applies every step; returns {"applied": [...], "skipped": [...]}. A step
    that fails is skipped with its reason unless config marks it required."""
    applied, skipped = [], []
    os.setsid()
    applied.append("session")
    joined = set()
    for kind, procs_file in config.get("cgroups", {}).items():
        try:
            with open(procs_file, "w") as f:
                f.write(str(os.getpid()))
            applied.append(f"cgroup:{kind}")
            joined.update(kind.split("+"))
        except OSError as e:
            skipped.append(f"cgroup:{kind} ({e.strerror})")
    _set_rlimits(config, joined, applied, skipped)
    work = config["work_dir"]
    for var in ("HOME", "TMPDIR", "XDG_CACHE_HOME"):
        os.environ[var] = work
    # The zygote imported torch before any candidate existed, and something
    # in it already asked tempfile for its folder: that answer (/tmp, where
    # Landlock allows no writes) is cached until cleared. Triton writes its
    # PTX through tempfile.
    tempfile.tempdir = None
    os.environ["TRITON_CACHE_DIR"] = os.path.join(work, "triton-cache")
    base_cache = config.get("triton_base_cache", "")
    if base_cache:
        # A copy, never links: what this candidate writes into its cache must
        # not reach the next one. Done here, before Landlock narrows writes.
        try:
            # A trusted child may be building launchers into it meanwhile
            # (launchers.py): Triton writes each file in a temporary folder
            # (tmp.pid_*; *.tmp.pid_* files in older versions) and renames it
            # into place, so a file is whole or absent; the temporary ones
            # are left out, and one renamed away while copied is skipped.
            shutil.copytree(base_cache, os.environ["TRITON_CACHE_DIR"], dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("tmp.pid_*", "*.tmp.pid_*"),
                            copy_function=_copy_if_there)
            applied.append("triton base cache")
        except OSError as e:
            skipped.append(f"triton base cache ({e})")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, "inductor-cache")
    os.chdir(work)
    applied.append("filesystem")
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(_errno_message("prctl(PR_SET_NO_NEW_PRIVS)"))
    secrets, exposed = hideable_secret_dirs(config.get("secret_dirs", []), [
        work, sys.prefix, os.path.dirname(os.path.abspath(__file__))])
    skipped.extend(f"landlock hiding {d} (it holds what candidates need: {why})"
                   for d, why in exposed)
    for name, step in (("landlock", lambda: install_landlock(work, secrets)),
                       ("seccomp", install_seccomp)):
        try:
            parts = step()
            applied.append(name)
            if name == "landlock":
                applied.extend(f"landlock:{part}" for part in parts)
                skipped.extend(f"landlock:{part} (this kernel's Landlock has no such rules)"
                               for part in ("network", "scope") if part not in parts)
        except OSError as e:
            if name in config.get("required", []):
                raise
            skipped.append(f"{name} ({e})")
    return {"applied": applied, "skipped": skipped}
