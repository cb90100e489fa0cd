/* ref_modern.h - a plain double-precision reference for the modern attention
 * options: the whole score pipeline (softcap, bias, ALiBi, masks with
 * alignment, window pairs and sparsity, softmax with a sink, hard argmax /
 * top_k / sample), rotary embeddings, learned positional encodings, sparse
 * patterns and linear attention; the tests' oracle for lib/.
 *
 * Written from the service contract, not from lib/, and independent of
 * lib/attn.h: requests are described by the plain struct rm_request below
 * (double arrays, explicit sizes), so a test converts whatever the library's
 * request looks like into one. Every sum is accumulated in double in index
 * order; loops are the formulas as written; nothing is blocked, fused or
 * vectorised. It trusts its input (call it on requests a validator
 * accepted). tests/test_modern_ref.c checks it against the PyTorch golden
 * vectors in tests/golden_modern/.
 *
 * ------------------------------------------------------------------------
 * Draws from the request's seed (a spec for lib/attn.h to adopt verbatim)
 *
 * The generator is SplitMix64 (Steele, Lea, Flood 2014), the one already
 * used for seeded parameters:
 *     state += 0x9E3779B97F4A7C15;  z = state;
 *     z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
 *     z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
 *     next() = z ^ (z >> 31)
 * Its n-th output (n = 0, 1, ...) from seed s is the mix of
 * s + (n + 1) * 0x9E3779B97F4A7C15 (mod 2^64), so any draw can be reached
 * directly (rm_splitmix64_at). Hard sampling, BigBird's random blocks and the
 * seeded parameters each start their own stream at the request's seed
 * (default 0); none of them consumes numbers of another.
 *
 * 1. hard: {"sample": {"temperature": T}} (T > 0, default 1).
 *    Rows are numbered n = (b * H + h) * Lq + i (batch b, head h of H query
 *    heads, query row i; H = 1 for /attention, concat included); in packed
 *    sequences (cu_seqlens_q) n = h * total_q + cu_seqlens_q[s] + i, the
 *    order of their lse (H, total_q). Row n uses
 *    x = the n-th output of SplitMix64(seed), whether or not the row has any
 *    key to attend (so a row's draw never depends on masks or on other rows):
 *      u = (x >> 11) * 2^-53                        a double in [0, 1)
 *      m = the largest final score s_j over the row's allowed keys
 *          (s after softcap, bias and ALiBi: the scores the softmax sees)
 *      e_j = exp((s_j - m) / T) for allowed j, 0 otherwise (= w_j^(1/T) up to
 *          a common factor; a sink's share is dropped)
 *      total = e_0 + e_1 + ... + e_{Lk-1}, summed in double in index order
 *      the chosen key is the first allowed j whose running sum
 *          e_0 + ... + e_j (the same additions, in the same order) is
 *          greater than u * total.
 *    Since the last running sum is total itself and u < 1, a key is always
 *    chosen; a key whose e_j underflows to 0 is never chosen. The weights
 *    are one-hot at that key; a row with no allowed key stays all zero.
 *
 * 2. sparsity: {"pattern": "bigbird", "block": b, "window_blocks": W (odd),
 *    "global_blocks": G, "random_blocks": R}. nqb = ceil(Lq/b) query blocks,
 *    nkb = ceil(Lk/b) key blocks; one layout for the whole request (every
 *    batch element and head), built query block by query block, qb = 0, 1,
 *    ..., from one stream SplitMix64(seed):
 *      qb < G: every key block; no draws.
 *      otherwise: key blocks kb < G, and kb in [qb - (W-1)/2, qb + (W-1)/2]
 *        clipped to [0, nkb) (the window is centred on key block qb; `align`
 *        does not move it); then the key blocks not yet allowed, in
 *        increasing order, c[0..n-1]; r = min(R, n); for t = 0 .. r-1:
 *            x = next() >> 32                        (32 bits)
 *            j = t + ((x * (n - t)) >> 32)           (in [t, n), 64-bit math)
 *            swap c[t] and c[j]
 *        (a partial Fisher-Yates shuffle, exactly r draws); c[0..r-1] are
 *        allowed too.
 *    Token (i, j) is allowed when layout[i / b][j / b] is.
 *
 * 3. positional_encoding: "learned" without params: pos_embedding.weight
 *    (P, E) with P = max(Lq, Lk), normal(0, 1) as nn.Embedding, drawn after
 *    the projection parameters from the same stream (norm.* draw nothing),
 *    row-major, two draws per value (Box-Muller, cosine branch):
 *      u1 = ((next() >> 11) + 1) * 2^-53               in (0, 1]
 *      u2 = (next() >> 11) * 2^-53                     in [0, 1)
 *      value = (float)(sqrt(-2 log u1) * cos(2 pi u2)) computed in double.
 *    (log and cos come from the C library, so the last bit of a value may
 *    differ between platforms; everything else above is exact integer or
 *    exact double arithmetic.)
 * ------------------------------------------------------------------------
 */
