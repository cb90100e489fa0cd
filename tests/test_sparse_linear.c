/* test_sparse_linear.c - linear attention and sparse attention in lib/
 * against the double-precision reference tests/ref_modern.c and the
 * PyTorch golden vectors of tests/golden_modern/.
 *
 * Usage: test_sparse_linear [golden_modern dir]
 *
 *   1. Golden cases: every case of linear attention (rule linear, or
 *      "attention linear" on multihead) or with a sparsity pattern, run
 *      through attn_compute / attn_mha_compute, output and weights within
 *      test_lib's tolerance (1e-5 + 1e-4 |want|), the block layout exact.
 *      A case the library refuses for an option of the score pipeline that
 *      is not computed yet (softcap, sinks, hard sample, ...) is reported
 *      as skipped.
 *   2. Random requests against rm_compute: linear (rule and multi-head:
 *      both feature maps, causal in both alignments with Lq < Lk and
 *      Lq > Lk, key masks, ragged chunks, weights or not) and sparse
 *      (local_global, bigbird, blocks, with causal and masks), on every
 *      instruction set the CPU runs (or only ATTN_ISA's when set) and on
 *      1 and 2 threads.
 *   3. Sparse attention equals the library's dense attention with the
 *      pattern expanded to a mask (an extra check of the block skipping:
 *      the reference in 2 is the main one).
 *   4. Hard attention (argmax, top_k, sample) with a pattern, which runs
 *      over the allowed keys only, equals the reference given the pattern
 *      expanded into a dense mask, and bit for bit the library's dense path
 *      with that mask (weights; output for argmax and sample).
 * Prints one line per failure and "N passed, N failed, N skipped". */
#include "golden.h"
#include "modern_case.h"
#include "ref_modern.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "kernels_isa.h"

#define ABS_TOL 1e-5
#define REL_TOL 1e-4

static int n_pass, n_fail, n_skip;
static const char *isa_now = "";
static int threads_now = 1;

static void check(int ok, const char *name, const char *fmt, const char *what)
{
    if (ok) {
        n_pass++;
        return;
    }
    n_fail++;
    printf("FAIL [%s, %d thread%s] %s: %s%s\n", isa_now, threads_now,
           threads_now > 1 ? "s" : "", name, fmt, what ? what : "");
}

/* Elementwise within ABS_TOL + REL_TOL |want|; reports the worst. */
static void compare(const char *name, const char *what, const float *got, const double *want,
                    int64_t n)
{
    double worst = 0.0;
    int64_t at = -1;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] == want[i] ? 0.0 : fabs((double)got[i] - want[i]);
        double tol = isinf(want[i]) ? 0.0 : ABS_TOL + REL_TOL * fabs(want[i]);
        if (!(d <= tol) && (at < 0 || !(d - tol <= worst))) { /* an infinity missed too */
            worst = isnan(d) ? INFINITY : d - tol;
            at = i;
        }
    }
    char msg[240];
    if (at >= 0)
        snprintf(msg, sizeof msg, "%s[%lld of %lld] = %.9g, expected %.9g", what,
                 (long long)at, (long long)n, (double)got[at], want[at]);
    else
        snprintf(msg, sizeof msg, "%s", what);
    check(at < 0, name, msg, NULL);
}

static double *to_d(const float *f, int64_t n)
{
    double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        d[i] = f[i];
    return d;
}

/* ------------------------------------------------------------- random */

static uint64_t rng = 88172645463325252ull;

static uint64_t next_u(void)
{
    return rm_splitmix64(&rng);
}

static int64_t rnd_int(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(next_u() % (uint64_t)(hi - lo + 1));
}

static float *rnd_floats(int64_t n, float amp)
{
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        f[i] = amp * (float)((double)(next_u() >> 11) * 0x1p-53 * 2.0 - 1.0);
    return f;
}

