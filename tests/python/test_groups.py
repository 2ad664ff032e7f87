"""cudackpt.Job: the six group operations on pids, tree and cgroup
selections, the members' outcomes, progress, and GroupFailed with its
rollback, against the real daemon on the simulator."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile

import pytest

import cudackpt
from cudackpt import Job

from conftest import await_true, start_time_of


def states(*pids: int) -> list:
    return [cudackpt.state(p) for p in pids]


def test_selector_checks() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Job()
    with pytest.raises(ValueError, match="exactly one"):
        Job([1], tree=1)
    with pytest.raises(ValueError, match="must not be empty"):
        Job([])
    with pytest.raises(TypeError):
        Job(pids=[True])
    with pytest.raises(ValueError):
        Job(tree=0)
    assert Job([5, (6, 77)]).selector == {"pids": [{"pid": 5}, {"pid": 6, "start_time": 77}]}


def test_six_operations_on_pids(daemon, targets) -> None:
    a, b = targets.start(), targets.start()
    job = Job([a, (b, start_time_of(b))])
    r = job.lock(timeout_ms=5000)
    assert sorted(r.pids) == sorted([a, b]) and {m.state for m in r.members} == {"locked"}
    assert all(m.ok and m.exception is None for m in r.members)
    assert {m.start_time for m in r.members} == {start_time_of(a), start_time_of(b)}
    assert job.checkpoint().members[0].state == "checkpointed"
    assert states(a, b) == ["checkpointed", "checkpointed"]
    assert {m.state for m in job.restore().members} == {"locked"}
    assert {m.state for m in job.unlock().members} == {"running"}
    r = job.suspend()
    assert {m.state for m in r.members} == {"checkpointed"} and r.duration_ms > 0 and r.lease is None
    assert [p.state for p in job.processes()] == ["checkpointed", "checkpointed"]
    assert {m.state for m in job.resume().members} == {"running"}
    assert states(a, b) == ["running", "running"]


def test_progress(daemon, targets) -> None:
    a, b = targets.start(), targets.start()
    seen = []
    Job([a, b]).suspend(progress=seen.append)
    assert [(p.phase, p.total) for p in seen] == [("lock", 2)] * 2 + [("checkpoint", 2)] * 2
    assert [p.done for p in seen] == [1, 2, 1, 2]
    assert {p.member.pid for p in seen} == {a, b}
    Job([a, b]).resume(progress=seen.append)
    assert [p.phase for p in seen[4:]] == ["restore"] * 2 + ["unlock"] * 2


def test_failed_checkpoint_rolls_back(daemon, targets) -> None:
    a, bad = targets.start(), targets.start(CUDACKPT_SIM_MANAGED="1")
    with pytest.raises(cudackpt.GroupFailed) as e:
        Job([a, bad]).suspend()
    err = e.value
    assert err.method == "SuspendGroup" and err.phase == "checkpoint" and err.pid == bad
    assert err.rolled_back is True
    assert isinstance(err.cause, cudackpt.NotSupported) and isinstance(err.__cause__, cudackpt.NotSupported)
    assert {m.pid: m.state for m in err.members} == {a: "running", bad: "running"}
    failed = [m for m in err.members if not m.ok]
    assert [m.pid for m in failed] == [bad] and isinstance(failed[0].exception, cudackpt.NotSupported)
    assert states(a, bad) == ["running", "running"]


def test_not_cuda_member_refuses_the_group(daemon, targets) -> None:
    a, plain = targets.start(), targets.start(cuda=False)
    with pytest.raises(cudackpt.GroupFailed) as e:
        Job([a, plain]).lock()
    assert e.value.phase in ("select", "state") and isinstance(e.value.cause, cudackpt.NotCudaProcess)
    assert states(a) == ["running"]


def _comm(pid: int) -> str:
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def _children(pid: int) -> list:
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
            out += [int(c) for c in f.read().split()]
    return out


def test_tree(daemon, targets) -> None:
    top = targets.start(["sh", "-c", "sleep 3600 & sleep 3600 & wait"])
    try:
        await_true("two children", lambda: len(_children(top)) == 2)
        kids = _children(top)
        # A child maps the simulator as sh did from its fork: it counts once
        # it is sleep (its exec has replaced sh's mappings) and maps it again.
        for k in kids:
            await_true("pid %d to exec sleep" % k, lambda: _comm(k) == "sleep")
            targets.await_mapped(k)
        r = Job(tree=top).suspend()
        assert sorted(r.pids) == sorted([top] + kids)
        assert states(top, *kids) == ["checkpointed"] * 3
        assert sorted(p.pid for p in Job(tree=top).processes()) == sorted([top] + kids)
        assert {m.state for m in Job(tree=top).resume().members} == {"running"}
    finally:
        for k in _children(top):
            os.kill(k, signal.SIGKILL)


@pytest.fixture
def cgroup_mount():
    """A cgroup2 hierarchy mounted in a fresh directory (needs root)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount cgroup2")
    mnt = tempfile.mkdtemp(prefix="cudackpt-py-cg2-")
    r = subprocess.run(["mount", "-t", "cgroup2", "none", mnt], stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=60)
    if r.returncode != 0:
        os.rmdir(mnt)
        pytest.skip("cannot mount cgroup2: %s" % r.stderr.strip())
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt], timeout=60)
        os.rmdir(mnt)


def test_cgroup(daemon, targets, cgroup_mount) -> None:
    name = "cudackpt-py-%d" % os.getpid()
    top = os.path.join(cgroup_mount, name)
    os.mkdir(top)
    a, b, plain = targets.start(), targets.start(), targets.start(cuda=False)
    try:
        for pid in (a, b, plain):
            with open(os.path.join(top, "cgroup.procs"), "w") as f:
                f.write("%d\n" % pid)
        job = Job(cgroup="/" + name)
        r = job.suspend()
        assert sorted(r.pids) == sorted([a, b])
        assert [(s.pid, s.reason) for s in r.skipped] == [(plain, "not-cuda")]
        assert states(a, b) == ["checkpointed", "checkpointed"]
        assert sorted(p.pid for p in job.processes()) == sorted([a, b])
        assert all(p.cgroup == "/" + name for p in job.processes())
        assert {m.state for m in job.resume().members} == {"running"}
    finally:
        for pid in (a, b, plain):
            with open(os.path.join(cgroup_mount, "cgroup.procs"), "w") as f:
                f.write("%d\n" % pid)
        os.rmdir(top)
