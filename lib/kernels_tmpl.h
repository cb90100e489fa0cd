/* kernels_tmpl.h - the SIMD kernels written once over a small vector
 * vocabulary; kernels_avx512.c and kernels_avx2.c include it after
 * defining that vocabulary for their instruction set.
 *
 * The includer defines: V (vector), VM (lane mask), VW (lanes), QV (query
 * vectors per block), KN (keys per score tile), CN (value columns per
 * output tile), TGT (the target attribute), FN(name) (name with the ISA
 * suffix), and VLOAD, VSTORE, VLOADM, VSTOREM, VTAILMASK, VSET1, VZERO,
 * VFMA, VMUL, VADD, VSUB, VMAX, VDIV, VEXP, VHSUM, VLANES(lo,hi) (lanes
 * lo..hi set), VSEL(m,a,b) (m ? a : b), VTRANSPOSE(r) (in-place VW x VW),
 * VISNINF(x) (lanes equal to -inf), VGTZERO(x) (lanes > 0), VANYGT(a,b)
 * (nonzero when a lane of a exceeds b's), VSTREAM(p,v)
 * (non-temporal store, p aligned to a vector), VSFENCE().
 * VTAILMASK(n) is the first n lanes, or every lane when n is 0.
 *
 * Scaled-dot attention is FlashAttention's loop (Dao et al. 2022, and the
 * online softmax of Milakov & Gimelshein 2018) arranged "transposed": a
 * score tile holds S^T, keys along rows and queries along the vector
 * lanes, computed as K * Q^T with Q^T packed once per query block and K
 * read in place (one broadcast per key element, no K panel to pack). In
 * that layout the running max, the rescale factor and the sum are all
 * per-lane, so the online softmax needs no horizontal operation, and the
 * output O^T += V^T P^T again broadcasts straight from V's rows. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define QB (QV * VW) /* query rows per block */
#define BK 96        /* keys per block: the score tile S^T is BK x QB floats (L1) */
/* Rows up to this many keys stage a query block's weights in scratch (QB x
 * lk floats, within L2) rather than in the caller's buffer; see
 * sdpa_block_flash. */
#define STAGE_LK 1024
/* Rows of A from which gemm_nt packs B once per column panel (C stored
 * as rows) rather than A once per row block (C stored transposed): below
 * it, packing all of B costs more than the transposed stores save
 * (measured on Zen 5 at k = 512: m = 128 favours A, m = 512 favours B). */
#define GEMM_PACK_B (4 * QB)
#define UNROLL _Pragma("GCC unroll 16")
/* e^x for x <= 88 or -inf, all the flash loop needs (scores minus a
 * reference max, at most LAZY_MAX above it): an includer may define a
 * cheaper VEXPN than its general VEXP. */
#ifndef VEXPN
#define VEXPN(x) VEXP(x)
#endif
#define ALWAYS __attribute__((always_inline))

/* ------------------------------------------------------------ tiles */

/* acc[kk][v] = sum_p k[kk][p] * qt[p][v]: kn keys (rows of k, stride ks)
 * against one packed block qt (d x QB) of query rows. Vectors v < v0 are
 * left zero (causal tiles whose first rows see none of these keys); pass
 * constants for kn and v0 so the loops unroll without branches. */
static inline ALWAYS TGT void FN(kq_tile)(const float *qt, int64_t d,
                                          const float *k, int64_t ks,
                                          int kn, int v0, V acc[KN][QV])
{
    UNROLL for (int kk = 0; kk < KN; kk++)
        UNROLL for (int v = 0; v < QV; v++) acc[kk][v] = VZERO();
    for (int64_t p = 0; p < d; p++) {
        V q[QV];
        UNROLL for (int v = 0; v < QV; v++) q[v] = v >= v0 ? VLOAD(qt + p * QB + v * VW) : VZERO();
        UNROLL for (int kk = 0; kk < KN; kk++) {
            if (kk < kn) {
                V b = VSET1(k[kk * ks + p]);
                UNROLL for (int v = 0; v < QV; v++)
                    if (v >= v0) acc[kk][v] = VFMA(b, q[v], acc[kk][v]);
            }
        }
    }
}

/* Packs rows [i0, i0+n) of x (stride xs, width d) as x^T: d x QB, zero
 * rows past n, so every tile computes on full vectors. VW x VW blocks go
 * through a register transpose; partial blocks use masked loads. */
static TGT void FN(pack_t)(const float *x, int64_t xs, int64_t d, int64_t n, float *xt)
{
    for (int64_t r0 = 0; r0 < QB; r0 += VW) {
        int64_t rows = n - r0 < 0 ? 0 : n - r0 > VW ? VW : n - r0;
        for (int64_t p0 = 0; p0 < d; p0 += VW) {
            int cols = d - p0 < VW ? (int)(d - p0) : VW;
            VM cm = VTAILMASK(cols == VW ? 0 : cols);
            V r[VW];
            UNROLL for (int t = 0; t < VW; t++) {
                const float *src = x + (r0 + t) * xs + p0;
                r[t] = t >= rows ? VZERO() : cols == VW ? VLOAD(src) : VLOADM(src, cm);
            }
            VTRANSPOSE(r);
            for (int t = 0; t < cols; t++) VSTORE(xt + (p0 + t) * QB + r0, r[t]);
        }
    }
}

