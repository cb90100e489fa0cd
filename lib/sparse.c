/* sparse.c - sparse attention's patterns (attn.h's attn_sparsity): their
 * validation, their block layout (BigBird's drawn as attn.h's "Draws"
 * says), their cost, and the form the kernels read (attn_sparse,
 * kernels.h), laid out in the call's workspace. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* local_global's layout (attn_sparsity_layout) is summarised in blocks of
 * this many rows and columns: a fixed size, so a client gets the same
 * layout from every build and CPU. */
#define LG_BLOCK 64

static int64_t blocks_of(int64_t n, int64_t b)
{
    return n / b + (n % b != 0);
}

attn_status attn_sparsity_check(const attn_options *o, int64_t Lq, int64_t Lk, attn_error *err)
{
    const attn_sparsity *s = &o->sparsity;
    int64_t most = Lq > Lk ? Lq : Lk;
    switch (s->pattern) {
    case ATTN_SPARSE_NONE:
        return ATTN_OK;
    case ATTN_SPARSE_LOCAL_GLOBAL:
        if (s->window < 0)
            return attn_fail(err, ATTN_ERR_PARAM, "sparsity.window",
                             "sparsity.window must be >= 0, got %lld", (long long)s->window);
        if (s->n_global && !s->global)
            return attn_fail(err, ATTN_ERR_ARG, "sparsity.global", "sparsity.global has no data");
        for (size_t g = 0; g < s->n_global; g++)
            if (s->global[g] < 0 || s->global[g] >= most)
                return attn_fail(err, ATTN_ERR_PARAM, "sparsity.global",
                                 "sparsity.global[%zu] = %lld is out of range: token indices "
                                 "are 0 .. max(Lq, Lk) - 1 = %lld",
                                 g, (long long)s->global[g], (long long)(most - 1));
        return ATTN_OK;
    case ATTN_SPARSE_BIGBIRD:
    case ATTN_SPARSE_BLOCKS:
        break;
    default:
        return attn_fail(err, ATTN_ERR_PARAM, "sparsity",
                         "sparsity pattern must be local_global, bigbird or blocks");
    }
    if (s->block < 1)
        return attn_fail(err, ATTN_ERR_PARAM, "sparsity.block",
                         "sparsity.block must be >= 1, got %lld", (long long)s->block);
    int64_t nqb = blocks_of(Lq, s->block), nkb = blocks_of(Lk, s->block), cells;
    if (!attn_size_mul(nqb, nkb, &cells))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "sparsity.block",
                         "sparsity.block %lld makes too many blocks", (long long)s->block);
    if (s->pattern == ATTN_SPARSE_BIGBIRD) {
        if (s->window_blocks < 1 || s->window_blocks % 2 == 0)
            return attn_fail(err, ATTN_ERR_PARAM, "sparsity.window_blocks",
                             "sparsity.window_blocks must be odd and >= 1, got %lld",
                             (long long)s->window_blocks);
        if (s->global_blocks < 0)
            return attn_fail(err, ATTN_ERR_PARAM, "sparsity.global_blocks",
                             "sparsity.global_blocks must be >= 0, got %lld",
                             (long long)s->global_blocks);
        if (s->random_blocks < 0)
            return attn_fail(err, ATTN_ERR_PARAM, "sparsity.random_blocks",
                             "sparsity.random_blocks must be >= 0, got %lld",
                             (long long)s->random_blocks);
        return ATTN_OK;
    }
    const attn_mask *l = &s->layout;
    if (l->rank != 2 || l->shape[0] != nqb || l->shape[1] != nkb) {
        char got[96];
        attn_fmt_shape(got, sizeof got, l->rank, l->shape);
        return attn_fail(err, ATTN_ERR_PARAM, "sparsity.layout",
                         "sparsity.layout has shape %s but must be (ceil(Lq/block), "
                         "ceil(Lk/block)) = (%lld, %lld)",
                         got, (long long)nqb, (long long)nkb);
    }
    if (!l->data)
        return attn_fail(err, ATTN_ERR_ARG, "sparsity.layout", "sparsity.layout has no data");
    return ATTN_OK;
}

void attn_sparsity_dims(const attn_options *o, int64_t Lq, int64_t Lk, int64_t *rows,
                        int64_t *cols, int64_t *block)
{
    const attn_sparsity *s = &o->sparsity;
    int64_t b = s->pattern == ATTN_SPARSE_NONE ? 0
              : s->pattern == ATTN_SPARSE_LOCAL_GLOBAL ? LG_BLOCK : s->block;
    *block = b;
    *rows = b ? blocks_of(Lq, b) : 0;
    *cols = b ? blocks_of(Lk, b) : 0;
}

/* BigBird's key blocks for query block qb without the random ones: the
 * global blocks and the window, clipped; how many. */
