#!/usr/bin/env python3
"""python_gpu.py: a real PyTorch training process suspended and resumed
mid-training, through cudackptd with ``cudackpt.checkpoint.Process`` (the
drop-in), then with ``cuda.core.checkpoint.Process`` directly, side by side.

Run by tests/gpu/run-python-gpu.sh, which starts the daemon on the real
driver and sets CUDACKPT_SOCKET and PYTHONPATH (the package in python/).
For each of the two interfaces it checks:

- the trainer's GPU memory is released while it is suspended (NVML through
  nvidia-smi: its pid leaves --query-compute-apps, or the GPUs' used memory
  drops by most of what it held), and it makes no step while suspended;
- its loss trajectory, every step's loss as float.hex(), is bit-identical
  to an uninterrupted run with the same seed (deterministic PyTorch:
  use_deterministic_algorithms, CUBLAS_WORKSPACE_CONFIG=:4096:8);
- the same driver error gives the same exception message both ways;

and prints the time of each call (lock, checkpoint, state, restore,
unlock, restore_thread_id) of both, as a table.  Prints PASS/FAIL lines and
exits 1 when anything failed.

usage: python_gpu.py [--steps N] [--pause-at K] [--paused-s S] [--ballast-mib M]
       python_gpu.py train ...   (the trainer itself, started by the above)
"""

from __future__ import annotations

import argparse
import os
import queue
import select
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

FAILED: List[str] = []


def ok(what: str) -> None:
    print("PASS " + what, flush=True)


def bad(what: str) -> None:
    FAILED.append(what)
    print("FAIL " + what, flush=True)


def check(cond: bool, what: str) -> bool:
    (ok if cond else bad)(what)
    return cond


# ---- the trainer (a child process) --------------------------------------------

def train(args: argparse.Namespace) -> int:
    """A small MLP on synthetic data, fixed seed, deterministic; prints
    "step I LOSS" (LOSS as float.hex()) after every step."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda:0")
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(4096, 256, generator=gen).to(dev)
    w_true = torch.randn(256, 1, generator=gen).to(dev)
    y = torch.tanh(x @ w_true) + 0.01 * torch.randn(4096, 1, generator=gen).to(dev)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 1)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    # GPU memory that the checkpoint must move out, and a check that it comes back intact.
    ballast = torch.arange(args.ballast_mib * (1 << 18), dtype=torch.float32, device=dev)
    ballast_sum = float(ballast.sum().item())
    print("ready pid=%d" % os.getpid(), flush=True)
    for step in range(args.steps):
        idx = torch.arange(step * 256 % 4096, step * 256 % 4096 + 256, device=dev) % 4096
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        print("step %d %s" % (step, float(loss.item()).hex()), flush=True)
        if args.step_sleep_ms:
            time.sleep(args.step_sleep_ms / 1000.0)
    intact = float(ballast.sum().item()) == ballast_sum
    print("ballast %s" % ("intact" if intact else "CORRUPT"), flush=True)
    return 0 if intact else 3


# ---- the coordinator -------------------------------------------------------------

class Trainer:
    """A trainer child, its lines read by a thread into a queue."""

    def __init__(self, args: argparse.Namespace) -> None:
        cmd = [sys.executable, os.path.abspath(__file__), "train", "--steps", str(args.steps),
               "--seed", str(args.seed), "--ballast-mib", str(args.ballast_mib),
               "--step-sleep-ms", str(args.step_sleep_ms)]
        env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, universal_newlines=True, env=env)
        self.lines: "queue.Queue[Optional[Tuple[float, str]]]" = queue.Queue()
        self.losses: List[str] = []
        self.ballast = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.monotonic(), line.rstrip("\n")))
        self.lines.put(None)

    def next_line(self, timeout: float) -> Optional[Tuple[float, str]]:
        """The next line (its time of reading and text), None at its end;
        raises TimeoutError after timeout seconds."""
        try:
            item = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError("the trainer printed nothing for %.0f s" % timeout) from None
        if item is not None:
            self._note(item[1])
        return item

    def _note(self, text: str) -> None:
        if text.startswith("step "):
            self.losses.append(text.split()[2])
        elif text.startswith("ballast "):
            self.ballast = text.split()[1]

    def wait_step(self, step: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.losses) <= step:
            if self.next_line(max(deadline - time.monotonic(), 0.01)) is None:
                raise RuntimeError("the trainer ended before step %d" % step)

    def drain(self) -> int:
        """Reads what has come; returns how many lines."""
        n = 0
        while True:
            try:
                item = self.lines.get_nowait()
            except queue.Empty:
                return n
            if item is None:
                self.lines.put(None)
                return n
            self._note(item[1])
            n += 1

    def finish(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.next_line(max(deadline - time.monotonic(), 0.01)) is not None:
            pass
        return self.proc.wait(timeout=max(deadline - time.monotonic(), 1))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def gpu_memory(pid: int) -> Tuple[Optional[int], int]:
    """(MiB the pid holds as nvidia-smi lists it, or None when not listed;
    MiB used on all GPUs)."""
    apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                          stdout=subprocess.PIPE, universal_newlines=True, timeout=60).stdout
    mine = None
    for line in apps.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(pid):
            mine = int(parts[1]) if parts[1].isdigit() else 0
    used = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                          stdout=subprocess.PIPE, universal_newlines=True, timeout=60).stdout
    return mine, sum(int(v) for v in used.split() if v.isdigit())


def timed(times: Dict[str, List[float]], name: str, fn: Callable[[], object]) -> object:
    t0 = time.perf_counter()
    result = fn()
    times.setdefault(name, []).append((time.perf_counter() - t0) * 1000.0)
    return result


def reference(args: argparse.Namespace) -> List[str]:
    """The uninterrupted run's losses."""
    t = Trainer(args)
    try:
        rc = t.finish(args.run_timeout)
    finally:
        t.kill()
    check(rc == 0 and len(t.losses) == args.steps and t.ballast == "intact",
          "reference run: %d steps, exit %s, ballast %s" % (len(t.losses), rc, t.ballast or "?"))
    return t.losses


