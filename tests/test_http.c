/* test_http.c - integration tests: starts the real server binary on a free loopback port and checks the whole HTTP contract with libcurl. */
/*
 * Usage: test_http --server build/attn-server [--cases tests/http]
 *                  [--modern-cases tests/golden_modern/http_cases]
 *                  [--golden tests/golden] [--log build/test_http_server.log]
 *
 * Six server instances are started, each on its own free port, all
 * logging to the --log file:
 *   main    the defaults
 *   small   ATTN_MAX_BODY, ATTN_MAX_ELEMENTS, ATTN_MAX_WEIGHTS=4096 and
 *           ATTN_MAX_WORK=450000, for 413
 *   busy    ATTN_MAX_INFLIGHT=1, ATTN_THREADS=4, for 503 overloaded
 *   guard   ATTN_TOKEN and ATTN_CORS_ORIGINS
 *   limits  ATTN_MAX_CONNECTIONS=20, ATTN_MAX_PER_IP=10, ATTN_TIMEOUT=2
 *   deadline ATTN_REQUEST_TIMEOUT=2, ATTN_TIMEOUT=10, for 408 request_timeout
 * Cases come from three places: the .case files in tests/http (requests and
 * the checks on their responses, as data; the format is in
 * tests/http/README.md, the reader in tests/harness.c), the modern-attention
 * cases in tests/golden_modern/http_cases (the same format) and the C
 * functions
 * below for what data files cannot say (every golden vector in each tensor
 * form and output format, the forms against a reference computed here,
 * keep-alive, large and chunked bodies, parallel clients, limits, slow
 * bodies). Every
 * check counts as one test; the run ends with "N passed, N failed,
 * N skipped" and exits 1 on any failure.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden.h"
#include "harness.h"
#include "ref_modern.h"

static const char *only; /* --only: run just the golden and case files whose name contains it */
static int memcheck;     /* --memcheck: servers under valgrind; skip the tests bound to wall time */
static const char *server_path;
static const char *log_path = "build/test_http_server.log";

/* ------------------------------------------------------------ reference */

/* Plain scaled-dot-product attention in double, the independent reference
 * for the C-built cases: one batch element, keep[j] = 0 masks key j. */
static void ref_sdpa(const float *q, const float *k, const float *v, long lq, long lk,
                     long d, long dv, double scale, const uint8_t *keep,
                     float *out, float *w)
{
    double *s = malloc((size_t)lk * sizeof *s);
    for (long i = 0; i < lq; i++) {
        double mx = -INFINITY, sum = 0;
        for (long j = 0; j < lk; j++) {
            double acc = 0;
            for (long t = 0; t < d; t++)
                acc += (double)q[i * d + t] * k[j * d + t];
            s[j] = acc * scale;
            if ((!keep || keep[j]) && s[j] > mx)
                mx = s[j];
        }
        for (long j = 0; j < lk; j++) {
            s[j] = (!keep || keep[j]) ? exp(s[j] - mx) : 0;
            sum += s[j];
        }
        for (long t = 0; t < dv; t++) {
            double acc = 0;
            for (long j = 0; j < lk; j++)
                acc += (sum > 0 ? s[j] / sum : 0) * v[j * dv + t];
            out[i * dv + t] = (float)acc;
        }
        if (w)
            for (long j = 0; j < lk; j++)
                w[i * lk + j] = (float)(sum > 0 ? s[j] / sum : 0);
    }
    free(s);
}

/* Deterministic pseudo-random floats in [-1, 1) (xorshift), so runs repeat. */
static float rnd(uint64_t *st)
{
    *st ^= *st << 13;
    *st ^= *st >> 7;
    *st ^= *st << 17;
    return (float)((double)(*st >> 40) / (double)(1u << 24) * 2.0 - 1.0);
}

/* ------------------------------------------------------------ servers */

static server srv_main, srv_small, srv_busy, srv_guard;

/* A case file's instance: line (NULL: main). */
static server *server_named(const char *name)
{
    if (!name) return &srv_main;
    if (!strcmp(name, "small")) return &srv_small;
    if (!strcmp(name, "busy")) return &srv_busy;
    if (!strcmp(name, "guard")) return &srv_guard;
    return &srv_main;
}

/* ------------------------------------------------------------ golden vectors */

static void mask_nested(buf *b, const uint8_t *m, int rank, const int64_t *shape,
                        int as_bool, long *k)
{
    buf_puts(b, "[");
    for (int64_t i = 0; i < shape[0]; i++) {
        if (i)
            buf_puts(b, ",");
        if (rank == 1)
            buf_puts(b, m[(*k)++] ? (as_bool ? "true" : "1") : (as_bool ? "false" : "0"));
        else
            mask_nested(b, m, rank - 1, shape + 1, as_bool, k);
    }
    buf_puts(b, "]");
}

/* Appends a mask as nested booleans, flat 0/1 with shape, or base64 bytes. */
static void mask_put(buf *b, const golden_tensor *t, int form)
{
    if (form == FORM_B64) {
        buf_puts(b, "{\"shape\":[");
        for (int i = 0; i < t->rank; i++)
            buf_printf(b, "%s%lld", i ? "," : "", (long long)t->shape[i]);
        buf_puts(b, "],\"dtype\":\"bool\",\"b64\":\"");
        b64_encode(b, t->m, (size_t)t->count);
        buf_puts(b, "\"}");
        return;
    }
    if (form == FORM_FLAT) {
        buf_puts(b, "{\"shape\":[");
        for (int i = 0; i < t->rank; i++)
            buf_printf(b, "%s%lld", i ? "," : "", (long long)t->shape[i]);
        buf_puts(b, "],\"data\":[");
        for (int64_t i = 0; i < t->count; i++)
            buf_puts(b, i ? (t->m[i] ? ",1" : ",0") : (t->m[i] ? "1" : "0"));
        buf_puts(b, "]}");
        return;
    }
    long k = 0;
    mask_nested(b, t->m, t->rank, t->shape, 1, &k);
}

static void golden_tensor_put(buf *b, const golden_tensor *t, int form)
{
    long shape[MAX_RANK];
    for (int i = 0; i < t->rank; i++)
        shape[i] = (long)t->shape[i];
    tensor_put(b, t->f, t->rank, shape, form);
}

static int is_bool_option(const char *k)
{
    return !strcmp(k, "causal") || !strcmp(k, "average_weights") ||
           !strcmp(k, "need_weights") || !strcmp(k, "residual_norm");
}

/* The request body of a golden case: tensors and masks in `form`,
 * parameters in the next form, options as JSON, output as asked. */
static void golden_body(buf *b, const golden_case *gc, int form, int b64_out)
{
    buf_puts(b, "{");
    int first = 1, nparams = 0;
    for (size_t i = 0; i < gc->n_tensors; i++) {
        const golden_tensor *t = &gc->tensors[i];
        if (t->kind != GOLDEN_TENSOR && t->kind != GOLDEN_MASK)
            continue;
        buf_printf(b, "%s\"%s\":", first ? "" : ",", t->name);
        first = 0;
        if (t->kind == GOLDEN_MASK)
            mask_put(b, t, form);
        else
            golden_tensor_put(b, t, form);
    }
    for (size_t i = 0; i < gc->n_tensors; i++) {
        const golden_tensor *t = &gc->tensors[i];
        if (t->kind != GOLDEN_PARAM)
            continue;
        buf_printf(b, "%s\"%s\":", nparams++ ? "," : ",\"params\":{", t->name);
        golden_tensor_put(b, t, (form + 1) % N_FORMS);
    }
    if (nparams)
        buf_puts(b, "}");
    for (size_t i = 0; i < gc->n_options; i++) {
        const char *k = gc->options[i].key, *v = gc->options[i].value;
        if (is_bool_option(k))
            buf_printf(b, ",\"%s\":%s", k, atoi(v) ? "true" : "false");
        else if (!strcmp(k, "positional_encoding"))
            buf_printf(b, ",\"%s\":\"%s\"", k, v);
        else if (!strcmp(k, "hard") && !strncmp(v, "top_k", 5))
            buf_printf(b, ",\"hard\":{\"top_k\":%s}", v + 5);
        else if (!strcmp(k, "hard"))
            buf_printf(b, ",\"hard\":\"%s\"", v);
        else
            buf_printf(b, ",\"%s\":%s", k, v); /* numbers: scale, seed, sizes */
    }
    if (golden_opt(gc, "seed"))
        buf_puts(b, ",\"return_params\":true");
    if (b64_out)
        buf_puts(b, ",\"output_format\":\"b64\"");
    buf_puts(b, "}");
}

/* Every expected tensor of the case against the response; each one test. */
static void golden_compare(const golden_case *gc, const response *r, const char *cname)
{
    char name[400];
    for (size_t i = 0; i < gc->n_tensors; i++) {
        const golden_tensor *t = &gc->tensors[i];
        if (t->kind != GOLDEN_EXPECT)
            continue;
        json_t *j = !strcmp(t->name, "output") || !strcmp(t->name, "weights")
                        ? json_object_get(r->json, t->name)
                        : json_object_get(json_object_get(r->json, "params"), t->name);
        tensor got;
        char why[200] = "not a tensor";
        long shape[MAX_RANK];
        for (int d = 0; d < t->rank; d++)
            shape[d] = (long)t->shape[d];
        int ok = j && tensor_read(j, &got) == 0;
        ok = ok && tensor_matches(&got, t->rank, shape, t->f, why, sizeof why);
        snprintf(name, sizeof name, "%s: %s matches torch", cname, t->name);
        check(ok, name, "%s", why);
        if (j)
            tensor_free(&got);
    }
    if (golden_opt_int(gc, "need_weights", 1) == 0) {
        snprintf(name, sizeof name, "%s: weights absent", cname);
        check(!json_object_get(r->json, "weights"), name, "weights present");
    }
}

/* Whether t is an input or expectation that a "bshd" request holds as
 * (B, L, H, D): query, key, value and the output. */
static int bshd_held(const golden_tensor *t)
{
    static const char *const names[] = {"query", "key", "value", "output"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(t->name, names[i]) && t->rank == 4 && t->kind != GOLDEN_MASK &&
            t->kind != GOLDEN_PARAM)
            return 1;
    return 0;
}

/* A case with heads, (B, H, L, D), as FlashAttention holds its query, key,
 * value and output, (B, L, H, D), with qkv_layout "bshd" (the weights
 * stay (B, H, Lq, Lk)): *out borrows gc's other tensors; free it with
 * bshd_free. Returns 0, or -1 when gc has no 4-D query. */
static int bshd_copy(const golden_case *gc, golden_case *out)
{
    const golden_tensor *q = NULL;
    for (size_t i = 0; i < gc->n_tensors; i++)
        if (!strcmp(gc->tensors[i].name, "query") && gc->tensors[i].kind == GOLDEN_TENSOR)
            q = &gc->tensors[i];
    if (!q || q->rank != 4)
        return -1;
    *out = *gc;
    out->tensors = malloc(gc->n_tensors * sizeof *out->tensors);
    out->options = malloc((gc->n_options + 1) * sizeof *out->options);
    if (!out->tensors || !out->options) {
        fprintf(stderr, "test_http: out of memory\n");
        exit(2);
    }
    if (gc->n_options)
        memcpy(out->options, gc->options, gc->n_options * sizeof *out->options);
    golden_option *o = &out->options[out->n_options++];
    snprintf(o->key, sizeof o->key, "qkv_layout");
    snprintf(o->value, sizeof o->value, "\"bshd\"");
    for (size_t i = 0; i < gc->n_tensors; i++) {
        const golden_tensor *t = &gc->tensors[i];
        golden_tensor *u = &out->tensors[i];
        *u = *t;
        if (!bshd_held(t))
            continue;
        int64_t B = t->shape[0], H = t->shape[1], L = t->shape[2], D = t->shape[3];
        u->shape[1] = L;
        u->shape[2] = H;
        u->f = malloc((size_t)t->count * sizeof *u->f);
        if (!u->f) {
            fprintf(stderr, "test_http: out of memory\n");
            exit(2);
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t l = 0; l < L; l++)
                    for (int64_t d = 0; d < D; d++)
                        u->f[((b * L + l) * H + h) * D + d] = t->f[((b * H + h) * L + l) * D + d];
    }
    return 0;
}

static void bshd_free(golden_case *c)
{
    for (size_t i = 0; i < c->n_tensors; i++)
        if (bshd_held(&c->tensors[i]))
            free(c->tensors[i].f);
    free(c->tensors);
    free(c->options);
}

/* A case with heads again, as FlashAttention's (B, L, H, D) with
 * qkv_layout "bshd", in every input form. */
