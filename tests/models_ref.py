#!/usr/bin/python3
"""PyTorch reference outputs for the C models (tests/test_models.c).

    models_ref.py random OUTDIR            random-init weights of the four models (fixed seeds)
    models_ref.py decode WEIGHTS OUTDIR [--n N] [--models ...]
        greedy and beam-4 ids of the first N test sentences with
        training/translate.py (slow: minutes for 2000; the files are checked
        in under tests/models_ref/ for the shipped weights, `make models-ref`)
    models_ref.py prepare OUTDIR [--n-attn N]
        what test_models needs at test time (seconds): per model the weights
        to test (training/weights when its checked-in token file matches
        them, else random weights and a fresh 40-sentence token reference), the
        Python tokenisation of every test sentence, and PyTorch's
        teacher-forced attention along the reference paths of the first N
        sentences; OUTDIR/manifest.txt says which.

Token files (NAME.tsv): a first line `sha256 HEX sentences N`, then one line
per test sentence: `index TAB source ids TAB greedy ids TAB beam-4 ids`
(ids space-separated; <eos> included when produced).

Attention files (NAME.attn): little-endian float32, for each sentence i <
n_attn, for the greedy then the beam path (Tout = its length, Tin = source
length): GRU: cross (Tout, Tin); Transformer: encoder (layers, H, Tin, Tin),
decoder self (layers, H, Tout, Tout), cross (layers, H, Tout, Tin).
"""
import argparse
import hashlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINING = os.path.join(ROOT, "training")
sys.path.insert(0, TRAINING)
import blas_env  # noqa: E402  (before torch: OpenBLAS reads its core type when it loads)
blas_env.use_cpu_kernels()
import torch  # noqa: E402
import models  # noqa: E402
import translate as T  # noqa: E402
from tokenizer import BPE, BOS, EOS, read_tsv  # noqa: E402

