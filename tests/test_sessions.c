/* test_sessions.c - decode sessions (POST /sessions, step, truncate, GET,
 * DELETE) against a real server: every step of random sessions against the
 * double-precision reference over the whole cache, limits, expiry,
 * concurrency, and the errors of the contract. */
/*
 * Usage: test_sessions --server build/attn-server [--log FILE] [--memcheck] [-v]
 *
 * Servers (each on a free loopback port, logging to --log):
 *   main    the defaults
 *   limits  ATTN_MAX_SESSIONS=3, ATTN_SESSION_MEMORY=64K, ATTN_SESSION_MAX_TOKENS=64
 *   ttl     ATTN_SESSION_TTL=1
 *   guard   ATTN_TOKEN
 * The reference (tests/ref_modern.c) knows nothing of sessions: each step
 * is checked as scaled_dot per head over every row appended so far (as the
 * test kept them), causal with the diagonal at the bottom right.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "harness.h"
#include "ref_modern.h"

static const char *server_path;
static int memcheck; /* --memcheck: servers under valgrind; skip the checks bound to wall time */
static const char *log_path = "build/test_sessions_server.log";
static server srv_main, srv_limits, srv_ttl, srv_guard;

/* ------------------------------------------------------------ random numbers */

static uint64_t next_u64(uint64_t *st)
{
    return rm_splitmix64(st);
}

static long pick(uint64_t *st, long lo, long hi) /* [lo, hi] */
{
    return lo + (long)(next_u64(st) % (uint64_t)(hi - lo + 1));
}

static float rnd(uint64_t *st)
{
    return (float)((double)(next_u64(st) >> 11) * 0x1p-53 * 2.0 - 1.0);
}

/* ------------------------------------------------------------ a session as the test keeps it */

typedef struct {
    char id[64];
    long H, Hkv, d, max_tokens;
    int has_scale;
    double scale;
    /* the score options, fixed at creation */
    double softcap;           /* 0: off */
    int alibi;                /* 0 off, 1 true (the paper's slopes), 2 a list */
    double slopes[8];         /* the slopes in use (both forms) */
    int has_sinks;
    double sinks[8];
    int rope;
    double rope_base;
    int rope_style;           /* 0 half, 1 interleaved */
    long rope_dims, rope_offset;
    int has_window;
    long left, right;         /* -1: unbounded */
    int bf16;                 /* "precision": "bf16" */
    long n;        /* rows held */
    float *k, *v;  /* (max_tokens, Hkv, d): every row sent, in order */
} tsess;

static void tsess_free(tsess *s)
{
    free(s->k);
    free(s->v);
    s->k = s->v = NULL;
}

/* The creation body for s's sizes and options. */
static void create_body(buf *b, const tsess *s)
{
    buf_printf(b, "{\"num_heads\":%ld,\"num_kv_heads\":%ld,\"head_dim\":%ld,\"max_tokens\":%ld",
               s->H, s->Hkv, s->d, s->max_tokens);
    if (s->has_scale)
        buf_printf(b, ",\"scale\":%.9g", s->scale);
    if (s->softcap > 0)
        buf_printf(b, ",\"softcap\":%.9g", s->softcap);
    if (s->alibi == 1)
        buf_puts(b, ",\"alibi\":true");
    for (long h = 0; s->alibi == 2 && h < s->H; h++)
        buf_printf(b, "%s%.9g", h ? "," : ",\"alibi\":[", s->slopes[h]);
    if (s->alibi == 2)
        buf_puts(b, "]");
    for (long h = 0; s->has_sinks && h < s->H; h++)
        buf_printf(b, "%s%.9g", h ? "," : ",\"sinks\":[", s->sinks[h]);
    if (s->has_sinks)
        buf_puts(b, "]");
    if (s->rope)
        buf_printf(b, ",\"rope\":{\"base\":%.9g,\"style\":\"%s\",\"dims\":%ld,\"offset\":%ld}",
                   s->rope_base, s->rope_style ? "interleaved" : "half", s->rope_dims, s->rope_offset);
    if (s->has_window) {
        buf_puts(b, ",\"window\":[");
        buf_printf(b, s->left < 0 ? "null," : "%ld,", s->left);
        buf_printf(b, s->right < 0 ? "null]" : "%ld]", s->right);
    }
    if (s->bf16)
        buf_puts(b, ",\"precision\":\"bf16\"");
    buf_puts(b, "}");
}

static void post(CURL *h, const server *sv, const char *path, const char *body, response *r)
{
    request rq = {.method = "POST", .path = path, .body = body, .body_len = strlen(body),
                  .has_body = 1};
    http(h, sv->base, &rq, r);
}

static void call(CURL *h, const server *sv, const char *method, const char *path, response *r)
{
    request rq = {.method = method, .path = path};
    http(h, sv->base, &rq, r);
}

/* POST /sessions; 1 when 201 with an id (kept in s). */
static int create(CURL *h, const server *sv, tsess *s, const char *name)
{
    buf b = {0};
    create_body(&b, s);
    response r;
    post(h, sv, "/sessions", b.data, &r);
    json_t *id = r.json ? json_object_get(r.json, "id") : NULL;
    int ok = check(r.status == 201 && json_is_string(id) && strlen(json_string_value(id)) == 32, name,
                   "got %ld %s", r.status, short_body(&r));
    if (ok) {
        snprintf(s->id, sizeof s->id, "%s", json_string_value(id));
        s->k = calloc((size_t)(s->max_tokens * s->Hkv * s->d), sizeof(float));
        s->v = calloc((size_t)(s->max_tokens * s->Hkv * s->d), sizeof(float));
        s->n = 0;
    }
    response_free(&r);
    buf_free(&b);
    return ok;
}

/* The expected answer of a step over rows 0..n-1 of s's cache: out (Tq, H,
 * d), w (H, Tq, n) and, when lse is not NULL, each row's log-sum-exp (H,
 * Tq), from the reference per head. */
static void expect_step(const tsess *s, long n, const float *q, long Tq, float *out, float *w,
                        float *lse)
{
    long H = s->H, Hkv = s->Hkv, d = s->d, group = H / Hkv;
    double *qh = malloc(sizeof(double) * (size_t)(Tq * d)), *kh = malloc(sizeof(double) * (size_t)(n * d));
    double *vh = malloc(sizeof(double) * (size_t)(n * d)), *oh = malloc(sizeof(double) * (size_t)(Tq * d));
    double *wh = malloc(sizeof(double) * (size_t)(Tq * n)), *lh = malloc(sizeof(double) * (size_t)Tq);
    for (long h = 0; h < H; h++) {
        long g = h / group;
        for (long i = 0; i < Tq; i++)
            for (long c = 0; c < d; c++)
                qh[i * d + c] = q[(i * H + h) * d + c];
        for (long j = 0; j < n; j++)
            for (long c = 0; c < d; c++) {
                kh[j * d + c] = s->k[(j * Hkv + g) * d + c];
                vh[j * d + c] = s->v[(j * Hkv + g) * d + c];
            }
        rm_request rq;
        memset(&rq, 0, sizeof rq);
        rq.rule = RM_SCALED_DOT;
        rq.B = 1;
        rq.Lq = Tq;
        rq.Lk = n;
        rq.Dq = rq.Dk = rq.Dv = d;
        rq.query = qh;
        rq.key = kh;
        rq.value = vh;
        rq.has_scale = s->has_scale;
        rq.scale = s->scale;
        rq.causal = 1;
        rq.align = RM_BOTTOM_RIGHT;
        rq.softcap = s->softcap;
        double slope = s->slopes[h], sink = s->sinks[h];
        rq.alibi = s->alibi ? &slope : NULL;
        rq.sinks = s->has_sinks ? &sink : NULL;
        rq.rope = (rm_rope){s->rope, s->rope_base, s->rope_style ? RM_ROPE_INTERLEAVED : RM_ROPE_HALF,
                            s->rope_dims, s->rope_offset};
        rq.has_window = s->has_window;
        rq.left = s->left;
        rq.right = s->right;
        rq.lse = lh;
        rm_compute(&rq, oh, wh, NULL, NULL);
        for (long i = 0; i < Tq; i++) {
            for (long c = 0; c < d; c++)
                out[(i * H + h) * d + c] = (float)oh[i * d + c];
            for (long j = 0; j < n; j++)
                w[(h * Tq + i) * n + j] = (float)wh[i * n + j];
            if (lse)
                lse[h * Tq + i] = (float)lh[i];
        }
    }
    free(qh), free(kh), free(vh), free(oh), free(wh), free(lh);
}

/* One step's inputs. */
typedef struct {
    long T, Tq;
    float *k, *v, *q; /* (T, Hkv, d), (T, Hkv, d), (Tq, H, d) */
    int need_weights, b64_out, form, return_lse;
} tstep;

static void step_make(tstep *st, const tsess *s, long T, long Tq, uint64_t *rs)
{
    st->T = T;
    st->Tq = Tq;
    st->k = malloc(sizeof(float) * (size_t)(T * s->Hkv * s->d));
    st->v = malloc(sizeof(float) * (size_t)(T * s->Hkv * s->d));
    st->q = malloc(sizeof(float) * (size_t)(Tq * s->H * s->d));
    for (long i = 0; i < T * s->Hkv * s->d; i++) {
        st->k[i] = rnd(rs) * 2;
        st->v[i] = rnd(rs);
    }
    for (long i = 0; i < Tq * s->H * s->d; i++)
        st->q[i] = rnd(rs) * 2;
    st->need_weights = (int)pick(rs, 0, 1);
    st->b64_out = (int)pick(rs, 0, 1);
    st->form = (int)pick(rs, 0, N_FORMS - 1);
    st->return_lse = (int)pick(rs, 0, 1);
}

static void step_free(tstep *st)
{
    free(st->k), free(st->v), free(st->q);
}

static void step_body(buf *b, const tsess *s, const tstep *st)
{
    long ks[3] = {st->T, s->Hkv, s->d}, qs[3] = {st->Tq, s->H, s->d};
    buf_puts(b, "{\"key\":");
    tensor_put(b, st->k, 3, ks, st->form);
    buf_puts(b, ",\"value\":");
    tensor_put(b, st->v, 3, ks, (st->form + 1) % N_FORMS);
    buf_puts(b, ",\"query\":");
    tensor_put(b, st->q, 3, qs, (st->form + 2) % N_FORMS);
    buf_printf(b, ",\"need_weights\":%s", st->need_weights ? "true" : "false");
    if (st->return_lse)
        buf_puts(b, ",\"return_lse\":true");
    if (st->b64_out)
        buf_puts(b, ",\"output_format\":\"b64\"");
    buf_puts(b, "}");
}

/* Posts the step; on 200 records the rows in s. Returns the status. */
static long step_post(CURL *h, const server *sv, tsess *s, const tstep *st, response *r)
{
    buf b = {0};
    step_body(&b, s, st);
    char path[128];
    snprintf(path, sizeof path, "/sessions/%s/step", s->id);
    post(h, sv, path, b.data, r);
    buf_free(&b);
    return r->status;
}

/* Checks member `key` of a step answer: present and equal to want (rank,
 * shape) when wanted, else absent (the field that asks for it, `asker`,
 * was not set). Returns 1 when right. */
static int member_check(const response *r, const char *key, int wanted, int rank, const long *shape,
                        const float *want, const char *asker, const char *name)
{
    char n2[300], why[200] = "missing";
    json_t *m = r->json ? json_object_get(r->json, key) : NULL;
    snprintf(n2, sizeof n2, "%s: %s %s", name, key, wanted ? "right" : "absent");
    if (!wanted)
        return check(m == NULL, n2, "%s present without %s", key, asker);
    tensor t;
    int good = m && tensor_read(m, &t) == 0 && tensor_matches(&t, rank, shape, want, why, sizeof why);
    if (m)
        tensor_free(&t);
    return check(good, n2, "%s", why);
}

/* Checks a 200 step answer against the reference over rows 0..n-1 (s's
 * rows, the step's included). Returns 1 when right. */
static int step_check(const tsess *s, long n, const tstep *st, const response *r, const char *name)
{
    char n2[300];
    long Tq = st->Tq;
    float *out = malloc(sizeof(float) * (size_t)(Tq * s->H * s->d));
    float *w = malloc(sizeof(float) * (size_t)(s->H * Tq * (n ? n : 1)));
    float *lse = malloc(sizeof(float) * (size_t)(s->H * Tq));
    expect_step(s, n, st->q, Tq, out, w, lse);
    long os[3] = {Tq, s->H, s->d}, ws[3] = {s->H, Tq, n};
    int ok = member_check(r, "output", 1, 3, os, out, "", name);
    ok &= member_check(r, "weights", st->need_weights, 3, ws, w, "need_weights", name);
    ok &= member_check(r, "lse", st->return_lse, 2, ws, lse, "return_lse", name);
    json_t *len = r->json ? json_object_get(r->json, "length") : NULL;
    snprintf(n2, sizeof n2, "%s: length %ld", name, n);
    ok &= check(json_is_integer(len) && json_integer_value(len) == n, n2, "%s", short_body(r));
    free(out);
    free(w);
    free(lse);
    return ok;
}