/* ------------------------------------------------------------- gemm */

typedef struct {
    int64_t m, n, k;
    const float *a; int64_t lda;
    const float *b; int64_t ldb;
    const float *bias;
    float *c; int64_t ldc;
    int64_t ncols;   /* gemm_rows_task, gemm_task_a: columns per task */
    int64_t nctask;  /* gemm_task_a: column tasks per row block */
    int64_t npanels; /* gemm_task_b: panels of QB columns */
    int64_t rows;    /* gemm_task_b: rows of C per task (a multiple of KN) */
    float *scratch;  /* per worker: k x QB floats */
} FN(gemm_args);

/* One task for short A (m below GEMM_PACK_B rows): rows [i0, i0+QB) of A
 * packed as A^T, against a range of columns of B read in place. C^T tiles
 * come out of kq_tile (columns along rows, rows along lanes) and are
 * stored transposed; with k in the hundreds that store is a few percent of
 * the work, less than packing all of B would cost for so few rows. */
static TGT void FN(gemm_task_a)(void *arg, int64_t task, int worker)
{
    const FN(gemm_args) *g = arg;
    int64_t ib = task / g->nctask, jt = task % g->nctask;
    int64_t i0 = ib * QB, nr = g->m - i0 < QB ? g->m - i0 : QB;
    int64_t j0 = jt * g->ncols, j1 = j0 + g->ncols < g->n ? j0 + g->ncols : g->n;
    float *at = g->scratch + (size_t)worker * (size_t)g->k * QB;
    FN(pack_t)(g->a + i0 * g->lda, g->lda, g->k, nr, at);
    float tile[KN * QB];
    for (int64_t j = j0; j < j1; j += KN) {
        int kn = j1 - j < KN ? (int)(j1 - j) : KN;
        V acc[KN][QV];
        if (kn == KN) FN(kq_tile)(at, g->k, g->b + j * g->ldb, g->ldb, KN, 0, acc); /* unrolls fully */
        else FN(kq_tile)(at, g->k, g->b + j * g->ldb, g->ldb, kn, 0, acc);
        for (int kk = 0; kk < kn; kk++) {
            V bv = VSET1(g->bias ? g->bias[j + kk] : 0.0f);
            UNROLL for (int v = 0; v < QV; v++)
                VSTORE(tile + kk * QB + v * VW, VADD(acc[kk][v], bv));
        }
        for (int64_t r = 0; r < nr; r++) {
            float *crow = g->c + (i0 + r) * g->ldc + j;
            for (int kk = 0; kk < kn; kk++) crow[kk] = tile[kk * QB + r];
        }
    }
}

/* One task for long A: a panel of QB columns of C over a range of rows, in the
 * GotoBLAS arrangement (Goto & van de Geijn 2008): the panel of B is packed
 * once as B^T (k x QB, the layout of a query block's Q^T, so pack_t and
 * kq_tile serve both), then KN rows of A at a time are broadcast against it
 * in a KN x QB register tile that is already a block of C's rows: stored as
 * row vectors with the bias added, no transpose. */
static TGT void FN(gemm_task_b)(void *arg, int64_t task, int worker)
{
    const FN(gemm_args) *g = arg;
    int64_t jp = task % g->npanels, rc = task / g->npanels;
    int64_t j0 = jp * QB, nc = g->n - j0 < QB ? g->n - j0 : QB;
    int64_t r0 = rc * g->rows, r1 = g->m - r0 < g->rows ? g->m : r0 + g->rows;
    float *bt = g->scratch + (size_t)worker * (size_t)g->k * QB;
    FN(pack_t)(g->b + j0 * g->ldb, g->ldb, g->k, nc, bt);
    V bias[QV];
    VM tm[QV];
    int lanes[QV];
    UNROLL for (int v = 0; v < QV; v++) {
        int64_t left = nc - v * VW;
        lanes[v] = left <= 0 ? 0 : left >= VW ? VW : (int)left;
        tm[v] = VTAILMASK(lanes[v] == VW ? 0 : lanes[v]);
        bias[v] = !g->bias || lanes[v] == 0 ? VZERO()
                : lanes[v] == VW ? VLOAD(g->bias + j0 + v * VW) : VLOADM(g->bias + j0 + v * VW, tm[v]);
    }
    for (int64_t i = r0; i < r1; i += KN) {
        int kn = r1 - i < KN ? (int)(r1 - i) : KN;
        V acc[KN][QV];
        const float *ar = g->a + i * g->lda;
        if (kn == KN) FN(kq_tile)(bt, g->k, ar, g->lda, KN, 0, acc); /* constant: unrolls fully */
        else FN(kq_tile)(bt, g->k, ar, g->lda, kn, 0, acc);
        for (int r = 0; r < kn; r++) {
            float *crow = g->c + (i + r) * g->ldc + j0;
            if (nc == QB) {
                UNROLL for (int v = 0; v < QV; v++) VSTORE(crow + v * VW, VADD(acc[r][v], bias[v]));
            } else {
                UNROLL for (int v = 0; v < QV; v++)
                    if (lanes[v]) VSTOREM(crow + v * VW, tm[v], VADD(acc[r][v], bias[v]));
            }
        }
    }
}

