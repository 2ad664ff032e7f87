"""Every ```python block of docs/python.md, run against the daemon: in a
fresh Python process each, with ``pid`` naming a fresh simulated CUDA
process and ``pids`` two more (as the page says)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import List

import pytest

import cudackpt

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "python.md")
PRELUDE = ("import os\npid = int(os.environ['DOC_PID'])\n"
           "pids = [int(p) for p in os.environ['DOC_PIDS'].split(',')]\n")


def blocks() -> List[str]:
    with open(DOC) as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), flags=re.S | re.M)


def test_the_page_has_examples() -> None:
    assert len(blocks()) >= 6


@pytest.mark.parametrize("index", range(len(blocks())))
def test_example(daemon, targets, index: int) -> None:
    code = blocks()[index]
    pid, a, b = targets.start(), targets.start(), targets.start()
    env = dict(os.environ, CUDACKPT_SOCKET=daemon.socket, DOC_PID=str(pid), DOC_PIDS="%d,%d" % (a, b),
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(cudackpt.__file__))))
    out = subprocess.run([sys.executable, "-c", PRELUDE + code], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    assert out.returncode == 0, "example %d failed:\n%s\n---\n%s" % (index, code, out.stdout)
    for p in (pid, a, b):  # every example leaves its processes running
        assert cudackpt.state(p) == "running", "example %d left %d %s" % (index, p, cudackpt.state(p))
