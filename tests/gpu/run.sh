#!/usr/bin/env bash
# tests/gpu/run.sh -- the CUDA backend on a GPU, in one run that finishes
# well inside 10 minutes on an H200: build, correctness, benchmarks, one
# summary table.
#
#   1. build     tests/gpu as a standalone CMake project (Release,
#                PARLEY_CUDA=ON: kernels/ and engine/ only, no Kafka / Redis
#                / HTTP dependencies) into build-gpu/, and check the fat
#                binary (a cubin for sm_90a, PTX for compute_80)
#   2. ops       gpu_ops: every op of the CUDA backend against the CPU
#                backend or kernels on the same random inputs (bit for bit
#                where exact: quantise, embed, argmax, kv_store write-back,
#                int32 GEMM sums; tolerances elsewhere) and the device KV tier
#   3. gemm      gpu_gemm: int8 GEMM TOPS against the dense int8 peak at
#                M = 1, 64, 512, 4096 (N = K = 8192)
#   4. models    gpu_model on Gemma 3 270M (when the GGUF is found: the
#                PARLEY_GEMMA_MODEL path, else $PARLEY_DEPS/models or
#                ~/.cache/parley/models; skipped with a line otherwise) and
#                the synthetic cai-1b and llama-1b (written here by
#                eng_mkmodel): CPU vs CUDA logits on a 128-token prefill + 32
#                decode steps, greedy tokens on 5 prompts, decode tok/s at
#                batch 1 against the HBM roofline, batch-64 decode,
#                prefill-512
#   5. summary   one table; logs and result lines under $OUT (if set) or
#                build-gpu/results
#
# For checking this script without a GPU: GPU_BIN=DIR runs the programs
# found there instead of building (e.g. links to the kern_cuda emulation's
# gpu_ops_emu / gpu_model_emu of tests/backend), GPU_PRESETS="tiny-llama ..."
# replaces the synthetic models, GPU_GEMM_ARGS="N K" the GEMM size, and
# PARLEY_GEMMA_MODEL=none skips Gemma.
#
# The CUDA toolkit is taken from CUDAToolkit_ROOT / CUDACXX, else
# $PARLEY_DEPS/env.sh (deploy/setup.sh), else /usr/local/cuda or the nvcc
# on PATH.  Every stage runs under a hard timeout, and a global deadline
# (GPU_DEADLINE, default 560 s from the start) skips stages that no longer
# fit.  Exit status: 0 when the build and every correctness check passed
# (performance targets are reported, not enforced), 1 otherwise, 77 when
# no GPU is visible.
set -uo pipefail
{
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
T0=$SECONDS
DEADLINE=${GPU_DEADLINE:-560}
BUILD=${GPU_BUILD_DIR:-$ROOT/build-gpu}
RES=${OUT:-$BUILD/results}
mkdir -p "$RES" "$BUILD"
RESULTS=$RES/results.txt
: >"$RESULTS"
FAILED=0
STATUS=() # "stage|status|note"

say() { printf '\n=== %s (t=%ds)\n' "$*" $((SECONDS - T0)); }
note() { STATUS+=("$1|$2|$3"); echo "[$1] $2 $3"; }

# run_stage NAME CAP CMD...: run with timeout min(CAP, time left); log to $RES/NAME.log
run_stage() {
    local name=$1 cap=$2 left rc
    shift 2
    left=$((DEADLINE - (SECONDS - T0)))
    if [ "$left" -lt 20 ]; then
        note "$name" SKIPPED "out of time (deadline ${DEADLINE}s)"
        return 124
    fi
    [ "$cap" -gt "$left" ] && cap=$left
    say "$name (timeout ${cap}s)"
    timeout --kill-after=10 "$cap" "$@" 2>&1 | tee "$RES/$name.log"
    rc=${PIPESTATUS[0]}
    grep -h '^@ ' "$RES/$name.log" | sed 's/^@ //' >>"$RESULTS"
    case $rc in
        0) note "$name" ok "" ;;
        77) note "$name" SKIPPED "no CUDA device" ;;
        124 | 137) note "$name" FAIL "timed out after ${cap}s"; FAILED=1 ;;
        *) note "$name" FAIL "exit $rc"; FAILED=1 ;;
    esac
    return "$rc"
}

