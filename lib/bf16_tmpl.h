/* bf16_tmpl.h - bfloat16 compute in the flash kernel (attn_options.precision
 * ATTN_PRECISION_BF16), written once over the vector vocabulary; included
 * by kernels_tmpl.h, whose sdpa_block_flash calls it for such jobs.
 *
 * What is rounded (to nearest, ties to even, as attn_bf16_bits): the query
 * and key rows (after rope), the value rows and the probabilities P of
 * each key block before P V. The products run as VDPBF (pairs of
 * bfloat16 products summed into float32: vdpbf16ps on AVX512_BF16, two
 * exact float32 FMAs elsewhere), or with VTILE on the AMX tile unit
 * (TDPBF16PS, amx.c) when the CPU and the kernel allow it. The scale,
 * softcap, bias, ALiBi, masks, the online softmax and its sums stay in
 * float32 (as FlashAttention-2 does in bf16); weights, when asked, are
 * those float32 probabilities.
 *
 * Layouts, in 32-bit words that each hold two bfloat16 (VB lanes):
 *   kb  the job's keys, row-major: key t's features 2p, 2p+1 in kb[t][p]
 *       (ldk words a row: the features padded with zeros to BF_PAD);
 *   vt  the job's values transposed: value column c of keys 2t, 2t+1 in
 *       vt[c][t] (ldv words a row: the keys padded with zeros to BF_PAD
 *       and one BF_PAD more, so a tile may read past any key block);
 *   qt2 a query block: features 2p, 2p+1 of query lane q in qt2[p][q];
 *   pt2 a key block's P: keys 2t, 2t+1 of query lane q in pt2[t][q].
 * A job of decode-sized query blocks (sdpa_by_rows: one row at a time,
 * sdpa_rows) has neither: a row reads each key once, so its keys and
 * values are rounded as they are read (bf16_dot, bf16_pv_row).
 * kb and vt are made once per run (bf16_convert, before the query
 * blocks), and once for a run of jobs that read the same keys and values
 * (bf16_same_kv); qt2 and pt2 per query block and per key block. Key blocks
 * start at even keys, so a block's pairs are pairs of vt. */

#define bf16_dims ISA_NAME(bf16_dims)
#define bf16_job_bytes ISA_NAME(bf16_job_bytes)
#define bf16_same_kv ISA_NAME(bf16_same_kv)
#define bf16_blocks ISA_NAME(bf16_blocks)
#define bf16_load ISA_NAME(bf16_load)
#define bf16_convert ISA_NAME(bf16_convert)
#define bf16_pack_row ISA_NAME(bf16_pack_row)
#define bf16_dot_lanes ISA_NAME(bf16_dot_lanes)
#define bf16_dot ISA_NAME(bf16_dot)
#define bf16_pv_row ISA_NAME(bf16_pv_row)
#define bf16_pack_q ISA_NAME(bf16_pack_q)
#define bf16_exp_pack ISA_NAME(bf16_exp_pack)
#define bf16_amx ISA_NAME(bf16_amx)
#define bf16_tile ISA_NAME(bf16_tile)
#define pv_tile_bf16 ISA_NAME(pv_tile_bf16)
#define flash_block_bf16 ISA_NAME(flash_block_bf16)
#define bf16_scores ISA_NAME(bf16_scores)
#define bf16_pairs ISA_NAME(bf16_pairs)
#define bf16_lazy_tile ISA_NAME(bf16_lazy_tile)
#define flash_block_pv_bf16 ISA_NAME(flash_block_pv_bf16)
#define bf16_np2 ISA_NAME(bf16_np2)

/* Features and keys are padded to whole tiles of this many bfloat16. */
#define BF_PAD 32
#define BF_ROUND(n) (((n) + BF_PAD - 1) / BF_PAD * BF_PAD)

/* A job's keys and values in bfloat16 (see the layouts above). */
typedef struct {
    uint32_t *kb, *vt;
    int64_t ldk, ldv; /* words per row */
} bf16_kv;

/* ldk and ldv of a job. */
static inline void bf16_dims(const attn_sdpa_job *j, int64_t *ldk, int64_t *ldv)
{
    *ldk = BF_ROUND(j->d) / 2;
    *ldv = (BF_ROUND(j->lk) + BF_PAD) / 2;
}

