/* simd_generic.h - the vector vocabulary in portable C, one float per
 * "vector", for CPUs without AVX2 (and as the reference the wider ones are
 * tested beside). It also says what each word means; simd_avx512.h and
 * simd_avx2.h define the same words for their registers.
 *
 * Names and shapes:
 *   ISA_NAME(x)  attn_<x>_<isa>: the symbol every kernel is compiled under
 *   TGT          the function target attribute (empty here)
 *   V, VM, VW    a vector of floats, a lane mask, lanes per vector
 *   QV, KN, CN   query vectors per block, keys per score tile, value
 *                columns per output tile (kernels_tmpl.h)
 *   GEMM_PACK_B  rows of A from which the projection packs B rather than
 *                A (kernels_tmpl.h; 4 QB unless the vocabulary sets it)
 *   RN, WN       tanh-score vectors and weighted-sum column vectors per
 *                pass (rows_tmpl.h)
 * Memory: VLOAD(p), VSTORE(p,v), VLOADM(p,m) (masked-off lanes read as 0
 *   and are never touched), VSTOREM(p,m,v), VSTREAM(p,v) (non-temporal,
 *   p aligned to a vector), VSFENCE().
 * Masks: VTAILMASK(n) (the first n lanes, every lane when n is 0),
 *   VLANES(l,h) (lanes l..h; VLANES(0,-1) is none), VCMPLT(a,b),
 *   VISNINF(x) (lanes equal to -inf), VGTZERO(x), VANYGT(a,b) (nonzero
 *   when a lane of a exceeds b's), VANYNLE(a,b) (nonzero when a lane of a
 *   is not <= b's: greater, or NaN in either), VSEL(m,a,b) (m ? a : b).
 * Arithmetic: VSET1, VZERO, VADD, VSUB, VMUL, VDIV, VRCP (1/x to at least
 *   12 bits, x > 0 normal), VFMA(a,b,c) (a*b + c),
 *   VFNMA(a,b,c) (c - a*b), VMAX, VMIN (VMIN(NaN, b) is b), VABS,
 *   VCOPYSIGN(y,x) (|y| with x's sign, y >= 0), VROUND (to nearest even),
 *   VPOW2N(y,n) (y * 2^n for whole n, 0 where that is below the normal
 *   range), VHSUM(v) and VHMAX(v) (across lanes, to a float), VHSUMS(v)
 *   (v an array of VW vectors: lane i is VHSUM(v[i]), the same bits),
 *   VTRANSPOSE(r) (VW x VW in place), VMASKB(p,n) (a VM of the lanes
 *   l < n whose byte p[l] is not 0, reading no byte past p[n-1]).
 * bfloat16 pairs (the bf16 kernel, bf16_tmpl.h): VB is a vector of VW
 *   32-bit lanes, each holding two bfloat16 (the low half first);
 *   VBLOAD(p), VBSTORE(p,b) (p: uint32_t), VBSET1(u) (every lane u),
 *   VBPACK(lo,hi) (lane l: lo[l] and hi[l] rounded to bfloat16, to nearest
 *   even, NaN kept), VBROW(a,b) (the 2 VW floats a then b, rounded, as VW
 *   pairs in order: bfloat16 row-major), VDPBF(acc,a,b) (acc + a.hi b.hi +
 *   a.lo b.lo per lane in float32, in that order: AVX512_BF16's
 *   vdpbf16ps, which the variant with it runs as such; it flushes
 *   subnormals, the emulation does not).
 * VEXP and VTANH come from simd_math.h, written once over these words;
 * here VEXP is libm's expf, the most exact exponential a scalar has. */
#ifndef ATTN_SIMD_GENERIC_H
#define ATTN_SIMD_GENERIC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define ISA_NAME(x) attn_##x##_generic
#define TGT
#define V float
#define VM int
#define VW 1
#define QV 4 /* 4 query rows per block */
#define KN 6
#define CN 6
#define RN 4
#define WN 4

#define VLOAD(p) (*(p))
#define VSTORE(p, v) (*(p) = (v))
#define VLOADM(p, m) ((m) ? *(p) : 0.0f)
#define VSTOREM(p, m, v) ((m) ? (void)(*(p) = (v)) : (void)0)
#define VTAILMASK(n) ((void)(n), 1)
#define VLANES(l, h) ((l) <= 0 && (h) >= 0)
#define VSET1(x) ((float)(x))
#define VZERO() 0.0f
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VFNMA(a, b, c) ((c) - (a) * (b))
#define VMUL(a, b) ((a) * (b))
#define VADD(a, b) ((a) + (b))
#define VSUB(a, b) ((a) - (b))
#define VMAX(a, b) attn_max_generic(a, b)
#define VMIN(a, b) attn_min_generic(a, b)
#define VDIV(a, b) ((a) / (b))
#define VRCP(x) (1.0f / (x))
#define VABS(x) fabsf(x)
#define VCOPYSIGN(y, x) copysignf(y, x)
#define VROUND(x) rintf(x)
#define VPOW2N(y, n) ldexpf(y, (int)(n))
#define VSEL(m, a, b) ((m) ? (a) : (b))
#define VCMPLT(a, b) ((a) < (b))
#define VISNINF(x) ((x) == -INFINITY)
#define VGTZERO(x) ((x) > 0.0f)
#define VANYGT(a, b) ((a) > (b))
#define VANYNLE(a, b) (!((a) <= (b)))
#define VHSUM(v) (v)
#define VHSUMS(v) ((v)[0])
#define VHMAX(v) (v)
#define VSTREAM(p, v) VSTORE(p, v)
#define VSFENCE() ((void)0)
#define VTRANSPOSE(r) ((void)(r))
#define VMASKB(p, n) ((void)(n), *(p) != 0)
#define VEXP(x) expf(x)
#define VB uint32_t
#define VBLOAD(p) (*(p))
#define VBSTORE(p, b) (*(p) = (b))
#define VBSET1(u) ((uint32_t)(u))
#define VBPACK(lo, hi) attn_bf16_pair(lo, hi)
#define VBROW(a, b) attn_bf16_pair(a, b)
#define VDPBF(acc, a, b) attn_dpbf_generic(acc, a, b)

/* As maxps and minps: the second operand when either is NaN. */
static inline float attn_max_generic(float a, float b)
{
    return a > b ? a : b;
}

static inline float attn_min_generic(float a, float b)
{
    return a < b ? a : b;
}

/* x rounded to bfloat16 (to nearest, ties to even; a NaN stays a NaN):
 * its 16 bits. Every vocabulary rounds as this does. */
static inline uint32_t attn_bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

static inline uint32_t attn_bf16_pair(float lo, float hi)
{
    return attn_bf16_bits(lo) | attn_bf16_bits(hi) << 16;
}

/* The float32 value of bfloat16 bits b (in the low or high half). */
static inline float attn_bf16_float(uint32_t b)
{
    float f;
    b <<= 16;
    memcpy(&f, &b, sizeof f);
    return f;
}

static inline float attn_dpbf_generic(float acc, uint32_t a, uint32_t b)
{
    acc += attn_bf16_float(a >> 16) * attn_bf16_float(b >> 16);
    return acc + attn_bf16_float(a & 0xffffu) * attn_bf16_float(b & 0xffffu);
}

#endif /* ATTN_SIMD_GENERIC_H */
