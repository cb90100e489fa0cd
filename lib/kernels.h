/* kernels.h - internal: the hot loops every rule is built from (projections
 * and the scaled-dot-product core), with run-time CPU dispatch behind them
 * (kernels_isa.h). They never allocate: each takes its scratch from the
 * caller, 64-byte aligned, of the size its _scratch_bytes function gives
 * for the same shapes and thread count. Not installed; only the library
 * sources, the models (models/) and the tests include it. */
#ifndef ATTN_KERNELS_H
#define ATTN_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* C[m,n] = A[m,k] * B[n,k]^T (+ bias[n] when bias is not NULL), i.e. the
 * nn.Linear product x W^T + b with x = A, W = B. Row strides lda, ldb, ldc
 * in floats. C is overwritten. threads <= 1 runs on the calling thread.
 * scratch: attn_gemm_scratch_bytes(m, n, k, threads) bytes (packing
 * panels), or NULL, which runs an unpacked path (slower for many rows). */
void attn_gemm_nt(int64_t m, int64_t n, int64_t k,
                  const float *a, int64_t lda,
                  const float *b, int64_t ldb,
                  const float *bias,
                  float *c, int64_t ldc, int threads, void *scratch);

/* Bytes of scratch attn_gemm_nt needs for these shapes on up to `threads`
 * threads (0 when it needs none). */
size_t attn_gemm_scratch_bytes(int64_t m, int64_t n, int64_t k, int threads);

/* B (n x k, row stride ldb) packed once for many products, as weights
 * that persist across calls are: attn_gemm_pack writes it into bp
 * (attn_gemm_packed_floats(n, k) floats, 64-byte aligned) in the layout
 * of the variant running now, and returns that variant's identity for
 * attn_gemm_nt_packed. */
size_t attn_gemm_packed_floats(int64_t n, int64_t k);
/* Rows of B per panel of that layout: a packed B whose first row is a
 * multiple of it into another's is that one's panels from there on. */
int64_t attn_gemm_panel(void);
const void *attn_gemm_pack(int64_t n, int64_t k, const float *b, int64_t ldb, float *bp);

/* attn_gemm_nt with B also given packed (bp from attn_gemm_pack of the same
 * B, n and k; packer what it returned): the packing step is skipped, and
 * the result has the same bits as attn_gemm_nt's. When another variant
 * runs now than packed bp (packer differs), bp is ignored; bp NULL packs
 * as attn_gemm_nt does. With cg > 0, C's columns come in groups of cg,
 * each its own block of m rows: C[i][j] at c[(j / cg) cgs + i ldc + j % cg]
 * (the heads of a projection, each head's rows contiguous: cg = head
 * size, ldc = cg, cgs = m cg); cg = 0 is attn_gemm_nt's C[i][j] at
 * c[i ldc + j]. Only where the values go changes, not their bits. */
void attn_gemm_nt_packed(int64_t m, int64_t n, int64_t k,
                         const float *a, int64_t lda,
                         const float *b, int64_t ldb,
                         const float *bias,
                         float *c, int64_t ldc, int64_t cg, int64_t cgs, int threads,
                         void *scratch, const float *bp, const void *packer);

/* A sparsity pattern as the kernels read it (lib/sparse.c builds it from
 * attn.h's attn_sparsity): one more mask, AND-ed with the job's others,
 * under which (i, j) is allowed when
 *   layout set:  layout[(i / block) * lcols + j / block] != 0
 *   layout NULL: |i + off - j| <= window, or qglobal[i], or kglobal[j]
 * (local_global); gkeys lists the global keys in increasing order. */
typedef struct attn_sparse {
    const uint8_t *layout;
    int64_t block, lrows, lcols;
    int64_t window, off;
    const uint8_t *qglobal, *kglobal; /* lq and lk bytes */
    const int64_t *gkeys;
    int64_t n_gkeys;
} attn_sparse;

/* Whether the pattern allows (i, j). */
static inline int attn_sparse_allows(const attn_sparse *s, int64_t i, int64_t j)
{
    if (s->layout)
        return s->layout[(i / s->block) * s->lcols + j / s->block] != 0;
    int64_t d = i + s->off - j;
    return (d <= s->window && -d <= s->window) || s->qglobal[i] || s->kglobal[j];
}

/* What a span's pairs are: all allowed, local_global's band (a window to
 * the kernel), or layout blocks some rows allow and others not. */
enum { ATTN_SPAN_FULL, ATTN_SPAN_BAND, ATTN_SPAN_MIXED };

/* Walks the key spans one query block visits, in increasing order. */
typedef struct {
    const attn_sparse *sp;
    int64_t i0, nr, klo, khi; /* the rows, and the keys causal / window leave */
    int64_t pos;              /* the next key not yet handed out */
    int64_t band_lo, band_hi; /* local_global: the band [lo, hi), within [klo, khi) */
    int64_t g;                /* local_global: the next global key's index */
    int64_t qb0, qb1;         /* layout: the block's first and last layout rows */
} attn_span_it;

/* Starts the walk over the key spans that query rows [i0, i0 + nr) visit
 * within [klo, khi) (the keys causal and the window leave); kernels.c. */
void attn_span_init(attn_span_it *it, const attn_sparse *sp, int64_t i0, int64_t nr, int64_t klo,
                    int64_t khi);

