/* attn.h - the attention kernel library: seven attention rules (dot,
 * scaled_dot, general, additive, concat_tanh, concat, linear) and multi-head
 * attention with grouped/multi-query heads, float32, batched or not, with
 * masks, hard attention and seeded parameters.
 *
 * This is the library's only public header; it knows nothing of HTTP or
 * JSON. Each rule's formula is given below (attn_rule_describe returns it
 * as text too); masks and options are described with attn_options;
 * multi-head follows torch.nn.MultiheadAttention(batch_first=True), and
 * PyTorch's semantics are followed wherever this header is silent. The
 * project's README.md (section "The library") shows the calls in use, and
 * openapi.yaml describes the HTTP service built on them field by field.
 *
 * How a call runs:
 *   1. Fill an attn_request (or attn_mha_request) with borrowed tensors.
 *   2. attn_plan (attn_mha_plan) validates it and gives the result shapes
 *      and the call's cost (parameter floats, FLOPs, workspace bytes), so
 *      a caller can refuse a request before any work or allocation.
 *   3. The caller allocates the output (and weights) buffers.
 *   4. attn_compute (attn_mha_compute) computes with an attn_ctx: the
 *      context owns the workspace the computation carves its scratch from
 *      and the threads it runs on.
 *
 * Conventions for every call below:
 *   - Tensors are dense, row-major float32. The library never frees or keeps
 *     a pointer to a caller's tensor beyond the call that receives it.
 *   - A tensor or mask with rank 0 is "absent".
 *   - Output buffers are given by the caller; attn_plan / attn_mha_plan say
 *     how many floats they must hold.
 *   - Every call that can fail returns an attn_status and, when err is not
 *     NULL, fills err->field (the offending request field, e.g. "key" or
 *     "params.attn.weight") and err->message (what was wrong and what was
 *     expected), worded for an API user so a server can pass them on as is.
 *     On ATTN_OK err is left as it was. Nothing aborts; every product of
 *     sizes is overflow-checked.
 *   - Calls are thread-safe except that one attn_ctx must not be used by two
 *     threads at once.
 *   - Output and weights buffers must not overlap any input.
 *   - Structs: take attn_request, attn_mha_request, attn_options and the
 *     others from their *_default() function and set fields by name, since
 *     a later version may add fields. attn_tensor, attn_mask and attn_named
 *     keep their layout, so positional initialisers of them are safe.
 *
 * Versions: ATTN_VERSION_MAJOR changes whenever a struct's layout, an
 * enumerator's value or a function's type does; it is the shared library's
 * SONAME (libattn.so.MAJOR), and make test-install holds the structs'
 * layout, the enums' values and the functions' types to
 * tests/abi_layout.txt for it. The shared library exports the functions
 * declared here and nothing else.
 */
#ifndef ATTN_H
#define ATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: what this header declares is
 * its whole interface. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define ATTN_VERSION_MAJOR 1
#define ATTN_VERSION_MINOR 9
#define ATTN_VERSION_PATCH 0

/* The version the library was built as, "MAJOR.MINOR.PATCH": compare it
 * with the ATTN_VERSION_* a program was compiled with. */
const char *attn_version(void);

#define ATTN_MAX_RANK 4

/* ---------------------------------------------------------------- status */

typedef enum {
    ATTN_OK = 0,
    ATTN_ERR_SHAPE,     /* shapes that do not fit the rule */
    ATTN_ERR_PARAM,     /* a bad option or parameter value */
    ATTN_ERR_TOO_LARGE, /* a size that overflows or cannot be allocated */
    ATTN_ERR_NOMEM,     /* out of memory for scratch space */
    ATTN_ERR_ARG,       /* a programming error by the caller (NULL pointer, ...) */
    ATTN_ERR_TIMEOUT,   /* the context's time limit passed (attn_ctx_set_time_limit) */
    ATTN_ERR_CANCELLED  /* for an interrupt to return: the caller gave the call up */
} attn_status;

/* A static English word for a status ("ok", "shape mismatch", ...). */
const char *attn_status_str(attn_status st);

typedef struct {
    char field[64];    /* request field at fault, "" when none */
    char message[320]; /* what was wrong and what was expected */
} attn_error;

/* out = a * b for sizes; returns 0 and leaves *out untouched on overflow
 * (either factor negative counts as overflow). Shapes from the network must
 * be multiplied with this. */
int attn_size_mul(int64_t a, int64_t b, int64_t *out);

/* --------------------------------------------------------------- tensors */

/* A borrowed view of a float32 tensor. rank 0 means absent. */
typedef struct {
    int rank;
    int64_t shape[ATTN_MAX_RANK];
    const float *data;
} attn_tensor;

/* A borrowed view of a boolean mask, one byte per element, nonzero = true =
 * may attend. rank 0 means absent. */
typedef struct {
    int rank;
    int64_t shape[ATTN_MAX_RANK];
    const uint8_t *data;
} attn_mask;

/* A named parameter: the name is a PyTorch state_dict key ("attn.weight"). */
typedef struct {
    const char *name;
    attn_tensor t;
} attn_named;

/* A set of parameters owned by the library (see attn_seed_params).
 * items[i].name and items[i].t.data stay valid until attn_param_set_free. */
typedef struct {
    size_t n;
    attn_named *items;
} attn_param_set;

/* Frees a set made by the library; NULL is a no-op. */
void attn_param_set_free(attn_param_set *set);

/* ----------------------------------------------------------------- rules */

/* The rules. Each scores query row i against key row j (per batch row),
 * the weights are a softmax over j of the scores after masking (see
 * attn_options), and output row i is sum_j w[i][j] v_j; concat differs as
 * noted. Parameter names are those of the PyTorch modules the rules come
 * from (their state_dict keys), with the shapes of attn_rule_describe:
 *   dot          S = q_i . k_j                          (Dk = Dq)
 *   scaled_dot   S = (q_i . k_j) * scale, default 1/sqrt(Dk) (Dk = Dq)
 *   general      S = q_i . (W k_j + b)                  attn.weight (Dq,Dk), attn.bias (Dq)
 *   additive     S = v . tanh(Wq q_i + Wk k_j + bk)     query_proj.weight (Dh,Dq),
 *                    key_proj.weight (Dh,Dk), key_proj.bias (Dh), v.weight (1,Dh)
 *   concat_tanh  S = sum_h tanh(W [q_i; k_j] + b)_h      attn.weight (Dh,Dq+Dk), attn.bias (Dh)
 *   concat       one decoder step per query row: w_i = softmax(att_weight([q_i; k_i]))
 *                over the Lv value rows (Lk = Lq), c_i = sum_j w_i[j] v_j,
 *                output o_i = out([q_i; c_i])           att_weight.weight (Lv,Dq+Dk),
 *                    att_weight.bias (Lv), out.weight (Dout,Dq+Dv), out.bias (Dout)
 *   linear       no softmax (Katharopoulos et al. 2020): with phi = elu + 1 or
 *                relu (opt.feature_map), o_i = phi(q_i)^T sum_j phi(k_j) v_j^T /
 *                (phi(q_i) . sum_j phi(k_j) + 1e-6) over the keys key_mask and
 *                causal (with align) allow, in O(L Dk Dv); no scaling before
 *                phi; the weights (when asked) are the implied
 *                a_ij = phi(q_i).phi(k_j) / (sum_j' phi(q_i).phi(k_j') + 1e-6).
 *                mask, window, bias, softcap, alibi, sinks, hard, sparsity and
 *                rope have no linear-time form: ATTN_ERR_PARAM  (Dk = Dq)
 * Biases are optional (zero when absent); weights are all or none. */
