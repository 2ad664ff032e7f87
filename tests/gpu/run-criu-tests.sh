#!/usr/bin/env bash
# run-criu-tests.sh: CRIU dump and restore of CUDA processes through cudackptd,
# on a real GPU, measured against NVIDIA's own cuda-checkpoint.
#
# CRIU (>= 4) and its CUDA plugin run a program named cuda-checkpoint from
# PATH for every process they dump or restore.  "ours" puts first on criu's
# PATH a directory whose cuda-checkpoint is a symlink to cudackptctl (its
# drop-in mode, talking to this script's own cudackptd through
# CUDACKPT_SOCKET); "nvidia" puts NVIDIA's cuda-checkpoint there instead.
# Targets (cudackpt-gpu-target, which keeps verifying a patterned GPU buffer)
# start with setsid and /dev/null on fds 0-2, write only their status file,
# and are dumped with `criu dump -t PID -D IMG -o dump.log -v4` (criu kills
# them), then restored with `criu restore -d -D IMG -o restore.log -v4`.
# After a restore every process must have its old pid, read `running`
# (cudackptctl state), go on verifying (the status file's iter grows past
# the value before the dump) with total_mismatches=0 and no CUDA error, and
# restore.log must hold no "RESUME_DEVICES ... failed" (criu restore exits 0
# even when the plugin's restore failed).  Dump and restore are timed
# wall-clock; the plugin's own steps are timed from criu's log.  Image
# directories are deleted after each scenario.
#
# Scenarios (one line each: PASS/FAIL/SKIP, time, details):
#   percall              per-call cost outside CRIU: CUDACKPT_CRIU_CALLS x
#                        `cuda-checkpoint --get-state --pid P` and
#                        `--get-restore-tid --pid P`, and lock+unlock pairs,
#                        with each tool on a running target (median, min, max ms)
#   criu-2g, criu-16g    one target of SMALL_MIB (LARGE_MIB) through cudackptd
#   criu-2g-nvidia, criu-16g-nvidia   the same with NVIDIA's tool
#   criu-tree            a parent with two CUDA children (--children=2),
#                        TREE_MIB each, dumped by the parent's pid, all three
#                        verified after the restore
#   criu-tree-nvidia     the same with NVIDIA's tool
#   criu-device-map      restore with CUDACKPT_DEVICE_MAP=UUID=UUID (the GPU
#                        onto itself) in criu's environment: data intact
#   criu-device-map-bad  the negative control: UUID=<no GPU> must make the
#                        plugin's restore fail (RESUME_DEVICES in
#                        restore.log, process left checkpointed), after
#                        which `cudackptctl resume PID` brings it back intact
# CUDACKPT_CRIU_REPEATS=2 runs criu-2g and criu-2g-nvidia a second time at
# the end, NVIDIA's first (the first round runs ours first).
#
# Exit status: 0 all passed, 1 a scenario failed, 2 usage, 77 skipped (no
# GPU, driver < 580, no libcuda.so.1, target not built, no criu >= 4, or not
# root; or every scenario asked for was skipped).  `criu check` is run and
# reported, not required.
# Scenarios with NVIDIA's tool skip when it is not found.
#
# usage: run-criu-tests.sh [--daemon=PATH] [--ctl=PATH] [--target=PATH]
#                          [--criu=PATH] [--nvidia=PATH] [SCENARIO...]
#   or the environment: CUDACKPTD, CUDACKPTCTL, CUDACKPT_GPU_TARGET,
#   CUDACKPT_CRIU (default: criu on PATH), CUDACKPT_NVIDIA_CHECKPOINT
#   (default: a cuda-checkpoint on PATH that is not cudackptctl).
# Sizes and limits (environment, MiB unless said):
#   CUDACKPT_CRIU_SMALL_MIB=2048   criu-2g, criu-2g-nvidia, criu-device-map*
#   CUDACKPT_CRIU_LARGE_MIB=16384  criu-16g, criu-16g-nvidia
#   CUDACKPT_CRIU_TREE_MIB=1024    each of the three processes of criu-tree*
#   CUDACKPT_CRIU_PERCALL_MIB=256  the target of percall
#   CUDACKPT_CRIU_CALLS=20         calls of each kind in percall
#   CUDACKPT_CRIU_REPEATS=1        rounds of the 2 GiB pair (1 or 2)
#   CUDACKPT_CRIU_STEP_TIMEOUT=300 seconds allowed to one criu run
#   CUDACKPT_CRIU_BUDGET_S=0       once this many seconds have passed, the
#                                  scenarios not yet begun SKIP (0: no limit)
#   CUDACKPT_CRIU_WORKDIR=/tmp     where the work directory (and images) go
#   CUDACKPT_CRIU_LOGDIR=DIR       also copy the summary, the daemon's log and
#                                  a tarball of every scenario's logs there
#   CUDACKPT_CRIU_SCENARIOS="..."  scenarios to run (default: all; or args)
#   CUDACKPT_CRIU_KEEP=1           keep the work directory (kept on failure)
#   CUDACKPT_CRIU_DRIVER=libcuda.so.1  --driver given to the daemon
#   CUDACKPT_CRIU_SIM=1            dry run on the simulator: no GPU checks,
#                                  CRIU_FAULT=138 for criu, targets get
#                                  CUDACKPT_SIM=1 and the sim's state slot,
#                                  NVIDIA scenarios skip; CUDACKPT_CRIU_DRIVER
#                                  must name libcudackpt-sim.so and --target
#                                  a stand-in with the same options
# The script re-executes itself under python3 as a child subreaper (if
# python3 exists), so that the processes criu kills and the trees criu
# restore -d leaves behind are its children, reaped, and their pids free.
set -euo pipefail

