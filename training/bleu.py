#!/usr/bin/python3
"""Corpus BLEU as sacrebleu computes it by default (BLEU-4, uniform weights,
brevity penalty against the closest reference length, 'exp' smoothing,
tokenisation '13a', case-sensitive), written from the published definition.

    python3 bleu.py --selftest
"""
import collections
import math
import re
import sys

_RE = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),  # punctuation/symbols
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),              # . , unless after a digit
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),              # . , unless before a digit
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),                   # - after a digit
]


def tok_13a(line):
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    line = " " + line + " "
    for r, s in _RE:
        line = r.sub(s, line)
    return line.split()


def ngrams(toks, n_max=4):
    c = collections.Counter()
    for n in range(1, n_max + 1):
        for i in range(len(toks) - n + 1):
            c[tuple(toks[i:i + n])] += 1
    return c


def stats(hyp, refs, n_max=4):
    """Per-sentence statistics: hyp_len, ref_len, matches[n], totals[n]."""
    h = tok_13a(hyp)
    rs = [tok_13a(r) for r in refs if r]
    hc = ngrams(h, n_max)
    best = collections.Counter()
    ref_len = None
    for r in rs:
        # closest reference length, ties -> shorter
        if ref_len is None or abs(len(r) - len(h)) < abs(ref_len - len(h)) or \
                (abs(len(r) - len(h)) == abs(ref_len - len(h)) and len(r) < ref_len):
            ref_len = len(r)
        for g, k in ngrams(r, n_max).items():
            if k > best[g]:
                best[g] = k
    match = [0] * n_max
    total = [max(len(h) - n, 0) for n in range(n_max)]
    for g, k in hc.items():
        match[len(g) - 1] += min(k, best[g])
    return len(h), ref_len or 0, match, total


def corpus_bleu(hyps, refs_sets, n_max=4):
    """hyps: list of str. refs_sets: list of reference sets, each a list with
    one reference per hypothesis (as sacrebleu); '' or None = no reference.
    Returns dict(score, precisions, bp, ratio, hyp_len, ref_len)."""
    H = R = 0
    M = [0] * n_max
    T = [0] * n_max
    for i, h in enumerate(hyps):
        hl, rl, m, t = stats(h, [rs[i] for rs in refs_sets], n_max)
        H += hl
        R += rl
        M = [a + b for a, b in zip(M, m)]
        T = [a + b for a, b in zip(T, t)]
    if not any(M):
        # no n-gram of any order matches: 0, with precisions 0 (sacrebleu 2.x
        # stops here; 'exp' smoothing would otherwise give a positive score)
        bp = 0.0 if H == 0 else 1.0 if H >= R else math.exp(1 - R / H)
        return dict(score=0.0, precisions=[0.0] * n_max, bp=bp, ratio=H / R if R else 0.0, hyp_len=H, ref_len=R)
    prec = []
    k = 1
    for n in range(n_max):
        if T[n] == 0:
            prec.append(0.0)
        elif M[n] == 0:  # 'exp' smoothing
            k *= 2
            prec.append(100.0 / (k * T[n]))
        else:
            prec.append(100.0 * M[n] / T[n])
    if H == 0:
        return dict(score=0.0, precisions=prec, bp=0.0, ratio=0.0, hyp_len=H, ref_len=R)
    bp = 1.0 if H >= R else math.exp(1 - R / H)
    if min(prec) <= 0:
        score = 0.0
    else:
        score = bp * math.exp(sum(math.log(p) for p in prec) / n_max)
    return dict(score=score, precisions=prec, bp=bp, ratio=H / R if R else 0.0, hyp_len=H, ref_len=R)


def fmt(b):
    return "BLEU = %.2f %s (BP = %.3f ratio = %.3f hyp_len = %d ref_len = %d)" % (
        b["score"], "/".join("%.1f" % p for p in b["precisions"]), b["bp"], b["ratio"], b["hyp_len"], b["ref_len"])


def selftest():
    sys_ = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]
    refs = [["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
            ["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."]]
    # sacrebleu README: BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)
    out = fmt(corpus_bleu(sys_, refs))
    assert out == "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)", out
    # sacrebleu README, variable number of references:
    # BLEU = 29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 hyp_len = 17 ref_len = 19)
    refs2 = [["", "It was not unexpected.", "The man bit him first."], refs[1]]
    out2 = fmt(corpus_bleu(sys_, refs2))
    assert out2 == "BLEU = 29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 hyp_len = 17 ref_len = 19)", out2
    assert abs(corpus_bleu(sys_, [sys_])["score"] - 100.0) < 1e-9
    # no n-gram matches at all: 0 as sacrebleu 2.x gives (not 5.34 by 'exp' smoothing)
    out3 = fmt(corpus_bleu(["a b c d e"], [["f g h i j"]]))
    assert out3 == "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 5 ref_len = 5)", out3
    # one unigram matches: 'exp' smoothing of the empty orders, as sacrebleu
    out4 = fmt(corpus_bleu(["a b c d e"], [["a g h i j"]]))
    assert out4 == "BLEU = 10.68 20.0/12.5/8.3/6.2 (BP = 1.000 ratio = 1.000 hyp_len = 5 ref_len = 5)", out4
    assert tok_13a("Hello, world. 3.14 and 1,000 -- (x)") == \
        ["Hello", ",", "world", ".", "3.14", "and", "1,000", "--", "(", "x", ")"]
    assert tok_13a("l'option « 5-6 »") == ["l'option", "«", "5", "-", "6", "»"]
    print("bleu self-test ok:", out, "|", out2)


if __name__ == "__main__":
    if "--selftest" in sys.argv:
        selftest()