typedef enum {
    ATTN_RULE_DOT = 0,
    ATTN_RULE_SCALED_DOT,
    ATTN_RULE_GENERAL,     /* Luong */
    ATTN_RULE_ADDITIVE,    /* Bahdanau */
    ATTN_RULE_CONCAT_TANH,
    ATTN_RULE_CONCAT,      /* seq2seq decoder step */
    ATTN_RULE_LINEAR,      /* linear attention (Katharopoulos et al. 2020) */
    ATTN_RULE_COUNT
} attn_rule;

/* The rule's name ("scaled_dot"), or NULL when out of range. */
const char *attn_rule_name(attn_rule rule);

/* Looks a rule up by its name: 1 with *out set when found, else 0. */
int attn_rule_from_name(const char *name, attn_rule *out);

/* Self-description of a rule, for a caller that lists the rules and their
 * parameters. All strings are static. */
typedef struct {
    const char *name;  /* "general" */
    const char *shape; /* "(Dq, Dk)" */
    int optional;      /* may be left out when the others are given */
} attn_param_info;

typedef struct {
    const char *name;        /* attn_rule_name's */
    const char *title;       /* "Luong general" */
    const char *formula;     /* the score, plain text */
    int needs_same_dim;      /* Dq must equal Dk */
    size_t n_params;
    const attn_param_info *params;
} attn_rule_info;

/* Static description of a rule, or NULL when out of range. */
const attn_rule_info *attn_rule_describe(attn_rule rule);

/* -------------------------------------------------------- masking options */

typedef enum {
    ATTN_HARD_NONE = 0,
    ATTN_HARD_ARGMAX, /* one-hot at the row's largest weight, ties: lowest index */
    ATTN_HARD_TOPK,   /* keep the top_k largest, renormalise; ties: lowest index */
    ATTN_HARD_SAMPLE  /* one key drawn per row from w^(1/temperature), see "Draws" */
} attn_hard;

/* Where the diagonal of causal, window and ALiBi sits: query row i is at
 * position i' = i (top-left, the default) or i' = i + Lk - Lq (bottom-right,
 * PyTorch's CausalVariant.LOWER_RIGHT and FlashAttention's convention; a
 * decode step with Lq = 1 needs it). */
typedef enum { ATTN_ALIGN_TOP_LEFT = 0, ATTN_ALIGN_BOTTOM_RIGHT } attn_align;

/* Rotary position embedding (RoFormer) of query and key rows: for
 * dot/scaled_dot on the raw rows, for multi-head after the projections, per
 * head. With d = dims (0: the head dim; even, <= head dim), pair k < d/2
 * turns by the angle pos * base^(-2k/d): (a, b) -> (a cos t - b sin t,
 * a sin t + b cos t). HALF pairs features (k, k + d/2) (GPT-NeoX, Hugging
 * Face Llama), INTERLEAVED pairs (2k, 2k+1) (GPT-J, Meta's Llama); features
 * past d pass unchanged. Query row i is at position i' + offset, key row j
 * at j + offset (align applies even without causal; bottom-right with
 * Lq > Lk gives negative query positions, turned like any other). Other
 * rules: ATTN_ERR_PARAM naming "rope", and naming "rope.dims", "rope.offset",
 * "rope.base" or "rope.style" for odd or too large dims, an offset outside
 * [0, ATTN_ROPE_MAX_OFFSET], a base <= 0 or an unknown style. The cos and sin
 * of each position are computed in double and kept in the context
 * (attn_ctx), so a decode loop recomputes only its new positions. Past
 * 2^31 the angle pos * base^(-2k/d), rounded to double, is off by more than
 * float32's precision, so an answer that in exact arithmetic does not depend
 * on the offset would start to; hence the bound. */
#define ATTN_ROPE_MAX_OFFSET INT64_C(2147483647) /* 2^31 - 1 */
typedef enum { ATTN_ROPE_HALF = 0, ATTN_ROPE_INTERLEAVED } attn_rope_style;

typedef struct {
    int on;
    float base;            /* > 0; 10000 by default */
    attn_rope_style style;
    int64_t dims;          /* 0: the head dim */
    int64_t offset;        /* added to every position, 0..ATTN_ROPE_MAX_OFFSET */
} attn_rope;

/* Sparse attention: a pattern that is exactly one more boolean mask AND-ed
 * with the others, computed so that blocks with nothing allowed cost
 * nothing: the time grows with the allowed pairs, not with Lq x Lk, and no
 * Lq x Lk buffer is made unless weights are asked for (dense, zero outside
 * the pattern). For dot, scaled_dot and multi-head (ATTN_ERR_PARAM
 * "sparsity" elsewhere); bad values are ATTN_ERR_PARAM naming the member
 * ("sparsity.window", "sparsity.global", "sparsity.block",
 * "sparsity.window_blocks", ..., "sparsity.layout"). A global index marks
 * query row i when i < Lq and key j when j < Lk; it must be below
 * max(Lq, Lk). Hard attention (argmax, top_k, sample) with a pattern runs
 * row by row, each row scoring only the keys the pattern allows it (its
 * cost grows with the allowed pairs too), with the answers, draws included,
 * of the dense definition: a key outside the pattern has weight 0 and is
 * never drawn. */
typedef enum {
    ATTN_SPARSE_NONE = 0,
    ATTN_SPARSE_LOCAL_GLOBAL, /* Longformer: |i' - j| <= window, or query i or key j global */
    ATTN_SPARSE_BIGBIRD,      /* BigBird ITC blocks: global, window and seeded random blocks */
    ATTN_SPARSE_BLOCKS        /* a given block layout */
} attn_pattern;

typedef struct {
    attn_pattern pattern;
    int64_t window;          /* local_global: >= 0 */
    const int64_t *global;   /* local_global: token indices (queries i and keys j), n_global of them */
    size_t n_global;
    int64_t block;           /* bigbird, blocks: block size b >= 1 (rows and columns) */
    int64_t window_blocks;   /* bigbird: odd >= 1 (default 3) */
    int64_t global_blocks;   /* bigbird: >= 0 (default 2) */
    int64_t random_blocks;   /* bigbird: >= 0 (default 3) */
    attn_mask layout;        /* blocks: (ceil(Lq/b), ceil(Lk/b)) */
} attn_sparsity;

