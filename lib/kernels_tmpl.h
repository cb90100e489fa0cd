/* kernels_tmpl.h - the projection GEMM and the scaled-dot-product core,
 * written once over the vector vocabulary (simd_generic.h says what each
 * word means); kernels_avx512.c, kernels_avx512bf16.c, kernels_avx2.c and
 * kernels_generic.c each include it after their vocabulary and simd_math.h.
 *
 * Every function is written under its base name (grep and ctags find
 * `sdpa_block_flash`); the defines below make each one's symbol
 * attn_<name>_<isa> (attn_sdpa_block_flash_avx512), so profiles and
 * debuggers tell the variants apart. No function allocates: the entry
 * points take their scratch from the caller, sized by gemm_scratch_bytes
 * and sdpa_scratch_bytes.
 *
 * Scaled-dot attention is FlashAttention's loop (Dao et al. 2022, and the
 * online softmax of Milakov & Gimelshein 2018) arranged "transposed": a
 * score tile holds S^T, keys along rows and queries along the vector
 * lanes, computed as K * Q^T with Q^T packed once per query block and K
 * read in place (one broadcast per key element, no K panel to pack). In
 * that layout the running max, the rescale factor and the sum are all
 * per-lane, so the online softmax needs no horizontal operation, and the
 * output O^T += V^T P^T again broadcasts straight from V's rows. */

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define kq_tile ISA_NAME(kq_tile)
#define pack_t ISA_NAME(pack_t)
#define gemm_task_a ISA_NAME(gemm_task_a)
#define gemm_task_b ISA_NAME(gemm_task_b)
#define gemm_dots ISA_NAME(gemm_dots)
#define gemm_rows ISA_NAME(gemm_rows)
#define gemm_row_block ISA_NAME(gemm_row_block)
#define gemm_rows_task ISA_NAME(gemm_rows_task)
#define gemm_split ISA_NAME(gemm_split)
#define gemm_worker_floats ISA_NAME(gemm_worker_floats)
#define gemm_scratch_bytes ISA_NAME(gemm_scratch_bytes)
#define gemm_nt ISA_NAME(gemm_nt)
#define gemm_packed_floats ISA_NAME(gemm_packed_floats)
#define gemm_pack ISA_NAME(gemm_pack)
#define band_of ISA_NAME(band_of)
#define key_range ISA_NAME(key_range)
#define first_vector ISA_NAME(first_vector)
#define score_terms ISA_NAME(score_terms)
#define score_consts_of ISA_NAME(score_consts_of)
#define decode_fix ISA_NAME(decode_fix)
#define score_regs ISA_NAME(score_regs)
#define score_fix ISA_NAME(score_fix)
#define scores_termed ISA_NAME(scores_termed)
#define scores_fixed ISA_NAME(scores_fixed)
#define score_store ISA_NAME(score_store)
#define score_tile ISA_NAME(score_tile)
#define lazy_raise ISA_NAME(lazy_raise)
#define lazy_exp ISA_NAME(lazy_exp)
#define lazy_start ISA_NAME(lazy_start)
#define lazy_tile ISA_NAME(lazy_tile)
#define pv_acc_zero ISA_NAME(pv_acc_zero)
#define pv_acc_store ISA_NAME(pv_acc_store)
#define pv_tile ISA_NAME(pv_tile)
#define pv_cols ISA_NAME(pv_cols)
#define store_t ISA_NAME(store_t)
#define store_t_by ISA_NAME(store_t_by)
#define flash_pack_q ISA_NAME(flash_pack_q)
#define flash_block_lazy ISA_NAME(flash_block_lazy)
#define flash_block_deferred ISA_NAME(flash_block_deferred)
#define pend_row ISA_NAME(pend_row)
#define flash_block_exact ISA_NAME(flash_block_exact)
#define flash_block_pv ISA_NAME(flash_block_pv)
#define flash_store_o ISA_NAME(flash_store_o)
#define row_inv ISA_NAME(row_inv)
#define lse_store ISA_NAME(lse_store)
#define flash_weight_row ISA_NAME(flash_weight_row)
#define flash_weights ISA_NAME(flash_weights)
#define sdpa_block_flash ISA_NAME(sdpa_block_flash)
#define decode_scores ISA_NAME(decode_scores)
#define dot_lanes ISA_NAME(dot_lanes)
#define decode_dot ISA_NAME(decode_dot)
#define decode_dots ISA_NAME(decode_dots)
#define decode_rope_q ISA_NAME(decode_rope_q)
#define decode_rope_block ISA_NAME(decode_rope_block)
#define rope_apply ISA_NAME(rope_apply)
#define softcap_apply ISA_NAME(softcap_apply)
#define rope_rows ISA_NAME(rope_rows)
#define decode_block ISA_NAME(decode_block)
#define decode_weights ISA_NAME(decode_weights)
#define sdpa_rows ISA_NAME(sdpa_rows)
#define sdpa_part_floats ISA_NAME(sdpa_part_floats)
#define sdpa_work ISA_NAME(sdpa_work)
#define split_parts ISA_NAME(split_parts)
#define split_row_floats ISA_NAME(split_row_floats)
#define split_range ISA_NAME(split_range)
#define split_join ISA_NAME(split_join)
#define sdpa_rows_part ISA_NAME(sdpa_rows_part)
#define row_finish ISA_NAME(row_finish)
#define row_keys ISA_NAME(row_keys)
#define row_query ISA_NAME(row_query)
#define task_block ISA_NAME(task_block)
#define sdpa_task ISA_NAME(sdpa_task)
#define flash_chain ISA_NAME(flash_chain)
#define chains ISA_NAME(chains)
#define weights_write ISA_NAME(weights_write)
#define weight_factors ISA_NAME(weight_factors)
#define sdpa_plan ISA_NAME(sdpa_plan)
#define sdpa_scratch_bytes ISA_NAME(sdpa_scratch_bytes)
#define sdpa_run ISA_NAME(sdpa_run)
#define sdpa_bf16_carve ISA_NAME(sdpa_bf16_carve)
#define sdpa_bf16_bytes ISA_NAME(sdpa_bf16_bytes)
#define bf16_task ISA_NAME(bf16_task)
#define sdpa_by_rows ISA_NAME(sdpa_by_rows)
#define row_at ISA_NAME(row_at)

#define QB (QV * VW) /* query rows per block */
#define BK 96        /* keys per block: the score tile S^T is BK x QB floats (L1) */
/* Keys a decode row turns by the relative rows of rope_rel (all 32 of them). */
#define ROPE_RUN 32
/* Bytes between the software prefetches of a decode row's value rows: every
 * other cache line, the hardware fetching each one's neighbour. */
#define PF_STEP 128

/* Rows up to this many keys stage a query block's weights in scratch (QB x
 * lk floats, within L2) rather than in the caller's buffer; see
 * sdpa_block_flash. */
#define STAGE_LK 4096
/* Keys of a staged row's blocks in pb: whole blocks of BK. */
#define STAGE_KEYS(lk) (((lk) + BK - 1) / BK * BK)
/* Rows of A from which gemm_nt packs B once per column panel (C stored
 * as rows) rather than A once per row block (C stored transposed): below
 * it, packing all of B costs more than the transposed stores save
 * (measured on Zen 5 at k = 512: m = 128 favours A, m = 512 favours B;
 * with AVX2 at m = 32, A by 1.2x). A vocabulary may set its own. */
#ifndef GEMM_PACK_B
#define GEMM_PACK_B (4 * QB)
#endif
/* Columns of B a one-row block of gemm_dots takes (gemm_row_block): 16
 * sums fill a 16-lane vector; no block is wider. */
#define GEMV_COLS (VW > 8 ? 16 : 8)
#define UNROLL _Pragma("GCC unroll 16")
#define ALWAYS __attribute__((always_inline))
#define NOINLINE __attribute__((noinline))
/* Scratch is handed out in whole cache lines (64 bytes, 16 floats). */
#define LINE_FLOATS 16
#define LINES(nf) (((nf) + LINE_FLOATS - 1) / LINE_FLOATS * LINE_FLOATS)

/* ------------------------------------------------------------ tiles */

/* Steps of d between the key rows of a pending tile that kq_tile
 * exponentiates among its products (see flash_block_lazy): 8 spreads a
 * 6-key tile over the first 48 of d = 64 (4 and 16 measured no better). */
#define PEND_STEP 8
/* Whether the vocabulary has the registers for it (simd_avx512.h); where
 * it has, the CPU decides (attn_kernels_defer_exp). */
#ifndef DEFER_EXP
#define DEFER_EXP 0
#endif

/* The softmax's sums go tile by tile: a tile's KN values of P summed in
 * ts from zero, then ts added into sum and zeroed (tile_fold). A key
 * block's BK values in one chain add a rounding error of float32 order
 * per key to the row's divisor; in KN-key parts the chain is KN + BK / KN
 * long. The output's RMS error against float64 at
 * L = 128 (bench/bf16_error.py's inputs, ten seeds): 3.28e-7 in one
 * chain, 3.11e-7 in parts, 2.93e-7 with PV_RUN as well; PyTorch 3.09e-7. */
static inline ALWAYS TGT void tile_fold(V sum[QV], V ts[QV])
{
    UNROLL for (int v = 0; v < QV; v++) {
        sum[v] = VADD(sum[v], ts[v]);
        ts[v] = VZERO();
    }
}

/* Key row t of a pending tile of scores at row: P = e^(S - mu) in place,
 * summed into ts (and ts into sum after the last row), as lazy_exp does. */
static inline ALWAYS TGT void pend_row(float *row, int t, const V mu[QV], V sum[QV], V ts[QV])
{
    UNROLL for (int v = 0; v < QV; v++) {
        float *x = row + t * QB + v * VW;
        V p = VEXP(VSUB(VLOAD(x), mu[v]));
        ts[v] = VADD(ts[v], p);
        VSTORE(x, p);
    }
    if (t == KN - 1) tile_fold(sum, ts);
}

/* acc[kk][v] = sum_p k[kk][p] * qt[p][v]: kn keys (rows of k, stride ks)
 * against one packed block qt (d x QB) of query rows. Vectors v < v0 are
 * left zero (causal tiles whose first rows see none of these keys); pass
 * constants for kn and v0 so the loops unroll without branches. With
 * pend (else NULL), the KN key rows of the tile before, raw scores, are
 * exponentiated against mu into sum on the way (pend_row), one after each
 * PEND_STEP steps of d and any left at the end: the exponentials'
 * instructions then run in the cycles the products leave idle, rather
 * than in a burst of their own. */
static inline ALWAYS TGT void kq_tile(const float *qt, int64_t d,
                                          const float *k, int64_t ks,
                                          int kn, int v0, V acc[KN][QV],
                                          float *pend, const V *mu, V *sum)
{
    int t = pend ? 0 : KN;
    V ts[QV] = {0};
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
        if ((p & (PEND_STEP - 1)) == PEND_STEP - 1 && t < KN) pend_row(pend, t++, mu, sum, ts);
    }
    for (; t < KN; t++) pend_row(pend, t, mu, sum, ts);
}

/* Packs rows [i0, i0+n) of x (stride xs, width d) as x^T times sc: d x
 * QB, zero rows past n, so every tile computes on full vectors. VW x VW
 * blocks go through a register transpose; partial blocks use masked
 * loads. */
static TGT void pack_t(const float *x, int64_t xs, int64_t d, int64_t n, float sc, float *xt)
{
    V scv = VSET1(sc);
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
            UNROLL for (int t = 0; t < VW; t++) /* unrolled, so r stays in registers */
                if (t < cols) VSTORE(xt + (p0 + t) * QB + r0, sc == 1.0f ? r[t] : VMUL(r[t], scv));
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
    int64_t cg, cgs; /* C's columns in groups of cg (0: one group), each group at c + t cgs */
    int64_t jc;      /* gemm_rows_task: the first column of its part */
    int64_t ncols;   /* gemm_rows_task, gemm_task_a: columns per task */
    int64_t nctask;  /* gemm_task_a: column tasks per row block */
    int64_t npanels; /* gemm_task_b: panels of QB columns */
    int64_t rows;    /* gemm_task_b: rows of C per task (a multiple of KN) */
    float *scratch;  /* per worker: gemm_worker_floats(k) */
    const float *bp; /* gemm_task_b: B packed whole (gemm_pack), or NULL */
} gemm_args;

/* Where C[i][j] goes: row i of column j's group (gemm_nt). */
static inline ALWAYS float *c_at(const gemm_args *g, int64_t i, int64_t j)
{
    j += g->jc;
    if (!g->cg) return g->c + i * g->ldc + j;
    return g->c + j / g->cg * g->cgs + i * g->ldc + j % g->cg;
}

/* Floats of packing space one worker needs: a k x QB panel. */
static size_t gemm_worker_floats(int64_t k)
{
    return LINES((size_t)(k > 0 ? k : 1) * QB);
}

/* Floats of B (n x k) packed whole: ceil(n / QB) panels as gemm_task_b
 * packs each (gemm_worker_floats). */
static size_t gemm_packed_floats(int64_t n, int64_t k)
{
    return (size_t)((n + QB - 1) / QB) * gemm_worker_floats(k);
}

/* Every panel of B (n x k, stride ldb) into bp, each as gemm_task_b packs
 * its own (pack_t: B^T, zero columns past n), so that a product from bp
 * has the bits of one that packs as it goes. */
static TGT void gemm_pack(int64_t n, int64_t k, const float *b, int64_t ldb, float *bp)
{
    for (int64_t p = 0; p < (n + QB - 1) / QB; p++) {
        int64_t j0 = p * QB, nc = n - j0 < QB ? n - j0 : QB;
        pack_t(b + j0 * ldb, ldb, k, nc, 1.0f, bp + (size_t)p * gemm_worker_floats(k));
    }
}

/* One task for short A (m below GEMM_PACK_B rows): rows [i0, i0+QB) of A
 * packed as A^T, against a range of columns of B read in place. C^T tiles
 * come out of kq_tile (columns along rows, rows along lanes) and are
 * stored transposed; with k in the hundreds that store is a few percent of
 * the work, less than packing all of B would cost for so few rows. */
