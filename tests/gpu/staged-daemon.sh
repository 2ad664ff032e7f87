# staged-daemon.sh: sourced by the Python GPU suites (run-python-gpu.sh,
# run-cuda-python-ckpt.sh), which need neither the CUDA target nor nvcc:
# the daemon staged by stage-gpu.sh in .gpu/ (GPU_DIR) started on the real
# driver, on a socket in a work directory removed at exit.
#   staged_daemon_start NAME   WORK, CUDACKPT_SOCKET, DPID set; exits 2
#                              without a staged daemon, 1 when it does not
#                              answer within 30 s (its log's end shown)
DIR=${GPU_DIR:-$ROOT/.gpu}
export LD_LIBRARY_PATH=$DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
DPID=
WORK=
staged_daemon_cleanup() { [[ -n $DPID ]] && kill "$DPID" 2>/dev/null; wait 2>/dev/null; [[ -n $WORK ]] && rm -rf "$WORK"; }
trap staged_daemon_cleanup EXIT

staged_daemon_start() {
        local up=
        WORK=$(mktemp -d "/tmp/cudackpt-$1.XXXXXX")
        export CUDACKPT_SOCKET=$WORK/sock
        [[ -x $DIR/cudackptd && -x $DIR/cudackptctl ]] ||
                { echo "FAIL no staged daemon in $DIR (run tests/gpu/stage-gpu.sh)"; exit 2; }
        # CUDACKPT_TEST_DAEMON_WRAPPER: words put before the daemon's command (a wrapper).
        local -a wrap
        read -r -a wrap <<<"${CUDACKPT_TEST_DAEMON_WRAPPER:-}"
        "${wrap[@]}" "$DIR/cudackptd" --socket="$CUDACKPT_SOCKET" --driver=libcuda.so.1 >"$WORK/daemon.log" 2>&1 &
        DPID=$!
        for _ in $(seq 300); do "$DIR/cudackptctl" info >/dev/null 2>&1 && { up=1; break; }; sleep 0.1; done
        if [[ -z $up ]]; then
                echo "FAIL the daemon did not answer within 30 s"; tail -n 30 "$WORK/daemon.log"; exit 1
        fi
        echo "PASS the daemon answers: $("$DIR/cudackptctl" info 2>&1 | head -n 3 | tr '\n' ' ')"
}
