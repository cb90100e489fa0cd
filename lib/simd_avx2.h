/* simd_avx2.h - the vector vocabulary for AVX2 + FMA (8 float lanes, 16
 * registers), the words kernels_tmpl.h and rows_tmpl.h are written in (see
 * simd_generic.h for what each word means). Compiled through a function
 * target attribute, so the build needs no -march flag; kernels.c calls
 * these kernels only on CPUs that have the instructions. */
#ifndef ATTN_SIMD_AVX2_H
#define ATTN_SIMD_AVX2_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "simd_x86.h"

#define ISA_NAME(x) attn_##x##_avx2
#define TGT __attribute__((target("avx2,fma")))
#define V __m256
#define VM __m256
#define VW 8
#define QV 2 /* 16 query rows per block */
#define KN 6 /* score tile 6 x 2 vectors: 12 accumulators */
#define CN 6
#define RN 3 /* tanh score vectors per pass over h: three tanh chains */
#define WN 4 /* weighted-sum column vectors per pass over the keys */

#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps(p, v)
#define VLOADM(p, m) _mm256_maskload_ps(p, _mm256_castps_si256(m))
#define VSTOREM(p, m, v) _mm256_maskstore_ps(p, _mm256_castps_si256(m), v)
#define VTAILMASK(n) attn_lanes_avx2(0, (n) ? (n) - 1 : 7)
#define VLANES(l, h) attn_lanes_avx2(l, h)
#define VSET1(x) _mm256_set1_ps(x)
#define VZERO() _mm256_setzero_ps()
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VFNMA(a, b, c) _mm256_fnmadd_ps(a, b, c)
#define VMUL(a, b) _mm256_mul_ps(a, b)
#define VADD(a, b) _mm256_add_ps(a, b)
#define VSUB(a, b) _mm256_sub_ps(a, b)
#define VMAX(a, b) _mm256_max_ps(a, b)
#define VMIN(a, b) _mm256_min_ps(a, b)
#define VDIV(a, b) _mm256_div_ps(a, b)
#define VRCP(x) _mm256_rcp_ps(x) /* within 1.5 * 2^-12 */
#define VABS(x) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x)
#define VCOPYSIGN(y, x) _mm256_or_ps(y, _mm256_and_ps(x, _mm256_set1_ps(-0.0f)))
#define VROUND(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VPOW2N(y, n) attn_pow2n_avx2(y, n)
#define VSEL(m, a, b) _mm256_blendv_ps(b, a, m)
#define VCMPLT(a, b) _mm256_cmp_ps(a, b, _CMP_LT_OQ)
#define VISNINF(x) _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ)
#define VGTZERO(x) _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ)
#define VANYGT(a, b) (_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ)) != 0)
#define VANYNLE(a, b) (_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_NLE_UQ)) != 0)
#define VHSUM(v) attn_hsum_avx2(v)
#define VHSUMS(v) attn_hsums_avx2(v)
#define VHMAX(v) attn_hmax_avx2(v)
#define VSTREAM(p, v) _mm256_stream_ps(p, v)
#define VSFENCE() _mm_sfence()
#define VTRANSPOSE(r) attn_transpose_avx2(r)
/* lanes l < n (1..VW) whose byte p[l] is not 0; reads no byte past p[n-1] */
#define VMASKB(p, n) attn_maskb_avx2(p, n)

#define VB __m256i
#define VBLOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define VBSTORE(p, b) _mm256_storeu_si256((__m256i *)(p), b)
#define VBSET1(u) _mm256_set1_epi32((int)(u))
#define VBPACK(lo, hi) _mm256_or_si256(attn_bf16_avx2(lo), _mm256_slli_epi32(attn_bf16_avx2(hi), 16))
#define VBROW(a, b) _mm256_permute4x64_epi64(_mm256_packus_epi32(attn_bf16_avx2(a), attn_bf16_avx2(b)), 0xD8)
#define VDPBF(acc, a, b) attn_dpbf_avx2(acc, a, b)

#define SIMD_INLINE static inline __attribute__((always_inline)) TGT

