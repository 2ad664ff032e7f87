#!/usr/bin/env bash
# run-group-gpu.sh: issue 11's GPU proofs and benchmarks in one go, for one
# device command on the H200 machine: the group tests (run-group-tests.sh:
# SuspendGroup/ResumeGroup on 4 pids, a managed-memory member rolled back, a
# cgroup, a process tree, refusals, ListProcesses), then the benchmarks
# (tests/bench/run-gpu.sh with BENCH_ONLY="group list": 8 x 2 GiB suspended
# and resumed as one group, as 8 single calls at once, and by direct driver
# calls from 8 threads, side by side; ListProcesses with 2,000 processes
# against a /proc scan with GetState per pid from 16 threads), and at the end
# both markdown tables, ready for docs/performance.md.
#
# HOW THE LEAD RUNS IT
#   here:  bash tests/gpu/stage-gpu.sh          (builds, fills .gpu/, <= 60 MiB)
#   device tool, kind nvidia-h200, carry [".gpu"], timeout_s 600, command:
#          bash tests/gpu/run-group-gpu.sh
#   The output ends with the two tables and "run-group-gpu: OK" (or FAILED).
#   Everything printed is also written to $OUT/group-gpu.txt (with the
#   daemon's logs of failed scenarios under $OUT/), which the device tool
#   brings back.
# Expected GPU time: tests ~1 min, group benchmark ~1.5-2.5 min (1 warm-up +
# 5 repeats x 3 methods of 8 x 2 GiB), list ~20 s: about 3-4 min, under 6.
# Each step has its own time limit (tests 150 s, benchmarks 330 s in all), so
# the command ends within about 8 minutes even when something hangs.
#
# Environment: GROUP_GPU_STEPS="tests bench" (which steps), GROUP_GPU_DIR=.gpu
# (the staged binaries), BENCH_GROUP_REPEATS=5, and every CUDACKPT_GROUP_* and
# BENCH_* variable of the two scripts.
# Simulator dry run (no GPU; the cgroup scenario needs root):
#   GROUP_GPU_SIM=B/tests/sim/libcudackpt-sim.so GROUP_GPU_DIR=<dir holding
#   cudackptd, cudackptctl, cudackpt-bench-gpu and cudackpt-gpu-standin>
#   bash tests/gpu/run-group-gpu.sh
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
DIR=${GROUP_GPU_DIR:-$ROOT/.gpu}
[[ $DIR == /* ]] || DIR=$ROOT/$DIR
STEPS=${GROUP_GPU_STEPS:-tests bench}
SIM=${GROUP_GPU_SIM:-}
RESULTS=${OUT:-}
if [[ -z $RESULTS ]]; then
        RESULTS=$(mktemp -d /tmp/cudackpt-group-gpu.XXXXXX)
fi
mkdir -p "$RESULTS"
exec > >(tee "$RESULTS/group-gpu.txt") 2>&1
TEE_PID=$!

export LD_LIBRARY_PATH=$DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
T0=$SECONDS
STATUS=0

echo "run-group-gpu: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs, staged binaries in $DIR"
if [[ -n $SIM ]]; then
        TARGET=$DIR/cudackpt-gpu-standin
        echo "  SIMULATOR dry run: $SIM, stand-in target $TARGET"
        export CUDACKPT_GROUP_SIM=$SIM BENCH_SIM=$SIM
        export CUDACKPT_GROUP_MIB=${CUDACKPT_GROUP_MIB:-64} CUDACKPT_GROUP_TEST_MIB=${CUDACKPT_GROUP_TEST_MIB:-64}
        export BENCH_GROUP_MIB=${BENCH_GROUP_MIB:-256}
else
        TARGET=$DIR/cudackpt-gpu-target
        nvidia-smi --query-gpu=name,memory.total,driver_version,persistence_mode --format=csv,noheader 2>&1 | sed 's/^/  GPU: /'
        if [[ -f $DIR/build-target.sh ]]; then
                bash "$DIR/build-target.sh" || { echo "run-group-gpu: cannot build the target"; STATUS=1; }
        fi
fi
for f in cudackptd cudackptctl cudackpt-bench-gpu; do
        [[ -x $DIR/$f ]] || { echo "run-group-gpu: $DIR/$f missing: run tests/gpu/stage-gpu.sh first"; exit 2; }
done
[[ -x $TARGET ]] || { echo "run-group-gpu: $TARGET missing"; exit 2; }

TESTS_RC=skipped
BENCH_RC=skipped
if [[ " $STEPS " == *" tests "* ]]; then
        echo
        echo "=== 1. group tests (run-group-tests.sh) ==="
        timeout --kill-after=10 150 bash tests/gpu/run-group-tests.sh --daemon="$DIR/cudackptd" --target="$TARGET" \
                >"$RESULTS/tests.txt" 2>&1
        TESTS_RC=$?
        cat "$RESULTS/tests.txt"
        ((TESTS_RC == 124 || TESTS_RC == 137)) && echo "run-group-gpu: the group tests ran past 150 s"
        # A failed scenario keeps its work directory: bring its logs back.
        kept=$(sed -n 's/^work directory kept: //p' "$RESULTS/tests.txt" | tail -n 1)
        if [[ -n $kept && -d $kept ]]; then
                tar -C "$(dirname "$kept")" -czf "$RESULTS/group-tests-work.tar.gz" "$(basename "$kept")" 2>/dev/null || true
        fi
        ((TESTS_RC == 0 || TESTS_RC == 77)) || STATUS=1
fi
if [[ " $STEPS " == *" bench "* ]]; then
        echo
        echo "=== 2. benchmarks: group, list (tests/bench/run-gpu.sh) ==="
        BENCH_ONLY="group list" BENCH_GROUP_REPEATS=${BENCH_GROUP_REPEATS:-5} BENCH_TIMEOUT=${BENCH_TIMEOUT:-210} \
                timeout --kill-after=10 330 bash tests/bench/run-gpu.sh --daemon="$DIR/cudackptd" \
                --ctl="$DIR/cudackptctl" --target="$TARGET" --bench="$DIR/cudackpt-bench-gpu" >"$RESULTS/bench.txt" 2>&1
        BENCH_RC=$?
        cat "$RESULTS/bench.txt"
        ((BENCH_RC == 0)) || STATUS=1
fi

echo
echo "=== summary ($((SECONDS - T0)) s) ==="
echo "group tests: exit $TESTS_RC; benchmarks: exit $BENCH_RC"
if [[ -f $RESULTS/tests.txt ]]; then
        echo
        sed -n '/^| group scenario |/,/^$/p' "$RESULTS/tests.txt"
        grep -E '^[0-9]+ passed, ' "$RESULTS/tests.txt" || true
fi
if [[ -f $RESULTS/bench.txt ]]; then
        echo
        sed -n '/^== summary (markdown/,$p' "$RESULTS/bench.txt" | sed -e '1d' -e '/^bench: /d'
fi
if ((STATUS == 0)); then
        echo "run-group-gpu: OK"
else
        echo "run-group-gpu: FAILED"
fi
exec 1>&- 2>&-
wait "$TEE_PID" 2>/dev/null
exit "$STATUS"
