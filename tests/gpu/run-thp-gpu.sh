#!/usr/bin/env bash
# run-thp-gpu.sh: Suspend and Resume of one CUDA process through the
# daemon under each transparent huge page policy (the driver's checkpoint
# writes GPU memory into the process's host memory).  Restores the policy
# it found.  For the GPU machine (stage-gpu.sh's .gpu/, carried; root):
#   bash tests/gpu/run-thp-gpu.sh [MIB] [ROUNDS]     (default 16384, 2)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=${GPU_DIR:-$ROOT/.gpu}
MIB=${1:-16384}
ROUNDS=${2:-2}
THP=/sys/kernel/mm/transparent_hugepage/enabled
export LD_LIBRARY_PATH=$DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
WORK=$(mktemp -d /tmp/cudackpt-thp.XXXXXX)
export CUDACKPT_SOCKET=$WORK/sock
CTL=$DIR/cudackptctl
was=$(sed -n 's/.*\[\(.*\)\].*/\1/p' $THP)
cleanup() { echo "$was" >$THP; kill "$DPID" "${T:-}" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
"$DIR/cudackptd" --socket="$CUDACKPT_SOCKET" --driver=libcuda.so.1 >"$WORK/daemon.log" 2>&1 &
DPID=$!
for _ in $(seq 300); do "$CTL" info >/dev/null 2>&1 && break; sleep 0.1; done
ms() { sed -n 's/.*"duration_ms":\([0-9.]*\).*/\1/p'; }
for mode in madvise always; do
        echo "$mode" >$THP
        rm -f "$WORK/t.status"
        "$DIR/cudackpt-gpu-target" --mib="$MIB" --status="$WORK/t.status" --quiet &
        T=$!
        for _ in $(seq 2400); do grep -q 'iter=[1-9]' "$WORK/t.status" 2>/dev/null && break; sleep 0.05; done
        for r in $(seq "$ROUNDS"); do
                s=$("$CTL" --json suspend "$T" | ms); u=$("$CTL" --json resume "$T" | ms)
                i=$(sed -n 's/.*iter=\([0-9]*\).*/\1/p' "$WORK/t.status")
                for _ in $(seq 2400); do
                        j=$(sed -n 's/.*iter=\([0-9]*\).*/\1/p' "$WORK/t.status"); [[ $j -ge $((i + 2)) ]] && break; sleep 0.05
                done
                echo "THP $mode ${MIB} MiB round $r: suspend ${s} ms, resume ${u} ms; $(grep -o 'total_mismatches=[0-9]* .*error=[a-z]*' "$WORK/t.status" | sed 's/first_bad.*bytes=[0-9]* //')"
        done
        kill "$T"; wait "$T" 2>/dev/null; T=
done
