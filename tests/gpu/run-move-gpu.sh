#!/usr/bin/env bash
# run-move-gpu.sh: issue 32's proof on real GPUs: a CUDA job started with
# `cudackptctl run` moved to another machine through an archive, restored
# there with no --device-map (the device plan maps its GPU), its data
# verified on the new GPU; and the same job restored on its own machine
# while its old host pids are taken.  Three phases:
#
#   A     machine 1: starts the job (JOB_PROCS cudackpt-gpu-target processes
#         of JOB_MIB MiB, default 1 x 4 MiB: the archive must come back
#         through $OUT, 16 MiB a file), dumps it with `dump --run NAME
#         --archive $OUT/move.tar.zst`, and leaves beside it move-a.env
#         (the GPU's UUID, the verifications done before the dump, the
#         digests of the binaries the job maps) and move-target (the
#         target's bytes, for machine 2 to map the same file).  Prints the
#         GPU UUID, the dump time and the images' size raw and compressed.
#   B     machine 2, freshly started, with those three files in .gpu/move/:
#         installs the job's files where they were (JOB_DIR), starts the
#         daemon, prints the plan (restore --archive --dry-run --json: A's
#         GPU -> this machine's, "chosen"), restores with no map, and checks
#         the job's data on this GPU (the target verifies its buffer twice
#         more).  Prints both UUIDs and the times.
#   same  one machine: the job dumped to an archive file, every one of its
#         old host pids held by another process, restored from the file
#         with no map, its data verified.
#
# The job's files live at the same paths on both machines (CRIU maps them
# back by path): JOB_DIR [/tmp/cudackpt-move] holds the job's binaries
# (cudackpt-init, copied from .gpu/ with cudackptctl beside it, and the
# target), its status files and its name's record; its cwd is JOB_DIR, its
# standard streams /dev/null.  The CUDA driver of both machines must be of
# one branch (the manifest's driver version is checked: B's no older).
#
# The device calls (from the repository root here, after
# `bash tests/gpu/stage-gpu.sh`; the files of A come back under files_at):
#   1. run(kind="nvidia-h200", carry=[".gpu"], timeout_s=600,
#          command="bash tests/gpu/run-move-gpu.sh A && bash tests/gpu/run-move-gpu.sh same")
#      then, here: mkdir -p .gpu/move && cp FILES_AT/move.tar.zst FILES_AT/move-a.env FILES_AT/move-target .gpu/move/
#      (FILES_AT: the call's files_at), and give_back() so that the next call starts a fresh machine;
#   2. run(kind="nvidia-h200", carry=[".gpu"], timeout_s=600,
#          command="bash tests/gpu/run-move-gpu.sh B")
# Expected: PASS lines only, "MOVE-A: gpu=GPU-... dump_ms=N raw_mb=N
# archive_mb=N" from 1, and from 2 "MOVE-B: from=GPU-... to=GPU-...
# (another UUID) plan=chosen restore_ms=N"; "0 failure(s)" and exit 0 each.
# Exit 1 on a FAIL, 77 without root, GPU or criu.
#
# environment (defaults in brackets): GPU_DIR [.gpu] (cudackptd,
#   cudackptctl, cudackpt-init, criu/, cudackpt-gpu-target)
#   CUDACKPT_CRIU [GPU_DIR/criu/criu]  JOB_DIR [/tmp/cudackpt-move]
#   JOB_PROCS [1] JOB_MIB [4] STEP_TIMEOUT [120] OUT [GPU_DIR/move-out]
#   MOVE_IN [GPU_DIR/move] (phase B's files)
set -uo pipefail
PHASE=${1:-}
[[ $PHASE == A || $PHASE == B || $PHASE == same ]] || { echo "usage: run-move-gpu.sh A|B|same" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=${GPU_DIR:-$ROOT/.gpu}
export LD_LIBRARY_PATH=$DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CRIU=${CUDACKPT_CRIU:-$DIR/criu/criu}
JOB_DIR=${JOB_DIR:-/tmp/cudackpt-move}
JOB_PROCS=${JOB_PROCS:-1}
JOB_MIB=${JOB_MIB:-4}
STEP_TIMEOUT=${STEP_TIMEOUT:-120}
OUT=${OUT:-$DIR/move-out}
MOVE_IN=${MOVE_IN:-$DIR/move}
NAME=moved-job

source "$(dirname "${BASH_SOURCE[0]}")/job-lib.sh"
job_need_root_gpu_criu "criu, run"
[[ -x $DIR/cudackptd && -x $DIR/cudackptctl && -x $DIR/cudackpt-init ]] ||
        { echo "run-move-gpu.sh: cudackptd, cudackptctl or cudackpt-init not in $DIR" >&2; exit 2; }

WORK=$JOB_DIR # the target's status files, as job-lib.sh reads them
BIN=$JOB_DIR/bin
CTL=$BIN/cudackptctl
export CUDACKPT_RUN_DIR=$JOB_DIR/runs CUDACKPT_SOCKET=/tmp/cudackpt-move.sock CUDACKPT_CRIU=$CRIU
json() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
gpu_uuid() { nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1; }
sums() { sha256sum "$BIN/cudackpt-init" "$BIN/cudackpt-gpu-target" | awk '{ printf "%s ", $1 }'; }

cleanup() {
        job_stop
        cp "$JOB_DIR"/*.log "$JOB_DIR"/*.out "$OUT"/ 2>/dev/null || true
        rm -rf "$JOB_DIR" "$CUDACKPT_SOCKET"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The job's files where it expects them: a fresh JOB_DIR, cudackpt-init
# beside cudackptctl, the target (phase B: A's bytes).
install_job_files() {
        rm -rf "$JOB_DIR" && mkdir -p "$BIN" "$OUT" || exit 1
        cp -p "$DIR/cudackptctl" "$DIR/cudackpt-init" "$BIN/" || exit 1
        if [[ $PHASE == B ]]; then
                cp -p "$MOVE_IN/move-target" "$BIN/cudackpt-gpu-target" || { fail "no $MOVE_IN/move-target"; exit 1; }
                chmod 0755 "$BIN/cudackpt-gpu-target"
        else
                [[ -x $DIR/cudackpt-gpu-target ]] || bash "$DIR/build-target.sh" || exit 2
                cp -p "$DIR/cudackpt-gpu-target" "$BIN/" || exit 1
        fi
        cd "$JOB_DIR" || exit 1
}

start_daemon() {
        "$DIR/cudackptd" --socket="$CUDACKPT_SOCKET" --driver=libcuda.so.1 --log-level=info "$@" </dev/null \
                >>"$JOB_DIR/daemon.log" 2>&1 &
        DAEMON_PID=$!
        for _ in $(seq 100); do timeout 5 "$CTL" info >/dev/null 2>&1 && return 0; sleep 0.1; done
        echo "cudackptd did not start:"; tail -20 "$JOB_DIR/daemon.log"; exit 1
}

# The job, verified once; OLD its host pids (init first), ITERS the
# verifications so far.  Its streams are /dev/null: CRIU finds them on
# any machine (a file would have to be there too).
start_job() {
        setsid "$CTL" run --name="$NAME" --no-cgroup -- /usr/bin/env -u LD_LIBRARY_PATH "$BIN/cudackpt-gpu-target" \
                --mib="$JOB_MIB" --interval-ms=200 --quiet --status="$JOB_DIR/st" --children=$((JOB_PROCS - 1)) \
                </dev/null >/dev/null 2>&1 &
        RUN_PID=$!
        await_verified 1 || exit 1
        read -ra OLD <<<"$(job_pids "$(init_pid)")"
        ((${#OLD[@]} == JOB_PROCS + 1)) || fail "the job has ${#OLD[@]} processes (${OLD[*]}), not the init and $JOB_PROCS"
}

# dump_archive FILE: the job dumped into FILE; DUMP_MS, RAW_MB, ARCHIVE_MB,
# DUMP_ITER (process 0's verifications before the dump).
dump_archive() {
        local t0 rc=0 line
        t0=$(now_ms)
        timeout "$STEP_TIMEOUT" "$CTL" dump --run="$NAME" --archive="$1" --no-progress >"$JOB_DIR/dump.out" 2>&1 || rc=$?
        DUMP_MS=$(($(now_ms) - t0))
        ((rc == 0)) || { fail "dump --run --archive exited $rc: $(tail -5 "$JOB_DIR/dump.out")"; exit 1; }
        wait "$RUN_PID" 2>/dev/null || true
        DUMP_ITER=$(field "$(cat "$JOB_DIR/st")" iter) # its last verification before the dump
        line=$(grep -m1 "^archive " "$JOB_DIR/dump.out")
        RAW_MB=$(sed -n 's/.* \([0-9.]*\) MB of images.*/\1/p' <<<"$line")
        ARCHIVE_MB=$(sed -n 's/.* \([0-9.]*\) MB compressed.*/\1/p' <<<"$line")
        grep -q "to the archive $1: " "$JOB_DIR/dump.out" && pass "dump: $(head -1 "$JOB_DIR/dump.out")" ||
                fail "dump's summary does not name the archive: $(cat "$JOB_DIR/dump.out")"
}

# restore_archive FILE MIN_ITER [OPTION...]: restore --archive FILE with
# the options (none: no map), then every process verified MIN_ITER times
# or more; RESTORE_MS.
restore_archive() {
        local t0 rc=0 file=$1 min=$2
        shift 2
        t0=$(now_ms)
        timeout "$STEP_TIMEOUT" "$CTL" restore --archive="$file" --no-progress "$@" >"$JOB_DIR/restore.out" 2>&1 || rc=$?
        RESTORE_MS=$(($(now_ms) - t0))
        ((rc == 0)) || { fail "restore --archive exited $rc: $(tail -5 "$JOB_DIR/restore.out")"; return 1; }
        await_verified "$min" &&
                pass "restored with ${*:-no map}: $JOB_PROCS x $JOB_MIB MiB verified on $(gpu_uuid) after the restore ($RESTORE_MS ms)"
}

install_job_files
start_daemon
echo "GPU: $(gpu_uuid), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); criu $("$CRIU" --version | sed -n 's/^Version: //p'); root $ROOT"
case $PHASE in
A)
        start_job
        dump_archive "$OUT/move.tar.zst"
        cp -p "$BIN/cudackpt-gpu-target" "$OUT/move-target"
        printf 'GPU=%s\nITER=%s\nSUMS="%s"\n' "$(gpu_uuid)" "$DUMP_ITER" "$(sums)" >"$OUT/move-a.env"
        echo "MOVE-A: gpu=$(gpu_uuid) dump_ms=$DUMP_MS raw_mb=$RAW_MB archive_mb=$ARCHIVE_MB ($JOB_PROCS x $JOB_MIB MiB)"
        ;;