/* The precision of the products (attn_options.precision).
 * ATTN_PRECISION_FP32 (the default): float32 throughout.
 * ATTN_PRECISION_BF16: query and key rows (after rope; for general the
 * keys W k_j + b; for multi-head after the projections), value rows and
 * the softmax probabilities of each key block (before they multiply V) are
 * rounded to bfloat16 (to nearest, ties to even), and their products are
 * summed in float32: s_ij = scale * sum_p bf16(q_ip) bf16(k_jp), then the
 * score pipeline in float32, o_i = sum_j bf16(p_ij) bf16(v_j) / l_i with
 * p_ij = exp(s_ij - m) and l_i = sum_j p_ij in float32 (FlashAttention-2's
 * bf16 arithmetic; this exponential is within 6e-6 relative of exp, far
 * below the up to 2^-8 relative of the rounding that follows, where
 * float32's is within 1e-7). Tensors in and out stay float32; weights,
 * when asked, are the float32 softmax of the scores the bfloat16 products
 * give (as lse is). The products run on AMX tiles where the CPU has
 * AMX-BF16 (and the kernel grants it), else with AVX512_BF16's vdpbf16ps,
 * else emulated in float32 with the same rounding: the answer then may
 * differ in the last bits (another summation order; the hardware flushes
 * subnormals). Error: against float64 on the rounded inputs, within
 * 2^-8 sum_j w_ij |v_jc| (the rounding of P); against the unrounded ones
 * it grows with the scores, which the rounding of q and k moves by up to
 * 2^-7 scale sum_p |q_ip k_jp| (the README's bf16 section measures it beside
 * PyTorch's bf16). Only where the flash kernel runs: rules dot,
 * scaled_dot, general and multi-head softmax attention, without hard
 * attention or sparsity; elsewhere ATTN_ERR_PARAM naming "precision". */
typedef enum { ATTN_PRECISION_FP32 = 0, ATTN_PRECISION_BF16 } attn_precision;

/* Where the heads sit in a rule's rank-4 query, key and value
 * (attn_options.qkv_layout), and so in its output. ATTN_QKV_BHSD (the
 * default): query (B, H, Lq, Dq), key (B, Hkv, Lk, Dk), value (B, Hkv,
 * Lk, Dv) and output (B, H, Lq, Dv), as torch's
 * scaled_dot_product_attention takes them. ATTN_QKV_BSHD: (B, Lq, H, Dq),
 * (B, Lk, Hkv, Dk), (B, Lk, Hkv, Dv) and (B, Lq, H, Dv), as
 * FlashAttention's flash_attn_func does; read and written in place (each
 * head's rows H D floats apart), with the same answers. Either way the
 * weights are (B, H, Lq, Lk), lse (B, H, Lq), mask and bias take the
 * shapes they take with BHSD, and sampling numbers rows (b H + h) Lq + i.
 * BSHD needs rank 4 (else ATTN_ERR_PARAM naming "qkv_layout"); multi-head
 * (whose input is (B, L, E)), packed sequences (already (total, H, D))
 * and the KV cache refuse it with ATTN_ERR_PARAM naming "qkv_layout" (since 1.8). */
typedef enum { ATTN_QKV_BHSD = 0, ATTN_QKV_BSHD } attn_qkv_layout;

/* Feature map of linear attention (Katharopoulos et al. 2020). */
typedef enum { ATTN_FM_ELU = 0 /* elu(x) + 1 */, ATTN_FM_RELU } attn_feature_map;

/* What every rule shares after its scores are computed: the score
 * pipeline, for batch b, head h (h = 0 for the rules without heads), query row i and key
 * row j, in this order:
 *   1. s = the rule's score (scale included for scaled_dot and multi-head)
 *   2. softcap c > 0: s = c * tanh(s / c)
 *   3. s += bias[i][j]; with ALiBi s -= m_h * |i' - j|
 *   4. masks, all AND-ed: mask, key_mask, causal, window, sparsity
 *   5. softmax over the allowed keys, with an optional sink logit z_h:
 *      w_ij = exp(s_ij - M) / (sum_j exp(s_ij - M) + exp(z_h - M)),
 *      M = max(max_j s_ij, z_h)
 *   6. hard attention on w (argmax, top_k or sample; with a sink, on the
 *      keys' weights only: argmax and top_k renormalise the kept keys)
 *   7. output row i = sum_j w_ij v_j
 * A query row left with no key has all-zero weights and an all-zero output
 * row (never NaN), with a sink or not; for concat that is the context, so
 * its output row is out([q_i; 0]), and multi-head's output projection
 * makes the row its bias (see attn_mha_request). Rule concat takes only mask and
 * hard (sample included): any other option is ATTN_ERR_PARAM naming it.
 * Where it runs: heads of dot products without hard attention (dot,
 * scaled_dot, general, multi-head) run every step in the flash kernel, in
 * registers (softcap there is a polynomial in s/c where |s| <= c/2 and a
 * rational function beyond: the capped score is within 8e-8 c of
 * c tanh(s/c) below c/2 and 4e-7 c beyond, measured by make test-rows for
 * c from 0.3 to 1000; rope's rotation is one pass before the kernel
 * when there are more than 64 query rows); hard attention and the tanh
 * rules run row by row. */
typedef struct {
    attn_mask mask;     /* (Lq,Lk), (B,Lq,Lk); with heads also (B,H,Lq,Lk), B
                         * and H each either that or 1 (the same plane for
                         * every batch row or head, as PyTorch broadcasts).
                         * Beside a query with heads (attn_request, rank 4)
                         * a rank-3 mask is (H,Lq,Lk), per head, as PyTorch
                         * broadcasts it against the scores (since 1.4;
                         * before, per batch row); elsewhere (B,Lq,Lk),
                         * and on multi-head with H > 1 also
                         * nn.MultiheadAttention's (B H,Lq,Lk), row b's
                         * head h at plane b H + h (since 1.4) */
    attn_mask key_mask; /* (Lk) or (B,Lk); false = padding key */
    attn_tensor bias;   /* float, same shapes as mask, added to the scores */
    attn_align align;   /* where the diagonal of causal, window and ALiBi sits */
    int causal;         /* query i sees key j only where j <= i' */
    int has_window;     /* when set, query i sees key j only where i' - left <= j <= i' + right
                         * (an integer window w is [w, w]; with causal, right is min(right, 0)) */
    int64_t window_left;  /* >= 0, or -1 for an unbounded side (< -1: ATTN_ERR_PARAM "window") */
    int64_t window_right; /* >= 0, or -1 for an unbounded side */
    float softcap;      /* >= FLT_MIN: step 2; 0: off; otherwise ATTN_ERR_PARAM */
    int alibi;          /* step 3's ALiBi term; the distance |i' - j| is taken in float */
    const float *alibi_slopes; /* alibi: H slopes (the rules: 1, or H with heads), or NULL for the
                                * ALiBi paper's slopes for H heads: 2^(-8h/H),
                                * h = 1..H, for H a power of two; otherwise those
                                * of n = 2^floor(log2 H), then the 1st, 3rd,
                                * 5th... of 2n (H = 1: 2^-8) */
    int64_t n_alibi_slopes; /* must be H (1 for the rules without heads), else ATTN_ERR_PARAM "alibi" */
    const float *sinks; /* step 5: H finite sink logits (1 for the rules without heads), or NULL */
    int64_t n_sinks;    /* must be H, else ATTN_ERR_PARAM "sinks" */
    attn_rope rope;
    attn_sparsity sparsity;
    attn_hard hard;
    int64_t top_k;      /* 1..Lk, for ATTN_HARD_TOPK; else ATTN_ERR_PARAM naming
                         * "hard.top_k" */
    float temperature;  /* > 0 and finite, for ATTN_HARD_SAMPLE (default 1); else
                         * ATTN_ERR_PARAM naming "hard.sample.temperature" */
    uint64_t seed;      /* the draws of ATTN_HARD_SAMPLE and of BigBird's random blocks */
    attn_feature_map feature_map; /* linear attention */
    attn_precision precision; /* float32 (default) or bfloat16 products; see attn_precision */
    int need_weights;   /* 0: weights are not built; the weights buffer may be NULL */
    attn_qkv_layout qkv_layout; /* rank-4 heads' place: BHSD (default) or BSHD (since 1.8) */
} attn_options;

