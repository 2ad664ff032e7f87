#!/usr/bin/python3
"""test_restorelease.py: slurm.restorelease, `cudackptctl resume
--slurm-job=J` whose node's part is SIGKILLed during the restore phase, on
the real test cluster (slurmcluster.py, nodedaemons.py; the jobs and their
simulated targets as test_phases.py starts them).  A node's restore is held
by the on-close lease of its RestoreGroup from its first driver call, and
that lease's undo checkpoints the node's members again, so the job stays
suspended whole:
  - n1's part killed while its own RestoreGroup is in flight (n1's
    restore slow; n2 and n3 restored): every target checkpointed again
    once n1's restore ended, none left locked;
  - n1's part killed right after its RestoreGroup answered (n3's restore
    slow, so no node has begun to unlock): the same.
Exit 0 passed, 1 failed, 77 skipped (as test_cluster.py)."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slurmcluster  # noqa: E402
from nodedaemons import NodeDaemons  # noqa: E402
from test_cluster import check, run_on_cluster  # noqa: E402
from test_phases import END_LIMIT_S, ctl, end_job, environ, start_job, states  # noqa: E402
from test_restart import RESTORE_MIBPS, await_said, finish, start  # noqa: E402

ALL = ("n1", "n2", "n3")
# The slow node's restore of 64 MiB takes this long.
RESTORE_S = 64 / RESTORE_MIBPS


def node_part(c, job, node):
    """The pid of job's node-part on node (the nodes share one pid space)."""
    for pid in c.pids():
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        env = environ(pid)
        if b"node-part" in argv and env.get("SLURM_JOB_ID") == job and env.get("SLURMD_NODENAME") == node:
            return pid
    raise AssertionError("no node-part of job %s on %s" % (job, node))


def suspended_job(c, sim, slow):
    """A job suspended whole, slow's restore slow."""
    job = start_job(c, sim, '[ "$SLURMD_NODENAME" = %s ] && export CUDACKPT_SIM_RESTORE_MIBPS=%d;'
                    % (slow, RESTORE_MIBPS))
    r, _ = ctl(c, ["suspend", "--slurm-job=" + job])
    check(r.returncode == 0 and states(c, job) == {n: "c" for n in ALL},
          "the job suspended whole (%r, %r)" % (r.returncode, r.stderr))
    return job


def idle(c, node):
    """Whether node's daemon has no group in flight (a restore, an undo) and holds no lease."""
    r = c.run([c.ctl, "--socket=" + c.node_socket(node), "status"], check=False)
    lines = r.stdout.splitlines()
    return r.returncode == 0 and "groups in flight: 0" in lines and "leases: 0" in lines


def settled(c, job):
    """Every target checkpointed, every node's daemon idle (so none is left to change)."""
    return states(c, job) == {n: "c" for n in ALL} and all(idle(c, n) for n in ALL)


def kill_and_await(c, job, p, said, what, limit):
    """n1's part SIGKILLed; within limit seconds every target checkpointed and every
    daemon idle (no restore left in flight, no lease held); then the command's end."""
    os.kill(node_part(c, job, "n1"), signal.SIGKILL)
    t = time.monotonic()
    try:
        slurmcluster.await_true("every target checkpointed", lambda: settled(c, job), limit)
    except TimeoutError as e:
        raise AssertionError("%s: not every target checkpointed again, its daemon idle, within %gs (%r): %s"
                             % (what, limit, states(c, job), e))
    s = time.monotonic() - t
    out, err, _ = finish(p, said)
    st = states(c, job)
    check(p.returncode != 0 and st == {n: "c" for n in ALL},
          "%s: every target checkpointed again %.2fs after the kill, none left locked or leased, the resume failed "
          "(%r, %r, %r, %r)" % (what, s, p.returncode, out, err[-1500:], st))
    end_job(c, job)


def case_during_restore(c, sim):
    job = suspended_job(c, sim, "n1")
    p, _ = start(c, "resume", job)
    said = []
    await_said(p, said, "restore", ("n2", "n3"), 10)
    check(states(c, job)["n1"] == "c", "n1's restore still in flight when its part is killed")
    kill_and_await(c, job, p, said, "n1's part killed during its RestoreGroup", RESTORE_S + 5 + END_LIMIT_S)


def case_after_restore(c, sim):
    job = suspended_job(c, sim, "n3")
    p, _ = start(c, "resume", job)
    said = []
    await_said(p, said, "restore", ("n1",), 10)
    check(states(c, job)["n3"] == "c", "n3's restore still in flight when n1's part is killed")
    kill_and_await(c, job, p, said, "n1's part killed right after its RestoreGroup answered",
                   RESTORE_S + 5 + END_LIMIT_S)


def main():
    def cases(c, sim):
        with NodeDaemons(c, config={"nvml": sim}):
            case_during_restore(c, sim)
            case_after_restore(c, sim)
    return run_on_cluster(cases)

if __name__ == "__main__":
    sys.exit(main())
