/* kernels_isa.h - internal: the instruction-set variants of the kernels
 * (one table each, compiled from kernels_tmpl.h, rows_tmpl.h and
 * linear_tmpl.h over the vocabulary in simd_<isa>.h), and which one runs.
 *
 * The variant is chosen once per process: the one named by the environment
 * variable ATTN_ISA when the CPU supports it, else the best the CPU has
 * (avx512 rather than avx512bf16 on Intel CPUs without AMX, whose bf16 dot
 * product is slower than its emulation: kernels.c).
 * ATTN_ISA accepts exactly these names:
 *   avx512bf16  avx512 with AVX512_BF16: bf16 products in vdpbf16ps, or on
 *            the AMX tile unit when the CPU has AMX-BF16 and the kernel
 *            grants this process its tile data (arch_prctl), unless the
 *            environment variable ATTN_AMX is 0
 *   avx512   AVX-512 F/BW/DQ/VL with FMA (x86-64)
 *   avx2     AVX2 with FMA (x86-64)
 *   generic  portable C, any CPU
 * Any other value, or a variant the CPU lacks, is ignored. */
#ifndef ATTN_KERNELS_ISA_H
#define ATTN_KERNELS_ISA_H

#include <stddef.h>
#include <stdint.h>
#include "kernels.h"

/* Key rows are padded to a multiple of this many floats in the packed,
 * transposed key panels tanh_scores reads (the widest vector). */
#define ATTN_ROW_PAD 16

/* One instruction-set variant. The gemm and sdpa members are what
 * attn_gemm_nt, attn_sdpa_run and their scratch-size functions (kernels.h)
 * call; the row members serve the row-by-row driver (rows.c). */
typedef struct {
    const char *name; /* "avx512bf16", "avx512", "avx2" or "generic" */
    int defer_exp;    /* whether its flash kernel can defer (DEFER_EXP) */
    int64_t gemm_panel; /* rows of B per packed panel (gemm_pack) */
    size_t (*gemm_scratch_bytes)(int64_t m, int64_t n, int64_t k, int threads);
    void (*gemm_nt)(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, const float *bias,
                    float *c, int64_t ldc, int64_t cg, int64_t cgs, int threads,
                    void *scratch, const float *bp);
    /* B packed whole for gemm_nt's bp: its size, and the packing. */
    size_t (*gemm_packed_floats)(int64_t n, int64_t k);
    void (*gemm_pack)(int64_t n, int64_t k, const float *b, int64_t ldb, float *bp);
    size_t (*sdpa_scratch_bytes)(const attn_sdpa_job *jobs, size_t n, int threads);
    void (*sdpa_run)(const attn_sdpa_job *jobs, size_t n, int threads, void *scratch);

    /* y[e] = tanh(x[e]) for e < n, within a few ulp (simd_math.h); any
     * input, NaN and +-inf included, gives a finite result in [-1, 1]. */
    void (*tanh)(const float *x, float *y, int64_t n);

    /* s[j] = sum_{h<d} vw[h] * tanh(a[h] + bt[h*ldb + j]) (vw NULL: ones)
     * for at least every j in [j0, j1). bt is a key panel transposed
     * (d rows of ldb floats, ldb a multiple of ATTN_ROW_PAD, padding
     * finite); j1 <= ldb. Whole vectors are written, so s must hold ldb
     * floats, and s[j] outside [j0, j1) may or may not be written. */
    void (*tanh_scores)(const float *a, const float *bt, int64_t ldb, int64_t d,
                        const float *vw, int64_t j0, int64_t j1, float *s);

    /* o[c] = sum_{j<lk} w[j] * v[j*ldv + c] for c < dv (o is overwritten;
     * rows with a zero weight may be skipped, so v must be finite). */
    void (*weighted_sum)(const float *w, int64_t lk, const float *v, int64_t ldv,
                         int64_t dv, float *o);

    /* w = softmax(s) over all n >= 1 keys (max subtracted; s finite). */
    void (*softmax)(const float *s, int64_t n, float *w);

    /* sum_j e^(s[j] - m) over n >= 1 finite s[j] <= m (attn_sum_exp). */
    float (*sum_exp)(const float *s, int64_t n, float m);

    /* Linear attention (linear_tmpl.h, linear.c): y[e] = phi(x[e]) for
     * e < n, elu(x) + 1 or (relu set) max(x, 0); x and y may be the same. */
    void (*lin_phi)(const float *x, int64_t n, int relu, float *y);

    /* o[i][c] = (acc ? o[i][c] : 0) + sum_{k<p} a[i][k] b[k][c] for i < m,
     * c < n, row-major with row strides lda, ldb, ldo. */
    void (*lin_gemm_nn)(int64_t m, int64_t n, int64_t p, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float *o, int64_t ldo, int acc);

    /* Rotary embedding of n rows (rope.c's pre-pass; the flash kernel's own
     * rotation is the same code): row r of x (stride xs) turned by table
     * row t0 + r into row r of y (stride ys, may be x); see rope_apply in
     * kernels_tmpl.h. */
    void (*rope)(const float *table, int64_t t0, int64_t n, int64_t d, int64_t dims,
                 int interleaved, const float *x, int64_t xs, float *y, int64_t ys);

    /* y[e] = c tanh(x[e] / c) for e < n (c > 0), the flash kernel's softcap
     * of a score (simd_math.h); here for test_rows, which checks its
     * accuracy. */
    void (*softcap)(const float *x, float *y, int64_t n, float c);
} attn_kernel_set;

