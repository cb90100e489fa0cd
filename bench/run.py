"""run.py - runs every benchmark of `make bench` and prints one report: the machine's measured peaks, this library beside ONNX Runtime (C API), PyTorch and OpenBLAS with the issue's targets, then the wire and service rows.

Order: the peak program (bench/peak.c), then ours (bench_kernels, public
calls) and ONNX Runtime (bench/ort_capi.c), each once over every length,
then the two in three turns at each length (a few seconds apart: the host's
speed moves between minutes), each figure the best of its four medians (a
machine shared with other work then penalises neither side for when it
ran), PyTorch, the long-sequence rows
(bench_kernels --long: sparse local_global and linear attention at
L = 32768 against the dense core timed on one head), the wire and service
rows, and the peak program again (the better of the two peak runs is used).
Between ORT and PyTorch, what the softmax's exponentials cost: the float32
core on one thread in turns with bench_kernels_noexp, the same library
built with each exponential replaced by its argument (wrong answers; the
Makefile's BENCH_NOEXP), at L = 512 and 1024.

GFLOP/s count 4 L^2 E flops for the attention core (QK^T and PV over all
heads), 2 L (L+1) E for causal rows (only the L (L+1)/2 query-key pairs a
causal attention computes), 4 Lk E for a decode step and 4 L^2 E + 8 L E^2
for multi-head with its four projections. "% peak" is ours over the
measured float32 FMA peak on the same number of threads.

OpenBLAS 0.3.21's run-time CPU detection falls back to its SSE3 "Prescott"
kernels on CPUs it does not know; unless OPENBLAS_CORETYPE is already set,
it is set from the CPU's flags (Cooperlake for AVX-512 with BF16, SkylakeX
for AVX-512, Haswell for AVX2), for the BLAS rows and for PyTorch, whose
BLAS is the same library. The header says what OpenBLAS detected and what
ran.

Usage: /usr/bin/python3 bench/run.py [--build DIR] [--threads N]
"""
import glob
import json
import os
import platform
import subprocess
import sys

from service_bench import bench_parser
from service_table import print_service, print_sessions, print_table, ratio

E = 512
LS = (128, 512, 1024, 2048, 4096)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "training"))
import blas_env  # noqa: E402
CHECK_LIMIT = 1e-4
LENGTHS = (128, 512, 1024, 2048, 4096)  # bench_kernels' and ort_capi's own
TURNS = 3  # turns of ours and ORT at each length after the full runs
EXP_LENGTHS = (512, 1024)  # where the exponentials' cost is measured (exp_costs)
# turns of the two builds there: with 3, one run (2026-12-04 08:20 UTC) put
# the build without exponentials 5% above the one with them at L = 512,
# which 6 alternating turns a minute later put 9% below it
EXP_TURNS = 5
# A vector of 16 scores costs its two products 2 x 64 multiply-adds (d =
# 64); bench/peak.c measures how many more slots of the multiply-add units
# its exponential takes ("exp_units": 8 on Zen 5, the multiply by log2 e and
# the multiply-adds; the rounding, clamp and vscalefps run beside them).
PRODUCT_FMAS = 2 * 64


def exp_ceiling(r, noexp_share):
    """The share of the peak the core could reach with its exponentials,
    from the share it reaches without them: the multiply-add units bound.
    None when bench/peak.c did not measure the exponential."""
    u = r["peak"].get("exp_units")
    return noexp_share * PRODUCT_FMAS / (PRODUCT_FMAS + u) if u is not None and u >= 0 else None


