/* multihead.c - multi-head attention (attn_mha_compute):
 * torch.nn.MultiheadAttention semantics with grouped/multi-query heads,
 * sinusoidal or learned positional encoding and an optional residual +
 * LayerNorm. Multi-head's front end of the pipeline (exec.c): validation
 * (attn_mha_plan), its parameters, projections, heads and cost; the
 * pipeline does the rest. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "pool.h"

attn_mha_request attn_mha_request_default(void)
{
    attn_mha_request r;
    memset(&r, 0, sizeof r);
    r.opt = attn_options_default();
    return r;
}

/* The accepted parameter names; the index is the slot in mplan.p. */
enum {
    P_IN_W, P_IN_B, P_QW, P_KW, P_VW, P_OUT_W, P_OUT_B,          /* PyTorch's names */
    P_WQ_W, P_WQ_B, P_WK_W, P_WK_B, P_WV_W, P_WV_B, P_WO_W, P_WO_B, /* W_* names */
    P_NORM_W, P_NORM_B, P_POS,
    P_COUNT
};

static const char *const pnames[P_COUNT] = {
    "in_proj_weight", "in_proj_bias", "q_proj_weight", "k_proj_weight", "v_proj_weight",
    "out_proj.weight", "out_proj.bias",
    "W_q.weight", "W_q.bias", "W_k.weight", "W_k.bias", "W_v.weight", "W_v.bias",
    "W_o.weight", "W_o.bias",
    "norm.weight", "norm.bias", "pos_embedding.weight",
};

/* The field of the parameter in slot i, for attn_fail. */
#define PFIELD(i) ATTN_PARAM_FIELD(pnames[i])

/* A validated request, then the workspace pieces mha_lay_out took. */
typedef struct {
    attn_mha_request req; /* a copy; its params may be the pipeline's seeded set */
    attn_dims d;      /* Dq = E, Dk = kdim, Dv = vdim */
    int64_t H, Hkv, hd, ekv, E3;
    const attn_tensor *p[P_COUNT];
    /* Resolved projections (biases NULL when zero). */
    const float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo, *nw, *nb, *pos;
    attn_shapes shapes;
    attn_sparse sparse; /* the sparsity pattern in the kernels' form */
    int pe, avg, fused;
    int hm;           /* the projections written head by head (heads_major) */
    int64_t qw;       /* floats per row of the q projection (3E when fused); hd when hm */
    int64_t ks;       /* row stride of the k and v projections; hd when hm */
    int64_t jobs_n;   /* head jobs per kernel run */
    float *enc[3];    /* query, key, value with the positional encoding */
    float *qp, *kp, *vp, *ao, *hw; /* projections, heads' output, per-head weights */
    attn_rope_pass rope; /* rotates qp and kp in place */
    attn_heads heads;
    const attn_mha_weights *pw; /* the request's prepared weights, or NULL */
    float *lse; /* the run's lse buffer (attn_mha_compute_lse), or NULL */
} mplan;

/* Prepared weights: the library's copy of the parameters, and the
 * projection matrices of that copy packed for the matrix kernel. */
#define PACKED_MAX 5
typedef struct {
    const float *b;   /* the matrix in the copy (n x k, contiguous) */
    int64_t n, k;
    const float *bp;  /* packed */
} packed_mat;
struct attn_mha_weights {
    attn_param_set *set;
    const void *packer; /* the kernel variant that packed them */
    packed_mat packed[PACKED_MAX];
    int n_packed;
    float *panels;      /* every packed matrix, one block */
    size_t panel_floats;
};

static const attn_front mha_front;

/* Each given parameter into its slot: unknown names and duplicates are
 * ATTN_ERR_PARAM. */
static attn_status bind_names(const attn_mha_request *req, mplan *pl, attn_error *err)
{
    for (size_t g = 0; g < req->n_params; g++) {
        const char *name = req->params[g].name ? req->params[g].name : "";
        int at = -1;
        for (int i = 0; i < P_COUNT; i++)
            if (strcmp(name, pnames[i]) == 0)
                at = i;
        if (at < 0)
            return attn_fail(err, ATTN_ERR_PARAM, ATTN_PARAM_FIELD(name),
                             "unknown parameter %s; multi-head takes in_proj_weight, "
                             "in_proj_bias, q_proj_weight, k_proj_weight, v_proj_weight, "
                             "out_proj.weight, out_proj.bias, or W_q/W_k/W_v/W_o .weight and "
                             ".bias, and norm.weight, norm.bias, pos_embedding.weight",
                             name);
        if (pl->p[at])
            return attn_fail(err, ATTN_ERR_PARAM, PFIELD(at), "parameter %s is given twice",
                             name);
        pl->p[at] = &req->params[g].t;
    }
    return ATTN_OK;
}

/* One naming scheme, norm.* only with residual_norm; *wset tells whether
 * the W_* names are used. */
static attn_status check_naming(const attn_mha_request *req, const mplan *pl, int *wset,
                                attn_error *err)
{
    int torch = 0, first_w = -1, first_t = -1;
    *wset = 0;
    for (int i = P_IN_W; i <= P_OUT_B; i++)
        if (pl->p[i]) { torch = 1; if (first_t < 0) first_t = i; }
    for (int i = P_WQ_W; i <= P_WO_B; i++)
        if (pl->p[i]) { *wset = 1; if (first_w < 0) first_w = i; }
    if (torch && *wset)
        return attn_fail(err, ATTN_ERR_PARAM, PFIELD(first_w),
                         "%s cannot be mixed with %s; use either PyTorch's in_proj/out_proj "
                         "names or the W_q/W_k/W_v/W_o names",
                         pnames[first_w], pnames[first_t]);
    if (!req->residual_norm)
        for (int i = P_NORM_W; i <= P_NORM_B; i++)
            if (pl->p[i])
                return attn_fail(err, ATTN_ERR_PARAM, PFIELD(i),
                                 "%s is used only when residual_norm is true", pnames[i]);
    int learned = req->positional_encoding == ATTN_PE_LEARNED;
    if (!learned && pl->p[P_POS])
        return attn_fail(err, ATTN_ERR_PARAM, PFIELD(P_POS),
                         "pos_embedding.weight is used only when positional_encoding is "
                         "\"learned\"");
    if (learned && !pl->p[P_POS])
        return attn_fail(err, ATTN_ERR_PARAM, PFIELD(P_POS),
                         "params.pos_embedding.weight is missing; the learned positional "
                         "encoding needs (P, E) with P >= max(Lq, Lk) (params are all or none)");
    if (*wset) {
        static const int req_w[4] = {P_WQ_W, P_WK_W, P_WV_W, P_WO_W};
        static const char *const shp[4] = {"(E, E)", "(Hkv*E/H, kdim)", "(Hkv*E/H, vdim)",
                                           "(E, E)"};
        for (int i = 0; i < 4; i++)
            if (!pl->p[req_w[i]])
                return attn_fail(err, ATTN_ERR_PARAM, PFIELD(req_w[i]),
                                 "params.%s is missing; multi-head with the W_* names needs "
                                 "W_q.weight, W_k.weight, W_v.weight, W_o.weight (here %s) "
                                 "(params are all or none)",
                                 pnames[req_w[i]], shp[i]);
    }
    return ATTN_OK;
}

