#!/usr/bin/env bash
# run-saves-gpu.sh: issue 33's checkpoint before preemption on a real GPU,
# without Slurm (the GPU machine has none): a 4-rank PyTorch DDP job
# (tests/gpu/ddp_job.py: gloo, one GPU, a bit-exact loss per step) started
# by a user (nobody: `cudackptctl job start --save=S --save-on=USR1`, the
# command a batch script runs), so that cudackptd starts it as that user's
# job; SIGUSR1 to that command mid-training (what `--signal=B:USR1@T` or a
# preemption's SIGTERM does) saves it: the daemon suspends it, CRIU dumps it
# into the saves directory, the job ends; the same command run again
# restores the save in place of a fresh start, and the job finishes. Its
# loss trajectory must be bit-identical to an uninterrupted run's.
#
# Prints (MEASURED) the time from the signal to the job's GPU memory free
# (nvidia-smi lists none of its processes) and to the save on disk, the
# restore's time to the next step, and the save's size; PASS/FAIL lines;
# exit 1 on any FAIL, 77 without a GPU, criu or root.
#
# usage (repository root on the GPU machine, after tests/gpu/stage-gpu.sh
# here; carry [".gpu"]): bash tests/gpu/run-saves-gpu.sh
# environment: CUDACKPTD CUDACKPTCTL CUDACKPT_CRIU (as job-lib.sh),
#   SAVES_USER [65534 where root has CAP_SYS_RESOURCE, else 0] DDP_STEPS [40] DDP_STEP_MS [150] DDP_MIB [512]
#   SAVE_AT_STEP [15] PYTHON [python3] KEEP [0]
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/job-lib.sh"
job_defaults 8
job_need_root_gpu_criu "the daemon"
[[ -d /proc/driver/nvidia/gpus ]] || skip "no NVIDIA GPU"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=$(command -v "${PYTHON:-python3}")
# CRIU dumps another uid's process only with CAP_SYS_RESOURCE: without it
# (a container's root), the job is root's, as tests/lib/savejobs.py does.
eff=$(awk '/^CapEff/{print $2}' /proc/self/status)
((0x$eff >> 24 & 1)) && DEF_USER=65534 || DEF_USER=0
echo "root: CapEff $eff, $(grep ^Seccomp: /proc/self/status); the job's uid ${SAVES_USER:-$DEF_USER}"
U=${SAVES_USER:-$DEF_USER} STEPS=${DDP_STEPS:-40} STEP_MS=${DDP_STEP_MS:-150} MIB=${DDP_MIB:-512}
AT=${SAVE_AT_STEP:-15}
# shellcheck disable=SC2034 # job-lib.sh's job_stop reads them
FAILS=0 DAEMON_PID="" HELD=()