def run_json(cmd, what, env=None):
    """Runs one harness; returns its JSON object, or {} (with a note) if it
    fails. A harness that prints its figures and then fails a check (exit
    status 1) keeps its figures, with a note."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode:
            print("note: %s failed (status %d): %s" % (what, p.returncode, p.stderr.strip()[-600:]),
                  file=sys.stderr)
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError) as e:
        print("note: %s did not run: %s" % (what, e), file=sys.stderr)
        return {}


def best_of(a, b):
    """Per key, the smaller time of two runs; a failed check (ok_ 0, the
    larger diff_) in either run stays failed; labels and memory from a."""
    out = dict(a)
    for k, v in b.items():
        old = a.get(k)
        if not isinstance(v, (int, float)) or not isinstance(old, (int, float)):
            out.setdefault(k, v)
        elif k.startswith("ok_"):
            out[k] = min(v, old)
        elif k.startswith("diff_") or k == "check_failures":
            out[k] = max(v, old)
        elif not k.startswith("mem_") and k not in ("threads", "ort_api_version"):
            out[k] = min(v, old)
    return out


def cpu_info():
    name, flags = platform.processor() or "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return name, flags


def ort_library():
    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    found = sorted(glob.glob(os.path.join(HERE, "node_modules", "onnxruntime-node", "bin", "napi-v*",
                                          "linux", arch, "libonnxruntime.so*")))
    return found[-1] if found else None


def gf(flops, t):
    return flops / t / 1e9 if t else None


def fmt(x, f=None):
    """x with format f; by default whole numbers, one decimal below 10."""
    if x is None:
        return "n/a"
    return (f or ("%.1f" if abs(x) < 10 else "%.0f")) % x


def ort_best(ort, row, l):
    """The fastest ONNX Runtime form of a row whose output matched ours:
    (seconds, form, failed checks). Forms: core MultiHeadAttention (mha) or Attention-23 (sdpa);
    multi-head the plain graph or the fused Attention op."""
    forms = ("graph", "fused") if row == "mha" else ("mha", "sdpa")
    best, form, bad = None, None, []
    for f in forms:
        key = "%s_%s_%d" % (row, f, l)
        if ort.get("ok_" + key) == 0:  # a failed form's time is never the peer's figure
            bad.append("%s off by %.1e" % (f, ort.get("diff_" + key, float("nan"))))
            continue
        t = ort.get(key)
        if isinstance(t, (int, float)) and (best is None or t < best):
            best, form = t, f
    return best, form, bad


def past(x, target):
    """x for a miss of target: two decimals, or three where two would
    print the target itself (0.553x against <= 0.55x)."""
    return "%.3f" % x if "%.2f" % x == "%.2f" % target else "%.2f" % x


def vs_ort(t, o, flops, peak):
    """A miss of the 1.2x-ORT target, with what explains it: where ORT
    itself runs against the peak, and what 1.2x of it would need."""
    if o is None:
        return "no ONNX Runtime figure (skipped: see the ORT lines under the table)"
    if o / t >= 1.2:
        return None
    if not peak:
        return "%sx ORT" % past(o / t, 1.2)
    need = 1.2 * flops / o / 1e9 / peak
    return "%sx ORT; ORT runs at %.0f%% of peak, so 1.2x ORT needs %.0f%%%s" % (
        past(o / t, 1.2), 100 * flops / o / 1e9 / peak, 100 * need, " (above the peak)" if need > 1 else "")


def status(misses, bad=None, t=1):
    if t is None:
        return "skipped: no figure from bench_kernels"
    if bad:
        return "FAIL: ORT output differs from ours (%s)" % ", ".join(bad)
    misses = [m for m in misses if m]
    return "met" if not misses else "missed: " + "; ".join(misses)


class Rows:
    """The kernel table: one add() per row, GFLOP/s cells from seconds."""
    HDR = ("row", "L", "ours ms", "ours GFLOP/s", "% peak", "ORT GFLOP/s", "torch", "BLAS", "vs ORT",
           "target", "status")

    def __init__(self, r, peak):
        self.r, self.peak, self.rows = r, peak, []

    def add(self, row, l, flops, t, o=None, form=None, torch_t=None, blas_t=None, target="", st=""):
        g = gf(flops, t)
        ort_cell = fmt(gf(flops, o)) + (" (%s)" % form if form else "") if o is not None else "-"
        self.rows.append((row, str(l), fmt(t * 1e3 if t else None, "%.3f" if t and t < 1e-3 else "%.2f"),
                          fmt(g), fmt(100 * g / self.peak if g and self.peak else None, "%.0f%%"), ort_cell,
                          fmt(gf(flops, torch_t)), fmt(gf(flops, blas_t)) if blas_t else "-",
                          ratio(o, t) if o is not None else "-", target, st))


def exp_costs(b, env):
    """The float32 core at EXP_LENGTHS on one thread (bench_kernels --cpu:
    least process CPU time) beside the same library built with every
    exponential of the softmax replaced by its argument
    (bench_kernels_noexp: wrong answers), EXP_TURNS turns of the two: what the
    exponentials cost the core. Keys bench_kernels_L, bench_kernels_noexp_L."""
    out = {}
    for l in EXP_LENGTHS:
        for _ in range(EXP_TURNS):
            for who in ("bench_kernels", "bench_kernels_noexp"):
                t = run_json([os.path.join(b, who), "--cpu", "1", str(l)], "%s --cpu 1 %d" % (who, l),
                             env).get("cpu_core_%d" % l)
                key = "%s_%d" % (who, l)
                if t and (key not in out or t < out[key]):
                    out[key] = t
    return out


def exp_cost(r, l):
    """(the core's 1-thread CPU time at l, the same without exponentials,
    and their shares of the 1-thread peak) from exp_costs, or None."""
    e, p1 = r.get("exp", {}), r["peak"].get("fp32_1t")
    c, z = e.get("bench_kernels_%d" % l), e.get("bench_kernels_noexp_%d" % l)
    if not (c and z and p1):
        return None
    f = 4.0 * l * l * E
    return c, z, gf(f, c) / p1, gf(f, z) / p1


def exp_units_note(r):
    """What bench/peak.c measured of the exponential's cost to the
    multiply-add units, and the ceiling it sets."""
    u = r["peak"].get("exp_units")
    if u is None:
        return "The exponential's cost to the multiply-add units was not measured (%s)." % r["peak"].get(
            "exp_units_why", "bench/peak.c did not run")
    return ("The exponential of 16 scores (lib/simd_math.h, exp_soft) takes %.1f slots of the multiply-add units "
            "(bench/peak.c: twelve FMA chains with one exponential a step, one thread), against the %d "
            "multiply-adds of the 16 scores' two products (d = 64), so the core's ceiling is %d/%.1f of the share "
            "it reaches without them." % (u, PRODUCT_FMAS, PRODUCT_FMAS, PRODUCT_FMAS + u))


def exp_note(r, l):
    """What a core row's miss adds: the share of the peak the core reaches
    on one thread without its exponentials (at the nearest measured L)."""
    near = min(EXP_LENGTHS, key=lambda x: abs(x - l))
    m = exp_cost(r, near)
    if not m:
        return ""
    c = exp_ceiling(r, m[3])
    return "; without its exponentials the core reaches %.0f%% of peak (1 thread, L = %d)%s" % (
        100 * m[3], near, ", so %.0f%% with them at most" % (100 * c) if c else "")


def core_rows(t, r, l):
    ours, ort, pt, peak = r["ours"], r["ort"], r["torch"], t.peak
    f = 4.0 * l * l * E
    c = ours.get("core_%d" % l)
    o, form, bad = ort_best(ort, "core", l)
    share = gf(f, c) / peak if c and peak else None
    miss = vs_ort(c, o, f, peak) if c else None
    misses = [miss + exp_note(r, l) if miss and o is not None else miss]
    if l >= 1024:
        misses.append("no measured peak" if share is None else
                      "%.1f%% of peak%s" % (100 * share, "" if miss else exp_note(r, l)) if share < 0.85 else None)
    t.add("core", l, f, c, o, form, pt.get("core_%d" % l), ours.get("blas_%d" % l),
          ">=1.2x ORT" + (", >=85% peak" if l >= 1024 else ""), status(misses, bad, c))


def bf16_rows(t, r, l):
    """The core with precision bf16 beside the float32 core of the same run."""
    ours = r["ours"]
    f = 4.0 * l * l * E
    b, c = ours.get("core_bf16_%d" % l), ours.get("core_%d" % l)
    miss = None
    if l >= 1024 and b and c and c / b < 1.6:
        miss = "%.2fx the float32 core (wall time on a shared machine: see bench_kernels --bf16 for CPU time)" % (c / b)
    t.add("core bf16", l, f, b, target=(">=1.6x core (%s)" % ratio(c, b)) if l >= 1024 else "(%s core)" % ratio(c, b),
          st=status([miss], None, b and c))


def weights_rows(t, r, l):
    ours = r["ours"]
    f = 4.0 * l * l * E
    w, c = ours.get("weights_%d" % l), ours.get("core_%d" % l)
    miss = None
    if w and c and w / c > 1.25:
        nbytes = 8.0 * l * l * 4
        miss = "%sx core: the extra %.2f ms writes %.1f MB of weights (%.1f GB/s)" % (
            past(w / c, 1.25), (w - c) * 1e3, nbytes / 1e6, nbytes / (w - c) / 1e9)
    t.add("weights", l, f, w, torch_t=r["torch"].get("weights_%d" % l),
          target="<=1.25x core (%s)" % ratio(w, c), st=status([miss], None, w and c))


def causal_rows(t, r, l):
    ours, ort = r["ours"], r["ort"]
    f = 2.0 * l * (l + 1) * E  # the L (L+1)/2 pairs computed
    w, c = ours.get("causal_%d" % l), ours.get("core_%d" % l)
    o, form, bad = ort_best(ort, "causal", l)
    miss = None
    if w and c and w / c > 0.55:
        # a vector of vw query rows computes every key its last row sees:
        # vector v (of n = L / vw) takes vw (v + 1) keys, (n + 1) / 2n of L^2
        isa = ours.get("isa", "")
        vw = 16 if isa.startswith("avx512") else 8 if isa == "avx2" else 1
        n = l // vw
        miss = ("%sx core; the pairs computed are %.2fx of the core's, the %d-row vectors' products %.2fx, "
                "at %.0f GFLOP/s against the core's %.0f" % (
                    past(w / c, 0.55), (l + 1) / (2.0 * l), vw, (n + 1) / (2.0 * n), gf(f, w), gf(4.0 * l * l * E, c)))
    t.add("causal", l, f, w, o, form, r["torch"].get("causal_%d" % l),
          target="<=0.55x core (%s)" % ratio(w, c), st=status([miss], bad, w and c))


def mha_note(c, m, l, peak):
    """What a multi-head row's miss adds: the share of its flops that are
    the projections, and the rate of the time it takes beyond the core
    row's (the attention inside it), at which it runs them."""
    fp = 8.0 * l * E * E
    if not (c and peak and m > c):
        return ""
    return "; %.0f%% of its flops are the projections, done at %.0f%% of peak in the time beyond the core row's" % (
        100 * fp / (fp + 4.0 * l * l * E), 100 * gf(fp, m - c) / peak)


