#!/usr/bin/env bash
# run.sh - runs each test suite (a make target) in turn, echoing its output,
# and closes with the sum of the `N passed, N failed` totals they printed
# (lines that are only that; prefixed lines such as `avx2: ...` are subtotals).
# Usage: tests/run.sh MAKE target...   Exits 1 if any suite failed.
set -uo pipefail
make_cmd=$1; shift
passed=0; failed=0; broken=()
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for t in "$@"; do
    echo "=== $t"
    $make_cmd --no-print-directory "$t" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    suite_failed=0
    while read -r p f; do
        passed=$((passed + p)); failed=$((failed + f)); suite_failed=$((suite_failed + f))
    done < <(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | awk '{print $1, $3}')
    if [ "$rc" != 0 ]; then
        broken+=("$t")
        # a suite that died without counting a failure still counts as one
        [ "$suite_failed" = 0 ] && failed=$((failed + 1))
    fi
done
echo "=== all suites${broken[*]:+ (failing: ${broken[*]})}"
echo "$passed passed, $failed failed"
[ "${#broken[@]}" = 0 ] && [ "$failed" = 0 ]