static TGT void gemm_task_a(void *arg, int64_t task, int worker)
{
    const gemm_args *g = arg;
    int64_t ib = task / g->nctask, jt = task % g->nctask;
    int64_t i0 = ib * QB, nr = g->m - i0 < QB ? g->m - i0 : QB;
    int64_t j0 = jt * g->ncols, j1 = j0 + g->ncols < g->n ? j0 + g->ncols : g->n;
    float *at = g->scratch + (size_t)worker * gemm_worker_floats(g->k);
    pack_t(g->a + i0 * g->lda, g->lda, g->k, nr, 1.0f, at);
    float tile[KN * QB];
    for (int64_t j = j0; j < j1; j += KN) {
        int kn = j1 - j < KN ? (int)(j1 - j) : KN;
        V acc[KN][QV];
        if (kn == KN) kq_tile(at, g->k, g->b + j * g->ldb, g->ldb, KN, 0, acc, NULL, NULL, NULL); /* unrolls fully */
        else kq_tile(at, g->k, g->b + j * g->ldb, g->ldb, kn, 0, acc, NULL, NULL, NULL);
        for (int kk = 0; kk < kn; kk++) {
            V bv = VSET1(g->bias ? g->bias[j + kk] : 0.0f);
            UNROLL for (int v = 0; v < QV; v++)
                VSTORE(tile + kk * QB + v * VW, VADD(acc[kk][v], bv));
        }
        for (int64_t r = 0; r < nr; r++)
            for (int kk = 0; kk < kn; kk++) *c_at(g, i0 + r, j + kk) = tile[kk * QB + r];
    }
}

/* One task for long A: a panel of QB columns of C over a range of rows, in the
 * GotoBLAS arrangement (Goto & van de Geijn 2008): the panel of B is packed
 * once as B^T (k x QB, the layout of a query block's Q^T, so pack_t and
 * kq_tile serve both), then KN rows of A at a time are broadcast against it
 * in a KN x QB register tile that is already a block of C's rows: stored as
 * row vectors with the bias added, no transpose. */
static TGT void gemm_task_b(void *arg, int64_t task, int worker)
{
    const gemm_args *g = arg;
    int64_t jp = task % g->npanels, rc = task / g->npanels;
    int64_t j0 = jp * QB, nc = g->n - j0 < QB ? g->n - j0 : QB;
    int64_t r0 = rc * g->rows, r1 = g->m - r0 < g->rows ? g->m : r0 + g->rows;
    const float *bt = g->bp ? g->bp + (size_t)jp * gemm_worker_floats(g->k) : NULL;
    if (!bt) {
        float *own = g->scratch + (size_t)worker * gemm_worker_floats(g->k);
        pack_t(g->b + j0 * g->ldb, g->ldb, g->k, nc, 1.0f, own);
        bt = own;
    }
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
    /* a panel within one group of C's columns is rows of ldc there */
    int whole = !g->cg || j0 / g->cg == (j0 + nc - 1) / g->cg;
    for (int64_t i = r0; i < r1; i += KN) {
        int kn = r1 - i < KN ? (int)(r1 - i) : KN;
        V acc[KN][QV];
        const float *ar = g->a + i * g->lda;
        if (kn == KN) kq_tile(bt, g->k, ar, g->lda, KN, 0, acc, NULL, NULL, NULL); /* constant: unrolls fully */
        else kq_tile(bt, g->k, ar, g->lda, kn, 0, acc, NULL, NULL, NULL);
        for (int r = 0; r < kn; r++) {
            float *crow = c_at(g, i + r, j0);
            if (!whole) {
                float row[QB];
                UNROLL for (int v = 0; v < QV; v++) VSTORE(row + v * VW, VADD(acc[r][v], bias[v]));
                for (int64_t c = 0; c < nc; c++) *c_at(g, i + r, j0 + c) = row[c];
            } else if (nc == QB) {
                UNROLL for (int v = 0; v < QV; v++) VSTORE(crow + v * VW, VADD(acc[r][v], bias[v]));
            } else {
                UNROLL for (int v = 0; v < QV; v++)
                    if (lanes[v]) VSTOREM(crow + v * VW, tm[v], VADD(acc[r][v], bias[v]));
            }
        }
    }
}

/* C[i0+r][j0+c] for r < RI, c < CJ: RI x CJ dot products along k, each its
 * own chain of FMAs over whole vectors, then a masked tail and a sum across
 * lanes (VW of them at once when the block has a multiple of VW outputs).
 * Every output's arithmetic is the same whatever the block, so any
 * blocking gives the same bits; the block only shares the loads of A and B
 * among the chains, and gives the FMA units independent work. */
static inline ALWAYS TGT void gemm_dots(const gemm_args *g, int64_t i0, int64_t j0, int RI, int CJ)
{
    VM tm = VTAILMASK((int)(g->k % VW));
    int64_t kf = g->k - g->k % VW;
    const float *a = g->a + i0 * g->lda, *b = g->b + j0 * g->ldb;
    V s[4][GEMV_COLS];
    UNROLL for (int r = 0; r < RI; r++)
        UNROLL for (int c = 0; c < CJ; c++) s[r][c] = VZERO();
    for (int64_t p = 0; p < kf; p += VW) {
        V bv[GEMV_COLS];
        UNROLL for (int c = 0; c < CJ; c++) bv[c] = VLOAD(b + c * g->ldb + p);
        UNROLL for (int r = 0; r < RI; r++) {
            V av = VLOAD(a + r * g->lda + p);
            UNROLL for (int c = 0; c < CJ; c++) s[r][c] = VFMA(av, bv[c], s[r][c]);
        }
    }
    if (kf < g->k)
        UNROLL for (int r = 0; r < RI; r++)
            UNROLL for (int c = 0; c < CJ; c++)
                s[r][c] = VFMA(VLOADM(a + r * g->lda + kf, tm), VLOADM(b + c * g->ldb + kf, tm), s[r][c]);
    if ((RI * CJ) % VW) {
        UNROLL for (int r = 0; r < RI; r++)
            UNROLL for (int c = 0; c < CJ; c++)
                *c_at(g, i0 + r, j0 + c) = VHSUM(s[r][c]) + (g->bias ? g->bias[j0 + c] : 0.0f);
        return;
    }
    /* VW sums at a time (VHSUMS: each VHSUM's bits, without its shuffles
     * per vector), outputs in row-major order */
    UNROLL for (int o = 0; o < RI * CJ; o += VW) {
        V grp[VW];
        float sum[VW];
        UNROLL for (int l = 0; l < VW; l++) /* the bound only quiets the compiler */
            grp[l] = o + l < RI * CJ ? s[(o + l) / CJ][(o + l) % CJ] : VZERO();
        VSTORE(sum, VHSUMS(grp));
        UNROLL for (int l = 0; l < VW; l++) {
            int r = (o + l) / CJ, c = (o + l) % CJ;
            if (o + l < RI * CJ)
                *c_at(g, i0 + r, j0 + c) = sum[l] + (g->bias ? g->bias[j0 + c] : 0.0f);
        }
    }
}

/* Rows i0 .. i0 + RI - 1 of C (RI <= 4, a constant once inlined): blocks
 * of RI rows x 4 columns, then single columns; one row goes 16 columns at
 * a time (8 with 8 lanes) and two rows 8, so that the block's sums fill
 * whole vectors and go across lanes together (VHSUMS): a decode step's
 * product, one row against a matrix from L2 or L3, is mostly loads and
 * those sums. */
static inline ALWAYS TGT void gemm_row_block(const gemm_args *g, int64_t i0, int RI)
{
    const int CJ = RI == 1 ? GEMV_COLS : RI == 2 ? 8 : 4;
    int64_t j = 0;
    for (; j + CJ <= g->n; j += CJ) gemm_dots(g, i0, j, RI, CJ);
    for (; j < g->n; j++) gemm_dots(g, i0, j, RI, 1);
}

/* Few rows of A (decode steps, short batches): dot products along k, in
 * blocks of up to 4 rows, so each load of B serves every row of a block
 * (B is read once per 4 rows) and the FMA chains run side by side. */
static TGT void gemm_rows(const gemm_args *g)
{
    int64_t i = 0;
    for (; i + 4 <= g->m; i += 4) gemm_row_block(g, i, 4);
    switch (g->m - i) {
    case 3: gemm_row_block(g, i, 3); break;
    case 2: gemm_row_block(g, i, 2); break;
    case 1: gemm_row_block(g, i, 1); break;
    default: break;
    }
}

static TGT void gemm_rows_task(void *arg, int64_t task, int worker)
{
    (void)worker;
    gemm_args g = *(const gemm_args *)arg;
    int64_t j0 = task * g.ncols;
    g.n = g.n - j0 < g.ncols ? g.n - j0 : g.ncols;
    g.b += j0 * g.ldb;
    g.jc = j0;
    if (g.bias) g.bias += j0;
    gemm_rows(&g);
}

/* Splits the rows of C among tasks for gemm_task_a (m below GEMM_PACK_B) or
 * gemm_task_b, and returns the number of tasks. */
static int64_t gemm_split(gemm_args *g, int threads)
{
    int64_t m = g->m, n = g->n;
    if (m < GEMM_PACK_B) {
        /* Enough tasks for the threads to balance, each wide enough (a
         * multiple of KN) to amortise packing its row block. */
        int64_t nb = (m + QB - 1) / QB, nct = 1;
        while (nb * nct < 4 * threads && n / (nct * 2) >= 4 * KN) nct *= 2;
        g->ncols = (n + nct - 1) / nct;
        g->ncols = (g->ncols + KN - 1) / KN * KN;
        g->nctask = (n + g->ncols - 1) / g->ncols;
        return nb * g->nctask;
    }
    /* Whole column panels per task when there are enough of them for the
     * threads to balance; otherwise row ranges too (each task then packs
     * its panel again, which costs k x QB moves against rows x QB x k
     * multiply-adds, none when B comes packed). */
    g->npanels = (n + QB - 1) / QB;
    int64_t chunks = 1;
    while (g->npanels * chunks < 4 * threads && m / (chunks * 2) >= 8 * KN) chunks *= 2;
    g->rows = (m + chunks - 1) / chunks;
    g->rows = (g->rows + KN - 1) / KN * KN;
    chunks = (m + g->rows - 1) / g->rows;
    return g->npanels * chunks;
}

/* Scratch gemm_nt needs for these shapes on up to `threads` threads: none
 * for the few-row path, else one packing panel per worker. */
static size_t gemm_scratch_bytes(int64_t m, int64_t n, int64_t k, int threads)
{
    if (m < QB / 4 || n <= 0) return 0;
    return (size_t)(threads < 1 ? 1 : threads) * gemm_worker_floats(k) * sizeof(float);
}

/* C = A B^T (+ bias): see attn_gemm_nt_packed (cg, cgs: C's column
 * groups, cg 0 for plain rows). scratch: gemm_scratch_bytes, 64-byte
 * aligned, or NULL for the unpacked path. bp: B packed whole by gemm_pack
 * (this variant's), or NULL; the result has the same bits either way. */
static TGT void gemm_nt(int64_t m, int64_t n, int64_t k,
                        const float *a, int64_t lda,
                        const float *b, int64_t ldb,
                        const float *bias,
                        float *c, int64_t ldc, int64_t cg, int64_t cgs, int threads,
                        void *scratch, const float *bp)
{
    if (m <= 0 || n <= 0) return;
    gemm_args g = {m, n, k, a, lda, b, ldb, bias, c, ldc, cg, cgs, 0, 0, 0, 0, 0, scratch, NULL};
    double flops = 2.0 * (double)m * (double)n * (double)k;
    if (flops < 4e5 || threads < 1) threads = 1;
    if (m < QB / 4 || !scratch) {
        /* Few rows: packing a panel of B would cost as much as using it. */
        g.ncols = threads > 1 ? (n + threads * 4 - 1) / (threads * 4) : n;
        if (g.ncols < 16) g.ncols = 16;
        attn_pool_run(threads, (n + g.ncols - 1) / g.ncols, gemm_rows_task, &g);
        return;
    }
    g.bp = bp; /* read by gemm_task_b alone, whose panels it holds */
    int64_t ntasks = gemm_split(&g, threads);
    attn_pool_run(threads, ntasks, m < GEMM_PACK_B ? gemm_task_a : gemm_task_b, &g);
}

/* ------------------------------------------------------------- sdpa */

/* The lane index of each vector lane, for the per-row terms (ALiBi). */
static const float lane_iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* The band of keys query row i may see under causal and the window:
 * [i' - *lo, i' + *hi] with i' = i + off, a side < 0 unbounded. A side
 * wider than every distance |i' - j| is unbounded too, so no sum of
 * positions below can overflow on hostile values. */
static inline ALWAYS void band_of(const attn_sdpa_job *j, int64_t *lo, int64_t *hi)
{
    int64_t far = 2 * (j->lq + j->lk);
    *lo = j->window_left > far ? -1 : j->window_left;
    *hi = j->causal ? 0 : j->window_right > far ? -1 : j->window_right;
}

/* Keys [lo, hi) that any row of [i0, i0+nr) may see under causal/window. */
static void key_range(const attn_sdpa_job *j, int64_t i0, int64_t nr,
                          int64_t *lo, int64_t *hi)
{
    int64_t bl, br, a = 0, b = j->lk;
    band_of(j, &bl, &br);
    if (br >= 0 && i0 + nr + j->off + br < b) b = i0 + nr + j->off + br;
    if (bl >= 0 && i0 + j->off - bl > a) a = i0 + j->off - bl;
    if (b < 0) b = 0;
    if (a > b) a = b; /* nothing visible: an empty range inside [0, lk] */
    *lo = a;
    *hi = b;
}

/* The first query vector of a block that may see a key t places past the
 * block's first row's last key (under the band's upper side): vector v's
 * last row sees t up to (v+1) VW - 1. */
static inline ALWAYS int vector_past(int64_t t)
{
    int v0 = t >= VW ? (int)(t / VW) : 0;
    return v0 >= QV ? QV - 1 : v0; /* QV - 1 cannot happen: key_range stops at the last row */
}

/* The gap of a job without an upper side: every vector sees every key,
 * however far along a block (vector_past(NO_EDGE + kk) = 0). */
#define NO_EDGE (INT64_MIN / 4)

/* How far key jb lies past the last key row i0 may see under the band's
 * upper side br (NO_EDGE when it has none). */
static inline ALWAYS int64_t upper_gap(const attn_sdpa_job *j, int64_t br, int64_t i0, int64_t jb)
{
    return br >= 0 ? jb - (i0 + j->off + br) : NO_EDGE;
}

/* The first query vector of a block from i0 that may see key jb under the
 * band's upper side br (< 0: none). */
static inline ALWAYS int first_vector(const attn_sdpa_job *j, int64_t br, int64_t i0, int64_t jb)
{
    return vector_past(upper_gap(j, br, i0, jb));
}

/* Softcap and ALiBi of a job, as vectors made once per tile. */
typedef struct {
    int softcap, alibi;
    V inv_cap, lim, nlim, slope, iota;
} score_consts;