static int64_t bigbird_fixed(const attn_sparsity *s, int64_t qb, int64_t nkb)
{
    int64_t g = s->global_blocks < nkb ? s->global_blocks : nkb;
    int64_t half = (s->window_blocks - 1) / 2;
    int64_t a = qb - half < g ? g : qb - half, b = qb + half >= nkb ? nkb - 1 : qb + half;
    return g + (b >= a ? b - a + 1 : 0);
}

double attn_sparsity_pairs(const attn_options *o, int64_t Lq, int64_t Lk)
{
    const attn_sparsity *s = &o->sparsity;
    double dense = (double)Lq * (double)Lk, pairs = 0.0;
    switch (s->pattern) {
    case ATTN_SPARSE_LOCAL_GLOBAL:
        pairs = (double)Lq * (2.0 * (double)s->window + 1.0) +
                (double)s->n_global * (double)(Lq + Lk);
        break;
    case ATTN_SPARSE_BIGBIRD: {
        int64_t b = s->block, nqb = blocks_of(Lq, b), nkb = blocks_of(Lk, b);
        for (int64_t qb = 0; qb < nqb; qb++) {
            int64_t n = qb < s->global_blocks ? nkb : bigbird_fixed(s, qb, nkb);
            n += s->random_blocks < nkb - n ? s->random_blocks : nkb - n;
            pairs += (double)n * (double)b * (double)b;
        }
        break;
    }
    case ATTN_SPARSE_BLOCKS: {
        int64_t cells = s->layout.shape[0] * s->layout.shape[1]; /* checked by the plan */
        for (int64_t c = 0; c < cells; c++)
            pairs += s->layout.data[c] != 0;
        pairs *= (double)s->block * (double)s->block;
        break;
    }
    default:
        return dense;
    }
    return pairs < dense ? pairs : dense;
}

/* BigBird's layout (attn.h, "Draws"): nqb x nkb bytes from one SplitMix64
 * stream at seed; c is room for nkb candidates. */
static void bigbird_layout(const attn_sparsity *s, int64_t nqb, int64_t nkb, uint64_t seed,
                           uint8_t *layout, int64_t *c)
{
    uint64_t state = seed;
    int64_t half = (s->window_blocks - 1) / 2;
    for (int64_t qb = 0; qb < nqb; qb++) {
        uint8_t *row = layout + qb * nkb;
        if (qb < s->global_blocks) {
            memset(row, 1, (size_t)nkb);
            continue;
        }
        memset(row, 0, (size_t)nkb);
        for (int64_t kb = 0; kb < nkb && kb < s->global_blocks; kb++)
            row[kb] = 1;
        for (int64_t kb = qb - half < 0 ? 0 : qb - half; kb < nkb && kb <= qb + half; kb++)
            row[kb] = 1;
        int64_t n = 0;
        for (int64_t kb = 0; kb < nkb; kb++)
            if (!row[kb])
                c[n++] = kb;
        int64_t r = s->random_blocks < n ? s->random_blocks : n;
        for (int64_t t = 0; t < r; t++) { /* a partial Fisher-Yates shuffle */
            uint64_t x = attn_splitmix64(&state) >> 32;
            int64_t jj = t + (int64_t)((x * (uint64_t)(n - t)) >> 32);
            int64_t tmp = c[t];
            c[t] = c[jj];
            c[jj] = tmp;
        }
        for (int64_t t = 0; t < r; t++)
            row[c[t]] = 1;
    }
}

/* local_global's marks: qg (Lq bytes), kg (Lk bytes) and the distinct
 * global keys in increasing order into gk; returns how many. */
static int64_t mark_globals(const attn_sparsity *s, int64_t Lq, int64_t Lk, uint8_t *qg,
                            uint8_t *kg, int64_t *gk)
{
    memset(qg, 0, (size_t)Lq);
    memset(kg, 0, (size_t)Lk);
    for (size_t g = 0; g < s->n_global; g++) {
        if (s->global[g] < Lq)
            qg[s->global[g]] = 1;
        if (s->global[g] < Lk)
            kg[s->global[g]] = 1;
    }
    int64_t n = 0;
    if (gk)
        for (int64_t j = 0; j < Lk && (size_t)n < s->n_global; j++)
            if (kg[j])
                gk[n++] = j;
    return n;
}

