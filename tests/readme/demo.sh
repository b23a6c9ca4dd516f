#!/usr/bin/env bash
# tests/readme/demo.sh -- README command 1 exactly as a new user runs it.
#
# Clones the repository (its committed HEAD) into a temporary directory and
# runs `deploy/demo.sh` there verbatim, in a new shell with a clean
# environment (no env.sh sourced, a default PATH, no terminal), into the
# clone's own build directory, under a deadline; then `deploy/demo.sh
# --synthetic` the same way.  Checks, for each run: exit status 0, the five
# set-up steps announced with their times, every turn answered, the header
# naming the model (SmolLM2-135M-Instruct with its own chat template for
# the first run), the summary lines; that the binary the demo built runs
# the same librdkafka and hiredis as the suite's own build ($PARLEY_BIN,
# when set): one library set; and that it was built with llguidance (its
# worker does not warn constraints_off).
#
# The deps cache is the shared one ($PARLEY_DEPS, default ~/.cache/parley):
# a fresh one per run would reinstall everything; a cold run with an empty
# cache is done by hand (PARLEY_DEPS=$(mktemp -d) tests/readme/demo.sh).
#
# Usage: tests/readme/demo.sh [--keep]   (--keep leaves the clone and logs)
# Exit status: 0 both runs passed every check, 1 otherwise (the failing
# check and the log's tail are printed).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KEEP=0
[ "${1:-}" = --keep ] && KEEP=1
DEADLINE=${PARLEY_README_DEADLINE_S:-900}
DEPS=${PARLEY_DEPS:-$HOME/.cache/parley}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/parley-readme.XXXXXX")
cleanup() { [ $KEEP = 1 ] && echo "kept $WORK" || rm -rf "$WORK"; }
trap cleanup EXIT

fail() {
    echo "readme demo: FAILED: $*"
    [ -n "${LOG:-}" ] && [ -f "$LOG" ] && { echo "--- last 40 lines of $LOG"; tail -n 40 "$LOG"; }
    exit 1
}

git clone -q "$ROOT" "$WORK/clone" || fail "git clone $ROOT"
echo "readme demo: cloned $(git -C "$WORK/clone" rev-parse --short HEAD) into $WORK/clone"

# run_demo NAME ARGS...: deploy/demo.sh ARGS in the clone, a new shell with
# only HOME, a default PATH, PARLEY_DEPS and CI; its output in $WORK/NAME.log.
run_demo() {
    local name=$1 t0=$SECONDS rc
    shift
    LOG=$WORK/$name.log
    (cd "$WORK/clone" &&
        env -i HOME="$HOME" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            LANG=C.UTF-8 PARLEY_DEPS="$DEPS" CI="${CI:-}" \
            timeout --kill-after=30 "$DEADLINE" bash -c 'deploy/demo.sh "$@"' demo "$@" \
            </dev/null >"$LOG" 2>&1)
    rc=$?
    [ $rc = 124 ] || [ $rc = 137 ] && fail "deploy/demo.sh $* passed its ${DEADLINE} s deadline"
    [ $rc = 0 ] || fail "deploy/demo.sh $* exited $rc"
    echo "readme demo: deploy/demo.sh $* passed in $((SECONDS - t0)) s"
}

# check_log PATTERN WHAT: the current log must match the extended regex.
check_log() { grep -Eq -- "$1" "$LOG" || fail "$2 (no line matching /$1/)"; }

check_common() {
    local n
    n=$(grep -Ec '^== \[[1-5]/5\] ' "$LOG")
    [ "$n" = 5 ] || fail "the five set-up steps are not all announced ($n)"
    n=$(grep -Ec '^   done in [0-9]+ s' "$LOG")
    [ "$n" -ge 5 ] || fail "not every set-up step printed its time ($n)"
    grep -q 'llguidance could not be built' "$LOG" && fail "llguidance was not built"
    grep -q 'constraints_off' "$LOG" && fail "the demo's binary has no llguidance (constraints_off)"
    check_log '^turns answered +9/9 \(0 failed\)$' "not every turn was answered"
    check_log '^== summary$' "no summary"
    check_log '^generated tokens +[0-9]+ in [0-9.]+ s = [0-9.]+ tokens/s' "no speed line"
    check_log '^prompt tokens +[0-9]+, [0-9]+ from the KV cache: cache hit share' "no cache line"
    check_log '^turns 2\.\.3 +cache hit share [0-9.]+%' "no later-turn cache line"
    check_log '^== demo finished in [0-9.]+ s\.' "no clean finish"
    [ "$(grep -Ec '^-- demo-[0-9], turn [1-3]/3$' "$LOG")" = 9 ] || fail "not 9 turn blocks"
}

run_demo real
check_common
check_log '^== parley demo: model .*SmolLM2-135M-Instruct\.Q4_1\.gguf' "the header does not name SmolLM2-135M-Instruct"
check_log '^   chat template: the file.s own \(tokenizer.chat_template\), rendered by parley.s Jinja renderer' "the model's own chat template is not the one used"
grep -q 'running the synthetic model instead' "$LOG" && fail "the real model was not installed"

# One library set: what the demo built runs the suite's librdkafka and hiredis.
demo_libs=$("$WORK/clone/build/consumer/parley" --version | sed -n '2,3p')
if [ -n "${PARLEY_BIN:-}" ] && [ -x "$PARLEY_BIN" ]; then
    suite_libs=$("$PARLEY_BIN" --version | sed -n '2,3p')
    [ "$demo_libs" = "$suite_libs" ] ||
        fail "deploy/demo.sh built against other libraries than the suite: demo [$demo_libs] suite [$suite_libs]"
fi
echo "readme demo: libraries: $(echo "$demo_libs" | paste -sd, -)"

run_demo synthetic --synthetic
check_common
check_log '^== parley demo: model .*cai-tiny\.gguf' "the header does not name the synthetic model"
check_log 'meaningless' "the synthetic model's note is missing"
echo "readme demo: both runs passed"
