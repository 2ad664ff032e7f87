#!/usr/bin/python3
"""test_restart.py: slurm.restart, a node's cudackptd restarted (SIGKILL,
then started again on the same socket and lease store, as systemd restarts
a crashed one) in the middle of `cudackptctl suspend|resume --slurm-job=J`,
on the real test cluster (slurmcluster.py, nodedaemons.py; the jobs and
their simulated targets as test_phases.py starts them).  The daemons give
an unclaimed on-close lease GRACE_MS after a restart (lease_claim_grace_ms)
before they undo it; each case's slow node is slower than that, so that a
lease nobody claims is undone while the command still runs.
  - between lock and checkpoint of a suspend (n1 and n2 locked at the
    barrier while n3's lock waits on a kernel in flight; n1's daemon
    restarted): the suspend fails with ShuttingDown's status naming n1 at
    checkpoint, every node rolled back, and all three targets are running
    when it returns;
  - during n1's own checkpoint (n1's checkpoint slow; its daemon killed
    with the call in flight, its outcome unknown): the same, n1's part
    waiting for the daemon to answer again for its rollback;
  - after n1 and n2 checkpointed, before the commit (n3's checkpoint slow;
    n1's daemon restarted): n1's part claims its lease again at once and the
    commit goes on: exit 0, all three checkpointed, and still so past the
    grace (no lease undone behind the command's back);
  - during n1's own restore of a resume (n1's restore slow, its
    RestoreGroup's lease pending when its daemon is killed): the resume
    fails with ShuttingDown's status naming n1 at restore, and every
    target is checkpointed when it returns (the pending lease's undo and
    n1's rollback both checkpoint it again: never one left running);
  - the same, the killed daemon's listening socket outliving its
    connections for LINGER_S (the test holds a copy of it, as the kernel
    does for a moment while it closes a killed process's descriptors one
    by one): n1's part, reconnecting at once, reaches that dead listener
    before the new daemon listens; its rollback waits for the new daemon
    to answer rather than go on the connection the listener's close
    resets (which failed the rollback on n1): the same outcome, every
    node rolled back;
  - during a resume, n1 and n2 restored and held locked while n3 restores
    slowly (n1's daemon restarted): n1's part claims its lease again and the
    unlock goes on: exit 0, all three running when it returns, never one
    left locked while the others run.
Exit 0 passed, 1 failed, 77 skipped (as test_cluster.py)."""
import ctypes
import os
import select
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nodedaemons import NodeDaemons  # noqa: E402
from test_cluster import NOBODY, check, run_on_cluster  # noqa: E402
from test_phases import COMMAND_LIMIT_S, END_LIMIT_S, ctl, end_job, start_job, states  # noqa: E402

GRACE_MS = 6000
EXIT_SHUTTING_DOWN = 22
# n3's lock waits this long on its kernel (case a); its checkpoint and
# restore of 64 MiB at these rates take 8 s and 4 s (cases b, c).
BUSY_MS = 3000
CKPT_MIBPS = 8
RESTORE_MIBPS = 16
# How long the killed daemon's listener outlives it (the restore case's
# second run): longer than the coordinator takes to send the rollback once
# n1 failed its restore.
LINGER_S = 1.0
SYS_PIDFD_GETFD = 438  # the same number on every architecture
ALL = ("n1", "n2", "n3")


def start(c, verb, job):
    """The command, as the job's user, with progress on stderr; and when it started."""
    return c.popen([c.ctl, verb, "--slurm-job=" + job, "--progress"], uid=NOBODY, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True), time.monotonic()


def await_said(p, said, phase, nodes, limit):
    """Reads p's progress until each of nodes answered phase ok (its reply, not only the
    target's state: its lease granted), within limit seconds; said: the lines read, appended to."""
    end = time.monotonic() + limit
    while not all(any(ln.startswith("%s: %s ok" % (n, phase)) for ln in "".join(said).splitlines())
                  for n in nodes):
        left = end - time.monotonic()
        if left <= 0 or not select.select([p.stderr.fileno()], [], [], left)[0]:
            raise TimeoutError("%s did not answer %s within %gs (%r)" % ("/".join(nodes), phase, limit, said))
        chunk = os.read(p.stderr.fileno(), 65536).decode(errors="replace")
        if not chunk:
            raise AssertionError("the command ended before %s answered %s (%r)" % ("/".join(nodes), phase, said))
        said.append(chunk)


