#!/usr/bin/env python3
"""slurm_jobset_gpu.py: issue 33's multi-node save on a real GPU: a Slurm
cluster of two nodes on this machine (tests/slurm/slurmcluster.py, each
slurmd in its own UTS namespace, on 127.0.0.1), one cudackptd per node on
the real driver (both on this machine's GPU), and a 4-rank PyTorch DDP job
(ddp_job.py: gloo, a bit-exact loss per step) run by its batch script as
`cudackptctl job start --slurm --save=set-$SLURM_JOB_ID`: ranks 0-1 on n1,
2-3 on n2, the gloo connections between the nodes' ranks over TCP.

`scontrol requeue` (SIGTERM to the batch script): every node's daemon dumps
its part held at its barrier (images on disk, its connections under CRIU's
iptables lock), then all are let go; Slurm starts the job again on the same
two nodes and the same batch line restores the newest whole set, every part
held, then all let go; the training goes on, its losses bit-identical to an
uninterrupted run's.

Prints MEASURED lines (requeue to the job's GPU memory free, to both part
saves on disk; second start to the next step), PASS/FAIL lines; exit 1 on
a FAIL, 77 when something it needs is missing.  run-slurm-gpu.sh jobset
starts it."""
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from slurm_gpu import (AT, FAILS, GPU, Setup, await_step, check, gpu_pids, losses, missing, reference,  # noqa: E402
                       running_again, until_free)
import slurmcluster  # noqa: E402
from nodedaemons import NodeDaemon  # noqa: E402


def iptables_env():
    """The environment in which criu finds a working iptables-restore: this
    machine's, else the one stage-gpu.sh carried (.gpu/iptables)."""
    d = os.path.join(GPU, "iptables")
    for env in ({}, {"PATH": os.path.join(d, "bin") + ":" + os.environ["PATH"],
                     "XTABLES_LIBDIR": os.path.join(d, "xtables"), "LD_LIBRARY_PATH": os.path.join(d, "lib")}):
        try:
            r = subprocess.run(["iptables", "-S"], capture_output=True, text=True, env=dict(os.environ, **env))
        except OSError:
            continue
        if r.returncode == 0:
            return env
        print("iptables %s: %s" % (env.get("PATH", "")[:40], r.stderr.strip()[-300:]))
    return None


def part_saves(s, job):
    r = s.run([s.ctl, "job", "--socket=" + s.c.node_socket("n1"), "saves", "--json"])
    names = [json.loads(line).get("save", "") for line in r.stdout.splitlines() if line.startswith("{")]
    return [n for n in names if n.startswith("set-%s.g" % job)]


def rules():
    return [r for r in subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout.splitlines()
            if "DROP" in r]


def requeue_and_restore(s, ref):
    d = s.dir("set")
    script = os.path.join(d, "job.sh")
    inner = ("exec env -u LD_LIBRARY_PATH GLOO_SOCKET_IFNAME=lo %s --first=$((SLURM_NODEID*2)) --count=2 --world=4"
             % " ".join(s.ddp_argv(d)))
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexec %s job start --slurm --name=ddp --save=set-$SLURM_JOB_ID --output=%s/launcher.log "
                "-- /bin/sh -c '%s'\n" % (s.ctl, d, inner))
    os.chmod(script, 0o755)
    r = s.run(["sbatch", "--parsable", "--requeue", "-N2", "-o", os.path.join(d, "slurm.out"), "--open-mode=append",
               script], cwd=d)
    job = r.stdout.strip().split(";")[0]
    await_step(d, AT)
    before = gpu_pids()
    t0 = time.monotonic()
    s.c.run(["scontrol", "requeue", job])
    freed = until_free(t0, before)
    saved = slurmcluster.await_true("both part saves", lambda: len(part_saves(s, job)) == 2, 300)
    t_saved = (time.monotonic() - t0) * 1000
    check(saved, "the requeue saved both nodes' parts: %r" % part_saves(s, job))
    print("MEASURED: requeue to the job's GPU memory free %s ms, to both part saves on disk %.0f ms"
          % ("%.0f" % freed if freed else "?", t_saved), flush=True)
    print("lock rules kept between the save and the restore: %d" % len(rules()), flush=True)
    at = len(losses(d))
    slurmcluster.await_true("the job started again", lambda: running_again(s, job), 300)
    t1 = time.monotonic()
    await_step(d, at)
    print("MEASURED: the second start to the restored job's next step %.0f ms" % ((time.monotonic() - t1) * 1000))
    done = slurmcluster.await_true("both nodes done", lambda: all(
        os.path.exists(os.path.join(d, "done-%d" % k)) for k in (0, 2)), 300)
    check(done and losses(d) == ref, "saved whole across two nodes at step %d by the requeue, restored whole: the "
          "losses are bit-identical to the uninterrupted run's (%d steps)" % (at, len(losses(d))))
    check(not rules(), "no lock rule left after the restore (%r)" % rules())
    with open(os.path.join(d, "slurm.out")) as f:
        out = f.read()
    print(out[-1500:])
    check("saved into set-" in out and "restored from save set-" in out, "the batch log says saved, then restored")
    slurmcluster.await_true("the saves removed", lambda: not part_saves(s, job), 60)
    check(not part_saves(s, job), "the job done on both nodes: its part saves removed")


def main():
    why = missing()
    if why:
        print(why)
        return 77
    ipt = iptables_env()
    if ipt is None:
        print("SKIP: no working iptables here or in .gpu/iptables")
        return 77
    for k, v in ipt.items():
        os.environ[k] = v if k != "LD_LIBRARY_PATH" else v + ":" + os.environ.get("LD_LIBRARY_PATH", "")
    criu = os.environ.get("CUDACKPT_CRIU") or os.path.join(GPU, "criu", "criu")
    c = slurmcluster.Cluster(nodes=2, cpus=16, kill_wait=120)
    with c:
        s = Setup(c)
        daemon_ctl = c.share(os.path.join(GPU, "cudackptctl"))
        config = {"saves_dir": c.path("saves"), "ctl_path": daemon_ctl, "save_parts_network_lock": "iptables"}
        lib = GPU + (":" + ipt["LD_LIBRARY_PATH"] if "LD_LIBRARY_PATH" in ipt else "")
        ds = []
        try:
            for n in ("n1", "n2"):
                env = {"LD_LIBRARY_PATH": lib, "CUDACKPT_CRIU": criu, "CUDACKPT_RUN_DIR": c.path("jobs-" + n)}
                env.update({k: v for k, v in ipt.items() if k != "LD_LIBRARY_PATH"})
                ds.append(NodeDaemon(c.node_socket(n), os.path.join(GPU, "cudackptd"), "libcuda.so.1", config, env,
                                     prefix="cudackpt-slurmset-gpu-%s-" % n))
            requeue_and_restore(s, reference(s))
        except (AssertionError, TimeoutError, RuntimeError) as e:
            check(False, str(e))
            for d in ds:
                print(d.log()[-3000:])
        finally:
            for d in ds:
                d.stop()
            for rule in rules():
                subprocess.run(["iptables"] + rule.replace("-A", "-D", 1).split(), capture_output=True)
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
