"""cudackpt.checkpoint, the drop-in for cuda.core.checkpoint: its surface,
its checks, every method and every error, against the real daemon on the
simulated driver."""

from __future__ import annotations

import inspect
import os
import signal
import subprocess
import sys
import uuid
from typing import Dict, Optional

import pytest

import cudackpt
import cudackpt.checkpoint
from cudackpt.checkpoint import Process

from conftest import SIM_DEVICES, await_true, dead_pid, serving, start_time_of


# ---- the surface, as cuda-core 1.2 defines it ----------------------------------

def test_public_surface() -> None:
    assert cudackpt.checkpoint.__all__ == ["Process"]
    public = {n for n in vars(Process) if not n.startswith("_")}
    assert public == {"pid", "state", "restore_thread_id", "lock", "checkpoint", "restore", "unlock"}
    assert str(inspect.signature(Process.lock)) == "(self, timeout_ms: 'int' = 0) -> 'None'"
    assert list(inspect.signature(Process.restore).parameters) == ["self", "gpu_mapping"]
    assert inspect.signature(Process.restore).parameters["gpu_mapping"].default is None
    for name in ("checkpoint", "unlock"):
        assert list(inspect.signature(getattr(Process, name)).parameters) == ["self"]
    assert Process.__slots__ == ("_pid",)


@pytest.mark.parametrize("bad", [True, False, 1.0, "12", None, [1]])
def test_pid_must_be_an_int(bad: object) -> None:
    with pytest.raises(TypeError, match="^pid must be an int$"):
        Process(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1, -(2 ** 40)])
def test_pid_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError, match="^pid must be a positive int$"):
        Process(bad)


def test_pid_is_read_only() -> None:
    p = Process(4242)
    assert p.pid == 4242
    with pytest.raises(AttributeError):
        p.pid = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        p.other = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad,exc,message", [
    (True, TypeError, "^timeout_ms must be an int$"),
    (1.5, TypeError, "^timeout_ms must be an int$"),
    ("10", TypeError, "^timeout_ms must be an int$"),
    (-1, ValueError, "^timeout_ms must be >= 0$"),
])
def test_lock_checks_timeout_ms(daemon: object, target: int, bad: object, exc: type, message: str) -> None:
    with pytest.raises(exc, match=message):
        Process(target).lock(bad)  # type: ignore[arg-type]
    assert Process(target).state == "running"


@pytest.mark.parametrize("bad,exc,message", [
    ([("a", "b")], TypeError, "^gpu_mapping must be a mapping from checkpointed GPU UUID to restore GPU UUID$"),
    ({SIM_DEVICES[0][4:]: "xyz"}, ValueError, "^GPU UUID string must be 32 hex characters"),
    ({SIM_DEVICES[0]: SIM_DEVICES[1][4:]}, ValueError, "^GPU UUID string must be 32 hex characters"),
    ({SIM_DEVICES[0][4:]: 12}, TypeError, "^GPU UUID values must be CUDA UUID objects or UUID strings$"),
    ({SIM_DEVICES[0][4:]: SIM_DEVICES[1][4:-2]}, ValueError, "^GPU UUID string must be 32 hex characters"),
])
def test_restore_checks_gpu_mapping(daemon: object, target: int, bad: object, exc: type, message: str) -> None:
    p = Process(target)
    p.lock()
    p.checkpoint()
    with pytest.raises(exc, match=message):
        p.restore(bad)  # type: ignore[arg-type]
    assert p.state == "checkpointed"  # nothing was asked of the daemon
    p.restore({})  # an empty mapping restores in place
    p.unlock()


# ---- every method -----------------------------------------------------------------

def test_a_whole_cycle(daemon: object, target: int) -> None:
    p = Process(target)
    assert p.state == "running"
    assert p.lock() is None
    assert p.state == "locked"
    assert p.checkpoint() is None
    assert p.state == "checkpointed"
    assert p.restore() is None
    assert p.state == "locked"
    assert p.unlock() is None
    assert p.state == "running"
    p.lock(timeout_ms=5000)
    p.unlock()


def test_restore_thread_id_is_a_thread_of_the_process(daemon: object, target: int) -> None:
    tid = Process(target).restore_thread_id
    assert type(tid) is int
    assert str(tid) in os.listdir("/proc/%d/task" % target)


