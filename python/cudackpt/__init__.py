"""cudackpt: the Python client of cudackptd, the daemon that coordinates
CUDA checkpoint and restore of processes.

- :mod:`cudackpt.checkpoint`: a drop-in for ``cuda.core.checkpoint``
  (``from cudackpt import checkpoint`` gives that module, always; the
  checkpoint step alone is :meth:`Client.checkpoint`).
- Here, in Python's idiom: one process (:func:`suspend`, :func:`resume`,
  :func:`get_state`, ...), groups (:class:`Job`), leases for a ``with``
  block (:func:`suspended`, :func:`locked`), events (:func:`watch`),
  :func:`list_processes`, :func:`metrics`; :class:`Client` to choose the
  socket and the timeout.
- :mod:`cudackpt.aio`: the same for asyncio.
- :mod:`cudackpt.errors`: the exceptions.

Everything talks to the socket named by ``$CUDACKPT_SOCKET``, else
``/run/cudackpt/io.cudackpt.Process``; every call waits at most its
``timeout`` (seconds, ``math.inf`` for no limit; default
``$CUDACKPT_TIMEOUT``, else 300, lengthened by a lock's ``timeout_ms`` and
lifted by ``timeout_ms=0``).
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional

# The drop-in module is imported here, so that the package's name
# "checkpoint" is that module from the first import on, whatever is
# imported first: a function of that name would be replaced by the module
# as soon as anything imported cudackpt.checkpoint.
from . import checkpoint, errors
from .client import Client, default_client, set_default_client
from .errors import (CallTimeout, ConnectionLost, CUDAError, CudackptError, DaemonUnavailable, DriverError,
                     DriverUnavailable, GroupFailed, GroupTooLarge, InvalidGpuMapping, InvalidState, LeaseLost,
                     NoSuchCgroup, NoSuchLease, NoSuchProcess, NotCudaProcess, NotSupported, PermissionDenied,
                     ProcessChanged, ProcessGone, ProcessStopped, QueueFull, ShuttingDown, Timeout)
from .job import Job
from .lease import Hold
from .types import (Event, GpuUsage, GroupResult, Lease, Member, OperationResult, ProcessInfo, Progress,
                    Skipped, StateReply)
from .watcher import Watcher

__version__ = "0.1.0"

__all__ = [
    "Client", "default_client", "set_default_client", "Job", "Hold", "Watcher",
    "checkpoint", "get_state", "state", "get_restore_thread_id", "lock", "restore", "unlock", "suspend",
    "resume", "suspended", "locked", "watch", "list_processes", "metrics", "release_lease", "renew_lease",
    "Event", "GpuUsage", "GroupResult", "Lease", "Member", "OperationResult", "ProcessInfo", "Progress",
    "Skipped", "StateReply", "errors",
    "CUDAError", "CudackptError", "CallTimeout", "ConnectionLost", "DaemonUnavailable", "DriverError",
    "DriverUnavailable", "GroupFailed", "GroupTooLarge", "InvalidGpuMapping", "InvalidState", "LeaseLost",
    "NoSuchCgroup", "NoSuchLease",
    "NoSuchProcess", "NotCudaProcess", "NotSupported", "PermissionDenied", "ProcessChanged", "ProcessGone",
    "ProcessStopped", "QueueFull", "ShuttingDown", "Timeout",
]


def get_state(pid: int, *, start_time: Optional[int] = None, timeout: Optional[float] = None) -> StateReply:
    """The process's state and the operation in flight on it, if any."""
    return default_client().get_state(pid, start_time=start_time, timeout=timeout)


def state(pid: int, *, start_time: Optional[int] = None, timeout: Optional[float] = None) -> str:
    """The process's state: ``running``, ``locked``, ``checkpointed``,
    ``failed`` (or ``unknown-N``)."""
    return default_client().state(pid, start_time=start_time, timeout=timeout)


def get_restore_thread_id(pid: int, *, start_time: Optional[int] = None, timeout: Optional[float] = None) -> int:
    """The thread a restore of the process is performed from."""
    return default_client().get_restore_thread_id(pid, start_time=start_time, timeout=timeout)


