#!/usr/bin/python3
"""test_saves.py: slurm.saves, checkpoint before preemption (docs/slurm.md)
on the real test cluster with real CRIU: a batch job of nobody's (root's
where root lacks CAP_SYS_RESOURCE, which CRIU needs to dump another user's
process: CI's container) whose script is `cudackptctl job start --save=slurm-$SLURM_JOB_ID -- TARGET`, so
that its node's cudackptd starts TARGET as nobody's job (its own pid
namespace, our init); the job requeued by Slurm (scontrol requeue, as a
preemption by requeue does: SIGTERM to the batch script, SIGKILL KillWait
later); the script's cudackptctl saves the job on that SIGTERM into the
daemons' shared saves directory before Slurm's SIGKILL; Slurm starts the
job again on ANOTHER node (the first one drained), whose daemon restores it
from the save in place of a fresh start:
  - the target (criu_target, one simulated CUDA process) answers SIGUSR1
    with "ok PID N": N is 2 after the restore (its counter came back; a
    fresh start says 1), its memory pattern intact, and it sees its own
    pid namespace's /proc;
  - the second node's daemon lists the job as its user's; another user (uid
    1) sees no save and cannot restore it (exit status 30);
  - the save is in its user's directory, which only root reaches;
  - the batch script killed (scancel --batch --signal=KILL): the daemon
    stops the job, unsaved; the save is removed with `job rm`.
A second job, started with `--requeue`, is sent USR1 (as `--signal=B:USR1@N`
does before its time limit): it saves itself and has Slurm requeue it
(`scontrol requeue`), and Slurm's next start restores it.
Prints MEASURED: the time from the requeue to the save on disk, and from
the job's second start to its target answering.
Exit 0 passed, 1 failed, 77 skipped (as test_cluster.py)."""
import os
import re
import signal
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slurmcluster  # noqa: E402
from nodedaemons import NodeDaemons  # noqa: E402
from test_cluster import NOBODY, OTHER, check, run_on_cluster, skip_reason  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from savejobs import cmdline, criu_target_pid, saves_owner, usable_criu  # noqa: E402

EXIT_NO_SUCH_JOB = 30
# Slurm's SIGKILL after its SIGTERM: room for the dump on a loaded machine.
KILL_WAIT_S = 30


def job_field(c, job, field):
    r = c.run(["scontrol", "show", "job", job], check=False)
    m = re.search(r"\b%s=(\S*)" % field, r.stdout)
    return m.group(1) if m else None


def ctl(c, node, argv, uid=-1):
    uid = c.owner if uid == -1 else uid
    return c.run([c.ctl, "job", "--socket=" + c.node_socket(node)] + argv, uid=uid, check=False, timeout=60)


def ask(c, pid, result, n):
    """SIGUSR1 to the target; its n-th report's lines."""
    os.kill(pid, signal.SIGUSR1)

    def lines():
        try:
            with open(result) as f:
                got = [line.split() for line in f]
        except OSError:
            return None
        mine = [g for g in got if len(g) >= 3 and g[2] == str(n)]
        return mine if len(mine) >= 2 else None
    return slurmcluster.await_true("report %d of the target" % n, lines, 20)


def submit(c, out, name, flags=""):
    """The target's batch job, started through job start --save; its
    result file."""
    result = os.path.join(out, name + ".result")
    script = os.path.join(out, name + ".sh")
    inner = "exec 3>/dev/null; exec env CUDACKPT_SIM=1 CUDACKPT_SIM_STATE=r %s single 1 %s 8 %s" % (
        c.target, result, c.sim)
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexec %s job start --name=%s --save=slurm-$SLURM_JOB_ID %s"
                "--output=%s/log.$SLURM_RESTART_COUNT -- /bin/sh -c '%s'\n" % (c.ctl, name, flags, out, inner))
    os.chmod(script, 0o755)
    r = c.run(["sbatch", "--parsable", "--requeue", "-N1", "--time=5", "-o", os.path.join(out, name + ".out"), script],
              uid=c.owner, cwd=out)
    return r.stdout.strip().split(";")[0], result


