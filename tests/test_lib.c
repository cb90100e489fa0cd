/* test_lib.c - the library against PyTorch's golden vectors, against the
 * reference implementation (tests/ref.c) over thousands of random shapes,
 * and against the bad requests of tests/lib/bad_requests.txt.
 *
 * Usage: test_lib [golden-dir] [--bad FILE] [--seed N] [--trials N] [--seconds S]
 *                 [--verbose]
 * The bad requests are data: tests/lib/bad_requests.txt (the default FILE).
 *
 * Tolerance, everywhere, elementwise and never loosened to make a case pass:
 *     |ours - expected| <= 1e-5 + 1e-4 * |expected|
 * where expected is PyTorch (computed in float64 from the float32 inputs) or
 * the double-precision reference. Seeded parameters must match bit for bit.
 *
 * Prints one line per failure (case, what, worst element) and closes with
 * "N passed, N failed, N skipped" (skipped: random trials too ill-conditioned
 * to compare, counted neither way); exits 1 when anything failed.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"
#include "golden.h"
#include "ref.h"

#define ABS_TOL 1e-5
#define REL_TOL 1e-4

static int n_passed, n_failed, n_skipped;
static int verbose; /* --verbose: name every random trial */

/* One failure line; a case may print several before it is counted once. */
static void report(const char *cs, const char *fmt, ...)
{
    va_list ap;
    printf("FAIL %s: ", cs);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static void count(int ok)
{
    if (ok)
        n_passed++;
    else
        n_failed++;
}

/* Elementwise check with the stated tolerance; reports the worst element
 * (largest excess over the tolerance). Returns 1 when all are within. */
static int close_enough(const char *cs, const char *what, const float *got,
                        const double *want, int64_t n)
{
    int64_t worst = -1, bad = 0;
    double worst_excess = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double tol = isinf(want[i]) ? 0.0 : ABS_TOL + REL_TOL * fabs(want[i]);
        double d = (double)got[i] == want[i] ? 0.0 : fabs((double)got[i] - want[i]);
        if (!(d <= tol)) { /* also catches NaN, and an infinity missed */
            double excess = isnan(d) ? INFINITY : d - tol;
            bad++;
            if (worst < 0 || excess > worst_excess) {
                worst = i;
                worst_excess = excess;
            }
        }
    }
    if (bad) {
        report(cs, "%s: %lld of %lld elements off; worst [%lld] got %.9g want %.9g "
               "(|diff| %.3g > tol %.3g)", what, (long long)bad, (long long)n,
               (long long)worst, got[worst], want[worst],
               fabs((double)got[worst] - want[worst]), ABS_TOL + REL_TOL * fabs(want[worst]));
        return 0;
    }
    return 1;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static int64_t numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= shape[d];
    return n;
}

static int same_shape(int r1, const int64_t *s1, int r2, const int64_t *s2)
{
    if (r1 != r2)
        return 0;
    for (int d = 0; d < r1; d++)
        if (s1[d] != s2[d])
            return 0;
    return 1;
}

static void shape_str(char *buf, size_t n, int rank, const int64_t *s)
{
    size_t at = 0;
    at += (size_t)snprintf(buf + at, n - at, "(");
    for (int d = 0; d < rank && at < n; d++)
        at += (size_t)snprintf(buf + at, n - at, d ? ", %lld" : "%lld", (long long)s[d]);
    if (at < n)
        snprintf(buf + at, n - at, ")");
}

/* ======================================================== golden cases */

/* Views of that rank and shape (its first rank sizes; the rest 0) over data. */
static attn_tensor tensor_of(int rank, const int64_t *shape, const float *data)
{
    attn_tensor t = {rank, {0}, data};
    for (int i = 0; i < rank; i++)
        t.shape[i] = shape[i];
    return t;
}

static attn_mask mask_of(int rank, const int64_t *shape, const uint8_t *data)
{
    attn_mask m = {rank, {0}, data};
    for (int i = 0; i < rank; i++)
        m.shape[i] = shape[i];
    return m;
}

/* A golden case's tensor or mask (absent: rank 0, no data). */
static attn_tensor as_tensor(const golden_tensor *g)
{
    return g ? tensor_of(g->rank, g->shape, g->f) : tensor_of(0, NULL, NULL);
}

static attn_mask as_mask(const golden_tensor *g)
{
    return g ? mask_of(g->rank, g->shape, g->m) : mask_of(0, NULL, NULL);
}

/* Options every rule shares, read from the case. Returns 0, or -1 for an
 * option this test does not know (the generator and the test disagree). */
static int read_options(const golden_case *c, attn_options *o, const char **bad)
{
    static const char *known[] = {"causal", "window", "hard", "scale", "need_weights",
                                  "hidden_size", "output_size", "seed", "num_heads",
                                  "num_kv_heads", "average_weights",
                                  "positional_encoding", "residual_norm"};
    for (size_t i = 0; i < c->n_options; i++) {
        size_t k = 0;
        while (k < sizeof known / sizeof *known && strcmp(known[k], c->options[i].key))
            k++;
        if (k == sizeof known / sizeof *known) {
            *bad = c->options[i].key;
            return -1;
        }
    }
    *o = attn_options_default();
    o->mask = as_mask(golden_get(c, GOLDEN_MASK, "mask"));
    o->key_mask = as_mask(golden_get(c, GOLDEN_MASK, "key_mask"));
    o->bias = as_tensor(golden_get(c, GOLDEN_TENSOR, "bias"));
    o->causal = (int)golden_opt_int(c, "causal", 0);
    if (golden_opt(c, "window")) {
        o->has_window = 1;
        o->window_left = o->window_right = golden_opt_int(c, "window", 0);
    }
    const char *hard = golden_opt(c, "hard");
    if (hard && strcmp(hard, "argmax") == 0) {
        o->hard = ATTN_HARD_ARGMAX;
    } else if (hard && strncmp(hard, "top_k ", 6) == 0) {
        o->hard = ATTN_HARD_TOPK;
        o->top_k = strtoll(hard + 6, NULL, 10);
    } else if (hard) {
        *bad = "hard";
        return -1;
    }
    o->need_weights = (int)golden_opt_int(c, "need_weights", 1);
    return 0;
}

/* Checks a seeded set against the case's expected parameters: the same
 * names in the same order, the same shapes, the same bits. */
static int check_seeded(const char *cs, const golden_case *c, const attn_param_set *set)
{
    size_t k = 0;
    int ok = 1;
    for (size_t i = 0; i < c->n_tensors; i++) {
        const golden_tensor *g = &c->tensors[i];
        if (g->kind != GOLDEN_EXPECT || !strcmp(g->name, "output") || !strcmp(g->name, "weights"))
            continue;
        if (k >= set->n) {
            report(cs, "seeded set has %zu parameters; expected %s next", set->n, g->name);
            return 0;
        }
        const attn_named *p = &set->items[k++];
        if (strcmp(p->name, g->name) != 0) {
            report(cs, "seeded parameter %zu is %s; expected %s", k - 1, p->name, g->name);
            ok = 0;
            continue;
        }
        if (!same_shape(p->t.rank, p->t.shape, g->rank, g->shape)) {
            char a[64], b[64];
            shape_str(a, sizeof a, p->t.rank, p->t.shape);
            shape_str(b, sizeof b, g->rank, g->shape);
            report(cs, "seeded %s has shape %s; expected %s", g->name, a, b);
            ok = 0;
            continue;
        }
        for (int64_t e = 0; e < g->count; e++)
            if (memcmp(&p->t.data[e], &g->f[e], sizeof(float)) != 0) {
                report(cs, "seeded %s[%lld] is %.9g; expected %.9g (bit for bit)", g->name,
                       (long long)e, p->t.data[e], g->f[e]);
                ok = 0;
                break;
            }
    }
    if (ok && k != set->n) {
        report(cs, "seeded set has %zu parameters; expected %zu", set->n, k);
        ok = 0;
    }
    return ok;
}

/* Compares shapes from plan and buffers from compute with the expectation. */
static int check_result(const char *cs, const char *tag, const golden_case *c,
                        const attn_shapes *sh, const float *out, const float *w)
{
    const golden_tensor *eo = golden_get(c, GOLDEN_EXPECT, "output");
    const golden_tensor *ew = golden_get(c, GOLDEN_EXPECT, "weights");
    char what[96], a[64], b[64];
    int ok = 1;
    if (!eo) {
        report(cs, "the case has no expected output");
        return 0;
    }
    if (!same_shape(sh->out_rank, sh->out_shape, eo->rank, eo->shape)) {
        shape_str(a, sizeof a, sh->out_rank, sh->out_shape);
        shape_str(b, sizeof b, eo->rank, eo->shape);
        report(cs, "%soutput shape %s; expected %s", tag, a, b);
        return 0;
    }
    double *want = xmalloc(sizeof(double) * (size_t)eo->count);
    for (int64_t i = 0; i < eo->count; i++)
        want[i] = eo->f[i];
    snprintf(what, sizeof what, "%soutput", tag);
    ok &= close_enough(cs, what, out, want, eo->count);
    free(want);
    if (ew && w) {
        if (!same_shape(sh->w_rank, sh->w_shape, ew->rank, ew->shape)) {
            shape_str(a, sizeof a, sh->w_rank, sh->w_shape);
            shape_str(b, sizeof b, ew->rank, ew->shape);
            report(cs, "%sweights shape %s; expected %s", tag, a, b);
            return 0;
        }
        want = xmalloc(sizeof(double) * (size_t)ew->count);
        for (int64_t i = 0; i < ew->count; i++)
            want[i] = ew->f[i];
        snprintf(what, sizeof what, "%sweights", tag);
        ok &= close_enough(cs, what, w, want, ew->count);
        free(want);
    }
    return ok;
}

/* The reference on a golden case: checks the oracle itself against torch. */
static int check_ref(const char *cs, const golden_case *c, const attn_shapes *sh,
                     const attn_request *req, const attn_mha_request *mreq)
{
    int64_t no = sh->out_count, nw = numel(sh->w_rank, sh->w_shape);
    double *ro = xmalloc(sizeof(double) * (size_t)no);
    double *rw = xmalloc(sizeof(double) * (size_t)nw);
    float *fo = xmalloc(sizeof(float) * (size_t)no);
    float *fw = xmalloc(sizeof(float) * (size_t)nw);
    int rc = req ? ref_attention(req, ro, rw, NULL) : ref_mha(mreq, ro, rw, NULL);
    int ok = rc == 0;
    if (!ok)
        report(cs, "the reference found a parameter missing");
    for (int64_t i = 0; ok && i < no; i++)
        fo[i] = (float)ro[i];
    for (int64_t i = 0; ok && i < nw; i++)
        fw[i] = (float)rw[i];
    if (ok)
        ok = check_result(cs, "reference ", c, sh, fo, golden_get(c, GOLDEN_EXPECT, "weights") ? fw : NULL);
    free(ro);
    free(rw);
    free(fo);
    free(fw);
    return ok;
}

