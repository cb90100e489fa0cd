"""torch_bench.py - times PyTorch (Debian's python3-torch, CPU) on the rows of `make bench` and records which BLAS it runs on; prints one JSON object.

Rows: bmm-softmax-bmm on (8, L, 64) heads for the core (1.13 has no
scaled_dot_product_attention; the bmm path builds the weights either way, so
"core" and "weights" are one computation), a masked softmax for causal,
nn.MultiheadAttention(512, 8) for multi-head with projections, and one decode
step. Every size is warmed up once and timed at least 3 times (median).
The BLAS is read from the process itself: torch's build line (BLAS_INFO),
the BLAS shared library actually mapped, and when that is OpenBLAS its
openblas_get_corename() (OPENBLAS_CORETYPE in the environment decides it).

Usage: /usr/bin/python3 bench/torch_bench.py [threads]
"""
import ctypes
import json
import math
import os
import re
import sys
import time

import torch

E, H = 512, 8
D = E // H
LS = (128, 512, 1024, 2048, 4096)


def median_time(fn, reps=7, budget=3.0, min_reps=3):
    fn()  # warm-up, at every size
    times = []
    start = time.perf_counter()
    while len(times) < reps:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget and len(times) >= min_reps:
            break
    times.sort()
    return times[len(times) // 2], len(times)


def core(q, k, v, mask=None):
    s = torch.bmm(q, k.transpose(1, 2)) * (1.0 / math.sqrt(D))
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.bmm(w, v), w


def blas_info():
    """What BLAS this process runs: build line, mapped library, OpenBLAS core."""
    cfg = torch.__config__.show()
    info = {"torch_version": torch.__version__,
            "torch_blas_info": (re.search(r"BLAS_INFO=([^,\s]+)", cfg) or [None, "?"])[1],
            "torch_cpu_capability": (re.search(r"CPU capability usage: (\S+)", cfg) or [None, "?"])[1],
            "torch_mkldnn": bool(torch.backends.mkldnn.is_available()),
            "torch_mkl": bool(torch.backends.mkl.is_available())}
    torch.mm(torch.ones(64, 64), torch.ones(64, 64))  # make sure the BLAS is loaded
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if re.search(r"/lib(open)?blas[^/]*\.so", path):
                libs.add(path)
    info["torch_blas_lib"] = " ".join(sorted(os.path.basename(x) for x in libs)) or "none mapped"
    for path in sorted(libs):
        try:
            fn = ctypes.CDLL(path).openblas_get_corename
            fn.restype = ctypes.c_char_p
            info["torch_openblas_corename"] = fn().decode()
        except (OSError, AttributeError):
            pass
    return info


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    out = blas_info()
    out["torch_threads"] = torch.get_num_threads()
    samples = []
    with torch.inference_mode():
        for l in LS:
            q, k, v = (torch.rand(H, l, D) * 2 - 1 for _ in range(3))
            reps = 7 if l <= 1024 else 3
            out["core_%d" % l], n = median_time(lambda: core(q, k, v), reps)
            samples.append(n)
            out["weights_%d" % l] = out["core_%d" % l]
            mask = torch.ones(l, l, dtype=torch.bool).triu(1)
            out["causal_%d" % l], n = median_time(lambda: core(q, k, v, mask), reps)
            samples.append(n)
            mha = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
            x = torch.rand(1, l, E) * 2 - 1
            out["mha_%d" % l], n = median_time(lambda: mha(x, x, x, need_weights=False), reps)
            samples.append(n)
        q = torch.rand(H, 1, D)
        k, v = torch.rand(H, 4096, D), torch.rand(H, 4096, D)
        out["decode_4096"], n = median_time(lambda: core(q, k, v), reps=41, budget=2.0)
        samples.append(n)
    out["torch_min_samples"] = min(samples)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