void attn_sparse_lay_out(attn_ws *ws, const attn_options *o, int64_t Lq, int64_t Lk,
                         attn_sparse *sp)
{
    const attn_sparsity *s = &o->sparsity;
    memset(sp, 0, sizeof *sp);
    if (s->pattern == ATTN_SPARSE_LOCAL_GLOBAL) {
        uint8_t *qg = attn_ws_take(ws, (double)Lq, 1);
        uint8_t *kg = attn_ws_take(ws, (double)Lk, 1);
        int64_t *gk = attn_ws_take(ws, fmin((double)s->n_global, (double)Lk), sizeof(int64_t));
        if (!ws->base)
            return;
        int64_t most = Lq + Lk; /* a wider window masks nothing; no sum can overflow */
        sp->window = s->window < most ? s->window : most;
        sp->off = o->align == ATTN_ALIGN_BOTTOM_RIGHT ? Lk - Lq : 0;
        sp->qglobal = qg;
        sp->kglobal = kg;
        sp->gkeys = gk;
        sp->n_gkeys = mark_globals(s, Lq, Lk, qg, kg, gk);
        return;
    }
    if (s->pattern != ATTN_SPARSE_BIGBIRD && s->pattern != ATTN_SPARSE_BLOCKS)
        return;
    int64_t nqb = blocks_of(Lq, s->block), nkb = blocks_of(Lk, s->block);
    int bigbird = s->pattern == ATTN_SPARSE_BIGBIRD;
    uint8_t *lay = attn_ws_take(ws, bigbird ? (double)nqb * (double)nkb : 0.0, 1);
    int64_t *c = attn_ws_take(ws, bigbird ? (double)nkb : 0.0, sizeof(int64_t));
    if (!ws->base)
        return;
    sp->block = s->block;
    sp->lrows = nqb;
    sp->lcols = nkb;
    if (bigbird)
        bigbird_layout(s, nqb, nkb, o->seed, lay, c);
    sp->layout = bigbird ? lay : s->layout.data;
}

/* local_global summarised in LG_BLOCK blocks: a block holds an allowed
 * pair when the band crosses it, or it holds a global query row or key. */
static attn_status lg_layout(const attn_options *o, int64_t Lq, int64_t Lk, int64_t nqb,
                             int64_t nkb, uint8_t *layout, attn_error *err)
{
    const attn_sparsity *s = &o->sparsity;
    uint8_t *qg = malloc((size_t)(Lq + Lk));
    if (!qg)
        return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for the layout");
    uint8_t *kg = qg + Lq;
    mark_globals(s, Lq, Lk, qg, kg, NULL);
    int64_t off = o->align == ATTN_ALIGN_BOTTOM_RIGHT ? Lk - Lq : 0;
    int64_t w = s->window < Lq + Lk ? s->window : Lq + Lk;
    for (int64_t qb = 0; qb < nqb; qb++) {
        int64_t q0 = qb * LG_BLOCK, q1 = q0 + LG_BLOCK < Lq ? q0 + LG_BLOCK : Lq, qglob = 0;
        for (int64_t i = q0; i < q1; i++)
            qglob |= qg[i];
        for (int64_t kb = 0; kb < nkb; kb++) {
            int64_t k0 = kb * LG_BLOCK, k1 = k0 + LG_BLOCK < Lk ? k0 + LG_BLOCK : Lk, on = qglob;
            for (int64_t j = k0; j < k1 && !on; j++)
                on = kg[j];
            /* the band of rows q0 .. q1-1 covers keys q0 + off - w .. q1 - 1 + off + w */
            on |= q0 + off - w <= k1 - 1 && k0 <= q1 - 1 + off + w;
            layout[qb * nkb + kb] = on != 0;
        }
    }
    free(qg);
    return ATTN_OK;
}

attn_status attn_sparsity_layout(const attn_options *o, int64_t Lq, int64_t Lk, uint8_t *layout,
                                 attn_error *err)
{
    if (!o || !layout || Lq < 1 || Lk < 1)
        return attn_fail(err, ATTN_ERR_ARG, "", "attn_sparsity_layout: bad arguments");
    attn_status st = attn_sparsity_check(o, Lq, Lk, err);
    if (st != ATTN_OK)
        return st;
    int64_t nqb, nkb, b;
    attn_sparsity_dims(o, Lq, Lk, &nqb, &nkb, &b);
    const attn_sparsity *s = &o->sparsity;
    switch (s->pattern) {
    case ATTN_SPARSE_LOCAL_GLOBAL:
        return lg_layout(o, Lq, Lk, nqb, nkb, layout, err);
    case ATTN_SPARSE_BIGBIRD: {
        int64_t *c = malloc(sizeof(int64_t) * (size_t)nkb);
        if (!c)
            return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for the layout");
        bigbird_layout(s, nqb, nkb, o->seed, layout, c);
        free(c);
        return ATTN_OK;
    }
    case ATTN_SPARSE_BLOCKS:
        for (int64_t e = 0; e < nqb * nkb; e++)
            layout[e] = s->layout.data[e] != 0;
        return ATTN_OK;
    default:
        return ATTN_OK; /* no pattern: no layout (0 x 0) */
    }
}