/* Rows one at a time for short A (decode steps): dot products along k. */
static TGT void FN(gemm_rows)(const FN(gemm_args) *g)
{
    VM tm = VTAILMASK((int)(g->k % VW));
    int64_t kf = g->k - g->k % VW;
    for (int64_t i = 0; i < g->m; i++) {
        const float *a = g->a + i * g->lda;
        for (int64_t j = 0; j < g->n; j++) {
            const float *b = g->b + j * g->ldb;
            V s = VZERO();
            for (int64_t p = 0; p < kf; p += VW) s = VFMA(VLOAD(a + p), VLOAD(b + p), s);
            if (kf < g->k) s = VFMA(VLOADM(a + kf, tm), VLOADM(b + kf, tm), s);
            g->c[i * g->ldc + j] = VHSUM(s) + (g->bias ? g->bias[j] : 0.0f);
        }
    }
}

static TGT void FN(gemm_rows_task)(void *arg, int64_t task, int worker)
{
    (void)worker;
    FN(gemm_args) g = *(const FN(gemm_args) *)arg;
    int64_t j0 = task * g.ncols;
    g.n = g.n - j0 < g.ncols ? g.n - j0 : g.ncols;
    g.b += j0 * g.ldb;
    g.c += j0;
    if (g.bias) g.bias += j0;
    FN(gemm_rows)(&g);
}

static TGT void FN(gemm_nt)(int64_t m, int64_t n, int64_t k,
                            const float *a, int64_t lda,
                            const float *b, int64_t ldb,
                            const float *bias,
                            float *c, int64_t ldc, int threads)
{
    if (m <= 0 || n <= 0) return;
    FN(gemm_args) g = {m, n, k, a, lda, b, ldb, bias, c, ldc, 0, 0, 0, 0, NULL};
    double flops = 2.0 * (double)m * (double)n * (double)k;
    if (flops < 4e5) threads = 1;
    if (m < QB / 4) {
        /* Few rows: packing a panel of B would cost as much as using it. */
        g.ncols = threads > 1 ? (n + threads * 4 - 1) / (threads * 4) : n;
        if (g.ncols < 16) g.ncols = 16;
        attn_pool_run(threads, (n + g.ncols - 1) / g.ncols, FN(gemm_rows_task), &g);
        return;
    }
    int nt = threads < 1 ? 1 : threads;
    g.scratch = malloc((size_t)nt * (size_t)(k > 0 ? k : 1) * QB * sizeof(float));
    if (!g.scratch) { /* no memory for packing: the unpacked path needs none */
        FN(gemm_rows)(&g);
        return;
    }
    int64_t ntasks;
    if (m < GEMM_PACK_B) {
        /* Enough tasks for the threads to balance, each wide enough (a
         * multiple of KN) to amortise packing its row block. */
        int64_t nb = (m + QB - 1) / QB, nct = 1;
        while (nb * nct < 4 * threads && n / (nct * 2) >= 4 * KN) nct *= 2;
        g.ncols = (n + nct - 1) / nct;
        g.ncols = (g.ncols + KN - 1) / KN * KN;
        g.nctask = (n + g.ncols - 1) / g.ncols;
        ntasks = nb * g.nctask;
        attn_pool_run(threads, ntasks, FN(gemm_task_a), &g);
    } else {
        /* Whole column panels per task when there are enough of them for
         * the threads to balance; otherwise row ranges too (each task then
         * packs its panel again, which costs k x QB moves against
         * rows x QB x k multiply-adds). */
        g.npanels = (n + QB - 1) / QB;
        int64_t chunks = 1;
        while (g.npanels * chunks < 4 * threads && m / (chunks * 2) >= 8 * KN) chunks *= 2;
        g.rows = (m + chunks - 1) / chunks;
        g.rows = (g.rows + KN - 1) / KN * KN;
        chunks = (m + g.rows - 1) / g.rows;
        ntasks = g.npanels * chunks;
        attn_pool_run(threads, ntasks, FN(gemm_task_b), &g);
    }
    free(g.scratch);
}

/* ------------------------------------------------------------- sdpa */

typedef struct {
    const attn_sdpa_job *jobs;
    const int64_t *first; /* first task of each job; first[n] = total */
    size_t n;
    float *scratch;
    size_t per_worker;    /* floats */
    int64_t maxd;
    int64_t maxblk;       /* key blocks of the longest row with weights */
} FN(sdpa_args);

/* Keys [lo, hi) that any row of [i0, i0+nr) may see under causal/window. */
static void FN(key_range)(const attn_sdpa_job *j, int64_t i0, int64_t nr,
                          int64_t *lo, int64_t *hi)
{
    int64_t a = 0, b = j->lk;
    int64_t ilast = i0 + nr - 1;
    if (j->causal && ilast + 1 < b) b = ilast + 1;
    if (j->window >= 0) {
        if (i0 - j->window > a) a = i0 - j->window;
        if (j->window <= INT64_MAX - ilast - 1 && ilast + j->window + 1 < b)
            b = ilast + j->window + 1;
    }
    if (a > b) a = b; /* nothing visible: an empty range inside [0, lk] */
    *lo = a;
    *hi = b;
}

/* Scores of one tile in registers: acc[kk][lanes] = S^T for keys
 * jb..jb+kn-1 and query rows i0.. (QB of them; qt holds them already
 * scaled), with causal/window/key_mask applied. */
