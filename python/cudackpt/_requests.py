"""The parameters of each call, checked and written as the daemon wants
them.  Shared by the blocking client and the asyncio one: neither builds a
request of its own."""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Union

from . import _config

Params = Dict[str, Any]
PidRef = Union[int, Tuple[int, int]]
"""A member of a ``pids`` selection: a pid, or (pid, start_time)."""

_UINT32_MAX = 4294967295
_PID_MAX = 2147483647
_UUID_TYPE_MESSAGE = "GPU UUID values must be CUDA UUID objects or UUID strings"


def check_pid(pid: Any) -> int:
    """pid, if it is a positive int (not a bool); cuda-core's messages."""
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise TypeError("pid must be an int")
    if pid <= 0:
        raise ValueError("pid must be a positive int")
    return pid


def check_timeout_ms(timeout_ms: Any) -> int:
    """timeout_ms, if it is an int from 0 to 2**32-1; cuda-core's messages."""
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int):
        raise TypeError("timeout_ms must be an int")
    if timeout_ms < 0:
        raise ValueError("timeout_ms must be >= 0")
    if timeout_ms > _UINT32_MAX:
        raise OverflowError("timeout_ms must be at most %d" % _UINT32_MAX)
    return timeout_ms


def _check_lease_ms(lease_ms: Any) -> int:
    if isinstance(lease_ms, bool) or not isinstance(lease_ms, int):
        raise TypeError("lease_ms must be an int")
    if not 1 <= lease_ms <= _UINT32_MAX:
        raise ValueError("lease_ms must be from 1 to %d" % _UINT32_MAX)
    return lease_ms


def _uuid_bytes_of_object(value: Any) -> Optional[bytes]:
    """The 16 bytes of a CUuuid-like object (cuda.bindings' ``CUuuid`` and
    Python's ``uuid.UUID`` both have ``.bytes``), or None."""
    raw = getattr(value, "bytes", None)
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = raw.encode("latin-1")
    try:
        data = bytes(b & 0xFF for b in raw) if not isinstance(raw, (bytes, bytearray)) else bytes(raw)
    except TypeError:
        return None
    return data if len(data) == 16 else None


def uuid_bytes(value: Any, nvidia_smi_form: bool = False) -> bytes:
    """The 16 bytes of a GPU UUID: a CUuuid-like object, or a string of 32
    hex digits with optional hyphens (what ``cuda.core.Device.uuid``
    returns).  With ``nvidia_smi_form`` a leading ``GPU-`` is accepted too
    (as ``nvidia-smi`` prints them).  cuda-core's checks and messages."""
    if isinstance(value, str):
        text = value
        if nvidia_smi_form and text[:4].upper() == "GPU-":
            text = text[4:]
        try:
            raw = bytes.fromhex(text.replace("-", ""))
        except ValueError:
            raw = b""
        if len(raw) != 16:
            raise ValueError("GPU UUID string must be 32 hex characters (with optional hyphens), got %r" % (value,))
        return raw
    raw_obj = _uuid_bytes_of_object(value)
    if raw_obj is None:
        raise TypeError(_UUID_TYPE_MESSAGE)
    return raw_obj


def uuid_text(raw: bytes) -> str:
    """16 bytes as the daemon and nvidia-smi write a GPU UUID."""
    h = raw.hex()
    return "GPU-%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])


def gpu_mapping(mapping: Any, nvidia_smi_form: bool = True) -> Optional[Dict[str, str]]:
    """A GPU mapping as the daemon takes it, or None for none (None or
    empty: restore in place)."""
    if mapping is None:
        return None
    if not isinstance(mapping, Mapping):
        raise TypeError("gpu_mapping must be a mapping from checkpointed GPU UUID to restore GPU UUID")
    out: Dict[str, str] = {}
    for old, new in mapping.items():
        out[uuid_text(uuid_bytes(old, nvidia_smi_form))] = uuid_text(uuid_bytes(new, nvidia_smi_form))
    return out or None


def _put(params: Params, key: str, value: Any) -> None:
    if value is not None:
        params[key] = value


def single(pid: int, start_time: Optional[int] = None) -> Params:
    """The parameters naming one process (pinned to its start time)."""
    params: Params = {"pid": check_pid(pid)}
    _put(params, "start_time", start_time)
    return params


def lease(params: Params, lease_ms: Optional[int], lease_on_close: Optional[bool]) -> Params:
    """Adds a lease's parameters."""
    if lease_ms is not None:
        params["lease_ms"] = _check_lease_ms(lease_ms)
    if lease_on_close:
        params["lease_on_close"] = True
    return params


def lock(pid: int, timeout_ms: Optional[int], start_time: Optional[int], lease_ms: Optional[int],
         lease_on_close: Optional[bool]) -> Params:
    """Lock's and Suspend's parameters."""
    params = single(pid, start_time)
    if timeout_ms is not None:
        params["timeout_ms"] = check_timeout_ms(timeout_ms)
    return lease(params, lease_ms, lease_on_close)


def restore(pid: int, mapping: Any, start_time: Optional[int]) -> Params:
    """Restore's and Resume's parameters."""
    params = single(pid, start_time)
    _put(params, "gpu_mapping", gpu_mapping(mapping))
    return params


