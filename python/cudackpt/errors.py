"""The exceptions of cudackpt, one class per error of the daemon.

Every exception raised for a daemon's error reply is a :class:`CudackptError`
that carries the error's full name (``name``) and its ``parameters``, also
readable as attributes (``e.pid``, ``e.state``, ``e.required_state``, ...).

Each class also derives from the built-in exception that fits, so that code
written for Python's own errors catches them: ``PermissionDenied`` is a
``PermissionError``, ``NoSuchProcess`` a ``ProcessLookupError``, a lock's
``Timeout`` a ``TimeoutError``, ...

Errors that stand for a result of the CUDA driver (``InvalidState`` is
``CUDA_ERROR_ILLEGAL_STATE``, ``Timeout`` ``CUDA_ERROR_NOT_READY``,
``NoSuchProcess`` and ``ProcessGone`` ``CUDA_ERROR_OPERATING_SYSTEM``,
``DriverError`` any other) are also a :class:`CUDAError`: cuda-core's own
``CUDAError`` class when cuda-core is importable, else one of ours, and
their message is the one cuda-core gives for that result (``"CUDA_ERROR_
ILLEGAL_STATE: ..."``).  So code written for ``cuda.core.checkpoint`` keeps
catching what it caught.  The daemon's details are in the attributes and in
the exception's notes (shown by tracebacks on Python 3.11 and later).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type

__all__ = [
    "CUDAError", "CudackptError", "DaemonUnavailable", "ConnectionLost", "LeaseLost", "CallTimeout", "ProtocolError",
    "NoSuchProcess", "NotCudaProcess", "PermissionDenied", "InvalidState", "Timeout", "InvalidGpuMapping",
    "NotSupported", "ProcessGone", "ProcessStopped", "ProcessChanged", "DriverUnavailable", "DriverError",
    "QueueFull", "GroupFailed", "GroupTooLarge", "ShuttingDown", "InvalidRequest", "NoSuchLease", "NoSuchCgroup",
    "InsufficientGpuMemory",
    "MessageTooLarge", "InvalidParameter", "MethodNotFound", "ExpectedMore", "from_reply", "cuda_error_message",
    "Member", "Skipped",
]


def _cuda_core_error() -> Optional[Type[Exception]]:
    """cuda-core's CUDAError class, when cuda-core can be imported (and
    ``CUDACKPT_NO_CUDA_CORE`` is not set)."""
    if os.environ.get("CUDACKPT_NO_CUDA_CORE"):
        return None
    try:
        from cuda.core._utils.cuda_utils import CUDAError as core_error  # type: ignore
    except Exception:  # not installed, or installed without a usable cuda.bindings
        return None
    return core_error if isinstance(core_error, type) and issubclass(core_error, Exception) else None


_CORE_CUDA_ERROR = _cuda_core_error()

if _CORE_CUDA_ERROR is not None:
    CUDAError: Type[Exception] = _CORE_CUDA_ERROR
else:
    class CUDAError(Exception):  # type: ignore[no-redef]
        """A CUDA driver error (cuda-core's ``CUDAError`` when cuda-core is
        installed; this class, of the same name and message, when not)."""


# cuGetErrorString's text of the results the checkpoint calls return, for
# messages made without cuda-core (cuda-core's own are used when it is there).
_CUDA_DESCRIPTIONS = {
    "CUDA_ERROR_INVALID_VALUE": "invalid argument",
    "CUDA_ERROR_OUT_OF_MEMORY": "out of memory",
    "CUDA_ERROR_NOT_INITIALIZED": "initialization error",
    "CUDA_ERROR_DEINITIALIZED": "driver shutting down",
    "CUDA_ERROR_NO_DEVICE": "no CUDA-capable device is detected",
    "CUDA_ERROR_INVALID_DEVICE": "invalid device ordinal",
    "CUDA_ERROR_NOT_FOUND": "named symbol not found",
    "CUDA_ERROR_NOT_READY": "device not ready",
    "CUDA_ERROR_ILLEGAL_STATE": "the operation cannot be performed in the present state",
    "CUDA_ERROR_NOT_SUPPORTED": "operation not supported",
    "CUDA_ERROR_OPERATING_SYSTEM": "OS call failed or operation not supported on this OS",
    "CUDA_ERROR_TIMEOUT": "timeout reached",
    "CUDA_ERROR_SYSTEM_NOT_READY": "system not yet initialized",
    "CUDA_ERROR_UNKNOWN": "unknown error",
}
_CUDA_CODES = {
    "CUDA_ERROR_INVALID_VALUE": 1, "CUDA_ERROR_OUT_OF_MEMORY": 2, "CUDA_ERROR_NOT_INITIALIZED": 3,
    "CUDA_ERROR_DEINITIALIZED": 4, "CUDA_ERROR_NO_DEVICE": 100, "CUDA_ERROR_INVALID_DEVICE": 101,
    "CUDA_ERROR_NOT_FOUND": 500, "CUDA_ERROR_NOT_READY": 600, "CUDA_ERROR_ILLEGAL_STATE": 401,
    "CUDA_ERROR_NOT_SUPPORTED": 801, "CUDA_ERROR_OPERATING_SYSTEM": 304, "CUDA_ERROR_TIMEOUT": 909,
    "CUDA_ERROR_SYSTEM_NOT_READY": 802, "CUDA_ERROR_UNKNOWN": 999,
}
_message_cache: Dict[Tuple[str, int], str] = {}


def _cuda_core_message(code: int) -> Optional[str]:
    """The message cuda-core's CUDAError has for this driver result, made by
    cuda-core itself, or None when that cannot be done here."""
    if _CORE_CUDA_ERROR is None:
        return None
    try:
        from cuda.bindings import driver  # type: ignore
        from cuda.core._utils.cuda_utils import handle_return  # type: ignore
        handle_return((driver.CUresult(code),))
    except _CORE_CUDA_ERROR as e:
        return str(e)
    except Exception:
        return None
    return None


def cuda_error_message(name: str, code: Optional[int] = None) -> str:
    """The message of a CUDAError for the driver result ``name``
    (``CUDA_ERROR_...``), as cuda-core words it: ``"NAME: description"``."""
    if code is None:
        code = _CUDA_CODES.get(name, -1)
    key = (name, code)
    if key not in _message_cache:
        message = _cuda_core_message(code) if code >= 0 else None
        if message is None or not message.startswith(name):
            description = _CUDA_DESCRIPTIONS.get(name)
            message = "%s: %s" % (name, description) if description else name
        _message_cache[key] = message
    return _message_cache[key]


def _rebuild(cls: Type["CudackptError"], message: str, name: str, parameters: Dict[str, Any]) -> "CudackptError":
    """Unpickles an error (across processes, for multiprocessing or Ray)."""
    if name:
        exc = from_reply(name, parameters)
        if type(exc) is cls:
            return exc
    return cls._make(message, name, parameters)


class CudackptError(Exception):
    """Base of every cudackpt error.

    ``name`` is the daemon's full error name (``io.cudackpt.Process.X``;
    empty for errors of the client side), ``parameters`` the error's
    parameters, each also an attribute of the exception."""

    name: str = ""
    parameters: Dict[str, Any] = {}

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.name = type(self).name
        self.parameters = {}

    @classmethod
    def _make(cls, message: str, name: str, parameters: Mapping[str, Any]) -> "CudackptError":
        exc = cls(message)
        exc.name = name
        exc.parameters = dict(parameters)
        for key, value in exc.parameters.items():
            # Parameters become attributes, but never hide a class's own.
            if key not in ("name", "parameters") and not hasattr(type(exc), key):
                setattr(exc, key, value)
        return exc

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), str(self), self.name, self.parameters))

    def __getattr__(self, key: str) -> Any:
        # Parameters an error reply did not carry (an absent optional one)
        # read as None, so e.state works whether the daemon knew it or not.
        if key.startswith("_") or key not in type(self)._optional:
            raise AttributeError(key)
        return None

    _optional: Tuple[str, ...] = ()


# ---- the client's own errors -------------------------------------------------

class DaemonUnavailable(CudackptError, ConnectionError):
    """The daemon's socket could not be connected to."""