def other_rows(t, r):
    ours, ort = r["ours"], r["ort"]
    f = 4.0 * 4096 * E
    d = ours.get("decode_4096")
    o, form, bad = ort_best(ort, "decode", 4096)
    t.add("decode Lq=1", 4096, f, d, o, form, r["torch"].get("decode_4096"), target=">=1.2x ORT",
          st=status([vs_ort(d, o, f, t.peak) if d else None], bad, d))
    for l in LS:
        f = 4.0 * l * l * E + 8.0 * l * E * E
        m = ours.get("mha_%d" % l)
        o, form, bad = ort_best(ort, "mha", l)
        miss = vs_ort(m, o, f, t.peak) if m else None
        t.add("multi-head+proj", l, f, m, o, form, r["torch"].get("mha_%d" % l), target=">=1.2x ORT",
              st=status([miss and miss + mha_note(ours.get("core_%d" % l), m, l, t.peak)], bad, m))
    mem = ours.get("mem_32768_mib")
    st = ("skipped: " + ours["mem_32768_skip"]) if "mem_32768_skip" in ours else status(
        ["%.1f MiB" % mem if mem is not None and mem >= 100 else None], None, mem)
    t.rows.append(("memory", "32768", fmt(ours["mem_32768_s"] * 1e3 if "mem_32768_s" in ours else None),
                   "%.1f MiB extra" % mem if mem is not None else "n/a", "-", "-", "-", "-", "-",
                   "<100 MiB extra", st))


