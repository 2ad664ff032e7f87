# Sourced by the GPU test runners: is there a GPU to test on?  Each missing
# piece is one clear line through the caller's skip(), which exits 77.  On
# success DRIVER_VERSION holds the driver's version as nvidia-smi prints it.
# shellcheck shell=bash
gpu_preflight() {
        [[ -e /dev/nvidiactl ]] || skip "no NVIDIA GPU (/dev/nvidiactl does not exist)"
        command -v nvidia-smi >/dev/null 2>&1 || skip "nvidia-smi not found"
        timeout 60 nvidia-smi -L >/dev/null 2>&1 || skip "nvidia-smi -L failed (no usable GPU or driver)"
        DRIVER_VERSION=$(timeout 60 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | sed -n 1p)
        [[ ${DRIVER_VERSION%%.*} =~ ^[0-9]+$ ]] || skip "cannot read the driver version from nvidia-smi"
        ((${DRIVER_VERSION%%.*} >= 580)) || skip "driver $DRIVER_VERSION is older than 580"
}
