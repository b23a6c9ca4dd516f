#!/usr/bin/env bash
# tests/run.sh -- parley's whole test run (the README's second command; CI's
# .ci/run calls exactly this).
#
#   1. deploy/setup.sh: installs what is missing (fast when warm)
#   2. builds three trees (-j2):
#        build/       Release, CUDA backend compiled (PARLEY_CUDA=ON)
#        build-asan/  RelWithDebInfo + ASan/UBSan, for the unit tests
#        build-fuzz/  clang + ASan/UBSan, only the libFuzzer targets
#   3. starts a real Kafka 4.x broker and Redis (deploy/kafka.sh, redis.sh)
#      in a temporary run directory; a trap stops them on every exit path
#   4. runs ctest -L unit in build-asan, -L cuda (the sm_90a fatbin check),
#      -L integration and -L slow in build,
#      -L fuzz in build-fuzz, then pytest tests/py with the venv's python,
#      then README command 1 as a new user runs it (tests/readme/demo.sh:
#      a clean clone, deploy/demo.sh verbatim in a new shell without env.sh,
#      then --synthetic; about 3 minutes)
#   5. prints one line per stage, every skip with its reason, and a final
#      "parley: N passed, N failed, N skipped"; exits non-zero when anything
#      failed (a build failure counts as one).  Under CI=true (.ci/run) a
#      skip that hides a missing component is a failure (only what the
#      hardware lacks may skip: tests/unit/ptest.h, tests/py/conftest.py).
#
# Tests get PARLEY_BUILD (build/), PARLEY_BIN (build/consumer/parley),
# PARLEY_TEST_KAFKA and PARLEY_TEST_REDIS (host:port) and
# PARLEY_TEST_STRICT=1 (pytest fixtures then fail, never skip, when a
# service address is missing).  The checks of deploy/ (systemd units,
# Kubernetes manifests, alert rules, dashboard, a worker's /metrics against
# them) are tests/py/test_deploy_ops.py in the pytest stage, about 10 s
# (the image: tests/py/test_deploy_container.py, about 100 s):
# `tests/run.sh --no-build --pytest tests/py/test_deploy_ops.py`.  With PARLEY_TEST_KAFKA / PARLEY_TEST_REDIS
# already set, the given servers are used and none is started.
#
# Options, for running a part quickly:
#   -L LABEL        only the ctest stage(s) of LABEL (unit, integration,
#                   slow, fuzz, or any other label: run in build/); "py"
#                   means pytest only, "readme" the README-command stage
#   -R REGEX        ctest stages: only tests whose name matches REGEX
#   --pytest ARGS   pytest only, with ARGS (everything after --pytest), e.g.
#                   tests/run.sh --pytest -k deploy
#   --no-setup      skip deploy/setup.sh (env.sh must exist)
#   --no-build      skip configuring/building (trees must exist)
#   -h, --help      this text
# Examples:  tests/run.sh -L unit          tests/run.sh -L integration -R redis
#            tests/run.sh --no-build --pytest tests/py/test_deploy_services.py
# PARLEY_PYTEST_TIMEOUT bounds the pytest stage (default 3000 s).
set -euo pipefail
# The whole script is one brace group: bash parses it completely before
# running it, so editing this file (or a git pull) during a run is safe.
{

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

LABEL=
REGEX=
PYTEST_ONLY=0
PYTEST_ARGS=()
DO_SETUP=1
DO_BUILD=1
while [ $# -gt 0 ]; do
    case $1 in
        -L) LABEL=${2:?-L needs a label}; shift 2 ;;
        -R) REGEX=${2:?-R needs a regex}; shift 2 ;;
        --pytest) PYTEST_ONLY=1; shift; PYTEST_ARGS=("$@"); break ;;
        --no-setup) DO_SETUP=0; shift ;;
        --no-build) DO_BUILD=0; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "tests/run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

T_START=$SECONDS
say() { printf '\n=== %s\n' "$*"; }

# ---- what runs --------------------------------------------------------------
# Stage: "name|tree|kind" with kind ctest:<label> or pytest.
STAGES=()
if [ $PYTEST_ONLY = 1 ] || [ "$LABEL" = py ]; then
    STAGES=("pytest|build|pytest")
