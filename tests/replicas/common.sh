# tests/replicas/common.sh - shell helpers shared by the docker, replica, metrics and examples tests (sourced, not run).

PY=${PYTHON:-/usr/bin/python3}

# A TCP port on 127.0.0.1 nobody listens on right now (the kernel picks it).
free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# abs_path DIR: DIR made absolute (nginx and Prometheus need absolute paths).
abs_path() {
    case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac
}

# test_dirs NAME SERVER_BINARY [BUILD_DIR]: a server test's arguments: sets
# SERVER, BUILD_DIR (default build) and DIR, a fresh BUILD_DIR/NAME made
# absolute for the test's files.
test_dirs() {
    SERVER=${2:?usage: $0 SERVER_BINARY [BUILD_DIR]}
    BUILD_DIR=${3:-build}
    DIR="$(abs_path "$BUILD_DIR")/$1"
    rm -rf "$DIR" && mkdir -p "$DIR"
}

# wait_http URL SECONDS: until URL answers 200, or fail after SECONDS.
wait_http() {
    local url=$1 secs=${2:-20} i
    for ((i = 0; i < secs * 10; i++)); do
        if [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url" 2>/dev/null)" = 200 ]; then
            return 0
        fi
        sleep 0.1
    done
    echo "no 200 from $url within ${secs}s" >&2
    return 1
}

# A small scaled_dot request whose answer check_small_answer knows.
SMALL_REQUEST='{"query": [[1, 0], [0, 1]], "key": [[1, 0], [0, 1]], "value": [[1, 2], [3, 4]]}'

# check_small_answer FILE: the response body to SMALL_REQUEST is right
# (softmax of the scores scaled by 1/sqrt(2), then times the values).
check_small_answer() {
    "$PY" - "$1" <<'PYEOF'
import json, math, sys
body = json.load(open(sys.argv[1]))
s = 1 / math.sqrt(2)
a = math.exp(s) / (math.exp(s) + 1)
want_w = [[a, 1 - a], [1 - a, a]]
want_o = [[a * 1 + (1 - a) * 3, a * 2 + (1 - a) * 4], [(1 - a) * 1 + a * 3, (1 - a) * 2 + a * 4]]
def close(x, y):
    return all(abs(p - q) <= 1e-5 for rx, ry in zip(x, y) for p, q in zip(rx, ry)) and len(x) == len(y)
ok = close(body.get("output", []), want_o) and close(body.get("weights", []), want_w)
if not ok:
    print("wrong answer: %s\nwanted output %s weights %s" % (body, want_o, want_w), file=sys.stderr)
    sys.exit(1)
PYEOF
}
