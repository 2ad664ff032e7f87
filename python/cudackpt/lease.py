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

from typing import TYPE_CHECKING, Any, Dict, Optional, Type

from . import _connection, errors
from ._hold import End, HoldState

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Hold"]


class Hold(HoldState):
    """A process or a job paused under a lease, as a context manager.

    ``result`` is the reply of the call that paused it (an
    :class:`~cudackpt.types.OperationResult`, or a
    :class:`~cudackpt.types.GroupResult` for a job) and ``lease`` its
    :class:`~cudackpt.types.Lease`, both set once the block is entered."""

    _client: "Client"
    _conn: Optional[_connection.Connection]

    def __enter__(self) -> "Hold":
        conn = self._client.connect(self._take_timeout)
        try:
            reply = conn.call(self._take, self._take_params, self._take_timeout)
        except BaseException:
            conn.close()
            raise
        self._entered(conn, reply)
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Any) -> None:
        end = self._end()
        try:
            if end is End.UNDO:
                self._give_back(raising=exc_type is not None)
        finally:
            self._close()  # what is still leased the daemon undoes now
        self._ended(end, raising=exc_type is not None)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _give_back(self, raising: bool) -> None:
        try:
            self._call_held(*self._undo_args())
        except errors.CudackptError as e:
            if not self._undo_error_passes(e, raising):
                raise

    def _claim_again(self) -> _connection.Connection:
        """Connects again (waiting for a restarting daemon) and claims the
        lease on the new connection, which becomes the holding one.
        LeaseLost when the daemon no longer holds it."""
        params = self._claim_params()
        conn = self._client.connect(self._timeout)
        try:
            conn.call("ClaimLease", params, self._timeout)
        except errors.NoSuchLease as e:
            conn.close()
            raise self._claim_refused() from e
        except BaseException:
            conn.close()
            raise
        old = self._swap(conn)
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
                self._failed(e)
                raise
        raise AssertionError("unreachable")

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
        if self._held().is_open():
            return False
        with self._telling():
            self._claim_again()
        return True

    def release(self) -> None:
        """Ends the lease: the process (or job) stays as it is after the
        block, and the daemon no longer undoes it.  Should it fail other
        than by the daemon's error reply (a CallTimeout, an interruption),
        the hold is broken: the block's end closes the connection (which
        undoes the lease, if the daemon still holds it) and raises
        ConnectionLost."""
        params = self._release_params()
        with self._telling():
            self._call_held("ReleaseLease", params)
        self._released = True

    def renew(self, lease_ms: int) -> None:
        """Makes the lease expire ``lease_ms`` from now (a failure breaks
        the hold as :meth:`release`'s does)."""
        params = self._renew_params(lease_ms)
        with self._telling():
            self._call_held("RenewLease", params)