static inline ALWAYS TGT score_consts score_consts_of(const attn_sdpa_job *j)
{
    score_consts c;
    c.softcap = j->softcap > 0.0f;
    c.alibi = j->alibi != 0.0f;
    c.inv_cap = VSET1(c.softcap ? 1.0f / j->softcap : 0.0f);
    c.lim = VSET1(SOFTCAP_X * j->softcap);
    c.nlim = VSET1(-SOFTCAP_X * j->softcap);
    c.slope = VSET1(j->alibi);
    c.iota = VLOAD(lane_iota);
    return c;
}

/* Softcap and ALiBi on one vector of scores s, for keys j (lane l: row
 * i' = d + j + l when drow, else key j + l of row i' = d). */
static inline ALWAYS TGT V score_terms(const score_consts *c, V s, float d, int drow)
{
    if (c->softcap) s = VSOFTCAP(s, c->inv_cap, c->lim, c->nlim);
    if (c->alibi) {
        V dist = drow ? VADD(VSET1(d), c->iota) : VSUB(VSET1(d), c->iota);
        s = VFNMA(c->slope, VABS(dist), s);
    }
    return s;
}

/* y[e] = c tanh(x[e] / c) for e < n, c > 0, exactly as score_terms caps
 * a score (the kernel set's softcap, which test_rows checks). */
static TGT void softcap_apply(const float *x, float *y, int64_t n, float c)
{
    V inv_c = VSET1(1.0f / c), lim = VSET1(SOFTCAP_X * c), nlim = VSET1(-SOFTCAP_X * c);
    int64_t e = 0;
    for (; e + VW <= n; e += VW) VSTORE(y + e, VSOFTCAP(VLOAD(x + e), inv_c, lim, nlim));
    if (e < n) {
        VM m = VTAILMASK((int)(n - e));
        VSTOREM(y + e, m, VSOFTCAP(VLOADM(x + e, m), inv_c, lim, nlim));
    }
}

/* Whether score_fix may change scores of the job anywhere, band aside:
 * softcap, ALiBi or a key mask. */
static inline ALWAYS int scores_termed(const attn_sdpa_job *j)
{
    return j->key_mask || j->softcap > 0.0f || j->alibi != 0.0f;
}

/* Whether score_fix may change any score of the job in a vector it sees
 * keys in: a band (causal, window), softcap, ALiBi or a key mask. */
static inline ALWAYS int scores_fixed(const attn_sdpa_job *j)
{
    int64_t bl, br;
    band_of(j, &bl, &br);
    return bl >= 0 || br >= 0 || scores_termed(j);
}

/* Whether every row of the query block from i0 sees keys [jb, jb+n) whole
 * under the band (bl, br of band_of): the upper side binds on the first
 * row, the lower on the last. */
static inline ALWAYS int band_inside(const attn_sdpa_job *j, int64_t bl, int64_t br, int64_t i0,
                                     int64_t jb, int64_t n)
{
    return (br < 0 || jb + n - 1 <= i0 + j->off + br) && (bl < 0 || jb >= i0 + QB - 1 + j->off - bl);
}

/* scores_fixed for keys [jb, jb+n) of the query block from i0 alone: a
 * causal block's keys below its diagonal are left as they are (a staged
 * mask or bias changes every block). */
static inline ALWAYS int block_fixed(const attn_sdpa_job *j, int64_t i0, int64_t jb, int64_t n)
{
    int64_t bl, br;
    band_of(j, &bl, &br);
    return scores_termed(j) || j->term || ((bl >= 0 || br >= 0) && !band_inside(j, bl, br, i0, jb, n));
}

/* A tile of scores acc[kk][lanes] (keys jb..jb+kn-1 against query rows
 * i0.., QB of them, scale applied) through softcap and ALiBi, with
 * causal/window/key_mask applied; vectors before v0 see none of the keys
 * (first_vector) and become -inf outright. */
static inline ALWAYS TGT void score_fix(const attn_sdpa_job *j, int64_t i0, int64_t jb, int kn,
                                        int v0, V acc[KN][QV])
{
    int64_t bl, br;
    band_of(j, &bl, &br);
    V ninf = VSET1(-INFINITY);
    score_consts sc = score_consts_of(j);
    /* a tile every row of the block sees whole (below a causal diagonal,
     * inside a window) needs no band */
    int inside = band_inside(j, bl, br, i0, jb, kn);
    int structural = (bl >= 0 || br >= 0) && !inside, terms = sc.softcap || sc.alibi;
    /* the common tile has nothing to change: returning costs less than a
     * loop that copies each score to itself (2-3% of the core's time) */
    if (!structural && !terms && !j->key_mask && v0 == 0)
        return;
    for (int kk = 0; kk < kn; kk++) {
        int64_t jj = jb + kk;
        int dead = j->key_mask && !j->key_mask[jj];
        UNROLL for (int v = 0; v < QV; v++) {
            /* lane l is row i0 + v*VW + l, at i' = base + l */
            int64_t base = i0 + v * VW + j->off;
            V s = dead || v < v0 ? ninf : acc[kk][v];
            if (terms && !dead && v >= v0) s = score_terms(&sc, s, (float)(base - jj), 1);
            if (structural && !dead && v >= v0) {
                /* allowed lanes form a range: l >= jj - base - br, l <= jj - base + bl;
                 * selected even when whole (no branch to mispredict on the diagonal) */
                int64_t lo = br >= 0 ? jj - base - br : 0, hi = bl >= 0 ? jj - base + bl : VW - 1;
                int l = lo < 0 ? 0 : lo > VW ? VW : (int)lo;
                int h = hi < -1 ? -1 : hi >= VW ? VW - 1 : (int)hi;
                s = VSEL(VLANES(l, h), s, ninf);
            }
            acc[kk][v] = s;
        }
    }
}

/* The explicit mask and bias of query rows i0.. (nr of them) over keys
 * jb.. (nk) as one term a score, in st's order (S^T): term[kk * QB + r]
 * is the bias (0 without one) where the mask allows and -inf where not,
 * 0 for rows past nr. Read a row's VW keys at a time and transposed VW x
 * VW in registers, so that the tiles add it in registers (score_term)
 * where a scalar pass over st, a byte a score, took 3-7 times the
 * products' time. */
static TGT void term_block(const attn_sdpa_job *j, int64_t i0, int64_t nr, int64_t jb, int nk,
                           float *term)
{
    V ninf = VSET1(-INFINITY);
    for (int c0 = 0; c0 < nk; c0 += VW) {
        int n = nk - c0 < VW ? nk - c0 : VW;
        VM tm = VTAILMASK(n == VW ? 0 : n);
        UNROLL for (int q = 0; q < QV; q++) {
            V r[VW];
            for (int l = 0; l < VW; l++) {
                int64_t i = i0 + q * VW + l;
                int live = i < i0 + nr;
                const float *b = live && j->bias ? j->bias + i * j->bias_stride + jb + c0 : NULL;
                if (b && jb + c0 + BK < j->lk) /* the next block's, in time */
                    __builtin_prefetch(b + BK);
                V t = !b ? VZERO() : n == VW ? VLOAD(b) : VLOADM(b, tm);
                if (live && j->mask)
                    t = VSEL(VMASKB(j->mask + i * j->mask_stride + jb + c0, n), t, ninf);
                r[l] = t;
            }
            VTRANSPOSE(r);
            for (int t = 0; t < n; t++) VSTORE(term + (c0 + t) * QB + q * VW, r[t]);
        }
    }
}

/* A tile's scores (keys jb.., kn of them; vectors before v0 -inf) plus
 * the staged term of their block (term_block). */
static inline ALWAYS TGT void score_term(const attn_sdpa_job *j, int64_t jb, int kn, int v0,
                                         V acc[KN][QV])
{
    const float *t = j->term + (jb - j->term_jb) * QB;
    UNROLL for (int kk = 0; kk < KN; kk++)
        UNROLL for (int v = 0; v < QV; v++)
            if (kk < kn && v >= v0) acc[kk][v] = VADD(acc[kk][v], VLOAD(t + kk * QB + v * VW));
}

/* Scores of one tile in registers: acc[kk][lanes] = S^T for keys
 * jb..jb+kn-1 (rows kr, stride ks) and query rows i0.. (QB of them; qt
 * holds them already scaled), through score_fix. Returns the first vector
 * that may see a key of the tile: those before it are -inf. */
static inline ALWAYS TGT int score_regs(const attn_sdpa_job *j, const float *kr, int64_t ks,
                                         const float *qt, int64_t i0, int64_t jb, int kn,
                                         V acc[KN][QV])
{
    int64_t bl, br;
    band_of(j, &bl, &br);
    /* query vectors before v0 see none of keys jb.. (causal, window) */
    int v0 = first_vector(j, br, i0, jb);
    /* a short tile followed by KN - kn more of the job's own key rows (not
     * rope's rotated block) runs as a whole one: the extra rows' scores are
     * made and dropped, cheaper than a tile of run-time size */
    if (kn == KN || (!j->rope && jb + KN <= j->lk)) {
        switch (v0) {
        case 0: kq_tile(qt, j->d, kr, ks, KN, 0, acc, NULL, NULL, NULL); break;
        case 1: kq_tile(qt, j->d, kr, ks, KN, 1, acc, NULL, NULL, NULL); break;
        case 2: kq_tile(qt, j->d, kr, ks, KN, 2, acc, NULL, NULL, NULL); break;
        default: kq_tile(qt, j->d, kr, ks, KN, 3, acc, NULL, NULL, NULL); break;
        }
    } else {
        kq_tile(qt, j->d, kr, ks, kn, v0, acc, NULL, NULL, NULL);
    }
    score_fix(j, i0, jb, kn, v0, acc);
    if (j->term) score_term(j, jb, kn, v0, acc);
    return v0;
}

/* A tile of final register scores into st, folded into the running maxima
 * bm. */
static inline ALWAYS TGT void score_store(int kn, V acc[KN][QV], float *st, V bm[QV])
{
    for (int kk = 0; kk < kn; kk++)
        UNROLL for (int v = 0; v < QV; v++) {
            bm[v] = VMAX(bm[v], acc[kk][v]);
            VSTORE(st + kk * QB + v * VW, acc[kk][v]);
        }
}

/* Scores of one tile into st (score_regs, then score_store). */
static inline ALWAYS TGT void score_tile(const attn_sdpa_job *j, const float *kr, int64_t ks,
                                         const float *qt, int64_t i0, int64_t jb, int kn, float *st,
                                         V bm[QV])
{
    V acc[KN][QV];
    score_regs(j, kr, ks, qt, i0, jb, kn, acc);
    score_store(kn, acc, st, bm);
}

/* Scores above the reference max by at most this much are exponentiated
 * against it as they are (P up to e^8, harmless in float); only a tile
 * that goes further raises the reference. */
#define LAZY_MAX 8.0f

/* The lazy rule on one tile of scores in registers (acc: kn keys, vectors
 * v0.. of them; the others all -inf): P = e^(S - m) is taken against the
 * reference max m (per lane), raised only where the tile's max exceeds
 * it by LAZY_MAX, in the manner of FlashAttention-3's lazy rescaling
 * (Shah et al. 2024). On a raise, the block's earlier P rows (st, rows
 * before kk), its partial sums and its alpha (the factor for O^T and l,
 * e^(m before the block - m now)) are scaled by e^(m old - m new); mu is
 * the max to subtract (0 where m is -inf). Returns the number of vectors
 * raised from a finite max (the first max a vector takes is no raise). */
static inline ALWAYS TGT int lazy_raise(V acc[KN][QV], int kn, int v0, int kk, float *st, V m[QV],
                                        V mu[QV], V alpha[QV], V sum[QV])
{
    int raised = 0;
    UNROLL for (int v = 0; v < QV; v++) {
        if (v < v0) continue; /* all -inf */
        V tmax = acc[0][v];
        UNROLL for (int t = 1; t < KN; t++)
            if (t < kn) tmax = VMAX(tmax, acc[t][v]);
        if (VANYGT(tmax, VADD(m[v], VSET1(LAZY_MAX)))) {
            /* a lane with nothing allowed keeps -inf and subtracts 0; its
             * P so far is 0, and c is 0 from an old max of -inf */
            V mn = VMAX(m[v], tmax);
            mu[v] = VSEL(VISNINF(mn), VZERO(), mn);
            V c = VEXP(VSUB(m[v], mu[v]));
            /* a vector none of whose rows had a key yet holds zeros so
             * far: the first max it takes costs no pass */
            if (VANYGT(m[v], VSET1(-INFINITY))) {
                for (int t = 0; t < kk; t++)
                    VSTORE(st + t * QB + v * VW, VMUL(VLOAD(st + t * QB + v * VW), c));
                raised++;
            }
            sum[v] = VMUL(sum[v], c);
            alpha[v] = VMUL(alpha[v], c);
            m[v] = mn;
        }
    }
    return raised;
}

/* The tile's P = e^(S - mu) as rows kk.. of st, summed into sum (zero for
 * the vectors before v0, which the weights read and P V does not); bf16
 * (a constant once inlined) takes the exponential of P that bfloat16
 * rounds (VEXP_BF16). */
static inline ALWAYS TGT void lazy_exp(V acc[KN][QV], int kn, int v0, int kk, float *st,
                                       const V mu[QV], V sum[QV], int bf16)
{
    V ts[QV];
    UNROLL for (int v = 0; v < QV; v++) ts[v] = VZERO();
    UNROLL for (int t = 0; t < KN; t++)
        if (t < kn)
            UNROLL for (int v = 0; v < QV; v++) {
                if (v < v0) { /* e^-inf */
                    VSTORE(st + (kk + t) * QB + v * VW, VZERO());
                    continue;
                }
                V x = VSUB(acc[t][v], mu[v]);
                V p = bf16 ? VEXP_BF16(x) : VEXP(x);
                ts[v] = VADD(ts[v], p);
                VSTORE(st + (kk + t) * QB + v * VW, p);
            }
    tile_fold(sum, ts);
}

/* A key block's start by the lazy rule: mu from the running max m (0 where
 * it is -inf), alpha 1, sum 0. */
static inline ALWAYS TGT void lazy_start(const V m[QV], V mu[QV], V alpha[QV], V sum[QV])
{
    UNROLL for (int q = 0; q < QV; q++) {
        mu[q] = VSEL(VISNINF(m[q]), VZERO(), m[q]);
        alpha[q] = VSET1(1.0f);
        sum[q] = VZERO();
    }
}

/* One tile of P^T straight from the scores in registers (no mask or bias,
 * which arrive in memory later), by the lazy rule (lazy_raise); kk is the
 * tile's first row in st. Returns the vectors raised. */
