#!/bin/sh
# run.sh - `make test-load`: a bounded load run on loopback. Starts its own
# server on a free 127.0.0.1 port, warms it up, then drives 64 connections
# of mixed small and large requests with wrk (mixed.lua) while sampling the
# server's resident memory. Passes when no request fails other than
# deliberate 503 overloaded, resident memory grows < 10% after warm-up, and
# the server drains and exits 0 on SIGTERM. Prints p50/p99 latency.
# Usage: tests/load/run.sh SERVER BUILD_DIR   (LOAD_SECONDS, LOAD_WARMUP)
set -u
server=$1
build=${2:-build}
secs=${LOAD_SECONDS:-120}
warm=${LOAD_WARMUP:-30}
py=${PYTHON:-/usr/bin/python3}
here=$(dirname "$0")
work=$build/load
mkdir -p "$work"
command -v wrk >/dev/null || { echo "test-load: wrk is not installed (apt-get install wrk)"; exit 1; }

# Request bodies: small (4 x 16), medium (64 x 64), large (512 x 64 base64,
# over the 64 KiB line where the server computes on its own thread).
$py - "$work" <<'PY'
import base64, json, random, struct, sys
d = sys.argv[1]; rnd = random.Random(7)
def mat(r, c): return [[round(rnd.uniform(-1, 1), 4) for _ in range(c)] for _ in range(r)]
def b64(r, c):
    return {"shape": [r, c], "dtype": "float32",
            "b64": base64.b64encode(struct.pack("<%df" % (r * c), *[rnd.uniform(-1, 1) for _ in range(r * c)])).decode()}
json.dump({"query": mat(4, 16), "key": mat(6, 16), "value": mat(6, 16)}, open(d + "/small.json", "w"))
json.dump({"query": mat(4, 16), "num_heads": 4}, open(d + "/mh_small.json", "w"))
json.dump({"query": mat(64, 64), "key": mat(64, 64), "value": mat(64, 64)}, open(d + "/medium.json", "w"))
json.dump({"query": b64(512, 64), "key": b64(512, 64), "value": b64(512, 64), "need_weights": False,
           "output_format": "b64"}, open(d + "/large.json", "w"))
PY
port=$($py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ATTN_PORT=$port ATTN_BIND=127.0.0.1 ATTN_LOG_LEVEL=warn "$server" >"$work/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
i=0
until curl -fs "http://127.0.0.1:$port/healthz" >/dev/null; do
    i=$((i + 1)); [ $i -gt 100 ] && { echo "test-load: server did not start"; cat "$work/server.log"; exit 1; }
    sleep 0.1
done
rss() { awk '/^VmRSS/ {print $2}' /proc/$pid/status; }
echo "test-load: server pid $pid on 127.0.0.1:$port, RSS at start $(rss) kB"

# RSS is sampled every 2 s and compared under load with under load: the
# median of the first third of the measured run (the level after warm-up)
# against the median of its last third. Single samples swing by +-10% with
# the requests in flight, and an idle sample against a busy one would count
# those as growth; a leak shows as a rising median.
export LOAD_DIR=$work
sample() { while kill -0 $pid 2>/dev/null; do rss >>"$1"; sleep 2; done; }
# drive SECONDS NAME: wrk for SECONDS into $work/NAME.txt while RSS samples
# go to $work/rss_NAME.txt; prints the peak sample.
drive() {
    : >"$work/rss_$2.txt"
    sample "$work/rss_$2.txt" >/dev/null &
    sampler=$!
    wrk -t2 -c64 -d"$1"s --latency -s "$here/mixed.lua" "http://127.0.0.1:$port" >"$work/$2.txt" 2>&1
    kill $sampler 2>/dev/null
    sort -n "$work/rss_$2.txt" | tail -1
}
rss_warm=$(drive "$warm" warmup)
echo "test-load: warm-up ${warm} s done, peak RSS $rss_warm kB"

rss_max=$(drive "$secs" run)
echo "test-load: RSS samples during the run (kB): $(tr '\n' ' ' <"$work/rss_run.txt")"
sleep 2
echo "test-load: RSS idle after the run: $(rss) kB"
healthy=$(curl -fs -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz")
kill -TERM $pid
wait $pid
exit_code=$?
trap - EXIT

cat "$work/run.txt" | grep -E "Requests/sec|Latency  |^ +(50|99)%"
$py - "$work/run.txt" "$rss_warm" "$rss_max" "$healthy" "$exit_code" "$secs" "$work/rss_run.txt" <<'PY'
import statistics, sys
run, warm, peak, healthy, code, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
samples = [int(x) for x in open(sys.argv[7]) if x.strip()]
third = max(1, len(samples) // 3)
early, late = statistics.median(samples[:third]), statistics.median(samples[-third:])
st, vals = {}, {}
for line in open(run):
    p = line.split()
    if line.startswith("status "): st[int(p[1])] = int(p[2])
    elif p and p[0] in ("requests", "p50_ms", "p99_ms", "max_ms"): vals[p[0]] = float(p[1])
    elif line.startswith("socket_errors"): vals["socket"] = [int(x) for x in p[1:]]
ok = st.get(200, 0); o503 = st.get(503, 0)
bad = {k: v for k, v in st.items() if k not in (200, 503)}
growth = (late - early) / early * 100
checks = [
    ("requests answered", ok > 0, "%d x 200, %d x 503 (deliberate overload), %d other" % (ok, o503, sum(bad.values()))),
    ("no status other than 200 and 503", not bad, str(bad)),
    ("no socket errors", sum(vals.get("socket", [0])) == 0, "connect/read/write/timeout %s" % vals.get("socket")),
    ("RSS after warm-up grows < 10%", growth < 10,
     "median %d kB in the run's first third -> %d kB in its last (%+.1f%%); peaks %d kB in warm-up, %d kB in the run"
     % (early, late, growth, warm, peak)),
    ("healthy after the run", healthy == "200", "GET /healthz %s" % healthy),
    ("exits 0 on SIGTERM", code == 0, "exit %d" % code),
]
print("test-load: %s s at 64 connections: %d requests (%.0f/s), p50 %.2f ms, p99 %.2f ms, max %.1f ms" % (
    secs, vals.get("requests", 0), vals.get("requests", 0) / float(secs), vals.get("p50_ms", -1), vals.get("p99_ms", -1), vals.get("max_ms", -1)))
fail = 0
for name, good, detail in checks:
    print("%s %s: %s" % ("ok  " if good else "FAIL", name, detail))
    fail += not good
print("%d passed, %d failed" % (len(checks) - fail, fail))
sys.exit(1 if fail else 0)
PY
