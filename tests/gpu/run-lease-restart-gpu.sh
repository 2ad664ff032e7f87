#!/usr/bin/env bash
# run-lease-restart-gpu.sh: leases that outlive the daemon, on a real GPU.
#   1. A CUDA process of MIB suspended under lease_ms; the daemon SIGKILLed;
#      the deadline passes while it is down; restarted, the daemon brings
#      the process back to running at once, data intact.
#   2. `cudackptctl suspend --hold PID -- sleep 12`; the daemon SIGKILLed and
#      restarted under it: the holder reconnects and claims its lease, the
#      process stays checkpointed until the command ends, then runs again,
#      data intact.
# For the GPU machine (binaries staged by stage-gpu.sh in .gpu/, carried):
#   bash tests/gpu/run-lease-restart-gpu.sh [MIB]     (default 4096)
# Prints PASS/FAIL lines, the timings, and "N passed, N failed".
set -uo pipefail
MIB=${1:-4096}
source "$(dirname "${BASH_SOURCE[0]}")/gpu-lib.sh"
gpu_mib() { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | awk -F', ' -v p="$T" '$1 == p { print $2 }'; }
kill_daemon() { kill -9 "$DPID"; wait "$DPID" 2>/dev/null; }

start_daemon || { bad "the daemon did not start"; exit 1; }
"$DIR/cudackpt-gpu-target" --mib="$MIB" --status="$WORK/t.status" --quiet &
T=$!
wait_iter 1 || { bad "the target never verified its data"; exit 1; }
ok "target $T holds $(gpu_mib) MiB"

# 1. lease_ms expires while the daemon is down.
out=$("$CTL" suspend --lease-ms=5000 "$T") && ok "suspend --lease-ms=5000: $out" || bad "suspend: $out"
[[ -z $(gpu_mib) ]] && ok "its GPU memory is free while suspended" || bad "still holds $(gpu_mib) MiB"
kill_daemon && ok "daemon SIGKILLed"
sleep 6
[[ $(cat /proc/$T/status | sed -n 's/^State:\s*//p') != "" ]] && ok "the target lives on, the lease's deadline passed"
start_daemon || { bad "the daemon did not restart"; exit 1; }
took=$(await_state running 120) && ok "running again ${took}s after the restart (expired lease undone)" ||
        bad "not running again after the restart: $("$CTL" state "$T" 2>&1)"
check_intact

# 2. --hold across a restart.
"$CTL" suspend --hold "$T" -- sleep 12 >"$WORK/hold.out" 2>&1 &
H=$!
took=$(await_state checkpointed 120) && ok "suspended under --hold in ${took}s" || bad "never checkpointed: $(cat "$WORK/hold.out")"
kill_daemon && ok "daemon SIGKILLed under the hold"
start_daemon || { bad "the daemon did not restart"; exit 1; }
sleep 3
s=$("$CTL" state "$T" 2>&1)
[[ $s == checkpointed ]] && ok "still checkpointed 3 s after the restart (the holder claimed its lease)" || bad "state $s"
wait "$H"
rc=$?
((rc == 0)) && ok "the hold's command ended (exit 0): $(tr '\n' ' ' <"$WORK/hold.out")" ||
        bad "hold exit $rc: $(cat "$WORK/hold.out")"
took=$(await_state running 120) && ok "running again ${took}s after the command ended" || bad "not running again"
check_intact
grep -E 'lease|Lease' "$WORK/daemon.log" | tail -n 8
echo "$pass passed, $failed failed"
((failed == 0))
