#!/usr/bin/env bash
# run-python-gpu.sh: issue 23 on the GPU machine.  A real PyTorch training
# process (tests/gpu/python_gpu.py) is suspended and resumed mid-training
# through the daemon with cudackpt.checkpoint.Process, and the same with
# cuda.core.checkpoint.Process directly: GPU memory released while
# suspended, loss trajectory bit-identical to an uninterrupted run, the
# same error message both ways, and the per-call times of each as a table
# (for docs/performance.md).
#
# For the GPU machine (Python with torch, cuda.core 1.2 and nvidia-smi;
# the daemon staged by stage-gpu.sh in .gpu/, carried):
#   bash tests/gpu/run-python-gpu.sh [python_gpu.py options]
#   (--steps 600 --pause-at 100 --paused-s 2 --ballast-mib 1024 --runs 2)
# It needs neither the CUDA target nor nvcc, so it does not source
# gpu-lib.sh but staged-daemon.sh; it follows gpu-lib.sh's conventions
# (.gpu/, LD_LIBRARY_PATH, a work directory, PASS/FAIL lines).
# PYTHON=... picks the interpreter (python3).
# Exits 0 when everything passed.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-python3}
. "$ROOT/tests/gpu/staged-daemon.sh"
staged_daemon_start run-python-gpu
"$PYTHON" -c 'import torch, cuda.core; print("torch", torch.__version__, "cuda.core", cuda.core.__version__)' ||
        echo "FAIL torch or cuda.core missing for $PYTHON"

PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH} CUBLAS_WORKSPACE_CONFIG=:4096:8 \
        timeout 1800 "$PYTHON" "$ROOT/tests/gpu/python_gpu.py" "$@"
rc=$?
((rc == 124)) && echo "FAIL python_gpu.py ran past 30 minutes"
if ((rc != 0)); then
        echo "----- daemon log (last 40 lines) -----"
        tail -n 40 "$WORK/daemon.log"
fi
echo "python_gpu.py exit status $rc"
exit $rc
