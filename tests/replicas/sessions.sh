#!/usr/bin/env bash
# tests/replicas/sessions.sh - decode sessions (and KServe multihead-decode sequences) through nginx and three replicas: new sessions spread, each session's requests reach its replica, a SIGKILLed replica's sessions answer 404 unknown_session.
#
# Usage: tests/replicas/sessions.sh SERVER_BINARY [BUILD_DIR]   (make test-replicas)
# Needs nginx (Debian's). The nginx config is generated into
# BUILD_DIR/replicas-sessions with the session rules of docker/nginx.conf
# (hash of the id taken from the path, or for KServe sequences from the
# body's sequence_id, consistent; new ids from $request_id, sent as
# X-Session-Id to replicas that trust it).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/replicas/common.sh

test_dirs replicas-sessions "$@"
need_nginx
mkdir -p "$DIR/tmp"
trap replicas_cleanup EXIT
fail() { echo "test-replicas sessions: FAIL: $*" >&2; exit 1; }

start_replicas ATTN_TRUST_SESSION_ID=1
LB_PORT=$(free_port)
{
    nginx_conf_head '$status $upstream_addr $upstream_status $request_uri'
    cat <<NGINX
    map \$uri \$session_key {
        "~^/sessions/(?<sid>[0-9a-f]{32})(/|\$)" \$sid;
        default \$request_id;
    }
    map \$request_body \$sequence_key {
        "~\"sequence_id\"\\s*:\\s*\"(?<seq>[0-9a-f]{32})\"" \$seq;
        default \$request_id;
    }
    upstream attn_sessions {
        hash \$session_key consistent;
$(upstream_servers)
        keepalive 16;
    }
    upstream attn_sequences {
        hash \$sequence_key consistent;
$(upstream_servers)
        keepalive 16;
    }
    server {
        listen 127.0.0.1:$LB_PORT;
        location /sessions {
            proxy_pass http://attn_sessions;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Session-Id \$request_id;
            proxy_next_upstream error timeout;
            proxy_next_upstream_tries 2;
            proxy_connect_timeout 1s;
            proxy_read_timeout 30s;
        }
        location ~ ^/v2/models/multihead-decode(/versions/[^/]+)?/infer\$ {
            proxy_pass http://attn_sequences;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Session-Id \$request_id;
            client_body_buffer_size 16m;
            client_body_in_single_buffer on;
            client_max_body_size 16m;
            proxy_next_upstream error timeout;
            proxy_next_upstream_tries 2;
            proxy_connect_timeout 1s;
            proxy_read_timeout 30s;
        }
        location = /healthz { proxy_pass http://127.0.0.1:${ports[2]}; }
    }
}
NGINX
} >"$DIR/nginx.conf"
start_nginx
LB="http://127.0.0.1:$LB_PORT"
STATE="$DIR/state.json"

passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }

"$PY" tests/replicas/sessions.py create "$LB" 12 "$STATE" && ok "12 sessions and 12 KServe sequences made and stepped through nginx" ||
    fail "sessions through nginx"
holders=$("$PY" tests/replicas/sessions.py holders "$STATE" "${urls[@]}") && ok "each session is held by exactly one replica" ||
    fail "holders"
# spread HOLDERS: how many of the 3 replicas appear in the list.
spread() {
    local u n count=0
    for u in "${urls[@]}"; do
        n=$(tr ' ' '\n' <<<"$1" | grep -c "^$u\$" || true)
        [ "$n" -gt 0 ] && count=$((count + 1))
    done
    echo "$count"
}
# A replica missing from the first batch: either nginx marked it down
# after one failed connection (max_fails=1: for fail_timeout, 5 s, its
# sessions hash to the others, which is nginx doing its job) or 24 random
# ids all missed it (3 (2/3)^24, about 2 in 10^4 runs, with even shares).
# Say so with nginx's error log, and judge the spread on a second batch
# made after the timeout.
spread=$(spread "$holders")
if [ "$spread" != 3 ]; then
    echo "sessions on only $spread replicas; nginx's error log:" >&2
    cat "$DIR/nginx-error.log" >&2
    sleep 6
    "$PY" tests/replicas/sessions.py create "$LB" 12 "$DIR/state2.json" >/dev/null &&
        holders2=$("$PY" tests/replicas/sessions.py holders "$DIR/state2.json" "${urls[@]}") ||
        fail "the second batch of sessions"
    echo "a second batch of 12 sessions and 12 sequences, after fail_timeout: on $(spread "$holders2") replicas"
    spread=$(spread "$holders $holders2")
fi
[ "$spread" = 3 ] && ok "new sessions spread over the 3 replicas" ||
    bad "sessions on only $spread replicas: $holders ${holders2:-}" # nginx's log is printed above

# The replica holding the first session dies outright.
dead=$(awk '{print $1}' <<<"$holders")
for i in 0 1 2; do
    if [ "${urls[$i]}" = "$dead" ]; then
        kill -KILL "${pids[$i]}"
        { wait "${pids[$i]}"; } 2>/dev/null || true
    fi
done
"$PY" tests/replicas/sessions.py step "$LB" "$STATE" "$dead" &&
    ok "after SIGKILL of $dead: its sessions answer 404 unknown_session, the others step right" ||
    bad "sessions after the SIGKILL"
"$PY" tests/replicas/sessions.py step "$LB" "$STATE" "$dead" &&
    ok "and again, once nginx has marked the replica down" || bad "second round after the SIGKILL"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
