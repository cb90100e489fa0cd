/* simd_math.h - e^x and tanh x written once over the vector vocabulary
 * (simd_avx512.h, simd_avx2.h, simd_generic.h), included after it; they
 * become VEXP and VTANH. A vocabulary may bring its own VEXP (the generic
 * one uses libm's expf).
 *
 * exp follows Cephes expf (S. L. Moshier, Cephes Math Library 2.x): x = n
 * ln2 + r with |r| <= ln2/2 by a two-part ln2, e^r = 1 + r + r^2 P(r) with
 * Cephes' degree-5 P, then 2^n by VPOW2N; within 1-2 ulp of exp over the
 * float range. (A single Horner chain 1 + r (1 + r P(r)) saves one
 * operation but costs tanh accuracy: 1.47e-7 relative against 1.42e-7 over
 * every float in [0.5, 20].)
 *
 * tanh follows Cephes tanhf:
 *   |x| <  0.625: tanh x = x + x z P(z), z = x^2, P the Cephes degree-4
 *                 minimax polynomial (no cancellation, exact for tiny x);
 *   |x| >= 0.625: tanh |x| = 1 - 2 / (e^{2|x|} + 1), sign copied from x;
 * with |x| clamped to 9.1 first (tanh rounds to 1 in float32 beyond about
 * 9.01), so e^{2|x|} never overflows and NaN or +-inf saturate to +-1. The
 * sweep in tests/test_rows.c measures it against tanh() in double. */
#ifndef ATTN_SIMD_MATH_H
#define ATTN_SIMD_MATH_H

/* Cephes tanhf, |x| < 0.625. */
#define TH_P0 -5.70498872745e-3f
#define TH_P1 2.06390887954e-2f
#define TH_P2 -5.37397155531e-2f
#define TH_P3 1.33314422036e-1f
#define TH_P4 -3.33332819422e-1f
#define TH_SMALL 0.625f
#define TH_CLAMP 9.1f

#define exp_cephes ISA_NAME(exp_cephes)
#define tanh_cephes ISA_NAME(tanh_cephes)

#ifndef VEXP
/* e^x for x in [-104, 88.7] (no clamps: the arguments of VEXP below, and
 * of tanh, 2|x| <= 2 * TH_CLAMP, stay there). */
static inline __attribute__((always_inline)) TGT V exp_cephes(V x)
{
    V n = VROUND(VMUL(x, VSET1(1.44269504088896341f)));
    V r = VFNMA(n, VSET1(0.693359375f), x);
    r = VFNMA(n, VSET1(-2.12194440e-4f), r);
    V p = VSET1(1.9875691500e-4f);
    p = VFMA(p, r, VSET1(1.3981999507e-3f));
    p = VFMA(p, r, VSET1(8.3334519073e-3f));
    p = VFMA(p, r, VSET1(4.1665795894e-2f));
    p = VFMA(p, r, VSET1(1.6666665459e-1f));
    p = VFMA(p, r, VSET1(5.0000001201e-1f));
    return VPOW2N(VADD(VFMA(p, VMUL(r, r), r), VSET1(1.0f)), n);
}
/* e^x for x <= 88.7 or -inf, and 0 below -87 (e^-87 is 1.6e-38, just
 * above the least normal float): a result below the normal range, even
 * one that underflows to 0, costs the vector unit a microcode assist of
 * hundreds of cycles (measured: ~150 ns an instruction on this Xeon, lanes
 * masked off included), and a causal tile's masked scores (-inf) made one
 * per key. So every lane is computed from at least -87, and those below
 * are zeroed after. */
#define exp_flush ISA_NAME(exp_flush)
#define EXP_LOW -87.0f
static inline __attribute__((always_inline)) TGT V exp_flush(V x)
{
    return VSEL(VCMPLT(x, VSET1(EXP_LOW)), VZERO(), exp_cephes(VMAX(x, VSET1(EXP_LOW))));
}
#define VEXP(x) exp_flush(x)
#define VEXP_FINITE(x) exp_cephes(x)
#else
#define VEXP_FINITE(x) VEXP(x)
#endif

/* tanh x for any x, NaN and +-inf included, in [-1, 1]. */
static inline __attribute__((always_inline)) TGT V tanh_cephes(V x)
{
    V ax = VABS(x), z = VMUL(x, x);
    V p = VFMA(VSET1(TH_P0), z, VSET1(TH_P1));
    p = VFMA(p, z, VSET1(TH_P2));
    p = VFMA(p, z, VSET1(TH_P3));
    p = VFMA(p, z, VSET1(TH_P4));
    V small = VFMA(VMUL(p, z), ax, ax);
    V t = VMIN(ax, VSET1(TH_CLAMP)); /* NaN: the clamp */
    V e = VEXP_FINITE(VADD(t, t));
    V big = VSUB(VSET1(1.0f), VDIV(VSET1(2.0f), VADD(e, VSET1(1.0f))));
    return VCOPYSIGN(VSEL(VCMPLT(ax, VSET1(TH_SMALL)), small, big), x);
}
#define VTANH(x) tanh_cephes(x)

/* tanh x as one rational function, without exp: Eigen's ptanh_float
 * (the odd degree-13 over even degree-6 fit on x clamped to +-7.905, where
 * tanh rounds to +-1 in float32), within 3e-7 of tanh over every float
 * (measured against tanh() in double), about half the work of VTANH. For
 * softcap (c tanh(s/c)), where what matters is the absolute error of the
 * score, c * 3e-7; NaN is not propagated. */
#define tanh_rational ISA_NAME(tanh_rational)
static inline __attribute__((always_inline)) TGT V tanh_rational(V a)
{
    V x = VMAX(VMIN(a, VSET1(7.90531110763549805f)), VSET1(-7.90531110763549805f));
    V x2 = VMUL(x, x);
    V p = VFMA(x2, VSET1(-2.76076847742355e-16f), VSET1(2.00018790482477e-13f));
    p = VFMA(x2, p, VSET1(-8.60467152213735e-11f));
    p = VFMA(x2, p, VSET1(5.12229709037114e-08f));
    p = VFMA(x2, p, VSET1(1.48572235717979e-05f));
    p = VFMA(x2, p, VSET1(6.37261928875436e-04f));
    p = VFMA(x2, p, VSET1(4.89352455891786e-03f));
    V q = VFMA(x2, VSET1(1.19825839466702e-06f), VSET1(1.18534705686654e-04f));
    q = VFMA(x2, q, VSET1(2.26843463243900e-03f));
    q = VFMA(x2, q, VSET1(4.89352518554385e-03f));
    /* p / q by a reciprocal estimate and one Newton step (q >= 4.8e-3):
     * a division would cost as much as the rest together */
    V r = VRCP(q);
    r = VFMA(r, VFNMA(q, r, VSET1(1.0f)), r);
    return VMUL(VMUL(x, p), r);
}
#define VTANH_FAST(x) tanh_rational(x)

#endif /* ATTN_SIMD_MATH_H */
