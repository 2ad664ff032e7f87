"""Groups of processes for asyncio: the twin of :mod:`cudackpt.job`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Optional, Union

from .._jobs import JobBase
from ..types import GroupResult, Progress
from .lease import Hold

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Job"]

ProgressCallback = Callable[[Progress], Union[None, Awaitable[None]]]

_new_client: Optional[Callable[[], "Client"]] = None
"""How a Job given no client makes one of its own: the client module, which
is above this one, sets it when it is imported (``cudackpt.aio`` imports it)."""


class Job(JobBase):
    """A group of processes for asyncio (see :class:`cudackpt.Job`);
    ``client`` defaults to a new :class:`cudackpt.aio.Client`."""

    def __init__(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
                 tree: Optional[int] = None, client: Optional["Client"] = None) -> None:
        super().__init__(pids, cgroup=cgroup, tree=tree)
        if client is None:
            assert _new_client is not None, "cudackpt.aio.client is not imported: import cudackpt.aio"
            client = _new_client()
        self.client = client

    async def _run(self, method: str, progress: Optional[ProgressCallback], timeout: Optional[float],
                   timeout_ms: Optional[int] = None, gpu_mapping: Any = None,
                   lease_ms: Optional[int] = None) -> GroupResult:
        return await self.client.group(method, self._params(timeout_ms, gpu_mapping, lease_ms), progress=progress,
                                       timeout=timeout, timeout_ms=timeout_ms)

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
        return Hold.group(self.client, "SuspendGroup", "ResumeGroup", self.selector, lease_ms, timeout_ms,
                          gpu_mapping, timeout)
