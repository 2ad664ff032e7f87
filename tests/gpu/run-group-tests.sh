#!/usr/bin/env bash
# run-group-tests.sh: cudackptd's group methods (SuspendGroup, ResumeGroup on
# pids, a cgroup and a process tree; rollback of a group with a managed-memory
# member) and ListProcesses, proven on a real GPU.
#
# Checks that there is something to test on (as run-gpu-tests.sh does), then
# runs group_tests.py beside it with python3 (standard library only), which
# starts its own cudackptd and its own cudackpt-gpu-target processes, prints
# one PASS/FAIL/SKIP line per scenario, a markdown table and
# "N passed, N failed, N skipped".  Scenarios and sizes: see group_tests.py
# (or --help).
#
# Exit status: 0 all passed, 1 a scenario failed, 2 usage, 77 skipped (no GPU,
# driver < 580, no libcuda.so.1, target not built, not root, no python3; or
# every scenario skipped), so ctest (SKIP_RETURN_CODE 77) stays green without
# a GPU.
#
# usage: run-group-tests.sh --daemon=PATH --target=PATH [SCENARIO...]
#   or CUDACKPTD, CUDACKPT_GPU_TARGET.  Environment: CUDACKPT_GROUP_* (sizes,
#   timeouts; see group_tests.py), CUDACKPT_GROUP_DRIVER=libcuda.so.1.
# Simulator dry run (any machine; the cgroup scenario needs root):
#   CUDACKPT_GROUP_SIM=PATH/libcudackpt-sim.so run-group-tests.sh \
#       --daemon=B/daemon/cudackptd --target=B/tests/gpu/cudackpt-gpu-standin
# On the GPU machine (binaries staged by stage-gpu.sh), from the repository
# root:
#   export LD_LIBRARY_PATH=$PWD/.gpu; bash .gpu/build-target.sh
#   bash tests/gpu/run-group-tests.sh --daemon=.gpu/cudackptd --target=.gpu/cudackpt-gpu-target
# (or all of issue 11's GPU work at once: run-group-gpu.sh).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SIM=${CUDACKPT_GROUP_SIM:-}
DRIVER=${CUDACKPT_GROUP_DRIVER:-libcuda.so.1}
TARGET=${CUDACKPT_GPU_TARGET:-}
for arg in "$@"; do
        case $arg in
        --target=*) TARGET=${arg#*=} ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
        esac
done

skip() {
        echo "SKIP: group GPU tests not run: $*"
        exit 77
}
command -v python3 >/dev/null 2>&1 || skip "python3 not found"
if [[ -n $SIM ]]; then
        [[ -r $SIM ]] || skip "CUDACKPT_GROUP_SIM=$SIM: no such file"
        [[ -n $TARGET && -x $TARGET ]] || skip "stand-in target not built: '$TARGET'"
        exec python3 "$HERE/group_tests.py" --sim="$SIM" "$@"
fi
. "$HERE/gpu-preflight.sh"
gpu_preflight
if [[ $DRIVER == */* ]]; then
        [[ -r $DRIVER ]] || skip "$DRIVER not found"
elif ! { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true; } | grep -qF "$DRIVER "; then
        found=0
        for d in ${LD_LIBRARY_PATH//:/ }; do [[ -e $d/$DRIVER ]] && found=1; done
        ((found)) || skip "$DRIVER not found (ldconfig -p, LD_LIBRARY_PATH)"
fi
[[ -n $TARGET && -x $TARGET ]] || skip "GPU target program not built (nvcc not found when configuring?): '$TARGET'"
[[ $(id -u) -eq 0 ]] || skip "must run as root (it starts cudackptd and makes a cgroup)"
echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | sed -n 1p), driver $DRIVER_VERSION, kernel $(uname -r)"
exec python3 "$HERE/group_tests.py" "$@"