/* PyTorch's names: in_proj_weight or all of q/k/v_proj_weight, and
 * out_proj.weight; one key head per query head; in_proj_weight only with
 * kdim = vdim = E. */
static attn_status check_torch_names(const mplan *pl, attn_error *err)
{
    int split = pl->p[P_QW] || pl->p[P_KW] || pl->p[P_VW];
    if (split && pl->p[P_IN_W])
        return attn_fail(err, ATTN_ERR_PARAM, PFIELD(P_QW),
                         "give either in_proj_weight or q_proj_weight, k_proj_weight and "
                         "v_proj_weight, not both");
    if (split) {
        for (int i = P_QW; i <= P_VW; i++)
            if (!pl->p[i])
                return attn_fail(err, ATTN_ERR_PARAM, PFIELD(i),
                                 "params.%s is missing; q_proj_weight, k_proj_weight and "
                                 "v_proj_weight go together (params are all or none)",
                                 pnames[i]);
    } else if (!pl->p[P_IN_W]) {
        return attn_fail(err, ATTN_ERR_PARAM, PFIELD(P_IN_W),
                         "params.in_proj_weight is missing; multi-head needs in_proj_weight "
                         "(3E, E) or q_proj_weight, k_proj_weight, v_proj_weight "
                         "(params are all or none)");
    }
    if (!pl->p[P_OUT_W])
        return attn_fail(err, ATTN_ERR_PARAM, PFIELD(P_OUT_W),
                         "params.out_proj.weight is missing; multi-head needs out_proj.weight "
                         "(E, E) (params are all or none)");
    if (pl->Hkv != pl->H)
        return attn_fail(err, ATTN_ERR_PARAM, "num_kv_heads",
                         "num_kv_heads (%lld) < num_heads (%lld) needs the W_q/W_k/W_v/W_o "
                         "parameter names (PyTorch's in_proj/out_proj have one key head per "
                         "query head)",
                         (long long)pl->Hkv, (long long)pl->H);
    if (pl->p[P_IN_W] && (pl->d.Dk != pl->d.Dq || pl->d.Dv != pl->d.Dq))
        return attn_fail(err, ATTN_ERR_SHAPE, PFIELD(P_IN_W),
                         "in_proj_weight needs kdim = vdim = E, but key has %lld features, "
                         "value %lld and query %lld; give q_proj_weight, k_proj_weight and "
                         "v_proj_weight instead",
                         (long long)pl->d.Dk, (long long)pl->d.Dv, (long long)pl->d.Dq);
    return ATTN_OK;
}

static attn_status bind_mha_params(const attn_mha_request *req, mplan *pl, attn_error *err)
{
    int wset;
    attn_status st = bind_names(req, pl, err);
    if (st != ATTN_OK || (st = check_naming(req, pl, &wset, err)) != ATTN_OK)
        return st;
    return wset ? ATTN_OK : check_torch_names(pl, err);
}

/* pos_embedding.weight: (P, E) with P >= max(Lq, Lk), a row per position. */
static attn_status check_pos_table(const mplan *pl, attn_error *err)
{
    const attn_tensor *t = pl->p[P_POS];
    int64_t E = pl->d.Dq, need = pl->d.Lq > pl->d.Lk ? pl->d.Lq : pl->d.Lk;
    if (!t)
        return ATTN_OK;
    if (t->rank != 2 || t->shape[1] != E || t->shape[0] < 1) {
        char got[96];
        attn_fmt_shape(got, sizeof got, t->rank, t->shape);
        return attn_fail(err, ATTN_ERR_SHAPE, PFIELD(P_POS),
                         "params.pos_embedding.weight has shape %s but multi-head needs (P, E) "
                         "= (P, %lld) with P >= max(Lq, Lk) = %lld",
                         got, (long long)E, (long long)need);
    }
    if (t->shape[0] < need)
        return attn_fail(err, ATTN_ERR_PARAM, PFIELD(P_POS),
                         "params.pos_embedding.weight has %lld rows, fewer than the %lld "
                         "positions max(Lq, Lk) needs",
                         (long long)t->shape[0], (long long)need);
    if (!t->data)
        return attn_fail(err, ATTN_ERR_ARG, PFIELD(P_POS), "params.pos_embedding.weight has no data");
    return ATTN_OK;
}

static attn_status check_mha_shapes(mplan *pl, attn_error *err)
{
    int64_t E = pl->d.Dq, kd = pl->d.Dk, vd = pl->d.Dv, ekv = pl->ekv, E3 = pl->E3;
    struct { int rank; int64_t s0, s1; const char *sym; } want[P_COUNT] = {
        [P_IN_W] = {2, E3, E, "(3E, E)"},      [P_IN_B] = {1, E3, 0, "(3E)"},
        [P_QW] = {2, E, E, "(E, E)"},          [P_KW] = {2, E, kd, "(E, kdim)"},
        [P_VW] = {2, E, vd, "(E, vdim)"},      [P_OUT_W] = {2, E, E, "(E, E)"},
        [P_OUT_B] = {1, E, 0, "(E)"},          [P_WQ_W] = {2, E, E, "(E, E)"},
        [P_WQ_B] = {1, E, 0, "(E)"},           [P_WK_W] = {2, ekv, kd, "(Hkv*E/H, kdim)"},
        [P_WK_B] = {1, ekv, 0, "(Hkv*E/H)"},   [P_WV_W] = {2, ekv, vd, "(Hkv*E/H, vdim)"},
        [P_WV_B] = {1, ekv, 0, "(Hkv*E/H)"},   [P_WO_W] = {2, E, E, "(E, E)"},
        [P_WO_B] = {1, E, 0, "(E)"},           [P_NORM_W] = {1, E, 0, "(E)"},
        [P_NORM_B] = {1, E, 0, "(E)"},          [P_POS] = {0, 0, 0, NULL}, /* below */
    };
    for (int i = 0; i < P_COUNT; i++) {
        if (!pl->p[i] || i == P_POS)
            continue;
        int64_t shape[2] = {want[i].s0, want[i].s1};
        attn_status st = attn_check_param_shape(pnames[i], pl->p[i], want[i].rank, shape,
                                                want[i].sym, "multi-head", err);
        if (st != ATTN_OK)
            return st;
    }
    return check_pos_table(pl, err);
}

