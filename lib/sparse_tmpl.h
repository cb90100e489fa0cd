/* sparse_tmpl.h - sparse attention's query blocks (attn_sparse, kernels.h):
 * the flash kernel's loop of kernels_tmpl.h (which includes this file
 * before its task function) over only the key spans the pattern allows,
 * so the work grows with the allowed pairs, not with Lq x Lk.
 *
 * A query block visits, within the keys causal and the window leave:
 *   local_global: the band of keys within `window` of any of its rows
 *     (|i' - j| <= w), plus the global keys outside that band. A global
 *     query row sees every key: it is computed again on its own, as the
 *     decode path computes a row, over whatever its other masks allow, so
 *     it does not make its whole block dense (without weights, all the
 *     global rows of a job together, in one pass over the keys).
 *   layout (bigbird, blocks): the key blocks any of its rows' layout rows
 *     allows, merged into runs.
 * Spans the pattern allows whole (global keys, the blocks of a query block
 * within one layout row) go through the flash kernel's tiles as they are;
 * the band goes through them as a window (the narrower of the job's own
 * and the pattern's), which the tiles mask in registers, cut around the
 * global keys inside it (allowed for every row); only the blocks
 * of a query block that straddles layout rows get the element predicate
 * (attn_sparse_allows) on their scores, as the explicit mask does.
 * Weights, when asked, are written in a second pass over the same spans
 * with the rows' final max and sum: zero outside the pattern. */

#define band_job ISA_NAME(band_job)
#define sparse_jobs_init ISA_NAME(sparse_jobs_init)
#define sparse_stage ISA_NAME(sparse_stage)
#define sparse_mask_tile ISA_NAME(sparse_mask_tile)
#define sparse_scores ISA_NAME(sparse_scores)
#define sparse_block_exact ISA_NAME(sparse_block_exact)
#define sparse_weights ISA_NAME(sparse_weights)
#define sparse_global_row ISA_NAME(sparse_global_row)
#define sparse_global_rows ISA_NAME(sparse_global_rows)
#define sparse_store_o ISA_NAME(sparse_store_o)
#define sdpa_block_sparse ISA_NAME(sdpa_block_sparse)

/* The job local_global's band spans run as: its window the narrower of
 * the job's own sides and the pattern's (band, filled here); the job
 * itself for a layout. */
static inline const attn_sdpa_job *band_job(const attn_sdpa_job *j, attn_sdpa_job *band)
{
    const attn_sparse *sp = j->sparse;
    if (sp->layout)
        return j;
    *band = *j;
    band->window_left = j->window_left < 0 || j->window_left > sp->window ? sp->window
                                                                           : j->window_left;
    band->window_right = j->window_right < 0 || j->window_right > sp->window ? sp->window
                                                                              : j->window_right;
    return band;
}

/* A sparse job as its spans run: the job and its band copy (band_job),
 * with a mask or bias staged a key block at a time in term (term_block,
 * as the flash kernel stages them). */
typedef struct {
    attn_sdpa_job job, band;
    const attn_sdpa_job *bj;
    float *term; /* NULL without a mask or bias */
} sparse_jobs;

static inline void sparse_jobs_init(sparse_jobs *s, const attn_sdpa_job *j, float *term)
{
    s->job = *j;
    s->term = j->mask || j->bias ? term : NULL;
    s->job.term = s->term;
    s->bj = band_job(&s->job, &s->band);
}

/* The job that runs key block jb (nk keys) of span kind for query rows
 * i0.. (nr), its term staged. */
static inline TGT const attn_sdpa_job *sparse_stage(sparse_jobs *s, int64_t i0, int64_t nr,
                                                    int64_t jb, int nk, int kind)
{
    if (s->term) {
        term_block(&s->job, i0, nr, jb, nk, s->term);
        s->job.term_jb = s->band.term_jb = jb;
    }
    return kind == ATTN_SPAN_BAND ? s->bj : &s->job;
}

/* sparse_mask_tile for blocks of at least VW rows: a query vector's
 * lanes then lie in at most two layout rows (lanes below `split` in the
 * first), so each key masks whole vectors or one side of the split. Rows
 * past the last layout row (padding lanes) read the last one. */
