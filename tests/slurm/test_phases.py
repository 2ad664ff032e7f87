#!/usr/bin/python3
"""test_phases.py: slurm.phases, `cudackptctl suspend|resume --slurm-job=J`
(client/ctl/nodes/phases.c, the node's part nodepart.c) on the real test
cluster: three nodes, each with its own cudackptd on the simulator
(nodedaemons.py), and batch jobs of nobody's running one simulated CUDA
process per node (srun of `sleep` with the simulator preloaded).  The
simulator keeps each target's state in the target's environment (its
CUDACKPT_SIM=1 reads r, l or c once a call changed it), which is what this
test reads, as root, from /proc.
  - a job of three nodes suspended whole (every target checkpointed) and
    resumed whole (every target running), as its user, exit 0, --json
    (each node's one member found by both rules, found_by);
    suspended again in between, it fails (InvalidState) and stays
    checkpointed (a rollback undoes only what its own step did);
  - a job whose targets run under `env -i` (no SLURM_JOB_ID left): found
    by descent from the job's slurmstepd, suspended whole (checkpointed,
    and still so HELD_S later) and resumed whole, each within
    COMMAND_LIMIT_S;
  - a process of the job's owner outside any job, in n1's host name
    namespace, titled "slurmstepd: [J.0]" (exec -a), running a target under
    `env -i`: no root's, so its target is no member, running through the
    job's suspend and resume;
  - n2's target failing its checkpoint (CUDACKPT_SIM_FAIL): the suspend
    fails with the DriverError status, naming n2, and all three targets are
    running when it returns (rolled back);
  - the coordinator SIGKILLed between phases (n1 and n2 locked, waiting at
    the barrier for n3, whose lock waits on a kernel in flight): n1 and n2
    never checkpointed, and running within END_LIMIT_S; n3 too once its lock
    ends;
  - another user (daemon, uid 1) cannot reach the job: a failure, every
    target running, untouched;
  - root suspends and resumes nobody's job (Slurm 22.05 creates a step of
    J only as J's user: the coordinator runs srun as the owner) and root's
    own job (whose parts list every user's processes): another user's
    process that forged the job's SLURM_JOB_ID and SLURMD_NODENAME is no
    member either time, left running; root's environment (a secret in it)
    is not handed to the owner's srun;
  - first, --slurm-job's usage errors (exit 2).
Exit 0 passed, 1 failed, 77 skipped (as test_cluster.py)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slurmcluster  # noqa: E402
from nodedaemons import NodeDaemons  # noqa: E402
from test_cluster import NOBODY, OTHER, check, run_on_cluster  # noqa: E402

END_LIMIT_S = 1.0
BUSY_MS = 4000
EXIT_DRIVER_ERROR = 19
EXIT_INVALID_STATE = 13
EXIT_TIMEOUT = 14
# The longest a suspend or resume --slurm-job of the test's jobs may take,
# and how long its targets must stay checkpointed after a suspend returned
# (the commit kept the work: no lease undoes it as the step ends).
COMMAND_LIMIT_S = 20
HELD_S = 1.0


def targets(c, job):
    """{node: pid} of job's simulated CUDA processes (the node from SLURMD_NODENAME; in a
    target that cleared its environment, from the copies start_job(clear=True) left)."""
    found = {}
    for pid in c.pids():
        env = environ(pid)
        if (env.get("SLURM_JOB_ID", env.get("CUDACKPT_TEST_JOB")) == job and "CUDACKPT_SIM" in env
                and env.get("CUDACKPT_TEST_TARGET") == "1"):
            found[env.get("SLURMD_NODENAME", env.get("CUDACKPT_TEST_NODE"))] = pid
    return found


def environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            items = f.read().split(b"\0")
    except OSError:
        return {}
    return dict(i.decode(errors="replace").split("=", 1) for i in items if b"=" in i)


def states(c, job):
    """{node: r|l|c|f} of the job's targets (the simulator's state slot; 1: never changed, running)."""
    return {n: environ(p).get("CUDACKPT_SIM", "?").replace("1", "r") for n, p in targets(c, job).items()}


def preload(sim):
    """LD_PRELOAD of a target: a sanitizer build's simulator needs its
    runtime first (as tests/python's targets do)."""
    out = subprocess.run(["ldd", sim], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    runtime = [ln.split()[2] for ln in out.splitlines()
               if ln.split() and ln.split()[0].startswith(("libasan.so", "libtsan.so")) and len(ln.split()) >= 3]
    return ":".join(runtime[:1] + [sim])


def start_job(c, sim, extra="", uid=NOBODY, clear=False):
    """A 3-node job of uid's (None: root's), one target per node; extra: shell run first on each node;
    clear: each target runs under `env -i` (no SLURM_* in its environment; the test's own copies of the
    job and node under other names)."""
    script = ('%s exec env %s CUDACKPT_TEST_TARGET=1 LD_PRELOAD=%s ASAN_OPTIONS=verify_asan_link_order=0 '
              'CUDACKPT_SIM=1 CUDACKPT_SIM_MEM_MIB=64 sleep 300'
              % (extra, '-i CUDACKPT_TEST_JOB="$SLURM_JOB_ID" CUDACKPT_TEST_NODE="$SLURMD_NODENAME"' if clear else "",
                 preload(sim)))
    r = c.run(["sbatch", "--parsable", "-N3", "--ntasks-per-node=1", "--time=5", "-o", "/dev/null",
               "--wrap", "srun sh -c '%s'" % script.replace("'", "'\\''")], uid=uid)
    job = r.stdout.strip().split(";")[0]
    slurmcluster.await_true("job %s's three targets" % job, lambda: len(targets(c, job)) == 3, 30)
    return job


def end_job(c, job):
    c.run(["scancel", job], check=False)
    slurmcluster.await_true("job %s's targets gone" % job, lambda: not targets(c, job), 20)


def ctl(c, argv, uid=NOBODY):
    t = time.monotonic()
    r = c.run([c.ctl] + argv, uid=uid, check=False, timeout=120)
    # The nodes' parts' stderr is the coordinator's (srun's): a sanitizer
    # build's report from either shows here.
    check("Sanitizer" not in r.stderr and "runtime error" not in r.stderr,
          "no sanitizer report from the coordinator or the nodes' parts (%r)" % r.stderr[-2000:])
    return r, time.monotonic() - t


def case_whole(c, sim):
    job = start_job(c, sim)
    r, s = ctl(c, ["suspend", "--slurm-job=" + job, "--json"])
    out = json.loads(r.stdout or "{}")
    check(r.returncode == 0 and out.get("ok") is True and out.get("processes") == 3
          and found_by(out) == {n: {"environment": 1, "descent": 1} for n in ("n1", "n2", "n3")},
          "suspend --slurm-job: exit 0, three nodes, three processes, each found by both rules (%r, %r)"
          % (r.stdout, r.stderr))
    check(states(c, job) == {"n1": "c", "n2": "c", "n3": "c"},
          "every node's target checkpointed (%r)" % states(c, job))
    print("MEASURED: suspend --slurm-job of 3 nodes: %.3fs" % s)
    r, _ = ctl(c, ["suspend", "--slurm-job=" + job])
    check(r.returncode == EXIT_INVALID_STATE and states(c, job) == {"n1": "c", "n2": "c", "n3": "c"},
          "suspending it again fails (InvalidState) and its rollback resumes nothing (%r, %r, %r)"
          % (r.returncode, r.stderr, states(c, job)))
    r, s = ctl(c, ["resume", "--slurm-job=" + job, "--progress"])
    check(r.returncode == 0 and "3 nodes, 3 processes running" in r.stdout
          and sum(ln.endswith("ms)") for ln in r.stderr.splitlines()) == 9,
          "resume --slurm-job: exit 0, progress of each node's restore, unlock and commit (%r, %r)"
          % (r.stdout, r.stderr))
    check(states(c, job) == {"n1": "r", "n2": "r", "n3": "r"}, "every node's target running (%r)" % states(c, job))
    print("MEASURED: resume --slurm-job of 3 nodes: %.3fs" % s)
    end_job(c, job)


def found_by(out):
    """{node: found_by} of a --json summary."""
    return {n.get("node"): n.get("found_by") for n in out.get("nodes", [])}


def await_held(c, job, state):
    """Every target of job stays in state for HELD_S (looked at every 0.1 s)."""
    want = {"n1": state, "n2": state, "n3": state}
    end = time.monotonic() + HELD_S
    while time.monotonic() < end:
        st = states(c, job)
        if st != want:
            raise AssertionError("job %s's targets left %s within %gs (%r)" % (job, state, HELD_S, st))
        time.sleep(0.1)
    check(True, "every target still %s %gs later" % (state, HELD_S))


def case_cleared_environment(c, sim):
    """A job whose targets run under `env -i` (no SLURM_JOB_ID or
    SLURMD_NODENAME left): each node's part finds its target by descent
    from the job's slurmstepd there, and the job is suspended whole (every
    target checkpointed, and still so HELD_S later) and resumed whole.
    Under the environment rule alone the suspend said 0 processes, exit 0,
    every target running on."""
    job = start_job(c, sim, clear=True)
    check(all("SLURM_JOB_ID" not in environ(p) and "SLURMD_NODENAME" not in environ(p)
              for p in targets(c, job).values()), "the targets' environment holds no SLURM_JOB_ID, SLURMD_NODENAME")
    r, s = ctl(c, ["suspend", "--slurm-job=" + job, "--json"])
    out = json.loads(r.stdout or "{}")
    check(r.returncode == 0 and out.get("processes") == 3 and s < COMMAND_LIMIT_S
          and found_by(out) == {n: {"environment": 0, "descent": 1} for n in ("n1", "n2", "n3")},
          "suspend --slurm-job of targets under env -i: exit 0 in %.2fs, three processes, each found by "
          "descent only (%r, %r)" % (s, r.stdout, r.stderr))
    check(states(c, job) == {"n1": "c", "n2": "c", "n3": "c"}, "every target checkpointed (%r)" % states(c, job))
    await_held(c, job, "c")
    r, s = ctl(c, ["resume", "--slurm-job=" + job])
    check(r.returncode == 0 and "3 nodes, 3 processes running" in r.stdout and s < COMMAND_LIMIT_S
          and states(c, job) == {"n1": "r", "n2": "r", "n3": "r"},
          "resume --slurm-job: exit 0 in %.2fs, every target running (%r, %r, %r)"
          % (s, r.stdout, r.stderr, states(c, job)))
    end_job(c, job)


def case_fake_slurmstepd(c, sim):
    """A process of the job's owner outside any job, on n1 (in its host
    name's namespace), that calls itself "slurmstepd: [J.0]" (bash's exec
    -a) and runs a target under `env -i`: it is no root's, so no
    slurmstepd, and its target no member: it stays running through the
    suspend, which takes the job's three targets."""
    job = start_job(c, sim)
    title = "slurmstepd: [%s.0]" % job
    fake = subprocess.Popen(["nsenter", "--target", str(c.procs["slurmd-n1"].pid), "--uts", "--",
                             "setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", "--",
                             "bash", "-c", 'exec -a "$0" sh', title], stdin=subprocess.PIPE, cwd="/", text=True)
    try:
        fake.stdin.write("env -i CUDACKPT_TEST_TARGET=4 LD_PRELOAD=%s ASAN_OPTIONS=verify_asan_link_order=0 "
                         "CUDACKPT_SIM=1 CUDACKPT_SIM_MEM_MIB=64 sleep 300\nexit\n" % preload(sim))
        fake.stdin.flush()

        def child():
            return [p for p in c.pids() if environ(p).get("CUDACKPT_TEST_TARGET") == "4"]
        pid = slurmcluster.await_true("the fake slurmstepd's target", child, 10)[0]
        with open("/proc/%d/cmdline" % fake.pid, "rb") as f:
            cmdline = f.read()
        with open("/proc/%d/stat" % pid) as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        check(cmdline == title.encode() + b"\0" and ppid == fake.pid,
              "the fake's command line is %r, its target's parent (%r, %d)" % (title, cmdline, ppid))
        r, s = ctl(c, ["suspend", "--slurm-job=" + job, "--json"])
        out = json.loads(r.stdout or "{}")
        st = environ(pid).get("CUDACKPT_SIM", "?").replace("1", "r")
        check(r.returncode == 0 and out.get("processes") == 3 and s < COMMAND_LIMIT_S and st == "r"
              and found_by(out).get("n1") == {"environment": 1, "descent": 1}
              and states(c, job) == {"n1": "c", "n2": "c", "n3": "c"},
              "suspend --slurm-job takes the job's three targets in %.2fs, not the fake slurmstepd's, "
              "running (%r, %r, fake's target: %r)" % (s, r.stdout, r.stderr, st))
        r, _ = ctl(c, ["resume", "--slurm-job=" + job])
        st = environ(pid).get("CUDACKPT_SIM", "?").replace("1", "r")
        check(r.returncode == 0 and "3 processes running" in r.stdout and st == "r",
              "and resumes them, the fake's target untouched (%r, %r)" % (r.stdout, st))
    finally:
        for p in [p for p in c.pids() if environ(p).get("CUDACKPT_TEST_TARGET") == "4"]:
            os.kill(p, signal.SIGKILL)
        fake.stdin.close()
        fake.wait(10)
    end_job(c, job)


def case_node_fails(c, sim):
    job = start_job(c, sim, '[ "$SLURMD_NODENAME" = n2 ] && export CUDACKPT_SIM_FAIL=checkpoint:CUDA_ERROR_UNKNOWN;')
    r, _ = ctl(c, ["suspend", "--slurm-job=" + job])
    st = states(c, job)
    check(r.returncode == EXIT_DRIVER_ERROR and "n2 failed at checkpoint" in r.stderr
          and "every node rolled back" in r.stderr,
          "n2 failing its checkpoint fails the suspend, DriverError's status (%r, %r)"
          % (r.returncode, r.stderr))
    check(st == {"n1": "r", "n2": "r", "n3": "r"}, "all three nodes rolled back to running (%r)" % st)
    end_job(c, job)


def case_coordinator_killed(c, sim):
    job = start_job(c, sim, '[ "$SLURMD_NODENAME" = n3 ] && export CUDACKPT_SIM_BUSY_MS=%d;' % BUSY_MS)
    p = c.popen([c.ctl, "suspend", "--slurm-job=" + job, "--progress"], uid=NOBODY,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    locked = set()
    while len(locked) < 2:
        line = p.stderr.readline()
        if not line:
            break
        if line.endswith("ms)\n") and ": lock ok" in line:
            locked.add(line.split(":")[0])
    st = states(c, job)
    check(locked == {"n1", "n2"} and st["n1"] == "l" and st["n2"] == "l" and st["n3"] != "c",
          "n1 and n2 locked at the barrier while n3 locks (%r, %r)" % (locked, st))
    t = time.monotonic()
    p.send_signal(signal.SIGKILL)
    p.wait()
    slurmcluster.await_true("n1 and n2 running", lambda: states(c, job).get("n1") == "r"
                            and states(c, job).get("n2") == "r", END_LIMIT_S)
    s = time.monotonic() - t
    slurmcluster.await_true("n3 running", lambda: states(c, job).get("n3") == "r", BUSY_MS / 1000 + 5)
    check(True, "the coordinator SIGKILLed between phases: n1, n2 running in %.2fs, n3 once its lock ended" % s)
    print("MEASURED: coordinator SIGKILLed to every locked node running: %.3fs" % s)
    end_job(c, job)


def case_phase_timeout(c, sim):
    """A node slow in its checkpoint (n3, 64 MiB at 8 MiB/s) past --timeout
    (2 s): n1 and n2, checkpointed at once, run again within END_LIMIT_S of
    the timeout (their parts end as the coordinator closes the step's
    input), while the command waits for n3's part, whose checkpoint cannot
    be cancelled, and fails, saying the timeout (status 14, as the group
    commands' Timeout); n3 runs once its checkpoint has ended."""
    job = start_job(c, sim, '[ "$SLURMD_NODENAME" = n3 ] && export CUDACKPT_SIM_CKPT_MIBPS=8;')
    t = time.monotonic()
    p = c.popen([c.ctl, "suspend", "--slurm-job=" + job, "--timeout=2000"], uid=NOBODY,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    slurmcluster.await_true("n1 and n2 checkpointed", lambda: states(c, job).get("n1") == "c"
                            and states(c, job).get("n2") == "c", 10)
    slurmcluster.await_true("n1 and n2 running", lambda: states(c, job).get("n1") == "r"
                            and states(c, job).get("n2") == "r", 2.0 + END_LIMIT_S + 1)
    s = time.monotonic() - t
    _, err = p.communicate(timeout=60)
    total = time.monotonic() - t
    check(p.returncode == EXIT_TIMEOUT and "not every node answered checkpoint in time" in err
          and 2.0 <= s < 2.0 + END_LIMIT_S + 0.5,
          "n1 and n2 running %.2fs after the start of a suspend with a 2 s phase timeout, which fails "
          "as timed out (%r, %r)"
          % (s, p.returncode, err))
    slurmcluster.await_true("n3 running", lambda: states(c, job).get("n3") == "r", 20)
    print("MEASURED: phase timeout 2 s: n1, n2 running at %.2fs, the command returned at %.2fs" % (s, total))
    end_job(c, job)


def case_other_user(c, sim):
    job = start_job(c, sim)
    r, _ = ctl(c, ["suspend", "--slurm-job=" + job], uid=OTHER)
    st = states(c, job)
    check(r.returncode != 0 and st == {"n1": "r", "n2": "r", "n3": "r"},
          "another user cannot reach the job: refused, every target untouched (%r, %r, %r)"
          % (r.returncode, r.stderr, st))
    end_job(c, job)


def case_forged_marks(c, sim):
    """Root's suspend --slurm-job of nobody's job (srun as the owner) and of
    root's own job (root's parts list every user's processes): each takes
    the job's three processes, not another user's that forges the job's
    marks (SLURM_JOB_ID, SLURMD_NODENAME) in its own environment."""
    for owner in (NOBODY, None):
        forged_marks(c, sim, owner)


def forged_marks(c, sim, owner):
    job = start_job(c, sim, uid=owner)
    script = ('export SLURM_JOB_ID=%s SLURMD_NODENAME=n1; exec env CUDACKPT_TEST_TARGET=2 LD_PRELOAD=%s '
              'ASAN_OPTIONS=verify_asan_link_order=0 CUDACKPT_SIM=1 CUDACKPT_SIM_MEM_MIB=64 sleep 300'
              % (job, preload(sim)))
    r = c.run(["sbatch", "--parsable", "-N1", "-w", "n1", "--time=5", "-o", "/dev/null",
               "--wrap", "srun sh -c '%s'" % script.replace("'", "'\\''")], uid=OTHER)
    own = r.stdout.strip().split(";")[0]

    def forged():
        return [p for p in c.pids() if environ(p).get("CUDACKPT_TEST_TARGET") == "2"
                and environ(p).get("SLURM_JOB_ID") == job]
    slurmcluster.await_true("the other user's forged target", lambda: len(forged()) == 1, 30)
    pid = forged()[0]
    r, _ = ctl(c, ["suspend", "--slurm-job=" + job, "--json"], uid=None)
    out = json.loads(r.stdout or "{}")
    st = environ(pid).get("CUDACKPT_SIM", "?").replace("1", "r")
    check(r.returncode == 0 and out.get("processes") == 3 and st == "r"
          and found_by(out) == {n: {"environment": 1, "descent": 1} for n in ("n1", "n2", "n3")},
          "root's suspend --slurm-job of %s's job takes its three processes, each found by both rules (as "
          "root, the slurmstepd's program compared too), not another user's forged one (%r, %r, forged: %r)"
          % (owner, r.stdout, r.stderr, st))
    r, _ = ctl(c, ["resume", "--slurm-job=" + job], uid=None)
    check(r.returncode == 0 and states(c, job) == {"n1": "r", "n2": "r", "n3": "r"},
          "and resumes them (%r, %r)" % (r.stderr, states(c, job)))
    c.run(["scancel", own], check=False)
    end_job(c, job)


def case_root_environment(c, sim):
    """Root's --slurm-job runs srun as the job's owner, who can read that
    srun's environment and its tasks' (/proc/PID/environ): root's own
    environment (a secret in it) must not be handed on."""
    job = start_job(c, sim)
    d = tempfile.mkdtemp(prefix="cudackpt-srunenv-")
    os.chmod(d, 0o777)
    wrapper = os.path.join(d, "srun")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nenv > %s/seen\nexec srun \"$@\"\n" % d)
    os.chmod(wrapper, 0o755)
    try:
        r = c.run([c.ctl, "suspend", "--slurm-job=" + job], check=False, timeout=120,
                  env={"CUDACKPT_SRUN": wrapper, "ROOT_SECRET": "hunter2"})
        with open(os.path.join(d, "seen")) as f:
            seen = f.read()
        check(r.returncode == 0 and "hunter2" not in seen and "SLURM_CONF=" in seen,
              "root's environment is not handed to the owner's srun (%r, %r)" % (r.stderr, seen[-400:]))
        ctl(c, ["resume", "--slurm-job=" + job], uid=None)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    end_job(c, job)


def check_usage(ctl_path):
    """--slurm-job's usage errors (exit 2), before anything is started."""
    for argv in (["suspend", "--slurm-job=4x"], ["ps", "--slurm-job=4"], ["suspend", "--slurm-job=4", "--tree=1"],
                 ["suspend", "--slurm-job=4", "--lease-ms=5"], ["resume", "--slurm-job=4", "--map=0=1"],
                 ["lock", "--slurm-job=4", "12"]):
        r = subprocess.run([ctl_path] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(r.returncode == 2 and not r.stdout, "%s: a usage error (%r)" % (" ".join(argv), r.stderr.strip()))


def main():
    def cases(c, sim):
        check_usage(c.ctl)
        with NodeDaemons(c):
            for case in (case_whole, case_cleared_environment, case_fake_slurmstepd, case_node_fails,
                         case_coordinator_killed, case_phase_timeout, case_other_user, case_forged_marks,
                         case_root_environment):
                case(c, sim)
    return run_on_cluster(cases)

if __name__ == "__main__":
    sys.exit(main())
