"""Watch for asyncio: the twin of :mod:`cudackpt.watcher`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

from .. import _calls, errors
from ..types import Event
from ._connection import Connection, bounded

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Watcher"]


class Watcher:
    """An open Watch stream: ``async with`` sets it up (the daemon's
    ``watching`` reply has come when the body starts), ``async for`` yields
    :class:`~cudackpt.types.Event` objects."""

    def __init__(self, client: "Client", params: Optional[Dict[str, Any]], timeout: float) -> None:
        self._client, self._params, self._timeout = client, params, timeout
        self._conn: Optional[Connection] = None

    async def __aenter__(self) -> "Watcher":
        conn = self._conn = await self._client.connect(self._timeout)
        try:
            await conn.send("Watch", self._params, more=True)
            _calls.watching(await self.next(self._timeout))
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def next(self, timeout: Optional[float] = None) -> Event:
        """The next event; CallTimeout (a TimeoutError) when none comes in
        ``timeout`` seconds (None: wait as long as it takes)."""
        if self._conn is None:
            raise ValueError("the watcher is not open")
        try:
            reply = await self._conn.receive(timeout, "event")
        except errors.CallTimeout:
            raise  # nothing came: the stream goes on
        except errors.CudackptError:
            await self.close()  # the connection failed, or sent what is not a reply
            raise
        if _calls.stream_ends(reply):
            await self.close()
        return _calls.event(reply)

    async def wait_for(self, predicate: Callable[[Event], bool], timeout: float) -> Event:
        """The first event for which ``predicate`` is true, within
        ``timeout`` seconds in all."""
        async def first() -> Event:
            while True:
                event = await self.next(None)
                if predicate(event):
                    return event
        return await bounded(first(), timeout, "matching event")

    def __aiter__(self) -> "Watcher":
        return self

    async def __anext__(self) -> Event:
        if self._conn is None:
            raise StopAsyncIteration
        return await self.next(None)