WORK=$(mktemp -d /tmp/cudackpt-saves-gpu.XXXXXX)
chmod 755 "$WORK"
mkdir -p "$WORK/ref" "$WORK/run" "$WORK/home" && chown "$U:$U" "$WORK/ref" "$WORK/run" "$WORK/home"
cp "$ROOT/tests/gpu/ddp_job.py" "$WORK/" && chmod 644 "$WORK/ddp_job.py"
SOCK=$WORK/cudackptd.sock
cat >"$WORK/config.json" <<JSON
{"saves_dir": "$WORK/saves", "ctl_path": "$CTL"}
JSON
cleanup() {
        pkill -KILL -f "$WORK/ddp_job.py" 2>/dev/null
        job_stop
        if [[ $FAILS -eq 0 && $KEEP != 1 ]]; then rm -rf "$WORK"; else echo "work directory kept: $WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

CUDACKPT_CRIU=$CRIU CUDACKPT_RUN_DIR=$WORK/runs "$DAEMON" --socket="$SOCK" --config="$WORK/config.json" \
        --log-level=info </dev/null >>"$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 100); do [[ -S $SOCK ]] && break; sleep 0.1; done
chmod 666 "$SOCK"

as_user() { setpriv --reuid "$U" --regid "$U" --clear-groups env HOME="$WORK/home" "$@"; }
ddp() { DDP=("$PYTHON" "$WORK/ddp_job.py" launch --dir="$1" --steps="$STEPS" --step-ms="$STEP_MS" --ballast-mib="$MIB"); }
losses() { grep '^step ' "$1/rank-0.log" 2>/dev/null; }
last_step() { losses "$1" | tail -1 | awk '{print $2}'; }
gpu_pids() { nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' '; }

# The reference: the same job, uninterrupted, as the same user.
ddp "$WORK/ref"
(cd "$WORK/ref" && as_user "${DDP[@]}" >/dev/null 2>&1)
[[ -f $WORK/ref/done ]] && pass "the uninterrupted run: $(losses "$WORK/ref" | wc -l) steps" ||
        { fail "the uninterrupted run did not finish: $(tail -3 "$WORK/ref/rank-0.log")"; exit 1; }

start_job() { # the batch script's command, in the background; CLIENT its pid
        ddp "$WORK/run"
        (cd "$WORK/run" && as_user "$CTL" job --socket="$SOCK" start --name=ddp --save=s1 --save-on=USR1 \
                --output="$WORK/run/launcher.log" -- "${DDP[@]}" >>"$WORK/client.log" 2>&1) &
        CLIENT=$!
}
start_job
for _ in $(seq 1200); do s=$(last_step "$WORK/run"); [[ -n $s && $s -ge $AT ]] && break; sleep 0.05; done
[[ -n ${s:-} && $s -ge $AT ]] || { fail "the job did not reach step $AT: $(tail -5 "$WORK/client.log")"; exit 1; }
before=$(gpu_pids | wc -l)
t0=$(now_ms)
pkill -USR1 -u "$U" -f "job --socket=$SOCK start" || kill -USR1 "$CLIENT"
freed=
for _ in $(seq 2400); do
        [[ -z $freed && $(gpu_pids | wc -l) -eq 0 ]] && freed=$(($(now_ms) - t0))
        kill -0 "$CLIENT" 2>/dev/null || break
        sleep 0.02
done
wait "$CLIENT"; rc=$?
saved=$(($(now_ms) - t0))
at=$(last_step "$WORK/run")
[[ $rc -eq 0 ]] && grep -q "saved into s1" "$WORK/client.log" &&
        pass "USR1 at step $at saved the job (exit 0): GPU memory free after ${freed:-?} ms, saved after $saved ms" ||
        { fail "the save: exit $rc, $(tail -3 "$WORK/client.log")"; grep 'of job ddp of uid' "$WORK/daemon.log" | tail -30
          exit 1; }
bytes=$(as_user "$CTL" job --socket="$SOCK" saves --json s1 | sed -n 's/.*"bytes":\([0-9]*\).*/\1/p')
echo "MEASURED: $before GPU processes; signal to GPU memory free ${freed:-?} ms; to the save on disk $saved ms; save $((${bytes:-0} / 1048576)) MiB"

t1=$(now_ms)
start_job
for _ in $(seq 1200); do s=$(last_step "$WORK/run"); [[ -n $s && $s -gt $at ]] && break; sleep 0.05; done
echo "MEASURED: restore to the next step $(($(now_ms) - t1)) ms"
wait "$CLIENT"; rc=$?
[[ $rc -eq 0 && -f $WORK/run/done ]] && grep -q "ballast intact" "$WORK/run/rank-0.log" &&
        grep -q "job ddp started from save s1" "$WORK/client.log" &&
        pass "the same command restored the save (no fresh start) and the job finished: exit 0, its GPU ballast intact" ||
        fail "the restored job: exit $rc, $(tail -3 "$WORK/client.log"), $(tail -2 "$WORK/run/rank-0.log")"
if diff <(losses "$WORK/ref") <(losses "$WORK/run") >/dev/null; then
        pass "the loss trajectory is bit-identical to the uninterrupted run's ($(losses "$WORK/run" | wc -l) steps)"
else
        fail "the losses differ: $(diff <(losses "$WORK/ref") <(losses "$WORK/run") | head -4)"
fi
as_user "$CTL" job --socket="$SOCK" saves s1 >/dev/null 2>&1
[[ $? -eq 30 ]] && pass "the save removed once the job exited 0" || fail "the save is still there"
echo "$FAILS failure(s)"
[[ $FAILS -eq 0 ]]