/* GET /sessions/{id}: its integer member key, or -1. */
static long get_member(CURL *h, const server *sv, const tsess *s, const char *key)
{
    char path[128];
    snprintf(path, sizeof path, "/sessions/%s", s->id);
    response r;
    call(h, sv, "GET", path, &r);
    json_t *m = r.status == 200 && r.json ? json_object_get(r.json, key) : NULL;
    long n = json_is_integer(m) ? (long)json_integer_value(m) : -1;
    response_free(&r);
    return n;
}

static long get_length(CURL *h, const server *sv, const tsess *s)
{
    return get_member(h, sv, s, "length");
}

static int truncate_to(CURL *h, const server *sv, tsess *s, long len, const char *name)
{
    char path[128], body[64];
    snprintf(path, sizeof path, "/sessions/%s/truncate", s->id);
    snprintf(body, sizeof body, "{\"length\":%ld}", len);
    response r;
    post(h, sv, path, body, &r);
    json_t *l = r.json ? json_object_get(r.json, "length") : NULL;
    int ok = check(r.status == 200 && json_is_integer(l) && json_integer_value(l) == len, name,
                   "got %ld %s", r.status, short_body(&r));
    if (ok)
        s->n = len;
    response_free(&r);
    return ok;
}

static void delete_session(CURL *h, const server *sv, const tsess *s, const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "/sessions/%s", s->id);
    response r;
    call(h, sv, "DELETE", path, &r);
    check(r.status == 204, name, "got %ld %s", r.status, short_body(&r));
    response_free(&r);
}

/* Posts a step that fits to s on srv_main: its answer has status 200 (one
 * test, "NAME: 200") and is right over s's rows plus the step's
 * (step_check); s's reference then holds the step's rows. Returns 1 when
 * both. */
static int step_accept(CURL *h, tsess *s, const tstep *st, const char *name)
{
    response resp, *r = &resp;
    long status = step_post(h, &srv_main, s, st, r);
    long n1 = s->n + st->T;
    memcpy(s->k + s->n * s->Hkv * s->d, st->k, sizeof(float) * (size_t)(st->T * s->Hkv * s->d));
    memcpy(s->v + s->n * s->Hkv * s->d, st->v, sizeof(float) * (size_t)(st->T * s->Hkv * s->d));
    char n2[400];
    snprintf(n2, sizeof n2, "%s: 200", name);
    int ok = check(status == 200, n2, "got %ld %s", status, short_body(r));
    if (ok) {
        ok = step_check(s, n1, st, r, name);
        s->n = n1;
    }
    response_free(r);
    return ok;
}

/* Expects status and error.code (and a message containing text, if any). */
static int expect_error(const response *r, long status, const char *code, const char *text,
                        const char *name)
{
    json_t *c = r->json ? json_path(r->json, "error.code") : NULL;
    json_t *m = r->json ? json_path(r->json, "error.message") : NULL;
    int ok = r->status == status && json_is_string(c) && !strcmp(json_string_value(c), code) &&
             json_is_string(m) && (!text || strstr(json_string_value(m), text));
    return check(ok, name, "expected %ld %s%s%s, got %ld %s", status, code, text ? " with " : "",
                 text ? text : "", r->status, short_body(r));
}

/* A request body the server must refuse with status and error.code. */
typedef struct {
    const char *body;
    long status;
    const char *code;
} refusal;

/* POSTs each of the n bodies to path and expects its refusal; what names the call. */
static void expect_refusals(CURL *h, const char *path, const char *what, const refusal *bad, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        response r;
        post(h, &srv_main, path, bad[i].body, &r);
        char name[400];
        snprintf(name, sizeof name, "%s %s: %ld %s", what, bad[i].body, bad[i].status, bad[i].code);
        expect_error(&r, bad[i].status, bad[i].code, NULL, name);
        response_free(&r);
    }
}

/* ------------------------------------------------------------ random sessions */

/* Whether the server takes the score options at creation (softcap,
 * alibi, sinks, rope, window): probed once. */
static int with_options;

/* Each option on with some probability, values the contract allows. */
static void random_options(tsess *s, uint64_t *rs)
{
    if (pick(rs, 0, 2) == 0)
        s->softcap = 0.5 + (double)pick(rs, 0, 40) / 10.0;
    s->alibi = (int)pick(rs, 0, 2) == 0 ? 0 : (int)pick(rs, 0, 2) % 3;
    double paper[8];
    rm_alibi_slopes(s->H, paper);
    for (long h = 0; h < s->H; h++) {
        s->slopes[h] = s->alibi == 2 ? (double)pick(rs, 1, 100) / 100.0 : paper[h];
        s->sinks[h] = (double)pick(rs, -200, 200) / 100.0;
    }
    s->has_sinks = pick(rs, 0, 2) == 0;
    if (pick(rs, 0, 1) == 0) {
        s->rope = 1;
        s->d += s->d % 2; /* even, so the default dims work too */
        s->rope_base = pick(rs, 0, 1) ? 10000.0 : 500.0;
        s->rope_style = (int)pick(rs, 0, 1);
        s->rope_dims = 2 * pick(rs, 1, s->d / 2);
        s->rope_offset = pick(rs, 0, 1) ? 0 : pick(rs, 1, 50);
    }
    if (pick(rs, 0, 2) == 0) {
        s->has_window = 1;
        s->left = pick(rs, -1, 6);
        s->right = pick(rs, -1, 3);
    }
}

/* A random session's heads, head dim, max_tokens (from min_tokens to 40),
 * scale and (with_options) score options. */
static void random_session_shape(tsess *s, uint64_t *rs, long min_tokens)
{
    static const long heads[] = {1, 2, 3, 4, 6, 8};
    s->H = heads[pick(rs, 0, 5)];
    do
        s->Hkv = pick(rs, 1, s->H);
    while (s->H % s->Hkv);
    s->d = pick(rs, 1, 12);
    s->max_tokens = pick(rs, min_tokens, 40);
    s->has_scale = pick(rs, 0, 2) == 0;
    s->scale = 0.05 + (double)pick(rs, 0, 100) / 100.0;
    if (with_options)
        random_options(s, rs);
}

/* One random session's life: steps of random sizes checked against the
 * reference, refused steps that leave it unchanged, truncations. */
static void random_session(CURL *h, int sid, uint64_t seed)
{
    uint64_t rs = seed;
    tsess s = {0};
    random_session_shape(&s, &rs, 4);
    char name[200];
    snprintf(name, sizeof name, "random session %d (H %ld, Hkv %ld, d %ld, max_tokens %ld, softcap %g, "
             "alibi %d, sinks %d, rope %d/%ld/%ld, window %d [%ld, %ld]): created", sid, s.H, s.Hkv, s.d,
             s.max_tokens, s.softcap, s.alibi, s.has_sinks, s.rope, s.rope_dims, s.rope_offset,
             s.has_window, s.left, s.right);
    if (!create(h, &srv_main, &s, name))
        return;
    long steps = pick(&rs, 4, 10);
    for (long k = 0; k < steps; k++) {
        if (s.n > 0 && pick(&rs, 0, 4) == 0) {
            long len = pick(&rs, 0, s.n);
            snprintf(name, sizeof name, "random session %d: truncate %ld -> %ld", sid, s.n, len);
            truncate_to(h, &srv_main, &s, len, name);
        }
        tstep st;
        step_make(&st, &s, pick(&rs, 1, 4), pick(&rs, 1, 3), &rs);
        if (s.n + st.T > s.max_tokens) {
            response r;
            step_post(h, &srv_main, &s, &st, &r);
            snprintf(name, sizeof name, "random session %d step %ld: %ld + %ld rows past max_tokens: "
                     "413 session_full", sid, k, s.n, st.T);
            expect_error(&r, 413, "session_full", NULL, name);
            response_free(&r);
            snprintf(name, sizeof name, "random session %d step %ld: refused step leaves length %ld",
                     sid, k, s.n);
            long got = get_length(h, &srv_main, &s);
            check(got == s.n, name, "GET says %ld", got);
        } else {
            snprintf(name, sizeof name, "random session %d step %ld (T %ld, Tq %ld, n %ld, %s in, %s out)",
                     sid, k, st.T, st.Tq, s.n + st.T, form_names[st.form], st.b64_out ? "b64" : "json");
            step_accept(h, &s, &st, name);
        }
        step_free(&st);
    }
    snprintf(name, sizeof name, "random session %d: deleted", sid);
    delete_session(h, &srv_main, &s, name);
    tsess_free(&s);
}

static void test_random(void)
{
    CURL *h = curl_easy_init();
    response r;
    post(h, &srv_main, "/sessions", "{\"num_heads\":1,\"head_dim\":2,\"max_tokens\":2,\"softcap\":5,"
         "\"alibi\":true,\"sinks\":[0.5],\"rope\":{},\"window\":[3,null]}", &r);
    with_options = r.status == 201;
    if (with_options) {
        tsess probe = {0};
        json_t *id = json_object_get(r.json, "id");
        snprintf(probe.id, sizeof probe.id, "%s", json_is_string(id) ? json_string_value(id) : "");
        delete_session(h, &srv_main, &probe, "options probe: deleted");
    } else
        skip("sessions with score options (softcap, alibi, sinks, rope, window)",
             "this server does not take them at creation yet");
    response_free(&r);
    for (int i = 0; i < 40; i++)
        random_session(h, i, 0x5e55 + (uint64_t)i * 7919);
    curl_easy_cleanup(h);
}

/* ------------------------------------------------------------ the contract's edges */

static void test_exact_fit(void)
{
    CURL *h = curl_easy_init();
    uint64_t rs = 99;
    tsess s = {.H = 2, .Hkv = 1, .d = 3, .max_tokens = 5};
    if (!create(h, &srv_main, &s, "exact fit: created")) {
        curl_easy_cleanup(h);
        return;
    }
    tstep st;
    response r;
    step_make(&st, &s, 5, 2, &rs);
    step_post(h, &srv_main, &s, &st, &r); /* before check's arguments read r */
    check(r.status == 200, "exact fit: max_tokens rows in one step",
          "got %ld %s", r.status, short_body(&r));
    memcpy(s.k, st.k, sizeof(float) * 15);
    memcpy(s.v, st.v, sizeof(float) * 15);
    step_check(&s, 5, &st, &r, "exact fit: 5 of 5");
    s.n = 5;
    response_free(&r);
    step_free(&st);
    step_make(&st, &s, 1, 1, &rs);
    step_post(h, &srv_main, &s, &st, &r);
    expect_error(&r, 413, "session_full", "max_tokens", "exact fit: one row more is 413 session_full");
    response_free(&r);
    check(get_length(h, &srv_main, &s) == 5, "exact fit: length still 5", "changed");
    truncate_to(h, &srv_main, &s, 4, "exact fit: truncate to 4");
    step_post(h, &srv_main, &s, &st, &r);
    check(r.status == 200, "exact fit: a row after truncate fits",
          "got %ld %s", r.status, short_body(&r));
    memcpy(s.k + 4 * 3, st.k, sizeof(float) * 3);
    memcpy(s.v + 4 * 3, st.v, sizeof(float) * 3);
    step_check(&s, 5, &st, &r, "exact fit: the new row replaces the dropped one");
    response_free(&r);
    step_free(&st);
    delete_session(h, &srv_main, &s, "exact fit: deleted");
    tsess_free(&s);
    curl_easy_cleanup(h);
}

/* Rope positions after a truncation: the rows appended next sit at the
 * kept length, not where the dropped rows were. */