/* Whether a job is a bf16 job of query blocks, the one kind with kb and vt. */
static inline int bf16_blocks(const attn_sdpa_job *j)
{
    return j->bf16 && !sdpa_by_rows(j);
}

/* Whether bf16 job b's kb and vt are job a's: the same key and value
 * rows, rotated alike (the query heads of one KV head, grouped-query),
 * so that they are rounded once. */
static inline int bf16_same_kv(const attn_sdpa_job *a, const attn_sdpa_job *b)
{
    return bf16_blocks(a) && bf16_blocks(b) && a->k == b->k && a->v == b->v &&
           a->k_stride == b->k_stride && a->v_stride == b->v_stride && a->lk == b->lk &&
           a->d == b->d && a->dv == b->dv && a->rope == b->rope && a->rope_rel == b->rope_rel &&
           (!a->rope || (a->rope_k0 == b->rope_k0 && a->rope_dims == b->rope_dims &&
                         a->rope_interleaved == b->rope_interleaved));
}

/* Bytes of kb and vt for a bf16 job of query blocks (0 for the others),
 * whole lines. */
static size_t bf16_job_bytes(const attn_sdpa_job *j)
{
    if (!bf16_blocks(j)) return 0;
    int64_t ldk, ldv;
    bf16_dims(j, &ldk, &ldv);
    return LINES((size_t)(2 * ldv) * (size_t)ldk + (size_t)j->dv * (size_t)ldv) * sizeof(float);
}

/* VW floats of x from p, zero at n and past it. */
static inline ALWAYS TGT V bf16_load(const float *x, int64_t p, int64_t n)
{
    if (p + VW <= n) return VLOAD(x + p);
    if (p >= n) return VZERO();
    return VLOADM(x + p, VTAILMASK((int)(n - p)));
}

/* x (n floats, zero past them) rounded to bfloat16 as words of pairs:
 * x[2p], x[2p+1] in dst[p] for p < words (a multiple of VW). */
static inline ALWAYS TGT void bf16_pack_row(const float *x, int64_t n, int64_t words,
                                            uint32_t *dst)
{
    for (int64_t p = 0; p < 2 * words; p += 2 * VW)
        VBSTORE(dst + p / 2, VBROW(bf16_load(x, p, n), bf16_load(x, p + VW, n)));
}

/* Value columns [cc, cc + VW) of the VW key pairs from t into vt: each
 * pair's words as a row of a VW x VW block, the block turned in registers
 * (moves only, which keep every bit), then one store a column, where word
 * by word each column was a store to a different line. */
static inline ALWAYS TGT void bf16_vt_block(const attn_sdpa_job *j, const bf16_kv *c, int64_t t,
                                            int64_t cc)
{
    V r[VW];
    UNROLL for (int i = 0; i < VW; i++) {
        int64_t k0 = 2 * (t + i);
        VB w = VBPACK(k0 < j->lk ? bf16_load(j->v + k0 * j->v_stride, cc, j->dv) : VZERO(),
                      k0 + 1 < j->lk ? bf16_load(j->v + (k0 + 1) * j->v_stride, cc, j->dv) : VZERO());
        memcpy(&r[i], &w, sizeof w);
    }
    VTRANSPOSE(r);
    int n = j->dv - cc < VW ? (int)(j->dv - cc) : VW;
    for (int l = 0; l < n; l++)
        memcpy(c->vt + (cc + l) * c->ldv + t, &r[l], sizeof r[l]);
}

/* The key and value pairs [t0, t1) of kb and vt (keys 2 t0 .. 2 t1 - 1,
 * zero past lk); with rope, each key row is turned first (through row, d
 * floats). */