static inline ALWAYS TGT int lazy_tile(const attn_sdpa_job *j, const float *kr, int64_t ks,
                                        const float *qt, int64_t i0, int64_t jb, int kk, int kn,
                                        float *st, V m[QV], V mu[QV], V alpha[QV], V sum[QV])
{
    V acc[KN][QV];
    int v0 = score_regs(j, kr + kk * ks, ks, qt, i0, jb + kk, kn, acc);
    int raised = lazy_raise(acc, kn, v0, kk, st, m, mu, alpha, sum);
    lazy_exp(acc, kn, v0, kk, st, mu, sum, 0);
    return raised;
}

/* A P V tile's accumulators start at zero for each key block, and go back
 * into ot (cn value columns) as O^T = O^T alpha + acc (just acc when alpha
 * is NULL, a query block's first key block, whose ot is not yet written):
 * each block's products are summed on their own and the block sums then
 * added, as a blocked matrix product sums along k, so a row's rounding
 * error grows with the square roots of the block's length and of the
 * number of blocks rather than with that of the row's length (pv_tile,
 * pv_edge_tile, pv_tile_bf16). */
static inline ALWAYS TGT void pv_acc_zero(V acc[CN][QV])
{
    UNROLL for (int c = 0; c < CN; c++)
        UNROLL for (int q = 0; q < QV; q++) acc[c][q] = VZERO();
}

static inline ALWAYS TGT void pv_acc_store(float *ot, int cn, const V *alpha, V acc[CN][QV])
{
    UNROLL for (int c = 0; c < CN; c++)
        if (c < cn)
            UNROLL for (int q = 0; q < QV; q++) {
                float *o = ot + c * QB + q * VW;
                VSTORE(o, alpha ? VFMA(VLOAD(o), alpha[q], acc[c][q]) : acc[c][q]);
            }
}

/* acc[c][lanes] += sum_kk V[kk][c] * P^T[kk][lanes] for nk keys, cn value
 * columns, query vectors v0.. (the others' P is zero there). */
static inline ALWAYS TGT void pv_keys(V acc[CN][QV], const float *st, int nk, const float *v,
                                      int64_t vs, int cn, int v0)
{
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
}

/* O^T[c][lanes] = O^T * alpha + sum_kk V[jb+kk][c] * P^T[kk][lanes] for
 * cn value columns starting at c0, query vectors v0... */
static inline ALWAYS TGT void pv_tile(float *ot, const float *st, int nk,
                                          const float *v, int64_t vs, int cn,
                                          const V *alpha, int v0)
{
    V acc[CN][QV];
    pv_acc_zero(acc);
    pv_keys(acc, st, nk, v, vs, cn, v0);
    pv_acc_store(ot, cn, alpha, acc);
}

/* All dv value columns of O^T for nk keys of P^T (see pv_tile), query
 * vectors v0.. only: the others' P is zero there (causal). */
static inline ALWAYS TGT void pv_cols(float *ot, const float *st, int nk, const float *v,
                                          int64_t vs, int64_t dv, const V *alpha, int v0)
{
#define PV_COLS(V0)                                                                        \
    do {                                                                                   \
        int64_t c0 = 0;                                                                    \
        for (; c0 + CN <= dv; c0 += CN)                                                    \
            pv_tile(ot + c0 * QB, st, nk, v + c0, vs, CN, alpha, V0);                  \
        if (c0 < dv) pv_tile(ot + c0 * QB, st, nk, v + c0, vs, (int)(dv - c0), alpha, V0); \
    } while (0)
    switch (v0) {
    case 0: PV_COLS(0); break;
    case 1: PV_COLS(1); break;
    case 2: PV_COLS(2); break;
    default: PV_COLS(3); break;
    }
#undef PV_COLS
}

/* Writes a tile of P^T (nk keys x QB lanes) into the weight rows as P,
 * each lane times its factor in f (QB floats) unless f is NULL: VW x VW
 * blocks transposed in registers, then row stores. w is row i0's first
 * visible key; only nr rows and nk keys are written. With stream set,
 * aligned full vectors bypass the cache (non-temporal): the weights of a
 * long row are far more than the caches hold, and a normal store would
 * first read each line from memory only to overwrite it. store_chunk
 * writes one VW x VW block of it: keys kk0.. (n of them), vector q. */
static inline ALWAYS TGT void store_chunk(const float *st, int kk0, int n, int q, float *w,
                                          int64_t ws, int64_t nr, int stream, const float *f)
{
    VM tm = VTAILMASK(n == VW ? 0 : n);
    V r[VW];
    V fq = f ? VLOAD(f + q * VW) : VZERO();
    UNROLL for (int t = 0; t < VW; t++) {
        r[t] = t < n ? VLOAD(st + (kk0 + t) * QB + q * VW) : VZERO();
        if (f) r[t] = VMUL(r[t], fq);
    }
    VTRANSPOSE(r);
    UNROLL for (int t = 0; t < VW; t++) { /* unrolled, so r stays in registers */
        if (q * VW + t >= nr) break;
        float *dst = w + (q * VW + t) * ws + kk0;
        if (n == VW) {
            if (stream && ((uintptr_t)dst & (VW * sizeof(float) - 1)) == 0) VSTREAM(dst, r[t]);
            else VSTORE(dst, r[t]);
        } else {
            VSTOREM(dst, tm, r[t]);
        }
    }
}

static inline ALWAYS TGT void store_t_by(const float *st, int nk, float *w, int64_t ws,
                                         int64_t nr, int stream, const float *f)
{
    for (int kk0 = 0; kk0 < nk; kk0 += VW) {
        int n = nk - kk0 < VW ? nk - kk0 : VW;
        UNROLL for (int q = 0; q < QV; q++) {
            if (q * VW >= nr) break;
            store_chunk(st, kk0, n, q, w, ws, nr, stream, f);
        }
    }
}

static inline ALWAYS TGT void store_t(const float *st, int nk, float *w, int64_t ws, int64_t nr,
                                      int stream)
{
    store_t_by(st, nk, w, ws, nr, stream, NULL);
}

/* Rows of x (stride xs) turned by rope into y (stride ys; may be x): row r
 * by table row t0 + r (2d floats, C then S, rope.c), d features a row, the
 * first dims in pairs (a, a + dims/2), or (a, a + 1) when interleaved,
 * feature a of a pair becoming x_a C[a] - x_b S[a] and feature b
 * x_a S[a] + x_b C[a]; the features past dims copied. */
static TGT void rope_apply(const float *table, int64_t t0, int64_t n, int64_t d, int64_t dims,
                           int interleaved, const float *x, int64_t xs, float *y, int64_t ys)
{
    int64_t h = dims / 2;
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * xs, *c = table + (t0 + r) * 2 * d, *sn = c + d;
        float *yr = y + r * ys;
        if (interleaved) {
            for (int64_t k = 0; k < 2 * h; k += 2) {
                float a = xr[k], b = xr[k + 1];
                yr[k] = a * c[k] - b * sn[k];
                yr[k + 1] = a * sn[k] + b * c[k];
            }
        } else {
            int64_t k = 0;
            for (; k + VW <= h; k += VW) {
                V a = VLOAD(xr + k), b = VLOAD(xr + h + k), cv = VLOAD(c + k), sv = VLOAD(sn + k);
                VSTORE(yr + k, VFNMA(b, sv, VMUL(a, cv)));
                VSTORE(yr + h + k, VFMA(a, sv, VMUL(b, cv)));
            }
            for (; k < h; k++) {
                float a = xr[k], b = xr[h + k];
                yr[k] = a * c[k] - b * sn[k];
                yr[h + k] = a * sn[k] + b * c[k];
            }
        }
        for (int64_t e = 2 * h; e < d; e++) yr[e] = xr[e];
    }
}

/* Rotary embedding of n rows of x (stride xs) at table rows t0.. into y
 * (stride d): see attn_sdpa_job. */
static inline ALWAYS TGT void rope_rows(const attn_sdpa_job *j, const float *x, int64_t xs,
                                        int64_t t0, int64_t n, float *y)
{
    rope_apply(j->rope, t0, n, j->d, j->rope_dims, j->rope_interleaved, x, xs, y, j->d);
}

/* Q^T of rows [i0, i0+nr) into qt (d x QB), times the scale sc once here
 * (as it is packed) rather than every score of every key block; with
 * rope, rotated first (through qr, QB x d floats). */
static inline ALWAYS TGT void flash_pack_q(const attn_sdpa_job *j, int64_t i0, int64_t nr, float *qt,
                                           float *qr, float sc)
{
    if (j->rope) {
        rope_rows(j, j->q + i0 * j->q_stride, j->q_stride, j->rope_q0 + i0, nr, qr);
        pack_t(qr, j->d, j->d, nr, sc, qt);
    } else {
        pack_t(j->q + i0 * j->q_stride, j->q_stride, j->d, nr, sc, qt);
    }
}

/* VW x VW chunks of a staged key block's weights (store_chunk). */
#define BLOCK_CHUNKS ((BK + VW - 1) / VW * QV)

/* A staged query block's weights still to be written (see
 * sdpa_block_flash; none while j is NULL): rows [i0, i0+nr), keys
 * [klo, khi) in nblk blocks of BK, each block's P^T in pb (BK x QB) and
 * its factors in f (one QB row a block), written a chunk at a time: done
 * of the nblk BLOCK_CHUNKS chunks so far. While the next query block
 * computes, its keys [at, at + over) pace them (weights_pace). */
typedef struct {
    const attn_sdpa_job *j;
    int64_t i0, nr, klo, khi, nblk, done;
    int zeroed; /* the zeros outside [klo, khi) are written */
    int stream;
    const float *f, *pb;
    int64_t at, over;
} weights_due;

/* Writes a staged block's weights up to chunk upto (of nblk
 * BLOCK_CHUNKS), times their factors; the first call writes the zeros
 * outside [klo, khi) too. With d->stream, non-temporal (the caller fences
 * once the last is written). */
static inline ALWAYS TGT void weights_write(weights_due *d, int64_t upto)
{
    const attn_sdpa_job *j = d->j;
    if (!j) return; /* none due */
    float *w = j->w + d->i0 * j->w_stride;
    if (!d->zeroed) {
        d->zeroed = 1;
        for (int64_t r = 0; r < d->nr; r++) {
            memset(w + r * j->w_stride, 0, (size_t)d->klo * sizeof(float));
            memset(w + r * j->w_stride + d->khi, 0, (size_t)(j->lk - d->khi) * sizeof(float));
        }
    }
    if (upto > d->nblk * BLOCK_CHUNKS) upto = d->nblk * BLOCK_CHUNKS;
    for (; d->done < upto; d->done++) {
        int64_t b = d->done / BLOCK_CHUNKS, jb = d->klo + b * BK;
        int c = (int)(d->done % BLOCK_CHUNKS), kk0 = c / QV * VW, q = c % QV;
        int nk = d->khi - jb < BK ? (int)(d->khi - jb) : BK;
        if (kk0 >= nk || q * VW >= d->nr) continue;
        store_chunk(d->pb + b * BK * QB, kk0, nk - kk0 < VW ? nk - kk0 : VW, q, w + jb,
                    j->w_stride, d->nr, d->stream, d->f + b * QB);
    }
}

/* The share of the weights due that keys up to `to` of the query block
 * computing now (see weights_due) bring: all of them by its last key. */
static inline ALWAYS TGT void weights_pace(weights_due *d, int64_t to)
{
    if (d && d->j && d->over > 0)
        weights_write(d, (d->nblk * BLOCK_CHUNKS * (to - d->at) + d->over - 1) / d->over);
}

/* flash_block_lazy for a key block whose scores nothing changes
 * (block_fixed: no terms or key mask, below a causal diagonal):
 * each full tile's raw scores wait in st and are exponentiated during the
 * next tile's products (kq_tile's pend), every sum in lazy_tile's order,
 * so the answer is the same to the bit. */
static NOINLINE TGT int flash_block_deferred(const attn_sdpa_job *j, const float *kr,
                                                  int64_t ks, const float *qt, int64_t i0,
                                                  int64_t jb, int nk, float *st, V m[QV],
                                                  V alpha[QV], V sum[QV], weights_due *due)
{
    V mu[QV];
    lazy_start(m, mu, alpha, sum);
    int kk = 0, raised = 0;
    float *pend = NULL;
    for (; kk + KN <= nk; kk += KN) {
        V acc[KN][QV];
        kq_tile(qt, j->d, kr + kk * ks, ks, KN, 0, acc, pend, mu, sum);
        /* after pend's exponentials: a raise rescales every P before kk */
        raised += lazy_raise(acc, KN, 0, kk, st, m, mu, alpha, sum);
        UNROLL for (int t = 0; t < KN; t++)
            UNROLL for (int v = 0; v < QV; v++) VSTORE(st + (kk + t) * QB + v * VW, acc[t][v]);
        pend = st + kk * QB;
        weights_pace(due, jb + kk + KN);
    }
    if (pend) {
        V ts[QV] = {0};
        for (int t = 0; t < KN; t++) pend_row(pend, t, mu, sum, ts);
    }
    if (kk < nk) raised += lazy_tile(j, kr, ks, qt, i0, jb, kk, nk - kk, st, m, mu, alpha, sum);
    weights_pace(due, jb + nk);
    return raised == 0;
}

/* One key block exponentiated tile by tile while the scores are still in
 * registers (lazy_tile), against the reference max m; with AVX-512, a key
 * block whose scores nothing changes goes by flash_block_deferred where the CPU
 * gains from it (attn_kernels_defer_exp). Sets alpha (the
 * factor for the block's earlier O^T and l) and sum (its P summed per
 * lane). Returns whether the next block may go the same way: a raise
 * costs a pass over the block so far, so where the row maxima still climb
 * (widely spread scores) the two-pass form is cheaper. */
static inline ALWAYS TGT int flash_block_lazy(const attn_sdpa_job *j, const float *kr, int64_t ks,
                                              const float *qt, int64_t i0, int64_t jb, int nk,
                                              float *st, V m[QV], V alpha[QV], V sum[QV],
                                              weights_due *due)
{
    if (DEFER_EXP && !block_fixed(j, i0, jb, nk) && attn_kernels_defer_exp())
        return flash_block_deferred(j, kr, ks, qt, i0, jb, nk, st, m, alpha, sum, due);
    V mu[QV];
    lazy_start(m, mu, alpha, sum);
    int kk = 0, raised = 0;
    for (; kk + KN <= nk; kk += KN) {
        raised += lazy_tile(j, kr, ks, qt, i0, jb, kk, KN, st, m, mu, alpha, sum);
        weights_pace(due, jb + kk + KN);
    }
    if (kk < nk) raised += lazy_tile(j, kr, ks, qt, i0, jb, kk, nk - kk, st, m, mu, alpha, sum);
    weights_pace(due, jb + nk);
    return raised == 0;
}

