"""Client(spin_us=...) and $CUDACKPT_SPIN_US: a spinning call gets the right
reply without ever sleeping, a call that does not spin sleeps, the call's
timeout still ends a spinning call, and bad values are refused or ignored.

"Sleeping" is a voluntary context switch of the calling thread
(getrusage(RUSAGE_THREAD).ru_nvcsw): a recv() that waits for the reply
makes one; a spin does not (its sched_yield() and preemption by other work
count as involuntary)."""

from __future__ import annotations

import resource
import time

import pytest

import cudackpt

CALLS = 20
"""Calls per check: a client that does not spin sleeps in at least one of
them even when a reply is sometimes there before it waits."""


def nvcsw() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw


def calls_that_slept(client: cudackpt.Client, pid: int) -> int:
    """Makes CALLS calls, GetState of pid and GetInfo in turn, each checked;
    returns how many of them slept."""
    client.get_state(pid)  # connected before counting
    slept = 0
    for i in range(CALLS):
        before = nvcsw()
        reply = client.info() if i % 2 else client.get_state(pid)
        after = nvcsw()
        if i % 2:
            assert "io.cudackpt.Process" in reply["interfaces"]
        else:
            assert reply.pid == pid and reply.state == "running"
        slept += after != before
    return slept


def test_spin_never_sleeps(daemon, target: int) -> None:
    with cudackpt.Client(daemon.socket, timeout=20, spin_us=2000000) as client:
        assert client.spin_us == 1000000  # the cap
        assert calls_that_slept(client, target) == 0


def test_no_spin_sleeps(daemon, target: int, monkeypatch) -> None:
    monkeypatch.delenv("CUDACKPT_SPIN_US", raising=False)
    with cudackpt.Client(daemon.socket, timeout=20) as client:
        assert client.spin_us == 0
        assert calls_that_slept(client, target) > 0
    with cudackpt.Client(daemon.socket, timeout=20, spin_us=0) as client:
        assert calls_that_slept(client, target) > 0


@pytest.mark.parametrize("value", ["1000001", "lots", "-5", "", "1e3", "\u0661", " 5", "+5", "0" * 5000])
def test_spin_env_ignored(daemon, target: int, monkeypatch, value: str) -> None:
    monkeypatch.setenv("CUDACKPT_SPIN_US", value)
    with cudackpt.Client(daemon.socket, timeout=20) as client:
        assert client.spin_us == 0
        assert calls_that_slept(client, target) > 0


def test_spin_env(daemon, target: int, monkeypatch) -> None:
    monkeypatch.setenv("CUDACKPT_SPIN_US", "1000000")
    with cudackpt.Client(daemon.socket, timeout=20) as client:
        assert client.spin_us == 1000000 and "spin_us=1000000" in repr(client)
        assert calls_that_slept(client, target) == 0
    with cudackpt.Client(daemon.socket, timeout=20, spin_us=0) as client:  # the argument wins
        assert calls_that_slept(client, target) > 0


def test_spin_ends_at_timeout(daemon, targets) -> None:
    # 2048 MiB at 1024 MiB/s: a checkpoint of about 2 s.
    pid = targets.start(CUDACKPT_SIM_MEM_MIB="2048", CUDACKPT_SIM_CKPT_MIBPS="1024")
    with cudackpt.Client(daemon.socket, timeout=20, spin_us=1000000) as client:
        t0 = time.monotonic()
        with pytest.raises(cudackpt.CallTimeout):
            client.suspend(pid, timeout=0.2)
        took = time.monotonic() - t0
        # A spin of its own second would take 1 s at least.
        assert 0.15 <= took < 0.9, "the 0.2 s timeout of a spinning call fired after %.3f s" % took


def test_spin_checks() -> None:
    with pytest.raises(ValueError):
        cudackpt.Client("/nonexistent", spin_us=-1)
    for bad in ("5", 5.0, True):
        with pytest.raises(TypeError):
            cudackpt.Client("/nonexistent", spin_us=bad)
