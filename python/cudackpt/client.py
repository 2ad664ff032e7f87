"""The blocking client: one method per method of the daemon.

A :class:`Client` keeps a few idle connections to the daemon and hands one
to each call, so threads may share a client.  Every call has a timeout:
``timeout=`` seconds (``math.inf``: none), else the client's
(``$CUDACKPT_TIMEOUT``, else 300 s), which a lock's ``timeout_ms`` lengthens
(by that much) and ``timeout_ms=0`` lifts.  A call that times out raises
:class:`~cudackpt.errors.CallTimeout` (a ``TimeoutError``); the daemon
carries on with it regardless.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, TypeVar

from . import _calls, _codec, _config, _connection, _default, _requests
from ._default import default_client, set_default_client
from ._hold import Holding
from .job import Job, ProgressCallback
from .lease import Hold
from .types import GroupResult, OperationResult, ProcessInfo, StateReply
from .watcher import Watcher

__all__ = ["Client", "default_client", "set_default_client"]

T = TypeVar("T")

_POOL_SIZE = 4
_POOL_MAX_IDLE_S = 60.0
"""A pooled connection idle longer than this is not reused (the daemon
closes idle connections after idle_timeout_ms, 300 s by default)."""


class Client(Holding[Hold]):
    """A client of cudackptd on ``socket_path`` (default: ``$CUDACKPT_SOCKET``,
    else ``/run/cudackpt/io.cudackpt.Process``).  ``timeout``: each call's
    default limit, in seconds.  ``connect_timeout``: how long connecting
    waits for a daemon that is restarting (its socket missing or refusing),
    in seconds (default ``$CUDACKPT_CONNECT_TIMEOUT_MS``, else 3; 0: one
    try), never past the call's own limit.  ``spin_us``: how long each call
    busy-waits for its reply, in microseconds, before it sleeps (default
    ``$CUDACKPT_SPIN_US``, else 0: never; at most 1,000,000): it saves the
    wake-up of a sleeping thread (tens of microseconds on a VM) at the
    price of a core burnt for up to that long per call, so it pays only in
    latency-bound loops of short calls on a machine with idle cores."""

    _hold = Hold

    def __init__(self, socket_path: Optional[str] = None, timeout: Optional[float] = None,
                 connect_timeout: Optional[float] = None, spin_us: Optional[int] = None) -> None:
        self.socket_path = socket_path or _config.default_socket()
        self.timeout = _requests.client_timeout(timeout)
        self.connect_timeout = _requests.connect_timeout(connect_timeout)
        self.spin_us = _requests.spin_us(spin_us)
        self._pool: List[_connection.Connection] = []
        self._pool_pid = os.getpid()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "Client(%r, timeout=%r, connect_timeout=%r, spin_us=%r)" % (
            self.socket_path, self.timeout, self.connect_timeout, self.spin_us)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the idle connections (calls made later open new ones)."""
        with self._lock:
            pool, self._pool = self._pool, []
        for conn in pool:
            conn.close()

    # ---- connections -----------------------------------------------------------

    def connect(self, timeout: Optional[float] = None) -> _connection.Connection:
        """A new connection of its own (for leases held by it and Watch);
        ``timeout`` bounds connecting (a call without limit still connects
        within the client's).  A daemon that is restarting (no socket, or
        one that refuses) is waited for, ``connect_timeout`` at most."""
        seconds = self.timeout if timeout is None or math.isinf(timeout) else timeout
        return _connection.Connection(self.socket_path, seconds, self.connect_timeout, self.spin_us)

    def _take(self, timeout: float) -> _connection.Connection:
        with self._lock:
            if self._pool_pid != os.getpid():  # forked: the parent's connections are not ours
                self._pool, self._pool_pid = [], os.getpid()
            while self._pool:
                conn = self._pool.pop()
                if time.monotonic() - conn.last_used < _POOL_MAX_IDLE_S and conn.is_open():
                    return conn
                conn.close()
        return self.connect(timeout)

    def _give_back(self, conn: _connection.Connection) -> None:
        with self._lock:
            if len(self._pool) < _POOL_SIZE and self._pool_pid == os.getpid():
                self._pool.append(conn)
                return
        conn.close()

    def call(self, method: str, parameters: Optional[Dict[str, Any]] = None,
             timeout: Optional[float] = None) -> Dict[str, Any]:
        """Calls ``method`` (a short name means one of io.cudackpt.Process)
        and returns its reply's parameters, or raises its error."""
        seconds = _requests.call_timeout(timeout, self.timeout)
        deadline = _config.Deadline(seconds)  # waiting for the daemon counts
        conn = self._take(seconds)
        try:
            reply = conn.call(method, parameters, deadline.remaining())
        except BaseException as e:
            if _codec.in_step_after(e):
                self._give_back(conn)  # an error reply: the connection is still good
            else:
                conn.close()
            raise
        self._give_back(conn)
        return reply

    def stream(self, method: str, parameters: Optional[Dict[str, Any]], on_reply: Callable[[Dict[str, Any]], None],
               timeout: Optional[float] = None) -> Dict[str, Any]:
        """Calls ``method`` with ``more``: ``on_reply`` gets every reply that
        continues; the last one is returned."""
        seconds = _requests.call_timeout(timeout, self.timeout)
        deadline = _config.Deadline(seconds)
        conn = self._take(seconds)
        last: Dict[str, Any] = {}
        try:
            replies = conn.stream(method, parameters, deadline.remaining())
            for reply in replies:
                last = reply
                if "progress" in reply:
                    try:
                        on_reply(reply)
                    except BaseException:
                        # Whatever it raises (a CudackptError included), the
                        # rest of the stream is unread: never reused.
                        replies.close()
                        conn.close()
                        raise
        except BaseException as e:
            if conn.fileno() >= 0 and _codec.in_step_after(e):
                self._give_back(conn)  # an error reply ends the stream: read to its end
            else:
                conn.close()
            raise
        self._give_back(conn)
        return last

    def _do(self, call: "_calls.Call[T]", timeout: Optional[float]) -> T:
        seconds = _requests.call_timeout(timeout, self.timeout, call.timeout_ms)
        return call.parse(self.call(call.method, call.params, seconds))

    # ---- one process -----------------------------------------------------------

    def get_state(self, pid: int, *, start_time: Optional[int] = None,
                  timeout: Optional[float] = None) -> StateReply:
        """The process's state (``running``, ``locked``, ``checkpointed``,
        ``failed``, or ``unknown-N``) and the operation in flight, if any."""
        return self._do(_calls.get_state(pid, start_time), timeout)

    def state(self, pid: int, *, start_time: Optional[int] = None, timeout: Optional[float] = None) -> str:
        """The process's state, as a string."""
        return self.get_state(pid, start_time=start_time, timeout=timeout).state

    def get_restore_thread_id(self, pid: int, *, start_time: Optional[int] = None,
                              timeout: Optional[float] = None) -> int:
        """The thread a restore of the process is performed from (CRIU)."""
        return self._do(_calls.get_restore_thread_id(pid, start_time), timeout)

    def lock(self, pid: int, timeout_ms: Optional[int] = None, *, start_time: Optional[int] = None,
             lease_ms: Optional[int] = None, timeout: Optional[float] = None) -> OperationResult:
        """running -> locked.  ``timeout_ms``: 0 waits without limit, None
        the daemon's default (10 s unless configured).  ``lease_ms``: the
        daemon unlocks it again after that long (a lease)."""
        return self._do(_calls.lock("Lock", pid, timeout_ms, start_time, lease_ms), timeout)

    def checkpoint(self, pid: int, *, start_time: Optional[int] = None,
                   timeout: Optional[float] = None) -> OperationResult:
        """locked -> checkpointed: GPU memory moves to host memory."""
        return self._do(_calls.single("Checkpoint", pid, start_time), timeout)

    def restore(self, pid: int, gpu_mapping: Optional[Any] = None, *, start_time: Optional[int] = None,
                timeout: Optional[float] = None) -> OperationResult:
        """checkpointed -> locked, in place or onto the GPUs of
        ``gpu_mapping`` (old UUID -> new UUID)."""
        return self._do(_calls.restore("Restore", pid, gpu_mapping, start_time), timeout)

    def unlock(self, pid: int, *, start_time: Optional[int] = None,
               timeout: Optional[float] = None) -> OperationResult:
        """locked -> running."""
        return self._do(_calls.single("Unlock", pid, start_time), timeout)

    def suspend(self, pid: int, timeout_ms: Optional[int] = None, *, start_time: Optional[int] = None,
                lease_ms: Optional[int] = None, timeout: Optional[float] = None) -> OperationResult:
        """Lock then checkpoint, as one operation (unlocked again if the
        checkpoint fails)."""
        return self._do(_calls.lock("Suspend", pid, timeout_ms, start_time, lease_ms), timeout)

    def resume(self, pid: int, gpu_mapping: Optional[Any] = None, *, start_time: Optional[int] = None,
               timeout: Optional[float] = None) -> OperationResult:
        """Restore then unlock."""
        return self._do(_calls.restore("Resume", pid, gpu_mapping, start_time), timeout)

    # ---- leases, listing, metrics --------------------------------------------------

    def release_lease(self, lease: int, *, timeout: Optional[float] = None) -> None:
        """Ends a lease without undoing it."""
        self._do(_calls.release_lease(lease), timeout)

    def renew_lease(self, lease: int, lease_ms: int, *, timeout: Optional[float] = None) -> int:
        """Makes a lease expire ``lease_ms`` from now."""
        return self._do(_calls.renew_lease(lease, lease_ms), timeout)

    def list_processes(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
                       tree: Optional[int] = None, timeout: Optional[float] = None) -> List[ProcessInfo]:
        """The CUDA processes the caller may act on, of a selection or all."""
        return self._do(_calls.list_processes(pids, cgroup, tree), timeout)

    def metrics(self, *, timeout: Optional[float] = None) -> str:
        """The daemon's counters, in the Prometheus text format."""
        return self._do(_calls.metrics(), timeout)

    def info(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """org.varlink.service.GetInfo: vendor, product, version, url,
        interfaces."""
        return self._do(_calls.info(), timeout)

    # ---- groups --------------------------------------------------------------------

    def group(self, method: str, params: Dict[str, Any], *, progress: Optional[ProgressCallback] = None,
              timeout: Optional[float] = None, timeout_ms: Optional[int] = None) -> GroupResult:
        """A group method (``LockGroup``, ...) with its parameters; see
        :class:`cudackpt.Job` for the friendly form."""
        call = _calls.group(method, params, timeout_ms)
        if progress is None:
            return self._do(call, timeout)
        cb = progress
        seconds = _requests.call_timeout(timeout, self.timeout, timeout_ms)
        return call.parse(self.stream(method, params, lambda r: cb(_calls.progress(r)), seconds))

    def job(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
            tree: Optional[int] = None) -> Job:
        """A :class:`cudackpt.Job` served by this client."""
        return Job(pids, cgroup=cgroup, tree=tree, client=self)

    # ---- watching (suspended() and locked(): _hold.Holding) ----------------------

    def watch(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
              tree: Optional[int] = None, timeout: Optional[float] = None) -> Watcher:
        """See :func:`cudackpt.watch`."""
        return Watcher(self, pids, cgroup, tree, timeout)


# The default client (cudackpt._default) is made by this module's Client.
_default.set_maker(Client)