static const float *pdata(const mplan *pl, int slot)
{
    return pl->p[slot] ? pl->p[slot]->data : NULL;
}

/* The projections' weights and biases from whichever names were given. */
static void resolve(mplan *pl)
{
    int64_t E = pl->d.Dq;
    if (pl->p[P_WQ_W]) {
        pl->wq = pdata(pl, P_WQ_W); pl->bq = pdata(pl, P_WQ_B);
        pl->wk = pdata(pl, P_WK_W); pl->bk = pdata(pl, P_WK_B);
        pl->wv = pdata(pl, P_WV_W); pl->bv = pdata(pl, P_WV_B);
        pl->wo = pdata(pl, P_WO_W); pl->bo = pdata(pl, P_WO_B);
    } else {
        if (pl->p[P_IN_W]) {
            const float *w = pdata(pl, P_IN_W);
            pl->wq = w; pl->wk = w + E * E; pl->wv = w + 2 * E * E;
        } else {
            pl->wq = pdata(pl, P_QW); pl->wk = pdata(pl, P_KW); pl->wv = pdata(pl, P_VW);
        }
        const float *b = pdata(pl, P_IN_B);
        pl->bq = b; pl->bk = b ? b + E : NULL; pl->bv = b ? b + 2 * E : NULL;
        pl->wo = pdata(pl, P_OUT_W); pl->bo = pdata(pl, P_OUT_B);
    }
    pl->nw = pdata(pl, P_NORM_W);
    pl->nb = pdata(pl, P_NORM_B);
    pl->pos = pdata(pl, P_POS);
}

/* The parameters attn_mha_seed_params draws for the planned sizes, in
 * drawing order, into s (room for ATTN_SEED_MAX); returns how many. The
 * one table both seeding and the plan's cost read. */
static size_t mha_seed_specs(const void *p, attn_seed_spec *s)
{
    const mplan *pl = p;
    int64_t E = pl->d.Dq, kd = pl->d.Dk, vd = pl->d.Dv, ekv = pl->ekv, E3 = pl->E3;
    size_t n = 0;
#define SPEC(nm, r, a, b, fan) s[n++] = (attn_seed_spec){nm, r, {a, b}, fan, ATTN_INIT_UNIFORM}
    if (pl->Hkv == pl->H && kd == E && vd == E) {
        SPEC("in_proj_weight", 2, E3, E, E);
        SPEC("in_proj_bias", 1, E3, 0, E);
        SPEC("out_proj.weight", 2, E, E, E);
        SPEC("out_proj.bias", 1, E, 0, E);
    } else if (pl->Hkv == pl->H) {
        SPEC("q_proj_weight", 2, E, E, E);
        SPEC("k_proj_weight", 2, E, kd, kd);
        SPEC("v_proj_weight", 2, E, vd, vd);
        SPEC("in_proj_bias", 1, E3, 0, E);
        SPEC("out_proj.weight", 2, E, E, E);
        SPEC("out_proj.bias", 1, E, 0, E);
    } else {
        SPEC("W_q.weight", 2, E, E, E);
        SPEC("W_q.bias", 1, E, 0, E);
        SPEC("W_k.weight", 2, ekv, kd, kd);
        SPEC("W_k.bias", 1, ekv, 0, kd);
        SPEC("W_v.weight", 2, ekv, vd, vd);
        SPEC("W_v.bias", 1, ekv, 0, vd);
        SPEC("W_o.weight", 2, E, E, E);
        SPEC("W_o.bias", 1, E, 0, E);
    }
#undef SPEC
    if (pl->req.positional_encoding == ATTN_PE_LEARNED) {
        int64_t P = pl->d.Lq > pl->d.Lk ? pl->d.Lq : pl->d.Lk;
        s[n++] = (attn_seed_spec){"pos_embedding.weight", 2, {P, E}, 0, ATTN_INIT_NORMAL};
    }
    if (pl->req.residual_norm) {
        s[n++] = (attn_seed_spec){"norm.weight", 1, {E, 0}, E, ATTN_INIT_ONES};
        s[n++] = (attn_seed_spec){"norm.bias", 1, {E, 0}, E, ATTN_INIT_ZEROS};
    }
    return n;
}

/* Self-attention whose q/k/v weights (and biases) lie back to back, as
 * in_proj_weight does (and the seeded set does): one GEMM of 3E outputs
 * packs each input row block once instead of three times, and the heads
 * read q, k and v straight out of its (L, 3E) rows. */
static int is_fused(const mplan *pl)
{
    int64_t E = pl->d.Dq;
    if (pl->req.key.rank || pl->req.value.rank || pl->Hkv != pl->H)
        return 0;
    if (!pl->wq) /* planned without parameters: the seeded in_proj_* */
        return 1;
    return pl->wk == pl->wq + E * E && pl->wv == pl->wk + E * E &&
           ((!pl->bq && !pl->bk && !pl->bv) ||
            (pl->bq && pl->bk == pl->bq + E && pl->bv == pl->bk + E));
}

/* Floating-point operations of multi-head (2 per multiply-add): the q, k,
 * v and output projections, and per head the scores and the weighted sum
 * (or linear attention's), with the score pipeline's cost (cost.c). */
