/* simd_math.h - e^x and tanh x written once over the vector vocabulary
 * (simd_avx512.h, simd_avx2.h, simd_generic.h), included after it; they
 * become VEXP and VTANH. A vocabulary may bring its own VEXP (the generic
 * one uses libm's expf).
 *
 * Two exponentials. VEXP (exp_soft, below: the softmax's, in base 2, with
 * the results below the normal range made 0) and VEXP_FINITE (tanh's):
 * exp_cephes follows Cephes expf (S. L. Moshier, Cephes Math Library 2.x):
 * x = n ln2 + r with |r| <= ln2/2 by a two-part ln2, e^r = 1 + r + r^2 P(r)
 * with Cephes' degree-5 P, then 2^n by VPOW2N; within 1-2 ulp of exp over
 * the float range. (A single Horner chain 1 + r (1 + r P(r)) saves one
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
/* e^x for x <= 88.7 or -inf, and 0 below about -86.6 (2^-125, 2.4e-38,
 * just above the least normal float): the exponential of the softmax (and
 * ELU). As 2^(n + f), n = round(x log2(e)), f = x L - n with L = log2(e)
 * rounded to float (taken from x itself by one multiply-add, so the
 * rounding of x log2(e) moves n at most), 2^f = 1 + f P(f) with the
 * degree-5 P of Cephes exp2f (S. L. Moshier), then 2^n by VPOW2N: ten
 * operations to exp_cephes' thirteen. L is log2(e) (1 - 1.34e-8), so this
 * is e^(x (1 - 1.34e-8)) within 8.9e-8 relative: for the softmax, the
 * scores at a temperature of 1 + 1.34e-8, the same for every key, block
 * and rescaling factor (e^a e^b stays e^(a+b)), a change of the answer far
 * below its float rounding. Against exp itself: within 9.3e-8 relative on
 * [-1, 0], 1.4e-7 on [-4, -1], 2.9e-7 on [-16, -4], 1.8e-7 on [0, 8]; as
 * an absolute error where e^x <= 1, 6.6e-8, 3.6e-8, 2.0e-9 (every float
 * measured on [-86.5, 8]; L in two parts, one more multiply-add, gave
 * 9.9e-8 relative against exp everywhere and the same error figures on
 * bench/bf16_error.py's inputs, for 1-2% more of the core's time). Lanes
 * whose 2^n would fall below -125 are computed from -125 and zeroed after
 * (VPOW2N_OR0): a result below the normal range, even one that underflows
 * to 0, costs the vector unit a microcode assist of hundreds of cycles
 * (measured: ~150 ns an instruction on a Xeon, lanes masked off included),
 * and a causal tile's masked scores (-inf) made one per key. */
#define exp_soft ISA_NAME(exp_soft)
#ifndef VPOW2N_OR0
#define VPOW2N_OR0(keep, y, n) VSEL(keep, VPOW2N(y, n), VZERO())
#endif
static inline __attribute__((always_inline)) TGT V exp_soft(V x)
{
    V t = VMUL(x, VSET1(1.44269504088896341f));
    V lo = VSET1(-125.0f);
    VM keep = VCMPLT(lo, t); /* -inf and NaN out: zero */
    V n = VROUND(VMAX(t, lo));
    /* g = n - x L = -f; then 2^f = 1 - g P(-g), P's odd coefficients
     * negated */
    V g = VFNMA(x, VSET1(1.44269502162933349609375f), n);
    V p = VSET1(-1.535336188319500e-4f);
    p = VFMA(p, g, VSET1(1.339887440266574e-3f));
    p = VFMA(p, g, VSET1(-9.618437357674640e-3f));
    p = VFMA(p, g, VSET1(5.550332471162809e-2f));
    p = VFMA(p, g, VSET1(-2.402264791363012e-1f));
    p = VFMA(p, g, VSET1(6.931472028550421e-1f));
    return VPOW2N_OR0(keep, VFNMA(g, p, VSET1(1.0f)), n);
}
/* e^x for the probabilities that bf16 compute rounds to bfloat16 (whose
 * rounding errs by up to 2^-8 relative): exp_soft's range and zeros with
 * two operations fewer on the multiply-add units and three fewer in all:
 * f = x log2(e) - n from the rounded product (an error of at most 2^-18 in
 * f where |x log2 e| nears 125) and 2^f by a degree-4 minimax polynomial
 * (relative error 2.6e-6 on [-1/2, 1/2], Remez): within 6e-6 relative of
 * exp, 650 times below the rounding's bound. The sums of the softmax take the same
 * values, so they stay consistent with the P that P V multiplies. */
