#!/bin/bash
# make-corpus.sh: writes the seed corpus of the request fuzz target
# (fuzz_request.c) into tests/fuzz/corpus/, or into the directory given.
#
# Each file is one input: a header byte, then the bytes sent.  The header's
# low nibble + 1 is the size of each write; its high nibble picks the target
# that $PID and $START name: 0 plain CUDA process, 1 slow lock (5 ms),
# 2 checkpoint fails NOT_SUPPORTED, 3 lock fails and GetState says 7, 4 two
# GPUs, 5 the daemon itself, 6 pid 1, 7 a zombie, 8 no such process, 9 a
# thread of the daemon.  $Pn, $Sn and $Tn name target n's pid, start time
# and second thread (targets 0-4 have one); $CONN starts another
# connection.  See fuzz_request.c.  The seeds cover every method, valid and
# invalid parameters, the limits (4096-byte messages, 4 GPU pairs, 2
# operations per pid, 3 in all), framing, Varlink call flags and thread ids.
# Run it again after changing it; the files it writes are committed.  An
# input worth keeping from a fuzzing run goes in as corpus/repro-NAME.
set -euo pipefail

out=${1:-$(dirname "$0")/corpus}
mkdir -p "$out"
# Everything but saved reproducers (repro-*, kept by hand) is written here.
find "$out" -maxdepth 1 -type f ! -name 'repro-*' -delete

I=io.cudackpt.Process
GPU1=GPU-00000000-5157-4000-8000-000000000001
GPU2=GPU-00000000-5157-4000-8000-000000000002
GPU1_HEX=00000000515740008000000000000001
GPU_BAD_LEN=0000000051574000800000000000000002
GPU_NONE=GPU-ffffffff-ffff-ffff-ffff-ffffffffffff

# call METHOD [PARAMS-JSON [EXTRA-KEYS]]: one call object, without the NUL.
call() {
        local m=$1 p=${2:-} x=${3:-}
        printf '{"method":"%s"' "$m"
        [ -n "$p" ] && printf ',"parameters":%s' "$p"
        [ -n "$x" ] && printf ',%s' "$x"
        printf '}'
}

# seed NAME HEADER MESSAGE...: the header byte (two hex digits), then each
# message followed by its NUL.
seed() {
        local name=$1 hdr=$2
        shift 2
        {
                printf "\\x$hdr"
                for m in "$@"; do printf '%s\0' "$m"; done
        } >"$out/$name"
}

P='{"pid":$PID}'

# --- org.varlink.service
seed getinfo 00 "$(call org.varlink.service.GetInfo)"
seed getinfo-params 01 "$(call org.varlink.service.GetInfo '{}')" \
        "$(call org.varlink.service.GetInfo '{"x":1}')"
seed getifdesc 02 "$(call org.varlink.service.GetInterfaceDescription '{"interface":"'$I'"}')" \
        "$(call org.varlink.service.GetInterfaceDescription '{"interface":"org.varlink.service"}')"
seed getifdesc-bad 03 "$(call org.varlink.service.GetInterfaceDescription '{"interface":"com.example.Nothing"}')" \
        "$(call org.varlink.service.GetInterfaceDescription '{}')" \
        "$(call org.varlink.service.GetInterfaceDescription '{"interface":7}')" \
        "$(call org.varlink.service.GetInterfaceDescription '{"interface":"'$I'","interface":"'$I'"}')" \
        "$(call org.varlink.service.Nothing)"
# GetStatus: no parameters; its counts while an operation is in flight.
seed getstatus 00 "$(call $I.GetStatus)" "$(call $I.GetStatus '{}')" "$(call $I.GetStatus '{"x":1}')" \
        "$(call $I.Suspend "$P")" "\$CONN$(call $I.GetStatus)"

# --- GetState and GetRestoreThreadId on every kind of target
seed getstate 0f "$(call $I.GetState "$P")"
seed getstate-start-time 05 "$(call $I.GetState '{"pid":$PID,"start_time":$START}')" \
        "$(call $I.GetState '{"pid":$PID,"start_time":1}')" \
        "$(call $I.GetState '{"pid":$PID,"start_time":null}')"
seed getstate-unknown-state 30 "$(call $I.GetState "$P")" "$(call $I.GetRestoreThreadId "$P")"
seed getstate-daemon-itself 50 "$(call $I.GetState "$P")" "$(call $I.Lock "$P")" \
        "$(call $I.GetState '{"pid":$P5,"start_time":$S5}')" "$(call $I.Suspend '{"pid":$P5,"start_time":1}')"
seed getstate-pid1 60 "$(call $I.GetState "$P")" "$(call $I.Suspend '{"pid":1}')"
seed getstate-zombie 7f "$(call $I.GetState "$P")" "$(call $I.Lock '{"pid":$PID,"start_time":$START}')"
seed getstate-no-such-process 80 "$(call $I.GetState "$P")" "$(call $I.Resume "$P")" \
        "$(call $I.GetState '{"pid":2147483647}')"
