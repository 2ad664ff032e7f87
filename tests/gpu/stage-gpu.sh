#!/usr/bin/env bash
# stage-gpu.sh: build here and fill the git-ignored .gpu/ folder with what a
# GPU machine that lacks this project's build dependencies needs to run the
# GPU tests (run-gpu-tests.sh, run-criu-tests.sh):
#
#   .gpu/cudackptd, .gpu/cudackptctl    built from this tree
#   .gpu/cudackpt-init                  the init of `cudackptctl run`'s jobs
#   .gpu/libuv.so.1, .gpu/libcjson.so.1 the libraries those link that the GPU
#   .gpu/libbpf.so.1, .gpu/libelf.so.1  machine lacks (use LD_LIBRARY_PATH=.gpu)
#   .gpu/libmicrohttpd.so.12
#   .gpu/libxxhash.so.0, .gpu/libzstd.so.1, .gpu/libarchive.so.13
#                                       cudackptctl's digests and archives, and
#   .gpu/libxml2.so.2, .gpu/libicu*.so.N  what libarchive links that a CUDA
#                                       image may lack (not its compressors,
#                                       which apt's own libraries bring)
#   .gpu/cudackpt-seccomp-exec          the seccomp profile's loader, when
#   .gpu/libseccomp.so.2                libseccomp was found here (the GPU
#                                       suites under the DaemonSet's profile:
#                                       CUDACKPT_TEST_DAEMON_WRAPPER, see
#                                       tests/gpu/suite-lib.sh)
#   .gpu/cudackpt-gpu-target            the CUDA target, when nvcc built it here
#   .gpu/cudackpt-bench-gpu             the GPU benchmarks (tests/bench/run-gpu.sh;
#                                       group and list for issue 11)
#   .gpu/cudackpt-bench-d2h             the copy-rate benchmark, when nvcc built it
#   .gpu/src/gpu_target.cu, .gpu/build-target.sh
#                                       its source and the nvcc line, to build
#                                       it there instead (build-target.sh does
#                                       nothing when the binary runs)
#   .gpu/criu/                          a copy of the CRIU 4 bundle (wrapper
#                                       criu, sbin/, lib/, lib/criu plugin)
#   .gpu/nvidia/cuda-checkpoint         NVIDIA's utility, for comparisons
#   .gpu/slurm-debian.tar.gz            Debian's Slurm and munge, when installed
#                                       here (stage-slurm.sh; install-slurm-gpu.sh)
#
# usage: stage-gpu.sh [BUILD_DIR]   (default /tmp/build-gpu; configured with
#                                    RelWithDebInfo and built when needed)
# environment: CUDACKPT_CRIU_BUNDLE=/work/shared/criu,
#              CUDACKPT_NVIDIA_CHECKPOINT=/work/shared/anchors/cuda-checkpoint,
#              CUDACKPT_CUDA_PYTHON_TEST=PATH (cuda-python's test_checkpoint.py,
#              staged as .gpu/cuda-python/ for run-cuda-python-ckpt.sh)
# Run from anywhere; writes <repository root>/.gpu.  Then, on the GPU
# machine, from the repository root (carry: [".gpu"]), issue 11's group
# tests and benchmarks in one command (see its header):
#   bash tests/gpu/run-group-gpu.sh
# or the CRIU tests:
#   export LD_LIBRARY_PATH=$PWD/.gpu; bash .gpu/build-target.sh
#   bash tests/gpu/run-criu-tests.sh --daemon=.gpu/cudackptd --ctl=.gpu/cudackptctl \
#        --target=.gpu/cudackpt-gpu-target --criu=.gpu/criu/criu \
#        --nvidia=.gpu/nvidia/cuda-checkpoint
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-/tmp/build-gpu}
CRIU_BUNDLE=${CUDACKPT_CRIU_BUNDLE:-/work/shared/criu}
NVIDIA_TOOL=${CUDACKPT_NVIDIA_CHECKPOINT:-/work/shared/anchors/cuda-checkpoint}
STAGE=$ROOT/.gpu
LIMIT_MIB=60

# Configured again each time: a build tree made before a target was added
# (cudackpt-init) would otherwise not know it on the first build.
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target cudackptd cudackptctl cudackpt-init cudackpt-bench-gpu
# The CUDA target exists only where nvcc was found.
cmake --build "$BUILD" -j"$(nproc)" --target cudackpt-gpu-target 2>/dev/null ||
        echo "stage-gpu.sh: cudackpt-gpu-target not built here (no nvcc?): build it there with .gpu/build-target.sh"
cmake --build "$BUILD" -j"$(nproc)" --target cudackpt-bench-d2h 2>/dev/null || true
cmake --build "$BUILD" -j"$(nproc)" --target cudackpt-seccomp-exec 2>/dev/null ||
        echo "stage-gpu.sh: cudackpt-seccomp-exec not built here (no libseccomp-dev?)"

rm -rf "$STAGE"
mkdir -p "$STAGE/src" "$STAGE/nvidia"
install -m 0755 "$BUILD/daemon/cudackptd" "$BUILD/client/cudackptctl" "$BUILD/client/cudackpt-init" \
        "$BUILD/tests/bench/cudackpt-bench-gpu" "$STAGE/"
if [[ -x $BUILD/tests/gpu/cudackpt-gpu-target ]]; then
        install -m 0755 "$BUILD/tests/gpu/cudackpt-gpu-target" "$STAGE/"