/* A 0/1 mask, each element 1 with probability p_one (percent). */
static uint8_t *rnd_mask(int64_t n, int p_one)
{
    uint8_t *m = malloc((size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        m[i] = (int)(next_u() % 100) < p_one;
    return m;
}

static attn_tensor tensor3(int batched, int64_t B, int64_t L, int64_t D, const float *data)
{
    attn_tensor t;
    memset(&t, 0, sizeof t);
    t.rank = batched ? 3 : 2;
    int o = 0;
    if (batched)
        t.shape[o++] = B;
    t.shape[o++] = L;
    t.shape[o] = D;
    t.data = data;
    return t;
}

/* Runs rule (or, when NULL, mha) on a fresh context of threads_now threads;
 * returns the status. */
static attn_status run_req(const attn_request *rule, const attn_mha_request *mha,
                           attn_shapes *sh, float **out, float **w, attn_error *e)
{
    attn_status st = rule ? attn_plan(rule, sh, e) : attn_mha_plan(mha, sh, e);
    *out = *w = NULL;
    if (st != ATTN_OK)
        return st;
    *out = calloc((size_t)sh->out_count + 1, sizeof(float));
    *w = calloc((size_t)sh->w_count + 1, sizeof(float));
    attn_ctx *ctx = attn_ctx_new(threads_now);
    st = rule ? attn_compute(ctx, rule, *out, *w, e) : attn_mha_compute(ctx, mha, *out, *w, e);
    attn_ctx_free(ctx);
    return st;
}

static attn_status run_rule(const attn_request *req, attn_shapes *sh, float **out, float **w,
                            attn_error *e)
{
    return run_req(req, NULL, sh, out, w, e);
}

static attn_status run_mha(const attn_mha_request *req, attn_shapes *sh, float **out, float **w,
                           attn_error *e)
{
    return run_req(NULL, req, sh, out, w, e);
}

/* Sizes that cross the library's chunks of 64 rows and its query blocks. */
static int64_t rnd_len(void)
{
    static const int64_t some[] = {1, 2, 5, 16, 31, 63, 64, 65, 97, 128, 129, 150};
    return next_u() % 3 == 0 ? rnd_int(1, 140) : some[next_u() % 12];
}

/* (B, H, L, D): a request with heads. */
static attn_tensor tensor4(int64_t B, int64_t H, int64_t L, int64_t D, const float *data)
{
    attn_tensor t = tensor3(1, B, L, D, data);
    t.rank = 4;
    t.shape[1] = H;
    t.shape[2] = L;
    t.shape[3] = D;
    return t;
}

static void random_linear(int it)
{
    int batched = (int)(next_u() % 2), heads = batched && next_u() % 3 == 0;
    int64_t B = batched ? rnd_int(1, 3) : 1, Lq = rnd_len(), Lk = rnd_len();
    int64_t H = heads ? rnd_int(1, 4) : 1, Hkv = H % 2 == 0 && next_u() % 2 ? H / 2 : next_u() % 3 ? H : 1;
    int64_t D = rnd_int(1, 20), Dv = rnd_int(1, 40), nq = B * H, nk = B * Hkv;
    float *q = rnd_floats(nq * Lq * D, 2.0f), *k = rnd_floats(nk * Lk * D, 2.0f);
    float *v = rnd_floats(nk * Lk * Dv, 1.0f);
    int km_rank = (int)(next_u() % 3);
    uint8_t *km = rnd_mask(B * Lk, 75);
    attn_request r = attn_request_default(ATTN_RULE_LINEAR);
    r.query = heads ? tensor4(B, H, Lq, D, q) : tensor3(batched, B, Lq, D, q);
    r.key = heads ? tensor4(B, Hkv, Lk, D, k) : tensor3(batched, B, Lk, D, k);
    r.value = heads ? tensor4(B, Hkv, Lk, Dv, v) : tensor3(batched, B, Lk, Dv, v);
    r.opt.causal = (int)(next_u() % 2);
    r.opt.align = next_u() % 2 ? ATTN_ALIGN_BOTTOM_RIGHT : ATTN_ALIGN_TOP_LEFT;
    r.opt.feature_map = next_u() % 2 ? ATTN_FM_RELU : ATTN_FM_ELU;
    r.opt.need_weights = (int)(next_u() % 2);
    if (km_rank == 1 || (km_rank == 2 && !batched)) {
        r.opt.key_mask.rank = 1;
        r.opt.key_mask.shape[0] = Lk;
    } else if (km_rank == 2) {
        r.opt.key_mask.rank = 2;
        r.opt.key_mask.shape[0] = B;
        r.opt.key_mask.shape[1] = Lk;
    }
    r.opt.key_mask.data = km;

    rm_request m;
    memset(&m, 0, sizeof m);
    m.rule = RM_LINEAR;
    m.B = B; m.Lq = Lq; m.Lk = Lk; m.Dq = m.Dk = D; m.Dv = Dv;
    m.H = heads ? H : 0;
    m.Hkv = heads ? Hkv : 0;
    double *dq = to_d(q, nq * Lq * D), *dk = to_d(k, nk * Lk * D), *dv = to_d(v, nk * Lk * Dv);
    m.query = dq; m.key = dk; m.value = dv;
    m.key_mask = r.opt.key_mask.rank ? km : NULL;
    m.key_mask_rank = r.opt.key_mask.rank;
    m.causal = r.opt.causal;
    m.align = r.opt.align == ATTN_ALIGN_BOTTOM_RIGHT ? RM_BOTTOM_RIGHT : RM_TOP_LEFT;
    m.feature_map = r.opt.feature_map == ATTN_FM_RELU ? RM_FM_RELU : RM_FM_ELU;
    double *ro = malloc(sizeof(double) * (size_t)(nq * Lq * Dv));
    double *rw = malloc(sizeof(double) * (size_t)(nq * Lq * Lk));

    char name[240];
    snprintf(name, sizeof name,
             "random linear #%d (B %lld%s, H %lld/%lld, Lq %lld, Lk %lld, D %lld, Dv %lld, %s%s%s, "
             "key_mask rank %d%s)",
             it, (long long)B, batched ? "" : " unbatched", heads ? (long long)H : 0LL,
             (long long)Hkv, (long long)Lq, (long long)Lk,
             (long long)D, (long long)Dv, r.opt.feature_map ? "relu" : "elu",
             r.opt.causal ? ", causal" : "",
             r.opt.causal ? (r.opt.align ? " bottom_right" : " top_left") : "",
             r.opt.key_mask.rank, r.opt.need_weights ? ", weights" : "");
    attn_shapes sh;
    attn_error e;
    float *out, *w;
    attn_status st = run_rule(&r, &sh, &out, &w, &e);
    int ref = rm_compute(&m, ro, rw, NULL, NULL);
    check(st == ATTN_OK && ref == 0, name, "computes: ", st == ATTN_OK ? "reference failed" : e.message);
    if (st == ATTN_OK && ref == 0) {
        compare(name, "output", out, ro, nq * Lq * Dv);
        if (r.opt.need_weights)
            compare(name, "weights", w, rw, nq * Lq * Lk);
    }
    free(out); free(w); free(q); free(k); free(v); free(km);
    free(dq); free(dk); free(dv); free(ro); free(rw);
}

/* A random sparsity pattern for Lq x Lk into the library's form o and
 * the reference's r (globals: room for 4; layout: a new buffer or NULL). */
static void rnd_pattern(int64_t Lq, int64_t Lk, attn_sparsity *o, rm_sparsity *r,
                        int64_t *globals, uint8_t **layout)
{
    int64_t most = Lq > Lk ? Lq : Lk;
    memset(r, 0, sizeof *r);
    *layout = NULL;
    switch (next_u() % 3) {
    case 0:
        o->pattern = ATTN_SPARSE_LOCAL_GLOBAL;
        r->pattern = RM_SPARSE_LOCAL_GLOBAL;
        o->window = r->window = next_u() % 4 == 0 ? 0 : rnd_int(0, 100);
        o->n_global = r->n_global = (size_t)rnd_int(0, 4);
        for (size_t g = 0; g < o->n_global; g++)
            globals[g] = rnd_int(0, most - 1);
        o->global = r->global = globals;
        break;
    case 1:
        o->pattern = ATTN_SPARSE_BIGBIRD;
        r->pattern = RM_SPARSE_BIGBIRD;
        o->block = r->block = rnd_int(1, 70);
        o->window_blocks = r->window_blocks = 2 * rnd_int(0, 2) + 1;
        o->global_blocks = r->global_blocks = rnd_int(0, 2);
        o->random_blocks = r->random_blocks = rnd_int(0, 4);
        break;
    default: {
        o->pattern = ATTN_SPARSE_BLOCKS;
        r->pattern = RM_SPARSE_BLOCKS;
        int64_t b = rnd_int(1, 70), nqb = (Lq + b - 1) / b, nkb = (Lk + b - 1) / b;
        o->block = r->block = b;
        *layout = rnd_mask(nqb * nkb, (int)rnd_int(5, 60));
        o->layout.rank = 2;
        o->layout.shape[0] = nqb;
        o->layout.shape[1] = nkb;
        o->layout.data = *layout;
        r->layout = *layout;
    }
    }
}

static const char *pattern_name(attn_pattern p)
{
    return p == ATTN_SPARSE_LOCAL_GLOBAL ? "local_global" : p == ATTN_SPARSE_BIGBIRD ? "bigbird"
                                                                                     : "blocks";
}

/* A named parameter of a set as doubles (NULL when absent). */
static double *param_d(const attn_param_set *set, const char *name, int64_t off, int64_t n)
{
    for (size_t i = 0; i < set->n; i++)
        if (!strcmp(set->items[i].name, name))
            return to_d(set->items[i].t.data + off, n);
    return NULL;
}

/* Multi-head with seeded parameters: the set's tensors into m. */
static void mha_params_d(const attn_param_set *set, int64_t E, int64_t ekv, int64_t kd,
                         int64_t vd, rm_request *m, double **own)
{
#define TAKE(f, x) (own[n] = (x), m->f = own[n], n++)
    int n = 0;
    int wset = 0;
    for (size_t i = 0; i < set->n; i++)
        wset |= !strcmp(set->items[i].name, "W_q.weight");
    if (wset) {
        TAKE(Wq, param_d(set, "W_q.weight", 0, E * E));
        TAKE(bq, param_d(set, "W_q.bias", 0, E));
        TAKE(Wk, param_d(set, "W_k.weight", 0, ekv * kd));
        TAKE(bk, param_d(set, "W_k.bias", 0, ekv));
        TAKE(Wv, param_d(set, "W_v.weight", 0, ekv * vd));
        TAKE(bv, param_d(set, "W_v.bias", 0, ekv));
        TAKE(Wo, param_d(set, "W_o.weight", 0, E * E));
        TAKE(bo, param_d(set, "W_o.bias", 0, E));
    } else {
        TAKE(Wq, param_d(set, "in_proj_weight", 0, E * E));
        TAKE(Wk, param_d(set, "in_proj_weight", E * E, E * E));
        TAKE(Wv, param_d(set, "in_proj_weight", 2 * E * E, E * E));
        TAKE(bq, param_d(set, "in_proj_bias", 0, E));
        TAKE(bk, param_d(set, "in_proj_bias", E, E));
        TAKE(bv, param_d(set, "in_proj_bias", 2 * E, E));
        TAKE(Wo, param_d(set, "out_proj.weight", 0, E * E));
        TAKE(bo, param_d(set, "out_proj.bias", 0, E));
    }
    TAKE(norm_w, param_d(set, "norm.weight", 0, E));
    TAKE(norm_b, param_d(set, "norm.bias", 0, E));
    own[n] = NULL;
#undef TAKE
}

/* One random multi-head request, linear or (with pattern) sparse. */
static void random_mha(int it, int linear, attn_pattern pattern)
{
    static const int64_t heads[][2] = {{1, 1}, {2, 2}, {2, 1}, {4, 2}, {4, 4}, {3, 1}};
    int hc = (int)(next_u() % 6);
    int64_t H = heads[hc][0], Hkv = heads[hc][1], hd = rnd_int(1, 9), E = H * hd;
    int64_t B = rnd_int(1, 2), Lq = rnd_len(), Lk = rnd_len();
    int self = Lq == Lk && next_u() % 2;
    float *q = rnd_floats(B * Lq * E, 1.0f), *k = rnd_floats(B * Lk * E, 1.0f);
    float *v = rnd_floats(B * Lk * E, 1.0f);
    uint8_t *km = rnd_mask(B * Lk, 80);
    attn_mha_request r = attn_mha_request_default();
    r.query = tensor3(1, B, Lq, E, q);
    if (!self) {
        r.key = tensor3(1, B, Lk, E, k);
        r.value = tensor3(1, B, Lk, E, v);
    }
    r.num_heads = H;
    r.num_kv_heads = Hkv;
    r.linear = linear;
    r.average_weights = (int)(next_u() % 2);
    r.residual_norm = (int)(next_u() % 2);
    r.opt.need_weights = (int)(next_u() % 2);
    r.opt.causal = (int)(next_u() % 2);
    r.opt.align = next_u() % 2 ? ATTN_ALIGN_BOTTOM_RIGHT : ATTN_ALIGN_TOP_LEFT;
    if (!linear)
        r.opt.align = ATTN_ALIGN_TOP_LEFT; /* the pipeline's: not computed yet */
    r.opt.feature_map = linear && next_u() % 2 ? ATTN_FM_RELU : ATTN_FM_ELU;
    if (next_u() % 2) {
        r.opt.key_mask.rank = 2;
        r.opt.key_mask.shape[0] = B;
        r.opt.key_mask.shape[1] = Lk;
        r.opt.key_mask.data = km;
    }
    int64_t globals[4];
    uint8_t *layout = NULL;
    rm_sparsity rsp;
    memset(&rsp, 0, sizeof rsp);
    if (pattern != ATTN_SPARSE_NONE) {
        rnd_pattern(Lq, Lk, &r.opt.sparsity, &rsp, globals, &layout);
        r.opt.seed = next_u();
    }
    attn_param_set *set = NULL;
    attn_error e;
    char name[200];
    snprintf(name, sizeof name,
             "random multihead %s #%d (B %lld, H %lld, Hkv %lld, E %lld, Lq %lld, Lk %lld%s%s%s%s%s)",
             linear ? "linear" : "sparse", it, (long long)B, (long long)H, (long long)Hkv,
             (long long)E, (long long)Lq, (long long)Lk, self ? ", self" : "",
             r.opt.causal ? (r.opt.align ? ", causal bottom_right" : ", causal top_left") : "",
             r.opt.key_mask.rank ? ", key_mask" : "", r.average_weights ? ", averaged" : "",
             r.residual_norm ? ", residual_norm" : "");
    attn_status st = attn_mha_seed_params(&r, 11 + (uint64_t)it, &set, &e);
    check(st == ATTN_OK, name, "seeding: ", e.message);
    if (st != ATTN_OK)
        return;
    r.params = set->items;
    r.n_params = set->n;

    rm_request m;
    memset(&m, 0, sizeof m);
    m.rule = RM_MULTIHEAD;
    m.B = B; m.Lq = Lq; m.Lk = Lk; m.Dq = m.Dk = m.Dv = E;
    m.H = H; m.Hkv = Hkv;
    double *dq = to_d(q, B * Lq * E), *dk = to_d(self ? q : k, B * Lk * E);
    double *dv = to_d(self ? q : v, B * Lk * E);
    m.query = dq; m.key = dk; m.value = dv;
    double *own[16];
    mha_params_d(set, E, Hkv * hd, E, E, &m, own);
    m.linear = linear;
    m.feature_map = r.opt.feature_map == ATTN_FM_RELU ? RM_FM_RELU : RM_FM_ELU;
    m.average_weights = r.average_weights;
    m.residual_norm = r.residual_norm;
    m.causal = r.opt.causal;
    m.align = r.opt.align == ATTN_ALIGN_BOTTOM_RIGHT ? RM_BOTTOM_RIGHT : RM_TOP_LEFT;
    m.key_mask = r.opt.key_mask.rank ? km : NULL;
    m.key_mask_rank = r.opt.key_mask.rank;
    m.sparsity = rsp;
    m.seed = r.opt.seed;
    int64_t nw = (r.average_weights ? 1 : H) * B * Lq * Lk;
    double *ro = malloc(sizeof(double) * (size_t)(B * Lq * E));
    double *rw = malloc(sizeof(double) * (size_t)nw);
    attn_shapes sh;
    float *out, *w;
    st = run_mha(&r, &sh, &out, &w, &e);
    int ref = rm_compute(&m, ro, rw, NULL, NULL);
    check(st == ATTN_OK && ref == 0, name, "computes: ", st == ATTN_OK ? "reference failed" : e.message);
    if (st == ATTN_OK && ref == 0) {
        compare(name, "output", out, ro, B * Lq * E);
        if (r.opt.need_weights)
            compare(name, "weights", w, rw, nw);
    }
    for (int i = 0; own[i]; i++)
        free(own[i]);
    attn_param_set_free(set);
    free(out); free(w); free(q); free(k); free(v); free(km); free(layout);
    free(dq); free(dk); free(dv); free(ro); free(rw);
}

/* The library's block layout against the reference: bigbird and blocks
 * exactly; local_global's summary against the expanded pattern (a block
 * is on exactly when it holds an allowed pair). */
static void check_layout(const char *name, const attn_options *o, const rm_sparsity *r,
                         int64_t Lq, int64_t Lk, const attn_shapes *sh)
{
    int64_t nqb = sh->layout_rows, nkb = sh->layout_cols, b = sh->layout_block;
    uint8_t *got = calloc((size_t)(nqb * nkb + 1), 1), *dense = malloc((size_t)(Lq * Lk));
    attn_error e;
    attn_status st = attn_sparsity_layout(o, Lq, Lk, got, &e);
    check(st == ATTN_OK && b >= 1 && nqb == (Lq + b - 1) / b && nkb == (Lk + b - 1) / b, name,
          "layout: ", st == ATTN_OK ? "shape" : e.message);
    rm_sparsity_expand(r, Lq, Lk, o->align ? RM_BOTTOM_RIGHT : RM_TOP_LEFT, o->seed, dense, NULL);
    int same = st == ATTN_OK;
    for (int64_t qb = 0; same && qb < nqb; qb++)
        for (int64_t kb = 0; same && kb < nkb; kb++) {
            int any = 0;
            for (int64_t i = qb * b; i < Lq && i < (qb + 1) * b; i++)
                for (int64_t j = kb * b; j < Lk && j < (kb + 1) * b; j++)
                    any |= dense[i * Lk + j];
            same = got[qb * nkb + kb] == any;
        }
    check(same, name, "layout differs from the expanded pattern", NULL);
    free(got);
    free(dense);
}


/* r without its sparsity pattern and with the pattern's dense (Lq, Lk)
 * expansion as its mask instead: the same request on the library's dense
 * path. */
static attn_request dense_twin(const attn_request *r, const uint8_t *dense, int64_t Lq, int64_t Lk)
{
    attn_request dr = *r;
    memset(&dr.opt.sparsity, 0, sizeof dr.opt.sparsity);
    dr.opt.mask.rank = 2;
    dr.opt.mask.shape[0] = Lq;
    dr.opt.mask.shape[1] = Lk;
    dr.opt.mask.data = dense;
    return dr;
}

/* A window in one request of one_in, each side up to 90 keys or (one in
 * three) unbounded. */
static void rnd_window(attn_options *o, int one_in)
{
    if (next_u() % (uint64_t)one_in == 0) {
        o->has_window = 1;
        o->window_left = next_u() % 3 ? rnd_int(0, 90) : -1;
        o->window_right = next_u() % 3 ? rnd_int(0, 90) : -1;
    }
}

/* The reference's request for rule request r (B batch rows, Lq queries,
 * Lk keys, D and Dv features): the rule, the sizes, the data in double
 * (ref_free frees it), causal, seed, align, softcap and the window. */
static void ref_from(const attn_request *r, int64_t B, int64_t Lq, int64_t Lk, int64_t D,
                     int64_t Dv, rm_request *m)
{
    memset(m, 0, sizeof *m);
    m->rule = r->rule == ATTN_RULE_DOT ? RM_DOT : RM_SCALED_DOT;
    m->B = B; m->Lq = Lq; m->Lk = Lk; m->Dq = m->Dk = D; m->Dv = Dv;
    m->query = to_d(r->query.data, B * Lq * D);
    m->key = to_d(r->key.data, B * Lk * D);
    m->value = to_d(r->value.data, B * Lk * Dv);
    m->causal = r->opt.causal;
    m->seed = r->opt.seed;
    m->align = r->opt.align ? RM_BOTTOM_RIGHT : RM_TOP_LEFT;
    m->softcap = r->opt.softcap;
    m->has_window = r->opt.has_window;
    m->left = r->opt.window_left;
    m->right = r->opt.window_right;
}

static void ref_free(rm_request *m)
{
    free((void *)m->query);
    free((void *)m->key);
    free((void *)m->value);
}
/* One random sparse request of dot or scaled_dot: against rm_compute,
 * and against the library's dense attention with the expanded mask. */
static void random_sparse(int it)
{
    int batched = (int)(next_u() % 2);
    int64_t B = batched ? rnd_int(1, 2) : 1, Lq = rnd_len() * 2, Lk = rnd_len() * 2;
    int64_t D = rnd_int(1, 24), Dv = rnd_int(1, 24), globals[4];
    float *q = rnd_floats(B * Lq * D, 1.5f), *k = rnd_floats(B * Lk * D, 1.5f);
    float *v = rnd_floats(B * Lk * Dv, 1.0f);
    uint8_t *km = rnd_mask(B * Lk, 85), *mk = rnd_mask(Lq * Lk, 90), *layout;
    attn_request r = attn_request_default(next_u() % 2 ? ATTN_RULE_SCALED_DOT : ATTN_RULE_DOT);
    r.query = tensor3(batched, B, Lq, D, q);
    r.key = tensor3(batched, B, Lk, D, k);
    r.value = tensor3(batched, B, Lk, Dv, v);
    r.opt.causal = next_u() % 3 == 0;
    r.opt.need_weights = (int)(next_u() % 2);
    r.opt.seed = next_u();
    /* the score pipeline's options around the pattern */
    r.opt.align = next_u() % 2 ? ATTN_ALIGN_BOTTOM_RIGHT : ATTN_ALIGN_TOP_LEFT;
    float sink = (float)rnd_int(-3, 3);
    if (next_u() % 4 == 0) {
        r.opt.sinks = &sink;
        r.opt.n_sinks = 1;
    }
    if (next_u() % 4 == 0)
        r.opt.softcap = 2.0f;
    rnd_window(&r.opt, 5);
    int extra = (int)(next_u() % 4); /* 1: key_mask, 2: mask, 3: top_k (the row driver) */
    if (extra == 1) {
        r.opt.key_mask.rank = 1;
        r.opt.key_mask.shape[0] = Lk;
        r.opt.key_mask.data = km;
    } else if (extra == 2) {
        r.opt.mask.rank = 2;
        r.opt.mask.shape[0] = Lq;
        r.opt.mask.shape[1] = Lk;
        r.opt.mask.data = mk;
    } else if (extra == 3) {
        r.opt.hard = ATTN_HARD_TOPK;
        r.opt.top_k = rnd_int(1, Lk < 4 ? Lk : 4);
    }
    rm_request m;
    ref_from(&r, B, Lq, Lk, D, Dv, &m);
    rnd_pattern(Lq, Lk, &r.opt.sparsity, &m.sparsity, globals, &layout);
    double sink_d = sink;
    m.sinks = r.opt.sinks ? &sink_d : NULL;
    m.key_mask = extra == 1 ? km : NULL;
    m.key_mask_rank = extra == 1;
    m.mask = extra == 2 ? mk : NULL;
    m.mask_rank = extra == 2 ? 2 : 0;
    m.hard = extra == 3 ? RM_HARD_TOPK : RM_HARD_NONE;
    m.top_k = r.opt.top_k;
    double *ro = malloc(sizeof(double) * (size_t)(B * Lq * Dv));
    double *rw = malloc(sizeof(double) * (size_t)(B * Lq * Lk));
    char name[240];
    snprintf(name, sizeof name,
             "random sparse #%d (%s %s, B %lld, Lq %lld, Lk %lld, D %lld, Dv %lld, window %lld, "
             "%zu globals, block %lld, window_blocks %lld, global_blocks %lld, random_blocks "
             "%lld%s%s%s%s%s%s%s)",
             it, attn_rule_name(r.rule), pattern_name(r.opt.sparsity.pattern), (long long)B,
             (long long)Lq, (long long)Lk, (long long)D, (long long)Dv,
             (long long)r.opt.sparsity.window, r.opt.sparsity.n_global,
             (long long)r.opt.sparsity.block, (long long)r.opt.sparsity.window_blocks,
             (long long)r.opt.sparsity.global_blocks, (long long)r.opt.sparsity.random_blocks,
             r.opt.causal ? ", causal" : "",
             extra == 1 ? ", key_mask" : extra == 2 ? ", mask" : extra == 3 ? ", top_k" : "",
             r.opt.need_weights ? ", weights" : "", r.opt.align ? ", bottom_right" : "",
             r.opt.sinks ? ", sink" : "", r.opt.softcap > 0 ? ", softcap" : "",
             r.opt.has_window ? ", window pair" : "");
    attn_shapes sh;
    attn_error e;
    float *out, *w;
    rm_margin mg;
    attn_status st = run_rule(&r, &sh, &out, &w, &e);
    int ref = rm_compute(&m, ro, rw, NULL, &mg);
    if (extra == 3 && !(mg.hard_gap > 1e-5)) {
        n_skip++; /* a near tie: float32 may keep another key */
    } else {
        check(st == ATTN_OK && ref == 0, name, "computes: ",
              st == ATTN_OK ? "reference failed" : e.message);
        if (st == ATTN_OK && ref == 0) {
            compare(name, "output", out, ro, B * Lq * Dv);
            if (r.opt.need_weights)
                compare(name, "weights", w, rw, B * Lq * Lk);
        }
    }
    if (st == ATTN_OK) {
        check_layout(name, &r.opt, &m.sparsity, Lq, Lk, &sh);
        /* the same through the library's dense path: the pattern (and the
         * request's mask) expanded into a mask */
        uint8_t *dense = malloc((size_t)(Lq * Lk));
        rm_sparsity_expand(&m.sparsity, Lq, Lk, m.align, r.opt.seed, dense, NULL);
        for (int64_t e2 = 0; extra == 2 && e2 < Lq * Lk; e2++)
            dense[e2] &= mk[e2];
        attn_request dr = dense_twin(&r, dense, Lq, Lk);
        float *dout, *dw;
        attn_shapes dsh;
        st = run_rule(&dr, &dsh, &dout, &dw, &e);
        check(st == ATTN_OK, name, "dense with the expanded mask: ", e.message);
        if (st == ATTN_OK) {
            double *want = malloc(sizeof(double) * (size_t)(B * Lq * Dv));
            for (int64_t x = 0; x < B * Lq * Dv; x++)
                want[x] = dout[x];
            compare(name, "output = dense with the expanded mask", out, want, B * Lq * Dv);
            free(want);
        }
        free(dout); free(dw); free(dense);
    }
    free(out); free(w); free(q); free(k); free(v); free(km); free(mk); free(layout);
    ref_free(&m); free(ro); free(rw);
}

/* Hard attention (argmax, top_k, sample) with a random pattern, which the
 * row driver scores over the allowed keys only: against rm_compute given
 * the pattern expanded into a dense mask and no pattern (so the same keys
 * kept and drawn as the dense definition; rows whose choice lies within
 * the reference's margin of another are skipped), and bit for bit against
 * the library's own dense path with that mask: the same weights, and for
 * argmax and sample the same output (one value row). */
static void random_hard_sparse(int it)
{
    int64_t B = rnd_int(1, 2), Lq = rnd_len() * 2, Lk = rnd_len() * 2, globals[4];
    int64_t D = rnd_int(1, 24), Dv = rnd_int(1, 24);
    float *q = rnd_floats(B * Lq * D, 1.5f), *k = rnd_floats(B * Lk * D, 1.5f);
    float *v = rnd_floats(B * Lk * Dv, 1.0f);
    uint8_t *km = rnd_mask(B * Lk, 85), *layout;
    static const attn_hard hards[] = {ATTN_HARD_ARGMAX, ATTN_HARD_TOPK, ATTN_HARD_SAMPLE};
    static const rm_hard rm_hards[] = {RM_HARD_ARGMAX, RM_HARD_TOPK, RM_HARD_SAMPLE};
    attn_request r = attn_request_default(next_u() % 2 ? ATTN_RULE_SCALED_DOT : ATTN_RULE_DOT);
    r.query = tensor3(1, B, Lq, D, q);
    r.key = tensor3(1, B, Lk, D, k);
    r.value = tensor3(1, B, Lk, Dv, v);
    r.opt.causal = next_u() % 3 == 0;
    r.opt.need_weights = (int)(next_u() % 2);
    r.opt.seed = next_u();
    r.opt.align = next_u() % 2 ? ATTN_ALIGN_BOTTOM_RIGHT : ATTN_ALIGN_TOP_LEFT;
    r.opt.hard = hards[it % 3];
    r.opt.top_k = rnd_int(1, Lk < 5 ? Lk : 5);
    r.opt.temperature = next_u() % 3 ? 1.0f : (float)rnd_int(1, 8) / 4.0f;
    if (next_u() % 4 == 0)
        r.opt.softcap = 2.0f;
    rnd_window(&r.opt, 4);
    int keys = next_u() % 3 == 0;
    if (keys) {
        r.opt.key_mask.rank = 2;
        r.opt.key_mask.shape[0] = B;
        r.opt.key_mask.shape[1] = Lk;
        r.opt.key_mask.data = km;
    }
    rm_sparsity rs;
    rnd_pattern(Lq, Lk, &r.opt.sparsity, &rs, globals, &layout);
    uint8_t *dense = malloc((size_t)(Lq * Lk));
    rm_request m;
    ref_from(&r, B, Lq, Lk, D, Dv, &m);
    rm_sparsity_expand(&rs, Lq, Lk, m.align, r.opt.seed, dense, NULL);
    m.key_mask = keys ? km : NULL;
    m.key_mask_rank = keys ? 2 : 0;
    m.mask = dense;
    m.mask_rank = 2;
    m.hard = rm_hards[it % 3];
    m.top_k = r.opt.top_k;
    m.temperature = r.opt.temperature;
    double *ro = malloc(sizeof(double) * (size_t)(B * Lq * Dv));
    double *rw = malloc(sizeof(double) * (size_t)(B * Lq * Lk));
    char name[240];
    snprintf(name, sizeof name,
             "hard sparse #%d (%s, %s, B %lld, Lq %lld, Lk %lld, D %lld, Dv %lld, window %lld, "
             "%zu globals, block %lld%s%s%s%s%s%s)",
             it, r.opt.hard == ATTN_HARD_ARGMAX ? "argmax" : r.opt.hard == ATTN_HARD_TOPK ? "top_k"
                                                                                       : "sample",
             pattern_name(r.opt.sparsity.pattern), (long long)B, (long long)Lq, (long long)Lk,
             (long long)D, (long long)Dv, (long long)r.opt.sparsity.window,
             r.opt.sparsity.n_global, (long long)r.opt.sparsity.block,
             r.opt.causal ? ", causal" : "", keys ? ", key_mask" : "",
             r.opt.need_weights ? ", weights" : "", r.opt.align ? ", bottom_right" : "",
             r.opt.softcap > 0 ? ", softcap" : "", r.opt.has_window ? ", window pair" : "");
    attn_shapes sh;
    attn_error e;
    float *out, *w;
    rm_margin mg;
    attn_status st = run_rule(&r, &sh, &out, &w, &e);
    int ref = rm_compute(&m, ro, rw, NULL, &mg);
    check(st == ATTN_OK && ref == 0, name, "computes: ",
          st == ATTN_OK ? "reference failed" : e.message);
    if (!(mg.hard_gap > 1e-5 && mg.sample_gap > 1e-5)) {
        n_skip++; /* a near tie: float32 may keep or draw another key */
    } else if (st == ATTN_OK && ref == 0) {
        compare(name, "output = reference with the expanded mask", out, ro, B * Lq * Dv);
        if (r.opt.need_weights)
            compare(name, "weights = reference with the expanded mask", w, rw, B * Lq * Lk);
    }
    attn_request dr = dense_twin(&r, dense, Lq, Lk);
    float *dout, *dw;
    attn_shapes dsh;
    attn_status dst = run_rule(&dr, &dsh, &dout, &dw, &e);
    check(dst == ATTN_OK, name, "dense with the expanded mask: ", e.message);
    if (st == ATTN_OK && dst == ATTN_OK) {
        int same_w = !r.opt.need_weights ||
                     memcmp(w, dw, sizeof(float) * (size_t)(B * Lq * Lk)) == 0;
        check(same_w, name, "weights differ in some bit from the dense path's", NULL);
        if (r.opt.hard != ATTN_HARD_TOPK)
            check(memcmp(out, dout, sizeof(float) * (size_t)(B * Lq * Dv)) == 0, name,
                  "output differs in some bit from the dense path's", NULL);
    }
    free(out); free(w); free(dout); free(dw); free(q); free(k); free(v); free(km); free(layout);
    free(dense); ref_free(&m); free(ro); free(rw);
}

/* ------------------------------------------------------------- golden */

/* Fields of the score pipeline another part of the library computes: a
 * golden case refused for one of them is skipped, not failed. */
static int pipeline_field(const char *field)
{
    static const char *const f[] = {"align", "window", "softcap", "alibi", "sinks", "rope",
                                    "hard", "positional_encoding", "pos_embedding.weight", NULL};
    for (int i = 0; f[i]; i++)
        if (!strncmp(field, f[i], strlen(f[i])))
            return 1;
    return 0;
}

static attn_tensor gt(const golden_tensor *t)
{
    attn_tensor a;
    memset(&a, 0, sizeof a);
    if (!t)
        return a;
    a.rank = t->rank;
    for (int i = 0; i < t->rank; i++)
        a.shape[i] = t->shape[i];
    a.data = t->f;
    return a;
}

/* gt's rank and shape, with the mask's bytes. */
static attn_mask gm(const golden_tensor *t)
{
    attn_tensor shape = gt(t);
    attn_mask a;
    memset(&a, 0, sizeof a);
    a.rank = shape.rank;
    memcpy(a.shape, shape.shape, sizeof a.shape);
    a.data = t ? t->m : NULL;
    return a;
}

/* The golden case's options into o (globals: room for 64 indices). */
static void golden_options(const golden_case *c, attn_options *o, int64_t *globals)
{
    const char *s;
    o->mask = gm(golden_get(c, GOLDEN_MASK, "mask"));
    o->key_mask = gm(golden_get(c, GOLDEN_MASK, "key_mask"));
    o->bias = gt(golden_get(c, GOLDEN_TENSOR, "bias"));
    o->causal = golden_opt_int(c, "causal", 0) != 0;
    s = golden_opt(c, "align");
    o->align = s && !strcmp(s, "bottom_right") ? ATTN_ALIGN_BOTTOM_RIGHT : ATTN_ALIGN_TOP_LEFT;
    if ((s = golden_opt(c, "window")) != NULL) {
        o->has_window = 1;
        mc_window(s, &o->window_left, &o->window_right);
    }
    if ((s = golden_opt(c, "softcap")) != NULL)
        o->softcap = strtof(s, NULL);
    const golden_tensor *t;
    if ((t = golden_get(c, GOLDEN_TENSOR, "alibi")) != NULL) {
        o->alibi = 1;
        o->alibi_slopes = t->f;
        o->n_alibi_slopes = t->count;
    } else if (golden_opt_int(c, "alibi", 0)) {
        o->alibi = 1;
    }
    if ((t = golden_get(c, GOLDEN_TENSOR, "sinks")) != NULL) {
        o->sinks = t->f;
        o->n_sinks = t->count;
    }
    if (golden_opt_int(c, "rope", 0))
        o->rope.on = 1;
    if ((s = golden_opt(c, "hard")) != NULL) {
        double temperature = 1.0;
        rm_hard h = mc_hard(s, &o->top_k, &temperature);
        o->hard = h == RM_HARD_ARGMAX ? ATTN_HARD_ARGMAX
                : h == RM_HARD_TOPK ? ATTN_HARD_TOPK
                : h == RM_HARD_SAMPLE ? ATTN_HARD_SAMPLE : ATTN_HARD_NONE;
        if (h == RM_HARD_SAMPLE)
            o->temperature = (float)temperature;
    }
    o->seed = golden_opt(c, "seed") ? strtoull(golden_opt(c, "seed"), NULL, 10) : 0;
    o->need_weights = golden_opt_int(c, "need_weights", 1) != 0;
    s = golden_opt(c, "feature_map");
    o->feature_map = s && !strcmp(s, "relu") ? ATTN_FM_RELU : ATTN_FM_ELU;
    rm_sparsity rs;
    memset(&rs, 0, sizeof rs);
    if (mc_sparsity(c, &rs, globals)) {
        mc_lib_sparsity(&rs, &o->sparsity);
        o->sparsity.layout = gm(golden_get(c, GOLDEN_MASK, "sparsity.layout"));
    }
}

/* The parameters the case gives (values or splitmix64 draws). */
static size_t golden_params(const golden_case *c, attn_named *p, size_t room)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_tensors && n < room; i++)
        if (c->tensors[i].kind == GOLDEN_PARAM) {
            p[n].name = c->tensors[i].name;
            p[n++].t = gt(&c->tensors[i]);
        }
    return n;
}

