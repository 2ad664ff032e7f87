#!/usr/bin/env bash
# run-plan-gpu.sh: restore --images' device plan on a real GPU (issue 32,
# items 2 and 3), on one machine:
#   1. ListGpus against nvidia-smi: every GPU's UUID, model and PCI bus id
#      and the driver's version as NVML tells them;
#   2. a CUDA job (JOB_PROCS cudackpt-gpu-target processes of JOB_MIB MiB on
#      GPU 0) dumped with cudackptctl dump --tree: the manifest records its
#      GPU (UUID, model, bus id) and what each process held there;
#   3. restore --dry-run --json on that manifest: the plan keeps the GPU,
#      fits, touches nothing (the job's pids stay free); its time (plan_ms);
#   4. the manifest edited as if dumped elsewhere, each time --dry-run only
#      (the driver would refuse a GPU the processes never used): another
#      UUID of the same model (the plan chooses this GPU), another model
#      (refused, exit 28), a newer driver at the dump (refused, 28), more
#      memory held than this GPU has free (refused, 26); the pids stay free;
#   5. the real restore with no map: the job back, data intact.
# Prints PASS/FAIL lines, a PLAN line with the plan's time, and exits 1 on
# any FAIL, 77 when there is no GPU, criu or root.
#
# usage (from the repository root on the GPU machine, after
# tests/gpu/stage-gpu.sh here; carry [".gpu"]):
#   LD_LIBRARY_PATH=$PWD/.gpu bash tests/gpu/run-plan-gpu.sh
# environment (defaults in brackets):
#   CUDACKPTD [.gpu/cudackptd]  CUDACKPTCTL [.gpu/cudackptctl]
#   CUDACKPT_GPU_TARGET [.gpu/cudackpt-gpu-target]  CUDACKPT_CRIU [.gpu/criu/criu]
#   JOB_PROCS [2] JOB_MIB [64] STEP_TIMEOUT [120] WORKDIR [/tmp] KEEP [0]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$(dirname "${BASH_SOURCE[0]}")/job-lib.sh"
job_defaults 64
job_need_root_gpu_criu criu
command -v python3 >/dev/null || skip "no python3"
[[ -x $DAEMON && -x $CTL ]] || { echo "run-plan-gpu.sh: cudackptd/cudackptctl not found" >&2; exit 2; }
if [[ ! -x $TARGET && -x $ROOT/.gpu/build-target.sh ]]; then bash "$ROOT/.gpu/build-target.sh" || true; fi
[[ -x $TARGET ]] || skip "no GPU target at $TARGET"

WORK=$(mktemp -d "${WORKDIR:-/tmp}/cudackpt-plan-gpu.XXXXXX")
SOCK=$WORK/cudackptd.sock
IMG=$WORK/img
MANIFEST=$IMG/manifest.json
JOB_PIDS=()
cleanup() {
        local p
        for p in "${JOB_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
        job_stop
        rm -rf "$IMG"
        if [[ $FAILS -eq 0 && $KEEP != 1 ]]; then rm -rf "$WORK"; else echo "work directory kept: $WORK"; fi
}
trap cleanup EXIT
ctl() { CUDACKPT_SOCKET=$SOCK CUDACKPT_CRIU=$CRIU timeout "$STEP_TIMEOUT" "$CTL" "$@"; }
pids_free() { local p; for p in "${JOB_PIDS[@]}"; do [[ ! -d /proc/$p ]] || return 1; done; }
# json FILE EXPR: a Python expression on the JSON object j read from FILE.
json() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
# edit EXPR: a Python statement on the manifest m, written back in place (same file, mode, owner).
edit() { python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); exec(sys.argv[2]); open(sys.argv[1],"w").write(json.dumps(m))' "$MANIFEST" "$1"; }

"$DAEMON" --socket="$SOCK" --log-level=info </dev/null >>"$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 100); do timeout 5 "$CTL" --socket="$SOCK" info >/dev/null 2>&1 && break; sleep 0.1; done

# 1. ListGpus against nvidia-smi (NVML is opened just after the start: ask until it says so).
for _ in $(seq 50); do
        python3 - "$SOCK" >"$WORK/gpus.json" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b'{"method":"io.cudackpt.Process.ListGpus"}\0')
buf = b""
while not buf.endswith(b"\0"):
    buf += s.recv(65536)
print(json.dumps(json.loads(buf[:-1])["parameters"]))
PY
        [[ $(json "$WORK/gpus.json" 'j["nvml"]') == True ]] && break
        sleep 0.1
done
nvidia-smi --query-gpu=uuid,name,pci.bus_id,driver_version --format=csv,noheader | sed 's/, /,/g' >"$WORK/smi.csv"
json "$WORK/gpus.json" '"\n".join(",".join([g["uuid"], g["name"], g["pci_bus_id"], j["driver_version"]]) for g in j["gpus"])' >"$WORK/ours.csv"
if [[ -s $WORK/smi.csv ]] && diff -i "$WORK/smi.csv" "$WORK/ours.csv" >/dev/null; then
        pass "ListGpus tells what nvidia-smi does: $(head -1 "$WORK/ours.csv")"
else
        fail "ListGpus and nvidia-smi differ: $(cat "$WORK/ours.csv") / $(cat "$WORK/smi.csv")"
