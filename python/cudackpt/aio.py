"""cudackpt for asyncio: the same calls as :class:`cudackpt.Client`, as
coroutines, for asyncio servers (an inference server pausing its engine, a
node agent serving many jobs)::

    from cudackpt import aio

    async with aio.Client() as client:
        await client.suspend(pid)
        async with client.suspended(other_pid, lease_ms=60_000):
            ...
        async with client.watch(pids=[pid]) as events:
            async for event in events:
                ...

Each call opens or reuses a connection of the client's; calls run
concurrently (on separate connections).  Every call has a timeout, as in
the blocking client.
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Type, TypeVar, Union

from . import _codec, _config, _requests, errors
from .lease import _BROKEN, _GONE, _has_members, _lost_message, _no_secret_message, _not_ours_message, hold_opened
from .types import Event, GroupResult, Lease, OperationResult, ProcessInfo, Progress, StateReply

__all__ = ["Client", "Connection", "Job", "Hold", "Watcher"]

T = TypeVar("T")
ProgressCallback = Callable[[Progress], Union[None, Awaitable[None]]]
_LIMIT = 64 << 20  # the longest reply read (a ListProcesses of many processes)
_POOL_SIZE = 4


async def _bounded(awaitable: Awaitable[T], timeout: Optional[float], what: str) -> T:
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
                reader, writer = await _bounded(asyncio.open_unix_connection(path, limit=_LIMIT),
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
            data = await _bounded(self._reader.readuntil(b"\0"), timeout, what)
        except errors.CudackptError:
            raise  # CallTimeout: a TimeoutError, so an OSError too
        except asyncio.IncompleteReadError:
            raise errors.ConnectionLost("cudackptd closed the connection") from None
        except asyncio.LimitOverrunError:
            raise errors.ProtocolError("a reply longer than %d bytes" % _LIMIT) from None
        except OSError as e:
            raise errors.ConnectionLost("the connection to cudackptd failed: %s" % (e.strerror or e)) from e
        return _codec.decode(data[:-1])

    async def call(self, method: str, parameters: Optional[Dict[str, Any]], timeout: float) -> Dict[str, Any]:
        return await _bounded(self._call(method, parameters), timeout, "reply to " + _codec.method_name(method))

    async def _call(self, method: str, parameters: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        await self.send(method, parameters)
        return _codec.check(await self.receive(None))


class Client:
    """The asyncio client of cudackptd on ``socket_path`` (default:
    ``$CUDACKPT_SOCKET``, else the daemon's default path); ``timeout`` and
    ``connect_timeout`` as :class:`cudackpt.Client`'s."""

    def __init__(self, socket_path: Optional[str] = None, timeout: Optional[float] = None,
                 connect_timeout: Optional[float] = None) -> None:
        self.socket_path = socket_path or _config.default_socket()
        self.timeout = _requests.client_timeout(timeout)
        self.connect_timeout = _requests.connect_timeout(connect_timeout)
        self._pool: List[Connection] = []

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the idle connections."""
        pool, self._pool = self._pool, []
        for conn in pool:
            await conn.close()

    async def connect(self, timeout: Optional[float] = None) -> Connection:
        """A new connection of its own; ``timeout`` bounds connecting (a
        call without limit still connects within the client's)."""
        seconds = self.timeout if timeout is None or math.isinf(timeout) else timeout
        return await Connection.open(self.socket_path, seconds, self.connect_timeout)

    async def _take(self, timeout: float) -> Connection:
        while self._pool:
            conn = self._pool.pop()
            if not await conn.hung_up():  # a peek: the loop may not have read the daemon's close yet
                return conn
            await conn.close()
        return await self.connect(timeout)

    async def _give_back(self, conn: Connection) -> None:
        if len(self._pool) < _POOL_SIZE:
            self._pool.append(conn)
        else:
            await conn.close()

    async def call(self, method: str, parameters: Optional[Dict[str, Any]] = None,
                   timeout: Optional[float] = None) -> Dict[str, Any]:
        """Calls ``method`` and returns its reply's parameters, or raises
        its error."""
        seconds = _requests.call_timeout(timeout, self.timeout)
        deadline = _config.Deadline(seconds)  # waiting for the daemon counts
        conn = await self._take(seconds)
        try:
            reply = await conn.call(method, parameters, deadline.remaining())
        except BaseException as e:
            if _codec.in_step_after(e):
                await self._give_back(conn)  # an error reply: the connection is still good
            else:
                await conn.close()  # cancelled or failed mid-call: its reply would come to the next caller
            raise
        await self._give_back(conn)
        return reply

    async def _op(self, method: str, params: Dict[str, Any], timeout: Optional[float],
                  timeout_ms: Optional[int] = None) -> OperationResult:
        seconds = _requests.call_timeout(timeout, self.timeout, timeout_ms)
        return OperationResult.from_json(await self.call(method, params, seconds))

    async def get_state(self, pid: int, *, start_time: Optional[int] = None,
                        timeout: Optional[float] = None) -> StateReply:
        return StateReply.from_json(await self.call("GetState", _requests.single(pid, start_time), timeout))

    async def state(self, pid: int, *, start_time: Optional[int] = None, timeout: Optional[float] = None) -> str:
        return (await self.get_state(pid, start_time=start_time, timeout=timeout)).state

    async def get_restore_thread_id(self, pid: int, *, start_time: Optional[int] = None,
                                    timeout: Optional[float] = None) -> int:
        reply = await self.call("GetRestoreThreadId", _requests.single(pid, start_time), timeout)
        return int(reply["restore_thread_id"])

    async def lock(self, pid: int, timeout_ms: Optional[int] = None, *, start_time: Optional[int] = None,
                   lease_ms: Optional[int] = None, timeout: Optional[float] = None) -> OperationResult:
        return await self._op("Lock", _requests.lock(pid, timeout_ms, start_time, lease_ms, None), timeout,
                              timeout_ms)

    async def checkpoint(self, pid: int, *, start_time: Optional[int] = None,
                         timeout: Optional[float] = None) -> OperationResult:
        return await self._op("Checkpoint", _requests.single(pid, start_time), timeout)

    async def restore(self, pid: int, gpu_mapping: Optional[Any] = None, *, start_time: Optional[int] = None,
                      timeout: Optional[float] = None) -> OperationResult:
        return await self._op("Restore", _requests.restore(pid, gpu_mapping, start_time), timeout)

    async def unlock(self, pid: int, *, start_time: Optional[int] = None,
                     timeout: Optional[float] = None) -> OperationResult:
        return await self._op("Unlock", _requests.single(pid, start_time), timeout)

    async def suspend(self, pid: int, timeout_ms: Optional[int] = None, *, start_time: Optional[int] = None,
                      lease_ms: Optional[int] = None, timeout: Optional[float] = None) -> OperationResult:
        return await self._op("Suspend", _requests.lock(pid, timeout_ms, start_time, lease_ms, None), timeout,
                              timeout_ms)

    async def resume(self, pid: int, gpu_mapping: Optional[Any] = None, *, start_time: Optional[int] = None,
                     timeout: Optional[float] = None) -> OperationResult:
        return await self._op("Resume", _requests.restore(pid, gpu_mapping, start_time), timeout)

    async def release_lease(self, lease: int, *, timeout: Optional[float] = None) -> None:
        await self.call("ReleaseLease", {"lease": int(lease)}, timeout)

    async def renew_lease(self, lease: int, lease_ms: int, *, timeout: Optional[float] = None) -> int:
        reply = await self.call("RenewLease", _requests.lease({"lease": int(lease)}, lease_ms, None), timeout)
        return int(reply["lease_ms"])

    async def list_processes(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
                             tree: Optional[int] = None, timeout: Optional[float] = None) -> List[ProcessInfo]:
        params = None
        if pids is not None or cgroup is not None or tree is not None:
            params = {"selector": _requests.selector(pids, cgroup, tree)}
        reply = await self.call("ListProcesses", params, timeout)
        return [ProcessInfo.from_json(p) for p in reply.get("processes") or []]

    async def metrics(self, *, timeout: Optional[float] = None) -> str:
        return str((await self.call("GetMetrics", None, timeout))["text"])

    async def group(self, method: str, params: Dict[str, Any], *, progress: Optional[ProgressCallback] = None,
                    timeout: Optional[float] = None, timeout_ms: Optional[int] = None) -> GroupResult:
        """A group method with its parameters (see :class:`Job`)."""
        seconds = _requests.call_timeout(timeout, self.timeout, timeout_ms)
        if progress is None:
            return GroupResult.from_json(await self.call(method, params, seconds))
        conn = await self.connect(seconds)
        try:
            return await _bounded(self._stream_group(conn, method, params, progress), seconds,
                                  "reply to " + method)
        finally:
            await conn.close()

    @staticmethod
    async def _stream_group(conn: Connection, method: str, params: Dict[str, Any],
                            progress: ProgressCallback) -> GroupResult:
        await conn.send(method, params, more=True)
        while True:
            reply = await conn.receive(None)
            parameters = _codec.check(reply)
            if not reply.get("continues"):
                return GroupResult.from_json(parameters)
            if "progress" in parameters:
                done = progress(Progress.from_json(parameters["progress"]))
                if done is not None:
                    await done

    def job(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
            tree: Optional[int] = None) -> "Job":
        return Job(pids, cgroup=cgroup, tree=tree, client=self)

    def suspended(self, pid: int, *, lease_ms: Optional[int] = None, timeout_ms: Optional[int] = None,
                  gpu_mapping: Optional[Any] = None, start_time: Optional[int] = None,
                  timeout: Optional[float] = None) -> "Hold":
        """The process suspended for an ``async with`` block, under a lease
        (as :func:`cudackpt.suspended`)."""
        undo = _requests.restore(pid, gpu_mapping, start_time)
        return Hold(self, "Suspend", _requests.lock(pid, timeout_ms, start_time, lease_ms, True), "Resume",
                    lambda _r: undo, OperationResult.from_json,
                    _requests.call_timeout(timeout, self.timeout, timeout_ms),
                    _requests.call_timeout(timeout, self.timeout))

    def locked(self, pid: int, *, lease_ms: Optional[int] = None, timeout_ms: Optional[int] = None,
               start_time: Optional[int] = None, timeout: Optional[float] = None) -> "Hold":
        """The process locked for an ``async with`` block, under a lease."""
        undo = _requests.single(pid, start_time)
        return Hold(self, "Lock", _requests.lock(pid, timeout_ms, start_time, lease_ms, True), "Unlock",
                    lambda _r: undo, OperationResult.from_json,
                    _requests.call_timeout(timeout, self.timeout, timeout_ms),
                    _requests.call_timeout(timeout, self.timeout))

    def watch(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
              tree: Optional[int] = None, timeout: Optional[float] = None) -> "Watcher":
        """The events of the processes the caller may see, as an
        ``async with`` / ``async for`` stream."""
        params = None
        if pids is not None or cgroup is not None or tree is not None:
            params = {"selector": _requests.selector(pids, cgroup, tree)}
        return Watcher(self, params, _requests.call_timeout(timeout, self.timeout))


class Hold:
    """A process or job paused under a lease for an ``async with`` block;
    resumed (or unlocked) at its end, also when the block raises or is
    cancelled; the daemon undoes it should this process die.  Across a
    restart of the daemon, as :class:`cudackpt.Hold`: claimed again before
    its next call, or by :meth:`claim`; LeaseLost at the end when the
    daemon undid it meanwhile."""

    def __init__(self, client: Client, take: str, take_params: Dict[str, Any], undo: str,
                 undo_params: Callable[[Any], Dict[str, Any]], parse: Callable[[Dict[str, Any]], Any],
                 timeout: float, other_timeout: Optional[float] = None) -> None:
        self._client = client
        self._take, self._take_params = take, take_params
        self._undo, self._undo_params = undo, undo_params
        self._parse = parse
        self._take_timeout = timeout  # the pausing call's: lengthened by its timeout_ms
        self._timeout = timeout if other_timeout is None else other_timeout
        self._conn: Optional[Connection] = None
        self._released = False
        self._broken = False  # a call on the connection failed without its reply read
        self._lost = False  # the daemon undid the lease: claiming it again failed
        self._lost_told = False  # ... and LeaseLost was raised to the block already
        self._owner = 0  # in a fork's child: the pid of the process that holds the lease
        self.result: Any = None
        self.lease: Optional[Lease] = None

    async def __aenter__(self) -> "Hold":
        conn = await self._client.connect(self._take_timeout)
        try:
            self.result = self._parse(await conn.call(self._take, self._take_params, self._take_timeout))
        except BaseException:
            await conn.close()
            raise
        self._conn, self.lease = conn, self.result.lease
        hold_opened(self)
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Any) -> None:
        if self._conn is None:
            return
        if self._broken:
            # Its reply may still come: never read as the undo's.  Closing
            # makes the daemon undo the lease, if it is still held.
            await self._close()
            if exc_type is None:
                raise errors.ConnectionLost(_BROKEN)
            return
        try:
            if self._lost:
                if exc_type is None and not self._lost_told:
                    assert self.lease is not None
                    raise errors.LeaseLost(_lost_message(self.lease.id), self.lease.id)
            elif not self._released and _has_members(self.result):
                try:
                    await self._call_held(self._undo, self._undo_params(self.result))
                except _GONE:
                    pass
                except errors.GroupFailed as e:
                    if not isinstance(e.cause, _GONE) and exc_type is None:
                        raise
                except errors.CudackptError:
                    if exc_type is None:
                        raise
        finally:
            await self._close()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def _held(self) -> Connection:
        if self._owner:
            raise RuntimeError(_not_ours_message(self._owner))
        if self._conn is None or self.lease is None:
            raise RuntimeError("the lease is held only inside the async with block")
        if self._broken:
            raise errors.ConnectionLost(_BROKEN)
        if self._lost:
            self._lost_told = True
            raise errors.LeaseLost(_lost_message(self.lease.id), self.lease.id)
        return self._conn

    async def _claim_again(self) -> Connection:
        lease = self.lease
        assert lease is not None
        if not lease.secret:
            self._lost = True
            raise errors.LeaseLost(_no_secret_message(lease.id), lease.id)
        conn = await self._client.connect(self._timeout)
        try:
            await conn.call("ClaimLease", {"lease": lease.id, "secret": lease.secret}, self._timeout)
        except errors.NoSuchLease as e:
            await conn.close()
            self._lost = True
            raise errors.LeaseLost(_lost_message(lease.id), lease.id) from e
        except BaseException:
            await conn.close()
            raise
        old, self._conn = self._conn, conn
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
                if not _codec.in_step_after(e):
                    self._broken = True  # timed out, cancelled or unreadable: its reply unread
                raise
        raise AssertionError("unreachable")

    async def _call(self, method: str, params: Dict[str, Any]) -> Dict[str, Any]:
        try:
            return await self._call_held(method, params)
        except errors.LeaseLost:
            self._lost_told = True
            raise

    async def claim(self) -> bool:
        """As :meth:`cudackpt.Hold.claim`: if the daemon has closed the
        holding connection (a restart), connects again and claims the
        lease (True); False when it was still held.  LeaseLost when the
        daemon no longer holds the lease."""
        conn = self._held()
        if not await conn.hung_up():
            return False
        try:
            await self._claim_again()
        except errors.LeaseLost:
            self._lost_told = True
            raise
        return True

    async def release(self) -> None:
        """Ends the lease: the process stays as it is after the block.  A
        failure other than the daemon's error reply (a timeout, a
        cancellation) breaks the hold: the block's end closes the
        connection (the daemon undoes the lease if it still holds it) and
        raises ConnectionLost."""
        self._held()
        assert self.lease is not None
        await self._call("ReleaseLease", {"lease": self.lease.id})
        self._released = True

    async def renew(self, lease_ms: int) -> None:
        """Makes the lease expire ``lease_ms`` from now (a failure breaks
        the hold as :meth:`release`'s does)."""
        self._held()
        assert self.lease is not None
        await self._call("RenewLease", _requests.lease({"lease": self.lease.id}, lease_ms, None))


class Watcher:
    """An open Watch stream: ``async with`` sets it up (the daemon's
    ``watching`` reply has come when the body starts), ``async for`` yields
    :class:`~cudackpt.types.Event` objects."""

    def __init__(self, client: Client, params: Optional[Dict[str, Any]], timeout: float) -> None:
        self._client, self._params, self._timeout = client, params, timeout
        self._conn: Optional[Connection] = None

    async def __aenter__(self) -> "Watcher":
        conn = await self._client.connect(self._timeout)
        try:
            await conn.send("Watch", self._params, more=True)
            self._conn = conn
            first = await self.next(self._timeout)
        except BaseException:
            await conn.close()
            self._conn = None
            raise
        if first.type != "watching":
            await self.close()
            raise errors.ProtocolError("Watch began with a %r event" % first.type)
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
        if reply.get("error") is not None or not reply.get("continues"):
            await self.close()  # the stream's last reply: nothing more comes
        return Event.from_json(_codec.check(reply).get("event") or {})

    async def wait_for(self, predicate: Callable[[Event], bool], timeout: float) -> Event:
        """The first event for which ``predicate`` is true, within
        ``timeout`` seconds in all."""
        async def first() -> Event:
            while True:
                event = await self.next(None)
                if predicate(event):
                    return event
        return await _bounded(first(), timeout, "matching event")

    def __aiter__(self) -> "Watcher":
        return self

    async def __anext__(self) -> Event:
        if self._conn is None:
            raise StopAsyncIteration
        return await self.next(None)


class Job:
    """A group of processes for asyncio (see :class:`cudackpt.Job`)."""

    def __init__(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
                 tree: Optional[int] = None, client: Optional[Client] = None) -> None:
        self.selector: Dict[str, Any] = _requests.selector(pids, cgroup, tree)
        self.client = client or Client()

    async def _run(self, method: str, progress: Optional[ProgressCallback], timeout: Optional[float],
                   timeout_ms: Optional[int] = None, gpu_mapping: Any = None,
                   lease_ms: Optional[int] = None) -> GroupResult:
        params = _requests.group(self.selector, timeout_ms, gpu_mapping, lease_ms)
        return await self.client.group(method, params, progress=progress, timeout=timeout, timeout_ms=timeout_ms)

    async def lock(self, timeout_ms: Optional[int] = None, *, lease_ms: Optional[int] = None,
                   progress: Optional[ProgressCallback] = None, timeout: Optional[float] = None) -> GroupResult:
        return await self._run("LockGroup", progress, timeout, timeout_ms, lease_ms=lease_ms)

    async def checkpoint(self, *, progress: Optional[ProgressCallback] = None,
                         timeout: Optional[float] = None) -> GroupResult:
        return await self._run("CheckpointGroup", progress, timeout)

    async def restore(self, gpu_mapping: Optional[Any] = None, *, progress: Optional[ProgressCallback] = None,
                      timeout: Optional[float] = None) -> GroupResult:
        return await self._run("RestoreGroup", progress, timeout, gpu_mapping=gpu_mapping)

    async def unlock(self, *, progress: Optional[ProgressCallback] = None,
                     timeout: Optional[float] = None) -> GroupResult:
        return await self._run("UnlockGroup", progress, timeout)

    async def suspend(self, timeout_ms: Optional[int] = None, *, lease_ms: Optional[int] = None,
                      progress: Optional[ProgressCallback] = None, timeout: Optional[float] = None) -> GroupResult:
        return await self._run("SuspendGroup", progress, timeout, timeout_ms, lease_ms=lease_ms)

    async def resume(self, gpu_mapping: Optional[Any] = None, *, progress: Optional[ProgressCallback] = None,
                     timeout: Optional[float] = None) -> GroupResult:
        return await self._run("ResumeGroup", progress, timeout, gpu_mapping=gpu_mapping)

    def suspended(self, *, lease_ms: Optional[int] = None, timeout_ms: Optional[int] = None,
                  gpu_mapping: Optional[Any] = None, timeout: Optional[float] = None) -> Hold:
        """The job suspended for an ``async with`` block, under a lease."""
        def undo(result: GroupResult) -> Dict[str, Any]:
            pinned = [(m.pid, m.start_time) for m in result.members]
            return _requests.group(_requests.selector(pinned), None, gpu_mapping)
        return Hold(self.client, "SuspendGroup", _requests.group(self.selector, timeout_ms, None, lease_ms, True),
                    "ResumeGroup", undo, GroupResult.from_json,
                    _requests.call_timeout(timeout, self.client.timeout, timeout_ms),
                    _requests.call_timeout(timeout, self.client.timeout))


