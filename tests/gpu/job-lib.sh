# shellcheck shell=bash
# job-lib.sh: what the GPU scripts of CRIU jobs share (run-job-run-gpu.sh,
# run-plan-gpu.sh, run-move-gpu.sh, run-archive-gpu.sh); sourced by them.
# Gives pass, fail (FAILS counts) and skip; job_subreaper, job_defaults,
# job_need_root_gpu_criu and job_stop below; for jobs started with
# `cudackptctl run`: field, now_ms, init_pid, job_pids, verified,
# await_verified (ITERS) and hold (HELD).  Their caller sets WORK (status
# files: WORK/st, WORK/st.childK), NAME (the job's name), JOB_PROCS,
# STEP_TIMEOUT and CUDACKPT_RUN_DIR as they need.
FAILS=0
DAEMON_PID=
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
skip() { echo "SKIP: $*"; exit 77; }
# job_subreaper ARGS: this script run again with ARGS as a child subreaper
# (once; CUDACKPT_JOB_REAPER then says "subreaper" or "none"): the
# processes criu restores are this shell's to reap once a dump ends them,
# so that their pids are free for the next restore.
job_subreaper() {
        [[ ${CUDACKPT_JOB_REAPER:-} == "" ]] && command -v python3 >/dev/null 2>&1 || return 0
        export CUDACKPT_JOB_REAPER=trying
        exec python3 -c '
import ctypes, os, sys
ok = ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
os.environ["CUDACKPT_JOB_REAPER"] = "subreaper" if ok else "none"
os.execv(sys.argv[1], sys.argv[1:])' "$BASH" "$0" "$@"
}
# job_defaults MIB: DAEMON, CTL, TARGET and CRIU from $CUDACKPTD,
# $CUDACKPTCTL, $CUDACKPT_GPU_TARGET and $CUDACKPT_CRIU, else .gpu/'s;
# JOB_PROCS [2], JOB_MIB [MIB], STEP_TIMEOUT [120] and KEEP [0] from the
# environment.
# shellcheck disable=SC2034 # the caller's
job_defaults() {
        local gpu
        gpu=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.gpu
        DAEMON=${CUDACKPTD:-$gpu/cudackptd}
        CTL=${CUDACKPTCTL:-$gpu/cudackptctl}
        TARGET=${CUDACKPT_GPU_TARGET:-$gpu/cudackpt-gpu-target}
        CRIU=${CUDACKPT_CRIU:-$gpu/criu/criu}
        JOB_PROCS=${JOB_PROCS:-2}
        JOB_MIB=${JOB_MIB:-$1}
        STEP_TIMEOUT=${STEP_TIMEOUT:-120}
        KEEP=${KEEP:-0}
}
# job_need_root_gpu_criu WHY: skips unless root (WHY: what needs it),
# nvidia-smi and an executable $CRIU.
job_need_root_gpu_criu() {
        [[ $(id -u) -eq 0 ]] || skip "must run as root ($1)"
        command -v nvidia-smi >/dev/null || skip "no nvidia-smi"
        [[ -x $CRIU ]] || skip "no criu at $CRIU (stage-gpu.sh copies it to .gpu/criu)"
}
# job_stop: the job (its init, as its name's record says), every process
# hold started and the daemon (DAEMON_PID) ended; for cleanup traps.
job_stop() {
        local p
        p=$(init_pid 2>/dev/null || true)
        [[ -n $p ]] && kill -KILL "$p" 2>/dev/null || true
        for p in "${HELD[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
        [[ -n $DAEMON_PID ]] && { kill -TERM "$DAEMON_PID" 2>/dev/null; sleep 1; kill -KILL "$DAEMON_PID" 2>/dev/null || true; }
}
HELD=()
field() { [[ " $1 " =~ \ $2=([^ ]*)\  ]] && echo "${BASH_REMATCH[1]}"; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
# init_pid: the job's init as its name's record says.
init_pid() { [[ -n ${NAME:-} ]] && sed -n 's/.*"init_pid":\([0-9]*\).*/\1/p' "${CUDACKPT_RUN_DIR:-}/$NAME" 2>/dev/null; }
# job_pids INIT: INIT and its descendants (host pids).
job_pids() {
        local q=("$1") i=0 c
        while ((i < ${#q[@]})); do
                for c in $(cat "/proc/${q[i]}/task/${q[i]}/children" 2>/dev/null); do q+=("$c"); done
                i=$((i + 1))
        done
        echo "${q[@]}"
}
# verified FILE MIN: the status file says >= MIN verifications, no error, no mismatch.
verified() {
        local s
        s=$(cat "$1" 2>/dev/null || true)
        [[ -n $s && $(field "$s" error) == none && $(field "$s" total_mismatches) == 0 ]] && (($(field "$s" iter) >= $2))
}
await_verified() { # MIN: every status file; sets ITERS
        local k f deadline=$((SECONDS + STEP_TIMEOUT))
        ITERS=()
        for ((k = 0; k < JOB_PROCS; k++)); do
                f=$WORK/st; ((k == 0)) || f=$WORK/st.child$k
                until verified "$f" "$1"; do
                        ((SECONDS < deadline)) || { fail "process $k not verified (>= $1): $(cat "$f" 2>/dev/null)"; return 1; }
                        sleep 0.1
                done
                ITERS+=("$(field "$(cat "$f")" iter)")
        done
}
# hold PID: a process of ours at PID (ns_last_pid, then a fork), or fail.
hold() {
        for _ in $(seq 50); do
                echo $(($1 - 1)) >/proc/sys/kernel/ns_last_pid
                sleep 3600 </dev/null >/dev/null 2>&1 &
                [[ $! == "$1" ]] && { HELD+=($!); return 0; }
                kill -KILL $! 2>/dev/null || true
        done
        return 1
}
