#!/usr/bin/env bash
# run-index-gpu.sh: the BPF process index on the real driver.  A CUDA
# process started before the daemon (found by the index's first scans) and
# one started after (its mmap of libcuda seen by the kernel hook) are both
# listed; the first is suspended and still listed, checkpointed (it holds no
# GPU device file then); the metrics say every list came from the index.
# Then the same with process_index_max 0 (a /proc scan), for the comparison.
# The first daemon is given process_index_tracepoint, so that the index runs
# on kernels without BPF trampolines too (the default scans /proc there).
#
# For the GPU machine (binaries staged by stage-gpu.sh in .gpu/, carried):
#   bash tests/gpu/run-index-gpu.sh [MIB]     (default 1024)
# Prints the kernel's BPF facts, PASS/FAIL lines and "N passed, N failed".
set -uo pipefail
MIB=${1:-1024}
source "$(dirname "${BASH_SOURCE[0]}")/gpu-lib.sh"
T2=
trap 'kill "$T2" 2>/dev/null; cleanup' EXIT

echo "kernel $(uname -r); BTF: $([[ -e /sys/kernel/btf/vmlinux ]] && echo yes || echo no);" \
        "tracefs: $(mountpoint -q /sys/kernel/tracing && echo mounted || echo "not mounted")"

# A CUDA process before the daemon.
"$DIR/cudackpt-gpu-target" --mib="$MIB" --status="$WORK/t.status" --quiet &
T=$!
wait_iter 1 || { bad "the first target never verified its data"; exit 1; }

echo '{"process_index_tracepoint": true}' >"$WORK/index.json"
start_daemon --config="$WORK/index.json" || { bad "the daemon did not start"; exit 1; }
for _ in $(seq 500); do
        grep -q "process index" "$WORK/daemon.log" && break
        sleep 0.01
done
line=$(grep -o "No process index.*\|Process index ready.*" "$WORK/daemon.log")
# A kernel without the tracepoint (no CONFIG_FTRACE_SYSCALLS) and refusing
# fentry (the H200 machines' 6.18) gives no index: the daemon then lists from
# /proc, which the rest checks; the index's own checks are skipped, said so.
NOINDEX=0
if [[ $line == "Process index ready"* ]]; then
        ok "$line"
elif [[ $line == "No process index"* && $line == *"refused the BPF program"* ]]; then
        NOINDEX=1
        echo "SKIP the kernel gives no process index here: $line"
else
        bad "${line:-the daemon said nothing of its index}"
fi

# One after it.
"$DIR/cudackpt-gpu-target" --mib="$MIB" --status="$WORK/t2.status" --quiet &
T2=$!
for _ in $(seq 2400); do grep -q "iter=[1-9]" "$WORK/t2.status" 2>/dev/null && break; sleep 0.05; done

listed() { "$CTL" --json ps | python3 -c '
import json, sys
want = {int(p): s for p, s in (a.split("=") for a in sys.argv[1:])}
got = {p["pid"]: p.get("state") for p in json.load(sys.stdin)}
bad = [f"{p}: {got.get(p)} (want {s})" for p, s in want.items() if got.get(p) != s]
print("; ".join(bad) if bad else "ok " + json.dumps(got))
sys.exit(1 if bad else 0)' "$@"; }

out=$(listed "$T=running" "$T2=running") && ok "both listed running: $out" || bad "ps: $out"
out=$("$CTL" suspend "$T" 2>&1) && ok "suspend: $out" || bad "suspend: $out"
out=$(listed "$T=checkpointed" "$T2=running") && ok "listed checkpointed (no device file held): $out" ||
        bad "ps after suspend: $out"
ls -l /proc/"$T"/fd 2>/dev/null | grep -c nvidia | { read -r n; echo "  device files held by the checkpointed process: $n"; }
# NVML's GPU memory: the running one holds at least MIB on the GPU, the
# checkpointed one none.
out=$("$CTL" --json ps | python3 -c '
import json, sys
mib, ck, run = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
p = {e["pid"]: e for e in json.load(sys.stdin)}
g_run, g_ck = p[run].get("gpus"), p[ck].get("gpus")
ok = g_run and len(g_run) == 1 and g_run[0]["uuid"].startswith("GPU-") and \
     g_run[0].get("memory_bytes", 0) >= mib << 20 and g_ck == []
print(("ok " if ok else "") + json.dumps({"running": g_run, "checkpointed": g_ck}))
sys.exit(0 if ok else 1)' "$MIB" "$T" "$T2") && ok "gpus from NVML: $out" || bad "gpus: $out"
"$CTL" ps
out=$("$CTL" resume "$T" 2>&1) && ok "resume: $out" || bad "resume: $out"
check_intact

m=$("$CTL" metrics)
idx=$(awk '$1 == "cudackpt_process_index" { print $2 }' <<<"$m")
from_idx=$(awk '$1 == "cudackpt_process_scans_total{source=\"index\"}" { print $2 }' <<<"$m")
from_proc=$(awk '$1 == "cudackpt_process_scans_total{source=\"proc\"}" { print $2 }' <<<"$m")
held=$(awk '$1 == "cudackpt_process_index_processes" { print $2 }' <<<"$m")
if ((NOINDEX)); then
        [[ $idx == 0 && ${from_idx:-0} == 0 && $from_proc -ge 2 ]] &&
                ok "metrics: no index, $from_proc lists from /proc" ||
                bad "metrics (no index): index=$idx from_index=$from_idx from_proc=$from_proc"
else
        [[ $idx == 1 && $from_idx -ge 2 && $from_proc == 0 ]] &&
                ok "metrics: index in use, $from_idx lists from it, none from /proc, $held processes in it" ||
                bad "metrics: index=$idx from_index=$from_idx from_proc=$from_proc"
fi

# Timing: ListProcesses with the index, then with a daemon without it.
time_ps() {
        python3 - "$CTL" <<'EOF'
import subprocess, sys, time
ts = []
for i in range(22):
    t = time.perf_counter()
    subprocess.run([sys.argv[1], "--json", "ps"], check=True, stdout=subprocess.DEVNULL)
    ts.append((time.perf_counter() - t) * 1e3)
ts = sorted(ts[2:])
print(f"cudackptctl ps (whole command) min {ts[0]:.2f} ms, median {ts[len(ts) // 2]:.2f} ms")
EOF
}
echo "  with the index: $(time_ps)"
kill "$DPID"; wait "$DPID" 2>/dev/null
echo '{"process_index_max": 0}' >"$WORK/noindex.json"
"$DIR/cudackptd" --socket="$CUDACKPT_SOCKET" --driver=libcuda.so.1 --config="$WORK/noindex.json" >"$WORK/daemon2.log" 2>&1 &
DPID=$!
for _ in $(seq 300); do "$CTL" info >/dev/null 2>&1 && break; sleep 0.1; done
out=$(listed "$T=running" "$T2=running") && ok "without the index, the same list: $out" || bad "ps without index: $out"
echo "  without it ($(ls /proc | grep -c '^[0-9]') processes): $(time_ps)"

echo "$pass passed, $failed failed"
[[ $failed == 0 ]]