@pytest.mark.parametrize("form", ["device-uuid", "hyphen-less", "cuuuid-like"])
def test_restore_onto_another_gpu(daemon: object, target: int, form: str) -> None:
    old, new = (u[4:] for u in SIM_DEVICES)  # as cuda.core.Device.uuid returns them
    if form == "hyphen-less":
        old, new = old.replace("-", ""), new.replace("-", "")
    mapping = {old: new} if form != "cuuuid-like" else {uuid.UUID(old): uuid.UUID(new)}
    p = Process(target)
    p.lock()
    p.checkpoint()
    p.restore(mapping)
    p.unlock()
    info = cudackpt.list_processes([target])
    assert [i.pid for i in info] == [target] and info[0].state == "running"
    # It now runs on the second GPU: the way back needs the reverse mapping.
    p.lock()
    p.checkpoint()
    with pytest.raises(cudackpt.errors.CUDAError):
        p.restore({old: new})
    p.restore({new: old})
    p.unlock()


# ---- errors --------------------------------------------------------------------------

def test_illegal_state_is_a_cuda_error(daemon: object, target: int) -> None:
    p = Process(target)
    with pytest.raises(cudackpt.errors.CUDAError) as e:
        p.unlock()
    assert str(e.value).startswith("CUDA_ERROR_ILLEGAL_STATE")
    assert str(e.value) == cudackpt.errors.cuda_error_message("CUDA_ERROR_ILLEGAL_STATE")
    assert isinstance(e.value, cudackpt.InvalidState)
    assert e.value.pid == target and e.value.method == "Unlock" and e.value.required_state == "locked"
    with pytest.raises(cudackpt.InvalidState) as e2:
        p.checkpoint()
    assert e2.value.required_state == "locked"
    assert p.state == "running"


def test_lock_timeout(daemon: object, targets) -> None:
    pid = targets.start(CUDACKPT_SIM_BUSY_MS="3000")
    p = Process(pid)
    with pytest.raises(TimeoutError) as e:
        p.lock(timeout_ms=100)
    assert isinstance(e.value, cudackpt.errors.CUDAError) and isinstance(e.value, cudackpt.Timeout)
    assert str(e.value).startswith("CUDA_ERROR_NOT_READY")
    assert e.value.timeout_ms == 100 and e.value.state == "running"
    assert p.state == "running"


def test_not_a_cuda_process(daemon: object, targets) -> None:
    pid = targets.start(cuda=False)
    with pytest.raises(cudackpt.errors.CUDAError) as e:
        Process(pid).lock()
    assert isinstance(e.value, cudackpt.NotCudaProcess)
    assert str(e.value).startswith("CUDA_ERROR_NOT_INITIALIZED")
    assert e.value.pid == pid


@pytest.mark.parametrize("call", ["state", "restore_thread_id", "lock", "checkpoint", "restore", "unlock"])
def test_no_such_process(daemon: object, call: str) -> None:
    # cuda-core raises CUDAError (CUDA_ERROR_OPERATING_SYSTEM) for it: the
    # same except clause must catch the drop-in's.
    pid = dead_pid()
    p = Process(pid)
    with pytest.raises(cudackpt.errors.CUDAError) as e:
        value = getattr(p, call)
        if callable(value):
            value()
    assert str(e.value).startswith("CUDA_ERROR_OPERATING_SYSTEM")
    assert isinstance(e.value, ProcessLookupError)
    assert isinstance(e.value, cudackpt.NoSuchProcess) and e.value.pid == pid


# ---- cuda-core's private probes, which cuda-python's own tests use ---------------

def test_private_probes(daemon: object) -> None:
    driver = cudackpt.checkpoint._get_driver()
    assert driver.version == 13000
    cudackpt.checkpoint._require_gpu_mapping_bindings(driver)  # restores onto other GPUs
    with pytest.raises(RuntimeError, match="^CUDA checkpoint GPU remapping requires cuda.bindings with GPU "
                                           "remapping support. Missing: CUcheckpointGpuPair"):
        cudackpt.checkpoint._require_gpu_mapping_bindings(object())


@pytest.mark.parametrize("env,usable", [
    ({"CUDACKPT_SIM_DRIVER_VERSION": "12080"}, True),  # the checkpoint API, no restore onto other GPUs
    ({"CUDACKPT_SIM_INIT_ERROR": "CUDA_ERROR_NO_DEVICE"}, False),
])
def test_private_probes_of_other_drivers(env: Dict[str, str], usable: bool) -> None:
    with serving({}, env):
        if not usable:
            with pytest.raises(RuntimeError, match="^CUDA checkpointing is not supported by the installed NVIDIA "
                                                   "driver."):
                cudackpt.checkpoint._get_driver()
            return
        with pytest.raises(RuntimeError, match="Missing: CUcheckpointGpuPair"):
            cudackpt.checkpoint._require_gpu_mapping_bindings(cudackpt.checkpoint._get_driver())