#ifndef REF_MODERN_H
#define REF_MODERN_H

#include <stddef.h>
#include <stdint.h>

/* SplitMix64: advances *state and returns the next output. */
uint64_t rm_splitmix64(uint64_t *state);

/* The n-th (0-based) output of SplitMix64 started at seed, by a jump. */
uint64_t rm_splitmix64_at(uint64_t seed, uint64_t n);

/* Fills n floats with the Box-Muller normals of spec item 3. */
void rm_normal_fill(uint64_t *state, float *dst, int64_t n);

/* The ALiBi paper's slopes for H heads (its code's get_slopes): for H a
 * power of two 2^(-8h/H), h = 1..H; otherwise the slopes of n =
 * 2^floor(log2 H), then the 1st, 3rd, 5th... slopes of 2n, H - n of them. */
void rm_alibi_slopes(int64_t H, double *slopes);

typedef enum { RM_TOP_LEFT = 0, RM_BOTTOM_RIGHT } rm_align;
typedef enum { RM_HARD_NONE = 0, RM_HARD_ARGMAX, RM_HARD_TOPK, RM_HARD_SAMPLE } rm_hard;
typedef enum { RM_ROPE_HALF = 0, RM_ROPE_INTERLEAVED } rm_rope_style;
typedef enum { RM_FM_ELU = 0, RM_FM_RELU } rm_feature_map;
typedef enum {
    RM_SPARSE_NONE = 0,
    RM_SPARSE_LOCAL_GLOBAL, /* Longformer: |i' - j| <= window, or i or j global */
    RM_SPARSE_BIGBIRD,      /* BigBird ITC: spec item 2 */
    RM_SPARSE_BLOCKS        /* a given block layout */
} rm_pattern;

/* Rotary embedding (RoFormer). Pair k < d/2 (d = dims, or the head dim when
 * dims is 0) turns by pos * base^(-2k/d): (a, b) -> (a cos t - b sin t,
 * a sin t + b cos t); "half" pairs (k, k + d/2) (GPT-NeoX), "interleaved"
 * (2k, 2k+1) (GPT-J); features past d pass unchanged. */
typedef struct {
    int on;
    double base;         /* 10000 by default */
    rm_rope_style style;
    int64_t dims;        /* 0 = the head dim */
    int64_t offset;      /* added to every position */
} rm_rope;

/* Rotates L rows of x in place: row p holds D features at x + p * stride
 * and sits at position pos0 + p. */
void rm_rope_apply(const rm_rope *r, double *x, int64_t L, int64_t D, int64_t stride,
                   int64_t pos0);

typedef struct {
    rm_pattern pattern;
    int64_t window;          /* local_global */
    const int64_t *global;   /* local_global: token indices */
    size_t n_global;
    int64_t block;           /* bigbird, blocks */
    int64_t window_blocks;   /* bigbird */
    int64_t global_blocks;
    int64_t random_blocks;
    const uint8_t *layout;   /* blocks: (ceil(Lq/b), ceil(Lk/b)), nonzero = allowed */
} rm_sparsity;

/* The BigBird layout of spec item 2 into layout (nqb x nkb bytes, 0/1). */
void rm_bigbird_layout(int64_t nqb, int64_t nkb, int64_t window_blocks, int64_t global_blocks,
                       int64_t random_blocks, uint64_t seed, uint8_t *layout);

