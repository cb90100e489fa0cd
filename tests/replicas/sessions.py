#!/usr/bin/env python3
"""tests/replicas/sessions.py - decode sessions and KServe multihead-decode sequences through the load balancer: create, step (every answer checked), find the holder, and after its SIGKILL expect 404 unknown_session.

Usage: sessions.py create LB_URL N STATE_FILE      makes N sessions and N KServe sequences,
                                                   steps each 3 times
       sessions.py holders STATE_FILE URL...       which replica holds each session
                                                   (exactly one must); prints them
       sessions.py step LB_URL STATE_FILE [DEAD]   steps every session once more; those
                                                   of replica DEAD must get 404
Each answer is checked against a plain-Python reference over the rows this
client sent (causal, the new rows last). Standard library only. Exits 1 on
any wrong answer, with the reason on stderr.
"""
import json
import math
import random
import sys
import urllib.error
import urllib.request

H, HKV, D = 2, 1, 4


def call(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, {"not_json": text[:200].decode("latin-1")}


def reference(keys, values, q):
    """keys, values: lists of (HKV, D) rows; q: (H, D) for the last position."""
    out = []
    for h in range(H):
        g = h // (H // HKV)
        s = [sum(a * b for a, b in zip(q[h], k[g])) / math.sqrt(D) for k in keys]
        m = max(s)
        e = [math.exp(x - m) for x in s]
        z = sum(e)
        out.append([sum(e[j] / z * values[j][g][c] for j in range(len(keys))) for c in range(D)])
    return out


def step(lb, sess, rng):
    k = [[rng.uniform(-1, 1) for _ in range(D)] for _ in range(HKV)]
    v = [[rng.uniform(-1, 1) for _ in range(D)] for _ in range(HKV)]
    q = [[rng.uniform(-1, 1) for _ in range(D)] for _ in range(H)]
    status, ans = call("POST", "%s/sessions/%s/step" % (lb, sess["id"]),
                       {"key": [k], "value": [v], "query": [q], "need_weights": False})
    if status != 200:
        return status, ans
    sess["keys"].append(k)
    sess["values"].append(v)
    want = reference(sess["keys"], sess["values"], q)
    got = ans["output"][0]
    if ans["length"] != len(sess["keys"]) or any(abs(a - b) > 1e-4 for r1, r2 in zip(got, want) for a, b in zip(r1, r2)):
        sys.exit("session %s: wrong answer %s, want %s (length %d)" % (sess["id"], ans, want, len(sess["keys"])))
    return 200, ans


def kserve_step(lb, sess, rng):
    """One step of a KServe multihead-decode sequence: its first starts it
    (no id: the balancer names it), the next ones name it in the body."""
    k = [[rng.uniform(-1, 1) for _ in range(D)] for _ in range(HKV)]
    v = [[rng.uniform(-1, 1) for _ in range(D)] for _ in range(HKV)]
    q = [[rng.uniform(-1, 1) for _ in range(D)] for _ in range(H)]
    params = {"need_weights": False}
    if sess["id"]:
        params["sequence_id"] = sess["id"]
    else:
        params.update({"sequence_start": True, "num_heads": H, "num_kv_heads": HKV, "head_dim": D, "max_tokens": 64})
    flat = lambda rows: [x for r in rows for x in r]
    body = {"parameters": params,
            "inputs": [{"name": "key", "shape": [1, HKV, D], "datatype": "FP32", "data": flat(k)},
                       {"name": "value", "shape": [1, HKV, D], "datatype": "FP32", "data": flat(v)},
                       {"name": "query", "shape": [1, H, D], "datatype": "FP32", "data": flat(q)}]}
    status, ans = call("POST", lb + "/v2/models/multihead-decode/infer", body)
    if status != 200:
        return status, ans
    sess["id"] = sess["id"] or ans["parameters"]["sequence_id"]
    sess["keys"].append(k)
    sess["values"].append(v)
    want = flat(reference(sess["keys"], sess["values"], q))
    got = ans["outputs"][0]["data"]
    if ans["parameters"]["length"] != len(sess["keys"]) or any(abs(a - b) > 1e-4 for a, b in zip(got, want)):
        sys.exit("sequence %s: wrong answer %s, want %s (length %d)" % (sess["id"], ans, want, len(sess["keys"])))
    return 200, ans


def any_step(lb, sess, rng):
    return (kserve_step if sess.get("kserve") else step)(lb, sess, rng)


def lost_answer(status, ans, kserve):
    """A killed replica's session: 404 unknown_session (KServe: 404 whose
    error says the session is unknown here)."""
    if status != 404 or not isinstance(ans, dict):
        return False
    if kserve:
        return isinstance(ans.get("error"), str) and "session" in ans["error"]
    return (ans.get("error") or {}).get("code") == "unknown_session"


def main():
    cmd = sys.argv[1]
    rng = random.Random(11)
    if cmd == "create":
        lb, n, path = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        sessions = []
        for _ in range(n):
            status, made = call("POST", lb + "/sessions", {"num_heads": H, "num_kv_heads": HKV, "head_dim": D,
                                                           "max_tokens": 64})
            if status != 201:
                sys.exit("POST /sessions through the balancer: %d %s" % (status, made))
            sessions.append({"id": made["id"], "keys": [], "values": []})
        # as many KServe sequences, started by their first step
        sessions += [{"id": "", "kserve": True, "keys": [], "values": []} for _ in range(n)]
        for _ in range(3):
            for s in sessions:
                status, ans = any_step(lb, s, rng)
                if status != 200:
                    sys.exit("step of %s: %d %s" % (s["id"], status, ans))
        json.dump({"sessions": sessions}, open(path, "w"))
        print("%d sessions and %d KServe sequences made and stepped 3 times through the balancer, every answer right" % (n, n))
    elif cmd == "holders":
        path, urls = sys.argv[2], sys.argv[3:]
        state = json.load(open(path))
        for s in state["sessions"]:
            held = [u for u in urls if call("GET", "%s/sessions/%s" % (u, s["id"]))[0] == 200]
            if len(held) != 1:
                sys.exit("session %s is held by %d replicas: %s" % (s["id"], len(held), held))
            s["holder"] = held[0]
        json.dump(state, open(path, "w"))
        print(" ".join(s["holder"] for s in state["sessions"]))
    elif cmd == "step":
        lb, path = sys.argv[2], sys.argv[3]
        dead = sys.argv[4] if len(sys.argv) > 4 else None
        state = json.load(open(path))
        lost = {s["id"] for s in state["sessions"] if s.get("holder") == dead}
        ok = gone = 0
        for s in state["sessions"]:
            status, ans = any_step(lb, s, rng)
            if s["id"] in lost:
                if not lost_answer(status, ans, s.get("kserve")):
                    sys.exit("session %s of the killed replica: %d %s, want 404 unknown_session" % (s["id"], status, ans))
                gone += 1
            elif status != 200:
                sys.exit("session %s on a live replica: %d %s" % (s["id"], status, ans))
            else:
                ok += 1
        json.dump(state, open(path, "w"))
        print("%d sessions stepped right, %d of the killed replica answered 404 unknown_session" % (ok, gone))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
