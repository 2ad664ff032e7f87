"""What a job is without I/O: its selector, and the parameters of its
group calls and holds.  The blocking :class:`cudackpt.Job` and the asyncio
:class:`cudackpt.aio.Job` are both a :class:`JobBase` with a client.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from . import _requests

Selection = Tuple[Optional[List[Union[int, Tuple[int, int]]]], Optional[str], Optional[int]]


class JobBase:
    """A set of processes named by exactly one of ``pids`` (pids, or
    (pid, start_time) pairs, or ProcessInfo objects), ``cgroup`` (a cgroup
    v2 path and everything below it) or ``tree`` (a pid and all its
    descendants)."""

    def __init__(self, pids: Optional[Iterable[Any]] = None, *, cgroup: Optional[str] = None,
                 tree: Optional[int] = None) -> None:
        self.selector: Dict[str, Any] = _requests.selector(pids, cgroup, tree)

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, self.selector)

    def _params(self, timeout_ms: Optional[int] = None, gpu_mapping: Any = None,
                lease_ms: Optional[int] = None) -> Dict[str, Any]:
        """A group call's parameters for the job."""
        return _requests.group(self.selector, timeout_ms, gpu_mapping, lease_ms)

    def _selection(self) -> Selection:
        """The selector as ``pids``, ``cgroup``, ``tree`` arguments again
        (for ListProcesses and Watch)."""
        sel = self.selector
        pids: Optional[List[Union[int, Tuple[int, int]]]] = None
        if "pids" in sel:
            pids = [(p["pid"], p["start_time"]) if "start_time" in p else p["pid"] for p in sel["pids"]]
        return pids, sel.get("cgroup"), sel.get("tree")