static inline ALWAYS TGT void sparse_mask_vec(const attn_sparse *sp, int64_t i0, int64_t jb,
                                              int64_t nk, float *st)
{
    int64_t b = sp->block;
    V ninf = VSET1(-INFINITY);
    UNROLL for (int v = 0; v < QV; v++) {
        int64_t base = i0 + v * VW, qa = base / b, qz = (base + VW - 1) / b;
        if (qa >= sp->lrows) qa = sp->lrows - 1;
        if (qz >= sp->lrows) qz = sp->lrows - 1;
        int split = qa == qz ? VW : (int)((qa + 1) * b - base);
        const uint8_t *ra = sp->layout + qa * sp->lcols, *rz = sp->layout + qz * sp->lcols;
        int64_t kb = jb / b, edge = (kb + 1) * b;
        int ona = ra[kb] != 0, onz = rz[kb] != 0;
        for (int64_t kk = 0; kk < nk; kk++) {
            if (jb + kk == edge) {
                kb++;
                edge += b;
                ona = ra[kb] != 0;
                onz = rz[kb] != 0;
            }
            if (ona && onz) continue;
            float *x = st + kk * QB + v * VW;
            if (!ona && !onz) VSTORE(x, ninf);
            else VSTORE(x, VSEL(ona ? VLANES(0, split - 1) : VLANES(split, VW - 1), VLOAD(x), ninf));
        }
    }
}

/* -inf on the scores of st (nk keys from jb, rows i0.., the tile layout
 * of kernels_tmpl.h) the layout does not allow. */
static inline ALWAYS TGT void sparse_mask_tile(const attn_sparse *sp, int64_t i0, int64_t nr,
                                               int64_t jb, int64_t nk, float *st)
{
    if (sp->block >= VW) {
        sparse_mask_vec(sp, i0, jb, nk, st);
        return;
    }
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *row = sp->layout + ((i0 + r) / sp->block) * sp->lcols;
        int64_t kb = jb / sp->block, edge = (kb + 1) * sp->block;
        int on = row[kb] != 0;
        for (int64_t kk = 0; kk < nk; kk++) {
            if (jb + kk == edge) {
                on = row[++kb] != 0;
                edge += sp->block;
            }
            if (!on)
                st[kk * QB + r] = -INFINITY;
        }
    }
}

/* Scores of one key block into st through the job's masks and, when
 * partial, the pattern's. */
static inline ALWAYS TGT void sparse_scores(const attn_sdpa_job *j, const float *qt, int64_t i0,
                                            int64_t nr, int64_t jb, int nk, int partial,
                                            float *st)
{
    V bm[QV];
    UNROLL for (int q = 0; q < QV; q++) bm[q] = VSET1(-INFINITY);
    for (int kk = 0; kk < nk; kk += KN) {
        int kn = nk - kk < KN ? nk - kk : KN;
        score_tile(j, j->k + (jb + kk) * j->k_stride, j->k_stride, qt, i0, jb + kk, kn,
                   st + kk * QB, bm);
    }
    if (partial)
        sparse_mask_tile(j->sparse, i0, nr, jb, nk, st);
}

/* flash_block_exact of kernels_tmpl.h with the pattern applied to the
 * scores before the block's max. */
static inline ALWAYS TGT void sparse_block_exact(const attn_sdpa_job *j, const float *qt, int64_t i0,
                                                 int64_t nr, int64_t jb, int nk, int partial,
                                                 float *st, V m[QV], V alpha[QV], V sum[QV])
{
    sparse_scores(j, qt, i0, nr, jb, nk, partial, st);
    block_exp_exact(st, nk, NO_EDGE, m, alpha, sum);
}

/* The weights of rows [i0, i0 + nr): zero, then exp(s - m) / l over the
 * spans again, with the rows' final max m and 1/l (inv). */
static TGT void sparse_weights(sparse_jobs *sj, const float *qt, int64_t i0, int64_t nr,
                               int64_t klo, int64_t khi, const V m[QV], const float inv[QB],
                               float *st)
{
    const attn_sdpa_job *j = &sj->job;
    for (int64_t r = 0; r < nr; r++)
        memset(j->w + (i0 + r) * j->w_stride, 0, (size_t)j->lk * sizeof(float));
    V mu[QV], iv[QV];
    UNROLL for (int q = 0; q < QV; q++) {
        mu[q] = VSEL(VISNINF(m[q]), VZERO(), m[q]);
        iv[q] = VLOAD(inv + q * VW);
    }
    attn_span_it it;
    int64_t lo, hi;
    int kind;
    attn_span_init(&it, j->sparse, i0, nr, klo, khi);
    while (attn_span_next(&it, &lo, &hi, &kind))
        for (int64_t jb = lo; jb < hi; jb += BK) {
            int nk = hi - jb < BK ? (int)(hi - jb) : BK;
            sparse_scores(sparse_stage(sj, i0, nr, jb, nk, kind), qt, i0, nr, jb, nk,
                          kind == ATTN_SPAN_MIXED, st);
            for (int kk = 0; kk < nk; kk++)
                UNROLL for (int q = 0; q < QV; q++) {
                    V x = VLOAD(st + kk * QB + q * VW);
                    VSTORE(st + kk * QB + q * VW, VMUL(VEXP(VSUB(x, mu[q])), iv[q]));
                }
            store_t(st, nk, j->w + i0 * j->w_stride + jb, j->w_stride, nr, 0);
        }
}

