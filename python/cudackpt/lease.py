"""Leases held for the time of a ``with`` block.

``with cudackpt.suspended(pid):`` suspends the process with a lease taken
on a connection of its own (``lease_on_close``), and resumes it when the
block ends, whether it returns or raises.  Should this Python process die
inside the block (even by SIGKILL), the connection closes and the daemon
itself brings the process back to running; ``lease_ms`` also bounds how
long it may stay paused.  :meth:`Hold.release` keeps it paused after the
block instead.

A restart of the daemon closes the lease's connection; the daemon keeps the
lease and waits ``lease_claim_grace_ms`` (10 s by default) for its holder
to claim it again.  The hold does so by itself, connecting again (waiting
for the daemon up to the client's ``connect_timeout``) and calling
``ClaimLease`` with the grant's secret, before its next call: the undo at
the block's end, :meth:`Hold.release`, :meth:`Hold.renew`.  A block that
runs longer than the grace period calls :meth:`Hold.claim` (from a watch
loop, say) to keep it.  Unclaimed in time, the lease is undone by the
daemon and the block's end raises :class:`~cudackpt.errors.LeaseLost`.

A lease belongs to the process that took it.  A child made by ``fork()``
(``os.fork``, multiprocessing's fork start method) would otherwise keep
the lease's connection open after the parent dies, and the daemon, which
undoes the lease when that connection closes, would wait for the child
too: in the child, each open hold's descriptor is pointed at ``/dev/null``
(the parent's connection is not touched), its block's end does nothing,
and its calls raise ``RuntimeError``.  Python's sockets are close-on-exec
already, so an exec'd program never holds one.
"""

from __future__ import annotations

import os
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Type, Union

from . import _codec, _connection, _requests, errors
from .types import GroupResult, Lease, OperationResult

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Hold"]

_GONE = (errors.NoSuchProcess, errors.ProcessGone, errors.ProcessChanged)
"""Undo errors that mean the process is gone: nothing is left to bring back."""

Result = Union[OperationResult, GroupResult]

_BROKEN = ("a call on the lease's connection failed before its reply came (timed out or interrupted); "
           "the connection is closed, and the daemon undoes the lease itself if it still held it")


def _lost_message(lease_id: int) -> str:
    return ("the daemon closed the connection holding lease %d (a restart?) and no longer holds it: it was not "
            "claimed again within lease_claim_grace_ms, so the daemon undid it" % lease_id)


def _no_secret_message(lease_id: int) -> str:
    return ("the daemon closed the connection holding lease %d (a restart?) and the lease has no secret to claim "
            "it again with (a daemon that keeps no lease across a restart): it undid it" % lease_id)


def _not_ours_message(owner: int) -> str:
    return ("the lease was taken by process %d; this process is a fork of it and cannot act on it "
            "(the lease ends with the holder's block, or when the holder dies)" % owner)


_HOLDS: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
"""The holds (blocking and asyncio) whose lease connection is open, each
with the pid of the process that opened it."""


def hold_opened(hold: Any) -> None:
    """Records a hold whose lease connection just opened, for fork()."""
    _HOLDS[hold] = os.getpid()


def _disown_in_child() -> None:
    """After fork(), in the child: every open hold's connection is the
    parent's.  Its descriptor is pointed at /dev/null rather than closed, so
    that the number stays taken while the objects that wrap it (a socket,
    an asyncio transport) live on: they close /dev/null in the end."""
    holds = list(_HOLDS.items())
    _HOLDS.clear()
    for hold, owner in holds:
        conn = hold._conn
        if conn is None:
            continue
        fd = conn.fileno()
        if fd >= 0:
            null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            try:
                os.dup2(null, fd, inheritable=False)
            finally:
                os.close(null)
        hold._conn = None
        hold._owner = owner


os.register_at_fork(after_in_child=_disown_in_child)


def _has_members(result: Optional[Result]) -> bool:
    """Whether there is anything to undo: a job with every member skipped
    (a cgroup or tree of no CUDA process) paused nothing."""
    return result is not None and (not isinstance(result, GroupResult) or bool(result.members))


