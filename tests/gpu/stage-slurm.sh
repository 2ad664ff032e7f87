#!/usr/bin/env bash
# stage-slurm.sh: Debian's Slurm (slurmctld, slurmd, slurmstepd, the
# clients, their plugins) and munge, as installed here by `make deps`, into
# one archive, .gpu/slurm-debian.tar.gz, for the GPU machine, which has no
# Slurm and no package registry: install-slurm-gpu.sh unpacks it there into
# the same absolute paths (Slurm finds its plugins and slurmstepd at the
# paths it was built with), adding only the shared libraries the machine
# lacks.  Called by stage-gpu.sh when Slurm is installed here.
#
# usage: stage-slurm.sh [OUT]   (default <repository root>/.gpu/slurm-debian.tar.gz)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${1:-$ROOT/.gpu/slurm-debian.tar.gz}
PLUGINS=/usr/lib/x86_64-linux-gnu/slurm-wlm
for p in slurmctld slurmd slurmstepd munged srun sbatch scontrol squeue scancel sinfo; do
        command -v "$p" >/dev/null || { echo "stage-slurm.sh: no $p here (make deps installs Slurm)" >&2; exit 77; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
files=()
for p in slurmctld slurmd slurmstepd munged srun sbatch scontrol squeue scancel sinfo; do
        link=$(command -v "$p")
        real=$(readlink -f "$link")
        files+=("$real")
        # The alternatives' links, made again as plain links to the binary.
        [[ $link != "$real" ]] && mkdir -p "$work/root$(dirname "$link")" && ln -s "$real" "$work/root$link"
done
files+=("$PLUGINS")
# Every library they link but the C library's own: install-slurm-gpu.sh
# copies one in only where the machine has no library of its soname.
mkdir -p "$work/root/opt/cudackpt-slurm/lib"
for f in "${files[@]}" "$PLUGINS"/*.so; do
        [[ -f $f ]] || continue
        ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libpthread|libdl|librt|libresolv|ld-linux[^/]*)\.so' |
        while read -r lib; do cp -L "$lib" "$work/root/opt/cudackpt-slurm/lib/"; done
tar -C / -cf "$work/files.tar" "${files[@]#/}"
tar -C "$work/root" -rf "$work/files.tar" .
mkdir -p "$(dirname "$OUT")"
gzip -9 <"$work/files.tar" >"$OUT"
echo "staged $OUT: $(du -h "$OUT" | cut -f1) ($(slurmd -V), $(munged -V 2>&1 | head -1))"