seed getrestoretid 04 "$(call $I.GetRestoreThreadId "$P")" \
        "$(call $I.GetRestoreThreadId '{"pid":$PID,"start_time":$START}')"

# --- thread ids: a thread id means its process ($Tn: a second thread of n)
seed thread-id 0f "$(call $I.Lock '{"pid":$T0}')" "$(call $I.GetState '{"pid":$P0}')" \
        "$(call $I.Unlock '{"pid":$T0,"start_time":$S0}')" "$(call $I.GetRestoreThreadId '{"pid":$T0}')" \
        "$(call $I.Suspend '{"pid":$T2}')" "$(call $I.GetState '{"pid":$T3}')"
seed conns-thread-and-pid 1f "$(call $I.Lock '{"pid":$T1}')" "$(call $I.Unlock '{"pid":$T1}')" \
        "\$CONN$(call $I.Lock '{"pid":$P1,"timeout_ms":2}')" "$(call $I.GetState '{"pid":$T1}')" \
        "\$CONN$(call $I.GetState '{"pid":$T1}')" "$(call $I.Unlock '{"pid":$P1}')"

# --- the operations
seed lock-unlock 0a "$(call $I.Lock "$P")" "$(call $I.GetState "$P")" "$(call $I.Lock "$P")" \
        "$(call $I.Unlock "$P")" "$(call $I.Unlock "$P")"
seed lock-timeout 1f "$(call $I.Lock '{"pid":$PID,"timeout_ms":1}')" \
        "$(call $I.Lock '{"pid":$PID,"timeout_ms":0}')" "$(call $I.Unlock "$P")" \
        "$(call $I.Lock '{"pid":$PID,"timeout_ms":4294967295}')" "$(call $I.Unlock "$P")"
seed lock-timeout-range 0e "$(call $I.Lock '{"pid":$PID,"timeout_ms":4294967296}')" \
        "$(call $I.Lock '{"pid":$PID,"timeout_ms":-1}')" \
        "$(call $I.Lock '{"pid":$PID,"timeout_ms":null}')" "$(call $I.Unlock "$P")"
seed lock-fails 3c "$(call $I.Lock "$P")" "$(call $I.Suspend "$P")" "$(call $I.Unlock "$P")"
seed suspend-resume 07 "$(call $I.Suspend "$P")" "$(call $I.GetState "$P")" \
        "$(call $I.Suspend "$P")" "$(call $I.Resume "$P")"
seed suspend-rollback 2b "$(call $I.Suspend "$P")" "$(call $I.Lock "$P")" "$(call $I.Checkpoint "$P")" \
        "$(call $I.Unlock "$P")"
seed step-by-step 08 "$(call $I.Lock "$P")" "$(call $I.Checkpoint "$P")" "$(call $I.Checkpoint "$P")" \
        "$(call $I.Restore "$P")" "$(call $I.Restore "$P")" "$(call $I.Unlock "$P")"
seed wrong-state 09 "$(call $I.Checkpoint "$P")" "$(call $I.Restore "$P")" "$(call $I.Unlock "$P")" \
        "$(call $I.Resume "$P")"
seed suspend-start-time 06 "$(call $I.Suspend '{"pid":$PID,"start_time":$START,"timeout_ms":500}')" \
        "$(call $I.Resume '{"pid":$PID,"start_time":$START}')" \
        "$(call $I.Suspend '{"pid":$PID,"start_time":12345}')"

# --- GPU mappings (target 4 runs on both simulated GPUs)
seed mapping-swap 4f "$(call $I.Suspend "$P")" \
        "$(call $I.Resume '{"pid":$PID,"gpu_mapping":{"'$GPU1'":"'$GPU2'","'$GPU2'":"'$GPU1'"}}')" \
        "$(call $I.Suspend "$P")" "$(call $I.Resume "$P")"
seed mapping-spellings 4d "$(call $I.Suspend "$P")" \
        "$(call $I.Restore '{"pid":$PID,"gpu_mapping":{"'$GPU1_HEX'":"gpu-00000000-5157-4000-8000-000000000001","00000000-5157-4000-8000-000000000002":"GPU-00000000515740008000000000000002"}}')" \
        "$(call $I.Unlock "$P")"
seed mapping-partial 44 "$(call $I.Suspend "$P")" \
        "$(call $I.Resume '{"pid":$PID,"gpu_mapping":{"'$GPU1'":"'$GPU2'"}}')" \
        "$(call $I.Resume '{"pid":$PID,"gpu_mapping":{}}')"
