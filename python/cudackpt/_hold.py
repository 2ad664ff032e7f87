"""A lease held for a block, without I/O: what the blocking hold
(:mod:`cudackpt.lease`) and the asyncio one (:mod:`cudackpt.aio.lease`)
both decide, each doing the talking its own way.

:class:`HoldState` builds the pausing and undoing calls, keeps the hold's
state (released, broken, lost, told, disowned by a fork) and says what the
block's end does, which errors an undo may swallow, and what a claim
sends.  The connection it holds is whichever kind its subclass opens: the
state machine only stores it, closes nothing and sends nothing.
"""

from __future__ import annotations

import contextlib
import enum
import os
import weakref
from typing import Any, Callable, Dict, Generic, Iterator, Optional, Tuple, Type, TypeVar, Union

from . import _codec, _requests, errors
from .types import GroupResult, Lease, OperationResult

Result = Union[OperationResult, GroupResult]
H = TypeVar("H", bound="HoldState")

_GONE = (errors.NoSuchProcess, errors.ProcessGone, errors.ProcessChanged)
"""Undo errors that mean the process is gone: nothing is left to bring back."""

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


class End(enum.Enum):
    """What the block's end does with the holding connection, before it
    closes it."""
    NOTHING = "nothing"  # no connection held here (never entered, or a fork's child)
    BROKEN = "broken"  # a call's reply is unread: close only; ConnectionLost
    LOST = "lost"  # the daemon undid the lease: close only; LeaseLost
    KEEP = "keep"  # released, or a job that paused nothing: close only
    UNDO = "undo"  # undo on the connection, then close