def restart(daemons, node):
    """node's daemon SIGKILLed and started again (returns once READY); when it was killed."""
    t = time.monotonic()
    daemons[node].kill()
    daemons[node].restart()
    return t


def listener_copy(daemon):
    """A copy (pidfd_getfd) of the descriptor on which daemon listens on its socket."""
    inode = None
    with open("/proc/net/unix") as f:
        for ln in f.read().splitlines()[1:]:
            fields = ln.split()
            # Flags 00010000: __SO_ACCEPTCON, a listening socket.
            if len(fields) >= 8 and fields[7] == daemon.socket and int(fields[3], 16) & 0x10000:
                inode = fields[6]
    fds = "/proc/%d/fd" % daemon.proc.pid
    fd = [int(n) for n in os.listdir(fds) if os.readlink(os.path.join(fds, n)) == "socket:[%s]" % inode][0]
    pidfd = os.pidfd_open(daemon.proc.pid)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        copy = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if copy < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd")
        return copy
    finally:
        os.close(pidfd)


def finish(p, said):
    out, err = p.communicate(timeout=COMMAND_LIMIT_S + 30)
    err = "".join(said) + err
    check("Sanitizer" not in err and "runtime error" not in err,
          "no sanitizer report from the coordinator or the nodes' parts (%r)" % err[-2000:])
    return out, err, time.monotonic()


def case_between_lock_and_checkpoint(c, daemons, sim):
    job = start_job(c, sim, '[ "$SLURMD_NODENAME" = n3 ] && export CUDACKPT_SIM_BUSY_MS=%d;' % BUSY_MS)
    p, t0 = start(c, "suspend", job)
    said = []
    await_said(p, said, "lock", ("n1", "n2"), 10)
    restart(daemons, "n1")
    out, err, t1 = finish(p, said)
    st = states(c, job)
    check(p.returncode == EXIT_SHUTTING_DOWN and "n1 failed at checkpoint" in err and "every node rolled back" in err,
          "n1's daemon restarted between lock and checkpoint: the suspend fails with ShuttingDown's status, "
          "naming n1 at checkpoint, every node rolled back (%r, %r, %r)" % (p.returncode, out, err))
    check(st == {n: "r" for n in ALL} and BUSY_MS / 1000 <= t1 - t0 < BUSY_MS / 1000 + COMMAND_LIMIT_S,
          "every target running when it returns, %.2fs after it started (%r)" % (t1 - t0, st))
    end_job(c, job)


def case_during_checkpoint(c, daemons, sim):
    job = start_job(c, sim, '[ "$SLURMD_NODENAME" = n1 ] && export CUDACKPT_SIM_CKPT_MIBPS=%d;' % CKPT_MIBPS)
    p, t0 = start(c, "suspend", job)
    said = []
    await_said(p, said, "checkpoint", ("n2", "n3"), 10)
    restart(daemons, "n1")
    out, err, t1 = finish(p, said)
    st = states(c, job)
    check(p.returncode == EXIT_SHUTTING_DOWN and "n1 failed at checkpoint" in err and "every node rolled back" in err
          and st == {n: "r" for n in ALL} and t1 - t0 < COMMAND_LIMIT_S,
          "n1's daemon restarted during n1's checkpoint: the suspend fails in %.2fs with ShuttingDown's status, "
          "naming n1 at checkpoint, every node rolled back and running (%r, %r, %r, %r)"
          % (t1 - t0, p.returncode, out, err, st))
    end_job(c, job)


