/* test_modern.c - the library's score pipeline options (align, window pairs,
 * softcap, ALiBi, sinks, rope, hard sampling, learned positions) against
 * PyTorch's golden vectors in tests/golden_modern/ and against the double
 * reference tests/ref_modern.c over random requests and a growing decode
 * loop, on every CPU variant the machine runs (the ATTN_ISA names of
 * lib/kernels_isa.h).
 *
 * Usage: test_modern [golden-dir] [--trials N] [--seed N] [--verbose]
 *
 * Tolerance, test_lib's, elementwise: |ours - expected| <= 1e-5 + 1e-4
 * |expected|; seeded parameters bit for bit; block layouts exactly.
 * Counted as skipped, never as passed: random trials whose hard choice
 * lies within
 * 1e-4 of going the other way (rm_margin), where float32 scores may
 * legitimately pick another key. Prints one line per failure and closes
 * with "N passed, N failed, N skipped".
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "kernels_isa.h"
#include "modern_case.h"

#define ABS_TOL 1e-5
#define REL_TOL 1e-4
#define MARGIN 1e-4
#define MAX_ALLOCS 64

static int n_passed, n_failed, n_skipped, verbose;

static void fail(const char *cs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const char *cs, const char *fmt, ...)
{
    va_list ap;
    printf("FAIL [%s] %s: ", attn_kernels_isa(), cs);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

/* Within the tolerance everywhere; reports the worst element otherwise. */
static int close_enough(const char *cs, const char *what, const float *got, const double *want,
                        int64_t n)
{
    int64_t worst = -1;
    double excess = 0.0;
    for (int64_t i = 0; i < n; i++) {
        /* an infinity (a log-sum-exp of no key) only as itself */
        double d = (double)got[i] == want[i] ? 0.0 : fabs((double)got[i] - want[i]);
        double tol = isinf(want[i]) ? 0.0 : ABS_TOL + REL_TOL * fabs(want[i]);
        if (!(d <= tol) && (worst < 0 || !(d - tol <= excess))) {
            worst = i;
            excess = isnan(d) ? INFINITY : d - tol;
        }
    }
    if (worst >= 0)
        fail(cs, "%s[%lld] = %.9g, expected %.9g", what, (long long)worst, got[worst],
             want[worst]);
    return worst < 0;
}

/* ------------------------------------------------------------ allocations */

typedef struct {
    void *p[MAX_ALLOCS];
    int n;
} allocs;

static void *keep(allocs *a, void *p)
{
    if (!p || a->n == MAX_ALLOCS) {
        fprintf(stderr, "test_modern: out of memory\n");
        exit(2);
    }
    return a->p[a->n++] = p;
}

static void release(allocs *a)
{
    for (int i = 0; i < a->n; i++)
        free(a->p[i]);
    a->n = 0;
}

/* n doubles as floats (NULL stays NULL). */
static float *fl(allocs *a, const double *x, int64_t n)
{
    if (!x)
        return NULL;
    float *f = keep(a, malloc(sizeof(float) * (size_t)(n > 0 ? n : 1)));
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)x[i];
    return f;
}

/* ------------------------------------------ the reference's request as lib's */

/* What the rm_request does not say: self-attention (key and value absent),
 * ALiBi given as `true` (the library's own slopes), whether weights are
 * wanted, and whether multi-head's (B, H, Lq, Lk) mask or bias goes to
 * the library as nn.MultiheadAttention's (B H, Lq, Lk), the same planes. */
typedef struct {
    int self, alibi_paper, need_weights;
    int mask_bh, bias_bh;
} lib_extra;

typedef struct {
    int mha;
    attn_request r;
    attn_mha_request m;
    attn_named p[12];
    size_t np;
} lib_req;

static attn_tensor ten(int rank, int64_t a, int64_t b, int64_t c, const float *data)
{
    attn_tensor t;
    memset(&t, 0, sizeof t);
    t.rank = rank;
    t.shape[0] = a;
    t.shape[1] = b;
    t.shape[2] = c;
    t.data = data;
    return t;
}

/* A rule's input: (B, L, D), or (B, heads, L, D) when the request has heads (H > 0). */
static attn_tensor input(const rm_request *q, int64_t heads, int64_t L, int64_t D, allocs *A,
                         const double *x)
{
    attn_tensor t = ten(3, q->B, L, D, fl(A, x, q->B * (q->H ? heads : 1) * L * D));
    if (q->H) {
        t = ten(4, q->B, heads, L, t.data);
        t.shape[3] = D;
    }
    return t;
}

static void add_param(lib_req *L, const char *name, int rank, int64_t a, int64_t b,
                      const float *data)
{
    if (!data)
        return;
    L->p[L->np].name = name;
    L->p[L->np++].t = ten(rank, a, b, 0, data);
}

/* Whether q's rank-3 mask or bias is per head, (H, Lq, Lk): the rules with
 * heads, as PyTorch broadcasts it; multi-head's is per batch row. */
static int per_head3(const rm_request *q)
{
    return q->H > 0 && q->rule != RM_MULTIHEAD;
}

/* A mask-shaped operand's shape and element count: rank 2 (Lq,Lk), 3 (B,Lq,Lk)
 * or per head (H,Lq,Lk), 4 (B,H,Lq,Lk); B is 1 when one_batch is set and H
 * when one_head is (rank 3: both are). */
static int64_t maskish_shape(int rank, int one_batch, int one_head, const rm_request *q,
                             int64_t H, int64_t *s)
{
    int64_t B = one_batch ? 1 : q->B;
    H = one_head ? 1 : H;
    int64_t full[4] = {B, H, q->Lq, q->Lk};
    if (rank == 3)
        full[1] = per_head3(q) ? H : B;
    memcpy(s, full + 4 - rank, sizeof(int64_t) * (size_t)rank);
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= s[i];
    return n;
}

static attn_options lib_options(const rm_request *q, int64_t H, const lib_extra *x, allocs *A)
{
    attn_options o = attn_options_default();
    if (q->mask) {
        o.mask.rank = q->mask_rank;
        maskish_shape(q->mask_rank, q->mask_one_batch, q->mask_one_head, q, H, o.mask.shape);
        if (x->mask_bh) /* (B, H, Lq, Lk) as (B H, Lq, Lk) */
            o.mask.rank = 3, o.mask.shape[0] = q->B * H, o.mask.shape[1] = q->Lq,
            o.mask.shape[2] = q->Lk;
        o.mask.data = q->mask;
    }
    if (q->key_mask) {
        o.key_mask.rank = q->key_mask_rank;
        o.key_mask.shape[0] = q->key_mask_rank == 2 ? q->B : q->Lk;
        o.key_mask.shape[1] = q->Lk;
        o.key_mask.data = q->key_mask;
    }
    if (q->bias) {
        o.bias.rank = q->bias_rank;
        int64_t n = maskish_shape(q->bias_rank, q->bias_one_batch, q->bias_one_head, q, H,
                                  o.bias.shape);
        if (x->bias_bh)
            o.bias.rank = 3, o.bias.shape[0] = q->B * H, o.bias.shape[1] = q->Lq,
            o.bias.shape[2] = q->Lk;
        o.bias.data = fl(A, q->bias, n);
    }
    o.causal = q->causal;
    o.align = q->align == RM_BOTTOM_RIGHT ? ATTN_ALIGN_BOTTOM_RIGHT : ATTN_ALIGN_TOP_LEFT;
    o.has_window = q->has_window;
    if (q->has_window) {
        o.window_left = q->left;
        o.window_right = q->right;
    }
    o.softcap = (float)q->softcap;
    if (q->alibi) {
        o.alibi = 1;
        if (!x->alibi_paper) {
            o.alibi_slopes = fl(A, q->alibi, H);
            o.n_alibi_slopes = H;
        }
    }
    if (q->sinks) {
        o.sinks = fl(A, q->sinks, H);
        o.n_sinks = H;
    }
    if (q->rope.on) {
        o.rope.on = 1;
        o.rope.base = (float)q->rope.base;
        o.rope.style = q->rope.style == RM_ROPE_INTERLEAVED ? ATTN_ROPE_INTERLEAVED : ATTN_ROPE_HALF;
        o.rope.dims = q->rope.dims;
        o.rope.offset = q->rope.offset;
    }
    o.hard = q->hard == RM_HARD_ARGMAX ? ATTN_HARD_ARGMAX : q->hard == RM_HARD_TOPK ? ATTN_HARD_TOPK
           : q->hard == RM_HARD_SAMPLE ? ATTN_HARD_SAMPLE : ATTN_HARD_NONE;
    o.top_k = q->top_k;
    o.temperature = (float)q->temperature;
    o.seed = q->seed;
    o.feature_map = q->feature_map == RM_FM_RELU ? ATTN_FM_RELU : ATTN_FM_ELU;
    o.need_weights = x->need_weights;
    const rm_sparsity *sp = &q->sparsity;
    if (sp->pattern != RM_SPARSE_NONE) {
        attn_sparsity *s = &o.sparsity;
        mc_lib_sparsity(sp, s);
        if (sp->layout) {
            s->layout.rank = 2;
            s->layout.shape[0] = (q->Lq + sp->block - 1) / sp->block;
            s->layout.shape[1] = (q->Lk + sp->block - 1) / sp->block;
            s->layout.data = sp->layout;
        }
    }
    return o;
}

static void lib_rule(const rm_request *q, allocs *A, lib_req *L)
{
    static const attn_rule rules[] = {ATTN_RULE_DOT, ATTN_RULE_SCALED_DOT, ATTN_RULE_GENERAL,
                                      ATTN_RULE_ADDITIVE, ATTN_RULE_CONCAT_TANH, ATTN_RULE_CONCAT,
                                      ATTN_RULE_LINEAR};
    int64_t Dq = q->Dq, Dk = q->Dk, Dv = q->Dv, Dh = q->Dh;
    int64_t lk = q->rule == RM_CONCAT ? q->Lq : q->Lk, dqk = Dq + Dk;
    attn_request *r = &L->r;
    *r = attn_request_default(rules[q->rule]);
    r->query = input(q, q->H, q->Lq, Dq, A, q->query);
    r->key = input(q, q->Hkv, lk, Dk, A, q->key);
    r->value = input(q, q->Hkv, q->Lk, Dv, A, q->value);
    r->has_scale = q->has_scale;
    r->scale = (float)q->scale;
    switch (q->rule) {
    case RM_GENERAL:
        add_param(L, "attn.weight", 2, Dq, Dk, fl(A, q->W1, Dq * Dk));
        add_param(L, "attn.bias", 1, Dq, 0, fl(A, q->b1, Dq));
        break;
    case RM_ADDITIVE:
        add_param(L, "query_proj.weight", 2, Dh, Dq, fl(A, q->W1, Dh * Dq));
        add_param(L, "key_proj.weight", 2, Dh, Dk, fl(A, q->W2, Dh * Dk));
        add_param(L, "key_proj.bias", 1, Dh, 0, fl(A, q->b2, Dh));
        add_param(L, "v.weight", 2, 1, Dh, fl(A, q->vw, Dh));
        break;
    case RM_CONCAT_TANH:
        add_param(L, "attn.weight", 2, Dh, dqk, fl(A, q->W1, Dh * dqk));
        add_param(L, "attn.bias", 1, Dh, 0, fl(A, q->b1, Dh));
        break;
    case RM_CONCAT:
        add_param(L, "att_weight.weight", 2, q->Lk, dqk, fl(A, q->W1, q->Lk * dqk));
        add_param(L, "att_weight.bias", 1, q->Lk, 0, fl(A, q->b1, q->Lk));
        add_param(L, "out.weight", 2, q->Dout, Dq + Dv, fl(A, q->W2, q->Dout * (Dq + Dv)));
        add_param(L, "out.bias", 1, q->Dout, 0, fl(A, q->b2, q->Dout));
        break;
    default:
        break;
    }
}

static void lib_mha(const rm_request *q, const lib_extra *x, allocs *A, lib_req *L)
{
    int64_t B = q->B, E = q->Dq, ekv = q->Hkv * (E / q->H);
    attn_mha_request *m = &L->m;
    *m = attn_mha_request_default();
    m->query = ten(3, B, q->Lq, E, fl(A, q->query, B * q->Lq * E));
    if (!x->self) {
        m->key = ten(3, B, q->Lk, q->Dk, fl(A, q->key, B * q->Lk * q->Dk));
        m->value = ten(3, B, q->Lk, q->Dv, fl(A, q->value, B * q->Lk * q->Dv));
    }
    m->num_heads = q->H;
    m->num_kv_heads = q->Hkv;
    m->linear = q->linear;
    m->average_weights = q->average_weights;
    m->residual_norm = q->residual_norm;
    m->positional_encoding = q->posenc == RM_PE_LEARNED ? ATTN_PE_LEARNED
                           : q->posenc == RM_PE_SINUSOIDAL ? ATTN_PE_SINUSOIDAL : ATTN_PE_NONE;
    add_param(L, "W_q.weight", 2, E, E, fl(A, q->Wq, E * E));
    add_param(L, "W_q.bias", 1, E, 0, fl(A, q->bq, E));
    add_param(L, "W_k.weight", 2, ekv, q->Dk, fl(A, q->Wk, ekv * q->Dk));
    add_param(L, "W_k.bias", 1, ekv, 0, fl(A, q->bk, ekv));
    add_param(L, "W_v.weight", 2, ekv, q->Dv, fl(A, q->Wv, ekv * q->Dv));
    add_param(L, "W_v.bias", 1, ekv, 0, fl(A, q->bv, ekv));
    add_param(L, "W_o.weight", 2, E, E, fl(A, q->Wo, E * E));
    add_param(L, "W_o.bias", 1, E, 0, fl(A, q->bo, E));
    if (q->residual_norm) {
        add_param(L, "norm.weight", 1, E, 0, fl(A, q->norm_w, E));
        add_param(L, "norm.bias", 1, E, 0, fl(A, q->norm_b, E));
    }
    if (q->posenc == RM_PE_LEARNED)
        add_param(L, "pos_embedding.weight", 2, q->P, E, fl(A, q->pos_table, q->P * E));
}

/* The library's request for q: float copies of its arrays in A. */
static void to_lib(const rm_request *q, const lib_extra *x, allocs *A, lib_req *L)
{
    memset(L, 0, sizeof *L);
    L->mha = q->rule == RM_MULTIHEAD;
    int64_t H = q->H ? q->H : 1; /* the rules' heads too */
    if (L->mha)
        lib_mha(q, x, A, L);
    else
        lib_rule(q, A, L);
    attn_options o = lib_options(q, H, x, A);
    if (L->mha) {
        L->m.opt = o;
        L->m.params = L->p;
        L->m.n_params = L->np;
    } else {
        L->r.opt = o;
        L->r.params = L->p;
        L->r.n_params = L->np;
    }
}

