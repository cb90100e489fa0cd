#!/usr/bin/env python3
"""tests/readme_examples.py - runs the curl examples of README.md against a
live server and compares each answer with the one the README prints.

Usage: tests/readme_examples.py BASE_URL [README]      (make test-readme)

An example is a `curl` command in a ```sh block (continued over lines
ending in a backslash or inside a quoted argument) followed by a comment
that starts with `# {`: the answer it shows, JSON, possibly over several
comment lines (or, after a block's last command, a ```json block). Answers shown
with `...` (elided) are not compared and count as skipped. Numbers must
agree within 1e-6 x max(1, |shown|) (float32 rounding: another CPU's
kernels may print other last digits), everything else exactly, except ids: a 32-hex-digit id in the
README stands for the one the server drew, and the later commands of the
same block are sent with the server's id in its place.
"""
import json
import re
import subprocess
import sys

HEX_ID = re.compile(r"^[0-9a-f]{32}$")


def examples(text):
    """(block, command, shown answer or None when elided) per example."""
    out = []
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, re.S)
    for b, (lang, block) in enumerate(blocks):
        if lang != "sh":
            continue
        lines = block.split("\n")
        i = 0
        while i < len(lines):
            if not lines[i].startswith("curl "):
                i += 1
                continue
            cmd = [lines[i]]
            # continued: a backslash at the end, or a quoted argument still open
            while cmd[-1].endswith("\\") or "\n".join(cmd).count("'") % 2:
                i += 1
                cmd.append(lines[i])
            i += 1
            shown = []
            if i < len(lines) and lines[i].startswith("# {"):
                shown.append(lines[i][2:])
                i += 1
                while i < len(lines) and lines[i].startswith("#  "):
                    shown.append(lines[i][2:].strip())
                    i += 1
            elif not any(l.startswith("curl ") for l in lines[i:]) and b + 1 < len(blocks) and \
                    blocks[b + 1][0] == "json":
                shown.append(blocks[b + 1][1].strip())  # the answer in a json block of its own
            if shown:
                answer = "".join(shown)
                out.append((b, "\n".join(cmd), None if "..." in answer else answer))
    return out


def same(want, got, ids, path="$"):
    """None when got matches want (ids mapped as found), else why not."""
    if isinstance(want, bool) or want is None:
        return None if type(got) is type(want) and got == want else "%s: %r, shown %r" % (path, got, want)
    if isinstance(want, (int, float)):
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return "%s: %r, shown %r" % (path, got, want)
        return None if abs(got - want) <= 1e-6 * max(abs(want), 1.0) else "%s: %r, shown %r" % (path, got, want)
    if isinstance(want, str):
        if HEX_ID.match(want) and isinstance(got, str) and HEX_ID.match(got):
            ids.setdefault(want, got)
            return None if ids[want] == got else "%s: id %s, shown %s" % (path, got, want)
        return None if got == want else "%s: %r, shown %r" % (path, got, want)
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return "%s: %s, shown a list of %d" % (path, json.dumps(got)[:80], len(want))
        for k, (w, g) in enumerate(zip(want, got)):
            why = same(w, g, ids, "%s[%d]" % (path, k))
            if why:
                return why
        return None
    if not isinstance(got, dict) or sorted(got) != sorted(want):
        return "%s: keys %s, shown %s" % (path, sorted(got) if isinstance(got, dict) else type(got).__name__,
                                          sorted(want))
    for k in want:
        why = same(want[k], got[k], ids, "%s.%s" % (path, k))
        if why:
            return why
    return None


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    base = sys.argv[1].rstrip("/")
    text = open(sys.argv[2] if len(sys.argv) > 2 else "README.md").read()
    passed = failed = skipped = 0
    ids, block = {}, None
    for b, cmd, shown in examples(text):
        if b != block:
            ids, block = {}, b
        name = cmd.split("\n")[0][:90]
        if shown is None:
            print("SKIPPED (answer elided): %s" % name)
            skipped += 1
            continue
        run = re.sub(r"(http://)?(127\.0\.0\.1|localhost):8080", base, cmd)
        for want_id, got_id in ids.items():
            run = run.replace(want_id, got_id)
        res = subprocess.run(["bash", "-c", run], capture_output=True, text=True, timeout=60)
        try:
            why = same(json.loads(shown), json.loads(res.stdout), ids)
        except ValueError as e:
            why = "not JSON (%s): %r" % (e, res.stdout[:200])
        if why:
            print("FAIL %s\n    %s" % (name, why))
            failed += 1
        else:
            passed += 1
    print("readme examples: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    sys.exit(1 if failed or passed == 0 else 0)


if __name__ == "__main__":
    main()
