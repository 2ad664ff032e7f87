"""A drop-in for ``cuda.core.checkpoint`` (cuda-core 1.2) that goes through
cudackptd instead of calling the driver::

    from cudackpt.checkpoint import Process     # was: from cuda.core.checkpoint import Process
    from cudackpt import checkpoint             # was: from cuda.core import checkpoint

    p = Process(pid)
    p.lock(timeout_ms=5000)
    p.checkpoint()
    ...
    p.restore()
    p.unlock()

Same names, arguments, checks, return values and exceptions as cuda-core's;
what differs is who may call (anyone the daemon authorises, not only root
or the target's user) and what the daemon adds (one operation at a time per
process, stopped processes refused instead of waited for, pid reuse
caught).  The daemon is found at ``$CUDACKPT_SOCKET`` (else the default
path); see :func:`cudackpt.set_default_client` to choose another.

Errors: a driver result raises ``CUDAError`` (cuda-core's class when
cuda-core is installed) with cuda-core's message, and so does a pid no
process has (``CUDA_ERROR_OPERATING_SYSTEM``); ``CUDA_ERROR_NOT_SUPPORTED``
raises a ``RuntimeError``, as cuda-core does; the exceptions are also the
:mod:`cudackpt.errors` classes with the daemon's parameters.  Refusals of
the daemon's own raise ``PermissionError``, ``ProcessLookupError`` and the
like (see :mod:`cudackpt.errors`).
"""

from __future__ import annotations

from collections.abc import Mapping as _Mapping
from types import SimpleNamespace as _SimpleNamespace
from typing import Any as _Any
from typing import Literal as _Literal
from typing import Optional as _Optional

from . import _requests
from .client import default_client as _client
from .errors import _NOT_SUPPORTED_MESSAGE

_NO_LIMIT = float("inf")
"""The four operations wait for the daemon's reply as long as it takes, as
cuda-core's calls wait for the driver's: a checkpoint of a large process
(or a lock with ``timeout_ms=0``) is never cut short on the client's side."""

_ProcessStateType = _Literal["running", "locked", "checkpointed", "failed"]


class Process:
    """
    CUDA process that can be locked, checkpointed, restored, and unlocked.

    Parameters
    ----------
    pid : int
        Process ID of the CUDA process.
    """

    __slots__ = ("_pid",)

    def __init__(self, pid: int):
        self._pid = _requests.check_pid(pid)

    @property
    def pid(self) -> int:
        """
        Process ID of the CUDA process.
        """
        return self._pid

    @property
    def state(self) -> _ProcessStateType:
        """
        CUDA checkpoint state for this process.
        """
        state = _client().get_state(self._pid).state
        value = _requests.unknown_state_value(state)
        if value is not None or state not in ("running", "locked", "checkpointed", "failed"):
            raise RuntimeError("Unknown CUDA checkpoint process state: %s" % (value if value is not None else state))
        return state  # type: ignore[return-value]

    @property
    def restore_thread_id(self) -> int:
        """
        CUDA restore thread ID for this process.
        """
        return _client().get_restore_thread_id(self._pid)

    def lock(self, timeout_ms: int = 0) -> None:
        """
        Lock this process, blocking further CUDA API calls.

        Parameters
        ----------
        timeout_ms : int, optional
            Timeout in milliseconds. A value of 0 indicates no timeout.
        """
        _client().lock(self._pid, _requests.check_timeout_ms(timeout_ms), timeout=_NO_LIMIT)

    def checkpoint(self) -> None:
        """
        Checkpoint the GPU memory contents of this locked process.
        """
        _client().checkpoint(self._pid, timeout=_NO_LIMIT)

    def restore(self, gpu_mapping: _Optional[_Mapping] = None) -> None:
        """
        Restore this checkpointed process.

        Parameters
        ----------
        gpu_mapping : mapping, optional
            GPU UUID remapping from each checkpointed GPU UUID to the GPU UUID
            to restore onto, each a ``CUuuid`` (or any object with the 16
            ``bytes``) or a UUID string as ``cuda.core.Device.uuid`` returns
            it. For migration workflows, provide mappings for every GPU
            visible to the kernel-mode driver.
        """
        _client().restore(self._pid, _checked_mapping(gpu_mapping), timeout=_NO_LIMIT)

    def unlock(self) -> None:
        """
        Unlock this locked process so it can resume CUDA API calls.
        """
        _client().unlock(self._pid, timeout=_NO_LIMIT)


# ---- cuda-core's private probes ----------------------------------------------
#
# cuda-python's own tests of cuda.core.checkpoint decide what to skip by two
# private functions of the module, _get_driver() and
# _require_gpu_mapping_bindings(driver); here they ask the daemon's driver
# (GetStatus) and answer in cuda-core's words, so that those tests run
# against the daemon with only their import line changed.

_REMAP_DRIVER_VERSION = 13000
"""Restore onto other GPUs came with CUDA 13.0 (driver 580)."""
_GPU_MAPPING_ATTRS = ("CUcheckpointGpuPair",)


def _get_driver() -> _Any:
    """The daemon's CUDA driver as GetStatus gives it (``version``, and
    ``CUcheckpointGpuPair`` where it restores onto other GPUs); a
    ``RuntimeError`` with cuda-core's message when the daemon has no usable
    driver."""
    driver = _client().call("GetStatus").get("driver") or {}
    if not driver.get("available"):
        raise RuntimeError(_NOT_SUPPORTED_MESSAGE)
    found = _SimpleNamespace(version=driver.get("version"))
    if isinstance(found.version, int) and found.version >= _REMAP_DRIVER_VERSION:
        found.CUcheckpointGpuPair = True
    return found


def _require_gpu_mapping_bindings(driver: _Any) -> None:
    """A ``RuntimeError`` with cuda-core's message when driver cannot
    restore onto other GPUs."""
    missing = [name for name in _GPU_MAPPING_ATTRS if not hasattr(driver, name)]
    if missing:
        raise RuntimeError("CUDA checkpoint GPU remapping requires cuda.bindings with GPU remapping support. "
                           "Missing: %s (the daemon's CUDA driver is older than 13.0)" % ", ".join(missing))


def _checked_mapping(gpu_mapping: _Any) -> _Optional[dict]:
    """cuda-core's checks of a mapping: its UUID strings are hex digits
    only (no ``GPU-``), as ``Device.uuid`` returns them."""
    if gpu_mapping is None:
        return None
    if not isinstance(gpu_mapping, _Mapping):
        raise TypeError("gpu_mapping must be a mapping from checkpointed GPU UUID to restore GPU UUID")
    if not gpu_mapping:
        return None
    return {_requests.uuid_text(_requests.uuid_bytes(old)): _requests.uuid_text(_requests.uuid_bytes(new))
            for old, new in gpu_mapping.items()}


__all__ = [
    "Process",
]
