# tests/deploy/seccomp-lib.sh: what test-seccomp.sh and test-seccomp-exec.sh
# share, sourced by both: the PASS/FAIL tally and the usual calls on a
# simulated CUDA process.  The caller sets ctl (cudackptctl), sock (the
# daemon's socket) and target (the process's pid).

passed=0
failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
die() { fail "$*"; exit 1; }

# WHAT WANT CMD...: CMD's output (both streams) must match WANT.
expect() {
	local what=$1 want=$2 out
	shift 2
	out=$(timeout 30 "$@" 2>&1) || true
	if [[ "$out" =~ $want ]]; then pass "$what: ${BASH_REMATCH[0]:-ok}"; else fail "$what: \"$out\", wanted /$want/"; fi
}

# [TAG]: the usual calls on the target (state, suspend, resume, a lease,
# the group forms, metrics, ps), each named after "TAG: ".  The daemon is
# a fresh one: metrics counts this Suspend as its first.
calls() {
	local p=${1:+$1: } c=("$ctl" --socket="$sock")
	expect "${p}state" '^running$' "${c[@]}" state "$target"
	expect "${p}suspend" '^checkpointed \(' "${c[@]}" suspend "$target"
	expect "${p}state after suspend" '^checkpointed$' "${c[@]}" state "$target"
	expect "${p}resume" '^running \(' "${c[@]}" resume "$target"
	expect "${p}lock with a lease" 'locked' "${c[@]}" lock --lease-ms=600000 "$target"
	expect "${p}unlock" '^running \(' "${c[@]}" unlock "$target"
	expect "${p}suspend --pids (a group)" 'checkpointed' "${c[@]}" suspend --pids="$target"
	expect "${p}resume --pids (a group)" 'running' "${c[@]}" resume --pids="$target"
	expect "${p}metrics" 'cudackpt_operations_total\{method="Suspend",result="ok"\} 1' "${c[@]}" metrics
	expect "${p}ps" "" "${c[@]}" ps
}

# RC STOP SHOW...: the EXIT trap of both tests, called with the exit status
# the trap found: STOP stops what the test started (the daemon, or the
# container and its mounts), the target goes, the daemon logs are shown
# with SHOW (a command given the log file) where a check failed, $dir goes
# (kept with CUDACKPT_TEST_KEEP=1), and the tally decides the status.
seccomp_cleanup() {
	local rc=$1 stop=$2 f
	shift 2
	set +e
	"$stop"
	[ -z "$target" ] || { kill "$target"; wait "$target"; } 2>/dev/null
	if [ "$failed" != 0 ]; then
		for f in "$dir"/daemon-*.log; do
			[ -s "$f" ] && { echo "----- ${f##*/} -----"; "$@" "$f"; }
		done
	fi
	if [ "${CUDACKPT_TEST_KEEP:-0}" = 1 ]; then echo "kept $dir"; else rm -rf "$dir"; fi
	[ "$rc" = 0 ] || [ "$failed" != 0 ] || failed=1
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ] || exit 1
	exit "$rc"
}
