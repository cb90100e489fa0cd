#!/usr/bin/python3
"""Builds the English->French corpus from Debian's French message catalogs.

Steps (all deterministic):
  1. (--install) apt-get install -y --no-install-recommends every package in
     training/packages.txt (one name a line).
  2. Reads every /usr/share/locale/fr/LC_MESSAGES/*.mo (the .mo parser is
     below; no gettext module), and finds the owning package with dpkg -S.
  3. Keeps usable pairs (filters in keep_pair(), listed in README.md).
  4. Pairs from the RESERVED packages go to data/heldout.tsv only (and only
     when their English text is not in train/valid/test); every other pair
     is grouped by a normalised English key and the keys are split
     train/valid/test with random.Random(SEED).

Output: data/{train,valid,test,heldout}.tsv, one pair a line:
    english <TAB> french <TAB> package:domain
"""
import argparse
import collections
import glob
import os
import random
import re
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
LOCALE_DIR = "/usr/share/locale/fr/LC_MESSAGES"
SEED = 20261130
N_VALID = 1000
N_TEST = 2000
RESERVED = ["nano", "wget", "make", "gawk", "mutt", "cpio", "sharutils", "texinfo"]
# Catalogs that are lists of proper names (mostly left untranslated), not UI text.
SKIP_DOMAINS = {"iso_639-3", "iso_639_3", "iso_3166-2", "iso_3166_2", "iso_639-5",
                "iso_639_5", "iso_15924", "iso_4217", "xkeyboard-config",
                "libgweather-4.0-locations"}
MAX_EN_CHARS = 80
MAX_FR_CHARS = 120
MAX_WORDS = 16


def read_mo(path):
    """Returns a list of (msgid_bytes, msgstr_bytes) from a GNU .mo file."""
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic == 0x950412DE:
        e = "<"
    elif magic == 0xDE120495:
        e = ">"
    else:
        raise ValueError("not a .mo file: " + path)
    _rev, n, o_orig, o_trans = struct.unpack(e + "4I", data[4:20])
    out = []
    for i in range(n):
        ln, off = struct.unpack(e + "2I", data[o_orig + 8 * i:o_orig + 8 * i + 8])
        tl, toff = struct.unpack(e + "2I", data[o_trans + 8 * i:o_trans + 8 * i + 8])
        out.append((data[off:off + ln], data[toff:toff + tl]))
    return out


def owners(paths):
    """Maps each path to its Debian package name (dpkg -S), '?' when unknown."""
    res = {}
    r = subprocess.run(["dpkg", "-S"] + paths, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if ": " not in line or line.startswith("diversion"):
            continue
        pkgs, p = line.split(": ", 1)
        pkg = pkgs.split(",")[0].strip().split(":")[0]
        res[p] = pkg
    return {p: res.get(p, "?") for p in paths}


SPACES = re.compile(r"[ \u00a0\u202f\u2009\u2007]+")
PRINTF = re.compile(r"%")                       # any % (printf, %(name)s, 100%)
BRACES = re.compile(r"[{}]|\$\{|\$[A-Za-z_]")  # {0}, {name}, ${var}, $VAR
MARKUP = re.compile(r"<[A-Za-z/!?]|&[A-Za-z#][A-Za-z0-9]*;")
ACCEL = re.compile(r"(?:(?<=^)|(?<=[\s\(\[\"'/-]))_(?=[^\W_])")
LETTER = re.compile(r"[A-Za-z]")


def normalise(s):
    """Whitespace: NBSP, narrow NBSP, thin and figure spaces become ' ';
    runs of spaces become one; leading/trailing spaces go. Accelerator
    underscores (_File, Save _As) are removed."""
    s = ACCEL.sub("", s)
    s = SPACES.sub(" ", s)
    return s.strip(" ")


def keep_pair(en, fr):
    """en, fr: normalised str. Returns a reason string when dropped, else ''."""
    if not en or not fr:
        return "empty"
    for s in (en, fr):
        if any(c in s for c in "\n\r\t\x0b\x0c\x00\x04"):
            return "control"
        if PRINTF.search(s):
            return "placeholder"
        if BRACES.search(s):
            return "placeholder"
        if MARKUP.search(s):
            return "markup"
        if "&" in s or "\\" in s or "_" in s[:1]:
            return "markup"
        if "~" in s:
            return "markup"
    if not LETTER.search(en):
        return "noletter"
    if len(en) > MAX_EN_CHARS or len(fr) > MAX_FR_CHARS:
        return "length"
    if len(en.split(" ")) > MAX_WORDS:
        return "length"
    r = len(fr) / len(en)
    if len(en) >= 10 and (r < 0.5 or r > 3.0):
        return "ratio"
    if any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f or c in "\u2028\u2029\ufeff\u200b" for c in en + fr):
        return "control"
    return ""