def suspended_run(label: str, make: Callable[[int], object], args: argparse.Namespace, ref: List[str],
                  times: Dict[str, List[float]]) -> None:
    """A run suspended at step pause_at through make(pid) (a Process)."""
    t = Trainer(args)
    try:
        t.wait_step(args.pause_at, args.run_timeout)
        p = make(t.proc.pid)
        mine_before, used_before = gpu_memory(t.proc.pid)
        timed(times, "lock", lambda: p.lock(timeout_ms=30000))  # type: ignore[attr-defined]
        timed(times, "checkpoint", p.checkpoint)  # type: ignore[attr-defined]
        state = timed(times, "state", lambda: p.state)  # type: ignore[attr-defined]
        check(state == "checkpointed", "%s: state after checkpoint is %s" % (label, state))
        timed(times, "restore_thread_id", lambda: p.restore_thread_id)  # type: ignore[attr-defined]
        # The read-only calls are cheap: their medians over many calls.
        for _ in range(100):
            timed(times, "state", lambda: p.state)  # type: ignore[attr-defined]
            timed(times, "restore_thread_id", lambda: p.restore_thread_id)  # type: ignore[attr-defined]
        t.drain()
        steps_at_pause = len(t.losses)
        mine, used = gpu_memory(t.proc.pid)
        released = (mine_before is not None and mine is None) or used_before - used >= 0.9 * args.ballast_mib
        check(released, "%s: GPU memory released while suspended (trainer: %s MiB -> %s; all GPUs: %d -> %d MiB)"
              % (label, mine_before, "not listed" if mine is None else mine, used_before, used))
        time.sleep(args.paused_s)  # the pause itself, which must show no progress
        t.drain()
        check(len(t.losses) == steps_at_pause, "%s: no step while suspended (%d, then %d after %.1f s)"
              % (label, steps_at_pause, len(t.losses), args.paused_s))
        timed(times, "restore", p.restore)  # type: ignore[attr-defined]
        timed(times, "unlock", p.unlock)  # type: ignore[attr-defined]
        state = p.state  # type: ignore[attr-defined]
        check(state == "running", "%s: state after unlock is %s" % (label, state))
        mine_after, _ = gpu_memory(t.proc.pid)
        check(mine_before is None or mine_after is not None, "%s: GPU memory back after restore (%s MiB)"
              % (label, mine_after))
        rc = t.finish(args.run_timeout)
        check(rc == 0 and t.ballast == "intact", "%s: the trainer finished (exit %s), ballast %s"
              % (label, rc, t.ballast or "?"))
        same = t.losses == ref
        first_diff = next((i for i, (a, b) in enumerate(zip(t.losses, ref)) if a != b), None)
        check(same, "%s: %d losses bit-identical to the uninterrupted run (paused after step %d)%s"
              % (label, len(ref), steps_at_pause - 1,
                 "" if same else "; first difference at step %s, %d vs %d steps" % (first_diff, len(t.losses),
                                                                                     len(ref))))
    except Exception as e:  # a failure of the run, reported, not a crash of the script
        bad("%s: %s: %s" % (label, type(e).__name__, e))
    finally:
        t.kill()