def print_kernels(r, n):
    peak = r["peak"].get("fp32_nt")
    t = Rows(r, peak)
    for l in LS:
        core_rows(t, r, l)
    for l in LS:
        bf16_rows(t, r, l)
    for l in LS:
        weights_rows(t, r, l)
    for l in LS:
        causal_rows(t, r, l)
    other_rows(t, r)
    print_table(Rows.HDR, t.rows)
    print()
    print_notes(r, n, peak)


def print_notes(r, n, peak):
    ours, ort = r["ours"], r["ort"]
    print("ours = attn_compute (scaled_dot, 8 heads of 64 as a batch, no weights unless the row says so) and "
          "attn_mha_compute (nn.MultiheadAttention(512, 8), seeded parameters prepared once by attn_mha_weights_new, "
          "as ORT's session prepares the graph's initializers once: both sides pack their weights outside the timing), "
          "each with one attn_ctx of %d threads. "
          "ORT = the faster of two models per row, through the C API: core as com.microsoft MultiHeadAttention on "
          "(1, L, 512) (mha) or ONNX Attention-23 on (1, 8, L, 64) (sdpa); multi-head as MatMul/Add projections "
          "around MultiHeadAttention (graph) or the fused com.microsoft Attention op (fused). torch = bmm-softmax-bmm "
          "and nn.MultiheadAttention. BLAS = OpenBLAS sgemm doing the core's two products per head, no softmax. "
          "Causal GFLOP/s count only the L(L+1)/2 pairs computed (torch computes all L^2 and masks)." % n)
    if ours.get("sgemm_2048"):
        g = gf(2.0 * 2048 ** 3, ours["sgemm_2048"])
        print("OpenBLAS sgemm 2048^3 on %d threads: %.0f GFLOP/s%s." % (
            n, g, " (%.0f%% of the measured peak)" % (100 * g / peak) if peak else ""))
    parts = []
    for l in EXP_LENGTHS:
        m = exp_cost(r, l)
        if m:
            share, c = (m[0] - m[1]) / m[0], exp_ceiling(r, m[3])
            parts.append("L = %d: %.2f ms (%.0f%% of the 1-thread peak) against %.2f ms (%.0f%%) without them, so "
                         "%s%s" % (
                             l, m[0] * 1e3, 100 * m[2], m[1] * 1e3, 100 * m[3],
                             "the exponentials take %.1f%% of the core's time" % (100 * share) if share >= 0 else
                             "no cost is measurable: the build without them was %.1f%% the slower, this "
                             "host's spread in these minutes" % (-100 * share),
                             "; the ceiling with them is %.0f%%" % (100 * c) if c else ""))
    print("Exponentials: the float32 core on 1 thread, least CPU time of %d runs (bench_kernels --cpu 1 L), in turns "
          "with the same library built with every exponential of the softmax replaced by its argument "
          "(bench_kernels_noexp: wrong answers, timed only for this): %s. %s"
          % (EXP_TURNS, "; ".join(parts) if parts else "skipped (bench_kernels_noexp did not run)", exp_units_note(r)))
    checks = sorted(k[3:] for k in ort if k.startswith("ok_"))
    if checks:
        bad = [k for k in checks if not ort["ok_" + k]]
        worst = max(ort.get("diff_" + k, 0) for k in checks)
        print("ORT check: %d outputs (every model and length, in every run) compared with ours on the same inputs: %s; "
              "largest difference %.1e of the output's magnitude (limit %.0e)."
              % (len(checks), "all within the limit" if not bad else "FAILED: " + ", ".join(bad), worst, CHECK_LIMIT))
    for k, v in sorted(ort.items()):
        if k.startswith("skip_"):
            print("ORT model %s skipped: ONNX Runtime could not load it: %s" % (k[5:], v))
    if not ort:
        print("ORT rows skipped: %s" % ("bench/ort_capi did not run (see the note above)" if r.get("ort_lib") else
                                         "no libonnxruntime.so in bench/node_modules (npm install failed?)"))


