#!/usr/bin/python3
"""gen_modern.py - golden vectors for the modern attention options
(tests/golden_modern/*.txt), computed in float64 with PyTorch 1.13.

Usage: /usr/bin/python3 tests/gen_modern.py tests/golden_modern

The options: the full score pipeline (softcap, ALiBi, attention sinks,
bottom-right alignment, windows as [left, right] pairs, rotary embeddings),
sampled hard attention, learned positional encodings, sparse attention
(local_global, bigbird, blocks) and linear attention. The file format is
tests/golden.h's, extended with the option lines and tensor names listed in
tests/golden_modern/README.md; the writer is gen_golden.py's.

torch 1.13 has none of these options as a flag, so each is written out here
from its source, named at the function that implements it:
  softcap          Gemma 2 (attn_logit_softcapping) / FlashAttention 2.6
  ALiBi slopes     the ALiBi paper's code (get_slopes, its non-power-of-two rule)
  sinks            gpt-oss (the sink logit concatenated, softmax, dropped)
  rope             GPT-NeoX / Hugging Face rotate_half ("half") and GPT-J
                   rotate_every_two ("interleaved"), partial rotary dims
  bottom_right     PyTorch CausalVariant.LOWER_RIGHT (tril(diagonal=Lk-Lq))
                   and FlashAttention's construct_local_mask for windows
  local_global     Longformer (sliding window plus global tokens)
  bigbird          BigBird ITC (global, window and random blocks)
  linear           Katharopoulos et al. 2020 / fast-transformers'
                   LinearAttention and CausalLinearAttention (eps 1e-6)

Inputs and parameters are float32; every expected value is computed in
float64 from those float32 values. The draws that need a PRNG (bigbird's
random blocks, hard sampling, seeded pos_embedding.weight) follow the spec
written at the top of tests/ref_modern.h, re-implemented here.

Checks the generator makes on itself (an assertion stops it):
  * SplitMix64's published outputs, and that the n-th output can be reached
    by a jump (state = seed + (n+1)*gamma), as the sampling spec uses;
  * ALiBi slopes from the paper's code equal 2^(-8h/H) for powers of two;
  * every sparse case: attention computed by visiting only what the pattern
    allows (blocks of the layout, or window plus globals) equals dense
    attention under the expanded mask;
  * linear attention: the O(L) prefix/sum form equals the implied weights
    times V;
  * hard choices are not near ties (top_k/argmax gap > 1e-5 of the scores'
    size, sample draws > 1e-5 of the row's total from a boundary), so a
    float32 implementation must choose the same keys.
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import (Additive, Case as GoldenCase, ConcatTanh, Concat, General,  # noqa: E402
                        SplitMix64, fmt, init_params, mha_flags, mha_inputs, rnd, randmask,
                        seeded_set, sinusoidal, write_all, write_params)

F64 = torch.float64
M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
EPS_LINEAR = 1e-6
NEAR_TIE = 1e-5


def nested(a, kind=float):
    """A numpy array as nested lists: floats as the shortest decimal that
    round-trips float32 (so 0.3, not 0.300000012), or booleans."""
    a = np.asarray(a)
    if a.ndim == 0:
        return float(str(np.float32(a))) if kind is float else bool(a)
    return [nested(x, kind) for x in a]


class Case(GoldenCase):
    """gen_golden's writer, with golden.c's limits on option lines checked
    (key < 32 characters, value < 64) so nothing is silently truncated.

    Each case is also written as an HTTP case (tests/http/README.md format)
    into <outdir>/http_cases/modern_ok_<name>.case: the same request as a
    JSON body (the option lines translated by opt(), the tensors and
    parameters by tensor(), mask() and param()) and its expected output,
    weights and layout."""

    def __init__(self, name, rule, note):
        super().__init__(name, rule, note)
        self.note = note
        self.route = "/multihead" if rule == "multihead" else "/attention/" + rule
        self.body = {}
        self.checks = []

    def opt(self, key, *vals):
        v = " ".join(str(x) for x in vals)
        assert len(key) < 32 and len(v) < 64, (self.name, key, v)
        super().opt(key, *vals)
        b = self.body
        num = lambda x: int(x) if float(x).is_integer() and "." not in str(x) else float(x)
        if key in ("causal", "alibi", "return_layout", "average_weights", "residual_norm"):
            b[key] = True
        elif key == "need_weights":
            b[key] = False
        elif key in ("align", "feature_map", "attention", "positional_encoding"):
            b[key] = vals[0]
        elif key in ("seed", "num_heads", "num_kv_heads", "hidden_size", "output_size"):
            b[key] = int(vals[0])
        elif key in ("scale", "softcap"):
            b[key] = float(vals[0])
        elif key == "window":
            w = [None if x == "null" else int(x) for x in vals]
            b[key] = w[0] if len(w) == 1 else w
        elif key == "rope":
            b[key] = {}
        elif key.startswith("rope."):
            b["rope"][key[5:]] = vals[0] if key == "rope.style" else num(vals[0])
        elif key == "hard":
            if vals[0] == "argmax":
                b[key] = "argmax"
            elif vals[0] == "top_k":
                b[key] = {"top_k": int(vals[1])}
            else:
                b[key] = {"sample": {"temperature": float(vals[1])} if len(vals) > 1 else {}}
        elif key == "sparsity":
            b[key] = {"pattern": vals[0]}
        elif key == "sparsity.global":
            b["sparsity"]["global"] = [int(x) for x in vals]
        elif key.startswith("sparsity."):
            b["sparsity"][key[9:]] = int(vals[0])
        else:
            raise ValueError("no JSON for option " + key)

    def tensor(self, name, t):
        super().tensor(name, t)
        a = np.asarray(t, dtype=np.float32)
        self.body[name] = nested(a)

    def mask(self, name, m):
        super().mask(name, m)
        if name == "sparsity.layout":
            self.body["sparsity"]["layout"] = nested(np.asarray(m, bool), bool)
        else:
            self.body[name] = nested(np.asarray(m, bool), bool)

    def param(self, name, t):
        super().param(name, t)
        self.body.setdefault("params", {})[name] = nested(np.asarray(t, dtype=np.float32))

    def save(self, outdir):
        super().save(outdir)
        hdir = os.path.join(outdir, "http_cases")
        os.makedirs(hdir, exist_ok=True)
        lines = ["# " + self.note, "# (from tests/golden_modern/%s.txt)" % self.name,
                 "request: POST " + self.route, "status: 200"] + self.checks
        if self.body.get("need_weights") is False:
            lines.append("absent: weights")
        lines += ["--- body", json.dumps(self.body, separators=(",", ":"))]
        with open(os.path.join(hdir, "modern_ok_%s.case" % self.name), "w") as f:
            f.write("\n".join(lines) + "\n")

    def expect(self, name, t):
        """Expected values with 17 significant digits (doubles round-trip, so
        the C reference can be held to 1e-9); float32 values (seeded
        parameters) with 9, which round-trips them too."""
        if isinstance(t, torch.Tensor):
            t = t.detach().cpu().numpy()
        digits = "%.9g" if np.asarray(t).dtype == np.float32 else "%.17g"
        t = np.asarray(t, dtype=np.float64)
        assert np.all(np.isfinite(t)), self.name + ": non-finite expectation"
        self.lines.append("expect %s %d %s" % (name, t.ndim, " ".join(str(d) for d in t.shape)))
        flat = t.reshape(-1)
        for i in range(0, flat.size, 6):
            self.lines.append(" ".join(digits % float(v) for v in flat[i:i + 6]))
        if name in ("output", "weights"):
            self.checks.append("tensor: %s = %s" % (name, json.dumps(nested(t), separators=(",", ":"))))
        elif name == "layout":
            self.checks.append("json: layout = %s" % json.dumps(nested(t != 0, bool),
                                                                separators=(",", ":")))


# ------------------------------------------------------------- the PRNG draws

def splitmix_at(seed, n):
    """The n-th (0-based) output of SplitMix64(seed), by a jump."""
    z = (seed + (n + 1) * GAMMA) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def u53(x):
    """A double in [0, 1) from a 64-bit output: (x >> 11) * 2^-53."""
    return (x >> 11) * 2.0 ** -53


def normal_table(rng, shape):
    """Seeded nn.Embedding weights, normal(0, 1): Box-Muller from two draws
    per value (u1 in (0,1], u2 in [0,1)), z = sqrt(-2 ln u1) cos(2 pi u2) in
    double, rounded to float32; row-major."""
    n = int(np.prod(shape))
    out = np.empty(n, np.float32)
    for t in range(n):
        u1 = ((rng.next() >> 11) + 1) * 2.0 ** -53
        u2 = (rng.next() >> 11) * 2.0 ** -53
        out[t] = np.float32(math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2))
    return out.reshape(shape)


def bigbird_layout(nqb, nkb, window_blocks, global_blocks, random_blocks, seed):
    """BigBird ITC block layout (Zaheer et al. 2020; the random blocks exclude
    the window and global blocks, as bigbird_block_rand_mask does). Query
    block qb: the first global_blocks query blocks see every key block and
    draw nothing; the others see key blocks < global_blocks, key blocks
    qb-h..qb+h clipped (h = (window_blocks-1)/2), and min(r, n) random ones
    of the n remaining, by a partial Fisher-Yates shuffle of the remaining
    blocks in index order: for t < min(r, n): x = next() >> 32,
    j = t + ((x * (n - t)) >> 32), swap(c[t], c[j]). One SplitMix64 stream
    from the seed, query blocks in order."""
    rng = SplitMix64(seed)
    lay = np.zeros((nqb, nkb), dtype=bool)
    h = (window_blocks - 1) // 2
    for qb in range(nqb):
        if qb < global_blocks:
            lay[qb, :] = True
            continue
        lay[qb, :min(global_blocks, nkb)] = True
        lay[qb, max(0, qb - h):min(nkb, qb + h + 1)] = True
        cand = [kb for kb in range(nkb) if not lay[qb, kb]]
        n = len(cand)
        r = min(random_blocks, n)
        for t in range(r):
            x = rng.next() >> 32
            j = t + ((x * (n - t)) >> 32)
            cand[t], cand[j] = cand[j], cand[t]
        for t in range(r):
            lay[qb, cand[t]] = True
    return lay


# --------------------------------------------------------------- the options

def alibi_slopes_code(n):
    """The ALiBi paper's get_slopes (github.com/ofirpress/attention_with_linear_biases)."""
    def pow2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]
    if math.log2(n).is_integer():
        return pow2(n)
    closest = 2 ** math.floor(math.log2(n))
    return pow2(closest) + alibi_slopes_code(2 * closest)[0::2][:n - closest]


