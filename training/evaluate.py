#!/usr/bin/python3
"""Evaluates the trained models on the test split (and optionally the
held-out packages): corpus BLEU (bleu.py: sacrebleu's default BLEU, 13a) of
greedy and beam-4 decoding (translate.py), the floor of answering with the
English unchanged, and an alignment figure.

Alignment: the reference French is teacher-forced. A target token y_t is a
"copy token" when its id is not special, occurs exactly once in the source
ids and exactly once in the target ids, and its text (without the U+2581
marker) has at least 3 characters or contains a digit (numbers, names,
option words such as "help" in --help). The attention row used to predict
y_t (GRU: the attention of decoder step t; Transformer: each decoder layer's
cross-attention, each head, at target position t) is a hit when its largest
weight (ties: lowest position) is at that token's source position. Reported:
hits / copy tokens, and the uniform-attention chance mean(1/len(source)).

Results are merged into results.json; hypotheses go to outputs/.
"""
import argparse
import fcntl
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import blas_env  # noqa: E402  (before torch: OpenBLAS reads its core type when it loads)
blas_env.use_cpu_kernels()
import torch  # noqa: E402
import bleu  # noqa: E402
import translate as T  # noqa: E402
from tokenizer import BPE, BOS, EOS, MARK, read_tsv  # noqa: E402


def copy_positions(bpe, src, tgt):
    out = []
    for t, y in enumerate(tgt):
        if y < 4 or src.count(y) != 1 or tgt.count(y) != 1:
            continue
        s = bpe.vocab[y].replace(MARK, "")
        if len(s) >= 3 or any(c.isdigit() for c in s):
            out.append((t, src.index(y)))
    return out


@torch.no_grad()
def alignment(model, cfg, bpe, rows):
    gru = cfg["arch"] == "gru"
    hits = None
    n = 0
    chance = 0.0
    rows_seen = 0
    for en, fr in rows:
        src = T.prepare_src(bpe, cfg, en)
        tgt = (bpe.encode(fr) + [EOS])[:cfg["max_tgt_tokens"]]
        cp = copy_positions(bpe, src, tgt)
        if not cp:
            continue
        tin = torch.tensor([[BOS] + tgt[:-1]])
        s = torch.tensor([src])
        if gru:
            mem, mask, h = model.encode(s, torch.tensor([len(src)]))
            kp = model.decoder.prepare(mem)
            emb = model.embed(tin)
            rows_a = []
            for t in range(tin.shape[1]):
                h, a = model.decoder.step(emb[:, t], h, mem, kp, mask)
                rows_a.append(a[0, :len(src)])
            A = torch.stack(rows_a).unsqueeze(0).unsqueeze(0)  # (1 layer, 1 head, Lt, Ls)
        else:
            pad = s.eq(0)
            mem = model.encode(s, pad)
            _, ws = model.decode(tin, mem, pad, want_weights=True)
            A = torch.stack([w[0] for w in ws])  # (layers, heads, Lt, Ls)
        if hits is None:
            hits = torch.zeros(A.shape[0], A.shape[1])
            peaks = torch.zeros(A.shape[0], A.shape[1])
        peaks += A.max(-1).values.sum(-1)
        rows_seen += A.shape[2]
        for t, j in cp:
            hits += (torch.argmax(A[:, :, t, :], -1) == j).float()
            n += 1
            chance += 1.0 / len(src)
    acc = (hits / max(n, 1)).tolist()
    peak = (peaks / max(rows_seen, 1)).tolist()
    res = {"copy_tokens": n, "chance": round(chance / max(n, 1), 4)}
    if gru:
        res["accuracy"] = round(acc[0][0], 4)
        res["mean_peak_weight"] = round(peak[0][0], 4)
    else:
        res["per_layer_head"] = [[round(x, 4) for x in row] for row in acc]
        best = max(((l, h) for l in range(len(acc)) for h in range(len(acc[0]))), key=lambda lh: acc[lh[0]][lh[1]])
        res["best_head"] = {"layer": best[0], "head": best[1], "accuracy": round(acc[best[0]][best[1]], 4),
                            "mean_peak_weight": round(peak[best[0]][best[1]], 4)}
    return res


@torch.no_grad()
def greedy_batched(model, cfg, srcs, batch=64):
    """Greedy decoding of the Transformer for many sentences at once (padded
    source keys masked; finished rows keep running and are ignored). Same
    decisions as translate.greedy up to float rounding; faster for scoring."""
    order = sorted(range(len(srcs)), key=lambda i: len(srcs[i]))
    out = [None] * len(srcs)
    for k in range(0, len(order), batch):
        idx = order[k:k + batch]
        B = len(idx)
        Ls = max(len(srcs[i]) for i in idx)
        src = torch.zeros(B, Ls, dtype=torch.long)
        for b, i in enumerate(idx):
            src[b, :len(srcs[i])] = torch.tensor(srcs[i])
        pad = src.eq(0)
        mem = model.encode(src, pad)
        limits = [T.max_steps(cfg, len(srcs[i])) for i in idx]
        res = [[] for _ in idx]
        done = [False] * B
        tin = torch.full((B, 1), BOS, dtype=torch.long)
        for _ in range(max(limits)):
            logits, _ = model.decode(tin, mem, pad)
            nxt = torch.argmax(logits[:, -1], -1)
            for b in range(B):
                if not done[b]:
                    res[b].append(int(nxt[b]))
                    if res[b][-1] == EOS or len(res[b]) >= limits[b]:
                        done[b] = True
            if all(done):
                break
            tin = torch.cat([tin, nxt.unsqueeze(1)], 1)
        for b, i in enumerate(idx):
            out[i] = res[b]
    return out


