#!/bin/bash
# tests/container/test-container.sh: integration.container, cudackptd
# serving a client inside a real container (podman with runc, a pid
# namespace of its own, the socket directory bind-mounted).
#
# The daemon runs on the host on the simulated driver.  In the container
# (in-container.sh) cudackptctl acts on the container's own simulated CUDA
# process by the pid the container sees, gets NotCudaProcess for a container
# process that is not a CUDA process, sees its own pid 1 (a simulated CUDA
# process) as pid 1, and gets NoSuchProcess for a host process, which the
# container cannot see, exactly as if it did not exist.  Back on the host:
# the host process was not touched, and the daemon's audit records name the
# container's process by its host pid.
#
# No registry is needed: the container's root file system is put together
# from the build tree (cudackptctl and the libraries ldd names, busybox)
# and run with `podman run --rootfs`, on a podman storage of the test's own
# under its temporary directory, so the machine's podman state is never used.
#
# Environment: CUDACKPT_TEST_DAEMON, CUDACKPT_TEST_SIM, CUDACKPT_TEST_CTL (the
# paths of cudackptd, libcudackpt-sim.so, cudackptctl; ctest sets them);
# CUDACKPT_TEST_BUSYBOX (default /bin/busybox), CUDACKPT_TEST_RUNC (default
# /usr/sbin/runc); CUDACKPT_TEST_KEEP=1 keeps the temporary directory.
# Exit: 0 all passed, 1 a check failed or the set-up broke, 77 not root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
daemon=${CUDACKPT_TEST_DAEMON:-}
sim=${CUDACKPT_TEST_SIM:-}
ctl=${CUDACKPT_TEST_CTL:-}
busybox=${CUDACKPT_TEST_BUSYBOX:-/bin/busybox}
runc=${CUDACKPT_TEST_RUNC:-/usr/sbin/runc}

passed=0
failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
# The set-up broke: no point in going on.
die() {
	echo "FAIL: $*"
	failed=$((failed + 1))
	exit 1
}

if [ "$(id -u)" != 0 ]; then
	echo "SKIP: integration.container needs root (podman with runc, a root daemon)"
	exit 77