static TGT void bf16_convert(const attn_sdpa_job *j, const bf16_kv *c, int64_t t0, int64_t t1,
                             float *row)
{
    for (int64_t t = 2 * t0; t < 2 * t1; t++) {
        uint32_t *dst = c->kb + t * c->ldk;
        if (t >= j->lk) {
            memset(dst, 0, (size_t)c->ldk * sizeof *dst);
            continue;
        }
        const float *x = j->k + t * j->k_stride;
        if (j->rope) {
            rope_rows(j, x, j->k_stride, j->rope_k0 + t, 1, row);
            x = row;
        }
        bf16_pack_row(x, j->d, c->ldk, dst);
    }
    int64_t t = t0;
    for (; t + VW <= t1; t += VW)
        for (int64_t cc = 0; cc < j->dv; cc += VW)
            bf16_vt_block(j, c, t, cc);
    for (; t < t1; t++) {
        const float *v0 = 2 * t < j->lk ? j->v + 2 * t * j->v_stride : NULL;
        const float *v1 = 2 * t + 1 < j->lk ? j->v + (2 * t + 1) * j->v_stride : NULL;
        for (int64_t cc = 0; cc < j->dv; cc += VW) {
            uint32_t pr[VW];
            VBSTORE(pr, VBPACK(v0 ? bf16_load(v0, cc, j->dv) : VZERO(),
                               v1 ? bf16_load(v1, cc, j->dv) : VZERO()));
            int n = j->dv - cc < VW ? (int)(j->dv - cc) : VW;
            for (int l = 0; l < n; l++) c->vt[(cc + l) * c->ldv + t] = pr[l];
        }
    }
}

/* Whether the job's products go to the AMX tiles: a variant with VTILE
 * (QB = 64 lanes), a CPU and kernel that allow them, and whole tiles of
 * value columns. */
static inline ALWAYS int bf16_amx(const attn_sdpa_job *j)
{
#ifdef VTILE
    return j->dv % 16 == 0 && attn_amx_ready();
#else
    (void)j;
    return 0;
#endif
}

/* qt2 of query rows [i0, i0+nr) (rotated with rope, unscaled), through
 * qt (d x QB floats) and qr (as flash_pack_q). */
static inline ALWAYS TGT void bf16_pack_q(const attn_sdpa_job *j, const bf16_kv *c, int64_t i0,
                                          int64_t nr, float *qt, float *qr, uint32_t *qt2)
{
    flash_pack_q(j, i0, nr, qt, qr, 1.0f);
    for (int64_t p = 0; p < c->ldk; p++)
        UNROLL for (int q = 0; q < QV; q++) {
            V lo = 2 * p < j->d ? VLOAD(qt + 2 * p * QB + q * VW) : VZERO();
            V hi = 2 * p + 1 < j->d ? VLOAD(qt + (2 * p + 1) * QB + q * VW) : VZERO();
            VBSTORE(qt2 + p * QB + q * VW, VBPACK(lo, hi));
        }
}

/* The exponentials of a key block's final scores (nk rows of st), P =
 * e^(S - m) against the reference max m, which moves to the block's max bm
 * only where bm passes it by more than LAZY_MAX (FlashAttention-3's lazy
 * rescaling, as flash_block_lazy; P stays below e^8): P into pt2 as pairs,
 * zero from key nk to np2 pairs, and into st when keep is set (the
 * weights); alpha (e^(m before - m after), 1 where m stayed) and sum. */
static inline ALWAYS TGT void bf16_exp_pack(float *st, int nk, int np2, uint32_t *pt2, int keep,
                                            const V bm[QV], V m[QV], V alpha[QV], V sum[QV])
{
    V mu[QV];
    UNROLL for (int q = 0; q < QV; q++) {
        /* the reference max moves only where the block passes it by more
         * than LAZY_MAX (flash_block_lazy's rule): elsewhere alpha is 1 */
        V mn = VSEL(VCMPLT(VADD(m[q], VSET1(LAZY_MAX)), bm[q]), bm[q], m[q]);
        mu[q] = VSEL(VISNINF(mn), VZERO(), mn);
        alpha[q] = VEXP(VSUB(m[q], mu[q]));
        m[q] = mn;
        sum[q] = VZERO();
    }
    for (int t = 0; t < np2; t++)
        UNROLL for (int q = 0; q < QV; q++) {
            float *s0 = st + 2 * t * QB + q * VW, *s1 = s0 + QB;
            V p0 = 2 * t < nk ? VEXP_BF16(VSUB(VLOAD(s0), mu[q])) : VZERO();
            V p1 = 2 * t + 1 < nk ? VEXP_BF16(VSUB(VLOAD(s1), mu[q])) : VZERO();
            sum[q] = VADD(sum[q], VADD(p0, p1));
            if (keep) {
                if (2 * t < nk) VSTORE(s0, p0);
                if (2 * t + 1 < nk) VSTORE(s1, p1);
            }
            VBSTORE(pt2 + t * QB + q * VW, VBPACK(p0, p1));
        }
}

