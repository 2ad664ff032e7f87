#!/usr/bin/env bash
# run-progress-gpu.sh: the progress of a real checkpoint as a watcher and
# cudackptctl --progress see it, for one CUDA process, twice.
#
# For the GPU machine (binaries staged by stage-gpu.sh in .gpu/, carried):
#   bash tests/gpu/run-progress-gpu.sh [MIB]     (default 16384)
# Prints PASS/FAIL lines, what was seen, and "N passed, N failed".
set -uo pipefail
MIB=${1:-16384}
source "$(dirname "${BASH_SOURCE[0]}")/gpu-lib.sh"
gib() { awk -v b="$1" 'BEGIN{printf "%.2f", b / 1073741824}'; }

start_daemon || { bad "the daemon did not start"; exit 1; }
start_target_watched "$MIB"
sleep 0.5

"$CTL" --progress suspend "$T" >"$WORK/s1.out" 2>"$WORK/s1.err" && ok "suspend 1: $(cat "$WORK/s1.out")" || bad "suspend 1"
"$CTL" --progress resume "$T" >"$WORK/r1.out" 2>"$WORK/r1.err" && ok "resume 1: $(cat "$WORK/r1.out")" || bad "resume 1"
wait_iter $(($(st iter) + 2))
"$CTL" --progress suspend "$T" >"$WORK/s2.out" 2>"$WORK/s2.err" && ok "suspend 2: $(cat "$WORK/s2.out")" || bad "suspend 2"
"$CTL" --progress resume "$T" >"$WORK/r2.out" 2>"$WORK/r2.err" && ok "resume 2: $(cat "$WORK/r2.out")" || bad "resume 2"
check_intact
sleep 0.3

# The checkpoint's progress: bytes growing towards the GPU memory held.
ck=$(grep '"type":"progress"' "$WORK/watch.out" | grep '"step":"checkpoint"' | sed -n 's/.*"bytes":\([0-9]*\).*/\1/p')
n=$(echo "$ck" | grep -c .)
last=$(echo "$ck" | tail -1)
# Two checkpoints: each one's readings never go back; the second starts low.
drops=$(echo "$ck" | awk 'NR > 1 && $1 < prev { d++ } { prev = $1 } END { print d + 0 }')
echo "checkpoint progress (GiB): $(for b in $ck; do gib "$b"; echo -n " "; done)"
[[ $n -ge 4 ]] && ok "$n checkpoint progress events" || bad "$n checkpoint progress events"
[[ $drops -eq 1 ]] && ok "checkpoint bytes never go back within a checkpoint" || bad "checkpoint bytes: $(echo $ck)"
total=$(grep '"type":"progress"' "$WORK/watch.out" | grep '"step":"checkpoint"' | sed -n 's/.*"total_bytes":\([0-9]*\).*/\1/p' | tail -1)
echo "second checkpoint's total: $(gib "${total:-0}") GiB (the target holds $MIB MiB)"
# The driver's total is the data and the CUDA context (520 MiB of an H200's
# context was measured by run-fit-gpu.sh): at least 90% of MIB, at most MIB
# and 1 GiB.
awk -v t="${total:-0}" -v m="$MIB" 'BEGIN{exit !(t > m * 1048576 * 0.9 && t < (m + 1024) * 1048576)}' &&
        ok "the second checkpoint's total is the GPU memory held (the data and its context: $total bytes)" ||
        bad "total ${total:-none} (the data: $MIB MiB)"
! grep -q '"step":"restore"' "$WORK/watch.out" && ok "no restore progress" || bad "restore progress reported"
lines=$(tr '\r' '\n' <"$WORK/s2.err" | grep -c "checkpoint of $T: .* GiB of .* GiB")
[[ $lines -ge 2 ]] && ok "cudackptctl --progress: $lines lines, the last: $(tr '\r' '\n' <"$WORK/s2.err" | grep "GiB of" | tail -1)" ||
        bad "cudackptctl --progress: $(cat "$WORK/s2.err")"
grep -E '"type":"finished"' "$WORK/watch.out" | sed -n 's/.*"method":"\([A-Za-z]*\)".*"duration_ms":\([0-9.]*\).*/\1 \2 ms/p'
echo "$pass passed, $failed failed"
((failed == 0))