/* Global query row i of a local_global job: its output (and weights) over
 * every key its other masks allow, as sdpa_rows computes a row, written
 * over what its block left. sc: BK floats; acc: dv + VW floats. */
static TGT void sparse_global_row(const attn_sdpa_job *j, int64_t i, float *sc, float *acc)
{
    int64_t vf = j->dv - j->dv % VW, klo, khi;
    float m = j->has_sink ? j->sink : -INFINITY, l = j->has_sink ? 1.0f : 0.0f;
    memset(acc, 0, (size_t)(vf + VW) * sizeof(float));
    key_range(j, i, 1, &klo, &khi);
    for (int64_t jb = klo; jb < khi; jb += BK) {
        int nk = khi - jb < BK ? (int)(khi - jb) : BK;
        float bm = decode_scores(j, i, j->q + i * j->q_stride, NULL, 0, NULL, jb, nk, sc, m);
        float alpha, mu = bm == -INFINITY ? 0.0f : bm;
        float psum = decode_block(j, 0, NULL, jb, nk, sc, m, mu, acc, &alpha);
        l = l * alpha + psum;
        m = bm;
    }
    float inv = row_inv(l, m), mu = m == -INFINITY ? 0.0f : m;
    float *o = j->o + i * j->o_stride;
    for (int64_t c = 0; c < j->dv; c++) o[c] = acc[c] * inv;
    if (j->lse) j->lse[i] = attn_lse(m, l);
    if (!j->w) return;
    float *wr = j->w + i * j->w_stride;
    memset(wr, 0, (size_t)j->lk * sizeof(float));
    for (int64_t jb = klo; jb < khi; jb += BK) {
        int nk = khi - jb < BK ? (int)(khi - jb) : BK;
        decode_scores(j, i, j->q + i * j->q_stride, NULL, 0, NULL, jb, nk, sc, -INFINITY);
        for (int kk = 0; kk < nk; kk++) wr[jb + kk] = expf(sc[kk] - mu) * inv;
    }
}

/* Every global query row of a local_global job without weights, from row
 * first (the job's first) on, as sparse_global_row computes one but up to
 * G rows at a time in one pass over the keys: each key block is read once
 * for all of them, where row by row each global row streamed the head's
 * keys and values from memory again (a seventh of the time at L = 32768
 * with 4 global rows a head). sc: G x BK floats (st, BK x QB); acc: G
 * rows of dv + VW floats (ot, dv x QB at least). */
static TGT void sparse_global_rows(const attn_sdpa_job *j, int64_t first, float *sc, float *acc)
{
    const uint8_t *qg = j->sparse->qglobal;
    int64_t vf = j->dv - j->dv % VW, as = vf + VW, G = j->dv * QB / as;
    int64_t rows[QB], klo[QB], khi[QB], i = first;
    float m[QB], l[QB];
    if (G > QB) G = QB;
    while (i < j->lq) {
        int64_t n = 0, lo = j->lk, hi = 0;
        for (; i < j->lq && n < G; i++) {
            const uint8_t *next = memchr(qg + i, 1, (size_t)(j->lq - i));
            if (!next) break;
            i = next - qg;
            rows[n] = i;
            key_range(j, i, 1, &klo[n], &khi[n]);
            lo = klo[n] < lo ? klo[n] : lo;
            hi = khi[n] > hi ? khi[n] : hi;
            m[n] = j->has_sink ? j->sink : -INFINITY;
            l[n] = j->has_sink ? 1.0f : 0.0f;
            memset(acc + n++ * as, 0, (size_t)as * sizeof(float));
        }
        if (n == 0) break;
        for (int64_t jb = lo; jb < hi; jb += BK)
            for (int64_t g = 0; g < n; g++) {
                int64_t a = jb > klo[g] ? jb : klo[g], b = jb + BK < khi[g] ? jb + BK : khi[g];
                if (a >= b) continue;
                float *sg = sc + g * BK;
                float bm = decode_scores(j, rows[g], j->q + rows[g] * j->q_stride, NULL, 0, NULL,
                                         a, (int)(b - a), sg, m[g]);
                float alpha, mu = bm == -INFINITY ? 0.0f : bm;
                float psum = decode_block(j, 0, NULL, a, (int)(b - a), sg, m[g], mu, acc + g * as,
                                          &alpha);
                l[g] = l[g] * alpha + psum;
                m[g] = bm;
            }
        for (int64_t g = 0; g < n; g++) {
            float inv = row_inv(l[g], m[g]), *o = j->o + rows[g] * j->o_stride;
            for (int64_t c = 0; c < j->dv; c++) o[c] = acc[g * as + c] * inv;
            if (j->lse) j->lse[rows[g]] = attn_lse(m[g], l[g]);
        }
    }
}