static void golden_run_bshd(const char *file, const golden_case *gc, CURL *h, const char *url)
{
    golden_case fa;
    if (bshd_copy(gc, &fa) != 0)
        return;
    char cname[300], name[400];
    for (int form = 0; form < N_FORMS; form++) {
        buf b = {0};
        golden_body(&b, &fa, form, 0);
        request rq = {.method = "POST", .path = url, .body = b.data, .body_len = b.len,
                      .has_body = 1};
        response r;
        http(h, srv_main.base, &rq, &r);
        snprintf(cname, sizeof cname, "golden %s as bshd [%s in]", file, form_names[form]);
        snprintf(name, sizeof name, "%s: status 200", cname);
        if (check(r.status == 200 && r.json, name, "got %ld, body %s", r.status, short_body(&r)))
            golden_compare(&fa, &r, cname);
        response_free(&r);
        buf_free(&b);
    }
    bshd_free(&fa);
}

/* Posts one golden case in every input form, each with nested and with
 * base64 output, and compares every expected tensor with each response;
 * a case with heads also as bshd. */
static void golden_run(const char *file, const golden_case *gc, void *curl)
{
    CURL *h = curl;
    char cname[300], name[400];
    char url[128];
    snprintf(url, sizeof url, "%s%s", strcmp(gc->rule, "multihead") ? "/attention/" : "/",
             gc->rule);
    for (int form = 0; form < N_FORMS; form++) {
        for (int b64_out = 0; b64_out < 2; b64_out++) {
            buf b = {0};
            golden_body(&b, gc, form, b64_out);
            request rq = {.method = "POST", .path = url, .body = b.data, .body_len = b.len,
                          .has_body = 1};
            response r;
            http(h, srv_main.base, &rq, &r);
            snprintf(cname, sizeof cname, "golden %s [%s in, %s out]", file, form_names[form],
                     b64_out ? "b64" : "nested");
            snprintf(name, sizeof name, "%s: status 200", cname);
            if (check(r.status == 200 && r.json, name, "got %ld, body %s", r.status, short_body(&r)))
                golden_compare(gc, &r, cname);
            response_free(&r);
            buf_free(&b);
        }
    }
    golden_run_bshd(file, gc, h, url);
}

static void run_golden(const char *dir)
{
    CURL *h = curl_easy_init();
    golden_each(dir, only, "golden", golden_run, h);
    curl_easy_cleanup(h);
}

/* Opens a request body with query, key and value of rank r in `form`:
 * `{"query":...,"key":...,"value":...` (the caller adds the rest). */
static void qkv_put(buf *b, int r, const float *q, const long *sq, const float *k,
                    const long *sk, const float *v, const long *sv, int form)
{
    buf_puts(b, "{\"query\":");
    tensor_put(b, q, r, sq, form);
    buf_puts(b, ",\"key\":");
    tensor_put(b, k, r, sk, form);
    buf_puts(b, ",\"value\":");
    tensor_put(b, v, r, sv, form);
}

/* ------------------------------------------------------------ packed sequences */

/* Random packed sequences (cu_seqlens_q and _k) on /attention/scaled_dot:
 * 1-4 sequences of 1-9 queries and 1-9 keys, H query heads over 1 or H
 * key/value heads, in a random input form; each sequence's heads against
 * ref_sdpa on rows gathered from the packed tensors, the weights' padding
 * past each sequence's lengths zero. */
static void test_varlen_random(void)
{
    CURL *h = curl_easy_init();
    uint64_t st = 0x5eed7a11ull;
    for (int trial = 0; trial < 30; trial++) {
        long B = 1 + (long)((rnd(&st) + 1) * 2), H = 1 + (long)((rnd(&st) + 1) * 1.5);
        long Hkv = rnd(&st) < 0 ? 1 : H, D = 1 + (long)((rnd(&st) + 1) * 2.5);
        long Dv = 1 + (long)((rnd(&st) + 1) * 2), cq[5] = {0}, ck[5] = {0}, mq = 0, mk = 0;
        for (long i = 0; i < B; i++) {
            long lq = 1 + (long)((rnd(&st) + 1) * 4.5), lk = 1 + (long)((rnd(&st) + 1) * 4.5);
            cq[i + 1] = cq[i] + lq, ck[i + 1] = ck[i] + lk;
            mq = lq > mq ? lq : mq, mk = lk > mk ? lk : mk;
        }
        long tq = cq[B], tk = ck[B], sq[3] = {tq, H, D}, sk[3] = {tk, Hkv, D}, sv[3] = {tk, Hkv, Dv};
        float *q = malloc(sizeof(float) * (size_t)(tq * H * D)), *k = malloc(sizeof(float) * (size_t)(tk * Hkv * D));
        float *v = malloc(sizeof(float) * (size_t)(tk * Hkv * Dv));
        float *out = malloc(sizeof(float) * (size_t)(tq * H * Dv));
        float *w = calloc((size_t)(B * H * mq * mk), sizeof(float));
        float *gq = malloc(sizeof(float) * 9 * (size_t)D), *gk = malloc(sizeof(float) * 9 * (size_t)D);
        float *gv = malloc(sizeof(float) * 9 * (size_t)Dv), *go = malloc(sizeof(float) * 9 * (size_t)Dv);
        float *gw = malloc(sizeof(float) * 81);
        for (long i = 0; i < tq * H * D; i++) q[i] = rnd(&st);
        for (long i = 0; i < tk * Hkv * D; i++) k[i] = rnd(&st);
        for (long i = 0; i < tk * Hkv * Dv; i++) v[i] = rnd(&st);
        for (long b = 0; b < B; b++)
            for (long hh = 0; hh < H; hh++) {
                long lq = cq[b + 1] - cq[b], lk = ck[b + 1] - ck[b], g = hh / (H / Hkv);
                for (long r = 0; r < lq; r++)
                    memcpy(gq + r * D, q + ((cq[b] + r) * H + hh) * D, sizeof(float) * (size_t)D);
                for (long r = 0; r < lk; r++) {
                    memcpy(gk + r * D, k + ((ck[b] + r) * Hkv + g) * D, sizeof(float) * (size_t)D);
                    memcpy(gv + r * Dv, v + ((ck[b] + r) * Hkv + g) * Dv, sizeof(float) * (size_t)Dv);
                }
                ref_sdpa(gq, gk, gv, lq, lk, D, Dv, 1.0 / sqrt((double)D), NULL, go, gw);
                for (long r = 0; r < lq; r++) {
                    memcpy(out + ((cq[b] + r) * H + hh) * Dv, go + r * Dv, sizeof(float) * (size_t)Dv);
                    memcpy(w + ((b * H + hh) * mq + r) * mk, gw + r * lk, sizeof(float) * (size_t)lk);
                }
            }
        int form = trial % N_FORMS;
        buf body = {0};
        qkv_put(&body, 3, q, sq, k, sk, v, sv, form);
        buf_puts(&body, ",\"cu_seqlens_q\":[0");
        for (long i = 1; i <= B; i++) buf_printf(&body, ",%ld", cq[i]);
        buf_puts(&body, "],\"cu_seqlens_k\":[0");
        for (long i = 1; i <= B; i++) buf_printf(&body, ",%ld", ck[i]);
        buf_puts(&body, "]}");
        request rq = {.method = "POST", .path = "/attention/scaled_dot", .body = body.data,
                      .body_len = body.len, .has_body = 1};
        response r;
        http(h, srv_main.base, &rq, &r);
        char name[200], why[200] = "not a tensor";
        snprintf(name, sizeof name, "packed sequences #%d (B %ld, H %ld/%ld, %s in)", trial, B, H, Hkv,
                 form_names[form]);
        if (check(r.status == 200 && r.json, name, "got %ld, body %s", r.status, short_body(&r))) {
            long so[3] = {tq, H, Dv}, sw[4] = {B, H, mq, mk};
            const char *what[2] = {"output", "weights"};
            for (int x = 0; x < 2; x++) {
                tensor t;
                json_t *j = json_object_get(r.json, what[x]);
                int ok = j && tensor_read(j, &t) == 0 &&
                         tensor_matches(&t, x ? 4 : 3, x ? sw : so, x ? w : out, why, sizeof why);
                if (j)
                    tensor_free(&t);
                char n2[260];
                snprintf(n2, sizeof n2, "%s: %s", name, what[x]);
                check(ok, n2, "%s", why);
            }
        }
        response_free(&r);
        buf_free(&body);
        free(q), free(k), free(v), free(out), free(w), free(gq), free(gk), free(gv), free(go), free(gw);
    }
    curl_easy_cleanup(h);
}

/* ------------------------------------------------------------ tensor forms */

/* A small scaled-dot problem with its reference answer, built here. */
typedef struct {
    long b, lq, lk, d, dv;
    float *q, *k, *v, *out, *w;
    uint8_t *keep; /* (b, lk), NULL: every key */
} problem;

static void problem_make(problem *p, long b, long lq, long lk, long d, long dv,
                         uint64_t seed, int with_keep)
{
    if (b < 1 || lq < 1 || lk < 1 || d < 1 || dv < 1) {
        fprintf(stderr, "test_http: problem_make with a size < 1\n");
        exit(2);
    }
    p->b = b; p->lq = lq; p->lk = lk; p->d = d; p->dv = dv;
    p->q = malloc(sizeof(float) * (size_t)(b * lq * d));
    p->k = malloc(sizeof(float) * (size_t)(b * lk * d));
    p->v = malloc(sizeof(float) * (size_t)(b * lk * dv));
    p->out = malloc(sizeof(float) * (size_t)(b * lq * dv));
    p->w = malloc(sizeof(float) * (size_t)(b * lq * lk));
    p->keep = NULL;
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + 1;
    for (long i = 0; i < b * lq * d; i++) p->q[i] = rnd(&st);
    for (long i = 0; i < b * lk * d; i++) p->k[i] = rnd(&st);
    for (long i = 0; i < b * lk * dv; i++) p->v[i] = rnd(&st);
    if (with_keep) {
        p->keep = malloc((size_t)(b * lk));
        for (long i = 0; i < b * lk; i++)
            p->keep[i] = (uint8_t)(i % 3 != 1);
    }
    for (long i = 0; i < b; i++)
        ref_sdpa(p->q + i * lq * d, p->k + i * lk * d, p->v + i * lk * dv, lq, lk, d, dv,
                 1.0 / sqrt((double)d), p->keep ? p->keep + i * lk : NULL,
                 p->out + i * lq * dv, p->w + i * lq * lk);
}

static void problem_free(problem *p)
{
    free(p->q); free(p->k); free(p->v); free(p->out); free(p->w); free(p->keep);
}

/* A POST of body to /attention/scaled_dot (chunked when asked); body stays
 * the caller's. */
static request scaled_dot_post(const buf *body, int chunked)
{
    return (request){.method = "POST", .path = "/attention/scaled_dot", .body = body->data,
                     .body_len = body->len, .has_body = 1, .chunked = chunked};
}

/* The request body for /attention/scaled_dot in the given forms. */
static void problem_body(buf *b, const problem *p, int form, int mask_form, int b64_out,
                         int need_weights)
{
    int batched = p->b > 1;
    long sq[3] = {p->b, p->lq, p->d}, sk[3] = {p->b, p->lk, p->d}, sv[3] = {p->b, p->lk, p->dv};
    int r = batched ? 3 : 2, o = batched ? 0 : 1;
    qkv_put(b, r, p->q, sq + o, p->k, sk + o, p->v, sv + o, form);
    if (p->keep) {
        golden_tensor km = {.kind = GOLDEN_MASK, .rank = batched ? 2 : 1,
                            .shape = {batched ? p->b : p->lk, p->lk}, .count = p->b * p->lk,
                            .m = p->keep};
        buf_puts(b, ",\"key_mask\":");
        mask_put(b, &km, mask_form);
    }
    if (b64_out)
        buf_puts(b, ",\"output_format\":\"b64\"");
    if (!need_weights)
        buf_puts(b, ",\"need_weights\":false");
    buf_puts(b, "}");
}

/* Checks a scaled_dot response against the problem's reference. */
static int problem_check(const problem *p, const response *r, const char *name)
{
    char n2[300], why[200] = "not a tensor";
    snprintf(n2, sizeof n2, "%s: status 200", name);
    if (!check(r->status == 200 && r->json, n2, "got %ld, body %s", r->status, short_body(r)))
        return 0;
    int batched = p->b > 1, ok = 1;
    long so[3] = {p->b, p->lq, p->dv}, sw[3] = {p->b, p->lq, p->lk};
    tensor t;
    json_t *jo = json_object_get(r->json, "output");
    int good = jo && tensor_read(jo, &t) == 0 &&
               tensor_matches(&t, batched ? 3 : 2, so + !batched, p->out, why, sizeof why);
    if (jo)
        tensor_free(&t);
    snprintf(n2, sizeof n2, "%s: output", name);
    ok &= check(good, n2, "%s", why);
    json_t *jw = json_object_get(r->json, "weights");
    if (jw) {
        good = tensor_read(jw, &t) == 0 &&
               tensor_matches(&t, batched ? 3 : 2, sw + !batched, p->w, why, sizeof why);
        tensor_free(&t);
        snprintf(n2, sizeof n2, "%s: weights", name);
        ok &= check(good, n2, "%s", why);
    }
    return ok;
}

