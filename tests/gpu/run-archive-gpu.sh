#!/usr/bin/env bash
# run-archive-gpu.sh: issue 32 items 4-6 on a real GPU.  A CUDA process
# holding MIB MiB of GPU data (default 8) is
#   1. dumped to an archive file (dump --archive FILE): the job ends only
#      once FILE is in place;
#   2. checked (verify --archive FILE), and a copy with 4 bytes changed in
#      its middle refused by verify and by restore --archive (exit status
#      29, before criu runs: the job's pid stays free);
#   3. restored from the archive, its data intact;
#   4. dumped to a plain directory and restored from it (the comparison),
#      data intact; then a byte of one image changed: restore --images
#      refuses it (29), the byte put back, verify --images accepts it;
#   5. dumped and restored through a pipe (dump --archive - | restore
#      --archive -), data intact.
# Prints PASS/FAIL lines, one RESULT line (times in ms, sizes in bytes:
# the images raw, the archive compressed, hashing and archive MB/s from
# the commands' --progress lines), and "N passed, N failed"; exit status 1
# on a FAIL, 77 without root or criu.
#
# For the GPU machine (binaries staged by tests/gpu/stage-gpu.sh in .gpu/,
# carried; the archive needs .gpu's libarchive, libzstd and libxxhash):
#   bash tests/gpu/run-archive-gpu.sh [MIB]
# environment: CUDACKPT_CRIU [.gpu/criu/criu]
set -uo pipefail
# A child subreaper: the pipe's restore follows its dump at once.
source "$(dirname "${BASH_SOURCE[0]}")/job-lib.sh"
job_subreaper "$@"
MIB=${1:-8}
[[ $(id -u) -eq 0 ]] || { echo "SKIP: must run as root (criu)"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/gpu-lib.sh"
export CUDACKPT_CRIU=${CUDACKPT_CRIU:-$DIR/criu/criu}
[[ -x $CUDACKPT_CRIU ]] || { echo "SKIP: no criu at $CUDACKPT_CRIU"; exit 77; }

# A number from a --progress line of file $1: the first match of sed regex $2.
grab() { sed -n "s/.*$2.*/\1/p" "$1" | head -1; }
# Waits (10 s at most) until pid $1 is gone (reaped by this shell or init).
gone() { for _ in $(seq 200); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done; return 1; }
# Overwrites 4 bytes in the middle of file $1.
spoil() { printf '\xde\xad\xbe\xef' | dd of="$1" bs=1 seek=$(($(stat -c %s "$1") / 2)) conv=notrunc status=none; }

start_daemon || { bad "the daemon did not start"; exit 1; }
# In a session of its own, no terminal or pipe held: what criu dumps.
setsid "$DIR/cudackpt-gpu-target" --mib="$MIB" --interval-ms=200 --status="$WORK/t.status" --quiet \
        </dev/null >"$WORK/t.out" 2>&1 &
T=$!
wait_iter 1 || { bad "the target never verified its data"; exit 1; }
echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); target $T, $MIB MiB"

# 1. To an archive file.
A=$WORK/job.tar.zst
t0=$(now_ms)
"$CTL" dump --tree="$T" --archive="$A" --work-dir="$WORK" --progress >"$WORK/dump-archive.out" 2>&1 &&
        ok "dump --archive FILE: $(tail -1 "$WORK/dump-archive.out")" || bad "dump --archive: $(cat "$WORK/dump-archive.out")"
dump_archive_ms=$(($(now_ms) - t0))
gone "$T" && ok "the job ended" || bad "pid $T still there after the dump"
raw=$(grab "$WORK/dump-archive.out" 'archive written and synced: \([0-9.]*\) MB of images')
archive_mbs=$(grab "$WORK/dump-archive.out" 'archive written and synced: .*(\([0-9]*\) MB\/s)')
hash_mbs=$(grab "$WORK/dump-archive.out" 'images hashed: .*(\([0-9]*\) MB\/s)')
compressed=$(stat -c %s "$A" 2>/dev/null || echo 0)
[[ -z $(find "$WORK" -maxdepth 1 -name 'cudackpt-archive.*') ]] && ok "the private directory is gone" ||
        bad "a private directory is left: $(ls "$WORK")"

