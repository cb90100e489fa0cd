"""service_table.py - the wire and service section of `make bench` (the server's codecs against Jansson, a live attn-server against its kernel and a bare libmicrohttpd server), printed by bench/run.py."""
import os

SMALL_L, SMALL_D = 8, 16


def ratio(a, b, fmt="%.2fx"):
    return fmt % (a / b) if a and b else "n/a"


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
    hdr = ("row", "size", "ours ms", "ours", "peer", "peer ms", "peer rate", "vs peer", "target", "status")
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
            "met" if exact and mbs >= 300 else "missed (not measured)" if not t else
            "missed: not exact" if not exact else "missed: %.0f MB/s" % mbs)
    nb = wire.get("b64_bytes", 0)
    size = "%.0f MiB f32, %.1f MB text" % (nb / 2 ** 20, wire.get("b64_text_bytes", 0) / 1e6)
    for what, key, peer in (("base64 decode", "decode", "Jansson string read"),
                            ("base64 encode", "encode", "Jansson string write")):
        t = wire.get("b64_" + key)
        p = wire.get("b64_%s_jansson" % ("read" if key == "decode" else "write"))
        exact = wire.get("exact_b64") == 1
        add(what, size, ms(t), rate(nb, t, "GB/s"), peer, ms(p), rate(nb, p, "GB/s"), ratio(p, t),
            ">=1 GB/s (%s)" % ("exact" if exact else "NOT exact" if wire else "n/a"),
            "met" if t and exact and nb / t >= 1e9 else "missed (not measured)" if not t else
            "missed: not exact" if not exact else "missed: %.2f GB/s" % (nb / t / 1e9))

    # a visualization's request as nested JSON: the scanner's rate on its
    # body, then the whole request's server time (bench/mha_json_bench.py)
    mb, mc, mw = wire.get("mha_parse_bytes", 0), wire.get("mha_parse_cpu"), wire.get("mha_parse_wall")
    if mb:
        add("JSON parse, state_dict body", "%.1f MB, 17-digit numbers" % (mb / 1e6), ms(mw),
            "%s a core (CPU time), %s wall" % (rate(mb, mc, "GB/s"), rate(mb, mw, "GB/s")), "-", "-", "-", "-",
            ">=1 GB/s on one core", "met" if mc and mb / mc >= 1e9 else
            "missed: %.0f MB/s a core; the scanner's two threads give %.0f MB/s wall" % (mb / mc / 1e6, mb / mw / 1e6))
    viz = svc.get("viz")
    if viz:
        tot, parse = viz["total_ms_median"], viz["parse_ms_median"]
        add("POST /multihead, nested JSON", "L=64 E=256 H=8 causal, %.1f MB" % (viz["request_bytes"] / 1e6),
            "%.2f" % tot, "parse %.2f, compute %.2f, encode %.2f ms; client wall %s ms" % (
                parse, viz["compute_ms_median"], viz["encode_ms_median"],
                "%.2f" % viz["wall_ms_median"] if "wall_ms_median" in viz else "-"),
            "-", "-", "-", "-", "<=4 ms server time", "met" if tot <= 4 else
            "missed: its parse took %.2f ms (the scanner alone, bench_wire minutes before: %s ms wall); "
            "best request %.2f ms" % (parse, ms(mw), viz["total_ms_best"]))

    # the request's own computation through the library's public call
    # (bench_kernels --mha-cross: same shapes and seeded parameters, query,
    # key and value three tensors as in the request, no weights),
    # timed in turns with the route; the Server-Timing compute of the same
    # responses is shown too
    total = svc.get("e2e_total_s")
    st = svc["e2e_compute_ms"] / 1e3 if svc.get("e2e_compute_ms") else None
    kernel = svc.get("e2e_kernel_s") or ours.get("mha_1024")
    add("POST /multihead, b64", "L=1024 E=512 H=8", ms(total), "-", "attn_mha_compute", ms(kernel), "-", "-",
        "<=1.5x kernel (%s; %s of Server-Timing compute)" % (ratio(total, kernel), ratio(total, st)),
        "met" if total and kernel and total / kernel <= 1.5 else
        "missed: the server's compute was %s ms against the kernel's %s ms" % (ms(st), ms(kernel))
        if total and kernel else "missed (not measured)")
    for key, name in (("http_%d", "POST /attention/scaled_dot, b64"),
                      ("kserve_bin_%d", "POST /v2/.../attention-scaled_dot/infer, binary")):
        for L in (1024, 2048):
            h = svc.get(key % L)
            if not h:
                add(name, "(8, %d, 64)" % L, "n/a", "-", "bare MHD", "n/a", "-", "-",
                    "<=1.2 overhead", "missed (not measured)")
                continue
            over = (h["wall_ms"] - h["bare_wall_ms"]) / h["compute_ms"] if h["compute_ms"] else None
            add(name, "(8, %d, 64), %.1f MB" % (L, h["request_bytes"] / 1e6),
                "%.2f" % h["wall_ms"], "parse %.2f, compute %.2f, encode %.2f ms" % (
                    h["parse_ms"], h["compute_ms"], h["encode_ms"]),
                "bare MHD reads and drops the body", "%.2f" % h["bare_wall_ms"], "-", "-",
                "(wall - bare) / compute <= 1.2 (%s)" % ("%.2f" % over if over else "n/a"),
                "met" if over and over <= 1.2 else
                "missed: %.2f ms beyond the bare server and the compute, of which parse and encode %.2f ms "
                "(Server-Timing)" % (h["wall_ms"] - h["bare_wall_ms"] - h["compute_ms"],
                                     h["parse_ms"] + h["encode_ms"]))
    s, b = svc.get("small_rps"), svc.get("bare_rps")
    add("small: scaled_dot", "L=8 D=16", "-", "%.0f req/s" % s if s else "n/a", "bare MHD, fixed 200", "-",
        "%.0f req/s" % b if b else "n/a", ratio(s, b), ">=0.5x bare", "met" if s and b and s / b >= 0.5 else
        "missed: %.0f us a request against the bare server's %.0f" % (1e6 / s, 1e6 / b) if s and b else
        "missed (not measured)")

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
              "(default settings, access log on) by bench/http_bench.c (libcurl, as the HTTP path rows); ours = "
              "request sent to response read, median of %d; Server-Timing medians parse %.1f ms, compute %.1f ms, encode %.1f ms; "
              "kernel = bench_kernels --mha-cross: attn_mha_compute of the same module and shapes on three distinct "
              "query, key and value tensors, as the request sends (prepared weights; the kernel table's self-attention "
              "mha_1024 row projects one input and takes some 4%% less), run in turns with the route, %d rounds each, "
              "every figure the median of the rounds' "
              "medians: the host's speed moves between the minutes the kernel table and this one are apart."
              % (svc["e2e_request_bytes"] / 1e6, svc["e2e_response_bytes"] / 1e6, svc["e2e_reps"],
                 svc["e2e_parse_ms"], svc["e2e_compute_ms"], svc["e2e_encode_ms"], svc.get("e2e_rounds", 1)))
    if svc.get("http_1024") or svc.get("kserve_bin_1024"):
        print("HTTP path rows: scaled_dot on (8, L, 64) query, key and value, no weights, over one kept-alive "
              "loopback connection by bench/http_bench.c (libcurl): the native route with base64 tensors and a "
              "base64 output, and KServe v2 with Triton's binary tensor data extension (a JSON header, then the "
              "raw float32 bytes; the output asked for as raw bytes); bare = bench/bare_mhd.c (the same "
              "libmicrohttpd settings) reading the same body and answering an empty 200, so (wall - bare) "
              "holds the answer's transfer too. The four take turns in 3 rounds of 9 requests; medians.")
    if wire.get("mha_parse_bytes") or svc.get("viz"):
        print("state_dict rows: a visualization's POST /multihead, L = 64, E = 256, 8 heads, causal, with an "
              "nn.MultiheadAttention state_dict, everything nested JSON as Python's json.dumps writes tolist() "
              "(6.1 MB). JSON parse = the server's scanner on that body (bench_wire: the least of 9 runs, CPU "
              "time over all its threads for the rate of one core, and wall time with its two threads); the "
              "request = bench/mha_json_bench.py posting a real PyTorch module's body to build/attn-server, "
              "answer checked against the module, Server-Timing medians of 21 requests (parse counts from the "
              "body's last byte: in_proj_weight, which closes with a quarter of its length still to come, is "
              "parsed while out_proj arrives), and the client's wall time (Python's http.client on the same "
              "2 cores, body sent to answer read).")
    if svc.get("small_rps"):
        print("Small requests: wrk %s with a Lua script POSTing the same %d x %d query/key/value JSON (weights "
              "returned) to attn-server and to bench/bare_mhd.c (the same libmicrohttpd daemon flags and "
              "%d-thread pool, reading the body and answering a fixed 200), alternating, %d rounds each; "
              "runs ours %s, bare %s req/s. wrk, the server and its threads share the machine's %d cores, "
              "so both figures are lower than on a separate client machine."
              % (svc["wrk"], SMALL_L, SMALL_D, svc["pool"], svc["rounds"],
                 "/".join("%.0f" % x for x in svc["small_rps_runs"]),
                 "/".join("%.0f" % x for x in svc["bare_rps_runs"]), os.cpu_count() or 1))