/* flash_store_o for a block holding global rows that sparse_global_rows
 * writes: the other rows only, each scaled by 1/l as there. */
static TGT void sparse_store_o(const attn_sdpa_job *j, int64_t i0, int64_t nr, const float *ot,
                               const V l[QV], const V m[QV])
{
    float lv[QB], mv[QB];
    UNROLL for (int q = 0; q < QV; q++) {
        VSTORE(lv + q * VW, l[q]);
        VSTORE(mv + q * VW, m[q]);
    }
    for (int64_t r = 0; r < nr; r++) {
        if (j->sparse->qglobal[i0 + r]) continue;
        float inv = row_inv(lv[r], mv[r]), *o = j->o + (i0 + r) * j->o_stride;
        for (int64_t c = 0; c < j->dv; c++) o[c] = ot[c * QB + r] * inv;
        if (j->lse) j->lse[i0 + r] = attn_lse(mv[r], lv[r]);
    }
}

/* One query block of a sparse job: sdpa_block_flash's online softmax over
 * the spans only. Scratch: qt (d x QB), st (BK x QB), ot (dv x QB), term
 * (BK x QB, a mask or bias staged). */
static TGT void sdpa_block_sparse(const attn_sdpa_job *j, int64_t i0, int64_t nr, float *qt,
                                  float *st, float *ot, float *term)
{
    flash_pack_q(j, i0, nr, qt, NULL, j->scale); /* rope: rotated before (attn_rope_in_kernel) */
    memset(ot, 0, (size_t)j->dv * QB * sizeof(float));
    V m[QV], l[QV]; /* a sink starts the softmax as in sdpa_block_flash */
    UNROLL for (int q = 0; q < QV; q++) {
        m[q] = VSET1(j->has_sink ? j->sink : -INFINITY);
        l[q] = j->has_sink ? VSET1(1.0f) : VZERO();
    }
    int64_t klo, khi, lo, hi;
    key_range(j, i0, nr, &klo, &khi);
    attn_span_it it;
    int kind, lazy = 0;
    sparse_jobs sj;
    sparse_jobs_init(&sj, j, term);
    attn_span_init(&it, j->sparse, i0, nr, klo, khi);
    while (attn_span_next(&it, &lo, &hi, &kind))
        for (int64_t jb = lo; jb < hi; jb += BK) {
            int nk = hi - jb < BK ? (int)(hi - jb) : BK, p = kind == ATTN_SPAN_MIXED;
            const attn_sdpa_job *js = sparse_stage(&sj, i0, nr, jb, nk, kind);
            V alpha[QV], sum[QV];
            if (lazy && !p) {
                lazy = flash_block_lazy(js, js->k + jb * js->k_stride, js->k_stride, qt, i0, jb, nk,
                                        st, m, alpha, sum, NULL);
            } else {
                sparse_block_exact(js, qt, i0, nr, jb, nk, p, st, m, alpha, sum);
                lazy = 1;
            }
            UNROLL for (int q = 0; q < QV; q++) l[q] = VFMA(l[q], alpha[q], sum[q]);
            flash_block_pv(js, ot, st, i0, jb, nk, alpha);
        }
    /* local_global's global rows: without weights, all of a job's in one
     * pass by the block of its first (sparse_global_rows), the others'
     * blocks leaving them to it; with weights, each by its block */
    const uint8_t *qg = j->sparse->layout ? NULL : j->sparse->qglobal;
    const uint8_t *g0 = qg ? memchr(qg + i0, 1, (size_t)nr) : NULL;
    float inv[QB];
    if (g0 && !j->w) {
        sparse_store_o(j, i0, nr, ot, l, m);
        if (!memchr(qg, 1, (size_t)i0)) /* st and ot are free again */
            sparse_global_rows(j, g0 - qg, st, ot);
        return;
    }
    flash_store_o(j, i0, nr, ot, l, m, inv);
    if (j->w)
        sparse_weights(&sj, qt, i0, nr, klo, khi, m, inv, st);
    for (int64_t r = 0; g0 && r < nr; r++)
        if (qg[i0 + r]) sparse_global_row(j, i0 + r, st, ot);
}
