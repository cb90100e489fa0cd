#!/usr/bin/python3
"""Reference decoding (the C implementation is compared to this).

One sentence at a time, no batching, float32, eval mode (no dropout).

Source ids: BPE(english) + [<eos>]; sentences whose source is longer than
max_src_tokens (48) are cut to their first 47 tokens + <eos>.
Decoding starts from <bos>; at most max_steps = min(max_tgt_tokens (64),
2 * len(source ids) + 10) tokens are produced (<eos> included).

Greedy: at each step the id with the largest logit (ties: lowest id); stop
after <eos> or max_steps.

Beam search (K = 4): a hypothesis is (ids, score) with score = the sum of
the log-softmax (natural log, float32 log_softmax of the logits) of its ids.
Start: one hypothesis [<bos>] with score 0. Each step, every live hypothesis
is extended by every vocabulary id; the candidates are sorted by score,
descending (ties: lower live-hypothesis index first, then lower id); going
down that list over its first K entries, a candidate ending in <eos> is
moved to the finished list; the others (continuing down the list past the
first K if needed) fill the new live list until it has K hypotheses, kept
in that sorted order. Stop when the finished list has K hypotheses or
max_steps steps were made (then the live hypotheses count as finished,
without <eos>). The answer is the finished hypothesis with the largest
score / length, length = number of produced ids (<eos> included)
(ties: the one finished first).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import blas_env  # noqa: E402  (before torch: OpenBLAS reads its core type when it loads)
blas_env.use_cpu_kernels()
import torch  # noqa: E402
import models  # noqa: E402
import st  # noqa: E402
from tokenizer import BPE, BOS, EOS  # noqa: E402


def load_model(name, weights_dir=os.path.join(HERE, "weights")):
    with open(os.path.join(weights_dir, name + ".json")) as f:
        cfg = json.load(f)
    m = models.build(cfg)
    sd, _ = st.load(os.path.join(weights_dir, name + ".safetensors"))
    m.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
    m.eval()
    return m, cfg


class Stepper:
    """Wraps a model: start(src_ids) -> state; step(states, last_ids, prefixes)
    -> (log_probs (N, V), new states, attention rows)."""

    def __init__(self, model, cfg):
        self.m, self.cfg = model, cfg
        self.gru = cfg["arch"] == "gru"

    def start(self, src_ids):
        src = torch.tensor([src_ids])
        slen = torch.tensor([len(src_ids)])
        if self.gru:
            mem, mask, h0 = self.m.encode(src, slen)
            self.mem, self.mask, self.kp = mem, mask, self.m.decoder.prepare(mem)
            return h0
        self.src_pad = src.eq(0)
        self.mem = self.m.encode(src, self.src_pad)
        return None

    def step(self, prefixes, state, want_attn=False):
        """prefixes: list of id lists (each starting with <bos>); state: GRU
        hidden (N,H) of the prefixes minus their last id. Returns log-probs
        of the next id (N,V), the new state, attention for this step."""
        N = len(prefixes)
        if self.gru:
            y = torch.tensor([p[-1] for p in prefixes])
            e = self.m.embed(y)
            mem = self.mem.expand(N, -1, -1)
            mask = self.mask.expand(N, -1)
            kp = None if self.kp is None else self.kp.expand(N, -1, -1)
            h, a = self.m.decoder.step(e, state, mem, kp, mask)
            logits = self.m.logits(h)
            return torch.log_softmax(logits, -1), h, a
        tin = torch.tensor(prefixes)
        mem = self.mem.expand(N, -1, -1)
        pad = self.src_pad.expand(N, -1)
        logits, ws = self.m.decode(tin, mem, pad, want_weights=want_attn)
        attn = None
        if want_attn:
            attn = torch.stack([w[:, :, -1, :] for w in ws], 1)  # (N, layers, heads, Ls)
        return torch.log_softmax(logits[:, -1], -1), None, attn


def max_steps(cfg, n_src):
    return min(cfg["max_tgt_tokens"], 2 * n_src + 10)


def prepare_src(bpe, cfg, text):
    ids = bpe.encode(text)[:cfg["max_src_tokens"] - 1]
    return ids + [EOS]


@torch.no_grad()
def greedy(stepper, src_ids, want_attn=False):
    state = stepper.start(src_ids)
    out = [BOS]
    attns = []
    for _ in range(max_steps(stepper.cfg, len(src_ids))):
        lp, state, a = stepper.step([out], state, want_attn)
        if want_attn:
            attns.append(a[0])
        nxt = int(torch.argmax(lp[0]))
        out.append(nxt)
        if nxt == EOS:
            break
    return out[1:], attns


@torch.no_grad()
def beam(stepper, src_ids, K=4):
    state = stepper.start(src_ids)
    live = [([BOS], 0.0)]
    finished = []
    for _ in range(max_steps(stepper.cfg, len(src_ids))):
        lp, new_state, _ = stepper.step([h for h, _ in live], state)
        scores = torch.tensor([s for _, s in live]).unsqueeze(1) + lp  # (N,V)
        V = scores.shape[1]
        flat = scores.reshape(-1)
        # The first 2K entries of the stable sort (descending score, ties in
        # (hyp index, id) order) are all we can need: take every candidate
        # at least as large as the 2K-th largest, then sort those stably.
        kk = min(2 * K, flat.numel())
        thr = torch.topk(flat, kk).values[-1]
        cand = torch.nonzero(flat >= thr).squeeze(1)
        order = cand[torch.sort(-flat[cand], stable=True).indices]
        nxt, keep = [], []
        for rank, idx in enumerate(order.tolist()):
            hi, tok = divmod(idx, V)
            sc = float(flat[idx])
            if tok == EOS:
                if rank < K:
                    finished.append((live[hi][0][1:] + [EOS], sc))
                continue
            if len(nxt) < K:
                nxt.append((live[hi][0] + [tok], sc))
                keep.append(hi)
            if rank >= K - 1 and len(nxt) >= K:
                break
        if len(finished) >= K or not nxt:
            break
        live = nxt
        state = None if new_state is None else new_state[keep]
    else:
        finished.extend((h[1:], s) for h, s in live)
    best = max(range(len(finished)), key=lambda i: (finished[i][1] / len(finished[i][0]), -i))
    return finished[best][0]


def strip_eos(ids):
    return ids[:-1] if ids and ids[-1] == EOS else ids


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="transformer")
    ap.add_argument("--beam", type=int, default=0)
    ap.add_argument("text", nargs="*")
    args = ap.parse_args()
    torch.set_num_threads(1)
    bpe = BPE.load()
    m, cfg = load_model(args.model)
    st_ = Stepper(m, cfg)
    lines = args.text or [l.rstrip("\n") for l in sys.stdin]
    for t in lines:
        src = prepare_src(bpe, cfg, t)
        ids = beam(st_, src, args.beam) if args.beam else greedy(st_, src)[0]
        print(bpe.decode(strip_eos(ids)))


if __name__ == "__main__":
    main()
