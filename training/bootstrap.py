#!/usr/bin/python3
"""Paired bootstrap of the BLEU differences between the GRU attention rules
(Koehn 2004): the test sentences are resampled with replacement (1000
resamples, numpy seed 12345), each resample scored with bleu.py's corpus BLEU
for both models of a pair, and the 2.5th and 97.5th percentiles of the
difference give a 95% interval. It measures only the sampling of test
sentences, not the spread between training seeds or histories.

    /usr/bin/python3 training/bootstrap.py [--split test] [--n 1000] [--seed 12345]
"""
import argparse
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bleu  # noqa: E402

PAIRS = [("additive", "concat"), ("general", "concat"), ("additive", "general")]


def sentence_stats(hyps, refs):
    """(N, 10): hyp_len, ref_len, matches 1-4, totals 1-4 of each sentence."""
    out = np.zeros((len(hyps), 10), dtype=np.int64)
    for i, (h, r) in enumerate(zip(hyps, refs)):
        hl, rl, m, t = bleu.stats(h, [r])
        out[i] = [hl, rl] + m + t
    return out


def score(s):
    """bleu.corpus_bleu's score from summed statistics (rows: resamples)."""
    H, R, M, T = s[:, 0].astype(float), s[:, 1].astype(float), s[:, 2:6], s[:, 6:10]
    res = np.zeros(len(s))
    for j in range(len(s)):
        if H[j] == 0 or not M[j].any():
            continue
        logp, k = 0.0, 1
        for n in range(4):
            if T[j, n] == 0:
                logp = -math.inf
                break
            if M[j, n] == 0:
                k *= 2
                logp += math.log(100.0 / (k * T[j, n]))
            else:
                logp += math.log(100.0 * M[j, n] / T[j, n])
        bp = 1.0 if H[j] >= R[j] else math.exp(1 - R[j] / H[j])
        res[j] = bp * math.exp(logp / 4)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="test")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=12345)
    args = ap.parse_args()
    with open(os.path.join(HERE, "data", args.split + ".tsv"), encoding="utf-8") as f:
        refs = [line.rstrip("\n").split("\t")[1] for line in f]
    stats = {}
    for name in sorted({n for p in PAIRS for n in p}):
        for mode in ("greedy", "beam4"):
            with open(os.path.join(HERE, "outputs", "%s.%s.%s.txt" % (args.split, name, mode)),
                      encoding="utf-8") as f:
                hyps = f.read().split("\n")[:len(refs)]
            st = sentence_stats(hyps, refs)
            full = bleu.corpus_bleu(hyps, [refs])["score"]
            assert abs(score(st.sum(0, keepdims=True))[0] - full) < 1e-9
            stats[name, mode] = st
    rng = np.random.RandomState(args.seed)
    idx = rng.randint(0, len(refs), size=(args.n, len(refs)))
    # one count matrix for every resample: (n, N) @ (N, 10) sums the stats
    counts = np.zeros((args.n, len(refs)), dtype=np.int64)
    for r in range(args.n):
        counts[r] = np.bincount(idx[r], minlength=len(refs))
    print("paired bootstrap, %s split (%d sentences), %d resamples, seed %d: BLEU difference, "
          "95%% interval" % (args.split, len(refs), args.n, args.seed))
    for a, b in PAIRS:
        for mode in ("greedy", "beam4"):
            sa, sb = stats[a, mode], stats[b, mode]
            d0 = score(sa.sum(0, keepdims=True))[0] - score(sb.sum(0, keepdims=True))[0]
            d = score(counts @ sa) - score(counts @ sb)
            lo, hi = np.percentile(d, [2.5, 97.5])
            print("%-8s - %-8s %-6s %+.2f [%+.2f, %+.2f]  (%s ahead in %.1f%% of resamples)" % (
                a, b, mode, d0, lo, hi, a, 100.0 * (d > 0).mean()))


if __name__ == "__main__":
    main()
