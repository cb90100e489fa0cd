#!/usr/bin/env bash
# tests/examples.sh - runs the example clients (Python, the Python decode session, the split-context join
# by log-sum-exp, grouped-query attention with heads, JavaScript in Node, curl)
# and README.md's curl examples (tests/readme_examples.py) against a live server.
#
# Usage: tests/examples.sh SERVER_BINARY [BUILD_DIR]     (make test-examples)
# Needs python3-requests, python3-numpy, python3-torch, nodejs (18+) and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/replicas/common.sh

SERVER=${1:?usage: $0 SERVER_BINARY [BUILD_DIR]}
BUILD_DIR=${2:-build}
DIR="$BUILD_DIR/examples"
mkdir -p "$DIR"
SRV_PID=""
trap '[ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null; wait 2>/dev/null || true' EXIT

# The server also serves a page that imports examples/js_client.mjs, so the
# same module runs in headless Chromium from the server's own origin.
WWW="$DIR/www"
mkdir -p "$WWW"
cp examples/js_client.mjs "$WWW/"
cat >"$WWW/index.html" <<'HTML'
<!doctype html>
<meta charset="utf-8">
<title>js_client.mjs in a browser</title>
<pre id="log">running</pre>
<script type="module">
import { runExamples } from "./js_client.mjs";
const lines = [];
runExamples(location.origin, (s) => lines.push(s)).then(
  () => { document.getElementById("log").textContent = lines.join("\n") + "\nBROWSER-OK"; },
  (e) => { document.getElementById("log").textContent = lines.join("\n") + "\nBROWSER-FAIL " + e.message; });
</script>
HTML

PORT=$(free_port)
ATTN_BIND=127.0.0.1 ATTN_PORT=$PORT ATTN_STATIC_DIR="$WWW" "$SERVER" >"$DIR/server.log" 2>&1 &
SRV_PID=$!
wait_http "http://127.0.0.1:$PORT/healthz" 20 || { cat "$DIR/server.log" >&2; exit 1; }
BASE="http://127.0.0.1:$PORT"

passed=0 failed=0 skipped=0
run() { # run NAME COMMAND...: one client, its output kept in build/
    local name=$1; shift
    if "$@" >"$DIR/$name.out" 2>&1; then
        echo "example $name: ok"
        passed=$((passed + 1))
    else
        echo "example $name: FAILED ($*)" >&2
        sed 's/^/    /' "$DIR/$name.out" >&2
        failed=$((failed + 1))
    fi
}
run python "$PY" examples/python_client.py "$BASE"
run session-python "$PY" examples/session_decode.py "$BASE"
run lse-join "$PY" examples/lse_join.py "$BASE"
run sdpa-heads "$PY" examples/sdpa_heads.py "$BASE"
run varlen "$PY" examples/varlen.py "$BASE"
run js node examples/js_client.mjs "$BASE"
run curl sh examples/curl.sh "$BASE"
# README.md's curl examples, each answer against the one it prints
run readme "$PY" tests/readme_examples.py "$BASE" README.md
skipped=$((skipped + $(grep -c '^SKIPPED' "$DIR/readme.out" || true)))

browser_check() { # the page's log ends in BROWSER-OK once every check passed
    timeout 60 "$1" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --user-data-dir="$DIR/chromium-profile" --virtual-time-budget=20000 --dump-dom "$BASE/" |
        tee "$DIR/browser-dom.html" | grep -q '^BROWSER-OK</pre>'
}
CHROMIUM=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -n "$CHROMIUM" ]; then
    run js-browser browser_check "$CHROMIUM"
else
    echo "SKIPPED: example js-browser (no chromium)"
    skipped=$((skipped + 1))
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
