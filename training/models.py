"""The four English->French models. Every attention step is exactly one rule
of lib/attn.h, and the attention submodules' attribute names are the
library's parameter names, so (after removing the module prefix) a
state_dict entry is a library parameter.

GRU models (GRUSeq2Seq, rule in {"concat", "additive", "general"}); all
three are identical except for `decoder.attention` (and `decoder.combine`,
which concat does not need because its rule contains the `out` Linear):

  embedding.weight (V, E)            shared by source, target and output
  out_bias (V)                       the output layer's bias (zeros at start)
  encoder: nn.GRU(E, H), 1 layer, unidirectional, batch_first
  decoder.gru: nn.GRUCell(H, H)
  step t (y = previous target token, h = previous decoder state,
          M = encoder outputs (Ls, H), mask = source positions):
    e = embedding[y] * sqrt(E)                         (E; the encoder's input too)
    concat:   x = out([e ; a M]), a = softmax(att_weight([e ; h]) masked)
              = library rule concat, query e, key h, value M padded to Lv
    additive: c = library rule additive(query h, keys = values = M)
    general:  c = library rule general (query h, keys = values = M)
              x = combine([e ; c])                     (Linear(E+H, H))
    h' = GRUCell(relu(x), h)
    logits = embedding.weight @ h' + out_bias          (tied weight, own bias; E == H)
  h0 = encoder output at the last source position (the <eos>).

Transformer (post-norm, like nn.Transformer with norm_first=False but
without the final encoder/decoder LayerNorms):
  x = embedding[src] * sqrt(E) + PE[pos]   (PE = attn.h ATTN_PE_SINUSOIDAL)
  encoder layer: x = norm1(x + self_attn(x, x, x, key_padding_mask))
                 x = norm2(x + linear2(relu(linear1(x))))
  y = embedding[tgt_in] * sqrt(E) + PE[pos]
  decoder layer: y = norm1(y + self_attn(y, y, y, causal))
                 y = norm2(y + cross_attn(y, mem, mem, key_padding_mask))
                 y = norm3(y + linear2(relu(linear1(y))))
  logits = y @ embedding.weight^T (tied, no bias)
  Attention = nn.MultiheadAttention(E, H, batch_first=True): in_proj_weight
  (3E, E), in_proj_bias (3E), out_proj.weight (E, E), out_proj.bias (E).
  LayerNorm eps 1e-5. Dropout only in training.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

NEG = float("-inf")


class ConcatAttention(nn.Module):
    """Library rule `concat`: a = softmax(att_weight([q; k])) over Lv positions,
    c = a V, o = out([q; c])."""

    def __init__(self, dq, dk, dv, lv, dout):
        super().__init__()
        self.att_weight = nn.Linear(dq + dk, lv)
        self.out = nn.Linear(dq + dv, dout)

    def forward(self, q, k, v, mask):
        # q (B,Dq) k (B,Dk) v (B,Lv,Dv) mask (B,Lv) bool, True = may attend
        s = self.att_weight(torch.cat([q, k], -1)).masked_fill(~mask, NEG)
        a = torch.softmax(s, -1)
        c = torch.bmm(a.unsqueeze(1), v).squeeze(1)
        return self.out(torch.cat([q, c], -1)), a


class AdditiveAttention(nn.Module):
    """Library rule `additive`: score_j = v . tanh(Wq q + Wk k_j + bk)."""

    def __init__(self, dq, dk, dh):
        super().__init__()
        self.query_proj = nn.Linear(dq, dh, bias=False)
        self.key_proj = nn.Linear(dk, dh)
        self.v = nn.Linear(dh, 1, bias=False)

    def precompute(self, keys):
        return self.key_proj(keys)

    def forward(self, q, keys_proj, values, mask):
        s = self.v(torch.tanh(self.query_proj(q).unsqueeze(1) + keys_proj)).squeeze(-1)
        a = torch.softmax(s.masked_fill(~mask, NEG), -1)
        return torch.bmm(a.unsqueeze(1), values).squeeze(1), a


class GeneralAttention(nn.Module):
    """Library rule `general`: score_j = q . (W k_j + b), W (Dq, Dk), b (Dq).
    With scaled, training computes q . (W k_j + b) / sqrt(Dq) (the parameters
    are W and b; train.export folds the factor into them, so the exported
    model is the plain rule)."""

    def __init__(self, dq, dk, scaled=False):
        super().__init__()
        self.attn = nn.Linear(dk, dq)
        self.factor = dq ** -0.5 if scaled else 1.0

    def precompute(self, keys):
        kp = self.attn(keys)
        return kp * self.factor if self.factor != 1.0 else kp

    def forward(self, q, keys_proj, values, mask):
        s = torch.bmm(keys_proj, q.unsqueeze(-1)).squeeze(-1)
        a = torch.softmax(s.masked_fill(~mask, NEG), -1)
        return torch.bmm(a.unsqueeze(1), values).squeeze(1), a


class GRUDecoder(nn.Module):
    def __init__(self, rule, E, H, max_src_len, general_scaled=False):
        super().__init__()
        self.rule = rule
        if rule == "concat":
            self.attention = ConcatAttention(E, H, H, max_src_len, H)
        else:
            self.attention = AdditiveAttention(H, H, H) if rule == "additive" else GeneralAttention(H, H, general_scaled)
            self.combine = nn.Linear(E + H, H)
        self.gru = nn.GRUCell(H, H)

    def prepare(self, mem):
        """Per-sentence precomputation (keys projection) - an optimisation only."""
        if self.rule == "concat":
            return None
        return self.attention.precompute(mem)

    def step(self, e, h, mem, kp, mask):
        if self.rule == "concat":
            x, a = self.attention(e, h, mem, mask)
        else:
            c, a = self.attention(h, kp, mem, mask)
            x = self.combine(torch.cat([e, c], -1))
        return self.gru(torch.relu(x), h), a


class GRUSeq2Seq(nn.Module):
    def __init__(self, rule, vocab_size, E=128, H=128, max_src_len=48, dropout=0.1,
                 general_scaled=False):
        super().__init__()
        assert E == H, "tied output projection needs E == H"
        self.rule, self.E, self.H, self.max_src_len = rule, E, H, max_src_len
        self.embedding = nn.Embedding(vocab_size, E, padding_idx=0)
        nn.init.normal_(self.embedding.weight, 0.0, E ** -0.5)
        self.encoder = nn.GRU(E, H, batch_first=True)
        self.decoder = GRUDecoder(rule, E, H, max_src_len, general_scaled)
        self.out_bias = nn.Parameter(torch.zeros(vocab_size))
        self.drop = nn.Dropout(dropout)
        self.emb_scale = math.sqrt(E)

    def embed(self, ids):
        """The encoder's and decoder's input: embedding[ids] * sqrt(E)."""
        return self.embedding(ids) * self.emb_scale

    def logits(self, h):
        """The output layer: tied weight (the embedding) plus its own bias."""
        return F.linear(h, self.embedding.weight, self.out_bias)

    def encode(self, src, src_len):
        """src (B,Ls) padded with 0, src_len (B). Returns mem padded to
        max_src_len (B,Lv,H), mask (B,Lv), h0 (B,H)."""
        B, Ls = src.shape
        out, _ = self.encoder(self.drop(self.embed(src)))
        h0 = out[torch.arange(B), src_len - 1]
        if self.rule == "concat":
            out = F.pad(out, (0, 0, 0, self.max_src_len - Ls))
        L = out.shape[1]
        mask = torch.arange(L).unsqueeze(0) < src_len.unsqueeze(1)
        return out, mask, h0

    def forward(self, src, src_len, tgt_in):
        mem, mask, h = self.encode(src, src_len)
        kp = self.decoder.prepare(mem)
        emb = self.drop(self.embed(tgt_in))
        outs = []
        for t in range(tgt_in.shape[1]):
            h, _ = self.decoder.step(emb[:, t], h, mem, kp, mask)
            outs.append(h)
        hs = self.drop(torch.stack(outs, 1))
        return self.logits(hs)


def sinusoidal(L, d):
    """attn.h ATTN_PE_SINUSOIDAL: PE[p,2i] = sin(p/10000^(2i/d)),
    PE[p,2i+1] = cos(p/10000^(2i/d)); computed in float64, rounded to float32."""
    pe = torch.zeros(L, d, dtype=torch.float64)
    p = torch.arange(L, dtype=torch.float64).unsqueeze(1)
    i2 = torch.arange(0, d, 2, dtype=torch.float64)
    ang = p / torch.pow(torch.tensor(10000.0, dtype=torch.float64), i2 / d)
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang)
    return pe.float()


class _Layer(nn.Module):
    """What both Transformer layers are made of, registered in this order (the
    order of their parameters and of their random initialisation): for each
    attention named in attns, an nn.MultiheadAttention and its LayerNorm
    (norm1, norm2, ...); then the feed-forward block linear1, linear2 and its
    LayerNorm (the next normN); then the dropout."""

    def __init__(self, E, H, Fd, dropout, attns):
        super().__init__()
        for i, name in enumerate(attns, 1):
            setattr(self, name, nn.MultiheadAttention(E, H, dropout=dropout, batch_first=True))
            setattr(self, "norm%d" % i, nn.LayerNorm(E))
        self.linear1 = nn.Linear(E, Fd)
        self.linear2 = nn.Linear(Fd, E)
        setattr(self, "norm%d" % (len(attns) + 1), nn.LayerNorm(E))
        self.drop = nn.Dropout(dropout)

    def feed_forward(self, x, norm):
        """norm(x + linear2(relu(linear1(x)))), with dropout."""
        return norm(x + self.drop(self.linear2(self.drop(torch.relu(self.linear1(x))))))


class EncLayer(_Layer):
    def __init__(self, E, H, Fd, dropout):
        super().__init__(E, H, Fd, dropout, ("self_attn",))

    def forward(self, x, pad):
        a, _ = self.self_attn(x, x, x, key_padding_mask=pad, need_weights=False)
        x = self.norm1(x + self.drop(a))
        return self.feed_forward(x, self.norm2)


class DecLayer(_Layer):
    def __init__(self, E, H, Fd, dropout):
        super().__init__(E, H, Fd, dropout, ("self_attn", "cross_attn"))

    def forward(self, y, mem, src_pad, causal, want_weights=False):
        a, _ = self.self_attn(y, y, y, attn_mask=causal, need_weights=False)
        y = self.norm1(y + self.drop(a))
        c, w = self.cross_attn(y, mem, mem, key_padding_mask=src_pad, need_weights=want_weights,
                               average_attn_weights=False)
        y = self.norm2(y + self.drop(c))
        return self.feed_forward(y, self.norm3), w


class Stack(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)


class Transformer(nn.Module):
    def __init__(self, vocab_size, E=256, heads=4, enc_layers=3, dec_layers=3, ffn=512,
                 dropout=0.1, max_len=128):
        super().__init__()
        self.E = E
        self.embedding = nn.Embedding(vocab_size, E, padding_idx=0)
        nn.init.normal_(self.embedding.weight, 0.0, E ** -0.5)
        self.encoder = Stack([EncLayer(E, heads, ffn, dropout) for _ in range(enc_layers)])
        self.decoder = Stack([DecLayer(E, heads, ffn, dropout) for _ in range(dec_layers)])
        self.register_buffer("pe", sinusoidal(max_len, E), persistent=False)
        self.drop = nn.Dropout(dropout)

    def embed(self, ids, offset=0):
        L = ids.shape[1]
        return self.drop(self.embedding(ids) * math.sqrt(self.E) + self.pe[offset:offset + L])

    def encode(self, src, src_pad):
        x = self.embed(src)
        for layer in self.encoder.layers:
            x = layer(x, src_pad)
        return x

    def decode(self, tgt_in, mem, src_pad, want_weights=False):
        L = tgt_in.shape[1]
        causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
        y = self.embed(tgt_in)
        ws = []
        for layer in self.decoder.layers:
            y, w = layer(y, mem, src_pad, causal, want_weights)
            ws.append(w)
        return F.linear(y, self.embedding.weight), ws

    def forward(self, src, src_len, tgt_in):
        src_pad = src.eq(0)
        mem = self.encode(src, src_pad)
        return self.decode(tgt_in, mem, src_pad)[0]


def build(cfg):
    if cfg["arch"] == "transformer":
        return Transformer(cfg["vocab_size"], cfg["emb"], cfg["heads"], cfg["enc_layers"],
                           cfg["dec_layers"], cfg["ffn"], cfg["dropout"], cfg["max_len"])
    return GRUSeq2Seq(cfg["rule"], cfg["vocab_size"], cfg["emb"], cfg["hidden"],
                      cfg["max_src_len"], cfg["dropout"], cfg.get("general_scaled", False))
