#!/usr/bin/python3
"""gen_golden.py - writes the library's golden vectors (tests/golden/*.txt) from PyTorch.

Usage: /usr/bin/python3 tests/gen_golden.py tests/golden

Each case is one text file in the format documented at the top of
tests/golden.h: options, input tensors, masks, parameters (PyTorch
state_dict names) and the expected output and weights.

Where the math exists as a torch module or op, it comes from there:
nn.MultiheadAttention, nn.Linear, nn.LayerNorm, torch.softmax, torch.sort.
The rules without a torch module (general, additive, concat_tanh, concat,
grouped-query heads) are small nn.Modules whose state_dict names are the
contract's. Inputs and parameters are float32; the expected values are
computed in float64 from those float32 values, so the only error the C test
sees is the library's own.

Choices the generator makes that PyTorch does not:
  * A query row with no key left to attend gives NaN in torch; the contract
    says all-zero weights and an all-zero attention row, so those rows are
    written as zeros. Layers after the attention still apply: for `concat`
    the row becomes out([q_i; 0]) and for multi-head the head's zero row goes
    through out_proj like any other (so a row masked in every head gives
    out_proj.bias).
  * Hard attention (not in torch) is softmax, then a stable descending sort
    (ties: lowest index): argmax keeps the first, top_k keeps k and
    renormalises.
  * Seeded parameters are drawn here with a re-implementation of the PRNG
    documented at the bottom of lib/attn.h (SplitMix64, float32 arithmetic
    through numpy.float32), then loaded into the torch module.
"""
import math
import os
import sys
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

F64 = torch.float64
M64 = (1 << 64) - 1


# ------------------------------------------------------------- the PRNG

class SplitMix64:
    """SplitMix64 (Steele, Lea, Flood 2014), as lib/attn.h documents it."""

    def __init__(self, seed):
        self.state = seed & M64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def uniform(self, shape, fan_in):
        """(2u - 1) * bound in float32, bound = 1/sqrtf(fan_in), row-major."""
        n = int(np.prod(shape)) if len(shape) else 1
        bound = np.float32(1.0) / np.sqrt(np.float32(fan_in))
        # (next >> 40) has 24 bits, so the scaling by 2^-24 is exact in float32.
        u = np.array([self.next() >> 40 for _ in range(n)], dtype=np.float64)
        u = (u * 2.0 ** -24).astype(np.float32)
        v = (np.float32(2.0) * u - np.float32(1.0)) * bound
        assert v.dtype == np.float32
        return v.reshape(shape)


def seeded_set(rng, specs):
    """specs: list of (name, shape, fan_in or 'one'/'zero'); draws in order."""
    out = []
    for name, shape, fan in specs:
        if fan == "one":
            out.append((name, np.ones(shape, np.float32)))
        elif fan == "zero":
            out.append((name, np.zeros(shape, np.float32)))
        else:
            out.append((name, rng.uniform(shape, fan)))
    return out


# ------------------------------------------------------------ the writer

def fmt(x):
    return "%.9g" % x


class Case:
    def __init__(self, name, rule, note):
        self.name = name
        self.lines = ["# " + note, "case " + name, "rule " + rule]
        # Per-case seed: independent of the order in which cases are made.
        torch.manual_seed(zlib.crc32(name.encode()))

    def opt(self, key, *vals):
        self.lines.append(" ".join([key] + [str(v) for v in vals]))

    def _block(self, kind, name, arr, ints=False):
        arr = np.asarray(arr)
        dims = " ".join(str(d) for d in arr.shape)
        self.lines.append("%s %s %d %s" % (kind, name, arr.ndim, dims))
        flat = arr.reshape(-1)
        per = 16 if ints else 8
        for i in range(0, flat.size, per):
            chunk = flat[i:i + per]
            if ints:
                self.lines.append(" ".join("1" if v else "0" for v in chunk))
            else:
                self.lines.append(" ".join(fmt(float(v)) for v in chunk))

    def tensor(self, name, t):
        self._block("tensor", name, np.asarray(t, dtype=np.float32))

    def mask(self, name, m):
        self._block("mask", name, np.asarray(m, dtype=bool), ints=True)

    def param(self, name, t):
        self._block("param", name, np.asarray(t, dtype=np.float32))

    def param_prng(self, name, shape, seed, fan_in):
        self.lines.append("param %s %d %s splitmix64 %d %d" % (
            name, len(shape), " ".join(str(d) for d in shape), seed, fan_in))

    def expect(self, name, t):
        if isinstance(t, torch.Tensor):
            t = t.detach().cpu().numpy()
        t = np.asarray(t, dtype=np.float64)
        assert np.all(np.isfinite(t)), self.name + ": non-finite expectation"
        self._block("expect", name, t)

    def hard(self, hard):
        """The hard option: None, ("argmax", _) or ("top_k", k)."""
        if hard is not None:
            self.opt("hard", hard[0]) if hard[0] == "argmax" else self.opt("hard", "top_k", hard[1])

    def inputs(self, q, k, v, mask=None):
        """query, key and value (key and value None for self-attention), then
        the mask if any."""
        self.tensor("query", q)
        if k is not None:
            self.tensor("key", k)
            self.tensor("value", v)
        if mask is not None:
            self.mask("mask", mask)

    def finish(self, outdir, out, w, unbatched, need_weights=True):
        """The expected output and weights (batch dimension dropped when the
        request has none), then the file."""
        if unbatched:
            out, w = out[0], w[0]
        self.expect("output", out)
        if need_weights:
            self.expect("weights", w)
        self.save(outdir)

    def save(self, outdir):
        self.lines.append("end")
        with open(os.path.join(outdir, self.name + ".txt"), "w") as f:
            f.write("\n".join(self.lines) + "\n")


