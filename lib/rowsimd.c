/* rowsimd.c - the SIMD inner loops of the row-by-row driver: tanh scores
 * (additive, concat_tanh) and the weighted sum of value rows, for AVX-512
 * and AVX2 (function target attributes, no -march flag) with a portable C
 * fallback; the variant is picked once per process via
 * __builtin_cpu_supports.
 *
 * tanh follows Cephes tanhf (S. L. Moshier, Cephes Math Library 2.x):
 *   |x| <  0.625: tanh x = x + x z P(z), z = x^2, P the Cephes degree-4
 *                 minimax polynomial (no cancellation, exact for tiny x);
 *   |x| >= 0.625: tanh |x| = 1 - 2 / (e^{2|x|} + 1), sign copied from x;
 * with |x| clamped to 9.1 first (tanh rounds to 1 in float32 beyond about
 * 9.01), so the exponential never overflows and NaN or +-inf saturate to
 * +-1. e^t for t in [0, 18.2] is Cephes expf: t = n ln2 + r with a
 * two-part ln2, e^r = 1 + r + r^2 Q(r) (degree-5 Q), 2^n built in the
 * exponent bits. The sweep in tests/test_rows.c measures the result
 * against tanh() in double (a couple of ulp; see that file). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "rowsimd.h"

/* Cephes tanhf, |x| < 0.625. */
#define TH_P0 -5.70498872745e-3f
#define TH_P1 2.06390887954e-2f
#define TH_P2 -5.37397155531e-2f
#define TH_P3 1.33314422036e-1f
#define TH_P4 -3.33332819422e-1f
#define TH_SMALL 0.625f
#define TH_CLAMP 9.1f
/* Cephes expf. */
#define EX_LOG2E 1.44269504088896341f
#define EX_C1 0.693359375f
#define EX_C2 -2.12194440e-4f
#define EX_Q0 1.9875691500e-4f
#define EX_Q1 1.3981999507e-3f
#define EX_Q2 8.3334519073e-3f
#define EX_Q3 4.1665795894e-2f
#define EX_Q4 1.6666665459e-1f
#define EX_Q5 5.0000001201e-1f

/* ------------------------------------------------------- portable C */

static float tanh_1(float x)
{
    float ax = fabsf(x);
    if (ax < TH_SMALL) {
        float z = x * x;
        float p = (((TH_P0 * z + TH_P1) * z + TH_P2) * z + TH_P3) * z + TH_P4;
        return copysignf(p * z * ax + ax, x);
    }
    float t = ax < TH_CLAMP ? ax : TH_CLAMP; /* NaN: the clamp */
    float y = 1.0f - 2.0f / (expf(2.0f * t) + 1.0f);
    return copysignf(y, x);
}

static void tanh_generic(const float *x, float *y, int64_t n)
{
    for (int64_t e = 0; e < n; e++)
        y[e] = tanh_1(x[e]);
}

static void tanh_scores_generic(const float *a, const float *bt, int64_t ldb, int64_t d,
                                const float *vw, int64_t j0, int64_t j1, float *s)
{
    for (int64_t j = j0; j < j1; j++) {
        float acc = 0.0f;
        for (int64_t h = 0; h < d; h++) {
            float t = tanh_1(a[h] + bt[h * ldb + j]);
            acc += vw ? vw[h] * t : t;
        }
        s[j] = acc;
    }
}

static void weighted_sum_generic(const float *w, int64_t lk, const float *v, int64_t ldv,
                                 int64_t dv, float *o)
{
    memset(o, 0, (size_t)dv * sizeof *o);
    for (int64_t j = 0; j < lk; j++) {
        float wj = w[j];
        if (wj == 0.0f)
            continue;
        const float *vr = v + j * ldv;
        for (int64_t c = 0; c < dv; c++)
            o[c] += wj * vr[c];
    }
}

static void softmax_generic(const float *s, int64_t n, float *w)
{
    float mx = s[0];
    for (int64_t j = 1; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) {
        w[j] = expf(s[j] - mx);
        sum += w[j];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < n; j++)
        w[j] *= inv;
}

static const attn_rowsimd rowsimd_generic = {"generic", tanh_generic, tanh_scores_generic,
                                             weighted_sum_generic, softmax_generic};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define ALWAYS __attribute__((always_inline))