if [[ ${CUDACKPT_CRIU_REAPER:-} == "" ]] && command -v python3 >/dev/null 2>&1; then
        export CUDACKPT_CRIU_REAPER=trying
        exec python3 -c '
import ctypes, os, sys
try:
    ok = ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
except Exception:
    ok = False
os.environ["CUDACKPT_CRIU_REAPER"] = "subreaper" if ok else "none"
os.execv(sys.argv[1], sys.argv[1:])' "$BASH" "$0" "$@"
fi
REAPER=${CUDACKPT_CRIU_REAPER:-none}
[[ $REAPER == trying ]] && REAPER=none

ALL_SCENARIOS="percall criu-2g criu-2g-nvidia criu-tree criu-tree-nvidia criu-device-map criu-device-map-bad"
ALL_SCENARIOS+=" criu-16g criu-16g-nvidia"

DAEMON=${CUDACKPTD:-}
CTL=${CUDACKPTCTL:-}
TARGET=${CUDACKPT_GPU_TARGET:-}
CRIU=${CUDACKPT_CRIU:-}
NVIDIA=${CUDACKPT_NVIDIA_CHECKPOINT:-}
SMALL_MIB=${CUDACKPT_CRIU_SMALL_MIB:-2048}
LARGE_MIB=${CUDACKPT_CRIU_LARGE_MIB:-16384}
TREE_MIB=${CUDACKPT_CRIU_TREE_MIB:-1024}
PERCALL_MIB=${CUDACKPT_CRIU_PERCALL_MIB:-256}
CALLS=${CUDACKPT_CRIU_CALLS:-20}
REPEATS=${CUDACKPT_CRIU_REPEATS:-1}
STEP_TIMEOUT=${CUDACKPT_CRIU_STEP_TIMEOUT:-300}
BUDGET_S=${CUDACKPT_CRIU_BUDGET_S:-0}
WORKBASE=${CUDACKPT_CRIU_WORKDIR:-/tmp}
LOGDIR=${CUDACKPT_CRIU_LOGDIR:-}
SCENARIOS=${CUDACKPT_CRIU_SCENARIOS:-}
KEEP=${CUDACKPT_CRIU_KEEP:-0}
DRIVER=${CUDACKPT_CRIU_DRIVER:-libcuda.so.1}
SIM=${CUDACKPT_CRIU_SIM:-0}
INTERVAL_MS=100
# A GPU UUID that names no GPU, for the negative control.
BOGUS_UUID=GPU-ffffffff-ffff-ffff-ffff-ffffffffffff

. "$(dirname "${BASH_SOURCE[0]}")/suite-lib.sh"

# The options only this script has.
suite_option() {
        case $1 in
        --criu=*) CRIU=${1#*=} ;;
        --nvidia=*) NVIDIA=${1#*=} ;;
        *) return 1 ;;
        esac
}
suite_parse_args run-criu-tests.sh "$@"
suite_check_args run-criu-tests.sh SMALL_MIB LARGE_MIB TREE_MIB PERCALL_MIB CALLS STEP_TIMEOUT
[[ $REPEATS == 1 || $REPEATS == 2 ]] || { echo "run-criu-tests.sh: CUDACKPT_CRIU_REPEATS must be 1 or 2" >&2; exit 2; }
[[ $BUDGET_S =~ ^[0-9]+$ ]] || { echo "run-criu-tests.sh: CUDACKPT_CRIU_BUDGET_S must be a number" >&2; exit 2; }
if ((REPEATS == 2)); then
        # The second round: NVIDIA's first, so neither tool always goes first.
        for s in criu-2g-nvidia criu-2g; do
                [[ " $SCENARIOS " == *" $s "* ]] && SCENARIOS+=" $s"
        done
fi

skip() {
        echo "SKIP: CRIU tests not run: $*"
        exit 77
}

