#!/usr/bin/env bash
# build_matrix.sh - builds everything (make test-bins) with gcc and clang at -O0, -O1, -O2, -O3 and -Os, warnings as errors, and prints one line per build.
#
# Usage: tests/build_matrix.sh [MAKE]      (make build-matrix)
# Each build goes to build-matrix/CC-LEVEL with WERROR=1 and CFLAGS="LEVEL -g";
# a failing build's first errors are shown. Knobs: MATRIX_CC ("gcc clang"),
# MATRIX_LEVELS ("-O0 -O1 -O2 -O3 -Os"), MATRIX_JOBS (2).
# Prints "N passed, N failed" (one per build); exits 1 if any build failed.
set -uo pipefail
cd "$(dirname "$0")/.."
make_cmd=${1:-make}
compilers=${MATRIX_CC:-gcc clang}
levels=${MATRIX_LEVELS:--O0 -O1 -O2 -O3 -Os}
jobs=${MATRIX_JOBS:-2}
pass=0; fail=0
for cc in $compilers; do
    if ! command -v "$cc" >/dev/null 2>&1; then
        echo "SKIPPED: $cc builds ($cc is not installed)"
        continue
    fi
    for lv in $levels; do
        dir="build-matrix/$cc$lv"
        log="build-matrix/$cc$lv.log"
        mkdir -p build-matrix
        t0=$(date +%s)
        if $make_cmd --no-print-directory -k -j"$jobs" BUILD="$dir" CC="$cc" CFLAGS="$lv -g" WERROR=1 \
            test-bins >"$log" 2>&1; then
            echo "build $cc $lv: ok ($(( $(date +%s) - t0 )) s, no warnings)"
            pass=$((pass + 1))
        else
            echo "build $cc $lv: FAILED (log in $log)"
            grep -E '(error|warning):' "$log" | head -10 | sed 's/^/    /'
            fail=$((fail + 1))
        fi
    done
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
