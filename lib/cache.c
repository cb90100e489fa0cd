/* cache.c - attention of new query rows over a key/value cache the caller
 * keeps (attn_cache_compute): the decode step of a session. Its front end
 * of the pipeline (exec.c): validation, the cost, and one head job per
 * query head reading the cache in place, all run by one attn_exec_heads. */
#include <math.h>
#include <string.h>
#include "internal.h"

attn_cache_request attn_cache_request_default(void)
{
    attn_cache_request r;
    memset(&r, 0, sizeof r);
    r.opt = attn_options_default();
    return r;
}

/* A validated request, then the workspace pieces cache_lay_out took. */
typedef struct {
    attn_cache_request req;
    int64_t H, Hkv, d, Tq, n;
    attn_shapes shapes;
    attn_sparse sparse;  /* the sparsity pattern in the kernels' form */
    attn_rope_pass rope;
    int copies;          /* rope rotates copies before the kernel (qr, kr) */
    float *qr, *kr;      /* (Tq, H, d) and (Hkv, n, d) */
    attn_heads heads;
    float *lse; /* the run's lse buffer (attn_cache_compute_lse), or NULL */
} cplan;

static const attn_front cache_front;

/* The sizes: query (Tq, H, d), the head counts and the cache's arrays. */
static attn_status check_sizes(const attn_cache_request *req, cplan *pl, attn_error *err)
{
    const attn_tensor *q = &req->query;
    if (q->rank != 3 || !q->data || q->shape[0] < 1 || q->shape[2] < 1)
        return attn_fail(err, ATTN_ERR_SHAPE, "query",
                         "query must be a non-empty (Tq, num_heads, head_dim) tensor");
    pl->Tq = q->shape[0];
    pl->d = q->shape[2];
    pl->H = req->num_heads;
    if (pl->H < 1 || q->shape[1] != pl->H)
        return attn_fail(err, ATTN_ERR_PARAM, "num_heads",
                         "num_heads (%lld) must be at least 1 and the query's second size (%lld)",
                         (long long)pl->H, (long long)q->shape[1]);
    attn_status st = attn_check_kv_heads(pl->H, req->num_kv_heads, &pl->Hkv, err);
    if (st != ATTN_OK)
        return st;
    pl->n = req->len;
    if (pl->n < 1)
        return attn_fail(err, ATTN_ERR_SHAPE, "len", "the cache must hold at least one row");
    int64_t cells;
    if (!attn_size_mul(pl->n, pl->Hkv, &cells) || !attn_size_mul(cells, pl->d, &cells))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "len", "the cache is too large");
    for (int64_t g = 0; g < pl->Hkv; g++)
        if (!req->key || !req->value || !req->key[g] || !req->value[g])
            return attn_fail(err, ATTN_ERR_ARG, req->key && req->key[g] ? "value" : "key",
                             "KV head %lld of the cache has no data", (long long)g);
    return ATTN_OK;
}

static attn_status make_plan(const attn_cache_request *req, cplan *pl, attn_error *err)
{
    memset(pl, 0, sizeof *pl);
    if (!req)
        return attn_fail(err, ATTN_ERR_ARG, "", "NULL request");
    pl->req = *req;
    attn_status st = check_sizes(req, pl, err);
    if (st != ATTN_OK)
        return st;
    const attn_options *o = &req->opt;
    if (req->has_scale && !isfinite(req->scale))
        return attn_fail(err, ATTN_ERR_PARAM, "scale", "scale must be a finite number");
    attn_score_dims sd = {1, pl->H, pl->Tq, pl->n, 0, "len"};
    if ((st = attn_refuse_layout(o, "attention over a KV cache", err)) != ATTN_OK ||
        (st = attn_check_options(o, ATTN_RULE_DOT, "attention over a KV cache", &sd, err)) !=
            ATTN_OK ||
        (st = attn_check_rope(&o->rope, pl->d, err)) != ATTN_OK)
        return st;
    attn_maskish_rank4(&pl->req.opt, &sd); /* (H, Tq, len): per head */
    attn_shapes *sh = &pl->shapes;
    sh->out_rank = sh->w_rank = 3;
    int64_t out[3] = {pl->Tq, pl->H, pl->d}, w[3] = {pl->H, pl->Tq, pl->n}, wc;
    memcpy(sh->out_shape, out, sizeof out);
    memcpy(sh->w_shape, w, sizeof w);
    if (!attn_count(3, out, &sh->out_count) || !attn_count(3, w, &wc))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "", "the result would be too large");
    sh->w_count = o->need_weights ? wc : 0;
    sh->flops = 4.0 * (double)pl->H * (double)pl->d * attn_sparsity_pairs(o, pl->Tq, pl->n) +
                attn_extra_cost(o, (double)pl->H, pl->Tq, pl->n, 2 * pl->d, 0, 0);
    attn_sparsity_dims(o, pl->Tq, pl->n, &sh->layout_rows, &sh->layout_cols, &sh->layout_block);
    return ATTN_OK;
}

