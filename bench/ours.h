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
/* The same with precision bf16 (attn_options.precision). */
void ours_core_bf16(attn_ctx *ctx, int64_t lq, int64_t lk, const float *q, const float *k,
                    const float *v, float *o, float *w, int causal);

/* nn.MultiheadAttention(512, 8) self-attention on x (1, L, 512) with the
 * parameters attn_mha_seed_params(seed 1) makes; attn_mha_compute, no
 * weights. ours_mha_params makes them (free with attn_param_set_free).
 * ours_mha_prepare makes prepared weights of them (attn_mha_weights_new;
 * free with attn_mha_weights_free), which ours_mha_prepared runs with
 * instead: the weights kept ready across calls, as ONNX Runtime keeps a
 * graph's initializers. Exit on failure. */
attn_param_set *ours_mha_params(int64_t l, const float *x);
void ours_mha(attn_ctx *ctx, int64_t l, const float *x, const attn_param_set *ps, float *out);
attn_mha_weights *ours_mha_prepare(int64_t l, const float *x, const attn_param_set *ps);
/* ours_mha_prepared with k and v (1, L, 512) tensors too runs the same
 * module on three distinct inputs, as a request that sends all three
 * does; with k and v NULL, self-attention on x. */
void ours_mha_prepared(attn_ctx *ctx, int64_t l, const float *x, const float *k, const float *v,
                       const attn_mha_weights *pw, float *out);

/* Long sequences (bench_kernels --long): `heads` heads of 64 as a batch,
 * query, key and value (heads, L, 64), output (heads, L, 64), no weights:
 * the dense scaled_dot core, the same with the local_global pattern of
 * OURS_LG_WINDOW and the OURS_LG_GLOBALS global tokens of ours_lg_global,
 * or linear attention (rule linear, elu + 1). Exits on failure. */
typedef enum { OURS_DENSE, OURS_LOCAL_GLOBAL, OURS_LINEAR } ours_kind;
#define OURS_LG_WINDOW 256
#define OURS_LG_GLOBALS 4
extern const int64_t ours_lg_global[OURS_LG_GLOBALS];
void ours_long(attn_ctx *ctx, ours_kind kind, int64_t heads, int64_t l, const float *q,
               const float *k, const float *v, float *o, int causal);

/* The (query, key) pairs of one L x L head the local_global pattern
 * allows. */
double ours_lg_pairs(int64_t l);

/* (1, L, H*64) head-interleaved <-> (H, L, 64) head-major. */
void ours_to_heads(int64_t l, const float *ble, float *hld);
void ours_from_heads(int64_t l, const float *hld, float *ble);

#endif /* BENCH_OURS_H */