/* Draws from options.seed, the same on every platform. The generator is
 * SplitMix64 (attn_splitmix64); its n-th output (n = 0, 1, ...) from seed s
 * is the mix of s + (n + 1) * 0x9E3779B97F4A7C15. Sampling and BigBird each
 * start their own stream at the seed.
 *   Sampling: row n = (b * H + h) * Lq + i uses x = output n (H = 1 for the
 *   rules without heads, concat included; whether or not the row has a key to attend). u = (x >> 11) * 2^-53; m = the largest
 *   final score over the row's allowed keys; e_j = exp((s_j - m) / T) for
 *   allowed j, else 0; total = sum of e_j in index order, in double; the key
 *   drawn is the first allowed j whose running sum exceeds u * total.
 *   BigBird: one layout for the whole request, query block qb = 0, 1, ...
 *   in order from one stream: qb < global_blocks sees every key block (no
 *   draws); otherwise key blocks kb < global_blocks and those within
 *   (window_blocks - 1) / 2 of qb (clipped, not moved by align), then of the
 *   n blocks not yet allowed, in increasing order c[0..n-1], r =
 *   min(random_blocks, n) are drawn by a partial Fisher-Yates shuffle: for
 *   t = 0..r-1, x = next() >> 32, j = t + ((x * (n - t)) >> 32), swap c[t]
 *   and c[j]; c[0..r-1] are allowed. */

/* Options with every field at its default (nothing masked, weights wanted). */
attn_options attn_options_default(void);

/* The ALiBi paper's slope of head h (0-based) of H heads, the one
 * attn_options.alibi uses when alibi_slopes is NULL: for a caller that
 * computes heads one call at a time and passes each its own slope. */
float attn_alibi_slope(int64_t H, int64_t h);

/* ------------------------------------------------------------ a context */

/* What a computation runs with, reused across calls; make one per thread
 * that computes (it must not be used by two threads at once).
 *
 * Workspace: every piece of scratch a call needs (projections, head jobs,
 * seeded parameters, the kernels' panels and rows) is carved from one
 * 64-byte aligned workspace the context owns. It only grows, and is freed
 * by attn_ctx_free: once a context has computed a request of some shape,
 * computing one of the same shape (or smaller) makes no heap allocation.
 * attn_shapes.scratch_bytes says what a request will take; a call that
 * needs more than the workspace holds grows it to 1.5 times its need (so a
 * slowly growing workload does not reallocate every call), which is what
 * a caller capping memory should count. The workspace also keeps rope's table of cos and sin
 * from one call to the next.
 *
 * Threads: a context made with threads = N runs each call on the calling
 * thread and up to N - 1 worker threads of its own, started at the first
 * call that needs them, kept asleep between calls, and joined by
 * attn_ctx_free. Contexts share no threads or memory, so calls on
 * different contexts from different threads run in parallel, each with
 * its own thread count. Small computations use fewer threads than N when
 * waking workers would cost more than it saves. */
typedef struct attn_ctx attn_ctx;

/* New context; threads <= 0 means attn_max_threads(). Returns NULL when
 * out of memory. Free with attn_ctx_free (NULL is a no-op). */
attn_ctx *attn_ctx_new(int threads);
void attn_ctx_free(attn_ctx *ctx);

/* A limit on each later call's time on ctx, in wall-clock seconds from
 * the call's start (seconds <= 0, or NaN: none, the default). A call
 * still computing at the limit starts no more of its tasks (a few
 * microseconds to some milliseconds of work each, every thread's running
 * one finishing), returns ATTN_ERR_TIMEOUT, and leaves its outputs
 * undefined; the context is fine for the next call. A service bounding
 * what a request can hold its threads for sets it: the work estimate
 * (attn_shapes.flops) bounds the time only as well as it counts, and a
 * busy machine stretches any call. The clock is coarse (a few
 * milliseconds on Linux). */
void attn_ctx_set_time_limit(attn_ctx *ctx, double seconds);

/* A function a call on ctx asks, while it computes, whether to go on:
 * fn(arg), at its first task and then about once a millisecond (on
 * Linux's coarse clock, every few milliseconds), from any of the call's
 * threads (two can be in it at once when a call lasts long). Returning
 * ATTN_OK goes on; any other status stops the call as the time limit
 * does (no task starts after it, the running ones finish) and the call
 * returns that status, its outputs undefined. ATTN_ERR_CANCELLED is there
 * for it: a server's fn can check whether its client is still connected,
 * or hold several calls to one deadline. It should take microseconds.
 * fn NULL: none (the default). */
typedef attn_status (*attn_interrupt_fn)(void *arg);
void attn_ctx_set_interrupt(attn_ctx *ctx, attn_interrupt_fn fn, void *arg);

/* The threads a context computes with at most, as the plans count them:
 * attn_shapes.scratch_bytes holds each thread's scratch for this many.
 * By default the CPUs this process may run on (its CPU affinity: taskset,
 * a container's cpuset), which is also what attn_ctx_new(0) makes.
 * attn_set_max_threads(n) sets it (1 to 1024; n <= 0: the default again)
 * for the plans and contexts made after: a program that runs its
 * contexts on fewer threads than its CPUs (a CPU limit below a large
 * node's CPUs) sets their count, so that plans do not count the scratch
 * of threads that never run. A context made with more threads than this
 * may take more scratch than planned. */
int attn_max_threads(void);
void attn_set_max_threads(int n);