def print_sessions(ses):
    """The decode-session rows (bench/session_bench.py): a step at n = 4096
    against the same step sent statelessly, the server's compute against
    the library's plain decode row, and the bytes a session holds."""
    hdr = ("row", "size", "ours ms", "peer", "peer ms", "vs peer", "target", "status")
    rows = []
    s, st = ses.get("session"), ses.get("stateless")
    size = "n=%d H=%d d=%d T=Tq=1" % (ses.get("n", 0), ses.get("heads", 0), ses.get("head_dim", 0))
    if s and st:
        x = st["wall_ms"] / s["wall_ms"]
        rows.append(("POST /sessions/{id}/step, b64", "%s, %.1f KB" % (size, s["request_bytes"] / 1e3),
                     "%.2f" % s["wall_ms"], "/attention/scaled_dot with the cache, %.1f MB" % (st["request_bytes"] / 1e6),
                     "%.2f" % st["wall_ms"], "%.1fx" % x, ">=20x", "met" if x >= 20 else
                     "missed: the step took %.2f ms, its compute %.3f (Server-Timing)" % (s["wall_ms"], s["compute_ms"])))
        lib = ses.get("library", {}).get("decode_ms")
        c = s["compute_ms"]
        cold = ses.get("library", {}).get("decode_cold_ms")
        st_c = "met" if lib and c / lib <= 1.2 else "missed"
        if st_c == "missed" and lib and cold and lib < c < cold:
            st_c += (": the step's %.3f ms lies between the library's decode back to back (%.3f, its keys and "
                     "values in the CPU's caches) and with the caches evicted (%.3f)" % (c, lib, cold))
        rows.append(("step compute (Server-Timing)", size, "%.3f" % c, "library decode, same rounds",
                     "%.3f" % lib if lib else "n/a", ratio(c, lib), "<=1.2x", st_c))
        if cold:
            rows.append(("step compute (Server-Timing)", size, "%.3f" % c, "library decode, caches evicted",
                         "%.3f" % cold, ratio(c, cold), "-", "info"))
    else:
        rows.append(("POST /sessions/{id}/step, b64", size, "n/a", "-", "n/a", "-", ">=20x", "missed (not measured)"))
    k = ses.get("kserve")
    if k and s:
        rows.append(("KServe multihead-decode sequence step, JSON", "%s, %.1f KB" % (size, k["request_bytes"] / 1e3),
                     "%.2f" % k["wall_ms"], "POST /sessions/{id}/step, b64", "%.2f" % s["wall_ms"],
                     ratio(k["wall_ms"], s["wall_ms"]), "-", "info"))
    if ses.get("bytes"):
        rows.append(("bytes held per session", size, "%d" % ses["bytes"], "2 n Hkv d 4", "%d" % ses["cache_bytes"],
                     "+%d B" % (ses["bytes"] - ses["cache_bytes"]), "cache + small constant",
                     "met" if ses["bytes"] - ses["cache_bytes"] < 4096 else
                     "missed: %d B beyond the cache" % (ses["bytes"] - ses["cache_bytes"])))
    print("Decode sessions (server-side KV cache). Medians; ms lower is better.")
    print()
    print_table(hdr, rows)
    print()
    if s and st:
        print("One decoding step over n = 4096 cached tokens by bench/http_bench.c (libcurl, kept-alive loopback "
              "connection): ours = POST /sessions/{id}/step with one new key/value row and one query row "
              "(base64, no weights; each followed by an untimed truncate back to 4095 rows); peer = the same "
              "step as one stateless POST /attention/scaled_dot carrying the whole cache (heads as the batch); the "
              "two take turns in 5 rounds and each figure is the median of the rounds' medians. Library decode: "
              "the kernel table's decode row (attn_compute, Lq = 1, Lk = 4096, 8 heads of 64, 2 threads, median "
              "of 41 back-to-back calls; bench_kernels --decode) run again as a third turn in the same rounds, "
              "since the host's memory speed moves between the minutes the two tables are apart; back to back, "
              "the 16.8 MB of keys and values stay in the CPU's caches between calls. Caches evicted: the same "
              "call with 64 MiB read and written before each, so they come from memory; a server step, 0.3-0.6 ms "
              "after the last one, finds them somewhere in between (what other work on the host leaves). "
              "Server-Timing medians: step parse %.3f, compute %.3f ms; stateless parse %.1f, compute %.2f ms. "
              "Bytes held: GET /sessions/{id} at n = 4096 (max_tokens 4096, so the capacity is exact; while "
              "growing, the capacity doubles and holds up to twice the rows)."
              % (s["parse_ms"], s["compute_ms"], st["parse_ms"], st["compute_ms"]))
    if k and s:
        print("KServe row: the same step as POST /v2/models/multihead-decode/infer on the same session "
              "(sequence_id = its id), key, value and query as JSON data (no binary: http_bench sends one body), "
              "output as JSON; Server-Timing parse %.3f, compute %.3f, encode %.3f ms."
              % (k["parse_ms"], k["compute_ms"], k["encode_ms"]))