static double mha_flops(const mplan *pl)
{
    const attn_dims *d = &pl->d;
    double B = (double)d->B, Lq = (double)d->Lq, Lk = (double)d->Lk, E = (double)d->Dq;
    double proj = 2.0 * Lq * E * E + Lk * (double)pl->ekv * (double)(d->Dk + d->Dv);
    if (pl->req.linear) {
        attn_head_job m;
        memset(&m, 0, sizeof m);
        m.lq = d->Lq; m.lk = d->Lk; m.d = m.dv = pl->hd;
        m.w = attn_model_weights(pl->req.opt.need_weights);
        return 2.0 * B * proj + attn_linear_flops(&m, B * (double)pl->H, pl->req.opt.causal);
    }
    return 2.0 * B * (proj + 2.0 * attn_sparsity_pairs(&pl->req.opt, d->Lq, d->Lk) * E) +
           attn_extra_cost(&pl->req.opt, B * (double)pl->H, d->Lq, d->Lk, 2 * pl->hd, 0, 0);
}

/* shapes.param_floats: the floats of the bound parameters, or of the
 * seeded set when none are given, which must be one that can be made (a
 * huge E is ATTN_ERR_TOO_LARGE here, as attn_mha_compute finds). */
static attn_status count_params(mplan *pl, attn_error *err)
{
    if (pl->req.n_params > 0) {
        pl->shapes.param_floats = attn_tensors_floats(pl->p, P_COUNT);
        return ATTN_OK;
    }
    attn_seed_spec s[ATTN_SEED_MAX];
    return attn_seed_count(s, mha_seed_specs(pl, s), &pl->shapes.param_floats, err);
}

/* num_heads, num_kv_heads and positional_encoding; the head sizes. */
static attn_status check_heads(const attn_mha_request *req, mplan *pl, attn_error *err)
{
    int64_t E = pl->d.Dq;
    pl->H = req->num_heads;
    if (pl->H < 1)
        return attn_fail(err, ATTN_ERR_PARAM, "num_heads",
                         "num_heads must be at least 1, got %lld", (long long)pl->H);
    if (E % pl->H != 0)
        return attn_fail(err, ATTN_ERR_PARAM, "num_heads",
                         "the embedding size E = %lld (query's features) is not divisible by "
                         "num_heads = %lld",
                         (long long)E, (long long)pl->H);
    attn_status st = attn_check_kv_heads(pl->H, req->num_kv_heads, &pl->Hkv, err);
    if (st != ATTN_OK)
        return st;
    pl->hd = E / pl->H;
    pl->ekv = pl->Hkv * pl->hd;
    if (!attn_size_mul(E, 3, &pl->E3))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "query", "E is too large");
    if (req->positional_encoding != ATTN_PE_NONE &&
        req->positional_encoding != ATTN_PE_SINUSOIDAL &&
        req->positional_encoding != ATTN_PE_LEARNED)
        return attn_fail(err, ATTN_ERR_PARAM, "positional_encoding",
                         "positional_encoding must be \"sinusoidal\", \"learned\" or absent");
    if (req->positional_encoding == ATTN_PE_LEARNED && (pl->d.Dk != E || pl->d.Dv != E))
        return attn_fail(err, ATTN_ERR_SHAPE, pl->d.Dk != E ? "key" : "value",
                         "the learned positional encoding adds rows of (P, E) to query, key "
                         "and value, but key has %lld features and value %lld (E = %lld)",
                         (long long)pl->d.Dk, (long long)pl->d.Dv, (long long)E);
    return ATTN_OK;
}

/* The result shapes and the cost but for the workspace (attn_mha_plan's),
 * once everything is validated. */
static attn_status fill_shapes(mplan *pl, attn_error *err)
{
    const attn_dims *d = &pl->d;
    attn_shapes *sh = &pl->shapes;
    int o = d->batched, r = 0;
    sh->out_rank = 2 + o;
    if (o)
        sh->out_shape[0] = d->B;
    sh->out_shape[o] = d->Lq;
    sh->out_shape[o + 1] = d->Dq;
    if (o)
        sh->w_shape[r++] = d->B;
    if (!pl->req.average_weights)
        sh->w_shape[r++] = pl->H;
    sh->w_shape[r++] = d->Lq;
    sh->w_shape[r++] = d->Lk;
    sh->w_rank = r;
    int64_t wc;
    if (!attn_count(sh->out_rank, sh->out_shape, &sh->out_count) ||
        !attn_count(sh->w_rank, sh->w_shape, &wc))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "", "the result would be too large");
    sh->w_count = pl->req.opt.need_weights ? wc : 0;
    attn_status st = count_params(pl, err);
    if (st != ATTN_OK)
        return st;
    sh->flops = mha_flops(pl);
    attn_sparsity_dims(&pl->req.opt, d->Lq, d->Lk, &sh->layout_rows, &sh->layout_cols,
                       &sh->layout_block);
    return ATTN_OK;
}

/* Multi-head attention takes the options rule dot takes, or with linear
 * those of rule linear; `who` in its refusals. */
static attn_rule mha_as(const attn_mha_request *req)
{
    return req->linear ? ATTN_RULE_LINEAR : ATTN_RULE_DOT;
}

static const char *mha_who(const attn_mha_request *req)
{
    return req->linear ? "multi-head linear attention" : "multi-head softmax attention";
}

/* Validates everything but the parameters when with_params is 0. */
static attn_status make_mplan(const attn_mha_request *req, int with_params, mplan *pl,
                              attn_error *err)
{
    memset(pl, 0, sizeof *pl);
    if (!req)
        return attn_fail(err, ATTN_ERR_ARG, "", "NULL request");
    pl->req = *req;
    if (req->weights) { /* the prepared copy stands for params */
        if (req->n_params)
            return attn_fail(err, ATTN_ERR_ARG, "weights",
                             "give either params or prepared weights, not both");
        pl->pw = req->weights;
        pl->req.params = pl->pw->set->items;
        pl->req.n_params = pl->pw->set->n;
        pl->req.weights = NULL;
    }
    const attn_tensor *k = req->key.rank ? &req->key : &req->query;
    const attn_tensor *v = req->value.rank ? &req->value : &req->query;
    attn_status st = attn_check_qkv(&req->query, k, v, 0, 0, &pl->d, err);
    if (st != ATTN_OK)
        return st;
    attn_dims *d = &pl->d;
    if (d->Lv != d->Lk)
        return attn_fail(err, ATTN_ERR_SHAPE, "value",
                         "value has %lld rows but key has %lld; multi-head needs one value "
                         "row per key (Lv = Lk)%s",
                         (long long)d->Lv, (long long)d->Lk,
                         req->value.rank ? "" : "; value was not sent, so it is the query: send value too");
    if ((st = check_heads(req, pl, err)) != ATTN_OK)
        return st;
    attn_score_dims sd = {d->B, pl->H, d->Lq, d->Lk, 0, "Lk"};
    if ((st = attn_refuse_layout(&req->opt, mha_who(req), err)) != ATTN_OK)
        return st;
    st = attn_check_options(&req->opt, mha_as(req), mha_who(req), &sd, err);
    if (st != ATTN_OK || (st = attn_check_rope(&req->opt.rope, pl->hd, err)) != ATTN_OK)
        return st;
    attn_maskish_rank4(&pl->req.opt, &sd);
    if (with_params && pl->req.n_params > 0) {
        if (!pl->req.params)
            return attn_fail(err, ATTN_ERR_ARG, "params", "n_params > 0 but params is NULL");
        if ((st = bind_mha_params(&pl->req, pl, err)) != ATTN_OK ||
            (st = check_mha_shapes(pl, err)) != ATTN_OK)
            return st;
        resolve(pl);
    }
    return fill_shapes(pl, err);
}