def restarted(c, job, result):
    if job_field(c, job, "JobState") == "PENDING" and job_field(c, job, "Reason") == "BeginTime":
        c.run(["scontrol", "update", "JobId=" + job, "StartTime=now"], check=False)
    return job_field(c, job, "JobState") == "RUNNING" and criu_target_pid(result)


def case_requeue_itself(c, out):
    """--requeue: USR1 (the time limit's warning) saves the job, which asks
    Slurm to requeue it; Slurm's next start restores it."""
    job, result = submit(c, out, "warned", "--requeue ")
    first = slurmcluster.await_true("job %s's target" % job, lambda: criu_target_pid(result), 30)
    node = job_field(c, job, "NodeList")
    ask(c, first, result, 1)
    c.run(["scancel", "--batch", "--signal=USR1", job])
    slurmcluster.await_true("the warned job saved", lambda: not os.path.exists("/proc/%d" % first), KILL_WAIT_S)
    second = slurmcluster.await_true("the job requeued by itself and running again",
                                     lambda: restarted(c, job, result), 60)
    rep = ask(c, second, result, 2)
    check(job_field(c, job, "Restarts") == "1" and ["ok", rep[0][1], "2"] == rep[0][:3],
          "USR1 saved the job, job start --requeue had Slurm requeue it, and its next start restored it (report 2, "
          "%s restarts)" % job_field(c, job, "Restarts"))
    c.run(["scancel", "--batch", "--signal=KILL", job], check=False)
    slurmcluster.await_true("the warned job stopped", lambda: not os.path.exists("/proc/%d" % second), 20)
    slurmcluster.await_true("its save removable", lambda: ctl(c, node, ["rm", "slurm-" + job]).returncode == 0, 20)