/* The second pass of an exact block: the max of the nk score columns in st
 * (and the running max m), then st = exp(st - max) in place, the columns'
 * sums in sum and the rescale of what came before in alpha; m becomes the
 * new max. The block's first key lies gap keys past the first row's last
 * (upper_gap), so key kk's vectors before vector_past(gap + kk) hold -inf
 * and become 0 without an exponential. Shared by flash_block_exact and
 * sparse_block_exact. */
static inline ALWAYS TGT void block_exp_exact(float *st, int nk, int64_t gap, V m[QV], V alpha[QV],
                                              V sum[QV])
{
    V bm[QV], mu[QV];
    UNROLL for (int q = 0; q < QV; q++) bm[q] = m[q];
    for (int kk = 0; kk < nk; kk++) {
        int v0 = vector_past(gap + kk);
        UNROLL for (int q = 0; q < QV; q++)
            if (q >= v0) bm[q] = VMAX(bm[q], VLOAD(st + kk * QB + q * VW));
    }
    UNROLL for (int q = 0; q < QV; q++) {
        /* a row with nothing allowed yet keeps max -inf: subtract 0
         * instead, so exp gives 0 rather than NaN */
        mu[q] = VSEL(VISNINF(bm[q]), VZERO(), bm[q]);
        alpha[q] = VEXP(VSUB(m[q], mu[q]));
        m[q] = bm[q];
        sum[q] = VZERO();
    }
    V ts[QV];
    UNROLL for (int q = 0; q < QV; q++) ts[q] = VZERO();
    for (int kk = 0; kk < nk; kk++) {
        int v0 = vector_past(gap + kk);
        UNROLL for (int q = 0; q < QV; q++) {
            if (q < v0) {
                VSTORE(st + kk * QB + q * VW, VZERO());
                continue;
            }
            V p = VEXP(VSUB(VLOAD(st + kk * QB + q * VW), mu[q]));
            ts[q] = VADD(ts[q], p);
            VSTORE(st + kk * QB + q * VW, p);
        }
        if (kk % KN == KN - 1 || kk == nk - 1) tile_fold(sum, ts);
    }
}

/* One key block in two passes: its exact max, then the exponentials (the
 * way after a block that raised the max; the next goes lazily again).
 * Sets alpha and sum as flash_block_lazy does. */
static inline ALWAYS TGT void flash_block_exact(const attn_sdpa_job *j, const float *kr, int64_t ks,
                                               const float *qt, int64_t i0, int64_t jb,
                                               int nk, float *st, V m[QV], V alpha[QV], V sum[QV],
                                               weights_due *due)
{
    V bm[QV];
    UNROLL for (int q = 0; q < QV; q++) bm[q] = m[q];
    for (int kk = 0; kk < nk; kk += KN) {
        int kn = nk - kk < KN ? nk - kk : KN;
        score_tile(j, kr + kk * ks, ks, qt, i0, jb + kk, kn, st + kk * QB, bm);
        weights_pace(due, jb + kk + kn);
    }
    int64_t bl, br;
    band_of(j, &bl, &br);
    block_exp_exact(st, nk, upper_gap(j, br, i0, jb), m, alpha, sum);
}

/* One tile of cn value columns (from vb's first) of a key block on the
 * band's upper edge (br >= 0): O^T alpha, then the block's keys in runs
 * over which the first query vector that sees them stays the same, each
 * run skipping the vectors before it, the accumulators held in registers
 * from the first run to the last. */
static inline ALWAYS TGT void pv_edge_tile(const attn_sdpa_job *j, int64_t br, float *ot,
                                           const float *st, int64_t i0, int64_t jb, int nk,
                                           const float *vb, int cn, const V *alpha)
{
    V acc[CN][QV];
    pv_acc_zero(acc);
    for (int s0 = 0; s0 < nk;) {
        int v0 = first_vector(j, br, i0, jb + s0);
        int64_t e = i0 + j->off + br + (int64_t)(v0 + 1) * VW - jb;
        int s1 = e > nk || v0 == QV - 1 ? nk : (int)e;
        const float *sp = st + s0 * QB, *vp = vb + s0 * j->v_stride;
        switch (v0) {
        case 0: pv_keys(acc, sp, s1 - s0, vp, j->v_stride, cn, 0); break;
        case 1: pv_keys(acc, sp, s1 - s0, vp, j->v_stride, cn, 1); break;
        case 2: pv_keys(acc, sp, s1 - s0, vp, j->v_stride, cn, 2); break;
        default: pv_keys(acc, sp, s1 - s0, vp, j->v_stride, cn, 3); break;
        }
        s0 = s1;
    }
    pv_acc_store(ot, cn, alpha, acc);
}

/* Keys per run of a P V tile below the band's edge: a block's products
 * summed from zero in two runs, each then added into O^T, in chains half
 * as long as one of BK. At L = 128 that takes the output's RMS error
 * against float64 from 1% above PyTorch's to 5% below it (see tile_fold),
 * for no measurable time (one add per 48 products); the edge tiles, which
 * skip vectors by runs of their own, keep one chain (split too, the
 * causal core at L = 128 measured 18% slower). */
#define PV_RUN (BK / 2)

/* O^T = O^T alpha + V^T P^T for one key block (nk keys from jb). Blocks
 * on the band's upper edge (causal, window) go by pv_edge_tile, skipping
 * for each run of keys the query vectors that see none of it. */
static inline ALWAYS TGT void flash_block_pv(const attn_sdpa_job *j, float *ot, const float *st,
                                             int64_t i0, int64_t jb, int nk, const V *alpha)
{
    const float *vb = j->v + jb * j->v_stride;
    int64_t bl, br;
    band_of(j, &bl, &br);
    if (br < 0 || jb + nk <= i0 + j->off + br + VW) {
        if (nk > PV_RUN) { /* the second run adds to the first: O^T 1 + acc */
            V one[QV];
            UNROLL for (int q = 0; q < QV; q++) one[q] = VSET1(1.0f);
            pv_cols(ot, st, PV_RUN, vb, j->v_stride, j->dv, alpha, 0);
            pv_cols(ot, st + PV_RUN * QB, nk - PV_RUN, vb + PV_RUN * j->v_stride, j->v_stride,
                    j->dv, one, 0);
        } else {
            pv_cols(ot, st, nk, vb, j->v_stride, j->dv, alpha, 0);
        }
        return;
    }
    int64_t c0 = 0;
    for (; c0 + CN <= j->dv; c0 += CN)
        pv_edge_tile(j, br, ot + c0 * QB, st, i0, jb, nk, vb + c0, CN, alpha);
    if (c0 < j->dv)
        pv_edge_tile(j, br, ot + c0 * QB, st, i0, jb, nk, vb + c0, (int)(j->dv - c0), alpha);
}

/* 1/l for a row's output: 0 for a row that sees no key (l = 0: its output
 * is zero), NaN for one whose largest score m overflowed float32 (+inf,
 * which no mask makes), so that the row comes out NaN, as PyTorch's would,
 * rather than as zeros that look like an answer. */
static inline ALWAYS float row_inv(float l, float m)
{
    return m == INFINITY ? NAN : l > 0.0f ? 1.0f / l : 0.0f;
}

/* Rows [i0, i0+nr)'s log-sum-exp, when the job wants it, from their
 * lanes of l and m. */
static inline ALWAYS TGT void lse_store(const attn_sdpa_job *j, int64_t i0, int64_t nr,
                                        const V l[QV], const V m[QV])
{
    if (!j->lse) return;
    float lv[QB], mv[QB];
    UNROLL for (int q = 0; q < QV; q++) {
        VSTORE(lv + q * VW, l[q]);
        VSTORE(mv + q * VW, m[q]);
    }
    for (int64_t r = 0; r < nr; r++) j->lse[i0 + r] = attn_lse(mv[r], lv[r]);
}

/* O = O^T / l, transposed out to rows [i0, i0+nr); inv receives 1/l per
 * lane as row_inv gives it, from l and each row's largest score m. */
static inline ALWAYS TGT void flash_store_o(const attn_sdpa_job *j, int64_t i0, int64_t nr,
                                            float *ot, const V l[QV], const V m[QV], float inv[QB])
{
    lse_store(j, i0, nr, l, m);
    UNROLL for (int q = 0; q < QV; q++) {
        V pos = VSEL(VGTZERO(l[q]), l[q], VSET1(1.0f));
        V r = VSEL(VGTZERO(l[q]), VDIV(VSET1(1.0f), pos), VZERO());
        VSTORE(inv + q * VW, VSEL(VCMPLT(VSET1(FLT_MAX), m[q]), VSET1(NAN), r));
    }
    /* O^T has the tile layout (columns x lanes): scaled as it is
     * transposed out */
    for (int64_t c = 0; c < j->dv; c += BK) {
        int n = j->dv - c < BK ? (int)(j->dv - c) : BK;
        store_t_by(ot + c * QB, n, j->o + i0 * j->o_stride + c, j->o_stride, nr, 0, inv);
    }
}

/* One weight row's last pass: zeros outside [klo, khi), and each key
 * block's P from src (which may be wr) times its factor f[b * fs] (see
 * flash_weights, decode_weights). With stream, whole aligned vectors go
 * straight to memory. */
static inline ALWAYS TGT void flash_weight_row(float *wr, const float *src, int64_t klo,
                                               int64_t khi, int64_t lk, const float *f,
                                               int64_t fs, int stream)
{
    for (int64_t t = 0; t < klo; t++) wr[t] = 0.0f;
    for (int64_t t = khi; t < lk; t++) wr[t] = 0.0f;
    for (int64_t b = 0; klo + b * BK < khi; b++) {
        int64_t at = klo + b * BK;
        int64_t n = khi - at < BK ? khi - at : BK;
        float fb = f[b * fs];
        V fv = VSET1(fb);
        int64_t t = 0;
        if (stream) {
            /* unaligned head, then whole vectors straight to memory */
            for (; t < n && ((uintptr_t)(wr + at + t) & (VW * sizeof(float) - 1)) != 0; t++)
                wr[at + t] = src[at + t] * fb;
            for (; t + VW <= n; t += VW) VSTREAM(wr + at + t, VMUL(VLOAD(src + at + t), fv));
        } else {
            for (; t + VW <= n; t += VW) VSTORE(wr + at + t, VMUL(VLOAD(src + at + t), fv));
        }
        if (t < n) {
            VM tm = VTAILMASK((int)(n - t));
            VSTOREM(wr + at + t, tm, VMUL(VLOADM(src + at + t, tm), fv));
        }
    }
}

/* The factor of each key block's P: it was taken against the max at its
 * time (kept in mb), so it is rescaled by exp(max then - final max) / sum;
 * into mb in place (nblk QB rows). */
static inline ALWAYS TGT void weight_factors(const V m[QV], const float inv[QB], float *mb,
                                             int64_t nblk)
{
    UNROLL for (int q = 0; q < QV; q++) {
        V mf = VSEL(VISNINF(m[q]), VZERO(), m[q]), iv = VLOAD(inv + q * VW);
        for (int64_t b = 0; b < nblk; b++) {
            /* a block seen while the row had no allowed key holds only zeros */
            V mbv = VLOAD(mb + b * QB + q * VW);
            V f = VSEL(VISNINF(mbv), VZERO(), VMUL(VEXP(VSUB(mbv, mf)), iv));
            VSTORE(mb + b * QB + q * VW, f);
        }
    }
}

/* The weights' last pass in place in the weight rows (rows too long to
 * stage): each key block's P times its factor, zeros outside [klo, khi). */
static inline ALWAYS TGT void flash_weights(const attn_sdpa_job *j, int64_t i0, int64_t nr,
                                            int64_t klo, int64_t khi, const V m[QV],
                                            const float inv[QB], float *mb)
{
    weight_factors(m, inv, mb, (khi - klo + BK - 1) / BK);
    float *w = j->w + i0 * j->w_stride;
    for (int64_t r = 0; r < nr; r++)
        flash_weight_row(w + r * j->w_stride, w + r * j->w_stride, klo, khi, j->lk, mb + r, QB,
                         0);
}

/* Whether a job's query rows go QB / 4 to a task (a few rows): row by row
 * (sdpa_rows, in bfloat16 too), or for a sparse job without weights in
 * smaller blocks; as sdpa_task splits them. */
static inline int sdpa_by_rows(const attn_sdpa_job *j)
{
    return (j->lq < QB / 4 || j->pos_rows > 1) && !(j->sparse && j->w);
}

/* Query row i's position (before off) on the rows path: its own, or with
 * pos_rows its group's. */
static inline ALWAYS int64_t row_at(const attn_sdpa_job *j, int64_t i)
{
    return j->pos_rows > 1 ? i / j->pos_rows : i;
}

#include "bf16_tmpl.h" /* flash_block_bf16: a job with precision bf16 */

/* One query block: the online-softmax loop over key blocks; with bf (a
 * bf16 job's keys and values, bf16_tmpl.h) its products in bfloat16
 * (qt2: ldk x QB words, pt2: BK / 2 x QB). Scratch: qt
 * (d x QB), st (BK x QB), ot (dv x QB), with rope kr_rope (BK x d, the
 * rotated queries and then each key block), with a mask or bias term (BK
 * x QB, term_block's, a key block's), and with weights mb (one QB
 * row per key block) and pb (STAGE_KEYS(lk) x QB, when lk <= STAGE_LK).
 * With weights, each block's P (relative to the running max then) is kept
 * and its max goes to mb, to be rescaled once the block's max and sum are
 * final. For rows that fit (staged), each block's P^T stays where its
 * exponentials were taken, in its own BK x QB block of pb (in place of
 * st, so nothing is copied), and is transposed into the weight rows once
 * (non-temporal): the caller's buffer is touched once, not written, read
 * back and written again. Those writes are left in *due (weights_write)
 * for the caller: due holds the previous query block's on entry (if any),
 * which go out a share after each tile of scores (weights_pace), so that
 * the stores drain while the products run; the caller keeps mb and pb of this block alive
 * until its own are written. Longer rows go to the weight rows block by
 * block and are rescaled there. */