static attn_status lib_plan(const lib_req *L, attn_shapes *sh, attn_error *err)
{
    return L->mha ? attn_mha_plan(&L->m, sh, err) : attn_plan(&L->r, sh, err);
}

static attn_status lib_compute(attn_ctx *ctx, const lib_req *L, float *out, float *w,
                               attn_error *err)
{
    return L->mha ? attn_mha_compute(ctx, &L->m, out, w, err) : attn_compute(ctx, &L->r, out, w, err);
}

/* Whether the reference's request q has a row log-sum-exp to compare: a
 * softmax over the keys (not concat, linear or multi-head linear) and no
 * hard attention. */
static int gives_lse(const rm_request *q)
{
    return q->rule != RM_CONCAT && q->rule != RM_LINEAR && !(q->rule == RM_MULTIHEAD && q->linear) &&
           q->hard == RM_HARD_NONE;
}

/* attn_compute_lse (attn_mha_compute_lse) of L without weights: its lse
 * against want (n rows' worth), or, when the request gives none (want
 * NULL), a refusal naming "lse". */
static int check_lse(attn_ctx *ctx, const char *cs, lib_req *L, const double *want, int64_t n,
                     int64_t n_out)
{
    attn_error err;
    attn_options *o = L->mha ? &L->m.opt : &L->r.opt;
    int keep = o->need_weights, ok;
    float *out = malloc(sizeof(float) * (size_t)n_out), *lse = malloc(sizeof(float) * (size_t)n);
    o->need_weights = 0;
    attn_status st = !out || !lse ? ATTN_ERR_NOMEM
                   : L->mha ? attn_mha_compute_lse(ctx, &L->m, out, NULL, lse, &err)
                            : attn_compute_lse(ctx, &L->r, out, NULL, lse, &err);
    o->need_weights = keep;
    if (!want) {
        ok = st == ATTN_ERR_PARAM && !strcmp(err.field, "lse");
        if (!ok)
            fail(cs, "attn_compute_lse gave %s (field \"%s\"), not a refusal naming lse",
                 attn_status_str(st), st == ATTN_OK ? "" : err.field);
    } else if (st != ATTN_OK) {
        fail(cs, "attn_compute_lse failed: %s (%s)", attn_status_str(st), err.message);
        ok = 0;
    } else {
        ok = close_enough(cs, "lse", lse, want, n);
    }
    free(out);
    free(lse);
    return ok;
}

/* Plans and computes L (weights when its options want them) and checks
 * the output and weights against want_o and want_w (NULL: not checked),
 * then once more without weights on a context of the call's own. */
static int run_and_check(attn_ctx *ctx, const char *cs, lib_req *L, const double *want_o,
                         int64_t n_out, const double *want_w, int64_t n_w)
{
    attn_error err;
    attn_shapes sh;
    attn_options *o = L->mha ? &L->m.opt : &L->r.opt;
    attn_status st = lib_plan(L, &sh, &err);
    if (st != ATTN_OK) {
        fail(cs, "plan refused: %s (field \"%s\": %s)", attn_status_str(st), err.field,
             err.message);
        return 0;
    }
    if (sh.out_count != n_out || (o->need_weights && sh.w_count != n_w)) {
        fail(cs, "plan gives %lld outputs and %lld weights; expected %lld and %lld",
             (long long)sh.out_count, (long long)sh.w_count, (long long)n_out, (long long)n_w);
        return 0;
    }
    float *out = malloc(sizeof(float) * (size_t)n_out);
    float *w = o->need_weights ? malloc(sizeof(float) * (size_t)n_w) : NULL;
    int ok = out && (w || !o->need_weights);
    if (ok && (st = lib_compute(ctx, L, out, w, &err)) != ATTN_OK) {
        fail(cs, "compute failed: %s (%s)", attn_status_str(st), err.message);
        ok = 0;
    }
    ok = ok && close_enough(cs, "output", out, want_o, n_out);
    if (ok && w && want_w)
        ok = close_enough(cs, "weights", w, want_w, n_w);
    if (ok && o->need_weights) {
        o->need_weights = 0;
        st = lib_compute(NULL, L, out, NULL, &err);
        o->need_weights = 1;
        if (st != ATTN_OK)
            fail(cs, "need_weights=0 failed: %s (%s)", attn_status_str(st), err.message);
        ok = st == ATTN_OK && close_enough(cs, "output without weights", out, want_o, n_out);
    }
    free(out);
    free(w);
    return ok;
}

/* ---------------------------------------------------------- golden cases */

/* The golden expectation `name` as doubles (NULL when absent). */
static double *expected(allocs *A, const golden_case *c, const char *name, int64_t *n)
{
    const golden_tensor *t = golden_get(c, GOLDEN_EXPECT, name);
    if (!t)
        return NULL;
    double *d = keep(A, malloc(sizeof(double) * (size_t)(t->count ? t->count : 1)));
    for (int64_t i = 0; i < t->count; i++)
        d[i] = t->f[i];
    *n = t->count;
    return d;
}

/* The library's seeded set against the case's expected parameters: the
 * same names in the same order, the same bits. */
static int check_seeded(const char *cs, const golden_case *c, const attn_param_set *set)
{
    size_t k = 0;
    for (size_t i = 0; i < c->n_tensors; i++) {
        const golden_tensor *g = &c->tensors[i];
        if (g->kind != GOLDEN_EXPECT || !strcmp(g->name, "output") || !strcmp(g->name, "weights"))
            continue;
        const attn_named *p = k < set->n ? &set->items[k] : NULL;
        k++;
        if (!p || strcmp(p->name, g->name) != 0) {
            fail(cs, "seeded parameter %zu is %s; expected %s", k - 1, p ? p->name : "missing",
                 g->name);
            return 0;
        }
        if (p->t.rank != g->rank || memcmp(p->t.shape, g->shape, sizeof(int64_t) * (size_t)g->rank) ||
            memcmp(p->t.data, g->f, sizeof(float) * (size_t)g->count) != 0) {
            fail(cs, "seeded %s differs from the documented draws", g->name);
            return 0;
        }
    }
    if (k != set->n)
        fail(cs, "seeded set has %zu parameters; expected %zu", set->n, k);
    return k == set->n;
}

/* Seeds L's parameters from the case's seed with the library (as the
 * server does) and checks them; L then computes with that set. */
static int seed_golden(const char *cs, const golden_case *c, lib_req *L, attn_param_set **set)
{
    attn_error err;
    uint64_t seed = strtoull(golden_opt(c, "seed"), NULL, 10);
    attn_status st = L->mha ? attn_mha_seed_params(&L->m, seed, set, &err)
                            : attn_seed_params(&L->r, seed, set, &err);
    if (st != ATTN_OK) {
        fail(cs, "seeding failed: %s (%s: %s)", attn_status_str(st), err.field, err.message);
        return 0;
    }
    if (L->mha) {
        L->m.params = (*set)->items;
        L->m.n_params = (*set)->n;
    } else {
        L->r.params = (*set)->items;
        L->r.n_params = (*set)->n;
    }
    return check_seeded(cs, c, *set);
}

/* A seeded case: a seed, no parameter given, and the parameters it must
 * make expected. */
static int seeded(const golden_case *c)
{
    int expects = 0;
    for (size_t i = 0; i < c->n_tensors; i++) {
        const golden_tensor *g = &c->tensors[i];
        if (g->kind == GOLDEN_PARAM)
            return 0;
        expects += g->kind == GOLDEN_EXPECT && strcmp(g->name, "output") &&
                   strcmp(g->name, "weights") && strcmp(g->name, "layout");
    }
    return golden_opt(c, "seed") && expects > 0;
}

/* A case's expected block layout (bigbird, blocks) against
 * attn_sparsity_layout, exactly; 1 when there is none to check. */
static int layout_matches(const golden_case *c, const attn_options *o, int64_t Lq, int64_t Lk)
{
    const golden_tensor *t = golden_get(c, GOLDEN_EXPECT, "layout");
    if (!t)
        return 1;
    uint8_t *got = calloc((size_t)t->count + 1, 1);
    attn_error e;
    int ok = got && attn_sparsity_layout(o, Lq, Lk, got, &e) == ATTN_OK;
    for (int64_t k = 0; ok && k < t->count; k++)
        ok = got[k] == (t->f[k] != 0.0f);
    if (!ok)
        fail(c->name, "block layout differs from the expected one");
    free(got);
    return ok;
}

static void golden_one(attn_ctx *ctx, const char *path)
{
    mc_case mc;
    char err[512];
    if (mc_read(path, &mc, err, sizeof err) != 0) {
        fail(path, "%s", err);
        n_failed++;
        mc_free(&mc);
        return;
    }
    const golden_case *c = &mc.c;
    allocs A = {{0}, 0};
    lib_extra x = {.self = mc.multihead && !golden_get(c, GOLDEN_TENSOR, "key"),
                   .alibi_paper = golden_opt_int(c, "alibi", 0) &&
                                  !golden_get(c, GOLDEN_TENSOR, "alibi"),
                   .need_weights = (int)golden_opt_int(c, "need_weights", 1)};
    lib_req L;
    attn_param_set *set = NULL;
    to_lib(&mc.r, &x, &A, &L);
    int64_t n_o = 0, n_w = 0;
    double *want_o = expected(&A, c, "output", &n_o), *want_w = expected(&A, c, "weights", &n_w);
    int ok = want_o && n_o == mc.n_out && (!want_w || n_w == mc.n_w);
    if (!ok)
        fail(c->name, "expected output or weights missing or of another size");
    if (ok && seeded(c))
        ok = seed_golden(c->name, c, &L, &set);
    ok = ok && run_and_check(ctx, c->name, &L, want_o, mc.n_out, want_w, mc.n_w);
    ok = ok && layout_matches(c, L.mha ? &L.m.opt : &L.r.opt, mc.r.Lq, mc.r.Lk);
    ok ? n_passed++ : n_failed++;
    attn_param_set_free(set);
    release(&A);
    mc_free(&mc);
}

static void run_golden(attn_ctx *ctx, const char *dir)
{
    char **paths;
    int n = golden_list(dir, &paths);
    if (n <= 0) {
        fail(dir, "no golden cases found (run from the repository root)");
        n_failed++;
        return;
    }
    for (int i = 0; i < n; i++)
        golden_one(ctx, paths[i]);
    golden_list_free(paths, n);
}

/* --------------------------------------------------------- random trials */

static uint64_t rng_state;

static int64_t rnd(int64_t lo, int64_t hi) /* inclusive */
{
    return lo + (int64_t)(golden_splitmix64(&rng_state) % (uint64_t)(hi - lo + 1));
}

/* A float32 value in [lo, hi), as a double. */
static double rndf(double lo, double hi)
{
    return (double)(float)(lo + (hi - lo) * (double)(golden_splitmix64(&rng_state) >> 11) * 0x1p-53);
}

static int chance(int percent)
{
    return rnd(0, 99) < percent;
}

static double *rnd_doubles(allocs *A, int64_t n, double bound)
{
    double *d = keep(A, malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)));
    for (int64_t i = 0; i < n; i++)
        d[i] = rndf(-bound, bound);
    return d;
}

static uint8_t *rnd_bytes(allocs *A, int64_t n, int percent_true)
{
    uint8_t *m = keep(A, malloc((size_t)(n > 0 ? n : 1)));
    for (int64_t i = 0; i < n; i++)
        m[i] = (uint8_t)chance(percent_true);
    return m;
}

/* A sequence length: mostly small, sometimes past the flash kernel's full
 * tiles (64 query rows, 96 keys on AVX-512) and their edges. */
static int64_t rnd_len(int64_t big)
{
    int r = (int)rnd(0, 99);
    return r < 55 ? rnd(1, 20) : r < 88 ? rnd(20, big / 2 > 20 ? big / 2 : 21) : rnd(big / 2, big);
}

/* A window side: unbounded, 0, small, or past every distance. */
static int64_t rnd_side(void)
{
    int r = (int)rnd(0, 9);
    return r < 3 ? -1 : r < 5 ? 0 : r < 9 ? rnd(1, 40) : (int64_t)1 << 50;
}

/* A mask-shaped operand's rank, and whether it holds one batch row, one
 * head (rank 3: its one leading dimension is 1, both flags set). */
static int rnd_maskish_rank(const rm_request *q, int *one_batch, int *one_head)
{
    int rank = q->H && chance(30) ? 4 : (int)rnd(2, 3);
    *one_batch = rank >= 3 && chance(30); /* (1, H, Lq, Lk), (1, Lq, Lk) */
    *one_head = rank == 4 ? chance(30) : *one_batch; /* (B, 1, Lq, Lk) */
    return rank;
}

/* Whether a multi-head (B, H, Lq, Lk) operand goes to the library as
 * nn.MultiheadAttention's (B H, Lq, Lk) (half of those that can). */
static int bh_form(const rm_request *q, int rank, int one_batch, int one_head, int64_t H)
{
    return q->rule == RM_MULTIHEAD && rank == 4 && !one_batch && !one_head && H > 1 && chance(50);
}

/* The pipeline's options on q (H heads); rope only where it applies. */
static void rnd_pipeline(rm_request *q, int64_t H, int64_t hd, int concat, lib_extra *x, allocs *A)
{
    int64_t B = q->B, Lk = q->Lk;
    int64_t s[4];
    if (chance(20)) {
        q->mask_rank = rnd_maskish_rank(q, &q->mask_one_batch, &q->mask_one_head);
        int64_t n = maskish_shape(q->mask_rank, q->mask_one_batch, q->mask_one_head, q, H, s);
        q->mask = rnd_bytes(A, n, 80);
        x->mask_bh = bh_form(q, q->mask_rank, q->mask_one_batch, q->mask_one_head, H);
    }
    if (concat)
        return;
    if (chance(20)) {
        q->key_mask_rank = (int)rnd(1, 2);
        q->key_mask = rnd_bytes(A, (q->key_mask_rank == 2 ? B : 1) * Lk, 85);
    }
    if (chance(20)) {
        q->bias_rank = rnd_maskish_rank(q, &q->bias_one_batch, &q->bias_one_head);
        int64_t n = maskish_shape(q->bias_rank, q->bias_one_batch, q->bias_one_head, q, H, s);
        q->bias = rnd_doubles(A, n, 2.0);
        x->bias_bh = bh_form(q, q->bias_rank, q->bias_one_batch, q->bias_one_head, H);
    }
    q->align = chance(50) ? RM_BOTTOM_RIGHT : RM_TOP_LEFT;
    q->causal = chance(35);
    if (chance(40)) {
        q->has_window = 1;
        q->left = rnd_side();
        q->right = rnd_side();
    }
    if (chance(40))
        q->softcap = rndf(0.3, 30.0);
    if (chance(40)) {
        double *sl = keep(A, malloc(sizeof(double) * (size_t)H));
        x->alibi_paper = chance(50);
        if (x->alibi_paper)
            rm_alibi_slopes(H, sl);
        else
            for (int64_t h = 0; h < H; h++)
                sl[h] = rndf(0.0, 1.0);
        q->alibi = sl;
    }
    if (chance(40))
        q->sinks = rnd_doubles(A, H, 4.0);
    int rope_ok = q->rule == RM_DOT || q->rule == RM_SCALED_DOT || q->rule == RM_MULTIHEAD;
    if (rope_ok && hd >= 2 && chance(40)) {
        q->rope.on = 1;
        q->rope.base = chance(50) ? 10000.0 : rndf(2.0, 1e5);
        q->rope.style = chance(50) ? RM_ROPE_HALF : RM_ROPE_INTERLEAVED;
        q->rope.dims = hd % 2 == 0 && chance(50) ? 0 : 2 * rnd(1, hd / 2);
        q->rope.offset = chance(50) ? 0 : rnd(0, 500);
    }
}

