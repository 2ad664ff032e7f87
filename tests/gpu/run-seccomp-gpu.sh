#!/usr/bin/env bash
# run-seccomp-gpu.sh: the GPU suites with the daemon under the DaemonSet's
# seccomp profile (deploy/kubernetes/seccomp/cudackptd.json), on the real
# driver (issue 29, C10).  Every suite starts its daemon through
# cudackpt-seccomp-exec (tests/deploy/seccomp_exec.c), named in
# CUDACKPT_TEST_DAEMON_WRAPPER (tests/gpu/suite-lib.sh, gpu-lib.sh).
#
#   report (the default): nothing is refused; each system call the profile
#     would refuse is written, once, to $OUT/report-SUITE.txt, and the end
#     says which calls the profile lacks ("seccomp report: ...").  The
#     suites run as they do without the profile.
#   enforce: the profile as a container runtime applies it (refused calls
#     fail with EPERM); the suites must pass as without it.
#
# HOW THE LEAD RUNS IT
#   here:  bash tests/gpu/stage-gpu.sh     (stages .gpu/cudackpt-seccomp-exec
#                                           and libseccomp.so.2 beside the rest)
#   device tool, kind nvidia-h200, carry [".gpu"], timeout_s 600, two commands
#   (each under 10 minutes):
#          SECCOMP_GPU_SUITES="gpu group lease" bash tests/gpu/run-seccomp-gpu.sh
#          SECCOMP_GPU_SUITES="restart index progress ns criu" bash tests/gpu/run-seccomp-gpu.sh
#   then, with the profile fixed, the same two with SECCOMP_GPU_MODE=enforce.
#   Each suite's output is in $OUT/SUITE.txt; stdout has its PASS/FAIL lines
#   and totals, and ends with the report and "run-seccomp-gpu: OK" (every
#   suite passed) or "run-seccomp-gpu: FAILED".
#
# Environment: SECCOMP_GPU_MODE=report|enforce, SECCOMP_GPU_SUITES (of: gpu
# group lease restart index progress ns criu), SECCOMP_GPU_DIR=.gpu (the
# staged binaries), SECCOMP_GPU_PROFILE (default the DaemonSet's).  The
# suites run with small sizes (below) to fit; their own variables override.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
DIR=${SECCOMP_GPU_DIR:-$ROOT/.gpu}
[[ $DIR == /* ]] || DIR=$ROOT/$DIR
MODE=${SECCOMP_GPU_MODE:-report}
SUITES=${SECCOMP_GPU_SUITES:-gpu group lease restart index progress ns criu}
PROFILE=${SECCOMP_GPU_PROFILE:-$ROOT/deploy/kubernetes/seccomp/cudackptd.json}
RESULTS=${OUT:-}
[[ -n $RESULTS ]] || RESULTS=$(mktemp -d /tmp/cudackpt-seccomp-gpu.XXXXXX)
mkdir -p "$RESULTS"
exec > >(tee "$RESULTS/seccomp-gpu.txt") 2>&1

export LD_LIBRARY_PATH=$DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[[ $MODE == report || $MODE == enforce ]] || { echo "run-seccomp-gpu: SECCOMP_GPU_MODE is report or enforce"; exit 2; }
for f in cudackptd cudackptctl cudackpt-seccomp-exec; do
        [[ -x $DIR/$f ]] || { echo "run-seccomp-gpu: $DIR/$f missing: run tests/gpu/stage-gpu.sh first"; exit 2; }
done
[[ -x $DIR/cudackpt-gpu-target ]] || bash "$DIR/build-target.sh" || exit 2
TARGET=$DIR/cudackpt-gpu-target

# Small sizes, unless given.
export CUDACKPT_GPU_SMALL_MIB=${CUDACKPT_GPU_SMALL_MIB:-256} CUDACKPT_GPU_LARGE_MIB=${CUDACKPT_GPU_LARGE_MIB:-2048}
export CUDACKPT_GPU_MULTI_MIB=${CUDACKPT_GPU_MULTI_MIB:-256} CUDACKPT_GPU_TEST_MIB=${CUDACKPT_GPU_TEST_MIB:-128}
export CUDACKPT_CRIU_SMALL_MIB=${CUDACKPT_CRIU_SMALL_MIB:-512} CUDACKPT_CRIU_LARGE_MIB=${CUDACKPT_CRIU_LARGE_MIB:-2048}
export CUDACKPT_CRIU_TREE_MIB=${CUDACKPT_CRIU_TREE_MIB:-256}

echo "run-seccomp-gpu: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), mode $MODE, profile $PROFILE"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | sed 's/^/  GPU: /'
STATUS=0

# SUITE SECONDS CMD...: CMD with the daemon under the profile, its output in
# $RESULTS/SUITE.txt, its PASS/FAIL/SKIP lines and last line shown.
suite() {
        local name=$1 limit=$2 rc report=()
        shift 2
        [[ $MODE == report ]] && report=(--report="$RESULTS/report-$name.txt")
        echo
        echo "=== $name: $* ==="
        CUDACKPT_TEST_DAEMON_WRAPPER="$DIR/cudackpt-seccomp-exec --profile=$PROFILE ${report[*]} --" \
                timeout --kill-after=10 "$limit" "$@" >"$RESULTS/$name.txt" 2>&1
        rc=$?
        grep -E '^(PASS|FAIL|SKIP|ASSERTION)' "$RESULTS/$name.txt" | cut -c1-200
        tail -n 1 "$RESULTS/$name.txt"
        ((rc == 124 || rc == 137)) && echo "run-seccomp-gpu: $name ran past $limit s"
        echo "$name: exit status $rc"
        ((rc == 0 || rc == 77)) || STATUS=1
}

gpu_args=(--daemon="$DIR/cudackptd" --ctl="$DIR/cudackptctl" --target="$TARGET")
for s in $SUITES; do
        case $s in
        gpu) suite gpu 300 bash tests/gpu/run-gpu-tests.sh "${gpu_args[@]}" ;;
        group) suite group 150 bash tests/gpu/run-group-tests.sh --daemon="$DIR/cudackptd" --target="$TARGET" ;;
        lease) suite lease 120 bash tests/gpu/run-lease-gpu.sh 512 ;;
        restart) suite restart 150 bash tests/gpu/run-lease-restart-gpu.sh 512 ;;
        index) suite index 120 bash tests/gpu/run-index-gpu.sh 256 ;;
        progress) suite progress 120 bash tests/gpu/run-progress-gpu.sh 2048 ;;
        ns) suite ns 120 bash tests/gpu/run-ns-gpu.sh 512 ;;
        criu) suite criu 240 bash tests/gpu/run-criu-tests.sh "${gpu_args[@]}" --criu="$DIR/criu/criu" \
                --nvidia="$DIR/nvidia/cuda-checkpoint" ;;
        *) echo "run-seccomp-gpu: unknown suite '$s'"; STATUS=1 ;;
        esac
done

echo
if [[ $MODE == report ]]; then
        for f in "$RESULTS"/report-*.txt; do
                name=${f##*/report-}
                [[ -s $f ]] && echo "  ${name%.txt}: $(sort -u "$f" | tr '\n' ' ')"
        done
        lacks=$(cat "$RESULTS"/report-*.txt 2>/dev/null | sort -u | tr '\n' ' ')
        if [[ -n $lacks ]]; then
                echo "seccomp report: the profile lacks: $lacks"
        else
                echo "seccomp report: the profile refused no call the daemon made"
        fi
fi
if ((STATUS == 0)); then echo "run-seccomp-gpu: OK"; else echo "run-seccomp-gpu: FAILED"; fi
exit "$STATUS"
