"""mha_json_bench.py - a visualization's request, timed by the server: POST
/multihead with L = 64, E = 256, 8 heads, causal, and a PyTorch
nn.MultiheadAttention state_dict, everything as nested JSON written by
json.dumps(tensor.tolist()) (~6 MB), against a fresh attn-server on a free
127.0.0.1 port. Prints the Server-Timing parts (parse, compute, encode, and
their sum) and the client's wall time (the body sent to the answer read,
over one kept-alive connection) as the median and the best of the timed
runs, in ms, as JSON. The parse counts from the body's last byte: an
array that closed well before it was parsed while the rest came.
The answer is checked against the module itself (output within 1e-4).

Usage: /usr/bin/python3 bench/mha_json_bench.py [--build DIR] [--reps N]"""
import http.client
import json
import os
import statistics
import time

import torch

from service_bench import Server, bench_parser, server_timing

L, E, H = 64, 256, 8


def main():
    args = bench_parser(reps=21).parse_args()
    build = os.path.abspath(args.build)
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True)
    x = torch.randn(1, L, E)
    body = json.dumps({"query": x.tolist(), "num_heads": H, "causal": True,
                       "params": {k: v.tolist() for k, v in mha.state_dict().items()}}).encode()
    mask = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    want, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    os.makedirs(os.path.join(build, "bench"), exist_ok=True)
    log = os.path.join(build, "bench", "servers.log")
    parts = {"parse": [], "compute": [], "encode": [], "total": [], "wall": []}
    with Server(lambda p: [os.path.join(build, "attn-server"), "--port", str(p)], log, "/healthz") as s:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
        for i in range(args.reps + 1):
            t0 = time.perf_counter()
            conn.request("POST", "/multihead", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            wall = (time.perf_counter() - t0) * 1e3
            if r.status != 200:
                raise RuntimeError("POST /multihead: %d %s" % (r.status, data[:300]))
            if i == 0:  # warm-up, and the answer checked once
                got = torch.tensor(json.loads(data)["output"])
                err = (got - want).abs().max().item()
                if err > 1e-4:
                    raise RuntimeError("POST /multihead: output differs from PyTorch by %g" % err)
                continue
            st = server_timing(r.getheader("Server-Timing"))
            for k in ("parse", "compute", "encode"):
                parts[k].append(st.get(k, 0.0))
            parts["total"].append(sum(st.get(k, 0.0) for k in ("parse", "compute", "encode")))
            parts["wall"].append(wall)
        conn.close()
    out = {"request_bytes": len(body), "response_bytes": len(data), "reps": args.reps,
           "max_abs_err": err}
    for k, v in parts.items():
        out[k + "_ms_median"] = round(statistics.median(v), 3)
        out[k + "_ms_best"] = round(min(v), 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
