"""run.py - runs the benchmarks of `make bench` (this project's kernels,
ONNX Runtime, PyTorch, OpenBLAS; the service's wire codecs against Jansson;
a live attn-server against its kernel and against a bare libmicrohttpd
server) and prints them as one table, in two sections, with the issue's
targets.

Every figure is a median of several timed runs after a warm-up (single
runs only where PyTorch needs seconds per run); ours and ONNX Runtime run
twice, alternating, and keep the better median. GFLOP/s count 4 L^2 E
flops for the attention core (causal rows use the same nominal count, so
their time ratio is what matters) and 4 L^2 E + 8 L E^2 for multi-head with
its four projections. Wire rates are bytes of JSON text (nested arrays) or
of float32 data (base64) per second; the service rows come from
bench/service_bench.py.

Usage: /usr/bin/python3 bench/run.py [--build DIR] [--threads N]
"""
import argparse
import json
import os
import platform
import subprocess
import sys

E = 512
LS = (128, 512, 1024, 2048, 4096)
HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd, what, env=None):
    """Runs one harness; returns its JSON object, or {} (with a note) if it
    fails. A harness that prints its figures and then fails a check (exit
    status 1) keeps its figures, with a note."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode:
            print("note: %s failed (status %d): %s" % (what, p.returncode, p.stderr.strip()[-300:]),
                  file=sys.stderr)
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError) as e:
        print("note: %s did not run: %s" % (what, e), file=sys.stderr)
        return {}


def best_of(a, b):
    """Per key, the smaller time of two runs (the memory row is kept from a)."""
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, (int, float)) and not k.startswith("mem_"):
            out[k] = min(v, a[k]) if isinstance(a.get(k), (int, float)) else v
    return out


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def gf(flops, t):
    return "%.0f" % (flops / t / 1e9) if t else "n/a"


def ratio(a, b, fmt="%.2fx"):
    return fmt % (a / b) if a and b else "n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads), BENCH_THREADS=str(args.threads))

    # Two rounds of ours and ONNX Runtime, alternating, each figure the
    # better of its two medians: a machine shared with other work then
    # penalises neither side for when it happened to run.
    ours_cmd = [os.path.join(args.build, "bench_kernels"), str(args.threads)]
    ort_cmd = ["node", os.path.join(HERE, "ort_bench.js"), os.path.join(args.build, "bench"), "9"]
    ours = run_json(ours_cmd, "bench_kernels", env)
    ort = run_json(ort_cmd, "ONNX Runtime", env)
    ours = best_of(ours, run_json(ours_cmd, "bench_kernels", dict(env, BENCH_NO_MEMORY="1")))
    ort = best_of(ort, run_json(ort_cmd, "ONNX Runtime", env))
    pt = run_json([sys.executable, os.path.join(HERE, "torch_bench.py"), str(args.threads)], "PyTorch", env)
    wire = run_json([os.path.join(args.build, "bench_wire"), "9"], "bench_wire", env)
    svc = run_json([sys.executable, os.path.join(HERE, "service_bench.py"), "--build", args.build],
                   "service_bench", env)

    def g(d, key):
        return d.get(key)

    print()
    print("Machine: %s, %d threads, kernels: %s. Medians of several runs; GFLOP/s, higher is better."
          % (cpu_name(), args.threads, ours.get("isa", "?")))
    print("Load average (1 min) %.1f at the start, %.1f at the end on %d cores: above the core count, other "
          "work shared the machine and every figure is lower than on a quiet one."
          % (load0, os.getloadavg()[0], os.cpu_count() or 1))
    print()
    hdr = ("row", "L", "ours ms", "ours", "ORT", "torch", "BLAS", "vs ORT", "target", "met")
    rows = []

    def add(*cells):
        rows.append(tuple(str(c) for c in cells))

    for l in LS:
        f = 4.0 * l * l * E
        t = g(ours, "core_%d" % l)
        o = g(ort, "core_%d" % l)
        want = 1.2
        met = bool(t and o and o / t >= want and (l < 2048 or f / t / 1e9 >= 300))
        add("core", l, "%.2f" % (t * 1e3) if t else "n/a", gf(f, t), gf(f, o), gf(f, g(pt, "core_%d" % l)),
            gf(f, g(ours, "blas_%d" % l)), ratio(o, t),
            ">=1.2x ORT" + (", >=300" if l >= 2048 else ""), "yes" if met else "NO")
    for l in LS:
        f = 4.0 * l * l * E
        t, c = g(ours, "weights_%d" % l), g(ours, "core_%d" % l)
        met = bool(t and c and t / c <= 1.3)
        add("weights", l, "%.2f" % (t * 1e3) if t else "n/a", gf(f, t), "-", gf(f, g(pt, "weights_%d" % l)), "-",
            "-", "<=1.3x core (%s)" % ratio(t, c), "yes" if met else "NO")
    for l in LS:
        f = 4.0 * l * l * E
        t, c = g(ours, "causal_%d" % l), g(ours, "core_%d" % l)
        met = bool(t and c and t / c <= 0.6)
        add("causal", l, "%.2f" % (t * 1e3) if t else "n/a", gf(f, t), gf(f, g(ort, "causal_%d" % l)),
            gf(f, g(pt, "causal_%d" % l)), "-", ratio(g(ort, "causal_%d" % l), t),
            "<=0.6x core (%s)" % ratio(t, c), "yes" if met else "NO")
    f = 4.0 * 4096 * E
    t, o = g(ours, "decode_4096"), g(ort, "decode_4096")
    add("decode Lq=1", 4096, "%.3f" % (t * 1e3) if t else "n/a", gf(f, t), gf(f, o), gf(f, g(pt, "decode_4096")),
        "-", ratio(o, t), ">=1.2x ORT", "yes" if t and o and o / t >= 1.2 else "NO")
    for l in LS:
        f = 4.0 * l * l * E + 8.0 * l * E * E
        t, o = g(ours, "mha_%d" % l), g(ort, "mha_%d" % l)
        add("multi-head+proj", l, "%.2f" % (t * 1e3) if t else "n/a", gf(f, t), gf(f, o), gf(f, g(pt, "mha_%d" % l)),
            "-", ratio(o, t), ">=1.2x ORT", "yes" if t and o and o / t >= 1.2 else "NO")
    for l in LS:
        f = 4.0 * l * l * E + 8.0 * l * E * E
        t, o = g(ours, "api_%d" % l), g(ort, "mha_%d" % l)
        add("attn_mha_compute", l, "%.2f" % (t * 1e3) if t else "n/a", gf(f, t), gf(f, o), gf(f, g(pt, "mha_%d" % l)),
            "-", ratio(o, t), ">=1.2x ORT", "yes" if t and o and o / t >= 1.2 else "NO")
    mem = ours.get("mem_32768_mib")
    add("memory (MiB)", 32768, "%.0f" % (ours["mem_32768_s"] * 1e3) if mem is not None else "n/a",
        "%.1f MiB" % mem if mem is not None else "n/a", "-", "-", "-", "-", "<100 MiB extra",
        "yes" if mem is not None and mem < 100 else "NO")

    print_table(hdr, rows)
    print()
    if ours.get("sgemm_2048"):
        print("OpenBLAS sgemm 2048^3 on the same threads: %s GFLOP/s (the machine's practical ceiling)."
              % gf(2.0 * 2048 ** 3, ours["sgemm_2048"]))
    print("ours/ORT/torch/BLAS columns are GFLOP/s; ORT = onnxruntime-node %s com.microsoft.MultiHeadAttention "
          "(causal: unidirectional=1); torch = %s bmm-softmax-bmm and nn.MultiheadAttention; BLAS = OpenBLAS "
          "sgemm doing the same two products per head without softmax (the ceiling). multi-head+proj composes "
          "the kernels (one packed q/k/v GEMM, the heads, the output GEMM); attn_mha_compute is the library's "
          "public call as the service runs it."
          % (ort_version(), torch_version()))
    print()
    print_service(wire, svc, ours)


def print_table(hdr, rows):
    widths = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(hdr, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")


def print_service(wire, svc, ours):
    """The wire and service section: the server's codecs against Jansson
    on one million floats, a base64 multi-head request against the kernel's
    own time, small requests against a bare libmicrohttpd server."""
    hdr = ("row", "size", "ours ms", "ours", "peer", "peer ms", "peer rate", "vs peer", "target", "met")
    rows = []

    def add(*cells):
        rows.append(tuple(str(c) for c in cells))

    def ms(t):
        return "%.2f" % (t * 1e3) if t else "n/a"

    def rate(nbytes, t, unit):
        scale = {"MB/s": 1e6, "GB/s": 1e9}[unit]
        return ("%.0f %s" if unit == "MB/s" else "%.2f %s") % (nbytes / t / scale, unit) if t else "n/a"

    n = wire.get("floats", 0)
    size = "%d floats, %.1f MB" % (n, wire.get("read_bytes", 0) / 1e6)
    for what, key, peer, nb, pnb in (
            ("wire read, nested JSON", "read", "Jansson json_loads", "read_bytes", "read_bytes"),
            ("wire write, nested JSON", "write", "Jansson json_dumps", "write_bytes_ours", "write_bytes_jansson")):
        t, p = wire.get(key + "_ours"), wire.get(key + "_jansson")
        exact = wire.get("exact_%s_ours" % key) == 1 and (key == "read" or wire.get("exact_roundtrip_ours") == 1)
        mbs = wire.get(nb, 0) / t / 1e6 if t else 0
        add(what, size, ms(t), rate(wire.get(nb, 0), t, "MB/s"), peer, ms(p), rate(wire.get(pnb, 0), p, "MB/s"),
            ratio(p, t), ">=300 MB/s, exact f32 (%s)" % ("exact" if exact else "NOT exact" if wire else "n/a"),
            "yes" if exact and mbs >= 300 else "NO")
    nb = wire.get("b64_bytes", 0)
    size = "%.0f MiB f32, %.1f MB text" % (nb / 2 ** 20, wire.get("b64_text_bytes", 0) / 1e6)
    for what, key, peer in (("base64 decode", "decode", "Jansson string read"),
                            ("base64 encode", "encode", "Jansson string write")):
        t = wire.get("b64_" + key)
        p = wire.get("b64_%s_jansson" % ("read" if key == "decode" else "write"))
        exact = wire.get("exact_b64") == 1
        add(what, size, ms(t), rate(nb, t, "GB/s"), peer, ms(p), rate(nb, p, "GB/s"), ratio(p, t),
            ">=1 GB/s (%s)" % ("exact" if exact else "NOT exact" if wire else "n/a"),
            "yes" if t and exact and nb / t >= 1e9 else "NO")

    # the request's own computation through the library's public call
    # (bench_kernels api_1024: same shapes, seeded parameters, no weights);
    # the Server-Timing compute figure of the same responses when missing
    # (the Server-Timing ratio, measured on the same requests, is shown too:
    # it is immune to the machine's load changing between the two runs)
    total = svc.get("e2e_total_s")
    st = svc["e2e_compute_ms"] / 1e3 if svc.get("e2e_compute_ms") else None
    kernel = ours.get("api_1024") or st
    add("POST /multihead, b64", "L=1024 E=512 H=8", ms(total), "-", "attn_mha_compute", ms(kernel), "-", "-",
        "<=1.5x kernel (%s; %s of Server-Timing compute)" % (ratio(total, kernel), ratio(total, st)),
        "yes" if total and kernel and total / kernel <= 1.5 else "NO")
    s, b = svc.get("small_rps"), svc.get("bare_rps")
    add("small: scaled_dot", "L=8 D=16", "-", "%.0f req/s" % s if s else "n/a", "bare MHD, fixed 200", "-",
        "%.0f req/s" % b if b else "n/a", ratio(s, b), ">=0.5x bare", "yes" if s and b and s / b >= 0.5 else "NO")

    print("Wire and service. Medians of several runs; rates higher is better.")
    print()
    print_table(hdr, rows)
    print()
    print("Wire rows: one million float32 values (1024 x 1024) as {\"query\": [[...]]} printed by printf "
          "\"%.9g\"; ours = the server's read path (depth check, server/scan.c, Jansson for the envelope, "
          "the tensor decoder) and its printer (server/codec.c, numfmt.c), peers = Jansson on the same "
          "text (json_dumps with 9 digits, tree built outside the timing); exact = every value back to the "
          "same float32 bits, including the server reading its own output. base64 = server/b64.c; "
          "rates in float32 bytes/s (the text is 4/3 larger); peers read and write the same base64 as one "
          "JSON string.")
    if svc.get("e2e_total_s"):
        print("POST /multihead: query, key and value as base64, need_weights false, output_format b64 "
              "(%.1f MB in, %.1f MB out), sent over one kept-alive loopback connection to build/attn-server "
              "(default settings, access log on) by Python's http.client; ours = request sent to response "
              "read, median of %d; Server-Timing medians parse %.1f ms, compute %.1f ms, encode %.1f ms; "
              "kernel = bench_kernels' attn_mha_compute of the same module and shapes."
              % (svc["e2e_request_bytes"] / 1e6, svc["e2e_response_bytes"] / 1e6, svc["e2e_reps"],
                 svc["e2e_parse_ms"], svc["e2e_compute_ms"], svc["e2e_encode_ms"]))
    if svc.get("small_rps"):
        print("Small requests: wrk %s with a Lua script POSTing the same %d x %d query/key/value JSON (weights "
              "returned) to attn-server and to bench/bare_mhd.c (the same libmicrohttpd daemon flags and "
              "%d-thread pool, reading the body and answering a fixed 200), alternating, %d rounds each; "
              "runs ours %s, bare %s req/s. wrk, the server and its threads share the machine's %d cores, "
              "so both figures are lower than on a separate client machine."
              % (svc["wrk"], SMALL_L, SMALL_D, svc["pool"], svc["rounds"],
                 "/".join("%.0f" % x for x in svc["small_rps_runs"]),
                 "/".join("%.0f" % x for x in svc["bare_rps_runs"]), os.cpu_count() or 1))


SMALL_L, SMALL_D = 8, 16


def ort_version():
    try:
        with open(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")) as f:
            return json.load(f)["version"]
    except (OSError, ValueError, KeyError):
        return "?"


def torch_version():
    try:
        import torch  # noqa: F401 (only for its version string)
        return "PyTorch " + torch.__version__
    except ImportError:
        return "PyTorch (missing)"


if __name__ == "__main__":
    main()
