#!/bin/sh
# run.sh - `make valgrind`: the library tests (fewer random trials) and the
# HTTP case files against servers run under valgrind memcheck; fails on any
# memory error or leak. Usage: tests/valgrind/run.sh BUILD_DIR
set -u
build=${1:-build}
logs=$build/valgrind
mkdir -p "$logs"
rm -f "$logs"/*.log
vg="valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible
    --errors-for-leak-kinds=definite,indirect,possible --suppressions=tests/valgrind/attn.supp"

rc=0
echo "valgrind: test_lib (200 random trials)"
$vg --log-file="$logs/test_lib.log" "$build/test_lib" tests/golden --trials 200 >"$logs/test_lib.out" 2>&1 || rc=1
tail -2 "$logs/test_lib.out"
echo "valgrind: test_kernels (50 cases)"
$vg --log-file="$logs/test_kernels.log" "$build/test_kernels" 50 >"$logs/test_kernels.out" 2>&1 || rc=1
tail -2 "$logs/test_kernels.out"

# Everything but the tests bound to wall time (--memcheck), which cannot hold under
# valgrind's slowdown. Five server instances, each under memcheck.
echo "valgrind: HTTP cases, golden vectors and connection tests against servers under memcheck"
VG_SERVER="$build/attn-server" VG_LOGDIR="$logs" \
    "$build/test_http" --server tests/valgrind/server.sh --memcheck --log "$logs/test_http_server.log" \
    >"$logs/test_http.out" 2>&1 || rc=1
grep -E "^FAIL|passed" "$logs/test_http.out" | tail -20
echo "valgrind: decode sessions (created, stepped, truncated, expired, deleted) against servers under memcheck"
VG_SERVER="$build/attn-server" VG_LOGDIR="$logs" \
    "$build/test_sessions" --server tests/valgrind/server.sh --memcheck --log "$logs/test_sessions_server.log" \
    >"$logs/test_sessions.out" 2>&1 || rc=1
grep -E "^FAIL|passed" "$logs/test_sessions.out" | tail -20
bad=$rc
for f in "$logs"/*.log; do
    case "$f" in *test_http_server.log|*test_sessions_server.log) continue ;; esac
    if [ -s "$f" ]; then
        echo "valgrind: findings in $f:"
        head -60 "$f"
        bad=1
    fi
done
if [ "$bad" = 0 ]; then echo "valgrind: clean (logs in $logs)"; echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $bad