/* The kernels this process runs, chosen once from the CPU and the
 * environment: the instruction-set variant ("avx512bf16", "avx512",
 * "avx2" or "generic"; ATTN_ISA names one the CPU has), and whether the
 * float32 flash kernel takes a score tile's exponentials during the next
 * tile's products (1, AVX-512 on AMD CPUs by default; ATTN_DEFER_EXP=0|1)
 * or after its own (0). Either way the answers are the same. */
const char *attn_kernel_isa(void);
int attn_kernel_defers_exp(void);

/* ------------------------------------------------ attention by one rule */

typedef struct {
    attn_rule rule;
    /* With heads, as torch's scaled_dot_product_attention takes them: query
     * (B,H,Lq,Dq), key and value (B,Hkv,Lk,.) with Hkv dividing H (concat:
     * Hkv = H); query head h reads key/value head h / (H/Hkv). Each (b, h)
     * is attended on its own; output (B,H,Lq,Dout), weights (B,H,Lq,Lk),
     * lse (B,H,Lq); mask and bias may then be (H,Lq,Lk) or (B,H,Lq,Lk)
     * (see attn_options.mask), and alibi and sinks take H values. Since
     * 1.3. */
    attn_tensor query; /* (Lq,Dq), (B,Lq,Dq) or (B,H,Lq,Dq) */
    attn_tensor key;   /* (Lk,Dk), (B,Lk,Dk) or (B,Hkv,Lk,Dk); concat: Lk = Lq */
    attn_tensor value; /* (Lk,Dv), (B,Lk,Dv) or (B,Hkv,Lk,Dv); concat: Lv rows */
    const attn_named *params; /* all the rule's parameters, or n_params = 0 */
    size_t n_params;
    int has_scale;     /* scaled_dot only */
    float scale;       /* default 1/sqrt(Dk) */
    int64_t hidden_size; /* Dh for seeding additive/concat_tanh; 0 = Dq. Given with
                          * params, it must be their Dh (else ATTN_ERR_PARAM) */
    int64_t output_size; /* Dout for seeding concat; 0 = Dq. Given with params, it
                          * must be out.weight's rows (else ATTN_ERR_PARAM) */
    attn_options opt;
} attn_request;

/* The options of attn_options and attn_request that only some rules take
 * (attn_rule_takes). One a rule does not take is refused when given (a
 * value other than its default): ATTN_ERR_PARAM naming it, with the rules
 * that take it; but hidden_size and output_size, which only size seeded
 * parameters, are ignored by the rules that do not take them (as before
 * version 1.1). need_weights and seed are taken by every rule. */
typedef enum {
    ATTN_OPT_MASK = 0,
    ATTN_OPT_KEY_MASK,
    ATTN_OPT_BIAS,
    ATTN_OPT_CAUSAL,
    ATTN_OPT_ALIGN,
    ATTN_OPT_WINDOW,
    ATTN_OPT_SOFTCAP,
    ATTN_OPT_ALIBI,
    ATTN_OPT_SINKS,
    ATTN_OPT_ROPE,
    ATTN_OPT_SPARSITY,
    ATTN_OPT_HARD,        /* with top_k and temperature */
    ATTN_OPT_PRECISION,   /* given when not ATTN_PRECISION_FP32 */
    ATTN_OPT_FEATURE_MAP, /* given when not ATTN_FM_ELU */
    ATTN_OPT_SCALE,       /* attn_request.has_scale */
    ATTN_OPT_HIDDEN_SIZE, /* attn_request.hidden_size, given when not 0 */
    ATTN_OPT_OUTPUT_SIZE, /* attn_request.output_size, given when not 0 */
    ATTN_OPT_COUNT
} attn_option;

/* The option's name ("key_mask"), or NULL when out of range. */
const char *attn_option_name(attn_option opt);

/* 1 when the rule takes the option, else 0 (also when either is out of
 * range):
 *   dot, scaled_dot  the score pipeline (mask, key_mask, bias, causal,
 *                    align, window, softcap, alibi, sinks), hard, rope,
 *                    sparsity and precision; scaled_dot also scale
 *   general          the score pipeline, hard and precision
 *   additive, concat_tanh  the score pipeline, hard and hidden_size
 *   concat           mask, hard and output_size (its weights are over the Lv
 *                    value positions, not the keys)
 *   linear           key_mask, causal, align and feature_map (the rest has
 *                    no linear-time form)
 * Multi-head attention (attn_mha_request) takes the options dot takes,
 * or, with linear set, those linear takes. */
int attn_rule_takes(attn_rule rule, attn_option opt);

/* Shapes of a request's results. A request without a batch dimension gives
 * results without one. */
typedef struct {
    int out_rank;
    int64_t out_shape[ATTN_MAX_RANK]; /* (B,Lq,Dout) or (Lq,Dout); (B,H,Lq,Dout) */
    int w_rank;
    int64_t w_shape[ATTN_MAX_RANK];   /* (B,Lq,Lk); with heads, multi-head (B,H,Lq,Lk) */
    int64_t out_count;                /* floats the output buffer must hold */
    int64_t w_count;                  /* floats the weights buffer must hold (0 if not wanted) */
    /* The request's cost, as the computation will incur it: what a caller
     * compares against its limits before calling attn_compute. Doubles, so
     * hostile sizes cannot overflow; attn_plan computes them without
     * allocating, also when n_params == 0 (where scratch_bytes includes
     * the seeded parameters, which the computation draws into the
     * workspace). */
    double param_floats;  /* floats of the parameters the call uses; when n_params == 0, what attn_seed_params / attn_mha_seed_params would make */
    /* The computation's cost in floating-point operations, an estimate:
     * its arithmetic (2 per multiply-add) and what the score pipeline
     * costs beside it, counted as the operations that take as long on the
     * dense kernel (one core at 1e11 a second): per scored pair of a head
     * 16 (the softmax), +32 with weights returned, +32 with a bias, +50
     * with a mask (+200 where the scores go row by row), +400 and +8 a
     * column of d + dv for a query of fewer than 16 rows (which go a row
     * at a time, each reading the keys and values again; not on the row
     * path), +300 for hard attention and the concat rule, +1500
     * more for top_k and sample, +50 + 28 per hidden unit for the tanh
     * rules, +1400 for softcap where the scores go row by row (hard
     * attention, the tanh rules: an exact tanhf a pair), +450 for a pair
     * of a local_global global row or key; +200 a
     * block of a bigbird or blocks layout, and under a pattern hard
     * attention's +16 a (query, key) of the whole rows; linear attention
     * +500 a query or key row, and a causal diagonal pair +140. So a
     * request's time follows flops whatever its options, within a few
     * times (the tanh rules' tanh is 28 operations, not 3; at a head dim
     * of 1, a top_k pair is some 900, where its products are 4). */
    double flops;
    double scratch_bytes; /* workspace the computation takes from the context */
    /* The block layout of a sparsity pattern (0 when there is none): rows x
     * cols blocks of block x block (query rows x key rows); see
     * attn_sparsity_layout. */
    int64_t layout_rows, layout_cols, layout_block;
} attn_shapes;

