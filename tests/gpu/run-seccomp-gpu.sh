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
#   device tool, kind nvidia-h200, carry [".gpu"], timeout_s 600, command:
#          bash tests/gpu/run-seccomp-gpu.sh
#   then, with the profile fixed, the same with SECCOMP_GPU_MODE=enforce.
#   The suites run one after another within SECCOMP_GPU_BUDGET seconds (560):
#   one that would start with less than 60 s left is not run, and the line
#   "not run (no time left): SUITE..." says which, for a second command with
#   SECCOMP_GPU_SUITES="SUITE...".  Each suite's output is in $OUT/SUITE.txt;
#   stdout has its PASS/FAIL lines and totals, and ends with the report and
#   "run-seccomp-gpu: OK" (every suite run passed) or "run-seccomp-gpu: FAILED".
#
# Environment: SECCOMP_GPU_MODE=report|enforce, SECCOMP_GPU_SUITES (of, in
# this order by default: gpu group criu lease restart index progress ns),
# SECCOMP_GPU_BUDGET=560 (seconds), SECCOMP_GPU_DIR=.gpu (the
# staged binaries), SECCOMP_GPU_PROFILE (default the DaemonSet's).  The
# suites run with small sizes (below) to fit; their own variables override.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
DIR=${SECCOMP_GPU_DIR:-$ROOT/.gpu}
[[ $DIR == /* ]] || DIR=$ROOT/$DIR
MODE=${SECCOMP_GPU_MODE:-report}
SUITES=${SECCOMP_GPU_SUITES:-gpu group criu lease restart index progress ns}
BUDGET=${SECCOMP_GPU_BUDGET:-560}
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
NOT_RUN=

# SUITE SECONDS CMD...: CMD with the daemon under the profile, its output in
# $RESULTS/SUITE.txt, its PASS/FAIL/SKIP lines and last line shown; within
# SECONDS and what is left of the budget, or not run.
suite() {
        local name=$1 limit=$2 rc report=() left=$((BUDGET - SECONDS))
        shift 2
        if ((left < 60)); then
                NOT_RUN="$NOT_RUN $name"
                return
        fi
        ((limit <= left)) || limit=$left
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
if [[ -n $NOT_RUN ]]; then
        echo "not run (no time left):$NOT_RUN"
fi
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
