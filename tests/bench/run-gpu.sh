#!/usr/bin/env bash
# run-gpu.sh: all GPU benchmarks of cudackptd in one go, and a report.
#
# Runs cudackpt-bench-gpu (getstate, exec, multi, contention, size) and
# cudackpt-bench-d2h, each under a timeout, prints their reports, then a
# summary of every "RESULT ..." line.  Numbers only: timing never fails it;
# exit 1 only when a benchmark reported an error (a failed operation or
# corrupted target data).  Without a GPU it says so and exits 0.
#
# usage: run-gpu.sh --daemon=PATH --ctl=PATH --target=PATH --bench=PATH [--d2h=PATH]
#   (or CUDACKPTD, CUDACKPTCTL, CUDACKPT_GPU_TARGET, CUDACKPT_BENCH_GPU, CUDACKPT_BENCH_D2H)
# Environment:
#   BENCH_ONLY="getstate exec multi contention size d2h"   which to run (default all)
#   BENCH_CALLS=10000      GetState calls (getstate; contention baseline uses 1/5)
#   BENCH_RUNS=50          process runs (exec)
#   BENCH_REPEATS=3        repeats (multi, size)
#   BENCH_PROCS=4          processes (multi, contention)
#   BENCH_PROC_MIB=4096    their GPU memory
#   BENCH_SIZES="1024,4096,16384,65536"   MiB sizes (size)
#   BENCH_D2H_MIB=4096     copy size (d2h)
#   BENCH_DRIVER=libcuda.so.1
#   BENCH_TIMEOUT=900      seconds per benchmark
#   BENCH_OUT=FILE         also write the whole report to FILE
# Rough duration on one H200 with the defaults: getstate 5 s, exec 5 s,
# multi 90 s, contention 15 s, size 4-5 min (64 GiB dominates), d2h 20 s.
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
ONLY=${BENCH_ONLY:-getstate exec multi contention size d2h}
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

nogpu() {
        echo "bench: no GPU benchmarks run: $*"
        exit 0
}
[[ -e /dev/nvidiactl ]] || nogpu "no NVIDIA GPU (/dev/nvidiactl does not exist)"
command -v nvidia-smi >/dev/null 2>&1 || nogpu "nvidia-smi not found"
timeout 60 nvidia-smi -L >/dev/null 2>&1 || nogpu "nvidia-smi -L failed"
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
echo "  GPU:     $(nvidia-smi --query-gpu=name,memory.total,driver_version,persistence_mode --format=csv,noheader | head -n1)"
echo "  CPU:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
echo "  memory:  $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); kernel $(uname -r)"
echo "  daemon:  $DAEMON ($("$DAEMON" --version 2>/dev/null | head -n1 || echo '?'))"
echo "  cuda-checkpoint: $(command -v cuda-checkpoint || echo 'not on PATH')"
echo "  settings: calls=$CALLS runs=$RUNS repeats=$REPEATS procs=$PROCS proc_mib=$PROC_MIB sizes=$SIZES d2h_mib=$D2H_MIB"

ERRORS=0
COMMON=(--daemon="$DAEMON" --ctl="$CTL" --target="$TARGET" --driver="$DRIVER" --calls="$CALLS"
        --runs="$RUNS" --repeats="$REPEATS" --procs="$PROCS" --proc-mib="$PROC_MIB" --sizes="$SIZES")
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
echo
if ((ERRORS)); then
        echo "bench: $ERRORS benchmark(s) reported errors (see ERROR lines above)"
        exit 1
fi
echo "bench: done"
