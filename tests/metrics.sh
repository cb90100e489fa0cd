#!/usr/bin/env bash
# tests/metrics.sh - /metrics of a live server passes promtool's lint, counts what was served (by model on the two model routes, unknown names under "other"), and a real Prometheus scrapes it.
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

export LC_ALL=C # ${#body} counts bytes
# scrape FILE: GET /metrics into $DIR/FILE.
scrape() {
    curl -s -m 5 -o "$DIR/$1" "http://127.0.0.1:$PORT/metrics" || fail "GET /metrics failed"
}
sample() { # sample NAME{LABELS} [FILE]: its value in the exposition (FILE, default metrics.txt), or "none"
    awk -v key="$1" '$1 == key { print $2; found = 1 } END { if (!found) print "none" }' "$DIR/${2:-metrics.txt}"
}
INFER='/v2/models/{name}/infer' TRANSLATE='/models/{name}/translate'

# The models served: KServe's (attention-RULE for each rule of GET /rules,
# multihead, multihead-decode) and the translation models of GET /models.
ks_models=$(curl -s -m 5 "http://127.0.0.1:$PORT/rules" |
    "$PY" -c 'import json,sys; print(*["attention-" + r["name"] for r in json.load(sys.stdin)["rules"]], "multihead", "multihead-decode")')
tr_models=$(curl -s -m 5 "http://127.0.0.1:$PORT/models" |
    "$PY" -c 'import json,sys; print(*[m["name"] for m in json.load(sys.stdin)["models"]])')
case " $tr_models " in *" general "*) ;; *) fail "GET /models does not list general (training/weights): '$tr_models'" ;; esac

# Before any traffic, each route's and served model's success series is
# there at 0, so rate() counts a series' first requests.
scrape metrics0.txt
for m in $ks_models; do
    v=$(sample "attn_requests_total{route=\"$INFER\",model=\"$m\",status=\"200\"}" metrics0.txt)
    [ "$v" = 0 ] || fail "attn_requests_total for 200 on $INFER, model $m, is $v before any request, want 0"
done
for m in $tr_models; do
    v=$(sample "attn_requests_total{route=\"$TRANSLATE\",model=\"$m\",status=\"200\"}" metrics0.txt)
    [ "$v" = 0 ] || fail "attn_requests_total for 200 on $TRANSLATE, model $m, is $v before any request, want 0"
done
v=$(sample 'attn_requests_total{route="/readyz",status="200"}' metrics0.txt)
[ "$v" = 0 ] || fail "attn_requests_total for 200 on /readyz is $v before any request, want 0"
v=$(sample 'attn_requests_total{route="/sessions",status="201"}' metrics0.txt)
[ "$v" = 0 ] || fail "attn_requests_total for 201 on /sessions is $v before any request, want 0"
zeros=$(awk '/^attn_requests_total/ && $2 == 0 && $1 !~ /status="20[01]"/' "$DIR/metrics0.txt")
[ -z "$zeros" ] || fail "series at 0 for a status other than a served request's 200 or 201: $zeros"
echo "series at 0 from the start: /readyz 200, /sessions 201, 200 on every KServe model ($ks_models) and translation model ($tr_models)"

# post PATH BODY: POSTs BODY as JSON; prints the status and the response
# body's bytes.
post() {
    curl -s -m 60 -o /dev/null -w '%{http_code} %{size_download}' -H 'Content-Type: application/json' \
        --data-binary "$2" "http://127.0.0.1:$PORT$1"
}
# send PATH BODY STATUS: post, which must answer STATUS; adds the body's
# bytes to in_bytes and the response's to out_bytes.
in_bytes=0 out_bytes=0
send() {
    local r
    r=$(post "$1" "$2")
    [ "${r% *}" = "$3" ] || fail "POST ${1:0:60} answered ${r% *}, want $3"
    in_bytes=$((in_bytes + ${#2})) out_bytes=$((out_bytes + ${r#* }))
}
KS_REQUEST='{"inputs": [{"name": "query", "shape": [1, 2], "datatype": "FP32", "data": [1, 0]},
  {"name": "key", "shape": [2, 2], "datatype": "FP32", "data": [1, 0, 0, 1]},
  {"name": "value", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4]}]}'