fi

# 2. The job, dumped.
setsid "$TARGET" --mib="$JOB_MIB" --interval-ms=200 --quiet --status="$WORK/st" --children=$((JOB_PROCS - 1)) </dev/null >/dev/null 2>&1 &
JOB_PIDS=($!)
deadline=$((SECONDS + STEP_TIMEOUT))
for ((k = 1; k < JOB_PROCS; k++)); do
        until s=$(cat "$WORK/st.child$k" 2>/dev/null) && [[ -n $s ]]; do ((SECONDS < deadline)) || { fail "child $k never started"; exit 1; }; sleep 0.1; done
        JOB_PIDS+=("$(field "$s" pid)")
done
until s=$(cat "$WORK/st" 2>/dev/null) && [[ $(field "$s" iter) -ge 1 ]] 2>/dev/null; do ((SECONDS < deadline)) || { fail "the job never verified"; exit 1; }; sleep 0.1; done
iter=$(field "$s" iter)
ctl dump --tree="${JOB_PIDS[0]}" --images="$IMG" --no-progress >"$WORK/dump.out" 2>&1 || { fail "dump: $(tail -5 "$WORK/dump.out")"; exit 1; }
for _ in $(seq 100); do pids_free && break; sleep 0.1; done
GPU=$(json "$MANIFEST" 'j["devices"]["gpus"][0]["uuid"]')
held=$(json "$MANIFEST" 'min(u["bytes"] for m in j["members"] for u in m["gpu_memory"]) // 1048576')
if [[ $(json "$MANIFEST" 'len(j["members"])') == "$JOB_PROCS" && $held -ge $JOB_MIB ]]; then
        pass "the manifest records $GPU ($(json "$MANIFEST" 'j["devices"]["gpus"][0]["name"]'), $(json "$MANIFEST" 'j["devices"]["gpus"][0]["pci_bus_id"]')), driver $(json "$MANIFEST" 'j["devices"]["driver_version"]'), >= $held MiB per member"
else
        fail "the manifest's device records: $(json "$MANIFEST" 'j.get("devices")') / members held $held MiB"
fi
cp -p "$MANIFEST" "$WORK/manifest.orig"

# dry N WANT_STATUS WANT_VERDICT [WANT_HOW]: restore --dry-run --json, checked.
dry() {
        local name=$1 want=$2 verdict=$3 how=${4:-} rc=0
        ctl restore --images="$IMG" --dry-run --json >"$WORK/dry-$name.json" 2>"$WORK/dry-$name.err" || rc=$?
        if [[ $rc == "$want" ]] && [[ $(json "$WORK/dry-$name.json" 'j["plan"]["verdict"]') == "$verdict" ]] &&
                [[ -z $how || $(json "$WORK/dry-$name.json" 'j["plan"]["gpus"][0]["how"]') == "$how" ]] && pids_free; then
                pass "dry-run $name: exit $rc, $verdict${how:+ ($how)}, nothing touched ($(json "$WORK/dry-$name.json" 'j["plan_ms"]') ms)"
        else
                fail "dry-run $name: exit $rc (want $want): $(cat "$WORK/dry-$name.json" "$WORK/dry-$name.err")"
        fi
        cp -p "$WORK/manifest.orig" "$MANIFEST"
}
# 3. As dumped.
dry same 0 fits kept
echo "PLAN: the device plan took $(json "$WORK/dry-same.json" 'j["plan_ms"]') ms (ListGpus round trip and the checks)"
# 4. As if dumped elsewhere.
other='for g in m["devices"]["gpus"]: g["uuid"] = "GPU-ffffffff-0000-4000-8000-000000000000"
for x in m["members"]:
    for u in x["gpu_memory"]: u["uuid"] = "GPU-ffffffff-0000-4000-8000-000000000000"'
edit "$other"
dry other-uuid 0 fits chosen
edit "$other"$'\nfor g in m["devices"]["gpus"]: g["name"] = "NVIDIA A100-SXM4-80GB"'
dry other-model 28 no-gpu
edit 'm["devices"]["driver_version"] = "999.1"'
dry newer-driver-at-dump 28 older-driver
edit 'm["members"][0]["gpu_memory"][0]["bytes"] = 1 << 50'
dry too-much-memory 26 no-memory

# 5. The real restore, no map.
t0=${EPOCHREALTIME/./}
if ctl restore --images="$IMG" --no-progress >"$WORK/restore.out" 2>&1; then
        t1=${EPOCHREALTIME/./}
        deadline=$((SECONDS + STEP_TIMEOUT))
        until s=$(cat "$WORK/st" 2>/dev/null) && [[ $(field "$s" iter) -ge $((iter + 2)) ]] 2>/dev/null; do
                ((SECONDS < deadline)) || break
                sleep 0.1
        done
        if [[ $(field "$s" error) == none && $(field "$s" total_mismatches) == 0 && $(field "$s" iter) -ge $((iter + 2)) ]]; then
                pass "restore with the plan: the job back, data intact ($(((t1 - t0) / 1000)) ms)"
        else
                fail "restore: the job did not go on: $s"
        fi
else
        fail "restore: $(tail -5 "$WORK/restore.out")"
fi
echo "$FAILS failure(s)"
((FAILS == 0))