/* x rounded to bfloat16 as attn_bf16_bits does: the 16 bits in the low
 * half of each lane. */
SIMD_INLINE __m256i attn_bf16_avx2(__m256 x)
{
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, q, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
}

/* vdpbf16ps emulated: see simd_avx512.h's attn_dpbf_avx512. */
SIMD_INLINE __m256 attn_dpbf_avx2(__m256 acc, __m256i a, __m256i b)
{
    __m256i hm = _mm256_set1_epi32((int)0xffff0000u);
    acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(a, hm)),
                          _mm256_castsi256_ps(_mm256_and_si256(b, hm)), acc);
    return _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)),
                           _mm256_castsi256_ps(_mm256_slli_epi32(b, 16)), acc);
}

SIMD_INLINE __m256 attn_maskb_avx2(const uint8_t *p, int n)
{
    uint64_t b = 0;
    memcpy(&b, p, n >= 8 ? 8 : (size_t)n);
    __m256i x = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)b));
    return _mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpeq_epi32(x, _mm256_setzero_si256()),
                                                _mm256_set1_epi32(-1)));
}

/* In-place 8 x 8 transpose: unpack and shuffle within lanes, then swap
 * 128-bit halves. */
SIMD_INLINE void attn_transpose_avx2(__m256 r[8])
{
    __m256 t[8];
    SIMD_TRANSPOSE_IN_LANES(_mm256, 8, r, t);
    _Pragma("GCC unroll 4")
    for (int k = 0; k < 4; k++) {
        t[k] = _mm256_permute2f128_ps(r[k], r[4 + k], 0x20);
        t[4 + k] = _mm256_permute2f128_ps(r[k], r[4 + k], 0x31);
    }
    _Pragma("GCC unroll 8")
    for (int k = 0; k < 8; k++) r[k] = t[k];
}

/* Lanes l..h (inclusive) set, as a float mask. */
SIMD_INLINE __m256 attn_lanes_avx2(int l, int h)
{
    __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i ge = _mm256_cmpgt_epi32(iota, _mm256_set1_epi32(l - 1));
    __m256i le = _mm256_cmpgt_epi32(_mm256_set1_epi32(h + 1), iota);
    return _mm256_castsi256_ps(_mm256_and_si256(ge, le));
}

SIMD_INLINE float attn_hsum_avx2(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Lane i: attn_hsum_avx2(v[i]) bit for bit, for 8 vectors at once: the
 * same pairs (lane j with j + 4, then j + 2, then j + 1) added for
 * several vectors in one instruction, which leaves lane 4h + j holding
 * v[2j + h]'s sum, put in order by one permute at the end. */
SIMD_INLINE __m256 attn_hsums_avx2(const __m256 v[8])
{
    __m256 c[4], e[2];
    _Pragma("GCC unroll 4")
    for (int p = 0; p < 4; p++) /* halves: v[2p] in lanes 0-3, v[2p+1] in 4-7 */
        c[p] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x31));
    _Pragma("GCC unroll 2")
    for (int p = 0; p < 2; p++) /* half h: v[4p + h] in words 0-1, v[4p + 2 + h] in 2-3 */
        e[p] = _mm256_add_ps(_mm256_shuffle_ps(c[2 * p], c[2 * p + 1], 0x44),
                             _mm256_shuffle_ps(c[2 * p], c[2 * p + 1], 0xee));
    __m256 r = _mm256_add_ps(_mm256_shuffle_ps(e[0], e[1], 0x88), _mm256_shuffle_ps(e[0], e[1], 0xdd));
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

SIMD_INLINE float attn_hmax_avx2(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* y * 2^n for whole n <= 127, built in the exponent field; n below -126
 * (a result under the least normal float, -inf's included) gives 0. */
SIMD_INLINE __m256 attn_pow2n_avx2(__m256 y, __m256 n)
{
    __m256 tiny = _mm256_cmp_ps(n, _mm256_set1_ps(-126.0f), _CMP_LT_OQ);
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(tiny, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

#undef SIMD_INLINE
#endif /* ATTN_SIMD_AVX2_H */