static inline ALWAYS TGT void FN(score_regs)(const attn_sdpa_job *j, const float *qt,
                                             int64_t i0, int64_t jb, int kn, V acc[KN][QV])
{
    const float *kr = j->k + jb * j->k_stride;
    /* causal: query vector v sees none of keys jb.. when jb >= i0 + (v+1) VW */
    int v0 = j->causal && jb - i0 >= VW ? (int)((jb - i0) / VW) : 0;
    if (v0 >= QV) v0 = QV - 1; /* cannot happen: key_range stops at the last row */
    if (kn == KN) {
        switch (v0) {
        case 0: FN(kq_tile)(qt, j->d, kr, j->k_stride, KN, 0, acc); break;
        case 1: FN(kq_tile)(qt, j->d, kr, j->k_stride, KN, 1, acc); break;
        case 2: FN(kq_tile)(qt, j->d, kr, j->k_stride, KN, 2, acc); break;
        default: FN(kq_tile)(qt, j->d, kr, j->k_stride, KN, 3, acc); break;
        }
    } else {
        FN(kq_tile)(qt, j->d, kr, j->k_stride, kn, v0, acc);
    }
    V ninf = VSET1(-INFINITY);
    int structural = j->causal || j->window >= 0;
    /* a window wider than both lengths masks nothing; clamping keeps the
     * lane arithmetic below from overflowing on hostile values */
    int64_t wnd = j->window > j->lq + j->lk ? j->lq + j->lk : j->window;
    for (int kk = 0; kk < kn; kk++) {
        int64_t jj = jb + kk;
        int dead = j->key_mask && !j->key_mask[jj];
        UNROLL for (int v = 0; v < QV; v++) {
            V s = dead ? ninf : acc[kk][v];
            if (structural && !dead) {
                /* lane l is row i0 + v*VW + l; allowed lanes form a range */
                int64_t base = i0 + v * VW, lo = -1, hi = VW;
                if (j->causal && jj - base > lo) lo = jj - base;
                if (wnd >= 0) {
                    if (jj - base - wnd > lo) lo = jj - base - wnd;
                    if (jj - base + wnd < hi) hi = jj - base + wnd;
                }
                if (lo > 0 || hi < VW - 1) {
                    int l = lo < 0 ? 0 : lo > VW ? VW : (int)lo;
                    int h = hi < -1 ? -1 : hi >= VW ? VW - 1 : (int)hi;
                    s = VSEL(VLANES(l, h), s, ninf);
                }
            }
            acc[kk][v] = s;
        }
    }
}

/* Scores of one tile into st, folded into the running maxima bm while
 * still in registers; then the explicit mask and bias (row-major in
 * memory, so a scalar pass, after which the caller takes the maxima
 * again). */
static inline ALWAYS TGT void FN(score_tile)(const attn_sdpa_job *j, const float *qt,
                                             int64_t i0, int64_t nr, int64_t jb, int kn,
                                             float *st, V bm[QV])
{
    V acc[KN][QV];
    FN(score_regs)(j, qt, i0, jb, kn, acc);
    for (int kk = 0; kk < kn; kk++)
        UNROLL for (int v = 0; v < QV; v++) {
            bm[v] = VMAX(bm[v], acc[kk][v]);
            VSTORE(st + kk * QB + v * VW, acc[kk][v]);
        }
    if (j->mask || j->bias) {
        for (int64_t r = 0; r < nr; r++) {
            int64_t i = i0 + r;
            const uint8_t *mrow = j->mask ? j->mask + i * j->mask_stride + jb : NULL;
            const float *brow = j->bias ? j->bias + i * j->bias_stride + jb : NULL;
            for (int kk = 0; kk < kn; kk++) {
                float *s = st + kk * QB + r;
                if (mrow && !mrow[kk]) *s = -INFINITY;
                else if (brow) *s += brow[kk];
            }
        }
    }
}

/* Scores above the reference max by at most this much are exponentiated
 * against it as they are (P up to e^8, harmless in float); only a tile
 * that goes further raises the reference. */
#define LAZY_MAX 8.0f

/* One tile of P^T straight from the scores in registers (no mask or bias,
 * which arrive in memory later): P = e^(S - m) against the reference max m
 * (per lane), raised only when the tile's max exceeds it by LAZY_MAX, in
 * the manner of FlashAttention-3's lazy rescaling (Shah et al. 2024). On a
 * raise, the block's earlier P rows, its partial sums and its alpha (the
 * factor for O^T and l, e^(m before the block - m now)) are scaled by
 * e^(m old - m new). kk is the tile's first row in st. Returns the number
 * of vectors raised. */
