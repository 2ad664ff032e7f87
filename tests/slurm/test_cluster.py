#!/usr/bin/python3
"""test_cluster.py: slurm.cluster, the test cluster itself (slurmcluster.py).

munged, slurmctld and three slurmd (n1..n3, each in its own UTS and mount
namespace, all on 127.0.0.1) started from nothing, and then:
  - the three nodes idle in sinfo within START_LIMIT_S of the start;
  - `srun -N3 hostname` answers n1 n2 n3, as root and as nobody (65534),
    each within SRUN_LIMIT_S;
  - each node's steps find that node's daemon at the default socket path
    (one cudackptd per node on the simulator, with 1, 2, 3 GPUs: `srun -N3
    cudackptctl gpus` from the nodes counts 1, 2, 3 by host name);
  - a running 3-node batch job of nobody's is reached by `srun --jobid=J
    --overlap` as nobody, on all three nodes, within SRUN_LIMIT_S; another
    user (daemon, uid 1) is refused;
  - stopping leaves no process in the cluster's namespaces (the job's tasks
    and slurmstepd included), nor its directory.
It prints what it measured (start, srun latencies).  Exit 0 passed, 1 a
check failed, 77 skipped: Slurm or munge not installed (`make deps`), or
not root.  Environment: CUDACKPT_TEST_DAEMON, CUDACKPT_TEST_SIM,
CUDACKPT_TEST_CTL (ctest sets them)."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slurmcluster  # noqa: E402
from nodedaemons import NodeDaemons  # noqa: E402

START_LIMIT_S = 20
SRUN_LIMIT_S = 10
NOBODY = 65534
OTHER = 1


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("PASS: " + what)


def timed(fn):
    t = time.monotonic()
    r = fn()
    return r, time.monotonic() - t


def hosts(out):
    return sorted(out.split())


def check_srun(c):
    want = ["n1", "n2", "n3"]
    for uid in (None, NOBODY):
        r, s = timed(lambda: c.run(["srun", "-N3", "hostname"], uid=uid, check=False))
        who = "root" if uid is None else "uid %d" % uid
        check(r.returncode == 0 and hosts(r.stdout) == want,
              "srun -N3 hostname as %s answers n1 n2 n3 (%r, %r)" % (who, r.stdout, r.stderr))
        check(s < SRUN_LIMIT_S, "srun -N3 hostname as %s in %.2fs < %ds" % (who, s, SRUN_LIMIT_S))
        print("MEASURED: srun -N3 hostname as %s: %.3fs" % (who, s))


def check_node_daemons(c, ctl):
    r = c.run(["srun", "-N3", "--ntasks-per-node=1", "--label", "sh", "-c",
               'echo "$(hostname) $(%s gpus | grep -c " GPU-")"' % ctl], uid=NOBODY, check=False)
    got = sorted(line.split(":", 1)[1].strip() for line in r.stdout.splitlines() if ":" in line)
    check(got == ["n1 1", "n2 2", "n3 3"],
          "each node's steps reach that node's daemon at the default socket (%r, %r)" % (r.stdout, r.stderr))


def check_overlap(c):
    r = c.run(["sbatch", "--parsable", "-N3", "--ntasks-per-node=1", "--time=5", "-o", "/dev/null",
               "--wrap", "srun sleep 120"], uid=NOBODY)
    job = r.stdout.strip().split(";")[0]

    def tasks():
        return [p for p in c.pids() if _comm(p) == "sleep"]
    slurmcluster.await_true("job %s's three tasks in the nodes' namespaces" % job, lambda: len(tasks()) == 3, 20)
    argv = ["srun", "--jobid=" + job, "--overlap", "-N3", "--ntasks-per-node=1", "hostname"]
    r, s = timed(lambda: c.run(argv, uid=NOBODY, check=False))
    check(r.returncode == 0 and hosts(r.stdout) == ["n1", "n2", "n3"],
          "srun --jobid=%s --overlap reaches the job's three nodes (%r, %r)" % (job, r.stdout, r.stderr))
    check(s < SRUN_LIMIT_S, "srun --overlap in %.2fs < %ds" % (s, SRUN_LIMIT_S))
    print("MEASURED: srun --jobid=J --overlap -N3 hostname: %.3fs" % s)
    r = c.run(argv, uid=OTHER, check=False)
    check(r.returncode != 0 and not r.stdout.strip() and "denied" in r.stderr.lower(),
          "another user cannot reach the job (%r, %r)" % (r.stdout, r.stderr.strip()))
    return tasks()


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def skip_reason():
    """Why a slurm.* test cannot run here ("SKIP: ...", or "FAIL: ..." when
    CUDACKPT_TEST_SLURM=required), or None."""
    missing = slurmcluster.missing_programs()
    if missing and os.environ.get("CUDACKPT_TEST_SLURM") == "required":
        return "FAIL: Slurm or munge is not installed (no %s), and CUDACKPT_TEST_SLURM=required" % " ".join(missing)
    if missing:
        return "SKIP: Slurm or munge is not installed (no %s): make deps" % " ".join(missing)
    if os.geteuid() != 0:
        return "SKIP: the Slurm test cluster needs root (slurmd runs jobs as their users)"
    return None


def run_on_cluster(cases, nodes=3, kill_wait=2, need=()):
    """The main() of the tests that drive node daemons on the simulator:
    skipped as skip_reason() says, the variables ctest sets (and need)
    checked, ctest's timeout and ^C ending it through the with blocks'
    exits; then cases(c, sim) on a started cluster of nodes, c.ctl and sim
    (the simulator, $CUDACKPT_TEST_SIM, which the targets map as the daemons
    load it) shared where every user reaches them.  Exit 0 passed, 1
    failed, 77 skipped."""
    why = skip_reason()
    if why:
        print(why)
        return 77 if why.startswith("SKIP") else 1
    for var in ("CUDACKPT_TEST_CTL", "CUDACKPT_TEST_SIM") + tuple(need):
        if not os.environ.get(var):
            print("FAIL: %s is unset: run through ctest" % var)
            return 1
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(1))
    c = slurmcluster.Cluster(nodes=nodes, kill_wait=kill_wait)
    try:
        with c:
            c.ctl = c.share(os.environ["CUDACKPT_TEST_CTL"])
            sim = os.environ["CUDACKPT_TEST_SIM"] = c.share(os.environ["CUDACKPT_TEST_SIM"])
            cases(c, sim)
    except (AssertionError, TimeoutError, RuntimeError) as e:
        print("FAIL: %s" % e)
        return 1
    return 0


def main():
    why = skip_reason()
    if why:
        print(why)
        return 77 if why.startswith("SKIP") else 1
    ctl = os.environ.get("CUDACKPT_TEST_CTL")
    if not ctl:
        print("FAIL: CUDACKPT_TEST_CTL is unset: run through ctest (cd build && ctest -R slurm)")
        return 1
    # ctest's timeout and ^C end the test through the with blocks' exits.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(1))
    c = slurmcluster.Cluster(nodes=3)
    tasks = []
    with c:
        print("MEASURED: cluster start (munged, slurmctld, 3 slurmd, all idle): %.3fs" % c.start_s)
        check(c.start_s < START_LIMIT_S, "cluster up in %.2fs < %ds" % (c.start_s, START_LIMIT_S))
        check_srun(c)
        with NodeDaemons(c, gpus={"n1": 1, "n2": 2, "n3": 3}):
            check_node_daemons(c, c.share(ctl))
        tasks = check_overlap(c)
        namespaces, directory = set(c.namespaces), c.dir
    check(not c.pids() and not any(os.path.exists("/proc/%d" % p) for p in tasks),
          "nothing left running after stop (namespaces %d)" % len(namespaces))
    check(not os.path.exists(directory) or os.environ.get("CUDACKPT_TEST_KEEP") == "1",
          "the cluster's directory removed")
    return 0


if __name__ == "__main__":
    slurmcluster.run_main(main)