static void rnd_hard(rm_request *q, int64_t lkeys)
{
    int r = (int)rnd(0, 99);
    if (r < 8) {
        q->hard = RM_HARD_ARGMAX;
    } else if (r < 16) {
        q->hard = RM_HARD_TOPK;
        q->top_k = lkeys > 0 ? rnd(1, lkeys) : 1; /* none to keep: the caller drops it */
    } else if (r < 26) {
        q->hard = RM_HARD_SAMPLE;
        q->temperature = chance(30) ? 1.0 : rndf(0.2, 4.0);
    }
    q->seed = golden_splitmix64(&rng_state);
}

/* A rule request (every rule but concat's keys have Lk rows); sometimes
 * with heads, (B, H, L, D) as torch's scaled_dot_product_attention takes,
 * key/value heads shared by groups of query heads (concat: one each). */
static void rnd_rule(rm_request *q, lib_extra *x, allocs *A)
{
    q->rule = (rm_rule)rnd(0, 5);
    int tanh = q->rule == RM_ADDITIVE || q->rule == RM_CONCAT_TANH, concat = q->rule == RM_CONCAT;
    int64_t big = tanh || concat ? 48 : 300;
    q->B = rnd(1, 2);
    if (chance(35)) {
        q->Hkv = rnd(1, 2);
        q->H = q->Hkv * (concat ? 1 : rnd(1, 3));
        big /= 2;
    }
    int64_t nq = q->B * (q->H ? q->H : 1), nk = q->B * (q->H ? q->Hkv : 1);
    q->Lq = rnd_len(big);
    q->Lk = concat ? rnd(1, 30) : rnd_len(big);
    q->Dq = rnd(1, tanh ? 24 : 80);
    q->Dk = q->rule <= RM_SCALED_DOT ? q->Dq : rnd(1, 24);
    q->Dv = rnd(1, 48);
    q->Dh = rnd(1, 16);
    q->Dout = rnd(1, 12);
    int64_t lk = concat ? q->Lq : q->Lk;
    q->query = rnd_doubles(A, nq * q->Lq * q->Dq, 1.0);
    q->key = rnd_doubles(A, nk * lk * q->Dk, 1.0);
    q->value = rnd_doubles(A, nk * q->Lk * q->Dv, 1.0);
    int64_t dqk = q->Dq + q->Dk, dh = q->Dh;
    switch (q->rule) {
    case RM_SCALED_DOT:
        q->has_scale = chance(25);
        q->scale = rndf(0.05, 1.0);
        break;
    case RM_GENERAL:
        q->W1 = rnd_doubles(A, q->Dq * q->Dk, 0.5);
        q->b1 = chance(70) ? rnd_doubles(A, q->Dq, 0.5) : NULL;
        break;
    case RM_ADDITIVE:
        q->W1 = rnd_doubles(A, dh * q->Dq, 0.5);
        q->W2 = rnd_doubles(A, dh * q->Dk, 0.5);
        q->b2 = rnd_doubles(A, dh, 0.5);
        q->vw = rnd_doubles(A, dh, 1.0);
        break;
    case RM_CONCAT_TANH:
        q->W1 = rnd_doubles(A, dh * dqk, 0.5);
        q->b1 = rnd_doubles(A, dh, 0.5);
        break;
    case RM_CONCAT:
        q->W1 = rnd_doubles(A, q->Lk * dqk, 0.5);
        q->b1 = rnd_doubles(A, q->Lk, 0.5);
        q->W2 = rnd_doubles(A, q->Dout * (q->Dq + q->Dv), 0.5);
        q->b2 = rnd_doubles(A, q->Dout, 0.5);
        break;
    default:
        break;
    }
    rnd_pipeline(q, q->H ? q->H : 1, q->Dq, concat, x, A);
    rnd_hard(q, q->Lk);
}

/* A multi-head request, GQA and self-attention included. */
static void rnd_mha(rm_request *q, lib_extra *x, allocs *A)
{
    q->rule = RM_MULTIHEAD;
    q->Hkv = rnd(1, 3);
    q->H = q->Hkv * rnd(1, 3);
    int64_t hd = rnd(1, 24), E = q->H * hd, ekv = q->Hkv * hd;
    q->B = rnd(1, 2);
    q->Lq = rnd_len(160);
    x->self = chance(15);
    q->Lk = x->self ? q->Lq : rnd_len(160);
    q->Dq = E;
    q->posenc = chance(20) ? RM_PE_LEARNED : chance(15) ? RM_PE_SINUSOIDAL : RM_PE_NONE;
    int same = x->self || q->posenc == RM_PE_LEARNED || chance(50);
    q->Dk = same ? E : rnd(1, 20);
    q->Dv = same ? E : rnd(1, 20);
    q->query = rnd_doubles(A, q->B * q->Lq * E, 1.0);
    q->key = x->self ? q->query : rnd_doubles(A, q->B * q->Lk * q->Dk, 1.0);
    q->value = x->self ? q->query : rnd_doubles(A, q->B * q->Lk * q->Dv, 1.0);
    /* nn.Linear's bound 1/sqrt(fan_in) keeps every stage O(1), so float32
     * rounding stays within the tolerance */
    q->Wq = rnd_doubles(A, E * E, 1.0 / sqrt((double)E));
    q->Wk = rnd_doubles(A, ekv * q->Dk, 1.0 / sqrt((double)q->Dk));
    q->Wv = rnd_doubles(A, ekv * q->Dv, 1.0 / sqrt((double)q->Dv));
    q->Wo = rnd_doubles(A, E * E, 1.0 / sqrt((double)E));
    if (chance(60)) {
        q->bq = rnd_doubles(A, E, 0.3);
        q->bk = rnd_doubles(A, ekv, 0.3);
        q->bv = rnd_doubles(A, ekv, 0.3);
        q->bo = rnd_doubles(A, E, 0.3);
    }
    q->residual_norm = chance(20);
    if (q->residual_norm) {
        q->norm_w = rnd_doubles(A, E, 1.0);
        q->norm_b = rnd_doubles(A, E, 1.0);
    }
    q->average_weights = chance(25);
    if (q->posenc == RM_PE_LEARNED) {
        q->P = (q->Lq > q->Lk ? q->Lq : q->Lk) + rnd(0, 3);
        q->pos_table = rnd_doubles(A, q->P * E, 1.0);
    }
    rnd_pipeline(q, q->H, hd, 0, x, A);
    rnd_hard(q, q->Lk);
}

/* A one-line description of a trial, for failures. */
static void describe(char *buf, size_t n, int trial, const rm_request *q, const lib_extra *x,
                     int threads)
{
    static const char *rules[] = {"dot", "scaled_dot", "general", "additive", "concat_tanh",
                                  "concat", "linear", "multihead"};
    snprintf(buf, n,
             "trial %d %s B=%lld Lq=%lld Lk=%lld Dq=%lld Dv=%lld H=%lld/%lld align=%d causal=%d "
             "window=%lld,%lld softcap=%g alibi=%d%s sinks=%d rope=%d(%lld,%lld,%d) hard=%d "
             "mask=%d key_mask=%d bias=%d pe=%d self=%d weights=%d threads=%d",
             trial, rules[q->rule], (long long)q->B, (long long)q->Lq, (long long)q->Lk,
             (long long)q->Dq, (long long)q->Dv, (long long)q->H, (long long)q->Hkv, q->align,
             q->causal, q->has_window ? (long long)q->left : -2LL,
             q->has_window ? (long long)q->right : -2LL, q->softcap, q->alibi != NULL,
             x->alibi_paper ? "(paper)" : "", q->sinks != NULL, q->rope.on,
             (long long)q->rope.dims, (long long)q->rope.offset, q->rope.style, q->hard,
             q->mask_rank, q->key_mask_rank, q->bias_rank, q->posenc, x->self, x->need_weights,
             threads);
}

/* The reference's answer for q into ro and rw: 1 when the library is to
 * be compared with it, 0 when the trial is counted already (the reference
 * failed, or a near tie that float32 may break the other way). */
static int reference_for(const char *name, const rm_request *q, double *ro, double *rw)
{
    rm_margin m;
    if (rm_compute(q, ro, rw, NULL, &m) != 0) {
        fail(name, "the reference failed");
        n_failed++;
        return 0;
    }
    if (m.hard_gap < MARGIN || m.sample_gap < MARGIN) {
        n_skipped++; /* a near tie: float32 may choose the other key */
        return 0;
    }
    return 1;
}

/* x, (A, M, N, D) elements of `size` bytes, into y as (A, N, M, D). */
static void swap_middle(const void *x, void *y, const int64_t s[4], size_t size)
{
    size_t row = (size_t)s[3] * size;
    for (int64_t a = 0; a < s[0]; a++)
        for (int64_t m = 0; m < s[1]; m++)
            for (int64_t n = 0; n < s[2]; n++)
                memcpy((char *)y + (size_t)((a * s[2] + n) * s[1] + m) * row,
                       (const char *)x + (size_t)((a * s[1] + m) * s[2] + n) * row, row);
}

/* t (B, H, L, D) as FlashAttention's (B, L, H, D), its data a new copy. */
static attn_tensor to_bshd(const attn_tensor *t, allocs *A)
{
    attn_tensor u = *t;
    float *y = keep(A, malloc(sizeof(float) * (size_t)(t->shape[0] * t->shape[1] * t->shape[2] *
                                                       t->shape[3])));
    swap_middle(t->data, y, t->shape, sizeof(float));
    u.shape[1] = t->shape[2];
    u.shape[2] = t->shape[1];
    u.data = y;
    return u;
}

/* A rule's request with heads, L, again with query, key and value in
 * ATTN_QKV_BSHD's layout, against the reference's output in that layout
 * (ro, B H Lq Dout doubles) and its weights and lse as they are. */
static void check_bshd(attn_ctx *ctx, const char *name, const rm_request *q, const lib_req *L,
                       const double *ro, int64_t Dout, const double *rw, int64_t n_w, allocs *A)
{
    lib_req Lb = *L;
    char cs[560];
    snprintf(cs, sizeof cs, "%s, qkv_layout BSHD", name);
    Lb.r.query = to_bshd(&L->r.query, A);
    Lb.r.key = to_bshd(&L->r.key, A);
    Lb.r.value = to_bshd(&L->r.value, A);
    Lb.r.opt.qkv_layout = ATTN_QKV_BSHD;
    int64_t so[4] = {q->B, q->H, q->Lq, Dout}, n_out = q->B * q->H * q->Lq * Dout;
    double *rob = keep(A, malloc(sizeof(double) * (size_t)n_out));
    swap_middle(ro, rob, so, sizeof(double));
    run_and_check(ctx, cs, &Lb, rob, n_out, rw, n_w) ? n_passed++ : n_failed++;
    check_lse(ctx, cs, &Lb, q->lse, q->B * q->H * q->Lq, n_out) ? n_passed++ : n_failed++;
}

/* The claim of attn_qkv_layout where the random trials do not reach it:
 * bf16 products over grouped-query heads with rope in the kernel give
 * the bits of the same heads in BHSD (whose bf16 arithmetic bf16_checks
 * holds to its bound), for weights and lse too. */
static void bshd_bf16(attn_ctx *ctx)
{
    enum { B = 2, H = 4, HKV = 2, LQ = 37, LK = 70, D = 16 };
    allocs A = {{0}, 0};
    attn_request r = attn_request_default(ATTN_RULE_SCALED_DOT);
    double *x = rnd_doubles(&A, B * (H * LQ + 2 * HKV * LK) * D, 1.0);
    r.query = ten(4, B, H, LQ, fl(&A, x, B * H * LQ * D));
    r.key = ten(4, B, HKV, LK, fl(&A, x + B * H * LQ * D, B * HKV * LK * D));
    r.value = ten(4, B, HKV, LK, fl(&A, x + B * (H * LQ + HKV * LK) * D, B * HKV * LK * D));
    r.query.shape[3] = r.key.shape[3] = r.value.shape[3] = D;
    r.opt.precision = ATTN_PRECISION_BF16;
    r.opt.causal = 1, r.opt.align = ATTN_ALIGN_BOTTOM_RIGHT;
    r.opt.rope = (attn_rope){1, 10000.0f, ATTN_ROPE_HALF, 0, 3};
    enum { NO = B * H * LQ * D, NW = B * H * LQ * LK, NL = B * H * LQ };
    float *o[2], *w[2], *lse[2], *back = keep(&A, malloc(sizeof(float) * NO));
    attn_status st[2];
    attn_error err;
    for (int v = 0; v < 2; v++) {
        o[v] = keep(&A, malloc(sizeof(float) * NO));
        w[v] = keep(&A, malloc(sizeof(float) * NW));
        lse[v] = keep(&A, malloc(sizeof(float) * NL));
        attn_request rv = r;
        if (v) {
            rv.query = to_bshd(&r.query, &A), rv.key = to_bshd(&r.key, &A);
            rv.value = to_bshd(&r.value, &A), rv.opt.qkv_layout = ATTN_QKV_BSHD;
        }
        st[v] = attn_compute_lse(ctx, &rv, o[v], w[v], lse[v], &err);
    }
    int64_t s[4] = {B, LQ, H, D};
    swap_middle(o[1], back, s, sizeof(float));
    int ok = st[0] == ATTN_OK && st[1] == ATTN_OK && !memcmp(o[0], back, sizeof(float) * NO) &&
             !memcmp(w[0], w[1], sizeof(float) * NW) && !memcmp(lse[0], lse[1], sizeof(float) * NL);
    if (!ok)
        fail("qkv_layout BSHD, bf16 GQA heads with rope", "status %s and %s; output, weights or "
             "lse differ from BHSD's", attn_status_str(st[0]), attn_status_str(st[1]));
    ok ? n_passed++ : n_failed++;
    release(&A);
}

