#!/usr/bin/env bash
# deploy/demo.sh -- the README's first command: set up, build, and run the
# most complete thing parley does on embedded defaults.
#
# Installs the build dependencies (deploy/setup.sh apt: Debian packages
# only, no test references), builds the release binary into build/, writes
# a synthetic Character.AI-shaped model (parley mkmodel --preset cai-tiny)
# unless --model is given, then:
#   1. answers one prompt with `parley generate` (text in, text out, speed);
#   2. serves multi-turn conversations through the continuous-batching
#      scheduler and the KV cache, once with the prefix cache and once
#      without (`parley bench --workload multiturn`), and prints the share of
#      prompt tokens served from cache, time to first token by turn and
#      tokens/s for both.
# A synthetic model has random weights, so its text is meaningless; pass a
# real GGUF (llama or gemma3) with --model FILE.
#
# Usage: deploy/demo.sh [--model FILE] [--conversations N] [--turns N]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

MODEL=
CONVS=16
TURNS=6
while [ $# -gt 0 ]; do
    case $1 in
        --model) MODEL=${2:?--model needs a file}; shift 2 ;;
        --conversations) CONVS=${2:?}; shift 2 ;;
        --turns) TURNS=${2:?}; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "deploy/demo.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

echo "== setting up build dependencies"
deploy/setup.sh apt
echo "== building (build/)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target parley >/dev/null
PARLEY=build/consumer/parley

if [ -z "$MODEL" ]; then
    MODEL=${PARLEY_DEPS:-$HOME/.cache/parley}/models/cai-tiny.gguf
    mkdir -p "$(dirname "$MODEL")"
    [ -f "$MODEL" ] || "$PARLEY" mkmodel --preset cai-tiny --out "$MODEL"
    echo "== synthetic model $MODEL (random weights: the text below is meaningless)"
fi

echo "== parley inspect (the engine's view of the model)"
"$PARLEY" inspect "$MODEL" | sed -n '/^architecture/,$p'

echo "== parley generate: one prompt"
"$PARLEY" generate "$MODEL" --prompt "Hello! Tell me about the sea." -n 32

echo "== parley bench: $CONVS conversations x $TURNS turns, prefix cache on and off"
"$PARLEY" bench --workload multiturn --model "$MODEL" \
    --conversations "$CONVS" --turns "$TURNS"
