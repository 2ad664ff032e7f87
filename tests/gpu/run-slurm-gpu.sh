#!/usr/bin/env bash
# run-slurm-gpu.sh: issue 33's GPU proof (tests/gpu/slurm_gpu.py): Debian's
# Slurm installed here from .gpu/slurm-debian.tar.gz (install-slurm-gpu.sh),
# then a one-node cluster whose node daemon runs on this machine's GPU.
#
# usage (repository root on the GPU machine, after tests/gpu/stage-gpu.sh
# here; carry [".gpu"]): bash tests/gpu/run-slurm-gpu.sh [jobset]
# (jobset: slurm_jobset_gpu.py, a job on two nodes saved whole, instead)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bash "$ROOT/tests/gpu/install-slurm-gpu.sh" || exit $?
# A cgroup v2 host without systemd (the GPU machine): slurmd's cgroup/v2
# plugin (slurmcluster.py's cgroup.conf: IgnoreSystemd) makes the stepds'
# cgroup under system.slice and needs the controllers delegated to it. A
# cgroup with processes delegates none (cgroup v2's no-internal-process
# rule, which a namespace's root obeys too): the processes of the root go
# to init.scope first, as systemd would have put them.
CG=/sys/fs/cgroup
if [[ $(stat -f -c %T $CG) == cgroup2fs ]]; then
        mkdir -p $CG/init.scope
        for p in $(cat $CG/cgroup.procs); do echo "$p" >$CG/init.scope/cgroup.procs 2>/dev/null; done
        for c in cpuset cpu memory pids; do echo "+$c" >$CG/cgroup.subtree_control 2>/dev/null; done
        mkdir -p $CG/system.slice # where slurmd makes the stepds' scope
        for c in cpuset cpu memory pids; do echo "+$c" >$CG/system.slice/cgroup.subtree_control 2>/dev/null; done
        echo "cgroup v2: controllers $(cat $CG/cgroup.controllers), delegated $(cat $CG/cgroup.subtree_control), root's processes left: $(wc -l <$CG/cgroup.procs)"
fi
# jobset: CRIU's network lock and the daemon's undoing of it run iptables
# from the system's paths; a GPU machine without it gets the one
# stage-gpu.sh carried, installed there (the machine is the test's).
IPT=$ROOT/.gpu/iptables
if [[ ${1:-} == jobset && -d $IPT ]] && ! command -v iptables >/dev/null; then
        cp -a "$IPT"/bin/* /usr/sbin/
        cp -a "$IPT"/lib/* /usr/lib/x86_64-linux-gnu/
        cp -a "$IPT"/xtables /usr/lib/x86_64-linux-gnu/
        ldconfig
        echo "iptables installed from .gpu/iptables: $(iptables --version)"
fi
CUDACKPT_TEST_SLURM=required exec python3 "$ROOT/tests/gpu/slurm_${1:+${1}_}gpu.py"