fi
if [[ -x $BUILD/tests/bench/cudackpt-bench-d2h ]]; then
        install -m 0755 "$BUILD/tests/bench/cudackpt-bench-d2h" "$STAGE/"
fi
if [[ -x $BUILD/tests/deploy/cudackpt-seccomp-exec ]]; then
        install -m 0755 "$BUILD/tests/deploy/cudackpt-seccomp-exec" "$STAGE/"
        path=$(ldd "$STAGE/cudackpt-seccomp-exec" | awk '$1 == "libseccomp.so.2" && $3 ~ /^\// { print $3; exit }')
        if [[ -n $path ]]; then cp -L "$path" "$STAGE/libseccomp.so.2"; fi
fi

# The libraries the GPU machine lacks, as the binaries resolve them here
# (libbpf and libelf: the process index, when the daemon was built with it;
# libmicrohttpd: cudackptctl's metrics --listen, when it was built with it).
for lib in libbpf.so.1 libelf.so.1 libmicrohttpd.so.12; do
        path=$(ldd "$STAGE/cudackptd" "$STAGE/cudackptctl" | awk -v l="$lib" '$1 == l && $3 ~ /^\// { print $3; exit }')
        if [[ -n $path ]]; then cp -L "$path" "$STAGE/$lib"; fi
done
# libarchive's libxml2 and ICU (xar support), whatever ICU's version here.
for lib in $(ldd "$STAGE/cudackptctl" | awk '$1 ~ /^(libxml2\.so\.2|libicu(uc|data)\.so\.[0-9]+)$/ && $3 ~ /^\// { print $1 }'); do
        cp -L "$(ldd "$STAGE/cudackptctl" | awk -v l="$lib" '$1 == l { print $3; exit }')" "$STAGE/$lib"
done
for lib in libuv.so.1 libcjson.so.1 libxxhash.so.0 libzstd.so.1 libarchive.so.13; do
        path=$(ldd "$STAGE/cudackptd" "$STAGE/cudackptctl" "$STAGE/cudackpt-bench-gpu" | awk -v l="$lib" '$1 == l && $3 ~ /^\// { print $3; exit }')
        [[ -n $path ]] || { echo "stage-gpu.sh: $lib not found by ldd" >&2; exit 1; }
        cp -L "$path" "$STAGE/$lib"
done

cp -a "$CRIU_BUNDLE" "$STAGE/criu"
chmod -R u+w "$STAGE/criu"
install -m 0755 "$NVIDIA_TOOL" "$STAGE/nvidia/cuda-checkpoint"
if [[ -f $NVIDIA_TOOL.LICENSE ]]; then cp "$NVIDIA_TOOL.LICENSE" "$STAGE/nvidia/"; fi

# cuda-python's own checkpoint tests, for run-cuda-python-ckpt.sh, when
# CUDACKPT_CUDA_PYTHON_TEST names the file (it is not in this repository).
if [[ -n ${CUDACKPT_CUDA_PYTHON_TEST:-} ]]; then
        mkdir -p "$STAGE/cuda-python"
        cp "$CUDACKPT_CUDA_PYTHON_TEST" "$STAGE/cuda-python/test_checkpoint.py"
fi

cp "$ROOT/tests/gpu/gpu_target.cu" "$STAGE/src/"
cat >"$STAGE/build-target.sh" <<'EOF'
#!/usr/bin/env bash
# Builds .gpu/cudackpt-gpu-target with nvcc unless the staged one runs here.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -x $here/cudackpt-gpu-target ]] && "$here/cudackpt-gpu-target" --help >/dev/null 2>&1; then
        exit 0
fi
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$nvcc" -O2 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
        -o "$here/cudackpt-gpu-target" "$here/src/gpu_target.cu"
echo "built $here/cudackpt-gpu-target"
EOF
chmod 0755 "$STAGE/build-target.sh"

# iptables (nft), for CRIU's network lock of a job's parts saved across
# nodes (slurm_jobset_gpu.py) where that machine has none: the program,
# its libraries and its extensions (XTABLES_LIBDIR).
ipt=$(readlink -f "$(command -v iptables-restore || true)" 2>/dev/null || true)
if [[ -x $ipt ]]; then
        mkdir -p "$STAGE/iptables/bin" "$STAGE/iptables/lib"
        cp "$ipt" "$STAGE/iptables/bin/"
        for n in iptables iptables-restore iptables-save ip6tables ip6tables-restore ip6tables-save; do
                ln -sf "$(basename "$ipt")" "$STAGE/iptables/bin/$n"
        done
        ldd "$ipt" | awk '$3 ~ /^\// && $1 !~ /^lib(c|m|dl|pthread)\.so/ { print $3 }' |
                while read -r l; do cp -L "$l" "$STAGE/iptables/lib/"; done
        cp -a /usr/lib/x86_64-linux-gnu/xtables "$STAGE/iptables/xtables"
fi

# Debian's Slurm and munge, for a one-node cluster there (install-slurm-gpu.sh).
if command -v slurmd >/dev/null; then
        bash "$ROOT/tests/gpu/stage-slurm.sh" "$STAGE/slurm-debian.tar.gz"
fi

size=$(du -sm "$STAGE" | cut -f1)
echo "staged $STAGE: ${size} MiB"
ls -la "$STAGE"
if ((size > LIMIT_MIB)); then
        echo "stage-gpu.sh: .gpu is ${size} MiB, over ${LIMIT_MIB} MiB (the device call carries at most 64 MiB)" >&2
        exit 1
fi
