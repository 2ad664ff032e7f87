#!/usr/bin/env bash
# run-gpu.sh: all GPU benchmarks of cudackptd in one go, and a report.
#
# Runs cudackpt-bench-gpu (getstate, exec, multi, contention, size, group,
# list, watchers) and cudackpt-bench-d2h, each under a timeout, prints their reports,
# then a summary of every "RESULT ..." line and, for group and list, a
# markdown table (their "SUMMARY | ... |" lines) for docs/performance.md.  Numbers only: timing never fails it;
# exit 1 only when a benchmark reported an error (a failed operation or
# corrupted target data).  Without a GPU it says so and exits 0.
#
# usage: run-gpu.sh --daemon=PATH --ctl=PATH --target=PATH --bench=PATH [--d2h=PATH]
#   (or CUDACKPTD, CUDACKPTCTL, CUDACKPT_GPU_TARGET, CUDACKPT_BENCH_GPU, CUDACKPT_BENCH_D2H)
# Environment:
#   BENCH_ONLY="getstate exec multi contention size d2h group list watchers"   which to run (default all)
#   BENCH_CALLS=10000      GetState calls (getstate; contention baseline uses 1/5)
#   BENCH_RUNS=50          process runs (exec)
#   BENCH_REPEATS=3        repeats (multi, size)
#   BENCH_PROCS=4          processes (multi, contention)
#   BENCH_PROC_MIB=4096    their GPU memory
#   BENCH_SIZES="1024,4096,16384,65536"   MiB sizes (size)
#   BENCH_D2H_MIB=4096     copy size (d2h)
#   BENCH_GROUP_PROCS=8    group: processes; BENCH_GROUP_MIB=2048 their GPU memory;
#                          BENCH_GROUP_REPEATS=$BENCH_REPEATS; BENCH_GROUP_WARMUP=1
#   BENCH_LIST_PROCESSES=2000  list: processes on the machine (idle sleeps added);
#                          BENCH_LIST_TARGETS=8 CUDA targets of BENCH_LIST_MIB=64;
#                          BENCH_LIST_RUNS=20; BENCH_LIST_POOL=16 baseline threads
#   BENCH_WATCHERS=100     watchers: Watch streams open; BENCH_WATCH_ROUNDS=6 rounds of
#                          4 alternating blocks, BENCH_CALLS GetState calls per
#                          condition; BENCH_WATCH_RATE=100 Lock/Unlock cycles/s of the
#                          load on a second target (0: back to back)
#   BENCH_SIM=PATH         libcudackpt-sim.so: run on the simulator, no GPU checks
#                          (--target then names cudackpt-gpu-standin; group/list/watchers only)
#   BENCH_DRIVER=libcuda.so.1
#   BENCH_TIMEOUT=900      seconds per benchmark
#   BENCH_OUT=FILE         also write the whole report to FILE
# Rough duration on one H200 with the defaults: getstate 5 s, exec 5 s,
# multi 90 s, contention 15 s, size 4-5 min (64 GiB dominates), d2h 20 s,
# group (8 x 2 GiB, 1 warm-up + 3 x 3 cycles) about 1-1.5 min, list 15 s,
# watchers 10-20 s.
# A quick run: BENCH_PROC_MIB=512 BENCH_SIZES=256,1024 BENCH_REPEATS=1.
set -euo pipefail