# ---- in fresh interpreters: cuda-core's import forms, cuda-core's own class ------

def run_python(code: str, env: Optional[Dict[str, str]] = None) -> str:
    full = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(cudackpt.__file__)))
    full.update(env or {})
    out = subprocess.run([sys.executable, "-c", code], env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, timeout=120)
    assert out.returncode == 0, out.stdout
    return out.stdout


@pytest.mark.parametrize("imports", [
    "from cudackpt import checkpoint",
    "import cudackpt.checkpoint\nfrom cudackpt import checkpoint",
    "from cudackpt import checkpoint\nimport cudackpt.checkpoint",
    "import cudackpt\ncheckpoint = cudackpt.checkpoint",
    "import cudackpt.checkpoint as checkpoint",
    "from cudackpt import *",
])
def test_every_import_form_gives_the_module(daemon: object, target: int, imports: str) -> None:
    code = imports + """
import sys, types, cudackpt
assert isinstance(checkpoint, types.ModuleType), checkpoint
assert checkpoint is sys.modules["cudackpt.checkpoint"] is cudackpt.checkpoint
print(checkpoint.Process(%d).state)
""" % target
    assert run_python(code) == "running\n"


FAKE_CUDA_CORE = {
    "cuda/__init__.py": "",
    "cuda/core/__init__.py": "",
    "cuda/core/_utils/__init__.py": "",
    "cuda/core/_utils/cuda_utils.py": "class CUDAError(Exception):\n    pass\n",
}


def test_no_such_process_is_cuda_cores_error_class(daemon: object, tmp_path) -> None:
    # Where cuda-core is importable, code written for it catches its own
    # CUDAError class (a stand-in of cuda-core's module here).
    for name, text in FAKE_CUDA_CORE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    code = """
from cuda.core._utils.cuda_utils import CUDAError
from cudackpt import checkpoint
try:
    checkpoint.Process(%d).lock(timeout_ms=5000)
except CUDAError as e:
    print(type(e).__name__, str(e).split(":")[0])
""" % dead_pid()
    paths = "%s:%s" % (tmp_path, os.path.dirname(os.path.dirname(cudackpt.__file__)))
    assert run_python(code, {"PYTHONPATH": paths}) == "NoSuchProcess CUDA_ERROR_OPERATING_SYSTEM\n"


def test_driver_error(daemon: object, targets) -> None:
    pid = targets.start(CUDACKPT_SIM_FAIL="checkpoint:CUDA_ERROR_UNKNOWN:failed")
    p = Process(pid)
    p.lock()
    with pytest.raises(cudackpt.errors.CUDAError) as e:
        p.checkpoint()
    assert isinstance(e.value, cudackpt.DriverError)
    assert str(e.value) == cudackpt.errors.cuda_error_message("CUDA_ERROR_UNKNOWN", 999)
    assert str(e.value).startswith("CUDA_ERROR_UNKNOWN: ")
    assert e.value.cuda_error == "CUDA_ERROR_UNKNOWN" and e.value.cuda_error_code == 999
    assert e.value.method == "Checkpoint"
    assert p.state == "failed"


def test_not_supported_is_a_runtime_error(daemon: object, targets) -> None:
    pid = targets.start(CUDACKPT_SIM_MANAGED="1")
    p = Process(pid)
    p.lock()
    with pytest.raises(RuntimeError, match="^CUDA checkpointing is not supported") as e:
        p.checkpoint()
    assert isinstance(e.value, cudackpt.NotSupported) and e.value.pid == pid
    assert p.state == "locked"
    p.unlock()


def test_unknown_state(daemon: object, targets) -> None:
    pid = targets.start(CUDACKPT_SIM_STATE_VALUE="7")
    with pytest.raises(RuntimeError, match="^Unknown CUDA checkpoint process state: 7$"):
        Process(pid).state


def test_stopped_process(daemon: object, target: int) -> None:
    os.kill(target, signal.SIGSTOP)
    try:
        await_true("the target to stop", lambda: open("/proc/%d/stat" % target).read().rsplit(")", 1)[1].split()[0]
                   in ("T", "t"))
        with pytest.raises(cudackpt.ProcessStopped) as e:
            Process(target).lock()
        assert e.value.stop == "signal" and e.value.pid == target
    finally:
        os.kill(target, signal.SIGCONT)
    assert Process(target).state == "running"


