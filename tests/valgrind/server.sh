#!/bin/sh
# server.sh - runs the attention server under valgrind memcheck; test_http
# starts this in place of the binary (VG_SERVER names the real one). Any
# memory error or leak makes the server exit 99, which test_http reports as
# "server exits 0 on SIGTERM" failing.
dir=$(dirname "$0")
exec valgrind --quiet --error-exitcode=99 --leak-check=full \
    --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
    --suppressions="$dir/attn.supp" --log-file="${VG_LOGDIR:-build/valgrind}/server.%p.log" \
    "${VG_SERVER:?set VG_SERVER to the attn-server binary}" "$@"
