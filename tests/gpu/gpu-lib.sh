# gpu-lib.sh: what the GPU machine's test scripts share; sourced by them.
# Sets ROOT, DIR (the staged binaries, .gpu/), CTL, WORK (a temporary
# directory), CUDACKPT_SOCKET and LD_LIBRARY_PATH; gives ok/bad (PASS and
# FAIL lines, counted in pass and failed) and start_daemon.
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
start_daemon() {
        "$DIR/cudackptd" --socket="$CUDACKPT_SOCKET" --driver=libcuda.so.1 >"$WORK/daemon.log" 2>&1 &
        DPID=$!
        for _ in $(seq 300); do "$CTL" info >/dev/null 2>&1 && return 0; sleep 0.1; done
        return 1
}