/* The one bfloat16 tile product of both P V and the scores:
 * acc[r][v] += sum_t a[r][t] . b[t][v] over n pairs, for rows r < rn of
 * R (a compile-time constant once inlined), a with lda words a row, b
 * with QB lanes a row; the caller sets acc first (zero, or O^T alpha). */
static inline ALWAYS TGT void bf16_tile(const uint32_t *b, int64_t n, const uint32_t *a,
                                        int64_t lda, int R, int rn, V acc[][QV])
{
    for (int64_t t = 0; t < n; t++) {
        VB x[QV];
        UNROLL for (int v = 0; v < QV; v++) x[v] = VBLOAD(b + t * QB + v * VW);
        UNROLL for (int r = 0; r < R; r++) {
            if (r < rn) {
                VB s = VBSET1(a[r * lda + t]);
                UNROLL for (int v = 0; v < QV; v++) acc[r][v] = VDPBF(acc[r][v], s, x[v]);
            }
        }
    }
}

/* One tile of a key block's scores in registers: kn keys from row kk of
 * kb (ldk words a row) against the query block qt2, in bfloat16 (or, with
 * amx, as the tile unit left them in st), then scaled, and with fix
 * through score_fix (softcap, ALiBi, the band). */
static inline ALWAYS TGT void bf16_scores(const attn_sdpa_job *j, const uint32_t *kb,
                                          int64_t ldk, const uint32_t *qt2, int64_t i0,
                                          int64_t jb, int kk, int kn, int amx, int fix,
                                          const float *st, V acc[KN][QV])
{
    if (amx) {
        UNROLL for (int t = 0; t < KN; t++)
            UNROLL for (int v = 0; v < QV; v++)
                acc[t][v] = t < kn ? VLOAD(st + (kk + t) * QB + v * VW) : VZERO();
    } else {
        UNROLL for (int t = 0; t < KN; t++)
            UNROLL for (int v = 0; v < QV; v++) acc[t][v] = VZERO();
        if (kn == KN) bf16_tile(qt2, (j->d + 1) / 2, kb + kk * ldk, ldk, KN, KN, acc);
        else bf16_tile(qt2, (j->d + 1) / 2, kb + kk * ldk, ldk, KN, kn, acc);
    }
    V sc = VSET1(j->scale);
    UNROLL for (int t = 0; t < KN; t++)
        UNROLL for (int v = 0; v < QV; v++) acc[t][v] = VMUL(acc[t][v], sc);
    if (fix) score_fix(j, i0, jb + kk, kn, 0, acc);
    if (j->term) score_term(j, jb + kk, kn, 0, acc);
}

/* Rows [t0, t1) of P in st (t0 even) as pairs into pt2; a last odd row
 * is paired with zero. */
static inline ALWAYS TGT void bf16_pairs(const float *st, int t0, int t1, uint32_t *pt2)
{
    for (int t = t0; t < t1; t += 2)
        UNROLL for (int q = 0; q < QV; q++) {
            V hi = t + 1 < t1 ? VLOAD(st + (t + 1) * QB + q * VW) : VZERO();
            VBSTORE(pt2 + t / 2 * QB + q * VW, VBPACK(VLOAD(st + t * QB + q * VW), hi));
        }
}

/* One tile of a key block in one pass, its P taken from the scores in
 * registers by the lazy rule (lazy_raise, lazy_exp) as the float32 tiles
 * do: into st in float32 (the weights, and the rescale of a raise), then
 * from there, still in L1, into pt2 as pairs (a tile starts on an even
 * key: KN is even). A raise packs the block's earlier pairs again.
 * Returns the vectors raised. */
