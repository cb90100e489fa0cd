/* linear_tmpl.h - the inner loops of linear attention (linear.c) written
 * once over the vector vocabulary: the feature map and a small row-major
 * product. Included after kernels_tmpl.h by each kernels_<isa>.c; the
 * names become attn_<name>_<isa> as in kernels_tmpl.h. The contracts are
 * in kernels_isa.h (attn_kernel_set). */

#define lin_phi ISA_NAME(lin_phi)
#define lin_tile ISA_NAME(lin_tile)
#define lin_gemm_nn ISA_NAME(lin_gemm_nn)

/* Rows of the output and vectors of its columns per register tile. */
#define LIN_RN 4
#define LIN_CV 2

/* y[e] = phi(x[e]) for e < n: elu(x) + 1 (x + 1 above 0, e^x below), or
 * relu (max(x, 0)). x and y may be the same. */
static TGT void lin_phi(const float *x, int64_t n, int relu, float *y)
{
    V one = VSET1(1.0f), zero = VZERO();
    int64_t e = 0;
    for (; e + VW <= n; e += VW) {
        V v = VLOAD(x + e);
        VSTORE(y + e, relu ? VMAX(v, zero) : VSEL(VGTZERO(v), VADD(v, one), VEXP(VMIN(v, zero))));
    }
    if (e < n) {
        VM m = VTAILMASK((int)(n - e));
        V v = VLOADM(x + e, m);
        VSTOREM(y + e, m, relu ? VMAX(v, zero) : VSEL(VGTZERO(v), VADD(v, one), VEXP(VMIN(v, zero))));
    }
}

/* One register tile of lin_gemm_nn: rows [0, rn) and columns [0, cols)
 * (cols <= LIN_CV VW; a partial last vector is masked). */
static inline ALWAYS TGT void lin_tile(int rn, int64_t cols, int64_t p, const float *a,
                                       int64_t lda, const float *b, int64_t ldb, float *o,
                                       int64_t ldo, int acc)
{
    V r[LIN_RN][LIN_CV];
    VM m[LIN_CV];
    int on[LIN_CV];
    UNROLL for (int v = 0; v < LIN_CV; v++) {
        int64_t left = cols - v * VW;
        on[v] = left > 0;
        m[v] = VTAILMASK(left >= VW || left <= 0 ? 0 : (int)left);
    }
    UNROLL for (int i = 0; i < LIN_RN; i++)
        UNROLL for (int v = 0; v < LIN_CV; v++)
            r[i][v] = acc && i < rn && on[v] ? VLOADM(o + i * ldo + v * VW, m[v]) : VZERO();
    for (int64_t k = 0; k < p; k++) {
        V bv[LIN_CV];
        UNROLL for (int v = 0; v < LIN_CV; v++)
            bv[v] = on[v] ? VLOADM(b + k * ldb + v * VW, m[v]) : VZERO();
        UNROLL for (int i = 0; i < LIN_RN; i++)
            if (i < rn) {
                V av = VSET1(a[i * lda + k]);
                UNROLL for (int v = 0; v < LIN_CV; v++) r[i][v] = VFMA(av, bv[v], r[i][v]);
            }
    }
    UNROLL for (int i = 0; i < LIN_RN; i++)
        if (i < rn)
            UNROLL for (int v = 0; v < LIN_CV; v++)
                if (on[v]) VSTOREM(o + i * ldo + v * VW, m[v], r[i][v]);
}

/* o[i][c] = (acc ? o[i][c] : 0) + sum_{k<p} a[i][k] b[k][c] for i < m,
 * c < n; row strides lda, ldb, ldo in floats. The operands are small
 * (a chunk of rows against a head's d x dv sums), so this is a plain
 * register-tiled loop: LIN_RN rows by LIN_CV vectors of columns, b's rows
 * read in place. */
static TGT void lin_gemm_nn(int64_t m, int64_t n, int64_t p, const float *a, int64_t lda,
                            const float *b, int64_t ldb, float *o, int64_t ldo, int acc)
{
    const int64_t cw = (int64_t)LIN_CV * VW;
    for (int64_t i = 0; i < m; i += LIN_RN) {
        int rn = m - i < LIN_RN ? (int)(m - i) : LIN_RN;
        for (int64_t c = 0; c < n; c += cw) {
            int64_t cols = n - c < cw ? n - c : cw;
            if (rn == LIN_RN) /* constant: unrolls fully */
                lin_tile(LIN_RN, cols, p, a + i * lda, lda, b + c, ldb, o + i * ldo + c, ldo, acc);
            else
                lin_tile(rn, cols, p, a + i * lda, lda, b + c, ldb, o + i * ldo + c, ldo, acc);
        }
    }
}
