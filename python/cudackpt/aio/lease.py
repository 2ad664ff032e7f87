"""Leases held for an ``async with`` block: the twin of
:mod:`cudackpt.lease`, whose state machine (:mod:`cudackpt._hold`) it
shares; only the talking is asyncio's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Type

from .. import errors
from .._hold import End, HoldState
from ._connection import Connection

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Hold"]


class Hold(HoldState):
    """A process or job paused under a lease for an ``async with`` block;
    resumed (or unlocked) at its end, also when the block raises or is
    cancelled; the daemon undoes it should this process die.  Across a
    restart of the daemon, as :class:`cudackpt.Hold`: claimed again before
    its next call, or by :meth:`claim`; LeaseLost at the end when the
    daemon undid it meanwhile."""

    _BLOCK = "async with"
    _client: "Client"
    _conn: Optional[Connection]

    async def __aenter__(self) -> "Hold":
        conn = await self._client.connect(self._take_timeout)
        try:
            reply = await conn.call(self._take, self._take_params, self._take_timeout)
        except BaseException:
            await conn.close()
            raise
        self._entered(conn, reply)
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Any) -> None:
        end = self._end()
        try:
            if end is End.UNDO:
                try:
                    await self._call_held(*self._undo_args())
                except errors.CudackptError as e:
                    if not self._undo_error_passes(e, exc_type is not None):
                        raise
        finally:
            await self._close()
        self._ended(end, raising=exc_type is not None)

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _claim_again(self) -> Connection:
        params = self._claim_params()
        conn = await self._client.connect(self._timeout)
        try:
            await conn.call("ClaimLease", params, self._timeout)
        except errors.NoSuchLease as e:
            await conn.close()
            raise self._claim_refused() from e
        except BaseException:
            await conn.close()
            raise
        old = self._swap(conn)
        if old is not None:
            await old.close()
        return conn

    async def _call_held(self, method: str, params: Dict[str, Any]) -> Dict[str, Any]:
        conn = self._held()
        for again in (False, True):
            if again or await conn.hung_up():
                conn = await self._claim_again()
            try:
                return await conn.call(method, params, self._timeout)
            except errors.ConnectionLost:
                if again:
                    raise  # the new connection closed too: tried again later
            except BaseException as e:
                self._failed(e)  # timed out, cancelled or unreadable: its reply unread
                raise
        raise AssertionError("unreachable")

    async def claim(self) -> bool:
        """As :meth:`cudackpt.Hold.claim`: if the daemon has closed the
        holding connection (a restart), connects again and claims the
        lease (True); False when it was still held.  LeaseLost when the
        daemon no longer holds the lease."""
        if not await self._held().hung_up():
            return False
        with self._telling():
            await self._claim_again()
        return True

    async def release(self) -> None:
        """Ends the lease: the process stays as it is after the block.  A
        failure other than the daemon's error reply (a timeout, a
        cancellation) breaks the hold: the block's end closes the
        connection (the daemon undoes the lease if it still holds it) and
        raises ConnectionLost."""
        params = self._release_params()
        with self._telling():
            await self._call_held("ReleaseLease", params)
        self._released = True

    async def renew(self, lease_ms: int) -> None:
        """Makes the lease expire ``lease_ms`` from now (a failure breaks
        the hold as :meth:`release`'s does)."""
        params = self._renew_params(lease_ms)
        with self._telling():
            await self._call_held("RenewLease", params)