#define exp_bf16 ISA_NAME(exp_bf16)
static inline __attribute__((always_inline)) TGT V exp_bf16(V x)
{
    V t = VMUL(x, VSET1(1.44269504088896341f));
    V lo = VSET1(-125.0f);
    VM keep = VCMPLT(lo, t); /* -inf and NaN out: zero */
    V n = VROUND(VMAX(t, lo));
    V f = VSUB(t, n);
    V p = VSET1(9.570101908081146e-3f);
    p = VFMA(p, f, VSET1(5.5917860319303916e-2f));
    p = VFMA(p, f, VSET1(2.4024744827944053e-1f));
    p = VFMA(p, f, VSET1(6.9312181473677081e-1f));
    p = VFMA(p, f, VSET1(9.9999926144571438e-1f));
    return VPOW2N_OR0(keep, p, n);
}
#ifdef ATTN_BENCH_NO_EXP
/* make bench only (Makefile: BENCH_NOEXP): every exponential of the
 * softmax replaced by its argument, wrong answers, to time what the
 * exponentials cost the kernels. Never in the library. */
#define VEXP(x) (x)
#define VEXP_BF16(x) (x)
#else
#define VEXP(x) exp_soft(x)
#define VEXP_BF16(x) exp_bf16(x)
#endif
#define VEXP_FINITE(x) exp_cephes(x)
#else
#define VEXP_FINITE(x) VEXP(x)
#define VEXP_BF16(x) VEXP(x)
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

/* Softcap, c tanh(s / c), with tanh as one rational function, without
 * exp: Eigen's ptanh_float (the odd degree-13 over even degree-6 fit on x
 * clamped to +-7.905, where tanh rounds to +-1 in float32), within 3e-7 of
 * tanh over every float (measured against tanh() in double), about half
 * the work of VTANH. Here s itself is clamped, to lim = +-7.905 c, and
 * c (s/c) (p / q) is taken as s (p / q), one multiply fewer. What matters
 * is the absolute error of the score: within 4e-7 c (test_rows, with the
 * AVX2 reciprocal estimate the worst); NaN is not propagated (it becomes
 * c). inv_c = 1 / c. */
#define softcap_rational ISA_NAME(softcap_rational)
#define SOFTCAP_X 7.90531110763549805f
static inline __attribute__((always_inline)) TGT V softcap_rational(V s, V inv_c, V lim, V nlim)
{
    V y = VMAX(VMIN(s, lim), nlim);
    V x = VMUL(y, inv_c);
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
    return VMUL(VMUL(y, p), r);
}

/* Softcap as the kernels take it. Scores are mostly small against c
 * (|s| <= c/2), and there tanh(x)/x is one polynomial in z = x^2: a
 * degree-5 least-squares fit on Chebyshev nodes of [0, 1/4], within 4e-10
 * of it (relative; numpy in double), so c tanh(s/c) = s p(z) in 8
 * operations against the rational function's 18. A vector with any lane
 * past c/2 (or NaN) takes softcap_rational whole. */
#define softcap_vec ISA_NAME(softcap_vec)
static inline __attribute__((always_inline)) TGT V softcap_vec(V s, V inv_c, V lim, V nlim)
{
    V x = VMUL(s, inv_c);
    V z = VMUL(x, x);
    if (VANYNLE(z, VSET1(0.25f)))
        return softcap_rational(s, inv_c, lim, nlim);
    V p = VFMA(z, VSET1(-6.63950570838875e-03f), VSET1(2.12929409804438e-02f));
    p = VFMA(z, p, VSET1(-5.38980731628018e-02f));
    p = VFMA(z, p, VSET1(1.33329542696150e-01f));
    p = VFMA(z, p, VSET1(-3.33333265907278e-01f));
    p = VFMA(z, p, VSET1(1.0f));
    return VMUL(s, p);
}
#define VSOFTCAP(s, inv_c, lim, nlim) softcap_vec(s, inv_c, lim, nlim)

#endif /* ATTN_SIMD_MATH_H */
