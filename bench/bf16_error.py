#!/usr/bin/python3
"""bf16_error.py - the error of precision "bf16" next to PyTorch's own bf16,
both against a float64 truth, on the same inputs.

The attention core (8 heads of 64, scaled_dot, no weights) on q, k, v drawn
from N(0, 1), at L = 128, 1024 and 2048, SEEDS inputs each (seeds L + 1000 s,
s = 0..SEEDS-1):
  truth        float64 softmax(q k^T / 8) v (torch, float64)
  ours fp32    POST /attention/scaled_dot to build/attn-server (base64 in and out)
  ours bf16    the same with "precision": "bf16"
  torch bf16   PyTorch's own bf16: q, k, v as torch.bfloat16, (q @ k^T) * scale,
               softmax and @ v in bfloat16 (torch 1.13 on CPU: each op rounds
               its result to bfloat16)
  torch fp32   the same in float32
Errors: the largest |out - truth| over every output element, and the RMS
error, both relative to the RMS of the truth, each the mean over the seeds
(one input's largest error swings by 2x from seed to seed; so does which
side is ahead). Prints a table and writes the figures to bench/bf16_error.json
(or the path given), the first seed's alone beside them.

Usage: /usr/bin/python3 bench/bf16_error.py [--server build/attn-server] [out.json]
(needs torch: Debian's python3-torch at /usr/bin/python3).
"""
import base64
import http.client
import json
import socket
import subprocess
import sys
import time

import numpy as np
import torch

H, D = 8, 64
LS = (128, 1024, 2048)
SEEDS = 5
KINDS = ("ours_bf16", "torch_bf16", "ours_fp32", "torch_fp32")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError("%s: %d %s" % (path, r.status, data[:300]))
    return json.loads(data)


def b64(x):
    return {"shape": list(x.shape), "dtype": "float32",
            "b64": base64.b64encode(np.ascontiguousarray(x, dtype="<f4").tobytes()).decode()}


def unb64(t):
    return np.frombuffer(base64.b64decode(t["b64"]), dtype="<f4").reshape(t["shape"])


def ours(port, q, k, v, precision):
    body = {"query": b64(q), "key": b64(k), "value": b64(v), "need_weights": False,
            "output_format": "b64", "precision": precision}
    return unb64(post(port, "/attention/scaled_dot", body)["output"]).astype(np.float64)


def torch_attn(q, k, v, dtype):
    q, k, v = (torch.from_numpy(x).to(dtype) for x in (q, k, v))
    s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / D ** 0.5)
    return torch.matmul(torch.softmax(s, dim=-1), v).to(torch.float64).numpy()


def errors(out, truth):
    ref = float(np.sqrt(np.mean(truth ** 2)))
    d = np.abs(out - truth)
    return {"max_rel": float(d.max()) / ref, "rms_rel": float(np.sqrt(np.mean(d ** 2))) / ref}


def one_input(port, l, seed):
    g = np.random.default_rng(seed)
    q, k, v = (g.standard_normal((H, l, D)).astype(np.float32) for _ in range(3))
    truth = torch_attn(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                       torch.float64)
    return {
        "ours_fp32": errors(ours(port, q, k, v, "fp32"), truth),
        "ours_bf16": errors(ours(port, q, k, v, "bf16"), truth),
        "torch_bf16": errors(torch_attn(q, k, v, torch.bfloat16), truth),
        "torch_fp32": errors(torch_attn(q, k, v, torch.float32), truth),
    }


def main():
    args = sys.argv[1:]
    server = "build/attn-server"
    if args[:1] == ["--server"]:
        server, args = args[1], args[2:]
    out_path = args[0] if args else "bench/bf16_error.json"
    port = free_port()
    proc = subprocess.Popen([server, "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                c.request("GET", "/healthz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.1)
        rows, first = {}, {}
        for l in LS:
            runs = [one_input(port, l, l + 1000 * s) for s in range(SEEDS)]
            first[str(l)] = runs[0]
            rows[str(l)] = {kind: {m: float(np.mean([r[kind][m] for r in runs]))
                                   for m in ("max_rel", "rms_rel")} for kind in KINDS}
    finally:
        proc.terminate()
        proc.wait()
    print("error vs float64 truth, relative to the truth's RMS (8 heads x L x 64, N(0,1) inputs;"
          " mean of %d seeds)" % SEEDS)
    print("%-6s %-12s %-12s %-12s %-12s" % ("L", "ours bf16", "torch bf16", "ours fp32", "torch fp32"))
    for l, r in rows.items():
        for m in ("max_rel", "rms_rel"):
            print("%-6s %-12.3g %-12.3g %-12.3g %-12.3g   (%s)" % (
                l, r["ours_bf16"][m], r["torch_bf16"][m], r["ours_fp32"][m], r["torch_fp32"][m], m))
    with open(out_path, "w") as f:
        json.dump({"torch": torch.__version__, "shape": [H, "L", D],
                   "inputs": "N(0,1), seeds L + 1000 s for s < %d; errors: their means" % SEEDS,
                   "errors": rows, "first_seed": first}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