static int run_golden_case(attn_ctx *ctx, const golden_case *c)
{
    const char *cs = c->name;
    const char *bad = NULL;
    attn_error err;
    attn_shapes sh;
    attn_status st;
    attn_options opt;
    attn_param_set *set = NULL;
    attn_named *params = NULL;
    size_t n_params = 0;
    int ok = 1, mha = strcmp(c->rule, "multihead") == 0;
    attn_request req;
    attn_mha_request mreq;

    if (read_options(c, &opt, &bad) != 0) {
        report(cs, "option '%s' is not understood by this test", bad);
        return 0;
    }
    for (size_t i = 0; i < c->n_tensors; i++)
        if (c->tensors[i].kind == GOLDEN_PARAM)
            n_params++;
    params = xmalloc(sizeof *params * (n_params + 1));
    n_params = 0;
    for (size_t i = 0; i < c->n_tensors; i++)
        if (c->tensors[i].kind == GOLDEN_PARAM) {
            params[n_params].name = c->tensors[i].name;
            params[n_params].t = as_tensor(&c->tensors[i]);
            n_params++;
        }

    if (mha) {
        mreq = attn_mha_request_default();
        mreq.query = as_tensor(golden_get(c, GOLDEN_TENSOR, "query"));
        mreq.key = as_tensor(golden_get(c, GOLDEN_TENSOR, "key"));
        mreq.value = as_tensor(golden_get(c, GOLDEN_TENSOR, "value"));
        mreq.num_heads = golden_opt_int(c, "num_heads", 0);
        mreq.num_kv_heads = golden_opt_int(c, "num_kv_heads", 0);
        mreq.average_weights = (int)golden_opt_int(c, "average_weights", 0);
        mreq.residual_norm = (int)golden_opt_int(c, "residual_norm", 0);
        const char *pe = golden_opt(c, "positional_encoding");
        if (pe && strcmp(pe, "sinusoidal") == 0)
            mreq.positional_encoding = ATTN_PE_SINUSOIDAL;
        mreq.opt = opt;
        mreq.params = params;
        mreq.n_params = n_params;
    } else {
        attn_rule rule;
        if (!attn_rule_from_name(c->rule, &rule)) {
            report(cs, "attn_rule_from_name(\"%s\") failed", c->rule);
            free(params);
            return 0;
        }
        req = attn_request_default(rule);
        req.query = as_tensor(golden_get(c, GOLDEN_TENSOR, "query"));
        req.key = as_tensor(golden_get(c, GOLDEN_TENSOR, "key"));
        req.value = as_tensor(golden_get(c, GOLDEN_TENSOR, "value"));
        if (golden_opt(c, "scale")) {
            req.has_scale = 1;
            req.scale = strtof(golden_opt(c, "scale"), NULL);
        }
        req.hidden_size = golden_opt_int(c, "hidden_size", 0);
        req.output_size = golden_opt_int(c, "output_size", 0);
        req.opt = opt;
        req.params = params;
        req.n_params = n_params;
    }

    if (golden_opt(c, "seed")) {
        uint64_t seed = (uint64_t)strtoull(golden_opt(c, "seed"), NULL, 10);
        st = mha ? attn_mha_seed_params(&mreq, seed, &set, &err)
                 : attn_seed_params(&req, seed, &set, &err);
        if (st != ATTN_OK) {
            report(cs, "seeding failed: %s (%s: %s)", attn_status_str(st), err.field, err.message);
            free(params);
            return 0;
        }
        ok &= check_seeded(cs, c, set);
        if (mha) {
            mreq.params = set->items;
            mreq.n_params = set->n;
        } else {
            req.params = set->items;
            req.n_params = set->n;
        }
    }

    st = mha ? attn_mha_plan(&mreq, &sh, &err) : attn_plan(&req, &sh, &err);
    if (st != ATTN_OK) {
        report(cs, "plan refused: %s (field \"%s\": %s)", attn_status_str(st), err.field,
               err.message);
        ok = 0;
        goto done;
    }
    {
        float *out = xmalloc(sizeof(float) * (size_t)sh.out_count);
        float *w = sh.w_count ? xmalloc(sizeof(float) * (size_t)sh.w_count) : NULL;
        st = mha ? attn_mha_compute(ctx, &mreq, out, w, &err)
                 : attn_compute(ctx, &req, out, w, &err);
        if (st != ATTN_OK) {
            report(cs, "compute failed: %s (field \"%s\": %s)", attn_status_str(st),
                   err.field, err.message);
            ok = 0;
        } else {
            ok &= check_result(cs, "", c, &sh, out, w);
        }
        if (opt.need_weights && !sh.w_count) {
            report(cs, "plan says no weights but they were asked for");
            ok = 0;
        }
        /* The same without weights and on the caller's thread: the output
         * must not depend on either. */
        if (st == ATTN_OK && opt.need_weights) {
            attn_shapes sh2;
            if (mha) {
                mreq.opt.need_weights = 0;
                st = attn_mha_plan(&mreq, &sh2, &err);
                if (st == ATTN_OK)
                    st = attn_mha_compute(NULL, &mreq, out, NULL, &err);
                mreq.opt.need_weights = 1;
            } else {
                req.opt.need_weights = 0;
                st = attn_plan(&req, &sh2, &err);
                if (st == ATTN_OK)
                    st = attn_compute(NULL, &req, out, NULL, &err);
                req.opt.need_weights = 1;
            }
            if (st != ATTN_OK) {
                report(cs, "need_weights=0 failed: %s (%s)", attn_status_str(st), err.message);
                ok = 0;
            } else {
                if (sh2.w_count != 0) {
                    report(cs, "need_weights=0 but plan asks for %lld weights",
                           (long long)sh2.w_count);
                    ok = 0;
                }
                ok &= check_result(cs, "need_weights=0 ", c, &sh, out, NULL);
            }
        }
        free(out);
        free(w);
    }
    ok &= check_ref(cs, c, &sh, mha ? NULL : &req, mha ? &mreq : NULL);
done:
    attn_param_set_free(set);
    free(params);
    return ok;
}

static void run_golden(attn_ctx *ctx, const char *dir)
{
    char **paths;
    char err[512];
    int n = golden_list(dir, &paths);
    if (n <= 0) {
        report(dir, "no golden cases found (run from the repository root)");
        count(0);
        return;
    }
    for (int i = 0; i < n; i++) {
        golden_case c;
        if (golden_load(paths[i], &c, err, sizeof err) != 0) {
            report(paths[i], "%s", err);
            count(0);
            continue;
        }
        count(run_golden_case(ctx, &c));
        golden_free(&c);
    }
    printf("golden: %d cases from %s\n", n, dir);
    golden_list_free(paths, n);
}

/* ===================================================== bad requests */

static float zeros[4096];
static uint8_t ones_u8[4096];

/* Field match: exact, or any of '|'-separated alternatives, or a prefix
 * when an alternative ends with '*'. */
static int field_matches(const char *got, const char *want)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", want);
    for (char *save = NULL, *alt = strtok_r(buf, "|", &save); alt;
         alt = strtok_r(NULL, "|", &save)) {
        size_t n = strlen(alt);
        if (n && alt[n - 1] == '*' ? strncmp(got, alt, n - 1) == 0 : strcmp(got, alt) == 0)
            return 1;
    }
    return 0;
}

static void expect_bad(const char *name, attn_status got, const attn_error *err,
                       attn_status want, const char *field)
{
    int ok = got == want && field_matches(err->field, field);
    if (!ok)
        report(name, "got %s field \"%s\" (%s); expected %s field \"%s\"",
               attn_status_str(got), got == ATTN_OK ? "" : err->field,
               got == ATTN_OK ? "accepted" : err->message, attn_status_str(want), field);
    else if (got != ATTN_OK && err->message[0] == '\0') {
        report(name, "no message with the error");
        ok = 0;
    }
    count(ok);
}

/* Base requests: batched (2, 3, 4) query, (2, 5, 4) key, (2, 5, 3) value. */
static attn_request base(attn_rule rule)
{
    attn_request r = attn_request_default(rule);
    r.query = tensor_of(3, (const int64_t[]){2, 3, 4}, zeros);
    r.key = tensor_of(3, (const int64_t[]){2, 5, 4}, zeros);
    r.value = tensor_of(3, (const int64_t[]){2, 5, 3}, zeros);
    return r;
}

/* One block of tests/lib/bad_requests.txt, read into a request. */
typedef struct {
    char name[160];
    int multihead;
    attn_request r;
    attn_mha_request m;
    attn_named p[8];
    char pname[8][64];
    int np;
    attn_status want;
    char field[128];
    int has_expect;
    int64_t globals[16]; /* sparsity.global */
} bad_case;

/* Up to four sizes; returns how many (the rank). */
static int read_shape(const char *val, int64_t *s)
{
    int n = 0;
    char *end;
    for (const char *q = val; n < 4; q = end) {
        long long v = strtoll(q, &end, 10);
        if (end == q)
            break;
        s[n++] = v;
    }
    return n;
}

static attn_tensor *bad_tensor(bad_case *c, const char *k)
{
    int mh = c->multihead;
    if (!strcmp(k, "query")) return mh ? &c->m.query : &c->r.query;
    if (!strcmp(k, "key")) return mh ? &c->m.key : &c->r.key;
    if (!strcmp(k, "value")) return mh ? &c->m.value : &c->r.value;
    if (!strcmp(k, "bias")) return mh ? &c->m.opt.bias : &c->r.opt.bias;
    return NULL;
}

static attn_status status_named(const char *s)
{
    if (!strcmp(s, "shape")) return ATTN_ERR_SHAPE;
    if (!strcmp(s, "param")) return ATTN_ERR_PARAM;
    if (!strcmp(s, "too_large")) return ATTN_ERR_TOO_LARGE;
    if (!strcmp(s, "arg")) return ATTN_ERR_ARG;
    return ATTN_OK;
}

static int bad_pipeline(bad_case *c, attn_options *o, const char *key, const char *val);

/* Linear and sparse attention's options: linear (multi-head's attention
 * "linear"), feature_map (elu, relu, or a number for an out-of-range
 * value), sparsity (local_global, bigbird, blocks), its members
 * sparsity.window, .block, .window_blocks, .global_blocks,
 * .random_blocks, .global (indices) and .layout (a shape). 0 when key is
 * none of them. */
