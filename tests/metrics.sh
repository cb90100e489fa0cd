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
ATTN_ISA=generic ATTN_DEFER_EXP=1 ATTN_MAX_CONNECTIONS=77 ATTN_BIND=127.0.0.1 ATTN_PORT=$PORT \
    "$SERVER" >"$DIR/server.log" 2>&1 &
SRV_PID=$!
wait_http "http://127.0.0.1:$PORT/healthz" 20 || { cat "$DIR/server.log" >&2; fail "server did not start"; }

# Known traffic, so the counters can be checked and not just parsed.
for _ in 1 2 3; do
    curl -s -o /dev/null -H 'Content-Type: application/json' --data "$SMALL_REQUEST" \
        "http://127.0.0.1:$PORT/attention/scaled_dot"
done
curl -s -o /dev/null -H 'Content-Type: application/json' --data '{not json' \
    "http://127.0.0.1:$PORT/attention/scaled_dot"

# A Content-Length that is no number: libmicrohttpd answers it itself,
# unseen by the routes, and attn_http_refused_total counts it.
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
printf 'POST /attention/dot HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n{}' >&3
timeout 5 cat <&3 >/dev/null || true
exec 3<&-

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
refused=$(sample 'attn_http_refused_total{what="request"}')
[ "$refused" = 1 ] || fail "attn_http_refused_total{what=\"request\"} is $refused after one malformed Content-Length, want 1"
limit=$(sample 'attn_limit{name="max_connections"}')
[ "$limit" = 77 ] || fail "attn_limit{name=\"max_connections\"} is $limit, want ATTN_MAX_CONNECTIONS=77"
open=$(sample attn_connections_open)
[ "$open" -ge 1 ] 2>/dev/null || fail "attn_connections_open is $open during a scrape, want at least 1"
echo "refused requests 1, connections limit 77 and $open open: as sent and set"
# The build and the process, each against what the system says itself.
want_version=$(sed -n 's/^  version: //p' openapi.yaml | head -1)
[ "$(sample "attn_build_info{version=\"$want_version\",libattn=\"$(sed -n 's/^#define ATTN_VERSION_\(MAJOR\|MINOR\|PATCH\) //p' lib/attn.h | paste -sd.)\"}")" = 1 ] \
    || fail "attn_build_info does not give openapi.yaml's version $want_version and attn.h's: $(grep '^attn_build_info' "$DIR/metrics.txt")"
rss=$(sample process_resident_memory_bytes)
rss_proc=$(awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$SRV_PID/status")
awk -v a="$rss" -v b="$rss_proc" 'BEGIN { exit !(a > 0 && a > b * 0.75 && a < b * 1.25) }' \
    || fail "process_resident_memory_bytes $rss, but /proc says VmRSS $rss_proc"
fds=$(sample process_open_fds)
fds_proc=$(ls "/proc/$SRV_PID/fd" | wc -l)
[ "$fds" -ge $((fds_proc - 3)) ] && [ "$fds" -le $((fds_proc + 3)) ] \
    || fail "process_open_fds $fds, but /proc/$SRV_PID/fd has $fds_proc"
started=$(sample process_start_time_seconds)
awk -v t="$started" -v now="$(date +%s)" 'BEGIN { exit !(t > now - 120 && t <= now + 1) }' \
    || fail "process_start_time_seconds $started is not within the last two minutes ($(date +%s))"
echo "attn_build_info $want_version; process: $rss bytes resident ($rss_proc in /proc), $fds fds ($fds_proc), started at $started"

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
