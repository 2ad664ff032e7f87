"""Leases in Python's idiom: suspended()/locked() as context managers,
undone when the block ends, when it raises, and when the Python process
holding them is SIGKILLed; lease_ms, renew and release."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

import cudackpt
from cudackpt import Job

from conftest import await_true


def test_suspended_for_a_block(daemon, target: int) -> None:
    with cudackpt.suspended(target, lease_ms=600000) as hold:
        assert cudackpt.state(target) == "checkpointed"
        assert hold.result.state == "checkpointed"
        assert hold.lease is not None and hold.lease.on_close and hold.lease.lease_ms == 600000
    assert cudackpt.state(target) == "running"


def test_undone_when_the_block_raises(daemon, target: int) -> None:
    with cudackpt.watch([target]) as events:
        with pytest.raises(KeyError):
            with cudackpt.suspended(target) as hold:
                assert cudackpt.state(target) == "checkpointed"
                raise KeyError("boom")
        assert cudackpt.state(target) == "running"
        ended = events.wait_for(lambda e: e.type == "lease-ended", timeout=20)
        assert ended.lease == hold.lease.id and ended.reason == "finished"


def test_locked_for_a_block(daemon, target: int) -> None:
    with cudackpt.locked(target, timeout_ms=5000):
        assert cudackpt.state(target) == "locked"
    assert cudackpt.state(target) == "running"


def test_release_keeps_it_paused(daemon, target: int) -> None:
    with cudackpt.suspended(target) as hold:
        hold.release()
    assert cudackpt.state(target) == "checkpointed"
    with pytest.raises(LookupError):
        cudackpt.release_lease(hold.lease.id)
    cudackpt.resume(target)


def test_job_suspended_for_a_block(daemon, targets) -> None:
    a, b = targets.start(), targets.start()
    with Job([a, b]).suspended(lease_ms=600000) as hold:
        assert [cudackpt.state(a), cudackpt.state(b)] == ["checkpointed", "checkpointed"]
        assert sorted(hold.result.pids) == sorted([a, b]) and hold.lease is not None
    assert [cudackpt.state(a), cudackpt.state(b)] == ["running", "running"]


def test_lease_ms_expires(daemon, target: int) -> None:
    with cudackpt.watch([target]) as events:
        r = cudackpt.suspend(target, lease_ms=300)
        assert r.lease is not None and not r.lease.on_close
        ended = events.wait_for(lambda e: e.type == "lease-ended", timeout=30)
        assert (ended.lease, ended.reason, ended.undo) == (r.lease.id, "expired", "ok")
    await_true("the undo to end", lambda: cudackpt.get_state(target) == cudackpt.StateReply(target, "running"))


def test_renew(daemon, target: int) -> None:
    r = cudackpt.lock(target, lease_ms=600000)
    with cudackpt.watch([target]) as events:
        assert cudackpt.renew_lease(r.lease.id, 100) == 100
        ended = events.wait_for(lambda e: e.type == "lease-ended", timeout=30)
        assert (ended.reason, ended.undo) == ("expired", "ok")
    await_true("the unlock", lambda: cudackpt.get_state(target) == cudackpt.StateReply(target, "running"))


HOLDER = """
import sys, time, cudackpt
with cudackpt.suspended(int(sys.argv[1]), lease_ms=600000):
    print("suspended", flush=True)
    time.sleep(600)
"""


def test_undone_when_the_holder_is_killed(daemon, target: int) -> None:
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(cudackpt.__file__)))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(target)], env=env, stdout=subprocess.PIPE,
                              universal_newlines=True)
    try:
        with cudackpt.watch([target]) as events:
            assert holder.stdout is not None and holder.stdout.readline() == "suspended\n"
            assert cudackpt.state(target) == "checkpointed"
            holder.send_signal(signal.SIGKILL)
            ended = events.wait_for(lambda e: e.type == "lease-ended", timeout=30)
            assert (ended.reason, ended.undo) == ("closed", "ok")
        await_true("the undo to end", lambda: cudackpt.get_state(target) == cudackpt.StateReply(target, "running"))
    finally:
        holder.kill()
        holder.wait(timeout=20)


FORKING_HOLDER = """
import asyncio, os, signal, sys, time, cudackpt
from cudackpt import aio

def child(hold, release):
    # The fork's copy of the hold: its calls are refused, its block's end
    # does nothing, and it keeps no descriptor of the lease's connection.
    try:
        release()
        said = "released"
    except RuntimeError as e:
        said = "RuntimeError: " + str(e)
    with open(sys.argv[3], "w") as f:
        f.write(said)
    time.sleep(600)

def fork_then_die(hold, release):
    forked = os.fork()
    if forked == 0:
        child(hold, release)
        os._exit(0)
    print(forked, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

async def main(pid):
    async with aio.Client() as client:
        async with client.suspended(pid, lease_ms=600000) as hold:
            fork_then_die(hold, lambda: hold.release().send(None))  # runs to its first await

pid = int(sys.argv[1])
if sys.argv[2] == "aio":
    asyncio.run(main(pid))
with cudackpt.suspended(pid, lease_ms=600000) as hold:
    fork_then_die(hold, hold.release)
"""


@pytest.mark.parametrize("flavour", ["blocking", "aio"])
def test_undone_when_the_holder_dies_leaving_a_fork(daemon, target: int, flavour: str, tmp_path) -> None:
    # The holder forks a child that lives on, then dies: the lease's
    # connection must not live on in the child, so the daemon undoes it.
    said = tmp_path / "child-said"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(cudackpt.__file__)))
    holder = subprocess.Popen([sys.executable, "-c", FORKING_HOLDER, str(target), flavour, str(said)], env=env,
                              stdout=subprocess.PIPE, universal_newlines=True)
    child = 0
    try:
        assert holder.stdout is not None
        child = int(holder.stdout.readline())
        holder.wait(timeout=30)
        assert holder.returncode == -signal.SIGKILL
        await_true("the daemon to undo the lease of the dead holder",
                   lambda: cudackpt.get_state(target) == cudackpt.StateReply(target, "running"))
        await_true("the child to try the lease", lambda: said.exists() and said.read_text() != "")
        assert said.read_text().startswith("RuntimeError: the lease was taken by process %d" % holder.pid)
    finally:
        holder.kill()
        holder.wait(timeout=20)
        if child:
            os.kill(child, signal.SIGKILL)


def test_empty_job_for_a_block(daemon, targets) -> None:
    # A tree of no CUDA process: every member skipped, nothing to undo; the
    # block's own exception comes out as it is.
    plain = targets.start(cuda=False)
    with Job(tree=plain).suspended() as hold:
        assert hold.result.members == [] and [s.pid for s in hold.result.skipped] == [plain]
    with pytest.raises(KeyError):
        with Job(tree=plain).locked():
            raise KeyError("the block's")