def offset(o, Lq, Lk):
    """i' - i: 0 top-left, Lk - Lq bottom-right."""
    return Lk - Lq if o.get("align") == "bottom_right" else 0


def slopes_for(o, H):
    a = o.get("alibi")
    if a is None:
        return None
    if a is True:
        return torch.tensor(alibi_slopes_code(H), dtype=F64)
    s = torch.tensor(np.asarray(a, dtype=np.float32), dtype=F64).reshape(-1)
    assert s.numel() == H
    return s


def sinks_for(o, H):
    z = o.get("sinks")
    if z is None:
        return None
    s = torch.tensor(np.asarray(z, dtype=np.float32), dtype=F64).reshape(-1)
    assert s.numel() == H
    return s


def causal_mask(Lq, Lk, off):
    """PyTorch's causal_lower_right (CausalVariant.LOWER_RIGHT) is
    tril(diagonal = Lk - Lq); top-left is diagonal 0."""
    return torch.ones(Lq, Lk, dtype=torch.bool).tril(diagonal=off)


def window_mask(Lq, Lk, off, window):
    """FlashAttention's construct_local_mask with window_size (left, right)
    (None = unbounded side) and the diagonal at i + off."""
    if isinstance(window, int):
        left = right = window
    else:
        left, right = window
    row = torch.arange(Lq)[:, None] + off
    col = torch.arange(Lk)[None, :]
    bad = torch.zeros(Lq, Lk, dtype=torch.bool)
    if right is not None:
        bad |= col > row + right
    if left is not None:
        bad |= col < row - left
    return ~bad


def sparsity_mask(sp, Lq, Lk, off, seed):
    """(dense (Lq,Lk) bool mask, block layout or None)."""
    if sp["pattern"] == "local_global":
        # Longformer: sliding window |i' - j| <= w, plus global tokens that
        # attend everywhere and are attended from everywhere.
        i = torch.arange(Lq)[:, None] + off
        j = torch.arange(Lk)[None, :]
        a = (i - j).abs() <= sp["window"]
        gq = torch.zeros(Lq, dtype=torch.bool)
        gk = torch.zeros(Lk, dtype=torch.bool)
        for g in sp["global"]:
            if g < Lq:
                gq[g] = True
            if g < Lk:
                gk[g] = True
        return a | gq[:, None] | gk[None, :], None
    b = sp["block"]
    nqb, nkb = -(-Lq // b), -(-Lk // b)
    if sp["pattern"] == "bigbird":
        lay = bigbird_layout(nqb, nkb, sp.get("window_blocks", 3), sp.get("global_blocks", 2),
                             sp.get("random_blocks", 3), seed)
    else:
        lay = np.asarray(sp["layout"], dtype=bool)
        assert lay.shape == (nqb, nkb)
    t = torch.from_numpy(lay)
    dense = t.repeat_interleave(b, 0).repeat_interleave(b, 1)[:Lq, :Lk]
    return dense, lay


def expand_mask(m, B, H, Lq, Lk):
    """(Lq,Lk), (B,Lq,Lk) or (B,H,Lq,Lk) -> (B,H,Lq,Lk)."""
    if m.dim() == 2:
        m = m.reshape(1, 1, Lq, Lk)
    elif m.dim() == 3:
        m = m.reshape(m.shape[0], 1, Lq, Lk)
    return m.expand(B, H, Lq, Lk)


def allowed_mask(o, B, H, Lq, Lk, sparse):
    """Everything AND-ed: mask, key_mask, causal, window, sparsity."""
    off = offset(o, Lq, Lk)
    a = torch.ones(B, H, Lq, Lk, dtype=torch.bool)
    if o.get("mask") is not None:
        a = a & expand_mask(o["mask"], B, H, Lq, Lk)
    km = o.get("key_mask")
    if km is not None:
        a = a & km.reshape(-1, 1, 1, Lk)
    if o.get("causal"):
        a = a & causal_mask(Lq, Lk, off)
    if o.get("window") is not None:
        a = a & window_mask(Lq, Lk, off, o["window"])
    if sparse is not None:
        a = a & sparse
    return a


def softcap(s, c):
    """Gemma 2's attn_logit_softcapping / FlashAttention 2.6: c tanh(s / c)."""
    return c * torch.tanh(s / c)


def alibi_bias(slopes, Lq, Lk, off):
    """-m_h |i' - j| (ALiBi, symmetric form as the contract states it)."""
    i = torch.arange(Lq, dtype=F64)[:, None] + off
    j = torch.arange(Lk, dtype=F64)[None, :]
    return -slopes.reshape(-1, 1, 1) * (i - j).abs()


def final_scores(s, o, H, Lq, Lk):
    """Steps 2 and 3: softcap, then bias and ALiBi."""
    if o.get("softcap") is not None:
        s = softcap(s, float(np.float32(o["softcap"])))
    if o.get("bias") is not None:
        s = s + expand_mask(o["bias"].to(F64), s.shape[0], H, Lq, Lk)
    sl = slopes_for(o, H)
    if sl is not None:
        s = s + alibi_bias(sl, Lq, Lk, offset(o, Lq, Lk))
    return s


def sink_softmax(s, allowed, sinks):
    """Step 5. gpt-oss: the sink logit is a last column, softmax, then that
    column dropped. Without sinks a row with nothing allowed is NaN in torch;
    the contract says zeros."""
    sm = s.masked_fill(~allowed, float("-inf"))
    if sinks is None:
        return torch.nan_to_num(torch.softmax(sm, -1), nan=0.0)
    B, H, Lq, _ = s.shape
    z = sinks.reshape(1, H, 1, 1).expand(B, H, Lq, 1)
    w = torch.softmax(torch.cat([sm, z], -1), -1)[..., :-1]
    return torch.where(allowed, w, torch.zeros_like(w))


def hard_select(w, s, allowed, hard, seed):
    """Step 6 on the keys' weights (a sink's share is dropped): argmax and
    top_k by a stable descending sort of w (ties: lowest index), kept keys
    renormalised to 1; sample: one draw per row (the spec in ref_modern.h)."""
    if hard is None:
        return w
    if hard[0] == "sample":
        return sample_rows(s, allowed, hard[1] if hard[1] is not None else 1.0, seed)
    k = 1 if hard[0] == "argmax" else hard[1]
    vals, idx = torch.sort(w, dim=-1, descending=True, stable=True)
    kept = torch.zeros_like(w).scatter(-1, idx[..., :k], vals[..., :k])
    # Not near a tie: the k-th kept and the best dropped allowed scores differ.
    B, H, Lq, Lk = w.shape
    for b in range(B):
        for h in range(H):
            for i in range(Lq):
                ok = allowed[b, h, i]
                n_ok = int(ok.sum())
                if n_ok <= k:
                    continue
                ss = s[b, h, i][ok].sort(descending=True).values
                size = float(ss.abs().max()) or 1.0
                assert float(ss[k - 1] - ss[k]) > NEAR_TIE * size, "near tie in top_k/argmax"
    if hard[0] == "argmax":
        return (kept > 0).to(w.dtype)
    tot = kept.sum(-1, keepdim=True)
    return torch.where(tot > 0, kept / tot, kept)


def sample_rows(s, allowed, T, seed):
    """Hard sampling: row n = (b*H + h)*Lq + i uses the n-th output of
    SplitMix64(seed) (every row draws, allowed keys or not): u = (x >> 11) *
    2^-53; e_j = exp((s_j - m)/T) over allowed keys (m their largest score),
    summed in index order into total; the key is the first allowed j whose
    running sum exceeds u * total."""
    B, H, Lq, Lk = s.shape
    rng = SplitMix64(seed)
    w = torch.zeros_like(s)
    T = float(np.float32(T))
    for b in range(B):
        for h in range(H):
            for i in range(Lq):
                x = rng.next()
                assert x == splitmix_at(seed, (b * H + h) * Lq + i)
                u = u53(x)
                ok = allowed[b, h, i].tolist()
                if not any(ok):
                    continue
                row = s[b, h, i].tolist()
                m = max(row[j] for j in range(Lk) if ok[j])
                e = [math.exp((row[j] - m) / T) if ok[j] else 0.0 for j in range(Lk)]
                total = 0.0
                for v in e:
                    total += v
                target = u * total
                c = 0.0
                for j in range(Lk):
                    prev = c
                    c += e[j]
                    if ok[j] and c > target:
                        break
                assert min(target - prev, c - target) > NEAR_TIE * total, "sample near a boundary"
                w[b, h, i, j] = 1.0
    return w


# ---------------------------------------------------------------------- rope

def rotate_half(x):
    """GPT-NeoX / Hugging Face: (x1, x2) -> (-x2, x1) on the two halves."""
    d = x.shape[-1] // 2
    return torch.cat([-x[..., d:], x[..., :d]], -1)


def rotate_every_two(x):
    """GPT-J: pairs (2k, 2k+1) -> (-x[2k+1], x[2k])."""
    return torch.stack([-x[..., 1::2], x[..., 0::2]], -1).flatten(-2)


def apply_rope(x, pos, rope):
    """RoFormer rotation of the first `dims` features of x (..., L, D) at
    positions pos (L); frequencies base^(-2k/dims) as GPT-NeoX's partial
    rotary (rotary_ndims) does; the rest pass unchanged."""
    D = x.shape[-1]
    d = rope.get("dims", D)
    base = float(rope.get("base", 10000))
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=F64) / d))
    freqs = torch.outer(pos.to(F64), inv_freq)
    if rope.get("style", "half") == "half":
        emb = torch.cat([freqs, freqs], -1)
        rot = rotate_half
    else:
        emb = freqs.repeat_interleave(2, -1)
        rot = rotate_every_two
    xr, xp = x[..., :d], x[..., d:]
    xr = xr * emb.cos() + rot(xr) * emb.sin()
    return torch.cat([xr, xp], -1)


