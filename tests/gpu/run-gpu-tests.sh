#!/usr/bin/env bash
# run-gpu-tests.sh: cudackptd proven on a real GPU.
#
# Starts its own cudackptd (real libcuda.so.1) on a socket in a fresh
# mktemp -d directory and drives CUDA target processes (cudackpt-gpu-target,
# which keeps verifying a patterned GPU buffer) through cudackptctl.  Every
# scenario asserts states, exit codes and that the data survived.  Prints one
# line per scenario (PASS/FAIL/SKIP, time, step timings) and then
# "N passed, N failed, N skipped".
#
# Scenarios:
#   cycle-small, cycle-large  lock, checkpoint, restore, unlock, twice
#   suspend-resume-multi      several processes suspended and resumed at once
#   identity-mapping          restore/resume onto the GPU's own UUID
#   invalid-mapping           a mapping onto no GPU: InvalidGpuMapping, stays checkpointed
#   migrate-one               one process started on GPU 0, suspended, resumed
#                             with GPU0->GPU1,GPU1->GPU0: data intact and
#                             nvidia-smi lists it on GPU 1 (not GPU 0)
#   migrate-four              two processes on GPU 0 and two on GPU 1, suspended
#                             at once, resumed at once with that swap: each on
#                             the other GPU, data intact
#   migrate-partial           a mapping naming GPU0->GPU1 only (GPU 1 left out):
#                             InvalidGpuMapping, stays checkpointed; a plain
#                             resume brings it back on GPU 0
#   killed-mid-checkpoint     a target killed (SIGKILL) while its checkpoint
#                             runs: ProcessGone, then NoSuchProcess
#   managed-memory, not-cuda, no-such-process, invalid-transitions, other-uid,
#   daemon-shutdown
# The migrate-* scenarios need 2 GPUs (counted by nvidia-smi; GPU N is
# nvidia-smi's index N, and a GPU beyond the first two is mapped onto itself):
# with fewer, each prints "SKIP NAME: needs 2 GPUs, this machine has N" and
# counts as skipped, never as passed.
#
# Exit status: 0 all passed, 1 a scenario failed, 2 usage, 77 skipped (no GPU,
# no driver >= 580, no libcuda.so.1, target not built, or not root; or every
# scenario asked for was skipped), so ctest (SKIP_RETURN_CODE 77) stays green
# on machines without a GPU.
#
# usage: run-gpu-tests.sh [--daemon=PATH] [--ctl=PATH] [--target=PATH] [SCENARIO...]
#   or the environment: CUDACKPTD, CUDACKPTCTL, CUDACKPT_GPU_TARGET.
# Sizes and limits (environment, MiB unless said):
#   CUDACKPT_GPU_SMALL_MIB=1024    cycle-small
#   CUDACKPT_GPU_LARGE_MIB=16384   cycle-large
#   CUDACKPT_GPU_MULTI_MIB=4096    each process of suspend-resume-multi
#   CUDACKPT_GPU_MULTI_PROCS=4     how many processes suspend-resume-multi uses
#                                  (migrate-four also takes MULTI_MIB per process)
#   CUDACKPT_GPU_TEST_MIB=512      the other scenarios' targets
#   CUDACKPT_GPU_MANAGED_MIB=256   the managed-memory target
#   CUDACKPT_GPU_KILL_MIB=8192     the killed-mid-checkpoint target
#   CUDACKPT_GPU_OTHER_UID=4242    the unprivileged caller of other-uid
#   CUDACKPT_GPU_STEP_TIMEOUT=300  seconds allowed to every single step
#   CUDACKPT_GPU_DRIVER=libcuda.so.1  --driver given to the daemon
#   CUDACKPT_GPU_SCENARIOS="..."   scenarios to run (default: all; or args)
#   CUDACKPT_GPU_COUNT=N           act as if the machine had N GPUs (no more than
#                                  nvidia-smi lists): 1 tests the SKIP path
#   CUDACKPT_GPU_KEEP=1            keep the work directory (kept anyway on failure)
# Quick run: CUDACKPT_GPU_SMALL_MIB=64 CUDACKPT_GPU_LARGE_MIB=256 \
#            CUDACKPT_GPU_MULTI_MIB=128 CUDACKPT_GPU_TEST_MIB=64 run-gpu-tests.sh ...
set -euo pipefail

ALL_SCENARIOS="cycle-small cycle-large suspend-resume-multi identity-mapping invalid-mapping"
ALL_SCENARIOS+=" migrate-one migrate-four migrate-partial"
ALL_SCENARIOS+=" killed-mid-checkpoint managed-memory not-cuda no-such-process invalid-transitions other-uid daemon-shutdown"

