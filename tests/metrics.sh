#!/usr/bin/env bash
# tests/metrics.sh - /metrics of a live server passes promtool's lint, counts what was served, and a real Prometheus scrapes it.
#
# Usage: tests/metrics.sh SERVER_BINARY [BUILD_DIR]     (make test-metrics)
# Needs Debian's prometheus package (promtool and prometheus) and curl. Both
# the server and Prometheus listen on free 127.0.0.1 ports only.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/replicas/common.sh

test_dirs metrics "$@"
fail() { echo "test-metrics: FAIL: $*" >&2; exit 1; }
command -v promtool >/dev/null || fail "promtool missing (apt-get install prometheus)"
command -v prometheus >/dev/null || fail "prometheus missing (apt-get install prometheus)"

SRV_PID="" PROM_PID=""
cleanup() {
    for p in $SRV_PID $PROM_PID; do kill -KILL "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

PORT=$(free_port)
# The portable kernels, deferral asked for: which they cannot do, and
# attn_kernels_info must say so.
ATTN_ISA=generic ATTN_DEFER_EXP=1 ATTN_BIND=127.0.0.1 ATTN_PORT=$PORT "$SERVER" >"$DIR/server.log" 2>&1 &
SRV_PID=$!
wait_http "http://127.0.0.1:$PORT/healthz" 20 || { cat "$DIR/server.log" >&2; fail "server did not start"; }

# Known traffic, so the counters can be checked and not just parsed.
for _ in 1 2 3; do
    curl -s -o /dev/null -H 'Content-Type: application/json' --data "$SMALL_REQUEST" \
        "http://127.0.0.1:$PORT/attention/scaled_dot"
done
curl -s -o /dev/null -H 'Content-Type: application/json' --data '{not json' \
    "http://127.0.0.1:$PORT/attention/scaled_dot"

code=$(curl -s -m 5 -D "$DIR/headers.txt" -o "$DIR/metrics.txt" -w '%{http_code}' "http://127.0.0.1:$PORT/metrics")
[ "$code" = 200 ] || fail "GET /metrics answered $code"
grep -qi '^content-type: text/plain' "$DIR/headers.txt" || fail "/metrics content type is not text/plain: $(grep -i '^content-type' "$DIR/headers.txt")"

# promtool exits non-zero on a parse error or a lint problem (missing HELP,
# a counter without _total, ...) and says which.
if ! promtool check metrics <"$DIR/metrics.txt" >"$DIR/promtool.txt" 2>&1; then
    cat "$DIR/promtool.txt" >&2
    fail "promtool check metrics found problems"
fi
echo "promtool check metrics: clean ($(grep -vc '^#' "$DIR/metrics.txt") samples)"

sample() { # sample NAME{LABELS}: its value in the exposition, or "none"
    awk -v key="$1" '$1 == key { print $2; found = 1 } END { if (!found) print "none" }' "$DIR/metrics.txt"
}
ok200=$(sample 'attn_requests_total{route="/attention/scaled_dot",status="200"}')
bad400=$(sample 'attn_requests_total{route="/attention/scaled_dot",status="400"}')
[ "$ok200" = 3 ] || fail "attn_requests_total for 200 on /attention/scaled_dot is $ok200, want 3"
[ "$bad400" = 1 ] || fail "attn_requests_total for 400 on /attention/scaled_dot is $bad400, want 1"
echo "counters: 3 x 200 and 1 x 400 on /attention/scaled_dot, as sent"
kinfo=$(sample 'attn_kernels_info{isa="generic",defer_exp="0"}')
[ "$kinfo" = 1 ] || fail "attn_kernels_info for ATTN_ISA=generic ATTN_DEFER_EXP=1 is not {isa=\"generic\",defer_exp=\"0\"} 1: $(grep '^attn_kernels_info' "$DIR/metrics.txt")"
echo "attn_kernels_info: generic, no deferral, as set"

# A real Prometheus scraping every second; the query answer proves it parsed
# the exposition end to end.
PROM_PORT=$(free_port)
cat >"$DIR/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: attn
    static_configs:
      - targets: ["127.0.0.1:$PORT"]
YAML
promtool check config "$DIR/prometheus.yml" >/dev/null || fail "generated prometheus.yml is invalid"
prometheus --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$DIR/prometheus.log" 2>&1 &
PROM_PID=$!
query='attn_requests_total{job="attn",route="/attention/scaled_dot",status="200"}'
got=""
for _ in $(seq 1 60); do
    got=$(curl -s -m 2 -G "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$query" 2>/dev/null |
        "$PY" -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null || true)
    [ -n "$got" ] && break
    sleep 0.5
done
[ "$got" = 3 ] || { tail -5 "$DIR/prometheus.log" >&2; fail "Prometheus query $query gave '${got:-nothing}', want 3"; }
up=$(curl -s -m 2 -G "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode 'query=up{job="attn"}' |
    "$PY" -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")')
[ "$up" = 1 ] || fail "Prometheus sees up{job=\"attn\"} = '$up'"
echo "prometheus scrape: up=1, $query = $got"
echo "test-metrics: ok"
