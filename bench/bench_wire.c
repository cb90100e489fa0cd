/* bench_wire.c - times the service's wire codecs for the wire rows of
 * `make bench`: one million float32 values as a nested JSON array read and
 * written through the server's fast path (server/scan.c, server/codec.c,
 * server/numfmt.c) and through Jansson's json_loads / json_dumps on the same
 * text, the same values as base64 (server/b64.c), and the scanner on a
 * visualization's 6 MB /multihead body (an nn.MultiheadAttention state_dict
 * as Python's json.dumps writes it: the least CPU time over all threads and
 * the least wall time of the runs). Prints one JSON object of seconds and
 * byte counts for bench/run.py.
 *
 * Every value must survive each path bit for bit (float32 -> text -> float32);
 * a path that does not is reported as "exact_*": 0 and exits 1.
 *
 * Usage: bench_wire [reps]   (default 9 timed runs after one warm-up)
 *        bench_wire --parse [reps]   (the scanner alone on a 12 MB and a
 *        6 MB multihead body: best CPU time of reps runs, default 15) */
#include "bench_util.h"
#include "srv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

srv_config srv_cfg; /* the codecs read no field of it; the linker wants it */

#define ROWS 1024
#define COLS 1024
#define N ((size_t)ROWS * COLS)
#define MAX_REPS 64

static int reps = 9;
static int first_field = 1;

/* Median of `reps` timed runs after one warm-up. */
static double median_time(bench_fn fn, void *arg)
{
    double t[MAX_REPS] = {0};
    fn(arg);
    for (int i = 0; i < reps; i++) {
        double t0 = bench_now();
        fn(arg);
        t[i] = bench_now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], bench_cmp_double);
    return t[reps / 2];
}

static void emit(const char *key, double v)
{
    printf("%s\"%s\": %.9g", first_field ? "{" : ", ", key, v);
    first_field = 0;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "bench_wire: out of memory\n");
        exit(2);
    }
    return p;
}

/* Values spread like activations: mostly in (-4, 4), a few tiny and a few
 * large, so the printer meets exponents as well as plain decimals. */
static float *make_values(void)
{
    float *v = xmalloc(N * sizeof *v);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < N; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        double u = (double)(s >> 40) * 0x1p-24 * 2.0 - 1.0;
        v[i] = (float)(i % 97 == 0 ? u * 1e-6 : i % 89 == 0 ? u * 1e5 : u * 4.0);
    }
    return v;
}

static int same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* ------------------------------------------------------------ nested JSON */

/* The request body a client sends: {"query": [[...], ...]} printed by the
 * C library's "%.9g" (an independent printer). */
static char *make_body(const float *v, size_t *len)
{
    char *body = xmalloc(N * 18 + ROWS * 4 + 64), *o = body;
    o += sprintf(o, "{\"query\":[");
    for (size_t r = 0; r < ROWS; r++) {
        *o++ = r ? ',' : '[';
        if (r)
            *o++ = '[';
        for (size_t c = 0; c < COLS; c++)
            o += sprintf(o, c ? ",%.9g" : "%.9g", (double)v[r * COLS + c]);
        *o++ = ']';
    }
    o += sprintf(o, "]}");
    *len = (size_t)(o - body);
    return body;
}

typedef struct {
    const char *body;
    size_t len;
    float *out;      /* the decoded values of the last run */
    int ok;
} read_args;

/* The server's read path (request.c): depth check, scanner, Jansson for the
 * envelope, the tensor decoder. */
