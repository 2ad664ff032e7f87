"""Each method of the daemon as a :class:`Call`: the request (method,
parameters checked by :mod:`cudackpt._requests`, the lock's ``timeout_ms``
that lengthens the call's limit) and how its reply reads.

No I/O here (sans-I/O, as h11 is for HTTP): the blocking client and the
asyncio one both make their calls from these, and differ only in how they
send a request and wait for its reply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, Iterable, List, Optional, TypeVar

from . import _codec, _requests, errors
from .types import Event, GroupResult, OperationResult, ProcessInfo, Progress, StateReply

T = TypeVar("T")
Params = Dict[str, Any]


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and the reading of its reply."""

    method: str
    params: Optional[Params]
    parse: Callable[[Params], T]
    timeout_ms: Optional[int] = None
    """A lock's own limit: the call's default limit is lengthened by it."""


def _operation(method: str, params: Params, timeout_ms: Optional[int] = None) -> Call[OperationResult]:
    return Call(method, params, OperationResult.from_json, timeout_ms)


def get_state(pid: int, start_time: Optional[int]) -> Call[StateReply]:
    return Call("GetState", _requests.single(pid, start_time), StateReply.from_json)


def get_restore_thread_id(pid: int, start_time: Optional[int]) -> Call[int]:
    return Call("GetRestoreThreadId", _requests.single(pid, start_time), lambda r: int(r["restore_thread_id"]))


def lock(method: str, pid: int, timeout_ms: Optional[int], start_time: Optional[int],
         lease_ms: Optional[int]) -> Call[OperationResult]:
    """Lock or Suspend."""
    return _operation(method, _requests.lock(pid, timeout_ms, start_time, lease_ms, None), timeout_ms)


def restore(method: str, pid: int, gpu_mapping: Any, start_time: Optional[int]) -> Call[OperationResult]:
    """Restore or Resume."""
    return _operation(method, _requests.restore(pid, gpu_mapping, start_time))


def single(method: str, pid: int, start_time: Optional[int]) -> Call[OperationResult]:
    """Checkpoint or Unlock."""
    return _operation(method, _requests.single(pid, start_time))


def release_lease(lease: int) -> Call[None]:
    return Call("ReleaseLease", {"lease": int(lease)}, lambda _r: None)


def renew_lease(lease: int, lease_ms: int) -> Call[int]:
    return Call("RenewLease", _requests.lease({"lease": int(lease)}, lease_ms, None), lambda r: int(r["lease_ms"]))


def list_processes(pids: Optional[Iterable[Any]], cgroup: Optional[str],
                   tree: Optional[int]) -> Call[List[ProcessInfo]]:
    return Call("ListProcesses", _requests.optional_selector(pids, cgroup, tree),
                lambda r: [ProcessInfo.from_json(p) for p in r.get("processes") or []])


def metrics() -> Call[str]:
    return Call("GetMetrics", None, lambda r: str(r["text"]))


def info() -> Call[Params]:
    return Call("org.varlink.service.GetInfo", None, dict)


def group(method: str, params: Params, timeout_ms: Optional[int]) -> Call[GroupResult]:
    return Call(method, params, GroupResult.from_json, timeout_ms)


def progress(parameters: Params) -> Optional[Progress]:
    """The progress a group's continuing reply reports, if it does."""
    return Progress.from_json(parameters["progress"]) if "progress" in parameters else None


def stream_ends(reply: Params) -> bool:
    """Whether a reply of a stream is its last: nothing more comes."""
    return reply.get("error") is not None or not reply.get("continues")


def event(reply: Params) -> Event:
    """The event a reply of Watch carries (its error raised)."""
    return Event.from_json(_codec.check(reply).get("event") or {})


def watching(first: Event) -> None:
    """Watch's first event must say the stream is set up."""
    if first.type != "watching":
        raise errors.ProtocolError("Watch began with a %r event, not 'watching'" % first.type)