static int bad_sparse_linear(bad_case *c, const char *key, const char *val)
{
    attn_options *o = c->multihead ? &c->m.opt : &c->r.opt;
    attn_sparsity *sp = &o->sparsity;
    int64_t s[4] = {0};
    if (!strcmp(key, "linear"))
        c->m.linear = atoi(val);
    else if (!strcmp(key, "feature_map"))
        o->feature_map = !strcmp(val, "elu") ? ATTN_FM_ELU : !strcmp(val, "relu") ? ATTN_FM_RELU
                       : (attn_feature_map)atoi(val);
    else if (!strcmp(key, "sparsity"))
        sp->pattern = !strcmp(val, "local_global") ? ATTN_SPARSE_LOCAL_GLOBAL
                    : !strcmp(val, "bigbird") ? ATTN_SPARSE_BIGBIRD
                    : !strcmp(val, "blocks") ? ATTN_SPARSE_BLOCKS : (attn_pattern)atoi(val);
    else if (!strcmp(key, "sparsity.window"))
        sp->window = strtoll(val, NULL, 10);
    else if (!strcmp(key, "sparsity.block"))
        sp->block = strtoll(val, NULL, 10);
    else if (!strcmp(key, "sparsity.window_blocks"))
        sp->window_blocks = strtoll(val, NULL, 10);
    else if (!strcmp(key, "sparsity.global_blocks"))
        sp->global_blocks = strtoll(val, NULL, 10);
    else if (!strcmp(key, "sparsity.random_blocks"))
        sp->random_blocks = strtoll(val, NULL, 10);
    else if (!strcmp(key, "sparsity.global")) {
        sp->n_global = (size_t)read_shape(val, c->globals);
        sp->global = c->globals;
    } else if (!strcmp(key, "sparsity.layout")) {
        int rank = read_shape(val, s);
        sp->layout = mask_of(rank, s, ones_u8);
    } else
        return 0;
    return 1;
}

/* rule, param, expect and the scalar options; 0 when key is none of them. */
static int bad_option(bad_case *c, const char *key, const char *val)
{
    attn_options *o = c->multihead ? &c->m.opt : &c->r.opt;
    attn_rule rule;
    if (!strcmp(key, "rule")) {
        c->multihead = !strcmp(val, "multihead");
        if (c->multihead)
            c->m = attn_mha_request_default();
        else if (attn_rule_from_name(val, &rule))
            c->r = base(rule);
        else
            return 0;
    } else if (!strcmp(key, "param") && c->np < 8) {
        int64_t s[4] = {0};
        sscanf(val, "%63s", c->pname[c->np]);
        int rank = read_shape(val + strlen(c->pname[c->np]), s);
        c->p[c->np].name = c->pname[c->np];
        c->p[c->np++].t = tensor_of(rank, s, zeros);
    } else if (!strcmp(key, "expect")) {
        char st[32] = "";
        c->has_expect = sscanf(val, "%31s %127s", st, c->field) >= 1;
        c->want = status_named(st);
    } else if (!strcmp(key, "causal")) {
        o->causal = atoi(val);
    } else if (!strcmp(key, "window")) {
        char a[32] = "", b[32] = "";
        int n = sscanf(val, "%31s %31s", a, b);
        o->has_window = 1;
        o->window_left = strcmp(a, "null") ? strtoll(a, NULL, 10) : -1;
        o->window_right = n < 2 ? o->window_left : strcmp(b, "null") ? strtoll(b, NULL, 10) : -1;
    } else if (!bad_pipeline(c, o, key, val)) {
        return 0;
    }
    return 1;
}

/* The score pipeline's options; 0 when key is none of them. */
static int bad_pipeline(bad_case *c, attn_options *o, const char *key, const char *val)
{
    if (!strcmp(key, "align")) {
        o->align = !strcmp(val, "bottom_right") ? ATTN_ALIGN_BOTTOM_RIGHT
                 : !strcmp(val, "top_left") ? ATTN_ALIGN_TOP_LEFT : (attn_align)atoi(val);
    } else if (!strcmp(key, "softcap")) {
        o->softcap = strtof(val, NULL);
    } else if (!strcmp(key, "alibi")) { /* true, or the number of slopes given */
        o->alibi = 1;
        if (strcmp(val, "true")) {
            o->alibi_slopes = zeros;
            o->n_alibi_slopes = strtoll(val, NULL, 10);
        }
    } else if (!strcmp(key, "sinks")) { /* the number of sink logits given */
        o->sinks = zeros;
        o->n_sinks = strtoll(val, NULL, 10);
    } else if (!strncmp(key, "rope", 4)) { /* rope: on, rope_dims, rope_offset, rope_base */
        o->rope.on = 1;
        if (!strcmp(key, "rope_dims")) o->rope.dims = strtoll(val, NULL, 10);
        else if (!strcmp(key, "rope_offset")) o->rope.offset = strtoll(val, NULL, 10);
        else if (!strcmp(key, "rope_base")) o->rope.base = strtof(val, NULL);
        else if (strcmp(key, "rope")) return 0;
    } else if (!strcmp(key, "sample")) {
        o->hard = ATTN_HARD_SAMPLE;
        o->temperature = strtof(val, NULL);
    } else if (!strcmp(key, "positional_encoding")) {
        c->m.positional_encoding = !strcmp(val, "learned") ? ATTN_PE_LEARNED : ATTN_PE_SINUSOIDAL;
    } else if (!strcmp(key, "top_k")) {
        o->hard = ATTN_HARD_TOPK;
        o->top_k = strtoll(val, NULL, 10);
    } else if (!strcmp(key, "scale")) {
        c->r.has_scale = 1;
        c->r.scale = strtof(val, NULL);
    } else if (!strcmp(key, "hidden_size")) {
        c->r.hidden_size = strtoll(val, NULL, 10);
    } else if (!strcmp(key, "output_size")) {
        c->r.output_size = strtoll(val, NULL, 10);
    } else if (!strcmp(key, "num_heads")) {
        c->m.num_heads = strtoll(val, NULL, 10);
    } else if (!strcmp(key, "num_kv_heads")) {
        c->m.num_kv_heads = strtoll(val, NULL, 10);
    } else {
        return bad_sparse_linear(c, key, val);
    }
    return 1;
}

/* One "key: value" line of a case; 0 when the key is unknown. */
static int bad_line(bad_case *c, const char *key, const char *val)
{
    int64_t s[4] = {0};
    attn_tensor *t = bad_tensor(c, key);
    attn_options *o = c->multihead ? &c->m.opt : &c->r.opt;
    if (!strcmp(key, "bad")) {
        snprintf(c->name, sizeof c->name, "bad: %s", val);
    } else if (t) {
        int rank = read_shape(val, s);
        *t = tensor_of(rank, s, zeros);
    } else if (!strcmp(key, "nodata") && (t = bad_tensor(c, val))) {
        t->data = NULL;
    } else if (!strcmp(key, "mask") || !strcmp(key, "key_mask")) {
        int rank = read_shape(val, s);
        *(key[0] == 'm' ? &o->mask : &o->key_mask) = mask_of(rank, s, ones_u8);
    } else {
        return bad_option(c, key, val);
    }
    return 1;
}

/* Plans the case's request and checks the refusal. */
static void bad_run(bad_case *c)
{
    attn_error e;
    attn_shapes sh;
    memset(&e, 0, sizeof e);
    attn_status st;
    if (c->multihead) {
        c->m.params = c->np ? c->p : NULL;
        c->m.n_params = (size_t)c->np;
        st = attn_mha_plan(&c->m, &sh, &e);
    } else {
        c->r.params = c->np ? c->p : NULL;
        c->r.n_params = (size_t)c->np;
        st = attn_plan(&c->r, &sh, &e);
    }
    if (!c->has_expect || c->want == ATTN_OK) {
        report(c->name, "no valid expect: line");
        count(0);
        return;
    }
    expect_bad(c->name, st, &e, c->want, c->field);
}

/* Every case of the file; returns how many ran, -1 when unreadable. */
static int run_bad(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[512];
    int n = 0, open = 0;
    bad_case c;
    memset(&c, 0, sizeof c);
    while (1) {
        char *got = fgets(line, sizeof line, f);
        line[strcspn(line, "\r\n")] = 0;
        if ((!got || !line[0]) && open) { /* a blank line or the end closes a case */
            bad_run(&c);
            n++;
            open = 0;
            memset(&c, 0, sizeof c);
        }
        if (!got)
            break;
        char *colon = strchr(line, ':');
        if (!line[0] || line[0] == '#' || !colon)
            continue;
        *colon = 0;
        const char *val = colon + 1 + strspn(colon + 1, " ");
        open = 1;
        if (!bad_line(&c, line, val)) {
            report(c.name[0] ? c.name : path, "unknown line '%s: %s'", line, val);
            count(0);
        }
    }
    fclose(f);
    return n;
}

/* Small public helpers: checked size products and rule names. */
static void run_api(void)
{
    int64_t out = 7;
    count(attn_size_mul(3, 5, &out) == 1 && out == 15);
    out = 7;
    int ok = attn_size_mul(INT64_C(1) << 32, INT64_C(1) << 31, &out) == 0 && out == 7 &&
             attn_size_mul(-1, 5, &out) == 0 && attn_size_mul(5, -1, &out) == 0 &&
             attn_size_mul(INT64_MAX, 2, &out) == 0 && out == 7 &&
             attn_size_mul(INT64_C(3037000499), INT64_C(3037000499), &out) == 1;
    if (!ok)
        report("attn_size_mul", "an overflow was not caught, or *out was touched");
    count(ok);
    ok = 1;
    for (int r = 0; r < ATTN_RULE_COUNT; r++) {
        attn_rule back;
        const char *nm = attn_rule_name((attn_rule)r);
        if (!nm || !attn_rule_from_name(nm, &back) || back != (attn_rule)r ||
            !attn_rule_describe((attn_rule)r)) {
            report("rule names", "rule %d does not round-trip through its name", r);
            ok = 0;
        }
    }
    attn_rule dummy;
    if (attn_rule_name(ATTN_RULE_COUNT) || attn_rule_from_name("multihead", &dummy) ||
        attn_rule_from_name("Dot", &dummy)) {
        report("rule names", "an unknown rule name was accepted");
        ok = 0;
    }
    count(ok);
    /* seeded parameters too large to make: attn_plan refuses what
     * attn_compute would (it once answered ATTN_OK with a cost of inf) */
    static const float x[2] = {1, 2};
    static const int64_t huge[] = {INT64_MAX, INT64_MAX / 2, INT64_C(1) << 62, INT64_C(1) << 61};
    for (int rule = ATTN_RULE_ADDITIVE; rule <= ATTN_RULE_CONCAT_TANH; rule++)
        for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
            attn_request req = attn_request_default((attn_rule)rule);
            req.query = req.key = req.value = (attn_tensor){2, {1, 2}, (float *)x};
            req.hidden_size = huge[i];
            attn_shapes sh;
            attn_error err;
            attn_status st = attn_plan(&req, &sh, &err);
            count(st == ATTN_ERR_TOO_LARGE);
            if (st != ATTN_ERR_TOO_LARGE)
                report("plan of huge seeded parameters", "%s, hidden_size %lld: %s, expected too_large",
                       attn_rule_name((attn_rule)rule), (long long)huge[i], attn_status_str(st));
        }
    /* the same for multi-head: E = 2^32 makes in_proj_weight 3 * 2^64 floats */
    static const int64_t huge_e[] = {INT64_C(1) << 32, INT64_C(1) << 40, INT64_C(3037000500)};
    for (size_t i = 0; i < sizeof huge_e / sizeof *huge_e; i++) {
        attn_mha_request m = attn_mha_request_default();
        m.query = (attn_tensor){2, {1, huge_e[i]}, (float *)x};
        m.num_heads = 1;
        m.opt.need_weights = 0;
        attn_shapes sh;
        attn_error err;
        attn_status st = attn_mha_plan(&m, &sh, &err);
        count(st == ATTN_ERR_TOO_LARGE);
        if (st != ATTN_ERR_TOO_LARGE)
            report("plan of huge seeded parameters", "multihead, E = %lld: %s, expected too_large",
                   (long long)huge_e[i], attn_status_str(st));
    }
}