static void random_trial(attn_ctx *const ctx[2], int trial)
{
    allocs A = {{0}, 0};
    rm_request q;
    lib_extra x = {.need_weights = 1};
    memset(&q, 0, sizeof q);
    if (chance(30))
        rnd_mha(&q, &x, &A);
    else
        rnd_rule(&q, &x, &A);
    x.need_weights = chance(60);
    int mha = q.rule == RM_MULTIHEAD, threads = 1 + trial % 2;
    int64_t Dout = mha ? q.Dq : q.rule == RM_CONCAT ? q.Dout : q.Dv;
    int64_t heads = q.H ? q.H : 1; /* the rules' too */
    int64_t n_out = (mha ? 1 : heads) * q.B * q.Lq * Dout;
    int64_t n_w = (mha && q.average_weights ? 1 : heads) * q.B * q.Lq * q.Lk;
    double *ro = keep(&A, malloc(sizeof(double) * (size_t)n_out));
    double *rw = keep(&A, malloc(sizeof(double) * (size_t)n_w));
    int64_t n_lse = heads * q.B * q.Lq;
    q.lse = gives_lse(&q) ? keep(&A, malloc(sizeof(double) * (size_t)n_lse)) : NULL;
    char name[512];
    describe(name, sizeof name, trial, &q, &x, threads);
    if (verbose)
        printf("%s\n", name);
    if (reference_for(name, &q, ro, rw)) {
        lib_req L;
        to_lib(&q, &x, &A, &L);
        run_and_check(ctx[threads - 1], name, &L, ro, n_out, rw, n_w) ? n_passed++ : n_failed++;
        check_lse(ctx[threads - 1], name, &L, q.lse, n_lse, n_out) ? n_passed++ : n_failed++;
        if (!mha && q.H)
            check_bshd(ctx[threads - 1], name, &q, &L, ro, Dout, rw, n_w, &A);
    }
    release(&A);
}

/* ------------------------------------------- lse with seeded parameters */

/* Floats [at, at + n) of the set's parameter `name`, as doubles. */
static double *seeded_doubles(allocs *A, const attn_param_set *set, const char *name,
                              int64_t at, int64_t n)
{
    for (size_t i = 0; i < set->n; i++)
        if (!strcmp(set->items[i].name, name)) {
            double *d = keep(A, malloc(sizeof(double) * (size_t)n));
            for (int64_t e = 0; e < n; e++)
                d[e] = set->items[i].t.data[at + e];
            return d;
        }
    return NULL;
}

/* attn_compute_lse and attn_mha_compute_lse of a request without
 * parameters (the call seeds them) against the reference given the set
 * attn_seed_params makes from seed 0, which the call uses: general and
 * multi-head. */
static void seeded_lse(attn_ctx *ctx)
{
    enum { B = 2, L = 5, E = 8, H = 2 };
    allocs A = {{0}, 0};
    double *x = rnd_doubles(&A, B * L * E, 1.0);
    const float *xf = fl(&A, x, B * L * E);
    double want[B * H * L];
    float out[B * L * E], lse[B * H * L];
    attn_param_set *set = NULL;
    attn_error err;
    for (int mha = 0; mha < 2; mha++) {
        const char *name = mha ? "seeded lse: multi-head" : "seeded lse: general";
        rm_request q;
        memset(&q, 0, sizeof q);
        q.B = B, q.Lq = q.Lk = L, q.Dq = q.Dk = q.Dv = E;
        q.query = q.key = q.value = x;
        q.lse = want;
        attn_request r = attn_request_default(ATTN_RULE_GENERAL);
        attn_mha_request m = attn_mha_request_default();
        r.query = r.key = r.value = ten(3, B, L, E, xf);
        m.query = ten(3, B, L, E, xf);
        m.num_heads = H;
        r.opt.need_weights = m.opt.need_weights = 0;
        for (int i = 0; i < B * H * L; i++)
            lse[i] = NAN;
        attn_status st = mha ? attn_mha_seed_params(&m, 0, &set, &err)
                             : attn_seed_params(&r, 0, &set, &err);
        if (st == ATTN_OK)
            st = mha ? attn_mha_compute_lse(ctx, &m, out, NULL, lse, &err)
                     : attn_compute_lse(ctx, &r, out, NULL, lse, &err);
        if (mha) {
            q.rule = RM_MULTIHEAD, q.H = q.Hkv = H;
            q.Wq = seeded_doubles(&A, set, "in_proj_weight", 0, E * E);
            q.Wk = seeded_doubles(&A, set, "in_proj_weight", E * E, E * E);
            q.Wv = seeded_doubles(&A, set, "in_proj_weight", 2 * E * E, E * E);
            q.bq = seeded_doubles(&A, set, "in_proj_bias", 0, E);
            q.bk = seeded_doubles(&A, set, "in_proj_bias", E, E);
            q.bv = seeded_doubles(&A, set, "in_proj_bias", 2 * E, E);
            q.Wo = seeded_doubles(&A, set, "out_proj.weight", 0, E * E);
            q.bo = seeded_doubles(&A, set, "out_proj.bias", 0, E);
        } else {
            q.rule = RM_GENERAL;
            q.W1 = seeded_doubles(&A, set, "attn.weight", 0, E * E);
            q.b1 = seeded_doubles(&A, set, "attn.bias", 0, E);
        }
        double *ro = keep(&A, malloc(sizeof(double) * B * L * E));
        int ok = st == ATTN_OK && (mha ? q.Wq && q.Wo : q.W1 != NULL) &&
                 rm_compute(&q, ro, NULL, NULL, NULL) == 0;
        if (!ok)
            fail(name, "%s", st == ATTN_OK ? "the seeded set or the reference failed" : err.message);
        ok = ok && close_enough(name, "lse", lse, want, mha ? B * H * L : B * L);
        ok ? n_passed++ : n_failed++;
        attn_param_set_free(set);
        set = NULL;
    }
    release(&A);
}

/* ------------------------------------------------- packed sequences */

/* Packed sequences' inputs and the reference's answer in their layout. */
typedef struct {
    int64_t B, cq[7], ck[7], mq, mk; /* up to 6 sequences */
    double *out, *w, *lse;           /* (total_q, H, Dv), (B, H, mq, mk), (H, total_q) */
} packed;

/* Rows [r0, r0 + n) of head h of a packed (rows, heads, D) array into g,
 * as (n, D). */
static const double *gather(double *g, const double *x, int64_t r0, int64_t n, int64_t heads,
                            int64_t h, int64_t D)
{
    for (int64_t r = 0; r < n; r++)
        memcpy(g + r * D, x + ((r0 + r) * heads + h) * D, sizeof(double) * (size_t)D);
    return g;
}

/* The reference's answer for each (sequence, head) of q's packed tensors
 * on its own (one head without a batch, its alibi slope and sink, its rows
 * numbered from h total_q + cq[s]) into p: 1, or 0 when the trial is
 * counted already (the reference failed, or a near tie). */
static int packed_reference(const char *name, const rm_request *q, packed *p, allocs *A)
{
    int64_t H = q->H, Hkv = q->Hkv, tq = p->cq[p->B], mq = p->mq, mk = p->mk;
    rm_margin m = {INFINITY, INFINITY, 0.0};
    double *gq = keep(A, malloc(sizeof(double) * (size_t)(mq * q->Dq)));
    double *gk = keep(A, malloc(sizeof(double) * (size_t)(mk * q->Dk)));
    double *gv = keep(A, malloc(sizeof(double) * (size_t)(mk * q->Dv)));
    double *o = keep(A, malloc(sizeof(double) * (size_t)(mq * q->Dv)));
    double *w = keep(A, malloc(sizeof(double) * (size_t)(mq * mk)));
    for (int64_t s = 0; s < p->B; s++)
        for (int64_t h = 0; h < H; h++) {
            int64_t lq = p->cq[s + 1] - p->cq[s], lk = p->ck[s + 1] - p->ck[s], g = h / (H / Hkv);
            rm_request r = *q;
            rm_margin mh;
            if (lq && !lk) /* rows with nothing to attend: zeros (as p is), lse the sink or -inf */
                for (int64_t i = 0; i < lq; i++)
                    p->lse[h * tq + p->cq[s] + i] = q->sinks ? q->sinks[h] : -INFINITY;
            if (!lq || !lk)
                continue;
            r.B = 1, r.H = r.Hkv = 0, r.Lq = lq, r.Lk = lk;
            r.query = gather(gq, q->query, p->cq[s], lq, H, h, q->Dq);
            r.key = gather(gk, q->key, p->ck[s], lk, Hkv, g, q->Dk);
            r.value = gather(gv, q->value, p->ck[s], lk, Hkv, g, q->Dv);
            r.alibi = q->alibi ? q->alibi + h : NULL;
            r.sinks = q->sinks ? q->sinks + h : NULL;
            r.draw_offset = (uint64_t)(h * tq + p->cq[s]);
            r.lse = p->lse + h * tq + p->cq[s];
            if (rm_compute(&r, o, w, NULL, &mh) != 0) {
                fail(name, "the reference failed");
                n_failed++;
                return 0;
            }
            m.hard_gap = fmin(m.hard_gap, mh.hard_gap);
            m.sample_gap = fmin(m.sample_gap, mh.sample_gap);
            for (int64_t i = 0; i < lq; i++) {
                memcpy(p->out + ((p->cq[s] + i) * H + h) * q->Dv, o + i * q->Dv,
                       sizeof(double) * (size_t)q->Dv);
                memcpy(p->w + ((s * H + h) * p->mq + i) * p->mk, w + i * lk,
                       sizeof(double) * (size_t)lk);
            }
        }
    if (m.hard_gap < MARGIN || m.sample_gap < MARGIN) {
        n_skipped++; /* a near tie: float32 may choose the other key */
        return 0;
    }
    return 1;
}

/* A sparsity pattern each packed sequence lays out over its own lengths:
 * local_global with global indices every sequence with queries and keys
 * has (sequence 0 has both), or bigbird. */
static void rnd_packed_sparsity(rm_request *q, const packed *p, allocs *A)
{
    rm_sparsity *sp = &q->sparsity;
    int64_t most = INT64_MAX; /* the global indices every sequence takes */
    for (int64_t s = 0; s < p->B; s++) {
        int64_t lq = p->cq[s + 1] - p->cq[s], lk = p->ck[s + 1] - p->ck[s];
        if (lq && lk)
            most = (lq > lk ? lq : lk) < most ? (lq > lk ? lq : lk) : most;
    }
    if (chance(50)) {
        sp->pattern = RM_SPARSE_LOCAL_GLOBAL;
        sp->window = rnd(0, 12);
        sp->n_global = (size_t)rnd(0, 3);
        int64_t *g = keep(A, malloc(sizeof(int64_t) * 3));
        for (size_t i = 0; i < sp->n_global; i++)
            g[i] = rnd(0, most - 1);
        sp->global = g;
    } else {
        sp->pattern = RM_SPARSE_BIGBIRD;
        sp->block = rnd(1, 16);
        sp->window_blocks = 2 * rnd(0, 2) + 1;
        sp->global_blocks = rnd(0, 2);
        sp->random_blocks = rnd(0, 3);
    }
}

/* A rule request of packed sequences: 1-6 of their own lengths (in a
 * quarter of the requests some but sequence 0 without queries or keys, as
 * FlashAttention takes them), heads over key/value heads, the score
 * pipeline's options but masks and bias (which packed sequences do not
 * take), hard attention. */
static void rnd_packed(rm_request *q, lib_extra *x, packed *p, allocs *A)
{
    static const rm_rule rules[] = {RM_DOT, RM_SCALED_DOT, RM_GENERAL, RM_ADDITIVE,
                                    RM_CONCAT_TANH, RM_LINEAR};
    q->rule = rules[rnd(0, 5)];
    int tanh = q->rule == RM_ADDITIVE || q->rule == RM_CONCAT_TANH;
    int64_t big = tanh ? 24 : 200, mink = INT64_MAX;
    q->Hkv = rnd(1, 2);
    q->H = q->Hkv * rnd(1, 3);
    p->B = rnd(1, 6);
    p->mq = p->mk = 0;
    int empties = chance(25);
    for (int64_t s = 0; s < p->B; s++) {
        int64_t lq = s && empties && chance(30) ? 0 : rnd_len(big);
        int64_t lk = s && empties && chance(30) ? 0 : rnd_len(big);
        p->cq[s + 1] = p->cq[s] + lq, p->ck[s + 1] = p->ck[s] + lk;
        p->mq = lq > p->mq ? lq : p->mq, p->mk = lk > p->mk ? lk : p->mk;
        if (lq) /* top_k is checked against the keys of sequences with queries */
            mink = lk < mink ? lk : mink;
    }
    q->B = 1, q->Lq = p->cq[p->B], q->Lk = p->ck[p->B]; /* lib_rule's (1, H, total, D) */
    q->Dq = rnd(1, tanh ? 16 : 72);
    q->Dk = q->rule <= RM_SCALED_DOT || q->rule == RM_LINEAR ? q->Dq : rnd(1, 16);
    q->Dv = rnd(1, 40);
    q->Dh = rnd(1, 12);
    int64_t dqk = q->Dq + q->Dk;
    q->query = rnd_doubles(A, q->Lq * q->H * q->Dq, 1.0);
    q->key = rnd_doubles(A, q->Lk * q->Hkv * q->Dk, 1.0);
    q->value = rnd_doubles(A, q->Lk * q->Hkv * q->Dv, 1.0);
    q->has_scale = q->rule == RM_SCALED_DOT && chance(25);
    q->scale = rndf(0.05, 1.0);
    if (q->rule == RM_GENERAL) {
        q->W1 = rnd_doubles(A, q->Dq * q->Dk, 0.5);
        q->b1 = chance(70) ? rnd_doubles(A, q->Dq, 0.5) : NULL;
    } else if (q->rule == RM_ADDITIVE) {
        q->W1 = rnd_doubles(A, q->Dh * q->Dq, 0.5);
        q->W2 = rnd_doubles(A, q->Dh * q->Dk, 0.5);
        q->b2 = rnd_doubles(A, q->Dh, 0.5);
        q->vw = rnd_doubles(A, q->Dh, 1.0);
    } else if (q->rule == RM_CONCAT_TANH) {
        q->W1 = rnd_doubles(A, q->Dh * dqk, 0.5);
        q->b1 = rnd_doubles(A, q->Dh, 0.5);
    }
    if (q->rule == RM_LINEAR) {
        q->align = chance(50) ? RM_BOTTOM_RIGHT : RM_TOP_LEFT;
        q->causal = chance(50);
        q->feature_map = chance(50) ? RM_FM_RELU : RM_FM_ELU;
        return;
    }
    rnd_pipeline(q, q->H, q->Dq, 0, x, A);
    q->mask = NULL, q->key_mask = NULL, q->bias = NULL; /* not taken */
    q->mask_rank = q->key_mask_rank = q->bias_rank = 0;
    x->mask_bh = x->bias_bh = 0;
    rnd_hard(q, mink);
    if (q->hard == RM_HARD_TOPK && !mink) /* queries without keys: no top_k to keep */
        q->hard = RM_HARD_NONE;
    if (q->rule <= RM_SCALED_DOT && chance(30))
        rnd_packed_sparsity(q, p, A);
}