/* ------------------------------------------------------------ AVX-512 */

#define T512 __attribute__((target("avx512f,fma")))

/* e^x, Cephes expf: x = n ln2 + r, a degree-5 polynomial in r, then a
 * scale by 2^n. No clamping: callers bound x. */
static inline ALWAYS T512 __m512 exp_v16(__m512 x)
{
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EX_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EX_C1), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EX_C2), r);
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(EX_Q0), r, _mm512_set1_ps(EX_Q1));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(EX_Q2));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(EX_Q3));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(EX_Q4));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(EX_Q5));
    __m512 e = _mm512_add_ps(_mm512_fmadd_ps(q, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(e, n); /* e * 2^n */
}

static inline ALWAYS T512 __m512 tanh_v16(__m512 x)
{
    __m512 ax = _mm512_abs_ps(x);
    /* small |x| */
    __m512 z = _mm512_mul_ps(x, x);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(TH_P0), z, _mm512_set1_ps(TH_P1));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(TH_P2));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(TH_P3));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(TH_P4));
    __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), ax, ax);
    /* large |x|: e^{2t}; min() returns its second operand for NaN */
    __m512 t = _mm512_min_ps(ax, _mm512_set1_ps(TH_CLAMP));
    t = _mm512_add_ps(t, t);
    __m512 e = exp_v16(t);
    __m512 big = _mm512_sub_ps(_mm512_set1_ps(1.0f),
                               _mm512_div_ps(_mm512_set1_ps(2.0f),
                                             _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    __mmask16 is_small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(TH_SMALL), _CMP_LT_OQ);
    __m512i y = _mm512_castps_si512(_mm512_mask_blend_ps(is_small, big, small));
    __m512i sign = _mm512_and_epi32(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
    return _mm512_castsi512_ps(_mm512_or_epi32(y, sign));
}

static T512 void tanh_avx512(const float *x, float *y, int64_t n)
{
    int64_t e = 0;
    for (; e + 16 <= n; e += 16)
        _mm512_storeu_ps(y + e, tanh_v16(_mm512_loadu_ps(x + e)));
    if (e < n) {
        __mmask16 m = (__mmask16)((1u << (n - e)) - 1u);
        _mm512_mask_storeu_ps(y + e, m, tanh_v16(_mm512_maskz_loadu_ps(m, x + e)));
    }
}

/* Keys along the lanes: four vectors (64 keys) per pass over h while at
 * least four are needed, so four independent tanh chains are in flight. */
static T512 void tanh_scores_avx512(const float *a, const float *bt, int64_t ldb, int64_t d,
                                    const float *vw, int64_t j0, int64_t j1, float *s)
{
    int64_t j = j0 & ~(int64_t)15;
    while (j < j1) {
        if (j1 - j > 48) {
            __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
            const float *p = bt + j;
            for (int64_t h = 0; h < d; h++, p += ldb) {
                __m512 ah = _mm512_set1_ps(a[h]);
                __m512 wh = _mm512_set1_ps(vw ? vw[h] : 1.0f);
                c0 = _mm512_fmadd_ps(wh, tanh_v16(_mm512_add_ps(ah, _mm512_loadu_ps(p))), c0);
                c1 = _mm512_fmadd_ps(wh, tanh_v16(_mm512_add_ps(ah, _mm512_loadu_ps(p + 16))), c1);
                c2 = _mm512_fmadd_ps(wh, tanh_v16(_mm512_add_ps(ah, _mm512_loadu_ps(p + 32))), c2);
                c3 = _mm512_fmadd_ps(wh, tanh_v16(_mm512_add_ps(ah, _mm512_loadu_ps(p + 48))), c3);
            }
            _mm512_storeu_ps(s + j, c0);
            _mm512_storeu_ps(s + j + 16, c1);
            _mm512_storeu_ps(s + j + 32, c2);
            _mm512_storeu_ps(s + j + 48, c3);
            j += 64;
        } else {
            __m512 c0 = _mm512_setzero_ps();
            const float *p = bt + j;
            for (int64_t h = 0; h < d; h++, p += ldb) {
                __m512 x = _mm512_add_ps(_mm512_set1_ps(a[h]), _mm512_loadu_ps(p));
                c0 = _mm512_fmadd_ps(_mm512_set1_ps(vw ? vw[h] : 1.0f), tanh_v16(x), c0);
            }
            _mm512_storeu_ps(s + j, c0);
            j += 16;
        }
    }
}

static inline ALWAYS T512 __mmask16 lanes16(int64_t left)
{
    return left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? (__mmask16)0
                                                       : (__mmask16)((1u << left) - 1u);
}

/* Up to 64 output columns at a time; keys two at a time into two sets of
 * four accumulators, so eight FMA chains hide the FMA latency. */
static T512 void weighted_sum_avx512(const float *w, int64_t lk, const float *v, int64_t ldv,
                                     int64_t dv, float *o)
{
    for (int64_t c = 0; c < dv; c += 64) {
        __mmask16 m0 = lanes16(dv - c), m1 = lanes16(dv - c - 16);
        __mmask16 m2 = lanes16(dv - c - 32), m3 = lanes16(dv - c - 48);
        __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
        __m512 d0 = c0, d1 = c0, d2 = c0, d3 = c0;
        int64_t j = 0;
        for (; j + 2 <= lk; j += 2) {
            if (w[j] == 0.0f && w[j + 1] == 0.0f)
                continue;
            __m512 a = _mm512_set1_ps(w[j]), b = _mm512_set1_ps(w[j + 1]);
            const float *va = v + j * ldv + c, *vb = va + ldv;
            c0 = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m0, va), c0);
            d0 = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(m0, vb), d0);
            if (m1) {
                c1 = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m1, va + 16), c1);
                d1 = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(m1, vb + 16), d1);
                c2 = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m2, va + 32), c2);
                d2 = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(m2, vb + 32), d2);
                c3 = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m3, va + 48), c3);
                d3 = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(m3, vb + 48), d3);
            }
        }
        if (j < lk && w[j] != 0.0f) {
            __m512 a = _mm512_set1_ps(w[j]);
            const float *va = v + j * ldv + c;
            c0 = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m0, va), c0);
            c1 = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m1, va + 16), c1);
            c2 = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m2, va + 32), c2);
            c3 = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m3, va + 48), c3);
        }
        _mm512_mask_storeu_ps(o + c, m0, _mm512_add_ps(c0, d0));
        _mm512_mask_storeu_ps(o + c + 16, m1, _mm512_add_ps(c1, d1));
        _mm512_mask_storeu_ps(o + c + 32, m2, _mm512_add_ps(c2, d2));
        _mm512_mask_storeu_ps(o + c + 48, m3, _mm512_add_ps(c3, d3));
    }
}

