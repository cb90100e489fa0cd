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
 *   RN, WN       tanh-score vectors and weighted-sum column vectors per
 *                pass (rows_tmpl.h)
 * Memory: VLOAD(p), VSTORE(p,v), VLOADM(p,m) (masked-off lanes read as 0
 *   and are never touched), VSTOREM(p,m,v), VSTREAM(p,v) (non-temporal,
 *   p aligned to a vector), VSFENCE().
 * Masks: VTAILMASK(n) (the first n lanes, every lane when n is 0),
 *   VLANES(l,h) (lanes l..h; VLANES(0,-1) is none), VCMPLT(a,b),
 *   VISNINF(x) (lanes equal to -inf), VGTZERO(x), VANYGT(a,b) (nonzero
 *   when a lane of a exceeds b's), VSEL(m,a,b) (m ? a : b).
 * Arithmetic: VSET1, VZERO, VADD, VSUB, VMUL, VDIV, VRCP (1/x to at least
 *   12 bits, x > 0 normal), VFMA(a,b,c) (a*b + c),
 *   VFNMA(a,b,c) (c - a*b), VMAX, VMIN (VMIN(NaN, b) is b), VABS,
 *   VCOPYSIGN(y,x) (|y| with x's sign, y >= 0), VROUND (to nearest even),
 *   VPOW2N(y,n) (y * 2^n for whole n, 0 where that is below the normal
 *   range), VHSUM(v) and VHMAX(v) (across lanes, to a float),
 *   VTRANSPOSE(r) (VW x VW in place).
 * VEXP and VTANH come from simd_math.h, written once over these words;
 * here VEXP is libm's expf, the most exact exponential a scalar has. */
#ifndef ATTN_SIMD_GENERIC_H
#define ATTN_SIMD_GENERIC_H

#include <math.h>
#include <stdint.h>

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
#define VHSUM(v) (v)
#define VHMAX(v) (v)
#define VSTREAM(p, v) VSTORE(p, v)
#define VSFENCE() ((void)0)
#define VTRANSPOSE(r) ((void)(r))
#define VEXP(x) expf(x)

/* As maxps and minps: the second operand when either is NaN. */
static inline float attn_max_generic(float a, float b)
{
    return a > b ? a : b;
}

static inline float attn_min_generic(float a, float b)
{
    return a < b ? a : b;
}

#endif /* ATTN_SIMD_GENERIC_H */