/* Which rule takes which option, as the rules are defined (written out
 * here, not read from the library): attn_rule_takes must say so, and a
 * plan with the option set to a valid value must pass where the rule
 * takes it and be refused naming it where it does not, for every rule and
 * for multi-head softmax and linear attention. */
static const char *const takes_want[ATTN_RULE_COUNT] = {
    [ATTN_RULE_DOT] = " mask key_mask bias causal align window softcap alibi sinks rope sparsity "
                      "hard precision ",
    [ATTN_RULE_SCALED_DOT] = " mask key_mask bias causal align window softcap alibi sinks rope "
                             "sparsity hard precision scale ",
    [ATTN_RULE_GENERAL] = " mask key_mask bias causal align window softcap alibi sinks hard "
                          "precision ",
    [ATTN_RULE_ADDITIVE] = " mask key_mask bias causal align window softcap alibi sinks hard "
                           "hidden_size ",
    [ATTN_RULE_CONCAT_TANH] = " mask key_mask bias causal align window softcap alibi sinks hard "
                              "hidden_size ",
    [ATTN_RULE_CONCAT] = " mask hard output_size ",
    [ATTN_RULE_LINEAR] = " key_mask causal align feature_map ",
};

/* Sets opt to a valid value other than its default in o (4 x 4 rows);
 * 0 for the options attn_request holds itself. */
static int set_option(attn_options *o, attn_option opt)
{
    static const int64_t sq[2] = {4, 4}, row[1] = {4};
    static const float one[1] = {0.5f};
    switch (opt) {
    case ATTN_OPT_MASK: o->mask = mask_of(2, sq, ones_u8); return 1;
    case ATTN_OPT_KEY_MASK: o->key_mask = mask_of(1, row, ones_u8); return 1;
    case ATTN_OPT_BIAS: o->bias = tensor_of(2, sq, zeros); return 1;
    case ATTN_OPT_CAUSAL: o->causal = 1; return 1;
    case ATTN_OPT_ALIGN: o->align = ATTN_ALIGN_BOTTOM_RIGHT; return 1;
    case ATTN_OPT_WINDOW: o->has_window = 1; o->window_left = o->window_right = 1; return 1;
    case ATTN_OPT_SOFTCAP: o->softcap = 5.0f; return 1;
    case ATTN_OPT_ALIBI: o->alibi = 1; return 1;
    case ATTN_OPT_SINKS: o->sinks = one; o->n_sinks = 1; return 1;
    case ATTN_OPT_ROPE: o->rope.on = 1; return 1;
    case ATTN_OPT_SPARSITY: o->sparsity.pattern = ATTN_SPARSE_LOCAL_GLOBAL; o->sparsity.window = 1; return 1;
    case ATTN_OPT_HARD: o->hard = ATTN_HARD_ARGMAX; return 1;
    case ATTN_OPT_PRECISION: o->precision = ATTN_PRECISION_BF16; return 1;
    case ATTN_OPT_FEATURE_MAP: o->feature_map = ATTN_FM_RELU; return 1;
    default: return 0;
    }
}

static void expect_taken(const char *who, attn_option opt, int want, attn_status st,
                         const attn_error *err)
{
    const char *name = attn_option_name(opt);
    char cs[96];
    snprintf(cs, sizeof cs, "%s with %s", who, name);
    if (!want) {
        expect_bad(cs, st, err, ATTN_ERR_PARAM, name);
        return;
    }
    if (st != ATTN_OK)
        report(cs, "refused: %s (%s)", attn_status_str(st), err->message);
    count(st == ATTN_OK);
}

static void run_rule_options(void)
{
    static const int64_t sq[2] = {4, 4};
    for (int r = 0; r < ATTN_RULE_COUNT; r++)
        for (int opt = 0; opt < ATTN_OPT_COUNT; opt++) {
            char word[32];
            snprintf(word, sizeof word, " %s ", attn_option_name((attn_option)opt));
            int want = strstr(takes_want[r], word) != NULL;
            const char *rule = attn_rule_name((attn_rule)r);
            int got = attn_rule_takes((attn_rule)r, (attn_option)opt);
            if (got != want)
                report("attn_rule_takes", "%s %s %s, expected the opposite", rule,
                       got ? "takes" : "refuses", word);
            count(got == want);
            attn_request req = attn_request_default((attn_rule)r);
            req.query = req.key = req.value = tensor_of(2, sq, zeros);
            if (!set_option(&req.opt, (attn_option)opt)) {
                if (opt != ATTN_OPT_SCALE)
                    continue; /* hidden_size and output_size are ignored where not taken */
                req.has_scale = 1;
                req.scale = 0.5f;
            }
            attn_error err = {{0}, {0}};
            expect_taken(rule, (attn_option)opt, want, attn_plan(&req, NULL, &err), &err);
        }
    count(attn_option_name(ATTN_OPT_COUNT) == NULL && !attn_rule_takes(ATTN_RULE_COUNT, ATTN_OPT_MASK) &&
          !attn_rule_takes(ATTN_RULE_DOT, ATTN_OPT_COUNT));
    /* multi-head: softmax takes what dot takes, linear what linear takes */
    for (int lin = 0; lin <= 1; lin++)
        for (int opt = 0; opt < ATTN_OPT_COUNT; opt++) {
            attn_mha_request m = attn_mha_request_default();
            m.query = tensor_of(2, sq, zeros);
            m.num_heads = 1;
            m.linear = lin;
            if (!set_option(&m.opt, (attn_option)opt))
                continue;
            char word[32];
            snprintf(word, sizeof word, " %s ", attn_option_name((attn_option)opt));
            int want = strstr(takes_want[lin ? ATTN_RULE_LINEAR : ATTN_RULE_DOT], word) != NULL;
            attn_error err = {{0}, {0}};
            expect_taken(lin ? "multi-head linear" : "multi-head softmax", (attn_option)opt, want,
                         attn_mha_plan(&m, NULL, &err), &err);
        }
}

/* A rank past ATTN_MAX_RANK (or below 0) in a mask, a bias, a parameter or
 * a sparsity layout: the request is refused and the message names the rank,
 * never sizes read past the shape array (they once carried the memory after
 * it, a pointer among them, into the message). */
static void run_garbage_ranks(void)
{
    static const int ranks[] = {ATTN_MAX_RANK + 1, 40, -3};
    for (int which = 0; which < 5; which++)
        for (size_t r = 0; r < sizeof ranks / sizeof *ranks; r++) {
            attn_request req = base(which == 3 ? ATTN_RULE_GENERAL : ATTN_RULE_SCALED_DOT);
            attn_mask m = {ranks[r], {3, 5, 0, 0}, ones_u8};
            attn_named p = {"attn.weight", {ranks[r], {4, 4, 0, 0}, zeros}};
            static const char *what[] = {"mask", "key_mask", "bias", "params.attn.weight", "sparsity.layout"};
            if (which == 0)
                req.opt.mask = m;
            else if (which == 1)
                req.opt.key_mask = m;
            else if (which == 2)
                req.opt.bias = (attn_tensor){ranks[r], {3, 5, 0, 0}, zeros};
            else if (which == 3) {
                req.params = &p;
                req.n_params = 1;
            } else {
                req.opt.sparsity.pattern = ATTN_SPARSE_BLOCKS;
                req.opt.sparsity.block = 1;
                req.opt.sparsity.layout = m;
            }
            attn_error err;
            attn_status st = attn_plan(&req, NULL, &err);
            char want[32];
            snprintf(want, sizeof want, "(rank %d)", ranks[r]);
            int ok = st != ATTN_OK && strstr(err.message, want) && !strstr(err.message, "0, 0");
            if (!ok)
                report("garbage rank", "%s of rank %d: %s \"%s\"", what[which], ranks[r],
                       attn_status_str(st), st == ATTN_OK ? "" : err.message);
            count(ok);
        }
}

/* One dot product request (Lq x D query, Lk x D key, Lk x 1 value): its
 * status, and its output row 0 and weights in out and w. */
static attn_status dot_run(attn_ctx *ctx, int64_t lq, int64_t lk, int64_t d, const float *q,
                           const float *k, const float *v, float *out, float *w)
{
    attn_request r = attn_request_default(ATTN_RULE_DOT);
    r.query = (attn_tensor){2, {lq, d}, (float *)q};
    r.key = (attn_tensor){2, {lk, d}, (float *)k};
    r.value = (attn_tensor){2, {lk, 1}, (float *)v};
    attn_error err;
    return attn_compute(ctx, &r, out, w, &err);
}

/* Finite inputs whose float32 computation overflows give a result that is
 * not finite (inf or NaN, as PyTorch's float32 would), on the row driver
 * (one query row) and the flash kernel (64 rows), never zeros that look
 * like an answer (a score of +inf once made its row one with no key);
 * values just inside the range still give the float64 answer. */
