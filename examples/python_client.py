#!/usr/bin/env python3
"""examples/python_client.py - calls the attention service from Python with requests + numpy and checks it against PyTorch.

Usage: python3 examples/python_client.py [BASE_URL]      (default http://127.0.0.1:8080)

1. Builds torch.nn.MultiheadAttention, posts its state_dict() unchanged to
   /multihead with a padded batch, and compares output and weights with the
   module's own forward pass.
2. Posts a Luong ("general") attention module's state_dict to
   /attention/general and compares with the same formula in PyTorch.
Exits 1 when an answer differs from PyTorch by more than 1e-4.

Needs python3-requests and python3-numpy; PyTorch (python3-torch) only for
the comparison. On Debian use /usr/bin/python3.
"""
import base64
import sys

import numpy as np
import requests
import torch

TOL = 1e-4


def tensor_b64(a):
    """The contract's base64 tensor form: little-endian float32 bytes."""
    a = np.ascontiguousarray(a, dtype="<f4")
    return {"shape": list(a.shape), "dtype": "float32", "b64": base64.b64encode(a.tobytes()).decode()}


def tensor_flat(t):
    """The contract's flat form, good for parameters of any rank."""
    a = t.detach().cpu().numpy().astype(np.float32)
    return {"shape": list(a.shape), "data": a.ravel().tolist()}


def from_wire(t):
    """Decodes any of the three tensor forms into a numpy array."""
    if isinstance(t, list):
        return np.asarray(t, dtype=np.float32)
    if "b64" in t:
        return np.frombuffer(base64.b64decode(t["b64"]), dtype="<f4").reshape(t["shape"])
    return np.asarray(t["data"], dtype=np.float32).reshape(t["shape"])


def post(base, path, body):
    r = requests.post(base + path, json=body, timeout=30)
    if r.status_code != 200:
        # Every error is {"error": {"code", "message", "field"}}.
        err = r.json().get("error", {})
        raise SystemExit("%s -> %d %s: %s (field %s)" % (path, r.status_code, err.get("code"),
                                                          err.get("message"), err.get("field")))
    timing = r.headers.get("Server-Timing", "")
    return r.json(), timing


def check(name, got, want):
    diff = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
    ok = diff <= TOL
    print("  %-22s shape %-14s max |diff| %.2e %s" % (name, tuple(got.shape), diff, "ok" if ok else "MISMATCH"))
    if got.shape != want.shape:
        print("    expected shape %s" % (tuple(want.shape),))
    return ok


def multihead(base):
    torch.manual_seed(0)
    E, H, B, Lq, Lk = 16, 4, 2, 5, 7
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
    q, k, v = torch.randn(B, Lq, E), torch.randn(B, Lk, E), torch.randn(B, Lk, E)
    # PyTorch's key_padding_mask is True = ignore; the service's key_mask is
    # True = may attend (one meaning for every mask), hence the negation.
    pad = torch.zeros(B, Lk, dtype=torch.bool)
    pad[1, -2:] = True
    body = {
        "query": tensor_b64(q.numpy()),
        "key": k.tolist(),
        "value": v.tolist(),
        "num_heads": H,
        "key_mask": (~pad).tolist(),
        "params": {name: tensor_flat(t) for name, t in mha.state_dict().items()},
        "average_weights": True,
        "output_format": "b64",
    }
    ans, timing = post(base, "/multihead", body)
    with torch.no_grad():
        want_o, want_w = mha(q, k, v, key_padding_mask=pad, need_weights=True, average_attn_weights=True)
    print("POST /multihead (nn.MultiheadAttention E=%d H=%d, padded batch)  Server-Timing: %s" % (E, H, timing))
    return (check("output", from_wire(ans["output"]), want_o.numpy())
            & check("weights (head mean)", from_wire(ans["weights"]), want_w.numpy()))


class Luong(torch.nn.Module):
    """Luong's "general" score q . (W k + b), as the contract defines it."""

    def __init__(self, dq, dk):
        super().__init__()
        self.attn = torch.nn.Linear(dk, dq)

    def forward(self, q, k, v):
        scores = q @ self.attn(k).transpose(-1, -2)
        w = torch.softmax(scores, dim=-1)
        return w @ v, w


def general(base):
    torch.manual_seed(1)
    Dq, Dk, Dv, Lq, Lk = 8, 6, 4, 3, 5
    mod = Luong(Dq, Dk).eval()
    q, k, v = torch.randn(Lq, Dq), torch.randn(Lk, Dk), torch.randn(Lk, Dv)
    body = {"query": q.tolist(), "key": k.tolist(), "value": v.tolist(),
            "params": {name: t.tolist() for name, t in mod.state_dict().items()}}
    ans, timing = post(base, "/attention/general", body)
    with torch.no_grad():
        want_o, want_w = mod(q, k, v)
    print("POST /attention/general (Luong module, no batch)  Server-Timing: %s" % timing)
    return (check("output", from_wire(ans["output"]), want_o.numpy())
            & check("weights", from_wire(ans["weights"]), want_w.numpy()))


def main():
    base = (sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080").rstrip("/")
    ok = multihead(base) & general(base)
    print("python client: %s" % ("all answers match PyTorch" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