attn_status attn_cache_plan(const attn_cache_request *req, attn_shapes *shapes, attn_error *err)
{
    cplan pl;
    attn_status st = make_plan(req, &pl, err);
    if (st == ATTN_OK && shapes) {
        pl.shapes.scratch_bytes = attn_front_scratch(&cache_front, &pl, 0);
        *shapes = pl.shapes;
    }
    return st;
}

static size_t cache_seed_specs(const void *p, attn_seed_spec *specs)
{
    (void)p, (void)specs;
    return 0;
}

static attn_status cache_bind(void *p, const attn_named *params, size_t n, attn_error *err)
{
    (void)p, (void)params, (void)n, (void)err;
    return ATTN_OK;
}

/* Whether a one-row step runs each KV head's group of query heads as the
 * rows of one job (pos_rows), so that the kernel reads the group's keys
 * and values once where a job a head read them once a head: a step's
 * options are the same for every head but the masks' place, which a row
 * stride takes (not ALiBi's slopes or the sinks, one a head; not a
 * sparsity pattern or hard attention, which do not go the rows' way). */
static int packs_heads(const cplan *pl)
{
    const attn_options *o = &pl->req.opt;
    return pl->Tq == 1 && pl->H > pl->Hkv && !o->alibi && !o->sinks &&
           o->sparsity.pattern == ATTN_SPARSE_NONE && o->hard == ATTN_HARD_NONE;
}

/* The sparsity pattern, rope's table (and copies when the kernel does not
 * rotate), then one head job per query head (per KV head when
 * packs_heads). */
static void cache_lay_out(void *p, attn_ws *ws)
{
    cplan *pl = p;
    const attn_options *o = &pl->req.opt;
    int64_t H = pl->H, Tq = pl->Tq, n = pl->n, d = pl->d;
    attn_sparse_lay_out(ws, o, Tq, n, &pl->sparse);
    if (o->rope.on) {
        attn_rope_plan(&o->rope, d, Tq, n, o->align == ATTN_ALIGN_BOTTOM_RIGHT ? n - Tq : 0,
                       &pl->rope);
        attn_rope_take(ws, &pl->rope);
        pl->copies = !attn_rope_in_kernel(o, Tq);
        double qf = (double)Tq * (double)H * (double)d, kf = (double)pl->Hkv * (double)n * (double)d;
        pl->qr = attn_ws_take(ws, pl->copies ? qf : 0.0, sizeof(float));
        pl->kr = attn_ws_take(ws, pl->copies ? kf : 0.0, sizeof(float));
    }
    if (ws->base) {
        attn_heads_take(ws, H, NULL, &pl->heads);
        return;
    }
    attn_head_job model; /* measuring: what the kernels will ask */
    attn_head_init(&model, o, 0, 0, H, Tq, n, attn_model_weights(o->need_weights));
    model.kind = ATTN_SCORE_DOT;
    model.d = model.dv = d;
    model.kv_group = H / pl->Hkv;
    if (packs_heads(pl)) {
        model.lq = model.pos_rows = H / pl->Hkv;
        model.kv_group = 1;
    }
    attn_heads_take(ws, H, &model, &pl->heads);
}

/* rope's table, and for the row driver the query rows and each KV head's
 * keys rotated into qr and kr. */