attn_status attn_mha_plan(const attn_mha_request *req, attn_shapes *shapes, attn_error *err)
{
    mplan pl;
    attn_status st = make_mplan(req, 1, &pl, err);
    if (st == ATTN_OK && shapes) {
        pl.shapes.scratch_bytes = attn_front_scratch(&mha_front, &pl, pl.req.n_params);
        *shapes = pl.shapes;
    }
    return st;
}

attn_status attn_mha_seed_params(const attn_mha_request *req, uint64_t seed,
                                 attn_param_set **out, attn_error *err)
{
    if (!out)
        return attn_fail(err, ATTN_ERR_ARG, "", "attn_mha_seed_params: NULL argument");
    mplan pl;
    attn_status st = make_mplan(req, 0, &pl, err);
    if (st != ATTN_OK)
        return st;
    attn_seed_spec s[ATTN_SEED_MAX];
    size_t n = mha_seed_specs(&pl, s);
    return attn_seed_build(s, n, seed, out, err);
}

/* Adds the sinusoidal encoding of Vaswani et al. (2017, section 3.5) to x
 * (B, L, d) into y: PE[p,2i] = sin(p / 10000^(2i/d)), PE[p,2i+1] = cos(same).
 * The angle is computed in double, so large positions stay exact rather
 * than inheriting float32 rounding of p * freq. */
static void add_posenc(const float *x, float *y, int64_t B, int64_t L, int64_t d)
{
    for (int64_t c = 0; c < d; c++) {
        double inv_freq = 1.0 / pow(10000.0, (double)(c - c % 2) / (double)d);
        for (int64_t p = 0; p < L; p++) {
            double ang = (double)p * inv_freq;
            float pe = (float)((c & 1) ? cos(ang) : sin(ang));
            for (int64_t b = 0; b < B; b++) {
                int64_t e = (b * L + p) * d + c;
                y[e] = x[e] + pe;
            }
        }
    }
}

/* Adds rows 0..L-1 of a learned table (an nn.Embedding of width d) to x
 * (B, L, d) into y. */
static void add_table(const float *x, const float *table, float *y, int64_t B, int64_t L,
                      int64_t d)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t e = 0; e < L * d; e++)
            y[b * L * d + e] = x[b * L * d + e] + table[e];
}

/* LayerNorm over the last dimension (Ba, Xu et al. 2016), eps 1e-5, biased
 * variance as torch.nn.LayerNorm; statistics in double. */
static void layer_norm(float *x, int64_t rows, int64_t E, const float *w, const float *b)
{
    for (int64_t r = 0; r < rows; r++) {
        float *row = x + r * E;
        double mean = 0.0, var = 0.0;
        for (int64_t c = 0; c < E; c++)
            mean += row[c];
        mean /= (double)E;
        for (int64_t c = 0; c < E; c++)
            var += (row[c] - mean) * (row[c] - mean);
        var /= (double)E;
        double inv = 1.0 / sqrt(var + 1e-5);
        for (int64_t c = 0; c < E; c++) {
            float y = (float)((row[c] - mean) * inv);
            row[c] = y * (w ? w[c] : 1.0f) + (b ? b[c] : 0.0f);
        }
    }
}

/* ------------------------------------------------ the pipeline's stages */

static attn_status mha_bind(void *p, const attn_named *params, size_t n, attn_error *err)
{
    mplan *pl = p;
    attn_mha_request r = pl->req;
    r.params = params;
    r.n_params = n;
    return make_mplan(&r, 1, pl, err);
}

/* The inputs the projections read, x[0..2] = query, key, value: with the
 * positional encoding added when asked, and self-attention's key and value
 * the (encoded) query. */
static void mha_inputs(const mplan *pl, const float *x[3])
{
    const attn_dims *d = &pl->d;
    const attn_mha_request *r = &pl->req;
    x[0] = r->query.data;
    x[1] = r->key.rank ? r->key.data : NULL;
    x[2] = r->value.rank ? r->value.data : NULL;
    if (pl->pe) {
        int64_t L[3] = {d->Lq, d->Lk, d->Lk}, D[3] = {d->Dq, d->Dk, d->Dv};
        for (int i = 0; i < 3; i++)
            if (x[i]) {
                if (pl->pos)
                    add_table(x[i], pl->pos, pl->enc[i], d->B, L[i], D[i]);
                else
                    add_posenc(x[i], pl->enc[i], d->B, L[i], D[i]);
                x[i] = pl->enc[i];
            }
    }
    if (!x[1]) x[1] = x[0];
    if (!x[2]) x[2] = x[0];
}

/* The projection C (m x n, stride ldc) = A (m x k, stride k) W^T + bias,
 * W (n x k) contiguous; with W's packed form when the prepared weights
 * hold it. */
static attn_gemm_call mha_gemm(const mplan *pl, int64_t m, int64_t n, int64_t k, const float *a,
                               const float *w, const float *bias, float *c, int64_t ldc)
{
    attn_gemm_call g = {m, n, k, a, w, bias, c, k, k, ldc, NULL, NULL, 0, 0};
    const attn_mha_weights *pw = pl->pw;
    for (int i = 0; pw && w && i < pw->n_packed; i++)
        if (pw->packed[i].b == w && pw->packed[i].n == n && pw->packed[i].k == k) {
            g.bp = pw->packed[i].bp;
            g.packer = pw->packer;
        }
    return g;
}