# Model traffic: two answers and one error on attention-scaled_dot, one on
# attention-dot; one translation and one error on general.
send /v2/models/attention-scaled_dot/infer "$KS_REQUEST" 200
send /v2/models/attention-scaled_dot/infer "$KS_REQUEST" 200
send /v2/models/attention-scaled_dot/infer '{"inputs": 1}' 400
ks_in=$in_bytes ks_out=$out_bytes
send /v2/models/attention-dot/infer "$KS_REQUEST" 200
in_bytes=0 out_bytes=0
send /models/general/translate '{"text": "Open the file"}' 200
send /models/general/translate '{"text": 5}' 400
tr_in=$in_bytes tr_out=$out_bytes

# Names no model has land under model="other": first one of each route,
# then hostile ones (7 KB long, a quote, a backslash, a newline, a forged
# sample), which must not add a series. A 10 KB name makes the request
# line too long (414, route "other"): it never reaches the model routes.
send /v2/models/nope/infer '{}' 404
send /models/nope/translate '{}' 404
scrape metrics1.txt
long=$(printf 'a%.0s' $(seq 1 7000))
send "/v2/models/$long%22%5C%0A/infer" '{}' 404
send '/v2/models/attention-scaled_dot%22/infer' '{}' 404
send '/v2/models/%22%7D%20999%0Aattn_requests_total%7Broute=%22x/infer' '{}' 404
send "/models/$long%22/translate" '{}' 404
send '/models/general%5C/translate' '{}' 404
send "/v2/models/$long$long/infer" '{}' 414
scrape metrics2.txt

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

ok200=$(sample 'attn_requests_total{route="/attention/scaled_dot",status="200"}')
bad400=$(sample 'attn_requests_total{route="/attention/scaled_dot",status="400"}')
[ "$ok200" = 3 ] || fail "attn_requests_total for 200 on /attention/scaled_dot is $ok200, want 3"
[ "$bad400" = 1 ] || fail "attn_requests_total for 400 on /attention/scaled_dot is $bad400, want 1"
echo "counters: 3 x 200 and 1 x 400 on /attention/scaled_dot, as sent"

# Each model's series counted what was sent to it, and only that.
expect() { # expect NAME{LABELS} VALUE
    local v
    v=$(sample "$1")
    [ "$v" = "$2" ] || fail "$1 is $v, want $2"
}
ks='route="/v2/models/{name}/infer",model="attention-scaled_dot"'
expect "attn_requests_total{$ks,status=\"200\"}" 2
expect "attn_requests_total{$ks,status=\"400\"}" 1
expect "attn_request_duration_seconds_count{$ks}" 3
expect "attn_request_bytes_total{$ks}" "$ks_in"
expect "attn_response_bytes_total{$ks}" "$ks_out"
expect 'attn_requests_total{route="/v2/models/{name}/infer",model="attention-dot",status="200"}' 1
expect 'attn_requests_total{route="/v2/models/{name}/infer",model="attention-general",status="200"}' 0
expect 'attn_requests_total{route="/v2/models/{name}/infer",model="other",status="404"}' 4
tr='route="/models/{name}/translate",model="general"'
expect "attn_requests_total{$tr,status=\"200\"}" 1
expect "attn_requests_total{$tr,status=\"400\"}" 1
expect "attn_request_duration_seconds_count{$tr}" 2
expect "attn_request_bytes_total{$tr}" "$tr_in"
expect "attn_response_bytes_total{$tr}" "$tr_out"
expect 'attn_requests_total{route="/models/{name}/translate",model="other",status="404"}' 3
echo "by model: attention-scaled_dot 2 x 200, 1 x 400, $ks_in bytes in, $ks_out out; attention-dot 1; general 1 x 200, 1 x 400, $tr_in in, $tr_out out; 4 and 3 unknown names under other"
# Every series of the two routes has a model label, one the server serves
# or "other"; the hostile names added none.
"$PY" - "$DIR" "$ks_models" "$tr_models" <<'PYEOF' || fail "the model routes' series are not bounded to the served models"
import re, sys
d, ks, tr = sys.argv[1], sys.argv[2].split() + ["other"], sys.argv[3].split() + ["other"]
def series(name):
    out = set()
    for line in open(d + "/" + name):
        if line.startswith("#") or ('route="/v2/models/{name}/infer"' not in line and 'route="/models/{name}/translate"' not in line):
            continue
        key = line.split(" ")[0]
        m = re.search(r',model="([^"]*)"', key)
        allowed = ks if "/infer" in key else tr
        if not m or m.group(1) not in allowed:
            sys.exit("not a served model or other: %s" % key)
        out.add(key)
    return out