class Hold:
    """A process or a job paused under a lease, as a context manager.

    ``result`` is the reply of the call that paused it (an
    :class:`~cudackpt.types.OperationResult`, or a
    :class:`~cudackpt.types.GroupResult` for a job) and ``lease`` its
    :class:`~cudackpt.types.Lease`, both set once the block is entered."""

    def __init__(self, client: "Client", take: str, take_params: Dict[str, Any], undo: str,
                 undo_params: Callable[[Result], Dict[str, Any]], parse: Callable[[Dict[str, Any]], Result],
                 timeout: float, other_timeout: Optional[float] = None) -> None:
        self._client = client
        self._take, self._take_params = take, take_params
        self._undo, self._undo_params = undo, undo_params
        self._parse = parse
        self._take_timeout = timeout  # the pausing call's: lengthened by its timeout_ms
        self._timeout = timeout if other_timeout is None else other_timeout
        self._conn: Optional[_connection.Connection] = None
        self._released = False
        self._broken = False  # a call on the connection failed without its reply read
        self._lost = False  # the daemon undid the lease: claiming it again failed
        self._lost_told = False  # ... and LeaseLost was raised to the block already
        self._owner = 0  # in a fork's child: the pid of the process that holds the lease
        self.result: Optional[Result] = None
        self.lease: Optional[Lease] = None

    @classmethod
    def single(cls, client: "Client", take: str, undo: str, pid: int, lease_ms: Optional[int],
               timeout_ms: Optional[int], gpu_mapping: Any, start_time: Optional[int],
               timeout: Optional[float]) -> "Hold":
        """Lock or Suspend one process; Unlock or Resume it at the end."""
        take_params = _requests.lock(pid, timeout_ms, start_time, lease_ms, True)
        undo_params = (_requests.restore(pid, gpu_mapping, start_time) if undo == "Resume"
                       else _requests.single(pid, start_time))
        return cls(client, take, take_params, undo, lambda _result: undo_params, OperationResult.from_json,
                   _requests.call_timeout(timeout, client.timeout, timeout_ms),
                   _requests.call_timeout(timeout, client.timeout))

    @classmethod
    def group(cls, client: "Client", take: str, undo: str, selector: Dict[str, Any], lease_ms: Optional[int],
              timeout_ms: Optional[int], gpu_mapping: Any, timeout: Optional[float]) -> "Hold":
        """LockGroup or SuspendGroup a job; UnlockGroup or ResumeGroup the
        very members it paused (pinned by start time) at the end."""
        take_params = _requests.group(selector, timeout_ms, None, lease_ms, True)
        mapping = gpu_mapping if undo == "ResumeGroup" else None

        def undo_params(result: Result) -> Dict[str, Any]:
            assert isinstance(result, GroupResult)
            pinned = [(m.pid, m.start_time) for m in result.members]
            return _requests.group(_requests.selector(pinned), None, mapping)

        return cls(client, take, take_params, undo, undo_params, GroupResult.from_json,
                   _requests.call_timeout(timeout, client.timeout, timeout_ms),
                   _requests.call_timeout(timeout, client.timeout))

    def __enter__(self) -> "Hold":
        conn = self._client.connect(self._take_timeout)
        try:
            self.result = self._parse(conn.call(self._take, self._take_params, self._take_timeout))
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        hold_opened(self)
        self.lease = self.result.lease
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Any) -> None:
        if self._conn is None:
            return
        if self._broken:
            # Its reply may still come: never read as the undo's.  Closing
            # makes the daemon undo the lease, if it is still held.
            self._close()
            if exc_type is None:
                raise errors.ConnectionLost(_BROKEN)
            return
        try:
            if self._lost:
                if exc_type is None and not self._lost_told:
                    assert self.lease is not None
                    raise errors.LeaseLost(_lost_message(self.lease.id), self.lease.id)
            elif not self._released and _has_members(self.result):
                self._give_back(raising=exc_type is not None)
        finally:
            self._close()  # what is still leased the daemon undoes now

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _give_back(self, raising: bool) -> None:
        assert self.result is not None
        try:
            self._call_held(self._undo, self._undo_params(self.result))
        except _GONE:
            pass
        except errors.GroupFailed as e:
            if not isinstance(e.cause, _GONE) and not raising:
                raise
        except errors.CudackptError:
            if not raising:  # never hide the block's own exception
                raise

    def _held(self) -> _connection.Connection:
        if self._owner:
            raise RuntimeError(_not_ours_message(self._owner))
        if self._conn is None or self.lease is None:
            raise RuntimeError("the lease is held only inside the with block")
        if self._broken:
            raise errors.ConnectionLost(_BROKEN)
        if self._lost:
            self._lost_told = True
            raise errors.LeaseLost(_lost_message(self.lease.id), self.lease.id)
        return self._conn

    def _claim_again(self) -> _connection.Connection:
        """Connects again (waiting for a restarting daemon) and claims the
        lease on the new connection, which becomes the holding one.
        LeaseLost when the daemon no longer holds it."""
        lease = self.lease
        assert lease is not None
        if not lease.secret:
            self._lost = True
            raise errors.LeaseLost(_no_secret_message(lease.id), lease.id)
        conn = self._client.connect(self._timeout)
        try:
            conn.call("ClaimLease", {"lease": lease.id, "secret": lease.secret}, self._timeout)
        except errors.NoSuchLease as e:
            conn.close()
            self._lost = True
            raise errors.LeaseLost(_lost_message(lease.id), lease.id) from e
        except BaseException:
            conn.close()
            raise
        old, self._conn = self._conn, conn
        if old is not None:
            old.close()
        return conn

    def _call_held(self, method: str, params: Dict[str, Any]) -> Dict[str, Any]:
        """A call on the holding connection; one the daemon has closed (a
        restart: found by a peek, or by the call failing for it) is
        replaced first by a claiming one."""
        conn = self._held()
        for again in (False, True):
            if again or not conn.is_open():
                conn = self._claim_again()
            try:
                return conn.call(method, params, self._timeout)
            except errors.ConnectionLost:
                if again:
                    raise  # the new connection closed too: tried again later
            except BaseException as e:
                if not _codec.in_step_after(e):
                    self._broken = True  # timed out, interrupted or unreadable: its reply unread
                raise
        raise AssertionError("unreachable")

    def _call(self, method: str, params: Dict[str, Any]) -> Dict[str, Any]:
        try:
            return self._call_held(method, params)
        except errors.LeaseLost:
            self._lost_told = True
            raise

    def claim(self) -> bool:
        """Keeps the lease across a restart of the daemon: if the daemon
        has closed the holding connection, connects again (waiting for it
        up to the client's ``connect_timeout``) and claims the lease with
        its secret (``ClaimLease``), within the daemon's
        ``lease_claim_grace_ms`` (10 s) of its start.  True when it did,
        False when the connection was still held (a cheap peek, nothing
        sent).  LeaseLost when the daemon no longer holds the lease (it
        undid it); DaemonUnavailable when it did not come back in time
        (call again)."""
        conn = self._held()
        if conn.is_open():
            return False
        try:
            self._claim_again()
        except errors.LeaseLost:
            self._lost_told = True
            raise
        return True

    def release(self) -> None:
        """Ends the lease: the process (or job) stays as it is after the
        block, and the daemon no longer undoes it.  Should it fail other
        than by the daemon's error reply (a CallTimeout, an interruption),
        the hold is broken: the block's end closes the connection (which
        undoes the lease, if the daemon still holds it) and raises
        ConnectionLost."""
        self._held()
        assert self.lease is not None
        self._call("ReleaseLease", {"lease": self.lease.id})
        self._released = True

    def renew(self, lease_ms: int) -> None:
        """Makes the lease expire ``lease_ms`` from now (a failure breaks
        the hold as :meth:`release`'s does)."""
        self._held()
        assert self.lease is not None
        self._call("RenewLease", _requests.lease({"lease": self.lease.id}, lease_ms, None))