/* A projection of m rows written head by head when the plan says so. */
static attn_gemm_call heads_out(const mplan *pl, attn_gemm_call g)
{
    if (pl->hm) {
        g.ldc = g.cg = pl->hd;
        g.cgs = g.m * pl->hd;
    }
    return g;
}

/* The q, k and v projections into g (one GEMM of 3E outputs when fused);
 * how many. x: the inputs, NULL while measuring. */
static int mha_gemms(const mplan *pl, const float *const x[3], attn_gemm_call *g)
{
    const attn_dims *d = &pl->d;
    int64_t BQ = d->B * d->Lq, BK = d->B * d->Lk, E = d->Dq, kd = d->Dk, vd = d->Dv;
    int64_t ekv = pl->ekv;
    const float *in[3] = {x ? x[0] : NULL, x ? x[1] : NULL, x ? x[2] : NULL};
    if (pl->fused) {
        g[0] = heads_out(pl, mha_gemm(pl, BQ, pl->E3, E, in[0], pl->wq, pl->bq, pl->qp, pl->E3));
        return 1;
    }
    g[0] = heads_out(pl, mha_gemm(pl, BQ, E, E, in[0], pl->wq, pl->bq, pl->qp, E));
    g[1] = heads_out(pl, mha_gemm(pl, BK, ekv, kd, in[1], pl->wk, pl->bk, pl->kp, ekv));
    g[2] = heads_out(pl, mha_gemm(pl, BK, ekv, vd, in[2], pl->wv, pl->bv, pl->vp, ekv));
    return 3;
}

/* The output projection of the heads' concatenated outputs. */
static attn_gemm_call mha_out_gemm(const mplan *pl, float *out)
{
    int64_t E = pl->d.Dq;
    return mha_gemm(pl, pl->d.B * pl->d.Lq, E, E, pl->ao, pl->wo, pl->bo, out, E);
}

/* Whether the projections are written head by head (B rows of L x hd
 * per head, each head's q, k and v rows contiguous: attn_gemm_nt_packed's
 * column groups) instead of as rows that interleave the heads. Then a
 * head's consecutive keys lie hd floats apart, not kilobytes (a TLB miss
 * and no hardware prefetch for nearly every key row), for no copy: the
 * projection only stores its results elsewhere. Not when rope rotates the
 * rows before the kernels, which reads the interleaved rows. */
static int heads_major(const mplan *pl)
{
    const attn_options *o = &pl->req.opt;
    return pl->H > 1 && !(o->rope.on && !attn_rope_in_kernel(o, pl->d.Lq));
}

/* Batch rows whose head jobs run together: every row (one when the
 * weights are averaged, row by row), as many as keep the jobs within
 * ATTN_JOBS_PER_RUN (at least one row). */
static int64_t rows_per_run(const mplan *pl)
{
    int64_t rows = ATTN_JOBS_PER_RUN / pl->H;
    return pl->avg ? 1 : rows < 1 ? 1 : rows < pl->d.B ? rows : pl->d.B;
}

/* The pieces: the encoded inputs (with positional encoding), the q (or
 * fused q/k/v), k and v projections, the heads' output, the per-head
 * weights when they are averaged, then the head jobs of one kernel run;
 * and what the kernels will ask. */
static void mha_lay_out(void *p, attn_ws *ws)
{
    mplan *pl = p;
    const attn_dims *d = &pl->d;
    double bq = (double)d->B * (double)d->Lq, bk = (double)d->B * (double)d->Lk;
    int has_k = pl->req.key.rank != 0, has_v = pl->req.value.rank != 0;
    pl->pe = pl->req.positional_encoding != ATTN_PE_NONE;
    pl->avg = pl->req.opt.need_weights && pl->req.average_weights;
    pl->fused = is_fused(pl);
    pl->hm = heads_major(pl);
    pl->qw = pl->hm ? pl->hd : pl->fused ? pl->E3 : d->Dq;
    pl->ks = pl->hm ? pl->hd : pl->fused ? pl->qw : pl->ekv;
    pl->jobs_n = rows_per_run(pl) * pl->H;
    pl->enc[0] = attn_ws_take(ws, pl->pe ? bq * (double)d->Dq : 0.0, sizeof(float));
    pl->enc[1] = attn_ws_take(ws, pl->pe && has_k ? bk * (double)d->Dk : 0.0, sizeof(float));
    pl->enc[2] = attn_ws_take(ws, pl->pe && has_v ? bk * (double)d->Dv : 0.0, sizeof(float));
    pl->qp = attn_ws_take(ws, bq * (double)(pl->fused ? pl->E3 : d->Dq), sizeof(float));
    pl->kp = attn_ws_take(ws, pl->fused ? 0.0 : bk * (double)pl->ekv, sizeof(float));
    pl->vp = attn_ws_take(ws, pl->fused ? 0.0 : bk * (double)pl->ekv, sizeof(float));
    pl->ao = attn_ws_take(ws, bq * (double)d->Dq, sizeof(float));
    pl->hw = attn_ws_take(ws, pl->avg ? (double)pl->H * (double)d->Lq * (double)d->Lk : 0.0,
                          sizeof(float));
    attn_sparse_lay_out(ws, &pl->req.opt, d->Lq, d->Lk, &pl->sparse);
    if (pl->fused) {
        /* the k and v heads follow the q heads, or k and v each row */
        int64_t off = pl->hm ? d->B * d->Lq * d->Dq : d->Dq;
        pl->kp = pl->qp ? pl->qp + off : NULL;
        pl->vp = pl->qp ? pl->qp + 2 * off : NULL;
    }
    const attn_options *o = &pl->req.opt;
    if (o->rope.on) {
        attn_rope_plan(&o->rope, pl->hd, d->Lq, d->Lk,
                       o->align == ATTN_ALIGN_BOTTOM_RIGHT ? d->Lk - d->Lq : 0, &pl->rope);
        attn_rope_take(ws, &pl->rope);
    }
    if (ws->base) {
        if (pl->req.linear)
            attn_linear_take(ws, pl->jobs_n, NULL, pl->req.opt.causal, &pl->heads);
        else
            attn_heads_take(ws, pl->jobs_n, NULL, &pl->heads);
        return;
    }
    attn_head_job model; /* measuring: what the kernels will ask */
    attn_head_init(&model, &pl->req.opt, 0, 0, pl->H, d->Lq, d->Lk,
                   attn_model_weights(pl->req.opt.need_weights));
    model.kind = ATTN_SCORE_DOT;
    model.d = model.dv = pl->hd;
    model.kv_group = pl->H / pl->Hkv;
    if (pl->req.linear)
        attn_linear_take(ws, pl->jobs_n, &model, pl->req.opt.causal, &pl->heads);
    else
        attn_heads_take(ws, pl->jobs_n, &model, &pl->heads);
    attn_gemm_call g[3];
    attn_ws_gemms(ws, g, mha_gemms(pl, NULL, g));
    g[0] = mha_out_gemm(pl, NULL);
    attn_ws_gemms(ws, g, 1);
}

