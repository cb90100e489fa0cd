/* rows_tmpl.h - the inner loops of the row-by-row driver (rows.c) written
 * once over the vector vocabulary: tanh, the tanh scores of the additive /
 * concat_tanh rules, a dense softmax (and its sum of exponentials alone)
 * and the weighted sum of value rows.
 * Included after kernels_tmpl.h by each kernels_<isa>.c; the names become
 * attn_<name>_<isa> as in kernels_tmpl.h. The contracts are in
 * kernels_isa.h (attn_kernel_set). */

#define rows_tanh ISA_NAME(rows_tanh)
#define tanh_score_tile ISA_NAME(tanh_score_tile)
#define rows_tanh_scores ISA_NAME(rows_tanh_scores)
#define wsum_tile ISA_NAME(wsum_tile)
#define rows_weighted_sum ISA_NAME(rows_weighted_sum)
#define rows_softmax ISA_NAME(rows_softmax)
#define rows_sum_exp ISA_NAME(rows_sum_exp)

/* y[e] = tanh(x[e]) for e < n (Cephes, simd_math.h). */
static TGT void rows_tanh(const float *x, float *y, int64_t n)
{
    int64_t e = 0;
    for (; e + VW <= n; e += VW) VSTORE(y + e, VTANH(VLOAD(x + e)));
    if (e < n) {
        VM m = VTAILMASK((int)(n - e));
        VSTOREM(y + e, m, VTANH(VLOADM(x + e, m)));
    }
}

/* s[j .. j + rn VW) = sum_h vw[h] tanh(a[h] + p[h ldb + ..]): rn vectors of
 * keys per pass over h, so rn independent tanh chains are in flight. */
static inline ALWAYS TGT void tanh_score_tile(const float *a, const float *p, int64_t ldb,
                                              int64_t d, const float *vw, int rn, float *s)
{
    V c[RN];
    UNROLL for (int r = 0; r < RN; r++) c[r] = VZERO();
    for (int64_t h = 0; h < d; h++, p += ldb) {
        V ah = VSET1(a[h]), wh = VSET1(vw ? vw[h] : 1.0f);
        UNROLL for (int r = 0; r < RN; r++)
            if (r < rn) c[r] = VFMA(wh, VTANH(VADD(ah, VLOAD(p + r * VW))), c[r]);
    }
    UNROLL for (int r = 0; r < RN; r++)
        if (r < rn) VSTORE(s + r * VW, c[r]);
}

/* Keys along the lanes: RN vectors at a time while that many are needed,
 * then one. Whole vectors from j0 rounded down, so s must hold ldb floats. */
static TGT void rows_tanh_scores(const float *a, const float *bt, int64_t ldb, int64_t d,
                                 const float *vw, int64_t j0, int64_t j1, float *s)
{
    int64_t j = j0 - j0 % VW;
    while (j < j1) {
        if (j1 - j > (RN - 1) * VW) {
            tanh_score_tile(a, bt + j, ldb, d, vw, RN, s + j);
            j += RN * VW;
        } else {
            tanh_score_tile(a, bt + j, ldb, d, vw, 1, s + j);
            j += VW;
        }
    }
}

/* o[0 .. left) (at most WN vectors) = sum_j w[j] v[j ldv + ..]: keys two at
 * a time into two sets of accumulators, so 2 WN chains hide the FMA
 * latency; full (a constant) when all WN vectors are whole. */
static inline ALWAYS TGT void wsum_tile(const float *w, int64_t lk, const float *v, int64_t ldv,
                                        int64_t left, int full, float *o)
{
    VM m[WN];
    V c[WN], e[WN];
    UNROLL for (int t = 0; t < WN; t++) {
        int64_t n = left - t * VW;
        m[t] = n >= VW ? VTAILMASK(0) : n <= 0 ? VLANES(0, -1) : VTAILMASK((int)n);
        c[t] = e[t] = VZERO();
    }
#define WSUM_LOAD(p, t) (full ? VLOAD((p) + (t) * VW) : VLOADM((p) + (t) * VW, m[t]))
    int64_t j = 0;
    for (; j + 2 <= lk; j += 2) {
        if (w[j] == 0.0f && w[j + 1] == 0.0f) continue;
        V wa = VSET1(w[j]), wb = VSET1(w[j + 1]);
        const float *va = v + j * ldv, *vb = va + ldv;
        UNROLL for (int t = 0; t < WN; t++) {
            if (full || t * VW < left) {
                c[t] = VFMA(wa, WSUM_LOAD(va, t), c[t]);
                e[t] = VFMA(wb, WSUM_LOAD(vb, t), e[t]);
            }
        }
    }
    if (j < lk && w[j] != 0.0f) {
        V wa = VSET1(w[j]);
        UNROLL for (int t = 0; t < WN; t++)
            if (full || t * VW < left) c[t] = VFMA(wa, WSUM_LOAD(v + j * ldv, t), c[t]);
    }
#undef WSUM_LOAD
    UNROLL for (int t = 0; t < WN; t++) {
        if (full) VSTORE(o + t * VW, VADD(c[t], e[t]));
        else if (t * VW < left) VSTOREM(o + t * VW, m[t], VADD(c[t], e[t]));
    }
}

