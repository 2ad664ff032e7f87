#!/usr/bin/env bash
# run-fit-gpu.sh: a restore that would not fit on its GPU is refused before
# the driver is asked (InsufficientGpuMemory, exit status 26), and made once
# the memory is free again, data intact (issue 29, B8); and what a restore
# takes on the GPU beyond what NVML showed its process holding (the margin,
# restore_gpu_margin_mib).
#
#   1. A target of MIB: NVML's figure for it, then the GPU's free memory
#      while it runs, once it is checkpointed, after its restore and, sampled
#      every 20 ms, at the lowest during the restore: what the restore took
#      beyond NVML's figure, printed as "margin: ...".
#   2. It and a second target of 1 GiB suspended as a group; another process
#      then takes all but LEAVE_MIB of the GPU.  resume of the 8 GiB target,
#      of the 1 GiB one and of both as a group: each refused with exit 26,
#      every member still checkpointed.
#   3. The filler ends; the group resumes; both buffers verified intact.
#
# For the GPU machine (binaries staged by stage-gpu.sh in .gpu/, carried):
#   bash tests/gpu/run-fit-gpu.sh [MIB] [LEAVE_MIB]     (default 8192 1024)
# Prints PASS/FAIL lines, the measured amounts, and "N passed, N failed".
set -uo pipefail
MIB=${1:-8192}
LEAVE=${2:-1024}
SMALL=1024
source "$(dirname "${BASH_SOURCE[0]}")/gpu-lib.sh"
F='' T2='' S=''
trap 'kill "$F" "$T2" "$S" 2>/dev/null; cleanup' EXIT

# free_mib: the free memory of the target's GPU now (NVML, through nvidia-smi).
free_mib() { nvidia-smi --id="$GPU" --query-gpu=memory.free --format=csv,noheader,nounits | tr -d ' '; }
# held_mib PID: what NVML shows the process holding, "" when not listed.
held_mib() {
        nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits |
                awk -F', *' -v p="$1" '$1 == p { print $2 }'
}
# await_free MIB: waits (60 s at most) until at least MIB are free.
await_free() { for _ in $(seq 600); do (($(free_mib) >= $1)) && return 0; sleep 0.1; done; return 1; }
# state_of PID
state_of() { "$CTL" state "$1" 2>/dev/null; }

start_daemon || { bad "the daemon did not start"; exit 1; }
# NVML opens on a worker after READY=1.
for _ in $(seq 100); do grep -q "Restores are" "$WORK/daemon.log" && break; sleep 0.1; done
grep "Restores are\|NVML" "$WORK/daemon.log"
MARGIN=$(sed -n 's/.*(margin \([0-9]*\) MiB).*/\1/p' "$WORK/daemon.log" | head -1)
[[ -n $MARGIN ]] && ok "the daemon checks restores (margin $MARGIN MiB)" || { bad "the daemon checks no restore"; exit 1; }

# 1. The margin.
"$DIR/cudackpt-gpu-target" --mib="$MIB" --status="$WORK/t.status" --quiet &
T=$!
wait_iter 1 || { bad "the target never verified its data"; exit 1; }
GPU=$(st uuid)
held=$(held_mib "$T")
[[ $held =~ ^[0-9]+$ ]] || { bad "NVML does not list the target: '$held'"; exit 1; }
free_running=$(free_mib)
out=$("$CTL" suspend "$T") && ok "suspend: $out" || bad "suspend: $out"
free_ckpt=$(free_mib)
nvidia-smi --id="$GPU" --query-gpu=memory.free --format=csv,noheader,nounits -lms 20 >"$WORK/during" 2>&1 &
S=$!
sleep 0.2
out=$("$CTL" resume "$T") && ok "resume: $out" || bad "resume: $out"
sleep 0.2
kill "$S" 2>/dev/null
wait "$S" 2>/dev/null
S=
free_after=$(free_mib)
low=$(tr -d ' ' <"$WORK/during" | grep -E '^[0-9]+$' | sort -n | head -1)
echo "GPU $GPU: the target of $MIB MiB holds $held MiB (NVML: its data and its CUDA context, $((held - MIB)) MiB)"
echo "free: $free_running MiB running, $free_ckpt MiB checkpointed (freed $((free_ckpt - free_running))), " \
        "$free_after MiB restored (taken $((free_ckpt - free_after))), lowest during the restore $low MiB" \
        "(taken $((free_ckpt - low)))"
echo "margin: the restore took $((free_ckpt - free_after - held)) MiB beyond NVML's $held MiB once done," \
        "$((free_ckpt - low - held)) MiB at its peak (restore_gpu_margin_mib is $MARGIN)"
((free_ckpt - low - held <= MARGIN)) && ok "the peak beyond NVML's figure is within the margin" ||
        bad "the restore's peak took $((free_ckpt - low - held)) MiB beyond NVML's figure, more than the margin"
check_intact

# 2. Suspended together, then the GPU filled.
"$DIR/cudackpt-gpu-target" --mib="$SMALL" --status="$WORK/t2.status" --quiet &
T2=$!
for _ in $(seq 600); do grep -q "iter=" "$WORK/t2.status" 2>/dev/null && break; sleep 0.1; done
out=$("$CTL" suspend --pids="$T,$T2" --no-progress 2>&1) && ok "suspend --pids=$T,$T2" || bad "suspend group: $out"
free_ckpt=$(free_mib)
ctx=$((held - MIB))
fill=$((free_ckpt - LEAVE - ctx))
"$DIR/cudackpt-gpu-target" --mib="$fill" --status="$WORK/f.status" --interval-ms=1000 --quiet &
F=$!
for _ in $(seq 1200); do grep -q "iter=" "$WORK/f.status" 2>/dev/null && break; sleep 0.1; done
grep -q "iter=" "$WORK/f.status" 2>/dev/null || { bad "the filler of $fill MiB never ran"; exit 1; }
echo "filler of $fill MiB: $(free_mib) MiB free now (wanted about $LEAVE)"
for who in "$T" "$T2" "--pids=$T,$T2"; do
        out=$("$CTL" resume "$who" --no-progress 2>&1)
        rc=$?
        ((rc == 26)) && [[ $out == *InsufficientGpuMemory* || $out == *"would not fit"* ]] &&
                ok "resume $who refused: $out" || bad "resume $who: exit $rc: $out"
done
[[ $(state_of "$T") == checkpointed && $(state_of "$T2") == checkpointed ]] &&
        ok "both still checkpointed, untouched" || bad "states: $(state_of "$T") $(state_of "$T2")"
grep -c "InsufficientGpuMemory" "$WORK/daemon.log" | sed 's/^/audit lines with InsufficientGpuMemory: /'

# 3. Room again.
kill "$F"
wait "$F" 2>/dev/null
F=
await_free $((free_ckpt - 256)) || bad "the filler's memory never came back"
out=$("$CTL" resume --pids="$T,$T2" --no-progress 2>&1) && ok "resume --pids=$T,$T2 once the memory was free" ||
        bad "resume group: $out"
check_intact
v=
for _ in $(seq 200); do v=$(cat "$WORK/t2.status"); [[ $v == *" iter="* ]] && break; sleep 0.05; done
sleep 1
v=$(cat "$WORK/t2.status")
[[ $v == *" total_mismatches=0 "* && $v == *" error=none"* ]] && ok "second target intact: $v" || bad "second target: $v"
echo "$pass passed, $failed failed"
((failed == 0))
