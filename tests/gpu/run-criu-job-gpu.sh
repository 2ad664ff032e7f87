#!/usr/bin/env bash
# run-criu-job-gpu.sh: a whole job to disk and back on a real GPU, three
# ways side by side (issue 24):
#   nvidia  plain CRIU, NVIDIA's cuda-checkpoint first on criu's PATH
#   dropin  plain CRIU, cudackptctl's drop-in as cuda-checkpoint (cudackptd)
#   job     cudackptctl dump --tree / restore --images (group suspend first,
#           CRIU's plugin finding every process checkpointed; restore with
#           the plugin aside and one ResumeGroup); the dump syncs the images
#           to disk before it ends the job (issue 29)
#   jobnosync  the same with dump --no-sync (not in WAYS by default): the
#           cost of that sync is job's dump time less this one's
# For each: dump time (wall clock of the command), time until the job's GPU
# memory is free (nvidia-smi --query-compute-apps polled every ~0.1 s from
# the dump's start until none of the job's pids holds memory), restore time
# (until the command returns), then data intact (every process verifies its
# pattern again with no mismatch and no CUDA error) or, for DDP, the loss
# trajectory bit-identical to an uninterrupted run.
#
# Modes (argument; default "tree"):
#   tree  JOB_PROCS (4) cudackpt-gpu-target processes of JOB_MIB (4096) MiB
#         on GPU 0: one parent and 3 children (--children), dumped by the
#         parent's pid
#   ddp   tests/gpu/ddp_job.py: a launcher and 4 DDP ranks (gloo, one GPU,
#         fixed seed), dumped mid-training by the launcher's pid with
#         --tcp-established --network-lock skip; first an uninterrupted
#         reference run
#   all   tree, then ddp (ddp skips when the time budget is spent)
# Every step is bounded (STEP_TIMEOUT); the whole run keeps to BUDGET_S.
# Prints a results table (for job, the sync's own time from dump --json),
# then a SYNC line when job and jobnosync both ran, then PASS/FAIL lines (correctness; exit status 1
# on any FAIL) and GOAL lines (issue 24's goals for the tree: dump >= 1.5x
# faster than dropin, GPU free >= 3x sooner, restore no slower; reported,
# not failing the run).  Exit 77 when there is no GPU, criu or root.
#
# usage (from the repository root on the GPU machine, after
# tests/gpu/stage-gpu.sh here; carry [".gpu"]):
#   LD_LIBRARY_PATH=$PWD/.gpu bash tests/gpu/run-criu-job-gpu.sh [tree|ddp|all]
#   the dump's sync cost, 4 x 4 GiB:
#   WAYS="job jobnosync" LD_LIBRARY_PATH=$PWD/.gpu bash tests/gpu/run-criu-job-gpu.sh tree
# environment (defaults in brackets):
#   CUDACKPTD [.gpu/cudackptd]  CUDACKPTCTL [.gpu/cudackptctl]
#   CUDACKPT_GPU_TARGET [.gpu/cudackpt-gpu-target, built by .gpu/build-target.sh]
#   CUDACKPT_CRIU [.gpu/criu/criu]  CUDACKPT_NVIDIA_CHECKPOINT [.gpu/nvidia/cuda-checkpoint]
#   JOB_PROCS [4] JOB_MIB [4096] STEP_TIMEOUT [150] BUDGET_S [450]
#   DDP_STEPS [60] DDP_STEP_MS [150] DDP_DUMP_AT [20] DDP_BALLAST_MIB [1024]
#   PYTHON [python3]  WORKDIR [/tmp]  KEEP [0]  LOGDIR [] (copy logs there)
#   WAYS ["nvidia dropin job"]
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/job-lib.sh"
job_subreaper "$@"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MODE=${1:-tree}
case $MODE in tree | ddp | all) ;; -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
*) echo "run-criu-job-gpu.sh: unknown mode '$MODE' (tree, ddp, all)" >&2; exit 2 ;; esac
DAEMON=${CUDACKPTD:-$ROOT/.gpu/cudackptd}
CTL=${CUDACKPTCTL:-$ROOT/.gpu/cudackptctl}
TARGET=${CUDACKPT_GPU_TARGET:-$ROOT/.gpu/cudackpt-gpu-target}
CRIU=${CUDACKPT_CRIU:-$ROOT/.gpu/criu/criu}
NVIDIA=${CUDACKPT_NVIDIA_CHECKPOINT:-$ROOT/.gpu/nvidia/cuda-checkpoint}
JOB_PROCS=${JOB_PROCS:-4}
JOB_MIB=${JOB_MIB:-4096}
STEP_TIMEOUT=${STEP_TIMEOUT:-150}
BUDGET_S=${BUDGET_S:-450}
DDP_STEPS=${DDP_STEPS:-60}
DDP_STEP_MS=${DDP_STEP_MS:-150}
DDP_DUMP_AT=${DDP_DUMP_AT:-20}
DDP_BALLAST_MIB=${DDP_BALLAST_MIB:-1024}
PYTHON=${PYTHON:-python3}
WAYS=${WAYS:-nvidia dropin job}
KEEP=${KEEP:-0}
LOGDIR=${LOGDIR:-}