seed mapping-invalid 0c "$(call $I.Resume '{"pid":$PID,"gpu_mapping":{"GPU-nothex":"'$GPU1'"}}')" \
        "$(call $I.Resume '{"pid":$PID,"gpu_mapping":{"'$GPU1'":"'$GPU1'","'$GPU1_HEX'":"'$GPU2'"}}')" \
        "$(call $I.Resume '{"pid":$PID,"gpu_mapping":{"'$GPU1'":"'$GPU1'","'$GPU2'":"'$GPU1_HEX'"}}')" \
        "$(call $I.Resume '{"pid":$PID,"gpu_mapping":{"'$GPU1'":"'$GPU_NONE'"}}')" \
        "$(call $I.Resume '{"pid":$PID,"gpu_mapping":{"'$GPU1'":"'$GPU_BAD_LEN'"}}')" \
        "$(call $I.Restore '{"pid":$PID,"gpu_mapping":{"'$GPU1'":7}}')"
seed mapping-types 0b "$(call $I.Resume '{"pid":$PID,"gpu_mapping":null}')" \
        "$(call $I.Resume '{"pid":$PID,"gpu_mapping":["'$GPU1'"]}')" \
        "$(call $I.Resume '{"pid":$PID,"gpu_mapping":"'$GPU1'"}')" \
        "$(call $I.Restore '{"pid":$PID,"gpu_mapping":{"":""}}')"
seed mapping-too-many 02 "$(call $I.Resume '{"pid":$PID,"gpu_mapping":{"GPU-00000000-0000-0000-0000-000000000001":"'$GPU1'","GPU-00000000-0000-0000-0000-000000000002":"'$GPU2'","GPU-00000000-0000-0000-0000-000000000003":"GPU-00000000-5157-4000-8000-000000000003","GPU-00000000-0000-0000-0000-000000000004":"GPU-00000000-5157-4000-8000-000000000004","GPU-00000000-0000-0000-0000-000000000005":"GPU-00000000-5157-4000-8000-000000000005"}}')"

# --- parameters
seed pid-values 0d "$(call $I.GetState '{"pid":0}')" "$(call $I.GetState '{"pid":-1}')" \
        "$(call $I.GetState '{"pid":2147483648}')" "$(call $I.GetState '{"pid":1.5}')" \
        "$(call $I.GetState '{"pid":"1"}')" "$(call $I.GetState '{"pid":true}')" \
        "$(call $I.GetState '{"pid":1e300}')" "$(call $I.GetState '{"pid":null}')" \
        "$(call $I.GetState '{"pid":[1]}')" "$(call $I.GetState '{"pid":1.0}')" \
        "$(call $I.GetState '{"pid":-0}')" "$(call $I.GetState '{"pid":1E0}')"
seed params-keys 0c "$(call $I.GetState '{}')" "$(call $I.GetState)" \
        "$(call $I.GetState '{"pid":$PID,"pid":$PID}')" "$(call $I.GetState '{"PID":$PID}')" \
        "$(call $I.GetState '{"pid":$PID,"extra":1}')" "$(call $I.Checkpoint '{"pid":$PID,"timeout_ms":1}')" \
        "$(call $I.Lock '{"pid":$PID,"gpu_mapping":{}}')" "$(call $I.GetState "$P")"
seed start-time-values 0e "$(call $I.GetState '{"pid":$PID,"start_time":-1}')" \
        "$(call $I.GetState '{"pid":$PID,"start_time":18446744073709551616}')" \
        "$(call $I.GetState '{"pid":$PID,"start_time":0.5}')" \
        "$(call $I.GetState '{"pid":$PID,"start_time":"$START"}')" \
        "$(call $I.GetState '{"pid":$PID,"start_time":9007199254740993}')"
seed unknown-method 01 "$(call $I.Nothing "$P")" "$(call $I.getstate "$P")" \
        "$(call com.example.Thing.Do "$P")" "$(call $I.GetState "$P")"

# --- call flags
seed oneway 03 "$(call $I.Suspend "$P" '"oneway":true')" "$(call $I.GetState "$P")" \
        "$(call $I.Resume "$P" '"oneway":true')" "$(call $I.GetState "$P")" \
        "$(call org.varlink.service.GetInfo '' '"oneway":true')" "$(call $I.GetState '{"pid":0}' '"oneway":true')"
seed more 04 "$(call $I.GetState "$P" '"more":true')" "$(call $I.Lock "$P" '"more":true,"oneway":false')" \
        "$(call $I.Unlock "$P" '"more":false')"
# (each InvalidRequest closes its connection: one connection for each)
seed flags-invalid 05 "$(call $I.GetState "$P" '"more":1')" "\$CONN$(call $I.GetState "$P" '"oneway":"yes"')" \
        "\$CONN$(call $I.GetState "$P" '"upgrade":true')" "\$CONN$(call $I.GetState "$P" '"oneway":null')"