def case_requeue_elsewhere(c, out):
    job, result = submit(c, out, "train")
    who = "nobody" if c.owner == NOBODY else "root"
    if c.owner is None:
        print("NOTE: root lacks CAP_SYS_RESOURCE here: the job is root's (CRIU cannot dump another user's)")
    first = slurmcluster.await_true("job %s's target" % job, lambda: criu_target_pid(result), 30)
    node = job_field(c, job, "NodeList")
    rep = ask(c, first, result, 1)
    check(["ok", rep[0][1], "1"] == rep[0][:3] and rep[1][3:] == ["own"],
          "the target runs as %s's job on %s, its memory as written, its own /proc (%r)" % (who, node, rep))
    with open(os.path.join(out, "train.out")) as f:
        said = f.read()
    check("warning" not in said, "job start, the batch script's task itself (exec), knows slurmstepd as its parent "
          "(%r)" % said)
    listed = slurmcluster.await_true("the job listed", lambda: '"train"' in ctl(c, node, ["list", "--json"]).stdout,
                                     20)
    check(listed, "%s's daemon lists the job train as %s's" % (node, who))

    t0 = time.monotonic()
    c.run(["scontrol", "requeue", job])
    saved = slurmcluster.await_true("the save on disk", lambda: ctl(c, node, ["saves", "slurm-" + job]).returncode == 0,
                                    KILL_WAIT_S)
    t_saved = time.monotonic() - t0
    check(saved, "the requeue's SIGTERM saved the job into slurm-%s before Slurm's SIGKILL" % job)
    slurmcluster.await_true("the first target gone", lambda: not os.path.exists("/proc/%d" % first), 10)
    c.run(["scontrol", "update", "NodeName=" + node, "State=DRAIN", "Reason=cudackpt-saves-test"])

    t1 = time.monotonic()
    second = slurmcluster.await_true("the job running again", lambda: restarted(c, job, result), 60)
    node2 = job_field(c, job, "NodeList")
    rep = ask(c, second, result, 2)
    check(node2 != node and ["ok", rep[0][1], "2"] == rep[0][:3] and rep[1][3:] == ["own"],
          "the job runs again on %s (not %s), restored: the target's counter came back (report 2, not 1), its "
          "memory intact, its own /proc (%r)" % (node2, node, rep))
    print("MEASURED: requeue to save on disk %.3fs; second start to the restored target answering %.3fs"
          % (t_saved, time.monotonic() - t1))
    # The daemon names the job once the restore's resume is done.
    listed = slurmcluster.await_true("the restored job listed",
                                     lambda: '"train"' in ctl(c, node2, ["list", "--json"]).stdout, 20)
    check(listed, "%s's daemon lists the restored job" % node2)

    r = ctl(c, node2, ["saves"], uid=OTHER)
    check(r.returncode == 0 and "slurm-" not in r.stdout, "another user sees no save (%r)" % r.stdout)
    r = ctl(c, node2, ["restore", "slurm-" + job], uid=OTHER)
    check(r.returncode == EXIT_NO_SUCH_JOB and criu_target_pid(result) == second,
          "another user cannot restore it: exit 30, the job untouched (%r, %r)" % (r.returncode, r.stderr))
    saves = c.path("saves")
    st = os.stat(saves)
    check(st.st_uid == 0 and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
          and os.stat(os.path.join(saves, str(c.owner or 0))).st_mode & 0o077 == 0,
          "the saves are root's, %s's directory reached only by root" % who)

    # SIGKILL to the batch script alone (scancel --signal=KILL without
    # --batch signals the steps, and Slurm ends the job with SIGTERM, which
    # would save it again): no save, its connection closes.
    client = [p for p in c.pids() if b"job" in cmdline(p)[1:2] and b"start" in cmdline(p)]
    c.run(["scancel", "--batch", "--signal=KILL", job], check=False)
    slurmcluster.await_true("the restored job stopped with the batch script",
                            lambda: not os.path.exists("/proc/%d" % second), 20)
    gone = not any(os.path.exists("/proc/%d" % p) for p in client)
    check(client and gone and ctl(c, node2, ["list"]).stdout.strip() == "NAME\tPID",
          "killing the job's batch script (its job start) stops the job the daemon runs for it, unsaved")
    r = ctl(c, node2, ["rm", "slurm-" + job])
    check(r.returncode == 0 and ctl(c, node2, ["saves", "slurm-" + job]).returncode == EXIT_NO_SUCH_JOB,
          "job rm removes the save (%r)" % r.stderr)


def main():
    criu = usable_criu()
    if skip_reason() is None and not criu:
        print("SKIP: no criu that passes `criu check` ($CUDACKPT_CRIU)")
        return 77

    def cases(c, sim):
        c.sim = sim
        c.owner = saves_owner()
        c.target = c.share(os.environ["CUDACKPT_TEST_CRIU_TARGET"])
        out = c.path("out")
        os.makedirs(out)
        os.chmod(out, 0o1777)
        # The daemons run the build's cudackptctl (its cudackpt-init beside
        # it) as root, with CRIU; each node its own jobs' names.
        config = {"nvml": sim, "saves_dir": c.path("saves"), "ctl_path": os.environ["CUDACKPT_TEST_CTL"]}
        with NodeDaemons(c, config=config, env={"CUDACKPT_CRIU": criu},
                         node_env=lambda n: {"CUDACKPT_RUN_DIR": c.path(n, "jobs")}) as daemons:
            try:
                case_requeue_elsewhere(c, out)
                case_requeue_itself(c, out)
            except (AssertionError, TimeoutError):
                for n, d in daemons.items():
                    with open(d.log_path, errors="replace") as f:
                        print("--- %s's daemon (the end of its log) ---\n%s" % (n, f.read()[-4000:]))
                for name in ("train.out", "warned.out", "log."):
                    if os.path.exists(os.path.join(out, name)):
                        with open(os.path.join(out, name), errors="replace") as f:
                            print("--- %s ---\n%s" % (name, f.read()[-2000:]))
                raise
    return run_on_cluster(cases, nodes=2, kill_wait=KILL_WAIT_S, need=("CUDACKPT_TEST_CRIU_TARGET",))

if __name__ == "__main__":
    sys.exit(main())