/* attn_varlen_compute against the reference on each sequence and head:
 * output, weights (zero past each sequence's lengths) and lse, on one or
 * two threads. */
static void packed_trial(attn_ctx *const ctx[2], int trial)
{
    allocs A = {{0}, 0};
    rm_request q;
    lib_extra x = {.need_weights = 1};
    packed p;
    memset(&q, 0, sizeof q);
    memset(&p, 0, sizeof p);
    rnd_packed(&q, &x, &p, &A);
    x.need_weights = chance(70);
    int threads = 1 + trial % 2, lse_ok = gives_lse(&q);
    int64_t tq = q.Lq, n_out = tq * q.H * q.Dv, n_w = p.B * q.H * p.mq * p.mk, n_lse = q.H * tq;
    p.out = keep(&A, calloc((size_t)n_out, sizeof(double)));
    p.w = keep(&A, calloc((size_t)n_w, sizeof(double)));
    p.lse = keep(&A, calloc((size_t)n_lse, sizeof(double)));
    char name[640], desc[512];
    describe(desc, sizeof desc, trial, &q, &x, threads);
    snprintf(name, sizeof name, "packed %s, %lld sequences", desc, (long long)p.B);
    if (verbose)
        printf("%s\n", name);
    if (!packed_reference(name, &q, &p, &A)) {
        release(&A);
        return;
    }
    lib_req L;
    to_lib(&q, &x, &A, &L);
    attn_varlen_request vr = attn_varlen_request_default(L.r.rule);
    vr.req = L.r;
    vr.req.query = ten(3, tq, q.H, q.Dq, L.r.query.data);
    vr.req.key = ten(3, q.Lk, q.Hkv, q.Dk, L.r.key.data);
    vr.req.value = ten(3, q.Lk, q.Hkv, q.Dv, L.r.value.data);
    vr.batch = p.B;
    vr.cu_seqlens_q = p.cq;
    vr.cu_seqlens_k = chance(80) || memcmp(p.cq, p.ck, sizeof p.cq) ? p.ck : NULL;
    attn_shapes sh;
    attn_error err;
    attn_status st = attn_varlen_plan(&vr, &sh, &err);
    int ok = st == ATTN_OK && sh.out_count == n_out && sh.w_count == (x.need_weights ? n_w : 0);
    if (!ok)
        fail(name, "plan: %s (%s), %lld outputs and %lld weights", attn_status_str(st),
             st == ATTN_OK ? "" : err.message, (long long)sh.out_count, (long long)sh.w_count);
    float *out = keep(&A, malloc(sizeof(float) * (size_t)n_out));
    float *w = keep(&A, malloc(sizeof(float) * (size_t)n_w));
    float *lse = keep(&A, malloc(sizeof(float) * (size_t)n_lse));
    for (int64_t i = 0; i < n_w; i++)
        w[i] = NAN; /* padding the library leaves unwritten shows */
    if (ok && (st = attn_varlen_compute(ctx[threads - 1], &vr, out, x.need_weights ? w : NULL,
                                        lse_ok ? lse : NULL, &err)) != ATTN_OK) {
        fail(name, "compute failed: %s (%s)", attn_status_str(st), err.message);
        ok = 0;
    }
    ok = ok && close_enough(name, "output", out, p.out, n_out);
    ok = ok && (!x.need_weights || close_enough(name, "weights", w, p.w, n_w));
    ok = ok && (!lse_ok || close_enough(name, "lse", lse, p.lse, n_lse));
    ok ? n_passed++ : n_failed++;
    release(&A);
}

/* A plan's refusal naming qkv_layout, or a failure named what. */
static void layout_refused(const char *what, attn_status st, const attn_error *err)
{
    int ok = st == ATTN_ERR_PARAM && !strcmp(err->field, "qkv_layout");
    if (!ok)
        fail(what, "gave %s (field \"%s\"), not ATTN_ERR_PARAM naming qkv_layout",
             attn_status_str(st), st == ATTN_OK ? "" : err->field);
    ok ? n_passed++ : n_failed++;
}

/* qkv_layout BSHD where it cannot apply (tensors of rank 3, multi-head's
 * (B, L, E), the KV cache's rows), and a layout that is not one: each
 * refused naming qkv_layout. */