static TGT void sdpa_block_flash(const attn_sdpa_job *j, const bf16_kv *bf, int64_t i0,
                                 int64_t nr, float *qt, float *st, float *ot, float *mb, float *pb,
                                 float *kr_rope, float *term, uint32_t *qt2, uint32_t *pt2,
                                 weights_due *due)
{
    /* j with its mask and bias staged a key block at a time; the weights
     * left due for the caller name the caller's job (this copy ends here) */
    const attn_sdpa_job *job = j;
    attn_sdpa_job staged_terms;
    if (j->mask || j->bias) {
        staged_terms = *j;
        staged_terms.term = term;
        j = &staged_terms;
    }
    int amx = bf && bf16_amx(j);
    if (bf) bf16_pack_q(j, bf, i0, nr, qt, kr_rope, qt2);
    else flash_pack_q(j, i0, nr, qt, kr_rope, j->scale);
    /* a sink starts the online softmax as one key of logit z and no value
     * (m = z, l = 1); without keys the row's output stays zero */
    V m[QV], l[QV];
    UNROLL for (int q = 0; q < QV; q++) {
        m[q] = VSET1(j->has_sink ? j->sink : -INFINITY);
        l[q] = j->has_sink ? VSET1(1.0f) : VZERO();
    }
    int64_t klo, khi;
    key_range(j, i0, nr, &klo, &khi);
    if (bf) klo -= klo & 1; /* pairs of keys: the extra key is outside the band, so masked */
    /* the float32 P V of the first key block starts from zero, not from ot */
    if (bf || klo >= khi) memset(ot, 0, (size_t)j->dv * QB * sizeof(float));
    int64_t nblk = (khi - klo + BK - 1) / BK;
    if (due) { /* the previous block's weights go out as these keys' scores are made */
        due->at = klo;
        due->over = khi - klo;
    }
    /* stream the weights once rows are long enough that caching them
     * costs more (a line read before each overwrite) than it saves;
     * measured on Zen 5: a loss at lk = 256, a gain from 512 */
    int stream = j->w && j->lk >= 512;
    int staged = j->w && j->lk <= STAGE_LK;
    /* blocks exponentiate lazily against the max of their first tile,
     * unless the last one raised it (then two passes, its exact max) */
    int lazy = 1;
#ifdef VTILE
    if (amx) attn_amx_begin();
#endif
    for (int64_t jb = klo; jb < khi; jb += BK) {
        int nk = khi - jb < BK ? (int)(khi - jb) : BK;
        int64_t blk = (jb - klo) / BK;
        V alpha[QV], sum[QV];
        if (staged) st = pb + blk * BK * QB;
        if (j->term) {
            staged_terms.term_jb = jb;
            term_block(j, i0, nr, jb, nk, term);
        }
        if (bf) {
            /* flash_block_bf16 is a call of its own, and takes copies of
             * the running state: were the addresses of m, alpha and sum
             * passed out, they would live in memory for the float32 path
             * too, whose score tiles then spill (measured: 20% slower) */
            V mc[QV], ac[QV], sc[QV];
            UNROLL for (int q = 0; q < QV; q++) mc[q] = m[q];
            lazy = flash_block_bf16(j, bf, qt2, i0, jb, nk, st, pt2, bf16_np2(nk, amx), amx,
                                    lazy, mc, ac, sc);
            UNROLL for (int q = 0; q < QV; q++) {
                m[q] = mc[q];
                alpha[q] = ac[q];
                sum[q] = sc[q];
            }
            weights_pace(due, jb + nk);
        } else {
            const float *kr = j->k + jb * j->k_stride;
            int64_t ks = j->k_stride;
            if (j->rope) { /* the block's keys rotated once for the QB queries */
                rope_rows(j, kr, ks, j->rope_k0 + jb, nk, kr_rope);
                kr = kr_rope;
                ks = j->d;
            }
            if (lazy) {
                lazy = flash_block_lazy(j, kr, ks, qt, i0, jb, nk, st, m, alpha, sum, due);
            } else {
                flash_block_exact(j, kr, ks, qt, i0, jb, nk, st, m, alpha, sum, due);
                lazy = 1;
            }
        }
        UNROLL for (int q = 0; q < QV; q++) l[q] = VFMA(l[q], alpha[q], sum[q]);
        if (j->w) {
            UNROLL for (int q = 0; q < QV; q++) VSTORE(mb + blk * QB + q * VW, m[q]);
            if (!staged) store_t(st, nk, j->w + i0 * j->w_stride + jb, j->w_stride, nr, stream);
        }
        if (bf) flash_block_pv_bf16(j, bf, ot, pt2, jb, bf16_np2(nk, amx), amx, alpha);
        else flash_block_pv(j, ot, st, i0, jb, nk, jb == klo ? NULL : alpha);
    }
#ifdef VTILE
    if (amx) attn_amx_end();
#endif
    float inv[QB];
    flash_store_o(j, i0, nr, ot, l, m, inv);
    if (due) weights_write(due, due->nblk * BLOCK_CHUNKS); /* the previous block's rest */
    if (!j->w) return;
    if (!staged) {
        if (stream) VSFENCE(); /* non-temporal stores are weakly ordered */
        flash_weights(j, i0, nr, klo, khi, m, inv, mb);
        return;
    }
    weight_factors(m, inv, mb, nblk);
    weights_due own = {job, i0, nr, klo, khi, nblk, 0, 0, stream, mb, pb, 0, 0};
    if (due) {
        *due = own;
        return;
    }
    weights_write(&own, nblk * BLOCK_CHUNKS);
    if (stream) VSFENCE();
}

/* Softcap, ALiBi, the bias and the explicit and key masks over a decode
 * row's scores sc (row i, at i'; nk keys from jb), a vector at a time:
 * a score -inf (outside the band) stays so, and a masked one becomes so. */
static inline ALWAYS TGT void decode_fix(const attn_sdpa_job *j, int64_t i, int64_t ip, int64_t jb,
                                         int nk, float *sc)
{
    score_consts c = score_consts_of(j);
    int terms = c.softcap || c.alibi;
    const float *b = j->bias ? j->bias + i * j->bias_stride + jb : NULL;
    const uint8_t *mr = j->mask ? j->mask + i * j->mask_stride + jb : NULL;
    const uint8_t *km = j->key_mask ? j->key_mask + jb : NULL;
    V ninf = VSET1(-INFINITY);
    for (int kk = 0; kk < nk; kk += VW) {
        int n = nk - kk < VW ? nk - kk : VW;
        VM tm = VTAILMASK(n == VW ? 0 : n);
        V x = n == VW ? VLOAD(sc + kk) : VLOADM(sc + kk, tm);
        VM out = VISNINF(x);
        if (terms) x = score_terms(&c, x, (float)(ip - jb - kk), 0);
        if (b) x = VADD(x, n == VW ? VLOAD(b + kk) : VLOADM(b + kk, tm));
        x = VSEL(out, ninf, x);
        if (mr) x = VSEL(VMASKB(mr + kk, n), x, ninf);
        if (km) x = VSEL(VMASKB(km + kk, n), x, ninf);
        if (n == VW) VSTORE(sc + kk, x);
        else VSTOREM(sc + kk, tm, x);
    }
}

/* q . k (d floats each) as one vector of partial sums, its lanes not yet
 * added (decode_dot adds them; decode_dots adds VW keys' at once). */
static inline ALWAYS TGT V dot_lanes(const float *q, const float *k, int64_t d)
{
    VM dm = VTAILMASK((int)(d % VW));
    int64_t df = d - d % VW;
    V s = VZERO();
    for (int64_t p = 0; p < df; p += VW) s = VFMA(VLOAD(q + p), VLOAD(k + p), s);
    if (df < d) s = VFMA(VLOADM(q + df, dm), VLOADM(k + df, dm), s);
    return s;
}

/* One decode score: q . k, or with rope (q2 not NULL) (q C + q2 S) . k
 * with the table row c (C, then S): the query turned back by the row's
 * angles (see decode_rope_q), so no key is rotated. */
static inline ALWAYS TGT float decode_dot(const attn_sdpa_job *j, const float *q, const float *q2,
                                          const float *k, const float *c)
{
    if (!q2) return VHSUM(dot_lanes(q, k, j->d));
    VM dm = VTAILMASK((int)(j->d % VW));
    int64_t df = j->d - j->d % VW;
    V s = VZERO();
    const float *sn = c + j->d;
    for (int64_t p = 0; p < df; p += VW)
        s = VFMA(VFMA(VLOAD(q + p), VLOAD(c + p), VMUL(VLOAD(q2 + p), VLOAD(sn + p))),
                 VLOAD(k + p), s);
    if (df < j->d)
        s = VFMA(VFMA(VLOADM(q + df, dm), VLOADM(c + df, dm),
                      VMUL(VLOADM(q2 + df, dm), VLOADM(sn + df, dm))),
                 VLOADM(k + df, dm), s);
    return VHSUM(s);
}

/* q2 for q (d floats): its pairs' partners with the sign of a rotation,
 * q2[a] = q[b], q2[b] = -q[a] for each pair (a, b), 0 past rope_dims.
 * Then q . R(t) k = (R(-t) q) . k = (q C + q2 S) . k over t's table row. */
static inline ALWAYS TGT void decode_rope_q(const attn_sdpa_job *j, const float *q, float *q2)
{
    int64_t h = j->rope_dims / 2, k = 0;
    if (j->rope_interleaved) {
        for (; k < h; k++) {
            q2[2 * k] = q[2 * k + 1];
            q2[2 * k + 1] = -q[2 * k];
        }
    } else {
        for (; k + VW <= h; k += VW) {
            VSTORE(q2 + k, VLOAD(q + h + k));
            VSTORE(q2 + h + k, VSUB(VZERO(), VLOAD(q + k)));
        }
        for (; k < h; k++) {
            q2[k] = q[h + k];
            q2[h + k] = -q[k];
        }
    }
    for (int64_t e = 2 * h; e < j->d; e++) q2[e] = 0.0f;
}

/* With rope, query row qr (and its q2) turned back by the angles of key
 * jb into ub (and ub2): the rows a run of ROPE_RUN keys' scores start
 * from, which the relative rows 0..ROPE_RUN-1 then turn key by key (a
 * short run keeps those rows in L1 beside the streaming keys). */
static inline ALWAYS TGT void decode_rope_block(const attn_sdpa_job *j, const float *qr,
                                                const float *q2, int64_t jb, float *ub, float *ub2)
{
    const float *c = j->rope + (j->rope_k0 + jb) * 2 * j->d, *sn = c + j->d;
    int64_t e = 0;
    for (; e + VW <= j->d; e += VW)
        VSTORE(ub + e, VFMA(VLOAD(qr + e), VLOAD(c + e), VMUL(VLOAD(q2 + e), VLOAD(sn + e))));
    for (; e < j->d; e++) ub[e] = qr[e] * c[e] + q2[e] * sn[e];
    decode_rope_q(j, ub, ub2);
}

/* VW decode scores without rope: q . k for keys t0 .. t0 + VW - 1 into
 * sc, scaled; with qp (the query as bfloat16 pairs, bf16_pack_row) in
 * bfloat16, the keys rounded as they are read. VW chains side by side
 * (one per key, a step of each in turn: the query's vector is loaded
 * once a step, and the chains' latencies overlap, where a key's whole
 * chain at a time took some 4x as long), each the one decode_dot or
 * bf16_dot sums (in the order of dot_lanes,
 * bf16_dot_lanes; VHSUMS keeps VHSUM's bits), so the scores are theirs,
 * at a fraction of their shuffles and latency. The keys' value rows are prefetched meanwhile,
 * for P V: a step streams its whole cache, and the hardware alone left
 * P V waiting on them (a step at 4096 tokens: 0.19 -> 0.16 ms on 2
 * threads). */
static inline ALWAYS TGT void decode_dots(const attn_sdpa_job *j, const float *q, const uint32_t *qp,
                                          int64_t t0, float *sc)
{
    int64_t vrow = j->v_stride * (int64_t)sizeof(float);
    const float *k = j->k + t0 * j->k_stride;
    const char *vr = (const char *)(j->v + t0 * j->v_stride);
    for (int t = 0; t < VW; t++, vr += vrow)
        for (int64_t o = 0; o < j->dv * (int64_t)sizeof(float); o += PF_STEP) __builtin_prefetch(vr + o);
    int64_t ks = j->k_stride, d = j->d, df = d - d % VW;
    V s[VW];
    UNROLL for (int t = 0; t < VW; t++) s[t] = VZERO();
    if (qp) {
        for (int64_t p = 0; p < d; p += 2 * VW) {
            VB qv = VBLOAD(qp + p / 2);
            UNROLL for (int t = 0; t < VW; t++)
                s[t] = VDPBF(s[t], VBROW(bf16_load(k + t * ks, p, d), bf16_load(k + t * ks, p + VW, d)), qv);
        }
    } else {
        for (int64_t p = 0; p < df; p += VW) {
            V qv = VLOAD(q + p);
            UNROLL for (int t = 0; t < VW; t++) s[t] = VFMA(qv, VLOAD(k + t * ks + p), s[t]);
        }
        if (df < d) {
            VM dm = VTAILMASK((int)(d % VW));
            V qv = VLOADM(q + df, dm);
            UNROLL for (int t = 0; t < VW; t++) s[t] = VFMA(qv, VLOADM(k + t * ks + df, dm), s[t]);
        }
    }
    VSTORE(sc, VMUL(VHSUMS(s), VSET1(j->scale)));
}

/* Scores of query row i (q; with rope r, the rotated row and its q2, then
 * room for those turned back to each run of ROPE_RUN keys, see sdpa_rows;
 * with bf, the row in bfloat16 qp against each key rounded, with rope
 * turned first in r + d) against keys [jb, jb+nk) into sc (-inf where not
 * allowed); returns their max, or m when that is larger. */
