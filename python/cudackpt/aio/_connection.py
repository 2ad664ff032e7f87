"""One asyncio connection to the daemon: :mod:`cudackpt._codec`'s messages
on an asyncio stream, waited for by :mod:`cudackpt._config`'s rules (the
twin of :mod:`cudackpt._connection`).
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any, Awaitable, Dict, Optional, TypeVar

from .. import _codec, _config, errors

__all__ = ["Connection", "bounded"]

T = TypeVar("T")


async def bounded(awaitable: Awaitable[T], timeout: Optional[float], what: str) -> T:
    """``awaitable`` within ``timeout`` seconds (None or inf: no limit),
    else CallTimeout.  Only the limit's expiry becomes CallTimeout: an
    error of the daemon raised inside (its ``Timeout`` is a TimeoutError
    too, and on Python 3.11+ so is asyncio.TimeoutError) comes out as it
    is."""
    try:
        return await asyncio.wait_for(awaitable, _config.limit(timeout))
    except errors.CudackptError:
        raise
    except asyncio.TimeoutError:
        raise errors.CallTimeout("no %s from cudackptd in time" % what) from None


class Connection:
    """One asyncio connection to the daemon; one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer

    @classmethod
    async def open(cls, path: str, timeout: float, connect_timeout: Optional[float] = None) -> "Connection":
        """Connects within ``timeout`` seconds; while the socket is missing
        or refuses (a daemon restarting), tries again for
        ``connect_timeout`` seconds (None: ``$CUDACKPT_CONNECT_TIMEOUT_MS``,
        else 3 s; 0: one try), never past ``timeout``."""
        deadline = _config.Deadline(timeout)
        delays = _config.retry_delays(_config.default_connect_timeout() if connect_timeout is None
                                       else connect_timeout, deadline.left())
        while True:
            try:
                reader, writer = await bounded(asyncio.open_unix_connection(path, limit=_codec.MAX_MESSAGE),
                                                deadline.left(), "connection")
                return cls(reader, writer)
            except errors.CudackptError:
                raise  # CallTimeout: a TimeoutError, so an OSError too
            except OSError as raised:
                e = _config.connect_error(raised, path)
                delay = next(delays) if _config.is_retryable(e) else None
                if delay is None:
                    raise errors.DaemonUnavailable("cannot connect to cudackptd at %s: %s"
                                                   % (path, e.strerror or e)) from e
            await asyncio.sleep(delay)

    def fileno(self) -> int:
        sock = self._writer.get_extra_info("socket")
        return sock.fileno() if sock is not None else -1

    def is_open(self) -> bool:
        return not self._reader.at_eof() and not self._writer.is_closing() and self._reader.exception() is None

    async def hung_up(self) -> bool:
        """Whether the daemon has closed the connection (it sends nothing
        unasked): what the event loop has read of it, else a peek at the
        socket that never waits (on a duplicate of its descriptor: the
        transport's own is not to be read)."""
        if not self.is_open():
            return True
        sock = self._writer.get_extra_info("socket")
        if sock is None:
            return False
        try:
            with socket.socket(fileno=os.dup(sock.fileno())) as peek:
                peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True
        return True  # end of file, or bytes nobody asked for

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass

    async def send(self, method: str, parameters: Optional[Dict[str, Any]], more: bool = False) -> None:
        try:
            self._writer.write(_codec.encode(method, parameters, more))
            await self._writer.drain()
        except OSError as e:
            raise errors.ConnectionLost("the daemon closed the connection: %s" % (e.strerror or e)) from e

    async def receive(self, timeout: Optional[float], what: str = "reply") -> Dict[str, Any]:
        try:
            data = await bounded(self._reader.readuntil(b"\0"), timeout, what)
        except errors.CudackptError:
            raise  # CallTimeout: a TimeoutError, so an OSError too
        except asyncio.IncompleteReadError:
            raise errors.ConnectionLost("cudackptd closed the connection") from None
        except asyncio.LimitOverrunError:
            raise errors.ProtocolError("a reply longer than %d bytes" % _codec.MAX_MESSAGE) from None
        except OSError as e:
            raise errors.ConnectionLost("the connection to cudackptd failed: %s" % (e.strerror or e)) from e
        return _codec.decode(data[:-1])

    async def call(self, method: str, parameters: Optional[Dict[str, Any]], timeout: float) -> Dict[str, Any]:
        return await bounded(self._call(method, parameters), timeout, "reply to " + _codec.method_name(method))

    async def _call(self, method: str, parameters: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        await self.send(method, parameters)
        return _codec.check(await self.receive(None))