def same_errors() -> None:
    """The same driver error, both ways: unlock of a running process."""
    import cuda.core.checkpoint as core
    from cuda.core._utils.cuda_utils import CUDAError as CoreCUDAError

    import cudackpt.checkpoint as ours
    sleeper = subprocess.Popen([sys.executable, "-c", "import torch, time; torch.zeros(1, device='cuda'); "
                                "print('ready', flush=True); time.sleep(600)"], stdout=subprocess.PIPE,
                               universal_newlines=True)
    try:
        assert sleeper.stdout is not None
        readable, _, _ = select.select([sleeper.stdout], [], [], 120)
        ready = sleeper.stdout.readline() if readable else ""
        if not check(ready.strip() == "ready", "a CUDA process for the error check"):
            return
        got = {}
        for label, mod in (("cuda.core", core), ("cudackpt", ours)):
            try:
                mod.Process(sleeper.pid).unlock()
                got[label] = None
            except Exception as e:
                got[label] = e
        a, b = got["cuda.core"], got["cudackpt"]
        check(a is not None and b is not None and str(a) == str(b),
              "unlock of a running process: the same message both ways: %r / %r" % (str(a), str(b)))
        check(isinstance(b, CoreCUDAError), "cudackpt raises cuda-core's CUDAError (%s)" % (type(b).__mro__[:3],))
    finally:
        sleeper.kill()
        sleeper.wait(timeout=30)


def table(results: Dict[str, Dict[str, List[float]]]) -> None:
    names = ["lock", "checkpoint", "state", "restore_thread_id", "restore", "unlock"]
    print("\nper-call times, ms (median of %s runs; min-max)" % ", ".join(
        "%s %d" % (k, len(v.get("lock", []))) for k, v in results.items()))
    print("| call | " + " | ".join(results) + " |")
    print("| --- |" + " --- |" * len(results))
    for n in names:
        cells = []
        for v in results.values():
            xs = sorted(v.get(n, []))
            cells.append("%.2f (%.2f-%.2f)" % (xs[len(xs) // 2], xs[0], xs[-1]) if xs else "-")
        print("| %s | %s |" % (n, " | ".join(cells)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", nargs="?", default="run", choices=["run", "train"])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--pause-at", type=int, default=100)
    ap.add_argument("--paused-s", type=float, default=2.0)
    ap.add_argument("--ballast-mib", type=int, default=1024)
    ap.add_argument("--step-sleep-ms", type=int, default=10)
    ap.add_argument("--runs", type=int, default=2, help="suspended runs per interface")
    ap.add_argument("--run-timeout", type=float, default=300.0)
    args = ap.parse_args()
    if args.mode == "train":
        return train(args)

    import cudackpt
    import cudackpt.checkpoint
    print("cudackpt from %s, socket %s" % (os.path.dirname(cudackpt.__file__), os.environ.get("CUDACKPT_SOCKET")))
    try:
        import cuda.core
        import cuda.core.checkpoint
        from cuda.bindings import driver
        driver.cuInit(0)  # a restore needs the caller to have initialised CUDA (or persistence mode)
        print("cuda.core %s" % getattr(cuda.core, "__version__", "?"))
    except Exception as e:
        bad("cuda.core.checkpoint is not importable: %s" % e)
        cuda = None  # type: ignore

    ref = reference(args)
    results: Dict[str, Dict[str, List[float]]] = {"cudackpt (daemon)": {}, "cuda.core (direct)": {}}
    for i in range(args.runs):
        suspended_run("cudackpt.checkpoint #%d" % (i + 1), cudackpt.checkpoint.Process, args, ref,
                      results["cudackpt (daemon)"])
        if cuda is not None:
            suspended_run("cuda.core.checkpoint #%d" % (i + 1), cuda.core.checkpoint.Process, args, ref,
                          results["cuda.core (direct)"])
    if cuda is not None:
        try:
            same_errors()
        except Exception as e:
            bad("error comparison: %s: %s" % (type(e).__name__, e))
    table(results)
    print("\n%d failed" % len(FAILED))
    for f in FAILED:
        print("  FAIL " + f)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