/* The pattern as a dense (Lq, Lk) 0/1 mask; for bigbird and blocks also the
 * block layout into layout (when not NULL; ceil(Lq/b) x ceil(Lk/b)). */
void rm_sparsity_expand(const rm_sparsity *sp, int64_t Lq, int64_t Lk, rm_align align,
                        uint64_t seed, uint8_t *dense, uint8_t *layout);

/* How close a hard choice came to going the other way: hard_gap, for argmax
 * and top_k, the smallest difference between the last kept and the first
 * dropped allowed score over rows, relative to the row's largest |score|
 * (or to the request's hard_gap_floor when that is larger); sample_gap, the
 * smallest distance of u * total to either end of the chosen key's
 * interval, relative to total. +inf when there was no such choice. A
 * float32 implementation agrees with the reference on the chosen keys only
 * when these are well above its rounding (say > 1e-5). norm_gain, with
 * residual_norm: the largest factor by which the LayerNorm magnifies a
 * relative error of its input, max|x| * max|gamma| / sqrt(var + eps) over
 * rows (large when a row's values are nearly equal); 0 otherwise. */
typedef struct {
    double hard_gap;
    double sample_gap;
    double norm_gain;
} rm_margin;

/* Steps 2-7 of the pipeline for one head, after the rule's raw scores. */
typedef struct {
    int64_t Lq, Lk;
    rm_align align;          /* i' = i (top-left) or i + Lk - Lq (bottom-right) */
    int causal;              /* j <= i' */
    int has_window;          /* i' - left <= j <= i' + right */
    int64_t left, right;     /* -1 = unbounded side */
    double softcap;          /* > 0: s = c tanh(s / c); 0 = off */
    int has_alibi;
    double alibi_slope;      /* s -= slope * |i' - j| */
    int has_sink;
    double sink;             /* the sink logit z */
    rm_hard hard;
    int64_t top_k;
    double gap_floor;        /* hard_gap relative to at least this (rm_margin) */
    double temperature;      /* sample */
    uint64_t seed;           /* sample: row i draws output draw_base + i */
    uint64_t draw_base;
    const uint8_t *mask;     /* (Lq, Lk) or NULL */
    const uint8_t *key_mask; /* (Lk) or NULL */
    const double *bias;      /* (Lq, Lk) or NULL */
    const uint8_t *sparse;   /* (Lq, Lk) expanded pattern or NULL */
    double *lse;             /* (Lq) or NULL: each row's ln(sum_j e^x_j + e^z) over
                              * its allowed keys' final scores x and the sink z
                              * (-inf with neither) */
} rm_head;

/* s: the rule's raw scores (Lq, Lk); v: (Lk, Dv). Writes the weights w
 * (Lq, Lk) and the output o (Lq, Dv); folds the head's margins into *m
 * (minimum with what is there). */
void rm_head_softmax(const rm_head *h, const double *s, const double *v, int64_t Dv,
                     double *w, double *o, rm_margin *m);

/* Linear attention for one head (Katharopoulos et al. 2020), in its explicit
 * form: a_ij = phi(q_i).phi(k_j) over allowed keys (key_mask, causal with
 * align), O_i = sum_j a_ij v_j / (sum_j a_ij + 1e-6), w_ij = a_ij /
 * (sum_j a_ij + 1e-6); phi = elu + 1 or relu. q (Lq, D), k (Lk, D), v (Lk, Dv);
 * w may be NULL. */
void rm_linear_head(int64_t Lq, int64_t Lk, int64_t D, int64_t Dv, const double *q,
                    const double *k, const double *v, const uint8_t *key_mask, int causal,
                    rm_align align, rm_feature_map fm, double *w, double *o);

/* ------------------------------------------------------------ a request */

typedef enum {
    RM_DOT = 0, RM_SCALED_DOT, RM_GENERAL, RM_ADDITIVE, RM_CONCAT_TANH, RM_CONCAT,
    RM_LINEAR,    /* /attention/linear */
    RM_MULTIHEAD  /* /multihead (softmax, or linear with .linear set) */
} rm_rule;

typedef enum { RM_PE_NONE = 0, RM_PE_SINUSOIDAL, RM_PE_LEARNED } rm_posenc;