# --- not Varlink calls: InvalidRequest, the connection closes
seed garbage 00 "not json at all" "$(call $I.GetState "$P")" "\$CONN[1,2,3]" "\$CONN\"$I.GetState\"" "\$CONN42"
seed empty-message 02 "" "$(call $I.GetState "$P")"
seed method-invalid 03 '{"parameters":{"pid":1}}' '$CONN{"method":42}' \
        '$CONN{"method":"GetState","parameters":{"pid":1}}' '$CONN{"method":"io.cudackpt.Process.","parameters":{"pid":1}}'
seed unknown-key 07 "$(call $I.GetState "$P" '"foo":1')"
seed repeated-method 08 '{"method":"'$I'.GetState","method":"'$I'.Lock","parameters":{"pid":$PID}}'
seed parameters-not-object 09 '{"method":"'$I'.GetState","parameters":[1]}'
seed truncated-json 0a '{"method":"'$I'.GetState","parameters":{"pid":$PID}'
seed trailing-garbage 0b "$(call $I.GetState "$P")x" "$(call $I.GetState "$P")"
seed escaped-nul 0c '{"method":"'$I'.GetState\u0000x","parameters":{"pid":$PID}}' \
        '{"method":"'$I'.GetState","parameters":{"pid\u0000":$PID}}'
seed unicode 0d '{"method":"'$I'.Get\u0053tate","parameters":{"\u0070id":$PID}}' \
        '{"method":"io.cudackpt.Pr\u00f6cess.GetState","parameters":{"pid":$PID}}' \
        '{"method":"'$I'.GetState","parameters":{"pid":$PID,"\ud800":1}}'
seed whitespace 0e $' \t\n{ "method" : "'$I$'.GetState" , "parameters" : { "pid" : $PID } }\r\n ' \
        "$(call $I.GetState "$P")"
seed deep-nesting 0f "{\"method\":\"$I.GetState\",\"parameters\":{\"pid\":$(printf '[%.0s' $(seq 1100))1$(printf ']%.0s' $(seq 1100))}}"

# --- framing and size limits (max_message_bytes 4096, NUL included)
pad() { head -c "$1" /dev/zero | tr '\0' 'a'; }
# A call padded to exactly 4095 bytes + NUL (the limit), and one byte more.
base=$(call $I.GetState '{"pid":1,"x":""}' | wc -c)
seed size-at-limit 0f "$(call $I.GetState '{"pid":1,"x":"'"$(pad $((4095 - base)))"'"}')" "$(call $I.GetState "$P")"
seed size-over-limit 0f "$(call $I.GetState '{"pid":1,"x":"'"$(pad $((4096 - base)))"'"}')" "$(call $I.GetState "$P")"
{ printf '\x0f'; call $I.GetState '{"pid":1,"x":"'"$(pad 5000)"'"}'; } >"$out/size-over-limit-unterminated"
{ printf '\x0f'; call $I.GetState "$P"; } >"$out/unterminated"
{ printf '\x00'; printf '%s\0' "$(call $I.GetState "$P")" "$(call $I.Lock "$P")" "$(call $I.Unlock "$P")"; } \
        >"$out/split-1-byte"
{ printf '\x0f'; for i in $(seq 1 20); do printf '%s\0' "$(call $I.GetState "$P")"; done; } >"$out/pipelined"
{ printf '\x0f'; printf '\0\0\0'; } >"$out/nuls"
printf '' >"$out/empty"

# --- several connections at once: in-flight GetState, per-pid and total limits
seed conns-inflight-getstate 1f "$(call $I.Suspend "$P")" "\$CONN$(call $I.GetState "$P")" \
        "$(call $I.GetState '{"pid":$PID,"start_time":$START}')" "$(call $I.GetState '{"pid":$PID,"start_time":7}')"
seed conns-queue-full 1f "$(call $I.Lock '{"pid":$PID,"timeout_ms":0}')" \
        "\$CONN$(call $I.Lock "$P")" "\$CONN$(call $I.Unlock "$P")" "\$CONN$(call $I.GetState "$P")"
seed conns-queue-total 0f "$(call $I.Suspend '{"pid":$P1}')" "\$CONN$(call $I.Suspend '{"pid":$P0}')" \
        "\$CONN$(call $I.Suspend '{"pid":$P4}')" "\$CONN$(call $I.Suspend '{"pid":$P2}')"
seed conns-mixed 03 "$(call $I.Suspend "$P")" "\$CONN" "garbage" "\$CONN$(call org.varlink.service.GetInfo)" \
        "\$CONN$(call $I.Resume "$P" '"oneway":true')"

echo "make-corpus.sh: $(ls "$out" | wc -l) seeds in $out"
