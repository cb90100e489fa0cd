#!/usr/bin/env python3
"""examples/lse_join.py - attention over a long context split between two requests, joined by their log-sum-exps, checked against PyTorch.

Usage: python3 examples/lse_join.py [BASE_URL]     (default http://127.0.0.1:8080)

When the keys and values of a long context live in two places (two
servers, a cached prefix and a fresh suffix, chunks of a sequence too long
for one request), each part's attention can be computed where it lives and
the two joined, as FlashAttention's split-KV decoding and ring attention do:
with o1, o2 the parts' outputs and lse1, lse2 their rows' log-sum-exps
(`"return_lse": true`),

    lse = log(e^lse1 + e^lse2),   o = e^(lse1 - lse) o1 + e^(lse2 - lse) o2.

Here 4 heads of 32 queries attend 1000 keys, 600 in one request and 400 in
the other (base64 tensors, heads as the batch). The joined output is
compared with PyTorch's softmax(q k^T / sqrt(d)) v over all the keys, and
each part's lse with torch.logsumexp; exits 1 when one differs by more
than 1e-4. Uses only the standard library for HTTP; PyTorch (Debian's
python3-torch: run with /usr/bin/python3) for the check. ATTN_TOKEN in the
environment is sent as the bearer token.
"""
import base64
import json
import os
import sys
import urllib.request

import torch

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
HEADS, LQ, LK, CUT, D = 4, 32, 1000, 600, 64
TOL = 1e-4


def b64(t):
    """The contract's base64 tensor form: little-endian float32."""
    a = t.detach().contiguous().to(torch.float32)
    return {"shape": list(a.shape), "dtype": "float32", "b64": base64.b64encode(a.numpy().tobytes()).decode()}


def unb64(t):
    raw = bytearray(base64.b64decode(t["b64"]))
    return torch.frombuffer(raw, dtype=torch.float32).reshape(t["shape"])


def attend(q, k, v):
    """POST /attention/scaled_dot over one part of the keys: (output, lse)."""
    body = {"query": b64(q), "key": b64(k), "value": b64(v), "need_weights": False,
            "return_lse": True, "output_format": "b64"}
    req = urllib.request.Request(BASE + "/attention/scaled_dot", data=json.dumps(body).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    if os.environ.get("ATTN_TOKEN"):
        req.add_header("Authorization", "Bearer " + os.environ["ATTN_TOKEN"])
    with urllib.request.urlopen(req, timeout=30) as r:
        got = json.loads(r.read())
    return unb64(got["output"]).double(), unb64(got["lse"]).double()


def main():
    g = torch.Generator().manual_seed(7)
    q = torch.randn(HEADS, LQ, D, generator=g)
    k = torch.randn(HEADS, LK, D, generator=g)
    v = torch.randn(HEADS, LK, D, generator=g)
    o1, lse1 = attend(q, k[:, :CUT], v[:, :CUT])
    o2, lse2 = attend(q, k[:, CUT:], v[:, CUT:])
    lse = torch.logaddexp(lse1, lse2)
    joined = torch.exp(lse1 - lse)[..., None] * o1 + torch.exp(lse2 - lse)[..., None] * o2

    s = q.double() @ k.double().transpose(1, 2) / D ** 0.5
    want = torch.softmax(s, dim=-1) @ v.double()
    errs = {
        "joined output": (joined - want).abs().max().item(),
        "lse of the first part": (lse1 - torch.logsumexp(s[..., :CUT], -1)).abs().max().item(),
        "lse of the second part": (lse2 - torch.logsumexp(s[..., CUT:], -1)).abs().max().item(),
        "joined lse": (lse - torch.logsumexp(s, -1)).abs().max().item(),
    }
    for what, err in errs.items():
        print(f"{what}: largest difference from PyTorch {err:.2e}")
    bad = [w for w, e in errs.items() if not e <= TOL]
    if bad:
        print("FAILED: " + ", ".join(bad) + f" beyond {TOL}")
        return 1
    print(f"{HEADS} heads x {LQ} queries over {LK} keys in two requests ({CUT} + {LK - CUT}), joined: matches PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