static void run_overflow(attn_ctx *ctx)
{
    enum { L = 64 };
    static float q[L * 2], k[L * 2], v[L], out[L], w[L * 2];
    struct { const char *what; float q0, q1, k0, k1, v0, v1; int finite; double o, w0; } c[] = {
        /* the values' weighted sum 4.4e38 is taken before the division by the softmax's sum */
        {"a sum of values past 3.4e38", 0, 0, 1, 1, 3.4e38f, 1e38f, 0, 0, 0},
        {"a score past 3.4e38", 1e20f, 1e20f, 1e20f, 1e20f, 1, 2, 0, 0, 0},
        {"values of 1e38", 0, 0, 1, 1, 1e38f, 1e38f, 1, 1e38, 0.5},
        {"a score of 2e38", 1e19f, 1e19f, 1e19f, 1e19f, 1, 2, 1, 1.0, 1.0},
    };
    for (size_t t = 0; t < sizeof c / sizeof *c; t++)
        for (int64_t lq = 1; lq <= L; lq += L - 1) {
            for (int64_t i = 0; i < L; i++) {
                q[2 * i] = c[t].q0, q[2 * i + 1] = c[t].q1;
                k[2 * i] = i ? 1.0f : c[t].k0, k[2 * i + 1] = i ? 1.0f : c[t].k1;
                v[i] = i ? c[t].v1 : c[t].v0;
            }
            attn_status st = dot_run(ctx, lq, 2, 2, q, k, v, out, w);
            int ok = st == ATTN_OK;
            for (int64_t i = 0; ok && i < lq; i++)
                ok = c[t].finite ? fabs(out[i] - c[t].o) <= 1e-6 * fabs(c[t].o) && fabs(w[2 * i] - c[t].w0) <= 1e-6
                                 : !isfinite(out[i]);
            count(ok);
            if (!ok)
                report("float32 overflow", "%s, %lld query rows: %s, output %g, weight %g; expected %s",
                       c[t].what, (long long)lq, attn_status_str(st), out[0], w[0],
                       c[t].finite ? "the float64 answer" : "an output that is not finite");
        }
}

/* top_k over rows of many exact ties: integer keys and queries of one
 * feature make integer scores, equal for a third of the
 * keys or more, so the k-th largest is shared and the lowest indices must
 * win; k from 1 to every key, below and above 32, against the reference. */
static void run_topk_ties(attn_ctx *ctx)
{
    enum { LQ = 5, LK = 300 };
    static float q[LQ], k[LK], v[LK * 2], out[LQ * 2], w[LQ * LK];
    static double rout[LQ * 2], rw[LQ * LK];
    const float qs[LQ] = {1.0f, -1.0f, 0.0f, 0.5f, 3.0f};
    const int64_t ks[] = {1, 2, 7, 31, 32, 33, 64, 100, 150, 160, 299, 300};
    for (int i = 0; i < LQ; i++)
        q[i] = qs[i];
    for (int j = 0; j < LK; j++) {
        k[j] = (float)((j * 7) % 9 - 4); /* -4..4, each value 33 or 34 times */
        v[2 * j] = (float)j, v[2 * j + 1] = (float)(j % 5);
    }
    attn_request r = attn_request_default(ATTN_RULE_DOT);
    r.query = (attn_tensor){2, {LQ, 1}, q};
    r.key = (attn_tensor){2, {LK, 1}, k};
    r.value = (attn_tensor){2, {LK, 2}, v};
    r.opt.hard = ATTN_HARD_TOPK;
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
        char cs[48];
        snprintf(cs, sizeof cs, "top_k %lld over tied scores", (long long)ks[t]);
        r.opt.top_k = ks[t];
        attn_error err;
        attn_status st = attn_compute(ctx, &r, out, w, &err);
        if (st != ATTN_OK || ref_attention(&r, rout, rw, NULL)) {
            report(cs, "%s: %s", attn_status_str(st), err.message);
            count(0);
            continue;
        }
        count(close_enough(cs, "output", out, rout, LQ * 2) &&
              close_enough(cs, "weights", w, rw, LQ * LK));
    }
}

/* ================================================== randomized checks */

static uint64_t rng_state;

static uint64_t rnd_u64(void)
{
    return golden_splitmix64(&rng_state);
}

static int64_t rnd_int(int64_t lo, int64_t hi) /* inclusive */
{
    return lo + (int64_t)(rnd_u64() % (uint64_t)(hi - lo + 1));
}

static float rnd_float(float lo, float hi)
{
    return lo + (hi - lo) * (float)((rnd_u64() >> 40) * 0x1p-24);
}

/* Sizes the issue asks for, odd ones included, and small ones. */
static int64_t rnd_size(void)
{
    static const int64_t odd[] = {1, 3, 17, 63, 65, 129};
    return rnd_int(0, 2) ? rnd_int(1, 9) : odd[rnd_int(0, 5)];
}

/* A pool of buffers freed together at the end of a trial. */
typedef struct {
    void *p[64];
    int n;
} pool;

static void *pool_get(pool *pl, size_t bytes)
{
    void *p = xmalloc(bytes);
    if (pl->n < 64)
        pl->p[pl->n++] = p;
    return p;
}

static void pool_free(pool *pl)
{
    for (int i = 0; i < pl->n; i++)
        free(pl->p[i]);
    pl->n = 0;
}