# ---- toolkit ------------------------------------------------------------------
USER_GEMMA=${PARLEY_GEMMA_MODEL:-}
if [ -z "${CUDAToolkit_ROOT:-}" ] && [ -z "${CUDACXX:-}" ]; then
    ENVSH=${PARLEY_DEPS:-$HOME/.cache/parley}/env.sh
    # shellcheck disable=SC1090
    [ -f "$ENVSH" ] && . "$ENVSH"
fi
[ -n "$USER_GEMMA" ] && PARLEY_GEMMA_MODEL=$USER_GEMMA
if [ -z "${CUDAToolkit_ROOT:-}" ] && [ -z "${CUDACXX:-}" ]; then
    if [ -x /usr/local/cuda/bin/nvcc ]; then CUDAToolkit_ROOT=/usr/local/cuda
    elif command -v nvcc >/dev/null; then CUDAToolkit_ROOT=$(dirname "$(dirname "$(command -v nvcc)")")
    fi
fi
NVCC=${CUDACXX:-${CUDAToolkit_ROOT:+$CUDAToolkit_ROOT/bin/nvcc}}
say "environment"
echo "repository: $ROOT ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "toolkit: ${CUDAToolkit_ROOT:-?} nvcc: ${NVCC:-none}"
[ -n "$NVCC" ] && "$NVCC" --version 2>/dev/null | tail -2
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>/dev/null
echo "cpus: $(nproc)  cmake: $(cmake --version 2>/dev/null | head -1)"
if [ -n "${GPU_BIN:-}" ]; then
    note build SKIPPED "programs from GPU_BIN=$GPU_BIN"
elif [ -z "$NVCC" ] || [ ! -x "$NVCC" ]; then
    note build FAIL "no CUDA toolkit (set CUDAToolkit_ROOT or run deploy/setup.sh cuda)"
    FAILED=1
fi

# ---- 1. build -----------------------------------------------------------------
if [ $FAILED = 0 ] && [ -z "${GPU_BIN:-}" ]; then
    CFG=(-S "$ROOT/tests/gpu" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPARLEY_CUDA=ON
         -DCMAKE_CUDA_COMPILER="$NVCC")
    [ -n "${CUDAToolkit_ROOT:-}" ] && CFG+=(-DCUDAToolkit_ROOT="$CUDAToolkit_ROOT")
    command -v ninja >/dev/null && [ ! -f "$BUILD/Makefile" ] && CFG+=(-G Ninja)
    TB=$SECONDS
    if run_stage build 240 bash -c "cmake $(printf '%q ' "${CFG[@]}") && cmake --build $(printf '%q' "$BUILD") -j $(nproc) --target gpu_ops gpu_gemm gpu_model"; then
        echo "built in $((SECONDS - TB)) s"
        echo "build_s=$((SECONDS - TB))" >>"$RESULTS"
        LIB=$(find "$BUILD" -name libparley_cuda.a | head -1)
        if command -v python3 >/dev/null && [ -n "$LIB" ]; then
            if python3 "$ROOT/kernels/cuda/check_fatbin.py" "$LIB" --arch sm_90a --ptx compute_80 \
                >"$RES/fatbin.log" 2>&1; then
                note fatbin ok "cubin sm_90a + PTX compute_80"
            else
                note fatbin FAIL "$(tail -1 "$RES/fatbin.log")"
                FAILED=1
            fi
        fi
    else
        FAILED=1
    fi
fi
BIN=${GPU_BIN:-$BUILD}
[ -x "$BIN/gpu_ops" ] || BIN=$(dirname "$(find "$BUILD" -name gpu_ops -type f | head -1)" 2>/dev/null)

# ---- 2-4. correctness and benchmarks --------------------------------------------
if [ $FAILED = 0 ] && [ -x "$BIN/gpu_ops" ]; then
    run_stage ops 90 "$BIN/gpu_ops"
    if [ $? = 77 ]; then
        echo "no CUDA device visible: nothing to run"
        exit 77
    fi
    # shellcheck disable=SC2086
    run_stage gemm 60 "$BIN/gpu_gemm" ${GPU_GEMM_ARGS:-}
    GEMMA=${PARLEY_GEMMA_MODEL:-}
    for c in "${PARLEY_DEPS:-$HOME/.cache/parley}/models/gemma-3-270m-q4_k_m.gguf" \
             "$HOME/.cache/parley/models/gemma-3-270m-q4_k_m.gguf"; do
        [ -z "$GEMMA" ] && [ -f "$c" ] && GEMMA=$c
    done
    if [ "$GEMMA" = none ]; then
        note gemma-270m SKIPPED "PARLEY_GEMMA_MODEL=none"
    elif [ -n "$GEMMA" ] && [ -f "$GEMMA" ]; then
        run_stage gemma-270m 90 "$BIN/gpu_model" "$GEMMA" gemma-270m
    else
        note gemma-270m SKIPPED "no Gemma 3 270M GGUF (PARLEY_GEMMA_MODEL, ~/.cache/parley/models)"
    fi
    MODELS=${TMPDIR:-/tmp}/parley-gpu-models
    mkdir -p "$MODELS"
    for p in ${GPU_PRESETS:-cai-1b llama-1b}; do
        run_stage "$p" 130 "$BIN/gpu_model" "$MODELS/$p.gguf" "$p" --make "$p"
        rm -f "$MODELS/$p.gguf"
    done
