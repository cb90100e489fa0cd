# lib_varlen_check.py - recomputes examples/lib_varlen.c's packed
# sequences with PyTorch, one sequence at a time (its rows cut from the
# packed tensors, GQA by repeating KV heads, causal aligned bottom-right
# as FlashAttention's), and compares the outputs and log-sum-exps with the
# program's (read from stdin).
import sys
import torch

from check_lines import check_lines

H, HKV, D = 4, 2, 8
CU_Q, CU_K = [0, 3, 4, 9], [0, 4, 6, 11]
torch.set_default_dtype(torch.float64)


def fill(rows, heads, salt):
    n = rows * heads * D
    return torch.tensor([(((i * 17 + salt * 7) % 23) - 11) / 10.0 for i in range(n)]).reshape(rows, heads, D)


q, k, v = fill(CU_Q[-1], H, 1), fill(CU_K[-1], HKV, 2), fill(CU_K[-1], HKV, 3)
out = torch.zeros(CU_Q[-1], H, D)
lse = torch.zeros(H, CU_Q[-1])
for s in range(len(CU_Q) - 1):
    qs = q[CU_Q[s]:CU_Q[s + 1]].transpose(0, 1)  # (H, Lq, D)
    ks = k[CU_K[s]:CU_K[s + 1]].transpose(0, 1).repeat_interleave(H // HKV, 0)
    vs = v[CU_K[s]:CU_K[s + 1]].transpose(0, 1).repeat_interleave(H // HKV, 0)
    lq, lk = qs.shape[1], ks.shape[1]
    scores = qs @ ks.transpose(1, 2) / D ** 0.5
    hidden = torch.ones(lq, lk, dtype=torch.bool).triu(lk - lq + 1)  # bottom-right causal
    scores = scores.masked_fill(hidden, float("-inf"))
    out[CU_Q[s]:CU_Q[s + 1]] = (scores.softmax(-1) @ vs).transpose(0, 1)
    lse[:, CU_Q[s]:CU_Q[s + 1]] = scores.logsumexp(-1)
want = [f"row {i // H} head {i % H} = " + " ".join(f"{x:.6f}" for x in out.reshape(-1, D)[i].tolist())
        for i in range(CU_Q[-1] * H)]
want += [f"lse head {h} = " + " ".join(f"{x:.6f}" for x in lse[h].tolist()) for h in range(H)]
bad = check_lines("lib_varlen", want, sys.stdin.read())
print(f"lib_varlen: {CU_Q[-1]} rows of {H} heads in {len(CU_Q) - 1} sequences, and their lse, match PyTorch"
      if not bad else f"lib_varlen: {bad} lines differ")
sys.exit(1 if bad else 0)