# ------------------------------------------------------------- helpers

def rnd(*shape, lo=-1.0, hi=1.0):
    """float32 uniform values in [lo, hi)."""
    return torch.rand(*shape) * (hi - lo) + lo


def randmask(*shape, p=0.7):
    return torch.rand(*shape) < p


def init_params(module):
    """Non-trivial float32 values for every parameter (torch's MHA init
    leaves biases at zero, which would test nothing)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.startswith("norm.weight"):
                p.copy_(1.0 + rnd(*p.shape, lo=-0.3, hi=0.3))
            elif p.dim() >= 2:
                b = 1.0 / math.sqrt(p.shape[-1])
                p.copy_(rnd(*p.shape, lo=-b, hi=b))
            else:
                p.copy_(rnd(*p.shape, lo=-0.5, hi=0.5))


def write_params(case, module):
    for name, t in module.state_dict().items():
        case.param(name, t.float())


def load_params(module, named):
    sd = {n: torch.from_numpy(a.copy()) for n, a in named}
    module.load_state_dict(sd, strict=True)


def allowed_mask(B, Lq, Lk, mask=None, key_mask=None, causal=False,
                 window=None, H=None):
    """Contract masks (true = may attend) combined by AND, as
    (B, Lq, Lk) or, with H, (B, H, Lq, Lk)."""
    shape = (B, Lq, Lk) if H is None else (B, H, Lq, Lk)
    a = torch.ones(shape, dtype=torch.bool)
    if mask is not None:
        m = mask
        if H is not None and H > 1 and m.dim() == 3 and m.shape[0] == B * H:
            m = m.reshape(B, H, Lq, Lk)  # nn.MultiheadAttention's (N num_heads, L, S)
        elif H is not None and m.dim() < 4:
            m = m.reshape((-1, 1) + tuple(m.shape[-2:]))
        a = a & m
    if key_mask is not None:
        km = key_mask.reshape(-1, Lk) if key_mask.dim() == 2 else key_mask.reshape(1, Lk)
        km = km[:, None, :] if H is None else km[:, None, None, :]
        a = a & km
    i = torch.arange(Lq)[:, None]
    j = torch.arange(Lk)[None, :]
    if causal:
        a = a & (j <= i)
    if window is not None:
        a = a & ((i - j).abs() <= window)
    return a


def bias_full(bias, shape):
    if bias is None:
        return torch.zeros(shape, dtype=F64)
    b = bias.to(F64)
    if len(shape) == 4 and shape[1] > 1 and b.dim() == 3 and b.shape[0] == shape[0] * shape[1]:
        b = b.reshape(shape)  # nn.MultiheadAttention's (N num_heads, L, S)
    elif len(shape) == 4 and b.dim() < 4:
        b = b.reshape((-1, 1) + tuple(b.shape[-2:]))
    return b.expand(shape)


def masked_softmax(scores, allowed):
    s = scores.masked_fill(~allowed, float("-inf"))
    w = torch.softmax(s, dim=-1)
    # torch: NaN for a row with nothing to attend; the contract: zeros.
    return torch.nan_to_num(w, nan=0.0)


def apply_hard(w, hard):
    if hard is None:
        return w
    kind, k = hard
    if kind == "argmax":
        k = 1
    vals, idx = torch.sort(w, dim=-1, descending=True, stable=True)
    kept = torch.zeros_like(w).scatter(-1, idx[..., :k], vals[..., :k])
    if kind == "argmax":
        return (kept > 0).to(w.dtype)
    tot = kept.sum(-1, keepdim=True)
    return torch.where(tot > 0, kept / tot, kept)


# ------------------------------------------------------ rule modules
# state_dict names exactly as the contract's table.

class General(nn.Module):
    def __init__(self, dq, dk, bias=True):
        super().__init__()
        self.attn = nn.Linear(dk, dq, bias=bias)

    def forward(self, q, k):
        return q @ self.attn(k).transpose(-1, -2)


class Additive(nn.Module):
    def __init__(self, dq, dk, dh):
        super().__init__()
        self.query_proj = nn.Linear(dq, dh, bias=False)
        self.key_proj = nn.Linear(dk, dh)
        self.v = nn.Linear(dh, 1, bias=False)

    def forward(self, q, k):
        h = self.query_proj(q).unsqueeze(-2) + self.key_proj(k).unsqueeze(-3)
        return self.v(torch.tanh(h)).squeeze(-1)


class ConcatTanh(nn.Module):
    def __init__(self, dq, dk, dh):
        super().__init__()
        self.attn = nn.Linear(dq + dk, dh)

    def forward(self, q, k):
        B, Lq, Dq = q.shape
        Lk = k.shape[1]
        pair = torch.cat([q.unsqueeze(2).expand(B, Lq, Lk, Dq),
                          k.unsqueeze(1).expand(B, Lq, Lk, k.shape[2])], dim=-1)
        return torch.tanh(self.attn(pair)).sum(-1)


class Concat(nn.Module):
    """The seq2seq decoder-step attention: a = softmax(att_weight([q; k])),
    c = a V, o = out([q; c])."""

    def __init__(self, dq, dk, lv, dv, dout):
        super().__init__()
        self.att_weight = nn.Linear(dq + dk, lv)
        self.out = nn.Linear(dq + dv, dout)

    def forward(self, q, k, v, allowed, hard):
        logits = self.att_weight(torch.cat([q, k], dim=-1))
        w = apply_hard(masked_softmax(logits, allowed), hard)
        c = w @ v
        return self.out(torch.cat([q, c], dim=-1)), w


class GQA(nn.Module):
    """Multi-head attention with nn.Linear projections and Hkv <= H key/value
    heads; query head h reads key/value head h // (H / Hkv)."""

    def __init__(self, E, H, Hkv, kdim, vdim, bias=True):
        super().__init__()
        self.H, self.Hkv, self.hd = H, Hkv, E // H
        self.W_q = nn.Linear(E, E, bias=bias)
        self.W_k = nn.Linear(kdim, Hkv * self.hd, bias=bias)
        self.W_v = nn.Linear(vdim, Hkv * self.hd, bias=bias)
        self.W_o = nn.Linear(E, E, bias=bias)

    def forward(self, q, k, v, allowed, bias):
        B, Lq, E = q.shape
        Lk = k.shape[1]
        H, Hkv, hd = self.H, self.Hkv, self.hd
        qp = self.W_q(q).view(B, Lq, H, hd).transpose(1, 2)
        kp = self.W_k(k).view(B, Lk, Hkv, hd).transpose(1, 2).repeat_interleave(H // Hkv, 1)
        vp = self.W_v(v).view(B, Lk, Hkv, hd).transpose(1, 2).repeat_interleave(H // Hkv, 1)
        s = qp @ kp.transpose(-1, -2) / math.sqrt(hd) + bias
        w = masked_softmax(s, allowed)
        o = (w @ vp).transpose(1, 2).reshape(B, Lq, E)
        return self.W_o(o), w


def sinusoidal(L, d):
    """PE[p,2i] = sin(p / 10000^(2i/d)), PE[p,2i+1] = cos(same)."""
    pe = torch.zeros(L, d, dtype=F64)
    pos = torch.arange(L, dtype=F64)[:, None]
    i2 = torch.arange(0, d, 2, dtype=F64)
    ang = pos / torch.pow(torch.tensor(10000.0, dtype=F64), i2 / d)
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang)[:, : d // 2]
    return pe


# --------------------------------------------------- /attention cases

def batched(t):
    return t if t is None or t.dim() == 3 else t.unsqueeze(0)


def run_rule(outdir, name, rule, note, B, Lq, Lk, Dq, Dk, Dv, *,
             dh=None, dout=None, mask=None, key_mask=None, causal=False,
             window=None, bias=None, hard=None, scale=None, gen_bias=True,
             need_weights=True, seed=None, inputs=None, mask_shape=None,
             key_mask_shape=None, bias_shape=None):
    """One /attention case. B=None means no batch dimension. mask_shape etc.
    make random masks of that shape when mask=... is 'random'."""
    c = Case(name, rule, note)
    bshape = () if B is None else (B,)
    Lv = Lk
    if inputs is not None:
        q, k, v = inputs
    else:
        q = rnd(*bshape, Lq, Dq)
        k = rnd(*bshape, Lk, Dk)
        v = rnd(*bshape, Lv, Dv)
    if mask == "random":
        mask = randmask(*mask_shape)
    if key_mask == "random":
        key_mask = randmask(*key_mask_shape, p=0.8)
    if bias == "random":
        bias = rnd(*bias_shape, lo=-2.0, hi=2.0)
    if causal:
        c.opt("causal", 1)
    if window is not None:
        c.opt("window", window)
    c.hard(hard)
    if scale is not None:
        c.opt("scale", fmt(scale))
    if not need_weights:
        c.opt("need_weights", 0)
    if dh is not None and seed is not None:
        c.opt("hidden_size", dh)
    if dout is not None and seed is not None:
        c.opt("output_size", dout)
    if seed is not None:
        c.opt("seed", seed)
    c.inputs(q, k, v, mask)
    if key_mask is not None:
        c.mask("key_mask", key_mask)
    if bias is not None:
        c.tensor("bias", bias)

    qb, kb, vb = batched(q).to(F64), batched(k).to(F64), batched(v).to(F64)
    Bn = qb.shape[0]
    allowed = allowed_mask(Bn, Lq, Lk, mask, key_mask, causal, window)

    module = None
    if rule == "general":
        module = General(Dq, Dk, bias=gen_bias)
    elif rule == "additive":
        module = Additive(Dq, Dk, dh if dh else Dq)
    elif rule == "concat_tanh":
        module = ConcatTanh(Dq, Dk, dh if dh else Dq)
    elif rule == "concat":
        module = Concat(Dq, Dk, Lv, Dv, dout if dout else Dq)

    if module is not None:
        set_params(c, module, None if seed is None else seeded_rule_params(
            rule, seed, Dq, Dk, Lv, Dv, dh if dh else Dq, dout if dout else Dq))
        module = module.double()

    with torch.no_grad():
        if rule == "concat":
            out, w = module(qb, kb, vb, allowed, hard)
        else:
            if rule == "dot":
                s = qb @ kb.transpose(-1, -2)
            elif rule == "scaled_dot":
                sc = scale if scale is not None else 1.0 / math.sqrt(Dk)
                s = (qb @ kb.transpose(-1, -2)) * sc
            else:
                s = module(qb, kb)
            s = s + bias_full(bias, s.shape)
            w = apply_hard(masked_softmax(s, allowed), hard)
            out = w @ vb
    c.finish(outdir, out, w, B is None, need_weights)


def run_heads(outdir, name, rule, note, B, H, Hkv, Lq, Lk, D, Dv, *, mask_shape=None,
              bias_shape=None, key_mask=False, causal=False, scale=None):
    """One /attention case with heads, as torch's scaled_dot_product_attention
    takes them: query (B, H, Lq, D), key and value (B, Hkv, Lk, .); query
    head h reads key/value head h // (H // Hkv) (repeat_interleave, as
    enable_gqa does). The mask and bias broadcast against the scores (B, H,
    Lq, Lk) by torch's own rule: a 3-D one is per head."""
    c = Case(name, rule, note)
    q, k, v = rnd(B, H, Lq, D), rnd(B, Hkv, Lk, D), rnd(B, Hkv, Lk, Dv)
    mask = None if mask_shape is None else randmask(*mask_shape)
    bias = None if bias_shape is None else rnd(*bias_shape, lo=-2.0, hi=2.0)
    km = randmask(B, Lk, p=0.8) if key_mask else None
    if causal:
        c.opt("causal", 1)
    if scale is not None:
        c.opt("scale", fmt(scale))
    c.inputs(q, k, v, mask)
    if km is not None:
        c.mask("key_mask", km)
    if bias is not None:
        c.tensor("bias", bias)
    g = H // Hkv
    kr = k.to(F64).repeat_interleave(g, dim=1)
    vr = v.to(F64).repeat_interleave(g, dim=1)
    s = q.to(F64) @ kr.transpose(-1, -2)
    if rule == "scaled_dot":
        s = s * (scale if scale is not None else 1.0 / math.sqrt(D))
    if bias is not None:
        s = s + bias.to(F64)
    allowed = allowed_mask(B, Lq, Lk, None, km, causal, H=H)
    if mask is not None:
        allowed = allowed & mask
    w = masked_softmax(s, allowed)
    c.finish(outdir, w @ vr, w, False)


def set_params(c, module, named):
    """Random parameters, written as params (named None); or the seeded set
    named, loaded and written as expectations."""
    if named is None:
        init_params(module)
        write_params(c, module)
    else:
        load_params(module, named)
        for n, a in named:
            c.expect(n, a)


def seeded_rule_params(rule, seed, Dq, Dk, Lv, Dv, Dh, Dout):
    rng = SplitMix64(seed)
    if rule == "general":
        specs = [("attn.weight", (Dq, Dk), Dk), ("attn.bias", (Dq,), Dk)]
    elif rule == "additive":
        specs = [("query_proj.weight", (Dh, Dq), Dq), ("key_proj.weight", (Dh, Dk), Dk),
                 ("key_proj.bias", (Dh,), Dk), ("v.weight", (1, Dh), Dh)]
    elif rule == "concat_tanh":
        specs = [("attn.weight", (Dh, Dq + Dk), Dq + Dk), ("attn.bias", (Dh,), Dq + Dk)]
    elif rule == "concat":
        specs = [("att_weight.weight", (Lv, Dq + Dk), Dq + Dk),
                 ("att_weight.bias", (Lv,), Dq + Dk),
                 ("out.weight", (Dout, Dq + Dv), Dq + Dv), ("out.bias", (Dout,), Dq + Dv)]
    else:
        raise ValueError(rule)
    return seeded_set(rng, specs)


def run_concat(outdir, name, note, B, Lq, Dq, Dk, Lv, Dv, Dout, *, mask=None,
               hard=None, seed=None, output_size_opt=False):
    c = Case(name, "concat", note)
    bshape = () if B is None else (B,)
    q = rnd(*bshape, Lq, Dq)
    k = rnd(*bshape, Lq, Dk)
    v = rnd(*bshape, Lv, Dv)
    c.hard(hard)
    if output_size_opt or seed is not None:
        c.opt("output_size", Dout)
    if seed is not None:
        c.opt("seed", seed)
    c.inputs(q, k, v, mask)
    module = Concat(Dq, Dk, Lv, Dv, Dout)
    set_params(c, module, None if seed is None else seeded_rule_params(
        "concat", seed, Dq, Dk, Lv, Dv, None, Dout))
    module = module.double()
    qb, kb, vb = batched(q).to(F64), batched(k).to(F64), batched(v).to(F64)
    allowed = allowed_mask(qb.shape[0], Lq, Lv, mask)
    with torch.no_grad():
        out, w = module(qb, kb, vb, allowed, hard)
    c.finish(outdir, out, w, B is None)


# ---------------------------------------------------- /multihead cases

def mha_inputs(c, B, Lq, Lk, E, kdim, vdim, H, Hkv, self_attn):
    """A multi-head case's query (B, Lq, E), key (B, Lk, kdim) and value
    (B, Lk, vdim), no B when None, the query all three for self-attention;
    writes the head counts."""
    bshape = () if B is None else (B,)
    q = rnd(*bshape, Lq, E)
    k = q if self_attn else rnd(*bshape, Lk, kdim)
    v = q if self_attn else rnd(*bshape, Lk, vdim)
    c.opt("num_heads", H)
    if Hkv != H:
        c.opt("num_kv_heads", Hkv)
    return q, k, v


def mha_flags(c, average, posenc, residual_norm):
    """The multi-head options average_weights, positional_encoding (a name, or
    None) and residual_norm, each when set."""
    if average:
        c.opt("average_weights", 1)
    if posenc is not None:
        c.opt("positional_encoding", posenc)
    if residual_norm:
        c.opt("residual_norm", 1)


def run_mha(outdir, name, note, B, Lq, Lk, E, H, *, Hkv=None, kdim=None,
            vdim=None, self_attn=False, mask=None, key_mask=None, causal=False,
            window=None, bias=None, average=False, posenc=False,
            residual_norm=False, seed=None, use_w=False, has_bias=True,
            prng_params=None, need_weights=True):
    c = Case(name, "multihead", note)
    kdim = kdim or E
    vdim = vdim or E
    Hkv = Hkv or H
    if self_attn:
        Lk = Lq
    q, k, v = mha_inputs(c, B, Lq, Lk, E, kdim, vdim, H, Hkv, self_attn)
    if causal:
        c.opt("causal", 1)
    if window is not None:
        c.opt("window", window)
    mha_flags(c, average, "sinusoidal" if posenc else None, residual_norm)
    if not need_weights:
        c.opt("need_weights", 0)
    if seed is not None:
        c.opt("seed", seed)
    c.inputs(q, None if self_attn else k, v, mask)
    if key_mask is not None:
        c.mask("key_mask", key_mask)
    if bias is not None:
        c.tensor("bias", bias)

    use_w = use_w or Hkv != H
    # The attention module, and the parameters as the state_dict names them.
    if use_w:
        module = GQA(E, H, Hkv, kdim, vdim, bias=has_bias)
    else:
        module = nn.MultiheadAttention(E, H, batch_first=True, kdim=kdim,
                                       vdim=vdim, bias=has_bias)
    norm = nn.LayerNorm(E, eps=1e-5) if residual_norm else None

    if prng_params is not None:
        # Big modules: each parameter from its own SplitMix64 stream, so the
        # file holds a seed instead of the numbers.
        named = []
        for pname, shape, pseed, fan in prng_params:
            named.append((pname, SplitMix64(pseed).uniform(shape, fan)))
            c.param_prng(pname, shape, pseed, fan)
        load_params(module, named)
    elif seed is not None:
        named = seeded_mha_params(seed, E, H, Hkv, kdim, vdim, use_w, residual_norm)
        load_params(module, [x for x in named if not x[0].startswith("norm.")])
        if norm is not None:
            norm.load_state_dict({n[5:]: torch.from_numpy(a) for n, a in named
                                  if n.startswith("norm.")})
        for n, a in named:
            c.expect(n, a)
    else:
        init_params(module)
        write_params(c, module)
        if norm is not None:
            with torch.no_grad():
                norm.weight.copy_(1.0 + rnd(E, lo=-0.3, hi=0.3))
                norm.bias.copy_(rnd(E, lo=-0.5, hi=0.5))
            c.param("norm.weight", norm.weight)
            c.param("norm.bias", norm.bias)
    module = module.double()
    if norm is not None:
        norm = norm.double()

    qb, kb, vb = batched(q).to(F64), batched(k).to(F64), batched(v).to(F64)
    Bn = qb.shape[0]
    if posenc:
        qb = qb + sinusoidal(Lq, E)
        kb = kb + sinusoidal(Lk, kdim)
        vb = vb + sinusoidal(Lk, vdim)
    allowed = allowed_mask(Bn, Lq, Lk, mask, key_mask, causal, window, H=H)
    bfull = bias_full(bias, (Bn, H, Lq, Lk))
    with torch.no_grad():
        if use_w:
            out, w = module(qb, kb, vb, allowed, bfull)
        else:
            out, w = mha_by_hand(module, qb, kb, vb, H, allowed, bfull)
            # The same through torch's own module: a float mask carrying the
            # bias and -inf where not allowed. Rows with nothing to attend are
            # NaN there; everywhere else the two must agree.
            fm = bfull.masked_fill(~allowed, float("-inf")).reshape(Bn * H, Lq, Lk)
            t_out, t_w = module(qb, kb, vb, attn_mask=fm, need_weights=True,
                                average_attn_weights=False)
            ok = ~torch.isnan(t_out)
            assert torch.allclose(t_out[ok], out[ok], rtol=1e-9, atol=1e-12), name
            okw = ~torch.isnan(t_w)
            assert torch.allclose(t_w[okw], w[okw], rtol=1e-9, atol=1e-12), name
        if norm is not None:
            out = norm(qb + out)
    if average:
        w = w.mean(dim=1)
    c.finish(outdir, out, w, B is None, need_weights)


def mha_by_hand(m, q, k, v, H, allowed, bias):
    """nn.MultiheadAttention's forward written out with its own parameters,
    so that rows with nothing to attend can be zero instead of NaN."""
    B, Lq, E = q.shape
    Lk = k.shape[1]
    hd = E // H
    if m._qkv_same_embed_dim:
        wq, wk, wv = m.in_proj_weight.chunk(3)
    else:
        wq, wk, wv = m.q_proj_weight, m.k_proj_weight, m.v_proj_weight
    bq = bk = bv = None
    if m.in_proj_bias is not None:
        bq, bk, bv = m.in_proj_bias.chunk(3)
    qp = F.linear(q, wq, bq).view(B, Lq, H, hd).transpose(1, 2)
    kp = F.linear(k, wk, bk).view(B, Lk, H, hd).transpose(1, 2)
    vp = F.linear(v, wv, bv).view(B, Lk, H, hd).transpose(1, 2)
    s = qp @ kp.transpose(-1, -2) / math.sqrt(hd) + bias
    w = masked_softmax(s, allowed)
    o = (w @ vp).transpose(1, 2).reshape(B, Lq, E)
    return m.out_proj(o), w


def seeded_mha_params(seed, E, H, Hkv, kdim, vdim, use_w, residual_norm):
    rng = SplitMix64(seed)
    hd = E // H
    if use_w:
        specs = [("W_q.weight", (E, E), E), ("W_q.bias", (E,), E),
                 ("W_k.weight", (Hkv * hd, kdim), kdim), ("W_k.bias", (Hkv * hd,), kdim),
                 ("W_v.weight", (Hkv * hd, vdim), vdim), ("W_v.bias", (Hkv * hd,), vdim),
                 ("W_o.weight", (E, E), E), ("W_o.bias", (E,), E)]
    elif kdim == E and vdim == E:
        specs = [("in_proj_weight", (3 * E, E), E), ("in_proj_bias", (3 * E,), E),
                 ("out_proj.weight", (E, E), E), ("out_proj.bias", (E,), E)]
    else:
        specs = [("q_proj_weight", (E, E), E), ("k_proj_weight", (E, kdim), kdim),
                 ("v_proj_weight", (E, vdim), vdim), ("in_proj_bias", (3 * E,), E),
                 ("out_proj.weight", (E, E), E), ("out_proj.bias", (E,), E)]
    if residual_norm:
        specs += [("norm.weight", (E,), "one"), ("norm.bias", (E,), "zero")]
    return seeded_set(rng, specs)


# ------------------------------------------------------------ the cases

def all_cases(o):
    # Every rule, with and without a batch dimension.
    for rule in ["dot", "scaled_dot", "general", "additive", "concat_tanh"]:
        dk = 4 if rule in ("dot", "scaled_dot") else 5
        dh = 6 if rule in ("additive", "concat_tanh") else None
        run_rule(o, rule + "_unbatched", rule, "rule %s, (Lq,D) inputs" % rule,
                 None, 3, 5, 4, dk, 3, dh=dh)
        run_rule(o, rule + "_batched", rule, "rule %s, (B,Lq,D) inputs" % rule,
                 2, 3, 5, 4, dk, 3, dh=dh)
    run_rule(o, "general_nobias", "general", "general without attn.bias",
             2, 4, 3, 3, 6, 2, gen_bias=False)
    run_rule(o, "additive_hidden", "additive", "additive with Dh != Dq",
             1, 2, 7, 3, 2, 4, dh=9)
    run_rule(o, "scaled_dot_scale", "scaled_dot", "scaled_dot with a custom scale",
             2, 3, 4, 5, 5, 2, scale=0.3)
    run_rule(o, "dot_single", "dot", "Lq = Lk = D = 1", None, 1, 1, 1, 1, 1)
    run_heads(o, "scaled_dot_heads_gqa", "scaled_dot", "(B, H, L, D) inputs, 6 query heads "
              "over 2 key/value heads, a (1, H, Lq, Lk) mask for every batch row, causal",
              2, 6, 2, 5, 7, 8, 3, mask_shape=(1, 6, 5, 7), causal=True)
    run_heads(o, "dot_heads", "dot", "(B, H, L, D) inputs, 3 heads each, key_mask (B, Lk), "
              "a (B, 1, Lq, Lk) mask for every head", 2, 3, 3, 4, 6, 5, 2, key_mask=True,
              mask_shape=(2, 1, 4, 6))
    run_heads(o, "scaled_dot_heads_mqa", "scaled_dot", "(B, H, L, D) inputs, 4 query heads "
              "over one key/value head, a (Lq, Lk) mask, a custom scale", 1, 4, 1, 3, 5, 4, 6,
              mask_shape=(3, 5), scale=0.4)
    run_heads(o, "dot_heads_mask3", "dot", "(B, H, L, D) inputs, 2 query heads over one "
              "key/value head, a 3-D mask and bias (H, Lq, Lk): one plane per head, as "
              "PyTorch broadcasts them (B = H, so a per-batch reading would pass its shapes)",
              2, 2, 1, 4, 5, 3, 2, mask_shape=(2, 4, 5), bias_shape=(2, 4, 5), causal=True)
    run_concat(o, "concat_unbatched", "rule concat, (Lq,D) inputs", None, 3, 4, 2, 5, 3, 4)
    run_concat(o, "concat_batched", "rule concat, (B,Lq,D) inputs", 2, 3, 4, 2, 5, 3, 4)
    run_concat(o, "concat_worked", "worked example: Q (1,1,32), K (1,1,32), "
               "V (1,32,64), output size 32", 1, 1, 32, 32, 32, 64, 32,
               output_size_opt=True)

    # Each mask kind.
    run_rule(o, "mask_2d", "scaled_dot", "mask (Lq,Lk) broadcast over the batch",
             2, 4, 5, 3, 3, 2, mask="random", mask_shape=(4, 5))
    run_rule(o, "mask_3d", "scaled_dot", "mask (B,Lq,Lk)",
             2, 4, 5, 3, 3, 2, mask="random", mask_shape=(2, 4, 5))
    run_rule(o, "mask_unbatched", "general", "mask (Lq,Lk) without batch",
             None, 4, 5, 3, 2, 2, mask="random", mask_shape=(4, 5))
    run_rule(o, "key_mask_1d", "scaled_dot", "key_mask (Lk)",
             2, 3, 6, 4, 4, 3, key_mask=torch.tensor([1, 0, 1, 1, 0, 1], dtype=torch.bool))
    run_rule(o, "key_mask_2d", "additive", "key_mask (B,Lk)",
             2, 3, 6, 4, 3, 3, dh=5, key_mask="random", key_mask_shape=(2, 6))
    run_rule(o, "bias_2d", "scaled_dot", "bias (Lq,Lk), ALiBi-like",
             2, 4, 4, 3, 3, 3,
             bias=-0.5 * (torch.arange(4)[:, None] - torch.arange(4)[None, :]).abs().float())
    run_rule(o, "bias_3d", "dot", "bias (B,Lq,Lk) with a mask",
             2, 3, 5, 4, 4, 2, bias="random", bias_shape=(2, 3, 5),
             mask="random", mask_shape=(3, 5))
    run_rule(o, "causal", "scaled_dot", "causal, Lq = Lk", 2, 5, 5, 4, 4, 3, causal=True)
    run_rule(o, "causal_rect", "concat_tanh", "causal with Lq > Lk, top-left aligned",
             1, 6, 4, 3, 2, 3, dh=4, causal=True)
    run_rule(o, "causal_wide", "general", "causal with Lq < Lk", None, 3, 6, 3, 3, 2,
             causal=True)
    run_rule(o, "window", "scaled_dot", "window 1", 2, 6, 6, 3, 3, 2, window=1)
    run_rule(o, "window0", "dot", "window 0: only the diagonal", None, 4, 4, 3, 3, 2,
             window=0)
    run_rule(o, "all_masks", "additive", "mask, key_mask, causal, window and bias together",
             2, 6, 6, 3, 4, 3, dh=5, mask="random", mask_shape=(2, 6, 6), key_mask="random",
             key_mask_shape=(6,), causal=True, window=2, bias="random", bias_shape=(6, 6))
    run_rule(o, "need_weights_off", "scaled_dot", "need_weights false: output only",
             2, 3, 4, 3, 3, 2, causal=True, need_weights=False)

    # Hard attention.
    run_rule(o, "hard_argmax", "scaled_dot", "hard argmax", 2, 4, 7, 3, 3, 3,
             hard=("argmax", 1))
    run_rule(o, "hard_topk", "general", "hard top_k 3, renormalised", 2, 4, 7, 3, 3, 3,
             hard=("top_k", 3))
    run_rule(o, "hard_topk_all", "additive", "top_k = Lk: plain softmax", None, 3, 4, 3, 3, 2,
             dh=3, hard=("top_k", 4))
    run_rule(o, "hard_topk_causal", "scaled_dot", "top_k 2 with causal: row 0 has one key",
             2, 5, 5, 3, 3, 2, causal=True, hard=("top_k", 2))
    ties = (torch.tensor([[1., 0.], [0., 1.]]),
            torch.tensor([[2., 0.], [2., 0.], [0., 3.], [2., 0.], [0., 3.]]),
            torch.tensor([[1., 2.], [3., 4.], [5., 6.], [7., 8.], [9., 10.]]))
    run_rule(o, "hard_argmax_ties", "dot", "argmax with tied scores: lowest index",
             None, 2, 5, 2, 2, 2, hard=("argmax", 1), inputs=ties)
    run_rule(o, "hard_topk_ties", "dot", "top_k 2 with tied scores: lowest indices",
             None, 2, 5, 2, 2, 2, hard=("top_k", 2), inputs=ties)
    run_concat(o, "concat_hard", "concat with hard top_k 2", 2, 3, 3, 2, 5, 2, 3,
               hard=("top_k", 2))
    run_concat(o, "concat_argmax", "concat with hard argmax", None, 2, 3, 2, 4, 2, 3,
               hard=("argmax", 1))

    # Rows with nothing to attend.
    m = torch.ones(2, 3, 4, dtype=torch.bool)
    m[0, 1, :] = False
    run_rule(o, "fully_masked", "scaled_dot", "a row masked out: zero weights, zero output",
             2, 3, 4, 3, 3, 2, mask=m, key_mask=torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0]],
                                                               dtype=torch.bool))
    run_rule(o, "fully_masked_window", "general", "causal + mask leave row 0 empty",
             None, 3, 4, 3, 3, 2, causal=True,
             mask=torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]], dtype=torch.bool),
             hard=("top_k", 2))
    mc = torch.ones(2, 3, 4, dtype=torch.bool)
    mc[1, 2, :] = False
    run_concat(o, "concat_fully_masked", "concat, a row masked out: zero weights, "
               "zero context, output out([q; 0])", 2, 3, 3, 2, 4, 2, 3, mask=mc)

    # Large scores: integer inputs so every score (about 1e4) is exact in
    # float32 whatever the order of summation.
    qi = torch.tensor([[[100., 0.], [50., 50.]], [[100., 1.], [-100., 100.]]])
    ki = torch.tensor([[[100., 0.], [99., 0.], [100., 2.], [-100., 0.]],
                       [[100., 0.], [100., 1.], [100., 2.], [99., 50.]]])
    vi = rnd(2, 4, 3)
    run_rule(o, "large_scores", "dot", "scores of magnitude 1e4", 2, 2, 4, 2, 2, 3,
             inputs=(qi, ki, vi))
    run_rule(o, "large_scores_scaled", "scaled_dot", "scores 1e4 with scale 0.5",
             2, 2, 4, 2, 2, 3, inputs=(qi, ki, vi), scale=0.5)

    # Seeded parameters: the test seeds through the library and checks the
    # parameters bit for bit, then the output.
    run_rule(o, "seeded_general", "general", "seed 7", 2, 3, 4, 3, 5, 2, seed=7)
    run_rule(o, "seeded_additive", "additive", "seed 11, hidden_size 6", None, 3, 4, 3, 5, 2,
             dh=6, seed=11)
    run_rule(o, "seeded_concat_tanh", "concat_tanh", "seed 0, hidden_size 4",
             1, 2, 3, 3, 2, 2, dh=4, seed=0)
    run_concat(o, "seeded_concat", "seed 123456789, output_size 5",
               None, 2, 3, 2, 4, 3, 5, seed=123456789)
    run_rule(o, "seeded_additive_default", "additive", "seed 3, hidden_size defaults to Dq",
             2, 2, 3, 4, 3, 2, seed=3)
    run_concat(o, "seeded_concat_default", "seed 18446744073709551615, output_size "
               "defaults to Dq", 1, 2, 3, 2, 3, 2, 3, seed=18446744073709551615)

    # Multi-head.
    run_mha(o, "mha_batched", "MultiheadAttention(8, 2), packed in_proj", 2, 3, 5, 8, 2)
    run_mha(o, "mha_unbatched", "MultiheadAttention(6, 3) without batch", None, 4, 3, 6, 3)
    run_mha(o, "mha_self", "self-attention: key and value absent", 2, 4, 4, 8, 4,
            self_attn=True)
    run_mha(o, "mha_one_head", "one head", 1, 3, 3, 4, 1)
    run_mha(o, "mha_nobias", "MultiheadAttention(bias=False)", 2, 3, 4, 6, 2, has_bias=False)
    run_mha(o, "mha_kdim_vdim", "kdim 5, vdim 3, E 8", 2, 3, 4, 8, 2, kdim=5, vdim=3)
    run_mha(o, "mha_average", "head-averaged weights", 2, 3, 4, 8, 4, average=True)
    run_mha(o, "mha_masks", "mask 2-D, key_mask 2-D, causal", 2, 4, 4, 8, 2,
            mask=randmask(4, 4), key_mask=torch.tensor([[1, 1, 1, 1], [1, 0, 1, 0]],
                                                     dtype=torch.bool), causal=True)
    run_mha(o, "mha_window_bias", "window 1 and bias (B,Lq,Lk)", 2, 5, 5, 6, 3, window=1,
            bias=rnd(2, 5, 5))
    run_mha(o, "mha_perhead_mask", "per-head mask and bias (B,H,Lq,Lk)", 2, 3, 4, 8, 2,
            mask=randmask(2, 2, 3, 4, p=0.8), bias=rnd(2, 2, 3, 4))
    mh = torch.ones(2, 2, 3, 4, dtype=torch.bool)
    mh[0, 1, 2, :] = False       # one head of one row
    mh[1, :, 0, :] = False       # every head of one row: out_proj.bias
    run_mha(o, "mha_bh_mask", "nn.MultiheadAttention's 3-D attn_mask: mask and bias (B H, Lq, "
            "Lk), row b's head h at b H + h (checked through torch's own module)", 2, 3, 4, 8, 2,
            mask=randmask(4, 3, 4), bias=rnd(4, 3, 4, lo=-2.0, hi=2.0))
    run_mha(o, "mha_fully_masked", "rows with nothing to attend, in one head and in all",
            2, 3, 4, 8, 2, mask=mh)
    run_mha(o, "mha_unbatched_masks", "no batch: mask (Lq,Lk), key_mask (Lk), bias, window",
            None, 4, 5, 6, 2, mask=randmask(4, 5, p=0.8),
            key_mask=torch.tensor([1, 1, 0, 1, 1], dtype=torch.bool), bias=rnd(4, 5), window=2)
    run_mha(o, "mha_no_weights", "need_weights false", 2, 3, 4, 8, 2, need_weights=False,
            causal=True)
    run_mha(o, "mha_gqa", "grouped-query: 4 heads, 2 kv heads", 2, 3, 5, 8, 4, Hkv=2)
    run_mha(o, "mha_mqa", "multi-query: 4 heads, 1 kv head, causal", 1, 4, 4, 8, 4, Hkv=1,
            causal=True)
    run_mha(o, "mha_gqa_kdim", "grouped-query with kdim 3, vdim 5, averaged weights",
            2, 3, 4, 12, 6, Hkv=3, kdim=3, vdim=5, average=True)
    run_mha(o, "mha_w_names", "W_q/W_k/W_v/W_o names with Hkv = H", None, 3, 4, 8, 2,
            use_w=True)
    run_mha(o, "mha_posenc", "sinusoidal positional encoding", 2, 4, 5, 8, 2, posenc=True)
    run_mha(o, "mha_posenc_kdim", "positional encoding with kdim 3, vdim 5", 1, 3, 4, 6, 2,
            posenc=True, kdim=3, vdim=5)
    run_mha(o, "mha_residual_norm", "residual + LayerNorm", 2, 3, 4, 8, 2,
            residual_norm=True)
    run_mha(o, "mha_posenc_norm", "positional encoding, residual + LayerNorm, self",
            None, 5, 5, 6, 3, posenc=True, residual_norm=True, self_attn=True, causal=True)
    run_mha(o, "seeded_mha", "seed 42, packed in_proj", 2, 3, 4, 8, 2, seed=42)
    run_mha(o, "seeded_mha_kdim", "seed 5, kdim 3, vdim 5", 1, 2, 3, 4, 2, kdim=3, vdim=5,
            seed=5)
    run_mha(o, "seeded_mha_gqa", "seed 9, 4 heads, 2 kv heads, residual + LayerNorm",
            2, 3, 3, 8, 4, Hkv=2, seed=9, residual_norm=True)
    E = 512
    run_mha(o, "mha_d512", "worked example: d_model 512, 8 heads, W_q/W_k/W_v/W_o "
            "(parameters from SplitMix64 streams)", 1, 4, 4, E, 8, use_w=True, causal=True,
            prng_params=[("W_q.weight", (E, E), 1001, E), ("W_q.bias", (E,), 1002, E),
                         ("W_k.weight", (E, E), 1003, E), ("W_k.bias", (E,), 1004, E),
                         ("W_v.weight", (E, E), 1005, E), ("W_v.bias", (E,), 1006, E),
                         ("W_o.weight", (E, E), 1007, E), ("W_o.bias", (E,), 1008, E)])


def self_test():
    """SplitMix64's published first outputs for seed 1234567 (from the
    reference C code by Vigna)."""
    r = SplitMix64(1234567)
    got = [r.next() for _ in range(3)]
    want = [6457827717110365317, 3203168211198807973, 9817491932198370423]
    assert got == want, got


def write_all(outdir, self_test, all_cases):
    """A generator's run: its self-test, then every case written afresh into
    outdir by all_cases(outdir) (the *.txt there removed first); prints how
    many cases and bytes."""
    os.makedirs(outdir, exist_ok=True)
    self_test()
    torch.set_grad_enabled(False)

    def cases():
        return [os.path.join(outdir, f) for f in os.listdir(outdir) if f.endswith(".txt")]
    for f in cases():
        os.remove(f)
    all_cases(outdir)
    print("%d cases, %d bytes in %s" % (len(cases()), sum(map(os.path.getsize, cases())), outdir))


def main():
    write_all(sys.argv[1] if len(sys.argv) > 1 else "tests/golden", self_test, all_cases)


if __name__ == "__main__":
    main()
