#!/usr/bin/python3
"""binary_client.py - the README's KServe v2 binary tensor data example.

Posts multi-head self-attention inputs as raw float32 bytes (Triton's binary
tensor data extension), asks for the output as raw bytes too, and compares
it with torch.nn.MultiheadAttention holding the same weights when PyTorch is
installed (else with a NumPy implementation of the same formula).

    /usr/bin/python3 tests/kserve/binary_client.py http://127.0.0.1:8080
"""
import json
import sys

import numpy as np
import requests

url = (sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080") + "/v2/models/multihead/infer"
rng = np.random.default_rng(0)
B, L, E, H = 2, 5, 8, 2
x = rng.standard_normal((B, L, E), dtype=np.float32)
w_in = (rng.standard_normal((3 * E, E), dtype=np.float32) * 0.3).astype(np.float32)
w_out = (rng.standard_normal((E, E), dtype=np.float32) * 0.3).astype(np.float32)

# Inputs in order; each carries binary_data_size, its bytes follow the JSON.
tensors = [("query", x), ("in_proj_weight", w_in), ("out_proj.weight", w_out)]
header = {
    "inputs": [{"name": n, "shape": list(t.shape), "datatype": "FP32",
                "parameters": {"binary_data_size": t.nbytes}} for n, t in tensors],
    "parameters": {"num_heads": H},
    "outputs": [{"name": "output", "parameters": {"binary_data": True}}],
}
head = json.dumps(header).encode()
body = head + b"".join(t.astype("<f4").tobytes() for _, t in tensors)
r = requests.post(url, data=body, headers={
    "Content-Type": "application/octet-stream",
    "Inference-Header-Content-Length": str(len(head))})
r.raise_for_status()

# The reply: a JSON header of Inference-Header-Content-Length bytes, then
# each binary output's bytes in the order of "outputs".
n = int(r.headers["Inference-Header-Content-Length"])
meta = json.loads(r.content[:n])
out_meta = meta["outputs"][0]
size = out_meta["parameters"]["binary_data_size"]
got = np.frombuffer(r.content[n:n + size], dtype="<f4").reshape(out_meta["shape"])
print("output", out_meta["shape"], "first row", got[0, 0, :4])

try:
    import torch
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True, bias=False)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(w_in))
        mha.out_proj.weight.copy_(torch.from_numpy(w_out))
        t = torch.from_numpy(x)
        want = mha(t, t, t, need_weights=False)[0].numpy()
    ref = "torch.nn.MultiheadAttention"
except ImportError:
    q, k, v = (x @ w.T for w in np.split(w_in, 3))
    split = lambda a: a.reshape(B, L, H, E // H).transpose(0, 2, 1, 3)
    s = split(q) @ split(k).transpose(0, 1, 3, 2) / np.sqrt(E // H)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    want = (a @ split(v)).transpose(0, 2, 1, 3).reshape(B, L, E) @ w_out.T
    ref = "NumPy"

err = float(np.abs(got - want).max())
print(f"max |server - {ref}| = {err:.2e}")
sys.exit(0 if err < 1e-4 else 1)