static attn_tensor rnd_tensor(pool *pl, int rank, const int64_t *shape, float bound)
{
    int64_t n = numel(rank, shape);
    float *d = pool_get(pl, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        d[i] = rnd_float(-bound, bound);
    return tensor_of(rank, shape, d);
}

static attn_tensor rnd2(pool *pl, int64_t a, int64_t b, float bound)
{
    int64_t s[2] = {a, b};
    return rnd_tensor(pl, 2, s, bound);
}

static attn_tensor rnd1(pool *pl, int64_t a, float bound)
{
    return rnd_tensor(pl, 1, &a, bound);
}

/* A weight of shape (rows, cols), uniform within 1/sqrt(cols). */
static attn_tensor rnd_weight(pool *pl, int64_t rows, int64_t cols)
{
    return rnd2(pl, rows, cols, 1.0f / sqrtf((float)cols));
}

/* A query, key or value: (B, L, D) when batched, else (L, D); in [-1, 1]. */
static attn_tensor rnd_input(pool *pl, int batched, int64_t B, int64_t L, int64_t D)
{
    int64_t s[3] = {B, L, D};
    return rnd_tensor(pl, 2 + batched, s + !batched, 1.0f);
}

/* (B, H, L, D): a request with heads, as torch's scaled_dot_product_attention takes. */
static attn_tensor rnd_heads(pool *pl, int64_t B, int64_t H, int64_t L, int64_t D)
{
    int64_t s[4] = {B, H, L, D};
    return rnd_tensor(pl, 4, s, 1.0f);
}

/* Appends the parameter (name, t) to p[0..*n). */
static void put(attn_named *p, size_t *n, const char *name, attn_tensor t)
{
    p[*n].name = name;
    p[*n].t = t;
    (*n)++;
}

/* A random mask; p_true in [0,1]. Sometimes a whole row is cleared so the
 * "nothing to attend" path is exercised. */
static attn_mask rnd_mask(pool *pl, int rank, const int64_t *shape, double p_true)
{
    int64_t n = numel(rank, shape);
    uint8_t *d = pool_get(pl, (size_t)n);
    for (int64_t i = 0; i < n; i++)
        d[i] = (rnd_u64() >> 11) * 0x1p-53 < p_true;
    int64_t cols = shape[rank - 1];
    if (rank >= 2 && rnd_int(0, 3) == 0) {
        int64_t row = rnd_int(0, n / cols - 1);
        memset(d + row * cols, 0, (size_t)cols);
    }
    return mask_of(rank, shape, d);
}

/* A rank-3 mask or bias's leading dimension: per head when the query has
 * heads (heads3), as PyTorch broadcasts it, else per batch row, or on
 * multi-head (H > 1) per batch row and head, nn.MultiheadAttention's
 * (B H, Lq, Lk); or 1, one plane for all. */
static int64_t rnd_lead3(int heads3, int64_t B, int64_t H)
{
    int64_t r = rnd_int(0, 3);
    return r == 0 ? 1 : heads3 ? H : H > 1 && r == 1 ? B * H : B;
}

/* Random masks and bias for (B, [H,] Lq, Lk); heads3: see rnd_lead3. */
static void rnd_options(pool *pl, attn_options *o, int batched, int64_t B, int64_t H,
                        int heads3, int64_t Lq, int64_t Lk, int allow_hard)
{
    int64_t s[4];
    *o = attn_options_default();
    int kind = (int)rnd_int(0, H ? 3 : 2);
    if (kind == 1 || (kind >= 2 && !batched)) {
        s[0] = Lq;
        s[1] = Lk;
        o->mask = rnd_mask(pl, 2, s, 0.8);
    } else if (kind == 2) {
        s[0] = rnd_lead3(heads3, B, H);
        s[1] = Lq;
        s[2] = Lk;
        o->mask = rnd_mask(pl, 3, s, 0.8);
    } else if (kind == 3) {
        s[0] = rnd_int(0, 2) ? B : 1; /* a dimension of 1: the same for every batch row */
        s[1] = rnd_int(0, 2) ? H : 1; /* or head, as PyTorch broadcasts */
        s[2] = Lq;
        s[3] = Lk;
        o->mask = rnd_mask(pl, 4, s, 0.8);
    }
    kind = (int)rnd_int(0, 3);
    if (kind == 1) {
        o->key_mask = rnd_mask(pl, 1, &Lk, 0.85);
    } else if (kind == 2 && batched) {
        s[0] = B;
        s[1] = Lk;
        o->key_mask = rnd_mask(pl, 2, s, 0.85);
    }
    kind = (int)rnd_int(0, 3);
    if (kind == 1) {
        o->bias = rnd2(pl, Lq, Lk, 2.0f);
    } else if (kind == 2 && batched) {
        s[0] = rnd_lead3(heads3, B, H);
        s[1] = Lq;
        s[2] = Lk;
        o->bias = rnd_tensor(pl, 3, s, 2.0f);
    } else if (kind == 3 && batched && H) {
        s[0] = rnd_int(0, 2) ? B : 1;
        s[1] = rnd_int(0, 2) ? H : 1;
        s[2] = Lq;
        s[3] = Lk;
        o->bias = rnd_tensor(pl, 4, s, 2.0f);
    }
    o->causal = rnd_int(0, 3) == 0;
    if (rnd_int(0, 3) == 0) {
        o->has_window = 1;
        o->window_left = o->window_right = rnd_int(0, 4);
    }
    if (allow_hard) {
        int h = (int)rnd_int(0, 5);
        if (h == 1) {
            o->hard = ATTN_HARD_ARGMAX;
        } else if (h == 2) {
            o->hard = ATTN_HARD_TOPK;
            o->top_k = rnd_int(1, Lk);
        }
    }
    o->need_weights = rnd_int(0, 4) != 0;
}

static int guard_intact(const float *g, int n, float sentinel)
{
    for (int i = 0; i < n; i++)
        if (memcmp(&g[i], &sentinel, sizeof sentinel) != 0)
            return 0;
    return 1;
}

/* Runs lib and ref on one request and compares them. */
static int compare_run(attn_ctx *ctx, const char *name, const attn_request *req,
                       const attn_mha_request *mreq, int *skipped)
{
    attn_shapes sh;
    attn_error err;
    attn_status st = req ? attn_plan(req, &sh, &err) : attn_mha_plan(mreq, &sh, &err);
    if (st != ATTN_OK) {
        report(name, "plan refused a valid request: %s (field \"%s\": %s)",
               attn_status_str(st), err.field, err.message);
        return 0;
    }
    int need_w = req ? req->opt.need_weights : mreq->opt.need_weights;
    int64_t nw = numel(sh.w_rank, sh.w_shape);
    /* GUARD floats past each buffer catch writes beyond what plan asked for. */
    enum { GUARD = 16 };
    const float sentinel = -12345.5f;
    float *out = xmalloc(sizeof(float) * (size_t)(sh.out_count + GUARD));
    float *w = need_w ? xmalloc(sizeof(float) * (size_t)(sh.w_count + GUARD)) : NULL;
    for (int g = 0; g < GUARD; g++) {
        out[sh.out_count + g] = sentinel;
        if (w)
            w[sh.w_count + g] = sentinel;
    }
    double *ro = xmalloc(sizeof(double) * (size_t)sh.out_count);
    double *rw = xmalloc(sizeof(double) * (size_t)nw);
    double gap = INFINITY, gain = 0.0;
    int ok = 1;
    if (verbose)
        printf("run %s\n", name);
    st = req ? attn_compute(ctx, req, out, w, &err) : attn_mha_compute(ctx, mreq, out, w, &err);
    int rc = req ? ref_attention(req, ro, rw, &gap) : ref_mha(mreq, ro, rw, &gain);
    if (st != ATTN_OK) {
        report(name, "compute failed: %s (%s)", attn_status_str(st), err.message);
        ok = 0;
    } else if (rc != 0) {
        report(name, "the reference found a parameter missing");
        ok = 0;
    } else if (!guard_intact(out + sh.out_count, GUARD, sentinel) ||
               (w && !guard_intact(w + sh.w_count, GUARD, sentinel))) {
        report(name, "compute wrote past the end of the output or weights buffer");
        ok = 0;
    } else if (gap < 1e-4) {
        /* The reference's hard selection is a near tie: float32 may choose
         * the other key legitimately, so the case proves nothing. */
        (*skipped)++;
    } else if (gain > 100.0) {
        /* A LayerNorm over nearly equal values (tiny E) magnifies float32
         * rounding beyond any fixed tolerance; such a row tests nothing. */
        (*skipped)++;
    } else {
        ok &= close_enough(name, "output", out, ro, sh.out_count);
        if (need_w) {
            if (sh.w_count != nw) {
                report(name, "w_count %lld but weights shape holds %lld",
                       (long long)sh.w_count, (long long)nw);
                ok = 0;
            } else {
                ok &= close_enough(name, "weights", w, rw, nw);
            }
        }
    }
    free(out);
    free(w);
    free(ro);
    free(rw);
    return ok;
}

/* Draws the specs in order from one SplitMix64 stream (this test's own,
 * in golden.c) and compares the library's set with them bit for bit. */
static int check_seed_set(const char *cs, const golden_seed_spec *sp, size_t n, uint64_t seed,
                          const attn_param_set *set)
{
    uint64_t state = seed;
    if (set->n != n) {
        report(cs, "seeded set has %zu parameters; the documented order has %zu", set->n, n);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const attn_named *p = &set->items[i];
        if (strcmp(p->name, sp[i].name) != 0 ||
            !same_shape(p->t.rank, p->t.shape, sp[i].rank, sp[i].shape)) {
            report(cs, "seeded parameter %zu is %s; expected %s", i, p->name, sp[i].name);
            return 0;
        }
        int64_t cnt = numel(sp[i].rank, sp[i].shape);
        float *want = xmalloc(sizeof(float) * (size_t)cnt);
        if (sp[i].fan > 0)
            golden_fill_uniform(&state, want, cnt, sp[i].fan);
        for (int64_t e = 0; e < cnt; e++) {
            if (sp[i].fan == -1)
                want[e] = 1.0f;
            else if (sp[i].fan == -2)
                want[e] = 0.0f;
        }
        for (int64_t e = 0; e < cnt; e++)
            if (memcmp(&want[e], &p->t.data[e], sizeof(float)) != 0) {
                report(cs, "seeded %s[%lld] is %.9g; the documented PRNG gives %.9g", p->name,
                       (long long)e, p->t.data[e], want[e]);
                free(want);
                return 0;
            }
        free(want);
    }
    return 1;
}

/* Seeds r (or, when r is NULL, m) through the library from a random seed,
 * checks the set against the documented order and PRNG (the specs sp[0..n)),
 * and points the request at it. Returns the set (caller frees). */
static attn_param_set *seed_checked(const char *cs, attn_request *r, attn_mha_request *m,
                                    const golden_seed_spec *sp, size_t n, int *ok)
{
    uint64_t seed = rnd_u64();
    attn_param_set *set = NULL;
    attn_error err;
    const attn_named **params = r ? &r->params : &m->params;
    size_t *n_params = r ? &r->n_params : &m->n_params;
    *params = NULL;
    *n_params = 0;
    attn_status st = r ? attn_seed_params(r, seed, &set, &err)
                       : attn_mha_seed_params(m, seed, &set, &err);
    if (st != ATTN_OK) {
        report(cs, "%s failed: %s (%s)", r ? "attn_seed_params" : "attn_mha_seed_params",
               attn_status_str(st), err.message);
        *ok = 0;
        return NULL;
    }
    *ok = check_seed_set(cs, sp, n, seed, set);
    *params = set->items;
    *n_params = set->n;
    return set;
}

/* The specs of a rule's seeded parameters, as attn.h documents them; seeds
 * r through seed_checked. */
static attn_param_set *seed_rule(const char *cs, attn_request *r, int64_t Dq, int64_t Dk,
                                 int64_t Lv, int64_t Dv, int *ok)
{
    golden_seed_spec sp[4];
    size_t n = 0;
    int64_t Dh = r->hidden_size ? r->hidden_size : Dq;
    int64_t Dout = r->output_size ? r->output_size : Dq;
    switch (r->rule) {
    case ATTN_RULE_GENERAL:
        sp[n++] = golden_spec("attn.weight", 2, Dq, Dk, Dk);
        sp[n++] = golden_spec("attn.bias", 1, Dq, 0, Dk);
        break;
    case ATTN_RULE_ADDITIVE:
        sp[n++] = golden_spec("query_proj.weight", 2, Dh, Dq, Dq);
        sp[n++] = golden_spec("key_proj.weight", 2, Dh, Dk, Dk);
        sp[n++] = golden_spec("key_proj.bias", 1, Dh, 0, Dk);
        sp[n++] = golden_spec("v.weight", 2, 1, Dh, Dh);
        break;
    case ATTN_RULE_CONCAT_TANH:
        sp[n++] = golden_spec("attn.weight", 2, Dh, Dq + Dk, Dq + Dk);
        sp[n++] = golden_spec("attn.bias", 1, Dh, 0, Dq + Dk);
        break;
    case ATTN_RULE_CONCAT:
        sp[n++] = golden_spec("att_weight.weight", 2, Lv, Dq + Dk, Dq + Dk);
        sp[n++] = golden_spec("att_weight.bias", 1, Lv, 0, Dq + Dk);
        sp[n++] = golden_spec("out.weight", 2, Dout, Dq + Dv, Dq + Dv);
        sp[n++] = golden_spec("out.bias", 1, Dout, 0, Dq + Dv);
        break;
    default:
        break;
    }
    return seed_checked(cs, r, NULL, sp, n, ok);
}

/* As seed_rule for multi-head attention. */
static attn_param_set *seed_mha(const char *cs, attn_mha_request *m, int64_t E, int64_t kdim,
                                int64_t vdim, int *ok)
{
    golden_seed_spec sp[GOLDEN_MHA_SPECS];
    int64_t H = m->num_heads, Hkv = m->num_kv_heads ? m->num_kv_heads : H;
    size_t n = golden_mha_seed_specs(E, kdim, vdim, H, Hkv, m->residual_norm, sp);
    return seed_checked(cs, NULL, m, sp, n, ok);
}

static int random_attention(attn_ctx *ctx, int trial, int *skipped)
{
    pool pl = {{0}, 0};
    attn_named p[4];
    /* the softmax rules (tests/ref.c); linear attention is checked by
     * test_sparse_linear against tests/ref_modern.c */
    attn_rule rule = (attn_rule)rnd_int(0, ATTN_RULE_CONCAT);
    attn_request r = attn_request_default(rule);
    int leading = (int)rnd_int(0, 2); /* none, batch, batch and heads */
    int batched = leading > 0;
    int64_t B = batched ? rnd_int(1, 3) : 1, H = leading == 2 ? rnd_int(1, 4) : 1, Hkv = H;
    while (rule != ATTN_RULE_CONCAT && rnd_int(0, 1) && Hkv > 1) /* grouped: a divisor of H */
        for (Hkv--; H % Hkv; Hkv--) {
        }
    int64_t Lq = rnd_size(), Lk = rnd_size(), Dq = rnd_size(), Dk = rnd_size();
    int64_t Dv = rnd_size(), Dh = rnd_size(), Dout = rnd_size();
    if (rule == ATTN_RULE_DOT || rule == ATTN_RULE_SCALED_DOT)
        Dk = Dq;
    int64_t Lv = Lk;
    if (rule == ATTN_RULE_CONCAT)
        Lk = Lq;
    /* Keep the reference's work bounded: shrink sizes until a rough cost
     * estimate (the reference's inner loops) fits. */
    for (;;) {
        double cost = (double)B * H * Lq * (rule == ATTN_RULE_CONCAT ? Lv : Lk) *
                      (Dq + Dk + Dv + (rule == ATTN_RULE_GENERAL ? (double)Dq * Dk : 0) +
                       (rule >= ATTN_RULE_ADDITIVE ? (double)Dh * (Dq + Dk) : 0));
        if (cost < 3e6)
            break;
        int64_t *big = &Lq;
        int64_t *all[] = {&Lq, &Lk, &Lv, &Dq, &Dk, &Dv, &Dh};
        for (int i = 0; i < 7; i++)
            if (*all[i] > *big)
                big = all[i];
        *big = rnd_int(1, 9);
        if (rule == ATTN_RULE_DOT || rule == ATTN_RULE_SCALED_DOT)
            Dk = Dq;
        if (rule == ATTN_RULE_CONCAT)
            Lk = Lq;
    }
    if (rule != ATTN_RULE_CONCAT)
        Lv = Lk;
    r.query = leading == 2 ? rnd_heads(&pl, B, H, Lq, Dq) : rnd_input(&pl, batched, B, Lq, Dq);
    r.key = leading == 2 ? rnd_heads(&pl, B, Hkv, Lk, Dk) : rnd_input(&pl, batched, B, Lk, Dk);
    r.value = leading == 2 ? rnd_heads(&pl, B, Hkv, Lv, Dv) : rnd_input(&pl, batched, B, Lv, Dv);
    rnd_options(&pl, &r.opt, batched, B, leading == 2 ? H : 0, leading == 2, Lq, Lv, 1);
    if (rule == ATTN_RULE_CONCAT) { /* these do not apply to concat */
        r.opt.key_mask.rank = 0;
        r.opt.bias.rank = 0;
        r.opt.causal = 0;
        r.opt.has_window = 0;
    }
    if (rule == ATTN_RULE_SCALED_DOT && rnd_int(0, 1)) {
        r.has_scale = 1;
        r.scale = rnd_float(0.05f, 1.0f);
    }
    size_t n = 0;
    switch (rule) {
    case ATTN_RULE_GENERAL:
        put(p, &n, "attn.weight", rnd_weight(&pl, Dq, Dk));
        if (rnd_int(0, 1))
            put(p, &n, "attn.bias", rnd1(&pl, Dq, 0.5f));
        break;
    case ATTN_RULE_ADDITIVE:
        put(p, &n, "query_proj.weight", rnd_weight(&pl, Dh, Dq));
        put(p, &n, "key_proj.weight", rnd_weight(&pl, Dh, Dk));
        put(p, &n, "key_proj.bias", rnd1(&pl, Dh, 0.5f));
        put(p, &n, "v.weight", rnd_weight(&pl, 1, Dh));
        break;
    case ATTN_RULE_CONCAT_TANH:
        put(p, &n, "attn.weight", rnd_weight(&pl, Dh, Dq + Dk));
        put(p, &n, "attn.bias", rnd1(&pl, Dh, 0.5f));
        break;
    case ATTN_RULE_CONCAT:
        put(p, &n, "att_weight.weight", rnd_weight(&pl, Lv, Dq + Dk));
        put(p, &n, "att_weight.bias", rnd1(&pl, Lv, 0.5f));
        put(p, &n, "out.weight", rnd_weight(&pl, Dout, Dq + Dv));
        put(p, &n, "out.bias", rnd1(&pl, Dout, 0.5f));
        break;
    default:
        break;
    }
    /* Shuffle: the order of parameters must not matter. */
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rnd_int(0, (int64_t)i - 1);
        attn_named t = p[i - 1];
        p[i - 1] = p[j];
        p[j] = t;
    }
    r.params = p;
    r.n_params = n;
    char name[240];
    snprintf(name, sizeof name,
             "random #%d %s B%s%lld H %lld/%lld Lq %lld Lk %lld Lv %lld Dq %lld Dk %lld Dv %lld "
             "Dh %lld mask %d key_mask %d bias %d causal %d window %lld hard %d/%lld",
             trial, attn_rule_name(rule), batched ? " " : " none/", (long long)B,
             leading == 2 ? (long long)H : 0LL, (long long)Hkv,
             (long long)Lq, (long long)Lk, (long long)Lv, (long long)Dq, (long long)Dk,
             (long long)Dv, (long long)Dh, r.opt.mask.rank, r.opt.key_mask.rank,
             r.opt.bias.rank, r.opt.causal, r.opt.has_window ? (long long)r.opt.window_left : -1LL,
             (int)r.opt.hard, (long long)r.opt.top_k);
    attn_param_set *set = NULL;
    int ok = 1;
    if (rule >= ATTN_RULE_GENERAL && rnd_int(0, 3) == 0) {
        /* Seeded instead: hidden/output sizes as given, or their default Dq. */
        r.hidden_size = Dh == Dq && rnd_int(0, 1) ? 0 : Dh;
        r.output_size = Dout == Dq && rnd_int(0, 1) ? 0 : Dout;
        strcat(name, " seeded");
        set = seed_rule(name, &r, Dq, Dk, Lv, Dv, &ok);
    }
    if (ok)
        ok = compare_run(rnd_int(0, 1) ? ctx : NULL, name, &r, NULL, skipped);
    attn_param_set_free(set);
    pool_free(&pl);
    return ok;
}

