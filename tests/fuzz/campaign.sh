#!/usr/bin/env bash
# tests/fuzz/campaign.sh -- the long fuzzing campaign, outside CI: every
# libFuzzer target (clang, ASan + UBSan) for RUNS executions from its seed
# corpus, one after another, with a table of executions, coverage (edges),
# features, corpus size and crashes per target.
#
#   tests/fuzz/campaign.sh [RUNS] [TARGET...]     (default 10000000, all)
#
# MAX_TIME=S also stops each target after S seconds (libFuzzer's
# -max_total_time), whichever of RUNS and S comes first.
#
# Builds build-fuzz/ as tests/run.sh does.  Crashing inputs are kept under
# $WORK/<target>/ (WORK default /tmp/parley-fuzz-campaign): add each to the
# target's seed corpus once fixed.  Exit status 1 when any target crashed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
RUNS=${1:-10000000}
[ $# -gt 0 ] && shift
WORK=${WORK:-/tmp/parley-fuzz-campaign}
[ -f "${PARLEY_DEPS:-$HOME/.cache/parley}/env.sh" ] && . "${PARLEY_DEPS:-$HOME/.cache/parley}/env.sh"
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DPARLEY_FUZZ=ON -DPARLEY_SANITIZE=ON -DPARLEY_CUDA=OFF >/dev/null
mapfile -t ALL < <(ctest --test-dir build-fuzz -N -L '^fuzz$' | sed -n 's/^ *Test *#[0-9]*: \(.*\)$/\1/p')
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
cmake --build build-fuzz -j"$(nproc)" --target "${TARGETS[@]}" >/dev/null
printf '%-22s %12s %9s %8s %7s %8s %7s\n' target execs exec/s cov ft corpus crashes
bad=0
for t in "${TARGETS[@]}"; do
    exe=$(find build-fuzz -type f -name "$t" -perm -u+x | head -n1)
    d=$WORK/$t
    rm -rf "$d" && mkdir -p "$d/corpus"
    src=$(grep -h "add_test(\[=\[$t\]=\]\|add_test($t " build-fuzz/tests/*/CTestTestfile.cmake |
          grep -o 'DSEEDS=[^"]*' | head -n1 | cut -d= -f2 || true)
    [ -n "$src" ] && [ -d "$src" ] && cp -r "$src"/. "$d/corpus/" 2>/dev/null || true
    start=$SECONDS
    set +e
    "$exe" -runs="$RUNS" ${MAX_TIME:+-max_total_time="$MAX_TIME"} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$d/" "$d/corpus" >"$d/log" 2>&1
    rc=$?
    set -e
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$d/log" | tail -n1)
    cov=$(grep -o 'cov: [0-9]*' "$d/log" | tail -n1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$d/log" | tail -n1 | cut -d' ' -f2)
    n=$(find "$d/corpus" -type f | wc -l)
    crashes=$(find "$d" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
    [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes="rc=$rc"
    [ "$crashes" != 0 ] && bad=1
    secs=$((SECONDS - start))
    printf '%-22s %12s %9s %8s %7s %8s %7s\n' "$t" "${execs:-?}" "$(( ${execs:-0} / (secs > 0 ? secs : 1) ))" \
        "${cov:-?}" "${ft:-?}" "$n" "$crashes"
done
exit $bad
