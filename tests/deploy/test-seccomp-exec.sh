#!/bin/bash
# tests/deploy/test-seccomp-exec.sh: deploy.seccomp-exec, the DaemonSet's
# seccomp profile (deploy/kubernetes/seccomp/cudackptd.json) applied by
# cudackpt-seccomp-exec (seccomp_exec.c), the loader the GPU suites start
# the daemon through (CUDACKPT_TEST_DAEMON_WRAPPER), on the simulator.
#
#   1. enforced: the daemon keeps the loader's pid and makes the usual calls
#      on a simulated CUDA process (state, suspend, resume, a lease, the
#      group forms, metrics, ps);
#   2. reporting (--report): the same calls, and the report names no call;
#   3. reporting, the profile less pidfd_open (which pins a target): the
#      daemon acts as before, and the report names pidfd_open;
#   4. enforced, the profile less pidfd_open: the daemon answers, and
#      refuses to act on the target (what the profile lacks is refused).
#
# Environment: CUDACKPT_TEST_DAEMON, CUDACKPT_TEST_SIM, CUDACKPT_TEST_CTL,
# CUDACKPT_TEST_SECCOMP_EXEC, CUDACKPT_TEST_PROFILE (ctest sets them);
# CUDACKPT_TEST_KEEP=1 keeps the directory.
# Exit: 0 all passed, 1 a check failed.
set -euo pipefail

daemon=${CUDACKPT_TEST_DAEMON:-}
sim=${CUDACKPT_TEST_SIM:-}
ctl=${CUDACKPT_TEST_CTL:-}
loader=${CUDACKPT_TEST_SECCOMP_EXEC:-}
profile=${CUDACKPT_TEST_PROFILE:-}

# PASS/FAIL, expect and the usual calls.
# shellcheck source=tests/deploy/seccomp-lib.sh
. "$(dirname "$0")/seccomp-lib.sh"

for v in daemon sim ctl loader profile; do
	if [ -z "${!v}" ] || [ ! -e "${!v}" ]; then die "\$$v is unset or names no file (run through ctest)"; fi
done

dir=$(mktemp -d /tmp/cudackpt-seccomp-exec.XXXXXX)
sock=$dir/sock
dpid=""
target=""

stop_daemon() {
	[ -n "$dpid" ] || return 0
	kill "$dpid" 2>/dev/null || true
	wait "$dpid" 2>/dev/null || true
	dpid=""
}

cleanup() { seccomp_cleanup $? stop_daemon tail -n 40; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# TAG LOADER-ARGS...: the daemon on the simulator through the loader, its
# log $dir/daemon-TAG.log (dpid).  Returns 0 once it answers, 1 if it does
# not within 10 s.
start() {
	local tag=$1
	shift
	rm -f "$sock"
	# LeakSanitizer ptraces the daemon at its exit (an ASan build's, not the
	# daemon's own call): leaks are checked by the other suites.
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "$loader" "$@" -- "$daemon" --socket="$sock" --driver="$sim" --log-level=debug \
		</dev/null >"$dir/daemon-$tag.log" 2>&1 &
	dpid=$!
	local end=$((SECONDS + 10))
	while [ "$SECONDS" -lt "$end" ]; do
		timeout 5 "$ctl" --socket="$sock" --timeout=1000 info >/dev/null 2>&1 && return 0
		kill -0 "$dpid" 2>/dev/null || break
		sleep 0.05
	done
	return 1
}

env CUDACKPT_SIM=1 CUDACKPT_SIM_MEM_MIB=64 sleep 1000 &
target=$!
for _ in $(seq 200); do [ "$(cat /proc/$target/comm 2>/dev/null)" = sleep ] && break; sleep 0.05; done

python3 - "$profile" "$dir/nopidfd.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
for rule in p["syscalls"]:
    rule["names"] = [n for n in rule["names"] if n != "pidfd_open"]
json.dump(p, open(sys.argv[2], "w"))
EOF

# 1. Enforced.
start enforced --profile="$profile" || die "the daemon under $profile did not answer within 10 s"
if [ "$(readlink "/proc/$dpid/exe")" = "$(readlink -f "$daemon")" ]; then
	pass "enforced: the daemon runs in the loader's place (pid $dpid)"
else
	fail "enforced: pid $dpid is $(readlink "/proc/$dpid/exe"), not the daemon"
fi
calls enforced
stop_daemon

# 2. Reporting, the whole profile: nothing to report.
start report --profile="$profile" --report="$dir/report.txt" || die "the daemon reporting on $profile did not answer"
calls report
stop_daemon
if [ -e "$dir/report.txt" ] && [ ! -s "$dir/report.txt" ]; then
	pass "report: the profile refused no call the daemon made"
else
	fail "report: the profile refuses: $(tr '\n' ' ' <"$dir/report.txt" 2>/dev/null || echo '(no report)')"
fi

# 3. Reporting, the profile less pidfd_open: acts, and names it.
start report-nopidfd --profile="$dir/nopidfd.json" --report="$dir/report-nopidfd.txt" ||
	die "the daemon reporting on the profile less pidfd_open did not answer"
expect "report less pidfd_open: suspend" '^checkpointed \(' "$ctl" --socket="$sock" suspend "$target"
expect "report less pidfd_open: resume" '^running \(' "$ctl" --socket="$sock" resume "$target"
stop_daemon
if [ "$(cat "$dir/report-nopidfd.txt" 2>/dev/null)" = pidfd_open ]; then
	pass "report less pidfd_open: the report names pidfd_open alone"
else
	fail "report less pidfd_open: the report is $(tr '\n' ' ' <"$dir/report-nopidfd.txt" 2>/dev/null || echo '(none)')"
fi

# 4. Enforced, the profile less pidfd_open: refused.
start enforced-nopidfd --profile="$dir/nopidfd.json" || die "the daemon under the profile less pidfd_open did not answer"
expect "enforced less pidfd_open: state refused" 'PermissionDenied' "$ctl" --socket="$sock" state "$target"
stop_daemon
