#!/bin/sh
# tests/container/in-container.sh: the client side of integration.container,
# run by busybox sh as pid 1 of a container in a pid namespace of its own,
# with the daemon's socket directory mounted at /run/cudackpt.  It acts on
# processes through cudackptctl and reports one line per call; the host
# side (test-container.sh) judges them, so this script checks nothing itself.
#
# Environment, from the host:
#   CUDACKPT_SIM=1 CUDACKPT_SIM_MEM_MIB=16  put in pid 1's environment, so
#                        that this shell, the container's pid 1, is a
#                        simulated CUDA process; unset below for its children
#   CUDACKPT_SOCKET      the daemon's socket as mounted here
#   HOSTPID              a host process, a simulated CUDA process too
# A directory of the host is mounted at /sync: this script writes
# /sync/ready ("CONTAINER-PID PID-NAMESPACE") once every call is made, while
# its processes still live, then waits (at most 60 s) for /sync/go, so the
# host can find the host pid of its CUDA process meanwhile.
#
# Output lines:
#   P NAME PID       a process started here, by the pid it has here
#   R NAME RC TEXT   cudackptctl's exit status and output (stdout and stderr,
#                    newlines as spaces)
#   E                the end: every line above was written
unset CUDACKPT_SIM CUDACKPT_SIM_MEM_MIB
PATH=/usr/bin:/bin
export PATH

# NAME ARGS...: run cudackptctl ARGS, report it as NAME.
ctl() {
	name=$1
	shift
	out=$(cudackptctl --timeout=20000 "$@" 2>&1)
	rc=$?
	echo "R $name $rc $(printf '%s' "$out" | tr '\n' ' ')"
}

# PID: wait (at most 10 s) until PID has exec'd /bin/sleep: its
# /proc/PID/environ, which the simulator reads, is then the new one.
await_sleep() {
	i=0
	while [ "$(cat "/proc/$1/comm" 2>/dev/null)" != sleep ]; do
		i=$((i + 1))
		[ $i -le 200 ] || return 1
		sleep 0.05
	done
}

# /bin/sleep by its path: a real exec (busybox sh would run the applet
# "sleep" in a forked copy of itself, with the shell's environment).
CUDACKPT_SIM=1 CUDACKPT_SIM_MEM_MIB=64 /bin/sleep 1000 &
cuda=$!
/bin/sleep 1000 &
plain=$!
await_sleep $cuda || echo "X cuda process $cuda never exec'd sleep"
await_sleep $plain || echo "X plain process $plain never exec'd sleep"
echo "P self $$"
echo "P cuda $cuda"
echo "P plain $plain"

ctl info info
ctl state-running state $cuda
ctl suspend suspend $cuda
ctl state-checkpointed state $cuda
ctl resume resume $cuda
ctl json-state --json state $cuda
ctl not-cuda state $plain
ctl pid1 state 1
ctl host-state state "$HOSTPID"
ctl host-suspend suspend "$HOSTPID"

echo "$cuda $(readlink /proc/self/ns/pid)" >/sync/ready.tmp && mv /sync/ready.tmp /sync/ready
i=0
while [ ! -e /sync/go ] && [ $i -lt 600 ]; do
	i=$((i + 1))
	sleep 0.1
done
kill $cuda $plain 2>/dev/null
wait
echo E
