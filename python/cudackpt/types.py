"""What the daemon answers, as typed values.

Each class mirrors a reply or a type of the interface definition
(``daemon/io.cudackpt.Process.varlink``) and is made by ``from_json`` from
the reply's parameters; fields the daemon leaves out are ``None``.
:class:`Member` and :class:`Skipped` are defined in :mod:`cudackpt.errors`,
which is below this module and carries them in ``GroupFailed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from .errors import Member, Skipped

__all__ = [
    "Lease", "OperationResult", "StateReply", "Member", "Skipped", "GroupResult", "Progress",
    "GpuUsage", "ProcessInfo", "Event",
]

STATES = ("running", "locked", "checkpointed", "failed")


def _opt_int(value: Any) -> Optional[int]:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _opt_float(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Lease:
    """A lease on a Lock or Suspend: the daemon brings the process(es) back
    to running after ``lease_ms``, or when the connection that took it
    closes (``on_close``)."""

    id: int
    lease_ms: Optional[int]
    on_close: bool
    secret: Optional[str] = field(default=None, repr=False)
    """An on-close lease's secret (32 hex digits), with which its holder
    claims it again after a restart of the daemon (``ClaimLease``); only
    the grant carries it.  Kept out of ``repr`` (and so out of logs)."""

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "Lease":
        secret = j.get("secret")
        return cls(int(j["id"]), _opt_int(j.get("lease_ms")), bool(j.get("on_close")),
                   secret if isinstance(secret, str) and secret else None)


@dataclass(frozen=True)
class OperationResult:
    """The reply of an operation on one process: its state afterwards, the
    time spent in driver calls, and the lease taken, if one was."""

    pid: int
    state: str
    duration_ms: float
    lease: Optional[Lease] = None

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "OperationResult":
        lease = j.get("lease")
        return cls(int(j["pid"]), str(j["state"]), float(j.get("duration_ms") or 0.0),
                   Lease.from_json(lease) if isinstance(lease, Mapping) else None)


@dataclass(frozen=True)
class StateReply:
    """GetState's reply: ``in_flight`` names an operation running on the
    process (``state`` is then the last one it reached)."""

    pid: int
    state: str
    in_flight: Optional[str] = None

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "StateReply":
        return cls(int(j["pid"]), str(j["state"]), j.get("in_flight"))


@dataclass(frozen=True)
class GroupResult:
    """The reply of a group operation."""

    members: List[Member]
    skipped: List[Skipped]
    duration_ms: float
    lease: Optional[Lease] = None

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "GroupResult":
        lease = j.get("lease")
        return cls([Member.from_json(m) for m in j.get("members") or []],
                   [Skipped.from_json(s) for s in j.get("skipped") or []],
                   float(j.get("duration_ms") or 0.0),
                   Lease.from_json(lease) if isinstance(lease, Mapping) else None)

    @property
    def pids(self) -> List[int]:
        return [m.pid for m in self.members]


@dataclass(frozen=True)
class Progress:
    """One member has ended one step of a group operation."""

    phase: str
    member: Member
    done: int
    total: int

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "Progress":
        return cls(str(j["phase"]), Member.from_json(j["member"]), int(j["done"]), int(j["total"]))


@dataclass(frozen=True)
class GpuUsage:
    """GPU memory a listed process holds on one GPU (NVML's figure)."""

    uuid: str
    memory_bytes: Optional[int]

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "GpuUsage":
        return cls(str(j["uuid"]), _opt_int(j.get("memory_bytes")))


@dataclass(frozen=True)
class ProcessInfo:
    """A CUDA process as ListProcesses lists it.  ``state`` is None while
    the process is stopped (``stop`` says how); ``gpus`` is None when the
    daemon has no NVML."""

    pid: int
    uid: int
    start_time: int
    command: str
    cgroup: str
    state: Optional[str] = None
    stop: Optional[str] = None
    in_flight: Optional[str] = None
    gpus: Optional[List[GpuUsage]] = None

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "ProcessInfo":
        gpus = j.get("gpus")
        return cls(int(j["pid"]), int(j["uid"]), int(j["start_time"]), str(j.get("command", "")),
                   str(j.get("cgroup", "")), j.get("state"), j.get("stop"), j.get("in_flight"),
                   [GpuUsage.from_json(g) for g in gpus] if isinstance(gpus, list) else None)


@dataclass(frozen=True)
class Event:
    """Something that happened to a process, as Watch reports it.

    ``type`` is one of ``"watching"`` (the stream is set up), ``"started"``,
    ``"finished"``, ``"state"``, ``"lease-taken"``, ``"lease-ended"``,
    ``"progress"``, ``"appeared"``, ``"exited"``; ``time`` is seconds since
    the epoch; the other fields are there as the type has them (see
    docs/protocol.md).  ``raw`` is the event as the daemon sent it."""

    type: str
    time: float
    pid: Optional[int] = None
    start_time: Optional[int] = None
    uid: Optional[int] = None
    method: Optional[str] = None
    group: Optional[str] = None
    result: Optional[str] = None
    state: Optional[str] = None
    duration_ms: Optional[float] = None
    caller_uid: Optional[int] = None
    lease: Optional[int] = None
    reason: Optional[str] = None
    undo: Optional[str] = None
    command: Optional[str] = None
    step: Optional[str] = None
    bytes: Optional[int] = None
    total_bytes: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "Event":
        return cls(
            type=str(j.get("type", "")), time=float(j.get("time") or 0.0),
            pid=_opt_int(j.get("pid")), start_time=_opt_int(j.get("start_time")), uid=_opt_int(j.get("uid")),
            method=j.get("method"), group=j.get("group"), result=j.get("result"), state=j.get("state"),
            duration_ms=_opt_float(j.get("duration_ms")), caller_uid=_opt_int(j.get("caller_uid")),
            lease=_opt_int(j.get("lease")), reason=j.get("reason"), undo=j.get("undo"),
            command=j.get("command"), step=j.get("step"), bytes=_opt_int(j.get("bytes")),
            total_bytes=_opt_int(j.get("total_bytes")), raw=dict(j))