def test_invalid_gpu_mapping(daemon: object, target: int) -> None:
    p = Process(target)
    p.lock()
    p.checkpoint()
    absent = "12345678-1234-1234-1234-123456789abc"
    with pytest.raises(ValueError) as e:
        p.restore({SIM_DEVICES[0][4:]: absent})
    assert isinstance(e.value, cudackpt.InvalidGpuMapping) and isinstance(e.value, cudackpt.errors.CUDAError)
    assert str(e.value).startswith("CUDA_ERROR_INVALID_VALUE")
    assert e.value.uuid is not None and absent in e.value.uuid.lower()
    assert p.state == "checkpointed"
    p.restore()
    p.unlock()


def test_permission_denied_as_another_user(daemon, target: int, open_dir) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to switch uids")
    # The package copied where another uid can read it (the checkout may
    # live under a 0700 directory).
    lib = open_dir / "lib"
    shutil_copy_package(lib)
    code = ("import sys\nfrom cudackpt.checkpoint import Process\n"
            "try:\n    Process(%d).lock()\nexcept PermissionError as e:\n"
            "    print(type(e).__name__, e.pid, e.caller_uid)\n    sys.exit(0)\nsys.exit(1)\n" % target)
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(lib), "CUDACKPT_SOCKET": daemon.socket,
                                                            "PATH": os.environ.get("PATH", "")},
                         user=65534, group=65534, extra_groups=[], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stdout
    assert out.stdout.split() == ["PermissionDenied", str(target), "65534"]
    assert Process(target).state == "running"


def shutil_copy_package(dest) -> None:
    import shutil
    shutil.copytree(os.path.dirname(cudackpt.__file__), str(dest / "cudackpt"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    for root, dirs, files in os.walk(str(dest)):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)


def test_process_changed(daemon: object, target: int) -> None:
    with pytest.raises(ProcessLookupError) as e:
        cudackpt.lock(target, start_time=start_time_of(target) + 1)
    assert isinstance(e.value, cudackpt.ProcessChanged)
    assert e.value.actual_start_time == start_time_of(target)


def test_daemon_unavailable(daemon, target: int, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CUDACKPT_SOCKET", str(tmp_path / "nothing-here"))
    cudackpt.set_default_client(None)
    try:
        with pytest.raises(ConnectionError) as e:
            Process(target).state
        assert isinstance(e.value, cudackpt.DaemonUnavailable)
    finally:
        monkeypatch.setenv("CUDACKPT_SOCKET", daemon.socket)
        cudackpt.set_default_client(None)
    assert Process(target).state == "running"


def test_call_timeout(daemon, targets) -> None:
    pid = targets.start(CUDACKPT_SIM_BUSY_MS="2000")
    client = cudackpt.Client(daemon.socket, timeout=10)
    with pytest.raises(TimeoutError) as e:
        client.lock(pid, 0, timeout=0.2)  # the call's own timeout is taken as given
    assert isinstance(e.value, cudackpt.CallTimeout)
    # The daemon carried on: the lock completes.
    await_true("the lock to complete", lambda: cudackpt.get_state(pid).state == "locked"
               and cudackpt.get_state(pid).in_flight is None)
    cudackpt.unlock(pid)
    client.close()


def test_no_client_limit_shorter_than_the_driver(daemon, targets) -> None:
    # A client whose default limit (0.2 s) is shorter than what the driver
    # takes: the drop-in never cuts its operations short (cuda-core waits for
    # the driver as long as it takes), and a lock's timeout_ms lengthens the
    # default (timeout_ms=0 lifts it) in the package's own calls too.
    pid = targets.start(CUDACKPT_SIM_BUSY_MS="700", CUDACKPT_SIM_CKPT_MIBPS="12", CUDACKPT_SIM_RESTORE_MIBPS="12")
    client = cudackpt.Client(daemon.socket, timeout=0.2)
    cudackpt.set_default_client(client)
    try:
        p = Process(pid)
        p.lock(timeout_ms=0)   # the kernel in flight: 0.7 s
        p.checkpoint()         # 8 MiB at 12 MiB/s: 0.67 s
        assert p.state == "checkpointed"
        p.restore()
        p.unlock()
        assert p.state == "running"
        assert client.lock(pid, 0).state == "locked"
        client.unlock(pid)
        assert client.lock(pid, 5000).state == "locked"
        client.unlock(pid)
        with client.locked(pid, timeout_ms=0):
            assert p.state == "locked"
        with client.locked(pid, timeout_ms=5000):
            assert p.state == "locked"
        assert p.state == "running"
    finally:
        cudackpt.set_default_client(None)