/* The head jobs of batch rows [b0, b1), every head (a group of H/Hkv
 * query heads shares one key/value head); returns how many. */
static size_t mha_heads(const mplan *pl, int64_t b0, int64_t b1, float *weights)
{
    const attn_dims *d = &pl->d;
    int64_t B = d->B, Lq = d->Lq, Lk = d->Lk, E = d->Dq, H = pl->H, hd = pl->hd, ks = pl->ks;
    int64_t group = pl->H / pl->Hkv, plane = Lq * Lk;
    float scale = (float)(1.0 / sqrt((double)hd));
    size_t n = 0;
    for (int64_t b = b0; b < b1; b++)
        for (int64_t h = 0; h < H; h++, n++) {
            int64_t g = h / group;
            float *w = !pl->req.opt.need_weights ? NULL
                     : pl->avg ? pl->hw + h * plane : weights + (b * H + h) * plane;
            attn_head_job *j = &pl->heads.jobs[n];
            attn_head_init(j, &pl->req.opt, b, h, H, Lq, Lk, w);
            j->lse = pl->lse ? pl->lse + (b * H + h) * Lq : NULL;
            j->kind = ATTN_SCORE_DOT;
            j->d = j->dv = hd;
            j->scale = scale;
            if (pl->req.opt.sparsity.pattern != ATTN_SPARSE_NONE)
                j->m.sparse = &pl->sparse;
            /* head h of batch row b: its own rows, or a slice of every row */
            int64_t qo = pl->hm ? (h * B + b) * Lq * hd : b * Lq * pl->qw + h * hd;
            int64_t ko = pl->hm ? (g * B + b) * Lk * hd : b * Lk * ks + g * hd;
            j->a = pl->qp + qo; j->a_stride = pl->qw;
            j->b = pl->kp + ko; j->b_stride = ks;
            j->v = pl->vp + ko; j->v_stride = ks;
            j->o = pl->ao + b * Lq * E + h * hd; j->o_stride = E;
            if (pl->req.opt.rope.on && attn_rope_in_kernel(&pl->req.opt, Lq))
                j->rope = &pl->rope;
        }
    return n;
}

/* The rotary embedding of every query head and key head after the
 * projections (as in GPT-NeoX and Llama): the table, and for the row
 * driver the rotation itself, in place in the projections. */
static void mha_rope(const attn_exec *ex, mplan *pl)
{
    const attn_dims *d = &pl->d;
    attn_rope_table(ex, &pl->rope);
    if (attn_rope_in_kernel(&pl->req.opt, d->Lq))
        return;
    attn_rope_set_rows(&pl->rope.set[0], pl->qp, pl->qw, pl->qp, pl->qw, d->B, d->Lq, pl->H);
    attn_rope_set_rows(&pl->rope.set[1], pl->kp, pl->ks, pl->kp, pl->ks, d->B, d->Lk, pl->Hkv);
    attn_rope_rows(ex, &pl->rope);
}

/* torch averages the per-head softmax weights: batch row b's into wb. */
static void mha_average(const mplan *pl, float *wb)
{
    int64_t plane = pl->d.Lq * pl->d.Lk, H = pl->H;
    float inv = 1.0f / (float)H;
    for (int64_t e = 0; e < plane; e++) {
        float s = 0.0f;
        for (int64_t h = 0; h < H; h++)
            s += pl->hw[h * plane + e];
        wb[e] = s * inv;
    }
}

static attn_status mha_run(const attn_exec *ex, void *p, float *out, float *w, float *lse,
                           attn_error *err)
{
    mplan *pl = p;
    pl->lse = lse;
    const attn_dims *d = &pl->d;
    int64_t B = d->B, E = d->Dq;
    const float *x[3];
    attn_gemm_call g[3];
    mha_inputs(pl, x);
    attn_exec_gemms(ex, g, mha_gemms(pl, x, g));
    if (pl->req.opt.rope.on)
        mha_rope(ex, pl);
    int64_t step = rows_per_run(pl);
    for (int64_t b0 = 0; b0 < B; b0 += step) {
        size_t n = mha_heads(pl, b0, b0 + step < B ? b0 + step : B, w);
        attn_status st = pl->req.linear ? attn_linear_run(ex, &pl->heads, n, &pl->req.opt, err)
                                        : attn_exec_heads(ex, &pl->heads, n, err);
        if (st != ATTN_OK)
            return st;
        if (pl->avg)
            mha_average(pl, w + b0 * d->Lq * d->Lk);
    }
    g[0] = mha_out_gemm(pl, out);
    attn_exec_gemms(ex, g, 1);
    if (pl->req.residual_norm) {
        int64_t n = B * d->Lq * E;
        for (int64_t e = 0; e < n; e++)
            out[e] += x[0][e];
        layer_norm(out, B * d->Lq, E, pl->nw, pl->nb);
    }
    return ATTN_OK;
}

attn_status attn_mha_compute(attn_ctx *ctx, const attn_mha_request *req,
                             float *output, float *weights, attn_error *err)
{
    return attn_mha_compute_lse(ctx, req, output, weights, NULL, err);
}

attn_status attn_mha_compute_lse(attn_ctx *ctx, const attn_mha_request *req, float *output,
                                 float *weights, float *lse, attn_error *err)
{
    mplan pl;
    attn_status st = make_mplan(req, 1, &pl, err);
    if (st == ATTN_OK && lse)
        st = attn_check_lse(mha_as(req), &req->opt, mha_who(req), err);
    return st != ATTN_OK ? st
                         : attn_execute(ctx, &mha_front, &pl, pl.req.n_params, &pl.shapes,
                                        output, weights, lse, err);
}

