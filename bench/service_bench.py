"""service_bench.py - the live-server rows of `make bench`: a base64
multi-head request (L = 1024, E = 512, 8 heads, weights not returned) timed
by the C client (bench/http_bench.c) against a real attn-server, and small scaled_dot requests
(L = 8, D = 16) driven by wrk against attn-server and against a bare
libmicrohttpd server answering a fixed 200 (bench/bare_mhd.c), alternating,
in the same run. Both servers listen on free 127.0.0.1 ports and are stopped
before it returns. Prints one JSON object for bench/run.py.

Usage: /usr/bin/python3 bench/service_bench.py --build DIR [--wrk-seconds S] [--rounds N]
                                               [--small-only]
(--small-only skips the multi-head request: just the wrk rows, quickly.)

The HTTP path rows: base64 scaled_dot requests (8, L, 64), L = 1024 and
2048, no weights, posted by a C client (bench/http_bench.c, libcurl) to
attn-server and to bare_mhd (which reads and drops the same body),
alternating; the service's overhead is (wall - bare wall) / compute, with
compute from the server's Server-Timing header of the same responses.
"""
import argparse
import base64
import http.client
import json
import os
import random
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time

L, E, H = 1024, 512, 8
SMALL_L, SMALL_D = 8, 16
WRK_THREADS, WRK_CONNECTIONS = 2, 32
E2E_ROUNDS = 3  # the multi-head route and the library's row take turns this many times


def bench_parser(**ints):
    """An argument parser with --build DIR (default build) and one integer
    option per keyword, name=default (wrk_seconds becomes --wrk-seconds)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    for name, default in ints.items():
        ap.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    return ap


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, path, seconds=10.0):
    """Polls path until it answers; raises if the process exits first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited with status %s" % proc.returncode)
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            c.getresponse().read()
            c.close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not answer on port %d" % port)


class Server:
    """A child process on a free loopback port, stopped (SIGTERM, then
    SIGKILL) on exit; only this process is ever signalled."""

    def __init__(self, argv_of_port, log_path, ready_path):
        self.port = free_port()
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv_of_port(self.port), stdout=self.log, stderr=self.log)
        try:
            wait_ready(self.port, self.proc, ready_path)
        except Exception:
            self.stop()
            raise

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def b64_tensor(shape, rng):
    n = 1
    for d in shape:
        n *= d
    raw = struct.pack("<%df" % n, *(rng.uniform(-1.0, 1.0) for _ in range(n)))
    return {"shape": list(shape), "dtype": "float32", "b64": base64.b64encode(raw).decode("ascii")}