def case_during_restore(c, daemons, sim, linger_s=0):
    """linger_s: how long the killed daemon's listener outlives it (0: not at all)."""
    job = start_job(c, sim, '[ "$SLURMD_NODENAME" = n1 ] && export CUDACKPT_SIM_RESTORE_MIBPS=%d;' % RESTORE_MIBPS)
    r, _ = ctl(c, ["suspend", "--slurm-job=" + job])
    check(r.returncode == 0, "the job suspended whole (%r, %r)" % (r.returncode, r.stderr))
    p, t0 = start(c, "resume", job)
    said = []
    await_said(p, said, "restore", ("n2", "n3"), 10)
    if linger_s:
        listener = listener_copy(daemons["n1"])
        daemons["n1"].kill()
        time.sleep(linger_s)
        # Closed, it resets the connections waiting in its backlog; the
        # new daemon then binds the socket again (it would refuse to
        # while a listener answers there).
        os.close(listener)
        daemons["n1"].restart()
    else:
        restart(daemons, "n1")
    out, err, t1 = finish(p, said)
    st = states(c, job)
    check(p.returncode == EXIT_SHUTTING_DOWN and "n1 failed at restore" in err and "every node rolled back" in err
          and st == {n: "c" for n in ALL} and t1 - t0 < COMMAND_LIMIT_S,
          "n1's daemon restarted during n1's restore%s: the resume fails in %.2fs with ShuttingDown's status, "
          "naming n1 at restore, every node rolled back and checkpointed (%r, %r, %r, %r)"
          % (", its listener outliving it %gs" % linger_s if linger_s else "", t1 - t0, p.returncode, out, err, st))
    end_job(c, job)


def case_before_commit(c, daemons, sim):
    job = start_job(c, sim, '[ "$SLURMD_NODENAME" = n3 ] && export CUDACKPT_SIM_CKPT_MIBPS=%d '
                            'CUDACKPT_SIM_RESTORE_MIBPS=%d;' % (CKPT_MIBPS, RESTORE_MIBPS))
    p, t0 = start(c, "suspend", job)
    said = []
    await_said(p, said, "checkpoint", ("n1", "n2"), 10)
    t = restart(daemons, "n1")
    out, err, t1 = finish(p, said)
    check(p.returncode == 0 and "3 nodes, 3 processes checkpointed" in out
          and 64 / CKPT_MIBPS <= t1 - t0 < 64 / CKPT_MIBPS + COMMAND_LIMIT_S,
          "n1's daemon restarted after n1 checkpointed, before the commit: n1's part claims its lease again "
          "and the suspend succeeds in %.2fs (%r, %r, %r)" % (t1 - t0, p.returncode, out, err))
    # Held past the restarted daemon's grace (and END_LIMIT_S more): no
    # unclaimed lease undone behind the command's back.
    end = t + GRACE_MS / 1000 + END_LIMIT_S
    while time.monotonic() < end:
        st = states(c, job)
        if st != {n: "c" for n in ALL}:
            raise AssertionError("a target left checkpointed %.2fs after the restart (%r)"
                                 % (time.monotonic() - t, st))
        time.sleep(0.1)
    check(True, "all three still checkpointed %.1fs after the restart" % (end - t))
    return job


def case_during_resume(c, daemons, job):
    p, t0 = start(c, "resume", job)
    said = []
    await_said(p, said, "restore", ("n1", "n2"), 10)
    restart(daemons, "n1")
    out, err, t1 = finish(p, said)
    st = states(c, job)
    check(p.returncode == 0 and "3 nodes, 3 processes running" in out and st == {n: "r" for n in ALL}
          and 64 / RESTORE_MIBPS <= t1 - t0 < 64 / RESTORE_MIBPS + COMMAND_LIMIT_S,
          "n1's daemon restarted while n1 was restored and held locked: the resume goes on and every target "
          "runs when it returns, %.2fs after it started (%r, %r, %r, %r)" % (t1 - t0, p.returncode, out, err, st))
    end_job(c, job)


def main():
    def cases(c, sim):
        config = {"nvml": sim, "lease_claim_grace_ms": GRACE_MS}
        with NodeDaemons(c, config=config) as daemons:
            case_between_lock_and_checkpoint(c, daemons, sim)
            case_during_checkpoint(c, daemons, sim)
            case_during_restore(c, daemons, sim)
            case_during_restore(c, daemons, sim, linger_s=LINGER_S)
            # The job suspended whole by case (b) is the one case (c) resumes.
            case_during_resume(c, daemons, case_before_commit(c, daemons, sim))
    return run_on_cluster(cases)

if __name__ == "__main__":
    sys.exit(main())
