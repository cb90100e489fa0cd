"""torch_bench.py - times PyTorch (Debian's python3-torch 1.13, CPU) on the
rows of `make bench`: bmm-softmax-bmm for the core (1.13 has no
scaled_dot_product_attention), a masked softmax for causal, and
nn.MultiheadAttention for multi-head with projections. Prints one JSON
object of median seconds.

Usage: /usr/bin/python3 bench/torch_bench.py [threads]
"""
import json
import math
import sys
import time

import torch

E, H = 512, 8
D = E // H


def median_time(fn, warm=True, reps=7, budget=3.0):
    if warm:
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < reps:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget and len(times) >= 1:
            break
    times.sort()
    return times[len(times) // 2]


def core(q, k, v, mask=None):
    s = torch.bmm(q, k.transpose(1, 2)) * (1.0 / math.sqrt(D))
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.bmm(w, v), w


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    out = {}
    with torch.inference_mode():
        for l in (128, 512, 1024, 2048, 4096):
            q, k, v = (torch.rand(H, l, D) * 2 - 1 for _ in range(3))
            small = l <= 1024
            # the bmm path materialises the weights either way, so "core" and
            # "with weights" are the same computation
            out["core_%d" % l] = median_time(lambda: core(q, k, v), warm=small)
            out["weights_%d" % l] = out["core_%d" % l]
            mask = torch.ones(l, l, dtype=torch.bool).triu(1)
            out["causal_%d" % l] = median_time(lambda: core(q, k, v, mask), warm=small)
            mha = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
            x = torch.rand(1, l, E) * 2 - 1
            out["mha_%d" % l] = median_time(lambda: mha(x, x, x, need_weights=False), warm=small)
        q = torch.rand(H, 1, D)
        k, v = torch.rand(H, 4096, D), torch.rand(H, 4096, D)
        out["decode_4096"] = median_time(lambda: core(q, k, v), reps=41, budget=2.0)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
