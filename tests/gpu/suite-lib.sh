# shellcheck shell=bash
# suite-lib.sh: what the two scenario suites (run-gpu-tests.sh and
# run-criu-tests.sh) share; sourced by them once their settings are read.
# They keep their own conventions, not gpu-lib.sh's: DAEMON, CTL, DRIVER,
# SOCK, WORK, DAEMON_PID, SCENARIOS, ALL_SCENARIOS, SCEN_DIR and the
# PASSED/FAILED/SKIPPED counts are theirs; these functions use them.

usage() {
        sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
        exit 2
}

# suite_parse_args NAME ARG...: --daemon=, --ctl=, --target= and --help;
# another option goes to the script's suite_option ARG, when it has one
# (status 0: taken), else is an error; the rest are scenarios, added to
# SCENARIOS (ALL_SCENARIOS when none is named).
suite_parse_args() {
        local name=$1 arg
        shift
        for arg in "$@"; do
                # shellcheck disable=SC2034 # TARGET is the script's
                case $arg in
                --daemon=*) DAEMON=${arg#*=} ;;
                --ctl=*) CTL=${arg#*=} ;;
                --target=*) TARGET=${arg#*=} ;;
                -h | --help) usage ;;
                -*)
                        if ! declare -F suite_option >/dev/null || ! suite_option "$arg"; then
                                echo "$name: unknown option $arg" >&2
                                usage
                        fi
                        ;;
                *) SCENARIOS="$SCENARIOS $arg" ;;
                esac
        done
        SCENARIOS=${SCENARIOS:-$ALL_SCENARIOS}
}