class ConnectionLost(CudackptError, ConnectionError):
    """The connection failed or was closed before the reply came."""


class LeaseLost(CudackptError):
    """The daemon no longer holds the lease of a ``with`` block for it: its
    connection closed (the daemon restarted) and the lease could not be
    claimed again in time (``lease_claim_grace_ms``), so the daemon undid
    it: the process is back to running (or the undo failed: see the
    daemon's log).  ``lease`` is its id; ``__cause__`` the daemon's
    NoSuchLease, when it said so."""

    def __init__(self, message: str = "", lease: Optional[int] = None) -> None:
        super().__init__(message)
        if lease is not None:
            self.parameters = {"lease": lease}  # kept through pickling
            self.lease = lease

    _optional = ("lease",)


class CallTimeout(CudackptError, TimeoutError):
    """No reply within the call's timeout.  The daemon carries on with what
    it was asked (a driver call is never abandoned): ask ``get_state``."""


class ProtocolError(CudackptError):
    """The daemon sent something that is not a Varlink message."""


# ---- the daemon's errors -----------------------------------------------------

_COMMON = ("pid", "method", "state", "step", "rolled_back")


class NoSuchProcess(CudackptError, CUDAError, ProcessLookupError):  # type: ignore[valid-type, misc]
    """No process has this pid: the driver says ``CUDA_ERROR_OPERATING_SYSTEM``
    for it, so this is a ``CUDAError`` with cuda-core's message, as well as
    a ``ProcessLookupError``."""
    cuda_error = "CUDA_ERROR_OPERATING_SYSTEM"
    _optional = _COMMON


