#!/usr/bin/env python3
"""examples/varlen.py - packed sequences of their own lengths, as FlashAttention's flash_attn_varlen_func takes them, checked against PyTorch.

Usage: python3 examples/varlen.py [BASE_URL]     (default http://127.0.0.1:8080)

With cu_seqlens_q (and cu_seqlens_k), POST /attention/{rule} takes the
query as (total_q, H, D) and the key and value as (total_k, Hkv, D): the
rows of every sequence one after the other, with no padding, sequence i
the rows cu_seqlens_q[i] to cu_seqlens_q[i + 1] - 1. Here four sequences
of 5, 1, 12 and 7 queries over 9, 4, 12 and 20 keys, 6 query heads over 2
key/value heads, bottom-right causal (FlashAttention's causal), a sliding
window and a sink per head. Each sequence is attended on its own. The
answer: output (total_q, H, D) as FlashAttention gives it, the weights
(B, H, max Lq, max Lk) with zeros past each sequence's lengths (the form
of FlashAttention's return_attn_probs), and lse (H, total_q). Each is
compared with PyTorch in float64, sequence by sequence; exits 1 when a
number differs by more than 1e-4. Uses only the standard library for
HTTP; PyTorch (Debian's python3-torch: run with /usr/bin/python3) for the
check. ATTN_TOKEN in the environment is sent as the bearer token.
"""
import base64
import json
import os
import sys
import urllib.request

import torch

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
LQ, LK = [5, 1, 12, 7], [9, 4, 12, 20]
H, HKV, D, WINDOW = 6, 2, 16, 6
TOL = 1e-4


def b64(t):
    a = t.detach().contiguous().to(torch.float32)
    return {"shape": list(a.shape), "dtype": "float32", "b64": base64.b64encode(a.numpy().tobytes()).decode()}


def unb64(t):
    raw = bytearray(base64.b64decode(t["b64"]))
    return torch.frombuffer(raw, dtype=torch.float32).reshape(t["shape"]).double()


def post(body):
    req = urllib.request.Request(BASE + "/attention/scaled_dot", data=json.dumps(body).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    if os.environ.get("ATTN_TOKEN"):
        req.add_header("Authorization", "Bearer " + os.environ["ATTN_TOKEN"])
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def offsets(lengths):
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return cu


def reference(q, k, v, sinks):
    """One sequence, float64: (Lq, H, D) against (Lk, Hkv, D), bottom-right
    causal and the window both sides of the diagonal, e^sink in each
    softmax's denominator."""
    lq, lk = q.shape[0], k.shape[0]
    q, k, v = (t.double().transpose(0, 1) for t in (q, k, v))  # (heads, L, D)
    k, v = k.repeat_interleave(H // HKV, 0), v.repeat_interleave(H // HKV, 0)
    s = q @ k.transpose(-1, -2) / D ** 0.5
    i = torch.arange(lq)[:, None] + (lk - lq)  # query i's position among the keys
    j = torch.arange(lk)[None, :]
    s = s.masked_fill(~((j <= i) & ((i - j).abs() <= WINDOW)), float("-inf"))
    z = sinks.double().reshape(H, 1, 1).expand(H, lq, 1)
    lse = torch.logsumexp(torch.cat([s, z], -1), -1)
    w = torch.exp(s - lse[..., None])
    return (w @ v).transpose(0, 1), w, lse


def main():
    torch.manual_seed(0)
    cq, ck = offsets(LQ), offsets(LK)
    q, k, v = torch.randn(cq[-1], H, D), torch.randn(ck[-1], HKV, D), torch.randn(ck[-1], HKV, D)
    sinks = torch.linspace(-1.0, 1.0, H)
    got = post({"query": b64(q), "key": b64(k), "value": b64(v), "cu_seqlens_q": cq, "cu_seqlens_k": ck,
                "causal": True, "align": "bottom_right", "window": WINDOW, "sinks": sinks.tolist(),
                "return_lse": True, "output_format": "b64"})
    out, w, lse = unb64(got["output"]), unb64(got["weights"]), unb64(got["lse"])
    shapes = {"output": [cq[-1], H, D], "weights": [len(LQ), H, max(LQ), max(LK)], "lse": [H, cq[-1]]}
    for name, t in (("output", out), ("weights", w), ("lse", lse)):
        if list(t.shape) != shapes[name]:
            print("%s has shape %s, expected %s" % (name, list(t.shape), shapes[name]))
            return 1
    worst = 0.0
    for b, (lq, lk) in enumerate(zip(LQ, LK)):
        qs, ks = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        want_o, want_w, want_lse = reference(q[qs], k[ks], v[ks], sinks)
        full_w = torch.zeros(H, max(LQ), max(LK), dtype=torch.float64)
        full_w[:, :lq, :lk] = want_w  # past the sequence's lengths: zeros
        errs = [(out[qs] - want_o).abs().max().item(), (w[b] - full_w).abs().max().item(),
                (lse[:, qs] - want_lse).abs().max().item()]
        worst = max([worst] + errs)
        print("sequence %d (%2d queries, %2d keys): output %.2e, weights %.2e, lse %.2e" % (b, lq, lk, *errs))
    print("ok" if worst <= TOL else "FAILED: above %g" % TOL)
    return 0 if worst <= TOL else 1


if __name__ == "__main__":
    sys.exit(main())