before, after = series("metrics1.txt"), series("metrics2.txt")
if before != after:
    sys.exit("hostile names changed the series: new %s, gone %s" % (sorted(after - before), sorted(before - after)))
series("metrics.txt")
PYEOF
echo "model labels: only served models and other; hostile names added no series"
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
# A slow upload (curl's pace, 10 MB/s) of a body whose arrays each hold
# 512 x 64 numbers (about 330 KB of text): the server parses each one that
# closes while the rest still comes, and the request uses them.
"$PY" -c '
import json, random
random.seed(7)
t = [[[random.uniform(-1, 1) for _ in range(64)] for _ in range(512)]]
print(json.dumps({"query": t, "key": t, "value": t, "need_weights": False}))' >"$DIR/paced.json"
early0=$(sample attn_json_early_parses_total)
used0=$(sample attn_json_early_parses_used_total)
code=$(curl -s -m 30 -o /dev/null -w '%{http_code}' --limit-rate 10M -H 'Content-Type: application/json' \
    --data-binary "@$DIR/paced.json" "http://127.0.0.1:$PORT/attention/dot")
[ "$code" = 200 ] || fail "the paced upload answered $code"
scrape metrics_paced.txt
early=$(( $(sample attn_json_early_parses_total metrics_paced.txt) - early0 ))
used=$(( $(sample attn_json_early_parses_used_total metrics_paced.txt) - used0 ))
[ "$early" -ge 1 ] && [ "$used" -ge 1 ] && [ "$used" -le "$early" ] \
    || fail "a body paced at 10 MB/s: $early arrays parsed early and $used used, want at least 1 of each"
echo "a paced upload: $early arrays parsed while it came, $used used"

# posted FILE ROUTE WHAT MAX: FILE's body to ROUTE must answer 200 and
# leave the server under MAX bytes resident.
posted() {
    local code rss
    code=$(curl -s -m 60 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "@$DIR/$1" "http://127.0.0.1:$PORT$2")
    [ "$code" = 200 ] || fail "$3 answered $code"
    rss=$(awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$SRV_PID/status")
    [ "$rss" -lt "$4" ] || fail "after $3 the server holds $rss bytes, want under $4"
    echo "$3: $rss bytes resident after"
}

# A request of 400000 one-row slices: the library runs slices in groups of
# 4096 head jobs, so their descriptions take a few MB, not the 230 MB that
# all at once took (and the compute context then kept for the server's life).
"$PY" -c '
import base64, json
t = {"shape": [400000, 1, 1], "dtype": "float32", "b64": base64.b64encode(bytes(1600000)).decode()}
print(json.dumps({"query": t, "key": t, "value": t, "need_weights": False, "output_format": "b64"}))' >"$DIR/slices.json"
posted slices.json /attention/dot "400000 one-row slices" 150000000

# A request that plans over 256 MiB of working memory (200000 queries
# projected to hidden_size 512: 410 MB) frees its compute context when it
# ends instead of keeping the workspace (1.5 times its need) in the pool.
"$PY" -c '
import base64, json
q = {"shape": [200000, 1], "dtype": "float32", "b64": base64.b64encode(bytes(800000)).decode()}
print(json.dumps({"query": q, "key": [[1]], "value": [[1]], "hidden_size": 512, "need_weights": False,
                  "output_format": "b64"}))' >"$DIR/scratch.json"
posted scratch.json /attention/additive "a request of 410 MB of working memory" 200000000
scrape metrics.txt # the process figures below, as they are now

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
mquery='attn_requests_total{job="attn",route="/v2/models/{name}/infer",model="attention-scaled_dot",status="200"}'
mgot=$(curl -s -m 2 -G "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$mquery" |
    "$PY" -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")')
[ "$mgot" = 2 ] || fail "Prometheus query $mquery gave '${mgot:-nothing}', want 2"
up=$(curl -s -m 2 -G "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode 'query=up{job="attn"}' |
    "$PY" -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")')
[ "$up" = 1 ] || fail "Prometheus sees up{job=\"attn\"} = '$up'"
echo "prometheus scrape: up=1, $query = $got, $mquery = $mgot"
echo "test-metrics: ok"