class NotCudaProcess(CudackptError, CUDAError):  # type: ignore[valid-type, misc]
    """The process exists but has not initialised CUDA
    (``CUDA_ERROR_NOT_INITIALIZED``)."""
    cuda_error = "CUDA_ERROR_NOT_INITIALIZED"
    _optional = _COMMON


class PermissionDenied(CudackptError, PermissionError):
    """The caller may not act on this process."""
    _optional = _COMMON + ("caller_uid", "reason")


class InvalidState(CudackptError, CUDAError):  # type: ignore[valid-type, misc]
    """The process is not in ``required_state`` (``CUDA_ERROR_ILLEGAL_STATE``)."""
    cuda_error = "CUDA_ERROR_ILLEGAL_STATE"
    _optional = _COMMON + ("required_state",)


class Timeout(CudackptError, CUDAError, TimeoutError):  # type: ignore[valid-type, misc]
    """The lock did not complete within ``timeout_ms``; the process is still
    running (``CUDA_ERROR_NOT_READY``)."""
    cuda_error = "CUDA_ERROR_NOT_READY"
    _optional = _COMMON + ("timeout_ms",)


class InvalidGpuMapping(CudackptError, CUDAError, ValueError):  # type: ignore[valid-type, misc]
    """The GPU mapping was refused, by the daemon (``uuid`` names the entry)
    or by the driver (``CUDA_ERROR_INVALID_VALUE``); still checkpointed."""
    cuda_error = "CUDA_ERROR_INVALID_VALUE"
    _optional = _COMMON + ("reason", "uuid")


class InsufficientGpuMemory(CudackptError, MemoryError):
    """The restore would not fit in the free memory of GPU ``gpu``: it needs
    ``needed_bytes``, ``free_bytes`` are free; the driver was not called and
    the process stays checkpointed.  ``force=True`` goes ahead anyway."""
    _optional = _COMMON + ("gpu", "needed_bytes", "free_bytes")


