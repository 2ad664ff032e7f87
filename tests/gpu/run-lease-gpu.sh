#!/usr/bin/env bash
# run-lease-gpu.sh: a client holding a lease on a suspended CUDA process is
# killed (SIGKILL); the daemon brings the process back to running, data
# intact.  Then a lease_ms that expires, and a watcher that saw it all.
#
# For the GPU machine (binaries staged by stage-gpu.sh in .gpu/, carried):
#   bash tests/gpu/run-lease-gpu.sh [MIB]     (default 4096)
# Prints PASS/FAIL lines, the timings, and "N passed, N failed".
set -uo pipefail
MIB=${1:-4096}
source "$(dirname "${BASH_SOURCE[0]}")/gpu-lib.sh"

start_daemon || { bad "the daemon did not start"; exit 1; }
start_target_watched "$MIB"

# 1. Suspend under --hold, the holder killed.
"$CTL" suspend --hold "$T" -- sleep 600 >"$WORK/hold.out" 2>&1 &
H=$!
took=$(await_state checkpointed 120) && ok "suspended under --hold in ${took}s: $(head -1 "$WORK/hold.out")" ||
        bad "never checkpointed: $(cat "$WORK/hold.out")"
kill -9 "$H"
pkill -f "^sleep 600$" 2>/dev/null
took=$(await_state running 120) && ok "running again ${took}s after the holder was killed" || bad "not running again"
check_intact

# 2. A lease_ms that expires.
out=$("$CTL" suspend --lease-ms=2000 "$T") && ok "suspend --lease-ms=2000: $out" || bad "suspend: $out"
took=$(await_state running 120) && ok "running again ${took}s after the reply (lease 2 s, then the restore)" ||
        bad "lease never undone"
check_intact

sleep 0.5
grep -c '"type":"lease-ended"' "$WORK/watch.out" | grep -qx 2 && ok "the watcher saw both leases end" ||
        bad "watch: $(grep lease "$WORK/watch.out")"
grep '"type":"lease-ended"' "$WORK/watch.out"
grep -E '"type":"finished"' "$WORK/watch.out" | sed -n 's/.*"method":"\([A-Za-z]*\)".*"duration_ms":\([0-9.]*\).*/\1 \2 ms/p'
grep -E 'Lease|lease' "$WORK/daemon.log" | tail -n 8
"$CTL" metrics | grep -E '^cudackpt_(lease|leases)'
echo "$pass passed, $failed failed"
((failed == 0))
