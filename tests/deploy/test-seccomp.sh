#!/bin/bash
# tests/deploy/test-seccomp.sh: deploy.seccomp, the DaemonSet's seccomp
# profile (deploy/kubernetes/seccomp/cudackptd.json) enforced by a real
# runtime on the daemon it is for.
#
# cudackptd runs on the simulated driver in a container (podman with runc)
# as the DaemonSet runs it: the host's pid namespace, root with only the
# four capabilities, no new privileges, a read-only root, the socket's
# directory and tracefs mounted, and --security-opt seccomp=PROFILE.  From
# the host, cudackptctl then makes the usual calls on a simulated CUDA
# process (state, suspend, resume, their group forms, metrics), and the
# daemon must say its process index is ready (bpf and perf_event_open
# allowed; process_index_tracepoint is set, for kernels without fentry).  The same profile less bpf must leave the daemon without its
# index, refused with EPERM: the runtime does enforce the file.
#
# Not covered here: the DaemonSet's `nsenter --cgroup=/proc/1/ns/cgroup`
# wrapper (where pid 1 is another user namespace's, as on some CI machines,
# nsenter cannot open it even unconfined), and the real driver's calls
# (ioctl, mmap, mbind, ... all in @system-service; see docs/kubernetes.md).
#
# Environment: CUDACKPT_TEST_DAEMON, CUDACKPT_TEST_SIM, CUDACKPT_TEST_CTL
# (ctest sets them), CUDACKPT_TEST_PROFILE (the profile), CUDACKPT_TEST_RUNC
# (default /usr/sbin/runc), CUDACKPT_TEST_KEEP=1 keeps the directory.
# Exit: 0 all passed, 1 a check failed, 77 not root or no podman/runc.
set -euo pipefail

daemon=${CUDACKPT_TEST_DAEMON:-}
sim=${CUDACKPT_TEST_SIM:-}
ctl=${CUDACKPT_TEST_CTL:-}
profile=${CUDACKPT_TEST_PROFILE:-}
runc=${CUDACKPT_TEST_RUNC:-/usr/sbin/runc}

# PASS/FAIL, expect and the usual calls.
# shellcheck source=tests/deploy/seccomp-lib.sh
. "$(dirname "$0")/seccomp-lib.sh"

if [ "$(id -u)" != 0 ]; then
	echo "SKIP: deploy.seccomp needs root (podman with runc, a root daemon)"
	exit 77
fi
if ! command -v podman >/dev/null || [ ! -x "$runc" ]; then
	echo "SKIP: deploy.seccomp needs podman and runc ($runc): make deps"
	exit 77
fi
for v in daemon sim ctl profile; do
	[ -n "${!v}" ] && [ -e "${!v}" ] || die "\$CUDACKPT_TEST_${v^^} is unset or names no file (run through ctest)"
done

dir=$(mktemp -d /tmp/cudackpt-seccomp.XXXXXX)
chmod 0755 "$dir"
mkdir -p "$dir/sock" "$dir/tmp" "$dir/libpod" "$dir/root/usr/sbin" "$dir/root/lib" "$dir/root/run/cudackpt" \
	"$dir/root/tmp" "$dir/root/sys/kernel/tracing"
sock=$dir/sock/io.cudackpt.Process
target=""
name=""
# podman on a storage of our own (../container/podman-lib.sh).
. "$(dirname "${BASH_SOURCE[0]}")/../container/podman-lib.sh"
podman_setup "$dir" "$runc"

stop_container() {
	[ -n "$name" ] || return 0
	timeout -k 5 60 "${podman[@]}" rm -f -t 10 --ignore "$name" >/dev/null 2>&1 || true
	[ -z "${run_pid:-}" ] || wait "$run_pid" 2>/dev/null || true
	name=""
	run_pid=""
}

# The container, then the mounts left under $dir (lazily: a process may
# still hold one).
stop_all() {
	local m
	stop_container
	while read -r m; do umount -l "$m" 2>/dev/null; done < <(findmnt -rn -o TARGET | grep -F "$dir/" | sort -r)
}