/* e^x for x <= 0; below -104 the scalef underflows to 0, and -inf gives 0. */
static inline ALWAYS T512 __m512 exp_neg_v16(__m512 x)
{
    return exp_v16(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)));
}

static T512 void softmax_avx512(const float *s, int64_t n, float *w)
{
    __m512 mx = _mm512_set1_ps(-INFINITY), sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16)
        mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, lanes16(n - j), s + j));
    __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 k = lanes16(n - j);
        __m512 e = _mm512_maskz_mov_ps(k, exp_neg_v16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), m)));
        _mm512_mask_storeu_ps(w + j, k, e);
        sum = _mm512_add_ps(sum, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 k = lanes16(n - j);
        _mm512_mask_storeu_ps(w + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + j), inv));
    }
}

static const attn_rowsimd rowsimd_avx512 = {"avx512", tanh_avx512, tanh_scores_avx512,
                                            weighted_sum_avx512, softmax_avx512};

/* --------------------------------------------------------------- AVX2 */

#define T256 __attribute__((target("avx2,fma")))

/* e^x, Cephes expf as exp_v16; 2^n is built in the exponent bits, so
 * callers keep x within the normal range (about -87.3 to 88). */
static inline ALWAYS T256 __m256 exp_v8(__m256 x)
{
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EX_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EX_C1), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EX_C2), r);
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(EX_Q0), r, _mm256_set1_ps(EX_Q1));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(EX_Q2));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(EX_Q3));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(EX_Q4));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(EX_Q5));
    __m256 e = _mm256_add_ps(_mm256_fmadd_ps(q, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    __m256i k = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(e, _mm256_castsi256_ps(k));
}

static inline ALWAYS T256 __m256 tanh_v8(__m256 x)
{
    const __m256 sgn = _mm256_set1_ps(-0.0f);
    __m256 ax = _mm256_andnot_ps(sgn, x);
    __m256 z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(TH_P0), z, _mm256_set1_ps(TH_P1));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TH_P2));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TH_P3));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TH_P4));
    __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), ax, ax);
    __m256 t = _mm256_min_ps(ax, _mm256_set1_ps(TH_CLAMP));
    t = _mm256_add_ps(t, t);
    __m256 e = exp_v8(t);
    __m256 big = _mm256_sub_ps(_mm256_set1_ps(1.0f),
                               _mm256_div_ps(_mm256_set1_ps(2.0f),
                                             _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    __m256 is_small = _mm256_cmp_ps(ax, _mm256_set1_ps(TH_SMALL), _CMP_LT_OQ);
    return _mm256_or_ps(_mm256_blendv_ps(big, small, is_small), _mm256_and_ps(x, sgn));
}

/* Lanes c < left as an AVX2 load/store mask. */
static inline ALWAYS T256 __m256i lanes8(int64_t left)
{
    int32_t l = left > 8 ? 8 : left < 0 ? 0 : (int32_t)left;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(l), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static T256 void tanh_avx2(const float *x, float *y, int64_t n)
{
    int64_t e = 0;
    for (; e + 8 <= n; e += 8)
        _mm256_storeu_ps(y + e, tanh_v8(_mm256_loadu_ps(x + e)));
    if (e < n) {
        __m256i m = lanes8(n - e);
        _mm256_maskstore_ps(y + e, m, tanh_v8(_mm256_maskload_ps(x + e, m)));
    }
}

static T256 void tanh_scores_avx2(const float *a, const float *bt, int64_t ldb, int64_t d,
                                  const float *vw, int64_t j0, int64_t j1, float *s)
{
    int64_t j = j0 & ~(int64_t)7;
    while (j < j1) {
        if (j1 - j > 16) {
            __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0;
            const float *p = bt + j;
            for (int64_t h = 0; h < d; h++, p += ldb) {
                __m256 ah = _mm256_set1_ps(a[h]);
                __m256 wh = _mm256_set1_ps(vw ? vw[h] : 1.0f);
                c0 = _mm256_fmadd_ps(wh, tanh_v8(_mm256_add_ps(ah, _mm256_loadu_ps(p))), c0);
                c1 = _mm256_fmadd_ps(wh, tanh_v8(_mm256_add_ps(ah, _mm256_loadu_ps(p + 8))), c1);
                c2 = _mm256_fmadd_ps(wh, tanh_v8(_mm256_add_ps(ah, _mm256_loadu_ps(p + 16))), c2);
            }
            _mm256_storeu_ps(s + j, c0);
            _mm256_storeu_ps(s + j + 8, c1);
            _mm256_storeu_ps(s + j + 16, c2);
            j += 24;
        } else {
            __m256 c0 = _mm256_setzero_ps();
            const float *p = bt + j;
            for (int64_t h = 0; h < d; h++, p += ldb) {
                __m256 x = _mm256_add_ps(_mm256_set1_ps(a[h]), _mm256_loadu_ps(p));
                c0 = _mm256_fmadd_ps(_mm256_set1_ps(vw ? vw[h] : 1.0f), tanh_v8(x), c0);
            }
            _mm256_storeu_ps(s + j, c0);
            j += 8;
        }
    }
}

/* Up to 32 output columns in four accumulators across all keys. */
static T256 void weighted_sum_avx2(const float *w, int64_t lk, const float *v, int64_t ldv,
                                   int64_t dv, float *o)
{
    for (int64_t c = 0; c < dv; c += 32) {
        __m256i m0 = lanes8(dv - c), m1 = lanes8(dv - c - 8);
        __m256i m2 = lanes8(dv - c - 16), m3 = lanes8(dv - c - 24);
        int full = dv - c >= 32;
        __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
        for (int64_t j = 0; j < lk; j++) {
            if (w[j] == 0.0f)
                continue;
            __m256 b = _mm256_set1_ps(w[j]);
            const float *vr = v + j * ldv + c;
            if (full) {
                c0 = _mm256_fmadd_ps(b, _mm256_loadu_ps(vr), c0);
                c1 = _mm256_fmadd_ps(b, _mm256_loadu_ps(vr + 8), c1);
                c2 = _mm256_fmadd_ps(b, _mm256_loadu_ps(vr + 16), c2);
                c3 = _mm256_fmadd_ps(b, _mm256_loadu_ps(vr + 24), c3);
            } else {
                c0 = _mm256_fmadd_ps(b, _mm256_maskload_ps(vr, m0), c0);
                c1 = _mm256_fmadd_ps(b, _mm256_maskload_ps(vr + 8, m1), c1);
                c2 = _mm256_fmadd_ps(b, _mm256_maskload_ps(vr + 16, m2), c2);
                c3 = _mm256_fmadd_ps(b, _mm256_maskload_ps(vr + 24, m3), c3);
            }
        }
        _mm256_maskstore_ps(o + c, m0, c0);
        _mm256_maskstore_ps(o + c + 8, m1, c1);
        _mm256_maskstore_ps(o + c + 16, m2, c2);
        _mm256_maskstore_ps(o + c + 24, m3, c3);
    }
}

/* e^x for x <= 0; x is clamped at -87.3 so 2^n stays a normal float
 * (e^-87.3 ~ 1e-38 stands in for smaller results). */
static inline ALWAYS T256 __m256 exp_neg_v8(__m256 x)
{
    return exp_v8(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)));
}