def print_long(r, n):
    """Sparse and linear attention at L = 32768 (bench_kernels --long)
    against the dense core at the same length, timed on one head (scaled
    to 8: its work is per head)."""
    g = r.get("long", {})
    l, h = g.get("long_l", 32768), 8
    d1 = g.get("long_dense_1head_s")
    dense = d1 * h if d1 else None
    pairs = g.get("long_lg_pairs")
    f_dense = 4.0 * l * l * 64 * h
    f_lg = 4.0 * pairs * 64 * h if pairs else None
    g_dense = gf(f_dense, dense)
    hdr = ("row", "L", "heads", "ms", "GFLOP/s", "vs dense", "CPU s", "vs dense (CPU)", "peak MiB", "target",
           "status")
    c1 = g.get("long_dense_1head_cpu_s")
    dense_cpu = c1 * h if c1 else None

    def mib(key):
        v = g.get(key)
        return "n/a" if v is None or v < 0 else "%.1f" % v
    rows = [("dense scaled_dot (1 head timed, x8)", str(l), "1 (x8)", fmt(dense * 1e3 if dense else None),
             fmt(g_dense), "1x", fmt(dense_cpu), "1x", mib("long_dense_1head_mib"), "-", "-")]
    t = g.get("long_lg_s")
    g_lg = gf(f_lg, t) if f_lg else None
    miss = []
    if t and dense and dense / t < 25:
        miss.append("%.1fx dense" % (dense / t))
    if g_lg and g_dense and g_lg / g_dense < 0.7:
        miss.append("%.0f%% of dense GFLOP/s" % (100 * g_lg / g_dense))
    c = g.get("long_lg_cpu_s")
    rows.append(("sparse local_global w=%d, %d globals" % (g.get("long_lg_window", 256), g.get("long_lg_globals", 4)),
                 str(l), str(h), fmt(t * 1e3 if t else None), fmt(g_lg),
                 ratio(dense, t), fmt(c), ratio(dense_cpu, c), mib("long_lg_mib"),
                 ">=25x dense, >=70%% dense GFLOP/s (%s)" % (
                     "%.0f%%" % (100 * g_lg / g_dense) if g_lg and g_dense else "n/a"),
                 "skipped: no figure" if not (t and dense) else "met" if not miss else "missed: " + "; ".join(miss)))
    for key, name in (("long_linear_s", "linear (elu+1)"), ("long_linear_causal_s", "linear (elu+1), causal")):
        t = g.get(key)
        f = 2.0 * (2 * l) * 64 * 65 * h  # phi(K)^T [V 1] and phi(Q) times it
        c = g.get(key[:-2] + "_cpu_s")
        rows.append((name, str(l), str(h), fmt(t * 1e3 if t else None), fmt(gf(f, t)), ratio(dense, t),
                     fmt(c), ratio(dense_cpu, c), mib(key[:-2] + "_mib"), "-", "-"))
    print("Long sequences (bench_kernels --long, %s threads, no weights, head dim 64):" % n)
    print_table(hdr, rows)
    print("The dense core is timed on one head at L = %d (8 would take minutes) and its time multiplied by 8; "
          "\"vs dense\" is that 8-head figure over the row's. Sparse GFLOP/s count 4 x 64 flops per allowed (query, key) "
          "pair (%s pairs a head: |i - j| <= %s or a global row or key); linear GFLOP/s count 2 (Lq + Lk) 64 x 65 a "
          "head (the prefix-sum form; causal adds the diagonal blocks, not counted). CPU s: the CPU time of one "
          "more run over both threads, which other work on a shared machine does not inflate as it does the wall "
          "time. Peak MiB: the growth of the "
          "resident set over one run in a fresh process, inputs and output excluded."
          % (l, "%.0f" % pairs if pairs else "?", g.get("long_lg_window", "?")))


