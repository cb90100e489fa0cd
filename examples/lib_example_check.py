# lib_example_check.py - recomputes examples/lib_example.c's numbers with
# PyTorch and compares them with the program's output (read from stdin).
import sys
import torch

from check_lines import check_lines

q = torch.tensor([((i * 7) % 11) / 10.0 - 0.5 for i in range(32)]).reshape(4, 8)
k = torch.tensor([((i * 5) % 13) / 10.0 - 0.6 for i in range(48)]).reshape(6, 8)
v = torch.tensor([i / 10.0 for i in range(18)]).reshape(6, 3)
s = q @ k.T / 8 ** 0.5
s = s.masked_fill(torch.ones(4, 6).triu(1).bool(), float("-inf"))
w = torch.softmax(s, -1)
o = w @ v
want = [f"output[{i}] = " + " ".join(f"{x:.6f}" for x in o[i].tolist()) for i in range(4)]
want += [f"weights[{i}] = " + " ".join(f"{x:.6f}" for x in w[i].tolist()) for i in range(4)]
bad = check_lines("lib_example", want, sys.stdin.read())
print("lib_example: matches PyTorch" if not bad else f"lib_example: {bad} lines differ")
sys.exit(1 if bad else 0)