static void test_forms(void)
{
    static const char *fname[] = {"nested", "flat", "b64"};
    CURL *h = curl_easy_init();
    for (int batched = 0; batched < 2; batched++) {
        problem p;
        problem_make(&p, batched ? 2 : 1, 3, 5, 4, 2, 11 + (uint64_t)batched, 1);
        for (int form = 0; form < 3; form++) {
            for (int out = 0; out < 2; out++) {
                buf b = {0};
                problem_body(&b, &p, form, (form + out) % 3, out, 1);
                request rq = scaled_dot_post(&b, 0);
                response r;
                http(h, srv_main.base, &rq, &r);
                char name[200];
                snprintf(name, sizeof name, "forms: %s in, mask %s, %s out%s", fname[form],
                         fname[(form + out) % 3], out ? "b64" : "nested",
                         batched ? ", batched" : "");
                problem_check(&p, &r, name);
                if (out && r.json) {
                    json_t *o = json_object_get(r.json, "output");
                    char n2[260];
                    snprintf(n2, sizeof n2, "%s: dtype float32", name);
                    check(json_is_string(json_object_get(o, "dtype")) &&
                              !strcmp(json_string_value(json_object_get(o, "dtype")), "float32"),
                          n2, "output %s", short_body(&r));
                }
                response_free(&r);
                buf_free(&b);
            }
        }
        problem_free(&p);
    }
    curl_easy_cleanup(h);
}

/* Requests of one shape back to back on one connection, so on one server
 * thread, which reuses its parse of the last envelope (the body less its
 * big arrays) when the next is the same text: each answer must be its own
 * data's, and two envelopes of the same length that differ (need_weights
 * true and false) must each keep their meaning. */
static void test_same_shape(void)
{
    CURL *h = curl_easy_init();
    for (int i = 0; i < 6; i++) {
        problem p;
        problem_make(&p, 1, 8, 8, 16, 16, 40 + (uint64_t)i, 0);
        buf b = {0};
        problem_body(&b, &p, FORM_NESTED, 0, 0, 1);
        int weights = i % 3 != 2;
        b.len--; /* the closing brace: "true }" and "false}" are one length */
        buf_puts(&b, weights ? ",\"need_weights\":true }" : ",\"need_weights\":false}");
        request rq = scaled_dot_post(&b, 0);
        response r;
        http(h, srv_main.base, &rq, &r);
        char name[128];
        snprintf(name, sizeof name, "same shape: request %d (weights %s)", i + 1,
                 weights ? "asked" : "not asked");
        if (problem_check(&p, &r, name)) {
            char n2[160];
            snprintf(n2, sizeof n2, "%s: weights %s", name, weights ? "present" : "absent");
            check(!json_object_get(r.json, "weights") == !weights, n2, "%s", short_body(&r));
        }
        response_free(&r);
        buf_free(&b);
        problem_free(&p);
    }
    curl_easy_cleanup(h);
}

/* ------------------------------------------------------------ seeded multi-head */

/* A /multihead request without params: the server seeds them (attn.h,
 * "Seeded parameters"), keeps the set and, from the first request that
 * finds it kept, computes with prepared weights made from it. */
typedef struct {
    const char *name;
    long B, lq, lk, E, kdim, vdim, H, hkv; /* kdim 0: self-attention (key and value absent) */
    uint64_t seed;
} seeded_mha;

/* Where each seeded parameter goes among p[0..7] (wq bq wk bk wv bv wo
 * bo): its first slot, and how many slots it fills (in_proj's rows and
 * bias are q, k, v in turn). */
static const struct {
    const char *name;
    int slot, parts;
} seeded_slots[] = {
    {"W_q.weight", 0, 1}, {"W_q.bias", 1, 1}, {"W_k.weight", 2, 1}, {"W_k.bias", 3, 1},
    {"W_v.weight", 4, 1}, {"W_v.bias", 5, 1}, {"W_o.weight", 6, 1}, {"W_o.bias", 7, 1},
    {"q_proj_weight", 0, 1}, {"k_proj_weight", 2, 1}, {"v_proj_weight", 4, 1},
    {"in_proj_weight", 0, 3}, {"in_proj_bias", 1, 3},
    {"out_proj.weight", 6, 1}, {"out_proj.bias", 7, 1},
};

/* The seeded set, drawn in the documented order (golden_mha_seed_specs),
 * as p[0..7]: wq bq wk bk wv bv wo bo, in double. */
static void seeded_mha_params(const seeded_mha *c, double *p[8])
{
    long kd = c->kdim ? c->kdim : c->E, vd = c->vdim ? c->vdim : c->E;
    golden_seed_spec sp[GOLDEN_MHA_SPECS];
    size_t n = golden_mha_seed_specs(c->E, kd, vd, c->H, c->hkv, 0, sp);
    uint64_t st = c->seed;
    for (size_t i = 0; i < n; i++) {
        int64_t cnt = sp[i].shape[0] * (sp[i].rank == 2 ? sp[i].shape[1] : 1);
        float *tmp = malloc(sizeof(float) * (size_t)cnt);
        golden_fill_uniform(&st, tmp, cnt, sp[i].fan);
        for (size_t s = 0; s < sizeof seeded_slots / sizeof seeded_slots[0]; s++) {
            if (strcmp(seeded_slots[s].name, sp[i].name) != 0)
                continue;
            int64_t part = cnt / seeded_slots[s].parts;
            for (int k = 0; k < seeded_slots[s].parts; k++) {
                double *d = malloc(sizeof(double) * (size_t)part);
                for (int64_t e = 0; e < part; e++)
                    d[e] = tmp[k * part + e];
                p[seeded_slots[s].slot + 2 * k] = d;
            }
        }
        free(tmp);
    }
}

/* The expected output (B, lq, E) of case c for inputs x[0..2], from the
 * double reference with the parameters drawn above. */
static float *seeded_mha_expect(const seeded_mha *c, float *const x[3])
{
    long E = c->E, kd = c->kdim ? c->kdim : E, vd = c->vdim ? c->vdim : E;
    long lk = c->kdim ? c->lk : c->lq, nx[3] = {c->B * c->lq * E, c->B * lk * kd, c->B * lk * vd};
    double *p[8], *in[3], *out = malloc(sizeof(double) * (size_t)(c->B * c->lq * E));
    seeded_mha_params(c, p);
    for (int t = 0; t < 3; t++) {
        const float *src = c->kdim ? x[t] : x[0];
        in[t] = malloc(sizeof(double) * (size_t)nx[t]);
        for (long k = 0; k < nx[t]; k++)
            in[t][k] = src[k];
    }
    rm_request r;
    memset(&r, 0, sizeof r);
    r.rule = RM_MULTIHEAD;
    r.B = c->B; r.Lq = c->lq; r.Lk = lk; r.Dq = E; r.Dk = kd; r.Dv = vd;
    r.query = in[0]; r.key = in[1]; r.value = in[2];
    r.H = c->H; r.Hkv = c->hkv;
    r.Wq = p[0]; r.bq = p[1]; r.Wk = p[2]; r.bk = p[3];
    r.Wv = p[4]; r.bv = p[5]; r.Wo = p[6]; r.bo = p[7];
    float *want = NULL;
    if (rm_compute(&r, out, NULL, NULL, NULL) == 0) {
        want = malloc(sizeof(float) * (size_t)(c->B * c->lq * E));
        for (long k = 0; k < c->B * c->lq * E; k++)
            want[k] = (float)out[k];
    }
    for (int i = 0; i < 8; i++)
        free(p[i]);
    for (int t = 0; t < 3; t++)
        free(in[t]);
    free(out);
    return want;
}

/* Posts each case's request three times, the cases in turn (so the
 * server's cache holds them all and each later request must find its own
 * set): every answer matches the double reference, and the later answers
 * (prepared weights) are bit for bit the first (the seeded set as params). */
static void test_seeded_multihead(void)
{
    static const seeded_mha cases[] = {
        {"E 512, 8 heads", 1, 4, 6, 512, 512, 512, 8, 8, 21},
        {"E 512, 8 heads, self-attention", 1, 5, 5, 512, 0, 0, 8, 8, 21},
        {"E 512, 8 heads, 2 kv heads", 1, 4, 6, 512, 512, 512, 8, 2, 22},
        {"E 64, kdim 48, vdim 80, batch 2", 2, 3, 7, 64, 48, 80, 4, 4, 23},
    };
    enum { NC = sizeof cases / sizeof cases[0], POSTS = 3 };
    CURL *h = curl_easy_init();
    buf body[NC];
    float *want[NC], *first[NC];
    for (int i = 0; i < NC; i++) {
        const seeded_mha *c = &cases[i];
        long lk = c->kdim ? c->lk : c->lq;
        long shp[3][3] = {{c->B, c->lq, c->E}, {c->B, lk, c->kdim}, {c->B, lk, c->vdim}};
        float *x[3];
        uint64_t st = c->seed * 77 + 5;
        memset(&body[i], 0, sizeof body[i]);
        buf_puts(&body[i], "{");
        for (int t = 0; t < 3; t++) {
            long n = shp[t][0] * shp[t][1] * shp[t][2];
            x[t] = malloc(sizeof(float) * (size_t)n);
            for (long k = 0; k < n; k++)
                x[t][k] = rnd(&st);
            if (t == 0 || c->kdim) {
                buf_printf(&body[i], "%s\"%s\":", t ? "," : "", t == 0 ? "query" : t == 1 ? "key" : "value");
                tensor_put(&body[i], x[t], 3, shp[t], t == 1 ? FORM_FLAT : FORM_B64);
            }
        }
        buf_printf(&body[i], ",\"num_heads\":%ld,\"num_kv_heads\":%ld,\"seed\":%llu,"
                   "\"need_weights\":false,\"output_format\":\"b64\"}",
                   c->H, c->hkv, (unsigned long long)c->seed);
        want[i] = seeded_mha_expect(c, x);
        first[i] = NULL;
        for (int t = 0; t < 3; t++)
            free(x[t]);
    }
    for (int n = 0; n < POSTS; n++)
        for (int i = 0; i < NC; i++) {
            const seeded_mha *c = &cases[i];
            long so[3] = {c->B, c->lq, c->E}, count = c->B * c->lq * c->E;
            request rq = {.method = "POST", .path = "/multihead", .body = body[i].data,
                          .body_len = body[i].len, .has_body = 1};
            response r;
            http(h, srv_main.base, &rq, &r);
            char name[200], n2[260], why[200] = "no reference";
            snprintf(name, sizeof name, "seeded multihead %s, request %d", c->name, n + 1);
            snprintf(n2, sizeof n2, "%s: status 200", name);
            tensor t = {0};
            json_t *jo = r.json ? json_object_get(r.json, "output") : NULL;
            if (check(r.status == 200 && jo && tensor_read(jo, &t) == 0, n2, "got %ld, body %s",
                      r.status, short_body(&r))) {
                snprintf(n2, sizeof n2, "%s: output matches the double reference", name);
                check(want[i] && tensor_matches(&t, 3, so, want[i], why, sizeof why), n2, "%s", why);
                if (n == 0 && t.count == count) {
                    first[i] = t.data;
                    t.data = NULL;
                } else {
                    snprintf(n2, sizeof n2, "%s: bit for bit the first answer", name);
                    check(first[i] && t.count == count &&
                              !memcmp(first[i], t.data, sizeof(float) * (size_t)count),
                          n2, "%s", first[i] ? "the floats differ" : "no first answer");
                }
                tensor_free(&t);
            }
            response_free(&r);
        }
    for (int i = 0; i < NC; i++) {
        buf_free(&body[i]);
        free(want[i]);
        free(first[i]);
    }
    curl_easy_cleanup(h);
}

/* ------------------------------------------------------------ connections */