fi

# ---- 5. summary -----------------------------------------------------------------
val() { sed -n "s/^$1=//p" "$RESULTS" | tail -1; }
field() { echo "$1" | tr ',' '\n' | sed -n "${2}p"; } # field "a,b,c" 2 -> b
pct() { echo "$1" | grep -oE '[0-9.]+%' | head -1 | tr -d '%'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 >= b + 0) }'; }
SUM=$RES/summary.txt
{
    printf '\n%-34s %-40s %-16s %s\n' "check" "measured" "target" "status"
    printf '%s\n' "--------------------------------------------------------------------------------------------------------------"
    row() { printf '%-34s %-40s %-16s %s\n' "$1" "$2" "$3" "$4"; }
    for s in "${STATUS[@]}"; do
        IFS='|' read -r n st why <<<"$s"
        row "stage $n" "$why" "" "$st"
    done
    v=$(val gpu_ops); [ -n "$v" ] && row "ops vs CPU (passed/total)" "$v" "all" "$([ "${v%/*}" = "${v#*/}" ] && echo ok || echo FAIL)"
    for m in 1 64 512 4096; do
        for p in gemv lt; do
            v=$(val "gemm_M${m}_$p"); [ -z "$v" ] && continue
            t=""; st=""
            if [ "$m" -ge 512 ]; then t=">= 60% peak"; ge "$(pct "$(field "$v" 2)")" 60 && st=met || st=MISSED; fi
            row "int8 GEMM M=$m ($p)" "$v" "$t" "$st"
        done
        v=$(val "linear_M$m"); [ -n "$v" ] && row "  linear() M=$m channel form" "$v" "" ""
        v=$(val "block_M$m"); [ -n "$v" ] && row "  linear() M=$m block form" "$v" "" ""
    done
    for mdl in gemma-270m ${GPU_PRESETS:-cai-1b llama-1b}; do
        v=$(val "${mdl}_cpu_vs_fp32"); [ -z "$v" ] && continue
        row "$mdl cpu int8 vs fp32" "$v" "(reference)" ""
        for f in channel block; do
            v=$(val "${mdl}_${f}_vs_fp32"); [ -n "$v" ] && row "$mdl cuda $f vs fp32" "$v" "" ""
            v=$(val "${mdl}_${f}_vs_cpu")
            if [ -n "$v" ]; then
                g=$(echo "$v" | sed -n 's/.*greedy=//p')
                row "$mdl cuda $f vs cpu int8" "$v" "greedy 5/5" "$([ "$g" = 5/5 ] && echo met || echo MISSED)"
            fi
        done
        for f in channel block; do
            v=$(val "${mdl}_${f}_decode_b1")
            [ -n "$v" ] && row "$mdl $f decode b1" "$v" ">= 70% roofline" "$(ge "$(pct "$(field "$v" 2)")" 70 && echo met || echo MISSED)"
        done
        v=$(val "${mdl}_channel_decode_b64"); [ -n "$v" ] && row "$mdl channel decode b64" "$v" "" ""
        for f in channel block; do
            v=$(val "${mdl}_${f}_prefill512"); [ -n "$v" ] && row "$mdl $f prefill 512" "$v" "" ""
        done
    done
    v=$(val gemm_lt_refusals); [ -n "$v" ] && row "cuBLASLt refusals (GEMV ran)" "$v" "0" ""
    printf '\ntotal %d s; %s\n' $((SECONDS - T0)) "$([ $FAILED = 0 ] && echo 'correctness: PASS' || echo 'correctness: FAIL')"
} | tee "$SUM"
echo "logs and results: $RES"
exit $FAILED
}
