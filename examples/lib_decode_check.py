# lib_decode_check.py - recomputes examples/lib_decode.c's steps with
# PyTorch (plain scaled-dot attention over the whole sequence so far, GQA
# by repeating KV heads, rope "half" style) and compares them with the
# program's output (read from stdin).
import sys
import torch

from check_lines import check_lines

H, HKV, D, PROMPT, STEPS = 4, 2, 8, 5, 6
torch.set_default_dtype(torch.float64)


def fill(t, rows, heads, salt):
    n = rows * heads * D
    return torch.tensor([(((t * 131 + i * 17 + salt) % 23) - 11) / 10.0 for i in range(n)]).reshape(rows, heads, D)


def rope(x, pos):
    """x (rows, heads, D) at positions pos: pairs (k, k + D/2) turned by pos * 10000^(-2k/D)."""
    half = D // 2
    ang = pos[:, None] * 10000.0 ** (-2.0 * torch.arange(half) / D)
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * c - b * s, a * s + b * c], -1)


keys, values, want = [], [], []
for t in range(STEPS + 1):
    T = PROMPT if t == 0 else 1
    n0 = sum(k.shape[0] for k in keys)
    keys.append(fill(t, T, HKV, 1))
    values.append(fill(t, T, HKV, 2))
    q = fill(t, T, H, 3)
    K, V = torch.cat(keys), torch.cat(values)
    n = K.shape[0]
    pos_q, pos_k = torch.arange(n0, n, dtype=torch.float64), torch.arange(n, dtype=torch.float64)
    qr, kr = rope(q, pos_q), rope(K, pos_k)
    for i in range(T):
        for h in range(H):
            g = h // (H // HKV)
            s = kr[: n0 + i + 1, g] @ qr[i, h] / D ** 0.5  # causal: keys up to position n0 + i
            o = torch.softmax(s, 0) @ V[: n0 + i + 1, g]
            want.append(f"step {t} row {i} head {h} = " + " ".join(f"{x:.6f}" for x in o.tolist()))
bad = check_lines("lib_decode", want, sys.stdin.read())
print(f"lib_decode: {len(want)} rows over {STEPS + 1} steps match PyTorch" if not bad else f"lib_decode: {bad} lines differ")
sys.exit(1 if bad else 0)