/* The block layout a sparsity pattern uses, for a response's "layout":
 * layout_rows x layout_cols bytes (attn_shapes), 1 where a block holds an
 * allowed pair. bigbird and blocks give their own layout; local_global is
 * summarised in blocks of layout_block = 64 rows and columns (the same on
 * every build). Lq, Lk are the request's query and key counts; the
 * options are validated again (as attn_plan does). The caller owns layout;
 * the call allocates scratch of O(Lq + Lk) bytes and frees it. */
attn_status attn_sparsity_layout(const attn_options *o, int64_t Lq, int64_t Lk,
                                 uint8_t *layout, attn_error *err);

/* Request with every field at its default for the given rule. */
attn_request attn_request_default(attn_rule rule);

/* Validates the whole request (shapes, options, parameters) and fills
 * *shapes, the cost included (shapes may be NULL: it then only validates).
 * Does not compute, and allocates nothing: a
 * request without parameters is planned as it would run with seeded ones
 * (their shapes are not checked, as they are made to fit). */
attn_status attn_plan(const attn_request *req, attn_shapes *shapes, attn_error *err);

/* Makes the parameters the rule needs for the request's shapes, seeded
 * from seed (see "Seeded parameters" below). On ATTN_OK, *out is a new set
 * the caller frees with attn_param_set_free; point req->params at
 * (*out)->items to use it. */
attn_status attn_seed_params(const attn_request *req, uint64_t seed,
                             attn_param_set **out, attn_error *err);

/* Computes the request. output must hold shapes.out_count floats; weights
 * shapes.w_count floats, or may be NULL when opt.need_weights is 0.
 * Validates as attn_plan does. A request without parameters (n_params 0)
 * runs with those attn_seed_params makes from seed 0. ctx may be NULL: the
 * call then makes a one-thread context of its own and frees it. */
attn_status attn_compute(attn_ctx *ctx, const attn_request *req,
                         float *output, float *weights, attn_error *err);

/* attn_compute, and (lse not NULL) each query row's log-sum-exp into lse:
 * B x Lq floats (Lq without a batch), row i's ln(sum_j e^(s_ij)) over the
 * keys it may attend, s being its final scores (after scale, softcap,
 * bias, ALiBi and rope, as the softmax takes them) and the sink's e^z in
 * the sum; -INFINITY for a row with nothing to attend and no sink (the
 * log of an empty sum, as FlexAttention gives; FlashAttention-2's kernels
 * write +INFINITY there). It is
 * FlashAttention's softmax_lse and FlexAttention's return_lse: the weights
 * are e^(s_ij - lse_i), and two calls over disjoint key sets combine as
 * o = (e^lse1 o1 + e^lse2 o2) / (e^lse1 + e^lse2). With bf16 precision,
 * of the scores the bfloat16 products give. The rules with a softmax over
 * the keys give it, those that take sinks (attn_rule_takes): not concat
 * (its softmax is over value positions) or linear; nor does hard
 * attention (ATTN_ERR_PARAM "lse" for these). Since 1.2. */
attn_status attn_compute_lse(attn_ctx *ctx, const attn_request *req, float *output,
                             float *weights, float *lse, attn_error *err);

/* ------------------------------------------ packed sequences (varlen) */

/* Sequences of their own lengths packed without padding, as
 * FlashAttention's flash_attn_varlen_func takes them (since 1.5). In req,
 * query is (total_q, H, Dq), key (total_k, Hkv, Dk) and value (total_k,
 * Hkv, Dv), Hkv dividing H; sequence s holds query rows cu_seqlens_q[s]
 * to cu_seqlens_q[s + 1] - 1 and the key and value rows of cu_seqlens_k
 * likewise. Each (sequence, head) is attended on its own, exactly as a
 * request of that sequence alone with heads, (1, H, Lq_s, Dq), would be,
 * every option applying per sequence: causal and align (bottom-right is
 * FlashAttention's causal), window, softcap, alibi, sinks, rope (positions
 * from 0 in each sequence), sparsity (laid out over each sequence's
 * lengths; its errors name the sequence), hard attention. The sequences
 * run as one call: their (sequence, head) slices share the context's
 * threads, read in place (nothing is copied or transposed). Not taken
 * (ATTN_ERR_PARAM naming them): mask, bias and key_mask (the lengths do
 * what key_mask does), and rule concat (its parameters depend on the
 * length).
 * Results:
 *   output (total_q, H, Dv), the rows of query's order;
 *   weights (B, H, max Lq_s, max Lk_s), zero past each sequence's own
 *     lengths (FlashAttention's return_attn_probs form);
 *   lse (H, total_q), FlashAttention's varlen softmax_lse.
 * Hard sampling's row number (see "Draws") is h total_q + cu_seqlens_q[s]
 * + i: the lse's order. The offsets must start at 0, never fall and end
 * at the rows (ATTN_ERR_PARAM naming "cu_seqlens_q" or "cu_seqlens_k";
 * NULL cu_seqlens_q is ATTN_ERR_ARG). A sequence may be empty, as
 * FlashAttention takes it (since 1.6): one of no query rows computes
 * nothing (its weights are zeros); the query rows of one with no keys have
 * nothing to attend (output and weights zero, lse -INFINITY or with sinks
 * the head's sink). The tensors still have at least one row each. A top_k
 * above the keys of a sequence with queries is ATTN_ERR_PARAM naming
 * "hard.top_k", and the sparsity pattern's checks apply to the sequences
 * with both queries and keys; as each of them passes over the global
 * indices, they must number at most its max(Lq, Lk) (more would repeat
 * one; ATTN_ERR_PARAM naming "sparsity.global").
 * A batch in FlashAttention's (B, L, H, D) layout (flash_attn_func's) is
 * packed sequences of one length: cu_seqlens 0, L, 2L, ..., B L, query
 * (B L, H, Dq); its output is then (B, L, H, Dv) in memory, and its lse
 * (H, B L). */
typedef struct {
    attn_request req;             /* rule, tensors (above), params, scale, options */
    int64_t batch;                /* B >= 1 sequences */
    const int64_t *cu_seqlens_q;  /* B + 1 offsets into query's rows */
    const int64_t *cu_seqlens_k;  /* B + 1 offsets into key's rows; NULL: cu_seqlens_q */
} attn_varlen_request;

attn_varlen_request attn_varlen_request_default(attn_rule rule);

/* As attn_plan: shapes of the results above, and the cost (flops summed
 * over the sequences). */
attn_status attn_varlen_plan(const attn_varlen_request *req, attn_shapes *shapes,
                             attn_error *err);

/* As attn_seed_params: the rule's parameters for the request's feature
 * sizes, the same set a request of any one of its sequences makes. */
attn_status attn_varlen_seed_params(const attn_varlen_request *req, uint64_t seed,
                                    attn_param_set **out, attn_error *err);

