#!/usr/bin/python3
"""Prints results.json as the Markdown tables of README.md."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def peak_note(al):
    """The mean over target tokens of the largest attention weight, if measured."""
    return "; mean peak weight %.2f" % al["mean_peak_weight"] if "mean_peak_weight" in al else ""


res = json.load(open(os.path.join(HERE, "results.json")))
for split in ("test", "heldout"):
    r = res.get(split)
    if not r:
        continue
    print("### %s split (%d pairs)\n" % (split, r["sentences"]))
    print("| model | params | MB | train steps | train min | best valid NLL | greedy BLEU | beam-4 BLEU | copy-token alignment |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("| English unchanged | | | | | | %.2f | | |" % r["unchanged_english"]["bleu"])
    for name in ("concat", "additive", "general", "transformer"):
        m = r.get(name)
        if not m:
            continue
        al = m.get("alignment", {})
        if "best_head" in al:
            b = al["best_head"]
            a = "%.1f%% (layer %d head %d; chance %.1f%%%s)" % (
                100 * b["accuracy"], b["layer"], b["head"], 100 * al["chance"], peak_note(b))
        elif al:
            a = "%.1f%% (chance %.1f%%%s)" % (100 * al["accuracy"], 100 * al["chance"], peak_note(al))
        else:
            a = ""
        g = (m.get("greedy") or m.get("greedyb") or {}).get("bleu")
        bm = m.get("beam4", {}).get("bleu")
        print("| %s | %s | %.1f | %s | %.0f | %s | %s | %s | %s |" % (
            name, m["params"], m["params"] * 4 / 1e6, m.get("train_steps"), (m.get("train_seconds") or 0) / 60,
            m.get("best_valid_nll"), "" if g is None else "%.2f" % g, "" if bm is None else "%.2f" % bm, a))
    print()
    t = r.get("transformer", {}).get("alignment", {})
    if "per_layer_head" in t:
        print("Transformer copy-token alignment per decoder layer (rows) and head (columns), %d copy tokens:\n" % t["copy_tokens"])
        print("| layer | " + " | ".join("head %d" % h for h in range(len(t["per_layer_head"][0]))) + " |")
        print("|---" * (1 + len(t["per_layer_head"][0])) + "|")
        for l, row in enumerate(t["per_layer_head"]):
            print("| %d | " % l + " | ".join("%.1f%%" % (100 * x) for x in row) + " |")
        print()