static void layout_refusals(void)
{
    static const float x[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const float *const rows[1] = {x};
    attn_shapes sh;
    attn_error err;
    attn_request r = attn_request_default(ATTN_RULE_DOT);
    r.query = r.key = r.value = ten(3, 1, 2, 4, x);
    r.opt.qkv_layout = ATTN_QKV_BSHD;
    layout_refused("qkv_layout BSHD on 3-D tensors", attn_plan(&r, &sh, &err), &err);
    r.query = r.key = r.value = ten(4, 1, 2, 2, x), r.query.shape[3] = 4;
    r.key.shape[3] = r.value.shape[3] = 4;
    r.opt.qkv_layout = (attn_qkv_layout)2;
    layout_refused("an unknown qkv_layout", attn_plan(&r, &sh, &err), &err);
    attn_mha_request m = attn_mha_request_default();
    m.query = ten(3, 1, 2, 4, x), m.num_heads = 2;
    m.opt.qkv_layout = ATTN_QKV_BSHD;
    layout_refused("qkv_layout BSHD on multi-head", attn_mha_plan(&m, &sh, &err), &err);
    attn_cache_request c = attn_cache_request_default();
    c.query = ten(3, 1, 1, 4, x), c.num_heads = 1, c.len = 2, c.key = c.value = rows;
    c.opt.qkv_layout = ATTN_QKV_BSHD;
    layout_refused("qkv_layout BSHD over a KV cache", attn_cache_plan(&c, &sh, &err), &err);
}

/* One request the library must refuse: the status and the field named. */
static void packed_refused(const char *what, const attn_varlen_request *vr, attn_status want,
                           const char *field)
{
    attn_error err;
    attn_shapes sh;
    float out[64], w[64];
    attn_status st = attn_varlen_plan(vr, &sh, &err), sc = attn_varlen_compute(NULL, vr, out, w,
                                                                               NULL, &err);
    int ok = st == want && sc == want && !strcmp(err.field, field);
    if (!ok)
        fail(what, "plan gave %s, compute %s (field \"%s\"); expected %s naming \"%s\"",
             attn_status_str(st), attn_status_str(sc), st == ATTN_OK ? "" : err.field,
             attn_status_str(want), field);
    ok ? n_passed++ : n_failed++;
}

/* What packed sequences refuse, each named: bad offsets, the options they
 * do not take, shapes that are not packed, a top_k past a sequence's keys. */
static void packed_refusals(void)
{
    static const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const uint8_t m[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int64_t cq[3] = {0, 1, 2}, ck[3] = {0, 1, 3};
    attn_varlen_request base = attn_varlen_request_default(ATTN_RULE_DOT), r;
    base.req.query = ten(3, 2, 1, 1, x);
    base.req.key = ten(3, 3, 1, 1, x);
    base.req.value = ten(3, 3, 1, 1, x);
    base.batch = 2;
    base.cu_seqlens_q = cq;
    base.cu_seqlens_k = ck;
    attn_shapes sh;
    attn_error err;
    attn_status st = attn_varlen_plan(&base, &sh, &err);
    int ok = st == ATTN_OK && sh.out_count == 2 && sh.w_count == 2 * 2 && sh.w_rank == 4;
    if (!ok)
        fail("packed: two sequences", "plan gave %s, %lld outputs, %lld weights",
             attn_status_str(st), (long long)sh.out_count, (long long)sh.w_count);
    ok ? n_passed++ : n_failed++;
    int64_t from1[3] = {1, 1, 2}, falling[3] = {0, 3, 2}, short_end[3] = {0, 1, 2};
    r = base, r.cu_seqlens_q = from1;
    packed_refused("packed: offsets from 1", &r, ATTN_ERR_PARAM, "cu_seqlens_q");
    r = base, r.cu_seqlens_q = falling;
    packed_refused("packed: offsets that fall", &r, ATTN_ERR_PARAM, "cu_seqlens_q");
    int64_t to_min[3] = {0, 1, INT64_MIN}; /* whose drop overflows an int64 (UBSan once caught it) */
    r = base, r.cu_seqlens_q = to_min;
    packed_refused("packed: offsets that fall to -2^63", &r, ATTN_ERR_PARAM, "cu_seqlens_q");
    r = base, r.cu_seqlens_k = short_end;
    packed_refused("packed: key offsets short of the rows", &r, ATTN_ERR_PARAM, "cu_seqlens_k");
    r = base, r.cu_seqlens_k = NULL; /* cu_seqlens_q's end, 2, is not key's 3 rows */
    packed_refused("packed: query offsets for the keys", &r, ATTN_ERR_PARAM, "cu_seqlens_q");
    r = base, r.cu_seqlens_q = NULL;
    packed_refused("packed: no query offsets", &r, ATTN_ERR_ARG, "cu_seqlens_q");
    r = base, r.batch = 0;
    packed_refused("packed: no sequence", &r, ATTN_ERR_SHAPE, "batch");
    r = base, r.req.opt.mask = (attn_mask){2, {2, 3}, m};
    packed_refused("packed: a mask", &r, ATTN_ERR_PARAM, "mask");
    r = base, r.req.opt.bias = ten(2, 2, 3, 0, x);
    packed_refused("packed: a bias", &r, ATTN_ERR_PARAM, "bias");
    r = base, r.req.opt.key_mask = (attn_mask){1, {3}, m};
    packed_refused("packed: a key mask", &r, ATTN_ERR_PARAM, "key_mask");
    static const int64_t global2[1] = {1}; /* sequence 0 has one row and one key */
    r = base, r.req.opt.sparsity.pattern = ATTN_SPARSE_LOCAL_GLOBAL;
    r.req.opt.sparsity.global = global2, r.req.opt.sparsity.n_global = 1;
    packed_refused("packed: a global index past a sequence", &r, ATTN_ERR_PARAM, "sparsity.global");
    /* a global index repeated past a sequence's tokens: each sequence would
     * pass over all of them (it once let a small body cost B x G) */
    static const int64_t global00[2] = {0, 0};
    r.req.opt.sparsity.global = global00, r.req.opt.sparsity.n_global = 2;
    packed_refused("packed: more global indices than sequence 0's tokens", &r, ATTN_ERR_PARAM,
                   "sparsity.global");
    r = base, r.req.rule = ATTN_RULE_CONCAT;
    packed_refused("packed: rule concat", &r, ATTN_ERR_PARAM, "rule");
    r = base, r.req.opt.qkv_layout = ATTN_QKV_BSHD;
    packed_refused("packed: qkv_layout BSHD", &r, ATTN_ERR_PARAM, "qkv_layout");
    r = base, r.req.query = ten(4, 1, 2, 1, x), r.req.query.shape[3] = 1;
    packed_refused("packed: a 4-D query", &r, ATTN_ERR_SHAPE, "query");
    r = base, r.req.value = ten(3, 2, 1, 1, x);
    packed_refused("packed: value rows short of key's", &r, ATTN_ERR_SHAPE, "value");
    r = base, r.req.query = ten(3, 2, 0, 1, x);
    packed_refused("packed: a query of no heads", &r, ATTN_ERR_SHAPE, "query");
    /* (2^59, 2, 1) in two sequences is past what can be counted (2^60
     * floats) while one sequence of it, (1, 2, 2^58, 1), is not */
    int64_t huge[3] = {0, (int64_t)1 << 58, (int64_t)1 << 59};
    r = base, r.req.query = ten(3, (int64_t)1 << 59, 2, 1, x), r.cu_seqlens_q = huge;
    packed_refused("packed: a query too large to count", &r, ATTN_ERR_TOO_LARGE, "query");
    r = base, r.req.query = ten(3, 2, 3, 1, x), r.req.key = ten(3, 3, 2, 1, x),
    r.req.value = ten(3, 3, 2, 1, x);
    packed_refused("packed: 2 key heads for 3", &r, ATTN_ERR_SHAPE, "key");
    r = base, r.req.opt.hard = ATTN_HARD_TOPK, r.req.opt.top_k = 2;
    packed_refused("packed: top_k past sequence 0's one key", &r, ATTN_ERR_PARAM, "hard.top_k");
}

/* Packed sequences of more heads than one run of head jobs holds
 * (ATTN_JOBS_PER_RUN, 4096), on the row driver (hard argmax), whose runs
 * stay within one sequence: each sequence's one key is every head's
 * choice, so each output row is that key's value. */
static void packed_many_heads(attn_ctx *ctx)
{
    enum { H = 20000 };
    static const int64_t cq[3] = {0, 1, 3}, ck[3] = {0, 1, 2};
    static const float k[2] = {1, 1}, v[2] = {5, 7};
    float *q = calloc(3 * H, sizeof(float)), *out = calloc(3 * H, sizeof(float));
    attn_varlen_request r = attn_varlen_request_default(ATTN_RULE_DOT);
    r.req.query = ten(3, 3, H, 1, q);
    r.req.key = ten(3, 2, 1, 1, k);
    r.req.value = ten(3, 2, 1, 1, v);
    r.batch = 2, r.cu_seqlens_q = cq, r.cu_seqlens_k = ck;
    r.req.opt.hard = ATTN_HARD_ARGMAX;
    r.req.opt.need_weights = 0;
    attn_error err;
    attn_status st = q && out ? attn_varlen_compute(ctx, &r, out, NULL, NULL, &err) : ATTN_ERR_NOMEM;
    int64_t bad = 0;
    for (int64_t i = 0; st == ATTN_OK && i < 3 * H; i++)
        bad += out[i] != (i < H ? 5.0f : 7.0f);
    if (st != ATTN_OK || bad)
        fail("packed: 20000 heads on the row driver", "%s, %lld outputs wrong",
             st == ATTN_OK ? "ok" : err.message, (long long)bad);
    st == ATTN_OK && !bad ? n_passed++ : n_failed++;
    free(q);
    free(out);
}

/* ------------------------------------------------- attn_cache_compute */

/* An identity matrix of n x n doubles. */
static double *eye(allocs *A, int64_t n)
{
    double *m = keep(A, calloc((size_t)(n * n), sizeof(double)));
    for (int64_t i = 0; i < n; i++)
        m[i * n + i] = 1.0;
    return m;
}

/* The library's cache request for q (multi-head with identity
 * projections, B = 1): the query rows as (Tq, H, d), and each KV head's
 * keys and values from kv, or (kv NULL) in arrays of their own in kp and
 * vp, as a decoder keeps them. */
static void cache_from(const rm_request *q, const lib_extra *x, allocs *A, const attn_kv_cache *kv,
                       attn_cache_request *c, const float **kp, const float **vp)
{
    int64_t d = q->Dq / q->H, ekv = q->Hkv * d, n = q->Lk;
    *c = attn_cache_request_default();
    c->query = ten(3, q->Lq, q->H, d, fl(A, q->query, q->Lq * q->Dq));
    c->num_heads = q->H;
    c->num_kv_heads = q->Hkv;
    c->len = n;
    c->opt = lib_options(q, q->H, x, A);
    if (kv) {
        c->key = attn_kv_cache_keys(kv);
        c->value = attn_kv_cache_values(kv);
        return;
    }
    for (int64_t g = 0; g < q->Hkv; g++) {
        float *k = keep(A, malloc(sizeof(float) * (size_t)(n * d)));
        float *v = keep(A, malloc(sizeof(float) * (size_t)(n * d)));
        for (int64_t j = 0; j < n; j++)
            for (int64_t e = 0; e < d; e++) {
                k[j * d + e] = (float)q->key[j * ekv + g * d + e];
                v[j * d + e] = (float)q->value[j * ekv + g * d + e];
            }
        kp[g] = k;
        vp[g] = v;
    }
    c->key = kp;
    c->value = vp;
}

/* Appends rows [j0, j0 + T) of q's keys and values to kv; 1 when it
 * answers want. */
static int cache_append(attn_kv_cache *kv, const rm_request *q, int64_t j0, int64_t T,
                        int64_t Hkv, attn_status want, const char *name)
{
    int64_t ekv = q->Dk;
    allocs A = {{0}, 0};
    attn_tensor k = ten(3, T, Hkv, ekv / Hkv, fl(&A, q->key + j0 * ekv, T * ekv));
    attn_tensor v = ten(3, T, Hkv, ekv / Hkv, fl(&A, q->value + j0 * ekv, T * ekv));
    attn_error err;
    attn_status st = attn_kv_cache_append(kv, &k, &v, &err);
    release(&A);
    if (st != want)
        fail(name, "append of %lld rows: %s, expected %s (%s)", (long long)T, attn_status_str(st),
             attn_status_str(want), st == ATTN_OK ? "" : err.message);
    return st == want;
}

/* q's keys and values into kv (max_tokens: q->Lk) as a decoder would put
 * them: in steps of random sizes, with rows taken back by a truncate
 * (drafted then rejected), and appends that must be refused without a
 * trace (a shape that does not fit, rows past max_tokens). 1 when every
 * call answered as it should and kv holds exactly q's rows. */
static int cache_fill(attn_kv_cache *kv, const rm_request *q, const char *name)
{
    int64_t n = q->Lk, Hkv = q->Hkv, j = 0;
    int ok = 1;
    attn_error err;
    while (ok && j < n) {
        int64_t T = rnd(1, n - j < 40 ? n - j : 40);
        ok = cache_append(kv, q, j, T, Hkv, ATTN_OK, name);
        if (ok && chance(30)) { /* a draft taken back: the same rows again after */
            ok = attn_kv_cache_truncate(kv, j, &err) == ATTN_OK;
            ok = ok && cache_append(kv, q, j, T, Hkv, ATTN_OK, name);
        }
        j += T;
        if (ok && chance(10) && Hkv > 1) /* (T, 1, d * Hkv): the wrong shape */
            ok = cache_append(kv, q, 0, 1, 1, ATTN_ERR_SHAPE, name);
    }
    ok = ok && cache_append(kv, q, 0, 1, Hkv, ATTN_ERR_TOO_LARGE, name); /* past max_tokens */
    ok = ok && attn_kv_cache_truncate(kv, n + 1, &err) == ATTN_ERR_ARG;
    int64_t floats = 2 * n * q->Dk;
    if (ok && (attn_kv_cache_len(kv) != n || attn_kv_cache_bytes(kv) < (size_t)floats * 4 ||
               attn_kv_cache_bytes_for(kv, n) != attn_kv_cache_bytes(kv))) {
        fail(name, "the cache holds %lld rows in %zu bytes; expected %lld rows, at least %lld bytes",
             (long long)attn_kv_cache_len(kv), attn_kv_cache_bytes(kv), (long long)n,
             (long long)floats * 4);
        ok = 0;
    }
    return ok;
}

/* A random decode step over a cache (GQA, query rows from 1 to past the
 * kernel's rope limit, every option of the pipeline and hard attention)
 * against the reference's multi-head attention with identity projections:
 * the same heads over the same rows. grouped: one query row over groups of
 * 2 or 3 query heads a KV head, with masks and biases per head, no ALiBi,
 * sinks or hard attention: the steps whose groups the library runs as
 * the rows of one job (cache.c's packs_heads). */
static void cache_trial(attn_ctx *ctx, int threads, int trial, int grouped)
{
    allocs A = {{0}, 0};
    rm_request q;
    lib_extra x = {.need_weights = chance(60)};
    memset(&q, 0, sizeof q);
    q.rule = RM_MULTIHEAD;
    q.Hkv = rnd(1, 3);
    q.H = q.Hkv * (grouped ? rnd(2, 3) : rnd(1, 3));
    int64_t d = rnd(1, 24), E = q.H * d, ekv = q.Hkv * d;
    q.B = 1;
    q.Lk = chance(5) ? rnd(2048, 2600) : rnd_len(300);
    q.Lq = grouped ? 1 : chance(70) ? rnd(1, 4) : rnd_len(160);
    q.Dq = E;
    q.Dk = q.Dv = ekv;
    q.query = rnd_doubles(&A, q.Lq * E, 1.0);
    q.key = rnd_doubles(&A, q.Lk * ekv, 1.0);
    q.value = rnd_doubles(&A, q.Lk * ekv, 1.0);
    q.Wq = q.Wo = eye(&A, E);
    q.Wk = q.Wv = eye(&A, ekv);
    rnd_pipeline(&q, q.H, d, 0, &x, &A);
    if (grouped) {
        q.alibi = q.sinks = NULL;
        x.alibi_paper = 0;
        x.mask_bh = x.bias_bh = 0;
        int64_t shape[4], n = maskish_shape(4, 0, 0, &q, q.H, shape); /* (1, H, 1, Lk) */
        q.mask = chance(70) ? rnd_bytes(&A, n, 80) : NULL;
        q.bias = chance(70) ? rnd_doubles(&A, n, 2.0) : NULL;
        q.mask_rank = q.bias_rank = 4;
        q.mask_one_batch = q.mask_one_head = q.bias_one_batch = q.bias_one_head = 0;
    } else {
        rnd_hard(&q, q.Lk);
    }
    double *ro = keep(&A, malloc(sizeof(double) * (size_t)(q.Lq * E)));
    double *rw = keep(&A, malloc(sizeof(double) * (size_t)(q.H * q.Lq * q.Lk)));
    q.lse = gives_lse(&q) ? keep(&A, malloc(sizeof(double) * (size_t)(q.H * q.Lq))) : NULL;
    char name[512] = "cache ";
    describe(name + 6, sizeof name - 6, trial, &q, &x, threads);
    attn_kv_cache *kv = trial % 2 ? attn_kv_cache_new(q.Hkv, d, q.Lk) : NULL;
    int ok = !(trial % 2) || (kv && cache_fill(kv, &q, name));
    if (!ok)
        n_failed++;
    else if (reference_for(name, &q, ro, rw)) {
        const float *kp[3], *vp[3];
        attn_cache_request c;
        cache_from(&q, &x, &A, kv, &c, kp, vp);
        float *o = keep(&A, malloc(sizeof(float) * (size_t)(q.Lq * E)));
        float *w = x.need_weights ? keep(&A, malloc(sizeof(float) * (size_t)(q.H * q.Lq * q.Lk))) : NULL;
        float *l = keep(&A, malloc(sizeof(float) * (size_t)(q.H * q.Lq)));
        attn_error err;
        /* with hard attention, lse is refused and the call computes nothing */
        attn_status st = attn_cache_compute_lse(ctx, &c, o, w, q.lse ? l : NULL, &err);
        ok = st == ATTN_OK;
        if (!ok)
            fail(name, "compute failed: %s (%s)", attn_status_str(st), err.message);
        ok = ok && close_enough(name, "output", o, ro, q.Lq * E);
        if (ok && w)
            ok = close_enough(name, "weights", w, rw, q.H * q.Lq * q.Lk);
        if (ok && q.lse)
            ok = close_enough(name, "lse", l, q.lse, q.H * q.Lq);
        ok ? n_passed++ : n_failed++;
    }
    attn_kv_cache_free(kv);
    release(&A);
}

/* A cache past 2 MB, whose block takes huge pages (kvcache.c): rows
 * appended in random steps, some taken back by a truncate, every row of
 * every KV head compared bit for bit with the source after each append
 * (a growth copies the rows to the new block). */
static void cache_rows(void)
{
    enum { HKV = 3, D = 64, MAX = 3000 }; /* 4.6 MB at MAX */
    float *src = malloc(sizeof(float) * 2 * MAX * HKV * D);
    attn_kv_cache *kv = attn_kv_cache_new(HKV, D, MAX);
    int ok = src && kv;
    for (int64_t i = 0; ok && i < 2 * MAX * HKV * D; i++)
        src[i] = (float)rnd(-1000000, 1000000);
    int64_t n = 0;
    while (ok && n < MAX) {
        int64_t T = rnd(1, MAX - n < 700 ? MAX - n : 700);
        if (n > 0 && chance(25))
            n = rnd(0, n); /* a truncate: those rows again after */
        ok = attn_kv_cache_truncate(kv, n, NULL) == ATTN_OK;
        const float *k = src + n * HKV * D, *v = k + MAX * HKV * D;
        attn_tensor kt = {3, {T, HKV, D}, (float *)k}, vt = {3, {T, HKV, D}, (float *)v};
        ok = ok && attn_kv_cache_append(kv, &kt, &vt, NULL) == ATTN_OK;
        n += T;
        const float *const *K = attn_kv_cache_keys(kv), *const *V = attn_kv_cache_values(kv);
        for (int64_t t = 0; ok && t < n; t++)
            for (int g = 0; ok && g < HKV; g++)
                ok = !memcmp(K[g] + t * D, src + (t * HKV + g) * D, D * sizeof(float)) &&
                     !memcmp(V[g] + t * D, src + ((MAX + t) * HKV + g) * D, D * sizeof(float));
        ok = ok && attn_kv_cache_len(kv) == n;
    }
    if (!ok)
        fail("cache rows past 2 MB", "a row differs from the one appended, or a call failed, at %lld rows",
             (long long)n);
    ok ? n_passed++ : n_failed++;
    /* full now: what it holds is what its sizes said it would */
    size_t rows = (size_t)2 * MAX * HKV * D * sizeof(float), full = attn_kv_cache_bytes_max(HKV, D, MAX);
    if (ok && (attn_kv_cache_bytes(kv) != full || full < rows || full > rows + 4096)) {
        fail("cache bytes when full", "%zu bytes held, %zu said by its sizes; its rows are %zu",
             attn_kv_cache_bytes(kv), full, rows);
        n_failed++;
    } else if (ok)
        n_passed++;
    attn_kv_cache_free(kv);
    free(src);
}

/* A full cache's bytes from sizes no cache can have: 0 for a size below
 * 1, SIZE_MAX past what can be counted (and then no cache is made). */
static void cache_bytes_limits(void)
{
    const int64_t big = (int64_t)1 << 31, sizes[][3] = {
        {0, 64, 100}, {3, 0, 100}, {3, 64, 0}, {-1, 64, 100}, /* below 1 */
        {big, big, 2}, {1, INT64_MAX, 1}, {INT64_MAX / 2, 1, 1}, {1, 1, INT64_MAX / 8}, /* too large */
    };
    for (int i = 0; i < 8; i++) {
        size_t want = i < 4 ? 0 : SIZE_MAX;
        size_t got = attn_kv_cache_bytes_max(sizes[i][0], sizes[i][1], sizes[i][2]);
        attn_kv_cache *kv = attn_kv_cache_new(sizes[i][0], sizes[i][1], sizes[i][2]);
        if (got != want || kv) {
            fail("cache bytes of impossible sizes", "(%lld, %lld, %lld): %zu bytes, expected %zu; %s",
                 (long long)sizes[i][0], (long long)sizes[i][1], (long long)sizes[i][2], got, want,
                 kv ? "a cache was made" : "no cache");
            n_failed++;
        } else
            n_passed++;
        attn_kv_cache_free(kv);
    }
    /* a NULL cache, key or value: ATTN_ERR_ARG, not a crash; the getters
     * answer 0 or NULL */
    attn_kv_cache *kv = attn_kv_cache_new(1, 2, 4);
    float x[2] = {1, 2};
    attn_tensor t = {3, {1, 1, 2}, x};
    attn_error err;
    int ok = kv && attn_kv_cache_append(NULL, &t, &t, &err) == ATTN_ERR_ARG &&
             attn_kv_cache_append(kv, NULL, &t, &err) == ATTN_ERR_ARG &&
             attn_kv_cache_append(kv, &t, NULL, &err) == ATTN_ERR_ARG &&
             attn_kv_cache_truncate(NULL, 0, &err) == ATTN_ERR_ARG && attn_kv_cache_len(NULL) == 0 &&
             attn_kv_cache_bytes(NULL) == 0 && attn_kv_cache_bytes_for(NULL, 3) == 0 &&
             !attn_kv_cache_keys(NULL) && !attn_kv_cache_values(NULL) &&
             attn_kv_cache_append(kv, &t, &t, &err) == ATTN_OK && attn_kv_cache_len(kv) == 1;
    if (!ok)
        fail("cache calls on NULL", "a NULL argument was not ATTN_ERR_ARG, or a getter answered otherwise");
    ok ? n_passed++ : n_failed++;
    attn_kv_cache_free(kv);
}

/* A decode loop on one context: step n attends query row n (Lq = 1,
 * bottom-right causal, every option, rope in both styles) over keys
 * 0..n, as a KV cache grows, so the context's rotary table is reused,
 * extended by one position a step, and rebuilt when the rope changes.
 * Each step against the reference. */
static void decode_loop(attn_ctx *ctx, int style)
{
    enum { STEPS = 140, HEADS = 3, D = 40, DV = 24 };
    allocs A = {{0}, 0};
    double *k = rnd_doubles(&A, HEADS * STEPS * D, 1.0), *v = rnd_doubles(&A, HEADS * STEPS * DV, 1.0);
    double *qs = rnd_doubles(&A, HEADS * STEPS * D, 1.0), sink = 0.7, slope = 0.05;
    int ok = 1;
    for (int64_t n = 1; n <= STEPS && ok; n++) {
        allocs B = {{0}, 0};
        rm_request q;
        memset(&q, 0, sizeof q);
        q.rule = RM_SCALED_DOT;
        q.B = HEADS;
        q.Lq = 1;
        q.Lk = n;
        q.Dq = q.Dk = D;
        q.Dv = DV;
        /* batch row h: query row n - 1 of head h, keys and values 0..n-1 */
        double *qq = keep(&B, malloc(sizeof(double) * HEADS * D));
        double *kk = keep(&B, malloc(sizeof(double) * (size_t)(HEADS * n * D)));
        double *vv = keep(&B, malloc(sizeof(double) * (size_t)(HEADS * n * DV)));
        for (int h = 0; h < HEADS; h++) {
            memcpy(qq + h * D, qs + (h * STEPS + n - 1) * D, sizeof(double) * D);
            memcpy(kk + h * n * D, k + h * STEPS * D, sizeof(double) * (size_t)(n * D));
            memcpy(vv + h * n * DV, v + h * STEPS * DV, sizeof(double) * (size_t)(n * DV));
        }
        q.query = qq;
        q.key = kk;
        q.value = vv;
        q.align = RM_BOTTOM_RIGHT;
        q.causal = 1;
        q.softcap = 4.0;
        q.alibi = &slope;
        q.sinks = &sink;
        q.rope.on = 1;
        q.rope.base = 10000.0;
        q.rope.style = style ? RM_ROPE_INTERLEAVED : RM_ROPE_HALF;
        q.rope.dims = n > 100 ? 24 : 0; /* a rope change rebuilds the table */
        q.rope.offset = 5;
        lib_extra x = {.need_weights = 0};
        lib_req L;
        double *ro = keep(&B, malloc(sizeof(double) * HEADS * DV));
        char name[96];
        snprintf(name, sizeof name, "decode loop (%s rope), step %lld", style ? "interleaved" : "half",
                 (long long)n);
        if (rm_compute(&q, ro, NULL, NULL, NULL) != 0) {
            fail(name, "the reference failed");
            ok = 0;
        } else {
            to_lib(&q, &x, &B, &L);
            ok = run_and_check(ctx, name, &L, ro, HEADS * DV, NULL, 0);
        }
        release(&B);
    }
    ok ? n_passed++ : n_failed++;
    release(&A);
}

/* One head, a few query rows, thousands of keys, on two threads: the
 * kernel splits the keys between the threads and joins the parts (sink,
 * masks, every score option and the weights across the seam). Against
 * the reference, with a key mask that leaves whole parts empty too. */
static void split_decode(attn_ctx *ctx)
{
    static const int64_t lks[] = {2048, 2500, 4133, 3000};
    for (int t = 0; t < 4; t++) {
        allocs A = {{0}, 0};
        rm_request q;
        memset(&q, 0, sizeof q);
        int64_t Lk = lks[t], Lq = 1 + t % 3, D = 40, DV = 24;
        double sink = 0.5, slope = 0.002;
        q.rule = RM_SCALED_DOT;
        q.B = 1;
        q.Lq = Lq;
        q.Lk = Lk;
        q.Dq = q.Dk = D;
        q.Dv = DV;
        q.query = rnd_doubles(&A, Lq * D, 1.0);
        q.key = rnd_doubles(&A, Lk * D, 1.0);
        q.value = rnd_doubles(&A, Lk * DV, 1.0);
        q.align = RM_BOTTOM_RIGHT;
        q.causal = t != 1;
        q.softcap = t == 2 ? 0.0 : 6.0;
        q.alibi = t == 3 ? NULL : &slope;
        q.sinks = t == 2 ? NULL : &sink;
        q.rope.on = t != 3;
        q.rope.base = 10000.0;
        q.rope.style = t % 2 ? RM_ROPE_INTERLEAVED : RM_ROPE_HALF;
        q.has_window = t == 1;
        q.left = 1500;
        q.right = -1;
        uint8_t *km = rnd_bytes(&A, Lk, 90);
        if (t == 3) /* the second half of the keys masked: an empty part */
            memset(km + Lk / 2, 0, (size_t)(Lk - Lk / 2));
        q.key_mask = km;
        q.key_mask_rank = 1;
        lib_extra x = {.need_weights = 1};
        lib_req L;
        double *ro = keep(&A, malloc(sizeof(double) * (size_t)(Lq * DV)));
        double *rw = keep(&A, malloc(sizeof(double) * (size_t)(Lq * Lk)));
        q.lse = keep(&A, malloc(sizeof(double) * (size_t)Lq));
        char name[96];
        snprintf(name, sizeof name, "split decode: Lq %lld, Lk %lld, 2 threads", (long long)Lq, (long long)Lk);
        if (rm_compute(&q, ro, rw, NULL, NULL) != 0) {
            fail(name, "the reference failed");
            n_failed++;
        } else {
            to_lib(&q, &x, &A, &L);
            run_and_check(ctx, name, &L, ro, Lq * DV, rw, Lq * Lk) ? n_passed++ : n_failed++;
            check_lse(ctx, name, &L, q.lse, Lq, Lq * DV) ? n_passed++ : n_failed++;
        }
        release(&A);
    }
}

/* The use attn_compute_lse is for: attention over keys split in two
 * calls, joined by their log-sum-exps, o = (e^l1 o1 + e^l2 o2) / (e^l1 +
 * e^l2) and lse = ln(e^l1 + e^l2), against one call over all the keys
 * (8 heads as a batch, causal, so that the rows before the cut see no key
 * of the second part, whose lse is then -inf). */
static void lse_join(attn_ctx *ctx)
{
    enum { B = 8, LQ = 70, LK = 300, CUT = 137, D = 32, DV = 16 };
    allocs A = {{0}, 0};
    float *x[3], *part[3][2] = {{0}}, *o = keep(&A, malloc(sizeof(float) * 6 * B * LQ * DV));
    float *l = keep(&A, malloc(sizeof(float) * 3 * B * LQ));
    int64_t rows[3] = {LQ, LK, LK}, cols[3] = {D, D, DV}, lk[2] = {CUT, LK - CUT};
    for (int t = 0; t < 3; t++) {
        x[t] = keep(&A, malloc(sizeof(float) * (size_t)(B * rows[t] * cols[t])));
        for (int64_t e = 0; e < B * rows[t] * cols[t]; e++) x[t][e] = (float)rndf(-2.0, 2.0);
        for (int p = 0; t > 0 && p < 2; p++) { /* the keys and values of part p, per batch row */
            part[t][p] = keep(&A, malloc(sizeof(float) * (size_t)(B * rows[t] * cols[t])));
            for (int64_t b = 0; b < B; b++)
                memcpy(part[t][p] + b * lk[p] * cols[t], x[t] + (b * rows[t] + (p ? CUT : 0)) * cols[t],
                       sizeof(float) * (size_t)(lk[p] * cols[t]));
        }
    }
    attn_request r = attn_request_default(ATTN_RULE_SCALED_DOT);
    r.opt.need_weights = 0;
    r.query = (attn_tensor){3, {B, LQ, D}, x[0]};
    attn_error err;
    attn_status st = ATTN_OK;
    for (int c = 0; c < 3 && st == ATTN_OK; c++) { /* all keys, then each part */
        int64_t n = c == 0 ? LK : lk[c - 1];
        r.key = (attn_tensor){3, {B, n, D}, c == 0 ? x[1] : part[1][c - 1]};
        r.value = (attn_tensor){3, {B, n, DV}, c == 0 ? x[2] : part[2][c - 1]};
        /* causal at the full request's diagonal: the second part's keys
         * start CUT later, so its causal diagonal moves with a mask */
        uint8_t *mask = keep(&A, malloc((size_t)(LQ * n)));
        for (int64_t i = 0; i < LQ; i++)
            for (int64_t j = 0; j < n; j++) mask[i * n + j] = j + (c == 2 ? CUT : 0) <= i;
        r.opt.mask = (attn_mask){2, {LQ, n}, mask};
        st = attn_compute_lse(ctx, &r, o + c * B * LQ * DV, NULL, l + c * B * LQ, &err);
    }
    double *want_o = keep(&A, malloc(sizeof(double) * B * LQ * DV));
    double *want_l = keep(&A, malloc(sizeof(double) * B * LQ));
    int empty = 0;
    for (int64_t i = 0; st == ATTN_OK && i < B * LQ; i++) {
        double l1 = l[B * LQ + i], l2 = l[2 * B * LQ + i], m = l1 > l2 ? l1 : l2;
        double e1 = exp(l1 - m), e2 = exp(l2 - m); /* m is finite: part 1 sees key 0 */
        empty += l2 == -INFINITY;
        want_l[i] = m + log(e1 + e2);
        for (int64_t c = 0; c < DV; c++)
            want_o[i * DV + c] = (e1 * o[B * LQ * DV + i * DV + c] + e2 * o[2 * B * LQ * DV + i * DV + c]) / (e1 + e2);
    }
    const char *name = "lse: two calls over halves of the keys joined by their log-sum-exps";
    if (st != ATTN_OK) {
        fail(name, "attn_compute_lse failed: %s (%s)", attn_status_str(st), err.message);
        n_failed++;
    } else if (empty == 0) {
        fail(name, "no row of the second part was without keys");
        n_failed++;
    } else {
        int ok = close_enough(name, "joined output", o, want_o, B * LQ * DV);
        ok = close_enough(name, "joined lse", l, want_l, B * LQ) && ok;
        ok ? n_passed++ : n_failed++;
    }
    release(&A);
}

/* ------------------------------------------------------------- bfloat16 */

/* bfloat16's unit roundoff: 8 significant bits, rounded to nearest. */
#define BF_U 0.00390625

/* x (as a float) rounded to bfloat16, to nearest even, from the format's
 * definition: the value to 8 significant bits (not the library's bit
 * trick). */
static double bf16_round(double x)
{
    float f = (float)x;
    if (f == 0.0f || !isfinite(f))
        return f;
    int e;
    frexp(f, &e);
    return ldexp(nearbyint(ldexp(f, 8 - e)), e - 8);
}

static double *bf16_copy(allocs *A, const double *x, int64_t n)
{
    double *y = keep(A, malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)));
    for (int64_t i = 0; i < n; i++)
        y[i] = bf16_round(x[i]);
    return y;
}

