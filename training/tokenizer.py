#!/usr/bin/python3
"""A small, exactly specified BPE shared by English and French.

Specification (a C reimplementation must follow it bit for bit):

Text. Input is a UTF-8 string already normalised by corpus.py (single ASCII
spaces, no leading/trailing space, no tabs/newlines). Case is kept.

Pre-tokenisation. Split the text on ' ' (empty parts dropped): these are
words. Each word is cut into pieces: every code point in PUNCT is a piece
of its own; each maximal run of other code points is one piece. The first
piece of every word gets the marker U+2581 '\u2581' prepended. So
"Save l'option --all." -> ['\u2581Save', '\u2581l', "'", 'option', '\u2581-',
'-', 'all', '.'].

Symbols. A piece starts as the list of its code points (the marker is a
code point like any other). Merges never cross pieces.

Encoding a piece. Repeat: among all adjacent symbol pairs (a, b) of the
piece that appear in the merge list, take the one with the lowest rank
(index in the merge list); if none, stop. Replace every occurrence of that
pair, scanning left to right without overlap, by the single symbol a+b.
Then each symbol becomes its id in the vocabulary; a symbol that is not in
the vocabulary (only possible for a single code point never seen in
training) becomes <unk>.

Vocabulary ids: 0 <pad>, 1 <bos>, 2 <eos>, 3 <unk>, then every single code
point seen in the training text (marker included), in code point order,
then the result of each merge, in merge order.

Decoding. Concatenate the strings of the ids, skipping ids 0-3; replace
every U+2581 by ' '; drop one leading ' ' when present.

Training (learn_bpe). Counts every piece of the training split's English
and French sides. Repeatedly merges the most frequent adjacent pair
(counts weighted by piece frequency); ties are broken by the smallest
(a, b) in code point order (Python string comparison, = UTF-8 byte order);
stops when the vocabulary reaches vocab_size or no pair occurs twice.

Files: bpe.json (everything), bpe_vocab.txt (one token a line, line number =
id, starting at 0) and bpe_merges.txt (one merge a line: "a b", rank = line
number starting at 0). Tokens never contain ' ', tab or newline.
"""
import argparse
import collections
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
MARK = "\u2581"
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]
PAD, BOS, EOS, UNK = 0, 1, 2, 3
PUNCT = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" + "\u00ab\u00bb\u2018\u2019\u201c\u201d\u2026\u2013\u2014\u2022\u00b7\u00bf\u00a1"
PUNCT_SET = frozenset(PUNCT)


def pretokenize(text):
    out = []
    for word in text.split(" "):
        if not word:
            continue
        first = True
        run = []
        for ch in word:
            if ch in PUNCT_SET:
                if run:
                    out.append((MARK if first else "") + "".join(run))
                    first = False
                    run = []
                out.append((MARK if first else "") + ch)
                first = False
            else:
                run.append(ch)
        if run:
            out.append((MARK if first else "") + "".join(run))
    return out


def learn_bpe(texts, vocab_size):
    words = collections.Counter()
    for t in texts:
        words.update(pretokenize(t))
    chars = sorted(set(c for w in words for c in w) | {MARK})
    wlist = [list(w) for w in words]
    wfreq = [words[w] for w in words]
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, syms in enumerate(wlist):
        for a, b in zip(syms, syms[1:]):
            pairs[(a, b)] += wfreq[i]
            where[(a, b)].add(i)
    merges = []
    n_target = vocab_size - len(SPECIALS) - len(chars)
    import heapq
    heap = [(-c, p) for p, c in pairs.items()]
    heapq.heapify(heap)
    while len(merges) < n_target and heap:
        negc, p = heapq.heappop(heap)
        c = pairs.get(p, 0)
        if c != -negc:
            if c > 0:
                heapq.heappush(heap, (-c, p))
            continue
        if c < 2:
            break
        merges.append(p)
        a, b = p
        ab = a + b
        changed = collections.Counter()
        for i in list(where[p]):
            syms = wlist[i]
            f = wfreq[i]
            for x, y in zip(syms, syms[1:]):
                pairs[(x, y)] -= f
                changed[(x, y)] += 1
            new = []
            j = 0
            while j < len(syms):
                if j + 1 < len(syms) and syms[j] == a and syms[j + 1] == b:
                    new.append(ab)
                    j += 2
                else:
                    new.append(syms[j])
                    j += 1
            wlist[i] = new
            for x, y in zip(new, new[1:]):
                pairs[(x, y)] += f
                where[(x, y)].add(i)
                changed[(x, y)] += 1
        for q in changed:
            if pairs[q] > 0:
                heapq.heappush(heap, (-pairs[q], q))
        del pairs[p]
    return chars, merges