static void test_rope_truncate(void)
{
    if (!with_options) {
        skip("rope after truncate", "this server does not take rope at creation yet");
        return;
    }
    CURL *h = curl_easy_init();
    uint64_t rs = 4242;
    tsess s = {.H = 2, .Hkv = 1, .d = 8, .max_tokens = 16, .rope = 1, .rope_base = 100.0,
               .rope_dims = 8, .rope_offset = 3};
    if (!create(h, &srv_main, &s, "rope/truncate: created")) {
        curl_easy_cleanup(h);
        return;
    }
    tstep st;
    response r;
    static const long sizes[][2] = {{5, 5}, {2, 2}, {1, 1}}; /* T, Tq */
    for (int k = 0; k < 3; k++) {
        if (k == 1)
            truncate_to(h, &srv_main, &s, 3, "rope/truncate: back to 3 rows");
        step_make(&st, &s, sizes[k][0], sizes[k][1], &rs);
        st.need_weights = 1;
        char name[100];
        snprintf(name, sizeof name, "rope/truncate: step %d (rows %ld..%ld)", k, s.n, s.n + st.T - 1);
        step_post(h, &srv_main, &s, &st, &r);
        if (check(r.status == 200, name, "got %ld %s", r.status, short_body(&r))) {
            memcpy(s.k + s.n * 8, st.k, sizeof(float) * (size_t)(st.T * 8));
            memcpy(s.v + s.n * 8, st.v, sizeof(float) * (size_t)(st.T * 8));
            step_check(&s, s.n + st.T, &st, &r, name);
            s.n += st.T;
        }
        response_free(&r);
        step_free(&st);
    }
    delete_session(h, &srv_main, &s, "rope/truncate: deleted");
    tsess_free(&s);
    curl_easy_cleanup(h);
}

/* x rounded to bfloat16 (to nearest, ties to even; finite x). */
static float bf16_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

static float *bf16_copy(const float *x, long n)
{
    float *y = malloc(sizeof(float) * (size_t)n);
    for (long i = 0; i < n; i++)
        y[i] = bf16_of(x[i]);
    return y;
}

/* A session created with "precision": "bf16": each step's output (prefill
 * and decode steps) against the reference of the bfloat16-rounded query,
 * key and value rows within 2^-8 max |v| + 2e-6 (the rounding of the
 * probabilities, the one left: sum_j w_ij |v_jc| <= max |v|), and, over
 * the session, farther from the unrounded rows' answer than float32 would
 * be (1e-4): the option took effect. */
static void test_bf16(void)
{
    CURL *h = curl_easy_init();
    uint64_t rs = 0xbf16;
    tsess s = {.H = 2, .Hkv = 1, .d = 16, .max_tokens = 32, .softcap = 20, .bf16 = 1};
    if (!create(h, &srv_main, &s, "bf16 session: created")) {
        curl_easy_cleanup(h);
        return;
    }
    static const long sizes[][2] = {{9, 9}, {1, 1}, {1, 1}, {3, 2}, {1, 1}}; /* T, Tq */
    double far = 0.0;
    int ok = 1;
    for (int k = 0; k < 5 && ok; k++) {
        tstep st;
        response r;
        step_make(&st, &s, sizes[k][0], sizes[k][1], &rs);
        st.need_weights = 0;
        char name[100];
        snprintf(name, sizeof name, "bf16 session: step %d (Tq %ld)", k, st.Tq);
        long rows = st.T * s.d, nq = st.Tq * s.H * s.d;
        step_post(h, &srv_main, &s, &st, &r);
        ok = check(r.status == 200, name, "got %ld %s", r.status,
                   short_body(&r));
        tensor t = {0};
        json_t *jo = r.json ? json_object_get(r.json, "output") : NULL;
        ok = ok && check(jo && tensor_read(jo, &t) == 0 && t.count == nq, name, "no output of %ld", nq);
        if (ok) {
            memcpy(s.k + s.n * s.d, st.k, sizeof(float) * (size_t)rows);
            memcpy(s.v + s.n * s.d, st.v, sizeof(float) * (size_t)rows);
            s.n += st.T;
            tsess sr = s;
            sr.k = bf16_copy(s.k, s.n * s.d);
            sr.v = bf16_copy(s.v, s.n * s.d);
            float *qr = bf16_copy(st.q, nq), *want = malloc(sizeof(float) * (size_t)nq);
            float *plain = malloc(sizeof(float) * (size_t)nq);
            float *w = malloc(sizeof(float) * (size_t)(s.H * st.Tq * s.n));
            double vmax = 0.0, worst = 0.0;
            for (long i = 0; i < s.n * s.d; i++)
                vmax = fmax(vmax, fabs(sr.v[i]));
            expect_step(&sr, s.n, qr, st.Tq, want, w, NULL);
            expect_step(&s, s.n, st.q, st.Tq, plain, w, NULL);
            double tol = vmax / 256.0 + 2e-6;
            for (long i = 0; i < nq; i++) {
                worst = fmax(worst, fabs(t.data[i] - want[i]));
                far = fmax(far, fabs(t.data[i] - plain[i]));
            }
            ok = check(worst <= tol, name, "worst |output - reference of the rounded rows| %.3g, over %.3g",
                       worst, tol);
            free(sr.k), free(sr.v), free(qr), free(want), free(plain), free(w);
        }
        if (jo && t.data)
            tensor_free(&t);
        response_free(&r);
        step_free(&st);
    }
    if (ok)
        check(far > 1e-4, "bf16 session: rounding took effect", "largest difference from the "
              "unrounded rows' answer %.3g: float32's", far);
    delete_session(h, &srv_main, &s, "bf16 session: deleted");
    tsess_free(&s);
    curl_easy_cleanup(h);
}

static void test_errors(void)
{
    CURL *h = curl_easy_init();
    response r;
    static const struct {
        const char *body;
        long status;
        const char *code, *field;
    } bad_new[] = {
        {"{\"num_kv_heads\":1,\"head_dim\":4,\"max_tokens\":8}", 400, "missing_field", "num_heads"},
        {"{\"num_heads\":2,\"max_tokens\":8}", 400, "missing_field", "head_dim"},
        {"{\"num_heads\":2,\"head_dim\":4}", 400, "missing_field", "max_tokens"},
        {"{\"num_heads\":2,\"head_dim\":4,\"max_tokens\":8,\"num_kv_head\":1}", 400, "unknown_field", "num_kv_head"},
        {"{\"num_heads\":2,\"head_dim\":4,\"max_tokens\":8,\"causal\":true}", 400, "unknown_field", "causal"},
        {"{\"num_heads\":\"2\",\"head_dim\":4,\"max_tokens\":8}", 400, "invalid_field", "num_heads"},
        {"{\"num_heads\":2,\"head_dim\":4.5,\"max_tokens\":8}", 400, "invalid_field", "head_dim"},
        {"{\"num_heads\":4,\"num_kv_heads\":3,\"head_dim\":4,\"max_tokens\":8}", 422, "invalid_param", "num_kv_heads"},
        {"{\"num_heads\":0,\"head_dim\":4,\"max_tokens\":8}", 422, "invalid_param", "num_heads"},
        {"{\"num_heads\":2,\"head_dim\":0,\"max_tokens\":8}", 422, "invalid_param", "head_dim"},
        {"{\"num_heads\":2,\"head_dim\":4,\"max_tokens\":0}", 422, "invalid_param", "max_tokens"},
        {"{\"num_heads\":2,\"head_dim\":4,\"max_tokens\":-3}", 422, "invalid_param", "max_tokens"},
        {"{\"num_heads\":2,\"head_dim\":4,\"max_tokens\":99999999999}", 413, "session_full", "max_tokens"},
        /* refused from the sizes, before anything is made for them (they
         * once took 11 s and 800 MB, then 0.6 s and 240 MB, to refuse as
         * 413 and 503): a query row over a 64 MB body, and 16M KV heads'
         * array pointers over the 256 MB of session memory */
        {"{\"num_heads\":67108864,\"head_dim\":1,\"max_tokens\":1}", 422, "invalid_param", "head_dim"},
        {"{\"num_heads\":16777216,\"head_dim\":1,\"max_tokens\":1}", 413, "session_full", "max_tokens"},
        {"[1,2]", 400, "invalid_json", ""},
        /* a softcap under the smallest normal float32 (1 / c overflows,
         * or it rounds to 0, which is off) */
        {"{\"num_heads\":1,\"head_dim\":2,\"max_tokens\":2,\"softcap\":1e-40}", 422, "invalid_param", "softcap"},
        {"{\"num_heads\":1,\"head_dim\":2,\"max_tokens\":2,\"softcap\":1e-50}", 422, "invalid_param", "softcap"},
    };
    for (size_t i = 0; i < sizeof bad_new / sizeof bad_new[0]; i++) {
        post(h, &srv_main, "/sessions", bad_new[i].body, &r);
        char name[300];
        snprintf(name, sizeof name, "create %s: %ld %s", bad_new[i].body, bad_new[i].status, bad_new[i].code);
        if (expect_error(&r, bad_new[i].status, bad_new[i].code, NULL, name)) {
            json_t *f = json_path(r.json, "error.field");
            snprintf(name, sizeof name, "create %s: field %s", bad_new[i].body, bad_new[i].field);
            check(json_is_string(f) && !strcmp(json_string_value(f), bad_new[i].field), name, "%s",
                  short_body(&r));
        }
        response_free(&r);
    }
    tsess s = {.H = 2, .Hkv = 2, .d = 2, .max_tokens = 8};
    if (create(h, &srv_main, &s, "errors: a session")) {
        char path[128];
        snprintf(path, sizeof path, "/sessions/%s/step", s.id);
        static const refusal bad_step[] = {
            {"{\"key\":[[[1,2],[3,4]]],\"value\":[[[1,2],[3,4]]]}", 400, "missing_field"},
            {"{\"key\":[[[1,2],[3,4]]],\"query\":[[[1,2],[3,4]]]}", 400, "missing_field"},
            {"{\"key\":[[[1,2],[3,4]]],\"value\":[[[1,2],[3,4]]],\"query\":[[[1,2],[3,4]]],\"qurey\":1}", 400, "unknown_field"},
            {"{\"key\":[[[1,2,3],[3,4,5]]],\"value\":[[[1,2],[3,4]]],\"query\":[[[1,2],[3,4]]]}", 422, "shape_mismatch"},
            {"{\"key\":[[1,2],[3,4]],\"value\":[[1,2],[3,4]],\"query\":[[[1,2],[3,4]]]}", 422, "shape_mismatch"},
            {"{\"key\":[[[1,2],[3,4]]],\"value\":[[[1,2],[3,4]],[[1,2],[3,4]]],\"query\":[[[1,2],[3,4]]]}", 422, "shape_mismatch"},
            {"{\"key\":[[[1,2],[3,4]]],\"value\":[[[1,2],[3,4]]],\"query\":[[[1,2]]]}", 422, "shape_mismatch"},
            {"{\"key\":[[[1,2],[3,4]]],\"value\":[[[1,2],[3,4]]],\"query\":[[[1,2],[3,4]]],\"output_format\":\"xml\"}", 400, "invalid_field"},
            {"{\"key\":[[[1,2],[3,4]]],\"value\":[[[1,2],[3,4]]],\"query\":[[[1,2],[3,4]]],\"need_weights\":1}", 400, "invalid_field"},
        };
        expect_refusals(h, path, "step", bad_step, sizeof bad_step / sizeof bad_step[0]);
        check(get_length(h, &srv_main, &s) == 0, "errors: refused steps leave length 0", "changed");
        snprintf(path, sizeof path, "/sessions/%s/truncate", s.id);
        static const refusal bad_truncate[] = {
            {"{\"length\":1}", 422, "invalid_param"},  /* past the length */
            {"{\"length\":-1}", 422, "invalid_param"},
            {"{}", 400, "missing_field"},
            {"{\"lenght\":0}", 400, "unknown_field"}, /* a typo */
        };
        expect_refusals(h, path, "truncate", bad_truncate, sizeof bad_truncate / sizeof bad_truncate[0]);
        snprintf(path, sizeof path, "/sessions/%s", s.id);
        call(h, &srv_main, "PUT", path, &r);
        char allow[128] = "";
        header_value(&r, "Allow", allow, sizeof allow);
        check(r.status == 405 && strstr(allow, "DELETE") && strstr(allow, "GET"),
              "PUT /sessions/{id}: 405 with Allow: GET, HEAD, DELETE", "got %ld, Allow %s", r.status, allow);
        response_free(&r);
        delete_session(h, &srv_main, &s, "errors: delete");
        call(h, &srv_main, "DELETE", path, &r);
        expect_error(&r, 404, "unknown_session", "deleted", "DELETE twice: 404 unknown_session, deleted");
        response_free(&r);
        call(h, &srv_main, "GET", path, &r);
        expect_error(&r, 404, "unknown_session", "deleted", "GET a deleted session: 404, deleted");
        response_free(&r);
        snprintf(path, sizeof path, "/sessions/%s/step", s.id);
        post(h, &srv_main, path, "{\"key\":[[[1,2],[3,4]]],\"value\":[[[1,2],[3,4]]],\"query\":[[[1,2],[3,4]]]}", &r);
        expect_error(&r, 404, "unknown_session", "deleted", "step on a deleted session: 404, deleted");
        response_free(&r);
        tsess_free(&s);
    }
    static const char *const never[] = {"/sessions/0123456789abcdef0123456789abcdef",
                                        "/sessions/0123456789abcdef0123456789abcdef/step",
                                        "/sessions/nope", "/sessions/0123456789ABCDEF0123456789ABCDEF",
                                        "/sessions/%2e%2e", "/sessions/0123456789abcdef0123456789abcdef0"};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        int is_step = strstr(never[i], "/step") != NULL;
        if (is_step)
            post(h, &srv_main, never[i], "{\"length\":0}", &r);
        else
            call(h, &srv_main, "GET", never[i], &r);
        char name[200];
        snprintf(name, sizeof name, "%s %s: 404 unknown_session, never existed", is_step ? "POST" : "GET", never[i]);
        expect_error(&r, 404, "unknown_session", "never existed", name);
        response_free(&r);
    }
    check_alive(h, &srv_main, "session errors");
    curl_easy_cleanup(h);
}

