#!/usr/bin/env bash
# tests/replicas/test.sh - three replicas behind nginx on loopback lose no request when one is SIGTERMed and one SIGKILLed.
#
# Usage: tests/replicas/test.sh SERVER_BINARY [BUILD_DIR]     (make test-replicas)
# Needs nginx (Debian's) and curl. The nginx config is generated into
# BUILD_DIR/replicas with the same proxy rules as docker/nginx.conf. Prints
# the number of failed client requests; passes only when it is zero, the
# SIGTERMed replica exited 0 (graceful drain) and every replica took traffic.
# Knobs: LOAD_SECONDS (8), LOAD_WORKERS (4), LB_RETRY (nginx's
# proxy_next_upstream; "off" shows the failures the retries absorb).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/replicas/common.sh

test_dirs replicas "$@"
SECONDS_OF_LOAD=${LOAD_SECONDS:-8}
WORKERS=${LOAD_WORKERS:-4}
# LB_RETRY=off shows what the retries hide: the test then fails.
LB_RETRY=${LB_RETRY:-error timeout http_503 non_idempotent}
need_nginx
mkdir -p "$DIR/tmp"
trap replicas_cleanup EXIT
fail() { echo "test-replicas: FAIL: $*" >&2; exit 1; }

start_replicas
LB_PORT=$(free_port)
{
    nginx_conf_head '$status $upstream_addr $upstream_status $request_time'
    cat <<NGINX
    client_max_body_size 256m;
    upstream attn {
$(upstream_servers)
        keepalive 16;
    }
    server {
        listen 127.0.0.1:$LB_PORT;
        location / {
            proxy_pass http://attn;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream $LB_RETRY;
            proxy_next_upstream_tries 3;
            proxy_connect_timeout 1s;
            proxy_read_timeout 30s;
        }
    }
}
NGINX
} >"$DIR/nginx.conf"
start_nginx

echo "replicas on ports ${ports[*]}, nginx on $LB_PORT; ${WORKERS} clients for ${SECONDS_OF_LOAD}s"
"$PY" tests/replicas/load.py "http://127.0.0.1:$LB_PORT/attention/scaled_dot" \
    --seconds "$SECONDS_OF_LOAD" --workers "$WORKERS" >"$DIR/load.json" &
LOAD_PID=$!

# A third of the way in, replica 0 is asked to stop; two thirds in, replica 1
# dies outright. Replica 2 carries the rest.
sleep "$(awk -v s="$SECONDS_OF_LOAD" 'BEGIN { print s / 3 }')"
before_term=$(wc -l <"$DIR/access.log")
kill -TERM "${pids[0]}"
sleep "$(awk -v s="$SECONDS_OF_LOAD" 'BEGIN { print s / 3 }')"
kill -KILL "${pids[1]}"
{ wait "${pids[1]}"; } 2>/dev/null || true   # reaped quietly: no "Killed" line

load_rc=0
wait "$LOAD_PID" || load_rc=$?

# The SIGTERMed replica must have drained and exited by itself, with 0.
term_rc=""
for _ in $(seq 1 100); do
    if ! kill -0 "${pids[0]}" 2>/dev/null; then
        term_rc=0; wait "${pids[0]}" || term_rc=$?
        break
    fi
    sleep 0.1
done

summary=$(cat "$DIR/load.json")
failed=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["failed"])' "$DIR/load.json" 2>/dev/null || echo "?")
total=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$DIR/load.json" 2>/dev/null || echo "?")
retried=$(grep -c ', ' "$DIR/access.log" || true)
served=()
for i in 0 1 2; do
    served+=("$(grep -c "127.0.0.1:${ports[$i]}" "$DIR/access.log" || true)")
done
echo "client summary: $summary"
echo "requests: $total, failed: $failed, retried by nginx on another replica: $retried"
echo "upstream attempts per replica: ${served[*]} (log lines before SIGTERM: $before_term)"

status=0
[ "$failed" = 0 ] || { echo "test-replicas: FAIL: $failed client requests failed" >&2; status=1; }
[ "$load_rc" = 0 ] || { echo "test-replicas: FAIL: load client exited $load_rc" >&2; status=1; }
if [ -z "$term_rc" ]; then
    echo "test-replicas: FAIL: replica 0 still running 10 s after SIGTERM (no graceful drain)" >&2; status=1
elif [ "$term_rc" != 0 ]; then
    echo "test-replicas: FAIL: replica 0 exited $term_rc after SIGTERM (want 0)" >&2; status=1
fi
for i in 0 1 2; do
    [ "${served[$i]}" -gt 0 ] || { echo "test-replicas: FAIL: replica $i never got traffic" >&2; status=1; }
done
[ "$status" = 0 ] && echo "test-replicas: ok (0 failed of $total)"
exit "$status"
