"""The asyncio client: the twin of :class:`cudackpt.Client`, its calls
made from the same :mod:`cudackpt._calls`, as coroutines."""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional, TypeVar

from .. import _calls, _codec, _config, _requests
from .._hold import Holding
from ..types import GroupResult, OperationResult, ProcessInfo, StateReply
from . import job as _job
from ._connection import Connection, bounded
from .job import Job, ProgressCallback
from .lease import Hold
from .watcher import Watcher

__all__ = ["Client"]

T = TypeVar("T")
_POOL_SIZE = 4


class Client(Holding[Hold]):
    """The asyncio client of cudackptd on ``socket_path`` (default:
    ``$CUDACKPT_SOCKET``, else the daemon's default path); ``timeout`` and
    ``connect_timeout`` as :class:`cudackpt.Client`'s."""

    _hold = Hold

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

    async def _do(self, call: "_calls.Call[T]", timeout: Optional[float]) -> T:
        seconds = _requests.call_timeout(timeout, self.timeout, call.timeout_ms)
        return call.parse(await self.call(call.method, call.params, seconds))

    async def get_state(self, pid: int, *, start_time: Optional[int] = None,
                        timeout: Optional[float] = None) -> StateReply:
        return await self._do(_calls.get_state(pid, start_time), timeout)

    async def state(self, pid: int, *, start_time: Optional[int] = None, timeout: Optional[float] = None) -> str:
        return (await self.get_state(pid, start_time=start_time, timeout=timeout)).state

    async def get_restore_thread_id(self, pid: int, *, start_time: Optional[int] = None,
                                    timeout: Optional[float] = None) -> int:
        return await self._do(_calls.get_restore_thread_id(pid, start_time), timeout)

    async def lock(self, pid: int, timeout_ms: Optional[int] = None, *, start_time: Optional[int] = None,
                   lease_ms: Optional[int] = None, timeout: Optional[float] = None) -> OperationResult:
        return await self._do(_calls.lock("Lock", pid, timeout_ms, start_time, lease_ms), timeout)

    async def checkpoint(self, pid: int, *, start_time: Optional[int] = None,
                         timeout: Optional[float] = None) -> OperationResult:
        return await self._do(_calls.single("Checkpoint", pid, start_time), timeout)

    async def restore(self, pid: int, gpu_mapping: Optional[Any] = None, *, start_time: Optional[int] = None,
                      timeout: Optional[float] = None) -> OperationResult:
        return await self._do(_calls.restore("Restore", pid, gpu_mapping, start_time), timeout)

    async def unlock(self, pid: int, *, start_time: Optional[int] = None,
                     timeout: Optional[float] = None) -> OperationResult:
        return await self._do(_calls.single("Unlock", pid, start_time), timeout)

    async def suspend(self, pid: int, timeout_ms: Optional[int] = None, *, start_time: Optional[int] = None,
                      lease_ms: Optional[int] = None, timeout: Optional[float] = None) -> OperationResult:
        return await self._do(_calls.lock("Suspend", pid, timeout_ms, start_time, lease_ms), timeout)

    async def resume(self, pid: int, gpu_mapping: Optional[Any] = None, *, start_time: Optional[int] = None,
                     timeout: Optional[float] = None) -> OperationResult:
        return await self._do(_calls.restore("Resume", pid, gpu_mapping, start_time), timeout)

    async def release_lease(self, lease: int, *, timeout: Optional[float] = None) -> None:
        await self._do(_calls.release_lease(lease), timeout)

    async def renew_lease(self, lease: int, lease_ms: int, *, timeout: Optional[float] = None) -> int:
        return await self._do(_calls.renew_lease(lease, lease_ms), timeout)

    async def list_processes(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
                             tree: Optional[int] = None, timeout: Optional[float] = None) -> List[ProcessInfo]:
        return await self._do(_calls.list_processes(pids, cgroup, tree), timeout)

    async def metrics(self, *, timeout: Optional[float] = None) -> str:
        return await self._do(_calls.metrics(), timeout)

    async def group(self, method: str, params: Dict[str, Any], *, progress: Optional[ProgressCallback] = None,
                    timeout: Optional[float] = None, timeout_ms: Optional[int] = None) -> GroupResult:
        """A group method with its parameters (see :class:`Job`)."""
        call = _calls.group(method, params, timeout_ms)
        if progress is None:
            return await self._do(call, timeout)
        seconds = _requests.call_timeout(timeout, self.timeout, timeout_ms)
        conn = await self.connect(seconds)
        try:
            return await bounded(self._stream(conn, call, progress), seconds, "reply to " + method)
        finally:
            await conn.close()

    @staticmethod
    async def _stream(conn: Connection, call: "_calls.Call[T]", progress: ProgressCallback) -> T:
        await conn.send(call.method, call.params, more=True)
        while True:
            reply = await conn.receive(None)
            parameters = _codec.check(reply)
            if _calls.stream_ends(reply):
                return call.parse(parameters)
            step = _calls.progress(parameters)
            if step is not None:
                done = progress(step)
                if done is not None:
                    await done

    def job(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
            tree: Optional[int] = None) -> Job:
        return Job(pids, cgroup=cgroup, tree=tree, client=self)

    def watch(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
              tree: Optional[int] = None, timeout: Optional[float] = None) -> Watcher:
        """The events of the processes the caller may see, as an
        ``async with`` / ``async for`` stream."""
        return Watcher(self, _requests.optional_selector(pids, cgroup, tree),
                       _requests.call_timeout(timeout, self.timeout))


# A Job given no client makes one of this module's.
_job._new_client = Client
