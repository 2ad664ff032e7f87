"""Fixtures of the Python package's tests: the real daemon
(build/daemon/cudackptd) on the simulated driver, on a socket in a fresh
directory, and simulated CUDA processes to act on.

ctest passes the programs' paths in CUDACKPT_TEST_DAEMON and
CUDACKPT_TEST_SIM (tests/CMakeLists.txt); the package is imported from
python/ (tests/python/CMakeLists.txt puts it on PYTHONPATH).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, Iterator, List, Optional

import pytest

import cudackpt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from simdaemon import DaemonError, SimDaemon  # noqa: E402

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


class Daemon(SimDaemon):
    """cudackptd on the simulator (tests/lib/simdaemon.py), the programs
    ctest names; a daemon that does not start fails the test."""

    def __init__(self, config: Dict[str, object], env: Dict[str, str]) -> None:
        try:
            super().__init__(need_env("CUDACKPT_TEST_DAEMON"), need_env("CUDACKPT_TEST_SIM"), config, env,
                             prefix="cudackpt-py-")
        except DaemonError as e:
            pytest.fail(str(e))

    def restart(self) -> None:
        try:
            super().restart()
        except DaemonError as e:
            pytest.fail(str(e))


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
        if not d.alive():
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
