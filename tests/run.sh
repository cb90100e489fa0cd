#!/usr/bin/env bash
# run.sh - runs each test suite (a make target) in turn, echoing its output, and closes with the sum of the `N passed, N failed[, N skipped]` totals they printed.
#
# Usage: tests/run.sh MAKE target...
#
# Count lines are lines that are only `N passed, N failed` or `N passed, N
# failed, N skipped`; prefixed lines such as `avx2: ...` are subtotals. A
# skipped check is one the suite chose not to count (an ill-conditioned
# random trial, a CPU variant this machine lacks). A suite, or part of one,
# that did not run because a tool is missing prints a line `SKIPPED: what
# (why)`; those are listed at the end, and with CI=true they fail the run:
# CI must run everything. Prints the time each suite took. Exits 1 if any
# suite failed.
set -uo pipefail
make_cmd=$1; shift
passed=0; failed=0; skipped=0; broken=(); missing=()
out=$(mktemp)
trap 'rm -f "$out"' EXIT
count_re='^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$'
times=()
for t in "$@"; do
    echo "=== $t"
    start=$SECONDS
    $make_cmd --no-print-directory "$t" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    times+=("$t $((SECONDS - start)) s")
    suite_failed=0
    while read -r p f s; do
        passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${s:-0}))
        suite_failed=$((suite_failed + f))
    done < <(grep -E "$count_re" "$out" | awk '{print $1, $3, $5}')
    while IFS= read -r line; do
        missing+=("$t: ${line#SKIPPED: }")
    done < <(grep -E '^SKIPPED: ' "$out")
    if [ "$rc" != 0 ]; then
        broken+=("$t")
        # a suite that died without counting a failure still counts as one
        [ "$suite_failed" = 0 ] && failed=$((failed + 1))
    fi
done
if [ "${#missing[@]}" != 0 ] && [ "${CI:-}" = true ]; then
    broken+=("skipped-for-a-missing-tool")
fi
echo "=== all suites${broken[*]:+ (failing: ${broken[*]})}"
for m in "${missing[@]}"; do
    echo "not run: $m"
done
echo "time per suite: ${times[*]/%/;}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "${#broken[@]}" = 0 ] && [ "$failed" = 0 ]
