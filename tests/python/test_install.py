"""The package installed from the tree into a fresh virtual environment,
offline (Debian 12's pip and setuptools, no package index), and used from
there against the daemon."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import cudackpt

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(cudackpt.__file__)))


def test_install_offline_into_a_venv(daemon, target: int, tmp_path) -> None:
    src = tmp_path / "src"  # a copy: the build writes next to the sources
    shutil.copytree(PACKAGE, str(src), ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL", "PIP_FIND_LINKS")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", str(src)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                         timeout=300)
    assert pip.returncode == 0, pip.stdout
    code = ("import os, cudackpt, cudackpt.checkpoint as c\n"
            "print(os.path.dirname(cudackpt.__file__))\n"
            "print(os.path.exists(os.path.join(os.path.dirname(cudackpt.__file__), 'py.typed')))\n"
            "print(c.Process(%d).state)\n" % target)
    env["CUDACKPT_SOCKET"] = daemon.socket
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], env=env, cwd="/", stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    assert out.returncode == 0, out.stdout
    where, typed, state = out.stdout.split()
    assert where.startswith(str(venv)) and "site-packages" in where
    assert typed == "True" and state == "running"