/* One dot-rule case (B = 1, D = Dv = 1) whose answer each rounding point
 * sets: the library's output in bf16 and in fp32 precision. */
static void bf16_case(attn_ctx *ctx, const char *cs, int64_t lk, const float *q, const float *k,
                      const float *v, double want)
{
    attn_request r = attn_request_default(ATTN_RULE_DOT);
    r.query = ten(2, 1, 1, 0, q);
    r.key = ten(2, lk, 1, 0, k);
    r.value = ten(2, lk, 1, 0, v);
    r.opt.need_weights = 0;
    float o[2];
    attn_error err;
    for (int p = 0; p < 2; p++) {
        r.opt.precision = p ? ATTN_PRECISION_FP32 : ATTN_PRECISION_BF16;
        attn_status st = attn_compute(ctx, &r, &o[p], NULL, &err);
        if (st != ATTN_OK) {
            fail(cs, "compute failed: %s", err.message);
            n_failed++;
            return;
        }
    }
    /* bf16 within float32 rounding of the answer; fp32 (the same inputs
     * without rounding) far from it, so the check can tell them apart */
    double tol = 4e-7 * fabs(want);
    if (!(fabs(o[0] - want) <= tol))
        fail(cs, "bf16 output %.9g, expected %.9g", o[0], want);
    else if (!(fabs(o[1] - want) > 100.0 * tol))
        fail(cs, "fp32 output %.9g is as close to bf16's %.9g: the case tests nothing", o[1], want);
    fabs(o[0] - want) <= tol && fabs(o[1] - want) > 100.0 * tol ? n_passed++ : n_failed++;
}

/* Each rounding point alone: the value row, the query, the key, and the
 * probabilities before P V (keys of scores 0 and -1: P = 1 and e^-1,
 * which bfloat16 holds as 188/512). 1 + 3 2^-10 rounds to 1. */
static void bf16_directed(attn_ctx *ctx)
{
    const float off = 1.0f + 3.0f / 1024.0f, one = 1.0f, two = 2.0f;
    const float k02[2] = {0.0f, 2.0f}, v01[2] = {0.0f, 1.0f}, k0o[2] = {0.0f, off};
    const float k0m[2] = {0.0f, -1.0f}, one1[1] = {1.0f}, offv[1] = {off};
    double sig2 = 1.0 / (1.0 + exp(-2.0)), e1 = exp(-1.0);
    bf16_case(ctx, "bf16 value rounding", 1, one1, one1, offv, 1.0);
    bf16_case(ctx, "bf16 query rounding", 2, &off, k02, v01, sig2);
    bf16_case(ctx, "bf16 key rounding", 2, &two, k0o, v01, sig2);
    bf16_case(ctx, "bf16 probability rounding", 2, &one, k0m, v01, bf16_round(e1) / (1.0 + e1));
}

/* Largest per-element excess over a bound, and the largest error seen. */
typedef struct {
    double worst_a, worst_b; /* error / bound, of each check */
    double err_b;            /* largest |ours - float64 truth| */
} bf16_stats;

/* Set: rnd_bf16 draws decode-sized queries only (1 to 15 rows, half of
 * them 1 to 3), which the kernel runs row by row (fewer than a quarter of
 * its query block: 16 rows on avx512, 4 on avx2). */
static int bf16_short_q;

/* A random request the bf16 kernel takes: dot, scaled_dot, general or
 * multi-head, every option but hard attention and sparsity; half the
 * rules' with value rows of whole AMX tiles (16, 32 or 48 floats), which
 * the tile unit takes where the CPU has it. */
static void rnd_bf16(rm_request *q, lib_extra *x, allocs *A)
{
    do {
        release(A);
        memset(q, 0, sizeof *q);
        *x = (lib_extra){.need_weights = 1};
        if (chance(30))
            rnd_mha(q, x, A);
        else
            rnd_rule(q, x, A);
    } while ((q->rule > RM_GENERAL && q->rule != RM_MULTIHEAD) || q->hard != RM_HARD_NONE ||
             (q->rule != RM_MULTIHEAD && q->H) || /* bound_a reads rows by batch alone */
             q->sparsity.pattern != RM_SPARSE_NONE ||
             (bf16_short_q && q->Lq > (chance(50) ? 3 : 15)));
    if (q->rule != RM_MULTIHEAD && chance(50)) {
        q->Dv = 16 * rnd(1, 3);
        q->value = rnd_doubles(A, q->B * q->Lk * q->Dv, 1.0);
    }
}