cleanup() { seccomp_cleanup $? stop_all cat; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# FILE DEST: FILE at DEST in the container's root, with the libraries ldd names.
put() {
	local lib
	cp -L "$1" "$dir/root$2"
	{ ldd "$1" 2>/dev/null | grep -oE '(^|[[:space:]])/[^[:space:]]+' || true; } | while read -r lib; do
		[ -e "$dir/root$lib" ] && continue
		mkdir -p "$dir/root$(dirname "$lib")"
		cp -L "$lib" "$dir/root$lib"
	done
}
put "$daemon" /usr/sbin/cudackptd
put "$sim" /lib/libcudackpt-sim.so

# The index on the tracepoint (perf_event_open, tracefs) where the kernel
# has no BPF trampolines; on fentry (bpf alone) where it has.
echo '{"process_index_tracepoint": true}' >"$dir/config.json"
tracefs=()
if mountpoint -q /sys/kernel/tracing; then
	tracefs=(-v /sys/kernel/tracing:/sys/kernel/tracing:ro)
fi

# PROFILE TAG: start the daemon in a container under PROFILE; its log is
# $dir/daemon-TAG.log.  Returns once it answers (or fails the test).
start() {
	name=cudackpt-seccomp-$$-$2
	rm -f "$sock"
	"${podman[@]}" run --rm --name "$name" --pid host --network none --read-only --user 0:0 \
		--ulimit nofile=4096:4096 --ulimit nproc=1024:1024 \
		--cap-drop all --cap-add SYS_PTRACE,DAC_READ_SEARCH,KILL,SYS_ADMIN \
		--security-opt no-new-privileges --security-opt seccomp="$1" \
		-v "$dir/sock:/run/cudackpt" -v "$dir/config.json:/etc/cudackpt/cudackptd.json:ro" "${tracefs[@]}" \
		--rootfs "$dir/root" /usr/sbin/cudackptd --socket=/run/cudackpt/io.cudackpt.Process \
		--config=/etc/cudackpt/cudackptd.json --driver=/lib/libcudackpt-sim.so \
		</dev/null >"$dir/daemon-$2.log" 2>&1 &
	run_pid=$!
	for _ in $(seq 600); do
		timeout 5 "$ctl" --socket="$sock" --timeout=2000 info >/dev/null 2>&1 && return 0
		kill -0 "$run_pid" 2>/dev/null || break
		sleep 0.05
	done
	die "cudackptd under $1 did not answer within 30 s"
}

env CUDACKPT_SIM=1 CUDACKPT_SIM_MEM_MIB=64 sleep 1000 &
target=$!
for _ in $(seq 200); do [ "$(cat /proc/$target/comm 2>/dev/null)" = sleep ] && break; sleep 0.05; done

start "$profile" full
pass "cudackptd starts under $profile and answers GetInfo"
calls ""
if grep -q 'Process index ready (BPF' "$dir/daemon-full.log"; then
	pass "the process index loaded its BPF program under the profile (bpf, perf_event_open)"
else
	fail "no BPF process index under the profile: $(grep -i 'index' "$dir/daemon-full.log")"
fi
if grep -qi 'Operation not permitted' "$dir/daemon-full.log"; then
	fail "a call was refused under the profile: $(grep -i 'Operation not permitted' "$dir/daemon-full.log")"
fi
stop_container

# The same profile less bpf: the runtime enforces the file.
python3 - "$profile" "$dir/nobpf.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
for rule in p["syscalls"]:
    rule["names"] = [n for n in rule["names"] if n != "bpf"]
json.dump(p, open(sys.argv[2], "w"))
EOF
start "$dir/nobpf.json" nobpf
expect "state under the profile less bpf" '^running$' "$ctl" --socket="$sock" state "$target"
if grep -q 'No process index.*Operation not permitted' "$dir/daemon-nobpf.log"; then
	pass "without bpf in the profile, the kernel refused the index's program with EPERM"
else
	fail "the profile less bpf did not take the index away: $(grep -i 'index' "$dir/daemon-nobpf.log")"
fi