class BPE:
    def __init__(self, vocab, merges):
        self.vocab = list(vocab)
        self.ids = {t: i for i, t in enumerate(self.vocab)}
        self.merges = [tuple(m) for m in merges]
        self.rank = {m: i for i, m in enumerate(self.merges)}
        self.cache = {}

    @classmethod
    def load(cls, path=os.path.join(HERE, "bpe.json")):
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        return cls(j["vocab"], j["merges"])

    def encode_piece(self, piece):
        r = self.cache.get(piece)
        if r is not None:
            return r
        syms = list(piece)
        rank = self.rank
        while len(syms) > 1:
            best = None
            for x, y in zip(syms, syms[1:]):
                k = rank.get((x, y))
                if k is not None and (best is None or k < best):
                    best = k
            if best is None:
                break
            a, b = self.merges[best]
            new = []
            j = 0
            while j < len(syms):
                if j + 1 < len(syms) and syms[j] == a and syms[j + 1] == b:
                    new.append(a + b)
                    j += 2
                else:
                    new.append(syms[j])
                    j += 1
            syms = new
        r = [self.ids.get(s, UNK) for s in syms]
        self.cache[piece] = r
        return r

    def encode(self, text):
        out = []
        for p in pretokenize(text):
            out.extend(self.encode_piece(p))
        return out

    def tokens(self, ids):
        return [self.vocab[i] for i in ids]

    def decode(self, ids):
        s = "".join(self.vocab[i] for i in ids if i >= len(SPECIALS)).replace(MARK, " ")
        return s[1:] if s.startswith(" ") else s


def read_tsv(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            rows.append((parts[0], parts[1]))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", default=os.path.join(HERE, "data", "train.tsv"))
    ap.add_argument("--vocab-size", type=int, default=3600)
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        assert pretokenize("Save l'option --all.") == ["\u2581Save", "\u2581l", "'", "option", "\u2581-", "-", "all", "."]
        b = BPE.load()
        for t in ["Fichier introuvable", "Try 'tar --help' for more information.", "« Ouvrir » …"]:
            assert b.decode(b.encode(t)) == t, (t, b.tokens(b.encode(t)))
        print("tokenizer self-test ok")
        return
    rows = read_tsv(args.train)
    texts = [e for e, f in rows] + [f for e, f in rows]
    chars, merges = learn_bpe(texts, args.vocab_size)
    vocab = SPECIALS + chars + [a + b for a, b in merges]
    assert len(set(vocab)) == len(vocab)
    with open(os.path.join(args.out, "bpe.json"), "w", encoding="utf-8") as f:
        json.dump({"format": "bpe-v1", "marker": MARK, "punct": PUNCT, "specials": SPECIALS,
                   "vocab": vocab, "merges": [list(m) for m in merges]}, f, ensure_ascii=False, indent=0)
    with open(os.path.join(args.out, "bpe_vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    with open(os.path.join(args.out, "bpe_merges.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(a + " " + b for a, b in merges) + "\n")
    bpe = BPE(vocab, merges)
    n_tok = [len(bpe.encode(t)) for t in texts]
    print("vocab %d (chars %d, merges %d); tokens/sentence mean %.1f max %d; unk %d" % (
        len(vocab), len(chars), len(merges), sum(n_tok) / len(n_tok), max(n_tok),
        sum(bpe.encode(t).count(UNK) for t in texts)))


if __name__ == "__main__":
    main()
