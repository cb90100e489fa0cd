/* rowsimd.h - internal: the SIMD inner loops of the row-by-row driver
 * (rows.c): a fast float32 tanh fused into the additive / concat_tanh
 * scores, and the weighted sum of value rows. AVX-512, AVX2 and portable C
 * variants, one of them chosen at run time (rowsimd.c). */
#ifndef ATTN_ROWSIMD_H
#define ATTN_ROWSIMD_H

#include <stdint.h>

/* Key rows are padded to a multiple of this many floats in the packed,
 * transposed key panels the score kernel reads (the widest vector). */
#define ATTN_ROWSIMD_PAD 16

typedef struct {
    const char *name; /* "avx512", "avx2" or "generic" */

    /* y[e] = tanh(x[e]) for e < n, within a few ulp (see rowsimd.c); any
     * input, NaN and +-inf included, gives a finite result in [-1, 1]. */
    void (*tanh)(const float *x, float *y, int64_t n);

    /* s[j] = sum_{h<d} vw[h] * tanh(a[h] + bt[h*ldb + j]) (vw NULL: ones)
     * for at least every j in [j0, j1). bt is a key panel transposed
     * (d rows of ldb floats, ldb a multiple of ATTN_ROWSIMD_PAD, padding
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
} attn_rowsimd;

/* The variant in use: the best the CPU supports, or the one named by the
 * environment variable ATTN_ISA when the CPU supports it. Never NULL. */
const attn_rowsimd *attn_rowsimd_get(void);

/* The named variant ("avx512", "avx2", "generic"), or NULL when the name
 * is unknown or the CPU lacks its instructions (for tests and benches). */
const attn_rowsimd *attn_rowsimd_find(const char *isa);

#endif /* ATTN_ROWSIMD_H */
