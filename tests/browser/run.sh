#!/bin/sh
# run.sh - starts attn-server with the demo on a free loopback port, runs the browser tests against it, stops it.
# Usage: tests/browser/run.sh BUILD/attn-server   (from the repository root; make test-browser)
set -eu
SERVER=${1:?usage: run.sh path/to/attn-server}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

if [ ! -x /usr/bin/chromium ] && [ -z "${CHROMIUM:-}" ]; then
    echo "test-browser: /usr/bin/chromium is missing (apt-get install chromium)" >&2
    exit 1
fi
if [ ! -d tests/browser/node_modules/playwright-core ] || [ ! -d tests/browser/node_modules/axe-core ]; then
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
fi

# A port the kernel says is free right now; the server binds it a moment later.
PORT=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
LOG=${TMPDIR:-/tmp}/attn-browser-server.$$.log
ATTN_STATIC_DIR=demo ATTN_LOG_LEVEL=warn "$SERVER" --bind 127.0.0.1 --port "$PORT" >"$LOG" 2>&1 &
PID=$!
trap 'kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true' EXIT INT TERM

i=0
until curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -gt 100 ] || ! kill -0 "$PID" 2>/dev/null; then
        echo "test-browser: the server did not become ready on port $PORT" >&2
        cat "$LOG" >&2
        exit 1
    fi
    sleep 0.1
done

ATTN_URL="http://127.0.0.1:$PORT" node tests/browser/demo.test.mjs
