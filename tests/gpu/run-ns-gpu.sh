#!/usr/bin/env bash
# run-ns-gpu.sh: a CUDA process in its own pid namespace, suspended and
# resumed through cudackptd by a caller in that namespace, by the pid the
# namespace gives it; the host's CUDA process is NoSuchProcess there.
#
# For the GPU machine (binaries staged by stage-gpu.sh in .gpu/, carried):
#   bash tests/gpu/run-ns-gpu.sh [MIB]        (default 4096)
# Prints PASS/FAIL lines, the timings, and "N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=${GPU_DIR:-$ROOT/.gpu}
MIB=${1:-4096}
export LD_LIBRARY_PATH=$DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[[ -x $DIR/cudackpt-gpu-target ]] || bash "$DIR/build-target.sh" || exit 2
WORK=$(mktemp -d /tmp/cudackpt-ns-gpu.XXXXXX)
chmod 0755 "$WORK"
SOCK=$WORK/sock
CTL=$DIR/cudackptctl
export CUDACKPT_SOCKET=$SOCK
pass=0 failed=0
ok() { echo "PASS $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }
cleanup() { kill "$DPID" "$HOST" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

# CUDACKPT_TEST_DAEMON_WRAPPER: words put before the daemon's command, as in suite-lib.sh.
read -r -a wrap <<<"${CUDACKPT_TEST_DAEMON_WRAPPER:-}"
"${wrap[@]}" "$DIR/cudackptd" --socket="$SOCK" --driver=libcuda.so.1 >"$WORK/daemon.log" 2>&1 &
DPID=$!
for _ in $(seq 300); do "$CTL" info >/dev/null 2>&1 && break; sleep 0.1; done
"$DIR/cudackpt-gpu-target" --mib=64 --status="$WORK/host.status" --quiet &
HOST=$!
# Inside: pid namespace of its own with its own /proc, as a container has.
timeout 300 unshare -p -f --mount-proc env CTL="$CTL" TARGET="$DIR/cudackpt-gpu-target" MIB="$MIB" \
        WORK="$WORK" HOST="$HOST" bash -c '
st() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" "$WORK/ns.status" 2>/dev/null; }
wait_iter() { for _ in $(seq 1200); do i=$(st iter); [[ -n $i && $i -ge $1 ]] && return 0; sleep 0.05; done; return 1; }
"$TARGET" --mib=$MIB --status="$WORK/ns.status" --quiet &
T=$!
wait_iter 1 || { echo "RESULT target-never-verified"; exit 1; }
echo "RESULT ns-pid $T ps-count $(ls -d /proc/[0-9]* | wc -l)"
echo "RESULT state $("$CTL" state $T)"
t0=$(date +%s.%N); s=$("$CTL" --json suspend $T); echo "RESULT suspend $s"
echo "RESULT state2 $("$CTL" state $T)"
s=$("$CTL" --json resume $T); echo "RESULT resume $s"
before=$(st iter); wait_iter $((before + 2)) && echo "RESULT verified $(cat "$WORK/ns.status")"
"$CTL" state $HOST >/dev/null 2>&1; echo "RESULT host-state-exit $?"
"$CTL" suspend $HOST >/dev/null 2>&1; echo "RESULT host-suspend-exit $?"
' >"$WORK/ns.out" 2>&1
cat "$WORK/ns.out"
T=$(sed -n 's/^RESULT ns-pid \([0-9]*\).*/\1/p' "$WORK/ns.out")
[[ -n $T && $T -lt 10 ]] && ok "target has namespace pid $T" || bad "namespace pid: '$T'"
grep -q '^RESULT state running$' "$WORK/ns.out" && ok "state by namespace pid: running" || bad "state"
grep -q "^RESULT suspend {\"pid\":$T,\"state\":\"checkpointed\"" "$WORK/ns.out" && ok "suspend by namespace pid" || bad "suspend"
grep -q '^RESULT state2 checkpointed$' "$WORK/ns.out" && ok "checkpointed" || bad "state after suspend"
grep -q "^RESULT resume {\"pid\":$T,\"state\":\"running\"" "$WORK/ns.out" && ok "resume by namespace pid" || bad "resume"
v=$(grep '^RESULT verified ' "$WORK/ns.out")
[[ $v == *" total_mismatches=0 "* && $v == *" error=none"* ]] && ok "data intact after the cycle" || bad "data: $v"
grep -q '^RESULT host-state-exit 10$' "$WORK/ns.out" && ok "host process: NoSuchProcess (state)" || bad "host state"
grep -q '^RESULT host-suspend-exit 10$' "$WORK/ns.out" && ok "host process: NoSuchProcess (suspend)" || bad "host suspend"
[[ $("$CTL" state "$HOST") == running ]] && ok "host process untouched" || bad "host process state"
grep -E 'audit|Suspend|Resume' "$WORK/daemon.log" | tail -n 6
echo "$pass passed, $failed failed"
((failed == 0))