static inline ALWAYS TGT int FN(lazy_tile)(const attn_sdpa_job *j, const float *qt, int64_t i0,
                                            int64_t jb, int kk, int kn, float *st, V m[QV],
                                            V mu[QV], V alpha[QV], V sum[QV])
{
    V acc[KN][QV];
    FN(score_regs)(j, qt, i0, jb + kk, kn, acc);
    int raised = 0;
    UNROLL for (int v = 0; v < QV; v++) {
        V tmax = acc[0][v];
        UNROLL for (int t = 1; t < KN; t++)
            if (t < kn) tmax = VMAX(tmax, acc[t][v]);
        if (VANYGT(tmax, VADD(m[v], VSET1(LAZY_MAX)))) {
            /* a lane with nothing allowed keeps -inf and subtracts 0; its
             * P so far is 0, and c is 0 from an old max of -inf */
            V mn = VMAX(m[v], tmax);
            mu[v] = VSEL(VISNINF(mn), VZERO(), mn);
            V c = VEXPN(VSUB(m[v], mu[v]));
            for (int t = 0; t < kk; t++)
                VSTORE(st + t * QB + v * VW, VMUL(VLOAD(st + t * QB + v * VW), c));
            sum[v] = VMUL(sum[v], c);
            alpha[v] = VMUL(alpha[v], c);
            m[v] = mn;
            raised++;
        }
    }
    UNROLL for (int t = 0; t < KN; t++)
        if (t < kn)
            UNROLL for (int v = 0; v < QV; v++) {
                V p = VEXPN(VSUB(acc[t][v], mu[v]));
                sum[v] = VADD(sum[v], p);
                VSTORE(st + (kk + t) * QB + v * VW, p);
            }
    return raised;
}

/* O^T[c][lanes] = O^T * alpha + sum_kk V[jb+kk][c] * P^T[kk][lanes] for
 * cn value columns starting at c0. */
static inline ALWAYS TGT void FN(pv_tile)(float *ot, const float *st, int nk,
                                          const float *v, int64_t vs, int cn,
                                          const V alpha[QV], int v0)
{
    V acc[CN][QV];
    UNROLL for (int c = 0; c < CN; c++)
        UNROLL for (int q = 0; q < QV; q++)
            acc[c][q] = c < cn ? VMUL(VLOAD(ot + c * QB + q * VW), alpha[q]) : VZERO();
    for (int kk = 0; kk < nk; kk++) {
        V p[QV];
        UNROLL for (int q = 0; q < QV; q++) p[q] = q >= v0 ? VLOAD(st + kk * QB + q * VW) : VZERO();
        const float *vr = v + kk * vs;
        UNROLL for (int c = 0; c < CN; c++) {
            if (c < cn) {
                V b = VSET1(vr[c]);
                UNROLL for (int q = 0; q < QV; q++)
                    if (q >= v0) acc[c][q] = VFMA(b, p[q], acc[c][q]);
            }
        }
    }
    UNROLL for (int c = 0; c < CN; c++)
        if (c < cn)
            UNROLL for (int q = 0; q < QV; q++) VSTORE(ot + c * QB + q * VW, acc[c][q]);
}

/* All dv value columns of O^T for nk keys of P^T (see pv_tile), query
 * vectors v0.. only: the others' P is zero there (causal). */
static inline ALWAYS TGT void FN(pv_cols)(float *ot, const float *st, int nk, const float *v,
                                          int64_t vs, int64_t dv, const V alpha[QV], int v0)
{
#define PV_COLS(V0)                                                                        \
    do {                                                                                   \
        int64_t c0 = 0;                                                                    \
        for (; c0 + CN <= dv; c0 += CN)                                                    \
            FN(pv_tile)(ot + c0 * QB, st, nk, v + c0, vs, CN, alpha, V0);                  \
        if (c0 < dv) FN(pv_tile)(ot + c0 * QB, st, nk, v + c0, vs, (int)(dv - c0), alpha, V0); \
    } while (0)
    switch (v0) {
    case 0: PV_COLS(0); break;
    case 1: PV_COLS(1); break;
    case 2: PV_COLS(2); break;
    default: PV_COLS(3); break;
    }
#undef PV_COLS
}

/* Writes a tile of P^T (nk keys x QB lanes) into the weight rows as P:
 * VW x VW blocks transposed in registers, then row stores. w is row i0's
 * first visible key; only nr rows and nk keys are written. With stream set,
 * aligned full vectors bypass the cache (non-temporal): the weights of a
 * long row are far more than the caches hold, and a normal store would
 * first read each line from memory only to overwrite it. */
static inline ALWAYS TGT void FN(store_t)(const float *st, int nk, float *w, int64_t ws, int64_t nr,
                                          int stream)
{
    for (int kk0 = 0; kk0 < nk; kk0 += VW) {
        int n = nk - kk0 < VW ? nk - kk0 : VW;
        VM tm = VTAILMASK(n == VW ? 0 : n);
        UNROLL for (int q = 0; q < QV; q++) {
            if (q * VW >= nr) break;
            V r[VW];
            UNROLL for (int t = 0; t < VW; t++)
                r[t] = t < n ? VLOAD(st + (kk0 + t) * QB + q * VW) : VZERO();
            VTRANSPOSE(r);
            for (int t = 0; t < VW && q * VW + t < nr; t++) {
                float *dst = w + (q * VW + t) * ws + kk0;
                if (n == VW) {
                    if (stream && ((uintptr_t)dst & (VW * sizeof(float) - 1)) == 0) VSTREAM(dst, r[t]);
                    else VSTORE(dst, r[t]);
                } else {
                    VSTOREM(dst, tm, r[t]);
                }
            }
        }
    }
}

/* One query block: the online-softmax loop over key blocks. Scratch: qt
 * (d x QB), st (BK x QB), ot (dv x QB), and with weights mb (one QB row per
 * key block) and pb (QB x lk, when lk <= STAGE_LK). With weights, each
 * block's P (relative to the running max then) goes to the weight rows, its
 * max to mb; one pass at the end rescales each block by
 * exp(max then - final max) / sum. For rows that fit, P is staged in pb and
 * that last pass writes the weights once from it (non-temporal): the
 * caller's buffer is touched once, not written, read back and written
 * again. */