/* attn_mha_compute of m with prepared weights made from prep (m itself,
 * or another request whose parameters fit m) against m with prep's
 * parameters (bits of the output and of the weights): prepared weights
 * change how the projections read their matrices, never a result, so the
 * plain call's checks against the double reference (compare_run) hold
 * for them too. */
static int same_prepared(attn_ctx *ctx, const char *name, const attn_mha_request *m,
                         const attn_mha_request *prep)
{
    attn_shapes sh;
    attn_error err;
    attn_mha_weights *pw = NULL;
    attn_mha_request plain = *m, p = *m;
    plain.params = prep->params;
    plain.n_params = prep->n_params;
    attn_status st = attn_mha_plan(&plain, &sh, &err);
    if (st == ATTN_OK)
        st = attn_mha_weights_new(prep, &pw, &err);
    if (st != ATTN_OK) {
        report(name, "prepared weights: a valid request refused: %s (%s)", attn_status_str(st),
               err.message);
        return 0;
    }
    p.params = NULL;
    p.n_params = 0;
    p.weights = pw;
    size_t no = (size_t)sh.out_count, nw = (size_t)sh.w_count;
    float *o1 = xmalloc(no * sizeof(float)), *o2 = xmalloc(no * sizeof(float));
    float *w1 = nw ? xmalloc(nw * sizeof(float)) : NULL, *w2 = nw ? xmalloc(nw * sizeof(float)) : NULL;
    attn_status a = attn_mha_compute(ctx, &plain, o1, w1, &err);
    attn_status b = attn_mha_compute(ctx, &p, o2, w2, &err);
    int ok = a == ATTN_OK && b == ATTN_OK && memcmp(o1, o2, no * sizeof(float)) == 0 &&
             (!nw || memcmp(w1, w2, nw * sizeof(float)) == 0);
    if (!ok)
        report(name, "prepared weights: status %s and %s, %s", attn_status_str(a),
               attn_status_str(b), a || b ? err.message : "results differ from the params'");
    free(o1); free(o2); free(w1); free(w2);
    attn_mha_weights_free(pw);
    return ok;
}

static int random_mha(attn_ctx *ctx, int trial, int *skipped)
{
    static const int64_t hds[] = {1, 2, 3, 5, 8, 17};
    pool pl = {{0}, 0};
    attn_named p[12];
    attn_mha_request m = attn_mha_request_default();
    int batched = (int)rnd_int(0, 1);
    int64_t B = batched ? rnd_int(1, 3) : 1;
    int64_t H = rnd_int(1, 4), hd = hds[rnd_int(0, 5)], E = H * hd;
    int64_t Hkv = H;
    if (rnd_int(0, 1)) { /* a divisor of H: grouped-query or multi-query */
        do
            Hkv = rnd_int(1, H);
        while (H % Hkv);
    }
    int self = rnd_int(0, 3) == 0;
    int64_t Lq = rnd_size(), Lk = self ? Lq : rnd_size();
    int64_t kdim = self || rnd_int(0, 1) ? E : rnd_size();
    int64_t vdim = self || rnd_int(0, 1) ? E : rnd_size();
    while ((double)B * (Lq * E * E + Lk * E * (kdim + vdim) + H * Lq * Lk * hd * 2.0) > 4e6) {
        if (Lq > 9)
            Lq = rnd_int(1, 9);
        else if (Lk > 9)
            Lk = rnd_int(1, 9);
        else if (kdim > 9)
            kdim = rnd_int(1, 9);
        else if (vdim > 9)
            vdim = rnd_int(1, 9);
        else
            break;
        if (self)
            Lk = Lq;
    }
    if (trial % 24 == 5) { /* long enough for the packed products (GEMM_PACK_B rows) to write heads */
        Lk = 257 + trial % 5;
        Lq = self ? Lk : 65 + trial % 7;
    }
    m.query = rnd_input(&pl, batched, B, Lq, E);
    if (!self) {
        m.key = rnd_input(&pl, batched, B, Lk, kdim);
        m.value = rnd_input(&pl, batched, B, Lk, vdim);
    }
    m.num_heads = H;
    m.num_kv_heads = Hkv == H && rnd_int(0, 1) ? 0 : Hkv;
    m.average_weights = (int)rnd_int(0, 1);
    m.positional_encoding = rnd_int(0, 3) == 0 ? ATTN_PE_SINUSOIDAL : ATTN_PE_NONE;
    m.residual_norm = rnd_int(0, 3) == 0;
    rnd_options(&pl, &m.opt, batched, B, H, 0, Lq, Lk, 0);
    if (!batched && m.opt.mask.rank == 4)
        m.opt.mask.rank = 0;

    /* The parameter family: in_proj only when it can express the shapes. */
    int family = Hkv != H ? 2 : (kdim == E && vdim == E ? (int)rnd_int(0, 2) : (int)rnd_int(1, 2));
    int bias = (int)rnd_int(0, 3) != 0;
    size_t n = 0;
    if (family == 0) {
        put(p, &n, "in_proj_weight", rnd_weight(&pl, 3 * E, E));
    } else if (family == 1) {
        put(p, &n, "q_proj_weight", rnd_weight(&pl, E, E));
        put(p, &n, "k_proj_weight", rnd_weight(&pl, E, kdim));
        put(p, &n, "v_proj_weight", rnd_weight(&pl, E, vdim));
    }
    if (family < 2) {
        if (bias)
            put(p, &n, "in_proj_bias", rnd1(&pl, 3 * E, 0.5f));
        put(p, &n, "out_proj.weight", rnd_weight(&pl, E, E));
        if (bias)
            put(p, &n, "out_proj.bias", rnd1(&pl, E, 0.5f));
    } else {
        int64_t kv = Hkv * hd;
        put(p, &n, "W_q.weight", rnd_weight(&pl, E, E));
        put(p, &n, "W_k.weight", rnd_weight(&pl, kv, kdim));
        put(p, &n, "W_v.weight", rnd_weight(&pl, kv, vdim));
        put(p, &n, "W_o.weight", rnd_weight(&pl, E, E));
        if (bias) {
            put(p, &n, "W_q.bias", rnd1(&pl, E, 0.5f));
            put(p, &n, "W_k.bias", rnd1(&pl, kv, 0.5f));
            put(p, &n, "W_v.bias", rnd1(&pl, kv, 0.5f));
            put(p, &n, "W_o.bias", rnd1(&pl, E, 0.5f));
        }
    }
    if (m.residual_norm && rnd_int(0, 1)) {
        put(p, &n, "norm.weight", rnd1(&pl, E, 1.5f));
        put(p, &n, "norm.bias", rnd1(&pl, E, 0.5f));
    }
    m.params = p;
    m.n_params = n;
    char name[240];
    snprintf(name, sizeof name,
             "random #%d multihead B%s%lld Lq %lld Lk %lld E %lld H %lld Hkv %lld kdim %lld "
             "vdim %lld family %d bias %d avg %d pe %d norm %d mask %d key_mask %d bias %d "
             "causal %d window %lld",
             trial, batched ? " " : " none/", (long long)B, (long long)Lq, (long long)Lk,
             (long long)E, (long long)H, (long long)Hkv, (long long)kdim, (long long)vdim,
             family, bias, m.average_weights, (int)m.positional_encoding, m.residual_norm,
             m.opt.mask.rank, m.opt.key_mask.rank, m.opt.bias.rank, m.opt.causal,
             m.opt.has_window ? (long long)m.opt.window_left : -1LL);
    attn_param_set *set = NULL;
    int ok = 1;
    if (rnd_int(0, 3) == 0) {
        strcat(name, " seeded");
        set = seed_mha(name, &m, E, kdim, vdim, &ok);
    }
    if (ok)
        ok = compare_run(rnd_int(0, 1) ? ctx : NULL, name, NULL, &m, skipped);
    if (ok)
        ok = same_prepared(ctx, name, &m, &m);
    if (ok && trial % 4 == 1) { /* no params: the seeded set, prepared */
        attn_mha_request seeded = m;
        seeded.params = NULL;
        seeded.n_params = 0;
        ok = same_prepared(ctx, name, &seeded, &seeded);
    }
    attn_param_set_free(set);
    pool_free(&pl);
    return ok;
}

