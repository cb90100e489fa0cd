#!/usr/bin/env python3
"""examples/sdpa_heads.py - grouped-query attention with heads, as torch's scaled_dot_product_attention takes them, checked against PyTorch.

Usage: python3 examples/sdpa_heads.py [BASE_URL]     (default http://127.0.0.1:8080)

POST /attention/scaled_dot takes a query of (B, H, Lq, D) and a key and
value of (B, Hkv, Lk, D), Hkv dividing H: query head h reads key/value head
h // (H // Hkv), as `scaled_dot_product_attention(..., enable_gqa=True)`
does. Here 2 sequences of 8 query heads over 2 key/value heads, 48 queries
against 80 keys, with a (B, 1, Lq, Lk) mask (one for every head, as a
Hugging Face model builds it: the second sequence's last 16 keys are
padding), bottom-right causal (the queries are the last 48 positions) and
one sink logit per head. The output, the weights and each row's
log-sum-exp come back as base64 and are compared with PyTorch in float64
(repeat_interleave, a masked softmax whose denominator holds e^sink).
The same request is then sent as FlashAttention's flash_attn_func holds
its tensors, (B, L, H, D), with "qkv_layout": "bshd"; its output comes
back as (B, Lq, H, D). Exits 1 when a number differs by more than 1e-4. Uses only the standard library
for HTTP; PyTorch (Debian's python3-torch: run with /usr/bin/python3) for
the check. ATTN_TOKEN in the environment is sent as the bearer token.
"""
import base64
import json
import os
import sys
import urllib.request

import torch

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
B, H, HKV, LQ, LK, D = 2, 8, 2, 48, 80, 32
TOL = 1e-4


def b64(t, dtype="float32"):
    """The contract's base64 tensor form: little-endian float32, or bool bytes."""
    a = t.detach().contiguous()
    a = a.to(torch.uint8) if dtype == "bool" else a.to(torch.float32)
    return {"shape": list(a.shape), "dtype": dtype, "b64": base64.b64encode(a.numpy().tobytes()).decode()}


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


def reference(q, k, v, allowed, sinks):
    """float64 attention per head, key/value heads repeated for their groups."""
    g = H // HKV
    k, v = k.double().repeat_interleave(g, dim=1), v.double().repeat_interleave(g, dim=1)
    s = (q.double() @ k.transpose(-1, -2)) / D ** 0.5
    s = s.masked_fill(~allowed, float("-inf"))
    z = sinks.double().reshape(1, H, 1, 1).expand(B, H, LQ, 1)
    lse = torch.logsumexp(torch.cat([s, z], dim=-1), dim=-1)
    w = torch.exp(s - lse[..., None])
    return w @ v, w, lse


def main():
    torch.manual_seed(0)
    q, k, v = torch.randn(B, H, LQ, D), torch.randn(B, HKV, LK, D), torch.randn(B, HKV, LK, D)
    sinks = torch.linspace(-1.0, 1.0, H)
    pad = torch.ones(B, 1, LQ, LK, dtype=torch.bool)
    pad[1, :, :, LK - 16:] = False  # the second sequence's last 16 keys are padding
    i = torch.arange(LQ)[:, None] + (LK - LQ)  # bottom-right: query i sits at key position i'
    allowed = pad & (torch.arange(LK)[None, :] <= i)
    want_o, want_w, want_lse = reference(q, k, v, allowed, sinks)
    worst = 0.0
    for layout in ("bhsd", "bshd"):
        fa = layout == "bshd"  # FlashAttention's (B, L, H, D): dimensions 1 and 2 swapped
        held = [t.transpose(1, 2) if fa else t for t in (q, k, v)]
        got = post({"query": b64(held[0]), "key": b64(held[1]), "value": b64(held[2]),
                    "qkv_layout": layout, "mask": b64(pad, "bool"), "causal": True,
                    "align": "bottom_right", "sinks": sinks.tolist(), "return_lse": True,
                    "output_format": "b64"})
        wants = (("output", want_o.transpose(1, 2) if fa else want_o), ("weights", want_w),
                 ("lse", want_lse))
        for name, want in wants:
            have = unb64(got[name])
            if list(have.shape) != list(want.shape):
                print("%s: %s has shape %s, PyTorch %s" % (layout, name, list(have.shape), list(want.shape)))
                return 1
            err = (have - want).abs().max().item()
            worst = max(worst, err)
            print("%s %-7s %s: largest difference from PyTorch %.2e" % (layout, name, list(have.shape), err))
    print("ok" if worst <= TOL else "FAILED: above %g" % TOL)
    return 0 if worst <= TOL else 1

if __name__ == "__main__":
    sys.exit(main())