static TGT void FN(sdpa_block_flash)(const attn_sdpa_job *j, int64_t i0, int64_t nr,
                                     float *qt, float *st, float *ot, float *mb, float *pb)
{
    FN(pack_t)(j->q + i0 * j->q_stride, j->q_stride, j->d, nr, qt);
    {
        /* scale q once here rather than every score of every key block */
        V sc = VSET1(j->scale);
        for (int64_t p = 0; p < j->d; p++)
            UNROLL for (int q = 0; q < QV; q++)
                VSTORE(qt + p * QB + q * VW, VMUL(VLOAD(qt + p * QB + q * VW), sc));
    }
    memset(ot, 0, (size_t)j->dv * QB * sizeof(float));
    V m[QV], l[QV];
    UNROLL for (int q = 0; q < QV; q++) { m[q] = VSET1(-INFINITY); l[q] = VZERO(); }
    int64_t klo, khi;
    FN(key_range)(j, i0, nr, &klo, &khi);
    /* stream the weights once rows are long enough that caching them
     * costs more (a line read before each overwrite) than it saves;
     * measured on Zen 5: a loss at lk = 256, a gain from 512 */
    int stream = j->w && j->lk >= 512;
    int staged = j->w && j->lk <= STAGE_LK;
    float *wdst = staged ? pb : j->w ? j->w + i0 * j->w_stride : NULL;
    int64_t wds = staged ? j->lk : j->w_stride;
    /* the first block takes its exact max (two passes over its scores);
     * later ones exponentiate against it lazily, unless the last raised */
    int lazy = 0;
    for (int64_t jb = klo; jb < khi; jb += BK) {
        int nk = khi - jb < BK ? (int)(khi - jb) : BK;
        V alpha[QV], mu[QV], sum[QV];
        UNROLL for (int q = 0; q < QV; q++) sum[q] = VZERO();
        if (lazy) {
            /* exponentiate each tile while still in registers (lazy_tile) */
            UNROLL for (int q = 0; q < QV; q++) {
                mu[q] = VSEL(VISNINF(m[q]), VZERO(), m[q]);
                alpha[q] = VSET1(1.0f);
            }
            int kk = 0, raised = 0;
            for (; kk + KN <= nk; kk += KN)
                raised += FN(lazy_tile)(j, qt, i0, jb, kk, KN, st, m, mu, alpha, sum);
            if (kk < nk) raised += FN(lazy_tile)(j, qt, i0, jb, kk, nk - kk, st, m, mu, alpha, sum);
            /* a raise costs a pass over the block so far: where the row
             * maxima still climb (widely spread scores), the two-pass form
             * of the next block is cheaper */
            lazy = raised == 0;
        } else {
            /* two passes: the block's exact max, then the exponentials (the
             * only way with a mask or bias, which change scores after the
             * tiles' maxima) */
            V bm[QV];
            UNROLL for (int q = 0; q < QV; q++) bm[q] = m[q];
            for (int kk = 0; kk < nk; kk += KN) {
                int kn = nk - kk < KN ? nk - kk : KN;
                FN(score_tile)(j, qt, i0, nr, jb + kk, kn, st + kk * QB, bm);
            }
            UNROLL for (int q = 0; q < QV; q++) bm[q] = m[q];
            for (int kk = 0; kk < nk; kk++)
                UNROLL for (int q = 0; q < QV; q++) bm[q] = VMAX(bm[q], VLOAD(st + kk * QB + q * VW));
            UNROLL for (int q = 0; q < QV; q++) {
                /* a row with nothing allowed yet keeps max -inf: subtract 0
                 * instead, so exp gives 0 rather than NaN */
                mu[q] = VSEL(VISNINF(bm[q]), VZERO(), bm[q]);
                alpha[q] = VEXPN(VSUB(m[q], mu[q]));
                m[q] = bm[q];
            }
            for (int kk = 0; kk < nk; kk++)
                UNROLL for (int q = 0; q < QV; q++) {
                    V p = VEXPN(VSUB(VLOAD(st + kk * QB + q * VW), mu[q]));
                    sum[q] = VADD(sum[q], p);
                    VSTORE(st + kk * QB + q * VW, p);
                }
            lazy = !j->mask && !j->bias;
        }
        UNROLL for (int q = 0; q < QV; q++) l[q] = VFMA(l[q], alpha[q], sum[q]);
        if (j->w) {
            int64_t blk = (jb - klo) / BK;
            UNROLL for (int q = 0; q < QV; q++) VSTORE(mb + blk * QB + q * VW, m[q]);
            FN(store_t)(st, nk, wdst + jb, wds, nr, stream && !staged);
        }
        const float *vb = j->v + jb * j->v_stride;
        if (!j->causal || jb + nk <= i0 + VW) {
            FN(pv_cols)(ot, st, nk, vb, j->v_stride, j->dv, alpha, 0);
        } else {
            /* keys on the diagonal: in runs of VW, each run skipping the
             * query vectors that see none of it; alpha only on the first */
            V one[QV];
            UNROLL for (int q = 0; q < QV; q++) one[q] = VSET1(1.0f);
            for (int s0 = 0; s0 < nk;) {
                int64_t key = jb + s0;
                int v0 = key - i0 < VW ? 0 : (int)((key - i0) / VW);
                if (v0 >= QV) v0 = QV - 1; /* cannot happen: key_range stops at the last row */
                int64_t e = i0 + (int64_t)(v0 + 1) * VW - jb;
                int s1 = e > nk || v0 == QV - 1 ? nk : (int)e;
                FN(pv_cols)(ot, st + s0 * QB, s1 - s0, vb + s0 * j->v_stride, j->v_stride, j->dv,
                            s0 == 0 ? alpha : one, v0);
                s0 = s1;
            }
        }
    }
    float inv[QB];
    UNROLL for (int q = 0; q < QV; q++) {
        V pos = VSEL(VGTZERO(l[q]), l[q], VSET1(1.0f));
        VSTORE(inv + q * VW, VSEL(VGTZERO(l[q]), VDIV(VSET1(1.0f), pos), VZERO()));
    }
    /* O^T has the tile layout (columns x lanes): scale, then transpose out */
    for (int64_t c = 0; c < j->dv; c++)
        UNROLL for (int q = 0; q < QV; q++)
            VSTORE(ot + c * QB + q * VW, VMUL(VLOAD(ot + c * QB + q * VW), VLOAD(inv + q * VW)));
    for (int64_t c = 0; c < j->dv; c += BK) {
        int n = j->dv - c < BK ? (int)(j->dv - c) : BK;
        FN(store_t)(ot + c * QB, n, j->o + i0 * j->o_stride + c, j->o_stride, nr, 0);
    }
    if (!j->w) return;
    if (stream && !staged) VSFENCE(); /* non-temporal stores are weakly ordered */
    int64_t nblk = (khi - klo + BK - 1) / BK;
    UNROLL for (int q = 0; q < QV; q++) {
        V mf = VSEL(VISNINF(m[q]), VZERO(), m[q]), iv = VLOAD(inv + q * VW);
        for (int64_t b = 0; b < nblk; b++) {
            /* a block seen while the row had no allowed key holds only zeros */
            V mbv = VLOAD(mb + b * QB + q * VW);
            V f = VSEL(VISNINF(mbv), VZERO(), VMUL(VEXPN(VSUB(mbv, mf)), iv));
            VSTORE(mb + b * QB + q * VW, f);
        }
    }
    for (int64_t r = 0; r < nr; r++) {
        float *wr = j->w + (i0 + r) * j->w_stride;
        const float *src = wdst + r * wds;
        for (int64_t t = 0; t < klo; t++) wr[t] = 0.0f;
        for (int64_t t = khi; t < j->lk; t++) wr[t] = 0.0f;
        for (int64_t b = 0; b < nblk; b++) {
            int64_t at = klo + b * BK;
            int64_t n = khi - at < BK ? khi - at : BK;
            V f = VSET1(mb[b * QB + r]);
            int64_t t = 0;
            if (staged && stream) {
                /* unaligned head, then whole vectors straight to memory */
                while (t < n && ((uintptr_t)(wr + at + t) & (VW * sizeof(float) - 1)) != 0) {
                    wr[at + t] = src[at + t] * mb[b * QB + r];
                    t++;
                }
                for (; t + VW <= n; t += VW) VSTREAM(wr + at + t, VMUL(VLOAD(src + at + t), f));
            } else {
                for (; t + VW <= n; t += VW) VSTORE(wr + at + t, VMUL(VLOAD(src + at + t), f));
            }
            if (t < n) {
                VM tm = VTAILMASK((int)(n - t));
                VSTOREM(wr + at + t, tm, VMUL(VLOADM(src + at + t, tm), f));
            }
        }
    }
    if (stream && staged) VSFENCE();
}