/* ------------------------------------------------------------ limits */

static long metric(CURL *h, const server *sv, const char *name)
{
    response r;
    call(h, sv, "GET", "/metrics", &r);
    long v = (long)metric_sample(r.body.data, name);
    response_free(&r);
    return v;
}

static void fill(CURL *h, const server *sv, tsess *s, long T, long *status, const char *name)
{
    uint64_t rs = 7;
    tstep st;
    step_make(&st, s, T, 1, &rs);
    st.need_weights = 0;
    response r;
    *status = step_post(h, sv, s, &st, &r);
    if (name)
        check(r.status == 200, name, "got %ld %s", r.status, short_body(&r));
    else if (r.status == 503) {
        char ra[32] = "";
        check(header_value(&r, "Retry-After", ra, sizeof ra) == 0 && atoi(ra) >= 1,
              "memory spent: 503 carries Retry-After", "Retry-After %s", ra);
        expect_error(&r, 503, "overloaded", "ATTN_SESSION_MEMORY", "memory spent: 503 overloaded");
    }
    if (r.status == 200)
        s->n += T;
    response_free(&r);
    step_free(&st);
}

/* The largest max_tokens a session may have under ATTN_SESSION_MEMORY is
 * one whose cache then fills, alone on the server: creation counts all a
 * session holds (its cache when full and its own bookkeeping), as the
 * steps do. On limits (64 KiB, at most 64 tokens), rows of 1 x 129 floats
 * take 1032 bytes a key and value pair: 63 rows' cache fits 64 KiB alone
 * but not with the session's own bytes (which the old check left out: the
 * session was made, and a step to its 63rd row was 503 for ever). Runs
 * before any other session is made there. */
static void test_full_cache_fits(void)
{
    CURL *h = curl_easy_init();
    tsess s = {.H = 1, .Hkv = 1, .d = 129, .max_tokens = 64};
    response r;
    buf b = {0};
    for (; s.max_tokens > 1; s.max_tokens--) { /* refused: 413 */
        b.len = 0;
        create_body(&b, &s);
        post(h, &srv_limits, "/sessions", b.data, &r);
        json_t *id = r.json ? json_object_get(r.json, "id") : NULL;
        long status = r.status;
        if (status == 201 && json_is_string(id)) {
            char path[128];
            snprintf(path, sizeof path, "/sessions/%s", json_string_value(id));
            response_free(&r);
            call(h, &srv_limits, "DELETE", path, &r);
        }
        response_free(&r);
        if (status == 201)
            break;
        if (!check(status == 413, "memory: a session too large for ATTN_SESSION_MEMORY: 413",
                   "max_tokens %ld: got %ld", s.max_tokens, status))
            break;
    }
    buf_free(&b);
    check(s.max_tokens >= 60, "memory: sessions of 60 rows of 1032 bytes fit 64 KiB", "largest %ld",
          s.max_tokens);
    if (create(h, &srv_limits, &s, "memory: the largest session that fits")) {
        long st;
        fill(h, &srv_limits, &s, s.max_tokens, &st, "memory: the largest session fills to its max_tokens");
        delete_session(h, &srv_limits, &s, "memory: the largest session deleted");
    }
    tsess_free(&s);
    curl_easy_cleanup(h);
}

static void test_limits(void)
{
    CURL *h = curl_easy_init();
    response r;
    /* ATTN_MAX_SESSIONS=3 */
    tsess s[4];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 4; i++)
        s[i] = (tsess){.H = 4, .Hkv = 4, .d = 16, .max_tokens = 64};
    int made = 0;
    for (int i = 0; i < 3; i++)
        made += create(h, &srv_limits, &s[i], "limits: one of 3 sessions");
    buf b = {0};
    create_body(&b, &s[3]);
    post(h, &srv_limits, "/sessions", b.data, &r);
    expect_error(&r, 503, "overloaded", "ATTN_MAX_SESSIONS", "limits: a 4th session is 503 overloaded");
    char ra[32] = "";
    check(header_value(&r, "Retry-After", ra, sizeof ra) == 0 && atoi(ra) >= 1,
          "limits: the 503 carries Retry-After", "Retry-After %s", ra);
    response_free(&r);
    check(metric(h, &srv_limits, "attn_sessions_open") == 3, "limits: /metrics shows 3 sessions open",
          "attn_sessions_open %ld", metric(h, &srv_limits, "attn_sessions_open"));
    /* ATTN_SESSION_MEMORY=64K: one full cache is 64 x 4 x 16 x 8 = 32 KiB */
    long st0;
    if (made == 3) {
        fill(h, &srv_limits, &s[0], 64, &st0, "limits: a 32 KiB cache fills");
        long bytes = metric(h, &srv_limits, "attn_session_bytes");
        check(bytes >= 32768 && bytes < 40000, "limits: /metrics bytes held >= the cache's 32 KiB",
              "attn_session_bytes %ld", bytes);
        fill(h, &srv_limits, &s[1], 16, &st0, "limits: a second cache starts");
        long before = s[1].n;
        fill(h, &srv_limits, &s[1], 48, &st0, NULL);
        check(st0 == 503, "limits: a second full cache is over ATTN_SESSION_MEMORY: 503", "got %ld", st0);
        check(get_length(h, &srv_limits, &s[1]) == before, "limits: the refused step left the length",
              "length %ld", get_length(h, &srv_limits, &s[1]));
        delete_session(h, &srv_limits, &s[0], "limits: delete the full one");
        check(metric(h, &srv_limits, "attn_session_bytes") < bytes,
              "limits: deleting frees its bytes in /metrics", "still %ld", metric(h, &srv_limits, "attn_session_bytes"));
        fill(h, &srv_limits, &s[1], 48, &st0, "limits: then the second fills");
        post(h, &srv_limits, "/sessions", b.data, &r);
        check(r.status == 201, "limits: a session slot is free again after DELETE", "got %ld %s",
              r.status, short_body(&r));
        response_free(&r);
    }
    buf_free(&b);
    /* ATTN_MAX_WEIGHTS=1000 and ATTN_MAX_WORK=1e6 hold for a step as for
     * any request, before its rows are appended */
    if (made == 3) {
        uint64_t rs = 11;
        tstep st;
        step_make(&st, &s[2], 16, 16, &rs);
        st.need_weights = 1; /* 4 x 16 x 16 = 1024 weights */
        step_post(h, &srv_limits, &s[2], &st, &r);
        expect_error(&r, 413, "too_large", "at most 1000", "limits: a step's 1024 weights > ATTN_MAX_WEIGHTS: 413");
        response_free(&r);
        step_free(&st);
        step_make(&st, &s[2], 16, 256, &rs);
        st.need_weights = 0; /* 4 x 4 x 256 x 16 x 16 = 1.05e6 operations */
        step_post(h, &srv_limits, &s[2], &st, &r);
        expect_error(&r, 413, "too_large", "ATTN_MAX_WORK", "limits: a step's 1.05e6 operations > ATTN_MAX_WORK: 413");
        response_free(&r);
        step_free(&st);
        check(get_length(h, &srv_limits, &s[2]) == 0, "limits: the refused steps appended no row",
              "length %ld", get_length(h, &srv_limits, &s[2]));
    }
    /* ATTN_SESSION_MAX_TOKENS=64 */
    post(h, &srv_limits, "/sessions", "{\"num_heads\":1,\"head_dim\":1,\"max_tokens\":65}", &r);
    expect_error(&r, 413, "session_full", "ATTN_SESSION_MAX_TOKENS", "limits: max_tokens 65 > 64: 413 session_full");
    response_free(&r);
    check_alive(h, &srv_limits, "session limits");
    for (int i = 0; i < 4; i++)
        tsess_free(&s[i]);
    curl_easy_cleanup(h);
}

/* A step's working memory against the cap (8 floats an element of
 * ATTN_MAX_ELEMENTS, at least 256 MiB) before its rows are appended: bf16
 * steps of 16 query rows or more round a copy of the cache's keys and
 * values for each head, so 512 heads of one feature over 8208 rows plan
 * 267 MiB (a 44 KB step once took 556 MB, steps being left out of the
 * cap), while 8 query rows, which copy nothing, still run. */
static void test_scratch(void)
{
    static const char *const envs[] = {"ATTN_MAX_ELEMENTS=65536", "ATTN_MODELS_DIR=tests/http", NULL};
    server sv = {0};
    if (!check(server_start(&sv, server_path, "scratch", "/healthz", envs, log_path) == 0,
               "scratch: server starts with ATTN_MAX_ELEMENTS=65536", "see %s", log_path))
        return;
    CURL *h = curl_easy_init();
    tsess s = {.H = 512, .Hkv = 512, .d = 1, .max_tokens = 8320, .bf16 = 1};
    if (create(h, &sv, &s, "scratch: a bf16 session of 512 heads")) {
        long st = 200;
        for (int i = 0; i < 64 && st == 200; i++)
            fill(h, &sv, &s, 128, &st, NULL);
        uint64_t rs = 5;
        tstep t;
        response r;
        step_make(&t, &s, 16, 16, &rs);
        t.need_weights = 0;
        step_post(h, &sv, &s, &t, &r);
        expect_error(&r, 413, "too_large", "MiB of working memory",
                     "scratch: a bf16 step of 16 query rows over 8208 rows of 512 heads: 413");
        response_free(&r);
        check(s.n == 8192 && get_length(h, &sv, &s) == 8192, "scratch: the refused step appended no row",
              "filled %ld, length %ld", s.n, get_length(h, &sv, &s));
        step_free(&t);
        step_make(&t, &s, 16, 8, &rs);
        t.need_weights = 0;
        check(step_post(h, &sv, &s, &t, &r) == 200, "scratch: a step of 8 query rows runs", "got %ld %s",
              r.status, short_body(&r));
        response_free(&r);
        step_free(&t);
        delete_session(h, &sv, &s, "scratch: the session deleted");
    }
    tsess_free(&s);
    curl_easy_cleanup(h);
    check(server_stop(&sv), "scratch: server exits 0 on SIGTERM", "see %s", log_path);
}

static void test_ttl(void)
{
    CURL *h = curl_easy_init();
    tsess a = {.H = 2, .Hkv = 1, .d = 8, .max_tokens = 32}, b = a;
    long st;
    /* b is made after a's step: under valgrind the step alone can take
     * longer than the TTL */
    int made = create(h, &srv_ttl, &a, "ttl: session a");
    if (made)
        fill(h, &srv_ttl, &a, 20, &st, "ttl: a holds 20 rows");
    if (!made || !create(h, &srv_ttl, &b, "ttl: session b")) {
        tsess_free(&a);
        curl_easy_cleanup(h);
        return;
    }
    check(metric(h, &srv_ttl, "attn_session_bytes") > 20 * 8 * 8, "ttl: bytes held before expiry", "%ld",
          metric(h, &srv_ttl, "attn_session_bytes"));
    /* b is kept alive by requests every 0.4 s; a stays idle past the 1 s TTL. */
    for (int i = 0; i < 6; i++) {
        usleep(400 * 1000);
        check(get_length(h, &srv_ttl, &b) == 0, "ttl: a session in use does not expire", "b is gone");
    }
    char path[128];
    snprintf(path, sizeof path, "/sessions/%s", a.id);
    response r;
    call(h, &srv_ttl, "GET", path, &r);
    expect_error(&r, 404, "unknown_session", "expired", "ttl: an idle session expires: 404, expired");
    response_free(&r);
    check(metric(h, &srv_ttl, "attn_session_evictions_total") == 1, "ttl: /metrics counts the eviction",
          "%ld", metric(h, &srv_ttl, "attn_session_evictions_total"));
    check(metric(h, &srv_ttl, "attn_sessions_open") == 1, "ttl: /metrics shows 1 open", "%ld",
          metric(h, &srv_ttl, "attn_sessions_open"));
    /* expiry without any request to the expired session: the sweep frees it */
    usleep(2600 * 1000);
    check(metric(h, &srv_ttl, "attn_session_bytes") == 0 && metric(h, &srv_ttl, "attn_sessions_open") == 0,
          "ttl: the sweep frees an idle session's memory unasked", "bytes %ld, open %ld",
          metric(h, &srv_ttl, "attn_session_bytes"), metric(h, &srv_ttl, "attn_sessions_open"));
    check_alive(h, &srv_ttl, "session expiry");
    tsess_free(&a);
    tsess_free(&b);
    curl_easy_cleanup(h);
}