/* As attn_compute_lse: output, weights (NULL when opt.need_weights is 0)
 * and lse (NULL when not wanted) of the shapes above. */
attn_status attn_varlen_compute(attn_ctx *ctx, const attn_varlen_request *req, float *output,
                                float *weights, float *lse, attn_error *err);

/* ---------------------------------------------- multi-head attention */

typedef enum {
    ATTN_PE_NONE = 0,
    ATTN_PE_SINUSOIDAL, /* PE[p,2i] = sin(p/10000^(2i/d)), PE[p,2i+1] = cos(same) */
    ATTN_PE_LEARNED     /* rows of pos_embedding.weight (P,E), P >= max(Lq,Lk)
                         * (else ATTN_ERR_PARAM naming it): query rows use
                         * 0..Lq-1, key and value rows 0..Lk-1 (not moved by
                         * align); kdim = vdim = E */
} attn_posenc;

/* torch.nn.MultiheadAttention(E, H, batch_first=True) semantics, except
 * that a query row no key may reach has zero weights and a zero attention
 * output in every head (PyTorch: NaN), so the output projection makes its
 * output row out_proj.bias (LayerNorm(query' + out_proj.bias) with
 * residual_norm).
 * Parameter names accepted (biases optional, zero when absent):
 *   in_proj_weight (3E,E), in_proj_bias (3E), out_proj.weight (E,E), out_proj.bias (E)
 *   or q_proj_weight (E,E), k_proj_weight (E,kdim), v_proj_weight (E,vdim) instead of in_proj_weight
 *   or W_q.weight (E,E), W_k.weight (Hkv*E/H,kdim), W_v.weight (Hkv*E/H,vdim),
 *      W_o.weight (E,E) and their .bias; the only names that allow Hkv < H
 *   norm.weight (E), norm.bias (E) for residual_norm (default 1 and 0)
 *   pos_embedding.weight (P,E) for the learned positional encoding (required
 *      with it when parameters are given, refused without it). */
typedef struct attn_mha_weights attn_mha_weights; /* prepared parameters, below */

typedef struct {
    attn_tensor query;   /* (Lq,E) or (B,Lq,E) */
    attn_tensor key;     /* (Lk,kdim) or (B,Lk,kdim); absent = query */
    attn_tensor value;   /* (Lk,vdim) or (B,Lk,vdim); absent = query */
    int64_t num_heads;   /* H, E % H == 0 */
    int64_t num_kv_heads; /* Hkv, H % Hkv == 0; 0 = H */
    const attn_named *params;
    size_t n_params;
    const attn_mha_weights *weights; /* prepared parameters (attn_mha_weights_new)
                          * used instead of params, which must then be empty;
                          * NULL: params as above */
    int average_weights; /* weights (B,Lq,Lk) averaged over heads, else (B,H,Lq,Lk);
                          * default 0, per head (PyTorch's default averages) */
    attn_posenc positional_encoding;
    int residual_norm;   /* output = LayerNorm(query' + attention), eps 1e-5 */
    int linear;          /* linear attention per head instead of softmax, after the
                          * projections (and positional encoding), as rule linear
                          * does it: opt.feature_map, causal, align, key_mask;
                          * the options it refuses are ATTN_ERR_PARAM here too */
    attn_options opt;
} attn_mha_request;

attn_mha_request attn_mha_request_default(void);

/* As attn_plan, for multi-head. */
attn_status attn_mha_plan(const attn_mha_request *req, attn_shapes *shapes, attn_error *err);

/* As attn_seed_params, for multi-head. The names made are in_proj_* when
 * kdim = vdim = E and Hkv = H; q/k/v_proj_weight with in_proj_bias when
 * kdim or vdim differ and Hkv = H; W_* otherwise; then pos_embedding.weight
 * (P = max(Lq, Lk)) for the learned positional encoding; then norm.* when
 * residual_norm is set. */
attn_status attn_mha_seed_params(const attn_mha_request *req, uint64_t seed,
                                 attn_param_set **out, attn_error *err);

/* As attn_compute, for multi-head. */
attn_status attn_mha_compute(attn_ctx *ctx, const attn_mha_request *req,
                             float *output, float *weights, attn_error *err);

/* As attn_compute_lse, for multi-head: lse holds B x H x Lq floats (H x Lq
 * without a batch), each head's rows; softmax attention only (linear has
 * no softmax: ATTN_ERR_PARAM "lse"). Since 1.2. */
attn_status attn_mha_compute_lse(attn_ctx *ctx, const attn_mha_request *req, float *output,
                                 float *weights, float *lse, attn_error *err);

/* Prepared weights: the parameters of a multi-head layer kept ready across
 * calls, as a model's layers keep theirs (and as ONNX Runtime keeps a
 * graph's initializers). attn_mha_weights_new validates req as
 * attn_mha_plan does and copies its parameters (req->params, or with
 * n_params 0 the set attn_mha_compute would seed: attn_mha_seed_params
 * with seed 0) into memory the library owns, with the projection matrices
 * also laid out once for the matrix kernel of the CPU it runs on, which
 * each call of attn_mha_compute would otherwise do again. On ATTN_OK,
 * *out is the caller's until attn_mha_weights_free; the request's tensors
 * are not kept. A request naming them (attn_mha_request.weights, with
 * n_params 0) gets the same bits as one giving the same parameters: its
 * sizes may differ from the request that made them (another L or batch,
 * other key and value rows) as long as the parameters' shapes still fit,
 * which attn_mha_plan and attn_mha_compute check as they check params.
 * The object is read-only once made, so calls on several threads and
 * contexts may share it. Errors: those of attn_mha_plan, a request that
 * already names weights (ATTN_ERR_ARG), no memory (ATTN_ERR_NOMEM); *out
 * is set to NULL first, so free what it held before the call. */
attn_status attn_mha_weights_new(const attn_mha_request *req, attn_mha_weights **out,
                                 attn_error *err);

/* Bytes the prepared weights hold (the parameters' copy and the packed
 * matrices), for a caller that caps memory; 0 for NULL. */
size_t attn_mha_weights_bytes(const attn_mha_weights *w);

/* Frees prepared weights; NULL is a no-op. No call may be using them. */
void attn_mha_weights_free(attn_mha_weights *w);

/* ------------------------------------------- decoding over a KV cache */

/* A key/value cache for decoding: per KV head, one array of key rows and
 * one of value rows (head_dim floats each), appended to step by step. An
 * append is amortised O(1) per row: each array doubles (from 16 rows, up
 * to max_tokens) when full, and rows never move otherwise. Not
 * thread-safe: one writer at a time, and no append while a computation
 * reads it. */
typedef struct attn_kv_cache attn_kv_cache;

/* An empty cache; NULL when a size is below 1 or out of memory. Nothing
 * is allocated for rows until the first append. A NULL cache (or key or
 * value) is ATTN_ERR_ARG to append and truncate; the other calls answer
 * 0 or NULL for it. */
