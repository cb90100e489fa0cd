#!/usr/bin/python3
"""Trains one model. Fixed seeds; Adam; teacher forcing; label smoothing;
the checkpoint kept is the one with the best validation loss (token-level
NLL without smoothing). Training stops after --minutes of wall time or
--max-steps steps, whichever first; the log records the step count, so
`--max-steps N --minutes 1e9` reproduces a run (single thread, same
OpenBLAS kernels; `--minutes 0` would stop after the first step).

    /usr/bin/python3 training/train.py --model transformer --minutes 80
    /usr/bin/python3 training/train.py --model additive --smoke
"""
import argparse
import json
import math
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import blas_env  # noqa: E402  (before torch: OpenBLAS reads its core type when it loads)
blas_env.use_cpu_kernels()
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import models  # noqa: E402
import st  # noqa: E402
from tokenizer import BPE, BOS, EOS, PAD, read_tsv  # noqa: E402

MAX_SRC = 48   # source tokens including <eos> (= Lv of the concat rule)
MAX_TGT = 64   # target tokens including <eos>

CONFIGS = {
    "transformer": dict(arch="transformer", emb=192, heads=4, enc_layers=2, dec_layers=2, ffn=512,
                        dropout=0.0, max_len=128, lr=1e-3, warmup=150, batch_tokens=600,
                        label_smoothing=0.1, eval_every=250),
}
for _rule in ("concat", "additive", "general"):
    CONFIGS[_rule] = dict(arch="gru", rule=_rule, emb=128, hidden=128, max_src_len=MAX_SRC,
                          dropout=0.05, lr=6e-3, warmup=100, batch_tokens=1000,
                          label_smoothing=0.1, eval_every=200)


def log(t0, msg):
    print("[%7.1fs %s] %s" % (time.time() - t0, time.strftime("%H:%M:%S", time.gmtime()), msg), flush=True)


def encode_split(bpe, rows):
    out = []
    for en, fr in rows:
        s = bpe.encode(en) + [EOS]
        t = bpe.encode(fr) + [EOS]
        out.append((s, t))
    return out


def make_batches(data, batch_tokens, rng):
    idx = list(range(len(data)))
    rng.shuffle(idx)
    idx.sort(key=lambda i: (len(data[i][0]), len(data[i][1])))
    batches, cur, mx = [], [], 0
    for i in idx:
        m = max(mx, len(data[i][0]), len(data[i][1]) + 1)
        if cur and m * (len(cur) + 1) > batch_tokens:
            batches.append(cur)
            cur, m = [], max(len(data[i][0]), len(data[i][1]) + 1)
        cur.append(i)
        mx = m
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(data, ids):
    ls = max(len(data[i][0]) for i in ids)
    lt = max(len(data[i][1]) for i in ids)
    src = torch.zeros(len(ids), ls, dtype=torch.long)
    tin = torch.zeros(len(ids), lt, dtype=torch.long)
    tout = torch.zeros(len(ids), lt, dtype=torch.long)
    slen = torch.zeros(len(ids), dtype=torch.long)
    for b, i in enumerate(ids):
        s, t = data[i]
        src[b, :len(s)] = torch.tensor(s)
        slen[b] = len(s)
        tin[b, :len(t)] = torch.tensor([BOS] + t[:-1])
        tout[b, :len(t)] = torch.tensor(t)
    return src, slen, tin, tout


def validate(model, data, batch_tokens):
    model.eval()
    tot, n = 0.0, 0
    with torch.no_grad():
        for ids in make_batches(data, batch_tokens, random.Random(0)):
            src, slen, tin, tout = collate(data, ids)
            logits = model(src, slen, tin)
            tot += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tout.reshape(-1),
                                   ignore_index=PAD, reduction="sum").item()
            n += int(tout.ne(PAD).sum())
    model.train()
    return tot / n


def n_params(model):
    return sum(p.numel() for p in model.state_dict().values())