def rope_qk(q, k, o, Lq, Lk):
    """Query row i at position i' + offset, key row j at j + offset."""
    r = o.get("rope")
    if r is None:
        return q, k
    p = r.get("offset", 0)
    off = offset(o, Lq, Lk)
    return (apply_rope(q, torch.arange(Lq) + off + p, r),
            apply_rope(k, torch.arange(Lk) + p, r))


# ------------------------------------------------------------ linear attention

def feature(x, fm):
    """Katharopoulos et al.: elu(x) + 1 (their default), or relu."""
    return F.elu(x) + 1.0 if fm == "elu" else F.relu(x)


def linear_attention(q, k, v, o, allowed_keys, Lq, Lk):
    """q (B,H,Lq,D), k (B,H,Lk,D), v (B,H,Lk,Dv); allowed_keys (B,1,1,Lk).
    fast-transformers' LinearAttention: O = phi(Q) (phi(K)^T V) / (phi(Q).sum
    phi(K) + eps); CausalLinearAttention: the same with prefix sums over
    j <= i'. Returns (O, implied weights)."""
    fm = o.get("feature_map", "elu")
    Q = feature(q, fm)
    K = feature(k, fm) * allowed_keys.reshape(allowed_keys.shape[0], 1, Lk, 1).to(F64)
    if not o.get("causal"):
        KV = torch.einsum("bhjd,bhjm->bhdm", K, v)
        num = torch.einsum("bhid,bhdm->bhim", Q, KV)
        den = torch.einsum("bhid,bhd->bhi", Q, K.sum(2))
    else:
        KVc = torch.einsum("bhjd,bhjm->bhjdm", K, v).cumsum(2)
        Kc = K.cumsum(2)
        # Row i reads the prefix up to i' (none when i' < 0, all past Lk-1).
        KVc = torch.cat([torch.zeros_like(KVc[:, :, :1]), KVc], 2)
        Kc = torch.cat([torch.zeros_like(Kc[:, :, :1]), Kc], 2)
        idx = (torch.arange(Lq) + offset(o, Lq, Lk) + 1).clamp(0, Lk)
        num = torch.einsum("bhid,bhidm->bhim", Q, KVc[:, :, idx])
        den = torch.einsum("bhid,bhid->bhi", Q, Kc[:, :, idx])
    out = num / (den + EPS_LINEAR)[..., None]
    # The implied weights, and the check that both forms agree.
    allowed = allowed_keys.reshape(-1, 1, 1, Lk).expand(q.shape[0], q.shape[1], Lq, Lk)
    if o.get("causal"):
        allowed = allowed & causal_mask(Lq, Lk, offset(o, Lq, Lk))
    A = torch.einsum("bhid,bhjd->bhij", Q, feature(k, fm)) * allowed.to(F64)
    A = A / (A.sum(-1, keepdim=True) + EPS_LINEAR)
    assert torch.allclose(A @ v, out, rtol=1e-10, atol=1e-12), "linear forms disagree"
    return out, A


# --------------------------------------------------- sparse == dense check