DAEMON=${CUDACKPTD:-}
CTL=${CUDACKPTCTL:-}
TARGET=${CUDACKPT_GPU_TARGET:-}
BENCH=${CUDACKPT_BENCH_GPU:-}
D2H=${CUDACKPT_BENCH_D2H:-}
for arg in "$@"; do
        case $arg in
        --daemon=*) DAEMON=${arg#*=} ;;
        --ctl=*) CTL=${arg#*=} ;;
        --target=*) TARGET=${arg#*=} ;;
        --bench=*) BENCH=${arg#*=} ;;
        --d2h=*) D2H=${arg#*=} ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run-gpu.sh: unknown argument $arg" >&2; exit 2 ;;
        esac
done
ONLY=${BENCH_ONLY:-getstate exec multi contention size d2h group list watchers}
CALLS=${BENCH_CALLS:-10000}
RUNS=${BENCH_RUNS:-50}
REPEATS=${BENCH_REPEATS:-3}
PROCS=${BENCH_PROCS:-4}
PROC_MIB=${BENCH_PROC_MIB:-4096}
SIZES=${BENCH_SIZES:-1024,4096,16384,65536}
D2H_MIB=${BENCH_D2H_MIB:-4096}
DRIVER=${BENCH_DRIVER:-libcuda.so.1}
TIMEOUT=${BENCH_TIMEOUT:-900}
OUT=${BENCH_OUT:-}
GROUP_PROCS=${BENCH_GROUP_PROCS:-8}
GROUP_MIB=${BENCH_GROUP_MIB:-2048}
GROUP_REPEATS=${BENCH_GROUP_REPEATS:-$REPEATS}
GROUP_WARMUP=${BENCH_GROUP_WARMUP:-1}
LIST_PROCESSES=${BENCH_LIST_PROCESSES:-2000}
LIST_TARGETS=${BENCH_LIST_TARGETS:-8}
LIST_MIB=${BENCH_LIST_MIB:-64}
LIST_RUNS=${BENCH_LIST_RUNS:-20}
LIST_POOL=${BENCH_LIST_POOL:-16}
WATCHERS=${BENCH_WATCHERS:-100}
WATCH_ROUNDS=${BENCH_WATCH_ROUNDS:-6}
WATCH_RATE=${BENCH_WATCH_RATE:-100}
SIM=${BENCH_SIM:-}

nogpu() {
        echo "bench: no GPU benchmarks run: $*"
        exit 0
}
if [[ -z $SIM ]]; then
        [[ -e /dev/nvidiactl ]] || nogpu "no NVIDIA GPU (/dev/nvidiactl does not exist)"
        command -v nvidia-smi >/dev/null 2>&1 || nogpu "nvidia-smi not found"
        timeout 60 nvidia-smi -L >/dev/null 2>&1 || nogpu "nvidia-smi -L failed"
fi
[[ -n $TARGET && -x $TARGET ]] || nogpu "GPU target program not built (no nvcc?): '$TARGET'"
for p in DAEMON CTL BENCH; do
        [[ -n ${!p} && -x ${!p} ]] || { echo "run-gpu.sh: $p not executable: '${!p}'" >&2; exit 2; }
done

abspath() { if [[ -z $1 || $1 == /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }
DAEMON=$(abspath "$DAEMON")
CTL=$(abspath "$CTL")
TARGET=$(abspath "$TARGET")
BENCH=$(abspath "$BENCH")
D2H=$(abspath "$D2H")

LOG=$(mktemp /tmp/cudackpt-bench.XXXXXX.log)
TEE_PID=
finish() {
        rm -f "$LOG"
        # Let tee write the last lines before the script is gone.
        if [[ -n $TEE_PID ]]; then
                exec 1>&- 2>&-
                wait "$TEE_PID" 2>/dev/null || true
        fi
}
trap finish EXIT
if [[ -n $OUT ]]; then
        exec > >(tee "$OUT") 2>&1
        TEE_PID=$!
fi

echo "cudackptd GPU benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC')"
if [[ -n $SIM ]]; then
        SIM=$(abspath "$SIM")
        echo "  GPU:     none: the SIMULATOR $SIM stands in for the driver"
else
        echo "  GPU:     $(nvidia-smi --query-gpu=name,memory.total,driver_version,persistence_mode --format=csv,noheader | head -n1)"
fi
echo "  CPU:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
echo "  memory:  $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); kernel $(uname -r)"
echo "  daemon:  $DAEMON ($("$DAEMON" --version 2>/dev/null | head -n1 || echo '?'))"
echo "  cuda-checkpoint: $(command -v cuda-checkpoint || echo 'not on PATH')"
echo "  settings: calls=$CALLS runs=$RUNS repeats=$REPEATS procs=$PROCS proc_mib=$PROC_MIB sizes=$SIZES d2h_mib=$D2H_MIB"
echo "            group ${GROUP_PROCS}x${GROUP_MIB} MiB repeats=$GROUP_REPEATS warmup=$GROUP_WARMUP;" \
        "list processes=$LIST_PROCESSES targets=${LIST_TARGETS}x${LIST_MIB} MiB runs=$LIST_RUNS pool=$LIST_POOL;" \
        "watchers $WATCHERS rounds=$WATCH_ROUNDS rate=$WATCH_RATE/s"

ERRORS=0
COMMON=(--daemon="$DAEMON" --ctl="$CTL" --target="$TARGET" --driver="$DRIVER" --calls="$CALLS"
        --runs="$RUNS" --repeats="$REPEATS" --procs="$PROCS" --proc-mib="$PROC_MIB" --sizes="$SIZES")
if [[ -n $SIM ]]; then COMMON+=(--sim="$SIM"); fi
run() { # run NAME COMMAND...
        local name=$1 rc=0 t0=$SECONDS
        shift
        timeout --kill-after=30 "$TIMEOUT" "$@" 2>&1 | tee -a "$LOG" || rc=$?
        if ((rc == 124 || rc == 137)); then
                echo "ERROR: $name did not finish within ${TIMEOUT}s (BENCH_TIMEOUT)" | tee -a "$LOG"
        fi
        if ((rc != 0)); then
                ERRORS=$((ERRORS + 1))
                echo "ERROR: $name exited with status $rc"
        fi
        echo "($name: $((SECONDS - t0)) s)"
}

for b in $ONLY; do
        case $b in
        getstate | exec | multi | contention | size) run "$b" "$BENCH" "$b" "${COMMON[@]}" ;;
        group)
                run group "$BENCH" group "${COMMON[@]}" --procs="$GROUP_PROCS" --proc-mib="$GROUP_MIB" \
                        --repeats="$GROUP_REPEATS" --warmup="$GROUP_WARMUP"
                ;;
        list)
                run list "$BENCH" list "${COMMON[@]}" --procs="$LIST_TARGETS" --idle-mib="$LIST_MIB" \
                        --processes="$LIST_PROCESSES" --list-runs="$LIST_RUNS" --pool="$LIST_POOL"
                ;;
        watchers)
                run watchers "$BENCH" watchers "${COMMON[@]}" --watchers="$WATCHERS" \
                        --watch-rounds="$WATCH_ROUNDS" --watch-rate="$WATCH_RATE"
                ;;
        d2h)
                if [[ -n $D2H && -x $D2H ]]; then
                        echo
                        run d2h "$D2H" --mib="$D2H_MIB" --repeats=10
                else
                        echo "d2h: cudackpt-bench-d2h not built (no nvcc?)"
                fi
                ;;
        *) echo "run-gpu.sh: unknown benchmark '$b'" >&2; ERRORS=$((ERRORS + 1)) ;;
        esac
done

echo
echo "== machine-readable results =="
grep '^RESULT ' "$LOG" || echo "(none)"
if grep -q '^SUMMARY ' "$LOG"; then
        echo
        echo "== summary (markdown, for docs/performance.md) =="
        echo "| measurement | result | goal |"
        echo "| --- | --- | --- |"
        sed -n 's/^SUMMARY //p' "$LOG"
fi
echo
if ((ERRORS)); then
        echo "bench: $ERRORS benchmark(s) reported errors (see ERROR lines above)"
        exit 1
fi
echo "bench: done"