/* Compares a computed result with the case's expectation of that name. */
static void golden_expect(const golden_case *c, const char *what, const float *got, int64_t n)
{
    const golden_tensor *t = golden_get(c, GOLDEN_EXPECT, what);
    if (!t)
        return;
    if (t->count != n) {
        check(0, c->name, "expected a result of another size: ", what);
        return;
    }
    double *want = to_d(t->f, n);
    compare(c->name, what, got, want, n);
    free(want);
}

static int in_scope(const golden_case *c)
{
    const char *a = golden_opt(c, "attention");
    return golden_opt(c, "sparsity") || !strcmp(c->rule, "linear") || (a && !strcmp(a, "linear"));
}

static void golden_run(const char *path)
{
    golden_case c;
    char err[512];
    if (golden_load(path, &c, err, sizeof err) != 0) {
        check(0, path, err, NULL);
        return;
    }
    if (!in_scope(&c)) {
        golden_free(&c);
        return;
    }
    int64_t globals[64];
    attn_named params[16];
    size_t np = golden_params(&c, params, 16);
    attn_shapes sh;
    attn_error e;
    memset(&e, 0, sizeof e);
    float *out = NULL, *w = NULL;
    attn_status st;
    int need_weights;
    attn_param_set *set = NULL;
    if (!strcmp(c.rule, "multihead")) {
        attn_mha_request r = attn_mha_request_default();
        r.query = gt(golden_get(&c, GOLDEN_TENSOR, "query"));
        r.key = gt(golden_get(&c, GOLDEN_TENSOR, "key"));
        r.value = gt(golden_get(&c, GOLDEN_TENSOR, "value"));
        r.num_heads = golden_opt_int(&c, "num_heads", 1);
        r.num_kv_heads = golden_opt_int(&c, "num_kv_heads", 0);
        r.average_weights = golden_opt_int(&c, "average_weights", 0) != 0;
        r.residual_norm = golden_opt_int(&c, "residual_norm", 0) != 0;
        const char *a = golden_opt(&c, "attention"), *pe = golden_opt(&c, "positional_encoding");
        r.linear = a && !strcmp(a, "linear");
        r.positional_encoding = !pe ? ATTN_PE_NONE
                              : !strcmp(pe, "sinusoidal") ? ATTN_PE_SINUSOIDAL : ATTN_PE_LEARNED;
        golden_options(&c, &r.opt, globals);
        r.params = params;
        r.n_params = np;
        if (np == 0 && golden_opt(&c, "seed") &&
            attn_mha_seed_params(&r, r.opt.seed, &set, &e) == ATTN_OK) {
            r.params = set->items;
            r.n_params = set->n;
        }
        need_weights = r.opt.need_weights;
        st = run_mha(&r, &sh, &out, &w, &e);
    } else {
        attn_rule rule = ATTN_RULE_DOT;
        attn_rule_from_name(c.rule, &rule);
        attn_request r = attn_request_default(rule);
        r.query = gt(golden_get(&c, GOLDEN_TENSOR, "query"));
        r.key = gt(golden_get(&c, GOLDEN_TENSOR, "key"));
        r.value = gt(golden_get(&c, GOLDEN_TENSOR, "value"));
        const char *s = golden_opt(&c, "scale");
        if (s) {
            r.has_scale = 1;
            r.scale = strtof(s, NULL);
        }
        golden_options(&c, &r.opt, globals);
        r.params = params;
        r.n_params = np;
        need_weights = r.opt.need_weights;
        st = run_rule(&r, &sh, &out, &w, &e);
    }
    if (st != ATTN_OK && pipeline_field(e.field)) {
        n_skip++;
        printf("SKIPPED %s: %s (%s)\n", c.name, e.field, e.message);
    } else {
        check(st == ATTN_OK, c.name, "computes: ", e.message);
        if (st == ATTN_OK) {
            golden_expect(&c, "output", out, sh.out_count);
            if (need_weights)
                golden_expect(&c, "weights", w, sh.w_count);
        }
    }
    attn_param_set_free(set);
    free(out);
    free(w);
    golden_free(&c);
}