# --- Is there a GPU, a driver, a criu >= 4, root? ---
[[ $(id -u) -eq 0 ]] || skip "must run as root (criu dump and restore need it)"
if [[ $SIM == 1 ]]; then
        [[ $DRIVER == */* && -r $DRIVER ]] || skip "CUDACKPT_CRIU_SIM=1 needs CUDACKPT_CRIU_DRIVER=path/to/libcudackpt-sim.so"
        DRIVER_VERSION=sim
        export CRIU_FAULT=138
else
        . "$(dirname "${BASH_SOURCE[0]}")/gpu-preflight.sh"
        gpu_preflight
        [[ -d /proc/driver/nvidia/gpus ]] || skip "/proc/driver/nvidia/gpus missing: CRIU's CUDA plugin would disable itself"
        have_libcuda || skip "$DRIVER not found (ldconfig -p, LD_LIBRARY_PATH)"
fi
[[ -n $TARGET && -x $TARGET ]] || skip "GPU target program not built (nvcc not found when configuring?): '${TARGET}'"
if [[ -z $CRIU ]]; then
        CRIU=$(command -v criu 2>/dev/null || true)
fi
[[ -n $CRIU && -x $CRIU ]] || skip "criu not found (--criu=PATH or CUDACKPT_CRIU)"
CRIU_VERSION=$("$CRIU" --version 2>/dev/null | sed -n 's/^Version: *\([0-9][0-9.]*\).*/\1/p' | sed -n 1p)
[[ ${CRIU_VERSION%%.*} =~ ^[0-9]+$ ]] || skip "cannot read the version of $CRIU"
((${CRIU_VERSION%%.*} >= 4)) || skip "criu $CRIU_VERSION is older than 4 (no CUDA plugin)"

DAEMON=$(abspath "$DAEMON")
CTL=$(abspath "$CTL")
TARGET=$(abspath "$TARGET")
CRIU=$(abspath "$CRIU")
suite_check_binaries run-criu-tests.sh
# NVIDIA's tool: given, or a cuda-checkpoint on PATH that is not our drop-in.
if [[ -z $NVIDIA ]]; then
        c=$(command -v cuda-checkpoint 2>/dev/null || true)
        if [[ -n $c && $(readlink -f "$c") != "$(readlink -f "$CTL")" ]]; then NVIDIA=$c; fi
fi
NVIDIA=$(abspath "$NVIDIA")
NVIDIA_NOTE=
if [[ $SIM == 1 ]]; then
        NVIDIA_NOTE="simulator run: NVIDIA's tool needs the real driver"
elif [[ -z $NVIDIA || ! -x $NVIDIA ]]; then
        NVIDIA_NOTE="NVIDIA's cuda-checkpoint not found (--nvidia=PATH or CUDACKPT_NVIDIA_CHECKPOINT)"
fi

if [[ $SIM == 1 ]]; then
        GPU_NAME=simulator
        GPU_UUID=${CUDACKPT_SIM_DEVICES:-GPU-00000000-5157-4000-8000-000000000001}
        GPU_UUID=${GPU_UUID%%,*}
else
        GPU_NAME=$(timeout 60 nvidia-smi --query-gpu=name --format=csv,noheader | sed -n 1p)
        GPU_UUID=$(timeout 60 nvidia-smi --query-gpu=uuid --format=csv,noheader | sed -n 1p | tr 'A-F' 'a-f')
fi

mkdir -p "$WORKBASE"
WORK=$(mktemp -d "$WORKBASE/cudackpt-criu-tests.XXXXXX")
SUMMARY=$WORK/summary.txt
START_SECONDS=$SECONDS

# Everything printed also goes to the summary (and to LOGDIR when asked).
exec > >(tee -a "$SUMMARY") 2>&1

fmt_ms() { printf '%d.%02d' $(($1 / 1000)) $(($1 % 1000 / 10)); }

save_logs() {
        [[ -n $LOGDIR ]] || return 0
        mkdir -p "$LOGDIR" 2>/dev/null || return 0
        cp -f "$SUMMARY" "$LOGDIR/summary.txt" 2>/dev/null || true
        cp -f "$WORK/daemon.log" "$LOGDIR/daemon.log" 2>/dev/null || true
        # Every scenario's logs (criu logs, plugin lines, details), no images.
        tar -C "$WORK" --exclude='img' --exclude='*.sock' -czf "$LOGDIR/criu-logs.tar.gz" . 2>/dev/null || true
}

# On exit (suite_cleanup), before WORK goes: the images, then the logs.
suite_cleanup_more() {
        rm -rf "$WORK"/*/img
        save_logs
}
suite_setup

# The two PATH directories: cuda-checkpoint is our drop-in, or NVIDIA's.
mkdir -p "$WORK/bin-ours" "$WORK/bin-nvidia"
ln -s "$CTL" "$WORK/bin-ours/cuda-checkpoint"
if [[ -z $NVIDIA_NOTE ]]; then ln -s "$NVIDIA" "$WORK/bin-nvidia/cuda-checkpoint"; fi

# ---------------------------------------------------------------------------
# Helpers used inside scenarios (each runs in a subshell with errexit: an
# unexpected failure ends that scenario only); die, note and field are in
# suite-lib.sh.
# ---------------------------------------------------------------------------
# tool_env TOOL [MAP]: sets TOOL_ENV, the environment criu and the tool get.
tool_env() {
        TOOL_ENV=(-u CUDACKPT_DEVICE_MAP)
        case $1 in
        ours) TOOL_ENV+=(PATH="$WORK/bin-ours:$PATH" CUDACKPT_SOCKET="$SOCK") ;;
        nvidia) TOOL_ENV+=(-u CUDACKPT_SOCKET PATH="$WORK/bin-nvidia:$PATH") ;;
        *) die "tool_env: unknown tool $1" ;;
        esac
        if [[ -n ${2:-} ]]; then TOOL_ENV+=(CUDACKPT_DEVICE_MAP="$2"); fi
}

# start_tree NAME MIB CHILDREN: a target (and CHILDREN children) in a session
# of its own, fds 0-2 on /dev/null.  Sets TPIDS (parent first) and STATUS_FILES.
start_tree() {
        local name=$1 mib=$2 kids=$3 k st=$SCEN_DIR/$1.status deadline s
        local -a pre=()
        if [[ $SIM == 1 ]]; then
                pre=(env CUDACKPT_SIM=1 CUDACKPT_SIM_STATE=r CUDACKPT_SIM_MEM_MIB="$mib")
        fi
        local -a kidarg=()
        if ((kids > 0)); then kidarg=(--children="$kids"); fi
        ${pre[@]+"${pre[@]}"} setsid "$TARGET" --mib="$mib" --interval-ms="$INTERVAL_MS" --quiet \
                --status="$st" ${kidarg[@]+"${kidarg[@]}"} </dev/null >/dev/null 2>&1 &
        TPIDS=($!)
        echo "$!" >>"$PIDS_FILE"
        STATUS_FILES=("$st")
        for ((k = 1; k <= kids; k++)); do STATUS_FILES+=("$st.child$k"); done
        # Each process's pid from its own status line (the children's).
        deadline=$((SECONDS + 120))
        for ((k = 1; k <= kids; k++)); do
                while :; do
                        s=$(cat "$st.child$k" 2>/dev/null || true)
                        if [[ -n $s ]]; then break; fi
                        ((SECONDS < deadline)) || die "child $k of ${TPIDS[0]} wrote no status within 120 s"
                        kill -0 "${TPIDS[0]}" 2>/dev/null || die "target ${TPIDS[0]} exited before its children started"
                        sleep 0.05
                done
                TPIDS+=("$(field "$s" pid)")
                echo "${TPIDS[-1]}" >>"$PIDS_FILE"
        done
}

# iter_of FILE: the verification count in a status file (0 before any).
iter_of() {
        local s
        s=$(cat "$1" 2>/dev/null || true)
        if [[ -n $s ]]; then field "$s" iter; else echo 0; fi
}

# wait_verified I MIN_ITER [SECONDS]: process I of TPIDS completed verification
# MIN_ITER or later, every one with no mismatch and no CUDA error, and its
# status line names its pid.
wait_verified() {
        local i=$1 min=$2 limit=${3:-180} s it deadline pid=${TPIDS[$1]} f=${STATUS_FILES[$1]}
        deadline=$((SECONDS + limit))
        while :; do
                s=$(cat "$f" 2>/dev/null || true)
                if [[ -n $s ]]; then
                        [[ $(field "$s" error) == none ]] || die "target $pid: CUDA error: $s"
                        [[ $(field "$s" total_mismatches) == 0 ]] || die "target $pid: data corrupted: $s"
                        [[ $(field "$s" pid) == "$pid" ]] || die "status file $f names pid $(field "$s" pid), not $pid"
                        it=$(field "$s" iter)
                        ((it >= min)) && return 0
                fi
                [[ -d /proc/$pid ]] || die "target $pid exited (status '$s')"
                ((SECONDS < deadline)) || die "target $pid: no verification $min within ${limit}s (status '$s')"
                sleep 0.05
        done
}

# wait_all_verified MIN: every process of the tree.
wait_all_verified() {
        local i
        for i in "${!TPIDS[@]}"; do wait_verified "$i" "$1"; done
}

# proc_state PID: the State letter, "" when there is no such process.
proc_state() {
        local s
        s=$(cat "/proc/$1/stat" 2>/dev/null || true)
        s=${s##*) }
        echo "${s%% *}"
}

# wait_gone: every pid of the tree has gone and been reaped (its pid free
# for the restore).  The parent is our child (reaped by wait); its children
# are reaped by this shell as the subreaper, or by init.
wait_gone() {
        local p deadline=$((SECONDS + ${1:-30}))
        wait "${TPIDS[0]}" 2>/dev/null || true
        for p in "${TPIDS[@]}"; do
                while [[ -d /proc/$p ]]; do
                        if ((SECONDS >= deadline)); then
                                die "pid $p still exists after the dump (state '$(proc_state "$p")'; reaper: $REAPER)"
                        fi
                        sleep 0.05
                done
        done
}

# ctl PID ARGS: cudackptctl against our daemon; sets CTL_OUT, CTL_RC.
ctl() {
        CTL_RC=0
        CTL_OUT=$(timeout --kill-after=10 "$STEP_TIMEOUT" "$CTL" --socket="$SOCK" "$@" 2>&1) || CTL_RC=$?
}

expect_state() {
        ctl state "$1"
        ((CTL_RC == 0)) || die "cudackptctl state $1: exit $CTL_RC: $CTL_OUT"
        [[ $CTL_OUT == "$2" ]] || die "cudackptctl state $1: '$CTL_OUT' (want '$2')"
}

# run_criu WHAT ARGS...: criu with TOOL_ENV, bounded; sets CRIU_RC, CRIU_US.
run_criu() {
        local what=$1 t0
        shift
        CRIU_RC=0
        t0=$(now_us)
        timeout --kill-after=10 "$STEP_TIMEOUT" env "${TOOL_ENV[@]}" "$CRIU" "$@" \
                </dev/null >"$SCEN_DIR/criu-$what.out" 2>&1 || CRIU_RC=$?
        CRIU_US=$(($(now_us) - t0))
        ((CRIU_RC != 124 && CRIU_RC != 137)) || {
                keep_criu_log "$what"
                die "criu $what did not finish within ${STEP_TIMEOUT}s"
        }
}

# keep_criu_log WHAT: WHAT.log out of the image directory, and its plugin
# lines beside it.
keep_criu_log() {
        local f=$SCEN_DIR/img/$1.log
        [[ -f $f ]] || return 0
        mv -f "$f" "$SCEN_DIR/$1.log"
        grep -E 'cuda_plugin|cuda-checkpoint|Error|rror \(' "$SCEN_DIR/$1.log" >"$SCEN_DIR/$1.plugin.txt" || true
}

# log_excerpt WHAT: what to show of a failed criu run.
log_excerpt() {
        echo "--- criu $1 output ---"
        tail -n 20 "$SCEN_DIR/criu-$1.out" 2>/dev/null || true
        echo "--- $1.log: plugin and error lines ---"
        tail -n 60 "$SCEN_DIR/$1.plugin.txt" 2>/dev/null || true
        echo "--- daemon log (last 25 lines) ---"
        tail -n 25 "$WORK/daemon.log" 2>/dev/null || true
}

# plugin_gaps WHAT PATTERN: seconds from each log line matching PATTERN to
# the next timestamped line (criu logs "(SS.UUUUUU) ..." at -v4), i.e. the
# time the plugin's tool call after that line took; printed space-separated.
plugin_gaps() {
        awk -v pat="$2" '
                match($0, /^\(([0-9]+)\.([0-9]+)\)/) {
                        t = substr($0, 2, RLENGTH - 2) + 0
                        if (armed) { printf "%s%.3f", (n++ ? " " : " "), t - t0; armed = 0 }
                        if ($0 ~ pat) { t0 = t; armed = 1 }
                }' "$SCEN_DIR/$1.log" 2>/dev/null || true
}

# daemon_mark: the daemon log's length now, for daemon_calls_since.
daemon_mark() { DAEMON_MARK=$(wc -l <"$WORK/daemon.log"); }
# daemon_since: the daemon's log lines written since daemon_mark.
daemon_since() { tail -n +"$((DAEMON_MARK + 1))" "$WORK/daemon.log"; }

# daemon_note FILE METHOD: ", daemon: N calls, METHOD driver D ms ..." from
# the daemon's log lines of one criu run (nothing when it saw no call).
daemon_note() {
        local n d
        n=$(grep -c -E '^cudackptd: debug: [A-Za-z]+\(' "$1" 2>/dev/null || true)
        ((${n:-0} > 0)) || return 0
        d=$(sed -n "s/.*method=$2 .*duration_ms=\([0-9.]*\).*/\1/p" "$1" | paste -sd' ')
        printf ', daemon: %s calls, %s driver %s ms' "$n" "$2" "${d:-?}"
}

# cycle TOOL MIB CHILDREN [MAP [bad]]: start a tree, dump it, restore it, check.
# Notes the timings; "bad" expects the plugin's restore to fail.
cycle() {
        local tool=$1 mib=$2 kids=$3 map=${4:-} expect=${5:-ok} i p it img_bytes
        local -a pre_iter=()
        IMG=$SCEN_DIR/img
        start_tree t "$mib" "$kids"
        note "pids ${TPIDS[*]} x ${mib} MiB"
        wait_all_verified 2
        for i in "${!TPIDS[@]}"; do
                expect_state "${TPIDS[i]}" running
        done
        for i in "${!TPIDS[@]}"; do
                pre_iter[i]=$(iter_of "${STATUS_FILES[i]}")
        done

        tool_env "$tool" "$map"
        mkdir -p "$IMG"
        daemon_mark
        run_criu dump dump -t "${TPIDS[0]}" -D "$IMG" -o dump.log -v4
        keep_criu_log dump
        daemon_since >"$SCEN_DIR/daemon-dump.log"
        if ((CRIU_RC != 0)); then
                log_excerpt dump
                die "criu dump (cuda-checkpoint: $tool) exited $CRIU_RC after $(fmt_s "$CRIU_US") s"
        fi
        DUMP_US=$CRIU_US
        for p in "${TPIDS[@]}"; do
                grep -q "Checkpointing CUDA devices on pid $p " "$SCEN_DIR/dump.log" ||
                        { log_excerpt dump; die "dump.log: the plugin did not checkpoint pid $p"; }
        done
        if [[ $tool == ours ]]; then
                # The drop-in was used: the daemon saw the plugin's calls.
                grep -q -i checkpoint "$SCEN_DIR/daemon-dump.log" ||
                        { log_excerpt dump; die "the daemon's log shows no Checkpoint during the dump"; }
        fi
        wait_gone 30
        img_bytes=$(du -sb "$IMG" | cut -f1)
        note "dump $(fmt_s "$DUMP_US") s (image $((img_bytes >> 20)) MiB, plugin checkpoint call(s)$(plugin_gaps dump 'Checkpointing CUDA devices') s$(daemon_note "$SCEN_DIR/daemon-dump.log" Checkpoint))"

        daemon_mark
        run_criu restore restore -d -D "$IMG" -o restore.log -v4
        keep_criu_log restore
        daemon_since >"$SCEN_DIR/daemon-restore.log"
        RESTORE_US=$CRIU_US
        if ((CRIU_RC != 0)); then
                log_excerpt restore
                die "criu restore (cuda-checkpoint: $tool) exited $CRIU_RC after $(fmt_s "$CRIU_US") s"
        fi
        note "restore $(fmt_s "$RESTORE_US") s (plugin restore+unlock call(s)$(plugin_gaps restore 'Restore thread pid [0-9]+ found') s$(daemon_note "$SCEN_DIR/daemon-restore.log" Restore))"
        rm -rf "$IMG"
        for p in "${TPIDS[@]}"; do
                [[ -d /proc/$p ]] || die "pid $p does not exist after the restore"
        done

        if [[ $expect == bad ]]; then
                grep -q 'RESUME_DEVICES RESTORE failed' "$SCEN_DIR/restore.log" ||
                        { log_excerpt restore; die "restore.log shows no 'RESUME_DEVICES RESTORE failed' with CUDACKPT_DEVICE_MAP=$map"; }
                note "restore.log: $(grep -m1 -o 'RESUME_DEVICES RESTORE failed.*' "$SCEN_DIR/restore.log")"
                grep -q -i -E 'InvalidGpuMapping|INVALID_VALUE|invalid' "$SCEN_DIR/daemon-restore.log" ||
                        note "(the daemon's log does not name the mapping error)"
                for i in "${!TPIDS[@]}"; do
                        expect_state "${TPIDS[i]}" checkpointed
                        # The simulator moves no memory and stops nothing.
                        if [[ $SIM != 1 ]]; then
                                it=$(iter_of "${STATUS_FILES[i]}")
                                sleep 0.5
                                (($(iter_of "${STATUS_FILES[i]}") <= it + 1)) || die "pid ${TPIDS[i]} verifies while checkpointed"
                        fi
                        ctl resume "${TPIDS[i]}"
                        ((CTL_RC == 0)) || die "cudackptctl resume ${TPIDS[i]}: exit $CTL_RC: $CTL_OUT"
                        note "cudackptctl resume: $CTL_OUT"
                done
        else
                if grep -q -E 'RESUME_DEVICES [A-Z]+ failed' "$SCEN_DIR/restore.log"; then
                        log_excerpt restore
                        die "restore.log: $(grep -m1 -o 'RESUME_DEVICES [A-Z]* failed.*' "$SCEN_DIR/restore.log")"
                fi
                for p in "${TPIDS[@]}"; do
                        grep -q "resuming devices on pid $p\$" "$SCEN_DIR/restore.log" ||
                                { log_excerpt restore; die "restore.log: the plugin did not resume pid $p"; }
                done
        fi
        for i in "${!TPIDS[@]}"; do
                expect_state "${TPIDS[i]}" running
                wait_verified "$i" $((pre_iter[i] + 2))
                [[ $(proc_state "${TPIDS[i]}") != [tTZ] ]] || die "pid ${TPIDS[i]} is stopped after the restore"
        done
        note "verified after restore: iter $(for i in "${!TPIDS[@]}"; do printf '%s->%s ' "${pre_iter[i]}" "$(iter_of "${STATUS_FILES[i]}")"; done| sed 's/ $//'), total_mismatches=0"
        echo "RESULT tool=$tool mib=$mib procs=${#TPIDS[@]} dump_s=$(fmt_s "$DUMP_US") restore_s=$(fmt_s "$RESTORE_US") image_mib=$((img_bytes >> 20))" >>"$SCEN_DIR/details"
        for p in "${TPIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
}

# ---------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------
need_nvidia() { [[ -z $NVIDIA_NOTE ]] || { echo "SKIPPED: $NVIDIA_NOTE"; exit 77; }; }

scenario_criu_2g() { cycle ours "$SMALL_MIB" 0; }
scenario_criu_2g_nvidia() { need_nvidia; cycle nvidia "$SMALL_MIB" 0; }
scenario_criu_16g() { cycle ours "$LARGE_MIB" 0; }
scenario_criu_16g_nvidia() { need_nvidia; cycle nvidia "$LARGE_MIB" 0; }
scenario_criu_tree() { cycle ours "$TREE_MIB" 2; }
scenario_criu_tree_nvidia() { need_nvidia; cycle nvidia "$TREE_MIB" 2; }

have_env_map() {
        # The drop-in documents the variable in its help when it reads it.
        "$WORK/bin-ours/cuda-checkpoint" -h 2>&1 | grep -q CUDACKPT_DEVICE_MAP ||
                { echo "SKIPPED: this cudackptctl's drop-in does not read CUDACKPT_DEVICE_MAP"; exit 77; }
}
scenario_criu_device_map() {
        have_env_map
        note "CUDACKPT_DEVICE_MAP=$GPU_UUID=$GPU_UUID"
        cycle ours "$SMALL_MIB" 0 "$GPU_UUID=$GPU_UUID"
        grep -q -i "$GPU_UUID" "$SCEN_DIR/daemon-restore.log" ||
                note "(the daemon's debug log does not show the mapping)"
}
scenario_criu_device_map_bad() {
        have_env_map
        note "CUDACKPT_DEVICE_MAP=$GPU_UUID=$BOGUS_UUID"
        cycle ours "$SMALL_MIB" 0 "$GPU_UUID=$BOGUS_UUID" bad
}

# median_ms FILE: "median MED ms (min MIN, max MAX, n N)" of microseconds.
stats_ms() {
        sort -n "$1" | awk '{ v[NR] = $1 } END {
                if (NR == 0) { print "no samples"; exit }
                m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                printf "median %.2f ms (min %.2f, max %.2f, n %d)", m / 1000, v[1] / 1000, v[NR] / 1000, NR }'
}

# timed_calls TOOL KIND N ARGS...: N runs of cuda-checkpoint ARGS (exit 0
# wanted), microseconds into $SCEN_DIR/TOOL-KIND.us.
timed_calls() {
        local tool=$1 kind=$2 n=$3 j t0 rc out prog=$WORK/bin-$1/cuda-checkpoint
        shift 3
        : >"$SCEN_DIR/$tool-$kind.us"
        for ((j = 0; j < n; j++)); do
                rc=0
                t0=$(now_us)
                # As criu runs it: the program alone (no env in between), the
                # socket in the environment for ours.
                if [[ $tool == ours ]]; then
                        out=$(CUDACKPT_SOCKET=$SOCK "$prog" "$@" 2>&1) || rc=$?
                else
                        out=$("$prog" "$@" 2>&1) || rc=$?
                fi
                echo $(($(now_us) - t0)) >>"$SCEN_DIR/$tool-$kind.us"
                ((rc == 0)) || die "$tool cuda-checkpoint $*: exit $rc: $out"
        done
        LAST_OUT=$out
}

scenario_percall() {
        local pid tools=ours t j t0 out TRUE_PROG
        TRUE_PROG=$(type -P true)
        start_tree t "$PERCALL_MIB" 0
        pid=${TPIDS[0]}
        wait_all_verified 2
        [[ -z $NVIDIA_NOTE ]] && tools="ours nvidia"
        # A baseline: fork+exec of a program that does nothing.
        : >"$SCEN_DIR/true.us"
        for ((j = 0; j < CALLS; j++)); do
                t0=$(now_us)
                out=$("$TRUE_PROG")
                echo $(($(now_us) - t0)) >>"$SCEN_DIR/true.us"
        done
        note "fork+exec of true: $(stats_ms "$SCEN_DIR/true.us")"
        for t in $tools; do
                timed_calls "$t" help 3 -h
                timed_calls "$t" get-state "$CALLS" --get-state --pid "$pid"
                [[ $LAST_OUT == running* ]] || die "$t --get-state printed '$LAST_OUT'"
                timed_calls "$t" get-restore-tid "$CALLS" --get-restore-tid --pid "$pid"
                [[ $LAST_OUT =~ ^[0-9]+$ ]] || die "$t --get-restore-tid printed '$LAST_OUT'"
                note "$t: --get-state $(stats_ms "$SCEN_DIR/$t-get-state.us")"
                note "$t: --get-restore-tid $(stats_ms "$SCEN_DIR/$t-get-restore-tid.us") (tid $LAST_OUT)"
                : >"$SCEN_DIR/$t-lock.us"
                : >"$SCEN_DIR/$t-unlock.us"
                for ((j = 0; j < CALLS / 2; j++)); do
                        timed_calls "$t" lock1 1 --action lock --pid "$pid" --timeout 10000
                        cat "$SCEN_DIR/$t-lock1.us" >>"$SCEN_DIR/$t-lock.us"
                        timed_calls "$t" unlock1 1 --action unlock --pid "$pid"
                        cat "$SCEN_DIR/$t-unlock1.us" >>"$SCEN_DIR/$t-unlock.us"
                done
                note "$t: --action lock $(stats_ms "$SCEN_DIR/$t-lock.us")"
                note "$t: --action unlock $(stats_ms "$SCEN_DIR/$t-unlock.us")"
                expect_state "$pid" running
        done
        local i0
        i0=$(iter_of "${STATUS_FILES[0]}")
        wait_all_verified $((i0 + 2))
}

# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------
declare -A RUNS=()
run_scenario() {
        local name=$1 fn=scenario_${1//-/_} t0 rc=0 dir details="" label
        RUNS[$name]=$((${RUNS[$name]:-0} + 1))
        label=$name
        ((${RUNS[$name]} == 1)) || label="$name#${RUNS[$name]}"
        dir=$WORK/${label//#/-}
        if ((BUDGET_S > 0 && SECONDS - START_SECONDS >= BUDGET_S)); then
                SKIPPED=$((SKIPPED + 1))
                echo "SKIP $label: time budget of ${BUDGET_S}s spent"
                return 0
        fi
        mkdir -p "$dir"
        if [[ -z $DAEMON_PID ]] || ! kill -0 "$DAEMON_PID" 2>/dev/null; then
                start_daemon || true
        fi
        t0=$(now_us)
        (
                SCEN_DIR=$dir
                set -E
                trap 'echo "unexpected failure (exit $?) at line $LINENO: $BASH_COMMAND"' ERR
                trap 'for p in ${TPIDS[@]+"${TPIDS[@]}"}; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$SCEN_DIR/img"' EXIT
                "$fn"
        ) >"$dir/output" 2>&1 </dev/null || rc=$?
        if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
                echo "ASSERTION FAILED: cudackptd died during the scenario" >>"$dir/output"
                rc=1
        fi
        if [[ -s $dir/details ]]; then
                details=" [$(grep -v '^RESULT ' "$dir/details" | paste -sd';' | sed 's/;/; /g')]"
        fi
        if ((rc == 77)); then
                SKIPPED=$((SKIPPED + 1))
                printf 'SKIP %-22s %s\n' "$label" "$(sed -n 's/^SKIPPED: //p' "$dir/output" | head -n1)"
        elif ((rc == 0)); then
                PASSED=$((PASSED + 1))
                printf 'PASS %-22s %8s s%s\n' "$label" "$(fmt_s $(($(now_us) - t0)))" "$details"
                grep '^RESULT ' "$dir/details" 2>/dev/null | sed "s/^RESULT /RESULT scenario=$label /" || true
        else
                FAILED=$((FAILED + 1))
                printf 'FAIL %-22s %8s s%s\n' "$label" "$(fmt_s $(($(now_us) - t0)))" "$details"
                sed 's/^/    /' "$dir/output"
        fi
        save_logs
}

echo "CRIU tests: $GPU_NAME ($GPU_UUID), driver $DRIVER_VERSION, criu $CRIU_VERSION ($CRIU), kernel $(uname -r)"
echo "  daemon $DAEMON, ctl $CTL, target $TARGET"
echo "  nvidia tool: ${NVIDIA_NOTE:-$NVIDIA}"
echo "  work $WORK ($(df -h --output=avail "$WORK" 2>/dev/null | tail -n1 | tr -d ' ') free); reaper: $REAPER"
echo "  sizes: ${SMALL_MIB} MiB, ${LARGE_MIB} MiB, tree 3 x ${TREE_MIB} MiB; calls ${CALLS}; repeats ${REPEATS}; step timeout ${STEP_TIMEOUT}s; budget ${BUDGET_S}s"
# Reported, not required: what counts is whether dump and restore work.
if "$CRIU" check >"$WORK/criu-check.txt" 2>&1; then
        echo "  criu check: $(tail -n1 "$WORK/criu-check.txt")"
else
        echo "  NOTE criu check failed (going on):"
        tail -n 10 "$WORK/criu-check.txt" | sed 's/^/    /'
fi
suite_start_daemon

for s in $SCENARIOS; do
        run_scenario "$s"
done
if [[ -n $DAEMON_PID ]]; then
        rc=0
        stop_daemon 30 || rc=$?
        ((rc == 0)) || echo "NOTE cudackptd exited $rc after SIGTERM"
fi
echo "$PASSED passed, $FAILED failed, $SKIPPED skipped (total $((SECONDS - START_SECONDS)) s)"
suite_status