/* o[c] = sum_{j<lk} w[j] v[j ldv + c] for c < dv, WN vectors of columns at
 * a time; rows with a zero weight are skipped. */
static TGT void rows_weighted_sum(const float *w, int64_t lk, const float *v, int64_t ldv,
                                  int64_t dv, float *o)
{
    for (int64_t c = 0; c < dv; c += WN * VW) {
        if (dv - c >= WN * VW) wsum_tile(w, lk, v + c, ldv, WN * VW, 1, o + c);
        else wsum_tile(w, lk, v + c, ldv, dv - c, 0, o + c);
    }
}

/* w = softmax(s) over n >= 1 finite scores: the max, e^(s - max) summed in
 * four vectors of partial sums, then one scale by 1 / sum. */
static TGT void rows_softmax(const float *s, int64_t n, float *w)
{
    V mx = VSET1(-INFINITY), sum[4];
    int64_t j = 0;
    for (; j + VW <= n; j += VW) mx = VMAX(mx, VLOAD(s + j));
    VM tm = VTAILMASK((int)(n - j));
    if (j < n) mx = VMAX(mx, VSEL(tm, VLOADM(s + j, tm), VSET1(-INFINITY)));
    V m = VSET1(VHMAX(mx));
    UNROLL for (int t = 0; t < 4; t++) sum[t] = VZERO();
    for (j = 0; j + 4 * VW <= n; j += 4 * VW)
        UNROLL for (int t = 0; t < 4; t++) {
            V e = VEXP(VSUB(VLOAD(s + j + t * VW), m));
            VSTORE(w + j + t * VW, e);
            sum[t] = VADD(sum[t], e);
        }
    for (; j + VW <= n; j += VW) {
        V e = VEXP(VSUB(VLOAD(s + j), m));
        VSTORE(w + j, e);
        sum[0] = VADD(sum[0], e);
    }
    if (j < n) {
        V e = VSEL(tm, VEXP(VSUB(VLOADM(s + j, tm), m)), VZERO());
        VSTOREM(w + j, tm, e);
        sum[0] = VADD(sum[0], e);
    }
    V inv = VSET1(1.0f / VHSUM(VADD(VADD(sum[0], sum[1]), VADD(sum[2], sum[3]))));
    for (j = 0; j + VW <= n; j += VW) VSTORE(w + j, VMUL(VLOAD(w + j), inv));
    if (j < n) VSTOREM(w + j, tm, VMUL(VLOADM(w + j, tm), inv));
}

/* sum_j e^(s[j] - m) over n >= 1 finite scores with m >= every s[j] (a
 * log-softmax's denominator), in four vectors of partial sums. */
static TGT float rows_sum_exp(const float *s, int64_t n, float m)
{
    V mv = VSET1(m), sum[4];
    UNROLL for (int t = 0; t < 4; t++) sum[t] = VZERO();
    int64_t j = 0;
    for (; j + 4 * VW <= n; j += 4 * VW)
        UNROLL for (int t = 0; t < 4; t++) sum[t] = VADD(sum[t], VEXP(VSUB(VLOAD(s + j + t * VW), mv)));
    for (; j + VW <= n; j += VW) sum[0] = VADD(sum[0], VEXP(VSUB(VLOAD(s + j), mv)));
    if (j < n) {
        VM tm = VTAILMASK((int)(n - j));
        sum[1] = VADD(sum[1], VSEL(tm, VEXP(VSUB(VLOADM(s + j, tm), mv)), VZERO()));
    }
    return VHSUM(VADD(VADD(sum[0], sum[1]), VADD(sum[2], sum[3])));
}
