#!/usr/bin/env python3
"""examples/session_decode.py - decodes token by token through a server-side KV cache (a decode session) and checks every step against PyTorch.

Usage: python3 examples/session_decode.py [BASE_URL]     (default http://127.0.0.1:8080)

A toy decoder layer with grouped-query attention (8 query heads sharing 2
key/value heads of 16) runs over a random sequence:
  1. POST /sessions opens the cache;
  2. the 6-token prompt goes in one step (prefill), then each new token in
     its own step: only that token's key, value and query rows travel, as
     base64, and the server attends the whole cache;
  3. a draft of 3 tokens is appended and 2 are taken back with
     POST /sessions/{id}/truncate (speculative decoding), then decoding goes
     on from the kept length;
  4. DELETE frees the cache.
Each step's output is compared with PyTorch's softmax(q k^T / sqrt(d)) v
over every token so far (causal, the new rows last); exits 1 when one
differs by more than 1e-4. Uses only the standard library for HTTP;
PyTorch (Debian's python3-torch: run with /usr/bin/python3) for the model
and the check. ATTN_TOKEN in the environment is sent as the bearer token.
"""
import base64
import json
import os
import sys
import urllib.error
import urllib.request

import torch

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
H, HKV, D, E = 8, 2, 16, 64
TOL = 1e-4


def call(method, path, body=None):
    """One request; returns (status, parsed JSON or None)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if os.environ.get("ATTN_TOKEN"):
        req.add_header("Authorization", "Bearer " + os.environ["ATTN_TOKEN"])
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def b64(t):
    """The contract's base64 tensor form: little-endian float32."""
    a = t.detach().contiguous().to(torch.float32)
    return {"shape": list(a.shape), "dtype": "float32", "b64": base64.b64encode(a.numpy().tobytes()).decode()}


def unb64(t):
    raw = bytearray(base64.b64decode(t["b64"]))
    return torch.frombuffer(raw, dtype=torch.float32).reshape(t["shape"])


torch.manual_seed(0)
wq, wk, wv = (torch.randn(n * D, E) / E**0.5 for n in (H, HKV, HKV))
tokens = torch.randn(40, E)


def project(x):
    """Rows x (T, E) -> q (T, H, D), k and v (T, HKV, D)."""
    return (x @ wq.T).view(-1, H, D), (x @ wk.T).view(-1, HKV, D), (x @ wv.T).view(-1, HKV, D)


def reference(q, k_all, v_all):
    """torch: the new query rows (Tq, H, D) against every key so far (n, HKV, D),
    causal with the query rows last (bottom-right aligned)."""
    n, tq = k_all.shape[0], q.shape[0]
    k = k_all.repeat_interleave(H // HKV, dim=1).transpose(0, 1)  # (H, n, D)
    v = v_all.repeat_interleave(H // HKV, dim=1).transpose(0, 1)
    allowed = torch.arange(n)[None, :] <= torch.arange(n - tq, n)[:, None]
    scores = q.transpose(0, 1) @ k.transpose(1, 2) / D**0.5  # (H, Tq, n)
    w = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return (w @ v).transpose(0, 1)  # (Tq, H, D)


def main():
    status, made = call("POST", "/sessions", {"num_heads": H, "num_kv_heads": HKV, "head_dim": D, "max_tokens": 64})
    if status != 201:
        sys.exit(f"POST /sessions: {status} {made}")
    sid = made["id"]
    print(f"session {sid}: up to {made['max_tokens']} tokens, idle TTL {made['ttl_seconds']} s")
    keys, values = torch.zeros(0, HKV, D), torch.zeros(0, HKV, D)
    worst, steps = 0.0, 0

    def step(x, label):
        nonlocal keys, values, worst, steps
        q, k, v = project(x)
        status, ans = call("POST", f"/sessions/{sid}/step",
                           {"key": b64(k), "value": b64(v), "query": b64(q),
                            "need_weights": False, "output_format": "b64"})
        if status != 200:
            sys.exit(f"{label}: {status} {ans}")
        keys, values = torch.cat([keys, k]), torch.cat([values, v])
        err = (unb64(ans["output"]) - reference(q, keys, values)).abs().max().item()
        worst, steps = max(worst, err), steps + 1
        if ans["length"] != keys.shape[0] or err > TOL:
            sys.exit(f"{label}: length {ans['length']} (want {keys.shape[0]}), max |diff| {err:.3g}")

    step(tokens[:6], "prefill of 6 tokens")
    for t in range(6, 20):
        step(tokens[t:t + 1], f"token {t}")
    step(tokens[20:23], "a draft of 3 tokens")
    status, cut = call("POST", f"/sessions/{sid}/truncate", {"length": 21})
    if status != 200 or cut["length"] != 21:
        sys.exit(f"truncate: {status} {cut}")
    keys, values = keys[:21], values[:21]
    for t in range(21, 30):  # positions continue from the kept length
        step(tokens[t:t + 1], f"token {t} after truncate")
    status, info = call("GET", f"/sessions/{sid}")
    print(f"{steps} steps, {info['length']} tokens cached, {info['bytes']} bytes held on the server, "
          f"max |server - torch| = {worst:.2e}")
    status, _ = call("DELETE", f"/sessions/{sid}")
    gone, err = call("GET", f"/sessions/{sid}")
    if status != 204 or gone != 404 or err["error"]["code"] != "unknown_session":
        sys.exit(f"DELETE: {status}, then GET: {gone} {err}")
    print("every step matches PyTorch; session deleted")


if __name__ == "__main__":
    main()
