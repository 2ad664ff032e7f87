"""Fixtures of the Python package's tests: the real daemon
(build/daemon/cudackptd) on the simulated driver, on a socket in a fresh
directory, and simulated CUDA processes to act on.

ctest passes the programs' paths in CUDACKPT_TEST_DAEMON and
CUDACKPT_TEST_SIM (tests/CMakeLists.txt); the package is imported from
python/ (tests/python/CMakeLists.txt puts it on PYTHONPATH).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, Iterator, List, Optional

import pytest

import cudackpt

READY_TIMEOUT_S = 20.0
SIM_DEVICES = ("GPU-00000000-5157-4000-8000-000000000001", "GPU-00000000-5157-4000-8000-000000000002")


def need_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail("%s is not set: run these tests through ctest (cd build && ctest -R python)" % name)
    return value


def await_true(what: str, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Waits until predicate() is true, failing after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(0.005)


def _sanitizer_runtime(lib: str) -> Optional[str]:
    """The sanitizer runtime a sanitizer build's simulator links (it must
    be preloaded before it), or None."""
    try:
        out = subprocess.run(["ldd", lib], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith(("libasan.so", "libtsan.so")) and len(parts) >= 3:
            return parts[2]
    return None


class Daemon:
    """cudackptd started on the simulator, in a directory of its own: its
    socket, config, log and (RUNTIME_DIRECTORY being unset) its lease
    store, leases.json.  kill() and restart() stop it by SIGKILL and start
    it again there, on the same socket and store."""

    def __init__(self, config: Dict[str, object], env: Dict[str, str]) -> None:
        self.binary = need_env("CUDACKPT_TEST_DAEMON")
        self.sim = need_env("CUDACKPT_TEST_SIM")
        self.dir = tempfile.mkdtemp(prefix="cudackpt-py-")
        os.chmod(self.dir, 0o755)  # another uid reaches the socket inside
        self.socket = os.path.join(self.dir, "sock")
        self.log_path = os.path.join(self.dir, "daemon.log")
        with open(os.path.join(self.dir, "config.json"), "w") as f:
            json.dump(config, f)
        self._env = env
        self._spawn("w")

    def _spawn(self, log_mode: str) -> None:
        notify_path = os.path.join(self.dir, "notify")
        try:
            os.unlink(notify_path)
        except FileNotFoundError:
            pass
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        child_env = {k: v for k, v in os.environ.items()
                     if k in ("PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS")}
        child_env.update(self._env)
        child_env["NOTIFY_SOCKET"] = notify_path
        with open(self.log_path, log_mode) as log:
            self.proc = subprocess.Popen(
                [self.binary, "--socket=" + self.socket, "--driver=" + self.sim,
                 "--config=" + os.path.join(self.dir, "config.json"), "--log-level=debug"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=child_env)
        try:
            self._await_ready(notify)
        except BaseException:
            self.proc.kill()  # never left behind, serving nobody
            self.proc.wait(timeout=20)
            raise
        finally:
            notify.close()

    def kill(self) -> None:
        """SIGKILL: the daemon dies as by a crash, its socket file left
        behind (refusing), its lease store as at its last reply."""
        assert self.proc.poll() is None, "the daemon died during the test:\n" + self.log()
        self.proc.kill()
        self.proc.wait(timeout=20)
        assert self.proc.returncode == -signal.SIGKILL

    def restart(self) -> None:
        """Starts it again after kill(), on the same socket, config and
        store; returns once it is READY (its leases read back)."""
        assert self.proc.poll() is not None, "kill() it first"
        self._spawn("a")

    def _await_ready(self, notify: socket.socket) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                pytest.fail("the daemon exited (%s) before READY=1:\n%s" % (self.proc.returncode, self.log()))
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail("the daemon sent no READY=1 in %.0f s:\n%s" % (READY_TIMEOUT_S, self.log()))
            notify.settimeout(min(left, 0.2))
            try:
                data = notify.recv(4096)
            except socket.timeout:
                continue
            if "READY=1" in data.decode(errors="replace").splitlines():
                return

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def serving(config: Dict[str, object], env: Dict[str, str]) -> Iterator[Daemon]:
    """A daemon that CUDACKPT_SOCKET names while it serves, so the
    package's default client talks to it."""
    d = Daemon(config, env)
    old = os.environ.get("CUDACKPT_SOCKET")
    os.environ["CUDACKPT_SOCKET"] = d.socket
    cudackpt.set_default_client(None)
    try:
        yield d
    finally:
        cudackpt.set_default_client(None)
        if old is None:
            os.environ.pop("CUDACKPT_SOCKET", None)
        else:
            os.environ["CUDACKPT_SOCKET"] = old
        if d.proc.poll() is not None:
            print(d.log(), file=sys.stderr)
        d.stop()


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    """One daemon for the session, with two simulated GPUs."""
    with serving({"watch_scan_ms": 100, "progress_interval_ms": 50},
                 {"CUDACKPT_SIM_DEVICE_COUNT": str(len(SIM_DEVICES))}) as d:
        yield d