/* Decode-sized query blocks (a few rows): one row at a time along d and dv,
 * online softmax over key chunks of BK, no padding to QB rows. */
static TGT void FN(sdpa_rows)(const attn_sdpa_job *j, int64_t i0, int64_t nr, float *sc, float *acc)
{
    VM dm = VTAILMASK((int)(j->d % VW)), vm = VTAILMASK((int)(j->dv % VW));
    int64_t df = j->d - j->d % VW, vf = j->dv - j->dv % VW;
    for (int64_t i = i0; i < i0 + nr; i++) {
        const float *q = j->q + i * j->q_stride;
        float m = -INFINITY, l = 0.0f;
        memset(acc, 0, (size_t)(vf + VW) * sizeof(float));
        int64_t klo, khi;
        FN(key_range)(j, i, 1, &klo, &khi);
        for (int64_t jb = klo; jb < khi; jb += BK) {
            int nk = khi - jb < BK ? (int)(khi - jb) : BK;
            float bm = m;
            for (int kk = 0; kk < nk; kk++) {
                int64_t t = jb + kk;
                if ((j->key_mask && !j->key_mask[t]) || (j->mask && !j->mask[i * j->mask_stride + t]) ||
                    (j->window >= 0 && (t - i > j->window || i - t > j->window)) || (j->causal && t > i)) {
                    sc[kk] = -INFINITY;
                    continue;
                }
                const float *k = j->k + t * j->k_stride;
                V s = VZERO();
                for (int64_t p = 0; p < df; p += VW) s = VFMA(VLOAD(q + p), VLOAD(k + p), s);
                if (df < j->d) s = VFMA(VLOADM(q + df, dm), VLOADM(k + df, dm), s);
                float x = VHSUM(s) * j->scale;
                if (j->bias) x += j->bias[i * j->bias_stride + t];
                sc[kk] = x;
                if (x > bm) bm = x;
            }
            float mu = bm == -INFINITY ? 0.0f : bm;
            float alpha_s[VW], psum = 0.0f;
            {
                V e = VEXP(VSUB(VSET1(m), VSET1(mu)));
                VSTORE(alpha_s, e);
            }
            int kk = 0;
            for (; kk + VW <= nk; kk += VW) {
                V p = VEXP(VSUB(VLOAD(sc + kk), VSET1(mu)));
                VSTORE(sc + kk, p);
            }
            if (kk < nk) {
                VM km = VTAILMASK(nk - kk);
                VSTOREM(sc + kk, km, VEXP(VSUB(VLOADM(sc + kk, km), VSET1(mu))));
            }
            for (kk = 0; kk < nk; kk++) psum += sc[kk];
            V alpha = VSET1(alpha_s[0]);
            for (int64_t c = 0; c < vf + VW; c += VW) VSTORE(acc + c, VMUL(VLOAD(acc + c), alpha));
            for (kk = 0; kk < nk; kk++) {
                if (sc[kk] == 0.0f) continue;
                const float *vr = j->v + (jb + kk) * j->v_stride;
                V p = VSET1(sc[kk]);
                int64_t c = 0;
                for (; c < vf; c += VW) VSTORE(acc + c, VFMA(p, VLOAD(vr + c), VLOAD(acc + c)));
                if (vf < j->dv) VSTORE(acc + c, VFMA(p, VLOADM(vr + c, vm), VLOAD(acc + c)));
            }
            l = l * alpha_s[0] + psum;
            m = bm;
        }
        float inv = l > 0.0f ? 1.0f / l : 0.0f;
        float *o = j->o + i * j->o_stride;
        for (int64_t c = 0; c < j->dv; c++) o[c] = acc[c] * inv;
    }
}

