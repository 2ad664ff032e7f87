"""Across a restart of the daemon (SIGKILL, then started again on the same
socket and lease store): connecting waits for it, and a ``with`` block's
lease is claimed again (Hold.claim(), or at the block's end) or reported
lost (LeaseLost) once the daemon has undone it; blocking and asyncio.

Each test has a daemon of its own with a short lease_claim_grace_ms.  The
simulator keeps a process's state in the process, as the real driver does
(tests/sim/sim.c), so the next daemon reads the targets as they were.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
from typing import Iterator

import pytest

import cudackpt
from cudackpt import aio

from conftest import Daemon, Targets, await_true, serving

GRACE_MS = 1000
UNCLAIMED = "did not claim it within lease_claim_grace_ms"


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with serving({"lease_claim_grace_ms": GRACE_MS}, {}) as d:
        yield d


def restart(daemon: Daemon) -> None:
    daemon.kill()
    daemon.restart()


def past_grace() -> None:
    time.sleep(GRACE_MS / 1000 + 1.0)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_the_simulator_keeps_states_across_a_restart(daemon: Daemon, targets: Targets) -> None:
    # The README's stand-in (CUDACKPT_SIM=1 and nothing else) keeps its
    # state in itself, as a real CUDA process does; CUDACKPT_SIM_STATE=-
    # keeps it in the daemon's memory alone, which a restart forgets.
    locked, checkpointed, forgotten = targets.start(), targets.start(), targets.start(CUDACKPT_SIM_STATE="-")
    cudackpt.lock(locked)
    cudackpt.suspend(checkpointed)
    cudackpt.suspend(forgotten)
    restart(daemon)
    assert [cudackpt.state(p) for p in (locked, checkpointed, forgotten)] == ["locked", "checkpointed", "running"]
    cudackpt.unlock(locked)
    cudackpt.resume(checkpointed)
    restart(daemon)
    assert [cudackpt.state(p) for p in (locked, checkpointed)] == ["running", "running"]


# ---- (a) a with block across a restart -------------------------------------------

def test_claim_keeps_the_lease(daemon: Daemon, targets: Targets) -> None:
    pid = targets.start()
    with cudackpt.suspended(pid) as hold:
        assert hold.lease is not None and hold.lease.on_close
        assert len(hold.lease.secret or "") == 32 and hold.lease.secret not in repr(hold.lease)
        assert hold.claim() is False  # the connection still holds it: nothing sent
        restart(daemon)
        assert hold.claim() is True
        assert hold.claim() is False
        past_grace()
        assert cudackpt.state(pid) == "checkpointed"
        assert UNCLAIMED not in daemon.log()
    assert cudackpt.state(pid) == "running"


def test_claimed_at_the_end_of_the_block(daemon: Daemon, targets: Targets) -> None:
    pid = targets.start()
    with cudackpt.locked(pid):
        restart(daemon)
    # The block's end claimed the lease, then unlocked it itself.
    assert cudackpt.state(pid) == "running"
    past_grace()
    assert UNCLAIMED not in daemon.log()


def test_lease_lost_without_a_claim(daemon: Daemon, targets: Targets) -> None:
    pid = targets.start()
    with pytest.raises(cudackpt.LeaseLost) as lost:
        with cudackpt.suspended(pid) as hold:
            restart(daemon)
            await_true("the daemon to undo the unclaimed lease", lambda: cudackpt.state(pid) == "running",
                       timeout=GRACE_MS / 1000 + 10)
    assert hold.lease is not None and lost.value.lease == hold.lease.id
    assert isinstance(lost.value, cudackpt.CudackptError)
    assert isinstance(lost.value.__cause__, cudackpt.NoSuchLease)
    assert UNCLAIMED in daemon.log()

    # A claim too late raises it (once); the block's own exception wins.
    with cudackpt.suspended(pid) as hold:
        restart(daemon)
        past_grace()
        with pytest.raises(cudackpt.LeaseLost):
            hold.claim()
    with pytest.raises(KeyError):
        with cudackpt.suspended(pid):
            restart(daemon)
            past_grace()
            raise KeyError("the block's")
    assert cudackpt.state(pid) == "running"


def test_release_and_renew_claim_first(daemon: Daemon, targets: Targets) -> None:
    pid = targets.start()
    with cudackpt.suspended(pid, lease_ms=600000) as hold:
        restart(daemon)
        hold.renew(600000)  # its connection is gone: claimed on a new one first
        past_grace()
        assert cudackpt.state(pid) == "checkpointed"
        restart(daemon)
        hold.release()
    assert cudackpt.state(pid) == "checkpointed"
    past_grace()
    assert cudackpt.state(pid) == "checkpointed" and UNCLAIMED not in daemon.log()
    cudackpt.resume(pid)


# ---- (b) connecting waits for the daemon ------------------------------------------------

def test_a_socket_path_that_is_no_socket(tmp_path) -> None:
    # No restart mends it: said at once, not after the connect wait.
    path = tmp_path / "not-a-socket"
    path.write_text("x")
    started = time.monotonic()
    with pytest.raises(cudackpt.DaemonUnavailable, match="not a socket"):
        cudackpt.Client(str(path), connect_timeout=20).state(1)
    with pytest.raises(cudackpt.DaemonUnavailable, match="not a socket"):
        run(aio.Client(str(path), connect_timeout=20).state(1))
    assert time.monotonic() - started < 2


def test_call_waits_for_the_daemon(daemon: Daemon, targets: Targets, monkeypatch) -> None:
    pid = targets.start()
    client = cudackpt.Client(daemon.socket, connect_timeout=20)
    assert client.state(pid) == "running"
    daemon.kill()  # its socket file stays, refusing
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        call = pool.submit(client.state, pid)
        time.sleep(0.5)
        assert not call.done()
        os.unlink(daemon.socket)  # and with no socket file at all
        time.sleep(0.3)
        assert not call.done()
        daemon.restart()
        assert call.result(timeout=20) == "running"

    daemon.kill()
    started = time.monotonic()
    with pytest.raises(cudackpt.DaemonUnavailable):
        cudackpt.Client(daemon.socket, connect_timeout=0).state(pid)  # one try
    assert time.monotonic() - started < 0.5
    started = time.monotonic()
    with pytest.raises(cudackpt.DaemonUnavailable):
        cudackpt.Client(daemon.socket, connect_timeout=0.6).state(pid)
    assert 0.5 < time.monotonic() - started < 3
    started = time.monotonic()
    with pytest.raises(cudackpt.DaemonUnavailable):  # bounded by the call's own limit
        cudackpt.Client(daemon.socket, connect_timeout=30).state(pid, timeout=0.6)
    assert 0.5 < time.monotonic() - started < 3
    monkeypatch.setenv("CUDACKPT_CONNECT_TIMEOUT_MS", "250")
    assert cudackpt.Client(daemon.socket).connect_timeout == 0.25
    monkeypatch.setenv("CUDACKPT_CONNECT_TIMEOUT_MS", "nonsense")
    assert cudackpt.Client(daemon.socket).connect_timeout == 3.0
    with pytest.raises(ValueError):
        cudackpt.Client(daemon.socket, connect_timeout=-1)
    daemon.restart()


# ---- (c) asyncio ---------------------------------------------------------------------

def test_aio_claim_keeps_the_lease(daemon: Daemon, targets: Targets) -> None:
    pid = targets.start()

    async def main() -> None:
        client = aio.Client(daemon.socket)
        async with client.suspended(pid) as hold:
            assert len(hold.lease.secret or "") == 32
            assert await hold.claim() is False
            restart(daemon)
            assert await hold.claim() is True
            await asyncio.sleep(GRACE_MS / 1000 + 1.0)
            assert await client.state(pid) == "checkpointed"
            assert UNCLAIMED not in daemon.log()
        assert await client.state(pid) == "running"

        with pytest.raises(cudackpt.LeaseLost):
            async with client.suspended(pid):
                restart(daemon)
                await asyncio.sleep(GRACE_MS / 1000 + 1.0)
        assert await client.state(pid) == "running"

        async with client.locked(pid):  # claimed at the block's end
            restart(daemon)
        assert await client.state(pid) == "running"
        await client.close()
    run(main())


def test_aio_call_waits_for_the_daemon(daemon: Daemon, targets: Targets) -> None:
    pid = targets.start()

    async def main() -> None:
        client = aio.Client(daemon.socket, connect_timeout=20)
        assert await client.state(pid) == "running"
        daemon.kill()
        call = asyncio.ensure_future(client.state(pid))
        await asyncio.sleep(0.5)
        assert not call.done()
        await asyncio.get_running_loop().run_in_executor(None, daemon.restart)
        assert await call == "running"

        daemon.kill()
        started = time.monotonic()
        with pytest.raises(cudackpt.DaemonUnavailable):
            await aio.Client(daemon.socket, connect_timeout=0).state(pid)
        assert time.monotonic() - started < 0.5
        with pytest.raises(cudackpt.DaemonUnavailable):
            await aio.Client(daemon.socket, connect_timeout=30).state(pid, timeout=0.6)
        assert 0.5 < time.monotonic() - started < 3.5
        daemon.restart()
        await client.close()
    run(main())