static void cache_rope(const attn_exec *ex, cplan *pl)
{
    attn_rope_table(ex, &pl->rope);
    if (!pl->copies)
        return;
    int64_t Hd = pl->H * pl->d, nd = pl->n * pl->d;
    attn_rope_pass p = pl->rope;
    attn_rope_set_rows(&p.set[0], pl->req.query.data, Hd, pl->qr, Hd, 1, pl->Tq, pl->H);
    for (int64_t g = 0; g < pl->Hkv; g++) {
        attn_rope_set_rows(&p.set[1], pl->req.key[g], pl->d, pl->kr + g * nd, pl->d, 1, pl->n, 1);
        attn_rope_rows(ex, &p);
        p.set[0].rows = 0; /* the queries once */
    }
}

/* Head h's job j of a one-row step (packs_heads) as the job of its
 * group's rows: row i is head h + i, whose query, output, weights, lse and
 * masks lie a head further on, at the one position. */
static void pack_group(attn_head_job *j, const attn_options *o, int64_t h, int64_t H, int64_t n,
                       int64_t d, int64_t group)
{
    attn_row_masks next;
    attn_masks_at(o, 0, h + 1, H, 1, n, &next);
    j->lq = j->pos_rows = group;
    j->a_stride = j->o_stride = d;
    j->w_stride = n;
    if (j->m.mask)
        j->m.mask_stride = next.mask - j->m.mask;
    if (j->m.bias)
        j->m.bias_stride = next.bias - j->m.bias;
}

static attn_status cache_run(const attn_exec *ex, void *p, float *out, float *w, float *lse,
                             attn_error *err)
{
    cplan *pl = p;
    pl->lse = lse;
    const attn_options *o = &pl->req.opt;
    int64_t H = pl->H, Tq = pl->Tq, n = pl->n, d = pl->d, group = H / pl->Hkv;
    float scale = pl->req.has_scale ? pl->req.scale : (float)(1.0 / sqrt((double)d));
    if (o->rope.on)
        cache_rope(ex, pl);
    const float *q = pl->copies ? pl->qr : pl->req.query.data;
    int packed = packs_heads(pl);
    int64_t jobs = packed ? pl->Hkv : H;
    for (int64_t x = 0; x < jobs; x++) {
        int64_t h = packed ? x * group : x, g = h / group;
        attn_head_job *j = &pl->heads.jobs[x];
        attn_head_init(j, o, 0, h, H, Tq, n, o->need_weights ? w + h * Tq * n : NULL);
        j->lse = pl->lse ? pl->lse + h * Tq : NULL;
        j->kind = ATTN_SCORE_DOT;
        j->d = j->dv = d;
        j->scale = scale;
        if (o->sparsity.pattern != ATTN_SPARSE_NONE)
            j->m.sparse = &pl->sparse;
        j->a = q + h * d; j->a_stride = H * d;
        j->b = pl->copies ? pl->kr + g * n * d : pl->req.key[g]; j->b_stride = d;
        j->v = pl->req.value[g]; j->v_stride = d;
        j->o = out + h * d; j->o_stride = H * d;
        j->rope = o->rope.on && !pl->copies ? &pl->rope : NULL;
        if (packed)
            pack_group(j, o, h, H, n, d, group);
    }
    return attn_exec_heads(ex, &pl->heads, (size_t)jobs, err);
}

attn_status attn_cache_compute(attn_ctx *ctx, const attn_cache_request *req, float *output,
                               float *weights, attn_error *err)
{
    return attn_cache_compute_lse(ctx, req, output, weights, NULL, err);
}

attn_status attn_cache_compute_lse(attn_ctx *ctx, const attn_cache_request *req, float *output,
                                   float *weights, float *lse, attn_error *err)
{
    cplan pl;
    attn_status st = make_plan(req, &pl, err);
    if (st == ATTN_OK && lse)
        st = attn_check_lse(ATTN_RULE_DOT, &req->opt, "attention over a KV cache", err);
    return st != ATTN_OK ? st
                         : attn_execute(ctx, &cache_front, &pl, 0, &pl.shapes,
                                        output, weights, lse, err);
}

static const attn_front cache_front = {
    "attn_cache_compute", cache_seed_specs, cache_bind, cache_lay_out, cache_run,
};
