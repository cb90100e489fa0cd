/* internal.h - declarations shared by the models layer's files (models/ only). */
#ifndef MDL_INTERNAL_H
#define MDL_INTERNAL_H

#include <stdarg.h>
#include "mdl.h"

#define MDL_MAX_LAYERS 8
#define MDL_NAMED 6 /* library parameters of one multi-head block */

typedef struct {
    const float *w_ih, *w_hh, *b_ih, *b_hh; /* (3H, in), (3H, H), (3H), (3H) */
} mdl_gru_w;

typedef struct {
    attn_named self[MDL_NAMED], cross[MDL_NAMED]; /* in_proj_*, out_proj.*, norm.* */
    const float *l1w, *l1b, *l2w, *l2b;           /* (F, E), (F), (E, F), (E) */
    const float *nw, *nb;                         /* the feed-forward's LayerNorm */
} mdl_layer;

struct mdl_model {
    mdl_info info;
    mdl_st_file st;
    const float *emb;       /* (V, E) */
    /* seq2seq */
    mdl_gru_w enc, dec;
    attn_named att[4];      /* the rule's library parameters */
    size_t n_att;
    const float *comb_w, *comb_b; /* additive, general: (H, E + H), (H) */
    const float *out_b;     /* seq2seq: the output layer's bias (V); weight = emb */
    /* transformer */
    mdl_layer el[MDL_MAX_LAYERS], dl[MDL_MAX_LAYERS];
    float *pe;              /* (max_pos, E), owned */
    float emb_scale;        /* sqrt(E) as float32 */
};

/* Per-translation state of the decoder, for up to K live hypotheses. */
typedef struct {
    const mdl_model *m;
    attn_ctx *ctx;
    int n_src, K, max_steps;
    const int32_t *src;
    float *mem;     /* encoder outputs (n_src or max_src rows, E) */
    float *enc_w;   /* transformer: encoder attention (L, H, n_src, n_src) */
    float *h, *h2;  /* GRU: (K, H) states and the reorder buffer */
    float *cache, *cache2; /* transformer, recompute: (K, L, max_steps, E) layer inputs */
    float *kc, *vc, *kc2, *vc2; /* transformer, KV cache: (L, K, H, max_steps, d) projected keys, values */
    float *xk, *xv;        /* transformer: (L, H, n_src, d) projected memory keys, values */
    int recompute;         /* transformer: decoder through attn_mha_compute, no KV cache */
    float *work;    /* scratch */
    size_t work_n;
    char *err;
    size_t errn;
    attn_status lib_st;    /* a library call's failure (mdl_lib_fail), else ATTN_OK */
} mdl_run;

int mdl_fail(char *err, size_t errn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int mdl_lib_fail(mdl_run *r, const char *what, attn_status st, const attn_error *ae);

/* Y (N, out) = X (N, in) W^T + b (b may be NULL). */
void mdl_linear(const float *X, int N, int in, const float *W, const float *b, int out, float *Y);
/* x (N, E) = LayerNorm(x + d) with weight w, bias b, eps 1e-5, in place. */
void mdl_add_norm(float *x, const float *d, int N, int E, const float *w, const float *b);
/* x (N, E) = LayerNorm(x + linear2(relu(linear1(x)))) of layer y; scratch (N, F + E). */
void mdl_ffn(const mdl_model *m, const mdl_layer *y, float *x, int N, float *scratch);
/* One PyTorch GRU step for N rows: h (N, H) <- GRU(x (N, in), h). scratch: 6 N H floats. */
void mdl_gru_step(const mdl_gru_w *g, const float *x, int N, int in, int H, float *h, float *scratch);
/* log-softmax of a row of n floats, in place (float32, as torch.log_softmax). */
void mdl_log_softmax(float *x, int n);

/* Decoder steps (gru.c, tfm.c). start: encoder; step: for the N live
 * hypotheses in slots 0..N-1, whose last ids are last[], at output position
 * t, writes logits (N, V) and each slot's attention row (row_floats(t)
 * floats each, at rows + k * row_floats(t)); reorder: slot k <- parent[k]. */
int64_t mdl_row_floats(const mdl_run *r, int t);
int mdl_gru_start(mdl_run *r);
int mdl_gru_step_all(mdl_run *r, int N, const int32_t *last, int t, float *logits, float *rows);
void mdl_gru_reorder(mdl_run *r, const int *parent, int N);
int mdl_tfm_start(mdl_run *r);
int mdl_tfm_step_all(mdl_run *r, int N, const int32_t *last, int t, float *logits, float *rows);
void mdl_tfm_reorder(mdl_run *r, const int *parent, int N, int t);
/* The KV-cached decoder (tfm_kv.c): start after the encoder, step, reorder. */
void mdl_kv_start(mdl_run *r);
int mdl_kv_step_all(mdl_run *r, int N, const int32_t *last, int t, float *logits, float *rows);
void mdl_kv_reorder(mdl_run *r, const int *parent, int N, int t);

#endif /* MDL_INTERNAL_H */