static inline ALWAYS T256 float hsum_v8(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

static inline ALWAYS T256 float hmax_v8(__m256 v)
{
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

static T256 void softmax_avx2(const float *s, int64_t n, float *w)
{
    __m256 mx = _mm256_set1_ps(-INFINITY), sum = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + j));
    float m = hmax_v8(mx);
    for (int64_t t = j; t < n; t++)
        m = s[t] > m ? s[t] : m;
    __m256 mv = _mm256_set1_ps(m);
    for (j = 0; j + 8 <= n; j += 8) {
        __m256 e = exp_neg_v8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
        _mm256_storeu_ps(w + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (j < n) {
        __m256i k = lanes8(n - j);
        __m256 e = _mm256_and_ps(exp_neg_v8(_mm256_sub_ps(_mm256_maskload_ps(s + j, k), mv)),
                                 _mm256_castsi256_ps(k));
        _mm256_maskstore_ps(w + j, k, e);
        sum = _mm256_add_ps(sum, e);
    }
    float inv = 1.0f / hsum_v8(sum);
    for (j = 0; j < n; j++)
        w[j] *= inv;
}

static const attn_rowsimd rowsimd_avx2 = {"avx2", tanh_avx2, tanh_scores_avx2,
                                          weighted_sum_avx2, softmax_avx2};
#endif /* x86-64 */

/* ------------------------------------------------------------ dispatch */

const attn_rowsimd *attn_rowsimd_find(const char *isa)
{
    if (!isa)
        return NULL;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (strcmp(isa, "avx512") == 0 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("fma"))
        return &rowsimd_avx512;
    if (strcmp(isa, "avx2") == 0 && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        return &rowsimd_avx2;
#endif
    if (strcmp(isa, "generic") == 0)
        return &rowsimd_generic;
    return NULL;
}

static const attn_rowsimd *active;

/* A pure function of the CPU and ATTN_ISA, so two threads racing here
 * store the same pointer; the atomics keep that race defined. */
const attn_rowsimd *attn_rowsimd_get(void)
{
    const attn_rowsimd *k = __atomic_load_n(&active, __ATOMIC_ACQUIRE);
    if (k)
        return k;
    k = attn_rowsimd_find(getenv("ATTN_ISA"));
    if (!k)
        k = attn_rowsimd_find("avx512");
    if (!k)
        k = attn_rowsimd_find("avx2");
    if (!k)
        k = &rowsimd_generic;
    __atomic_store_n(&active, k, __ATOMIC_RELEASE);
    return k;
}