/* Output element (b, i, c) of a rule's request: its bound for check (a),
 * u sum_j w_ij |v_jc| over the reference's weights and values (the
 * rounding of P, the one rounding left), and float32's share. */
static double bound_a(const rm_request *q, const double *w, int64_t b, int64_t i, int64_t c)
{
    double s = 0.0, vmax = 0.0;
    for (int64_t j = 0; j < q->Lk; j++) {
        double v = fabs(q->value[(b * q->Lk + j) * q->Dv + c]);
        s += w[(b * q->Lq + i) * q->Lk + j] * v;
        vmax = v > vmax ? v : vmax;
    }
    return BF_U * s + 2e-6 * (1.0 + vmax);
}

/* One random trial: (a) for dot and scaled_dot without rope, against the
 * float64 reference of the bfloat16-rounded query, key and value, within
 * bound_a (and the weights within test_lib's tolerance); (b) for every
 * request, against the float64 truth of the unrounded request, within 2^-4
 * of the row's largest |truth| plus 2^-6: an error that size is no
 * rounding (errors of bf16's 2^-8 add up to about 2^-7 here), and shows a
 * wrong product. */
static void bf16_run(attn_ctx *ctx, const char *name, rm_request q, lib_extra x, allocs A,
                     bf16_stats *S)
{
    int mha = q.rule == RM_MULTIHEAD;
    int64_t Dout = mha ? q.Dq : q.Dv, n_out = q.B * q.Lq * Dout;
    int64_t n_w = (mha && !q.average_weights ? q.H : 1) * q.B * q.Lq * q.Lk;
    double *ro = keep(&A, malloc(sizeof(double) * (size_t)n_out));
    double *rw = keep(&A, malloc(sizeof(double) * (size_t)n_w));
    float *out = keep(&A, malloc(sizeof(float) * (size_t)n_out));
    float *w = keep(&A, malloc(sizeof(float) * (size_t)n_w));
    lib_req L;
    to_lib(&q, &x, &A, &L);
    attn_options *o = L.mha ? &L.m.opt : &L.r.opt;
    o->precision = ATTN_PRECISION_BF16;
    attn_error err;
    attn_status st = lib_compute(ctx, &L, out, w, &err);
    if (st != ATTN_OK || rm_compute(&q, ro, rw, NULL, NULL) != 0) {
        fail(name, "bf16: %s", st != ATTN_OK ? err.message : "the reference failed");
        n_failed++;
        release(&A);
        return;
    }
    int ok = 1;
    for (int64_t r = 0; r < q.B * q.Lq; r++) {
        double big = 0.0;
        for (int64_t c = 0; c < Dout; c++)
            big = fmax(big, fabs(ro[r * Dout + c]));
        for (int64_t c = 0; c < Dout; c++) {
            double e = fabs(out[r * Dout + c] - ro[r * Dout + c]), tol = big / 16.0 + 1.0 / 64.0;
            S->err_b = fmax(S->err_b, e);
            S->worst_b = fmax(S->worst_b, e / tol);
            if (!(e <= tol) && ok) {
                fail(name, "bf16 output[%lld] = %.7g, float64 truth %.7g", (long long)(r * Dout + c),
                     out[r * Dout + c], ro[r * Dout + c]);
                ok = 0;
            }
        }
    }
    if (ok && q.rule <= RM_SCALED_DOT && !q.rope.on) {
        rm_request qr = q;
        qr.query = bf16_copy(&A, q.query, q.B * q.Lq * q.Dq);
        qr.key = bf16_copy(&A, q.key, q.B * q.Lk * q.Dk);
        qr.value = bf16_copy(&A, q.value, q.B * q.Lk * q.Dv);
        rm_compute(&qr, ro, rw, NULL, NULL);
        for (int64_t r = 0; r < q.B * q.Lq && ok; r++)
            for (int64_t c = 0; c < Dout && ok; c++) {
                double e = fabs(out[r * Dout + c] - ro[r * Dout + c]);
                double tol = bound_a(&qr, rw, r / q.Lq, r % q.Lq, c);
                S->worst_a = fmax(S->worst_a, e / tol);
                if (!(e <= tol)) {
                    fail(name, "bf16 output[%lld] = %.7g, float64 of the rounded inputs %.7g "
                         "(bound %.3g)", (long long)(r * Dout + c), out[r * Dout + c],
                         ro[r * Dout + c], tol);
                    ok = 0;
                }
            }
        if (ok && x.need_weights)
            ok = close_enough(name, "bf16 weights", w, rw, n_w);
    }
    ok ? n_passed++ : n_failed++;
    release(&A);
}

/* A random request (rnd_bf16) through bf16_run. */
static void bf16_trial(attn_ctx *ctx, int trial, bf16_stats *S)
{
    allocs A = {{0}, 0};
    rm_request q;
    lib_extra x;
    rnd_bf16(&q, &x, &A);
    x.need_weights = chance(50);
    char name[512];
    describe(name, sizeof name, trial, &q, &x, 1);
    bf16_run(ctx, name, q, x, A, S);
}

/* Scores that climb along the keys (1/8 a key, so a row's maximum passes
 * the reference by more than the lazy rule's 8 every 64 keys, inside key
 * blocks, whose earlier probabilities are then rescaled and packed again),
 * with a spike at key 150 for the odd rows: 70 query rows (whole blocks
 * and a part), 300 keys, weights on and off, through bf16_run's checks.
 * The large features are integers, which bfloat16 holds exactly, so the
 * float64 truth stays within the check's reach. */
static void bf16_climbing(attn_ctx *ctx, bf16_stats *S)
{
    for (int wts = 0; wts < 2; wts++) {
        allocs A = {{0}, 0};
        rm_request q;
        memset(&q, 0, sizeof q);
        q.rule = RM_SCALED_DOT;
        q.B = 1, q.Lq = 70, q.Lk = 300, q.Dq = q.Dk = q.Dv = 16;
        double *qq = rnd_doubles(&A, q.Lq * q.Dq, 0.5), *kk = rnd_doubles(&A, q.Lk * q.Dk, 0.5);
        for (int64_t i = 0; i < q.Lq; i++) {
            qq[i * q.Dq] = 1.0;
            qq[i * q.Dq + 1] = (double)(i % 2);
        }
        for (int64_t j = 0; j < q.Lk; j++) {
            kk[j * q.Dk] = (double)(j / 2); /* times the scale, 1/4 */
            kk[j * q.Dk + 1] = j == 150 ? 200.0 : 0.0;
        }
        q.query = qq, q.key = kk;
        q.value = rnd_doubles(&A, q.Lk * q.Dv, 1.0);
        bf16_run(ctx, wts ? "bf16 climbing scores, weights" : "bf16 climbing scores", q,
                 (lib_extra){.need_weights = wts}, A, S);
    }
}

/* The bf16 checks on the variant in use: the directed cases, then random
 * trials on 1 and 2 threads (the same ones on every variant), and a
 * quarter as many with decode-sized queries (the row path); prints the
 * worst ratios to the bounds of each. */
static void bf16_checks(attn_ctx *const ctx[2], int trials, uint64_t seed)
{
    rng_state = seed ^ 0xbf16;
    bf16_directed(ctx[0]);
    for (int s = 0; s < 2; s++) {
        bf16_stats S = {0, 0, 0};
        if (s == 0) bf16_climbing(ctx[1], &S);
        bf16_short_q = s;
        for (int t = 0; t < (s ? trials / 4 : trials); t++)
            bf16_trial(ctx[t % 2], t, &S);
        printf("%s bf16%s: worst error / bound: %.3f (vs the rounded inputs), %.3f (vs float64 "
               "truth; largest error %.3g)\n",
               attn_kernels_isa(), s ? ", 1 to 15 query rows" : "", S.worst_a, S.worst_b,
               S.err_b);
    }
    bf16_short_q = 0;
}

/* The emulated path (avx512) against the hardware's (avx512bf16: vdpbf16ps
 * alone, then AMX tiles) on the same random dot and scaled_dot requests
 * without rope (every other one of 1 to 15 query rows, the row path): each output within 2 bound_a of the emulated one (both lie
 * within bound_a of the float64 reference of the rounded inputs). Prints
 * how many outputs vdpbf16ps gives bit for bit (its products and sums run
 * in the emulation's order; only subnormals may differ) and the worst
 * ratios. Skipped (and counted so) on CPUs without AVX512_BF16. */
static void bf16_versus(attn_ctx *ctx, int trials, uint64_t seed)
{
    if (attn_kernels_use("avx512bf16") != 0 || attn_kernels_use("avx512") != 0) {
        printf("SKIPPED: bf16 against the emulated path (this CPU lacks AVX512_BF16)\n");
        n_skipped++;
        return;
    }
    int amx = attn_amx_ready();
    int64_t same = 0, total = 0;
    double worst[2] = {0.0, 0.0};
    rng_state = seed ^ 0x5eed;
    for (int t = 0; t < trials; t++) {
        allocs A = {{0}, 0};
        rm_request q;
        lib_extra x;
        bf16_short_q = t % 2;
        do
            rnd_bf16(&q, &x, &A);
        while (q.rule > RM_SCALED_DOT || q.rope.on);
        bf16_short_q = 0;
        x.need_weights = 0;
        int64_t n_out = q.B * q.Lq * q.Dv, n_w = q.B * q.Lq * q.Lk;
        float *out[3];
        for (int v = 0; v < 3; v++)
            out[v] = keep(&A, malloc(sizeof(float) * (size_t)n_out));
        rm_request qr = q;
        qr.query = bf16_copy(&A, q.query, q.B * q.Lq * q.Dq);
        qr.key = bf16_copy(&A, q.key, q.B * q.Lk * q.Dk);
        qr.value = bf16_copy(&A, q.value, q.B * q.Lk * q.Dv);
        double *ro = keep(&A, malloc(sizeof(double) * (size_t)n_out));
        double *rw = keep(&A, malloc(sizeof(double) * (size_t)n_w));
        lib_req L;
        to_lib(&q, &x, &A, &L);
        L.r.opt.precision = ATTN_PRECISION_BF16;
        attn_error err;
        int ok = rm_compute(&qr, ro, rw, NULL, NULL) == 0;
        for (int v = 0; v < 3 && ok; v++) {
            attn_kernels_use(v == 0 ? "avx512" : "avx512bf16");
            attn_amx_set(v == 2);
            ok = v == 2 && !amx ? 1 : lib_compute(ctx, &L, out[v], NULL, &err) == ATTN_OK;
        }
        char name[512];
        describe(name, sizeof name, t, &q, &x, 1);
        for (int64_t i = 0; i < n_out && ok; i++) {
            int64_t r = i / q.Dv;
            double tol = 2.0 * bound_a(&qr, rw, r / q.Lq, r % q.Lq, i % q.Dv);
            same += out[1][i] == out[0][i];
            total++;
            for (int v = 1; v <= (amx ? 2 : 1); v++) {
                double e = fabs((double)out[v][i] - out[0][i]);
                worst[v - 1] = fmax(worst[v - 1], e / tol);
                if (!(e <= tol)) {
                    fail(name, "bf16 output[%lld]: %s %.7g, emulated %.7g", (long long)i,
                         v == 1 ? "vdpbf16ps" : "AMX", out[v][i], out[0][i]);
                    ok = 0;
                }
            }
        }
        if (!ok && total == 0)
            fail(name, "bf16 against the emulated path: %s", err.message);
        ok ? n_passed++ : n_failed++;
        release(&A);
    }
    attn_amx_set(1);
    printf("bf16 against the emulated path: vdpbf16ps gives %lld of %lld outputs bit for bit, "
           "worst difference / bound %.3f; AMX %s %.3f\n",
           (long long)same, (long long)total, worst[0], amx ? "" : "(not run)", worst[1]);
}

int main(int argc, char **argv)
{
    const char *dir = MC_DIR;
    int trials = 250;
    uint64_t seed = 20261130;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trials") && i + 1 < argc)
            trials = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else
            dir = argv[i];
    }
    attn_ctx *ctx[2] = {attn_ctx_new(1), attn_ctx_new(2)};
    if (!ctx[0] || !ctx[1]) {
        fprintf(stderr, "test_modern: out of memory\n");
        return 2;
    }
    static const char *isas[] = {"avx512bf16", "avx512", "avx2", "generic"};
    for (size_t k = 0; k < sizeof isas / sizeof *isas; k++) {
        if (attn_kernels_use(isas[k]) != 0) {
            printf("SKIPPED: %s (this CPU lacks it)\n", isas[k]);
            n_skipped++;
            continue;
        }
        int before_p = n_passed, before_f = n_failed, before_s = n_skipped;
        run_golden(ctx[0], dir);
        rng_state = seed;
        for (int t = 0; t < trials; t++)
            random_trial(ctx, t);
        for (int t = 0; t < trials / 2; t++)
            packed_trial(ctx, t);
        decode_loop(ctx[0], 0);
        decode_loop(ctx[1], 1);
        split_decode(ctx[1]);
        lse_join(ctx[1]);
        for (int t = 0; t < trials / 2; t++)
            cache_trial(ctx[t % 2], 1 + t % 2, t, 0);
        for (int t = 0; t < trials / 4; t++)
            cache_trial(ctx[t % 2], 1 + t % 2, t, 1);
        bf16_checks(ctx, trials, seed);
        bshd_bf16(ctx[1]);
        if (strcmp(isas[k], "avx512bf16") == 0 && attn_amx_ready()) {
            attn_amx_set(0); /* the same variant on vdpbf16ps alone */
            printf("%s without AMX:\n", isas[k]);
            bf16_checks(ctx, trials, seed);
            attn_amx_set(1);
        }
        printf("%s: golden vectors and %d random trials: %d passed, %d failed, %d skipped\n",
               isas[k], trials, n_passed - before_p, n_failed - before_f, n_skipped - before_s);
    }
    bf16_versus(ctx[1], trials / 5, seed);
    packed_refusals();
    layout_refusals();
    packed_many_heads(ctx[1]);
    seeded_lse(ctx[1]);
    cache_rows();
    cache_bytes_limits();
    attn_ctx_free(ctx[0]);
    attn_ctx_free(ctx[1]);
    printf("%d passed, %d failed, %d skipped\n", n_passed, n_failed, n_skipped);
    return n_failed ? 1 : 0;
}