# 2. Checked; a changed copy refused before criu.
t0=$(now_ms)
out=$("$CTL" verify --archive="$A" --work-dir="$WORK" 2>&1) && ok "verify --archive: $out" || bad "verify: $out"
verify_ms=$(($(now_ms) - t0))
cp "$A" "$WORK/bad.tar.zst" && spoil "$WORK/bad.tar.zst"
out=$("$CTL" verify --archive="$WORK/bad.tar.zst" --work-dir="$WORK" 2>&1)
[[ $? -eq 29 ]] && ok "verify of a changed archive: 29 ($out)" || bad "verify of a changed archive: $out"
out=$("$CTL" restore --archive="$WORK/bad.tar.zst" --work-dir="$WORK" 2>&1)
rc=$?
[[ $rc -eq 29 ]] && ! kill -0 "$T" 2>/dev/null && ok "restore of a changed archive refused (29), pid $T free" ||
        bad "restore of a changed archive: $rc: $out"

# 3. Back from the archive.
t0=$(now_ms)
"$CTL" restore --archive="$A" --work-dir="$WORK" --progress >"$WORK/restore-archive.out" 2>&1 &&
        ok "restore --archive FILE: $(tail -1 "$WORK/restore-archive.out")" || bad "restore --archive: $(cat "$WORK/restore-archive.out")"
restore_archive_ms=$(($(now_ms) - t0))
unpack_mbs=$(grab "$WORK/restore-archive.out" 'archive unpacked and checked: .*(\([0-9]*\) MB\/s)')
check_intact

# 4. The same through a plain directory; a changed image refused.
D=$WORK/img
t0=$(now_ms)
"$CTL" dump --tree="$T" --images="$D" --progress >"$WORK/dump-dir.out" 2>&1 &&
        ok "dump --images: $(tail -1 "$WORK/dump-dir.out")" || bad "dump --images: $(cat "$WORK/dump-dir.out")"
dump_dir_ms=$(($(now_ms) - t0))
gone "$T" || bad "pid $T still there after the dump"
dir_bytes=$(du -sb "$D" | cut -f1)
pages=$(find "$D" -name 'pages-*.img' -size +1k | head -1)
cp "$pages" "$WORK/pages.keep" && spoil "$pages"
out=$("$CTL" restore --images="$D" 2>&1)
rc=$?
[[ $rc -eq 29 && $out == *"was changed"* ]] && ! kill -0 "$T" 2>/dev/null &&
        ok "restore of a changed image refused (29), pid $T free: $out" || bad "restore of a changed image: $rc: $out"
cp "$WORK/pages.keep" "$pages"
out=$("$CTL" verify --images="$D" 2>&1) && ok "verify --images: $out" || bad "verify --images: $out"
t0=$(now_ms)
"$CTL" restore --images="$D" --progress >"$WORK/restore-dir.out" 2>&1 &&
        ok "restore --images: $(tail -1 "$WORK/restore-dir.out")" || bad "restore --images: $(cat "$WORK/restore-dir.out")"
restore_dir_ms=$(($(now_ms) - t0))
verify_restore_mbs=$(grab "$WORK/restore-dir.out" 'images verified: .*(\([0-9]*\) MB\/s)')
check_intact

# 5. Through a pipe.
t0=$(now_ms)
{ "$CTL" dump --tree="$T" --archive=- --work-dir="$WORK" --progress; echo "dump=$?" >&2; } 2>"$WORK/pipe-dump.out" |
        "$CTL" restore --archive=- --work-dir="$WORK" --progress >"$WORK/pipe-restore.out" 2>&1
rc=$?
pipe_ms=$(($(now_ms) - t0))
[[ $rc -eq 0 ]] && grep -q '^dump=0$' "$WORK/pipe-dump.out" && ok "dump --archive - | restore --archive -" ||
        bad "pipe: dump: $(cat "$WORK/pipe-dump.out"); restore ($rc): $(cat "$WORK/pipe-restore.out")"
check_intact

echo "RESULT mib=$MIB images_mb=${raw:-?} dir_bytes=$dir_bytes archive_bytes=$compressed" \
        "dump_archive_ms=$dump_archive_ms restore_archive_ms=$restore_archive_ms verify_archive_ms=$verify_ms" \
        "dump_dir_ms=$dump_dir_ms restore_dir_ms=$restore_dir_ms pipe_ms=$pipe_ms" \
        "hash_mb_s=${hash_mbs:-?} verify_mb_s=${verify_restore_mbs:-?} archive_write_mb_s=${archive_mbs:-?}" \
        "archive_read_mb_s=${unpack_mbs:-?}"
echo "$pass passed, $failed failed"
((failed == 0))
