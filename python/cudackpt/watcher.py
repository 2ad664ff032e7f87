"""Watch: the daemon's stream of events, as an iterator.

``with cudackpt.watch(pids=[pid]) as events:`` sets the stream up (the
daemon's ``watching`` reply has come when the ``with`` body starts, so no
later event is missed) and yields :class:`~cudackpt.types.Event` objects.
Iterating waits as long as it takes; :meth:`Watcher.next` and
:meth:`Watcher.wait_for` take a timeout.

(The module is ``watcher``, not ``watch``: ``cudackpt.watch`` is the
function.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional

from . import _calls, _config, _connection, _requests, errors
from .types import Event

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Watcher"]


class Watcher:
    """An open Watch stream on a connection of its own.  ``timeout`` bounds
    setting it up."""

    def __init__(self, client: "Client", pids: Optional[Iterable[Any]] = None, cgroup: Optional[str] = None,
                 tree: Optional[int] = None, timeout: Optional[float] = None) -> None:
        params = _requests.optional_selector(pids, cgroup, tree)
        seconds = _requests.call_timeout(timeout, client.timeout)
        self._conn: Optional[_connection.Connection] = client.connect(seconds)
        try:
            self._conn.send("Watch", params, more=True, timeout=seconds)
            _calls.watching(self._receive(seconds))
        except BaseException:
            self.close()
            raise

    def _receive(self, timeout: Optional[float]) -> Event:
        if self._conn is None:
            raise ValueError("the watcher is closed")
        try:
            reply = self._conn.receive(_config.Deadline(timeout), "event")
        except errors.CallTimeout:
            raise  # nothing came: the stream goes on
        except errors.CudackptError:
            self.close()  # the connection failed, or sent what is not a reply
            raise
        if _calls.stream_ends(reply):
            self.close()
        return _calls.event(reply)

    def next(self, timeout: Optional[float] = None) -> Event:
        """The next event; :class:`~cudackpt.errors.CallTimeout` (a
        ``TimeoutError``) when none comes within ``timeout`` seconds
        (None: wait as long as it takes)."""
        return self._receive(timeout)

    def wait_for(self, predicate: Callable[[Event], bool], timeout: float) -> Event:
        """The first event for which ``predicate`` is true, within
        ``timeout`` seconds in all (else CallTimeout)."""
        deadline = _config.Deadline(timeout)
        while True:
            event = self._receive(deadline.left())
            if predicate(event):
                return event
            if deadline.passed():  # events that keep coming do not stretch it
                raise errors.CallTimeout("no matching event from cudackptd in time")

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        if self._conn is None:
            raise StopIteration
        return self._receive(None)

    def close(self) -> None:
        """Ends the stream."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> "Watcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
