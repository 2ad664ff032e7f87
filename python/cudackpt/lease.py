"""Leases held for the time of a ``with`` block.

``with cudackpt.suspended(pid):`` suspends the process with a lease taken
on a connection of its own (``lease_on_close``), and resumes it when the
block ends, whether it returns or raises.  Should this Python process die
inside the block (even by SIGKILL), the connection closes and the daemon
itself brings the process back to running; ``lease_ms`` also bounds how
long it may stay paused.  :meth:`Hold.release` keeps it paused after the
block instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Type, Union

from . import _requests, _varlink, errors
from .types import GroupResult, Lease, OperationResult

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Hold"]

_GONE = (errors.NoSuchProcess, errors.ProcessGone, errors.ProcessChanged)
"""Undo errors that mean the process is gone: nothing is left to bring back."""

Result = Union[OperationResult, GroupResult]

_BROKEN = ("a call on the lease's connection failed before its reply came (timed out or interrupted); "
           "the connection is closed, and the daemon undoes the lease itself if it still held it")


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
        self._conn: Optional[_varlink.Connection] = None
        self._released = False
        self._broken = False  # a call on the connection failed without its reply read
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
        self.lease = self.result.lease
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Any) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._broken:
            # Its reply may still come: never read as the undo's.  Closing
            # makes the daemon undo the lease, if it is still held.
            conn.close()
            if exc_type is None:
                raise errors.ConnectionLost(_BROKEN)
            return
        try:
            if not self._released and _has_members(self.result):
                self._give_back(conn, raising=exc_type is not None)
        finally:
            conn.close()  # what is still leased the daemon undoes now

    def _give_back(self, conn: _varlink.Connection, raising: bool) -> None:
        assert self.result is not None
        try:
            conn.call(self._undo, self._undo_params(self.result), self._timeout)
        except _GONE:
            pass
        except errors.GroupFailed as e:
            if not isinstance(e.cause, _GONE) and not raising:
                raise
        except errors.CudackptError:
            if not raising:  # never hide the block's own exception
                raise

    def _held(self) -> _varlink.Connection:
        if self._conn is None or self.lease is None:
            raise RuntimeError("the lease is held only inside the with block")
        if self._broken:
            raise errors.ConnectionLost(_BROKEN)
        return self._conn

    def _call(self, method: str, params: Dict[str, Any]) -> Dict[str, Any]:
        conn = self._held()
        try:
            return conn.call(method, params, self._timeout)
        except BaseException as e:
            if not _varlink.in_step_after(e):
                self._broken = True  # timed out, interrupted or lost: its reply unread
            raise

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