def export(model, cfg, path_base, info):
    sd = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    conf = dict(cfg)
    if conf.pop("general_scaled", False):
        # the scores' 1/sqrt(H) folded into W and b: the plain general rule
        f = model.decoder.attention.factor
        for k in ("decoder.attention.attn.weight", "decoder.attention.attn.bias"):
            sd[k] = sd[k] * np.float32(f)
        conf["trained_general_scaled"] = True
    st.save(path_base + ".safetensors", sd, {"model": cfg["name"]})
    conf.update(info)
    conf["params"] = int(sum(v.size for v in sd.values()))
    conf["tensors"] = {k: list(v.shape) for k, v in sorted(sd.items())}
    with open(path_base + ".json", "w") as f:
        json.dump(conf, f, indent=1, sort_keys=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=sorted(CONFIGS))
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--max-steps", type=int, default=10 ** 9)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="a few steps of a tiny model on 64 pairs")
    ap.add_argument("--init", help="continue from these weights (.pt or .safetensors); Adam starts afresh")
    ap.add_argument("--start-step", type=int, default=0, help="step count to start from (learning-rate schedule)")
    ap.add_argument("--batch-tokens", type=int, help="override the config's batch_tokens (measurements)")
    ap.add_argument("--lr", type=float, help="override the config's lr (measurements)")
    ap.add_argument("--dropout", type=float, help="override the config's dropout (fine-tuning)")
    ap.add_argument("--general-scaled", action="store_true",
                    help="general: train with scores / sqrt(H) (folded into W, b on export)")
    ap.add_argument("--out", default=os.path.join(HERE, "weights"))
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    t0 = time.time()

    cfg = dict(CONFIGS[args.model])
    cfg["name"] = args.model
    if args.batch_tokens:
        cfg["batch_tokens"] = args.batch_tokens
    if args.lr:
        cfg["lr"] = args.lr
    if args.dropout is not None:
        cfg["dropout"] = args.dropout
    if args.general_scaled:
        cfg["general_scaled"] = True
    bpe = BPE.load(os.path.join(HERE, "bpe.json"))
    cfg.update(vocab_size=len(bpe.vocab), max_src_tokens=MAX_SRC, max_tgt_tokens=MAX_TGT,
               tokenizer="bpe.json", pad_id=PAD, bos_id=BOS, eos_id=EOS, seed=args.seed)
    train = encode_split(bpe, read_tsv(os.path.join(args.data, "train.tsv")))
    valid = encode_split(bpe, read_tsv(os.path.join(args.data, "valid.tsv")))
    n0 = len(train)
    train = [p for p in train if len(p[0]) <= MAX_SRC and len(p[1]) <= MAX_TGT]
    valid = [p for p in valid if len(p[0]) <= MAX_SRC and len(p[1]) <= MAX_TGT]
    if args.smoke:
        train, valid = train[:64], valid[:32]
        cfg.update(emb=32, hidden=32, ffn=64, heads=2, enc_layers=1, dec_layers=1, eval_every=2,
                   batch_tokens=400)
        args.max_steps = min(args.max_steps, 5)
        args.out = os.path.join("/tmp", "smoke_weights")
    os.makedirs(args.out, exist_ok=True)
    log(t0, "model %s config %s" % (args.model, json.dumps(cfg, sort_keys=True)))
    log(t0, "train pairs %d (of %d; longer ones dropped) valid %d" % (len(train), n0, len(valid)))

    model = models.build(cfg)
    if args.init:
        if args.init.endswith(".safetensors"):
            sd = {k: torch.from_numpy(v) for k, v in st.load(args.init)[0].items()}
        else:
            sd = torch.load(args.init)
        model.load_state_dict(sd)
        cfg["init"] = os.path.basename(args.init)
        log(t0, "initialised from %s, starting at step %d" % (args.init, args.start_step))
    log(t0, "parameters %d (%.2f MB float32)" % (n_params(model), n_params(model) * 4 / 1e6))
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], betas=(0.9, 0.98), eps=1e-9)
    rng = random.Random(args.seed)
    step, epoch, best, best_step = args.start_step, 0, float("inf"), 0
    base = os.path.join(args.out, args.model)
    deadline = t0 + args.minutes * 60
    done = False
    tok_count, t_last = 0, time.time()
    loss_acc, loss_n = 0.0, 0
    while not done:
        epoch += 1
        for ids in make_batches(train, cfg["batch_tokens"], rng):
            step += 1
            lr = cfg["lr"] * min(step / cfg["warmup"], math.sqrt(cfg["warmup"] / step))
            for g in opt.param_groups:
                g["lr"] = lr
            src, slen, tin, tout = collate(train, ids)
            logits = model(src, slen, tin)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tout.reshape(-1),
                                   ignore_index=PAD, label_smoothing=cfg["label_smoothing"])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            tok_count += int(tout.ne(PAD).sum())
            loss_acc += loss.item()
            loss_n += 1
            last = step >= args.max_steps or time.time() >= deadline
            if step % 100 == 0 or last:
                dt = time.time() - t_last
                log(t0, "step %d epoch %d loss %.4f lr %.2e tgt-tok/s %.0f" % (
                    step, epoch, loss_acc / max(loss_n, 1), lr, tok_count / max(dt, 1e-9)))
                tok_count, t_last, loss_acc, loss_n = 0, time.time(), 0.0, 0
            if step % cfg["eval_every"] == 0 or last:
                v = validate(model, valid, cfg["batch_tokens"])
                mark = ""
                if v < best:
                    best, best_step = v, step
                    torch.save(model.state_dict(), base + ".pt")
                    mark = " *best*"
                log(t0, "step %d epoch %d valid-nll %.4f ppl %.2f%s" % (step, epoch, v, math.exp(v), mark))
            if last:
                done = True
                break
    model.load_state_dict(torch.load(base + ".pt"))
    info = dict(train_steps=step, train_epochs=epoch, best_step=best_step, best_valid_nll=round(best, 4),
                train_seconds=round(time.time() - t0, 1))
    export(model, cfg, base, info)
    if cfg.get("general_scaled"):
        check_fold(model, cfg, base, valid)
    log(t0, "done: %s" % json.dumps(info))


def check_fold(model, cfg, base, valid):
    """The exported plain-general model gives the scaled model's logits."""
    plain = dict(cfg, general_scaled=False)
    m2 = models.build(plain)
    m2.load_state_dict({k: torch.from_numpy(v) for k, v in st.load(base + ".safetensors")[0].items()})
    model.eval()
    m2.eval()
    src, slen, tin, _ = collate(valid, list(range(min(8, len(valid)))))
    with torch.no_grad():
        a, b = model(src, slen, tin), m2(src, slen, tin)
    err = float((a - b).abs().max())
    if not err <= 1e-4 * max(1.0, float(a.abs().max())):
        raise SystemExit("general_scaled: the exported weights differ from the trained model (max %g)" % err)
    print("general_scaled: exported plain general = trained scaled model (max logit difference %.2g)" % err)


if __name__ == "__main__":
    main()