class NotSupported(CudackptError, RuntimeError):
    """The driver cannot checkpoint this process (managed memory, IPC
    memory, MPS, MIG).  A ``RuntimeError``, as cuda-core raises for
    ``CUDA_ERROR_NOT_SUPPORTED``, with cuda-core's message."""
    cuda_error = "CUDA_ERROR_NOT_SUPPORTED"
    _optional = _COMMON


class ProcessGone(CudackptError, CUDAError, ProcessLookupError):  # type: ignore[valid-type, misc]
    """The process exited during the operation (``CUDA_ERROR_OPERATING_SYSTEM``)."""
    cuda_error = "CUDA_ERROR_OPERATING_SYSTEM"
    _optional = _COMMON


class ProcessStopped(CudackptError):
    """Every thread of the process is stopped (``stop``: ``"signal"`` or
    ``"traced"``); nothing was asked of the driver.  Retry once it runs."""
    _optional = _COMMON + ("stop",)


class ProcessChanged(CudackptError, ProcessLookupError):
    """The pid now belongs to a process with another start time."""
    _optional = ("pid", "start_time", "actual_start_time")


class DriverUnavailable(CudackptError, RuntimeError):
    """The daemon has no usable CUDA driver (``reason``)."""
    _optional = ("reason",)


class DriverError(CudackptError, CUDAError):  # type: ignore[valid-type, misc]
    """Any other driver failure: ``cuda_error`` names it, ``cuda_error_code``
    is its number."""
    _optional = _COMMON + ("cuda_error", "cuda_error_code")


class QueueFull(CudackptError):
    """Too many operations queued (``limit``), for ``pid`` or in total."""
    _optional = ("pid", "limit")


class GroupFailed(CudackptError):
    """A member of a group failed.  ``phase`` says where, ``pid`` which
    member failed first there, ``cause`` is that member's own error (also
    ``__cause__``), ``members`` and ``skipped`` every member's outcome,
    ``rolled_back`` whether every member is running again."""
    _optional = ("method", "phase", "pid", "error", "error_parameters", "rolled_back")

    @property
    def cause(self) -> CudackptError:
        params = self.parameters
        return from_reply(str(params.get("error", "")), params.get("error_parameters") or {})

    @property
    def members(self) -> List["Member"]:
        return [Member.from_json(m) for m in self.parameters.get("members") or []]

    @property
    def skipped(self) -> List["Skipped"]:
        return [Skipped.from_json(s) for s in self.parameters.get("skipped") or []]


class GroupTooLarge(CudackptError, ValueError):
    """The selection holds more than ``limit`` CUDA processes."""
    _optional = ("limit", "members")


class ShuttingDown(CudackptError):
    """The daemon is stopping and takes no new operations."""


class InvalidRequest(CudackptError):
    """The daemon did not read the message as a Varlink call."""
    _optional = ("reason",)


class MessageTooLarge(CudackptError, ValueError):
    """The message was longer than the daemon takes (``max_bytes``)."""
    _optional = ("max_bytes",)


class NoSuchLease(CudackptError, LookupError):
    """No lease with this id, or none the caller may manage."""
    _optional = ("lease",)


class NoSuchCgroup(CudackptError, LookupError):
    """A ``cgroup`` selector names no cgroup (``cgroup``, as written)."""
    _optional = ("cgroup",)


class InvalidParameter(CudackptError, ValueError):
    """The daemon refused a parameter (``parameter`` names it)."""
    _optional = ("parameter",)


class MethodNotFound(CudackptError):
    """The daemon does not have this method (an older daemon?)."""
    _optional = ("method",)


class ExpectedMore(CudackptError):
    """The method needs ``more``."""


# ---- the records a group's error carries ------------------------------------
#
# Here rather than in cudackpt.types (which names them too): GroupFailed
# carries them, and a Member's exception is made by from_reply, so they and
# the errors are one layer.

