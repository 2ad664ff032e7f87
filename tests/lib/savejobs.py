"""savejobs.py: what the tests of the daemon's jobs and saves share
(tests/jobcmd/test_jobcmd.py, tests/slurm/test_saves.py,
tests/gpu/slurm_gpu.py): whose job they can save here, the criu they run,
the target they find by its command line, and their checks.  Scripts import it after
putting tests/lib on sys.path, as simdaemon.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import List, Optional

NOBODY = 65534
CAP_SYS_RESOURCE = 24


def saves_owner() -> Optional[int]:
    """Whose job a test saves: nobody's, where root may dump another
    user's process (CRIU reads its limits, which needs CAP_SYS_RESOURCE);
    else None, root's own (a container without that capability, as CI's)."""
    with open("/proc/self/status") as f:
        eff = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    return NOBODY if eff >> CAP_SYS_RESOURCE & 1 else None


def usable_criu() -> Optional[str]:
    """$CUDACKPT_CRIU, else criu on PATH, when it passes `criu check`."""
    criu = os.environ.get("CUDACKPT_CRIU") or shutil.which("criu")
    if not criu or subprocess.run([criu, "check"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL).returncode != 0:
        return None
    return criu


def cmdline(pid: int) -> List[bytes]:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def criu_target_pid(result: str) -> Optional[int]:
    """The pid of the criu_target writing to result, anywhere on the
    machine (the daemons' jobs are in no test's namespace), or None."""
    for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
        argv = cmdline(pid)
        if len(argv) > 3 and argv[0].endswith(b"itest-criu-target") and argv[3] == result.encode():
            return pid
    return None


def check(cond, what):
    """what said PASS, or AssertionError(what) when cond is false."""
    if not cond:
        raise AssertionError(what)
    print("PASS: " + what, flush=True)


def await_true(what, pred, timeout=20.0):
    """pred()'s first true value within timeout seconds, else AssertionError."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