elif [ "$LABEL" = readme ]; then
    STAGES=("readme|build|readme")
elif [ -n "$LABEL" ]; then
    case $LABEL in
        unit) STAGES=("unit|build-asan|ctest:unit") ;;
        fuzz) STAGES=("fuzz|build-fuzz|ctest:fuzz") ;;
        *) STAGES=("$LABEL|build|ctest:$LABEL") ;;
    esac
else
    STAGES=("unit|build-asan|ctest:unit" "cuda|build|ctest:cuda"
            "integration|build|ctest:integration"
            "slow|build|ctest:slow" "fuzz|build-fuzz|ctest:fuzz" "pytest|build|pytest"
            "readme|build|readme")
fi
need_tree() { local s; for s in "${STAGES[@]}"; do [[ $s == *"|$1|"* ]] && return 0; done; return 1; }
# Kafka and Redis are started for every stage except unit, cuda, fuzz,
# slow and readme.
NEED_SERVICES=0
for s in "${STAGES[@]}"; do
    case ${s%%|*} in unit|fuzz|slow|cuda|readme) ;; *) NEED_SERVICES=1 ;; esac
done

# ---- results ----------------------------------------------------------------
PASSED=0
FAILED=0
SKIPPED=0
REPORT=()
record() { # record NAME PASSED FAILED SKIPPED NOTE
    PASSED=$((PASSED + $2)); FAILED=$((FAILED + $3)); SKIPPED=$((SKIPPED + $4))
    REPORT+=("$(printf '  %-18s %4d passed %4d failed %4d skipped  %s' "$1" "$2" "$3" "$4" "$5")")
}

