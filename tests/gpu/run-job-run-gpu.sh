#!/usr/bin/env bash
# run-job-run-gpu.sh: issue 32 item 1 on a real GPU: a CUDA job started
# with `cudackptctl run` (its own pid namespace, our cudackpt-init as its
# pid 1), dumped with `dump --run NAME`, and restored on this machine while
# every host pid it had is held by another process (a sleep started at
# that pid through /proc/sys/kernel/ns_last_pid); its GPU data verified
# after the restore (the target keeps checking its buffer), its name taken
# again by the new init.
#
# The job: cudackpt-gpu-target --children=$((JOB_PROCS - 1)) of JOB_MIB MiB
# each (small by default, so that its images can travel: copy
# $WORK/img to another node and `cudackptctl restore --images` it there
# for the cross-node step, with the device-plan of issue 32 item 2).
#
# Prints the dump and restore times, then PASS/FAIL lines; exit 1 on any
# FAIL, 77 when there is no GPU, criu or root.
#
# usage (from the repository root on the GPU machine, after
# tests/gpu/stage-gpu.sh here; carry [".gpu"]):
#   export LD_LIBRARY_PATH=$PWD/.gpu; bash .gpu/build-target.sh; bash tests/gpu/run-job-run-gpu.sh
# environment (defaults in brackets):
#   CUDACKPTD [.gpu/cudackptd]  CUDACKPTCTL [.gpu/cudackptctl] (cudackpt-init beside it)
#   CUDACKPT_GPU_TARGET [.gpu/cudackpt-gpu-target]  CUDACKPT_CRIU [.gpu/criu/criu]
#   JOB_PROCS [2] JOB_MIB [8] STEP_TIMEOUT [120] WORKDIR [/tmp] KEEP [0]
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/job-lib.sh"
job_defaults 8
job_need_root_gpu_criu "criu, run"
[[ -d /proc/driver/nvidia/gpus ]] || skip "no NVIDIA GPU (/proc/driver/nvidia/gpus)"
[[ -x $DAEMON && -x $CTL && -x $(dirname "$CTL")/cudackpt-init ]] ||
        { echo "run-job-run-gpu.sh: cudackptd, cudackptctl or cudackpt-init beside it not found" >&2; exit 2; }
[[ -x $TARGET ]] || { echo "run-job-run-gpu.sh: no GPU target at $TARGET (run .gpu/build-target.sh)" >&2; exit 2; }

WORK=$(mktemp -d "${WORKDIR:-/tmp}/cudackpt-run-gpu.XXXXXX")
SOCK=$WORK/cudackptd.sock
export CUDACKPT_RUN_DIR=$WORK/runs CUDACKPT_SOCKET=$SOCK CUDACKPT_CRIU=$CRIU
NAME=gpu-run

cleanup() {
        job_stop
        if [[ $FAILS -eq 0 && $KEEP != 1 ]]; then rm -rf "$WORK"; else echo "work directory kept: $WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$DAEMON" --socket="$SOCK" --log-level=info </dev/null >>"$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 100); do timeout 5 "$CTL" info >/dev/null 2>&1 && break; sleep 0.1; done
timeout 5 "$CTL" info >/dev/null || { echo "cudackptd did not start:"; tail -20 "$WORK/daemon.log"; exit 1; }
echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); criu $("$CRIU" --version | sed -n 's/^Version: //p')"

setsid "$CTL" run --name="$NAME" --no-cgroup -- "$TARGET" --mib="$JOB_MIB" --interval-ms=200 --quiet \
        --status="$WORK/st" --children=$((JOB_PROCS - 1)) </dev/null >"$WORK/run.out" 2>&1 &
RUN_PID=$!
await_verified 1 || exit 1
read -ra OLD <<<"$(job_pids "$(init_pid)")"
((${#OLD[@]} == JOB_PROCS + 1)) || fail "the job has ${#OLD[@]} processes (${OLD[*]}), not the init and $JOB_PROCS"
echo "job $NAME: host pids ${OLD[*]} (init first)"

t0=$(now_ms)
rc=0
timeout "$STEP_TIMEOUT" "$CTL" dump --run="$NAME" --images="$WORK/img" --no-progress --json >"$WORK/dump.out" 2>&1 || rc=$?
DUMP_MS=$(($(now_ms) - t0))
((rc == 0)) || { fail "dump --run exited $rc: $(tail -5 "$WORK/dump.out")"; exit 1; }
wait "$RUN_PID" || true
for p in "${OLD[@]}"; do
        hold "$p" || fail "could not hold pid $p"
done
((FAILS == 0)) && pass "every old host pid of the job is held by another process (${HELD[*]})"

t0=$(now_ms)
rc=0
timeout "$STEP_TIMEOUT" "$CTL" restore --images="$WORK/img" --no-progress --json >"$WORK/restore.out" 2>&1 || rc=$?
RESTORE_MS=$(($(now_ms) - t0))
((rc == 0)) || { fail "restore --images exited $rc: $(tail -5 "$WORK/restore.out")"; exit 1; }
read -ra NEW <<<"$(job_pids "$(init_pid)")"
echo "restored: host pids ${NEW[*]} (init first)"
before=("${ITERS[@]}")
if await_verified $((before[0] + 2)); then
        pass "restored with its pids taken: $JOB_PROCS x $JOB_MIB MiB verified on the GPU after the restore"
fi
printf 'dump %d ms, restore %d ms (%s x %s MiB)\n' "$DUMP_MS" "$RESTORE_MS" "$JOB_PROCS" "$JOB_MIB"
echo "total $FAILS failure(s)"
((FAILS == 0))