NAMES = ["concat", "additive", "general", "transformer"]
REF_DIR = os.path.join(ROOT, "tests", "models_ref")
EXTRA_TEXTS = [
    "Open the file", "  two  spaces  ", "Save l'option --all.", "x", "日本語のテキスト 😀 ok",
    "«Ouvrir» … — test", "a.b.c,d;e:f!g?h", "ééé ÉÉÉ ççç", "Ω≈ç√∫ unknown ⊕ symbols",
    "CamelCaseWordsWithoutSpaces", "--verbose=3 -x -vvv", "1234567890 3.14 1e10",
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def cmd_random(out):
    sys.path.insert(0, TRAINING)
    import train
    os.makedirs(out, exist_ok=True)
    for i, name in enumerate(NAMES):
        cfg = dict(train.CONFIGS[name])
        cfg.update(name=name, vocab_size=len(BPE.load().vocab), max_src_tokens=train.MAX_SRC,
                   max_tgt_tokens=train.MAX_TGT, tokenizer="bpe.json", pad_id=0, bos_id=BOS,
                   eos_id=EOS, seed=100 + i)
        torch.manual_seed(100 + i)
        m = models.build(cfg)
        if hasattr(m, "out_bias"):  # zeros at init: make the C side's bias add count
            with torch.no_grad():
                m.out_bias.normal_(0.0, 2.0)
        train.export(m, cfg, os.path.join(out, name), dict(train_steps=0, note="random init"))
    import shutil
    shutil.copy(os.path.join(TRAINING, "bpe.json"), os.path.join(out, "bpe.json"))


def decode(weights, out, n, names):
    torch.set_num_threads(1)
    bpe = BPE.load()
    rows = read_tsv(os.path.join(TRAINING, "data", "test.tsv"))[:n]
    os.makedirs(out, exist_ok=True)
    for name in names:
        path = os.path.join(weights, name + ".safetensors")
        if not os.path.exists(path):
            continue
        m, cfg = T.load_model(name, weights)
        stp = T.Stepper(m, cfg)
        lines = ["sha256 %s sentences %d" % (sha256(path), len(rows))]
        for i, (en, _) in enumerate(rows):
            src = T.prepare_src(bpe, cfg, en)
            g = T.greedy(stp, src)[0]
            b = T.beam(stp, src, 4)
            lines.append("%d\t%s\t%s\t%s" % (i, " ".join(map(str, src)), " ".join(map(str, g)),
                                             " ".join(map(str, b))))
        with open(os.path.join(out, name + ".tsv"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print("models_ref: %s: %d sentences" % (name, len(rows)), flush=True)


def read_ref(path):
    with open(path) as f:
        head = f.readline().split()
        rows = []
        for line in f:
            p = line.rstrip("\n").split("\t")
            rows.append([[int(x) for x in s.split()] for s in p[1:4]])
    return head[1], rows


def capture_mha(mod, store):
    """Wraps an nn.MultiheadAttention so that every call also records its
    per-head weights (the module's own computation otherwise)."""
    fwd = mod.forward

    def wrapped(*a, **k):
        k["need_weights"] = True
        k["average_attn_weights"] = False
        o, w = fwd(*a, **k)
        store.append(w)
        return o, w
    mod.forward = wrapped


@torch.no_grad()
def attention(m, cfg, src, out_ids):
    """Teacher-forced attention along out_ids (what the decoder used)."""
    tin = torch.tensor([[BOS] + out_ids[:-1]])
    s = torch.tensor([src])
    if cfg["arch"] == "gru":
        mem, mask, h = m.encode(s, torch.tensor([len(src)]))
        kp = m.decoder.prepare(mem)
        rows = []
        for t in range(tin.shape[1]):
            h, a = m.decoder.step(m.embed(tin[:, t]), h, mem, kp, mask)
            rows.append(a[0, :len(src)])
        return [torch.stack(rows)]
    enc, dec = [], []
    for layer in m.encoder.layers:
        capture_mha(layer.self_attn, enc)
    for layer in m.decoder.layers:
        capture_mha(layer.self_attn, dec)
    pad = s.eq(0)
    mem = m.encode(s, pad)
    _, ws = m.decode(tin, mem, pad, want_weights=True)
    for layer in list(m.encoder.layers) + list(m.decoder.layers):
        del layer.self_attn.forward
    return [torch.stack([w[0] for w in enc]), torch.stack([w[0] for w in dec]),
            torch.stack([w[0] for w in ws])]


def cmd_prepare(out, n_attn):
    """Per model: the shipped weights when their checked-in reference matches
    them (sha256), else random weights with a fresh 40-sentence reference."""
    torch.set_num_threads(1)
    os.makedirs(out, exist_ok=True)
    trained = os.path.join(TRAINING, "weights")
    rand, rand_ref = os.path.join(out, "random"), os.path.join(out, "random_ref")
    choice = {}
    for n in NAMES:
        w = os.path.join(trained, n + ".safetensors")
        ref = os.path.join(REF_DIR, n + ".tsv")
        if os.path.exists(w) and os.path.exists(ref) and read_ref(ref)[0] == sha256(w):
            choice[n] = (trained, REF_DIR, "trained")
            continue
        if os.path.exists(w):
            print("models_ref: %s: no checked-in reference for training/weights/%s.safetensors "
                  "(`make models-ref`); testing random weights for it" % (n, n))
        choice[n] = (rand, rand_ref, "random")
    if any(c[2] == "random" for c in choice.values()):
        if not all(os.path.exists(os.path.join(rand, n + ".safetensors")) for n in NAMES):
            cmd_random(rand)
        if not all(os.path.exists(os.path.join(rand_ref, n + ".tsv")) and
                   read_ref(os.path.join(rand_ref, n + ".tsv"))[0] ==
                   sha256(os.path.join(rand, n + ".safetensors")) for n in NAMES):
            decode(rand, rand_ref, 40, NAMES)
    bpe = BPE.load()
    texts = []
    for en, fr in read_tsv(os.path.join(TRAINING, "data", "test.tsv")):
        texts += [en, fr]
    texts += EXTRA_TEXTS
    with open(os.path.join(out, "tokenize.tsv"), "w", encoding="utf-8") as f:
        for t in texts:
            ids = bpe.encode(t)
            f.write("%s\t%s\t%s\n" % (t, " ".join(map(str, ids)), bpe.decode(ids)))
    for name in NAMES:
        weights, refdir, _ = choice[name]
        _, rows = read_ref(os.path.join(refdir, name + ".tsv"))
        m, cfg = T.load_model(name, weights)
        with open(os.path.join(out, name + ".attn"), "wb") as f:
            for src, g, b in rows[:n_attn]:
                for path in (g, b):
                    for a in attention(m, cfg, src, path):
                        f.write(a.contiguous().numpy().astype("<f4").tobytes())
    all_trained = all(c[2] == "trained" for c in choice.values())
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("attn_sentences %d\n" % n_attn)
        for n in NAMES:
            f.write("model %s %s %s %s\n" % (n, choice[n][2], choice[n][0], choice[n][1]))
        f.write("http %s\n" % (trained if all_trained else rand))
    print("models_ref: %s; attention of %d sentences" % (
        ", ".join("%s %s" % (n, choice[n][2]) for n in NAMES), n_attn))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["random", "decode", "prepare"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--n-attn", type=int, default=200)
    ap.add_argument("--models", nargs="*", default=NAMES)
    a = ap.parse_args()
    if a.cmd == "random":
        cmd_random(a.args[0])
    elif a.cmd == "decode":
        decode(a.args[0], a.args[1], a.n, a.models)
    else:
        cmd_prepare(a.args[0], a.n_attn)


if __name__ == "__main__":
    main()