static TGT void FN(sdpa_task)(void *arg, int64_t task, int worker)
{
    const FN(sdpa_args) *s = arg;
    size_t lo = 0, hi = s->n; /* the job whose task range holds task */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (s->first[mid] <= task) lo = mid; else hi = mid;
    }
    const attn_sdpa_job *j = &s->jobs[lo];
    int64_t nb = s->first[lo + 1] - s->first[lo];
    int64_t b = task - s->first[lo];
    if (j->causal) b = nb - 1 - b; /* the longest blocks first, to balance */
    float *scr = s->scratch + (size_t)worker * s->per_worker;
    if (j->lq < QB / 4 && !j->w) {
        int64_t i0 = b * (QB / 4);
        int64_t nr = j->lq - i0 < QB / 4 ? j->lq - i0 : QB / 4;
        FN(sdpa_rows)(j, i0, nr, scr, scr + BK);
        return;
    }
    int64_t i0 = b * QB, nr = j->lq - i0 < QB ? j->lq - i0 : QB;
    float *qt = scr, *st = qt + (size_t)s->maxd * QB, *ot = st + (size_t)BK * QB;
    float *mb = ot + (size_t)s->maxd * QB;
    FN(sdpa_block_flash)(j, i0, nr, qt, st, ot, mb, mb + (size_t)(s->maxblk + 1) * QB);
}

static TGT int FN(sdpa_run)(const attn_sdpa_job *jobs, size_t n, int threads)
{
    if (n == 0) return 0;
    int64_t *first = malloc((n + 1) * sizeof *first);
    if (!first) return -1;
    int64_t maxd = 1, maxblk = 0, maxstage = 0;
    double work = 0;
    first[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const attn_sdpa_job *j = &jobs[i];
        int64_t rows = j->lq < QB / 4 && !j->w ? QB / 4 : QB;
        first[i + 1] = first[i] + (j->lq + rows - 1) / rows;
        if (j->d > maxd) maxd = j->d;
        if (j->dv > maxd) maxd = j->dv;
        if (j->w && (j->lk + BK - 1) / BK > maxblk) maxblk = (j->lk + BK - 1) / BK;
        if (j->w && j->lk <= STAGE_LK && j->lk > maxstage) maxstage = j->lk;
        work += (double)j->lq * (double)j->lk * (double)(j->d + j->dv);
    }
    if (work < 2e5) threads = 1;
    if (threads < 1) threads = 1;
    FN(sdpa_args) a = {jobs, first, n, NULL, 0, maxd, maxblk};
    /* qt + st + ot (+ mb + pb) per worker; the row path needs less than
     * that. The sizes are bounded by buffers the caller holds (and pb by
     * STAGE_LK), so they fit. Rounded to whole cache lines. */
    a.per_worker = (size_t)(2 * maxd + BK + VW + maxblk + 1 + maxstage) * QB;
    a.scratch = aligned_alloc(64, ((size_t)threads * a.per_worker * sizeof(float) + 63) / 64 * 64);
    if (!a.scratch) { free(first); return -1; }
    attn_pool_run(threads, first[n], FN(sdpa_task), &a);
    free(a.scratch);
    free(first);
    return 0;
}