B)
        [[ -s $MOVE_IN/move.tar.zst && -s $MOVE_IN/move-a.env ]] || { fail "no archive in $MOVE_IN (phase A's files)"; exit 1; }
        source "$MOVE_IN/move-a.env"
        [[ $(sums) == "$SUMS" ]] || fail "the job's binaries differ from machine 1's (carry the same .gpu both times)"
        [[ $GPU != "$(gpu_uuid)" ]] && pass "another GPU: $GPU on machine 1, $(gpu_uuid) here" ||
                echo "NOTE: this machine has machine 1's GPU ($GPU): the plan keeps it"
        rc=0
        timeout "$STEP_TIMEOUT" "$CTL" restore --archive="$MOVE_IN/move.tar.zst" --dry-run --json >"$JOB_DIR/plan.json" \
                2>"$JOB_DIR/plan.err" || rc=$?
        HOW=$(json "$JOB_DIR/plan.json" 'j["plan"]["gpus"][0]["how"]' 2>/dev/null)
        TO=$(json "$JOB_DIR/plan.json" 'j["plan"]["gpus"][0]["to"]' 2>/dev/null)
        MODEL=$(json "$JOB_DIR/plan.json" 'j["plan"]["gpus"][0]["model"]' 2>/dev/null)
        HERE=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
        MAP=()
        if [[ -n $MODEL && $MODEL != "$HERE" ]]; then
                # Machine 1's GPU was of another model: no plan maps it on
                # its own (28, nothing restored); a map and --force do.
                ((rc == 28)) && [[ $HOW == none ]] &&
                        pass "another model ($MODEL on machine 1, $HERE here): the plan maps nothing without --force (28)" ||
                        fail "restore --dry-run of another model's job exited $rc: $(cat "$JOB_DIR/plan.json" "$JOB_DIR/plan.err")"
                MAP=(--device-map="$GPU=$(gpu_uuid)" --force)
        else
                ((rc == 0)) && [[ ${TO,,} == "$(gpu_uuid | tr '[:upper:]' '[:lower:]')" ]] && pass "the plan: $GPU -> $TO ($HOW), $(json "$JOB_DIR/plan.json" 'j["plan_ms"]') ms" ||
                        fail "restore --dry-run exited $rc: $(cat "$JOB_DIR/plan.json" "$JOB_DIR/plan.err")"
        fi
        restore_archive "$MOVE_IN/move.tar.zst" $((ITER + 2)) "${MAP[@]}"
        [[ ${#MAP[@]} -gt 0 ]] && HOW="mapped+force ($MODEL -> $HERE)"
        echo "MOVE-B: from=$GPU to=$(gpu_uuid) plan=$HOW restore_ms=$RESTORE_MS"
        ;;
same)
        start_job
        dump_archive "$JOB_DIR/same.tar.zst"
        for p in "${OLD[@]}"; do hold "$p" || fail "could not hold pid $p"; done
        ((FAILS == 0)) && pass "every old host pid of the job is held by another process (${HELD[*]})"
        restore_archive "$JOB_DIR/same.tar.zst" $((DUMP_ITER + 2))
        echo "MOVE-SAME: gpu=$(gpu_uuid) dump_ms=$DUMP_MS restore_ms=$RESTORE_MS raw_mb=$RAW_MB archive_mb=$ARCHIVE_MB"
        ;;
esac
echo "$FAILS failure(s)"
((FAILS == 0))