attn_kv_cache *attn_kv_cache_new(int64_t num_kv_heads, int64_t head_dim, int64_t max_tokens);
void attn_kv_cache_free(attn_kv_cache *c); /* NULL is a no-op */

int64_t attn_kv_cache_len(const attn_kv_cache *c); /* rows held */

/* Bytes the cache holds now (its arrays at their capacity, and its own
 * bookkeeping), and what it would hold once it has room for rows rows
 * (the same when it has room already): for a caller that caps memory. */
size_t attn_kv_cache_bytes(const attn_kv_cache *c);
size_t attn_kv_cache_bytes_for(const attn_kv_cache *c, int64_t rows);

/* Bytes a cache of these sizes holds when full (max_tokens rows), from
 * the sizes alone, for a caller that caps memory before making one: 0
 * when a size is below 1, SIZE_MAX when it is too large to count
 * (attn_kv_cache_new then returns NULL). */
size_t attn_kv_cache_bytes_max(int64_t num_kv_heads, int64_t head_dim, int64_t max_tokens);

/* Appends T rows: key and value (T, num_kv_heads, head_dim). A shape
 * that does not fit is ATTN_ERR_SHAPE (naming "key" or "value"), rows past
 * max_tokens ATTN_ERR_TOO_LARGE, no memory ATTN_ERR_NOMEM; on any error
 * nothing is appended. */
attn_status attn_kv_cache_append(attn_kv_cache *c, const attn_tensor *key,
                                 const attn_tensor *value, attn_error *err);

/* Keeps the first n rows (0 <= n <= len; else ATTN_ERR_ARG); the memory
 * stays for the rows to come. */
attn_status attn_kv_cache_truncate(attn_kv_cache *c, int64_t n, attn_error *err);

/* The arrays of KV head g < num_kv_heads: len rows, head_dim floats
 * apart, valid until the next append (which may move them). */
const float *const *attn_kv_cache_keys(const attn_kv_cache *c);
const float *const *attn_kv_cache_values(const attn_kv_cache *c);

/* Attention of new query rows over a key/value cache, read in place
 * (nothing is copied): an attn_kv_cache (key = attn_kv_cache_keys(c),
 * value = attn_kv_cache_values(c), len = attn_kv_cache_len(c)) or
 * per-head arrays of the caller's own (a decode session that keeps its
 * cache in its own layout).
 * KV head g's first len rows are key[g] and value[g], head_dim
 * floats a row, rows head_dim apart. Query head h reads KV head
 * h / (num_heads / num_kv_heads) (grouped-query attention). Every head is
 * one job of one call, so the heads share the context's threads.
 * The result equals scaled_dot over the cache per head with these
 * options, which multi-head's checks apply to (H = num_heads, Lq = Tq,
 * Lk = len): alibi_slopes and sinks hold one value per query head; masks
 * may be per head, (H, Tq, len) or (1, H, Tq, len); with align bottom-right query row i sits at position
 * len - Tq + i, the convention of a decode step (set causal for one). */
typedef struct {
    attn_tensor query;      /* (Tq, num_heads, head_dim) */
    int64_t num_heads;      /* H >= 1 */
    int64_t num_kv_heads;   /* Hkv, H % Hkv == 0; 0 = H */
    int64_t len;            /* cached rows (>= 1) */
    const float *const *key;   /* Hkv arrays of len x head_dim floats */
    const float *const *value; /* the same for the values */
    int has_scale;
    float scale;            /* default 1/sqrt(head_dim) */
    attn_options opt;
} attn_cache_request;

attn_cache_request attn_cache_request_default(void);

/* As attn_plan: output (Tq, H, head_dim), weights (H, Tq, len). */
attn_status attn_cache_plan(const attn_cache_request *req, attn_shapes *shapes, attn_error *err);

/* As attn_compute, for the cache. */
attn_status attn_cache_compute(attn_ctx *ctx, const attn_cache_request *req, float *output,
                               float *weights, attn_error *err);

/* As attn_compute_lse, for the cache: lse holds H x Tq floats, laid out
 * as the weights' rows (no hard attention). Since 1.2. */
attn_status attn_cache_compute_lse(attn_ctx *ctx, const attn_cache_request *req, float *output,
                                   float *weights, float *lse, attn_error *err);

/* Seeded parameters.
 * The generator is SplitMix64 (Steele, Lea, Flood 2014) started at the seed.
 * Parameters are drawn in the order listed by attn_seed_params' set, each
 * row-major; every float is u = (next() >> 40) * 2^-24 in [0,1), value =
 * (2u - 1) * bound, computed in float32, with bound = 1/sqrtf(fan_in) for
 * both weight and bias of a Linear (fan_in = its input width), as
 * nn.Linear's default init (in_proj_bias: fan_in = E). LayerNorm weights
 * are 1 and biases 0, drawn from nothing. pos_embedding.weight is
 * normal(0, 1), as nn.Embedding's init, two draws a value by Box-Muller's
 * cosine branch in double: u1 = ((next() >> 11) + 1) * 2^-53, u2 =
 * (next() >> 11) * 2^-53, value = (float)(sqrt(-2 log u1) cos(2 pi u2)).
 * The same seed gives the same bits on every platform (for the normal
 * values, up to the last bit of the C library's log and cos). Order and
 * fan_in per rule:
 *   general      attn.weight (Dq,Dk) Dk; attn.bias (Dq) Dk
 *   additive     query_proj.weight (Dh,Dq) Dq; key_proj.weight (Dh,Dk) Dk;
 *                key_proj.bias (Dh) Dk; v.weight (1,Dh) Dh
 *   concat_tanh  attn.weight (Dh,Dq+Dk) Dq+Dk; attn.bias (Dh) Dq+Dk
 *   concat       att_weight.weight (Lv,Dq+Dk) Dq+Dk; att_weight.bias (Lv) Dq+Dk;
 *                out.weight (Dout,Dq+Dv) Dq+Dv; out.bias (Dout) Dq+Dv
 *   multi-head   in_proj_weight (3E,E) E; in_proj_bias (3E) E;
 *                out_proj.weight (E,E) E; out_proj.bias (E) E
 *             or q_proj_weight (E,E) E; k_proj_weight (E,kdim) kdim;
 *                v_proj_weight (E,vdim) vdim; in_proj_bias; out_proj.*
 *             or W_q.weight, W_q.bias, W_k.weight, W_k.bias, W_v.weight,
 *                W_v.bias, W_o.weight, W_o.bias (fan_in = input width)
 *             then pos_embedding.weight (P,E) when learned (normal, above),
 *             then norm.weight, norm.bias when residual_norm is set. */

/* One step of SplitMix64, the generator of the seeded parameters and of the
 * draws: advances *state (a caller's variable, first set to the seed) and
 * returns the next 64-bit output, next() above. */
uint64_t attn_splitmix64(uint64_t *state);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* ATTN_H */
