#!/usr/bin/env python3
"""tests/replicas/load.py - steady, bounded load on one URL; counts every failed request.

Usage: load.py URL [--seconds S] [--workers N] [--size L]

Each worker keeps one keep-alive connection and posts the same scaled_dot
request (L x 32 query, key and value) back to back for S seconds, checking
every answer: status 200, JSON, output of shape (L, 32). A dropped connection
is reopened and counted as a failure, since the client saw an error. Prints a
JSON summary on stdout; exit status 1 when any request failed.
Standard library only, so it runs on any python3.
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse


def make_body(size, dim=32):
    rnd = random.Random(7)
    mat = lambda: [[round(rnd.uniform(-1, 1), 4) for _ in range(dim)] for _ in range(size)]
    return json.dumps({"query": mat(), "key": mat(), "value": mat(), "need_weights": False}).encode()


def worker(url, body, size, deadline, stats, lock):
    u = urllib.parse.urlsplit(url)
    conn = None
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        err = None
        try:
            if conn is None:
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
            conn.request("POST", u.path, body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                err = "HTTP %d: %s" % (resp.status, data[:200].decode("utf-8", "replace"))
            else:
                out = json.loads(data)["output"]
                if len(out) != size or len(out[0]) != 32:
                    err = "wrong output shape"
            if resp.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except Exception as e:  # any client-visible failure counts
            err = "%s: %s" % (type(e).__name__, e)
            if conn is not None:
                conn.close()
            conn = None
        ms = (time.monotonic() - t0) * 1000
        with lock:
            stats["requests"] += 1
            stats["max_ms"] = max(stats["max_ms"], ms)
            if err:
                stats["failed"] += 1
                stats["errors"].append(err)
    if conn is not None:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--size", type=int, default=64)
    a = ap.parse_args()
    body = make_body(a.size)
    stats = {"requests": 0, "failed": 0, "max_ms": 0.0, "errors": []}
    lock = threading.Lock()
    deadline = time.monotonic() + a.seconds
    threads = [threading.Thread(target=worker, args=(a.url, body, a.size, deadline, stats, lock))
               for _ in range(a.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats["max_ms"] = round(stats["max_ms"], 1)
    stats["errors"] = stats["errors"][:10]
    print(json.dumps(stats))
    return 1 if stats["failed"] or not stats["requests"] else 0


if __name__ == "__main__":
    sys.exit(main())
