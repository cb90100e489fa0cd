#!/usr/bin/python3
"""The training totals of each shipped model, summed over every run of its
chain (training/logs): optimizer steps run, passes over the training pairs
(epochs) and wall seconds. A resumed run restarts the step counter at the
checkpoint it starts from, so the steps a run took after its kept checkpoint
count here although the next run does not continue from them; the step
counter of the shipped checkpoint is NAME.json's best_step.

Epochs: a run's steps divided by the batches of one pass over the training
pairs at that run's batch_tokens (train.make_batches; the count does not
depend on the shuffle, as the batches are cut from the pairs sorted by
length).

    /usr/bin/python3 training/totals.py           # print the runs and totals
    /usr/bin/python3 training/totals.py --check   # and compare with weights/NAME.json
    /usr/bin/python3 training/totals.py --write   # store them in weights/NAME.json
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CHAINS = {
    "additive": ["additive.log"] + ["additive_run%d.log" % i for i in range(2, 9)],
    "concat": ["concat.log"] + ["concat_run%d.log" % i for i in range(2, 9)],
    "general": ["general_scaled_run%d.log" % i for i in range(1, 4)],
    "transformer": ["transformer.log", "transformer_continued.log"] +
                   ["transformer_run%d.log" % i for i in range(3, 7)],
}
LINE = re.compile(r"^\[\s*([0-9.]+)s [0-9:]+\] (.*)$")


def read_log(path):
    """batch_tokens, the step it starts from, its last logged step and that
    step's time (seconds from the start) of one run's log."""
    bt, start, end, secs = None, 0, None, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            msg = m.group(2)
            if msg.startswith("model ") and " config " in msg:
                bt = json.loads(msg.split(" config ", 1)[1])["batch_tokens"]
            s = re.match(r"initialised from .*, starting at step (\d+)$", msg)
            if s:
                start = int(s.group(1))
            s = re.match(r"step (\d+) epoch", msg)
            if s:
                end, secs = int(s.group(1)), float(m.group(1))
    return bt, start, end, secs


def batches_per_epoch(batch_tokens, cache={}):
    if batch_tokens not in cache:
        import random
        import train
        from tokenizer import BPE, read_tsv
        if "pairs" not in cache:
            bpe = BPE.load(os.path.join(HERE, "bpe.json"))
            rows = train.encode_split(bpe, read_tsv(os.path.join(HERE, "data", "train.tsv")))
            cache["pairs"] = [p for p in rows if len(p[0]) <= train.MAX_SRC and len(p[1]) <= train.MAX_TGT]
        cache[batch_tokens] = len(train.make_batches(cache["pairs"], batch_tokens, random.Random(0)))
    return cache[batch_tokens]


def totals(name):
    runs = []
    for log in CHAINS[name]:
        bt, start, end, secs = read_log(os.path.join(HERE, "logs", log))
        steps = end - start
        runs.append(dict(log=log, batch_tokens=bt, first_step=start + 1, last_step=end, steps=steps,
                         seconds=secs, epochs=steps / batches_per_epoch(bt)))
    tot = dict(runs=len(runs), train_steps_total=sum(r["steps"] for r in runs),
               train_epochs_total=round(sum(r["epochs"] for r in runs), 1),
               train_seconds_total=round(sum(r["seconds"] for r in runs), 1))
    return runs, tot


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="fail unless weights/NAME.json holds these totals")
    ap.add_argument("--write", action="store_true", help="store the totals in weights/NAME.json")
    args = ap.parse_args()
    bad = 0
    for name in CHAINS:
        runs, tot = totals(name)
        for r in runs:
            print("%-11s %-26s batch_tokens %4d steps %5d-%5d (%5d, %5.2f epochs) %7.1f s" % (
                name, r["log"], r["batch_tokens"], r["first_step"], r["last_step"], r["steps"],
                r["epochs"], r["seconds"]))
        print("%-11s total: %d runs, %d steps, %.1f epochs, %.1f s (%.0f min)\n" % (
            name, tot["runs"], tot["train_steps_total"], tot["train_epochs_total"],
            tot["train_seconds_total"], tot["train_seconds_total"] / 60))
        path = os.path.join(HERE, "weights", name + ".json")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
        # train_seconds_total is also in the JSON (written with the runs, to
        # 0.1 s; the Transformer's run 3 as 5183 s where its log says 5182.9)
        secs = tot.pop("train_seconds_total")
        if abs(cfg.get("train_seconds_total", -1) - secs) > 0.15:
            print("totals: %s.json: train_seconds_total is %r, the logs give %r" % (
                name, cfg.get("train_seconds_total"), secs))
            bad += 1
        if args.write:
            cfg.update(tot)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(cfg, f, indent=1, sort_keys=True)
        elif args.check:
            for k, v in tot.items():
                if cfg.get(k) != v:
                    print("totals: %s.json: %s is %r, the logs give %r" % (name, k, cfg.get(k), v))
                    bad += 1
    if bad:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