/* A whole request, batched (B = 1 for a request without a batch
 * dimension). Arrays are row-major doubles; NULL = absent. */
typedef struct {
    rm_rule rule;
    int64_t B, Lq, Lk;   /* Lk: key rows; concat: the value rows Lv (its keys have Lq rows) */
    int64_t Dq, Dk, Dv;  /* multi-head: E, kdim, vdim */
    const double *query, *key, *value;

    /* Rule parameters, PyTorch state_dict layouts:
     *   general      W1 attn.weight (Dq,Dk), b1 attn.bias (Dq) or NULL
     *   additive     W1 query_proj.weight (Dh,Dq), W2 key_proj.weight (Dh,Dk),
     *                b2 key_proj.bias (Dh), vw v.weight (1,Dh)
     *   concat_tanh  W1 attn.weight (Dh,Dq+Dk), b1 attn.bias (Dh)
     *   concat       W1 att_weight.weight (Lv,Dq+Dk), b1 (Lv), W2 out.weight
     *                (Dout,Dq+Dv), b2 out.bias (Dout) */
    const double *W1, *b1, *W2, *b2, *vw;
    int64_t Dh, Dout;

    /* Multi-head: Wq (E,E), Wk (Hkv*E/H,kdim), Wv (Hkv*E/H,vdim), Wo (E,E),
     * biases optional; pos_table (P,E) for learned encodings. The rules
     * with heads (H > 0): query (B, H, Lq, Dq), key and value (B, Hkv, Lk,
     * .), query head h reading key/value head h / (H / Hkv); output (B, H,
     * Lq, Dout), weights (B, H, Lq, Lk); a mask of rank 4 is (B, H, Lq, Lk),
     * alibi and sinks one per query head. H = 0: no head dimension. */
    int64_t H, Hkv;
    const double *Wq, *bq, *Wk, *bk, *Wv, *bv, *Wo, *bo, *norm_w, *norm_b;
    int residual_norm, average_weights;
    rm_posenc posenc;
    const double *pos_table;
    int64_t P;
    int linear;               /* multi-head: linear attention per head */
    rm_feature_map feature_map;

    /* Options. mask and bias: rank 2 (Lq,Lk), 3 (B,Lq,Lk), for the rules
     * with heads (H,Lq,Lk), or 4 (B,H,Lq,Lk); B is 1 when its one_batch is
     * set and H is 1 when its one_head is (that plane serves every batch
     * row or head); key_mask rank 1 (Lk) or 2 (B,Lk). */
    int has_scale;
    double scale;
    const uint8_t *mask;
    int mask_rank, mask_one_batch, mask_one_head;
    const uint8_t *key_mask;
    int key_mask_rank;
    const double *bias;
    int bias_rank, bias_one_batch, bias_one_head;
    int causal;
    rm_align align;
    int has_window;
    int64_t left, right;      /* -1 = unbounded */
    double softcap;           /* 0 = off */
    const double *alibi;      /* H slopes (rm_alibi_slopes for `true`), or NULL */
    const double *sinks;      /* H sink logits, or NULL */
    rm_rope rope;
    rm_hard hard;
    int64_t top_k;
    double hard_gap_floor;    /* see rm_margin; 0 = relative to the largest |score| */
    double temperature;
    uint64_t seed;
    uint64_t draw_offset;     /* added to every row's number n (a packed sequence's
                               * head h: h total_q + its first row, spec item 1) */
    rm_sparsity sparsity;
    double *lse;              /* output, or NULL: (B, H, Lq) rows' log-sum-exp (rm_head) */
} rm_request;

/* Output (B, Lq, Dout): Dout = Dv for the score rules and linear, req->Dout
 * for concat, E for multi-head. Weights (when w is not NULL): (B, Lq, Lk),
 * multi-head (B, H, Lq, Lk) or, averaged, (B, Lq, Lk). layout (when not NULL
 * and the pattern is bigbird or blocks) receives the block layout. *m (when
 * not NULL) receives the hard-choice margins. Returns 0, or -1 when
 * something needed is missing or out of memory. */
int rm_compute(const rm_request *req, double *out, double *w, uint8_t *layout, rm_margin *m);

#endif /* REF_MODERN_H */