static inline ALWAYS TGT float decode_scores(const attn_sdpa_job *j, int64_t i, const float *q,
                                             float *r, int bf, const uint32_t *qp, int64_t jb,
                                             int nk, float *sc, float m)
{
    int64_t ip = row_at(j, i) + j->off, bl, br, d = j->d;
    float *kt = bf && r ? r + d : NULL; /* bf16: the key turned, not the query */
    if (bf) r = NULL;
    float *ub2 = r ? r + 3 * d : NULL;
    if (r) q = r + 2 * d;
    int kk = 0;
    if (!bf && !r)
        for (; kk + VW <= nk; kk += VW) decode_dots(j, q, NULL, jb + kk, sc + kk);
    if (bf && !kt)
        for (; kk + VW <= nk; kk += VW) decode_dots(j, q, qp, jb + kk, sc + kk);
    for (; kk < nk; kk++) {
        int64_t t = jb + kk;
        if (r && kk % ROPE_RUN == 0) decode_rope_block(j, r, r + d, t, r + 2 * d, ub2);
        if (bf && kt) rope_rows(j, j->k + t * j->k_stride, j->k_stride, j->rope_k0 + t, 1, kt);
        if (bf) sc[kk] = bf16_dot(qp, kt ? kt : j->k + t * j->k_stride, d) * j->scale;
        else sc[kk] = decode_dot(j, q, ub2, j->k + t * j->k_stride,
                            r ? j->rope_rel + (kk % ROPE_RUN) * 2 * d : NULL) * j->scale;
    }
    /* the band cuts a block only where the row's key range reaches past
     * it (a bf16 row's extra first key, see sdpa_rows) */
    band_of(j, &bl, &br);
    if ((bl >= 0 && jb < ip - bl) || (br >= 0 && jb + nk - 1 > ip + br))
        for (kk = 0; kk < nk; kk++) {
            int64_t t = jb + kk;
            if ((bl >= 0 && t < ip - bl) || (br >= 0 && t > ip + br)) sc[kk] = -INFINITY;
        }
    if (j->softcap > 0.0f || j->alibi != 0.0f || j->bias || j->mask || j->key_mask)
        decode_fix(j, i, ip, jb, nk, sc);
    V mv = VSET1(m); /* a NaN score is passed over, as by x > m */
    for (kk = 0; kk + VW <= nk; kk += VW) mv = VMAX(VLOAD(sc + kk), mv);
    if (kk < nk) mv = VMAX(VSEL(VTAILMASK(nk - kk), VLOADM(sc + kk, VTAILMASK(nk - kk)), VSET1(m)), mv);
    return VHMAX(mv);
}

/* acc (dv floats) plus P V over nk keys from jb, P in sc (a zero skips its
 * key): four vectors of the block's sum held in registers across the
 * keys, even and odd keys in chains of their own (two FMAs in flight a
 * column), started from zero and added to acc at the end (blocked, as
 * pv_acc_store). */
static inline ALWAYS TGT void decode_pv(const attn_sdpa_job *j, int64_t jb, int nk, const float *sc,
                                        float *acc)
{
    VM vm = VTAILMASK((int)(j->dv % VW));
    int64_t vf = j->dv - j->dv % VW, c = 0, vs = j->v_stride;
    const float *v = j->v + jb * vs;
    for (; c + 4 * VW <= vf; c += 4 * VW) {
        V a[4], b[4];
        UNROLL for (int u = 0; u < 4; u++) a[u] = VZERO(), b[u] = VZERO();
        const float *vr = v + c;
        int kk = 0;
        for (; kk + 2 <= nk; kk += 2, vr += 2 * vs) {
            V p0 = VSET1(sc[kk]), p1 = VSET1(sc[kk + 1]);
            if (sc[kk] != 0.0f)
                UNROLL for (int u = 0; u < 4; u++) a[u] = VFMA(p0, VLOAD(vr + u * VW), a[u]);
            if (sc[kk + 1] != 0.0f)
                UNROLL for (int u = 0; u < 4; u++) b[u] = VFMA(p1, VLOAD(vr + vs + u * VW), b[u]);
        }
        if (kk < nk && sc[kk] != 0.0f)
            UNROLL for (int u = 0; u < 4; u++) a[u] = VFMA(VSET1(sc[kk]), VLOAD(vr + u * VW), a[u]);
        UNROLL for (int u = 0; u < 4; u++)
            VSTORE(acc + c + u * VW, VADD(VLOAD(acc + c + u * VW), VADD(a[u], b[u])));
    }
    for (; c < j->dv; c += VW) {
        V a = VZERO();
        const float *vr = v + c;
        for (int kk = 0; kk < nk; kk++, vr += vs) {
            if (sc[kk] == 0.0f) continue;
            a = VFMA(VSET1(sc[kk]), c < vf ? VLOAD(vr) : VLOADM(vr, vm), a);
        }
        VSTORE(acc + c, VADD(VLOAD(acc + c), a));
    }
}

/* One key block of a decode row: P = e^(sc - mu) in place, acc (vf + VW
 * floats, the output so far) times alpha = e^(m - mu) plus P V (with bf,
 * in bfloat16 through pw: bf16_pv_row). Returns the sum of P. */
static inline ALWAYS TGT float decode_block(const attn_sdpa_job *j, int bf, uint32_t *pw, int64_t jb, int nk, float *sc, float m,
                                            float mu, float *acc, float *alpha)
{
    int64_t vf = j->dv - j->dv % VW;
    float alpha_s[VW], psum;
    VSTORE(alpha_s, VEXP(VSUB(VSET1(m), VSET1(mu))));
    int kk = 0;
    V ps = VZERO();
    for (; kk + VW <= nk; kk += VW) {
        V p = VEXP(VSUB(VLOAD(sc + kk), VSET1(mu)));
        VSTORE(sc + kk, p);
        ps = VADD(ps, p);
    }
    if (kk < nk) {
        VM km = VTAILMASK(nk - kk);
        V p = VSEL(km, VEXP(VSUB(VLOADM(sc + kk, km), VSET1(mu))), VZERO());
        VSTOREM(sc + kk, km, p);
        ps = VADD(ps, p);
    }
    psum = VHSUM(ps);
    V a = VSET1(alpha_s[0]);
    for (int64_t c = 0; c < vf + VW; c += VW) VSTORE(acc + c, VMUL(VLOAD(acc + c), a));
    if (bf) bf16_pv_row(j, jb, nk, sc, pw, acc);
    else decode_pv(j, jb, nk, sc, acc);
    *alpha = alpha_s[0];
    return psum;
}

/* A decode row's weights, as flash_weights makes them: each key block's P
 * (in wr, taken against the row's max then, bm[b]) rescaled by
 * exp(bm[b] - m) / l, bm turned into those factors in place; zero outside
 * [klo, khi). */
static inline ALWAYS TGT void decode_weights(float *wr, int64_t klo, int64_t khi, int64_t lk,
                                             float *bm, float m, float inv)
{
    float mf = m == -INFINITY ? 0.0f : m, f[VW];
    for (int64_t b = 0; klo + b * BK < khi; b++) {
        /* a block seen while the row had no allowed key holds only zeros */
        VSTORE(f, bm[b] == -INFINITY ? VZERO() : VMUL(VEXP(VSET1(bm[b] - mf)), VSET1(inv)));
        bm[b] = f[0];
    }
    flash_weight_row(wr, wr, klo, khi, lk, bm, 1, 0);
}

/* Query row i of a decode-sized block, with rope turned into r (the
 * rotated row and its q2, see decode_scores); with bf packed into qp as
 * bfloat16 pairs. Returns the row. */
static inline ALWAYS TGT const float *row_query(const attn_sdpa_job *j, int bf, int64_t i, float *r,
                                                uint32_t *qp)
{
    const float *q = j->q + i * j->q_stride;
    if (j->rope) {
        rope_rows(j, q, j->q_stride, j->rope_q0 + row_at(j, i), 1, r);
        decode_rope_q(j, r, r + j->d);
    }
    if (bf) bf16_pack_row(j->rope ? r : q, j->d, BF_ROUND(j->d) / 2, qp);
    return q;
}

/* Row i's keys [ka, kb) (whole blocks of BK counted from klo) into the
 * online softmax *m, *l and acc; with weights each block's P goes to the
 * weight row and its max to bms. bf, qp, pw: as sdpa_rows. */
static inline ALWAYS TGT void row_keys(const attn_sdpa_job *j, int bf, int64_t i, const float *q,
                                       float *r, const uint32_t *qp, uint32_t *pw, int64_t klo,
                                       int64_t ka, int64_t kb, float *sc, float *acc, float *bms,
                                       float *m, float *l)
{
    for (int64_t jb = ka; jb < kb; jb += BK) {
        int nk = kb - jb < BK ? (int)(kb - jb) : BK;
        float bm = decode_scores(j, i, q, j->rope ? r : NULL, bf, qp, jb, nk, sc, *m);
        float alpha, mu = bm == -INFINITY ? 0.0f : bm;
        float psum = decode_block(j, bf, pw, jb, nk, sc, *m, mu, acc, &alpha);
        *l = *l * alpha + psum;
        *m = bm;
        if (j->w) {
            memcpy(j->w + i * j->w_stride + jb, sc, (size_t)nk * sizeof(float));
            bms[(jb - klo) / BK] = bm;
        }
    }
}

/* Row i's output acc / l and weights, from its max m and sum l. */
static inline ALWAYS TGT void row_finish(const attn_sdpa_job *j, int64_t i, int64_t klo, int64_t khi,
                                         const float *acc, float *bms, float m, float l)
{
    float inv = row_inv(l, m);
    float *o = j->o + i * j->o_stride;
    for (int64_t c = 0; c < j->dv; c++) o[c] = acc[c] * inv;
    if (j->lse) j->lse[i] = attn_lse(m, l);
    if (j->w) decode_weights(j->w + i * j->w_stride, klo, khi, j->lk, bms, m, inv);
}

/* Decode-sized query blocks (a few rows, nr <= QB / 4): each row along d
 * and dv, online softmax over key chunks of BK, no padding to QB rows;
 * the rows take each key block in turn, so that the block, read from
 * memory by the first row, is in L1 for the others (BK keys of d = dv =
 * 64 are 48 KiB). Scratch: sc (BK
 * floats), acc (dv + VW floats a row, rounded up to VW), with rope r (4 d
 * floats: the rotated query, its q2, and those of the key block), with
 * weights bms (one float a key block a row: the row's max after it).
 * With bf (a bf16 job) the products in bfloat16 with the flash kernel's
 * rounding (bf16_tmpl.h): qp (ldk words, the row) and pw (BK / 2 + VW
 * words, a block's P). */
static TGT void sdpa_rows(const attn_sdpa_job *j, int bf, int64_t i0, int64_t nr,
                          float *sc, float *acc, float *r, float *bms, uint32_t *qp, uint32_t *pw)
{
    int64_t as = j->dv - j->dv % VW + VW, nb = j->w ? (j->lk + BK - 1) / BK : 0, most = 0;
    int64_t klo[QB / 4], khi[QB / 4];
    float m[QB / 4], l[QB / 4];
    for (int64_t t = 0; t < nr; t++) {
        m[t] = j->has_sink ? j->sink : -INFINITY;
        l[t] = j->has_sink ? 1.0f : 0.0f;
        memset(acc + t * as, 0, (size_t)as * sizeof(float));
        key_range(j, row_at(j, i0 + t), 1, &klo[t], &khi[t]);
        if (bf) klo[t] -= klo[t] & 1; /* pairs of keys: the extra key is outside the band, so masked */
        if (khi[t] - klo[t] > most) most = khi[t] - klo[t];
    }
    for (int64_t c0 = 0; c0 < most; c0 += BK)
        for (int64_t t = 0; t < nr; t++) {
            int64_t ka = klo[t] + c0, kb = ka + BK < khi[t] ? ka + BK : khi[t];
            if (ka >= kb) continue;
            const float *q = row_query(j, bf, i0 + t, r, qp);
            row_keys(j, bf, i0 + t, q, r, qp, pw, klo[t], ka, kb, sc, acc + t * as, bms + t * nb,
                     &m[t], &l[t]);
        }
    for (int64_t t = 0; t < nr; t++)
        row_finish(j, i0 + t, klo[t], khi[t], acc + t * as, bms + t * nb, m[t], l[t]);
}

/* Keys a decode row must have, each task, before its keys are split among
 * tasks (flash-decoding: Dao et al. 2023). */
#define SPLIT_KEYS 1024

/* The keys of row i's part c of nch: whole blocks from klo. */
static inline void split_range(int64_t klo, int64_t khi, int64_t c, int64_t nch, int64_t *ka, int64_t *kb)
{
    int64_t span = ((khi - klo + nch - 1) / nch + BK - 1) / BK * BK;
    *ka = klo + c * span < khi ? klo + c * span : khi;
    *kb = *ka + span < khi ? *ka + span : khi;
}

/* Floats of a split job's partial results: a row holds, per part, its max,
 * sum and dv outputs, then with weights one max a key block. */
static inline size_t split_row_floats(const attn_sdpa_job *j, int64_t nch)
{
    return (size_t)nch * (size_t)(j->dv + 2) + (j->w ? (size_t)((j->lk + BK - 1) / BK) : 0);
}

/* Part c of nch of decode rows [i0, i0+nr): each row's share of the keys
 * into its partial results (part, split_row_floats a row), without the
 * sink (split_join adds it once). */
static TGT void sdpa_rows_part(const attn_sdpa_job *j, int64_t i0, int64_t nr, int64_t c,
                               int64_t nch, float *sc, float *acc, float *r, float *part)
{
    int64_t vf = j->dv - j->dv % VW;
    for (int64_t i = i0; i < i0 + nr; i++) {
        float *pr = part + (size_t)i * split_row_floats(j, nch), *pc = pr + c * (j->dv + 2);
        const float *q = row_query(j, 0, i, r, NULL);
        float m = -INFINITY, l = 0.0f;
        memset(acc, 0, (size_t)(vf + VW) * sizeof(float));
        int64_t klo, khi, ka, kb;
        key_range(j, row_at(j, i), 1, &klo, &khi);
        split_range(klo, khi, c, nch, &ka, &kb);
        row_keys(j, 0, i, q, r, NULL, NULL, klo, ka, kb, sc, acc, pr + nch * (j->dv + 2), &m, &l);
        pc[0] = m;
        pc[1] = l;
        memcpy(pc + 2, acc, (size_t)j->dv * sizeof(float));
    }
}

/* A split job's rows from their parts: the max over the parts (and the
 * sink), each part's sum and outputs rescaled to it, then row_finish.
 * acc: dv floats. */
static TGT void split_join(const attn_sdpa_job *j, int64_t nch, float *part, float *acc)
{
    for (int64_t i = 0; i < j->lq; i++) {
        float *pr = part + (size_t)i * split_row_floats(j, nch);
        float m = j->has_sink ? j->sink : -INFINITY, l = 0.0f;
        for (int64_t c = 0; c < nch; c++) m = pr[c * (j->dv + 2)] > m ? pr[c * (j->dv + 2)] : m;
        if (j->has_sink) l = expf(j->sink - m);
        memset(acc, 0, (size_t)j->dv * sizeof(float));
        for (int64_t c = 0; c < nch; c++) {
            const float *pc = pr + c * (j->dv + 2);
            if (pc[0] == -INFINITY) continue; /* no key allowed in this part */
            float f = expf(pc[0] - m);
            l += pc[1] * f;
            for (int64_t e = 0; e < j->dv; e++) acc[e] += pc[2 + e] * f;
        }
        int64_t klo, khi;
        key_range(j, row_at(j, i), 1, &klo, &khi);
        row_finish(j, i, klo, khi, acc, pr + nch * (j->dv + 2), m, l);
    }
}

