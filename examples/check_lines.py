# check_lines.py - what the library examples' checkers share: a program's
# output lines "label = v1 v2 ..." against PyTorch's, label for label,
# every value within tol, and no line more or fewer.


def check_lines(name, want, text, tol=2e-6):
    """Prints each line of text that differs from want (a list of lines) and
    returns how many differ."""
    got = text.strip().split("\n")
    bad = 0
    for i, line in enumerate(want):
        g = got[i] if i < len(got) else ""
        gv = [float(x) for x in g.split("=")[1].split()] if "=" in g else []
        wv = [float(x) for x in line.split("=")[1].split()]
        if g.split("=")[0] != line.split("=")[0] or len(gv) != len(wv) or any(abs(a - b) > tol for a, b in zip(gv, wv)):
            print(f"{name}: line {i}: got {g!r}, PyTorch {line!r}")
            bad += 1
    if len(got) != len(want):
        print(f"{name}: {len(got)} lines, PyTorch {len(want)}")
        bad += 1
    return bad
