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

void ours_core(attn_ctx *ctx, int64_t lq, int64_t lk, const float *q, const float *k,
               const float *v, float *o, float *w, int causal)
{
    attn_request r = attn_request_default(ATTN_RULE_SCALED_DOT);
    r.query = (attn_tensor){3, {BENCH_H, lq, BENCH_D, 0}, q};
    r.key = (attn_tensor){3, {BENCH_H, lk, BENCH_D, 0}, k};
    r.value = (attn_tensor){3, {BENCH_H, lk, BENCH_D, 0}, v};
    r.opt.need_weights = w != NULL;
    r.opt.causal = causal;
    attn_error err;
    memset(&err, 0, sizeof err);
    if (attn_compute(ctx, &r, o, w, &err) != ATTN_OK) die("attn_compute", &err);
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
