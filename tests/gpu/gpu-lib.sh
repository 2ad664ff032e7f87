# gpu-lib.sh: what the GPU machine's test scripts share; sourced by them.
# Sets ROOT, DIR (the staged binaries, .gpu/), CTL, WORK (a temporary
# directory), CUDACKPT_SOCKET and LD_LIBRARY_PATH; gives ok/bad (PASS and
# FAIL lines, counted in pass and failed), start_daemon, the target helpers
# below (st, wait_iter, start_target_watched, await_state, check_intact)
# and a cleanup trap (the daemon, T and W).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=${GPU_DIR:-$ROOT/.gpu}
export LD_LIBRARY_PATH=$DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[[ -x $DIR/cudackpt-gpu-target ]] || bash "$DIR/build-target.sh" || exit 2
WORK=$(mktemp -d "/tmp/cudackpt-$(basename "$0" .sh).XXXXXX")
CTL=$DIR/cudackptctl
export CUDACKPT_SOCKET=$WORK/sock
pass=0 failed=0
DPID= T= W=
ok() { echo "PASS $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }
# Starts the daemon on the real driver (DPID) and waits until it answers.
# start_daemon [DAEMON_ARGS...]: the daemon on the real driver, in the background.
# CUDACKPT_TEST_DAEMON_WRAPPER: words put before its command, as in suite-lib.sh.
start_daemon() {
        local wrap=()
        read -r -a wrap <<<"${CUDACKPT_TEST_DAEMON_WRAPPER:-}"
        "${wrap[@]}" "$DIR/cudackptd" --socket="$CUDACKPT_SOCKET" --driver=libcuda.so.1 "$@" >"$WORK/daemon.log" 2>&1 &
        DPID=$!
        for _ in $(seq 300); do "$CTL" info >/dev/null 2>&1 && return 0; sleep 0.1; done
        return 1
}
cleanup() { kill "$DPID" "$T" "$W" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

# A field of the target's status line (cudackpt-gpu-target --status).
st() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" "$WORK/t.status" 2>/dev/null; }
# Waits (2 min at most) until the target has verified its buffer N times.
wait_iter() { for _ in $(seq 2400); do i=$(st iter); [[ -n $i && $i -ge $1 ]] && return 0; sleep 0.05; done; return 1; }
# Starts a CUDA target holding MIB (T), once it has verified its buffer,
# and a JSON watcher of it (W) writing $WORK/watch.out.
start_target_watched() {
        "$DIR/cudackpt-gpu-target" --mib="$1" --status="$WORK/t.status" --quiet &
        T=$!
        wait_iter 1 || { bad "the target never verified its data"; exit 1; }
        "$CTL" --json watch --pids="$T" >"$WORK/watch.out" 2>&1 &
        W=$!
}
# await_state STATE SECONDS: waits until the target (T) is in STATE;
# prints the seconds it took.
await_state() {
        local t0
        t0=$(date +%s.%N)
        for _ in $(seq $(($2 * 50))); do
                [[ $("$CTL" state "$T" 2>/dev/null) == "$1" ]] && { awk -v a="$(date +%s.%N)" -v b="$t0" "BEGIN{printf \"%.2f\", a - b}"; return 0; }
                sleep 0.02
        done
        return 1
}
# PASS when the target verifies its buffer intact twice more.
check_intact() {
        local v=
        wait_iter $(($(st iter) + 2)) && v=$(cat "$WORK/t.status")
        [[ $v == *" total_mismatches=0 "* && $v == *" error=none"* ]] && ok "data intact: $v" || bad "data: ${v:-none}"
}