static void test_keepalive(void)
{
    CURL *h = curl_easy_init();
    problem p;
    problem_make(&p, 1, 2, 3, 4, 4, 5, 0);
    buf b = {0};
    problem_body(&b, &p, FORM_NESTED, 0, 0, 1);
    for (int i = 0; i < 6; i++) {
        request post = scaled_dot_post(&b, 0);
        request bad = {.method = "POST", .path = "/attention/dot", .body = "{\"query\":",
                       .body_len = 9, .has_body = 1};
        request get = {.method = "GET", .path = "/healthz"};
        response r;
        const char *what = i == 3 ? "after a 400" : i % 2 ? "GET" : "POST";
        http(h, srv_main.base, i == 2 ? &bad : i % 2 ? &get : &post, &r);
        char name[128];
        snprintf(name, sizeof name, "keep-alive: request %d (%s) %s", i + 1, what,
                 i ? "reuses the connection" : "opens one connection");
        check(r.connects == (i ? 0 : 1), name, "CURLINFO_NUM_CONNECTS = %ld", r.connects);
        if (i != 2) {
            snprintf(name, sizeof name, "keep-alive: request %d (%s) status 200", i + 1, what);
            check(r.status == 200, name, "status %ld", r.status);
        }
        response_free(&r);
    }
    buf_free(&b);
    problem_free(&p);
    curl_easy_cleanup(h);
}

/* An 8 MB nested-array body, sent whole, chunked, and paced at 100 MB/s
 * (a network's pace: the query and key arrays are then parsed while the
 * rest comes, body.c's early parse). */
static void test_large_and_chunked(void)
{
    CURL *h = curl_easy_init();
    problem p;
    problem_make(&p, 1, 4, 6144, 64, 64, 77, 0);
    buf b = {0};
    problem_body(&b, &p, FORM_NESTED, 0, 0, 0);
    char name[128];
    for (int form = 0; form < 3; form++) {
        int chunked = form == 1;
        request rq = scaled_dot_post(&b, chunked);
        rq.pace = form == 2 ? 100000000L : 0;
        response r;
        double t0 = now_ms();
        http(h, srv_main.base, &rq, &r);
        snprintf(name, sizeof name, "large body %.1f MB%s (%.0f ms)", b.len / 1e6,
                 chunked ? ", chunked" : form == 2 ? ", paced at 100 MB/s" : "", now_ms() - t0);
        problem_check(&p, &r, name);
        /* reading 8 MB of JSON takes measurable time: the parse entry is real */
        char st[256] = "";
        double parse = 0, compute = 0;
        header_value(&r, "Server-Timing", st, sizeof st);
        sscanf(st, "parse;dur=%lf, compute;dur=%lf", &parse, &compute);
        snprintf(name, sizeof name, "large body%s: Server-Timing parse and compute > 0",
                 chunked ? ", chunked" : form == 2 ? ", paced" : "");
        check(parse > 0 && compute > 0, name, "Server-Timing: %s", st);
        response_free(&r);
    }
    problem_free(&p);
    buf_free(&b);
    /* a small chunked request too: chunks of 1000 bytes, several of them */
    problem_make(&p, 2, 3, 7, 5, 3, 8, 1);
    buf s = {0};
    problem_body(&s, &p, FORM_FLAT, FORM_FLAT, 1, 1);
    request rq = scaled_dot_post(&s, 1);
    response r;
    http(h, srv_main.base, &rq, &r);
    snprintf(name, sizeof name, "chunked upload of %zu bytes", s.len);
    problem_check(&p, &r, name);
    response_free(&r);
    buf_free(&s);
    problem_free(&p);
    curl_easy_cleanup(h);
}

/* For --memcheck: a 350 KB base64 request, computed on its own thread
 * with the library's worker pool, checked against the reference. */
static void test_memcheck_large(void)
{
    CURL *h = curl_easy_init();
    problem p;
    problem_make(&p, 1, 64, 512, 64, 64, 31, 0);
    buf b = {0};
    problem_body(&b, &p, FORM_B64, 0, 1, 0);
    request rq = scaled_dot_post(&b, 0);
    response r;
    http(h, srv_main.base, &rq, &r);
    char name[96];
    snprintf(name, sizeof name, "memcheck: %zu-byte request on the offloaded path", b.len);
    problem_check(&p, &r, name);
    response_free(&r);
    buf_free(&b);
    problem_free(&p);
    curl_easy_cleanup(h);
}

/* A TCP connection to port from source address src (any 127/8 address is
 * loopback on Linux, so one machine can play several clients). -1 when
 * the connect itself fails. */
static int tcp_open(int port, const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (src) {
        inet_pton(AF_INET, src, &a.sin_addr);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            close(fd);
            return -1;
        }
    }
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends text as it is on a new connection to srv_main and reads the
 * answer (until its JSON body closes, or 5 s) into resp (cap bytes,
 * NUL-terminated). */
static void raw_exchange(const char *text, char *resp, size_t cap)
{
    int fd = tcp_open(srv_main.port, NULL);
    size_t got = 0;
    resp[0] = '\0';
    if (fd < 0)
        return;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (write(fd, text, strlen(text)) == (ssize_t)strlen(text)) {
        ssize_t n;
        while (got < cap - 1 && (n = read(fd, resp + got, cap - 1 - got)) > 0) {
            got += (size_t)n;
            resp[got] = '\0';
            if (strstr(resp, "\r\n\r\n") && strstr(resp, "}"))
                break;
        }
    }
    close(fd);
}

/* A sample's value in GET /metrics of the server on port, asked from
 * source address src; -1 when absent or unreachable. */
static double metric_at(int port, const char *src, const char *sample)
{
    int fd = tcp_open(port, src);
    if (fd < 0)
        return -1;
    static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    buf text = {0};
    char chunk[8192];
    ssize_t n;
    if (write(fd, get, sizeof get - 1) == (ssize_t)(sizeof get - 1))
        while ((n = read(fd, chunk, sizeof chunk)) > 0)
            buf_put(&text, chunk, (size_t)n);
    close(fd);
    double v = metric_sample(text.data, sample);
    buf_free(&text);
    return v;
}

/* 413 must be decided from Content-Length before the body is read: send
 * only the headers of a terabyte body and expect the answer at once. */
static void test_content_length_cap(void)
{
    char resp[4096];
    raw_exchange("POST /attention/dot HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Content-Type: application/json\r\n"
                 "Content-Length: 1000000000000\r\n\r\n", resp, sizeof resp);
    check(!strncmp(resp, "HTTP/1.1 413", 12) || !strncmp(resp, "HTTP/1.0 413", 12),
          "413 from Content-Length: 1e12 before any body byte", "got '%.100s'", resp);
    check(strstr(resp, "\"body_too_large\"") != NULL,
          "413 from Content-Length: code body_too_large", "got '%.300s'", resp);
    CURL *h = curl_easy_init();
    check_alive(h, &srv_main, "Content-Length 1e12");
    curl_easy_cleanup(h);
}

/* A body of one-feature rows: {opts, "need_weights": false, "query",
 * "key" and "value" each n rows of [0.5]}, opts some more members. A
 * small body for a lot of work. */
static void rows_body(buf *b, const char *opts, int n)
{
    buf_printf(b, "{%s, \"need_weights\": false", opts);
    for (int t = 0; t < 3; t++) {
        buf_printf(b, ", \"%s\": [", t == 0 ? "query" : t == 1 ? "key" : "value");
        for (int i = 0; i < n; i++)
            buf_puts(b, i ? ",[0.5]" : "[0.5]");
        buf_puts(b, "]");
    }
    buf_puts(b, "}");
}

/* The work cap counts what a request's options cost beside its products
 * (attn.h, attn_shapes.flops): 60000 one-feature rows under top_k or
 * sample are 3.6e9 pairs, 1.4e10 operations of products, well under the
 * default cap, but some 25 s of the row path's selection; additive
 * attention over 2000 x 2000 pairs of 10000 hidden units is 1.2e11 by
 * the 3 operations a tanh term was counted, 1.1e12 at the 28 it takes.
 * Each is refused at once, naming ATTN_MAX_WORK, from a body under 1 MB. */
static void test_work_counts_pipeline(void)
{
    static const struct { const char *path, *opts; int rows; } c[] = {
        {"/attention/scaled_dot", "\"hard\": {\"top_k\": 30000}", 60000},
        {"/attention/scaled_dot", "\"hard\": {\"sample\": {\"temperature\": 1}}", 60000},
        {"/attention/additive", "\"hidden_size\": 10000", 2000},
    };
    CURL *h = curl_easy_init();
    for (size_t t = 0; t < sizeof c / sizeof *c; t++) {
        buf body = {0};
        rows_body(&body, c[t].opts, c[t].rows);
        request rq = {.method = "POST", .path = c[t].path, .body = body.data,
                      .body_len = body.len, .has_body = 1};
        response r = {0};
        double t0 = now_ms();
        http(h, srv_main.base, &rq, &r);
        double ms = now_ms() - t0;
        check(r.status == 413 && strstr(r.body.data ? r.body.data : "", "ATTN_MAX_WORK") && ms < 5000,
              "work cap: options' cost counted", "%s {%s}: status %ld after %.0f ms: %s", c[t].path,
              c[t].opts, r.status, ms, short_body(&r));
        response_free(&r);
        buf_free(&body);
    }
    curl_easy_cleanup(h);
}

/* A body's length stated two ways is 400 invalid_request (RFC 9112 6.3:
 * a proxy could take the other length and split requests apart another
 * way); the same Content-Length twice is one length. */
static void test_ambiguous_length(void)
{
    static const char *body = "{\"query\":[[1,0]],\"key\":[[1,0],[0,1]],\"value\":[[1],[2]]}";
    static const struct { const char *headers; int status; const char *name; } cases[] = {
        {"Content-Length: 5\r\nContent-Length: %zu\r\n", 400, "two different Content-Lengths: 400"},
        {"Content-Length: %zu\r\nContent-Length: 99999999999\r\n", 400, "a second, larger Content-Length: 400"},
        {"Content-Length: %zu\r\nTransfer-Encoding: chunked\r\n", 400, "Content-Length with Transfer-Encoding: 400"},
        {"Content-Length: %zu\r\nContent-Length: %zu\r\n", 200, "the same Content-Length twice: 200"},
        /* no length to read the body by: answered at once, not at the idle timeout */
        {"Transfer-Encoding: gzip\r\n", 400, "Transfer-Encoding: gzip: 400"},
        {"Transfer-Encoding: gzip, chunked\r\n", 400, "Transfer-Encoding: gzip, chunked: 400"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char head[256], text[1024], resp[4096];
        snprintf(head, sizeof head, cases[i].headers, strlen(body), strlen(body));
        snprintf(text, sizeof text, "POST /attention/dot HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Content-Type: application/json\r\n%sConnection: close\r\n\r\n%s", head, body);
        raw_exchange(text, resp, sizeof resp);
        char want[16];
        snprintf(want, sizeof want, "HTTP/1.1 %d", cases[i].status);
        check(!strncmp(resp, want, 12) &&
              (cases[i].status == 200 || strstr(resp, "\"invalid_request\"")), cases[i].name,
              "got '%.200s'", resp);
    }
    CURL *h = curl_easy_init();
    check_alive(h, &srv_main, "ambiguous body lengths");
    curl_easy_cleanup(h);
}

/* A path's control bytes and spaces (decoded from %0a, %0d, %20) are
 * written %XX in the access log, so a client can forge neither a line nor
 * a field of it; a request line of only a query (MHD's url "") is a plain
 * 404. */
static void test_log_injection(void)
{
    char resp[4096];
    raw_exchange("GET /zz%0aFAKE%20LINE%0d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp,
                 sizeof resp);
    check(!strncmp(resp, "HTTP/1.1 404", 12), "a path with %0a: 404", "got '%.100s'", resp);
    raw_exchange("GET ?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof resp);
    check(strstr(resp, " 404 ") && strstr(resp, "\"not_found\""), "a request line of only a query: 404",
          "got '%.200s'", resp);
    usleep(200 * 1000); /* the log line is written after the answer */
    FILE *f = fopen(log_path, "r");
    int forged = 0, escaped = 0;
    char line[4096];
    int whole = 0; /* time, client, method, path, status, sizes, duration, error code */
    while (f && fgets(line, sizeof line, f)) {
        forged |= !strncmp(line, "FAKE", 4);
        escaped |= strstr(line, "/zz%0AFAKE%20LINE%0D 404") != NULL;
        int y, mo, d, hh, mm, ss, ms, at = 0;
        char client[64], method[8], rest[64];
        if (sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ info %63s %7s /zz%%0AFAKE%%20LINE%%0D 404 %*u %*u %*fms%n",
                   &y, &mo, &d, &hh, &mm, &ss, &ms, client, method, &at) == 9 && at > 0 &&
            sscanf(line + at, "%63s", rest) == 1)
            whole |= y >= 2024 && !strcmp(client, "127.0.0.1") && !strcmp(method, "GET") &&
                     !strcmp(rest, "not_found");
    }
    if (f)
        fclose(f);
    check(f && !forged && escaped, "the access log writes a path's control bytes and spaces as %XX",
          "%s: a forged line %s, the escaped path %s", log_path, forged ? "found" : "absent",
          escaped ? "found" : "absent");
    check(whole, "an access line gives the UTC time, its level (info), the client, the request, its status, "
          "sizes, time and error code", "no such line for GET /zz... in %s", log_path);
}

/* X-Request-Id: a client's well-formed id is echoed and logged; without
 * one, or with one that is not 1-64 of [A-Za-z0-9._:-], the server makes
 * its own (16 hex digits, a new one each request). */
static void test_request_id(void)
{
    static const char *const mine[] = {"X-Request-Id: trace-42.a:b", NULL};
    static const char *const bad[] = {"X-Request-Id: two words", NULL};
    const char *body = "{\"query\":[[1,0]]}";
    char ids[3][80] = {"", "", ""};
    const char *const *hdrs[3] = {mine, NULL, bad};
    long status[3] = {0, 0, 0};
    CURL *h = curl_easy_init();
    for (int i = 0; i < 3; i++) {
        request rq = {.method = "POST", .path = "/attention/dot", .headers = hdrs[i], .body = body,
                      .body_len = strlen(body), .has_body = 1};
        response r;
        http(h, srv_main.base, &rq, &r);
        status[i] = r.status;
        header_value(&r, "X-Request-Id", ids[i], sizeof ids[i]);
        response_free(&r);
    }
    curl_easy_cleanup(h);
    int hex = 1;
    for (int i = 1; i < 3; i++)
        hex &= strlen(ids[i]) == 16 && strspn(ids[i], "0123456789abcdef") == 16;
    check(status[0] == 400 && !strcmp(ids[0], "trace-42.a:b"), "X-Request-Id: the client's is echoed",
          "%ld, '%s'", status[0], ids[0]);
    check(hex && strcmp(ids[1], ids[2]) != 0, "X-Request-Id: without one, or with a malformed one, "
          "the server's own (16 hex digits, new each time)", "'%s', '%s'", ids[1], ids[2]);
    usleep(200 * 1000); /* the log line is written after the answer */
    check(log_has(log_path, "info 127.0.0.1 POST /attention/dot 400 ", " missing_field id=trace-42.a:b", NULL) &&
              log_has(log_path, " id=", ids[1], NULL),
          "X-Request-Id: the access line ends with the request's id", "not in %s", log_path);
}

/* ------------------------------------------------------------ parallel */

typedef struct {
    int ok;
} worker;

static void parallel_worker(CURL *h, int id, void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 20; i++) {
        problem p;
        problem_make(&p, 1 + i % 2, 3 + i % 4, 4 + id, 8, 3, (uint64_t)(1000 * id + i), i % 3 == 0);
        buf b = {0};
        problem_body(&b, &p, (id + i) % 3, i % 3, i % 2, 1);
        request rq = scaled_dot_post(&b, 0);
        response r;
        http(h, srv_main.base, &rq, &r);
        char name[96];
        snprintf(name, sizeof name, "parallel: client %d request %d", id, i);
        w->ok += problem_check(&p, &r, name);
        response_free(&r);
        buf_free(&b);
        problem_free(&p);
    }
}

