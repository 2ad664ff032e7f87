"""Groups of processes that pause and resume together (the ranks of a
training run, a server and its workers, a pod).

``Job(pids=[...])``, ``Job(cgroup="/kubepods/pod42")`` or ``Job(tree=pid)``
names the members; each of the six operations acts on every member as one
operation (all locked before any is checkpointed, all restored before any
is unlocked, rolled back as a whole when one fails) and returns every
member's outcome.  A failure raises :class:`~cudackpt.errors.GroupFailed`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional

from . import _default
from ._jobs import JobBase
from .lease import Hold
from .types import GroupResult, ProcessInfo, Progress
from .watcher import Watcher

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Job"]

ProgressCallback = Callable[[Progress], None]


class Job(JobBase):
    """A set of processes named by exactly one of ``pids`` (pids, or
    (pid, start_time) pairs, or ProcessInfo objects), ``cgroup`` (a cgroup
    v2 path and everything below it) or ``tree`` (a pid and all its
    descendants).  ``client`` defaults to :func:`cudackpt.default_client`.

    Every operation takes ``progress=`` (called with a
    :class:`~cudackpt.types.Progress` as each member ends each step) and
    ``timeout=`` (seconds for the whole operation)."""

    def __init__(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
                 tree: Optional[int] = None, client: Optional["Client"] = None) -> None:
        super().__init__(pids, cgroup=cgroup, tree=tree)
        self._client = client

    @property
    def client(self) -> "Client":
        return _default.default_client() if self._client is None else self._client

    def _run(self, method: str, progress: Optional[ProgressCallback], timeout: Optional[float],
             timeout_ms: Optional[int] = None, gpu_mapping: Any = None,
             lease_ms: Optional[int] = None) -> GroupResult:
        return self.client.group(method, self._params(timeout_ms, gpu_mapping, lease_ms), progress=progress,
                                 timeout=timeout, timeout_ms=timeout_ms)

    def lock(self, timeout_ms: Optional[int] = None, *, lease_ms: Optional[int] = None,
             progress: Optional[ProgressCallback] = None, timeout: Optional[float] = None) -> GroupResult:
        """Every member running -> locked; ``timeout_ms`` is one deadline
        for the whole lock phase."""
        return self._run("LockGroup", progress, timeout, timeout_ms, lease_ms=lease_ms)

    def checkpoint(self, *, progress: Optional[ProgressCallback] = None,
                   timeout: Optional[float] = None) -> GroupResult:
        """Every member locked -> checkpointed."""
        return self._run("CheckpointGroup", progress, timeout)

    def restore(self, gpu_mapping: Optional[Any] = None, *, progress: Optional[ProgressCallback] = None,
                timeout: Optional[float] = None) -> GroupResult:
        """Every member checkpointed -> locked (one mapping for all)."""
        return self._run("RestoreGroup", progress, timeout, gpu_mapping=gpu_mapping)

    def unlock(self, *, progress: Optional[ProgressCallback] = None,
               timeout: Optional[float] = None) -> GroupResult:
        """Every member locked -> running."""
        return self._run("UnlockGroup", progress, timeout)

    def suspend(self, timeout_ms: Optional[int] = None, *, lease_ms: Optional[int] = None,
                progress: Optional[ProgressCallback] = None, timeout: Optional[float] = None) -> GroupResult:
        """Lock every member, then checkpoint every member."""
        return self._run("SuspendGroup", progress, timeout, timeout_ms, lease_ms=lease_ms)

    def resume(self, gpu_mapping: Optional[Any] = None, *, progress: Optional[ProgressCallback] = None,
               timeout: Optional[float] = None) -> GroupResult:
        """Restore every member, then unlock every member."""
        return self._run("ResumeGroup", progress, timeout, gpu_mapping=gpu_mapping)

    def processes(self, *, timeout: Optional[float] = None) -> List[ProcessInfo]:
        """The job's CUDA processes, as ListProcesses lists them."""
        pids, cgroup, tree = self._selection()
        return self.client.list_processes(pids, cgroup=cgroup, tree=tree, timeout=timeout)

    def suspended(self, *, lease_ms: Optional[int] = None, timeout_ms: Optional[int] = None,
                  gpu_mapping: Optional[Any] = None, timeout: Optional[float] = None) -> Hold:
        """The job suspended for a ``with`` block, under a lease (see
        :func:`cudackpt.suspended`); resumed at its end."""
        return Hold.group(self.client, "SuspendGroup", "ResumeGroup", self.selector, lease_ms, timeout_ms,
                          gpu_mapping, timeout)

    def locked(self, *, lease_ms: Optional[int] = None, timeout_ms: Optional[int] = None,
               timeout: Optional[float] = None) -> Hold:
        """The job locked for a ``with`` block, under a lease; unlocked at
        its end."""
        return Hold.group(self.client, "LockGroup", "UnlockGroup", self.selector, lease_ms, timeout_ms, None,
                          timeout)

    def watch(self, *, timeout: Optional[float] = None) -> Watcher:
        """The events of the job's processes."""
        pids, cgroup, tree = self._selection()
        return Watcher(self.client, pids, cgroup, tree, timeout)