DAEMON=${CUDACKPTD:-}
CTL=${CUDACKPTCTL:-}
TARGET=${CUDACKPT_GPU_TARGET:-}
SMALL_MIB=${CUDACKPT_GPU_SMALL_MIB:-1024}
LARGE_MIB=${CUDACKPT_GPU_LARGE_MIB:-16384}
MULTI_MIB=${CUDACKPT_GPU_MULTI_MIB:-4096}
MULTI_PROCS=${CUDACKPT_GPU_MULTI_PROCS:-4}
TEST_MIB=${CUDACKPT_GPU_TEST_MIB:-512}
MANAGED_MIB=${CUDACKPT_GPU_MANAGED_MIB:-256}
KILL_MIB=${CUDACKPT_GPU_KILL_MIB:-8192}
OTHER_UID=${CUDACKPT_GPU_OTHER_UID:-4242}
STEP_TIMEOUT=${CUDACKPT_GPU_STEP_TIMEOUT:-300}
DRIVER=${CUDACKPT_GPU_DRIVER:-libcuda.so.1}
KEEP=${CUDACKPT_GPU_KEEP:-0}
SCENARIOS=${CUDACKPT_GPU_SCENARIOS:-}
GPU_COUNT_OVERRIDE=${CUDACKPT_GPU_COUNT:-}
# Scenarios that need two GPUs: skipped, and counted so, on fewer.
TWO_GPU_SCENARIOS="migrate-one migrate-four migrate-partial"
# The target verifies every INTERVAL_MS; the frozen check watches for 3 of them.
INTERVAL_MS=100
# A UUID that names no GPU (not all zeroes: zeroed restore args mean "no remap").
BOGUS_UUID=GPU-deadbeef-dead-beef-dead-beefdeadbeef

. "$(dirname "${BASH_SOURCE[0]}")/suite-lib.sh"

suite_parse_args run-gpu-tests.sh "$@"
suite_check_args run-gpu-tests.sh SMALL_MIB LARGE_MIB MULTI_MIB MULTI_PROCS TEST_MIB MANAGED_MIB OTHER_UID STEP_TIMEOUT
[[ -z $GPU_COUNT_OVERRIDE || $GPU_COUNT_OVERRIDE =~ ^[0-9]+$ ]] ||
        { echo "run-gpu-tests.sh: CUDACKPT_GPU_COUNT must be a number" >&2; exit 2; }

skip() {
        echo "SKIP: GPU tests not run: $*"
        exit 77
}

# --- Is there a GPU to test on?  Each missing piece is one clear line. ---
. "$(dirname "${BASH_SOURCE[0]}")/gpu-preflight.sh"
gpu_preflight
have_libcuda || skip "$DRIVER not found (ldconfig -p, LD_LIBRARY_PATH)"
[[ -n $TARGET && -x $TARGET ]] || skip "GPU target program not built (nvcc not found when configuring?): '${TARGET}'"
[[ $(id -u) -eq 0 ]] || skip "must run as root (it starts cudackptd and tests other uids)"