/* Hostile sizes in a pattern that allows everything (a window, block
 * counts or a block size near INT64_MAX): no overflow, and the answer of
 * the library's dense attention. */
static void hostile_patterns(void)
{
    int64_t Lq = 37, Lk = 70, D = 8, globals[1] = {69};
    float *q = rnd_floats(Lq * D, 1.0f), *k = rnd_floats(Lk * D, 1.0f), *v = rnd_floats(Lk * D, 1.0f);
    attn_request r = attn_request_default(ATTN_RULE_DOT);
    r.query = tensor3(0, 1, Lq, D, q);
    r.key = tensor3(0, 1, Lk, D, k);
    r.value = tensor3(0, 1, Lk, D, v);
    r.opt.align = ATTN_ALIGN_BOTTOM_RIGHT;
    attn_shapes sh;
    attn_error e;
    float *dout, *dw, *out, *w;
    attn_status st = run_rule(&r, &sh, &dout, &dw, &e);
    double *want = to_d(dout, Lq * D), *wantw = to_d(dw, Lq * Lk);
    for (int c = 0; c < 5; c++) {
        attn_sparsity *sp = &r.opt.sparsity;
        memset(sp, 0, sizeof *sp);
        sp->window_blocks = 3;
        sp->global_blocks = 2;
        sp->random_blocks = 3;
        sp->block = 5;
        const char *what[5] = {"local_global window INT64_MAX", "bigbird window_blocks INT64_MAX",
                               "bigbird global_blocks INT64_MAX", "bigbird random_blocks INT64_MAX",
                               "bigbird block INT64_MAX"};
        if (c == 0) {
            sp->pattern = ATTN_SPARSE_LOCAL_GLOBAL;
            sp->window = INT64_MAX;
            sp->global = globals;
            sp->n_global = 1;
        } else {
            sp->pattern = ATTN_SPARSE_BIGBIRD;
            if (c == 1) sp->window_blocks = INT64_MAX;
            if (c == 2) sp->global_blocks = INT64_MAX;
            if (c == 3) sp->random_blocks = INT64_MAX;
            if (c == 4) sp->block = INT64_MAX;
        }
        char name[120];
        snprintf(name, sizeof name, "hostile pattern: %s", what[c]);
        attn_status s2 = run_rule(&r, &sh, &out, &w, &e);
        check(st == ATTN_OK && s2 == ATTN_OK, name, "computes: ", e.message);
        if (st == ATTN_OK && s2 == ATTN_OK) {
            compare(name, "output = dense", out, want, Lq * D);
            compare(name, "weights = dense", w, wantw, Lq * Lk);
        }
        free(out);
        free(w);
    }
    free(dout); free(dw); free(want); free(wantw); free(q); free(k); free(v);
}