static void test_parallel(void)
{
    enum { N = 8 };
    worker w[N] = {{0}};
    double ms = run_clients(N, parallel_worker, w, sizeof w[0]);
    int ok = 0;
    for (int i = 0; i < N; i++)
        ok += w[i].ok;
    printf("parallel: %d of %d requests right from %d clients in %.0f ms\n", ok, N * 20, N, ms);
}

/* ------------------------------------------------------------ overload */

typedef struct {
    const buf *body;
    long status;
    volatile int done;
} slow_call;

static void *slow_worker(void *arg)
{
    slow_call *sc = arg;
    CURL *h = curl_easy_init();
    request rq = {.method = "POST", .path = "/attention/additive", .body = sc->body->data,
                  .body_len = sc->body->len, .has_body = 1};
    response r;
    http(h, srv_busy.base, &rq, &r);
    sc->status = r.status;
    response_free(&r);
    curl_easy_cleanup(h);
    sc->done = 1;
    return NULL;
}

/* One try with a slow request of `hidden` units. Returns 1 when it made
 * its checks, 0 when the slow request finished before a probe could see
 * the 503 and this is not the last try (the caller retries it slower). */
static int overload_attempt(long hidden, int last)
{
    /* additive attention computes a tanh per (query, key, hidden unit):
     * 1024 x 1024 x hidden of them from a body of only 1 MB; how long that
     * takes depends on the kernels, hence the retries with more units */
    long L = 1024, D = 64;
    float *x = malloc(sizeof(float) * (size_t)(L * D));
    uint64_t st = 99;
    for (long i = 0; i < L * D; i++)
        x[i] = rnd(&st);
    long shape[2] = {L, D};
    buf b = {0};
    qkv_put(&b, 2, x, shape, x, shape, x, shape, FORM_B64);
    buf_printf(&b, ",\"need_weights\":false,\"output_format\":\"b64\",\"hidden_size\":%ld}", hidden);
    free(x);

    /* The probe is cheap to compute but large to send: only bodies of
     * 64 KiB or more count against the server's compute slots. */
    problem pp;
    problem_make(&pp, 1, 1, 256, 64, 64, 123, 0);
    buf probe = {0};
    problem_body(&probe, &pp, FORM_B64, 0, 1, 0);
    problem_free(&pp);
    const char *small = probe.data;
    /* A body under 64 KiB whose answer is not small: 2100 x 2100 weights
     * (4.4M floats) from 26 KB of nested arrays counts too. */
    buf wide = {0};
    buf_puts(&wide, "{\"output_format\":\"b64\"");
    for (int t = 0; t < 3; t++) {
        buf_printf(&wide, ",\"%s\":[", t == 0 ? "query" : t == 1 ? "key" : "value");
        for (int i = 0; i < 2100; i++)
            buf_puts(&wide, i ? ",[0]" : "[0]");
        buf_puts(&wide, "]");
    }
    buf_puts(&wide, "}");

    slow_call sc = {.body = &b};
    pthread_t th;
    double t0 = now_ms();
    pthread_create(&th, NULL, slow_worker, &sc);
    CURL *h = curl_easy_init();
    int seen = 0, seen_wide = 0, tries = 0, health_tries = 0;
    double worst_health = 0;
    char retry[64] = "";
    response r503;
    memset(&r503, 0, sizeof r503);
    /* Each probe on a new connection: the server may tie a connection to
     * one of its threads, and a probe must not queue behind the slow one
     * by accident of the connection it was given. */
    usleep(100 * 1000); /* let the 1 MB upload finish and the compute start */
    while (!sc.done && now_ms() - t0 < 30000) {
        request hz = {.method = "GET", .path = "/healthz", .fresh = 1};
        response r;
        double t1 = now_ms();
        http(h, srv_busy.base, &hz, &r);
        if (!sc.done) {
            health_tries++;
            if (r.status != 200 || now_ms() - t1 > worst_health)
                worst_health = r.status == 200 ? now_ms() - t1 : 1e9;
        }
        response_free(&r);
        usleep(10 * 1000); /* a health check every 10 ms, not a flood */
        if (!seen_wide) {
            request rw = {.method = "POST", .path = "/attention/dot", .body = wide.data,
                          .body_len = wide.len, .has_body = 1, .fresh = 1};
            http(h, srv_busy.base, &rw, &r);
            seen_wide = !sc.done && r.status == 503;
            response_free(&r);
        }
        if (seen)
            continue;
        request rq = {.method = "POST", .path = "/attention/scaled_dot", .body = small,
                      .body_len = probe.len, .has_body = 1, .fresh = 1};
        http(h, srv_busy.base, &rq, &r);
        tries++;
        if (r.status == 503) {
            seen = 1;
            header_value(&r, "Retry-After", retry, sizeof retry);
            r503 = r;
        } else {
            response_free(&r);
        }
    }
    pthread_join(th, NULL);
    printf("overload: slow request (hidden_size %ld) took %.0f ms (status %ld); %d probes, "
           "%d health checks (slowest %.0f ms) meanwhile\n", hidden, now_ms() - t0, sc.status,
           tries, health_tries, worst_health);
    if (!seen && !last && sc.status == 200) {
        curl_easy_cleanup(h);
        buf_free(&b);
        buf_free(&probe);
        buf_free(&wide);
        return 0;
    }
    check(sc.status == 200, "overload: the slow request succeeds", "status %ld", sc.status);
    if (check(seen, "overload: 503 while another request computes",
              "no 503 in %d tries (the slow request finished first?)", tries)) {
        json_t *c = json_path(r503.json, "error.code");
        check(json_is_string(c) && !strcmp(json_string_value(c), "overloaded"),
              "overload: code overloaded", "body %s", short_body(&r503));
        check(log_has(log_path, "warn 127.0.0.1 POST /attention/scaled_dot answered 503 (id ",
                      "): {\"error\":{\"code\":\"overloaded\"", "busy with", NULL),
              "overload: the 503 is logged at warn with its message", "no such line in %s", log_path);
        check(retry[0] && atoi(retry) >= 0, "overload: Retry-After header", "headers %s",
              r503.headers.data);
    }
    check(seen_wide, "overload: 503 for a 26 KB body asking for 4.4M weights while another request computes",
          "it was computed (ATTN_MAX_INFLIGHT counted bodies of 64 KiB or more only)");
    check(health_tries > 0 && worst_health < 250,
          "overload: /healthz on new connections answers within 250 ms during a slow request",
          "slowest of %d took %.0f ms", health_tries, worst_health);
    response_free(&r503);
    curl_easy_cleanup(h);
    buf_free(&b);
    buf_free(&probe);
    buf_free(&wide);
    return 1;
}

/* The busy instance computes one request at a time (ATTN_MAX_INFLIGHT=1):
 * while a slow one computes, a second attention request must get 503
 * overloaded with Retry-After, and /healthz must still answer quickly. */
static void test_overloaded(void)
{
    /* From small to large: a slow or shared machine must not push the
     * slow request past the client's 20 s timeout; a fast one retries
     * with more work until a probe sees the 503. */
    for (long hidden = 64, i = 0; i < 4; hidden *= 8, i++)
        if (overload_attempt(hidden, i == 3))
            return;
}

/* ------------------------------------------------------------ timing header */

/* Server-Timing: parse;dur=X, compute;dur=Y, encode;dur=Z with numbers. */
static void test_server_timing(void)
{
    CURL *h = curl_easy_init();
    const char *body = "{\"query\":[[1,0]],\"key\":[[1,0],[0,1]],\"value\":[[1],[2]]}";
    request rq = {.method = "POST", .path = "/attention/dot", .body = body,
                  .body_len = strlen(body), .has_body = 1};
    response r;
    http(h, srv_main.base, &rq, &r);
    char v[512] = "";
    header_value(&r, "Server-Timing", v, sizeof v);
    double p = -1, c = -1, e = -1;
    int n = sscanf(v, "parse;dur=%lf, compute;dur=%lf, encode;dur=%lf", &p, &c, &e);
    check(n == 3 && p >= 0 && c >= 0 && e >= 0, "Server-Timing has parse, compute, encode durations",
          "got '%s'", v);
    response_free(&r);
    curl_easy_cleanup(h);
}

/* ------------------------------------------------------------ connection limits */

static server srv_limits; /* ATTN_MAX_CONNECTIONS=20, ATTN_MAX_PER_IP=10, ATTN_TIMEOUT=2, one thread */

/* Whether the server has closed fd within wait_ms: 1 closed (EOF or
 * reset), 0 still open (the read timed out). */
