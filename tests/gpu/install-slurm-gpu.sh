#!/usr/bin/env bash
# install-slurm-gpu.sh: on the GPU machine (root, a fresh machine each time),
# Debian's Slurm and munge from .gpu/slurm-debian.tar.gz (stage-slurm.sh)
# unpacked into their absolute paths; of the libraries they link, only
# those whose soname the machine lacks are added (/usr/local/lib/
# cudackpt-slurm, through ld.so.conf.d), so that the machine's own (newer)
# libraries stay what its programs load.  Prints the versions; exit 77
# without the archive.
#
# usage (repository root, carry [".gpu"]): bash tests/gpu/install-slurm-gpu.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TAR=${1:-$ROOT/.gpu/slurm-debian.tar.gz}
[[ -f $TAR ]] || { echo "SKIP: no $TAR (stage-gpu.sh stages it where Slurm is installed)"; exit 77; }
[[ $(id -u) -eq 0 ]] || { echo "install-slurm-gpu.sh: root only" >&2; exit 2; }
if command -v slurmd >/dev/null && slurmd -V >/dev/null 2>&1; then
        echo "Slurm already here: $(slurmd -V)"
        exit 0
fi
tar -C / -xzf "$TAR"
added=()
mkdir -p /usr/local/lib/cudackpt-slurm
for lib in /opt/cudackpt-slurm/lib/*; do
        name=$(basename "$lib")
        [[ $name == libslurmfull.so ]] && continue
        if ! ldconfig -p | grep -q "^[[:space:]]*$name "; then
                cp "$lib" /usr/local/lib/cudackpt-slurm/
                added+=("$name")
        fi
done
echo /usr/local/lib/cudackpt-slurm >/etc/ld.so.conf.d/cudackpt-slurm.conf
ldconfig
echo "libraries added: ${added[*]:-none}"
echo "$(slurmd -V); $(slurmctld -V); $(srun --version); $(munged -V 2>&1 | head -1)"
