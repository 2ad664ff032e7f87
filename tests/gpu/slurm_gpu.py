#!/usr/bin/env python3
"""slurm_gpu.py: issue 33 on a real GPU, through a one-node Slurm cluster
(tests/slurm/slurmcluster.py, Debian's Slurm installed by
install-slurm-gpu.sh) and the node's cudackptd on the real driver:

  A. a 4-rank PyTorch DDP job (ddp_job.py: gloo, one GPU, a bit-exact loss
     per step) submitted with sbatch by its user, suspended and resumed with
     `cudackptctl suspend|resume --slurm-job=J` as that user mid-training;
     then suspended and resumed on the node without Slurm (`--tree` of its
     launcher); its losses bit-identical to an uninterrupted run's;
  B. the same job started by its batch script through `cudackptctl job
     start --save=slurm-$SLURM_JOB_ID` (the daemon runs it), requeued with
     `scontrol requeue` (SIGTERM: the daemon dumps it with CRIU into its saves
     directory before Slurm's SIGKILL), restored by the same script when
     Slurm starts it again; its losses bit-identical.

Prints MEASURED lines: for each way, the time from the request to the
job's GPU memory free (nvidia-smi lists none of its processes) and the
command's own time; PASS/FAIL lines; exit 1 on a FAIL, 77 when something
it needs is missing.  run-slurm-gpu.sh starts it."""
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "slurm"))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import slurmcluster  # noqa: E402
from savejobs import saves_owner  # noqa: E402
from nodedaemons import NodeDaemon  # noqa: E402

GPU = os.path.join(ROOT, ".gpu")
STEPS = int(os.environ.get("DDP_STEPS", "40"))
STEP_MS = int(os.environ.get("DDP_STEP_MS", "150"))
MIB = int(os.environ.get("DDP_MIB", "512"))
AT = int(os.environ.get("AT_STEP", "12"))
FAILS = []