def _pid_ref(ref: Any) -> Params:
    if isinstance(ref, tuple) and len(ref) == 2:
        return {"pid": check_pid(ref[0]), "start_time": int(ref[1])}
    pid = getattr(ref, "pid", ref)
    out: Params = {"pid": check_pid(pid)}
    _put(out, "start_time", getattr(ref, "start_time", None))
    return out


def selector(pids: Optional[Iterable[Any]] = None, cgroup: Optional[str] = None,
             tree: Optional[int] = None) -> Params:
    """A selector: exactly one of ``pids`` (pids, (pid, start_time) pairs or
    objects with ``pid`` and ``start_time``, as ProcessInfo), ``cgroup`` (a
    cgroup v2 path) or ``tree`` (a pid and its descendants)."""
    given = [k for k, v in (("pids", pids), ("cgroup", cgroup), ("tree", tree)) if v is not None]
    if len(given) != 1:
        raise ValueError("give exactly one of pids=, cgroup= or tree= (got %s)" % (", ".join(given) or "none"))
    if pids is not None:
        if isinstance(pids, (str, bytes)) or not isinstance(pids, Iterable):
            raise TypeError("pids must be an iterable of pids")
        refs = [_pid_ref(p) for p in pids]
        if not refs:
            raise ValueError("pids must not be empty")
        return {"pids": refs}
    if cgroup is not None:
        if not isinstance(cgroup, str):
            raise TypeError("cgroup must be a str")
        return {"cgroup": cgroup}
    return {"tree": check_pid(tree)}


def optional_selector(pids: Optional[Iterable[Any]] = None, cgroup: Optional[str] = None,
                      tree: Optional[int] = None) -> Optional[Params]:
    """The parameters of a call that selects (ListProcesses, Watch): none
    for every process the caller may see, else the selector."""
    if pids is None and cgroup is None and tree is None:
        return None
    return {"selector": selector(pids, cgroup, tree)}


def group(sel: Params, timeout_ms: Optional[int] = None, mapping: Any = None,
          lease_ms: Optional[int] = None, lease_on_close: Optional[bool] = None) -> Params:
    """A group method's parameters."""
    params: Params = {"selector": sel}
    if timeout_ms is not None:
        params["timeout_ms"] = check_timeout_ms(timeout_ms)
    _put(params, "gpu_mapping", gpu_mapping(mapping))
    return lease(params, lease_ms, lease_on_close)


LOCK_MARGIN_S = 30.0
"""What a call's default limit adds, at least, to a lock's own timeout_ms."""


def check_timeout(timeout: Any) -> float:
    """``timeout`` in seconds, if it is a number above 0 (``math.inf``: no
    limit)."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError("timeout must be a number of seconds")
    seconds = float(timeout)
    if not seconds > 0:  # NaN too
        raise ValueError("timeout must be positive")
    return seconds


def client_timeout(timeout: Any) -> float:
    """A client's default limit: ``timeout``, else ``$CUDACKPT_TIMEOUT``,
    else 300 s."""
    return _config.default_timeout() if timeout is None else check_timeout(timeout)


def connect_timeout(seconds: Any) -> float:
    """How long connecting waits for a restarting daemon: ``seconds`` (0
    to 600: 0 is one try), else ``$CUDACKPT_CONNECT_TIMEOUT_MS``, else 3 s."""
    if seconds is None:
        return _config.default_connect_timeout()
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError("connect_timeout must be a number of seconds")
    value = float(seconds)
    if not 0 <= value <= _config.MAX_CONNECT_TIMEOUT:  # NaN too
        raise ValueError("connect_timeout must be from 0 to %d seconds" % _config.MAX_CONNECT_TIMEOUT)
    return value


def spin_us(value: Any) -> int:
    """How long a call polls for its reply without sleeping, in
    microseconds: ``value`` (0 or more; above :data:`_config.MAX_SPIN_US`
    taken as that), else ``$CUDACKPT_SPIN_US``, else 0."""
    if value is None:
        return _config.default_spin_us()
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("spin_us must be an int (microseconds)")
    if value < 0:
        raise ValueError("spin_us must not be negative")
    return min(value, _config.MAX_SPIN_US)


def call_timeout(timeout: Any, default: float, timeout_ms: Optional[int] = None) -> float:
    """The seconds a call waits for its reply (``math.inf``: as long as it
    takes).  ``timeout``, the call's own, is taken as it is: the caller
    chose it.  Without one, the client's ``default``; for a lock with
    ``timeout_ms`` (Lock, Suspend and their group forms) that long on top
    (and at least LOCK_MARGIN_S), so the driver's own limit always comes
    first; and no limit at all for ``timeout_ms=0`` (a lock that waits as
    long as it takes, as cuda-core's)."""
    if timeout is not None:
        return check_timeout(timeout)
    if timeout_ms == 0:
        return math.inf
    if timeout_ms:
        return timeout_ms / 1000.0 + max(default, LOCK_MARGIN_S)
    return default


def unknown_state_value(state: str) -> Optional[int]:
    """N of a state ``unknown-N``, else None."""
    if state.startswith("unknown-"):
        try:
            return int(state[len("unknown-"):])
        except ValueError:
            return None
    return None
