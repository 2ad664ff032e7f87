#!/usr/bin/env python3
"""ddp_job.py: a 4-rank PyTorch DDP job (gloo) on one GPU, for run-criu-job-gpu.sh.

    ddp_job.py launch --dir=DIR [--world=4] [--steps=60] [--step-ms=100] [--ballast-mib=1024]
                      [--first=F --count=C]

The launcher (no CUDA) starts WORLD ranks with subprocess (not
multiprocessing: no semaphores or pipes for CRIU to follow), each
"ddp_job.py rank --rank=R ..." with stdin /dev/null and stdout/stderr on
DIR/rank-R.log, and waits for them; it writes DIR/done when all exited 0.
The ranks rendezvous through a FileStore (DIR/store: no TCPStore, whose
libuv loop maps an io_uring that CRIU 4.2 cannot dump), train a small MLP
with a fixed seed and fixed data per step, and rank 0 prints one line per
step: "step N loss HEX" (float.hex: bit-exact) to its log, then sleeps
STEP_MS so that a dump lands mid-training.  With --first and --count the
launcher starts ranks F..F+C-1 only (one node's share of a job run on
several nodes: slurm_jobset_gpu.py), and its files are ranks-F and
done-F (or failed-F).  Deterministic: cuBLAS
workspace config, deterministic algorithms, gloo's fixed reduction order.
"""
import argparse
import os
import subprocess
import sys
import time


def rank_main(a):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    store = dist.FileStore(os.path.join(a.dir, "store"), a.world)
    dist.init_process_group("gloo", store=store, rank=a.rank, world_size=a.world)
    dev = torch.device("cuda:0")
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 1024)).to(dev)
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    # GPU memory of its own, as a real job holds (checked after the restore).
    ballast = torch.arange(a.ballast_mib * 262144, dtype=torch.float32, device=dev) if a.ballast_mib else None
    for step in range(a.steps):
        g = torch.Generator().manual_seed(step * 100 + a.rank)
        x = torch.randn(256, 1024, generator=g).to(dev)
        y = torch.randn(256, 1024, generator=g).to(dev)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        lv = loss.detach().clone()
        dist.all_reduce(lv)
        if a.rank == 0:
            print("step %d loss %s" % (step, (lv.item() / a.world).hex()), flush=True)
        time.sleep(a.step_ms / 1000.0)
    if ballast is not None:
        n = ballast.numel()
        ok = bool(torch.equal(ballast, torch.arange(n, dtype=torch.float32, device=dev)))
        print("ballast %s" % ("intact" if ok else "CORRUPTED"), flush=True)
        if not ok:
            return 1
    dist.destroy_process_group()
    return 0


def launch_main(a):
    procs = []
    first, count = (a.first, a.count) if a.count else (0, a.world)
    tail = "-%d" % first if a.count else ""
    for r in range(first, first + count):
        log = open(os.path.join(a.dir, "rank-%d.log" % r), "w")
        cmd = [sys.executable, os.path.abspath(__file__), "rank", "--rank=%d" % r, "--dir=%s" % a.dir,
               "--world=%d" % a.world, "--steps=%d" % a.steps, "--step-ms=%d" % a.step_ms,
               "--ballast-mib=%d" % a.ballast_mib]
        procs.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      close_fds=True))
        log.close()
    with open(os.path.join(a.dir, "ranks" + tail), "w") as f:
        f.write(" ".join(str(p.pid) for p in procs) + "\n")
    rcs = [p.wait() for p in procs]
    with open(os.path.join(a.dir, ("done" if all(rc == 0 for rc in rcs) else "failed") + tail), "w") as f:
        f.write(" ".join(str(rc) for rc in rcs) + "\n")
    return 0 if all(rc == 0 for rc in rcs) else 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["launch", "rank"])
    p.add_argument("--dir", required=True)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--step-ms", type=int, default=100)
    p.add_argument("--ballast-mib", type=int, default=1024)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--count", type=int, default=0)
    a = p.parse_args()
    return launch_main(a) if a.mode == "launch" else rank_main(a)


if __name__ == "__main__":
    sys.exit(main())