/* Prepared weights on nn.MultiheadAttention(512, 8) (seeded, as bench/
 * measures it) made at one length and used at others, on E = 96 (not a
 * whole number of the kernels' panels: the fused in_proj block packed on
 * its own), what they hold (attn_mha_weights_bytes), and the errors:
 * params beside weights, weights of another E, a NULL out, a request that
 * already names weights. */
static void run_prepared(attn_ctx *ctx)
{
    pool pl = {{0}, 0};
    attn_mha_request m = attn_mha_request_default(), at;
    m.opt.need_weights = 0;
    m.num_heads = 8;
    m.query = rnd_input(&pl, 1, 1, 128, 512);
    count(same_prepared(ctx, "prepared E 512 L 128 seeded", &m, &m));
    at = m;
    at.query = rnd_input(&pl, 1, 2, 200, 512);
    count(same_prepared(ctx, "prepared E 512 made at L 128, run at B 2 L 200", &at, &m));
    at.query = rnd_input(&pl, 0, 1, 40, 512);
    at.key = rnd_input(&pl, 0, 1, 300, 512);
    at.value = rnd_input(&pl, 0, 1, 300, 512);
    count(same_prepared(ctx, "prepared E 512 made self, run cross Lq 40 Lk 300", &at, &m));

    attn_named p[4];
    size_t n = 0;
    attn_mha_request e = attn_mha_request_default();
    e.num_heads = 3;
    e.query = rnd_input(&pl, 1, 2, 70, 96);
    put(p, &n, "in_proj_weight", rnd_weight(&pl, 288, 96));
    put(p, &n, "in_proj_bias", rnd1(&pl, 288, 0.5f));
    put(p, &n, "out_proj.weight", rnd_weight(&pl, 96, 96));
    e.params = p;
    e.n_params = n;
    count(same_prepared(ctx, "prepared E 96 self-attention with weights", &e, &e));

    attn_mha_weights *pw = NULL, *none = (attn_mha_weights *)&pl;
    attn_error err;
    attn_status st = attn_mha_weights_new(&m, &pw, &err);
    count(st == ATTN_OK);
    /* the seeded set's copy (4E^2 + 4E floats) and the packed (3E, E) and
     * (E, E) matrices, with at most their panels' padding */
    size_t set_bytes = (4 * 512 * 512 + 4 * 512) * sizeof(float), bytes = attn_mha_weights_bytes(pw);
    if (bytes < set_bytes + 4 * 512 * 512 * sizeof(float) || bytes > 3 * set_bytes)
        report("attn_mha_weights_bytes of E 512", "%zu bytes for a set of %zu", bytes, set_bytes);
    count(bytes >= set_bytes + 4 * 512 * 512 * sizeof(float) && bytes <= 3 * set_bytes);
    count(attn_mha_weights_bytes(NULL) == 0);
    float *out = xmalloc((size_t)2 * 70 * 96 * sizeof(float));
    attn_mha_request bad = e;
    bad.opt.need_weights = 0;
    bad.weights = pw;
    st = attn_mha_compute(ctx, &bad, out, NULL, &err);
    count(st == ATTN_ERR_ARG && !strcmp(err.field, "weights"));
    bad.params = NULL;
    bad.n_params = 0;
    st = attn_mha_compute(ctx, &bad, out, NULL, &err);
    if (st != ATTN_ERR_SHAPE)
        report("prepared weights of E 512 on E 96", "got %s (%s)", attn_status_str(st), err.message);
    count(st == ATTN_ERR_SHAPE);
    count(attn_mha_weights_new(&m, NULL, &err) == ATTN_ERR_ARG);
    st = attn_mha_weights_new(&bad, &none, &err);
    count(st == ATTN_ERR_ARG && none == NULL);
    attn_mha_weights_free(pw);
    attn_mha_weights_free(NULL);
    free(out);
    pool_free(&pl);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* More slices than one group of head jobs (lib/attention.c runs 4096 at a
 * time): 2 batch rows of NH = 3000 query heads over 1500 key/value heads,
 * a (B, H, Lq, Lk) mask and causal, against the reference; then general's
 * projected keys across groups too. */
static void run_many_slices(attn_ctx *ctx)
{
    enum { NH = 3000 };
    static const attn_rule rules[] = {ATTN_RULE_SCALED_DOT, ATTN_RULE_GENERAL};
    for (int i = 0; i < 2; i++) {
        pool pl = {{0}, 0};
        attn_named p[1];
        int skipped = 0;
        attn_request r = attn_request_default(rules[i]);
        r.query = rnd_heads(&pl, 2, NH, 2, 3);
        r.key = rnd_heads(&pl, 2, NH / 2, 3, i ? 4 : 3);
        r.value = rnd_heads(&pl, 2, NH / 2, 3, 2);
        int64_t s[4] = {2, NH, 2, 3};
        r.opt.mask = rnd_mask(&pl, 4, s, 0.8);
        r.opt.causal = 1;
        if (i) {
            size_t n = 0;
            put(p, &n, "attn.weight", rnd_weight(&pl, 3, 4));
            r.params = p;
            r.n_params = n;
        }
        int ok = compare_run(ctx, i ? "general, 6000 slices in two groups" : "scaled_dot, 6000 slices in two groups",
                             &r, NULL, &skipped);
        if (skipped)
            n_skipped++;
        else
            count(ok);
        pool_free(&pl);
    }
    /* multi-head: 1100 batch rows of 4 heads, run 1024 rows at a time */
    pool pl = {{0}, 0};
    attn_named p[2];
    size_t n = 0;
    int skipped = 0;
    attn_mha_request m = attn_mha_request_default();
    m.query = rnd_input(&pl, 1, 1100, 2, 8);
    m.num_heads = 4;
    m.opt.causal = 1;
    put(p, &n, "in_proj_weight", rnd_weight(&pl, 24, 8));
    put(p, &n, "out_proj.weight", rnd_weight(&pl, 8, 8));
    m.params = p;
    m.n_params = n;
    int ok = compare_run(ctx, "multi-head, 1100 x 4 slices in two runs", NULL, &m, &skipped);
    if (skipped)
        n_skipped++;
    else
        count(ok);
    pool_free(&pl);
}

static void run_random(attn_ctx *ctx, uint64_t seed, int trials, double seconds)
{
    int skipped = 0, done = 0, failed_before = n_failed;
    double t0 = now();
    rng_state = seed;
    for (int t = 0; t < trials; t++) {
        /* Rule attention twice as often as multi-head: it has more shapes. */
        int skipped_before = skipped;
        int ok = t % 3 == 2 ? random_mha(ctx, t, &skipped) : random_attention(ctx, t, &skipped);
        if (ok && skipped > skipped_before)
            n_skipped++; /* compared nothing: neither passed nor failed */
        else
            count(ok);
        done++;
        if (now() - t0 > seconds)
            break;
    }
    printf("random: %d trials (seed %llu) in %.1f s, %d failed, %d skipped as ill-conditioned (near ties, degenerate LayerNorm)\n", done,
           (unsigned long long)seed, now() - t0, n_failed - failed_before, skipped);
}

int main(int argc, char **argv)
{
    const char *dir = "tests/golden", *bad_path = "tests/lib/bad_requests.txt";
    uint64_t seed = 20240601;
    int trials = 10000;
    double seconds = 40.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--trials") && i + 1 < argc)
            trials = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--bad") && i + 1 < argc)
            bad_path = argv[++i];
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else if (argv[i][0] != '-')
            dir = argv[i];
        else {
            fprintf(stderr, "usage: %s [golden-dir] [--bad FILE] [--seed N] [--trials N] [--seconds S] [--verbose]\n",
                    argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* failures appear as they happen */
    memset(ones_u8, 1, sizeof ones_u8);
    attn_ctx *ctx = attn_ctx_new(2);
    if (!ctx) {
        fprintf(stderr, "attn_ctx_new failed\n");
        return 2;
    }
    run_golden(ctx, dir);
    int before = n_passed + n_failed;
    int nbad = run_bad(bad_path);
    if (nbad < 1) {
        report(bad_path, "no bad-request cases read");
        count(0);
    }
    run_api();
    run_rule_options();
    run_garbage_ranks();
    run_overflow(ctx);
    run_topk_ties(ctx);
    run_prepared(ctx);
    run_many_slices(ctx);
    printf("bad requests (%d from %s) and API helpers: %d checks\n", nbad, bad_path,
           n_passed + n_failed - before);
    run_random(ctx, seed, trials, seconds);
    attn_ctx_free(ctx);
    printf("%d passed, %d failed, %d skipped\n", n_passed, n_failed, n_skipped);
    return n_failed ? 1 : 0;
}
