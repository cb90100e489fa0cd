/* simd_avx512.h - the vector vocabulary for AVX-512 (16 float lanes, 32
 * registers), the words kernels_tmpl.h and rows_tmpl.h are written in (see
 * simd_generic.h for what each word means). Compiled through a function
 * target attribute, so the build needs no -march flag; kernels.c calls
 * these kernels only on CPUs that have the instructions.
 *
 * With SIMD_AVX512_BF16 defined before it (kernels_avx512bf16.c), the same
 * words compile the variant "avx512bf16": VDPBF is vdpbf16ps itself, and
 * VTILE says the AMX tile unit may take the bf16 kernel's products
 * (amx.c, when the CPU and the kernel allow it). */
#ifndef ATTN_SIMD_AVX512_H
#define ATTN_SIMD_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "simd_x86.h"

#ifdef SIMD_AVX512_BF16
#define ISA_NAME(x) attn_##x##_avx512bf16
#define TGT __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,avx512bf16")))
#define VDPBF(acc, a, b) _mm512_dpbf16_ps(acc, (__m512bh)(a), (__m512bh)(b))
#define VTILE 1
#else
#define ISA_NAME(x) attn_##x##_avx512
#define TGT __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define VDPBF(acc, a, b) attn_dpbf_avx512(acc, a, b)
#endif
#define V __m512
#define VM __mmask16
#define VW 16
#define QV 4 /* 64 query rows per block */
#define KN 6 /* score tile 6 x 4 vectors: 24 accumulators */
/* 32 registers hold a score tile's products and a pending tile's
 * exponentials (flash_block_deferred); with AVX2's 16 the spills made the
 * core 1.25x slower (L = 1024, one thread). */
#define DEFER_EXP 1
/* Every packed projection packs B: on a Sapphire Rapids class Xeon,
 * packing A and storing C transposed took 1.1-1.15x the CPU time at m =
 * 128 and 192 (k = 512, n = 512 and 1536), 1.6x at m = 32 and 2.6x at m
 * = 16 (GEMM_PACK_B in kernels_tmpl.h). */
#define GEMM_PACK_B (QB / 4)
#define CN 6
#define RN 4 /* tanh score vectors per pass over h: four tanh chains */
#define WN 4 /* weighted-sum column vectors per pass over the keys */

#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps(p, v)
#define VLOADM(p, m) _mm512_maskz_loadu_ps(m, p)
#define VSTOREM(p, m, v) _mm512_mask_storeu_ps(p, m, v)
#define VTAILMASK(n) ((__mmask16)((n) ? (1u << (n)) - 1u : 0xFFFFu))
#define VLANES(l, h) ((__mmask16)(((1u << ((h) + 1)) - 1u) & ~((1u << (l)) - 1u)))
#define VSET1(x) _mm512_set1_ps(x)
#define VZERO() _mm512_setzero_ps()
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VFNMA(a, b, c) _mm512_fnmadd_ps(a, b, c)
#define VMUL(a, b) _mm512_mul_ps(a, b)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VSUB(a, b) _mm512_sub_ps(a, b)
#define VMAX(a, b) _mm512_max_ps(a, b)
#define VMIN(a, b) _mm512_min_ps(a, b)
#define VDIV(a, b) _mm512_div_ps(a, b)
#define VRCP(x) _mm512_rcp14_ps(x) /* within 2^-14 */
#define VABS(x) _mm512_abs_ps(x)
#define VCOPYSIGN(y, x) _mm512_or_ps(y, _mm512_and_ps(x, _mm512_set1_ps(-0.0f)))
#define VROUND(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VPOW2N(y, n) _mm512_scalef_ps(y, n) /* subnormal below the normal range, at a microcode assist: VEXP never goes there */
#define VPOW2N_OR0(keep, y, n) _mm512_maskz_scalef_ps(keep, y, n) /* 0 where keep is not set */
#define VSEL(m, a, b) _mm512_mask_blend_ps(m, b, a)
#define VCMPLT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define VISNINF(x) _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ)
#define VGTZERO(x) _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ)
#define VANYGT(a, b) (_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ) != 0)
#define VANYNLE(a, b) (_mm512_cmp_ps_mask(a, b, _CMP_NLE_UQ) != 0)
#define VHSUM(v) _mm512_reduce_add_ps(v)
#define VHSUMS(v) attn_hsums_avx512(v)
#define VHMAX(v) _mm512_reduce_max_ps(v)
#define VSTREAM(p, v) _mm512_stream_ps(p, v)
#define VSFENCE() _mm_sfence()
#define VTRANSPOSE(r) attn_transpose_avx512(r)
/* lanes l < n (1..VW) whose byte p[l] is not 0; reads no byte past p[n-1] */
#define VMASKB(p, n) attn_maskb_avx512(p, n)
#define VB __m512i
#define VBLOAD(p) _mm512_loadu_si512(p)
#define VBSTORE(p, b) _mm512_storeu_si512(p, b)
#define VBSET1(u) _mm512_set1_epi32((int)(u))
#ifdef SIMD_AVX512_BF16
/* vcvtne2ps2bf16 rounds as attn_bf16_bits does, but flushes subnormals */
#define VBPACK(lo, hi) _mm512_permutexvar_epi16(attn_bf16_pairs, (__m512i)_mm512_cvtne2ps_pbh(hi, lo))
#define VBROW(a, b) ((__m512i)_mm512_cvtne2ps_pbh(b, a))
#else
#define VBPACK(lo, hi) _mm512_or_si512(attn_bf16_avx512(lo), _mm512_slli_epi32(attn_bf16_avx512(hi), 16))
#define VBROW(a, b) attn_bf16_row_avx512(a, b)
#endif