@dataclass(frozen=True)
class Member:
    """One member's outcome in a group operation.  ``error`` is the full
    name of its error, if it failed; ``exception`` the matching exception."""

    pid: int
    start_time: int
    state: Optional[str]
    duration_ms: float
    error: Optional[str] = None
    error_parameters: Optional[Dict[str, Any]] = None
    rollback_error: Optional[str] = None

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "Member":
        return cls(int(j["pid"]), int(j.get("start_time") or 0), j.get("state"),
                   float(j.get("duration_ms") or 0.0), j.get("error"), j.get("error_parameters"),
                   j.get("rollback_error"))

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def exception(self) -> Optional[CudackptError]:
        if self.error is None:
            return None
        return from_reply(self.error, self.error_parameters or {})


@dataclass(frozen=True)
class Skipped:
    """A process of a cgroup or tree selection left out (``reason``:
    ``"not-cuda"``)."""

    pid: int
    start_time: int
    reason: str

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "Skipped":
        return cls(int(j["pid"]), int(j.get("start_time") or 0), str(j.get("reason", "")))


_BY_SHORT_NAME: Dict[str, Type[CudackptError]] = {
    cls.__name__: cls for cls in (
        NoSuchProcess, NotCudaProcess, PermissionDenied, InvalidState, Timeout, InvalidGpuMapping,
        NotSupported, ProcessGone, ProcessStopped, ProcessChanged, DriverUnavailable, DriverError,
        QueueFull, GroupFailed, GroupTooLarge, ShuttingDown, InvalidRequest, MessageTooLarge, NoSuchLease,
        InsufficientGpuMemory,
        NoSuchCgroup,
    )
}
_BY_FULL_NAME: Dict[str, Type[CudackptError]] = {
    "org.varlink.service.InvalidParameter": InvalidParameter,
    "org.varlink.service.MethodNotFound": MethodNotFound,
    "org.varlink.service.ExpectedMore": ExpectedMore,
    "org.varlink.service.PermissionDenied": PermissionDenied,
}

_NOT_SUPPORTED_MESSAGE = ("CUDA checkpointing is not supported by the installed NVIDIA driver. "
                          "Upgrade to a driver version with CUDA checkpoint API support.")


def _plain_message(short: str, parameters: Mapping[str, Any]) -> str:
    shown = ", ".join("%s=%r" % (k, v) for k, v in parameters.items()
                      if k not in ("members", "skipped", "error_parameters"))
    return "%s: %s" % (short, shown) if shown else short


def _message(cls: Type[CudackptError], short: str, parameters: Mapping[str, Any]) -> str:
    if cls is NotSupported:
        return _NOT_SUPPORTED_MESSAGE
    if cls is DriverError:
        name = str(parameters.get("cuda_error") or "CUDA_ERROR_UNKNOWN")
        code = parameters.get("cuda_error_code")
        return cuda_error_message(name, code if isinstance(code, int) else None)
    cuda_name = getattr(cls, "cuda_error", None)
    if cuda_name:
        return cuda_error_message(cuda_name)
    if cls is GroupFailed:
        return "%s failed in its %s phase: member %s: %s (rolled back: %s)" % (
            parameters.get("method"), parameters.get("phase"), parameters.get("pid"),
            str(parameters.get("error", "")).rsplit(".", 1)[-1],
            "yes" if parameters.get("rolled_back") else "no")
    return _plain_message(short, parameters)


def from_reply(name: str, parameters: Mapping[str, Any]) -> CudackptError:
    """The exception for a daemon's error reply ``name`` with ``parameters``."""
    short = name.rsplit(".", 1)[-1]
    cls = _BY_FULL_NAME.get(name)
    if cls is None:
        cls = _BY_SHORT_NAME.get(short, CudackptError) if name.startswith("io.cudackpt.") else CudackptError
    params = dict(parameters) if isinstance(parameters, Mapping) else {}
    exc = cls._make(_message(cls, short, params), name, params)
    if cls is not CudackptError and (getattr(cls, "cuda_error", None) or cls is DriverError):
        exc.__notes__ = ["cudackptd: " + _plain_message(name, params)]  # type: ignore[attr-defined]
    if cls is GroupFailed and params.get("error"):
        exc.__cause__ = exc.cause  # type: ignore[attr-defined]
    return exc