static void test_token(void)
{
    CURL *h = curl_easy_init();
    static const char *const auth[] = {"Authorization: Bearer s3cret", NULL};
    const char *body = "{\"num_heads\":1,\"head_dim\":2,\"max_tokens\":4}";
    request rq = {.method = "POST", .path = "/sessions", .body = body, .body_len = strlen(body),
                  .has_body = 1};
    response r;
    http(h, srv_guard.base, &rq, &r);
    expect_error(&r, 401, "unauthorized", NULL, "token: POST /sessions without it: 401");
    response_free(&r);
    rq.headers = auth;
    http(h, srv_guard.base, &rq, &r);
    json_t *id = r.json ? json_object_get(r.json, "id") : NULL;
    check(r.status == 201 && json_is_string(id), "token: POST /sessions with it: 201", "got %ld %s",
          r.status, short_body(&r));
    char path[128];
    snprintf(path, sizeof path, "/sessions/%s", json_is_string(id) ? json_string_value(id) : "x");
    response_free(&r);
    static const char *const methods[] = {"GET", "DELETE"};
    for (int m = 0; m < 2; m++) {
        request g = {.method = methods[m], .path = path};
        http(h, srv_guard.base, &g, &r);
        char name[100];
        snprintf(name, sizeof name, "token: %s /sessions/{id} without it: 401", methods[m]);
        expect_error(&r, 401, "unauthorized", NULL, name);
        response_free(&r);
        g.headers = auth;
        http(h, srv_guard.base, &g, &r);
        snprintf(name, sizeof name, "token: %s /sessions/{id} with it: %d", methods[m], m ? 204 : 200);
        check(r.status == (m ? 204 : 200), name, "got %ld %s", r.status, short_body(&r));
        response_free(&r);
    }
    curl_easy_cleanup(h);
}

/* ------------------------------------------------------------ concurrency */

typedef struct {
    tsess *shared;     /* the one session all append to, or NULL */
    int steps;
    /* shared-session answers: */
    tstep *st;
    response *r;
    double ms;
} client;

static void own_session_client(CURL *h, int id, void *arg)
{
    client *c = arg;
    uint64_t rs = 0xc0ffee + (uint64_t)id;
    tsess s = {.H = 4, .Hkv = 2, .d = 8, .max_tokens = 64};
    char name[160];
    snprintf(name, sizeof name, "parallel: client %d creates its session", id);
    if (create(h, &srv_main, &s, name)) {
        for (int k = 0; k < c->steps; k++) {
            tstep st;
            step_make(&st, &s, pick(&rs, 1, 3), pick(&rs, 1, 2), &rs);
            snprintf(name, sizeof name, "parallel: client %d step %d", id, k);
            step_accept(h, &s, &st, name);
            step_free(&st);
        }
        snprintf(name, sizeof name, "parallel: client %d deletes", id);
        delete_session(h, &srv_main, &s, name);
    }
    tsess_free(&s);
}

static void shared_session_client(CURL *h, int id, void *arg)
{
    client *c = arg;
    uint64_t rs = 0xbeef + (uint64_t)id;
    for (int k = 0; k < c->steps; k++) {
        step_make(&c->st[k], c->shared, 1, 1, &rs);
        c->st[k].need_weights = 1;
        step_post(h, &srv_main, c->shared, &c->st[k], &c->r[k]);
    }
}

static void test_parallel_own(void)
{
    enum { N = 16 };
    client c[N];
    for (int i = 0; i < N; i++)
        c[i] = (client){.steps = 12};
    double ms = run_clients(N, own_session_client, c, sizeof c[0]);
    printf("parallel: %d clients x 12 steps on their own sessions in %.0f ms\n", N, ms);
}

/* 8 clients append one row each step to one session at once. The server
 * applies them one at a time, so the answers' lengths are 1..total, each
 * once; that order is a serial order, and every answer must be what that
 * order gives. */
static void test_parallel_shared(void)
{
    enum { N = 8, STEPS = 10 };
    CURL *h = curl_easy_init();
    tsess s = {.H = 2, .Hkv = 1, .d = 4, .max_tokens = N * STEPS};
    if (!create(h, &srv_main, &s, "shared: session")) {
        curl_easy_cleanup(h);
        return;
    }
    client c[N];
    tstep st[N][STEPS];
    response r[N][STEPS];
    for (int i = 0; i < N; i++)
        c[i] = (client){.shared = &s, .steps = STEPS, .st = st[i], .r = r[i]};
    run_clients(N, shared_session_client, c, sizeof c[0]);
    const tstep *order[N * STEPS] = {0};
    const response *ans[N * STEPS] = {0};
    int ok200 = 0, distinct = 1;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < STEPS; k++) {
            json_t *len = r[i][k].json ? json_object_get(r[i][k].json, "length") : NULL;
            if (r[i][k].status != 200 || !json_is_integer(len))
                continue;
            ok200++;
            long L = (long)json_integer_value(len);
            if (L < 1 || L > N * STEPS || order[L - 1])
                distinct = 0;
            else
                order[L - 1] = &st[i][k], ans[L - 1] = &r[i][k];
        }
    check(ok200 == N * STEPS, "shared: every step answered 200", "%d of %d", ok200, N * STEPS);
    check(distinct, "shared: the lengths are 1..80, each once (one step at a time)", "repeated or out of range");
    check(get_length(h, &srv_main, &s) == N * STEPS, "shared: final length = rows appended", "%ld",
          get_length(h, &srv_main, &s));
    int right = 0;
    for (long L = 1; L <= N * STEPS && distinct && ok200 == N * STEPS; L++) {
        memcpy(s.k + (L - 1) * 4, order[L - 1]->k, sizeof(float) * 4);
        memcpy(s.v + (L - 1) * 4, order[L - 1]->v, sizeof(float) * 4);
        char name[100];
        snprintf(name, sizeof name, "shared: the step that made length %ld", L);
        right += step_check(&s, L, order[L - 1], ans[L - 1], name);
    }
    check(right == N * STEPS, "shared: every answer is that of the serial order", "%d of %d right",
          right, N * STEPS);
    for (int i = 0; i < N; i++)
        for (int k = 0; k < STEPS; k++) {
            response_free(&r[i][k]);
            step_free(&st[i][k]);
        }
    delete_session(h, &srv_main, &s, "shared: deleted");
    tsess_free(&s);
    curl_easy_cleanup(h);
}

/* A raw connection to srv_main that has sent a step's headers for a body
 * of length bytes and the body's first part, text; -1 when it cannot be
 * opened. */
static int raw_step(const tsess *s, size_t length, const char *text)
{
    char head[256];
    snprintf(head, sizeof head,
             "POST /sessions/%s/step HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n", s->id, length);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv_main.port)};
    sa.sin_addr.s_addr = htonl(0x7f000001);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        write(fd, head, strlen(head)) == (ssize_t)strlen(head) &&
        write(fd, text, strlen(text)) == (ssize_t)strlen(text))
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* A client that sends half a step's body and stalls holds no lock: steps on
 * the same and on other sessions go on meanwhile. */
static void test_slow_client(void)
{
    CURL *h = curl_easy_init();
    tsess a = {.H = 1, .Hkv = 1, .d = 2, .max_tokens = 8}, b = a;
    if (!create(h, &srv_main, &a, "slow: session a") || !create(h, &srv_main, &b, "slow: session b")) {
        curl_easy_cleanup(h);
        return;
    }
    /* headers and half the body, then nothing */
    int fd = raw_step(&a, 200, "{\"key\":[[[1,2]]],\"value\":");
    if (fd < 0)
        skip("slow client", "cannot open a raw connection");
    if (fd >= 0) {
        usleep(100 * 1000);
        double worst = 0;
        for (int i = 0; i < 4; i++) {
            long st;
            double t0 = now_ms();
            fill(h, &srv_main, i % 2 ? &a : &b, 1, &st, "slow: a step while a client stalls");
            double ms = now_ms() - t0;
            if (ms > worst)
                worst = ms;
        }
        if (memcheck)
            skip("slow: steps answer at once while a client stalls", "timing under valgrind");
        else
            check(worst < 500, "slow: steps on the stalled session and another answer at once",
                  "slowest %.0f ms", worst);
        close(fd);
    }
    delete_session(h, &srv_main, &a, "slow: delete a");
    delete_session(h, &srv_main, &b, "slow: delete b");
    tsess_free(&a);
    tsess_free(&b);
    curl_easy_cleanup(h);
}

/* A step posted on a thread of its own (test_turn_client_gone). */
typedef struct {
    tsess *s;
    const tstep *st;
    response r;
} posted_step;

static void *post_step_thread(void *arg)
{
    posted_step *p = arg;
    CURL *h = curl_easy_init();
    step_post(h, &srv_main, p->s, p->st, &p->r);
    curl_easy_cleanup(h);
    return NULL;
}

/* The gauge `name` once it is at most want, or after ms. */
static long gauge_down_to(CURL *h, const char *name, long want, double ms)
{
    double t0 = now_ms();
    long v = metric(h, &srv_main, name);
    for (; v > want && now_ms() - t0 < ms; v = metric(h, &srv_main, name))
        usleep(2000);
    return v;
}

/* A step waiting for its session's turn whose client leaves gives the
 * turn up at once, not when the turn comes: while a long step (64 query
 * heads of 64 over one key head, 1024 query rows on 8192 cached rows, 1.4e11
 * operations, some 0.3-0.7 s) holds the turn, a second step arrives on a
 * raw connection, which closes 30 ms later. Its request must end while
 * the first still computes, and its row must not be appended. */
static void test_turn_client_gone(void)
{
    if (memcheck) {
        skip("turn: a waiting step whose client leaves", "a 1.4e11-operation step under valgrind");
        return;
    }
    CURL *h = curl_easy_init();
    tsess s = {.H = 64, .Hkv = 1, .d = 64, .max_tokens = 8194};
    if (!create(h, &srv_main, &s, "turn: session")) {
        curl_easy_cleanup(h);
        return;
    }
    uint64_t rs = 11;
    tstep rows, slow;
    step_make(&rows, &s, 8192, 1, &rs);
    step_make(&slow, &s, 1, 1024, &rs);
    rows.need_weights = slow.need_weights = rows.return_lse = slow.return_lse = 0;
    rows.form = FORM_B64;  /* the keys in base64 */
    slow.form = FORM_NESTED; /* and the query (step_body's third form) */
    response r;
    long status = step_post(h, &srv_main, &s, &rows, &r);
    check(status == 200, "turn: 8192 rows appended", "got %ld %s", status, short_body(&r));
    response_free(&r);
    /* the long step holds the turn once it has grown the cache, which it
     * does in its turn, before it computes */
    long bytes = get_member(h, &srv_main, &s, "bytes"), grown = bytes;
    posted_step p = {.s = &s, .st = &slow};
    pthread_t t;
    int up = pthread_create(&t, NULL, post_step_thread, &p) == 0;
    for (double t0 = now_ms(); up && grown == bytes && now_ms() - t0 < 20000; usleep(2000))
        grown = get_member(h, &srv_main, &s, "bytes");
    long before = metric(h, &srv_main, "attn_requests_in_flight");
    tstep one;
    step_make(&one, &s, 1, 1, &rs);
    one.need_weights = one.return_lse = 0;
    buf step = {0};
    step_body(&step, &s, &one);
    int fd = grown != bytes ? raw_step(&s, step.len, step.data) : -1;
    usleep(30 * 1000);
    long waiting = metric(h, &srv_main, "attn_requests_in_flight");
    if (fd >= 0)
        close(fd);
    long after = gauge_down_to(h, "attn_requests_in_flight", before, 20000);
    long held = get_length(h, &srv_main, &s); /* the long step commits at its turn's end */
    check(grown != bytes && fd >= 0 && waiting == before + 1 && after == before && held == 8192,
          "turn: a waiting step whose client leaves ends while the turn's holder computes",
          "cache grown %d, connection %d, in flight %ld then %ld with it, %ld after its close, "
          "length then %ld", grown != bytes, fd >= 0, before, waiting, after, held);
    if (up)
        pthread_join(t, NULL);
    check(p.r.status == 200, "turn: the long step answers", "got %ld %s", p.r.status, short_body(&p.r));
    response_free(&p.r);
    check(get_length(h, &srv_main, &s) == 8193, "turn: the step whose client left appended nothing",
          "length %ld", get_length(h, &srv_main, &s));
    char line[128];
    snprintf(line, sizeof line, "POST /sessions/%s/step 499 ", s.id);
    int logged = 0;
    for (int i = 0; i < 50 && !logged; i++, usleep(20 * 1000))
        logged = log_has(log_path, line, " client_closed id=", NULL);
    check(logged, "turn: the access log says 499 client_closed", "see %s", log_path);
    delete_session(h, &srv_main, &s, "turn: deleted");
    step_free(&rows);
    step_free(&slow);
    step_free(&one);
    buf_free(&step);
    tsess_free(&s);
    curl_easy_cleanup(h);
}