#include "sparse_tmpl.h" /* sdpa_block_sparse: a job with a sparsity pattern */

/* Work shared by the tasks of one sdpa_run. */
typedef struct {
    const attn_sdpa_job *jobs;
    const int64_t *first; /* first task of each job; first[n] = total */
    size_t n;
    float *scratch;
    size_t per_worker;    /* floats */
    int64_t maxd;
    int64_t maxblk;       /* key blocks of the longest row with weights */
    int64_t maxstage;     /* keys of the longest row staged (pb) */
    size_t bf_worker;     /* floats before a worker's qt2 and pt2 (0: no bf16 job) */
    int64_t maxldk;       /* the widest qt2 of the bf16 jobs, in words */
    bf16_kv *kv;          /* each job's keys and values in bfloat16 (bf16 jobs) */
    int64_t nch;          /* > 1: the one job's keys split in nch parts (split_parts) */
    int64_t chain;        /* query blocks a task of a job that chains (chains) */
    float *part;          /* their partial results (split_row_floats a row) */
} sdpa_args;

/* The job (its index) and its task b (of nb) of a task. */
static size_t task_block(const sdpa_args *s, int64_t task, int64_t *b, int64_t *nb)
{
    size_t lo = 0, hi = s->n; /* the job whose task range holds task */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (s->first[mid] <= task) lo = mid; else hi = mid;
    }
    const attn_sdpa_job *j = &s->jobs[lo];
    *nb = s->first[lo + 1] - s->first[lo];
    *b = task - s->first[lo];
    if (j->causal || j->window_right >= 0) *b = *nb - 1 - *b; /* the longest blocks first */
    return lo;
}

/* Whether a job's tasks take a run of query blocks each (sdpa_args'
 * chain): a job whose weights are staged, so that each block's weight
 * writes go out while the next block computes (sdpa_block_flash). */
static inline int chains(const attn_sdpa_job *j)
{
    return j->w && j->lk <= STAGE_LK && !j->sparse && !sdpa_by_rows(j);
}

/* Query blocks [b0, b1) of job j in turn, each block's weights written
 * during the next one's products (with two sets of mb and pb), the last
 * block's at the end. */
static TGT void flash_chain(const attn_sdpa_job *j, const bf16_kv *bf, int64_t b0, int64_t b1,
                            float *qt, float *st, float *ot, float *mb[2], float *pb[2],
                            float *kr_rope, float *term, uint32_t *qt2, uint32_t *pt2)
{
    weights_due due;
    memset(&due, 0, sizeof due);
    for (int64_t b = b0; b < b1; b++) {
        int64_t i0 = b * QB, nr = j->lq - i0 < QB ? j->lq - i0 : QB;
        sdpa_block_flash(j, bf, i0, nr, qt, st, ot, mb[b & 1], pb[b & 1], kr_rope, term, qt2, pt2,
                         &due);
    }
    weights_write(&due, due.nblk * BLOCK_CHUNKS);
    if (due.stream) VSFENCE(); /* non-temporal stores are weakly ordered */
}

static TGT void sdpa_task(void *arg, int64_t task, int worker)
{
    const sdpa_args *s = arg;
    int64_t b, nb;
    size_t lo = task_block(s, task, &b, &nb);
    const attn_sdpa_job *j = &s->jobs[lo];
    float *scr = s->scratch + (size_t)worker * s->per_worker;
    if (j->sparse) {
        int64_t rows = sdpa_by_rows(j) ? QB / 4 : QB, i0 = b * rows; /* as sdpa_plan */
        float *qt = scr, *st = qt + (size_t)s->maxd * QB, *ot = st + (size_t)BK * QB;
        sdpa_block_sparse(j, i0, j->lq - i0 < rows ? j->lq - i0 : rows, qt, st, ot,
                          ot + (size_t)s->maxd * QB);
        return;
    }
    if (sdpa_by_rows(j)) {
        int64_t i0 = b / s->nch * (QB / 4);
        int64_t nr = j->lq - i0 < QB / 4 ? j->lq - i0 : QB / 4;
        float *acc = scr + BK, *r = acc + QB / 4 * (s->maxd + VW);
        uint32_t *qp = (void *)(scr + s->bf_worker), *pw = qp + s->maxldk * QB;
        if (s->nch > 1) sdpa_rows_part(j, i0, nr, b % s->nch, s->nch, scr, acc, r, s->part);
        else sdpa_rows(j, j->bf16, i0, nr, scr, acc, r, r + 4 * s->maxd, qp, pw);
        return;
    }
    /* qt, st, ot, mb, pb, the rotated rows of rope, the mask and bias
     * term, a second mb and pb */
    size_t mbf = (size_t)(s->maxblk + 1) * QB;
    float *qt = scr, *st = qt + (size_t)s->maxd * QB, *ot = st + (size_t)BK * QB;
    float *mb = ot + (size_t)s->maxd * QB, *pb = mb + mbf;
    float *kr = pb + (size_t)s->maxstage * QB, *term = kr + (size_t)BK * s->maxd;
    float *mb2 = term + (size_t)BK * QB;
    float *mbs[2] = {mb, mb2}, *pbs[2] = {pb, mb2 + mbf};
    uint32_t *qt2 = (void *)(scr + s->bf_worker), *pt2 = qt2 + s->maxldk * QB;
    const bf16_kv *bf = j->bf16 ? &s->kv[lo] : NULL;
    if (chains(j)) {
        int64_t b1 = (b + 1) * s->chain, nqb = (j->lq + QB - 1) / QB;
        flash_chain(j, bf, b * s->chain, b1 < nqb ? b1 : nqb, qt, st, ot, mbs, pbs, kr, term,
                    qt2, pt2);
        return;
    }
    int64_t i0 = b * QB, nr = j->lq - i0 < QB ? j->lq - i0 : QB;
    sdpa_block_flash(j, bf, i0, nr, qt, st, ot, mb, pb, kr, term, qt2, pt2, NULL);
}

/* Conversion tasks per bf16 job (bf16_task). */
#define BF_SPLIT 4

/* Part task % BF_SPLIT of job task / BF_SPLIT's kb and vt. */
static TGT void bf16_task(void *arg, int64_t task, int worker)
{
    const sdpa_args *s = arg;
    size_t i = (size_t)(task / BF_SPLIT);
    const attn_sdpa_job *j = &s->jobs[i];
    const bf16_kv *c = &s->kv[i];
    if (!bf16_blocks(j) || (i && bf16_same_kv(j - 1, j))) return; /* none, or made */
    int64_t part = (c->ldv + BF_SPLIT - 1) / BF_SPLIT, t0 = task % BF_SPLIT * part;
    int64_t t1 = t0 + part < c->ldv ? t0 + part : c->ldv;
    if (t0 < t1) bf16_convert(j, c, t0, t1, s->scratch + (size_t)worker * s->per_worker);
}

/* Sizes for n jobs: per-worker scratch in a (qt + st + ot, + mb + pb with
 * weights, + the rotated rows of rope, + qt2 and pt2 with bf16 jobs; the
 * row path needs less), and with first not NULL each job's first task
 * (first[n] = all of them). Returns the work, for the thread count. The
 * sizes are bounded by buffers the caller holds (and pb by STAGE_LK), so
 * they fit. */
/* Parts the keys of a lone decode job are split in, so that every thread
 * has work (1: not split): a single float32 job of a few rows with long
 * rows, which a decode step per head is. work: the jobs' (sdpa_work). */
static int64_t split_parts(const attn_sdpa_job *jobs, size_t n, int threads, double work)
{
    if (n != 1 || threads < 2 || work < 2e5 || !sdpa_by_rows(&jobs[0]) || jobs[0].sparse ||
        jobs[0].bf16 || jobs[0].lk < 2 * SPLIT_KEYS)
        return 1;
    return jobs[0].lk / SPLIT_KEYS < threads ? jobs[0].lk / SPLIT_KEYS : threads;
}

/* The jobs' work, for the thread count: query-key pairs times d + dv. */
static double sdpa_work(const attn_sdpa_job *jobs, size_t n)
{
    double work = 0;
    for (size_t i = 0; i < n; i++)
        work += (double)jobs[i].lq * (double)jobs[i].lk * (double)(jobs[i].d + jobs[i].dv);
    return work;
}

static double sdpa_plan(const attn_sdpa_job *jobs, size_t n, int threads, int64_t *first, sdpa_args *a)
{
    int64_t maxd = 1, maxblk = 0, maxstage = 0, tasks = 0, maxldk = 0, chained = 0;
    double work = sdpa_work(jobs, n);
    a->nch = split_parts(jobs, n, threads, work);
    for (size_t i = 0; i < n; i++)
        if (chains(&jobs[i])) chained += (jobs[i].lq + QB - 1) / QB;
    /* runs long enough to leave few blocks' weights unhidden, some three
     * tasks a thread for the balance */
    int64_t spread = 3 * (int64_t)(threads < 1 ? 1 : threads);
    a->chain = chained > spread ? (chained + spread - 1) / spread : 1;
    for (size_t i = 0; i < n; i++) {
        const attn_sdpa_job *j = &jobs[i];
        int64_t rows = sdpa_by_rows(j) ? QB / 4 : QB, blocks = (j->lq + rows - 1) / rows;
        if (first) first[i] = tasks;
        tasks += chains(j) ? (blocks + a->chain - 1) / a->chain : blocks * a->nch;
        if (j->d > maxd) maxd = j->d;
        if (j->dv > maxd) maxd = j->dv;
        if (j->w && (j->lk + BK - 1) / BK > maxblk) maxblk = (j->lk + BK - 1) / BK;
        if (j->w && j->lk <= STAGE_LK && STAGE_KEYS(j->lk) > maxstage) maxstage = STAGE_KEYS(j->lk);
        if (j->bf16 && BF_ROUND(j->d) / 2 > maxldk) maxldk = BF_ROUND(j->d) / 2;
    }
    if (first) first[n] = tasks;
    a->maxd = maxd;
    a->maxblk = maxblk;
    a->maxstage = maxstage;
    a->maxldk = maxldk;
    /* qt, st, ot, mb, pb, the rotated rows of rope (BK x maxd), the mask
     * and bias term (BK x QB, whether a job has them or not: a planner may
     * ask with jobs that hold only their sizes), then a second mb and pb
     * for chained jobs */
    a->bf_worker = LINES((size_t)(2 * maxd + 2 * BK + VW + maxblk + 1 + maxstage) * QB +
                         (size_t)BK * (size_t)maxd +
                         (chained ? (size_t)(maxblk + 1 + maxstage) * QB : 0));
    a->per_worker = a->bf_worker + (maxldk ? LINES((size_t)(maxldk + BK / 2) * QB) : 0);
    return work;
}

/* Bytes of the bf16 jobs' keys and values (and their descriptors); a
 * job reading its predecessor's keys and values shares theirs. */
static size_t sdpa_bf16_bytes(const attn_sdpa_job *jobs, size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        if (!i || !bf16_same_kv(&jobs[i - 1], &jobs[i])) bytes += bf16_job_bytes(&jobs[i]);
    return bytes ? bytes + LINES(n * sizeof(bf16_kv) / sizeof(float) + 1) * sizeof(float) : 0;
}

/* Floats of a split job's partial results (0 when not split). */
static size_t sdpa_part_floats(const attn_sdpa_job *jobs, const sdpa_args *a)
{
    return a->nch > 1 ? LINES((size_t)jobs[0].lq * split_row_floats(&jobs[0], a->nch)) : 0;
}

/* Scratch sdpa_run needs for these jobs on up to `threads` threads: the
 * task index (n + 1 int64), a split job's partial results, the bf16 jobs'
 * keys and values, then per_worker floats a worker. */
static size_t sdpa_scratch_bytes(const attn_sdpa_job *jobs, size_t n, int threads)
{
    if (n == 0) return 0;
    sdpa_args a;
    sdpa_plan(jobs, n, threads, NULL, &a);
    size_t index = LINES((n + 1) * 2) * sizeof(float);
    return index + sdpa_part_floats(jobs, &a) * sizeof(float) + sdpa_bf16_bytes(jobs, n) +
           (size_t)(threads < 1 ? 1 : threads) * a.per_worker * sizeof(float);
}

/* Points each bf16 job's descriptor in kv at its part of the room after
 * the descriptors (its predecessor's when it reads the same keys and
 * values); returns the end of that room. */
static char *sdpa_bf16_carve(const attn_sdpa_job *jobs, size_t n, bf16_kv *kv)
{
    char *at = (char *)kv + LINES(n * sizeof(bf16_kv) / sizeof(float) + 1) * sizeof(float);
    for (size_t i = 0; i < n; i++) {
        if (!bf16_blocks(&jobs[i])) continue;
        if (i && bf16_same_kv(&jobs[i - 1], &jobs[i])) {
            kv[i] = kv[i - 1];
            continue;
        }
        bf16_dims(&jobs[i], &kv[i].ldk, &kv[i].ldv);
        kv[i].kb = (void *)at;
        kv[i].vt = kv[i].kb + 2 * kv[i].ldv * kv[i].ldk;
        at += bf16_job_bytes(&jobs[i]);
    }
    return at;
}

/* The n jobs of attn_sdpa_run, in scratch of sdpa_scratch_bytes (64-byte
 * aligned): the bf16 jobs' keys and values first, then the query blocks. */
static TGT void sdpa_run(const attn_sdpa_job *jobs, size_t n, int threads, void *scratch)
{
    if (n == 0) return;
    int64_t *first = scratch;
    sdpa_args a = {jobs, first, n, NULL, 0, 0, 0, 0, 0, 0, NULL, 1, 1, NULL};
    double work = sdpa_plan(jobs, n, threads, first, &a);
    char *rest = (char *)scratch + LINES((n + 1) * 2) * sizeof(float);
    a.part = (void *)rest;
    rest += sdpa_part_floats(jobs, &a) * sizeof(float);
    if (work < 2e5 || threads < 1) threads = 1;
    if (sdpa_bf16_bytes(jobs, n)) {
        a.kv = (void *)rest;
        rest = sdpa_bf16_carve(jobs, n, a.kv);
        a.scratch = (void *)rest;
        attn_pool_run(threads, (int64_t)n * BF_SPLIT, bf16_task, &a);
    }
    a.scratch = (void *)rest;
    attn_pool_run(threads, first[n], sdpa_task, &a);
    if (a.nch > 1) split_join(&jobs[0], a.nch, a.part, a.scratch);
}