def print_header(r, n):
    ours, ort, pt, pk = r["ours"], r["ort"], r["torch"], r["peak"]
    print()
    cpus = os.cpu_count() or 1
    print("Machine: %s, %d CPUs, %d threads. Load average (1 min) %.1f at the start, %.1f at the end (the end's "
          "includes the bench's own last steps: the server, its clients and PyTorch). %s"
          % (r["cpu"], cpus, n, r["load0"], r["load1"],
             "At the start the load was half the CPUs or more: other work shared the machine, and every figure "
             "here may be lower than on a quiet one." if r["load0"] >= 0.5 * cpus else
             "At the start the load was under half the CPUs: little else was running."))

    def pf(key):
        if pk.get(key) is None:
            return "n/a (%s)" % pk.get(key + "_why", "peak did not run")
        return "%.0f GFLOP/s (CPU share %.2f)" % (pk[key], pk.get(key + "_cpu_share") or 0)
    print("Measured peak (bench/peak.c, %s independent chains per thread, best of 2 x 7 runs): float32 FMA %s: "
          "1 thread %s, %d threads %s; bf16 dot (vdpbf16ps): 1 thread %s, %d threads %s. A CPU share below ~0.95 "
          "means other work preempted the peak's threads." % (pk.get("chains", "?"), pk.get("fp32_isa", "?"),
                                                               pf("fp32_1t"), n, pf("fp32_nt"), pf("bf16_1t"), n,
                                                               pf("bf16_nt")))
    print("Kernels: %s, exponentials deferred: %s (ATTN_DEFER_EXP). ONNX Runtime %s through its C API (API version "
          "%s, %s), %s intra-op threads, 1 inter-op, "
          "sequential, ORT_ENABLE_ALL." % (ours.get("isa", "?"), ours.get("defer_exp", "?"),
                                           ort.get("ort_version", "n/a"),
                                           ort.get("ort_api_version", "?"),
                                           os.path.relpath(r["ort_lib"], os.path.dirname(HERE)) if r.get("ort_lib")
                                           else "library not found", ort.get("threads", "?")))
    set_by = ("OPENBLAS_CORETYPE=%s set by the bench from the CPU flags" % r["coretype_env"]
              if r["coretype_env"] and "OPENBLAS_CORETYPE" not in os.environ else
              "OPENBLAS_CORETYPE=%s from the environment" % r["coretype_env"] if r["coretype_env"] else "detected")
    print("OpenBLAS: %s; core %s (%s; on its own it detects %s)." % (
        ours.get("openblas_config", "?"), ours.get("openblas_corename", "?"), set_by, r["openblas_detected"]))
    print("PyTorch %s: BLAS_INFO=%s, running on %s (OpenBLAS core %s), MKL-DNN %s, MKL %s, ATen CPU capability %s, "
          "%s threads, at least %s timed runs per figure after a warm-up at every size." % (
              pt.get("torch_version", "n/a"), pt.get("torch_blas_info", "?"), pt.get("torch_blas_lib", "?"),
              pt.get("torch_openblas_corename", "n/a"), pt.get("torch_mkldnn", "?"), pt.get("torch_mkl", "?"),
              pt.get("torch_cpu_capability", "?"), pt.get("torch_threads", "?"), pt.get("torch_min_samples", "?")))
    share = pk.get("fp32_nt_cpu_share")
    if share is not None and share < 0.9:
        print("WARNING: the %d-thread float32 peak ran with only %.0f%% of its CPU time (other work preempted it), "
              "so it understates the machine and the %% peak column overstates every row; rerun on a quiet "
              "machine." % (n, 100 * share))
    print("Medians of several runs (ours and ORT: the best of %d medians, one run over every length, then %d turns "
          "of the two at each length). GFLOP/s, higher is better." % (TURNS + 1, TURNS))
    print()