static void read_ours(void *arg)
{
    read_args *a = arg;
    srv_arena arena = {0};
    srv_scan_result sr;
    srv_err e;
    json_error_t jerr;
    a->ok = 0;
    if (srv_json_too_deep(a->body, a->len, 32) || srv_scan(a->body, a->len, &arena, &sr))
        goto done;
    json_t *root = json_loadb(sr.envelope, sr.envelope_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        goto done;
    srv_codec c = {&arena, &sr, (int64_t)N};
    attn_tensor t;
    if (srv_decode_tensor(&c, json_object_get(root, "query"), "query", &t, &e) == 0 &&
        t.rank == 2 && t.shape[0] == ROWS && t.shape[1] == COLS) {
        memcpy(a->out, t.data, N * sizeof *a->out);
        a->ok = 1;
    }
    json_decref(root);
done:
    srv_arena_free(&arena);
}

static void read_jansson(void *arg)
{
    read_args *a = arg;
    json_error_t jerr;
    a->ok = 0;
    json_t *root = json_loadb(a->body, a->len, 0, &jerr);
    json_t *q = json_object_get(root, "query");
    if (json_array_size(q) == ROWS) {
        a->ok = 1;
        for (size_t r = 0; r < ROWS && a->ok; r++) {
            json_t *row = json_array_get(q, r);
            a->ok = json_array_size(row) == COLS;
            for (size_t c = 0; c < COLS && a->ok; c++) {
                json_t *x = json_array_get(row, c);
                a->ok = json_is_number(x);
                a->out[r * COLS + c] = (float)json_number_value(x);
            }
        }
    }
    json_decref(root);
}

typedef struct {
    const float *v;
    json_t *tree;    /* Jansson's own tree of the same values */
    char *text;      /* the last run's output (malloc'd) */
    size_t len;
} write_args;

static void write_ours(void *arg)
{
    write_args *a = arg;
    srv_buf b = {0};
    int64_t shape[2] = {ROWS, COLS};
    srv_big_free(a->text); /* as the server frees an answer (http.c) */
    srv_encode_tensor(&b, a->v, 2, shape, 0);
    if (b.failed) {
        fprintf(stderr, "bench_wire: srv_encode_tensor failed\n");
        exit(2);
    }
    a->text = b.data;
    a->len = b.len;
}

static void write_jansson(void *arg)
{
    write_args *a = arg;
    free(a->text);
    a->text = json_dumps(a->tree, JSON_COMPACT | JSON_REAL_PRECISION(9));
    if (!a->text) {
        fprintf(stderr, "bench_wire: json_dumps failed\n");
        exit(2);
    }
    a->len = strlen(a->text);
}

/* Reads printed nested-array text back with the C library's strtof. */
static int text_matches(const char *p, const float *v)
{
    size_t i = 0;
    while (*p && i <= N) {
        if (*p == '-' || (*p >= '0' && *p <= '9')) {
            char *e;
            float f = strtof(p, &e);
            if (i == N || memcmp(&f, &v[i], sizeof f))
                return 0;
            i++;
            p = e;
        } else {
            p++;
        }
    }
    return i == N;
}

/* ------------------------------------------------------------ base64 */

typedef struct {
    const uint8_t *raw;
    char *text;
    size_t text_len;
    uint8_t *out;
    int64_t got;
    char *quoted;    /* the same base64 as a JSON string, for Jansson */
    size_t quoted_len;
} b64_args;

static void b64_encode(void *arg)
{
    b64_args *a = arg;
    srv_b64_encode(a->raw, N * sizeof(float), a->text);
}

static void b64_decode(void *arg)
{
    b64_args *a = arg;
    a->got = srv_b64_decode(a->text, a->text_len, a->out);
}

/* Jansson reading and writing the base64 text as one JSON string: what the
 * service would pay without its scanner and own printer. */
static void b64_jansson_read(void *arg)
{
    b64_args *a = arg;
    json_error_t jerr;
    json_t *s = json_loadb(a->quoted, a->quoted_len, JSON_DECODE_ANY, &jerr);
    if (!s || json_string_length(s) != a->text_len) {
        fprintf(stderr, "bench_wire: Jansson did not read the base64 string\n");
        exit(2);
    }
    json_decref(s);
}

static void b64_jansson_write(void *arg)
{
    b64_args *a = arg;
    json_t *s = json_stringn_nocheck(a->text, a->text_len);
    char *t = json_dumps(s, JSON_ENCODE_ANY);
    if (!t) {
        fprintf(stderr, "bench_wire: json_dumps failed\n");
        exit(2);
    }
    free(t);
    json_decref(s);
}

/* ------------------------------------------------------------ --parse */

/* Python's repr of the double d (what json.dumps writes for a float32
 * tensor's tolist()): the shortest "%.{1..17}g" that reads back to d, with
 * ".0" on integers and Python's exponent form below 1e-4 and from 1e16. */
static char *put_repr(char *o, double d)
{
    char t[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(t, sizeof t, "%.*e", prec - 1, d);
        if (strtod(t, NULL) == d)
            break;
    }
    /* t is d.ddde[+-]XX: rewrite it as Python does */
    char *e = strchr(t, 'e');
    int x = atoi(e + 1);
    *e = '\0';
    char dig[24] = {0};
    int nd = 0, neg = t[0] == '-';
    for (const char *p = t + neg; *p; p++)
        if (*p != '.')
            dig[nd++] = *p;
    if (neg)
        *o++ = '-';
    if (x < -4 || x >= 16) {
        *o++ = dig[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, dig + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        return o + sprintf(o, "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
    }
    if (x < 0) {
        memcpy(o, "0.0000", (size_t)(1 - x));
        o += 1 - x;
        memcpy(o, dig, (size_t)nd);
        return o + nd;
    }
    for (int i = 0; i <= x; i++)
        *o++ = i < nd ? dig[i] : '0';
    *o++ = '.';
    if (nd <= x + 1) {
        *o++ = '0';
        return o;
    }
    memcpy(o, dig + x + 1, (size_t)(nd - x - 1));
    return o + nd - x - 1;
}

/* A nested array of rows x cols float32 values from gen, repr-printed. */
static char *put_matrix(char *o, int rows, int cols, float (*gen)(void))
{
    if (rows)
        *o++ = '[';
    for (int r = 0; r < (rows ? rows : 1); r++) {
        if (r) {
            *o++ = ',';
            *o++ = ' ';
        }
        *o++ = '[';
        for (int c = 0; c < cols; c++) {
            if (c) {
                *o++ = ',';
                *o++ = ' ';
            }
            o = put_repr(o, (double)gen());
        }
        *o++ = ']';
    }
    if (rows)
        *o++ = ']';
    return o;
}

static uint64_t gen_s = 0x2545f4914f6cdd1dull;
static double gen_u(void) /* uniform in [0, 1) */
{
    gen_s ^= gen_s << 13; gen_s ^= gen_s >> 7; gen_s ^= gen_s << 17;
    return (double)(gen_s >> 11) * 0x1p-53;
}
static float gen_normal(void)
{
    double u = gen_u(), v = gen_u();
    return (float)(sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v));
}
static float gen_xavier(void) { return (float)((gen_u() * 2 - 1) * 0.07654655); }
static float gen_kaiming(void) { return (float)((gen_u() * 2 - 1) * 0.0625); }
static float gen_zero(void) { return 0.0f; }

/* The /multihead request of a visualization: L = 64, E = 256, 8 heads,
 * causal, and an nn.MultiheadAttention state_dict, all as Python's
 * json.dumps writes tensor.tolist(), ", " between items (~6 MB). */
static char *make_mha_body(size_t *len)
{
    char *body = xmalloc(64 * 256 * 28 + 1024 * 256 * 28 + 4096), *o = body;
    o += sprintf(o, "{\"query\": ");
    o = put_matrix(o, 64, 256, gen_normal);
    o += sprintf(o, ", \"num_heads\": 8, \"causal\": true, \"params\": {\"in_proj_weight\": ");
    o = put_matrix(o, 768, 256, gen_xavier);
    o += sprintf(o, ", \"in_proj_bias\": ");
    o = put_matrix(o, 0, 768, gen_zero);
    o += sprintf(o, ", \"out_proj.weight\": ");
    o = put_matrix(o, 256, 256, gen_kaiming);
    o += sprintf(o, ", \"out_proj.bias\": ");
    o = put_matrix(o, 0, 256, gen_zero);
    o += sprintf(o, "}}");
    *len = (size_t)(o - body);
    return body;
}

#define MHA_FLOATS (64 * 256 + 768 * 256 + 256 * 256 + 768 + 256)

/* The server's parse of a body (server/job.c: the scanner, then Jansson on
 * the envelope); returns the floats lifted out, 0 on failure. */
static int64_t parse_once(const char *body, size_t len)
{
    srv_arena arena = {0};
    srv_scan_result sr;
    json_error_t jerr;
    int64_t n = 0;
    if (srv_scan(body, len, &arena, &sr) == 0) {
        json_t *root = json_loadb(sr.envelope, sr.envelope_len, JSON_REJECT_DUPLICATES, &jerr);
        if (root)
            for (size_t i = 0; i < sr.n_blobs; i++)
                n += sr.blobs[i].count;
        json_decref(root);
    }
    srv_arena_free(&arena);
    return n;
}

/* The least CPU time (every thread of the process) and the least wall
 * time of reps parses of body, in seconds; exits when a parse lifts out
 * other than want floats. */
static void parse_best(const char *name, const char *body, size_t len, int64_t want,
                       double *cpu, double *wall)
{
    double best_cpu = 1e30, best_wall = 1e30;
    for (int i = 0; i < reps; i++) {
        double c0 = bench_cpu_now(), w0 = bench_now();
        int64_t n = parse_once(body, len);
        double c = bench_cpu_now() - c0, w = bench_now() - w0;
        if (n != want) {
            fprintf(stderr, "bench_wire: %s: %lld floats parsed, %lld expected\n", name,
                    (long long)n, (long long)want);
            exit(1);
        }
        if (c < best_cpu)
            best_cpu = c;
        if (w < best_wall)
            best_wall = w;
    }
    *cpu = best_cpu;
    *wall = best_wall;
}

static void parse_row(const char *name, const char *body, size_t len, int64_t want)
{
    double best_cpu, best_wall;
    parse_best(name, body, len, want, &best_cpu, &best_wall);
    printf("%-28s %9.2f MB %8.3f ms cpu %7.0f MB/s cpu %8.3f ms wall %7.0f MB/s wall\n", name,
           (double)len / 1e6, best_cpu * 1e3, (double)len / best_cpu / 1e6, best_wall * 1e3,
           (double)len / best_wall / 1e6);
}

/* bench_wire --parse [reps]: the scanner's rate on two bodies, best of
 * reps runs (the machine is shared), CPU time of the process and wall. */
static int parse_bench(void)
{
    float *v = make_values();
    size_t len;
    char *body = make_body(v, &len);
    parse_once(body, len);
    parse_row("1M floats, %.9g", body, len, (int64_t)N);
    free(body);
    free(v);
    body = make_mha_body(&len);
    if (getenv("BENCH_WIRE_DUMP"))
        fwrite(body, 1, len, stdout);
    parse_once(body, len);
    parse_row("multihead L64 E256, repr", body, len, MHA_FLOATS);
    free(body);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--parse") == 0) {
        reps = argc > 2 ? atoi(argv[2]) : 15;
        if (reps < 1)
            return 2;
        return parse_bench();
    }
    if (argc > 1)
        reps = atoi(argv[1]);
    if (reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "bench_wire: reps must be 1..%d\n", MAX_REPS);
        return 2;
    }
    float *v = make_values();
    int exact = 1;

    /* read */
    size_t len;
    char *body = make_body(v, &len);
    read_args r = {body, len, xmalloc(N * sizeof(float)), 0};
    emit("floats", (double)N);
    emit("read_bytes", (double)len);
    emit("read_ours", median_time(read_ours, &r));
    emit("exact_read_ours", r.ok && same_bits(r.out, v, N));
    exact &= r.ok && same_bits(r.out, v, N);
    emit("read_jansson", median_time(read_jansson, &r));
    emit("exact_read_jansson", r.ok && same_bits(r.out, v, N));

    /* write */
    json_t *tree = json_array();
    for (size_t i = 0; i < ROWS; i++) {
        json_t *row = json_array();
        for (size_t c = 0; c < COLS; c++)
            json_array_append_new(row, json_real((double)v[i * COLS + c]));
        json_array_append_new(tree, row);
    }
    write_args w = {v, tree, NULL, 0};
    emit("write_ours", median_time(write_ours, &w));
    emit("write_bytes_ours", (double)w.len);
    int ok = text_matches(w.text, v);
    emit("exact_write_ours", ok);
    exact &= ok;
    /* and the server reads its own output back to the same bits */
    char *wrapped = xmalloc(w.len + 16);
    size_t wl = (size_t)sprintf(wrapped, "{\"query\":%s}", w.text);
    read_args rr = {wrapped, wl, r.out, 0};
    read_ours(&rr);
    emit("exact_roundtrip_ours", rr.ok && same_bits(r.out, v, N));
    exact &= rr.ok && same_bits(r.out, v, N);
    free(wrapped);
    emit("write_jansson", median_time(write_jansson, &w));
    emit("write_bytes_jansson", (double)w.len);
    emit("exact_write_jansson", text_matches(w.text, v));
    free(w.text);
    json_decref(tree);

    /* base64 */
    b64_args b = {(const uint8_t *)v, NULL, srv_b64_encoded_len(N * sizeof(float)), NULL, 0, NULL, 0};
    b.text = xmalloc(b.text_len + 1);
    b.out = xmalloc(srv_b64_decoded_max(b.text_len));
    emit("b64_bytes", (double)(N * sizeof(float)));
    emit("b64_text_bytes", (double)b.text_len);
    emit("b64_encode", median_time(b64_encode, &b));
    emit("b64_decode", median_time(b64_decode, &b));
    ok = b.got == (int64_t)(N * sizeof(float)) && memcmp(b.out, v, N * sizeof(float)) == 0;
    emit("exact_b64", ok);
    exact &= ok;
    b.quoted = xmalloc(b.text_len + 3);
    b.quoted[0] = '"';
    memcpy(b.quoted + 1, b.text, b.text_len);
    b.quoted[b.text_len + 1] = '"';
    b.quoted[b.text_len + 2] = '\0';
    b.quoted_len = b.text_len + 2;
    emit("b64_read_jansson", median_time(b64_jansson_read, &b));
    emit("b64_write_jansson", median_time(b64_jansson_write, &b));

    /* a visualization's /multihead body (a state_dict as json.dumps writes
     * it): the least CPU time over all threads gives the rate of one core */
    size_t mlen;
    char *mbody = make_mha_body(&mlen);
    double mcpu, mwall;
    parse_once(mbody, mlen);
    parse_best("multihead body", mbody, mlen, MHA_FLOATS, &mcpu, &mwall);
    emit("mha_parse_bytes", (double)mlen);
    emit("mha_parse_cpu", mcpu);
    emit("mha_parse_wall", mwall);
    free(mbody);
    printf("}\n");

    free(b.quoted);
    free(b.out);
    free(b.text);
    free(r.out);
    free(body);
    free(v);
    if (!exact)
        fprintf(stderr, "bench_wire: a fast path did not round-trip float32 exactly\n");
    return exact ? 0 : 1;
}
