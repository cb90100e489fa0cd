/* ours.h - this library's side of every compared row, through its public calls only (lib/attn.h). */
#ifndef BENCH_OURS_H
#define BENCH_OURS_H

#include "attn.h"

#define BENCH_E 512
#define BENCH_H 8
#define BENCH_D (BENCH_E / BENCH_H)

/* The attention core: 8 heads of 64 as a batch, query (H, Lq, 64), key and
 * value (H, Lk, 64), output (H, Lq, 64); weights (H, Lq, Lk) when w is not
 * NULL. attn_compute with the scaled_dot rule. Exits on failure. */
void ours_core(attn_ctx *ctx, int64_t lq, int64_t lk, const float *q, const float *k,
               const float *v, float *o, float *w, int causal);

/* nn.MultiheadAttention(512, 8) self-attention on x (1, L, 512) with the
 * parameters attn_mha_seed_params(seed 1) makes; attn_mha_compute, no
 * weights. ours_mha_params makes them (free with attn_param_set_free). */
attn_param_set *ours_mha_params(int64_t l, const float *x);
void ours_mha(attn_ctx *ctx, int64_t l, const float *x, const attn_param_set *ps, float *out);

/* (1, L, H*64) head-interleaved <-> (H, L, 64) head-major. */
void ours_to_heads(int64_t l, const float *ble, float *hld);
void ours_from_heads(int64_t l, const float *hld, float *ble);

#endif /* BENCH_OURS_H */
