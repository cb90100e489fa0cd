/* kernels_avx2.c - the kernels of kernels_tmpl.h for AVX2 + FMA (8 lanes,
 * 16 registers), compiled with a function target attribute so the build
 * needs no -march flag; kernels.c calls them only on CPUs that have it. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcomment" /* kernels.h opening comment */
#include "kernels.h"
#pragma GCC diagnostic pop
#include "kernels_isa.h"
#include "pool.h"

#include <immintrin.h>

#define TGT __attribute__((target("avx2,fma")))
#define FN(x) x##_avx2
#define V __m256
#define VM __m256
#define VW 8
#define QV 2 /* 16 query rows per block */
#define KN 6 /* score tile 6 x 2 vectors: 12 accumulators */
#define CN 6

#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps(p, v)
#define VLOADM(p, m) _mm256_maskload_ps(p, _mm256_castps_si256(m))
#define VSTOREM(p, m, v) _mm256_maskstore_ps(p, _mm256_castps_si256(m), v)
#define VTAILMASK(n) lanes_avx2(0, (n) ? (n) - 1 : 7)
#define VLANES(l, h) lanes_avx2(l, h)
#define VSET1(x) _mm256_set1_ps(x)
#define VZERO() _mm256_setzero_ps()
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VMUL(a, b) _mm256_mul_ps(a, b)
#define VADD(a, b) _mm256_add_ps(a, b)
#define VSUB(a, b) _mm256_sub_ps(a, b)
#define VMAX(a, b) _mm256_max_ps(a, b)
#define VDIV(a, b) _mm256_div_ps(a, b)
#define VSEL(m, a, b) _mm256_blendv_ps(b, a, m)
#define VISNINF(x) _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ)
#define VGTZERO(x) _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ)
#define VANYGT(a, b) (_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ)) != 0)
#define VHSUM(v) hsum_avx2(v)
#define VSTREAM(p, v) _mm256_stream_ps(p, v)
#define VSFENCE() _mm_sfence()
#define VEXP(x) exp_avx2(x)
#define VTRANSPOSE(r) transpose_avx2(r)

/* In-place 8 x 8 transpose: unpack, shuffle, then swap 128-bit halves. */
static inline __attribute__((always_inline)) TGT void transpose_avx2(__m256 r[8])
{
    __m256 t[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {
        t[k] = _mm256_permute2f128_ps(r[k], r[4 + k], 0x20);
        t[4 + k] = _mm256_permute2f128_ps(r[k], r[4 + k], 0x31);
    }
    for (int k = 0; k < 8; k++) r[k] = t[k];
}

/* Lanes l..h (inclusive) set, as a float mask. */
static inline __attribute__((always_inline)) TGT __m256 lanes_avx2(int l, int h)
{
    __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i ge = _mm256_cmpgt_epi32(iota, _mm256_set1_epi32(l - 1));
    __m256i le = _mm256_cmpgt_epi32(_mm256_set1_epi32(h + 1), iota);
    return _mm256_castsi256_ps(_mm256_and_si256(ge, le));
}

static inline __attribute__((always_inline)) TGT float hsum_avx2(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* exp(x) after Cephes expf, as in kernels_avx512.c; 2^n is built in the
 * exponent field, so x is clamped to where 2^n is a normal float and
 * anything below -87.3 (results under 2^-126, including -inf) becomes 0. */
static inline __attribute__((always_inline)) TGT __m256 exp_avx2(__m256 x)
{
    __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3365447f), _CMP_LT_OQ);
    x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.3365447f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 r2 = _mm256_mul_ps(r, r);
    __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0f));
    /* n in [-126, 127] here, so (n + 127) << 23 is a normal float's exponent */
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(tiny, y);
}

#include "kernels_tmpl.h"

const attn_kernel_set attn_kernels_avx2 = {"avx2", gemm_nt_avx2, sdpa_run_avx2};

#else
typedef int attn_kernels_avx2_unused; /* ISO C wants a declaration */
#endif