static inline ALWAYS TGT int bf16_lazy_tile(const attn_sdpa_job *j, const uint32_t *kb,
                                            int64_t ldk, const uint32_t *qt2, int64_t i0,
                                            int64_t jb, int kk, int kn, int fix, float *st,
                                            uint32_t *pt2, V m[QV], V mu[QV], V alpha[QV],
                                            V sum[QV])
{
    V acc[KN][QV];
    bf16_scores(j, kb, ldk, qt2, i0, jb, kk, kn, 0, fix, st, acc);
    int raised = lazy_raise(acc, kn, 0, kk, st, m, mu, alpha, sum);
    if (raised) bf16_pairs(st, 0, kk, pt2);
    lazy_exp(acc, kn, 0, kk, st, mu, sum, 1);
    bf16_pairs(st, kk, kk + kn, pt2);
    return raised;
}

/* One key block's scores in bfloat16 (keys jb.. of kb, nk of them) and
 * their exponentials: sets alpha and sum, pt2 holds P (np2 pairs) and with
 * weights st holds P^T. With lazy (no mask or bias, no tile unit) in one
 * pass, tile by tile (bf16_lazy_tile); otherwise as flash_block_exact, the
 * block's max first (bf16_exp_pack). Returns whether the next block may
 * go lazily (flash_block_lazy's rule). Not inlined: its code inside
 * sdpa_block_flash would crowd the float32 path's registers. */
static NOINLINE TGT int flash_block_bf16(const attn_sdpa_job *j, const bf16_kv *c,
                                         const uint32_t *qt2, int64_t i0, int64_t jb,
                                         int nk, float *st, uint32_t *pt2, int np2, int amx,
                                         int lazy, V m[QV], V alpha[QV], V sum[QV])
{
    const uint32_t *kb = c->kb + jb * c->ldk;
    int fix = scores_fixed(j); /* once a block: a bf16 tile is short work */
    if (lazy && !amx) {
        V mu[QV];
        lazy_start(m, mu, alpha, sum);
        int raised = 0;
        for (int kk = 0; kk < nk; kk += KN)
            raised += bf16_lazy_tile(j, kb, c->ldk, qt2, i0, jb, kk, nk - kk < KN ? nk - kk : KN,
                                     fix, st, pt2, m, mu, alpha, sum);
        return raised == 0;
    }
#ifdef VTILE
    if (amx) attn_amx_scores(kb, c->ldk, qt2, (nk + 15) / 16 * 16, st);
#endif
    V bm[QV];
    UNROLL for (int q = 0; q < QV; q++) bm[q] = m[q];
    for (int kk = 0; kk < nk; kk += KN) {
        int kn = nk - kk < KN ? nk - kk : KN;
        V acc[KN][QV];
        bf16_scores(j, kb, c->ldk, qt2, i0, jb, kk, kn, amx, fix, st, acc);
        score_store(kn, acc, st + kk * QB, bm);
    }
    bf16_exp_pack(st, nk, np2, pt2, j->w != NULL, bm, m, alpha, sum);
    return 1;
}

/* O^T[c][lanes] = O^T alpha + sum_t vt[c][t] . pt2[t][lanes] over np2
 * pairs, cn value columns (see pv_tile). */
static inline ALWAYS TGT void pv_tile_bf16(float *ot, const uint32_t *pt2, int np2,
                                           const uint32_t *vt, int64_t ldv, int cn,
                                           const V alpha[QV])
{
    V acc[CN][QV];
    pv_acc_zero(acc);
    bf16_tile(pt2, np2, vt, ldv, CN, cn, acc);
    pv_acc_store(ot, cn, alpha, acc);
}

/* Pairs of keys of a block of nk keys that the products read: whole tiles
 * for AMX. */
static inline ALWAYS int bf16_np2(int nk, int amx)
{
    return amx ? (int)BF_ROUND(nk) / 2 : (nk + 1) / 2;
}

/* O^T = O^T alpha + V^T P^T for one key block (np2 pairs of keys from jb,
 * even), P in pt2. */