# suite_check_args NAME VAR...: exits 2 on a scenario not in ALL_SCENARIOS
# or a VAR that is not a positive integer; NAME begins the message.
suite_check_args() {
        local name=$1 s v
        shift
        for s in $SCENARIOS; do
                [[ " $ALL_SCENARIOS " == *" $s "* ]] ||
                        { echo "$name: unknown scenario '$s' (known: $ALL_SCENARIOS)" >&2; exit 2; }
        done
        for v in "$@"; do
                [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$name: $v must be a positive integer" >&2; exit 2; }
        done
}

# Whether DRIVER (a path, or a soname) can be loaded.
have_libcuda() {
        local d
        if [[ $DRIVER == */* ]]; then
                [[ -r $DRIVER ]]
                return
        fi
        for d in ${LD_LIBRARY_PATH//:/ }; do
                [[ -e $d/$DRIVER ]] && return 0
        done
        { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true; } | grep -qF "$DRIVER "
}

# Absolute (not resolved: a symlink's name may matter), for setpriv and children.
abspath() { if [[ -z $1 || $1 == /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }

# suite_check_binaries NAME: exits 2 unless DAEMON and CTL are executables.
suite_check_binaries() {
        [[ -n $DAEMON && -x $DAEMON ]] || { echo "$1: cudackptd not executable: '$DAEMON'" >&2; exit 2; }
        [[ -n $CTL && -x $CTL ]] || { echo "$1: cudackptctl not executable: '$CTL'" >&2; exit 2; }
}

now_us() { echo "${EPOCHREALTIME/./}"; }
fmt_s() { printf '%d.%03d' $(($1 / 1000000)) $(($1 % 1000000 / 1000)); }

# kill_listed FILE: SIGKILL every pid FILE lists, one a line.
kill_listed() {
        local p
        while read -r p; do
                if [[ -n $p ]]; then kill -KILL "$p" 2>/dev/null || true; fi
        done <"$1"
}

# suite_setup: once WORK exists: SOCK, PIDS_FILE (emptied), DAEMON_PID,
# the counts, and the traps (suite_cleanup on exit).
suite_setup() {
        SOCK=$WORK/cudackptd.sock
        PIDS_FILE=$WORK/target-pids
        : >"$PIDS_FILE"
        DAEMON_PID=
        FAILED=0
        PASSED=0
        SKIPPED=0
        trap suite_cleanup EXIT
        trap 'exit 130' INT TERM
}

# On exit: SIGKILLs the targets, stops the daemon, runs the script's
# suite_cleanup_more when it has one, and removes WORK unless a scenario
# failed or KEEP=1.
suite_cleanup() {
        kill_listed "$PIDS_FILE"
        if [[ -n $DAEMON_PID ]]; then
                stop_daemon 10 || true
        fi
        if declare -F suite_cleanup_more >/dev/null; then suite_cleanup_more; fi
        if [[ $FAILED -eq 0 && $KEEP != 1 ]]; then
                rm -rf "$WORK"
        else
                echo "work directory kept: $WORK"
        fi
}

# stop_daemon SECONDS: SIGTERM, then SIGKILL after SECONDS; returns its exit status.
stop_daemon() {
        local rc=0 wd
        kill -TERM "$DAEMON_PID" 2>/dev/null || true
        # The watchdog takes its sleep with it when cancelled.
        (
                trap 'kill "$s" 2>/dev/null; exit 0' TERM
                sleep "$1" &
                s=$!
                wait "$s"
                kill -KILL "$DAEMON_PID" 2>/dev/null
        ) </dev/null >/dev/null 2>&1 &
        wd=$!
        wait "$DAEMON_PID" || rc=$?
        kill "$wd" 2>/dev/null || true
        wait "$wd" 2>/dev/null || true
        DAEMON_PID=
        return $rc
}

# start_daemon: cudackptd on DRIVER at SOCK (DAEMON_PID), its log appended to
# WORK/daemon.log; returns 0 once `cudackptctl info` answers (WORK/info.txt).
# CUDACKPT_TEST_DAEMON_WRAPPER, when set, is put before the command (words
# split at blanks): a program that executes the daemon in its own place,
# keeping the pid, as cudackpt-seccomp-exec --profile=FILE -- does.
start_daemon() {
        local wrap=()
        read -r -a wrap <<<"${CUDACKPT_TEST_DAEMON_WRAPPER:-}"
        rm -f "$SOCK"
        "${wrap[@]}" "$DAEMON" --socket="$SOCK" --driver="$DRIVER" --log-level=debug </dev/null >>"$WORK/daemon.log" 2>&1 &
        DAEMON_PID=$!
        # NOTIFY_SOCKET is awkward from bash: poll `cudackptctl info` instead.
        local deadline=$((SECONDS + 60))
        while ((SECONDS < deadline)); do
                if timeout 5 "$CTL" --socket="$SOCK" info >"$WORK/info.txt" 2>&1; then
                        return 0
                fi
                kill -0 "$DAEMON_PID" 2>/dev/null || break
                sleep 0.1
        done
        echo "cudackptd did not come up (pid $DAEMON_PID); log:" >&2
        tail -n 30 "$WORK/daemon.log" >&2 || true
        return 1
}

# The first start: on failure a FAIL line and the totals, and exit 1.
suite_start_daemon() {
        if ! start_daemon; then
                echo "FAIL daemon-start"
                FAILED=1
                echo "0 passed, 1 failed, 0 skipped"
                exit 1
        fi
        echo "  daemon: $(tr '\n' ' ' <"$WORK/info.txt")"
}

# The suite's exit status, its last command: 77 when every scenario
# skipped, 0 when some passed and none failed, 1 otherwise.
suite_status() {
        if ((FAILED == 0 && PASSED == 0 && SKIPPED > 0)); then
                return 77
        fi
        ((FAILED == 0 && PASSED > 0))
}

# Inside a scenario (a subshell with errexit): fail it with a message...
die() {
        echo "ASSERTION FAILED: $*"
        exit 1
}
# ... or add a line to its details (shown after its PASS/FAIL line).
note() { echo "$*" >>"$SCEN_DIR/details"; }
# field LINE KEY: the value of KEY=VALUE in a status LINE.
field() {
        [[ " $1 " =~ \ $2=([^ ]*)\  ]] && echo "${BASH_REMATCH[1]}"
}
