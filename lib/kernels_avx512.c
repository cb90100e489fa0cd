/* kernels_avx512.c - the kernels of kernels_tmpl.h for AVX-512 (16 lanes,
 * 32 registers), compiled with a function target attribute so the build
 * needs no -march flag; kernels.c calls them only on CPUs that have it. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcomment" /* kernels.h opening comment */
#include "kernels.h"
#pragma GCC diagnostic pop
#include "kernels_isa.h"
#include "pool.h"

#include <immintrin.h>

#define TGT __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define FN(x) x##_avx512
#define V __m512
#define VM __mmask16
#define VW 16
#define QV 4 /* 64 query rows per block */
#define KN 6 /* score tile 6 x 4 vectors: 24 accumulators */
#define CN 6

#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps(p, v)
#define VLOADM(p, m) _mm512_maskz_loadu_ps(m, p)
#define VSTOREM(p, m, v) _mm512_mask_storeu_ps(p, m, v)
#define VTAILMASK(n) ((__mmask16)((n) ? (1u << (n)) - 1u : 0xFFFFu))
#define VLANES(l, h) ((__mmask16)(((1u << ((h) + 1)) - 1u) & ~((1u << (l)) - 1u)))
#define VSET1(x) _mm512_set1_ps(x)
#define VZERO() _mm512_setzero_ps()
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VMUL(a, b) _mm512_mul_ps(a, b)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VSUB(a, b) _mm512_sub_ps(a, b)
#define VMAX(a, b) _mm512_max_ps(a, b)
#define VDIV(a, b) _mm512_div_ps(a, b)
#define VSEL(m, a, b) _mm512_mask_blend_ps(m, b, a)
#define VISNINF(x) _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ)
#define VGTZERO(x) _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ)
#define VANYGT(a, b) (_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ) != 0)
#define VHSUM(v) _mm512_reduce_add_ps(v)
#define VSTREAM(p, v) _mm512_stream_ps(p, v)
#define VSFENCE() _mm_sfence()
#define VEXP(x) exp_avx512(x)
#define VEXPN(x) expn_avx512(x)
#define VTRANSPOSE(r) transpose_avx512(r)

/* In-place 16 x 16 transpose: 2x2 blocks by unpack, 4x4 by shuffle, then
 * the 128-bit lanes by two rounds of shuffle_f32x4. */
static inline __attribute__((always_inline)) TGT void transpose_avx512(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    /* r[4g+k], 128-bit lane L: column 4L+k of rows 4g..4g+3 */
    for (int k = 0; k < 4; k++) {
        t[k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);
        t[4 + k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xdd);
        t[8 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
        t[12 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xdd);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
        r[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);
        r[4 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0x88);
        r[12 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0xdd);
    }
}

/* exp(x) after Cephes expf (Moshier): x = n ln2 + r with |r| <= ln2/2 by
 * a two-part ln2, e^r by its degree-7 Taylor/minimax form, 2^n by
 * vscalefps, which also underflows to 0 and so handles -inf; within 1-2
 * ulp of the true value over the float range. */
static inline __attribute__((always_inline)) TGT __m512 exp_avx512(__m512 x)
{
    x = _mm512_min_ps(x, _mm512_set1_ps(88.7228391f));
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 r2 = _mm512_mul_ps(r, r);
    __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(y, n);
}

/* exp_avx512 for x <= 88 or -inf only (the flash loop's VEXPN), with
 * three operations fewer: no upper clamp, and e^r as one Horner chain of
 * fused multiply-adds, 1 + r (1 + r (1/2 + ...)) with the same
 * coefficients, whose final rounding near 1 FMA keeps as accurate as the
 * split r + r^2 P(r) + 1 (checked on every float in [-87, 0]: within 0.87
 * ulp of exp in double, against 1.0 ulp for exp_avx512). */
static inline __attribute__((always_inline)) TGT __m512 expn_avx512(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(_mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f)), n);
}

#include "kernels_tmpl.h"

const attn_kernel_set attn_kernels_avx512 = {"avx512", gemm_nt_avx512, sdpa_run_avx512};

#else
typedef int attn_kernels_avx512_unused; /* ISO C wants a declaration */
#endif
