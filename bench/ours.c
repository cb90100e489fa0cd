/* ours.c - this library's side of every compared row, through its public calls only (lib/attn.h). */
#include "ours.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const attn_error *err)
{
    fprintf(stderr, "bench: %s: %s%s%s\n", what, err->field, err->field[0] ? ": " : "", err->message);
    exit(2);
}

static void core_in(attn_ctx *ctx, int64_t lq, int64_t lk, const float *q, const float *k,
                    const float *v, float *o, float *w, int causal, attn_precision p)
{
    attn_request r = attn_request_default(ATTN_RULE_SCALED_DOT);
    r.opt.precision = p;
    r.query = (attn_tensor){3, {BENCH_H, lq, BENCH_D, 0}, q};
    r.key = (attn_tensor){3, {BENCH_H, lk, BENCH_D, 0}, k};
    r.value = (attn_tensor){3, {BENCH_H, lk, BENCH_D, 0}, v};
    r.opt.need_weights = w != NULL;
    r.opt.causal = causal;
    attn_error err;
    memset(&err, 0, sizeof err);
    if (attn_compute(ctx, &r, o, w, &err) != ATTN_OK) die("attn_compute", &err);
}

void ours_core(attn_ctx *ctx, int64_t lq, int64_t lk, const float *q, const float *k,
               const float *v, float *o, float *w, int causal)
{
    core_in(ctx, lq, lk, q, k, v, o, w, causal, ATTN_PRECISION_FP32);
}

void ours_core_bf16(attn_ctx *ctx, int64_t lq, int64_t lk, const float *q, const float *k,
                    const float *v, float *o, float *w, int causal)
{
    core_in(ctx, lq, lk, q, k, v, o, w, causal, ATTN_PRECISION_BF16);
}

/* Spread over the sequence (as task tokens would not be), so that no
 * block of queries holds them all. */
const int64_t ours_lg_global[OURS_LG_GLOBALS] = {0, 8191, 16384, 24577};

void ours_long(attn_ctx *ctx, ours_kind kind, int64_t heads, int64_t l, const float *q,
               const float *k, const float *v, float *o, int causal)
{
    attn_request r = attn_request_default(kind == OURS_LINEAR ? ATTN_RULE_LINEAR
                                                              : ATTN_RULE_SCALED_DOT);
    r.query = (attn_tensor){3, {heads, l, BENCH_D, 0}, q};
    r.key = (attn_tensor){3, {heads, l, BENCH_D, 0}, k};
    r.value = (attn_tensor){3, {heads, l, BENCH_D, 0}, v};
    r.opt.need_weights = 0;
    r.opt.causal = causal;
    if (kind == OURS_LOCAL_GLOBAL) {
        r.opt.sparsity.pattern = ATTN_SPARSE_LOCAL_GLOBAL;
        r.opt.sparsity.window = OURS_LG_WINDOW;
        r.opt.sparsity.global = ours_lg_global;
        r.opt.sparsity.n_global = OURS_LG_GLOBALS;
    }
    attn_error err;
    memset(&err, 0, sizeof err);
    if (attn_compute(ctx, &r, o, NULL, &err) != ATTN_OK) die("attn_compute", &err);
}

double ours_lg_pairs(int64_t l)
{
    double pairs = 0.0;
    for (int64_t i = 0; i < l; i++) {
        int global = 0;
        int64_t lo = i - OURS_LG_WINDOW < 0 ? 0 : i - OURS_LG_WINDOW;
        int64_t hi = i + OURS_LG_WINDOW >= l ? l - 1 : i + OURS_LG_WINDOW;
        double n = (double)(hi - lo + 1);
        for (int g = 0; g < OURS_LG_GLOBALS; g++) {
            int64_t x = ours_lg_global[g];
            global |= x == i;
            n += x < lo || x > hi; /* a global key outside the band */
        }
        pairs += global ? (double)l : n;
    }
    return pairs;
}

static attn_mha_request mha_request(int64_t l, const float *x)
{
    attn_mha_request r = attn_mha_request_default();
    r.query = (attn_tensor){3, {1, l, BENCH_E, 0}, x};
    r.num_heads = BENCH_H;
    r.opt.need_weights = 0;
    return r;
}

attn_param_set *ours_mha_params(int64_t l, const float *x)
{
    attn_mha_request r = mha_request(l, x);
    attn_param_set *ps = NULL;
    attn_error err;
    memset(&err, 0, sizeof err);
    if (attn_mha_seed_params(&r, 1, &ps, &err) != ATTN_OK) die("attn_mha_seed_params", &err);
    return ps;
}

void ours_mha(attn_ctx *ctx, int64_t l, const float *x, const attn_param_set *ps, float *out)
{
    attn_mha_request r = mha_request(l, x);
    r.params = ps->items;
    r.n_params = ps->n;
    attn_error err;
    memset(&err, 0, sizeof err);
    if (attn_mha_compute(ctx, &r, out, NULL, &err) != ATTN_OK) die("attn_mha_compute", &err);
}

attn_mha_weights *ours_mha_prepare(int64_t l, const float *x, const attn_param_set *ps)
{
    attn_mha_request r = mha_request(l, x);
    r.params = ps->items;
    r.n_params = ps->n;
    attn_mha_weights *pw = NULL;
    attn_error err;
    memset(&err, 0, sizeof err);
    if (attn_mha_weights_new(&r, &pw, &err) != ATTN_OK) die("attn_mha_weights_new", &err);
    return pw;
}

void ours_mha_prepared(attn_ctx *ctx, int64_t l, const float *x, const float *k, const float *v,
                       const attn_mha_weights *pw, float *out)
{
    attn_mha_request r = mha_request(l, x);
    if (k) {
        r.key = (attn_tensor){3, {1, l, BENCH_E, 0}, k};
        r.value = (attn_tensor){3, {1, l, BENCH_E, 0}, v};
    }
    r.weights = pw;
    attn_error err;
    memset(&err, 0, sizeof err);
    if (attn_mha_compute(ctx, &r, out, NULL, &err) != ATTN_OK) die("attn_mha_compute", &err);
}

void ours_to_heads(int64_t l, const float *ble, float *hld)
{
    for (int64_t i = 0; i < l; i++)
        for (int h = 0; h < BENCH_H; h++)
            memcpy(hld + ((size_t)h * (size_t)l + (size_t)i) * BENCH_D,
                   ble + (size_t)i * BENCH_E + (size_t)h * BENCH_D, BENCH_D * sizeof(float));
}

void ours_from_heads(int64_t l, const float *hld, float *ble)
{
    for (int64_t i = 0; i < l; i++)
        for (int h = 0; h < BENCH_H; h++)
            memcpy(ble + (size_t)i * BENCH_E + (size_t)h * BENCH_D,
                   hld + ((size_t)h * (size_t)l + (size_t)i) * BENCH_D, BENCH_D * sizeof(float));
}