/* The table of the variant that includes this, from the names the
 * templates define (kernels_avx512.c: attn_kernels_avx512 = ...). */
#define ATTN_KERNEL_SET(name)                                                   \
    {name, DEFER_EXP, QB, gemm_scratch_bytes, gemm_nt, gemm_packed_floats, gemm_pack, sdpa_scratch_bytes, sdpa_run, rows_tanh, \
     rows_tanh_scores, rows_weighted_sum, rows_softmax, rows_sum_exp, lin_phi, lin_gemm_nn, rope_apply, \
     softcap_apply}

/* Defined only on x86-64 builds (kernels_avx512bf16.c, kernels_avx512.c,
 * kernels_avx2.c). */
extern const attn_kernel_set attn_kernels_avx512bf16;
extern const attn_kernel_set attn_kernels_avx512;
extern const attn_kernel_set attn_kernels_avx2;
extern const attn_kernel_set attn_kernels_generic;

/* The variant in use (chosen on the first call; see above). Never NULL. */
const attn_kernel_set *attn_kernels_active(void);

/* The named variant, or NULL when the name is unknown or the CPU lacks its
 * instructions. */
const attn_kernel_set *attn_kernels_find(const char *isa);

/* Name of the variant in use: "avx512bf16", "avx512", "avx2" or "generic". */
const char *attn_kernels_isa(void);

/* Switches to the named variant. Returns 0, or -1 when the name is unknown
 * or the CPU lacks the instructions. Not thread-safe: call it while no
 * kernel runs (scratch sizes differ between variants). */
int attn_kernels_use(const char *isa);

/* Whether the flash kernel takes a full score tile's exponentials during
 * the next tile's products (flash_block_deferred in kernels_tmpl.h, built
 * where the vocabulary sets DEFER_EXP) or right after its own (the answer
 * is the same to the bit either way). Chosen once per process, by CPU: on
 * AMD's (measured on Zen 5: the core 4-6% faster) but not on Intel's
 * (measured on a Xeon with AVX-512: 3-5% slower), unless the environment
 * variable ATTN_DEFER_EXP is 0 or 1. attn_kernels_set_defer_exp: tests and
 * benches switch it; not thread-safe, call it while no kernel runs. */
int attn_kernels_defer_exp(void);
void attn_kernels_set_defer_exp(int on);

/* The AMX tile unit (amx.c), for the bf16 kernel of avx512bf16: products
 * of bfloat16 pairs in 16 x 16 float32 tiles (TDPBF16PS), on blocks of 64
 * query lanes (rows of 64 words or floats, 256 bytes).
 * attn_amx_ready: whether the CPU has AMX-BF16 and AMX-TILE, the kernel
 * granted the tile data (asked once per process), and ATTN_AMX is not 0.
 * attn_amx_begin / attn_amx_end: load the tile configuration on the
 * calling thread / release the tiles, around a run of the two below.
 * attn_amx_scores: st[k][q] = sum_p kb[k][p] . qt2[p][q] for k < nk (a
 * multiple of 16), p < ldk (a multiple of 16 words), q < 64.
 * attn_amx_pv: ot[c][q] += sum_t vt[c][t] . pt2[t][q] for c < dv (a
 * multiple of 16), t < np2 (a multiple of 16), q < 64. */
int attn_amx_ready(void);
/* Tests: on 0, the tiles are no longer used; on 1, asked for again. Not
 * thread-safe: call it while no kernel runs. */
void attn_amx_set(int on);
void attn_amx_begin(void);
void attn_amx_end(void);
void attn_amx_scores(const uint32_t *kb, int64_t ldk, const uint32_t *qt2, int nk, float *st);
void attn_amx_pv(const uint32_t *vt, int64_t ldv, int np2, const uint32_t *pt2, int64_t dv,
                 float *ot);

#endif /* ATTN_KERNELS_ISA_H */
