# shellcheck shell=bash
# job-lib.sh: what the GPU scripts of jobs started with `cudackptctl run`
# share (run-job-run-gpu.sh, run-move-gpu.sh); sourced by them.  The
# caller sets WORK (status files: WORK/st, WORK/st.childK), NAME (the job's
# name), JOB_PROCS, STEP_TIMEOUT, CUDACKPT_RUN_DIR, and gives fail; here:
# field, now_ms, init_pid, job_pids, verified, await_verified (ITERS) and
# hold (HELD).
HELD=()
field() { [[ " $1 " =~ \ $2=([^ ]*)\  ]] && echo "${BASH_REMATCH[1]}"; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
# init_pid: the job's init as its name's record says.
init_pid() { sed -n 's/.*"init_pid":\([0-9]*\).*/\1/p' "$CUDACKPT_RUN_DIR/$NAME" 2>/dev/null; }
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
