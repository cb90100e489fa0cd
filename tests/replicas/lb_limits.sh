#!/usr/bin/env bash
# tests/replicas/lb_limits.sh - the balancer's memory bounds, on docker/nginx.conf itself (its upstream, port and
# temp paths moved to loopback and BUILD_DIR): a multihead-decode body over 16 MB gets the JSON 413, and a fifth
# such body in flight, while four are still arriving, the JSON 503 with Retry-After; a request's id is one on
# both sides (the client's X-Request-Id, else nginx's, echoed by the replica and in both access logs).
#
# Usage: tests/replicas/lb_limits.sh SERVER_BINARY [BUILD_DIR]   (make test-replicas)
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/replicas/common.sh

test_dirs replicas-lb "$@"
need_nginx
mkdir -p "$DIR/tmp"
trap replicas_cleanup EXIT
fail() { echo "test-replicas lb_limits: FAIL: $*" >&2; exit 1; }

start_replicas ATTN_TRUST_SESSION_ID=1
LB_PORT=$(free_port)
{
    nginx_user_line
    sed -e "s|attn:8080|127.0.0.1:${ports[0]}|" -e "s|listen 8080;|listen 127.0.0.1:$LB_PORT;|" \
        -e "s|/tmp/|$DIR/tmp/|g" -e "s|/dev/stdout|$DIR/access.log|" docker/nginx.conf
} >"$DIR/nginx.conf"
start_nginx

# prints its own "N passed, N failed"
"$PY" - "$LB_PORT" "$DIR/access.log" "$DIR" <<'PYEOF'
import glob, json, re, socket, sys, time
port, lb_log, logs = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def start(length, body=b'{"inputs": ['):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v2/models/multihead-decode/infer HTTP/1.1\r\nHost: lb\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % length + body)
    return s
def answer(s):
    s.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.decode(), json.loads(body)
bad = 0
head, body = answer(start(17 << 20, b""))
if not head.startswith("HTTP/1.1 413") or "16 MB" not in body.get("error", ""):
    print("a 17 MB decode body: %s %s" % (head.splitlines()[0], body), file=sys.stderr)
    bad += 1
else:
    print("ok: a 17 MB decode body gets the JSON 413")
held = [start(10 << 20) for _ in range(4)]
time.sleep(0.5)
head, body = answer(start(10 << 20))
if not head.startswith("HTTP/1.1 503") or "Retry-After: 1" not in head or "at most 4" not in body.get("error", ""):
    print("the fifth decode body in flight: %s %s" % (head.splitlines()[0], body), file=sys.stderr)
    bad += 1
else:
    print("ok: the fifth decode body in flight gets the JSON 503 with Retry-After")
for s in held:
    s.settimeout(0.2)
    try:
        if s.recv(1):
            print("a decode body still arriving was answered early", file=sys.stderr)
            bad += 1
    except socket.timeout:
        pass
    s.close()
def request_id(sent):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n" +
              (b"X-Request-Id: %s\r\n" % sent.encode() if sent else b"") + b"\r\n")
    s.settimeout(5)
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    m = re.search(r"(?im)^X-Request-Id: (\S+)\r$", data.decode(errors="replace"))
    return m.group(1) if m else None
def logged(path_glob, rid):
    time.sleep(0.4)  # the replica writes its access lines every 100 ms
    return any(("id=%s" % rid) in open(p, errors="replace").read() for p in glob.glob(path_glob))
theirs, ours, odd = request_id("client-7"), request_id(None), request_id("two words")
hex32 = lambda x: bool(x and re.fullmatch(r"[0-9a-f]{32}", x))
if theirs != "client-7" or not hex32(ours) or not hex32(odd):
    print("request ids through the balancer: %s for client-7, %s for none, %s for 'two words' (want nginx's "
          "32 hex for the last two)" % (theirs, ours, odd), file=sys.stderr)
    bad += 1
elif not all(logged(lb_log, i) and logged(logs + "/replica*.log", i) for i in (ours, odd, "client-7")):
    print("request ids %s, %s, client-7 not all in both access logs (%s, %s/replica*.log)" % (ours, odd, lb_log, logs),
          file=sys.stderr)
    bad += 1
else:
    print("ok: a request's id (the client's when well-formed, else nginx's) is echoed and in both access logs")
print("%d passed, %d failed" % (3 - min(bad, 3), min(bad, 3)))
sys.exit(1 if bad else 0)
PYEOF