static inline ALWAYS TGT void flash_block_pv_bf16(const attn_sdpa_job *j, const bf16_kv *c,
                                                  float *ot, const uint32_t *pt2, int64_t jb,
                                                  int np2, int amx, const V alpha[QV])
{
    const uint32_t *vt = c->vt + jb / 2;
    (void)amx; /* 0 without VTILE */
#ifdef VTILE
    if (amx) {
        int rescale = 0; /* alpha is 1 wherever the block left the max as it was */
        UNROLL for (int q = 0; q < QV; q++) rescale |= VANYGT(VSET1(1.0f), alpha[q]);
        if (rescale)
            for (int64_t cc = 0; cc < j->dv; cc++)
                UNROLL for (int q = 0; q < QV; q++)
                    VSTORE(ot + cc * QB + q * VW, VMUL(VLOAD(ot + cc * QB + q * VW), alpha[q]));
        attn_amx_pv(vt, c->ldv, np2, pt2, j->dv, ot);
        return;
    }
#endif
    int64_t c0 = 0;
    for (; c0 + CN <= j->dv; c0 += CN)
        pv_tile_bf16(ot + c0 * QB, pt2, np2, vt + c0 * c->ldv, c->ldv, CN, alpha);
    if (c0 < j->dv)
        pv_tile_bf16(ot + c0 * QB, pt2, np2, vt + c0 * c->ldv, c->ldv, (int)(j->dv - c0), alpha);
}

/* qp (a query, bf16_pack_row) . k (a key row of d floats, rounded here)
 * in bfloat16, as one vector of float32 partial sums (lanes not yet
 * added: bf16_dot adds them; decode_dots adds VW keys' at once). */
static inline ALWAYS TGT V bf16_dot_lanes(const uint32_t *qp, const float *k, int64_t d)
{
    V s = VZERO();
    for (int64_t p = 0; p < d; p += 2 * VW)
        s = VDPBF(s, VBROW(bf16_load(k, p, d), bf16_load(k, p + VW, d)), VBLOAD(qp + p / 2));
    return s;
}

/* A decode row's score in bfloat16, summed in float32. */
static inline ALWAYS TGT float bf16_dot(const uint32_t *qp, const float *k, int64_t d)
{
    return VHSUM(bf16_dot_lanes(qp, k, d));
}

/* A decode row's P V for one key block in bfloat16: acc (dv floats and the
 * rest of their last vector) += sum_t P_t v_t over keys jb (even) .. jb+nk,
 * P (sc) rounded in pairs through pw (BK / 2 + VW words), each pair of
 * value rows rounded as it is read. Up to four vectors of the block's
 * sum stay in registers across the keys, summed pair by pair from zero,
 * then added to acc (blocked, as decode_pv). */
static inline ALWAYS TGT void bf16_pv_row(const attn_sdpa_job *j, int64_t jb, int nk,
                                          const float *sc, uint32_t *pw, float *acc)
{
    int np = (nk + 1) / 2;
    bf16_pack_row(sc, nk, (np + VW - 1) / VW * VW, pw);
    int64_t dv = j->dv, vs = j->v_stride;
    /* the odd key past the cache's end reads as zeros (its P is zero) */
    int last_odd = jb + 2 * (np - 1) + 1 >= j->lk;
    for (int64_t c = 0; c < dv; c += 4 * VW) {
        int nv = dv - c >= 4 * VW ? 4 : (int)((dv - c + VW - 1) / VW);
        V a[4];
        UNROLL for (int u = 0; u < 4; u++) a[u] = VZERO(); /* the block's sum, as decode_pv */
        const float *v0 = j->v + jb * vs;
        for (int t = 0; t < np; t++, v0 += 2 * vs) {
            if (pw[t] == 0) continue; /* both keys masked or underflowed, as decode_block skips */
            VB p = VBSET1(pw[t]);
            const float *v1 = t == np - 1 && last_odd ? NULL : v0 + vs;
            UNROLL for (int u = 0; u < 4; u++) {
                if (u >= nv) break;
                int64_t cc = c + u * VW;
                VB v = VBPACK(bf16_load(v0, cc, dv), v1 ? bf16_load(v1, cc, dv) : VZERO());
                a[u] = VDPBF(a[u], v, p);
            }
        }
        UNROLL for (int u = 0; u < 4; u++)
            if (u < nv) VSTORE(acc + c + u * VW, VADD(VLOAD(acc + c + u * VW), a[u]));
    }
}
