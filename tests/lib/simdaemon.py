"""simdaemon.py: cudackptd started the one way the Python test scripts
start it (tests/python's fixtures, the metrics checks, the manifest check):
in a directory of its own, with its socket, configuration and log there,
on the simulator (or any --driver), and ready once it says READY=1 on the
NOTIFY_SOCKET this module binds.  The C programs' twin is sim_daemon.h.

Nothing here needs pytest: a daemon that does not start raises
DaemonError, with its log.  Scripts outside tests/lib import it after
putting this folder on sys.path:

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Dict, List, Optional, Union

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 20.0
# What the daemon keeps of the caller's environment: the rest is the
# caller's env= (the simulator's variables, among them).
KEPT_ENV = ("PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS")
DEFAULT_FLAGS = ("--config={config}", "--log-level=debug")


class DaemonError(RuntimeError):
    """The daemon exited or sent no READY=1 in time; the message holds its log."""


class SimDaemon:
    """cudackptd in a fresh directory (mode 0755, so another uid reaches the
    socket inside): DIR/sock, DIR/config.json, DIR/daemon.log and, as
    RUNTIME_DIRECTORY is unset, its lease store.  kill() and restart() stop
    it by SIGKILL and start it again there, on the same socket and store.

    config is written to DIR/config.json (a dict as JSON, a str as it is);
    flags are the command line besides --socket and --driver, "{socket}"
    and "{config}" in them replaced by the paths (default: the config and
    --log-level=debug)."""

    def __init__(self, binary: str, driver: str, config: Union[Dict[str, object], str, None] = None,
                 env: Optional[Dict[str, str]] = None, flags: Optional[List[str]] = None,
                 prefix: str = "cudackpt-test-", ready_timeout: float = READY_TIMEOUT_S) -> None:
        self.binary = binary
        self.driver = driver
        self.dir = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "sock")
        self.config_path = os.path.join(self.dir, "config.json")
        self.log_path = os.path.join(self.dir, "daemon.log")
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.write(config if isinstance(config, str) else json.dumps(config or {}))
        self.flags = [a.format(socket=self.socket, config=self.config_path) for a in (flags or DEFAULT_FLAGS)]
        self.env = dict(env or {})
        self.ready_timeout = ready_timeout
        self.proc: Optional[subprocess.Popen] = None
        try:
            self._spawn("w")
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def __enter__(self) -> "SimDaemon":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def argv(self) -> List[str]:
        return [self.binary, "--socket=" + self.socket, "--driver=" + self.driver] + self.flags

    def _spawn(self, log_mode: str) -> None:
        notify_path = os.path.join(self.dir, "notify")
        try:
            os.unlink(notify_path)
        except FileNotFoundError:
            pass
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        child_env = {k: v for k, v in os.environ.items() if k in KEPT_ENV}
        child_env.update(self.env)
        child_env["NOTIFY_SOCKET"] = notify_path
        with open(self.log_path, log_mode) as log:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         env=child_env)
        try:
            self._await_ready(notify)
        except BaseException:
            self.proc.kill()  # never left behind, serving nobody
            self.proc.wait(timeout=STOP_TIMEOUT_S)
            raise
        finally:
            notify.close()

    def _await_ready(self, notify: socket.socket) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.ready_timeout
        while True:
            if self.proc.poll() is not None:
                raise DaemonError("the daemon exited (%s) before READY=1:\n%s" % (self.proc.returncode, self.log()))
            left = deadline - time.monotonic()
            if left <= 0:
                raise DaemonError("the daemon sent no READY=1 in %.0f s:\n%s" % (self.ready_timeout, self.log()))
            notify.settimeout(min(left, 0.2))
            try:
                data = notify.recv(4096)
            except socket.timeout:
                continue
            if "READY=1" in data.decode(errors="replace").splitlines():
                return

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: the daemon dies as by a crash, its socket file left
        behind (refusing), its lease store as at its last reply."""
        assert self.proc is not None and self.alive(), "the daemon died before kill():\n" + self.log()
        self.proc.kill()
        self.proc.wait(timeout=STOP_TIMEOUT_S)
        assert self.proc.returncode == -signal.SIGKILL

    def restart(self) -> None:
        """Starts it again after kill() or terminate(), on the same socket,
        config and store; returns once it is READY (its leases read back)."""
        assert not self.alive(), "stop it first"
        self._spawn("a")

    def terminate(self) -> int:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT_S; its exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT_S)
        return self.proc.returncode

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self) -> str:
        """terminate(), and its directory removed; returns its log."""
        if self.proc is not None:
            self.terminate()
        try:
            said = self.log()
        except OSError:
            said = ""
        shutil.rmtree(self.dir, ignore_errors=True)
        return said