# ---- services (stopped by the trap) -----------------------------------------
RUN_DIR=
cleanup() {
    local rc=$?
    if [ -n "$RUN_DIR" ]; then
        PARLEY_RUN_DIR=$RUN_DIR "$ROOT/deploy/kafka.sh" stop >/dev/null 2>&1 || true
        PARLEY_RUN_DIR=$RUN_DIR "$ROOT/deploy/redis.sh" stop >/dev/null 2>&1 || true
        rm -rf "$RUN_DIR"
    fi
    return $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Every skip, with its reason: C tests append to $PARLEY_SKIP_LOG
# (ptest.h), pytest's -rs lines are collected from its log.
export PARLEY_SKIP_LOG=${TMPDIR:-/tmp}/parley-skips.$$.log
: >"$PARLEY_SKIP_LOG"
SKIP_LINES=()
finish() {
    say "summary ($((SECONDS - T_START)) s)"
    local line
    for line in "${REPORT[@]}"; do echo "$line"; done
    if [ -s "$PARLEY_SKIP_LOG" ] || [ ${#SKIP_LINES[@]} -gt 0 ]; then
        echo "skipped (each with its reason):"
        [ -s "$PARLEY_SKIP_LOG" ] && sed 's/^/  ctest  /' "$PARLEY_SKIP_LOG"
        for line in "${SKIP_LINES[@]}"; do echo "  pytest $line"; done
    fi
    rm -f "$PARLEY_SKIP_LOG"
    if [ "$SKIPPED" -gt 0 ]; then
        echo "parley: $PASSED passed, $FAILED failed, $SKIPPED skipped"
    else
        echo "parley: $PASSED passed, $FAILED failed"
    fi
    if [ "$FAILED" -eq 0 ]; then exit 0; fi
    exit 1
}

# ---- 1. setup ---------------------------------------------------------------
if [ $DO_SETUP = 1 ]; then
    say "setup"
    if ! "$ROOT/deploy/setup.sh"; then
        record setup 0 1 0 "deploy/setup.sh failed"
        finish
    fi
fi
if [ ! -f "${PARLEY_DEPS:-$HOME/.cache/parley}/env.sh" ]; then
    record setup 0 1 0 "no env.sh: run deploy/setup.sh"
    finish
fi
# shellcheck disable=SC1091
. "${PARLEY_DEPS:-$HOME/.cache/parley}/env.sh"

# ---- 2. build ---------------------------------------------------------------
declare -A TREE_OK=()
# A tree that configures is built with keep-going, so that one broken target
# fails the run (counted as one failure) without hiding every other test.
# ONLY=LABEL builds just the targets of that label's tests (parley_add_fuzz
# names each test after its target); empty builds everything.
build_tree() { # build_tree DIR ONLY cmake-args...
    local dir=$1 only=$2 t0=$SECONDS keep=() targets=()
    shift 2
    say "build $dir"
    mkdir -p "$ROOT/$dir"
    if ! cmake -S "$ROOT" -B "$ROOT/$dir" "$@" >"$ROOT/$dir/configure.log" 2>&1; then
        cat "$ROOT/$dir/configure.log"
        TREE_OK[$dir]=0
        record "build:$dir" 0 1 0 "configure failed"
        return 0
    fi
    grep -E 'CUDA backend|^CMake (Warning|Error)' "$ROOT/$dir/configure.log" || true
    TREE_OK[$dir]=1
    if [ -n "$only" ]; then
        mapfile -t targets < <(ctest --test-dir "$ROOT/$dir" -N -L "^$only\$" |
                               sed -n 's/^ *Test *#[0-9]*: \(.*\)$/\1/p')
        if [ ${#targets[@]} -eq 0 ]; then echo "no $only targets"; return 0; fi
        targets=(--target "${targets[@]}")
    fi
    if [ -f "$ROOT/$dir/build.ninja" ]; then keep=(-- -k 0); else keep=(-- -k); fi
    if cmake --build "$ROOT/$dir" -j2 "${targets[@]}" "${keep[@]}"; then
        echo "built $dir in $((SECONDS - t0)) s"
    else
        record "build:$dir" 0 1 0 "build failed (errors above); its tests still run"
    fi
}
if [ $DO_BUILD = 1 ]; then
    # every tree needs llguidance (setup.sh builds it): a test build without
    # constraints would only refuse them
    if need_tree build; then build_tree build "" -DCMAKE_BUILD_TYPE=Release -DPARLEY_CUDA=ON \
        -DCUDAToolkit_ROOT="$CUDAToolkit_ROOT" -DCMAKE_CUDA_COMPILER="$CUDACXX" \
        -DPARLEY_REQUIRE_LLGUIDANCE=ON; fi
    if need_tree build-asan; then build_tree build-asan "" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DPARLEY_SANITIZE=ON -DPARLEY_CUDA=OFF -DPARLEY_REQUIRE_LLGUIDANCE=ON; fi
    if need_tree build-fuzz; then build_tree build-fuzz fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_COMPILER=clang -DPARLEY_FUZZ=ON -DPARLEY_SANITIZE=ON -DPARLEY_CUDA=OFF \
        -DPARLEY_REQUIRE_LLGUIDANCE=ON; fi
else
    for d in build build-asan build-fuzz; do
        [ -f "$ROOT/$d/CTestTestfile.cmake" ] && TREE_OK[$d]=1 || TREE_OK[$d]=0
    done
fi

# ---- 3. services ------------------------------------------------------------
export PARLEY_BUILD=$ROOT/build
export PARLEY_BIN=$PARLEY_BUILD/consumer/parley
export PARLEY_TEST_STRICT=1
if [ $NEED_SERVICES = 1 ]; then
    say "services"
    RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/parley-test-run.XXXXXX")
    if [ -n "${PARLEY_TEST_KAFKA:-}" ]; then
        echo "using the Kafka at PARLEY_TEST_KAFKA=$PARLEY_TEST_KAFKA"
    elif PARLEY_RUN_DIR=$RUN_DIR "$ROOT/deploy/kafka.sh" start; then
        PARLEY_TEST_KAFKA=$(cat "$RUN_DIR/kafka.addr")
    else
        record kafka 0 1 0 "broker failed to start (log above)"
        finish
    fi
    if [ -n "${PARLEY_TEST_REDIS:-}" ]; then
        echo "using the Redis at PARLEY_TEST_REDIS=$PARLEY_TEST_REDIS"
    elif PARLEY_RUN_DIR=$RUN_DIR "$ROOT/deploy/redis.sh" start; then
        PARLEY_TEST_REDIS=$(cat "$RUN_DIR/redis.addr")
    else
        record redis 0 1 0 "redis failed to start (log above)"
        finish
    fi
    export PARLEY_TEST_KAFKA PARLEY_TEST_REDIS
fi

# ---- 4. tests ---------------------------------------------------------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_ctest() { # run_ctest NAME TREE LABEL
    local name=$1 tree=$2 label=$3 log p f s total jobs=2 args=()
    say "ctest -L $label ($tree)"
    if [ "${TREE_OK[$tree]:-0}" != 1 ]; then
        record "$name" 0 0 0 "not run: $tree not built"
        return 0
    fi
    args=(--test-dir "$ROOT/$tree" -L "^$label\$" --output-on-failure)
    # Integration and cuda tests print what they measured: show it (-V).
    case $label in integration|cuda) args+=(-V -j 1) ;; *) args+=(-j "$jobs") ;; esac
    [ -n "$REGEX" ] && args+=(-R "$REGEX")
    log=$(mktemp)
    set +e
    ctest "${args[@]}" 2>&1 | tee "$log"
    set -e
    total=$(sed -n 's/.*tests passed, \([0-9]*\) tests\? failed out of \([0-9]*\).*/\1 \2/p' "$log" | tail -n1)
    s=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*(Skipped|Not Run)' "$log" || true)
    if [ -n "$total" ]; then
        f=${total% *}
        p=$((${total#* } - f - s))
        record "$name" "$p" "$f" "$s" "($tree)"
    elif grep -q 'No tests were found' "$log"; then
        record "$name" 0 0 0 "no tests with label $label"
    else
        record "$name" 0 1 0 "ctest did not finish ($tree)"
    fi
    rm -f "$log"
}

run_pytest() {
    local log rc line p f s e
    say "pytest"
    [ -d "$ROOT/tests/py" ] || { record pytest 0 0 0 "no tests/py"; return 0; }
    log=$(mktemp)
    set +e
    # A bound on the whole pytest run, so a hung test cannot hang CI.
    local limit=(timeout --kill-after=30 "${PARLEY_PYTEST_TIMEOUT:-3000}")
    if [ $PYTEST_ONLY = 1 ] && [ ${#PYTEST_ARGS[@]} -gt 0 ]; then
        "${limit[@]}" "$PARLEY_PY" -m pytest -q -rfEs --continue-on-collection-errors \
            "${PYTEST_ARGS[@]}" 2>&1 | tee "$log"
    else
        "${limit[@]}" "$PARLEY_PY" -m pytest -q -rfEs --continue-on-collection-errors tests/py \
            ${REGEX:+-k "$REGEX"} 2>&1 | tee "$log"
    fi
    rc=${PIPESTATUS[0]}
    set -e
    mapfile -t -O ${#SKIP_LINES[@]} SKIP_LINES < <(grep -E '^SKIPPED \[' "$log" | sed 's/^SKIPPED //')
    line=$(grep -E '^=*.*( passed| failed| error| skipped| no tests ran).* in [0-9.]+s' "$log" | tail -n1)
    p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
    f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 0)
    e=$(echo "$line" | grep -oE '[0-9]+ errors?' | grep -oE '[0-9]+' || echo 0)
    s=$(echo "$line" | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+' || echo 0)
    f=$((f + e))
    case $rc in
        0) record pytest "$p" "$f" "$s" "" ;;
        5) record pytest 0 0 0 "no tests collected" ;;
        124|137) f=$((f + 1)); record pytest "$p" "$f" "$s" "timed out after ${PARLEY_PYTEST_TIMEOUT:-3000}s" ;;
        *) [ "$f" -gt 0 ] || f=1; record pytest "$p" "$f" "$s" "pytest exit $rc" ;;
    esac
    rm -f "$log"
}

# README command 1 from a clean clone, as a new user runs it.
run_readme() {
    say "README command 1: deploy/demo.sh from a clean clone (tests/readme/demo.sh)"
    if "$ROOT/tests/readme/demo.sh"; then
        record readme 2 0 0 "deploy/demo.sh and deploy/demo.sh --synthetic"
    else
        record readme 0 1 0 "deploy/demo.sh from a clean clone failed (log above)"
    fi
}

for st in "${STAGES[@]}"; do
    IFS='|' read -r name tree kind <<<"$st"
    case $kind in
        ctest:*) run_ctest "$name" "$tree" "${kind#ctest:}" ;;
        pytest) run_pytest ;;
        readme) run_readme ;;
    esac
done

# ---- 5. summary -------------------------------------------------------------
finish
exit
}