#ifdef SIMD_AVX512_BF16
/* vcvtne2ps2bf16(hi, lo) gives lo's 16 words, then hi's: word 2i of a
 * pair vector is word i of that, word 2i + 1 word 16 + i. */
#define attn_bf16_pairs                                                                     \
    _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, \
                     21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0)
#endif

/* x rounded to bfloat16 as attn_bf16_bits does: the 16 bits in the low
 * half of each lane. */
static inline __attribute__((always_inline)) TGT __m512i attn_bf16_avx512(__m512 x)
{
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
}

static inline __attribute__((always_inline)) TGT __m512i attn_bf16_row_avx512(__m512 a, __m512 b)
{
    __m256i lo = _mm512_cvtepi32_epi16(attn_bf16_avx512(a));
    __m256i hi = _mm512_cvtepi32_epi16(attn_bf16_avx512(b));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

#ifndef SIMD_AVX512_BF16
/* vdpbf16ps without AVX512_BF16: the products of bfloat16 are exact in
 * float32, so two fused multiply-adds in its order give its sums (but
 * keep subnormals). */
static inline __attribute__((always_inline)) TGT __m512 attn_dpbf_avx512(__m512 acc, __m512i a, __m512i b)
{
    __m512i hm = _mm512_set1_epi32((int)0xffff0000u);
    acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(a, hm)),
                          _mm512_castsi512_ps(_mm512_and_si512(b, hm)), acc);
    return _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(a, 16)),
                           _mm512_castsi512_ps(_mm512_slli_epi32(b, 16)), acc);
}
#endif

static inline __attribute__((always_inline)) TGT __mmask16 attn_maskb_avx512(const uint8_t *p, int n)
{
    __mmask16 t = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
    return _mm_mask_test_epi8_mask(t, _mm_maskz_loadu_epi8(t, p), _mm_set1_epi8(-1));
}

/* In-place 16 x 16 transpose: 2x2 blocks by unpack, 4x4 by shuffle, then
 * the 128-bit lanes by two rounds of shuffle_f32x4. */
static inline __attribute__((always_inline)) TGT void attn_transpose_avx512(__m512 r[16])
{
    __m512 t[16];
    SIMD_TRANSPOSE_IN_LANES(_mm512, 16, r, t);
    /* r[4g+k], 128-bit lane L: column 4L+k of rows 4g..4g+3 */
    _Pragma("GCC unroll 4")
    for (int k = 0; k < 4; k++) {
        t[k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);
        t[4 + k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xdd);
        t[8 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
        t[12 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xdd);
    }
    _Pragma("GCC unroll 4")
    for (int k = 0; k < 4; k++) {
        r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
        r[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);
        r[4 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0x88);
        r[12 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0xdd);
    }
}

/* Lane i: the sum of v[i]'s lanes, bit for bit VHSUM(v[i]), for 16
 * vectors at once. _mm512_reduce_add_ps adds lane j to j + 8, then to
 * j + 4, j + 2 and j + 1; each level here adds the same pairs for several
 * vectors in one instruction, which leaves lane 4q + j holding v[4j + q]'s
 * sum, put in order by one permute at the end. */
static inline __attribute__((always_inline)) TGT __m512 attn_hsums_avx512(const __m512 v[16])
{
    __m512 c[8], e[4], f[2];
    _Pragma("GCC unroll 8")
    for (int p = 0; p < 8; p++) /* halves: v[2p] in lanes 0-7, v[2p+1] in 8-15 */
        c[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xee));
    _Pragma("GCC unroll 4")
    for (int p = 0; p < 4; p++) /* quarters: v[4p + q] in 128-bit lane q */
        e[p] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * p], c[2 * p + 1], 0x88),
                             _mm512_shuffle_f32x4(c[2 * p], c[2 * p + 1], 0xdd));
    _Pragma("GCC unroll 2")
    for (int p = 0; p < 2; p++) /* lane q: v[8p + q] in words 0-1, v[8p + 4 + q] in 2-3 */
        f[p] = _mm512_add_ps(_mm512_shuffle_ps(e[2 * p], e[2 * p + 1], 0x44),
                             _mm512_shuffle_ps(e[2 * p], e[2 * p + 1], 0xee));
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(f[0], f[1], 0x88), _mm512_shuffle_ps(f[0], f[1], 0xdd));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, r);
}

#endif /* ATTN_SIMD_AVX512_H */