/* The next span [lo, hi) and its kind (ATTN_SPAN_*): 0 when none is left. */
int attn_span_next(attn_span_it *it, int64_t *lo, int64_t *hi, int *kind);

/* One head of scaled-dot-product attention, the score pipeline of attn.h:
 *   s[i][j] = scale * (q_i . k_j)
 *   s       = softcap * tanh(s / softcap)          when softcap > 0
 *   s      += bias[i][j] - alibi * |i + off - j|
 *   w_i     = softmax over allowed j of s_i, with the sink logit in the
 *             sum when has_sink (all zero if no key is allowed)
 *   o_i     = sum_j w[i][j] v_j
 * With rope set, q and k are rotated first (RoFormer): query row i by
 * table row rope_q0 + i, key row j by rope_k0 + j, where a table row is
 * 2d floats, C then S: feature a of a pair (a, b) (b = a + rope_dims/2,
 * or a + 1 when rope_interleaved) becomes x_a C[a] - x_b S[a], feature b
 * x_a S[a] + x_b C[a]; features past rope_dims pass unchanged. rope_rel
 * holds the rows of the positions 0, 1, ..., 31 in the same form.
 * Query row i sits at key position i' = i + off (|off| <= max(lq, lk);
 * attn.h's align), and (i,j) is allowed when every present mask says so:
 *   mask[i*mask_stride + j] != 0, key_mask[j] != 0, causal -> j <= i',
 *   window_left >= 0 -> j >= i' - window_left,
 *   window_right >= 0 -> j <= i' + window_right.
 * Pointers are to row 0 of this head's slice; strides are in elements.
 * w may be NULL (weights not wanted: must not be materialised as Lq x Lk).
 * The softmax subtracts the row max, so scores of 1e4 are fine. */
typedef struct {
    int64_t lq, lk, d, dv;
    const float *q; int64_t q_stride;
    const float *k; int64_t k_stride;
    const float *v; int64_t v_stride;
    float *o;       int64_t o_stride;
    float *w;       int64_t w_stride;   /* NULL: no weights */
    float scale;
    const uint8_t *mask; int64_t mask_stride;  /* NULL: none */
    const uint8_t *key_mask;                   /* NULL: none; lk bytes */
    const float *bias;   int64_t bias_stride;  /* NULL: none */
    int causal;
    int64_t window_left, window_right;         /* < 0: that side unbounded */
    int64_t off;                               /* i' = i + off */
    int64_t pos_rows;                          /* > 1: rows share positions, row i at
                                                * i / pos_rows (+ off): grouped-query
                                                * heads of one step as one job's rows,
                                                * which then go a row at a time */
    float softcap;                             /* > 0: on */
    float alibi;                               /* ALiBi slope; 0: none */
    int has_sink;
    float sink;                                /* the sink logit, finite */
    const float *rope;                         /* NULL: no rotary embedding */
    const float *rope_rel;                     /* rows of the positions 0..31 */
    int64_t rope_q0, rope_k0, rope_dims;
    int rope_interleaved;
    const attn_sparse *sparse;                 /* NULL: dense; else only the key blocks
                                                * it allows are computed */
    int bf16;                                  /* products in bfloat16 (bf16_tmpl.h);
                                                * never with sparse */
    float *lse;                                /* NULL: not wanted; else lq floats, row
                                                * i's log-sum-exp (attn_lse) */
    const float *term; int64_t term_jb;        /* the kernel's own, NULL in a job given
                                                * it: a query block's mask and bias over
                                                * the key block from term_jb, staged */
} attn_sdpa_job;

/* A row's log-sum-exp from its online softmax's reference max m and its
 * sum l = sum_j e^(s_j - m) (the sink's term included): m + ln l, in
 * double; -inf for a row with nothing to attend (l = 0). */
static inline float attn_lse(float m, float l)
{
    return l > 0.0f ? (float)((double)m + log((double)l)) : -INFINITY;
}

/* Runs n independent head jobs (e.g. batch x heads), spreading the work
 * (jobs and query blocks) over up to `threads` threads, in scratch of
 * attn_sdpa_scratch_bytes(jobs, n, threads) bytes (never NULL for n > 0). */
void attn_sdpa_run(const attn_sdpa_job *jobs, size_t n, int threads, void *scratch);

/* Bytes of scratch attn_sdpa_run needs for these jobs on up to `threads`
 * threads: per worker O(d + dv + lk) rows of a query block, never
 * Lq x Lk; with bf16 jobs, their keys and values in bfloat16 besides. Reads only each job's lq, lk, d, dv and whether w is set, so a
 * planner may ask with jobs that hold just those. */
size_t attn_sdpa_scratch_bytes(const attn_sdpa_job *jobs, size_t n, int threads);

/* sum_j e^(s[j] - m) for j < n (n >= 1, every s[j] finite and at most m)
 * with the running variant's vector exponential (within a few ulp) and
 * float partial sums: a log-softmax's denominator, as over a vocabulary. */
float attn_sum_exp(const float *s, int64_t n, float m);

/* Number of CPUs to use when a caller asks for "all" (>= 1). */
int attn_cpu_count(void);

#endif /* ATTN_KERNELS_H */