/* ------------------------------------------------------------- main */

static void run_random(void)
{
    for (int it = 0; it < 60; it++)
        random_linear(it);
    for (int it = 0; it < 20; it++)
        random_mha(it, 1, ATTN_SPARSE_NONE);
    for (int it = 0; it < 60; it++)
        random_sparse(it);
    for (int it = 0; it < 60; it++)
        random_hard_sparse(it);
    for (int it = 0; it < 20; it++)
        random_mha(it, 0, ATTN_SPARSE_LOCAL_GLOBAL);
    hostile_patterns();
}

int main(int argc, char **argv)
{
    char **paths;
    int n = mc_list(argc > 1 ? argv[1] : NULL, &paths);
    if (n == 0)
        return 1;
    const char *env = getenv("ATTN_ISA");
    static const char *const isas[] = {"avx512bf16", "avx512", "avx2", "generic"};
    for (int k = 0; k < 3; k++) {
        if (env && *env && strcmp(env, isas[k]) != 0)
            continue;
        if (attn_kernels_use(isas[k]) != 0) {
            printf("SKIPPED: instruction set %s (this CPU lacks it)\n", isas[k]);
            n_skip++;
            continue;
        }
        isa_now = isas[k];
        for (threads_now = 1; threads_now <= 2; threads_now++) {
            for (int i = 0; i < n; i++)
                golden_run(paths[i]);
            rng = 88172645463325252ull + (uint64_t)threads_now;
            run_random();
        }
    }
    golden_list_free(paths, n);
    printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
    return n_fail ? 1 : 0;
}