static const attn_front mha_front = {
    "attn_mha_compute", mha_seed_specs, mha_bind, mha_lay_out, mha_run,
};

/* ------------------------------------------------ prepared weights */

/* A copy of the n parameters p (validated by make_mplan, so their sizes
 * are those of tensors that exist) in one block: the set, its items, the
 * names, then the data from a 64-byte boundary, the layout of
 * attn_mha_seed_params' sets: attn_param_set_free frees either. */
static attn_status copy_params(const attn_named *p, size_t n, attn_param_set **out,
                               attn_error *err)
{
    size_t head = sizeof(attn_param_set) + n * sizeof(attn_named), floats = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t c = 0;
        attn_count(p[i].t.rank, p[i].t.shape, &c);
        floats += (size_t)c;
        head += strlen(p[i].name) + 1;
    }
    head = (head + 63) & ~(size_t)63;
    char *block = aligned_alloc(64, (head + floats * sizeof(float) + 63) & ~(size_t)63);
    if (!block)
        return attn_fail(err, ATTN_ERR_NOMEM, "params",
                         "out of memory for a copy of the parameters (%zu floats)", floats);
    attn_param_set *set = (attn_param_set *)(void *)block;
    set->n = n;
    set->items = (attn_named *)(void *)(block + sizeof(attn_param_set));
    char *names = (char *)(set->items + n);
    float *data = (float *)(void *)(block + head);
    for (size_t i = 0; i < n; i++) {
        int64_t c = 0;
        attn_count(p[i].t.rank, p[i].t.shape, &c);
        size_t len = strlen(p[i].name) + 1;
        memcpy(names, p[i].name, len);
        set->items[i] = p[i];
        set->items[i].name = names;
        set->items[i].t.data = data;
        memcpy(data, p[i].t.data, (size_t)c * sizeof(float));
        names += len;
        data += c;
    }
    *out = set;
    return ATTN_OK;
}

/* Packs the projection matrices of the plan pl (bound to w's copy) into
 * w: q, k and v (or the (3E, E) in_proj block the fused projection reads,
 * whose panels serve q, k and v too when E is a multiple of the panel),
 * and the output projection. */
static attn_status pack_weights(const mplan *pl, attn_mha_weights *w, attn_error *err)
{
    int64_t E = pl->d.Dq, kd = pl->d.Dk, vd = pl->d.Dv, ekv = pl->ekv, P = attn_gemm_panel();
    int fusable = pl->Hkv == pl->H && kd == E && vd == E && pl->wk == pl->wq + E * E &&
                  pl->wv == pl->wk + E * E;
    int whole = !fusable || E % P != 0; /* q, k and v packed on their own */
    packed_mat m[PACKED_MAX];
    int n = 0;
    if (fusable)
        m[n++] = (packed_mat){pl->wq, pl->E3, E, NULL};
    if (whole) {
        m[n++] = (packed_mat){pl->wq, E, E, NULL};
        m[n++] = (packed_mat){pl->wk, ekv, kd, NULL};
        m[n++] = (packed_mat){pl->wv, ekv, vd, NULL};
    }
    m[n++] = (packed_mat){pl->wo, E, E, NULL};
    size_t floats = 0;
    for (int i = 0; i < n; i++)
        floats += attn_gemm_packed_floats(m[i].n, m[i].k);
    w->panels = aligned_alloc(64, (floats * sizeof(float) + 63) & ~(size_t)63);
    if (!w->panels)
        return attn_fail(err, ATTN_ERR_NOMEM, "params",
                         "out of memory for the packed weights (%zu floats)", floats);
    w->panel_floats = floats;
    float *at = w->panels;
    for (int i = 0; i < n; i++) {
        w->packer = attn_gemm_pack(m[i].n, m[i].k, m[i].b, m[i].k, at);
        m[i].bp = at;
        w->packed[w->n_packed++] = m[i];
        at += attn_gemm_packed_floats(m[i].n, m[i].k);
    }
    if (!whole) { /* q, k and v as runs of the in_proj block's panels */
        size_t third = attn_gemm_packed_floats(E, E);
        for (int r = 0; r < 3; r++)
            w->packed[w->n_packed++] = (packed_mat){pl->wq + r * E * E, E, E,
                                                    w->panels + r * third};
    }
    return ATTN_OK;
}

attn_status attn_mha_weights_new(const attn_mha_request *req, attn_mha_weights **out,
                                 attn_error *err)
{
    if (!out)
        return attn_fail(err, ATTN_ERR_ARG, "", "attn_mha_weights_new: NULL argument");
    *out = NULL;
    if (req && req->weights)
        return attn_fail(err, ATTN_ERR_ARG, "weights",
                         "the request already names prepared weights; give it params");
    mplan pl;
    attn_status st = make_mplan(req, 1, &pl, err);
    if (st != ATTN_OK)
        return st;
    attn_mha_weights *w = calloc(1, sizeof *w);
    if (!w)
        return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for prepared weights");
    st = req->n_params ? copy_params(req->params, req->n_params, &w->set, err)
                       : attn_mha_seed_params(req, 0, &w->set, err);
    if (st == ATTN_OK) {
        attn_mha_request r = *req;
        r.params = w->set->items;
        r.n_params = w->set->n;
        st = make_mplan(&r, 1, &pl, err);
    }
    if (st == ATTN_OK)
        st = pack_weights(&pl, w, err);
    if (st != ATTN_OK) {
        attn_mha_weights_free(w);
        return st;
    }
    *out = w;
    return ATTN_OK;
}

size_t attn_mha_weights_bytes(const attn_mha_weights *w)
{
    if (!w)
        return 0;
    size_t n = sizeof *w + sizeof(attn_param_set) + w->panel_floats * sizeof(float);
    for (size_t i = 0; i < w->set->n; i++) {
        const attn_named *p = &w->set->items[i];
        int64_t c = 0;
        attn_count(p->t.rank, p->t.shape, &c);
        n += sizeof *p + strlen(p->name) + 1 + (size_t)c * sizeof(float);
    }
    return n;
}

void attn_mha_weights_free(attn_mha_weights *w)
{
    if (!w)
        return;
    free(w->panels);
    attn_param_set_free(w->set);
    free(w);
}
