"""The candidate sandbox, applied for real in a forked child: what a
candidate can no longer do once kforge_harness.sandbox.confine() ran."""

import json
import os
import shutil
import socket
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "verifier_worker", "harness"))

from kforge_harness import sandbox  # noqa: E402


def _attempt(fn):
    try:
        fn()
        return "allowed"
    except OSError as e:
        return f"denied:{e.errno}"


def run_confined(work_dir, probes, **overrides):
    """Forks, confines the child, runs each probe there; returns
    ({probe: outcome}, sandbox report)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        result = {}
        try:
            config = {"work_dir": work_dir, "device": "cpu", "max_open_files": 256,
                      "max_file_bytes": 1 << 20, "max_processes": 64, "memory_bytes": 1 << 30}
            config.update(overrides)
            result["report"] = sandbox.confine(config)
            result["probes"] = {name: _attempt(fn) for name, fn in probes.items()}
        except BaseException as e:  # report, never raise out of a fork
            result["error"] = repr(e)
        os.write(write_end, json.dumps(result).encode())
        os._exit(0)
    os.close(write_end)
    data = b""
    while chunk := os.read(read_end, 65536):
        data += chunk
    os.close(read_end)
    os.waitpid(pid, 0)
    result = json.loads(data)
    if "error" in result:
        raise AssertionError(result["error"])
    return result["probes"], result["report"]


def _start_and_join_a_thread():
    import threading
    ran = []
    t = threading.Thread(target=lambda: ran.append(1), name="kf-test-thread")
    t.start()
    t.join()
    if ran != [1]:
        raise OSError(0, "the thread did not run")


class SandboxTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.work = os.path.join(self.dir.name, "work")
        os.mkdir(self.work)
        self.outside = os.path.join(self.dir.name, "outside.txt")

    def tearDown(self):
        self.dir.cleanup()

    def test_network_sockets_are_refused_unix_sockets_work(self):
        probes, report = run_confined(self.work, {
            "inet": lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close(),
            "inet6": lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close(),
            "unix": lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close(),
        })
        if "seccomp" not in report["applied"]:
            self.skipTest(f"seccomp not applied here: {report['skipped']}")
        self.assertEqual(probes["inet"], "denied:13")
        self.assertEqual(probes["inet6"], "denied:13")
        self.assertEqual(probes["unix"], "allowed")

    def test_writes_outside_the_work_dir_are_refused(self):
        inside = os.path.join(self.work, "ok.txt")
        probes, report = run_confined(self.work, {
            "inside": lambda: open(inside, "w").close(),
            "outside": lambda: open(self.outside, "w").close(),
            "mkdir_outside": lambda: os.mkdir(os.path.join(self.dir.name, "newdir")),
            "devnull": lambda: open("/dev/null", "w").close(),
        })
        if "landlock" not in report["applied"]:
            self.skipTest(f"landlock not applied here: {report['skipped']}")
        self.assertEqual(probes["inside"], "allowed")
        self.assertEqual(probes["outside"], "denied:13")
        self.assertEqual(probes["mkdir_outside"], "denied:13")
        self.assertEqual(probes["devnull"], "allowed")
        self.assertFalse(os.path.exists(self.outside))

    def test_the_verifiers_secret_folders_cannot_be_read_everything_else_can(self):
        # The verifier's TLS key and token files, in a folder of their own
        # (a Kubernetes Secret: the key is reached through a "..data" link).
        secrets = os.path.join(self.dir.name, "tls")
        os.makedirs(os.path.join(secrets, "..2026_11_25"))
        with open(os.path.join(secrets, "..2026_11_25", "tls.key"), "w") as f:
            f.write("PRIVATE KEY")
        os.symlink("..2026_11_25", os.path.join(secrets, "..data"))
        os.symlink("..data/tls.key", os.path.join(secrets, "tls.key"))
        # A link elsewhere that points into the secret folder is no way in.
        os.symlink(os.path.join(secrets, "..2026_11_25"), os.path.join(self.dir.name, "alias"))
        with open(self.outside, "w") as f:
            f.write("public")

        def read(path):
            def probe():
                with open(path) as f:
                    return f.read()
            return probe

        probes = {
            "key": read(os.path.join(secrets, "tls.key")),
            "key_via_data": read(os.path.join(secrets, "..data", "tls.key")),
            "key_via_alias": read(os.path.join(self.dir.name, "alias", "tls.key")),
            "list_secrets": lambda: os.listdir(secrets),
            "sibling_file": read(self.outside),
            "python_stdlib": read(os.__file__),
            "import": lambda: __import__("json").dumps({}),
            "etc": read("/etc/hostname") if os.path.exists("/etc/hostname") else lambda: None,
        }
        outcome, report = run_confined(self.work, probes, secret_dirs=[secrets])
        if "landlock" not in report["applied"]:
            self.skipTest(f"landlock not applied here: {report['skipped']}")
        for secret in ("key", "key_via_data", "key_via_alias", "list_secrets"):
            self.assertTrue(outcome[secret].startswith("denied"), (secret, outcome[secret]))
        for public in ("sibling_file", "python_stdlib", "import", "etc"):
            self.assertEqual(outcome[public], "allowed", (public, outcome[public]))

    def test_without_secret_folders_reads_are_not_restricted(self):
        self.assertEqual(sandbox.readable_paths([]), [])
        with open(self.outside, "w") as f:
            f.write("public")
        def read():
            with open(self.outside) as f:
                return f.read()
        outcome, _ = run_confined(self.work, {"read": read})
        self.assertEqual(outcome["read"], "allowed")

    def test_tempfile_writes_in_the_work_dir_even_when_the_zygote_asked_first(self):
        # The zygote's imports ask tempfile for its folder before any
        # candidate exists; a confined child must not inherit that answer.
        tempfile.gettempdir()
        work = self.work
        def temp_in_work():
            with tempfile.NamedTemporaryFile(suffix=".ptx") as f:
                if os.path.dirname(f.name) != work:
                    raise OSError(1, f"made in {os.path.dirname(f.name)}")
        probes, _ = run_confined(self.work, {"named_temporary_file": temp_in_work})
        self.assertEqual(probes["named_temporary_file"], "allowed")

    def test_a_secret_folder_holding_what_candidates_need_stays_readable(self):
        # A key beside the checkout (a relative --tls path) names a folder
        # holding the harness; hiding it would fail every candidate.
        outside_secret = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, outside_secret, True)
        hideable, exposed = sandbox.hideable_secret_dirs(
            ["/", os.path.dirname(self.work), outside_secret, ""], [self.work, sys.prefix])
        self.assertEqual(hideable, [outside_secret])
        self.assertEqual([d for d, _ in exposed], ["/", os.path.dirname(self.work)])
        self.assertEqual(exposed[1][1], os.path.realpath(self.work))

    def test_no_escape_from_the_process_group_and_no_signals_outside_it(self):
        parent = os.getpid()
        probes, report = run_confined(self.work, {
            "setsid": os.setsid,
            "setpgid": lambda: os.setpgid(0, 0),
            "kill_parent": lambda: os.kill(parent, 0),
            "kill_own_group": lambda: os.killpg(os.getpgrp(), 0),
        })
        if "seccomp" not in report["applied"]:
            self.skipTest(f"seccomp not applied here: {report['skipped']}")
        self.assertEqual(probes["setsid"], "denied:1")
        self.assertEqual(probes["setpgid"], "denied:1")
        self.assertEqual(probes["kill_parent"], "denied:1")
        self.assertEqual(probes["kill_own_group"], "allowed")

    def test_the_other_doors_to_signals_sockets_and_namespaces_are_shut(self):
        # Routes a red team took past the kill and socket rules: a signal
        # queued with rt_sigqueueinfo or sent through a pidfd, a socket made
        # by io_uring; and clone's namespace flags.
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        parent = os.getpid()

        def syscall(*args):
            if libc.syscall(*args) == -1:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))

        siginfo = ctypes.create_string_buffer(128)
        params = ctypes.create_string_buffer(120)
        probes, report = run_confined(self.work, {
            "rt_sigqueueinfo": lambda: syscall(129, parent, 0, siginfo),
            "pidfd_open": lambda: syscall(434, parent, 0),
            "io_uring_setup": lambda: syscall(425, 4, params),
            "clone_new_user": lambda: syscall(56, 0x10000000 | 17, 0, 0, 0, 0),
            "clone3": lambda: syscall(435, 0, 0),
            "thread": lambda: _start_and_join_a_thread(),
            # syslog(SYSLOG_ACTION_SIZE_BUFFER): the kernel log's size
            "syslog": lambda: syscall(103, 10, 0, 0),
        })
        if "seccomp" not in report["applied"]:
            self.skipTest(f"seccomp not applied here: {report['skipped']}")
        for probe in ("rt_sigqueueinfo", "pidfd_open", "io_uring_setup", "clone_new_user",
                      "syslog"):
            self.assertEqual(probes[probe], "denied:1", probe)
        self.assertEqual(probes["clone3"], "denied:38", "ENOSYS, so glibc falls back to clone")
        self.assertEqual(probes["thread"], "allowed", "threads start through clone")

    def test_only_the_gpus_device_files_and_the_data_sinks_are_writable_in_dev(self):
        def write(path):
            with open(path, "w") as f:
                f.write("x")
        probes, report = run_confined(self.work, {
            "null": lambda: write("/dev/null"),
            "kmsg": lambda: write("/dev/kmsg"),
        })
        if "landlock" not in report["applied"]:
            self.skipTest(f"landlock not applied here: {report['skipped']}")
        self.assertEqual(probes["null"], "allowed")
        if os.path.exists("/dev/kmsg"):
            self.assertEqual(probes["kmsg"], "denied:13")
        self.assertEqual(sandbox.writable_devices("/nonexistent"), [])
        for path in sandbox.writable_devices():
            name = os.path.basename(path)
            self.assertTrue(name.startswith(("nvidia", "dri")) or name in
                            ("null", "zero", "full", "random", "urandom"), path)

    def test_the_report_names_landlocks_network_and_scope_rules_or_why_not(self):
        _, report = run_confined(self.work, {})
        if "landlock" not in report["applied"]:
            self.skipTest(f"landlock not applied here: {report['skipped']}")
        for part in ("network", "scope"):
            self.assertTrue(f"landlock:{part}" in report["applied"]
                            or any(s.startswith(f"landlock:{part} (") for s in report["skipped"]),
                            report)

    def test_child_processes_still_work_for_compilers(self):
        def spawn():
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
        probes, _ = run_confined(self.work, {"fork": spawn})
        self.assertEqual(probes["fork"], "allowed")

    def test_file_size_and_memory_limits(self):
        def big_file():
            with open(os.path.join(self.work, "big"), "wb") as f:
                f.write(b"x" * (2 << 20))

        def big_allocation():
            bytearray(1 << 31)
        probes, report = run_confined(self.work, {"big_file": big_file, "alloc": lambda: None},
                                      max_file_bytes=1 << 20)
        self.assertEqual(probes["big_file"], "denied:27")  # EFBIG
        self.assertIn("rlimits", report["applied"])
        # Without a memory cgroup the data limit stops a 2 GiB allocation.
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            sandbox.confine({"work_dir": self.work, "device": "cpu", "max_open_files": 64,
                             "max_file_bytes": 1 << 20, "max_processes": 64,
                             "memory_bytes": 256 << 20})
            try:
                big_allocation()
                os.write(write_end, b"allowed")
            except MemoryError:
                os.write(write_end, b"MemoryError")
            os._exit(0)
        os.close(write_end)
        outcome = os.read(read_end, 100)
        os.waitpid(pid, 0)
        self.assertEqual(outcome, b"MemoryError")

    def test_environment_points_into_the_work_dir(self):
        probes, _ = run_confined(self.work, {
            "home": lambda: None if os.environ["HOME"] == self.work else (_ for _ in ()).throw(OSError(0, "home")),
            "triton": lambda: None if os.environ["TRITON_CACHE_DIR"].startswith(self.work) else (_ for _ in ()).throw(OSError(0, "triton")),
            "cwd": lambda: None if os.getcwd() == os.path.realpath(self.work) else (_ for _ in ()).throw(OSError(0, os.getcwd())),
        })
        self.assertEqual(probes, {"home": "allowed", "triton": "allowed", "cwd": "allowed"})

    def test_triton_base_cache_is_copied_and_the_original_stays_untouched(self):
        base = os.path.join(self.dir.name, "base-cache")
        os.makedirs(os.path.join(base, "KEY"))
        original = os.path.join(base, "KEY", "cuda_utils.so")
        with open(original, "wb") as f:
            f.write(b"trusted")

        def overwrite_own_copy():
            # What a candidate may do to its own cache...
            with open(os.path.join(os.environ["TRITON_CACHE_DIR"], "KEY", "cuda_utils.so"), "wb") as f:
                f.write(b"poisoned")

        def overwrite_base():
            # ...and may not do to the verifier's.
            with open(original, "wb") as f:
                f.write(b"poisoned")

        probes, report = run_confined(self.work, {"own": overwrite_own_copy, "base": overwrite_base},
                                      triton_base_cache=base)
        self.assertIn("triton base cache", report["applied"])
        self.assertEqual(probes["own"], "allowed")
        if "landlock" in report["applied"]:
            self.assertTrue(probes["base"].startswith("denied"), probes)
            with open(original, "rb") as f:
                self.assertEqual(f.read(), b"trusted")
        with open(os.path.join(self.work, "triton-cache", "KEY", "cuda_utils.so"), "rb") as f:
            self.assertEqual(f.read(), b"poisoned")  # the copy, not a link

    def test_a_missing_base_cache_is_reported_not_fatal(self):
        _, report = run_confined(self.work, {}, triton_base_cache=os.path.join(self.dir.name, "none"))
        self.assertTrue(any(s.startswith("triton base cache") for s in report["skipped"]), report)


if __name__ == "__main__":
    unittest.main()