def key_of(en):
    """Grouping key for the split: lowercase, trailing : . ... ! ? removed."""
    k = en.lower().rstrip(" .:!?\u2026")
    return k if k else en.lower()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--install", action="store_true", help="apt-get install the package list first")
    ap.add_argument("--out", default=os.path.join(HERE, "data"))
    args = ap.parse_args()
    pkgs = [l.strip() for l in open(os.path.join(HERE, "packages.txt")) if l.strip() and not l.startswith("#")]
    if args.install:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends"] + pkgs, check=True, env=env)

    paths = sorted(glob.glob(os.path.join(LOCALE_DIR, "*.mo")))
    own = owners(paths)
    stats = collections.Counter()
    per_pkg = collections.Counter()
    # english -> Counter(french) ; english -> set(origin)
    pool = collections.defaultdict(collections.Counter)
    origin = {}
    held = collections.defaultdict(collections.Counter)
    held_origin = {}
    for p in paths:
        dom = os.path.basename(p)[:-3]
        pkg = own[p]
        if dom in SKIP_DOMAINS:
            continue
        entries = read_mo(p)
        charset = "utf-8"
        for mid, mstr in entries:
            if mid == b"":
                m = re.search(rb"charset=([A-Za-z0-9_.-]+)", mstr)
                if m:
                    charset = m.group(1).decode("ascii")
        for mid, mstr in entries:
            stats["entries"] += 1
            if mid == b"":
                stats["drop_header"] += 1
                continue
            if b"\x04" in mid:
                stats["drop_msgctxt"] += 1
                continue
            if b"\x00" in mid or b"\x00" in mstr:
                stats["drop_plural"] += 1
                continue
            try:
                en = normalise(mid.decode("utf-8"))   # msgids are ASCII/UTF-8
                fr = normalise(mstr.decode(charset))
            except (UnicodeDecodeError, LookupError):
                stats["drop_encoding"] += 1
                continue
            why = keep_pair(en, fr)
            if why:
                stats["drop_" + why] += 1
                continue
            stats["kept"] += 1
            if pkg in RESERVED:
                held[en][fr] += 1
                held_origin.setdefault(en, pkg + ":" + dom)
            else:
                pool[en][fr] += 1
                origin.setdefault(en, pkg + ":" + dom)
                per_pkg[pkg] += 1

    # One French per English: the most frequent, ties -> smallest string.
    def pick(c):
        return sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]

    pairs = {en: pick(c) for en, c in pool.items()}
    stats["unique_english"] = len(pairs)
    groups = collections.defaultdict(list)
    for en in sorted(pairs):
        groups[key_of(en)].append(en)
    keys = sorted(groups)
    random.Random(SEED).shuffle(keys)
    split = {"test": [], "valid": [], "train": []}
    n_te = n_va = 0
    for k in keys:
        if n_te < N_TEST:
            split["test"].append(k)
            n_te += len(groups[k])
        elif n_va < N_VALID:
            split["valid"].append(k)
            n_va += len(groups[k])
        else:
            split["train"].append(k)
    os.makedirs(args.out, exist_ok=True)
    counts = {}
    seen = set()
    for name in ("train", "valid", "test"):
        rows = sorted((en, pairs[en], origin[en]) for k in split[name] for en in groups[k])
        rng = random.Random(SEED + len(name))
        rng.shuffle(rows)
        with open(os.path.join(args.out, name + ".tsv"), "w", encoding="utf-8") as f:
            for r in rows:
                f.write("\t".join(r) + "\n")
        counts[name] = len(rows)
        seen.update(key_of(r[0]) for r in rows)
    hrows = sorted((en, pick(c), held_origin[en]) for en, c in held.items() if key_of(en) not in seen)
    with open(os.path.join(args.out, "heldout.tsv"), "w", encoding="utf-8") as f:
        for r in hrows:
            f.write("\t".join(r) + "\n")
    counts["heldout"] = len(hrows)
    for k in sorted(stats):
        print("%-20s %d" % (k, stats[k]))
    for k, v in counts.items():
        print("%-20s %d" % ("split_" + k, v))
    print("per package (kept pairs, before dedup, reserved excluded):")
    for k, v in sorted(per_pkg.items(), key=lambda kv: (-kv[1], kv[0])):
        print("  %-36s %d" % (k, v))


if __name__ == "__main__":
    main()
