#!/usr/bin/env bash
# run-cuda-python-ckpt.sh: issue 30 on the GPU machine.  cuda-python's own
# tests of cuda.core.checkpoint (cuda_core/tests/test_checkpoint.py of
# NVIDIA/cuda-python, Apache-2.0) run twice:
#   cuda.core  the file as it is: the driver, through cuda.core;
#   cudackpt   the same file with its one import line
#                from cuda.core import Device, checkpoint
#              made
#                from cuda.core import Device
#                from cudackpt import checkpoint
#              and nothing else changed: the daemon, through the drop-in.
# Every test must end the same way both times (passed, skipped, failed), and
# none may fail.
#
# The test file is cuda-python's, not this project's: it is not in this
# repository.  Give its path as the first argument or CUDA_PYTHON_TEST
# (default .gpu/cuda-python/test_checkpoint.py, carried with .gpu), e.g.
# the file at
#   https://github.com/NVIDIA/cuda-python/blob/main/cuda_core/tests/test_checkpoint.py
# (its versions for cuda-core 1.2 and later).  A version whose tests use
# cuda-python's init_cuda fixture gets a stand-in conftest.py (below)
# unless CUDA_PYTHON_CONFTEST names theirs.
#
# For the GPU machine (Python with cuda.core and pytest; the daemon staged
# by stage-gpu.sh in .gpu/, carried):
#   bash tests/gpu/run-cuda-python-ckpt.sh [TEST_FILE]
# PYTHON=... picks the interpreter (python3).  Its scenarios start child
# interpreters with "python -I", which ignores PYTHONPATH: the package is
# put on a virtual environment's path (a .pth file) made over PYTHON's
# site-packages.  Exits 0 when every test ended the same way twice and none
# failed; prints one line per test (SAME or DIFF), then PASS or FAIL.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-python3}
. "$ROOT/tests/gpu/staged-daemon.sh"
TEST_FILE=${1:-${CUDA_PYTHON_TEST:-$DIR/cuda-python/test_checkpoint.py}}
[[ -f $TEST_FILE ]] || { echo "FAIL no cuda-python test file at $TEST_FILE (see this script's header)"; exit 2; }
import_line='from cuda.core import Device, checkpoint'
if [[ $(grep -cx "$import_line" "$TEST_FILE") != 1 ]]; then
        echo "FAIL $TEST_FILE has not exactly one line \"$import_line\" to change"; exit 2
fi
staged_daemon_start run-cuda-python-ckpt

# The interpreter the scenarios' children run too, with the package on its path.
"$PYTHON" -m venv --system-site-packages "$WORK/venv" || { echo "FAIL $PYTHON -m venv"; exit 1; }
VPY=$WORK/venv/bin/python
site=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# PYTHON may itself be a virtual environment's (its packages then are not the
# system's): every directory of its own path goes on the new one's too.
"$PYTHON" -c 'import sys; print("\n".join(p for p in sys.path if p))' >"$site/cudackpt-base.pth"
echo "$ROOT/python" >"$site/cudackpt-tree.pth"
"$VPY" -I -c 'import cuda.core, pytest, cudackpt; print("cuda.core", cuda.core.__version__, "pytest", pytest.__version__, "cudackpt", cudackpt.__file__)' ||
        { echo "FAIL cuda.core, pytest or cudackpt cannot be imported by $VPY"; exit 1; }

# Two copies, each in a directory of its own: as given, and with the import line changed.
mkdir -p "$WORK/cuda.core" "$WORK/cudackpt"
cp "$TEST_FILE" "$WORK/cuda.core/test_checkpoint.py"
sed "s/^$import_line\$/from cuda.core import Device\nfrom cudackpt import checkpoint/" "$TEST_FILE" \
        >"$WORK/cudackpt/test_checkpoint.py"
if [[ $(diff "$TEST_FILE" "$WORK/cudackpt/test_checkpoint.py" | grep -c '^[<>]') != 3 ]]; then
        echo "FAIL the drop-in copy differs by more than its import line"; exit 1
fi
for side in cuda.core cudackpt; do
        if [[ -n ${CUDA_PYTHON_CONFTEST:-} ]]; then
                cp "$CUDA_PYTHON_CONFTEST" "$WORK/$side/conftest.py"
        elif grep -q '\binit_cuda\b' "$TEST_FILE"; then
                # A stand-in for cuda-python's fixture: device 0 current for the test.
                cat >"$WORK/$side/conftest.py" <<'EOF'
import pytest
from cuda.core import Device


@pytest.fixture
def init_cuda():
    device = Device(0)
    device.set_current()
    yield device
EOF
        fi
done

rc=0
for side in cuda.core cudackpt; do
        echo "----- $side -----"
        (cd "$WORK/$side" && timeout 1800 "$VPY" -m pytest -p no:cacheprovider -q -rfEs \
                --junitxml="$WORK/$side.xml" test_checkpoint.py) 2>&1 | tail -n 25
        s=${PIPESTATUS[0]}
        ((s == 124)) && echo "FAIL $side: pytest ran past 30 minutes"
done

"$VPY" - "$WORK/cuda.core.xml" "$WORK/cudackpt.xml" <<'EOF' || rc=1
import sys
import xml.etree.ElementTree as ET


def outcomes(path):
    seen = {}
    for case in ET.parse(path).iter("testcase"):
        name = "%s::%s" % (case.get("classname", "").rsplit(".", 1)[-1], case.get("name"))
        kinds = {child.tag for child in case}
        seen[name] = ("failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed")
    return seen


try:
    core, ours = outcomes(sys.argv[1]), outcomes(sys.argv[2])
except (OSError, ET.ParseError) as e:
    print("FAIL no pytest results to compare: %s" % e)
    sys.exit(1)
same = True
for name in sorted(set(core) | set(ours)):
    a, b = core.get(name, "absent"), ours.get(name, "absent")
    same = same and a == b
    print("%s %-70s cuda.core=%-8s cudackpt=%s" % ("SAME" if a == b else "DIFF", name, a, b))
failed = [n for n, o in list(core.items()) + list(ours.items()) if o == "failed"]
count = {o: list(ours.values()).count(o) for o in ("passed", "skipped", "failed")}
print("cudackpt: %(passed)d passed, %(skipped)d skipped, %(failed)d failed" % count)
if same and not failed and core:
    print("PASS every one of %d tests ended the same way through the daemon as through cuda.core" % len(core))
    sys.exit(0)
print("FAIL %s" % ("outcomes differ" if not same else "%d failed" % len(failed) if failed else "no tests ran"))
sys.exit(1)
EOF
if ((rc != 0)); then
        echo "----- daemon log (last 40 lines) -----"
        tail -n 40 "$WORK/daemon.log"
fi
exit $rc