static int tcp_closed(int fd, int wait_ms)
{
    struct timeval tv = {wait_ms / 1000, (wait_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c[512];
    ssize_t n = read(fd, c, sizeof c);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* One small POST and one GET /healthz on new connections: the slower of
 * the two in ms, or 1e9 when either fails. */
static double normal_client_ms(CURL *h, const server *s)
{
    const char *body = "{\"query\":[[1,0]],\"key\":[[1,0],[0,1]],\"value\":[[1],[2]]}";
    request post = {.method = "POST", .path = "/attention/dot", .body = body,
                    .body_len = strlen(body), .has_body = 1, .fresh = 1};
    request get = {.method = "GET", .path = "/healthz", .fresh = 1};
    double worst = 0;
    for (int i = 0; i < 2; i++) {
        response r;
        double t0 = now_ms();
        http(h, s->base, i ? &get : &post, &r);
        double ms = now_ms() - t0;
        if (r.status != 200)
            ms = 1e9;
        if (ms > worst)
            worst = ms;
        response_free(&r);
    }
    return worst;
}

/* 200 connections held open against the default server, half idle and
 * half slowloris (a request line sent a byte at a time, never finished):
 * a normal client must still be served within a second, every time. */
static void test_idle_flood(void)
{
    enum { N = 200 };
    static const char partial[] = "POST /attention/dot HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    int fds[N], opened = 0;
    for (int i = 0; i < N; i++)
        if ((fds[i] = tcp_open(srv_main.port, NULL)) >= 0)
            opened++;
    check(opened == N, "flood: 200 connections open", "only %d opened", opened);
    CURL *h = curl_easy_init();
    double worst = 0;
    size_t pos = 0;
    for (int round = 0; round < 10; round++) { /* ~1.5 s of dripping bytes */
        for (int i = 1; i < N; i += 2) /* odd ones: one more byte each */
            if (fds[i] >= 0 && write(fds[i], partial + pos % (sizeof partial - 1), 1) != 1) {
                close(fds[i]);
                fds[i] = -1;
            }
        pos++;
        double ms = normal_client_ms(h, &srv_main);
        if (ms > worst)
            worst = ms;
        usleep(100 * 1000);
    }
    int still = 0;
    for (int i = 0; i < N; i++)
        if (fds[i] >= 0) {
            still++;
            close(fds[i]);
        }
    printf("flood: %d idle/slow connections; a normal client's slowest request took %.1f ms\n",
           still, worst);
    check(worst < 1000, "flood: a normal client is served within 1 s beside 200 idle and slow connections",
          "slowest %.0f ms", worst);
    curl_easy_cleanup(h);
    check_alive(h = curl_easy_init(), &srv_main, "flood");
    curl_easy_cleanup(h);
}

/* The limits instance: the 11th connection from one address is closed at
 * once; the 21st overall is not served (libmicrohttpd stops accepting at
 * the limit, so it waits in the listen backlog) until the idle ones are
 * closed by the timeout; then it and a normal client are served. */
static void test_connection_limits(void)
{
    enum { PER_IP = 10, TOTAL = 20 };
    int a[PER_IP + 1], b[PER_IP];
    int ok_a = 0, ok_b = 0;
    for (int i = 0; i < PER_IP; i++)
        ok_a += (a[i] = tcp_open(srv_limits.port, "127.0.0.1")) >= 0;
    usleep(200 * 1000); /* let the server accept them all */
    a[PER_IP] = tcp_open(srv_limits.port, "127.0.0.1");
    check(a[PER_IP] >= 0 && tcp_closed(a[PER_IP], 1000),
          "limits: the 11th connection from one address is closed (ATTN_MAX_PER_IP=10)", "it stayed open");
    check(ok_a == PER_IP && !tcp_closed(a[0], 300), "limits: the first 10 from that address stay open",
          "%d opened", ok_a);
    double refused = metric_at(srv_limits.port, "127.0.0.4", "attn_http_refused_total{what=\"connection\"}");
    double open = metric_at(srv_limits.port, "127.0.0.4", "attn_connections_open");
    check(refused >= 1 && open >= PER_IP + 1 && open <= PER_IP + 2,
          "limits: /metrics counts the refused connection and the open ones",
          "attn_http_refused_total{what=\"connection\"} %g, attn_connections_open %g (want >= 1, 11..12)",
          refused, open);
    check(log_has(log_path, "warn a connection was closed at once: ATTN_MAX_PER_IP (10)", NULL),
          "limits: the refused connection is logged at warn, naming ATTN_MAX_PER_IP", "not in %s", log_path);
    for (int i = 0; i < PER_IP; i++)
        ok_b += (b[i] = tcp_open(srv_limits.port, "127.0.0.2")) >= 0;
    usleep(200 * 1000);
    double t0 = now_ms();
    int extra = tcp_open(srv_limits.port, "127.0.0.3");
    static const char get[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    char resp[256] = "";
    if (extra >= 0 && write(extra, get, sizeof get - 1) == (ssize_t)(sizeof get - 1)) {
        struct timeval tv = {0, 500 * 1000};
        setsockopt(extra, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ssize_t n = read(extra, resp, sizeof resp - 1);
        check(ok_b == PER_IP && n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
              "limits: the 21st connection overall waits unserved (ATTN_MAX_CONNECTIONS=20)",
              "read gave %zd: %.60s", n, n > 0 ? resp : "");
    } else {
        check(0, "limits: the 21st connection overall waits unserved", "cannot connect");
    }
    /* ATTN_TIMEOUT=2: the idle ones are closed by the server on its own */
    int closed = tcp_closed(b[0], 6000);
    check(log_has(log_path, "warn 20 connections open, ATTN_MAX_CONNECTIONS: new ones wait", NULL),
          "limits: the connections at ATTN_MAX_CONNECTIONS are logged at warn", "not in %s", log_path);
    double waited = now_ms() - t0;
    check(closed && waited < 5000, "limits: an idle connection is closed after ATTN_TIMEOUT=2 s",
          "closed %d after %.0f ms", closed, waited);
    if (extra >= 0) {
        struct timeval tv = {3, 0};
        setsockopt(extra, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ssize_t n = read(extra, resp, sizeof resp - 1);
        resp[n > 0 ? n : 0] = 0;
        check(!strncmp(resp, "HTTP/1.1 200", 12),
              "limits: the waiting connection is served once the timeout frees slots", "got '%.60s'", resp);
        close(extra);
    }
    for (int i = 0; i <= PER_IP; i++)
        if (a[i] >= 0)
            close(a[i]);
    for (int i = 0; i < PER_IP; i++)
        if (b[i] >= 0)
            close(b[i]);
    usleep(100 * 1000);
    CURL *h = curl_easy_init();
    double ms = normal_client_ms(h, &srv_limits);
    check(ms < 1000, "limits: a normal client is served once the crowd has gone", "%.0f ms", ms);
    curl_easy_cleanup(h);
}

/* ------------------------------------------------------------ request deadline */

static server srv_deadline; /* ATTN_REQUEST_TIMEOUT=2, ATTN_TIMEOUT=10 */

/* One sender of test_request_deadline: its headers and first bytes at
 * once, then `step` bytes of `rest` every 0.5 s (rest again and again when
 * `repeat`, a sender that never ends), and the status it must get. */
typedef struct {
    const char *name, *headers, *first, *rest;
    size_t step;
    int repeat, status;
} drip_case;

/* Its connection. */
typedef struct {
    int fd;
    size_t sent;      /* of rest */
    double at;        /* ms from the headers to the answer's first bytes; 0: none yet */
    char resp[2048];
    size_t got;
} drip;

/* Reads what fd has now into d->resp (nothing waits). */
static void drip_read(drip *d, double t0)
{
    if (d->got >= sizeof d->resp - 1)
        return;
    ssize_t n = recv(d->fd, d->resp + d->got, sizeof d->resp - 1 - d->got, MSG_DONTWAIT);
    if (n > 0) {
        if (!d->at)
            d->at = now_ms() - t0;
        d->got += (size_t)n;
        d->resp[d->got] = '\0';
    }
}

/* ATTN_REQUEST_TIMEOUT=2 with an idle timeout of 10 s: a body sent a byte
 * every 0.5 s, with Content-Length or in chunks, is answered 408
 * request_timeout at the first bytes past 2 s and the connection closed
 * (the idle timeout never fires, as bytes keep coming); a chunked body
 * whose data came at once but whose end came after 2 s is 408 too; one
 * that ends within 2 s is served; and so is a normal client afterwards.
 * Against a server without the deadline the slow senders get no answer
 * in the 6 s the test waits. */
static void test_request_deadline(void)
{
    static const char body[] = "{\"query\":[[1,0]],\"key\":[[1,0],[0,1]],\"value\":[[1],[2]]}";
    char chunk[128], cl[64], start[32];
    snprintf(chunk, sizeof chunk, "%zx\r\n%s\r\n", sizeof body - 1, body);
    snprintf(start, sizeof start, "%.27s", body);
    snprintf(cl, sizeof cl, "Content-Length: %zu\r\nConnection: close\r\n", sizeof body - 1);
    const drip_case c[] = {
        {"Content-Length: 1000, a byte every 0.5 s", "Content-Length: 1000\r\n", "", " ", 1, 1, 408},
        {"chunked, a 1-byte chunk every 0.5 s", "Transfer-Encoding: chunked\r\n", "", "1\r\n \r\n", 6, 1, 408},
        {"chunked, the body at once and its last chunk a byte every 0.5 s (ends at 2.5 s)",
         "Transfer-Encoding: chunked\r\n", chunk, "0\r\n\r\n", 1, 0, 408},
        {"Content-Length, the body's last 28 bytes 10 every 0.5 s (ends at 1.5 s)", cl, start, body + 27,
         10, 0, 200},
    };
    enum { N = sizeof c / sizeof c[0] };
    drip d[N];
    memset(d, 0, sizeof d);
    char head[1024];
    double t0 = now_ms();
    for (int i = 0; i < N; i++) {
        d[i].fd = tcp_open(srv_deadline.port, NULL);
        snprintf(head, sizeof head, "POST /attention/dot HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Content-Type: application/json\r\n%s\r\n%s", c[i].headers, c[i].first);
        if (d[i].fd >= 0 && send(d[i].fd, head, strlen(head), MSG_NOSIGNAL) != (ssize_t)strlen(head)) {
            close(d[i].fd);
            d[i].fd = -1;
        }
    }
    for (int tick = 0; tick < 12; tick++) { /* 6 s at most */
        usleep(500 * 1000);
        int waiting = 0;
        for (int i = 0; i < N; i++) {
            drip *x = &d[i];
            if (x->fd < 0 || x->at)
                continue;
            size_t len = strlen(c[i].rest), off = c[i].repeat ? x->sent % len : x->sent;
            size_t n = off >= len ? 0 : len - off < c[i].step ? len - off : c[i].step;
            if (n && send(x->fd, c[i].rest + off, n, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)n)
                x->sent += n;
            drip_read(x, t0);
            waiting += !x->at;
        }
        if (!waiting)
            break;
    }
    char name[192];
    for (int i = 0; i < N; i++) {
        drip *x = &d[i];
        /* the rest of the answer, then the end of the stream: EOF or a reset */
        struct timeval tv = {1, 0};
        int closed = 0;
        if (x->fd >= 0)
            setsockopt(x->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        for (int reads = 0; x->fd >= 0 && x->at && reads < 64 && x->got < sizeof x->resp - 1; reads++) {
            ssize_t n = read(x->fd, x->resp + x->got, sizeof x->resp - 1 - x->got);
            if (n > 0) {
                x->got += (size_t)n;
                x->resp[x->got] = '\0';
                continue;
            }
            closed = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
            break;
        }
        char want[16];
        snprintf(want, sizeof want, "HTTP/1.1 %d", c[i].status);
        snprintf(name, sizeof name, "request deadline 2 s: %s: %d", c[i].name, c[i].status);
        check(!strncmp(x->resp, want, 12) &&
              (c[i].status == 200 || strstr(x->resp, "\"request_timeout\"")), name,
              "after %.0f ms: '%.200s'", x->at, x->at ? x->resp : "no answer");
        if (c[i].status == 408) {
            snprintf(name, sizeof name, "request deadline 2 s: %s: answered at 2 to 4 s", c[i].name);
            check(x->at >= 1900 && x->at < 4000, name, "after %.0f ms", x->at);
            snprintf(name, sizeof name, "request deadline 2 s: %s: Connection: close, then closed", c[i].name);
            check(strcasestr(x->resp, "\r\nConnection: close\r\n") && closed, name,
                  "the stream %s: '%.200s'", closed ? "closed" : "stayed open", x->resp);
        }
        if (x->fd >= 0)
            close(x->fd);
    }
    printf("request deadline: %.1f s for %d slow senders\n", (now_ms() - t0) / 1e3, N);
    CURL *h = curl_easy_init();
    double ms = normal_client_ms(h, &srv_deadline);
    check(ms < 1000, "request deadline: a normal client is served beside the late ones", "%.0f ms", ms);
    check_alive(h, &srv_deadline, "request deadline");
    curl_easy_cleanup(h);
}

/* ------------------------------------------------------------ main */

static void usage(void)
{
    fprintf(stderr, "usage: test_http --server PATH [--cases DIR] [--modern-cases DIR] [--golden DIR]\n"
                    "                 [--log FILE]\n"
                    "                 [--only NAME] [--memcheck] [-v]\n");
    exit(2);
}

/* The exit status of the server started with one setting, or -1 when it
 * ran on past 5 s (it started: the setting was taken). */
static int start_status(const char *flag, const char *value)
{
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl(server_path, server_path, "--port", "0", flag, value, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    for (double t0 = now_ms(); pid > 0 && now_ms() - t0 < 5000; usleep(20 * 1000))
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : -2;
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    return -1;
}

/* A server started with one more environment variable env answers
 * POST /sessions (with headers hdr) into *r, and is stopped; -1 when it
 * did not start. */
static int session_under(const char *env, const char *const *hdr, response *r)
{
    const char *const envs[] = {env, NULL};
    server sv = {0};
    if (server_start(&sv, server_path, "settings", "/healthz", envs, log_path) != 0)
        return -1;
    CURL *h = curl_easy_init();
    request rq = {.method = "POST", .path = "/sessions", .headers = hdr,
                  .body = "{\"num_heads\":1,\"head_dim\":2,\"max_tokens\":4}", .has_body = 1};
    rq.body_len = strlen(rq.body);
    http(h, sv.base, &rq, r);
    curl_easy_cleanup(h);
    server_stop(&sv);
    return 0;
}

/* The start line names the settings in effect, these among them (it once
 * left them out); compute threads past the CPUs the process may run on
 * (for which the library plans working memory, the cap's measure) are cut
 * to them, with a warning. */
static void test_start_line(void)
{
    static const char *const envs[] = {"ATTN_MAX_DEPTH=77", "ATTN_SESSION_MAX_TOKENS=999",
                                       "ATTN_CORS_ORIGINS=https://x.example", "ATTN_TRUST_SESSION_ID=1",
                                       "ATTN_LOG_LEVEL=warn", "ATTN_COMPUTE_THREADS=1024", NULL};
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    char threads[64];
    snprintf(threads, sizeof threads, "compute threads %d,", cpus);
    server sv = {0};
    int up = server_start(&sv, server_path, "start line", "/healthz", envs, log_path) == 0;
    server_stop(&sv);
    char at[80];
    snprintf(at, sizeof at, "listening on %s ", sv.base);
    check(up && log_has(log_path, at, "max depth 77,", "session max tokens 999,", "cors origins https://x.example,",
                        "trust session id on,", "log level warn,", "openapi ", NULL),
          "settings: the start line names max depth, session max tokens, CORS origins, trusted "
          "session ids, the log level and the OpenAPI file", "no such line in %s (started: %d)",
          log_path, up);
    check(up && cpus > 0 && cpus < 1024 && log_has(log_path, at, threads, NULL) &&
              log_has(log_path, "ATTN_COMPUTE_THREADS=1024 is more than the", NULL),
          "settings: 1024 compute threads are cut to the CPUs the server may run on, with a warning",
          "no \"%s\" in the start line, or no warning, in %s (started: %d, %d CPUs)", threads, log_path,
          up, cpus);
}

/* Settings that would refuse every request, turn a defence off, or that a
 * reader could take for "off" stop the start with status 2; "false" turns
 * a switch off (it once turned ATTN_TRUST_SESSION_ID on). */
static void test_settings(void)
{
    static const char *const bad[][2] = {
        {"--trust-session-id", "maybe"}, {"--models-strict", "nope"}, {"--timeout", "0"},
        {"--max-depth", "3"}, {"--max-body", "64iB"}, {"--max-body", "0"},
        {"--compute-threads", "0"}, {"--max-inflight", "0"}, {"--session-max-tokens", "0"},
        {"--openapi", "/nonexistent/openapi.yaml"}, {"--static-dir", "/nonexistent"},
        {"--log-level", "debug"}, {"--bind", "localhost"}, {"--bind", "999.1.1.1"},
        {"--token", ""},
        /* a size's suffix is no unit of a count or a duration (18K was port 18432, 5m a TTL of
         * 60 days) */
        {"--port", "18K"}, {"--max-sessions", "1K"}, {"--max-connections", "2M"}, {"--threads", "4x"},
        {"--timeout", "1k"}, {"--session-ttl", "5w"}, {"--request-timeout", "1M"},
    };
    char name[160];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int st = start_status(bad[i][0], bad[i][1]);
        snprintf(name, sizeof name, "settings: %s %s stops the start (status 2)", bad[i][0], bad[i][1]);
        check(st == 2, name, "status %d (-1: it started)", st);
    }
    response r;
    if (session_under("ATTN_SESSION_TTL=5m", NULL, &r) == 0) {
        json_t *got = json_path(r.json, "ttl_seconds");
        check(r.status == 201 && json_integer_value(got) == 300, "settings: ATTN_SESSION_TTL=5m is 300 seconds",
              "%ld %s", r.status, short_body(&r));
        response_free(&r);
    } else {
        check(0, "settings: ATTN_SESSION_TTL=5m is 300 seconds", "the server did not start");
    }
    static const char *const id = "0123456789abcdef0123456789abcdef";
    static const char *const hdr[] = {"X-Session-Id: 0123456789abcdef0123456789abcdef", NULL};
    static const char *const words[][2] = {{"false", "0"}, {"off", "0"}, {"true", "1"}, {"1", "1"}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        char env[64];
        snprintf(env, sizeof env, "ATTN_TRUST_SESSION_ID=%s", words[i][0]);
        snprintf(name, sizeof name, "settings: %s: the session id is %s", env,
                 words[i][1][0] == '1' ? "the balancer's X-Session-Id" : "the server's own");
        if (session_under(env, hdr, &r) != 0) {
            check(0, name, "the server did not start");
            continue;
        }
        json_t *got = json_path(r.json, "id");
        int same = json_is_string(got) && !strcmp(json_string_value(got), id);
        check(r.status == 201 && same == (words[i][1][0] == '1'), name, "%ld %s", r.status, short_body(&r));
        response_free(&r);
    }
}

/* Connects to s and sends data: the socket (or -1) in *fd; 1 when all of
 * it was sent. */
static int connect_send(const server *s, const char *data, size_t n, int *fd)
{
    *fd = tcp_open(s->port, NULL);
    return *fd >= 0 && send(*fd, data, n, MSG_NOSIGNAL) == (ssize_t)n;
}

/* SIGTERM while a client sends its body a byte at a time: the server answers
 * it 503 at its next bytes once 2 s have passed and exits 0, where it used
 * to wait out its 30 s drain for the body and exit 1. Stops s. */
static void test_drain_drip(server *s)
{
    static const char head[] = "POST /attention/dot HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{";
    int fd;
    int sent = connect_send(s, head, strlen(head), &fd);
    usleep(200 * 1000);
    double t0 = now_ms();
    kill(s->pid, SIGTERM);
    char resp[1024] = "";
    size_t got = 0;
    int st = 0, exited = 0;
    while (sent && now_ms() - t0 < 8000 && !exited) { /* a byte every 0.2 s, for 8 s at most */
        usleep(200 * 1000);
        if (send(fd, " ", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN)
            sent = got > 0; /* closed by the server: read what it wrote */
        ssize_t n = recv(fd, resp + got, sizeof resp - 1 - got, MSG_DONTWAIT);
        if (n > 0)
            resp[got += (size_t)n] = '\0';
        exited = waitpid(s->pid, &st, WNOHANG) == s->pid;
    }
    double ms = now_ms() - t0;
    if (exited)
        s->pid = 0;
    check(!strncmp(resp, "HTTP/1.1 503", 12) && strstr(resp, "shutting down"),
          "drain: a body still arriving at SIGTERM is answered 503", "'%.200s'", resp);
    check(exited && WIFEXITED(st) && WEXITSTATUS(st) == 0 && ms < 5000,
          "drain: the server exits 0 within 5 s while a client drips its body",
          "%s after %.0f ms (status %d)", exited ? "exited" : "still running", ms, exited ? WEXITSTATUS(st) : -1);
    if (fd >= 0)
        close(fd);
    server_stop(s);
}

/* Waits up to ms for s to exit; its exit status, or -1 if it is still running. */
static int exit_within(server *s, double ms)
{
    double t0 = now_ms();
    int st = 0;
    while (now_ms() - t0 < ms) {
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(20 * 1000);
    }
    return -1;
}

/* SIGTERM while a client has sent half a body and then nothing: the server
 * stops waiting for it 3 s into the drain and exits 0, where it used to
 * hold the drain its whole 30 s and exit 1. Stops s. */
static void test_drain_stalled(server *s)
{
    static const char head[] = "POST /attention/dot HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\":";
    int fd;
    int sent = connect_send(s, head, strlen(head), &fd);
    usleep(300 * 1000);
    double t0 = now_ms();
    kill(s->pid, SIGTERM);
    int rc = exit_within(s, 8000);
    double ms = now_ms() - t0;
    check(sent && rc == 0 && ms < 5000, "drain: a body that stalls does not hold the drain",
          "exit %d after %.0f ms", rc, ms);
    if (fd >= 0)
        close(fd);
    server_stop(s);
}

/* Sends s a request that computes some 10 s (additive attention over 512 x
 * 512 pairs of 200000 hidden units, from a 10 KB body: 1.5e12 operations
 * as the library counts them, which its servers' ATTN_MAX_WORK lets
 * through); its socket in *fd. 1 when all of it was sent. */
static int send_slow_request(const server *s, int *fd)
{
    buf body = {0}, req = {0};
    rows_body(&body, "\"hidden_size\": 200000", 512);
    buf_printf(&req, "POST /attention/additive HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
               body.len, body.data);
    int sent = connect_send(s, req.data, req.len, fd);
    buf_free(&body);
    buf_free(&req);
    return sent;
}

/* A second SIGTERM during a drain that waits on a computation ends it at
 * once (exit 1), as a second Ctrl-C should. Stops s. */
static void test_drain_second_signal(server *s)
{
    int fd;
    int sent = send_slow_request(s, &fd);
    usleep(300 * 1000);
    kill(s->pid, SIGTERM);
    usleep(300 * 1000);
    int before = waitpid(s->pid, &(int){0}, WNOHANG) == s->pid;
    double t0 = now_ms();
    kill(s->pid, SIGTERM);
    int rc = exit_within(s, 5000);
    double ms = now_ms() - t0;
    check(sent && !before && rc == 1 && ms < 2000, "drain: a second SIGTERM ends the drain at once",
          "%s; exit %d after %.0f ms", before ? "exited before the second signal" : "draining", rc, ms);
    if (fd >= 0)
        close(fd);
    server_stop(s);
}

/* ATTN_DRAIN_TIMEOUT=1: a request still computing a second after SIGTERM
 * is left (exit 1), where the drain used to wait 30 s for it. Stops s. */
static void test_drain_timeout(server *s)
{
    int fd;
    int sent = send_slow_request(s, &fd);
    usleep(300 * 1000);
    double t0 = now_ms();
    kill(s->pid, SIGTERM);
    int rc = exit_within(s, 8000);
    double ms = now_ms() - t0;
    check(sent && rc == 1 && ms > 900 && ms < 3000,
          "drain: ATTN_DRAIN_TIMEOUT=1 leaves a request still computing after 1 s (exit 1)",
          "exit %d after %.0f ms", rc, ms);
    if (fd >= 0)
        close(fd);
    server_stop(s);
}

/* SIGHUP (a closed terminal) drains as SIGTERM does: exit 0, and the
 * access lines still in the log's buffer written. It used to kill the
 * process at once. Stops s. */
static void test_drain_hangup(server *s)
{
    char path[64], want[80];
    snprintf(path, sizeof path, "/hangup-%d", (int)s->pid);
    snprintf(want, sizeof want, "GET %s 404", path);
    CURL *h = curl_easy_init();
    response r;
    request rq = {.method = "GET", .path = path};
    http(h, s->base, &rq, &r);
    response_free(&r);
    curl_easy_cleanup(h);
    kill(s->pid, SIGHUP);
    int rc = exit_within(s, 5000);
    check(rc == 0 && log_has(log_path, want, NULL), "drain: SIGHUP drains (exit 0) and writes the buffered access lines",
          "exit %d; the line '%s' %s in %s", rc, want, log_has(log_path, want, NULL) ? "is" : "is not", log_path);
    server_stop(s);
}

/* Starts s with the environment env and SIGHUP's disposition hup (SIG_IGN
 * or SIG_DFL, inherited through fork and exec), whatever this process has:
 * under nohup it is ignored, and the server keeps an inherited ignore. 1
 * when it is up. */
static int start_with_hup(server *s, const char *name, const char *const *env, void (*hup)(int))
{
    void (*was)(int) = signal(SIGHUP, hup);
    int up = server_start(s, server_path, name, "/healthz", env, log_path) == 0;
    signal(SIGHUP, was);
    return up;
}

/* A server started ignoring SIGHUP (as under nohup) keeps serving after
 * one: blocking the signal for sigwait would otherwise collect it. */
static void test_nohup(void)
{
    server sv = {0};
    if (!check(start_with_hup(&sv, "nohup", NULL, SIG_IGN), "server starts ignoring SIGHUP", "see %s", log_path))
        return;
    kill(sv.pid, SIGHUP);
    usleep(500 * 1000);
    CURL *h = curl_easy_init();
    long st = http_get_status(h, sv.base, "/healthz");
    curl_easy_cleanup(h);
    check(st == 200, "drain: a server started ignoring SIGHUP (nohup) keeps serving after one",
          "/healthz gave %ld", st);
    check(server_stop(&sv), "the nohup server exits 0 on SIGTERM", "see %s", log_path);
}

/* 5xx warnings are capped at 10 a second; what is left out is counted, by
 * the next warning let through or at the end of its second, so that the
 * lines written and the counts add up to the 503s sent. Each warning is
 * one line ending with the answer's JSON. Its own log file. */
static void test_capped_warnings(void)
{
    enum { SENT = 40 };
    static const char *const env[] = {"ATTN_MAX_SESSIONS=0", NULL};
    char log[256];
    snprintf(log, sizeof log, "%s.capped", log_path);
    remove(log);
    server sv = {0};
    if (!check(server_start(&sv, server_path, "capped", "/healthz", env, log) == 0,
               "server starts with no session slots", "see %s", log))
        return;
    CURL *h = curl_easy_init();
    int n503 = 0;
    double t0 = now_ms();
    for (int i = 0; i < SENT; i++) {
        request rq = {.method = "POST", .path = "/sessions",
                      .body = "{\"num_heads\":1,\"head_dim\":2,\"max_tokens\":4}", .has_body = 1};
        rq.body_len = strlen(rq.body);
        response r;
        http(h, sv.base, &rq, &r);
        n503 += r.status == 503;
        response_free(&r);
    }
    curl_easy_cleanup(h);
    int seconds = (int)((now_ms() - t0) / 1000.0) + 2; /* the seconds the flood touched, at most */
    usleep(1500 * 1000); /* past the flood's second, and a tick of main */
    server_stop(&sv);
    FILE *f = fopen(log, "r");
    char line[4096];
    int written = 0, left = 0, whole = 1;
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, " answered 503 ");
        const char *q = strstr(line, "such lines left out)");
        if (p) {
            written++;
            whole &= strstr(line, "}\n") != NULL || (q && strstr(line, "} (and "));
        }
        for (const char *k = line; q && (k = strstr(k, "(and ")) != NULL; k += 5)
            left += atoi(k + 5);
    }
    if (f)
        fclose(f);
    check(n503 == SENT && written >= 1 && written <= 10 * seconds && written + left == SENT,
          "5xx warnings: at most 10 a second written, the rest counted, adding up to the 503s sent",
          "%d of %d answers 503; %d lines written, %d counted as left out (%s)", n503, SENT, written, left, log);
    check(written >= 1 && whole, "5xx warnings: one line each, ending with the answer's JSON", "see %s", log);
}

/* ATTN_COMPUTE_TIMEOUT=1: send_slow_request's body (some 10 s of compute,
 * under the server's ATTN_MAX_WORK) is 504 compute_timeout about a second
 * in, naming the setting, and the server answers the next request at once
 * and exits 0. Under valgrind the paths only, not the clock. */
static void test_compute_timeout(void)
{
    static const char *const env[] = {"ATTN_COMPUTE_TIMEOUT=1", "ATTN_MAX_WORK=1e13", NULL};
    server s = {0};
    if (!check(server_start(&s, server_path, "compute timeout", "/healthz", env, log_path) == 0,
               "server starts with a 1 s compute timeout", "see %s", log_path))
        return;
    CURL *h = curl_easy_init();
    buf body = {0};
    rows_body(&body, "\"hidden_size\": 200000", 512);
    request rq = {.method = "POST", .path = "/attention/additive", .body = body.data,
                  .body_len = body.len, .has_body = 1};
    response r = {0};
    double t0 = now_ms();
    http(h, s.base, &rq, &r);
    double ms = now_ms() - t0;
    const char *got = r.body.data ? r.body.data : "";
    check(r.status == 504 && strstr(got, "\"compute_timeout\"") && strstr(got, "ATTN_COMPUTE_TIMEOUT") &&
              (memcheck || ms < 4000),
          "compute timeout: a computation past ATTN_COMPUTE_TIMEOUT is 504",
          "status %ld after %.0f ms: %s", r.status, ms, short_body(&r));
    response_free(&r);
    buf_free(&body);
    double next = normal_client_ms(h, &s);
    check(memcheck ? next < 1e9 : next < 1000, "compute timeout: the next request is served at once",
          "%.0f ms", next);
    curl_easy_cleanup(h);
    check(server_stop(&s), "compute timeout server exits 0 on SIGTERM", "see %s", log_path);
}

/* Polls the gauge attn_computes_in_flight of s until it reads want, for
 * at most ms; returns the ms it took, or -1. */
static double computes_reach(const server *s, double want, double ms)
{
    double t0 = now_ms();
    while (now_ms() - t0 < ms) {
        if (metric_at(s->port, "127.0.0.1", "attn_computes_in_flight") == want)
            return now_ms() - t0;
        usleep(20 * 1000);
    }
    return -1;
}

/* A client that closes its connection while its request computes (some
 * 10 s of it: send_slow_request) stops the computation within
 * milliseconds, where it used to run to its end: the access log has it as
 * 499 client_closed, and the server serves the next request and exits 0. */
static void test_client_gone(void)
{
    static const char *const env[] = {"ATTN_MAX_WORK=1e13", NULL};
    server s = {0};
    if (!check(server_start(&s, server_path, "client gone", "/healthz", env, log_path) == 0,
               "server starts for the client-gone test", "see %s", log_path))
        return;
    int fd;
    int sent = send_slow_request(&s, &fd);
    double started = computes_reach(&s, 1, memcheck ? 60000 : 5000);
    if (fd >= 0)
        close(fd);
    double stopped = started >= 0 ? computes_reach(&s, 0, memcheck ? 120000 : 8000) : -1;
    check(sent && started >= 0 && stopped >= 0 && (memcheck || stopped < 2000),
          "client gone: its computation stops when it closes the connection",
          "sent %d; computing after %.0f ms; stopped %.0f ms after the close", sent, started, stopped);
    int logged = 0;
    for (int i = 0; i < 50 && !logged; i++, usleep(50 * 1000))
        logged = log_has(log_path, "POST /attention/additive 499 ", " client_closed id=", NULL);
    check(logged, "client gone: the access log says 499 client_closed", "see %s", log_path);
    CURL *h = curl_easy_init();
    double next = normal_client_ms(h, &s);
    curl_easy_cleanup(h);
    check(memcheck ? next < 1e9 : next < 1000, "client gone: the next request is served at once", "%.0f ms",
          next);
    check(server_stop(&s), "client-gone server exits 0 on SIGTERM", "see %s", log_path);
}

/* The stop signals' tests, each on a server of its own that it stops. */
static void test_stops(void)
{
    static const char *const slow[] = {"ATTN_MAX_WORK=1e13", NULL};
    static const char *const quick[] = {"ATTN_DRAIN_TIMEOUT=1", "ATTN_MAX_WORK=1e13", NULL};
    static const struct {
        const char *what;
        const char *const *env;
        void (*fn)(server *);
    } t[] = {{"drain test", NULL, test_drain_drip},
             {"stalled body drain test", NULL, test_drain_stalled},
             {"second signal drain test", slow, test_drain_second_signal},
             {"SIGHUP drain test", NULL, test_drain_hangup},
             {"drain timeout test", quick, test_drain_timeout}};
    char name[80];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        server s = {0};
        snprintf(name, sizeof name, "server starts (%s)", t[i].what);
        if (check(start_with_hup(&s, "drain", t[i].env, SIG_DFL), name, "see %s", log_path))
            t[i].fn(&s);
    }
    test_nohup();
    test_capped_warnings();
}

int main(int argc, char **argv)
{
    const char *cases = "tests/http", *golden = "tests/golden";
    const char *modern = "tests/golden_modern/http_cases";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--server") && i + 1 < argc) server_path = argv[++i];
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc) cases = argv[++i];
        else if (!strcmp(argv[i], "--golden") && i + 1 < argc) golden = argv[++i];
        else if (!strcmp(argv[i], "--modern-cases") && i + 1 < argc) modern = argv[++i];
        else if (!strcmp(argv[i], "--log") && i + 1 < argc) log_path = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "-v")) h_verbose = 1;
        else if (!strcmp(argv[i], "--memcheck")) memcheck = 1;
        else usage();
    }
    h_begin(server_path, log_path, usage);

    double t0 = now_ms();
    static const char *const env_small[] = {"ATTN_MAX_BODY=4096", "ATTN_MAX_ELEMENTS=4096",
                                              "ATTN_MAX_WEIGHTS=4096", "ATTN_MAX_WORK=450000",
                                              NULL};
    static const char *const env_busy[] = {"ATTN_MAX_INFLIGHT=1", "ATTN_THREADS=4", NULL};
    int up_main = check(server_start(&srv_main, server_path, "main", "/healthz", NULL, log_path) == 0, "server starts",
                        "%s did not answer /healthz (see %s)", server_path, log_path);
    int up_small = check(server_start(&srv_small, server_path, "small", "/healthz", env_small, log_path) == 0,
                         "server starts with a 4 KB body cap", "see %s", log_path);
    static const char *const env_guard[] = {"ATTN_TOKEN=s3cret-token",
                                              "ATTN_CORS_ORIGINS=https://app.example, https://other.example",
                                              NULL};
    static const char *const env_limits[] = {"ATTN_MAX_CONNECTIONS=20", "ATTN_MAX_PER_IP=10",
                                               "ATTN_TIMEOUT=2", "ATTN_THREADS=1", NULL};
    check(server_start(&srv_guard, server_path, "guard", "/healthz", env_guard, log_path) == 0,
          "server starts with a token and a CORS allow-list", "see %s", log_path);
    int up_limits = check(server_start(&srv_limits, server_path, "limits", "/healthz", env_limits, log_path) == 0,
                          "server starts with connection limits", "see %s", log_path);
    int up_busy = check(server_start(&srv_busy, server_path, "busy", "/healthz", env_busy, log_path) == 0,
                        "server starts with one compute slot", "see %s", log_path);
    static const char *const env_deadline[] = {"ATTN_REQUEST_TIMEOUT=2", "ATTN_TIMEOUT=10", NULL};
    int up_deadline = check(server_start(&srv_deadline, server_path, "deadline", "/healthz", env_deadline,
                                         log_path) == 0,
                            "server starts with a 2 s request deadline", "see %s", log_path);
    if (up_main && up_small) {
        run_case_dir(cases, only, server_named);
        printf("cases: done (%.0f ms)\n", now_ms() - t0);
        run_case_dir(modern, only, server_named);
        printf("modern cases: done (%.0f ms)\n", now_ms() - t0);
    }
    if (up_main) {
        run_golden(golden);
        printf("golden: done (%.0f ms)\n", now_ms() - t0);
    }
    if (up_main && !only) {
        test_varlen_random();
        printf("packed sequences: done (%.0f ms)\n", now_ms() - t0);
    }
    if (up_main && !only && memcheck) {
        /* under valgrind: the paths, not the clock (one body over 64 KiB
         * for the offloaded thread and the compute pool) */
        test_forms();
        test_same_shape();
        test_keepalive();
        test_content_length_cap();
        test_parallel();
        test_memcheck_large();
        printf("connections: done (%.0f ms)\n", now_ms() - t0);
    }
    if (up_main && !only && !memcheck) {
        test_server_timing();
        test_seeded_multihead();
        test_forms();
        test_same_shape();
        test_keepalive();
        test_large_and_chunked();
        test_content_length_cap();
        test_work_counts_pipeline();
        test_ambiguous_length();
        test_log_injection();
        test_request_id();
        test_parallel();
        printf("connections: done (%.0f ms)\n", now_ms() - t0);
    }
    if (up_busy && !only && !memcheck)
        test_overloaded();
    if (up_main && !only && !memcheck)
        test_idle_flood();
    if (up_limits && !only && !memcheck)
        test_connection_limits();
    if (up_deadline && !only && !memcheck)
        test_request_deadline();
    if (!only && !memcheck) {
        test_settings();
        test_start_line();
    }
    if (!only) {
        test_compute_timeout();
        test_client_gone();
    }
    if (!only && !memcheck)
        test_stops();
    check(server_stop(&srv_main), "main server exits 0 on SIGTERM", "see %s", log_path);
    check(server_stop(&srv_small), "small server exits 0 on SIGTERM", "see %s", log_path);
    check(server_stop(&srv_busy), "busy server exits 0 on SIGTERM", "see %s", log_path);
    check(server_stop(&srv_guard), "guard server exits 0 on SIGTERM", "see %s", log_path);
    check(server_stop(&srv_limits), "limits server exits 0 on SIGTERM", "see %s", log_path);
    check(server_stop(&srv_deadline), "deadline server exits 0 on SIGTERM", "see %s", log_path);
    curl_global_cleanup();
    printf("test_http: %.1f s, server log in %s\n", (now_ms() - t0) / 1e3, log_path);
    return h_report();
}