/* ------------------------------------------------------------ KServe: the multihead-decode model */

/* The same sessions driven through KServe v2 with Triton's sequence
 * parameters: every step checked against the same reference as above. */
#define KS_INFER "/v2/models/multihead-decode/infer"

/* A KServe request: the JSON header (its parameters and inputs written by
 * the test) and the binary tensor data after it. */
typedef struct {
    buf json, bin;
    int n_in;
} ks_req;

/* Little-endian float32 bytes, whatever the host. */
static void put_le(buf *b, const float *d, long n)
{
    for (long i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &d[i], 4);
        uint8_t p[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
        buf_put(b, p, 4);
    }
}

static void ks_input(ks_req *q, const char *name, const float *d, int rank, const long *shape, int binary)
{
    long count = 1;
    buf_printf(&q->json, "%s{\"name\":\"%s\",\"datatype\":\"FP32\",\"shape\":[", q->n_in++ ? "," : "", name);
    for (int i = 0; i < rank; i++) {
        buf_printf(&q->json, "%s%ld", i ? "," : "", shape[i]);
        count *= shape[i];
    }
    buf_puts(&q->json, "]");
    if (binary) {
        buf_printf(&q->json, ",\"parameters\":{\"binary_data_size\":%ld}}", count * 4);
        put_le(&q->bin, d, count);
        return;
    }
    buf_puts(&q->json, ",\"data\":[");
    for (long i = 0; i < count; i++)
        buf_printf(&q->json, "%s%.9g", i ? "," : "", (double)d[i]);
    buf_puts(&q->json, "]}");
}

/* Posts q (its header closed by the caller) to sv, binary data after the
 * header when there is any. */
static void ks_send(CURL *h, const server *sv, ks_req *q, const char *const *auth, response *r)
{
    buf body = {0};
    buf_put(&body, q->json.data, q->json.len);
    char ihl[80];
    const char *hdrs[4] = {NULL, NULL, NULL, NULL};
    int nh = 0;
    for (int i = 0; auth && auth[i]; i++)
        hdrs[nh++] = auth[i];
    if (q->bin.len) {
        snprintf(ihl, sizeof ihl, "Inference-Header-Content-Length: %zu", q->json.len);
        hdrs[nh++] = ihl;
        buf_put(&body, q->bin.data, q->bin.len);
    }
    request rq = {.method = "POST", .path = KS_INFER, .headers = hdrs, .body = body.data,
                  .body_len = body.len, .has_body = 1};
    http(h, sv->base, &rq, r);
    if (q->bin.len && !r->json && r->body.len) /* a binary answer: its JSON header alone */
        r->json = NULL;
    buf_free(&body);
}

/* The answer's JSON header (a binary answer's first
 * Inference-Header-Content-Length bytes), new reference; *bin its binary
 * data, *bin_len its size. */
static json_t *ks_header(const response *r, const char **bin, size_t *bin_len)
{
    char ihl[40] = "";
    size_t hl = r->body.len;
    if (header_value(r, "Inference-Header-Content-Length", ihl, sizeof ihl) == 0)
        hl = (size_t)strtoull(ihl, NULL, 10);
    if (hl > r->body.len)
        return NULL;
    *bin = r->body.data + hl;
    *bin_len = r->body.len - hl;
    return json_loadb(r->body.data ? r->body.data : "", hl, 0, NULL);
}

/* Output `name` of a KServe answer as a tensor (JSON data or binary); 0 ok,
 * -1 absent or malformed. */
static int ks_output(const response *r, const char *name, tensor *t)
{
    const char *bin = NULL;
    size_t bin_len = 0, off = 0;
    json_t *hj = ks_header(r, &bin, &bin_len), *outs = hj ? json_object_get(hj, "outputs") : NULL;
    int rc = -1;
    for (size_t i = 0; rc && i < json_array_size(outs); i++) {
        json_t *o = json_array_get(outs, i), *sh = json_object_get(o, "shape");
        json_t *bds = json_object_get(json_object_get(o, "parameters"), "binary_data_size");
        size_t size = json_is_integer(bds) ? (size_t)json_integer_value(bds) : 0;
        const char *nm = json_string_value(json_object_get(o, "name"));
        if (!nm || strcmp(nm, name)) {
            off += size;
            continue;
        }
        memset(t, 0, sizeof *t);
        t->rank = (int)json_array_size(sh);
        t->count = 1;
        for (int d = 0; d < t->rank && d < MAX_RANK; d++)
            t->count *= t->shape[d] = (long)json_integer_value(json_array_get(sh, (size_t)d));
        json_t *data = json_object_get(o, "data");
        if (t->rank < 1 || t->rank > MAX_RANK || t->count < 1 ||
            (bds ? size != (size_t)t->count * 4 || off + size > bin_len
                 : json_array_size(data) != (size_t)t->count))
            break;
        t->data = malloc(sizeof(float) * (size_t)t->count);
        for (long k = 0; k < t->count; k++) {
            if (bds) {
                const uint8_t *p = (const uint8_t *)bin + off + 4 * k;
                uint32_t u = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                memcpy(&t->data[k], &u, 4);
            } else {
                t->data[k] = (float)json_number_value(json_array_get(data, (size_t)k));
            }
        }
        rc = 0;
    }
    json_decref(hj);
    return rc;
}

/* A parameter of a KServe answer (borrowed from *hold, which the caller
 * frees). */
static json_t *ks_param(const response *r, const char *name, json_t **hold)
{
    const char *bin;
    size_t bin_len;
    *hold = ks_header(r, &bin, &bin_len);
    return *hold ? json_object_get(json_object_get(*hold, "parameters"), name) : NULL;
}

/* The parameters and inputs that start a sequence of s's sizes and
 * options: the same fields as POST /sessions, as KServe parameters
 * (window and rope spelled flat) and alibi slopes and sinks as inputs. */
static void ks_start_params(buf *b, const tsess *s)
{
    buf_printf(b, ",\"sequence_start\":true,\"num_heads\":%ld,\"num_kv_heads\":%ld,\"head_dim\":%ld,"
               "\"max_tokens\":%ld", s->H, s->Hkv, s->d, s->max_tokens);
    if (s->has_scale)
        buf_printf(b, ",\"scale\":%.9g", s->scale);
    if (s->softcap > 0)
        buf_printf(b, ",\"softcap\":%.9g", s->softcap);
    if (s->alibi == 1)
        buf_puts(b, ",\"alibi\":true");
    if (s->rope)
        buf_printf(b, ",\"rope\":true,\"rope_base\":%.9g,\"rope_style\":\"%s\",\"rope_dims\":%ld,"
                   "\"rope_offset\":%ld", s->rope_base, s->rope_style ? "interleaved" : "half",
                   s->rope_dims, s->rope_offset);
    if (s->has_window && s->left >= 0)
        buf_printf(b, ",\"window_left\":%ld", s->left);
    if (s->has_window && s->right >= 0)
        buf_printf(b, ",\"window_right\":%ld", s->right);
}

static void ks_start_inputs(ks_req *q, const tsess *s, int binary)
{
    float f[8];
    long hs[1] = {s->H};
    for (long h = 0; s->alibi == 2 && h < s->H; h++)
        f[h] = (float)s->slopes[h];
    if (s->alibi == 2)
        ks_input(q, "alibi", f, 1, hs, binary);
    for (long h = 0; s->has_sinks && h < s->H; h++)
        f[h] = (float)s->sinks[h];
    if (s->has_sinks)
        ks_input(q, "sinks", f, 1, hs, binary);
}

/* What a KServe step sends besides its rows. */
typedef struct {
    int start, end;
    const char *seq_id;   /* NULL: none (a start draws one) */
    int bin_in, bin_out;  /* binary tensor data in, out */
} ks_how;

/* Builds and posts one step of s (st's rows) as KServe; r is the answer. */
static void ks_step_post(CURL *h, const server *sv, const tsess *s, const tstep *st, const ks_how *how,
                         const char *const *auth, response *r)
{
    ks_req q = {{0}, {0}, 0};
    buf_puts(&q.json, "{\"id\":\"step\",\"parameters\":{");
    buf_printf(&q.json, "\"need_weights\":%s", st->need_weights ? "true" : "false");
    if (how->bin_out)
        buf_puts(&q.json, ",\"binary_data_output\":true");
    if (how->seq_id)
        buf_printf(&q.json, ",\"sequence_id\":\"%s\"", how->seq_id);
    if (how->end)
        buf_puts(&q.json, ",\"sequence_end\":true");
    if (how->start)
        ks_start_params(&q.json, s);
    buf_puts(&q.json, "},\"inputs\":[");
    long ks[3] = {st->T, s->Hkv, s->d}, qs[3] = {st->Tq, s->H, s->d};
    ks_input(&q, "key", st->k, 3, ks, how->bin_in);
    ks_input(&q, "value", st->v, 3, ks, how->bin_in && st->T % 2);
    ks_input(&q, "query", st->q, 3, qs, how->bin_in);
    if (how->start)
        ks_start_inputs(&q, s, how->bin_in);
    buf_puts(&q.json, "]}");
    ks_send(h, sv, &q, auth, r);
    buf_free(&q.json);
    buf_free(&q.bin);
}

/* Checks a 200 KServe step answer against the reference over rows 0..n-1
 * and its parameters (sequence_id, length). Returns 1 when right. */
static int ks_step_check(const tsess *s, long n, const tstep *st, const response *r, const char *name)
{
    char n2[700], why[200] = "missing";
    long Tq = st->Tq;
    float *out = malloc(sizeof(float) * (size_t)(Tq * s->H * s->d));
    float *w = malloc(sizeof(float) * (size_t)(s->H * Tq * (n ? n : 1)));
    expect_step(s, n, st->q, Tq, out, w, NULL);
    long os[3] = {Tq, s->H, s->d}, ws[3] = {s->H, Tq, n};
    tensor t;
    int got = ks_output(r, "output", &t) == 0;
    snprintf(n2, sizeof n2, "%s: output", name);
    int ok = check(got && tensor_matches(&t, 3, os, out, why, sizeof why), n2, "%s", why);
    if (got)
        tensor_free(&t);
    got = ks_output(r, "weights", &t) == 0;
    snprintf(n2, sizeof n2, "%s: weights %s", name, st->need_weights ? "right" : "absent");
    if (st->need_weights)
        ok &= check(got && tensor_matches(&t, 3, ws, w, why, sizeof why), n2, "%s", why);
    else
        ok &= check(!got, n2, "weights present without need_weights");
    if (got)
        tensor_free(&t);
    json_t *hold, *len = ks_param(r, "length", &hold), *hold2, *id = ks_param(r, "sequence_id", &hold2);
    snprintf(n2, sizeof n2, "%s: parameters length %ld and sequence_id", name, n);
    ok &= check(json_is_integer(len) && json_integer_value(len) == n && json_is_string(id) &&
                !strcmp(json_string_value(id), s->id), n2, "%s", short_body(r));
    json_decref(hold);
    json_decref(hold2);
    free(out);
    free(w);
    return ok;
}

/* Expects a KServe error: status and {"error": "...text..."}. */
static int ks_expect_error(const response *r, long status, const char *text, const char *name)
{
    json_t *m = r->json ? json_object_get(r->json, "error") : NULL;
    return check(r->status == status && json_is_string(m) && (!text || strstr(json_string_value(m), text)),
                 name, "expected %ld with \"%s\", got %ld %s", status, text ? text : "", r->status,
                 short_body(r));
}

