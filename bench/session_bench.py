"""session_bench.py - the decode-session rows of `make bench`: one decoding
step at n = 4096 cached tokens, H = 8 heads of d = 64, T = Tq = 1, base64,
posted by the C client (bench/http_bench.c) to a live attn-server on
loopback, against the same step sent statelessly to /attention/scaled_dot
with the whole cache in the body (query (8, 1, 64), key and value
(8, 4096, 64): the same computation, heads as the batch); the two take
turns, five rounds each, so both see the same moments of a shared machine,
and each figure is the median of the rounds' medians. The library's plain
decode call on the same shapes (bench_kernels --decode: attn_compute,
2 threads, back to back) takes its turn in the same rounds, for the
step's compute to be set against it at the same moments too. Each session step
is followed by an untimed truncate back to 4095 rows, so every timed step
runs at n = 4096. Also the bytes a session holds at n = 4096 beside what
its cache needs, 2 n Hkv d 4. And the same step as a KServe v2 sequence
step (the multihead-decode model, the session's id as sequence_id: one
session table), its inputs as JSON data, to price the protocol's layer.
Prints one JSON object for bench/run.py (compute times are the server's
Server-Timing figures; wall times the client's).

Usage: /usr/bin/python3 bench/session_bench.py --build DIR [--reps N]
"""
import http.client
import json
import os
import random
import statistics
import sys

from service_bench import Server, b64_tensor, bench_parser, http_bench, kernel_row

N, H, D = 4096, 8, 64
ROUNDS = 5  # the step and the stateless request take turns this many times


def call(port, path, body=None):
    """POST body (GET without one); the JSON answer, or raises."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    data = json.dumps(body) if body is not None else None
    c.request("POST" if body is not None else "GET", path, data, {"Content-Type": "application/json"})
    r = c.getresponse()
    out = json.loads(r.read() or b"null")
    c.close()
    if r.status not in (200, 201):
        raise RuntimeError("%s: %d %s" % (path, r.status, out))
    return out


def alternate(runs, reps):
    """Each run of runs (name -> function of a rep count) ROUNDS times,
    taking turns (the order flipped every round), so that both sides see the
    same moments of a shared machine; per name, every figure is the median
    of its rounds' medians, and reps the total."""
    got = {name: [] for name in runs}
    for r in range(ROUNDS):
        names = sorted(runs, reverse=bool(r % 2))
        for name in names:
            got[name].append(runs[name](reps[name]))
    out = {}
    for name, rounds in got.items():
        med = {k: statistics.median(x[k] for x in rounds) for k in rounds[0] if isinstance(rounds[0][k], float)}
        out[name] = dict(rounds[0], **med, reps=sum(x["reps"] for x in rounds))
    return out


def library_decode(build):
    """The library's decode row (bench_kernels --decode, median of 41
    calls), in milliseconds: back to back (its keys and values stay in
    cache) and with the caches evicted before each call."""
    r = kernel_row(build, ["--decode"], None)
    return {"decode_ms": r["decode_4096"] * 1e3, "decode_cold_ms": r["decode_cold_4096"] * 1e3, "reps": 41}


def write(build, name, obj):
    path = os.path.join(build, "bench", name)
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


def main():
    args = bench_parser(reps=41).parse_args()
    b = args.build
    os.makedirs(os.path.join(b, "bench"), exist_ok=True)
    rng = random.Random(13)
    client = os.path.join(b, "http_bench")
    server = [os.path.join(b, "attn-server"), "--log-level", "warn"]
    log = os.path.join(b, "bench", "session_server.log")
    out = {"n": N, "heads": H, "head_dim": D}
    with Server(lambda p: server + ["--port", str(p)], log, "/healthz") as s:
        base = "http://127.0.0.1:%d" % s.port
        sid = call(s.port, "/sessions", {"num_heads": H, "head_dim": D, "max_tokens": N})["id"]
        cache_k, cache_v = b64_tensor((N - 1, H, D), rng), b64_tensor((N - 1, H, D), rng)
        call(s.port, "/sessions/%s/step" % sid, {"key": cache_k, "value": cache_v,
                                                 "query": b64_tensor((1, H, D), rng), "need_weights": False})
        step = write(b, "session_step.json", {"key": b64_tensor((1, H, D), rng), "value": b64_tensor((1, H, D), rng),
                                              "query": b64_tensor((1, H, D), rng), "need_weights": False,
                                              "output_format": "b64"})
        back = write(b, "session_truncate.json", {"length": N - 1})
        ks = {"parameters": {"sequence_id": sid, "need_weights": False}, "inputs": [
            {"name": nm, "shape": [1, H, D], "datatype": "FP32", "data": [rng.uniform(-1.0, 1.0) for _ in range(H * D)]}
            for nm in ("key", "value", "query")]}
        kstep = write(b, "session_kserve_step.json", ks)
        out["kserve"] = http_bench(client, "%s/v2/models/multihead-decode/infer" % base, kstep, args.reps,
                                   ("%s/sessions/%s/truncate" % (base, sid), back), timeout=900)
        call(s.port, "/sessions/%s/step" % sid, json.load(open(step)))  # back to n = 4096
        info = call(s.port, "/sessions/%s" % sid)
        out["bytes"] = info["bytes"]
        out["cache_bytes"] = 2 * info["length"] * H * D * 4
        out["length"] = info["length"]
        stateless = write(b, "session_stateless.json", {
            "query": b64_tensor((H, 1, D), rng), "key": b64_tensor((H, N, D), rng),
            "value": b64_tensor((H, N, D), rng), "need_weights": False, "output_format": "b64"})
        call(s.port, "/sessions/%s/truncate" % sid, {"length": N - 1})
        runs = {
            "session": lambda n: http_bench(client, "%s/sessions/%s/step" % (base, sid), step, n,
                                            ("%s/sessions/%s/truncate" % (base, sid), back), timeout=900),
            "stateless": lambda n: http_bench(client, "%s/attention/scaled_dot" % base, stateless, n, timeout=900),
            "library": lambda n: library_decode(b),
        }
        # a round's steps come back to back, as a decoding client sends them: the
        # pool's worker sleeps through the stateless turn, and the first steps
        # after it pay its wake-up (about 0.1 ms here), which is not the steady state
        reps = {"session": max(5, args.reps), "stateless": max(3, args.reps // (4 * ROUNDS)), "library": 1}
        out.update(alternate(runs, reps))
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