def run_all(args):
    """Every harness, in the order the module docstring gives; returns
    their JSON objects by name."""
    b = args.build
    name, flags = cpu_info()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads),
               BENCH_THREADS=str(args.threads))
    detected = run_json([os.path.join(b, "bench_kernels"), "--labels"], "bench_kernels --labels", env)
    coretype = blas_env.coretype(flags)
    if "OPENBLAS_CORETYPE" not in os.environ and coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    r = {"cpu": name, "flags": flags, "load0": os.getloadavg()[0],
         "openblas_detected": detected.get("openblas_corename", "?"),
         "coretype_env": env.get("OPENBLAS_CORETYPE")}
    peak_cmd = [os.path.join(b, "peak"), str(args.threads)]
    r["peak"] = run_json(peak_cmd, "peak", env)
    ours_cmd = [os.path.join(b, "bench_kernels"), str(args.threads)]
    lib = ort_library()
    ort_cmd = [os.path.join(b, "ort_capi"), lib or "missing", os.path.join(b, "bench"), str(args.threads)]
    r["ours"] = run_json(ours_cmd, "bench_kernels", env)
    r["ort"] = run_json(ort_cmd, "ONNX Runtime (ort_capi)", env) if lib else {}
    for l in LENGTHS:  # then the two in turns at each length, seconds apart
        for _ in range(TURNS):
            r["ours"] = best_of(r["ours"], run_json(ours_cmd + [str(l)], "bench_kernels at L = %d" % l, env))
            if lib:
                r["ort"] = best_of(r["ort"], run_json(ort_cmd + [str(l)], "ONNX Runtime (ort_capi) at L = %d" % l, env))
    r["ort_lib"] = lib
    r["exp"] = exp_costs(b, env)
    r["torch"] = run_json([sys.executable, os.path.join(HERE, "torch_bench.py"), str(args.threads)], "PyTorch", env)
    r["long"] = run_json([os.path.join(b, "bench_kernels"), "--long", str(args.threads)], "bench_kernels --long", env)
    r["wire"] = run_json([os.path.join(b, "bench_wire"), "9"], "bench_wire", env)
    r["svc"] = run_json([sys.executable, os.path.join(HERE, "service_bench.py"), "--build", b], "service_bench", env)
    r["svc"]["viz"] = run_json([sys.executable, os.path.join(HERE, "mha_json_bench.py"), "--build", b, "--reps", "21"],
                               "mha_json_bench", env)
    r["ses"] = run_json([sys.executable, os.path.join(HERE, "session_bench.py"), "--build", b], "session_bench", env)
    peak2 = run_json(peak_cmd, "peak", env)
    for k, v in peak2.items():  # the better of the two peak runs, with its CPU share
        if k == "exp_units":  # a cost: the lesser
            if v is not None and (r["peak"].get(k) is None or v < r["peak"][k]):
                r["peak"][k] = v
            continue
        if isinstance(v, float) and not k.endswith("_share") and v > (r["peak"].get(k) or 0):
            r["peak"][k], r["peak"][k + "_cpu_share"] = v, peak2.get(k + "_cpu_share")
    r["load1"] = os.getloadavg()[0]
    return r


def main():
    args = bench_parser(threads=2).parse_args()
    r = run_all(args)
    print_header(r, args.threads)
    print_kernels(r, args.threads)
    print()
    print_long(r, args.threads)
    print()
    print_service(r["wire"], r["svc"], r["ours"])
    print()
    print_sessions(r["ses"])


if __name__ == "__main__":
    main()