job_need_root_gpu_criu criu
[[ -d /proc/driver/nvidia/gpus ]] || skip "no NVIDIA GPU (/proc/driver/nvidia/gpus)"
[[ -x $DAEMON && -x $CTL ]] || { echo "run-criu-job-gpu.sh: cudackptd/cudackptctl not found ($DAEMON, $CTL)" >&2; exit 2; }
if [[ $MODE != ddp && ! -x $TARGET && -x $ROOT/.gpu/build-target.sh ]]; then bash "$ROOT/.gpu/build-target.sh" || true; fi

WORK=$(mktemp -d "${WORKDIR:-/tmp}/cudackpt-job-gpu.XXXXXX")
SOCK=$WORK/cudackptd.sock
PIDS_FILE=$WORK/pids
: >"$PIDS_FILE"
RESULTS=$WORK/results
: >"$RESULTS"
T_START=$SECONDS
exec > >(tee -a "$WORK/summary.txt") 2>&1

cleanup() {
        local p
        while read -r p; do [[ -n $p ]] && kill -KILL "$p" 2>/dev/null || true; done <"$PIDS_FILE"
        job_stop
        rm -rf "$WORK"/*/img
        if [[ -n $LOGDIR ]]; then
                mkdir -p "$LOGDIR" && tar -C "$WORK" --exclude=img --exclude='*.sock' -czf "$LOGDIR/criu-job-logs.tar.gz" . || true
                cp -f "$WORK/summary.txt" "$LOGDIR/criu-job-summary.txt" || true
        fi
        if [[ $FAILS -eq 0 && $KEEP != 1 ]]; then rm -rf "$WORK"; else echo "work directory kept: $WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fmt() { printf '%d.%02d' $(($1 / 1000)) $(($1 % 1000 / 10)); }

# CUDACKPT_TEST_DAEMON_WRAPPER: words put before the daemon's command, as in suite-lib.sh.
read -r -a wrap <<<"${CUDACKPT_TEST_DAEMON_WRAPPER:-}"
"${wrap[@]}" "$DAEMON" --socket="$SOCK" --log-level=info </dev/null >>"$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 100); do timeout 5 "$CTL" --socket="$SOCK" info >/dev/null 2>&1 && break; sleep 0.1; done
timeout 5 "$CTL" --socket="$SOCK" info >/dev/null || { echo "cudackptd did not start:"; tail -20 "$WORK/daemon.log"; exit 1; }
mkdir -p "$WORK/bin-ours" "$WORK/bin-nvidia"
ln -s "$CTL" "$WORK/bin-ours/cuda-checkpoint"
if [[ -x $NVIDIA ]]; then ln -s "$NVIDIA" "$WORK/bin-nvidia/cuda-checkpoint"; else WAYS=${WAYS/nvidia/}; echo "note: no NVIDIA cuda-checkpoint at $NVIDIA: way nvidia left out"; fi
echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); criu $("$CRIU" --version | sed -n 's/^Version: //p'); mode $MODE; ways: $WAYS"

# way_env WAY: the environment criu (and cudackptctl) run with.
way_env() {
        case $1 in
        nvidia) WENV=(-u CUDACKPT_SOCKET PATH="$WORK/bin-nvidia:$PATH") ;;
        *) WENV=(PATH="$WORK/bin-ours:$PATH" CUDACKPT_SOCKET="$SOCK" CUDACKPT_CRIU="$CRIU") ;;
        esac
}

# gpu_pids: the pids holding GPU memory now.
gpu_pids() { timeout 10 nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' ' || true; }

# dump_job WAY DIR ROOT EXTRA_CRIU_OPTS...: runs the dump in the background
# and polls nvidia-smi; sets DUMP_MS, FREE_MS, DUMP_RC.  JOB_PIDS: the pids
# whose GPU memory must go.
dump_job() {
        local way=$1 dir=$2 root=$3 t0 pid free=-1 p held
        shift 3
        way_env "$way"
        mkdir -p "$dir/img"
        t0=$(now_ms)
        if [[ $way == job* ]]; then
                env "${WENV[@]}" timeout "$STEP_TIMEOUT" "$CTL" dump --tree="$root" --images="$dir/img" --no-progress \
                        --json $([[ $way == jobnosync ]] && echo --no-sync) ${1+-- "$@"} >"$dir/dump.out" 2>&1 &
        else
                env "${WENV[@]}" timeout "$STEP_TIMEOUT" "$CRIU" dump -t "$root" -D "$dir/img" -o dump.log -v4 "$@" \
                        >"$dir/dump.out" 2>&1 &
        fi
        pid=$!
        while :; do
                if ((free < 0)); then
                        held=$(gpu_pids)
                        free=$(($(now_ms) - t0))
                        for p in "${JOB_PIDS[@]}"; do grep -qx "$p" <<<"$held" && free=-1; done
                fi
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
        done
        DUMP_RC=0
        wait "$pid" || DUMP_RC=$?
        DUMP_MS=$(($(now_ms) - t0))
        SYNC_MS=$(grep -o '"sync_ms":[0-9]*' "$dir/dump.out" | head -1 | cut -d: -f2 || true)
        SYNC_MS=${SYNC_MS:--}
        FREE_MS=$free
        ((FREE_MS >= 0)) || FREE_MS=$DUMP_MS
}

# restore_job WAY DIR EXTRA...: sets RESTORE_MS, RESTORE_RC.
restore_job() {
        local way=$1 dir=$2 t0
        shift 2
        way_env "$way"
        t0=$(now_ms)
        RESTORE_RC=0
        if [[ $way == job* ]]; then
                env "${WENV[@]}" timeout "$STEP_TIMEOUT" "$CTL" restore --images="$dir/img" --no-progress \
                        ${1+-- "$@"} >"$dir/restore.out" 2>&1 || RESTORE_RC=$?
        else
                env "${WENV[@]}" timeout "$STEP_TIMEOUT" "$CRIU" restore -d -D "$dir/img" -o restore.log -v4 "$@" \
                        >"$dir/restore.out" 2>&1 || RESTORE_RC=$?
                if grep -qi 'RESUME_DEVICES.*fail' "$dir/img/restore.log" 2>/dev/null; then RESTORE_RC=99; fi
        fi
        RESTORE_MS=$(($(now_ms) - t0))
}

wait_gone() {
        local p deadline=$((SECONDS + 60))
        for p in "$@"; do
                while [[ -d /proc/$p ]]; do ((SECONDS < deadline)) || return 1; wait "$p" 2>/dev/null || sleep 0.05; done
        done
}

# ---- tree ------------------------------------------------------------------
tree_status_ok() { # FILE MIN_ITER PID -> 0 when verified >= MIN with no error
        local s
        s=$(cat "$1" 2>/dev/null || true)
        [[ -n $s && $(field "$s" error) == none && $(field "$s" total_mismatches) == 0 && $(field "$s" pid) == "$3" ]] &&
                (($(field "$s" iter) >= $2))
}

tree_way() {
        local way=$1 dir=$WORK/tree-$1 k deadline s ok=1 iters=() detail=""
        mkdir -p "$dir"
        setsid "$TARGET" --mib="$JOB_MIB" --interval-ms=200 --quiet --status="$dir/st" --children=$((JOB_PROCS - 1)) \
                </dev/null >/dev/null 2>&1 &
        JOB_PIDS=($!)
        echo "$!" >>"$PIDS_FILE"
        deadline=$((SECONDS + STEP_TIMEOUT))
        local files=("$dir/st")
        for ((k = 1; k < JOB_PROCS; k++)); do files+=("$dir/st.child$k"); done
        for ((k = 1; k < JOB_PROCS; k++)); do
                until s=$(cat "${files[k]}" 2>/dev/null) && [[ -n $s ]]; do
                        ((SECONDS < deadline)) || { fail "tree/$way: child $k never started"; return; }
                        sleep 0.1
                done
                JOB_PIDS+=("$(field "$s" pid)")
                echo "${JOB_PIDS[-1]}" >>"$PIDS_FILE"
        done
        for k in "${!JOB_PIDS[@]}"; do
                until tree_status_ok "${files[k]}" 1 "${JOB_PIDS[k]}"; do
                        ((SECONDS < deadline)) || { fail "tree/$way: ${JOB_PIDS[k]} not verified: $(cat "${files[k]}" 2>/dev/null)"; return; }
                        sleep 0.1
                done
                s=$(cat "${files[k]}")
                iters+=("$(field "$s" iter)")
        done
        dump_job "$way" "$dir" "${JOB_PIDS[0]}"
        if ((DUMP_RC != 0)); then
                fail "tree/$way: dump exited $DUMP_RC: $(tail -5 "$dir/dump.out")"
                echo "tree $way FAIL - - -" >>"$RESULTS"
                return
        fi
        wait_gone "${JOB_PIDS[@]}" || { fail "tree/$way: processes still there after the dump"; return; }
        restore_job "$way" "$dir"
        if ((RESTORE_RC != 0)); then
                fail "tree/$way: restore exited $RESTORE_RC: $(tail -5 "$dir/restore.out")"
                ok=0
        fi
        deadline=$((SECONDS + STEP_TIMEOUT))
        for k in "${!JOB_PIDS[@]}"; do
                until tree_status_ok "${files[k]}" $((iters[k] + 2)) "${JOB_PIDS[k]}"; do
                        if ((SECONDS >= deadline)) || [[ ! -d /proc/${JOB_PIDS[k]} ]]; then
                                ok=0
                                detail+=" ${JOB_PIDS[k]}: $(cat "${files[k]}" 2>/dev/null)"
                                break
                        fi
                        sleep 0.1
                done
        done
        if ((ok)); then pass "tree/$way: $JOB_PROCS x $JOB_MIB MiB dumped, restored, data intact"; else fail "tree/$way: data not verified after the restore:$detail"; fi
        echo "tree $way $((ok ? 1 : 0)) $DUMP_MS $FREE_MS $RESTORE_MS $SYNC_MS" >>"$RESULTS"
        for k in "${JOB_PIDS[@]}"; do kill -KILL "$k" 2>/dev/null || true; done
        wait_gone "${JOB_PIDS[@]}" || true
        rm -rf "$dir/img"
}

# ---- ddp -------------------------------------------------------------------
ddp_start() { # DIR: sets JOB_PIDS (launcher, ranks)
        local dir=$1 deadline=$((SECONDS + STEP_TIMEOUT))
        mkdir -p "$dir"
        setsid "$PYTHON" "$ROOT/tests/gpu/ddp_job.py" launch --dir="$dir" --steps="$DDP_STEPS" --step-ms="$DDP_STEP_MS" \
                --ballast-mib="$DDP_BALLAST_MIB" </dev/null >"$dir/launcher.log" 2>&1 &
        JOB_PIDS=($!)
        echo "$!" >>"$PIDS_FILE"
        until [[ -s $dir/ranks ]]; do ((SECONDS < deadline)) || return 1; sleep 0.1; done
        read -ra r <"$dir/ranks"
        JOB_PIDS+=("${r[@]}")
        printf '%s\n' "${r[@]}" >>"$PIDS_FILE"
}
ddp_steps_done() {
        local n
        n=$(grep -c '^step ' "$1/rank-0.log" 2>/dev/null) || true
        echo "${n:-0}"
}
ddp_wait_end() { # DIR
        local deadline=$((SECONDS + STEP_TIMEOUT))
        until [[ -e $1/done || -e $1/failed ]]; do ((SECONDS < deadline)) || return 1; sleep 0.2; done
        [[ -e $1/done ]]
}

ddp_reference() {
        local dir=$WORK/ddp-ref
        ddp_start "$dir" || { fail "ddp/reference: did not start"; return 1; }
        ddp_wait_end "$dir" || { fail "ddp/reference: did not finish: $(tail -5 "$dir"/rank-0.log)"; return 1; }
        grep '^step ' "$dir/rank-0.log" >"$WORK/ddp-ref.loss"
        (($(wc -l <"$WORK/ddp-ref.loss") == DDP_STEPS)) || { fail "ddp/reference: $(wc -l <"$WORK/ddp-ref.loss") steps"; return 1; }
        pass "ddp/reference: $DDP_STEPS steps uninterrupted"
}

ddp_way() {
        local way=$1 dir=$WORK/ddp-$1 deadline ok=1
        ddp_start "$dir" || { fail "ddp/$way: did not start"; return; }
        deadline=$((SECONDS + STEP_TIMEOUT))
        until (($(ddp_steps_done "$dir") >= DDP_DUMP_AT)); do
                ((SECONDS < deadline)) || { fail "ddp/$way: no step $DDP_DUMP_AT: $(tail -3 "$dir/rank-0.log")"; return; }
                sleep 0.1
        done
        dump_job "$way" "$dir" "${JOB_PIDS[0]}" --tcp-established --network-lock skip
        if ((DUMP_RC != 0)); then
                fail "ddp/$way: dump exited $DUMP_RC: $(tail -5 "$dir/dump.out")"
                echo "ddp $way FAIL - - -" >>"$RESULTS"
                return
        fi
        local at
        at=$(ddp_steps_done "$dir")
        wait_gone "${JOB_PIDS[@]}" || { fail "ddp/$way: processes still there after the dump"; return; }
        restore_job "$way" "$dir" --tcp-established --network-lock skip
        ((RESTORE_RC == 0)) || { fail "ddp/$way: restore exited $RESTORE_RC: $(tail -5 "$dir/restore.out")"; ok=0; }
        if ((ok)) && ! ddp_wait_end "$dir"; then fail "ddp/$way: job did not finish after the restore: $(tail -3 "$dir/rank-0.log")"; ok=0; fi
        if ((ok)); then
                if grep '^step ' "$dir/rank-0.log" | cmp -s - "$WORK/ddp-ref.loss" && ! grep -q CORRUPTED "$dir"/rank-*.log; then
                        pass "ddp/$way: dumped at step $at, restored, loss trajectory bit-identical, ballast intact"
                else
                        fail "ddp/$way: loss trajectory differs from the uninterrupted run (or ballast corrupted)"
                        ok=0
                fi
        fi
        echo "ddp $way $((ok ? 1 : 0)) $DUMP_MS $FREE_MS $RESTORE_MS $SYNC_MS" >>"$RESULTS"
        for k in "${JOB_PIDS[@]}"; do kill -KILL "$k" 2>/dev/null || true; done
        wait_gone "${JOB_PIDS[@]}" || true
        rm -rf "$dir/img"
}

if [[ $MODE != ddp ]]; then
        if [[ -x $TARGET ]]; then
                for w in $WAYS; do tree_way "$w"; done
        else
                fail "tree: no GPU target at $TARGET (run .gpu/build-target.sh)"
        fi
fi
if [[ $MODE != tree ]]; then
        if ((SECONDS - T_START > BUDGET_S / 2)) && [[ $MODE == all ]]; then
                echo "SKIP: ddp: $((SECONDS - T_START)) s spent of BUDGET_S=$BUDGET_S"
        elif ! "$PYTHON" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
                echo "SKIP: ddp: no torch with CUDA in $PYTHON"
        elif ddp_reference; then
                for w in $WAYS; do
                        ((SECONDS - T_START < BUDGET_S)) || { echo "SKIP: ddp/$w: budget spent"; continue; }
                        ddp_way "$w"
                done
        fi
fi

echo
printf '%-5s %-9s %-6s %10s %14s %11s %8s\n' job way ok "dump s" "GPU free s" "restore s" "sync s"
while read -r j w ok d f r y; do
        if [[ $ok == FAIL ]]; then printf '%-5s %-9s %-6s %10s %14s %11s %8s\n' "$j" "$w" FAIL - - - -; continue; fi
        [[ ${y:--} == - ]] || y=$(fmt "${y%%.*}")
        printf '%-5s %-9s %-6s %10s %14s %11s %8s\n' "$j" "$w" "$([[ $ok == 1 ]] && echo yes || echo NO)" "$(fmt "$d")" "$(fmt "$f")" "$(fmt "$r")" "${y:--}"
done <"$RESULTS"
echo
# The dump's sync (issue 29): job's dump against jobnosync's, same job.
sync_cost() { # JOB
        local ds dn ys
        # read fails (set -e) where the job did not run: then no line.
        read -r _ _ _ ds _ _ ys < <(grep "^$1 job 1 " "$RESULTS") || true
        read -r _ _ _ dn _ _ _ < <(grep "^$1 jobnosync 1 " "$RESULTS") || true
        [[ -n ${ds:-} && -n ${dn:-} && ${ys:-} =~ ^[0-9]+$ ]] || return 0
        echo "SYNC: $1 $JOB_PROCS x $JOB_MIB MiB: dump $(fmt "$ds") s with the sync (the sync itself $(fmt "${ys%%.*}") s), $(fmt "$dn") s with --no-sync: the sync costs $(fmt $((ds - dn))) s"
}
sync_cost tree
sync_cost ddp

# Goals (tree, job against dropin): reported, not failing the run.
goal() { # JOB
        local dj fj rj dd fd rd
        read -r _ _ _ dd fd rd < <(grep "^$1 dropin 1 " "$RESULTS") || true
        read -r _ _ _ dj fj rj < <(grep "^$1 job 1 " "$RESULTS") || true
        [[ -n ${dd:-} && -n ${dj:-} ]] || return 0
        if ((dd * 10 >= dj * 15)); then echo "GOAL-PASS: $1 dump $(fmt "$dj") s vs $(fmt "$dd") s (>= 1.5x)"; else echo "GOAL-FAIL: $1 dump $(fmt "$dj") s vs $(fmt "$dd") s (< 1.5x)"; fi
        if ((fd >= fj * 3)); then echo "GOAL-PASS: $1 GPU free $(fmt "$fj") s vs $(fmt "$fd") s (>= 3x)"; else echo "GOAL-FAIL: $1 GPU free $(fmt "$fj") s vs $(fmt "$fd") s (< 3x)"; fi
        if ((rj <= rd)); then echo "GOAL-PASS: $1 restore $(fmt "$rj") s vs $(fmt "$rd") s"; else echo "GOAL-FAIL: $1 restore $(fmt "$rj") s vs $(fmt "$rd") s (slower)"; fi
}
goal tree
goal ddp
echo "total $((SECONDS - T_START)) s, $FAILS failure(s)"
((FAILS == 0))