DAEMON=$(abspath "$DAEMON")
CTL=$(abspath "$CTL")
TARGET=$(abspath "$TARGET")
suite_check_binaries run-gpu-tests.sh
GPU_UUIDS=$(timeout 60 nvidia-smi --query-gpu=uuid --format=csv,noheader | tr 'A-F' 'a-f')
# GPU_LIST[N]: nvidia-smi's GPU N (PCI bus order).
readarray -t GPU_LIST < <(grep . <<<"$GPU_UUIDS" || true)
GPU_COUNT=${#GPU_LIST[@]}
GPU_COUNT_NOTE=
if [[ -n $GPU_COUNT_OVERRIDE ]]; then
        if ((10#$GPU_COUNT_OVERRIDE > GPU_COUNT)); then
                echo "run-gpu-tests.sh: CUDACKPT_GPU_COUNT=$GPU_COUNT_OVERRIDE, but nvidia-smi lists $GPU_COUNT GPU(s)" >&2
                exit 2
        fi
        GPU_COUNT=$((10#$GPU_COUNT_OVERRIDE))
        GPU_COUNT_NOTE=" (CUDACKPT_GPU_COUNT)"
fi

WORK=$(mktemp -d /tmp/cudackpt-gpu-tests.XXXXXX)
# The other-uid scenario's caller must reach the socket (mode 0666) inside.
chmod 0755 "$WORK"
suite_setup

# ---------------------------------------------------------------------------
# Helpers used inside scenarios (each scenario runs in its own subshell, with
# errexit on: an unexpected failure ends that scenario only); die and note
# are in suite-lib.sh.
# ---------------------------------------------------------------------------
CTL_PREFIX=()
# ctl_run ARGS...: cudackptctl with a step timeout; sets CTL_OUT, CTL_ERR, CTL_RC.
ctl_run() {
        CTL_RC=0
        CTL_OUT=$(timeout --kill-after=10 "$STEP_TIMEOUT" ${CTL_PREFIX[@]+"${CTL_PREFIX[@]}"} \
                "$CTL" --socket="$SOCK" "$@" 2>"$SCEN_DIR/ctl.err") || CTL_RC=$?
        CTL_ERR=$(<"$SCEN_DIR/ctl.err")
        ((CTL_RC != 124 && CTL_RC != 137)) || die "cudackptctl $* did not finish within ${STEP_TIMEOUT}s"
}

# expect_state PID STATE: GetState says STATE.
expect_state() {
        ctl_run state "$1"
        ((CTL_RC == 0)) || die "state $1: exit $CTL_RC (want 0): $CTL_ERR"
        [[ $CTL_OUT == "$2" ]] || die "state $1: '$CTL_OUT' (want '$2')"
}

# expect_op STATE COMMAND PID [ARGS...]: the operation succeeds, prints
# "STATE (D.D ms)", and a separate GetState agrees.  Sets OP_MS.
expect_op() {
        local want=$1
        shift
        ctl_run "$@"
        ((CTL_RC == 0)) || die "$*: exit $CTL_RC (want 0): $CTL_ERR"
        [[ ${CTL_OUT%% *} == "$want" ]] || die "$*: printed '$CTL_OUT' (want '$want (D.D ms)')"
        [[ $CTL_OUT =~ \(([0-9]+(\.[0-9]+)?)\ ms\) ]] || die "$*: no duration in '$CTL_OUT'"
        OP_MS=${BASH_REMATCH[1]}
        expect_state "$2" "$want"
}

# expect_err EXIT ERROR COMMAND PID [ARGS...]: fails with that exit status and
# that Varlink error (from --json).  Sets ERR_JSON.
expect_err() {
        local code=$1 name=$2
        shift 2
        ctl_run --json "$@"
        ERR_JSON=$CTL_OUT
        ((CTL_RC == code)) || die "$*: exit $CTL_RC (want $code, $name): out '$CTL_OUT' err '$CTL_ERR'"
        [[ $CTL_OUT =~ \"error\"[[:space:]]*:[[:space:]]*\"io\.cudackpt\.Process\.$name\" ]] ||
                die "$*: --json output does not name $name: '$CTL_OUT'"
}

# json_has KEY VALUE: the last --json output has "KEY": VALUE (VALUE as JSON text).
json_has() {
        [[ $ERR_JSON =~ \"$1\"[[:space:]]*:[[:space:]]*$2([^0-9A-Za-z_]|$) ]] || die "reply lacks \"$1\": $2: '$ERR_JSON'"
}

# start_target NAME MIB [TARGET ARGS...]: sets TPID; status in $SCEN_DIR/NAME.status.
# RUN_AS (a uid) runs it as that user.  ON_GPU=N runs it on nvidia-smi's GPU N
# (--device=N, with the CUDA runtime told to count GPUs in PCI bus order, as
# nvidia-smi does, and to see all of them).
RUN_AS=
ON_GPU=
start_target() {
        local name=$1 mib=$2 dir=$SCEN_DIR
        shift 2
        local -a pre=() dev=()
        if [[ -n $RUN_AS ]]; then
                dir=$SCEN_DIR/uid$RUN_AS
                mkdir -p "$dir"
                chown "$RUN_AS:$RUN_AS" "$dir"
                pre=(setpriv --reuid="$RUN_AS" --regid="$RUN_AS" --clear-groups --)
        fi
        if [[ -n $ON_GPU ]]; then
                pre+=(env -u CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER=PCI_BUS_ID)
                dev=(--device="$ON_GPU")
        fi
        ${pre[@]+"${pre[@]}"} "$TARGET" --mib="$mib" --interval-ms="$INTERVAL_MS" \
                --status="$dir/$name.status" ${dev[@]+"${dev[@]}"} "$@" >"$SCEN_DIR/$name.log" 2>&1 &
        TPID=$!
        echo "$TPID" >>"$PIDS_FILE"
        echo "$TPID" >>"$SCEN_DIR/pids"
        eval "STATUS_$TPID=\$dir/\$name.status"
}

# status_of PID: the target's last status line ("" before the first one).
status_of() {
        local f
        eval "f=\$STATUS_$1"
        if [[ -r $f ]]; then cat "$f"; fi
}
iter_of() {
        local s
        s=$(status_of "$1")
        if [[ -n $s ]]; then field "$s" iter; else echo 0; fi
}

# wait_verified PID MIN_ITER [SECONDS]: the target completed verification
# MIN_ITER (or later), every one with no mismatch and no CUDA error.
wait_verified() {
        local pid=$1 min=$2 limit=${3:-120} s it deadline
        deadline=$((SECONDS + limit))
        while :; do
                s=$(status_of "$pid")
                if [[ -n $s ]]; then
                        [[ $(field "$s" error) == none ]] || die "target $pid: CUDA error: $s"
                        [[ $(field "$s" total_mismatches) == 0 ]] || die "target $pid: data corrupted: $s"
                        it=$(field "$s" iter)
                        ((it >= min)) && return 0
                fi
                kill -0 "$pid" 2>/dev/null || die "target $pid exited (status '$s'); log: $(tail -n 3 "$SCEN_DIR"/*.log | tr '\n' ' ')"
                ((SECONDS < deadline)) || die "target $pid: no verification $min within ${limit}s (status '$s')"
                sleep 0.05
        done
}

# wait_running_again PID: after unlock, two more verifications complete
# (the first may have started before the checkpoint).
wait_running_again() {
        local i0
        i0=$(iter_of "$1")
        wait_verified "$1" $((i0 + 2))
}

# expect_frozen PID: a locked/checkpointed target completes no verification
# (one that had reached its last host step may still land).
expect_frozen() {
        local a b
        a=$(iter_of "$1")
        sleep "$(printf '%d.%03d' $((INTERVAL_MS * 5 / 1000)) $((INTERVAL_MS * 5 % 1000)))"
        b=$(iter_of "$1")
        ((b <= a + 1)) || die "target $1 kept verifying while $(ctl_run state "$1"; echo "$CTL_OUT") (iter $a -> $b)"
        kill -0 "$1" 2>/dev/null || die "target $1 died while suspended"
}

uuid_of() { field "$(status_of "$1")" uuid; }

# gpu_label UUID: "GPU N (UUID)" by nvidia-smi's index, or the UUID alone.
gpu_label() {
        local i
        for i in "${!GPU_LIST[@]}"; do
                if [[ ${GPU_LIST[i]} == "$1" ]]; then
                        echo "GPU $i ($1)"
                        return 0
                fi
        done
        echo "$1"
}

# pid_gpus PID: sets PID_GPUS to the UUIDs of the GPUs on which nvidia-smi
# lists PID as a compute process (sorted, space-separated; "" for none) and
# APPS to the whole list.
pid_gpus() {
        APPS=$(timeout 60 nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv,noheader 2>&1) ||
                die "nvidia-smi --query-compute-apps failed: $APPS"
        APPS=$(tr 'A-F' 'a-f' <<<"$APPS")
        PID_GPUS=$(awk -F', *' -v p="$1" '$1 == p { print $2 }' <<<"$APPS" | sort -u | paste -sd' ')
}

# expect_on_gpu PID UUID: nvidia-smi lists PID on that GPU and on no other
# (waiting up to 30 s for it to say so).  The authority on where a process
# runs: the driver's own view, from outside the process.
expect_on_gpu() {
        local deadline=$((SECONDS + 30))
        while :; do
                pid_gpus "$1"
                [[ $PID_GPUS == "$2" ]] && return 0
                ((SECONDS < deadline)) ||
                        die "nvidia-smi lists pid $1 on '${PID_GPUS:-no GPU}' (want $(gpu_label "$2") alone); compute apps: $(tr '\n' ';' <<<"$APPS")"
                sleep 0.5
        done
}

# expect_self_gpu PID UUID: the target itself (its status line's uuid) says it
# runs on that GPU.  A hard check before a migration only.
expect_self_gpu() {
        local u
        u=$(uuid_of "$1")
        [[ $u == "$2" ]] || die "target $1 reports uuid '$u' (want $(gpu_label "$2")): is CUDA_DEVICE_ORDER or CUDA_VISIBLE_DEVICES overridden?"
}

# note_self_gpu PID UUID: what the target itself says after a migration,
# for the details only.  The target asks the driver anew at every
# verification (cuCtxGetDevice + cuDeviceGetUuid), but whether a process's
# driver reports its new physical GPU after a restore with a GPU mapping is
# not documented (one public report says cuDeviceGetUuid_v2 does, while the
# PCI bus id stays stale), so nvidia-smi (expect_on_gpu) is the assertion and
# this is informational.
note_self_gpu() {
        local u
        u=$(uuid_of "$1")
        if [[ $u == "$2" ]]; then
                note "target $1 itself reports $(gpu_label "$u")"
        else
                note "target $1 itself still reports $(gpu_label "$u") (informational, not asserted)"
        fi
}

# swap_map A B: sets MAP to a --map= option sending GPU A to B and B to A, and
# every other GPU nvidia-smi lists onto itself (for a migration the driver
# wants every GPU it can see named).
swap_map() {
        local u to
        local -a pairs=()
        for u in "${GPU_LIST[@]}"; do
                to=$u
                if [[ $u == "$1" ]]; then
                        to=$2
                elif [[ $u == "$2" ]]; then
                        to=$1
                fi
                pairs+=("$u=$to")
        done
        MAP=--map=$(IFS=,; echo "${pairs[*]}")
}

# parallel_op PHASE WANT PID... [-- CTL ARGS...]: `cudackptctl PHASE PID [CTL
# ARGS]` for every PID at once; each must succeed and print "WANT (D.D ms)",
# and GetState must agree.  Notes the wall time and every operation's time.
parallel_op() {
        local phase=$1 want=$2 p i rc t0
        shift 2
        local -a pids=() jobs=() extra=()
        while (($#)); do
                if [[ $1 == -- ]]; then
                        shift
                        extra=("$@")
                        break
                fi
                pids+=("$1")
                shift
        done
        t0=$(now_us)
        for p in "${pids[@]}"; do
                timeout --kill-after=10 "$STEP_TIMEOUT" "$CTL" --socket="$SOCK" "$phase" "$p" \
                        ${extra[@]+"${extra[@]}"} >"$SCEN_DIR/$phase.$p.out" 2>&1 &
                jobs+=($!)
        done
        for i in "${!pids[@]}"; do
                p=${pids[i]}
                rc=0
                wait "${jobs[i]}" || rc=$?
                ((rc == 0)) || die "$phase $p ${extra[*]}: exit $rc: $(<"$SCEN_DIR/$phase.$p.out")"
                [[ $(<"$SCEN_DIR/$phase.$p.out") == "$want "* ]] ||
                        die "$phase $p: printed '$(<"$SCEN_DIR/$phase.$p.out")' (want $want)"
        done
        note "$phase of ${#pids[@]} at once: $(fmt_s $(($(now_us) - t0))) s" \
                "($(for p in "${pids[@]}"; do sed -n 's/.*(\(.*\) ms).*/\1/p' "$SCEN_DIR/$phase.$p.out"; done | tr '\n' ' ')ms)"
        for p in "${pids[@]}"; do expect_state "$p" "$want"; done
}

# ---------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------

# A full lock -> checkpoint -> restore -> unlock, twice, data intact each time.
cycle() {
        local mib=$1 pid round tid
        start_target cycle "$mib"
        pid=$TPID
        wait_verified "$pid" 1
        expect_state "$pid" running
        ctl_run restore-tid "$pid"
        ((CTL_RC == 0)) || die "restore-tid $pid: exit $CTL_RC: $CTL_ERR"
        tid=$CTL_OUT
        [[ $tid =~ ^[0-9]+$ && -d /proc/$pid/task/$tid ]] || die "restore-tid $pid: '$tid' is no thread of $pid"
        for round in 1 2; do
                local line="round $round:"
                expect_op locked lock "$pid"
                line+=" lock ${OP_MS}"
                expect_op checkpointed checkpoint "$pid"
                line+=" checkpoint ${OP_MS}"
                expect_frozen "$pid"
                expect_op locked restore "$pid"
                line+=" restore ${OP_MS}"
                expect_op running unlock "$pid"
                line+=" unlock ${OP_MS} ms"
                wait_running_again "$pid"
                note "$line"
        done
        note "$mib MiB, $(iter_of "$pid") verifications, 0 mismatches"
}
scenario_cycle_small() { cycle "$SMALL_MIB"; }
scenario_cycle_large() { cycle "$LARGE_MIB"; }

# N processes suspended at once and resumed at once; all data intact.
scenario_suspend_resume_multi() {
        local -a pids=()
        local i p t0 rc
        for ((i = 0; i < MULTI_PROCS; i++)); do
                start_target "multi$i" "$MULTI_MIB"
                pids+=("$TPID")
        done
        for p in "${pids[@]}"; do wait_verified "$p" 1; done
        for phase in suspend resume; do
                local want=checkpointed
                [[ $phase == resume ]] && want=running
                local -a jobs=()
                t0=$(now_us)
                for p in "${pids[@]}"; do
                        timeout --kill-after=10 "$STEP_TIMEOUT" "$CTL" --socket="$SOCK" "$phase" "$p" \
                                >"$SCEN_DIR/$phase.$p.out" 2>&1 &
                        jobs+=($!)
                done
                for ((i = 0; i < MULTI_PROCS; i++)); do
                        p=${pids[i]}
                        rc=0
                        wait "${jobs[i]}" || rc=$?
                        ((rc == 0)) || die "$phase $p: exit $rc: $(<"$SCEN_DIR/$phase.$p.out")"
                        [[ $(<"$SCEN_DIR/$phase.$p.out") == "$want "* ]] ||
                                die "$phase $p: printed '$(<"$SCEN_DIR/$phase.$p.out")' (want $want)"
                done
                note "$phase of $MULTI_PROCS x $MULTI_MIB MiB at once: $(fmt_s $(($(now_us) - t0))) s" \
                        "($(for p in "${pids[@]}"; do sed -n 's/.*(\(.*\) ms).*/\1/p' "$SCEN_DIR/$phase.$p.out"; done | tr '\n' ' ')ms)"
                for p in "${pids[@]}"; do expect_state "$p" "$want"; done
                if [[ $phase == suspend ]]; then
                        for p in "${pids[@]}"; do expect_frozen "$p"; done
                fi
        done
        for p in "${pids[@]}"; do wait_running_again "$p"; done
}

# Restore onto the GPU's own UUID, in both accepted spellings.
scenario_identity_mapping() {
        local pid uuid hex
        start_target ident "$TEST_MIB"
        pid=$TPID
        wait_verified "$pid" 1
        uuid=$(uuid_of "$pid")
        [[ $uuid =~ ^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$ ]] ||
                die "target reports a malformed UUID '$uuid'"
        grep -qxF "$uuid" <<<"$GPU_UUIDS" || die "target UUID $uuid is not one nvidia-smi lists: $GPU_UUIDS"
        hex=${uuid#GPU-}
        hex=${hex//-/}
        # Restore (then Unlock) with GPU-8-4-4-4-12 on both sides.
        expect_op locked lock "$pid"
        expect_op checkpointed checkpoint "$pid"
        expect_op locked restore "$pid" --map="$uuid=$uuid"
        note "restore --map=GPU-form ${OP_MS} ms"
        expect_op running unlock "$pid"
        wait_running_again "$pid"
        # Resume with 32 bare hex digits on both sides.
        expect_op checkpointed suspend "$pid"
        expect_op running resume "$pid" --map="$hex=$hex"
        note "resume --map=32-hex ${OP_MS} ms"
        wait_running_again "$pid"
        # Mixed spellings.
        expect_op checkpointed suspend "$pid"
        expect_op running resume "$pid" --map="$hex=$uuid"
        note "resume --map=hex=GPU-form ${OP_MS} ms"
        wait_running_again "$pid"
}

# A mapping onto a UUID that is no GPU is refused, the process stays
# checkpointed, and a plain resume brings it back.
scenario_invalid_mapping() {
        local pid uuid
        start_target badmap "$TEST_MIB"
        pid=$TPID
        wait_verified "$pid" 1
        uuid=$(uuid_of "$pid")
        expect_op checkpointed suspend "$pid"
        expect_err 15 InvalidGpuMapping restore "$pid" --map="$uuid=$BOGUS_UUID"
        expect_state "$pid" checkpointed
        expect_err 15 InvalidGpuMapping resume "$pid" --map="$uuid=$BOGUS_UUID"
        expect_state "$pid" checkpointed
        expect_frozen "$pid"
        expect_op running resume "$pid"
        note "plain resume after refusal ${OP_MS} ms"
        wait_running_again "$pid"
}

# One process moved from GPU 0 to GPU 1 by Resume with the swap mapping.
scenario_migrate_one() {
        local pid src=${GPU_LIST[0]} dst=${GPU_LIST[1]}
        ON_GPU=0 start_target mig1 "$TEST_MIB"
        pid=$TPID
        wait_verified "$pid" 1
        expect_self_gpu "$pid" "$src"
        expect_on_gpu "$pid" "$src"
        expect_op checkpointed suspend "$pid"
        note "$TEST_MIB MiB: suspend on GPU 0 ${OP_MS} ms"
        expect_frozen "$pid"
        swap_map "$src" "$dst"
        expect_op running resume "$pid" "$MAP"
        note "resume GPU0->GPU1,GPU1->GPU0 ${OP_MS} ms"
        wait_running_again "$pid"
        expect_on_gpu "$pid" "$dst"
        note "nvidia-smi: pid $pid on $(gpu_label "$dst") only"
        note_self_gpu "$pid" "$dst"
        note "$(iter_of "$pid") verifications, 0 mismatches"
}

# Two processes on each of GPU 0 and GPU 1, suspended at once and resumed at
# once with the swap mapping: each ends on the other GPU, data intact.
scenario_migrate_four() {
        local i dev p
        local -a pids=() from=() to=()
        for i in 0 1 2 3; do
                dev=$((i % 2))
                ON_GPU=$dev start_target "mig4-$i" "$MULTI_MIB"
                pids+=("$TPID")
                from+=("${GPU_LIST[dev]}")
                to+=("${GPU_LIST[1 - dev]}")
        done
        for i in "${!pids[@]}"; do
                wait_verified "${pids[i]}" 1
                expect_self_gpu "${pids[i]}" "${from[i]}"
                expect_on_gpu "${pids[i]}" "${from[i]}"
        done
        note "4 x $MULTI_MIB MiB, two on GPU 0, two on GPU 1"
        parallel_op suspend checkpointed "${pids[@]}"
        for p in "${pids[@]}"; do expect_frozen "$p"; done
        swap_map "${GPU_LIST[0]}" "${GPU_LIST[1]}"
        parallel_op resume running "${pids[@]}" -- "$MAP"
        for i in "${!pids[@]}"; do
                wait_running_again "${pids[i]}"
                expect_on_gpu "${pids[i]}" "${to[i]}"
        done
        note "nvidia-smi: each on the other GPU"
        for i in "${!pids[@]}"; do note_self_gpu "${pids[i]}" "${to[i]}"; done
}

# A mapping that names GPU 0 -> GPU 1 but leaves GPU 1 out: the driver wants
# every GPU it can see named, so it is refused (InvalidGpuMapping), the
# process stays checkpointed, and a plain resume brings it back on GPU 0.
scenario_migrate_partial() {
        local pid src=${GPU_LIST[0]} dst=${GPU_LIST[1]} cmd
        ON_GPU=0 start_target migpart "$TEST_MIB"
        pid=$TPID
        wait_verified "$pid" 1
        expect_self_gpu "$pid" "$src"
        expect_on_gpu "$pid" "$src"
        expect_op checkpointed suspend "$pid"
        for cmd in restore resume; do
                expect_err 15 InvalidGpuMapping "$cmd" "$pid" --map="$src=$dst"
                if [[ $ERR_JSON =~ \"state\"[[:space:]]*:[[:space:]]*\"([a-z0-9-]*)\" ]]; then
                        [[ ${BASH_REMATCH[1]} == checkpointed ]] ||
                                die "$cmd refused, but the error says state '${BASH_REMATCH[1]}': $ERR_JSON"
                fi
                expect_state "$pid" checkpointed
        done
        note "refused: $ERR_JSON"
        expect_frozen "$pid"
        expect_op running resume "$pid"
        note "plain resume after refusal ${OP_MS} ms"
        wait_running_again "$pid"
        expect_on_gpu "$pid" "$src"
        note "nvidia-smi: back on $(gpu_label "$src")"
}

# A target killed while its checkpoint runs: the Checkpoint answers
# ProcessGone (the driver fails while the process's exit is still under
# way; the daemon waits for its end), the pid is then NoSuchProcess, and the
# daemon serves on.
scenario_killed_mid_checkpoint() {
        local pid job rc=0 t0 deadline
        start_target killed "$KILL_MIB"
        pid=$TPID
        wait_verified "$pid" 1
        expect_op locked lock "$pid"
        timeout --kill-after=10 "$STEP_TIMEOUT" "$CTL" --socket="$SOCK" --json checkpoint "$pid" \
                >"$SCEN_DIR/checkpoint.out" 2>&1 &
        job=$!
        deadline=$((SECONDS + 30))
        while :; do
                ctl_run --json state "$pid"
                [[ $CTL_OUT == *'"in_flight"'* ]] && break
                kill -0 "$job" 2>/dev/null || die "the checkpoint ended before the kill: $(<"$SCEN_DIR/checkpoint.out")"
                ((SECONDS < deadline)) || die "no checkpoint in flight within 30 s: $CTL_OUT"
                sleep 0.01
        done
        t0=$(now_us)
        kill -KILL "$pid"
        wait "$job" || rc=$?
        note "$KILL_MIB MiB: reply $(fmt_s $(($(now_us) - t0))) s after SIGKILL"
        ((rc == 17)) || die "checkpoint: exit $rc (want 17, ProcessGone): $(<"$SCEN_DIR/checkpoint.out")"
        grep -q 'io\.cudackpt\.Process\.ProcessGone' "$SCEN_DIR/checkpoint.out" ||
                die "checkpoint: no ProcessGone in '$(<"$SCEN_DIR/checkpoint.out")'"
        expect_err 10 NoSuchProcess state "$pid"
}

# Managed memory: Suspend fails NotSupported, is rolled back, the process runs on.
scenario_managed_memory() {
        local pid t0
        start_target managed "$MANAGED_MIB" --managed
        pid=$TPID
        wait_verified "$pid" 1
        [[ $(field "$(status_of "$pid")" managed) == 1 ]] || die "target does not report managed=1"
        t0=$(now_us)
        expect_err 16 NotSupported suspend "$pid"
        note "suspend refused after $(fmt_s $(($(now_us) - t0))) s: $ERR_JSON"
        json_has rolled_back true
        expect_state "$pid" running
        wait_running_again "$pid"
}

# A process that never used CUDA.
scenario_not_cuda() {
        local pid cmd
        sleep 100000 &
        pid=$!
        echo "$pid" >>"$PIDS_FILE"
        echo "$pid" >>"$SCEN_DIR/pids"
        for cmd in state restore-tid lock suspend; do
                expect_err 11 NotCudaProcess "$cmd" "$pid"
        done
        kill -0 "$pid" || die "sleep $pid died"
}

# A pid that does not exist.
scenario_no_such_process() {
        local pid cmd
        true &
        pid=$!
        wait "$pid"
        ! kill -0 "$pid" 2>/dev/null || die "pid $pid was reused already"
        for cmd in state lock suspend resume; do
                expect_err 10 NoSuchProcess "$cmd" "$pid"
        done
}

# Every transition the driver's state machine forbids is InvalidState and
# leaves the state as it was.
scenario_invalid_transitions() {
        local pid cmd
        start_target trans "$TEST_MIB"
        pid=$TPID
        wait_verified "$pid" 1
        for cmd in checkpoint restore unlock resume; do
                expect_err 13 InvalidState "$cmd" "$pid"
                expect_state "$pid" running
        done
        expect_op locked lock "$pid"
        for cmd in lock restore suspend resume; do
                expect_err 13 InvalidState "$cmd" "$pid"
                expect_state "$pid" locked
        done
        expect_op checkpointed checkpoint "$pid"
        for cmd in lock checkpoint unlock suspend; do
                expect_err 13 InvalidState "$cmd" "$pid"
                expect_state "$pid" checkpointed
        done
        expect_op locked restore "$pid"
        expect_op running unlock "$pid"
        wait_running_again "$pid"
        note "12 illegal transitions refused"
}

# Another uid is refused on root's process and served on its own.
scenario_other_uid() {
        local root_pid user_pid cmd i0
        command -v setpriv >/dev/null || die "setpriv (util-linux) not found"
        local -a as_user=(setpriv --reuid="$OTHER_UID" --regid="$OTHER_UID" --clear-groups --)
        "${as_user[@]}" test -x "$TARGET" ||
                die "uid $OTHER_UID cannot execute $TARGET (directory permissions?)"
        "${as_user[@]}" timeout 30 "$CTL" --socket="$SOCK" info >"$SCEN_DIR/info-as-user" 2>&1 ||
                die "uid $OTHER_UID cannot run $CTL info (directory permissions, LD_LIBRARY_PATH?): $(<"$SCEN_DIR/info-as-user")"
        start_target rootowned "$TEST_MIB"
        root_pid=$TPID
        RUN_AS=$OTHER_UID start_target userowned "$TEST_MIB"
        user_pid=$TPID
        wait_verified "$root_pid" 1
        wait_verified "$user_pid" 1
        [[ $(stat -c %u "/proc/$user_pid") == "$OTHER_UID" ]] || die "target $user_pid does not run as uid $OTHER_UID"

        CTL_PREFIX=("${as_user[@]}")
        for cmd in state lock suspend; do
                expect_err 12 PermissionDenied "$cmd" "$root_pid"
                json_has caller_uid "$OTHER_UID"
        done
        CTL_PREFIX=()
        expect_state "$root_pid" running
        i0=$(iter_of "$root_pid")
        wait_verified "$root_pid" $((i0 + 2))

        CTL_PREFIX=("${as_user[@]}")
        expect_state "$user_pid" running
        expect_op checkpointed suspend "$user_pid"
        note "uid $OTHER_UID: suspend own process ${OP_MS} ms"
        expect_op running resume "$user_pid"
        note "resume ${OP_MS} ms"
        CTL_PREFIX=()
        wait_running_again "$user_pid"
}

# SIGTERM: the daemon exits 0 within 30 s.  The daemon is the main
# shell's child, so this one runs in the main shell: no die, no exit.
scenario_daemon_shutdown() {
        local rc=0
        if [[ -z $DAEMON_PID ]]; then
                echo "ASSERTION FAILED: cudackptd is not running"
                return 1
        fi
        stop_daemon 30 || rc=$?
        if ((rc != 0)); then
                echo "ASSERTION FAILED: cudackptd exited $rc after SIGTERM (want 0; 137: still running after 30 s)"
                return 1
        fi
}

# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------
run_scenario() {
        local name=$1 fn=scenario_${1//-/_} t0 rc=0 dir=$WORK/$1 details=""
        if [[ " $TWO_GPU_SCENARIOS " == *" $name "* ]] && ((GPU_COUNT < 2)); then
                SKIPPED=$((SKIPPED + 1))
                echo "SKIP $name: needs 2 GPUs, this machine has $GPU_COUNT$GPU_COUNT_NOTE"
                return 0
        fi
        mkdir -p "$dir"
        if [[ $name != daemon-shutdown ]] && { [[ -z $DAEMON_PID ]] || ! kill -0 "$DAEMON_PID" 2>/dev/null; }; then
                start_daemon || true
        fi
        t0=$(now_us)
        if [[ $name == daemon-shutdown ]]; then
                "$fn" >"$dir/output" 2>&1 || rc=$?
        else
                (
                        SCEN_DIR=$dir
                        : >"$SCEN_DIR/pids"
                        set -E
                        trap 'echo "unexpected failure (exit $?) at line $LINENO: $BASH_COMMAND"' ERR
                        trap 'while read -r p; do kill -KILL "$p" 2>/dev/null || true; done <"$SCEN_DIR/pids"' EXIT
                        "$fn"
                ) >"$dir/output" 2>&1 &
                wait $! || rc=$?
        fi
        if [[ $name != daemon-shutdown ]] && ! kill -0 "$DAEMON_PID" 2>/dev/null; then
                echo "ASSERTION FAILED: cudackptd died during the scenario" >>"$dir/output"
                rc=1
        fi
        if [[ -s $dir/details ]]; then
                details=" [$(paste -sd';' "$dir/details" | sed 's/;/; /g')]"
        fi
        if ((rc == 0)); then
                PASSED=$((PASSED + 1))
                printf 'PASS %-22s %8s s%s\n' "$name" "$(fmt_s $(($(now_us) - t0)))" "$details"
        else
                FAILED=$((FAILED + 1))
                printf 'FAIL %-22s %8s s%s\n' "$name" "$(fmt_s $(($(now_us) - t0)))" "$details"
                sed 's/^/    /' "$dir/output"
                echo "    --- daemon log (last 15 lines) ---"
                tail -n 15 "$WORK/daemon.log" | sed 's/^/    /'
        fi
}

echo "GPU tests: $(nvidia-smi --query-gpu=name --format=csv,noheader | sed -n 1p), driver $DRIVER_VERSION"
echo "  daemon $DAEMON, ctl $CTL, target $TARGET, work $WORK"
echo "  sizes: small ${SMALL_MIB} MiB, large ${LARGE_MIB} MiB, multi ${MULTI_PROCS}x${MULTI_MIB} MiB," \
        "others ${TEST_MIB} MiB, managed ${MANAGED_MIB} MiB; step timeout ${STEP_TIMEOUT}s"
echo "  GPUs: $GPU_COUNT$GPU_COUNT_NOTE${CUDA_VISIBLE_DEVICES+ (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES is set: cudackptd inherits it)}"
suite_start_daemon

for s in $SCENARIOS; do
        run_scenario "$s"
done
echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
suite_status
