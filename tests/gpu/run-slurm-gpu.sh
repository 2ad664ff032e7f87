#!/usr/bin/env bash
# run-slurm-gpu.sh: issue 33's GPU proof (tests/gpu/slurm_gpu.py): Debian's
# Slurm installed here from .gpu/slurm-debian.tar.gz (install-slurm-gpu.sh),
# then a one-node cluster whose node daemon runs on this machine's GPU.
#
# usage (repository root on the GPU machine, after tests/gpu/stage-gpu.sh
# here; carry [".gpu"]): bash tests/gpu/run-slurm-gpu.sh
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bash "$ROOT/tests/gpu/install-slurm-gpu.sh" || exit $?
CUDACKPT_TEST_SLURM=required exec python3 "$ROOT/tests/gpu/slurm_gpu.py"
