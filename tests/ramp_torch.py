#!/usr/bin/env python3
# ramp_torch.py - measures, on test_kernels' climbing-score cases, how far our kernel and PyTorch (float32) each are from a double-precision reference.
#
# Usage: build/test_kernels 1000 --ramp build/ramp.bin && python3 tests/ramp_torch.py build/ramp.bin
# The error is given in the unit test_kernels' tolerance uses, sum|w v|
# (the output's sum of absolute terms): the stated tolerance allows
# 2e-5 of it (+ 1e-4 |exact| + 1e-6). Prints the worst ratio and how many
# outputs exceed the stated tolerance, for ours and for PyTorch.
import struct
import sys

import numpy as np
import torch


def cases(path):
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        lq, lk, d, dv = struct.unpack_from("<4q", data, at)
        (scale,) = struct.unpack_from("<d", data, at + 32)
        at += 40

        def take(n, dtype, shape):
            nonlocal at
            a = np.frombuffer(data, dtype=dtype, count=n, offset=at).reshape(shape)
            at += n * np.dtype(dtype).itemsize
            return a

        q = take(lq * d, np.float32, (lq, d))
        k = take(lk * d, np.float32, (lk, d))
        v = take(lk * dv, np.float32, (lk, dv))
        bias = take(lq * lk, np.float32, (lq, lk))
        allowed = take(lq * lk, np.uint8, (lq, lk)).astype(bool)
        ours = take(lq * dv, np.float32, (lq, dv))
        yield np.float32(scale), q, k, v, bias, allowed, ours


def attention(q, k, v, bias, allowed, scale, dtype):
    """softmax(q k^T * scale + bias, masked) @ v in dtype; empty rows give 0."""
    q, k, v, b = (torch.from_numpy(np.array(x)).to(dtype) for x in (q, k, v, bias))
    s = (q @ k.T) * torch.tensor(float(scale), dtype=dtype) + b
    s = s.masked_fill(~torch.from_numpy(allowed), float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return w, w @ v


def main():
    worst = {"ours": 0.0, "torch": 0.0}
    over = {"ours": 0, "torch": 0}
    n_out = n_cases = 0
    for scale, q, k, v, bias, allowed, ours in cases(sys.argv[1]):
        w64, ref = attention(q, k, v, bias, allowed, scale, torch.float64)
        sumabs = (w64.abs() @ torch.from_numpy(np.abs(v).astype(np.float64))).numpy()
        ref = ref.numpy()
        _, tf = attention(q, k, v, bias, allowed, scale, torch.float32)
        for name, got in (("ours", ours.astype(np.float64)), ("torch", tf.double().numpy())):
            err = np.abs(got - ref)
            live = sumabs > 0
            if live.any():
                worst[name] = max(worst[name], float((err[live] / sumabs[live]).max()))
            over[name] += int((err > 2e-5 * sumabs + 1e-4 * np.abs(ref) + 1e-6).sum())
        n_cases += 1
        n_out += ref.size
    print(f"{n_cases} climbing-score cases, {n_out} outputs, against float64:")
    for name in ("ours", "torch"):
        print(f"  {name:5}: worst |x - double| = {worst[name]:.3g} x sum|w v|; "
              f"{over[name]} outputs beyond the stated tolerance (2e-5 x sum|w v|)")


if __name__ == "__main__":
    main()