class HoldState:
    """The state of a process or a job paused under a lease for a block.

    ``result`` is the reply of the call that paused it (an
    :class:`~cudackpt.types.OperationResult`, or a
    :class:`~cudackpt.types.GroupResult` for a job) and ``lease`` its
    :class:`~cudackpt.types.Lease`, both set once the block is entered."""

    _BLOCK = "with"
    """The block's keyword, for messages."""

    def __init__(self, client: Any, take: str, take_params: Dict[str, Any], undo: str,
                 undo_params: Callable[[Result], Dict[str, Any]], parse: Callable[[Dict[str, Any]], Result],
                 timeout: float, other_timeout: Optional[float] = None) -> None:
        self._client = client
        self._take, self._take_params = take, take_params
        self._undo, self._undo_params = undo, undo_params
        self._parse = parse
        self._take_timeout = timeout  # the pausing call's: lengthened by its timeout_ms
        self._timeout = timeout if other_timeout is None else other_timeout
        self._conn: Any = None
        self._released = False
        self._broken = False  # a call on the connection failed without its reply read
        self._lost = False  # the daemon undid the lease: claiming it again failed
        self._lost_told = False  # ... and LeaseLost was raised to the block already
        self._owner = 0  # in a fork's child: the pid of the process that holds the lease
        self.result: Optional[Result] = None
        self.lease: Optional[Lease] = None

    @classmethod
    def single(cls: Type[H], client: Any, take: str, undo: str, pid: int, lease_ms: Optional[int],
               timeout_ms: Optional[int], gpu_mapping: Any, start_time: Optional[int],
               timeout: Optional[float]) -> H:
        """Lock or Suspend one process; Unlock or Resume it at the end."""
        take_params = _requests.lock(pid, timeout_ms, start_time, lease_ms, True)
        undo_params = (_requests.restore(pid, gpu_mapping, start_time) if undo == "Resume"
                       else _requests.single(pid, start_time))
        return cls(client, take, take_params, undo, lambda _result: undo_params, OperationResult.from_json,
                   _requests.call_timeout(timeout, client.timeout, timeout_ms),
                   _requests.call_timeout(timeout, client.timeout))

    @classmethod
    def group(cls: Type[H], client: Any, take: str, undo: str, selector: Dict[str, Any], lease_ms: Optional[int],
              timeout_ms: Optional[int], gpu_mapping: Any, timeout: Optional[float]) -> H:
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

    def _entered(self, conn: Any, reply: Dict[str, Any]) -> None:
        """The pausing call answered ``reply`` on ``conn``: the lease is held."""
        self.result = self._parse(reply)
        self._conn = conn
        _HOLDS[self] = os.getpid()  # for fork()
        self.lease = self.result.lease

    def _end(self) -> End:
        """What the block's end does (see :class:`End`)."""
        if self._conn is None:
            return End.NOTHING
        if self._broken:
            return End.BROKEN  # its reply may still come: never read as the undo's
        if self._lost:
            return End.LOST
        result = self.result
        if self._released or result is None or (isinstance(result, GroupResult) and not result.members):
            return End.KEEP  # a job with every member skipped paused nothing
        return End.UNDO

    def _ended(self, end: End, raising: bool) -> None:
        """After the connection closed: the error the block's end raises,
        if any; never one that hides the block's own exception."""
        if raising:
            return
        if end is End.BROKEN:
            raise errors.ConnectionLost(_BROKEN)
        if end is End.LOST and not self._lost_told:
            assert self.lease is not None
            raise errors.LeaseLost(_lost_message(self.lease.id), self.lease.id)

    def _undo_args(self) -> Tuple[str, Dict[str, Any]]:
        assert self.result is not None
        return self._undo, self._undo_params(self.result)

    @staticmethod
    def _undo_error_passes(error: errors.CudackptError, raising: bool) -> bool:
        """Whether an undo's error is swallowed: the process is gone (nothing
        to bring back), or the block raised (never hidden by the undo's)."""
        if isinstance(error, _GONE):
            return True
        if isinstance(error, errors.GroupFailed) and isinstance(error.cause, _GONE):
            return True
        return raising

    def _held(self) -> Any:
        """The holding connection, or the error a call on the hold raises."""
        if self._owner:
            raise RuntimeError(_not_ours_message(self._owner))
        if self._conn is None or self.lease is None:
            raise RuntimeError("the lease is held only inside the %s block" % self._BLOCK)
        if self._broken:
            raise errors.ConnectionLost(_BROKEN)
        if self._lost:
            self._lost_told = True
            raise errors.LeaseLost(_lost_message(self.lease.id), self.lease.id)
        return self._conn

    def _claim_params(self) -> Dict[str, Any]:
        """ClaimLease's parameters; LeaseLost when the lease has no secret."""
        lease = self.lease
        assert lease is not None
        if not lease.secret:
            self._lost = True
            raise errors.LeaseLost(_no_secret_message(lease.id), lease.id)
        return {"lease": lease.id, "secret": lease.secret}

    def _claim_refused(self) -> errors.LeaseLost:
        """The daemon said NoSuchLease to a claim: it undid the lease."""
        assert self.lease is not None
        self._lost = True
        return errors.LeaseLost(_lost_message(self.lease.id), self.lease.id)

    def _swap(self, conn: Any) -> Any:
        """``conn`` (a claiming connection) holds the lease now; the old
        one is returned, to be closed."""
        old, self._conn = self._conn, conn
        return old

    def _failed(self, error: BaseException) -> None:
        """A call on the holding connection raised ``error``."""
        if not _codec.in_step_after(error):
            self._broken = True  # timed out, interrupted or unreadable: its reply unread

    @contextlib.contextmanager
    def _telling(self) -> Iterator[None]:
        """A LeaseLost raised in here is the block's to know: the block's
        end does not raise it again."""
        try:
            yield
        except errors.LeaseLost:
            self._lost_told = True
            raise

    def _release_params(self) -> Dict[str, Any]:
        self._held()
        assert self.lease is not None
        return {"lease": self.lease.id}

    def _renew_params(self, lease_ms: int) -> Dict[str, Any]:
        return _requests.lease(self._release_params(), lease_ms, None)


class Holding(Generic[H]):
    """``suspended()`` and ``locked()`` of a client, the same in both
    flavours: each client names the hold it makes (``_hold``), the blocking
    :class:`cudackpt.Hold` for a ``with`` block or the asyncio one for an
    ``async with`` block."""

    _hold: Type[H]

    def suspended(self, pid: int, *, lease_ms: Optional[int] = None, timeout_ms: Optional[int] = None,
                  gpu_mapping: Optional[Any] = None, start_time: Optional[int] = None,
                  timeout: Optional[float] = None) -> H:
        """The process suspended for a block, under a lease, and resumed at
        its end: see :func:`cudackpt.suspended`."""
        return self._hold.single(self, "Suspend", "Resume", pid, lease_ms, timeout_ms, gpu_mapping, start_time,
                                 timeout)

    def locked(self, pid: int, *, lease_ms: Optional[int] = None, timeout_ms: Optional[int] = None,
               start_time: Optional[int] = None, timeout: Optional[float] = None) -> H:
        """The process locked for a block, under a lease, and unlocked at
        its end: see :func:`cudackpt.locked`."""
        return self._hold.single(self, "Lock", "Unlock", pid, lease_ms, timeout_ms, None, start_time, timeout)
