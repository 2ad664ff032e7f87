"""cudackpt for asyncio: the same calls as :class:`cudackpt.Client`, as
coroutines, for asyncio servers (an inference server pausing its engine, a
node agent serving many jobs)::

    from cudackpt import aio

    async with aio.Client() as client:
        await client.suspend(pid)
        async with client.suspended(other_pid, lease_ms=60_000):
            ...
        async with client.watch(pids=[pid]) as events:
            async for event in events:
                ...

Each call opens or reuses a connection of the client's; calls run
concurrently (on separate connections).  Every call has a timeout, as in
the blocking client.

The asyncio twins share the blocking classes' logic, which has no I/O:
requests and replies (``cudackpt._calls``, ``cudackpt._requests``), the
codec (``cudackpt._codec``), the lease's state machine
(``cudackpt._hold``), a job's selector (``cudackpt._jobs``).  Here is only
the talking: ``_connection`` < ``lease``, ``watcher`` < ``job`` <
``client``.
"""

from __future__ import annotations

from ._connection import Connection
from .client import Client
from .job import Job
from .lease import Hold
from .watcher import Watcher

__all__ = ["Client", "Connection", "Job", "Hold", "Watcher"]