def lock(pid: int, timeout_ms: Optional[int] = None, *, start_time: Optional[int] = None,
         lease_ms: Optional[int] = None, timeout: Optional[float] = None) -> OperationResult:
    """running -> locked (``timeout_ms`` 0: no limit; None: the daemon's
    default)."""
    return default_client().lock(pid, timeout_ms, start_time=start_time, lease_ms=lease_ms, timeout=timeout)


def restore(pid: int, gpu_mapping: Optional[Any] = None, *, start_time: Optional[int] = None,
            timeout: Optional[float] = None) -> OperationResult:
    """checkpointed -> locked, optionally onto other GPUs."""
    return default_client().restore(pid, gpu_mapping, start_time=start_time, timeout=timeout)


def unlock(pid: int, *, start_time: Optional[int] = None, timeout: Optional[float] = None) -> OperationResult:
    """locked -> running."""
    return default_client().unlock(pid, start_time=start_time, timeout=timeout)


def suspend(pid: int, timeout_ms: Optional[int] = None, *, start_time: Optional[int] = None,
            lease_ms: Optional[int] = None, timeout: Optional[float] = None) -> OperationResult:
    """Lock then checkpoint (unlocked again if the checkpoint fails)."""
    return default_client().suspend(pid, timeout_ms, start_time=start_time, lease_ms=lease_ms, timeout=timeout)


def resume(pid: int, gpu_mapping: Optional[Any] = None, *, start_time: Optional[int] = None,
           timeout: Optional[float] = None) -> OperationResult:
    """Restore then unlock."""
    return default_client().resume(pid, gpu_mapping, start_time=start_time, timeout=timeout)


def suspended(pid: int, *, lease_ms: Optional[int] = None, timeout_ms: Optional[int] = None,
              gpu_mapping: Optional[Any] = None, start_time: Optional[int] = None,
              timeout: Optional[float] = None) -> Hold:
    """The process suspended for a ``with`` block and resumed at its end
    (also when the block raises).  It is suspended under a lease tied to a
    connection of its own: if this Python process dies in the block, the
    daemon resumes it; ``lease_ms`` bounds the pause too."""
    return default_client().suspended(pid, lease_ms=lease_ms, timeout_ms=timeout_ms, gpu_mapping=gpu_mapping,
                                      start_time=start_time, timeout=timeout)


def locked(pid: int, *, lease_ms: Optional[int] = None, timeout_ms: Optional[int] = None,
           start_time: Optional[int] = None, timeout: Optional[float] = None) -> Hold:
    """The process locked for a ``with`` block (as :func:`suspended`)."""
    return default_client().locked(pid, lease_ms=lease_ms, timeout_ms=timeout_ms, start_time=start_time,
                                   timeout=timeout)


def watch(pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None, tree: Optional[int] = None,
          timeout: Optional[float] = None) -> Watcher:
    """The events of the processes the caller may see (of a selection, or
    all), as an iterator of :class:`Event`."""
    return default_client().watch(pids, cgroup=cgroup, tree=tree, timeout=timeout)


def list_processes(pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
                   tree: Optional[int] = None, timeout: Optional[float] = None) -> List[ProcessInfo]:
    """The CUDA processes the caller may act on (of a selection, or all)."""
    return default_client().list_processes(pids, cgroup=cgroup, tree=tree, timeout=timeout)


def metrics(*, timeout: Optional[float] = None) -> str:
    """The daemon's counters, in the Prometheus text format."""
    return default_client().metrics(timeout=timeout)


def release_lease(lease: int, *, timeout: Optional[float] = None) -> None:
    """Ends a lease without undoing it."""
    default_client().release_lease(lease, timeout=timeout)


def renew_lease(lease: int, lease_ms: int, *, timeout: Optional[float] = None) -> int:
    """Makes a lease expire ``lease_ms`` from now."""
    return default_client().renew_lease(lease, lease_ms, timeout=timeout)