def merge(path, split, updates):
    """Merges {key: value} into results[split] (a model's dict is merged one
    level deeper), under a lock and re-reading the file first, so parallel
    runs do not lose each other's results."""
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        res = {}
        if os.path.exists(path):
            with open(path) as f:
                res = json.load(f)
        sp = res.setdefault(split, {})
        for k, v in updates.items():
            if isinstance(v, dict) and isinstance(sp.get(k), dict):
                sp[k].update(v)
            else:
                sp[k] = v
        tmp = path + ".tmp%d" % os.getpid()
        with open(tmp, "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
        os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=["concat", "additive", "general", "transformer"])
    ap.add_argument("--modes", nargs="*", default=["greedy", "beam4", "align"])
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--shard", type=int, default=0, help="with --nshards: decode rows shard::nshards only")
    ap.add_argument("--nshards", type=int, default=1)
    ap.add_argument("--merge-shards", action="store_true", help="score the shard outputs of --modes")
    ap.add_argument("--weights", default=os.path.join(HERE, "weights"))
    ap.add_argument("--results", default=os.path.join(HERE, "results.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    bpe = BPE.load()
    rows = read_tsv(os.path.join(HERE, "data", args.split + ".tsv"))
    if args.limit:
        rows = rows[:args.limit]
    refs = [[fr for _, fr in rows]]
    floor = bleu.corpus_bleu([en for en, _ in rows], refs)
    merge(args.results, args.split, {"sentences": len(rows), "unchanged_english": {
        "bleu": round(floor["score"], 2), "detail": bleu.fmt(floor)}})
    print("unchanged English:", bleu.fmt(floor), flush=True)
    os.makedirs(os.path.join(HERE, "outputs"), exist_ok=True)
    for name in args.models:
        if not os.path.exists(os.path.join(args.weights, name + ".safetensors")):
            print("skip", name, "(no weights)")
            continue
        t0 = time.time()
        model, cfg = T.load_model(name, args.weights)
        stp = T.Stepper(model, cfg)
        merge(args.results, args.split, {name: {
            "params": sum(p.numel() for p in model.state_dict().values()),
            "train_steps": cfg.get("train_steps"),
            "train_seconds": cfg.get("train_seconds_total", cfg.get("train_seconds")),
            "best_step": cfg.get("best_step"), "best_valid_nll": cfg.get("best_valid_nll")}})
        for mode in args.modes:
            if mode == "align":
                a = alignment(model, cfg, bpe, rows)
                merge(args.results, args.split, {name: {"alignment": a}})
                print("%s alignment: %s (%.0fs)" % (name, json.dumps(a), time.time() - t0), flush=True)
                continue
            base = os.path.join(HERE, "outputs", "%s.%s.%s" % (args.split, name, mode))
            if args.merge_shards:
                parts = [open("%s.shard%d-%d.txt" % (base, k, args.nshards), encoding="utf-8").read().split("\n")[:-1]
                         for k in range(args.nshards)]
                hyps = [None] * len(rows)
                for k in range(args.nshards):
                    hyps[k::args.nshards] = parts[k]
            elif mode == "greedyb":
                srcs = [T.prepare_src(bpe, cfg, en) for en, _ in rows]
                hyps = [bpe.decode(T.strip_eos(ids)) for ids in greedy_batched(model, cfg, srcs)]
            else:
                hyps = []
                mine = rows[args.shard::args.nshards]
                for en, _ in mine:
                    src = T.prepare_src(bpe, cfg, en)
                    ids = T.greedy(stp, src)[0] if mode == "greedy" else T.beam(stp, src, 4)
                    hyps.append(bpe.decode(T.strip_eos(ids)))
                if args.nshards > 1:
                    with open("%s.shard%d-%d.txt" % (base, args.shard, args.nshards), "w", encoding="utf-8") as f:
                        f.write("\n".join(hyps) + "\n")
                    print("%s %s shard %d/%d done (%.0fs)" % (name, mode, args.shard, args.nshards, time.time() - t0))
                    continue
            b = bleu.corpus_bleu(hyps, refs)
            merge(args.results, args.split, {name: {mode: {"bleu": round(b["score"], 2), "detail": bleu.fmt(b)}}})
            with open(os.path.join(HERE, "outputs", "%s.%s.%s.txt" % (args.split, name, mode)), "w",
                      encoding="utf-8") as f:
                f.write("\n".join(hyps) + "\n")
            print("%s %s: %s (%.0fs)" % (name, mode, bleu.fmt(b), time.time() - t0), flush=True)


if __name__ == "__main__":
    main()