class Targets:
    """Simulated CUDA processes (``sleep`` with the simulator preloaded and
    CUDACKPT_SIM=1), killed at the end of the test."""

    def __init__(self) -> None:
        self.sim = need_env("CUDACKPT_TEST_SIM")
        runtime = _sanitizer_runtime(self.sim)
        self.preload = "%s:%s" % (runtime, self.sim) if runtime else self.sim
        self.procs: List[subprocess.Popen] = []

    def env(self, cuda: bool = True, **extra: str) -> Dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_PRELOAD": self.preload,
               "CUDACKPT_SIM_MEM_MIB": "8"}
        if cuda:
            env["CUDACKPT_SIM"] = "1"
        env.update(extra)
        return env

    def start(self, argv: Optional[List[str]] = None, cuda: bool = True, **extra: str) -> int:
        """Starts a target and returns its pid once it maps the simulator."""
        proc = subprocess.Popen(argv or ["sleep", "3600"], env=self.env(cuda, **extra),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.procs.append(proc)
        self.await_mapped(proc.pid)
        return proc.pid

    def await_mapped(self, pid: int) -> None:
        lib = os.path.basename(self.sim)

        # As code: ld.so maps a library's first, read-only segment before
        # its code, and the daemon counts a process that maps the driver as
        # code (a slow start, under ASan say, shows the first alone).
        def mapped() -> bool:
            try:
                with open("/proc/%d/maps" % pid) as f:
                    return any(lib in line and line.split()[1][2] == "x" for line in f)
            except (OSError, IndexError):
                return False
        await_true("pid %d to map %s" % (pid, lib), mapped)

    def kill(self, pid: int) -> None:
        for proc in self.procs:
            if proc.pid == pid:
                proc.kill()
                proc.wait(timeout=20)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGCONT)
                except OSError:
                    pass
                proc.kill()
            proc.wait(timeout=20)


@pytest.fixture
def targets(daemon: Daemon) -> Iterator[Targets]:
    t = Targets()
    try:
        yield t
    finally:
        t.stop_all()


@pytest.fixture
def target(targets: Targets) -> int:
    """One simulated CUDA process, running."""
    return targets.start()


@pytest.fixture
def open_dir() -> Iterator["pathlib.Path"]:
    """A fresh directory in /tmp that every uid may read (pytest's tmp_path
    is private to root)."""
    path = tempfile.mkdtemp(prefix="cudackpt-py-open-")
    os.chmod(path, 0o755)
    try:
        yield pathlib.Path(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def dead_pid() -> int:
    """A pid that no process has (one that has just exited and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait(timeout=20)
    return proc.pid


def start_time_of(pid: int) -> int:
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


# ---- skips that `make test` reports ------------------------------------------
#
# ctest runs each file as one test (tests/python/CMakeLists.txt).  A file
# whose every test skipped exits 77, which ctest reports as skipped; the
# skips of a file that also ran tests stay in its output as -rs prints
# them ("SKIPPED [N] FILE:LINE: why"), which tests/skipped.py lists.
SKIP_EXIT_STATUS = 77
_outcomes: Dict[str, set] = {"ran": set(), "skipped": set()}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _outcomes["skipped"].add(report.nodeid)
    elif report.when == "call" or report.failed:
        _outcomes["ran"].add(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == 0 and _outcomes["skipped"] and not _outcomes["ran"] - _outcomes["skipped"]:
        session.exitstatus = SKIP_EXIT_STATUS