def check(cond, what):
    print(("PASS: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def losses(d):
    try:
        with open(os.path.join(d, "rank-0.log")) as f:
            return [line.split()[3] for line in f if line.startswith("step ")]
    except OSError:
        return []


def gpu_pids():
    r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"], capture_output=True,
                       text=True)
    return {int(x) for x in r.stdout.split() if x.strip().isdigit()}


def until_free(t0, before, limit=120):
    """ms from t0 until none of before holds GPU memory."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if not gpu_pids() & before:
            return (time.monotonic() - t0) * 1000
        time.sleep(0.02)
    return None


class Setup:
    def __init__(self, c):
        self.c = c
        self.uid = saves_owner()
        # What the user's commands need, where the user reaches it.
        lib = c.path("lib")
        os.makedirs(lib, mode=0o755)
        for f in os.listdir(GPU):
            if ".so" in f:
                shutil.copy(os.path.join(GPU, f), lib)
        self.lib = lib
        self.ctl = c.share(os.path.join(GPU, "cudackptctl"))
        c.share(os.path.join(GPU, "cudackpt-init"))
        self.ddp = c.share(os.path.join(HERE, "ddp_job.py"))
        self.python = shutil.which("python3")
        self.work = c.path("work")
        os.makedirs(self.work)
        os.chmod(self.work, 0o1777)

    def env(self):
        return {"LD_LIBRARY_PATH": self.lib, "HOME": self.work}

    def run(self, argv, **kw):
        return self.c.run(argv, uid=self.uid, env=self.env(), check=False, timeout=300, **kw)

    def ddp_argv(self, d):
        return [self.python, self.ddp, "launch", "--dir=" + d, "--steps=%d" % STEPS, "--step-ms=%d" % STEP_MS,
                "--ballast-mib=%d" % MIB]

    def dir(self, name):
        d = os.path.join(self.work, name)
        os.makedirs(d)
        if self.uid is not None:
            os.chown(d, self.uid, self.uid)
        return d


def running_again(s, job):
    """Whether Slurm runs job again after its requeue (its begin time,
    which Slurm delays a requeued job's start to, brought forward)."""
    st = s.c.run(["scontrol", "show", "job", job], check=False).stdout
    if "Reason=BeginTime" in st:
        s.c.run(["scontrol", "update", "JobId=" + job, "StartTime=now"], check=False)
    return "JobState=RUNNING" in st and "Restarts=1" in st


def reference(s):
    """The job run once uninterrupted, as its user: its losses (checked)."""
    ref = s.dir("ref")
    r = subprocess.run(["setpriv", "--reuid=%d" % (s.uid or 0), "--regid=%d" % (s.uid or 0), "--clear-groups",
                        "env", "HOME=" + s.work] + s.ddp_argv(ref), cwd=ref, capture_output=True, text=True)
    ref_losses = losses(ref)
    check(r.returncode == 0 and len(ref_losses) == STEPS, "the uninterrupted run: %d steps" % len(ref_losses))
    return ref_losses


def missing():
    """Why the GPU suites of Slurm cannot run here (a SKIP line), or None."""
    for need in ("cudackptd", "cudackptctl", "cudackpt-init"):
        if not os.path.exists(os.path.join(GPU, need)):
            return "SKIP: no .gpu/%s (tests/gpu/stage-gpu.sh)" % need
    if shutil.which("slurmd") is None or shutil.which("nvidia-smi") is None:
        return "SKIP: no Slurm (install-slurm-gpu.sh) or no nvidia-smi"
    return None


def await_step(d, n, limit=300):
    slurmcluster.await_true("step %d in %s" % (n, d), lambda: len(losses(d)) > n, limit)


def part_a(s, ref):
    d = s.dir("a")
    script = "exec env -u LD_LIBRARY_PATH %s" % " ".join(s.ddp_argv(d))
    r = s.run(["sbatch", "--parsable", "-N1", "-o", os.path.join(d, "slurm.out"), "--wrap", script], cwd=d)
    job = r.stdout.strip().split(";")[0]
    await_step(d, AT)
    for way, argv in (("--slurm-job", ["--slurm-job=" + job]), ("--tree", None)):
        if argv is None:
            with open(os.path.join(d, "ranks")) as f:
                ranks = [int(p) for p in f.read().split()]
            launcher = int(open("/proc/%d/stat" % ranks[0]).read().rsplit(")", 1)[1].split()[1])
            # On the node, outside its steps: the node's socket by name.
            argv = ["--tree=%d" % launcher, "--socket=" + s.c.node_socket("n1")]
        before = gpu_pids()
        t0 = time.monotonic()
        r = s.run([s.ctl, "suspend"] + argv)
        took = (time.monotonic() - t0) * 1000
        freed = until_free(t0, before)
        check(r.returncode == 0, "suspend %s as the job's user (%r)" % (way, r.stderr[-300:]))
        print("MEASURED: suspend %s: %.0f ms; the job's GPU memory free after %s ms"
              % (way, took, "%.0f" % freed if freed else "?"), flush=True)
        time.sleep(1)
        t0 = time.monotonic()
        r = s.run([s.ctl, "resume"] + argv)
        check(r.returncode == 0, "resume %s (%r)" % (way, r.stderr[-300:]))
        print("MEASURED: resume %s: %.0f ms" % (way, (time.monotonic() - t0) * 1000), flush=True)
    slurmcluster.await_true("job A done", lambda: os.path.exists(os.path.join(d, "done")), 300)
    check(losses(d) == ref, "A: the losses after suspend/resume through Slurm and on the node are bit-identical to "
          "the uninterrupted run's (%d steps)" % len(losses(d)))


def part_b(s, ref):
    d = s.dir("b")
    script = os.path.join(d, "job.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexec %s job start --name=ddp --save=slurm-$SLURM_JOB_ID --output=%s/launcher.log "
                "-- env -u LD_LIBRARY_PATH %s\n" % (s.ctl, d, " ".join(s.ddp_argv(d))))
    os.chmod(script, 0o755)
    r = s.run(["sbatch", "--parsable", "--requeue", "-N1", "-o", os.path.join(d, "slurm.out"),
               "--open-mode=append", script], cwd=d)
    job = r.stdout.strip().split(";")[0]
    await_step(d, AT)
    before = gpu_pids()
    t0 = time.monotonic()
    s.c.run(["scontrol", "requeue", job])
    freed = until_free(t0, before)
    saves = [s.ctl, "job", "--socket=" + s.c.node_socket("n1"), "saves", "slurm-" + job]
    saved = slurmcluster.await_true("the save", lambda: s.run(saves).returncode == 0, 300)
    t_saved = (time.monotonic() - t0) * 1000
    check(saved, "B: the requeue's SIGTERM saved the job into slurm-%s" % job)
    print("MEASURED: requeue to the job's GPU memory free %s ms, to the save on disk %.0f ms"
          % ("%.0f" % freed if freed else "?", t_saved), flush=True)
    at = len(losses(d))
    slurmcluster.await_true("job B started again", lambda: running_again(s, job), 300)
    t1 = time.monotonic()
    await_step(d, at)
    print("MEASURED: the second start to the restored job's next step %.0f ms" % ((time.monotonic() - t1) * 1000))
    slurmcluster.await_true("job B done", lambda: os.path.exists(os.path.join(d, "done")), 300)
    check(losses(d) == ref, "B: saved at step %d by the requeue, restored by the same batch script: the losses are "
          "bit-identical to the uninterrupted run's (%d steps)" % (at, len(losses(d))))
    with open(os.path.join(d, "slurm.out")) as f:
        out = f.read()
    check("saved into slurm-" in out and "started" in out, "B: the batch script's log says saved, then restored")


def main():
    why = missing()
    if why:
        print(why)
        return 77
    criu = os.environ.get("CUDACKPT_CRIU") or os.path.join(GPU, "criu", "criu")
    c = slurmcluster.Cluster(nodes=1, cpus=16, kill_wait=120)
    with c:
        s = Setup(c)
        daemon_ctl = c.share(os.path.join(GPU, "cudackptctl"))
        config = {"saves_dir": c.path("saves"), "ctl_path": daemon_ctl}
        env = {"LD_LIBRARY_PATH": GPU, "CUDACKPT_CRIU": criu, "CUDACKPT_RUN_DIR": c.path("jobs")}
        d = NodeDaemon(c.node_socket("n1"), os.path.join(GPU, "cudackptd"), "libcuda.so.1", config, env,
                       prefix="cudackpt-slurm-gpu-")
        try:
            ref_losses = reference(s)
            part_a(s, ref_losses)
            part_b(s, ref_losses)
        except (AssertionError, TimeoutError, RuntimeError) as e:
            check(False, str(e))
            print(d.log()[-3000:])
        finally:
            d.stop()
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