/* A client-made sequence id: 32 lowercase hex digits from the test's generator. */
static void client_id(char out[33], uint64_t *rs)
{
    uint64_t a = next_u64(rs), b = next_u64(rs);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}

/* One random sequence through KServe: started (server- or client-chosen
 * id), stepped with steps of random sizes and forms, one refused past
 * max_tokens, ended; every answer against the reference. */
static void ks_random_sequence(CURL *h, int sid, uint64_t seed)
{
    uint64_t rs = seed;
    tsess s = {0};
    random_session_shape(&s, &rs, 6);
    int own_id = (int)pick(&rs, 0, 1);
    if (own_id)
        client_id(s.id, &rs);
    s.k = calloc((size_t)(s.max_tokens * s.Hkv * s.d), sizeof(float));
    s.v = calloc((size_t)(s.max_tokens * s.Hkv * s.d), sizeof(float));
    long steps = pick(&rs, 3, 8);
    char name[400];
    for (long k = 0; k < steps; k++) {
        tstep st;
        step_make(&st, &s, pick(&rs, 1, 4), pick(&rs, 1, 3), &rs);
        ks_how how = {k == 0, k == steps - 1, k == 0 && !own_id ? NULL : s.id, (int)pick(&rs, 0, 1),
                      (int)pick(&rs, 0, 1)};
        snprintf(name, sizeof name, "kserve sequence %d step %ld (H %ld, Hkv %ld, d %ld, T %ld, Tq %ld, "
                 "n %ld, %s id, softcap %g, alibi %d, sinks %d, rope %d, window %d [%ld, %ld], %s in, %s out%s%s)",
                 sid, k, s.H, s.Hkv, s.d, st.T, st.Tq, s.n + st.T, own_id ? "client's" : "server's",
                 s.softcap, s.alibi, s.has_sinks, s.rope, s.has_window, s.left, s.right,
                 how.bin_in ? "binary" : "json", how.bin_out ? "binary" : "json",
                 how.start ? ", start" : "", how.end ? ", end" : "");
        response r;
        if (k > 0 && s.n + st.T > s.max_tokens) {
            ks_step_post(h, &srv_main, &s, &st, &how, NULL, &r);
            ks_expect_error(&r, 413, "max_tokens", name);
            response_free(&r);
            step_free(&st);
            if (how.end) { /* a refused end leaves the sequence: end it as a client would */
                snprintf(name, sizeof name, "kserve sequence %d: DELETE after a refused end", sid);
                delete_session(h, &srv_main, &s, name);
            }
            continue;
        }
        ks_step_post(h, &srv_main, &s, &st, &how, NULL, &r);
        if (how.start && !own_id) {
            json_t *hold, *id = ks_param(&r, "sequence_id", &hold);
            if (json_is_string(id))
                snprintf(s.id, sizeof s.id, "%s", json_string_value(id));
            json_decref(hold);
        }
        long n1 = s.n + st.T;
        memcpy(s.k + s.n * s.Hkv * s.d, st.k, sizeof(float) * (size_t)(st.T * s.Hkv * s.d));
        memcpy(s.v + s.n * s.Hkv * s.d, st.v, sizeof(float) * (size_t)(st.T * s.Hkv * s.d));
        char n2[440];
        snprintf(n2, sizeof n2, "%s: 200", name);
        if (check(r.status == 200, n2, "got %ld %s", r.status, short_body(&r))) {
            ks_step_check(&s, n1, &st, &r, name);
            s.n = n1;
        }
        if (k == 0 && s.id[0]) { /* one table: the native route sees the same session */
            snprintf(n2, sizeof n2, "kserve sequence %d: GET /sessions/{sequence_id} length %ld", sid, s.n);
            check(get_length(h, &srv_main, &s) == s.n, n2, "length %ld", get_length(h, &srv_main, &s));
        }
        response_free(&r);
        step_free(&st);
    }
    snprintf(name, sizeof name, "kserve sequence %d: sequence_end freed it (GET: 404 deleted)", sid);
    char path[128];
    snprintf(path, sizeof path, "/sessions/%s", s.id);
    response r;
    call(h, &srv_main, "GET", path, &r);
    expect_error(&r, 404, "unknown_session", "deleted", name);
    response_free(&r);
    tsess_free(&s);
}

static void test_kserve_random(void)
{
    CURL *h = curl_easy_init();
    for (int i = 0; i < 30; i++)
        ks_random_sequence(h, i, 0x7e57 + (uint64_t)i * 104729);
    check_alive(h, &srv_main, "kserve sequences");
    curl_easy_cleanup(h);
}

/* A raw KServe header (no binary data) to srv_main. */
static void ks_post_raw(CURL *h, const char *json, response *r)
{
    ks_req q = {{0}, {0}, 0};
    buf_puts(&q.json, json);
    ks_send(h, &srv_main, &q, NULL, r);
    buf_free(&q.json);
}

#define KS_ROWS "\"inputs\":[{\"name\":\"key\",\"datatype\":\"FP32\",\"shape\":[1,1,2],\"data\":[1,2]}," \
                "{\"name\":\"value\",\"datatype\":\"FP32\",\"shape\":[1,1,2],\"data\":[3,4]}," \
                "{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,2,2],\"data\":[1,0,0,1]}]"
#define KS_START "\"sequence_start\":true,\"num_heads\":2,\"num_kv_heads\":1,\"head_dim\":2,\"max_tokens\":4"

