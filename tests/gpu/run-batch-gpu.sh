#!/usr/bin/env bash
# run-batch-gpu.sh: several GPU suites in one device call, each within a
# time limit of its own and all within BATCH_BUDGET seconds (570), so that
# one that hangs costs its own limit and no more, and the call ends before
# the device tool's 10 minutes.  Each suite's output goes to stdout under a
# "=== NAME (limit Ns)" line, ended by "=== NAME: rc=N in N ms"; a suite
# that would start with less than 20 s left is "SKIPPED (no time)".
#
# usage (from the repository root on the GPU machine, after
# tests/gpu/stage-gpu.sh here; carry [".gpu"]):
#   bash tests/gpu/run-batch-gpu.sh SUITE... 2>&1 | tee $OUT/batch.log
# SUITE is one of the names below, optionally NAME:SECONDS for its limit:
#   moveA movesame moveB jobrun plan archive cudapython fit criujob
#   seccomp seccomp-enforce gpu criu group lease saves slurm slurmset
# moveA writes move.tar.zst, move-a.env and move-target to $OUT (for moveB
# on a second machine: see run-move-gpu.sh's header).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
export LD_LIBRARY_PATH=$ROOT/.gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONUNBUFFERED=1
BUDGET=${BATCH_BUDGET:-570}
T0=$SECONDS
left() { echo $((BUDGET - (SECONDS - T0))); }

suite_cmd() { # NAME: the command line of a suite
        case $1 in
        moveA) echo "env OUT=${OUT:-$ROOT/.gpu/move-out} bash tests/gpu/run-move-gpu.sh A" ;;
        movesame) echo "bash tests/gpu/run-move-gpu.sh same" ;;
        moveB) echo "bash tests/gpu/run-move-gpu.sh B" ;;
        jobrun) echo "bash tests/gpu/run-job-run-gpu.sh" ;;
        plan) echo "bash tests/gpu/run-plan-gpu.sh" ;;
        archive) echo "bash tests/gpu/run-archive-gpu.sh" ;;
        cudapython) echo "bash tests/gpu/run-cuda-python-ckpt.sh" ;;
        fit) echo "bash tests/gpu/run-fit-gpu.sh 8192 1024" ;;
        criujob) echo "env WAYS='job jobnosync' bash tests/gpu/run-criu-job-gpu.sh tree" ;;
        seccomp) echo "env OUT=/tmp/seccomp-report SECCOMP_GPU_BUDGET=SECS bash tests/gpu/run-seccomp-gpu.sh" ;;
        seccomp-enforce) echo "env OUT=/tmp/seccomp-enforce SECCOMP_GPU_MODE=enforce SECCOMP_GPU_BUDGET=SECS bash tests/gpu/run-seccomp-gpu.sh" ;;
        gpu) echo "bash tests/gpu/run-gpu-tests.sh --daemon=.gpu/cudackptd --ctl=.gpu/cudackptctl --target=.gpu/cudackpt-gpu-target" ;;
        criu) echo "bash tests/gpu/run-criu-tests.sh --daemon=.gpu/cudackptd --ctl=.gpu/cudackptctl --target=.gpu/cudackpt-gpu-target --criu=.gpu/criu/criu --nvidia=.gpu/nvidia/cuda-checkpoint" ;;
        group) echo "bash tests/gpu/run-group-gpu.sh" ;;
        lease) echo "bash tests/gpu/run-lease-gpu.sh 512" ;;
        saves) echo "bash tests/gpu/run-saves-gpu.sh" ;;
        slurm) echo "bash tests/gpu/run-slurm-gpu.sh" ;;
        slurmset) echo "bash tests/gpu/run-slurm-gpu.sh jobset" ;;
        *) return 1 ;;
        esac
}

nvidia-smi --query-gpu=uuid,name,driver_version,memory.total,memory.used --format=csv,noheader
bash .gpu/build-target.sh 2>&1 | tail -3
for arg in "$@"; do
        name=${arg%%:*} secs=120
        [[ $arg == *:* ]] && secs=${arg#*:}
        cmd=$(suite_cmd "$name") || { echo "=== $name: unknown suite"; continue; }
        l=$(left)
        ((secs > l - 5)) && secs=$((l - 5))
        if ((secs < 20)); then echo "=== $name: SKIPPED (no time)"; continue; fi
        cmd=${cmd//SECS/$((secs - 15))}
        echo "=== $name (limit ${secs}s) at +$((SECONDS - T0))s: $cmd"
        start=$(date +%s%N)
        timeout -k 5 "$secs" bash -c "$cmd" 2>&1
        echo "=== $name: rc=$? in $((($(date +%s%N) - start) / 1000000)) ms"
done
echo "=== done at +$((SECONDS - T0))s"