fi
dir=$(mktemp -d /tmp/cudackpt-ctest.XXXXXX)
name=cudackpt-ctest-$$-${dir##*.}
daemon_pid=""
host_pid=""
run_pid=""

# podman on a storage of our own (podman-lib.sh).
. "$(dirname "${BASH_SOURCE[0]}")/podman-lib.sh"
podman_setup "$dir" "$runc"

cleanup() {
	local rc=$? cid="" d m f shown
	set +e
	touch "$dir/sync/go" 2>/dev/null
	if [ -n "$run_pid" ] && kill -0 "$run_pid" 2>/dev/null; then
		# The container's script ends within a second of /sync/go.
		for _ in $(seq 50); do kill -0 "$run_pid" 2>/dev/null || break; sleep 0.1; done
	fi
	[ -s "$dir/cid" ] && cid=$(cat "$dir/cid")
	if [ -d "$dir/storage" ]; then
		timeout -k 5 60 "${podman[@]}" rm -f -t 0 --ignore "$name" >/dev/null 2>&1
	fi
	if [ -n "$run_pid" ]; then
		kill "$run_pid" 2>/dev/null
		wait "$run_pid" 2>/dev/null
	fi
	# What runc leaves behind when podman is killed midway: the container's
	# cgroups (empty once it is gone).
	if [ -n "$cid" ]; then
		for d in /sys/fs/cgroup/libpod_parent/libpod-"$cid" /sys/fs/cgroup/*/libpod_parent/libpod-"$cid"; do
			[ -d "$d" ] && rmdir "$d" 2>/dev/null
		done
	fi
	if [ -n "$host_pid" ]; then
		kill "$host_pid" 2>/dev/null
		wait "$host_pid" 2>/dev/null
	fi
	if [ -n "$daemon_pid" ]; then
		kill "$daemon_pid" 2>/dev/null
		for _ in $(seq 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.05; done
		kill -KILL "$daemon_pid" 2>/dev/null
		wait "$daemon_pid" 2>/dev/null
	fi
	if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then
		echo "FAIL: the test stopped early (exit status $rc)"
		failed=1
	fi
	if [ "$failed" != 0 ]; then
		shown=0
		for f in daemon.log container.out container.err; do
			[ -s "$dir/$f" ] || continue
			echo "----- $f -----"
			cat "$dir/$f"
			shown=1
		done
		[ "$shown" = 0 ] || echo "----- end -----"
	fi
	# Nothing under $dir should still be mounted; if something is (podman
	# killed midway), unmount it rather than fail to remove it.
	while read -r m; do
		umount -l "$m" 2>/dev/null
	done < <(findmnt -rn -o TARGET | grep -F "$dir/" | sort -r)
	if [ "${CUDACKPT_TEST_KEEP:-0}" = 1 ]; then
		echo "kept $dir"
	elif ! rm -rf "$dir"; then
		echo "FAIL: cannot remove $dir"
		failed=$((failed + 1))
	fi
	echo "$passed passed, $failed failed"
	if [ "$failed" != 0 ]; then
		exit 1
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

for v in daemon sim ctl; do
	[ -n "${!v}" ] && [ -e "${!v}" ] && continue
	die "\$CUDACKPT_TEST_${v^^} is unset or names no file (run this test through ctest)"
done
missing=""
command -v podman >/dev/null || missing="$missing podman"
[ -x "$runc" ] || missing="$missing runc($runc)"
[ -x "$busybox" ] || missing="$missing busybox-static($busybox)"
[ -z "$missing" ] ||
	die "missing:$missing; run \`make deps\` (as root) to install podman, runc and busybox-static"

# The exit statuses, as cudackptctl --help lists them ("10 NoSuchProcess").
help=$("$ctl" --help)
# VAR NAME: set VAR to the exit status of error NAME.
exit_of() {
	local n
	n=$(grep -oE "(^| )[0-9]+ $2( |\$)" <<<"$help" | head -n1 | tr -dc 0-9) || true
	[ -n "$n" ] || die "cudackptctl --help lists no exit status for $2"
	printf -v "$1" %s "$n"
}
exit_of EXIT_NO_SUCH_PROCESS NoSuchProcess
exit_of EXIT_NOT_CUDA_PROCESS NotCudaProcess

# The daemon and the host process die with this script, should it be
# killed (a ctest timeout) before its trap can end them.
orphan_guard=()
if [[ "$(setpriv --help 2>/dev/null || true)" == *--pdeathsig* ]]; then
	orphan_guard=(setpriv --pdeathsig KILL --)
fi

start=$SECONDS

# ---- the daemon ------------------------------------------------------------
mkdir -p "$dir/sock" "$dir/sync" "$dir/tmp" "$dir/libpod"
chmod 0755 "$dir" "$dir/sock"
sock=$dir/sock/io.cudackpt.Process
echo '{}' >"$dir/config.json"
"${orphan_guard[@]}" "$daemon" --socket="$sock" --driver="$sim" --config="$dir/config.json" 2>"$dir/daemon.log" &
daemon_pid=$!
up=0
for _ in $(seq 200); do
	if timeout 5 "$ctl" --socket="$sock" --timeout=2000 info >/dev/null 2>&1; then
		up=1
		break
	fi
	kill -0 "$daemon_pid" 2>/dev/null || break
	sleep 0.05
done
[ "$up" = 1 ] || die "cudackptd did not answer on $sock within 10 s"
pass "cudackptd answers on $sock"

# ---- a host CUDA process ---------------------------------------------------
"${orphan_guard[@]}" env CUDACKPT_SIM=1 CUDACKPT_SIM_MEM_MIB=64 sleep 1000 &
host_pid=$!
# Until it has exec'd sleep (its environment is then the simulator's cue).
for _ in $(seq 200); do
	[ "$(cat /proc/$host_pid/comm 2>/dev/null)" = sleep ] && break
	sleep 0.05
done
out=$(timeout 30 "$ctl" --socket="$sock" state "$host_pid" 2>&1) || true
[ "$out" = running ] || die "host process $host_pid: state \"$out\", not running"

# ---- the container's root file system --------------------------------------
root=$dir/rootfs
mkdir -p "$root/bin" "$root/usr/bin" "$root/tmp" "$root/run/cudackpt" "$root/sync"
# FILE DEST: copy FILE to DEST in the root, with every library ldd names for
# it at the same path (the dynamic loader included).
put() {
	local lib libs
	cp -L "$1" "$root$2"
	libs=$(ldd "$1" 2>&1) || true
	if grep -q 'not found' <<<"$libs"; then
		die "ldd $1: $libs"
	fi
	# "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)"
	{ grep -oE '(^|[[:space:]])/[^[:space:]]+' <<<"$libs" || true; } | while read -r lib; do
		[ -e "$root$lib" ] && continue
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
}
put "$ctl" /usr/bin/cudackptctl
put "$busybox" /bin/busybox
# The applets in-container.sh runs (/bin/sleep by its path) and a few to
# look around with (CUDACKPT_TEST_KEEP=1, then podman run ... /bin/sh).
for applet in sh sleep cat tr readlink mv kill ls ps env id; do
	ln -s busybox "$root/bin/$applet"
done
cp "$here/in-container.sh" "$root/in-container.sh"
chmod 0755 "$root/in-container.sh"

# ---- the container -----------------------------------------------------------
host_ns=$(readlink /proc/self/ns/pid)
timeout -k 10 180 "${podman[@]}" run --rm --name "$name" --cidfile "$dir/cid" \
		--network none --ipc private --log-driver k8s-file \
		--ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
		-v "$dir/sock:/run/cudackpt" -v "$dir/sync:/sync" \
		-e CUDACKPT_SOCKET=/run/cudackpt/io.cudackpt.Process \
		-e HOSTPID="$host_pid" -e CUDACKPT_SIM=1 -e CUDACKPT_SIM_MEM_MIB=16 \
		--rootfs "$root" /bin/sh /in-container.sh \
		</dev/null >"$dir/container.out" 2>"$dir/container.err" &
run_pid=$!

# While the container waits on /sync/go: the host pid of its CUDA process,
# the one whose innermost pid (NSpid's last field) is the one it reported,
# in the container's pid namespace.
ready=0
for _ in $(seq 1200); do
	[ -e "$dir/sync/ready" ] && { ready=1; break; }
	kill -0 "$run_pid" 2>/dev/null || break
	sleep 0.1
done
ctr_cuda=""
ctr_ns=""
ctr_cuda_host=""
if [ "$ready" = 1 ]; then
	read -r ctr_cuda ctr_ns <"$dir/sync/ready"
	# Without a fork per process (a fork costs ~10 ms on a small VM).
	for st in /proc/[0-9]*/status; do
		nspid=""
		{
			while read -r key rest; do
				if [ "$key" = NSpid: ]; then
					nspid=${rest##*[[:space:]]}
					break
				fi
			done <"$st"
		} 2>/dev/null || continue
		[ "$nspid" = "$ctr_cuda" ] || continue
		p=${st#/proc/}
		p=${p%/status}
		if [ "$(readlink "/proc/$p/ns/pid" 2>/dev/null)" = "$ctr_ns" ]; then
			ctr_cuda_host=$p
			break
		fi
	done
fi
touch "$dir/sync/go"
run_rc=0
wait "$run_pid" || run_rc=$?
run_pid=""

if [ "$run_rc" = 0 ] && grep -qx E "$dir/container.out"; then
	pass "the container ran to its end (podman run, runc, pid namespace, socket mount)"
else
	fail "podman run exited with $run_rc$(grep -qx E "$dir/container.out" || echo ', the script did not reach its end')"
fi
if [ -n "$ctr_ns" ] && [ "$ctr_ns" != "$host_ns" ]; then
	pass "the container has a pid namespace of its own ($ctr_ns, the host's is $host_ns)"
else
	fail "the container's pid namespace (${ctr_ns:-unknown}) is not one of its own (the host's is $host_ns)"
fi
while read -r line; do
	fail "container: ${line#X }"
done < <(grep '^X ' "$dir/container.out" || true)

# ---- the container's results -------------------------------------------------
# NAME: "RC TEXT" of that call, empty if it was not reported.
result() { sed -n "s/^R $1 //p" "$dir/container.out" | head -n1; }
# NAME RC REGEX WHAT: the call NAME exited RC with text matching REGEX.
expect() {
	local r rc text
	r=$(result "$1")
	if [ -z "$r" ]; then
		fail "$4: not reported by the container"
		return
	fi
	rc=${r%% *}
	text=${r#* }
	text=${text% }
	if [ "$rc" = "$2" ] && [[ "$text" =~ $3 ]]; then
		pass "$4: exit $rc, \"$text\""
	else
		fail "$4: exit $rc, \"$text\" (wanted exit $2 and /$3/)"
	fi
}
pid_of() { sed -n "s/^P $1 //p" "$dir/container.out" | head -n1; }
cuda=$(pid_of cuda)

expect info 0 'cudackpt' "cudackptctl info inside the container"
expect state-running 0 '^running$' "state of the container's own process by its container pid $cuda"
expect suspend 0 '^checkpointed ' "suspend of the container's own process by its container pid $cuda"
expect state-checkpointed 0 '^checkpointed$' "state of the container's own process after suspend"
expect resume 0 '^running ' "resume of the container's own process by its container pid $cuda"
expect json-state 0 "^\\{.*\"pid\":${cuda}[,}].*\"state\":\"running\"|^\\{.*\"state\":\"running\".*\"pid\":${cuda}[,}]" \
	"--json state: the reply's pid is the container pid $cuda"
expect not-cuda "$EXIT_NOT_CUDA_PROCESS" 'NotCudaProcess' \
	"a container process that is no CUDA process, by its container pid $(pid_of plain): NotCudaProcess"
expect pid1 0 '^running$' "pid 1 is the container's pid 1 (a simulated CUDA process), not the host's init"
expect host-state "$EXIT_NO_SUCH_PROCESS" 'NoSuchProcess' "state of host process $host_pid from the container: NoSuchProcess"
expect host-suspend "$EXIT_NO_SUCH_PROCESS" 'NoSuchProcess' "suspend of host process $host_pid from the container: NoSuchProcess"

# ---- back on the host ----------------------------------------------------------
out=$(timeout 30 "$ctl" --socket="$sock" state "$host_pid" 2>&1) || true
if [ "$out" = running ]; then
	pass "the host process $host_pid is still running"
else
	fail "the host process $host_pid is \"$out\", not running (the container acted on it)"
fi

# The audit records of the container's Suspend and Resume name its process
# by its host pid.
if [ -z "$ctr_cuda_host" ]; then
	fail "found no host pid for the container's CUDA process ${ctr_cuda:-?} (in ${ctr_ns:-?})"
else
	for m in Suspend Resume; do
		# (No grep -q at the end of a pipe: under pipefail, the SIGPIPE of
		# the grep before it would read as no match.)
		hits=$(grep ' audit: ' "$dir/daemon.log" | grep -E "(^| )method=$m( |$)" |
			grep -E "(^| )target_pid=$ctr_cuda_host( |$)" | grep -E '(^| )result=ok( |$)' || true)
		if [ -n "$hits" ]; then
			pass "audit: $m of the container's process by its host pid $ctr_cuda_host"
		else
			fail "audit: no successful $m with target_pid=$ctr_cuda_host (the container's process $ctr_cuda): $(grep -E " audit: .*method=$m( |$)" "$dir/daemon.log" | tr '\n' ' ')"
		fi
	done
fi

echo "took $((SECONDS - start)) s"