def server_timing(value):
    """{'parse': ms, 'compute': ms, 'encode': ms} from a Server-Timing header."""
    out = {}
    for part in (value or "").split(","):
        m = re.match(r"\s*(\w+);dur=([0-9.]+)", part)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def http_bench(client, url, body_path, reps, then=(), timeout=600, headers=()):
    """bench/http_bench.c's JSON (medians) for the body in body_path posted
    to url reps times, each followed by the untimed POST then (a URL and a
    body file) when given, with the request headers given (else JSON's
    Content-Type); raises when a request failed."""
    opts = [a for h in headers for a in ("-H", h)]
    res = subprocess.run([client] + opts + [url, body_path, str(reps)] + list(then), capture_output=True,
                         text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError("http_bench %s: %s" % (url, res.stderr.strip()))
    return json.loads(res.stdout)


def end_to_end(build, port, reps):
    """The multi-head request over one kept-alive connection, timed by the C
    client as the HTTP path rows are (request sent to response fully read),
    with the median Server-Timing parts of the same responses; the answer's
    shape checked once first."""
    rng = random.Random(4)
    body = json.dumps({
        "query": b64_tensor((1, L, E), rng), "key": b64_tensor((1, L, E), rng),
        "value": b64_tensor((1, L, E), rng), "num_heads": H,
        "need_weights": False, "output_format": "b64"}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/multihead", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    if r.status != 200:
        raise RuntimeError("POST /multihead: %d %s" % (r.status, data[:200]))
    out = json.loads(data)["output"]
    if out["shape"] != [1, L, E] or len(base64.b64decode(out["b64"])) != L * E * 4:
        raise RuntimeError("POST /multihead: unexpected output %s" % out["shape"])
    path = os.path.join(build, "bench", "multihead_%d.json" % L)
    with open(path, "wb") as f:
        f.write(body)
    rounds = []
    for _ in range(E2E_ROUNDS):
        hb = http_bench(os.path.join(build, "http_bench"), "http://127.0.0.1:%d/multihead" % port, path, reps)
        # the same call on three distinct inputs, as the request sends them
        # (prepared weights, median)
        hb["kernel_s"] = kernel_row(build, ["--mha-cross", "2", str(L)], "mha_cross_%d" % L)
        rounds.append(hb)
    med = lambda k: statistics.median(r[k] for r in rounds)  # noqa: E731
    return {
        "e2e_total_s": med("wall_ms") / 1e3, "e2e_kernel_s": med("kernel_s"),
        "e2e_parse_ms": med("parse_ms"), "e2e_compute_ms": med("compute_ms"), "e2e_encode_ms": med("encode_ms"),
        "e2e_request_bytes": len(body), "e2e_response_bytes": len(data), "e2e_reps": reps,
        "e2e_rounds": E2E_ROUNDS,
    }


def kernel_row(build, args, key):
    """One figure of bench_kernels run with args (seconds; key None: all of
    them, by name): the library's
    side of a row that times a request and its library call in turns, so
    both see the same moments of a machine whose speed moves between
    minutes."""
    out = subprocess.run([os.path.join(build, "bench_kernels")] + args, check=True,
                         capture_output=True, text=True, timeout=600).stdout
    return json.loads(out)[key] if key else json.loads(out)


def kserve_binary_body(L, rng):
    """POST /v2/models/attention-scaled_dot/infer with Triton's binary tensor
    data extension: a JSON header, then query, key and value (8, L, 64) as
    raw little-endian float32; the output asked for as raw bytes, no
    weights. Returns the body and its Inference-Header-Content-Length."""
    n = 8 * L * 64
    names = ("query", "key", "value")
    head = json.dumps({"inputs": [{"name": k, "shape": [8, L, 64], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 4 * n}} for k in names],
                       "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()
    raw = b"".join(struct.pack("<%df" % n, *(rng.uniform(-1.0, 1.0) for _ in range(n))) for _ in names)
    return head + raw, len(head)


def http_path(build, server, bare, pool, log, reps, rounds=3):
    """The HTTP path rows: medians over alternating rounds of http_bench,
    the native base64 route and KServe's binary extension, each beside the
    bare server reading the same body."""
    rng = random.Random(5)
    client = os.path.join(build, "http_bench")
    out = {}
    with Server(lambda p: server + ["--port", str(p)], log, "/healthz") as s, \
            Server(lambda p: bare + [str(p), str(pool)], log, "/") as b:
        for L in (1024, 2048):
            path = os.path.join(build, "bench", "scaled_dot_%d.json" % L)
            with open(path, "w") as f:
                json.dump({"query": b64_tensor((8, L, 64), rng), "key": b64_tensor((8, L, 64), rng),
                           "value": b64_tensor((8, L, 64), rng), "need_weights": False,
                           "output_format": "b64"}, f)
            kpath = os.path.join(build, "bench", "kserve_scaled_dot_%d.bin" % L)
            body, head_len = kserve_binary_body(L, rng)
            with open(kpath, "wb") as f:
                f.write(body)
            kheaders = ("Content-Type: application/octet-stream",
                        "Inference-Header-Content-Length: %d" % head_len)
            cases = {"ours": ("/attention/scaled_dot", path, ()), "kserve": (
                "/v2/models/attention-scaled_dot/infer", kpath, kheaders)}
            runs = {"ours": [], "bare": [], "kserve": [], "kserve_bare": []}
            for i in range(rounds):
                order = [("ours", s.port, "ours"), ("bare", b.port, "ours"),
                         ("kserve", s.port, "kserve"), ("kserve_bare", b.port, "kserve")]
                if i % 2:
                    order.reverse()
                for who, port, case in order:
                    route, body_path, hdrs = cases[case]
                    url = "http://127.0.0.1:%d%s" % (port, route)
                    runs[who].append(http_bench(client, url, body_path, reps, headers=hdrs))
            med = lambda who, k: statistics.median(r[k] for r in runs[who])  # noqa: E731
            for key, who, bare_who in (("http_%d", "ours", "bare"), ("kserve_bin_%d", "kserve", "kserve_bare")):
                out[key % L] = {
                    "wall_ms": med(who, "wall_ms"), "bare_wall_ms": med(bare_who, "wall_ms"),
                    "parse_ms": med(who, "parse_ms"), "compute_ms": med(who, "compute_ms"),
                    "encode_ms": med(who, "encode_ms"),
                    "request_bytes": runs[who][0]["request_bytes"],
                    "response_bytes": runs[who][0]["response_bytes"]}
    return out


def small_body():
    rng = random.Random(8)

    def mat():
        return [[round(rng.uniform(-1.0, 1.0), 4) for _ in range(SMALL_D)] for _ in range(SMALL_L)]
    return json.dumps({"query": mat(), "key": mat(), "value": mat()}, separators=(",", ":"))


def write_lua(path, body):
    with open(path, "w") as f:
        f.write('-- written by bench/service_bench.py: POST the scaled_dot body\n')
        f.write('wrk.method = "POST"\n')
        f.write('wrk.headers["Content-Type"] = "application/json"\n')
        f.write("wrk.body = %s\n" % json.dumps(body))


def wrk(url, script, seconds):
    """Requests/s of one wrk run; raises if any response was not 2xx/3xx or
    any socket error happened (a rate of errors is no rate)."""
    cmd = ["wrk", "-t%d" % WRK_THREADS, "-c%d" % WRK_CONNECTIONS, "-d%ds" % seconds, "-s", script, url]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=seconds + 30)
    bad = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", p.stdout)
    errs = re.search(r"Socket errors:.*", p.stdout)
    if bad or errs:
        raise RuntimeError("wrk %s: %s" % (url, (bad or errs).group(0)))
    m = re.search(r"Requests/sec:\s*([0-9.]+)", p.stdout)
    if not m:
        raise RuntimeError("wrk printed no rate: %s" % p.stdout[-300:])
    return float(m.group(1))


def main():
    ap = bench_parser(reps=9, wrk_seconds=3, rounds=5)
    ap.add_argument("--small-only", action="store_true",
                    help="only the wrk rows (attn-server vs bare_mhd)")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    os.makedirs(os.path.join(build, "bench"), exist_ok=True)
    log = os.path.join(build, "bench", "servers.log")
    cores = os.cpu_count() or 1
    pool = max(cores * 2, 4)  # attn-server's default HTTP thread pool

    server = [os.path.join(build, "attn-server")]
    bare = [os.path.join(build, "bare_mhd")]
    result = {"wrk": "-t%d -c%d -d%ds" % (WRK_THREADS, WRK_CONNECTIONS, args.wrk_seconds),
              "rounds": args.rounds, "pool": pool}

    if not args.small_only:
        with Server(lambda p: server + ["--port", str(p)], log, "/healthz") as s:
            result.update(end_to_end(build, s.port, args.reps))
        try:
            result.update(http_path(build, server, bare, pool, log, args.reps))
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            print("service_bench: HTTP path: %s" % e, file=sys.stderr)
    try:
        result.update(small_requests(build, server, bare, pool, log, args))
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        # the end-to-end figures stand on their own; say why these are missing
        print("service_bench: small requests: %s" % e, file=sys.stderr)
    print(json.dumps(result))


def small_requests(build, server, bare, pool, log, args):
    """Medians of wrk rounds against attn-server and bare_mhd, alternating."""
    script = os.path.join(build, "bench", "scaled_dot.lua")
    write_lua(script, small_body())
    ours, base = [], []
    with Server(lambda p: server + ["--port", str(p)], log, "/healthz") as s, \
            Server(lambda p: bare + [str(p), str(pool)], log, "/") as b:
        url_s = "http://127.0.0.1:%d/attention/scaled_dot" % s.port
        url_b = "http://127.0.0.1:%d/attention/scaled_dot" % b.port
        wrk(url_s, script, 1)  # warm-up both
        wrk(url_b, script, 1)
        for i in range(args.rounds):
            # alternate which goes first, so neither always follows the other
            order = [(url_s, ours), (url_b, base)]
            if i % 2:
                order.reverse()
            for url, runs in order:
                runs.append(wrk(url, script, args.wrk_seconds))
    return {"small_rps": statistics.median(ours), "bare_rps": statistics.median(base),
            "small_rps_runs": ours, "bare_rps_runs": base}


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        print("service_bench: %s" % e, file=sys.stderr)
        sys.exit(1)