def sparse_check(s, allowed, sp, sp_mask, layout, sinks, v, Lq, Lk, off):
    """Recomputes the (pre-hard) output by visiting only the keys the
    pattern names, from the pattern's own definition, and compares it with
    the dense answer under the expanded mask."""
    B, H = s.shape[:2]
    dense_w = sink_softmax(s, allowed, sinks)
    dense = dense_w @ v
    other = allowed | ~sp_mask  # the other masks: the pattern must not be relied on
    out = torch.zeros_like(dense)
    for i in range(Lq):
        if sp["pattern"] == "local_global":
            ip = i + off
            keys = set(range(max(0, ip - sp["window"]), max(0, min(Lk, ip + sp["window"] + 1))))
            keys |= {g for g in sp["global"] if g < Lk}
            if i in sp["global"]:
                keys = set(range(Lk))
        else:
            b = sp["block"]
            keys = set()
            for kb in range(layout.shape[1]):
                if layout[i // b, kb]:
                    keys |= set(range(kb * b, min(Lk, (kb + 1) * b)))
        keys = sorted(keys)
        if not keys:
            continue
        idx = torch.tensor(keys)
        ss = s[:, :, i:i + 1, idx]
        ok = other[:, :, i:i + 1, idx]
        ww = sink_softmax(ss, ok, sinks)
        out[:, :, i] = (ww @ v[:, :, idx])[:, :, 0]
    assert torch.allclose(out, dense, rtol=1e-12, atol=1e-14), "sparse != dense"


# ------------------------------------------------------------- the writer

def write_options(c, o):
    if o.get("align") is not None:
        c.opt("align", o["align"])
    if o.get("causal"):
        c.opt("causal", 1)
    w = o.get("window")
    if w is not None:
        if isinstance(w, int):
            c.opt("window", w)
        else:
            c.opt("window", *["null" if x is None else x for x in w])
    if o.get("scale") is not None:
        c.opt("scale", fmt(o["scale"]))
    if o.get("softcap") is not None:
        c.opt("softcap", fmt(o["softcap"]))
    if o.get("alibi") is True:
        c.opt("alibi", 1)
    r = o.get("rope")
    if r is not None:
        c.opt("rope", 1)
        for k in ("base", "style", "dims", "offset"):
            if k in r:
                c.opt("rope." + k, r[k])
    h = o.get("hard")
    if h is not None:
        if h[0] == "argmax":
            c.opt("hard", "argmax")
        elif h[0] == "top_k":
            c.opt("hard", "top_k", h[1])
        elif h[1] is None:
            c.opt("hard", "sample")
        else:
            c.opt("hard", "sample", fmt(h[1]))
    sp = o.get("sparsity")
    if sp is not None:
        c.opt("sparsity", sp["pattern"])
        for k in ("window", "block", "window_blocks", "global_blocks", "random_blocks"):
            if k in sp:
                c.opt("sparsity." + k, sp[k])
        if "global" in sp:
            c.opt("sparsity.global", *sp["global"])
        if o.get("return_layout"):
            c.opt("return_layout", 1)
    if o.get("feature_map") is not None:
        c.opt("feature_map", o["feature_map"])
    if o.get("need_weights") is False:
        c.opt("need_weights", 0)


def write_inputs(c, o, unbatched_alibi_sinks):
    """Masks, bias and the float options that are tensors: alibi slopes and
    sinks (rank 0 for /attention's single number, rank 1 (H) for /multihead)."""
    for name in ("mask", "key_mask"):
        if o.get(name) is not None:
            c.mask(name, o[name])
    if o.get("bias") is not None:
        c.tensor("bias", o["bias"])
    a = o.get("alibi")
    if a is not None and a is not True:
        c.tensor("alibi", np.float32(a) if unbatched_alibi_sinks else np.asarray(a, np.float32))
    if o.get("sinks") is not None:
        z = o["sinks"]
        c.tensor("sinks", np.float32(z) if unbatched_alibi_sinks else np.asarray(z, np.float32))
    sp = o.get("sparsity")
    if sp is not None and sp["pattern"] == "blocks":
        c.mask("sparsity.layout", np.asarray(sp["layout"], dtype=bool))


def to4(t, B):
    """(B,L,D) -> (B,1,L,D) for one head."""
    return t.reshape(B, 1, t.shape[-2], t.shape[-1])


def finish(c, o, out, w, layout, unbatched, need_weights=True):
    if unbatched:
        out, w = out[0], (w[0] if w is not None else None)
    c.expect("output", out)
    if need_weights and o.get("need_weights", True) is not False:
        c.expect("weights", w)
    if layout is not None and o.get("return_layout"):
        c.expect("layout", layout.astype(np.float64))


def softmax_heads(s, v, o, H, Lq, Lk):
    """Steps 2-7 for scores s (B,H,Lq,Lk) and values v (B,H,Lk,Dv). Returns
    (out (B,H,Lq,Dv), weights, layout)."""
    B = s.shape[0]
    off = offset(o, Lq, Lk)
    seed = o.get("seed", 0)
    sp = o.get("sparsity")
    sp_mask, layout = (None, None)
    if sp is not None:
        sp_mask, layout = sparsity_mask(sp, Lq, Lk, off, seed)
    allowed = allowed_mask(o, B, H, Lq, Lk, sp_mask)
    s = final_scores(s, o, H, Lq, Lk)
    sinks = sinks_for(o, H)
    if sp is not None:
        sparse_check(s, allowed, sp, sp_mask, layout, sinks, v, Lq, Lk, off)
    w = sink_softmax(s, allowed, sinks)
    w = hard_select(w, s, allowed, o.get("hard"), seed)
    return w @ v, w, layout


# ----------------------------------------------------------- /attention cases

def att(outdir, name, rule, note, B, Lq, Lk, D, Dv, o=None, *, Dk=None, dh=None,
        lo=-1.0, hi=1.0, inputs=None):
    """One /attention/{rule} case (rule dot, scaled_dot, general, additive,
    concat_tanh or linear). B None = no batch dimension. o: the options
    (masks as tensors, windows as int or (left, right), etc.)."""
    o = dict(o or {})
    c = Case(name, rule, note)
    Dk = Dk or D
    bs = () if B is None else (B,)
    if inputs is None:
        q, k, v = rnd(*bs, Lq, D, lo=lo, hi=hi), rnd(*bs, Lk, Dk, lo=lo, hi=hi), rnd(*bs, Lk, Dv)
    else:
        q, k, v = inputs
    for key in ("mask", "key_mask", "bias"):
        if callable(o.get(key)):
            o[key] = o[key]()
    if o.get("seed") is not None:
        c.opt("seed", o["seed"])
    write_options(c, o)
    c.inputs(q, k, v)
    write_inputs(c, o, True)

    Bn = 1 if B is None else B
    qb, kb, vb = (t.reshape(Bn, t.shape[-2], t.shape[-1]).to(F64) for t in (q, k, v))
    module = None
    if rule in ("general", "additive", "concat_tanh"):
        module = {"general": lambda: General(D, Dk),
                  "additive": lambda: Additive(D, Dk, dh or D),
                  "concat_tanh": lambda: ConcatTanh(D, Dk, dh or D)}[rule]()
        init_params(module)
        write_params(c, module)
        module = module.double()
    layout = None
    if rule == "linear":
        km = o.get("key_mask")
        keys = torch.ones(Bn, Lk, dtype=torch.bool) if km is None else km.reshape(-1, Lk).expand(Bn, Lk)
        out, w = linear_attention(to4(qb, Bn), to4(kb, Bn), to4(vb, Bn), o, keys, Lq, Lk)
    else:
        if rule in ("dot", "scaled_dot"):
            qr, kr = rope_qk(qb, kb, o, Lq, Lk)
            s = qr @ kr.transpose(-1, -2)
            if rule == "scaled_dot":
                s = s * (float(np.float32(o["scale"])) if o.get("scale") is not None
                         else 1.0 / math.sqrt(Dk))
        else:
            s = module(qb, kb)
        out, w, layout = softmax_heads(s.reshape(Bn, 1, Lq, Lk), to4(vb, Bn), o, 1, Lq, Lk)
    finish(c, o, out[:, 0], w[:, 0], layout, B is None)
    c.save(outdir)


def concat_sample(outdir, name, note, B, Lq, Dq, Dk, Lv, Dv, Dout, T, seed, mask=None):
    """concat (the seq2seq decoder step) with hard sampling over its Lv
    positions: row n = b*Lq + i draws the n-th number."""
    c = Case(name, "concat", note)
    bs = () if B is None else (B,)
    q, k, v = rnd(*bs, Lq, Dq), rnd(*bs, Lq, Dk), rnd(*bs, Lv, Dv)
    c.opt("seed", seed)
    c.opt("hard", "sample", fmt(T))
    c.inputs(q, k, v, mask)
    m = Concat(Dq, Dk, Lv, Dv, Dout)
    init_params(m)
    write_params(c, m)
    m = m.double()
    Bn = 1 if B is None else B
    qb, kb, vb = (t.reshape(Bn, t.shape[-2], t.shape[-1]).to(F64) for t in (q, k, v))
    s = m.att_weight(torch.cat([qb, kb], -1)).reshape(Bn, 1, Lq, Lv)
    allowed = torch.ones(Bn, 1, Lq, Lv, dtype=torch.bool)
    if mask is not None:
        allowed = allowed & expand_mask(mask, Bn, 1, Lq, Lv)
    w = sample_rows(s, allowed, T, seed)[:, 0]
    out = m.out(torch.cat([qb, w @ vb], -1))
    c.finish(outdir, out, w, B is None)


# ------------------------------------------------------------ /multihead cases

def mha(outdir, name, note, B, Lq, Lk, E, H, o=None, *, Hkv=None, self_attn=False,
        use_w=None, posenc=None, P=None, residual_norm=False, average=False,
        attention="softmax", seed=None):
    """One /multihead case: projections (W_* names, or in_proj/out_proj when
    Hkv = H and use_w is False), optional positional encoding (sinusoidal or
    learned pos_embedding.weight (P,E)), rope after the projections, the
    pipeline per head (or linear attention), out projection, optional
    residual + LayerNorm."""
    o = dict(o or {})
    Hkv = Hkv or H
    hd = E // H
    if use_w is None:
        use_w = Hkv != H
    if self_attn:
        Lk = Lq
    c = Case(name, "multihead", note)
    for key in ("mask", "key_mask", "bias"):
        if callable(o.get(key)):
            o[key] = o[key]()
    q, k, v = mha_inputs(c, B, Lq, Lk, E, E, E, H, Hkv, self_attn)
    if attention != "softmax":
        c.opt("attention", attention)
    mha_flags(c, average, posenc, residual_norm)
    if seed is not None:
        c.opt("seed", seed)
        o["seed"] = seed
    elif o.get("seed") is not None:
        c.opt("seed", o["seed"])
    write_options(c, o)
    c.inputs(q, None if self_attn else k, v)
    write_inputs(c, o, False)

    # Parameters.
    kvw = Hkv * hd
    if use_w:
        specs = [("W_q.weight", (E, E), E), ("W_q.bias", (E,), E),
                 ("W_k.weight", (kvw, E), E), ("W_k.bias", (kvw,), E),
                 ("W_v.weight", (kvw, E), E), ("W_v.bias", (kvw,), E),
                 ("W_o.weight", (E, E), E), ("W_o.bias", (E,), E)]
    else:
        specs = [("in_proj_weight", (3 * E, E), E), ("in_proj_bias", (3 * E,), E),
                 ("out_proj.weight", (E, E), E), ("out_proj.bias", (E,), E)]
    if residual_norm:
        specs += [("norm.weight", (E,), "one"), ("norm.bias", (E,), "zero")]
    if seed is not None:
        # The contract's seeded parameters (lib/attn.h), then pos_embedding.weight
        # continuing the same stream (normal_table), then norm.* (no draws).
        rng = SplitMix64(seed)
        named = seeded_set(rng, [s for s in specs if not s[0].startswith("norm.")])
        if posenc == "learned":
            assert P == max(Lq, Lk), "a seeded table has max(Lq, Lk) rows"
            named.append(("pos_embedding.weight", normal_table(rng, (P, E))))
        named += seeded_set(rng, [s for s in specs if s[0].startswith("norm.")])
        for n_, a in named:
            c.expect(n_, a)
    else:
        named = []
        for n_, shape, fan in specs:
            if n_ == "norm.weight":
                a = 1.0 + rnd(*shape, lo=-0.3, hi=0.3)
            elif len(shape) == 2:
                b = 1.0 / math.sqrt(fan)
                a = rnd(*shape, lo=-b, hi=b)
            else:
                a = rnd(*shape, lo=-0.5, hi=0.5)
            named.append((n_, a.numpy()))
        if posenc == "learned":
            named.append(("pos_embedding.weight", torch.randn(P, E).numpy()))
        for n_, a in named:
            c.param(n_, a)
    p = {n_: torch.from_numpy(np.asarray(a, np.float32)).to(F64) for n_, a in named}
    if use_w:
        Wq, bq, Wk, bk = p["W_q.weight"], p["W_q.bias"], p["W_k.weight"], p["W_k.bias"]
        Wv, bv, Wo, bo = p["W_v.weight"], p["W_v.bias"], p["W_o.weight"], p["W_o.bias"]
    else:
        Wq, Wk, Wv = p["in_proj_weight"].chunk(3)
        bq, bk, bv = p["in_proj_bias"].chunk(3)
        Wo, bo = p["out_proj.weight"], p["out_proj.bias"]

    Bn = 1 if B is None else B
    xq, xk, xv = (t.reshape(Bn, t.shape[-2], E).to(F64) for t in (q, k, v))
    if posenc == "sinusoidal":
        xq, xk, xv = xq + sinusoidal(Lq, E), xk + sinusoidal(Lk, E), xv + sinusoidal(Lk, E)
    elif posenc == "learned":
        # nn.Embedding rows 0..Lq-1 for queries, 0..Lk-1 for keys and values.
        pe = p["pos_embedding.weight"]
        xq, xk, xv = xq + pe[:Lq], xk + pe[:Lk], xv + pe[:Lk]
    qp = F.linear(xq, Wq, bq).reshape(Bn, Lq, H, hd).transpose(1, 2)
    kp = F.linear(xk, Wk, bk).reshape(Bn, Lk, Hkv, hd).transpose(1, 2)
    vp = F.linear(xv, Wv, bv).reshape(Bn, Lk, Hkv, hd).transpose(1, 2)
    qp, kp = rope_qk(qp, kp, o, Lq, Lk)
    kp = kp.repeat_interleave(H // Hkv, 1)
    vp = vp.repeat_interleave(H // Hkv, 1)
    layout = None
    if attention == "linear":
        km = o.get("key_mask")
        keys = torch.ones(Bn, Lk, dtype=torch.bool) if km is None else km.reshape(-1, Lk).expand(Bn, Lk)
        oh, w = linear_attention(qp, kp, vp, o, keys, Lq, Lk)
    else:
        s = qp @ kp.transpose(-1, -2) / math.sqrt(hd)
        oh, w, layout = softmax_heads(s, vp, o, H, Lq, Lk)
    out = F.linear(oh.transpose(1, 2).reshape(Bn, Lq, E), Wo, bo)
    if (not use_w and attention == "softmax" and o.get("softcap") is None
            and o.get("rope") is None and o.get("hard") is None and o.get("sinks") is None):
        torch_mha_check(name, xq, xk, xv, p, o, H, Lq, Lk, out, w)
    if residual_norm:
        out = F.layer_norm(xq + out, (E,), p["norm.weight"], p["norm.bias"], eps=1e-5)
    if average:
        w = w.mean(1)
    finish(c, o, out, w, layout, B is None)
    c.save(outdir)


def torch_mha_check(name, xq, xk, xv, p, o, H, Lq, Lk, out, w):
    """The same through torch's own nn.MultiheadAttention, where the options
    are an additive float mask (bias, ALiBi, -inf where not allowed): rows
    with nothing to attend are NaN there; everywhere else the two agree."""
    B, E = xq.shape[0], xq.shape[-1]
    m = torch.nn.MultiheadAttention(E, H, batch_first=True).double()
    m.load_state_dict({"in_proj_weight": p["in_proj_weight"], "in_proj_bias": p["in_proj_bias"],
                       "out_proj.weight": p["out_proj.weight"],
                       "out_proj.bias": p["out_proj.bias"]})
    sp = o.get("sparsity")
    off = offset(o, Lq, Lk)
    sp_mask = None if sp is None else sparsity_mask(sp, Lq, Lk, off, o.get("seed", 0))[0]
    allowed = allowed_mask(o, B, H, Lq, Lk, sp_mask)
    add = final_scores(torch.zeros(B, H, Lq, Lk, dtype=F64), o, H, Lq, Lk)
    fm = add.masked_fill(~allowed, float("-inf")).reshape(B * H, Lq, Lk)
    t_out, t_w = m(xq, xk, xv, attn_mask=fm, need_weights=True, average_attn_weights=False)
    ok = ~torch.isnan(t_out)
    assert torch.allclose(t_out[ok], out[ok], rtol=1e-10, atol=1e-13), name
    okw = ~torch.isnan(t_w)
    assert torch.allclose(t_w[okw], w[okw], rtol=1e-10, atol=1e-13), name


# --------------------------------------------------------------- the cases

def bmask(rows):
    return torch.tensor(rows, dtype=torch.bool)


def all_cases(d):
    # --- each option alone, /attention ---------------------------------------
    att(d, "softcap_scaled", "scaled_dot", "softcap 0.8 alone, batched, scores up to ~4",
        2, 3, 5, 4, 3, {"softcap": 0.8}, lo=-2, hi=2)
    att(d, "softcap_dot_unbatched", "dot", "softcap 2.5 on dot, no batch", None, 4, 4, 3, 2,
        {"softcap": 2.5}, lo=-2, hi=2)
    att(d, "alibi_true_attention", "scaled_dot", "alibi true on /attention: one head, slope 2^-8",
        2, 4, 6, 3, 2, {"alibi": True}, lo=-3, hi=3)
    att(d, "alibi_number", "dot", "alibi slope 0.75 (a number)", None, 5, 5, 3, 2, {"alibi": 0.75})
    att(d, "sinks_alone", "scaled_dot", "a sink logit 0.5 alone", 2, 3, 4, 3, 3, {"sinks": 0.5})
    att(d, "sinks_large", "dot", "a sink logit 4 that takes most of each row", None, 3, 3, 2, 2,
        {"sinks": 4.0})
    att(d, "align_br_causal_wide", "scaled_dot", "bottom_right causal, Lq 3 < Lk 6",
        2, 3, 6, 3, 2, {"align": "bottom_right", "causal": True})
    att(d, "align_tl_causal_wide", "scaled_dot", "top_left (explicit) causal, Lq 3 < Lk 6",
        2, 3, 6, 3, 2, {"align": "top_left", "causal": True})
    att(d, "align_br_causal_tall", "scaled_dot",
        "bottom_right causal, Lq 6 > Lk 3: rows 0-2 have no key (zeros)",
        2, 6, 3, 3, 2, {"align": "bottom_right", "causal": True})
    att(d, "align_tl_causal_tall", "dot", "top_left causal, Lq 5 > Lk 3", None, 5, 3, 3, 2,
        {"causal": True})
    att(d, "decode_step", "scaled_dot", "decode step: Lq 1, Lk 7, bottom_right causal",
        None, 1, 7, 4, 3, {"align": "bottom_right", "causal": True})
    att(d, "align_br_alone", "scaled_dot", "bottom_right with no causal/window/alibi/rope: "
        "no effect", 1, 2, 4, 3, 2, {"align": "bottom_right"})
    att(d, "window_pair", "scaled_dot", "window [1, 2]", 2, 5, 5, 3, 2, {"window": (1, 2)})
    att(d, "window_pair_left_null", "dot", "window [null, 0]: the causal mask",
        None, 4, 4, 3, 2, {"window": (None, 0)})
    att(d, "window_pair_right_null", "scaled_dot", "window [2, null]", 1, 5, 5, 3, 2,
        {"window": (2, None)})
    att(d, "window_pair_both_null", "scaled_dot", "window [null, null]: no restriction",
        1, 3, 4, 3, 2, {"window": (None, None)})
    att(d, "window_pair_zero", "dot", "window [0, 0]: the diagonal", 1, 4, 4, 3, 2,
        {"window": (0, 0)})
    att(d, "window_br_wide", "scaled_dot", "window [2, 0] bottom_right, Lq 3 < Lk 7",
        2, 3, 7, 3, 2, {"window": (2, 0), "align": "bottom_right"})
    att(d, "window_int_br_tall", "scaled_dot", "window 1 bottom_right, Lq 5 > Lk 3",
        None, 5, 3, 3, 2, {"window": 1, "align": "bottom_right"})
    att(d, "window_pair_tl_tall", "dot", "window [0, 1] top_left, Lq 5 > Lk 3", 1, 5, 3, 3, 2,
        {"window": (0, 1)})
    att(d, "rope_half", "dot", "rope half, defaults (base 10000, dims = D, offset 0)",
        2, 3, 5, 6, 2, {"rope": {}})
    att(d, "rope_interleaved", "scaled_dot", "rope interleaved", 2, 3, 5, 6, 2,
        {"rope": {"style": "interleaved"}})
    att(d, "rope_half_partial", "scaled_dot", "rope half, dims 4 of 8, offset 3, base 100",
        None, 4, 4, 8, 2, {"rope": {"style": "half", "dims": 4, "offset": 3, "base": 100}})
    att(d, "rope_interleaved_partial", "dot", "rope interleaved, dims 2 of 6, offset 5",
        1, 4, 5, 6, 2, {"rope": {"style": "interleaved", "dims": 2, "offset": 5}})
    att(d, "rope_br", "scaled_dot", "rope with bottom_right and no causal: queries at "
        "i + Lk - Lq", 1, 2, 6, 4, 2, {"rope": {"base": 50}, "align": "bottom_right"})
    att(d, "rope_br_tall", "scaled_dot", "rope bottom_right Lq 5 > Lk 2: negative query "
        "positions, offset 1", 1, 5, 2, 4, 2,
        {"rope": {"style": "interleaved", "offset": 1}, "align": "bottom_right"})
    att(d, "sample_t1", "scaled_dot", "hard sample, temperature default 1", 2, 4, 6, 3, 3,
        {"hard": ("sample", None), "seed": 0}, lo=-2, hi=2)
    att(d, "sample_t05_masked", "dot", "hard sample T 0.5, seed 17, mask and key_mask",
        2, 4, 5, 3, 2, {"hard": ("sample", 0.5), "seed": 17,
                        "mask": lambda: randmask(4, 5, p=0.7),
                        "key_mask": lambda: bmask([[1, 1, 1, 0, 1], [1, 1, 1, 1, 1]])})
    att(d, "sample_t3_unbatched", "scaled_dot", "hard sample T 3, seed 123456789, no batch",
        None, 5, 4, 3, 2, {"hard": ("sample", 3.0), "seed": 123456789})
    att(d, "sample_empty_rows", "scaled_dot", "hard sample, bottom_right causal Lq > Lk: "
        "empty rows draw too", 1, 5, 3, 3, 2,
        {"hard": ("sample", None), "seed": 5, "causal": True, "align": "bottom_right"})
    att(d, "sample_seed_max", "dot", "hard sample, seed 2^64-1", None, 3, 4, 3, 2,
        {"hard": ("sample", 1.5), "seed": 18446744073709551615})

    # --- combinations, /attention --------------------------------------------
    att(d, "softcap_alibi_sinks", "scaled_dot", "softcap 1.5, alibi true, sinks -0.5",
        2, 4, 5, 3, 2, {"softcap": 1.5, "alibi": True, "sinks": -0.5}, lo=-2, hi=2)
    att(d, "combo_all_br_wide", "scaled_dot",
        "softcap, bias, alibi 0.3, mask, key_mask, causal and window [2, 1] bottom_right, "
        "sinks, rope interleaved dims 4 offset 2, scale 0.4, Lq 4 < Lk 7",
        2, 4, 7, 6, 3, {"softcap": 2.0, "bias": lambda: rnd(2, 4, 7), "alibi": 0.3,
                        "mask": lambda: randmask(2, 4, 7, p=0.85),
                        "key_mask": lambda: bmask([1, 1, 1, 1, 0, 1, 1]),
                        "causal": True, "window": (2, 1), "align": "bottom_right",
                        "sinks": 0.25, "rope": {"style": "interleaved", "dims": 4,
                                                "offset": 2}, "scale": 0.4}, lo=-2, hi=2)
    att(d, "combo_all_tl_tall", "scaled_dot",
        "softcap, alibi, causal top_left, window [null, 1], sinks, rope half, Lq 6 > Lk 4",
        None, 6, 4, 4, 2, {"softcap": 3.0, "alibi": True, "causal": True,
                           "window": (None, 1), "sinks": 1.0, "rope": {}}, lo=-2, hi=2)
    att(d, "combo_topk_sinks", "scaled_dot", "hard top_k 2 with sinks: kept keys "
        "renormalised to 1, softcap 1", 2, 3, 5, 3, 2,
        {"hard": ("top_k", 2), "sinks": 2.0, "softcap": 1.0}, lo=-2, hi=2)
    att(d, "combo_argmax_alibi", "dot", "hard argmax with alibi and sinks, bottom_right causal",
        None, 3, 5, 3, 2, {"hard": ("argmax",), "alibi": 0.5, "sinks": 0.0,
                           "causal": True, "align": "bottom_right"})
    att(d, "combo_sample_all", "scaled_dot", "hard sample T 0.7 after softcap, alibi, sinks, "
        "rope, window [1, 1], bottom_right", 2, 4, 6, 4, 2,
        {"hard": ("sample", 0.7), "seed": 99, "softcap": 1.2, "alibi": True, "sinks": 0.3,
         "rope": {"dims": 2}, "window": (1, 1), "align": "bottom_right"}, lo=-2, hi=2)
    m = torch.ones(2, 3, 4, dtype=torch.bool)
    m[0, 1, :] = False
    m[1, 2, :] = False
    att(d, "fully_masked_sinks", "scaled_dot", "rows masked out, with sinks: zero weights, "
        "zero output", 2, 3, 4, 3, 2, {"mask": m, "sinks": 0.7})
    att(d, "fully_masked_nosinks_softcap", "scaled_dot", "rows masked out, softcap and "
        "alibi, no sinks", 2, 3, 4, 3, 2, {"mask": m, "softcap": 1.0, "alibi": True})
    att(d, "fully_masked_window_sinks", "dot", "window [0, null] bottom_right leaves rows of "
        "Lq > Lk empty... with sinks", None, 5, 3, 3, 2,
        {"window": (0, None), "causal": True, "align": "bottom_right", "sinks": -1.0})
    # The other rules take softcap, alibi, sinks, align and window pairs.
    att(d, "general_modern", "general", "general: softcap, alibi, sinks, bottom_right causal, "
        "window [1, 0]", 2, 3, 5, 3, 2, {"softcap": 1.0, "alibi": 0.4, "sinks": 0.1,
                                         "causal": True, "align": "bottom_right",
                                         "window": (1, 0)}, Dk=4)
    att(d, "additive_modern", "additive", "additive: softcap, alibi true, sinks, window [2, 0]",
        None, 4, 4, 3, 2, {"softcap": 0.5, "alibi": True, "sinks": -0.2, "window": (2, 0)},
        Dk=2, dh=5)
    att(d, "concat_tanh_modern", "concat_tanh", "concat_tanh: softcap, sinks, bottom_right "
        "causal Lq 4 > Lk 3, hard top_k 2", 2, 4, 3, 3, 2,
        {"softcap": 1.5, "sinks": 0.0, "causal": True, "align": "bottom_right",
         "hard": ("top_k", 2)}, Dk=2, dh=4)
    concat_sample(d, "concat_sample", "concat with hard sample T 0.8, seed 3", 2, 3, 3, 2, 4, 2,
                  3, 0.8, 3)
    concat_sample(d, "concat_sample_masked", "concat, hard sample T 1, seed 0, a row masked "
                  "out", None, 3, 2, 2, 4, 3, 2, 1.0, 0,
                  mask=bmask([[1, 1, 0, 1], [0, 0, 0, 0], [1, 0, 1, 1]]))

    # --- sparsity, /attention --------------------------------------------------
    att(d, "lg_basic", "scaled_dot", "local_global window 1, global [0]", 2, 8, 8, 3, 2,
        {"sparsity": {"pattern": "local_global", "window": 1, "global": [0]}})
    att(d, "lg_two_globals_br", "dot", "local_global window 1, global [2, 5], bottom_right, "
        "Lq 4 < Lk 8 (global 5 is a key only)", None, 4, 8, 3, 2,
        {"sparsity": {"pattern": "local_global", "window": 1, "global": [2, 5]},
         "align": "bottom_right"})
    att(d, "lg_causal_sinks", "scaled_dot", "local_global window 2, global [1], causal, sinks",
        1, 9, 9, 3, 2, {"sparsity": {"pattern": "local_global", "window": 2, "global": [1]},
                        "causal": True, "sinks": 0.5})
    att(d, "lg_window0_noglobal", "scaled_dot", "local_global window 0, global []",
        1, 5, 5, 3, 2, {"sparsity": {"pattern": "local_global", "window": 0, "global": []}})
    att(d, "bigbird_defaults", "scaled_dot", "bigbird block 2, defaults (window 3, global 2, "
        "random 3), seed 0, Lq = Lk = 24 (12 blocks)", 1, 24, 24, 3, 2,
        {"sparsity": {"pattern": "bigbird", "block": 2}, "return_layout": True})
    att(d, "bigbird_ragged", "dot", "bigbird block 3, Lq 16, Lk 29 (last blocks short), "
        "global 1, random 2, seed 42", 2, 16, 29, 3, 2,
        {"sparsity": {"pattern": "bigbird", "block": 3, "window_blocks": 3,
                      "global_blocks": 1, "random_blocks": 2}, "seed": 42,
         "return_layout": True})
    att(d, "bigbird_no_random", "scaled_dot", "bigbird block 2, window 1, global 0, random 0",
        None, 8, 8, 3, 2, {"sparsity": {"pattern": "bigbird", "block": 2, "window_blocks": 1,
                                        "global_blocks": 0, "random_blocks": 0},
                           "return_layout": True})
    att(d, "bigbird_random_exhausted", "scaled_dot", "bigbird block 2, Lk 10 (5 blocks), "
        "window 3, global 1, random 4: fewer remain, take all", 1, 10, 10, 3, 2,
        {"sparsity": {"pattern": "bigbird", "block": 2, "window_blocks": 3,
                      "global_blocks": 1, "random_blocks": 4}, "seed": 7,
         "return_layout": True})
    att(d, "bigbird_wide_window", "scaled_dot", "bigbird block 1, window 5, global 1, random 1, "
        "seed 1234, causal, sinks", 1, 12, 12, 3, 2,
        {"sparsity": {"pattern": "bigbird", "block": 1, "window_blocks": 5,
                      "global_blocks": 1, "random_blocks": 1}, "seed": 1234,
         "causal": True, "sinks": 0.0, "return_layout": True})
    att(d, "bigbird_sample", "scaled_dot", "bigbird and hard sample share the seed (separate "
        "streams)", 1, 10, 10, 3, 2,
        {"sparsity": {"pattern": "bigbird", "block": 1, "global_blocks": 1, "random_blocks": 1},
         "seed": 11, "hard": ("sample", None), "return_layout": True})
    att(d, "blocks_layout", "scaled_dot", "blocks: block 2, layout (3, 4), Lq 6, Lk 7",
        2, 6, 7, 3, 2, {"sparsity": {"pattern": "blocks", "block": 2,
                                     "layout": [[1, 0, 0, 1], [0, 1, 0, 0], [1, 1, 1, 1]]},
                        "return_layout": True})
    att(d, "blocks_empty_row", "dot", "blocks: a query block with no key block (zeros), "
        "with sinks", None, 4, 4, 3, 2,
        {"sparsity": {"pattern": "blocks", "block": 2, "layout": [[1, 0], [0, 0]]},
         "sinks": 0.3, "return_layout": True})
    att(d, "blocks_combo", "scaled_dot", "blocks with softcap, alibi, bottom_right causal, "
        "rope, need_weights false", 1, 4, 6, 4, 2,
        {"sparsity": {"pattern": "blocks", "block": 3, "layout": [[1, 1], [0, 1]]}, "softcap": 1.0,
         "alibi": True, "causal": True, "align": "bottom_right", "rope": {},
         "need_weights": False})

    # --- linear attention, /attention/linear -----------------------------------
    att(d, "linear_elu", "linear", "elu+1, not causal, batched", 2, 3, 5, 4, 3, {})
    att(d, "linear_relu_unbatched", "linear", "relu, not causal, no batch", None, 4, 3, 3, 2,
        {"feature_map": "relu"})
    att(d, "linear_elu_causal", "linear", "elu+1 causal (prefix sums)", 2, 5, 5, 3, 2,
        {"causal": True, "feature_map": "elu"})
    att(d, "linear_relu_causal_keymask", "linear", "relu causal with key_mask (B,Lk)",
        2, 4, 4, 3, 2, {"causal": True, "feature_map": "relu",
                        "key_mask": bmask([[1, 0, 1, 1], [0, 1, 1, 0]])})
    att(d, "linear_br_wide", "linear", "causal bottom_right Lq 3 < Lk 6, key_mask (Lk)",
        1, 3, 6, 3, 2, {"causal": True, "align": "bottom_right",
                        "key_mask": bmask([1, 1, 0, 1, 1, 1])})
    att(d, "linear_br_tall", "linear", "relu causal bottom_right Lq 5 > Lk 3: rows 0-1 empty",
        None, 5, 3, 3, 2, {"causal": True, "align": "bottom_right", "feature_map": "relu"})
    att(d, "linear_tl_tall", "linear", "causal top_left Lq 5 > Lk 3", 1, 5, 3, 3, 2,
        {"causal": True})
    att(d, "linear_no_weights", "linear", "need_weights false", 2, 3, 4, 3, 2,
        {"need_weights": False})
    att(d, "linear_relu_dead_row", "linear", "relu where a query row is all negative: zeros",
        None, 2, 3, 2, 2, {"feature_map": "relu"},
        inputs=(torch.tensor([[-1.0, -0.5], [0.5, 0.25]]), rnd(3, 2), rnd(3, 2)))

    # --- /multihead ------------------------------------------------------------
    for H in range(1, 13):
        mha(d, "mha_alibi_h%d" % H, "alibi true with H = %d (paper's slopes%s)" % (
            H, "" if H & (H - 1) == 0 else ", non-power-of-two rule"),
            1, 3, 4, 2 * H, H, {"alibi": True, "causal": True, "align": "bottom_right"})
    mha(d, "mha_alibi_list", "alibi as a list of slopes, unbatched", None, 4, 4, 8, 4,
        {"alibi": [0.5, 0.1, 1.0, 0.0]})
    mha(d, "mha_sinks_list", "sinks per head, batched", 2, 3, 4, 6, 3,
        {"sinks": [0.0, 1.5, -2.0]})
    mha(d, "mha_softcap", "softcap 0.3 per head, in_proj names", 2, 3, 4, 8, 2,
        {"softcap": 0.3})
    mha(d, "mha_rope_gqa", "rope half on 4 heads / 2 kv heads, head dim 4", 2, 3, 5, 16, 4,
        {"rope": {}}, Hkv=2)
    mha(d, "mha_rope_partial_mqa", "rope interleaved dims 4 of head dim 6, offset 7, "
        "multi-query, bottom_right causal", 1, 3, 5, 12, 2,
        {"rope": {"style": "interleaved", "dims": 4, "offset": 7}, "causal": True,
         "align": "bottom_right"}, Hkv=1)
    mha(d, "mha_rope_self", "rope half dims 2, self-attention, causal, base 10", None, 4, 4, 8,
        2, {"rope": {"dims": 2, "base": 10}, "causal": True}, self_attn=True)
    mha(d, "mha_window_pair_br", "window [1, 0] bottom_right, Lq 2 < Lk 5, averaged weights",
        2, 2, 5, 8, 2, {"window": (1, 0), "align": "bottom_right"}, average=True)
    mha(d, "mha_sample", "hard sample per head (rows ordered b, h, i), seed 21", 2, 3, 4, 8, 2,
        {"hard": ("sample", 0.9), "seed": 21})
    mha(d, "mha_sample_gqa_avg", "hard sample, GQA, averaged weights, sinks", 1, 4, 4, 8, 4,
        {"hard": ("sample", None), "seed": 8, "sinks": [0.1, 0.2, 0.3, 0.4]}, Hkv=2,
        average=True)
    mha(d, "mha_topk_sinks", "hard top_k 2 with sinks, per head", 2, 3, 5, 8, 2,
        {"hard": ("top_k", 2), "sinks": [1.0, -1.0]})
    mha(d, "mha_combo", "everything: softcap, alibi, sinks, rope, bias, mask, key_mask, "
        "causal + window bottom_right, GQA, residual_norm", 2, 3, 6, 12, 3,
        {"softcap": 2.0, "alibi": True, "sinks": [0.0, 0.5, -0.5],
         "rope": {"style": "half", "dims": 2, "offset": 1}, "bias": lambda: rnd(3, 6),
         "mask": lambda: randmask(2, 3, 3, 6, p=0.85),
         "key_mask": lambda: bmask([[1, 1, 1, 1, 1, 0], [1, 0, 1, 1, 1, 1]]),
         "causal": True, "window": (3, None), "align": "bottom_right"},
        Hkv=1, residual_norm=True)
    mhm = torch.ones(1, 2, 3, 4, dtype=torch.bool)
    mhm[0, 1, 2, :] = False
    mhm[0, :, 0, :] = False
    mha(d, "mha_fully_masked_sinks", "rows masked in one head and in all, with sinks",
        1, 3, 4, 8, 2, {"mask": mhm, "sinks": [0.5, 0.5]})
    mha(d, "mha_lg", "local_global window 1, global [0, 3], 2 heads", 2, 6, 6, 8, 2,
        {"sparsity": {"pattern": "local_global", "window": 1, "global": [0, 3]}})
    mha(d, "mha_bigbird", "bigbird block 2, global 1, random 1, seed 5, GQA, one layout "
        "for every batch element and head", 2, 16, 16, 8, 4,
        {"sparsity": {"pattern": "bigbird", "block": 2, "global_blocks": 1,
                      "random_blocks": 1}, "seed": 5,
         "return_layout": True}, Hkv=2)
    mha(d, "mha_blocks", "blocks layout (2, 3), causal, rope", 1, 4, 6, 8, 2,
        {"sparsity": {"pattern": "blocks", "block": 2, "layout": [[1, 1, 0], [0, 1, 1]]},
         "causal": True, "rope": {}, "return_layout": True})
    mha(d, "mha_linear_elu", "linear attention elu+1, 2 heads", 2, 3, 4, 8, 2, {},
        attention="linear")
    mha(d, "mha_linear_relu_causal_gqa", "linear relu, causal, GQA 4/2, key_mask, averaged",
        1, 4, 4, 8, 4, {"feature_map": "relu", "causal": True,
                        "key_mask": bmask([1, 1, 0, 1])}, Hkv=2, attention="linear",
        average=True)
    mha(d, "mha_linear_br", "linear causal bottom_right Lq 2 < Lk 5, residual_norm, no batch",
        None, 2, 5, 6, 3, {"causal": True, "align": "bottom_right"}, attention="linear",
        residual_norm=True)
    mha(d, "mha_learned", "learned positional encoding, P = max(Lq, Lk)", 2, 3, 5, 8, 2,
        posenc="learned", P=5)
    mha(d, "mha_learned_long_table", "learned, P 9 > max(Lq, Lk), Lq 4 > Lk 2, rows not "
        "shifted by bottom_right", 1, 4, 2, 6, 3, {"causal": True, "align": "bottom_right"},
        posenc="learned", P=9)
    mha(d, "mha_learned_norm_self", "learned, self-attention, residual_norm (the query in "
        "the sum includes the encoding)", None, 4, 4, 8, 2, posenc="learned", P=4,
        residual_norm=True, self_attn=True)
    mha(d, "mha_learned_gqa_linear", "learned with GQA and linear attention", 1, 3, 3, 8, 4,
        Hkv=2, posenc="learned", P=3, attention="linear")
    mha(d, "mha_learned_seeded", "seed 31: W_* parameters, then pos_embedding.weight "
        "normal(0,1) (Box-Muller) from the same stream", 1, 3, 4, 8, 2, Hkv=1,
        posenc="learned", P=4, seed=31)
    mha(d, "mha_learned_seeded_inproj", "seed 0: in_proj parameters, pos_embedding (P = max(Lq, Lk) = 3), "
        "residual_norm", 2, 3, 3, 4, 2, posenc="learned", P=3, seed=0, residual_norm=True)
    mha(d, "mha_sinusoidal_rope", "sinusoidal encoding and rope together", 1, 3, 3, 8, 2,
        {"rope": {"style": "interleaved"}}, posenc="sinusoidal")


def self_test():
    r = SplitMix64(1234567)
    assert [r.next() for _ in range(3)] == [6457827717110365317, 3203168211198807973,
                                            9817491932198370423]
    r = SplitMix64(99)
    seq = [r.next() for _ in range(5)]
    assert seq == [splitmix_at(99, n) for n in range(5)]
    for H in (1, 2, 4, 8, 16):
        want = [2.0 ** (-8.0 * h / H) for h in range(1, H + 1)]
        assert all(abs(a - b) < 1e-15 for a, b in zip(alibi_slopes_code(H), want)), H
    got = alibi_slopes_code(6)
    assert got == [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125], got


def main():
    def cases(outdir):
        hdir = os.path.join(outdir, "http_cases")
        if os.path.isdir(hdir):
            for f in os.listdir(hdir):
                if f.startswith("modern_ok_"):  # the modern_err* cases are written by hand
                    os.remove(os.path.join(hdir, f))
        all_cases(outdir)
    write_all(sys.argv[1] if len(sys.argv) > 1 else "tests/golden_modern", self_test, cases)


if __name__ == "__main__":
    main()