static void test_kserve_errors(void)
{
    CURL *h = curl_easy_init();
    response r;
    uint64_t rs = 31337;
    char live[33], fresh[33], body[2048];
    client_id(live, &rs);
    client_id(fresh, &rs);
    long open0 = metric(h, &srv_main, "attn_sessions_open");
    snprintf(body, sizeof body, "{\"parameters\":{\"sequence_id\":\"%s\"," KS_START "}," KS_ROWS "}", live);
    ks_post_raw(h, body, &r);
    check(r.status == 200, "kserve errors: a sequence with the client's id starts", "got %ld %s", r.status,
          short_body(&r));
    response_free(&r);
    struct {
        const char *params, *inputs; /* inputs NULL: KS_ROWS */
        long status;
        const char *text, *what;
    } bad[] = {
        {"", NULL, 400, "needs the sequence_id", "no sequence_id, no start"},
        {"\"sequence_id\":42", NULL, 400, "32 lowercase hex", "an integer id (guessable)"},
        {"\"sequence_id\":0", NULL, 400, "needs the sequence_id", "id 0 without a start"},
        {"\"sequence_id\":\"abc\"", NULL, 400, "32 lowercase hex", "a short string id"},
        {"\"sequence_id\":\"0123456789ABCDEF0123456789ABCDEF\"", NULL, 400, "32 lowercase hex", "upper-case hex"},
        {"\"sequence_id\":1.5", NULL, 400, "sequence_id", "a fractional id"},
        {"\"sequence_id\":-1", NULL, 400, "sequence_id", "a negative id"},
        {"\"sequence_id\":[1]", NULL, 400, "sequence_id", "a list id"},
        {"\"sequence_id\":\"00000000000000000000000000000000000000000000000000000000000000000\"", NULL, 400,
         "64", "a 65-character id"},
        {"\"sequence_id\":\"%s\"", NULL, 404, "never existed", "an id no one started"},
        {"\"sequence_id\":\"%l\"," KS_START, NULL, 409, "already started", "a second start on a live id"},
        {"\"sequence_start\":\"yes\"", NULL, 400, "sequence_start", "sequence_start not a boolean"},
        {"\"sequence_end\":1,\"sequence_id\":\"%l\"", NULL, 400, "sequence_end", "sequence_end not a boolean"},
        {"\"sequence_start\":true,\"head_dim\":2,\"max_tokens\":4", NULL, 400, "num_heads", "a start without num_heads"},
        {"\"sequence_start\":true,\"num_heads\":2,\"max_tokens\":4", NULL, 400, "head_dim", "a start without head_dim"},
        {"\"sequence_start\":true,\"num_heads\":2,\"head_dim\":2", NULL, 400, "max_tokens", "a start without max_tokens"},
        {"\"sequence_start\":true,\"num_heads\":2,\"num_kv_heads\":3,\"head_dim\":2,\"max_tokens\":4", NULL, 400,
         "num_kv_heads", "num_kv_heads not dividing num_heads"},
        {"\"sequence_start\":true,\"num_heads\":2,\"head_dim\":2,\"max_tokens\":99999999999", NULL, 413,
         "max_tokens", "max_tokens over the server's"},
        {"\"sequence_id\":\"%l\",\"num_heads\":2", NULL, 400, "only with sequence_start", "num_heads mid-sequence"},
        {"\"sequence_id\":\"%l\",\"softcap\":2", NULL, 400, "only with sequence_start", "softcap mid-sequence"},
        {"\"sequence_id\":\"%l\",\"causal\":true", NULL, 400, "causal", "a parameter the model does not take"},
        {"\"sequence_id\":\"%l\"",
         "[{\"name\":\"key\",\"datatype\":\"FP32\",\"shape\":[1,1,2],\"data\":[1,2]},"
         "{\"name\":\"value\",\"datatype\":\"FP32\",\"shape\":[1,1,2],\"data\":[3,4]},"
         "{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,2,2],\"data\":[1,0,0,1]},"
         "{\"name\":\"alibi\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[1,1]}]",
         400, "only with sequence_start", "an alibi input mid-sequence"},
        {"\"sequence_id\":\"%l\"",
         "[{\"name\":\"key\",\"datatype\":\"FP32\",\"shape\":[1,2,2],\"data\":[1,2,3,4]},"
         "{\"name\":\"value\",\"datatype\":\"FP32\",\"shape\":[1,2,2],\"data\":[1,2,3,4]},"
         "{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,2,2],\"data\":[1,0,0,1]}]",
         400, "num_kv_heads", "keys of 2 heads for a 1-head cache"},
        {"\"sequence_id\":\"%l\"",
         "[{\"name\":\"key\",\"datatype\":\"FP32\",\"shape\":[1,1,2],\"data\":[1,2]},"
         "{\"name\":\"value\",\"datatype\":\"FP32\",\"shape\":[1,1,2],\"data\":[3,4]},"
         "{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,0,0,1,1,1]}]",
         400, "head_dim", "queries of the wrong head_dim"},
        {"\"sequence_id\":\"%l\"",
         "[{\"name\":\"key\",\"datatype\":\"FP32\",\"shape\":[2,2],\"data\":[1,2,3,4]},"
         "{\"name\":\"value\",\"datatype\":\"FP32\",\"shape\":[2,2],\"data\":[1,2,3,4]},"
         "{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,2,2],\"data\":[1,0,0,1]}]",
         400, "key must have shape", "rank-2 keys"},
        {"\"sequence_id\":\"%l\"",
         "[{\"name\":\"key\",\"datatype\":\"INT32\",\"shape\":[1,1,2],\"data\":[1,2]},"
         "{\"name\":\"value\",\"datatype\":\"FP32\",\"shape\":[1,1,2],\"data\":[3,4]},"
         "{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,2,2],\"data\":[1,0,0,1]}]",
         400, "datatype", "INT32 keys"},
        {"\"sequence_id\":\"%l\"",
         "[{\"name\":\"key\",\"datatype\":\"FP32\",\"shape\":[1,1,2],\"data\":[1,2]},"
         "{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,2,2],\"data\":[1,0,0,1]}]",
         400, "value", "no value input"},
        {"\"sequence_id\":\"%l\"",
         "[{\"name\":\"key\",\"datatype\":\"FP32\",\"shape\":[1,1,2],\"data\":[1,2]},"
         "{\"name\":\"value\",\"datatype\":\"FP32\",\"shape\":[1,1,2],\"data\":[3,4]},"
         "{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,2,2],\"data\":[1,0,0,1]},"
         "{\"name\":\"mask\",\"datatype\":\"BOOL\",\"shape\":[1],\"data\":[true]}]",
         400, "no input", "a mask input"},
        {"\"sequence_id\":\"%l\"",
         "[{\"name\":\"key\",\"datatype\":\"FP32\",\"shape\":[4294967296,4294967296,2],\"data\":[1,2]},"
         "{\"name\":\"value\",\"datatype\":\"FP32\",\"shape\":[1,1,2],\"data\":[3,4]},"
         "{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,2,2],\"data\":[1,0,0,1]}]",
         413, "key", "a huge key shape"},
        {"\"sequence_id\":\"%l\",\"sequence_end\":true",
         "[{\"name\":\"key\",\"datatype\":\"FP32\",\"shape\":[9,1,2],\"data\":[1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2]},"
         "{\"name\":\"value\",\"datatype\":\"FP32\",\"shape\":[9,1,2],\"data\":[1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2,1,2]},"
         "{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,2,2],\"data\":[1,0,0,1]}]",
         413, "max_tokens", "a last step past max_tokens (the sequence stays)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char params[600], *p = params;
        for (const char *c = bad[i].params; *c && p < params + sizeof params - 40; c++)
            if (c[0] == '%' && (c[1] == 's' || c[1] == 'l')) {
                p += sprintf(p, "%s", c[1] == 's' ? fresh : live);
                c++;
            } else {
                *p++ = *c;
            }
        *p = '\0';
        snprintf(body, sizeof body, "{\"parameters\":{%s},\"inputs\":%s}", params,
                 bad[i].inputs ? bad[i].inputs : strchr(KS_ROWS, '[') );
        ks_post_raw(h, body, &r);
        char name[300];
        snprintf(name, sizeof name, "kserve errors: %s: %ld", bad[i].what, bad[i].status);
        ks_expect_error(&r, bad[i].status, bad[i].text, name);
        response_free(&r);
    }
    /* asking for layout */
    snprintf(body, sizeof body, "{\"parameters\":{\"sequence_id\":\"%s\"},\"outputs\":[{\"name\":\"layout\"}]," KS_ROWS "}", live);
    ks_post_raw(h, body, &r);
    ks_expect_error(&r, 400, "no layout output", "kserve errors: the layout output: 400");
    response_free(&r);
    /* none of the refusals appended a row: the next step's length is 2 */
    snprintf(body, sizeof body, "{\"parameters\":{\"sequence_id\":\"%s\"}," KS_ROWS "}", live);
    ks_post_raw(h, body, &r);
    json_t *hold, *len = ks_param(&r, "length", &hold);
    check(r.status == 200 && json_is_integer(len) && json_integer_value(len) == 2,
          "kserve errors: refused steps appended nothing (length 2 after one more)", "%s", short_body(&r));
    json_decref(hold);
    response_free(&r);
    /* a start that fails after its session is made leaves nothing: the id starts again */
    snprintf(body, sizeof body, "{\"parameters\":{\"sequence_id\":\"%s\"," KS_START "},\"inputs\":["
             "{\"name\":\"key\",\"datatype\":\"FP32\",\"shape\":[5,1,2],\"data\":[1,2,1,2,1,2,1,2,1,2]},"
             "{\"name\":\"value\",\"datatype\":\"FP32\",\"shape\":[5,1,2],\"data\":[1,2,1,2,1,2,1,2,1,2]},"
             "{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,2,2],\"data\":[1,0,0,1]}]}", fresh);
    ks_post_raw(h, body, &r);
    ks_expect_error(&r, 413, "max_tokens", "kserve errors: a start whose first step is past max_tokens: 413");
    response_free(&r);
    snprintf(body, sizeof body, "{\"parameters\":{\"sequence_id\":\"%s\"," KS_START ",\"sequence_end\":true}," KS_ROWS "}", fresh);
    ks_post_raw(h, body, &r);
    check(r.status == 200, "kserve errors: the failed start left no session: the id starts again "
          "(start and end in one request)", "got %ld %s", r.status, short_body(&r));
    response_free(&r);
    /* end the live one */
    snprintf(body, sizeof body, "{\"parameters\":{\"sequence_id\":\"%s\",\"sequence_end\":true}," KS_ROWS "}", live);
    ks_post_raw(h, body, &r);
    check(r.status == 200, "kserve errors: the sequence ends", "got %ld %s", r.status, short_body(&r));
    response_free(&r);
    ks_post_raw(h, body, &r);
    ks_expect_error(&r, 404, "deleted", "kserve errors: a step after sequence_end: 404, deleted");
    response_free(&r);
    check(metric(h, &srv_main, "attn_sessions_open") == open0, "kserve errors: no session left open",
          "open %ld, was %ld", metric(h, &srv_main, "attn_sessions_open"), open0);
    check_alive(h, &srv_main, "kserve sequence errors");
    curl_easy_cleanup(h);
}

/* 8 clients, each on its own KServe sequence at once (GQA, 6 steps): every
 * answer right, the sequences kept apart. */
static void ks_own_sequence_client(CURL *h, int id, void *arg)
{
    (void)arg;
    uint64_t rs = 0xd0d0 + (uint64_t)id;
    tsess s = {.H = 4, .Hkv = 2, .d = 8, .max_tokens = 64};
    s.k = calloc((size_t)(s.max_tokens * s.Hkv * s.d), sizeof(float));
    s.v = calloc((size_t)(s.max_tokens * s.Hkv * s.d), sizeof(float));
    client_id(s.id, &rs);
    for (int k = 0; k < 6; k++) {
        tstep st;
        step_make(&st, &s, pick(&rs, 1, 3), pick(&rs, 1, 2), &rs);
        ks_how how = {k == 0, k == 5, s.id, k % 2, k % 3 == 0};
        response r;
        ks_step_post(h, &srv_main, &s, &st, &how, NULL, &r);
        memcpy(s.k + s.n * s.Hkv * s.d, st.k, sizeof(float) * (size_t)(st.T * s.Hkv * s.d));
        memcpy(s.v + s.n * s.Hkv * s.d, st.v, sizeof(float) * (size_t)(st.T * s.Hkv * s.d));
        char name[160];
        snprintf(name, sizeof name, "kserve parallel: client %d step %d: 200", id, k);
        if (check(r.status == 200, name, "got %ld %s", r.status, short_body(&r))) {
            snprintf(name, sizeof name, "kserve parallel: client %d step %d", id, k);
            ks_step_check(&s, s.n + st.T, &st, &r, name);
            s.n += st.T;
        }
        response_free(&r);
        step_free(&st);
    }
    tsess_free(&s);
}

static void test_kserve_parallel(void)
{
    enum { N = 8 };
    char unused[N];
    double ms = run_clients(N, ks_own_sequence_client, unused, 1);
    printf("kserve parallel: %d clients x 6 steps on their own sequences in %.0f ms\n", N, ms);
}

/* A sequence idle past ATTN_SESSION_TTL is gone: 404, expired. */
static void test_kserve_ttl(void)
{
    CURL *h = curl_easy_init();
    tsess s = {.H = 1, .Hkv = 1, .d = 2, .max_tokens = 4};
    uint64_t rs = 77;
    client_id(s.id, &rs);
    tstep st;
    step_make(&st, &s, 1, 1, &rs);
    ks_how how = {1, 0, s.id, 0, 0};
    response r;
    ks_step_post(h, &srv_ttl, &s, &st, &how, NULL, &r);
    check(r.status == 200, "kserve ttl: a sequence starts", "got %ld %s", r.status, short_body(&r));
    response_free(&r);
    usleep(2600 * 1000);
    how.start = 0;
    ks_step_post(h, &srv_ttl, &s, &st, &how, NULL, &r);
    ks_expect_error(&r, 404, "expired", "kserve ttl: a step after the idle TTL: 404, expired");
    response_free(&r);
    step_free(&st);
    curl_easy_cleanup(h);
}

/* The token guards the KServe route as the native ones; the limits hold. */
static void test_kserve_guarded(void)
{
    CURL *h = curl_easy_init();
    static const char *const auth[] = {"Authorization: Bearer s3cret", NULL};
    tsess s = {.H = 1, .Hkv = 1, .d = 2, .max_tokens = 4};
    uint64_t rs = 5;
    tstep st;
    step_make(&st, &s, 1, 1, &rs);
    ks_how how = {1, 1, NULL, 0, 0};
    response r;
    ks_step_post(h, &srv_guard, &s, &st, &how, NULL, &r);
    ks_expect_error(&r, 401, NULL, "kserve token: a start without the token: 401");
    response_free(&r);
    ks_step_post(h, &srv_guard, &s, &st, &how, auth, &r);
    check(r.status == 200, "kserve token: with it: 200", "got %ld %s", r.status, short_body(&r));
    response_free(&r);
    s.max_tokens = 65;
    ks_step_post(h, &srv_limits, &s, &st, &how, NULL, &r);
    ks_expect_error(&r, 413, "ATTN_SESSION_MAX_TOKENS", "kserve limits: max_tokens 65 > 64: 413");
    response_free(&r);
    step_free(&st);
    curl_easy_cleanup(h);
}

/* ------------------------------------------------------------ main */

static void usage(void)
{
    fprintf(stderr, "usage: test_sessions --server PATH [--log FILE] [--memcheck] [-v]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--server") && i + 1 < argc) server_path = argv[++i];
        else if (!strcmp(argv[i], "--log") && i + 1 < argc) log_path = argv[++i];
        else if (!strcmp(argv[i], "-v")) h_verbose = 1;
        else if (!strcmp(argv[i], "--memcheck")) memcheck = 1;
        else usage();
    }
    h_begin(server_path, log_path, usage);
    double t0 = now_ms();
    /* ATTN_MODELS_DIR: a folder without weights, so no server spends its
     * start-up (long under valgrind) loading the translation models */
    static const char *const env_main[] = {"ATTN_MODELS_DIR=tests/http", NULL};
    static const char *const env_limits[] = {"ATTN_MAX_SESSIONS=3", "ATTN_SESSION_MEMORY=64K",
                                               "ATTN_SESSION_MAX_TOKENS=64", "ATTN_MAX_WEIGHTS=1000",
                                               "ATTN_MAX_WORK=1e6",
                                               "ATTN_MODELS_DIR=tests/http", NULL};
    static const char *const env_ttl[] = {"ATTN_SESSION_TTL=1", "ATTN_MODELS_DIR=tests/http", NULL};
    static const char *const env_guard[] = {"ATTN_TOKEN=s3cret", "ATTN_MODELS_DIR=tests/http", NULL};
    int up = check(server_start(&srv_main, server_path, "main", "/healthz", env_main, log_path) == 0,
                   "server starts", "see %s", log_path);
    int up_limits = check(server_start(&srv_limits, server_path, "limits", "/healthz", env_limits, log_path) == 0,
                          "server starts with session limits", "see %s", log_path);
    int up_ttl = check(server_start(&srv_ttl, server_path, "ttl", "/healthz", env_ttl, log_path) == 0,
                       "server starts with a 1 s session TTL", "see %s", log_path);
    int up_guard = check(server_start(&srv_guard, server_path, "guard", "/healthz", env_guard, log_path) == 0,
                         "server starts with a token", "see %s", log_path);
    if (up) {
        test_random();
        test_exact_fit();
        test_rope_truncate();
        test_bf16();
        test_errors();
        printf("sessions: random, edges and errors done (%.0f ms)\n", now_ms() - t0);
        test_parallel_own();
        test_parallel_shared();
        test_slow_client();
        test_turn_client_gone();
        printf("sessions: concurrency done (%.0f ms)\n", now_ms() - t0);
        test_kserve_random();
        test_kserve_errors();
        test_kserve_parallel();
        printf("sessions: kserve sequences done (%.0f ms)\n", now_ms() - t0);
    }
    if (up_limits)
        test_full_cache_fits();
    if (up_guard && up_limits)
        test_kserve_guarded();
    if (up_limits)
        test_limits();
    if (!memcheck)
        test_scratch();
    else
        skip("scratch: a step's working memory against the cap", "64 large steps under valgrind");
    if (up_ttl) {
        test_ttl();
        test_kserve_ttl();
    }
    if (up_guard)
        test_token();
    CURL *h = curl_easy_init();
    if (up) {
        check_alive(h, &srv_main, "every session test");
        check(metric(h, &srv_main, "attn_sessions_open") == 0 && metric(h, &srv_main, "attn_session_bytes") == 0,
              "every session deleted: nothing held", "open %ld, bytes %ld",
              metric(h, &srv_main, "attn_sessions_open"), metric(h, &srv_main, "attn_session_bytes"));
    }
    curl_easy_cleanup(h);
    check(server_stop(&srv_main), "main server exits 0 on SIGTERM", "see %s", log_path);
    check(server_stop(&srv_limits), "limits server exits 0 on SIGTERM", "see %s", log_path);
    check(server_stop(&srv_ttl), "ttl server exits 0 on SIGTERM", "see %s", log_path);
    check(server_stop(&srv_guard), "guard server exits 0 on SIGTERM", "see %s", log_path);
    curl_global_cleanup();
    printf("test_sessions: %.1f s, server log in %s\n", (now_ms() - t0) / 1e3, log_path);
    return h_report();
}
