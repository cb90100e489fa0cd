/* attention.c - POST /attention/{rule}: validation (attn_plan) and the six
 * rules (attn_compute), built from the projection GEMM, the scaled-dot
 * kernel and the row-by-row driver. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"

attn_options attn_options_default(void)
{
    attn_options o;
    memset(&o, 0, sizeof o);
    o.need_weights = 1;
    return o;
}

attn_request attn_request_default(attn_rule rule)
{
    attn_request r;
    memset(&r, 0, sizeof r);
    r.rule = rule;
    r.opt = attn_options_default();
    return r;
}

#define MAX_PARAMS 4

/* A validated request: sizes, and the rule's parameters in the order of
 * attn_rule_describe (NULL for an optional one left out). */
typedef struct {
    attn_dims d;
    int64_t lkeys; /* keys each query row attends over: Lk, or Lv for concat */
    int64_t dh, dout;
    const attn_tensor *p[MAX_PARAMS];
    attn_shapes shapes;
} plan;

/* Matches the given parameters against the rule's table: unknown names,
 * duplicates and missing required ones are ATTN_ERR_PARAM. */
static attn_status bind_params(const attn_rule_info *info, const attn_named *given,
                               size_t n_given, plan *pl, attn_error *err)
{
    for (size_t g = 0; g < n_given; g++) {
        const char *name = given[g].name ? given[g].name : "";
        char field[64];
        snprintf(field, sizeof field, "params.%s", name);
        size_t at = info->n_params;
        for (size_t i = 0; i < info->n_params; i++)
            if (strcmp(name, info->params[i].name) == 0)
                at = i;
        if (at == info->n_params) {
            if (info->n_params == 0)
                return attn_fail(err, ATTN_ERR_PARAM, field,
                                 "unknown parameter %s; rule %s takes no parameters", name,
                                 info->name);
            char list[200] = "";
            for (size_t i = 0; i < info->n_params; i++) {
                size_t used = strlen(list);
                snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                         info->params[i].name);
            }
            return attn_fail(err, ATTN_ERR_PARAM, field,
                             "unknown parameter %s; rule %s takes %s", name, info->name, list);
        }
        if (pl->p[at])
            return attn_fail(err, ATTN_ERR_PARAM, field, "parameter %s is given twice", name);
        pl->p[at] = &given[g].t;
    }
    for (size_t i = 0; i < info->n_params; i++)
        if (!pl->p[i] && !info->params[i].optional) {
            char field[64];
            snprintf(field, sizeof field, "params.%s", info->params[i].name);
            return attn_fail(err, ATTN_ERR_PARAM, field,
                             "params.%s is missing; rule %s needs %s %s (params are all or none)",
                             info->params[i].name, info->name, info->params[i].name,
                             info->params[i].shape);
        }
    return ATTN_OK;
}

/* Checks every bound parameter's shape; Dh and Dout come from the first
 * weight that carries them. */
static attn_status check_param_shapes(const attn_request *req, const attn_rule_info *info,
                                      plan *pl, attn_error *err)
{
    const attn_dims *d = &pl->d;
    int64_t dqk = d->Dq + d->Dk, dqv = d->Dq + d->Dv;
    int64_t want[MAX_PARAMS][2];
    int rank[MAX_PARAMS];
    const char *sym[MAX_PARAMS];
    for (size_t i = 0; i < info->n_params; i++)
        sym[i] = info->params[i].shape;
    const attn_tensor *lead = pl->p[0];
    int64_t lead0 = lead->rank >= 1 ? lead->shape[0] : 1;
    switch (req->rule) {
    case ATTN_RULE_GENERAL:
        rank[0] = 2; want[0][0] = d->Dq; want[0][1] = d->Dk;
        rank[1] = 1; want[1][0] = d->Dq;
        break;
    case ATTN_RULE_ADDITIVE:
        pl->dh = lead0;
        rank[0] = 2; want[0][0] = pl->dh; want[0][1] = d->Dq;
        rank[1] = 2; want[1][0] = pl->dh; want[1][1] = d->Dk;
        rank[2] = 1; want[2][0] = pl->dh;
        rank[3] = 2; want[3][0] = 1; want[3][1] = pl->dh;
        break;
    case ATTN_RULE_CONCAT_TANH:
        pl->dh = lead0;
        rank[0] = 2; want[0][0] = pl->dh; want[0][1] = dqk;
        rank[1] = 1; want[1][0] = pl->dh;
        break;
    case ATTN_RULE_CONCAT: {
        const attn_tensor *ow = pl->p[2];
        pl->dout = ow->rank >= 1 ? ow->shape[0] : 1;
        rank[0] = 2; want[0][0] = d->Lv; want[0][1] = dqk;
        rank[1] = 1; want[1][0] = d->Lv;
        rank[2] = 2; want[2][0] = pl->dout; want[2][1] = dqv;
        rank[3] = 1; want[3][0] = pl->dout;
        break;
    }
    default:
        return ATTN_OK;
    }
    if (pl->dh < 1 || pl->dout < 1) {
        const char *nm = info->params[req->rule == ATTN_RULE_CONCAT ? 2 : 0].name;
        char field[64];
        snprintf(field, sizeof field, "params.%s", nm);
        return attn_fail(err, ATTN_ERR_SHAPE, field,
                         "params.%s has an empty first dimension; it must be at least 1", nm);
    }
    for (size_t i = 0; i < info->n_params; i++) {
        if (!pl->p[i])
            continue;
        char who[40];
        snprintf(who, sizeof who, "rule %s", info->name);
        attn_status st = attn_check_param_shape(info->params[i].name, pl->p[i], rank[i],
                                                want[i], sym[i], who, err);
        if (st != ATTN_OK)
            return st;
    }
    return ATTN_OK;
}

/* Floats of the scratch pieces compute_planned carves, in order: s1 the
 * projected queries (or concat's scores), s2 the projected keys (or the
 * key half of concat's scores), s3 concat's context vectors, s4 the second
 * half of concat's output. */
static void rule_scratch(attn_rule rule, const plan *pl, double f[4])
{
    const attn_dims *d = &pl->d;
    double bq = (double)d->B * (double)d->Lq, bk = (double)d->B * (double)d->Lk;
    f[0] = f[1] = f[2] = f[3] = 0.0;
    switch (rule) {
    case ATTN_RULE_GENERAL:
        f[1] = bk * (double)d->Dq;
        break;
    case ATTN_RULE_ADDITIVE:
    case ATTN_RULE_CONCAT_TANH:
        f[0] = bq * (double)pl->dh;
        f[1] = bk * (double)pl->dh;
        break;
    case ATTN_RULE_CONCAT:
        f[0] = f[1] = bq * (double)pl->lkeys;
        f[2] = bq * (double)d->Dv;
        f[3] = bq * (double)pl->dout;
        break;
    default: break;
    }
}

/* Workspace bytes of the pieces f and the per-batch job arrays. */
static double scratch_total(const plan *pl, const double f[4])
{
    double bytes = 0.0;
    for (int i = 0; i < 4; i++)
        bytes += attn_ws_bytes(f[i], sizeof(float));
    return bytes + attn_ws_bytes((double)pl->d.B, sizeof(attn_sdpa_job)) +
           attn_ws_bytes((double)pl->d.B, sizeof(attn_row_job));
}

/* Floating-point operations of compute_planned for rule (2 per
 * multiply-add): the projections, the scores (a tanh score counts 3 per
 * hidden unit), and the weighted sum of values. */
static double rule_flops(attn_rule rule, const plan *pl)
{
    const attn_dims *d = &pl->d;
    double B = (double)d->B, Lq = (double)d->Lq, Lk = (double)d->Lk;
    double pairs = B * Lq * (double)pl->lkeys, dh = (double)pl->dh;
    double f = 2.0 * pairs * (double)d->Dv;
    switch (rule) {
    case ATTN_RULE_GENERAL:
        f += 2.0 * B * Lk * (double)d->Dk * (double)d->Dq;
        /* fall through */
    case ATTN_RULE_DOT:
    case ATTN_RULE_SCALED_DOT:
        return f + 2.0 * pairs * (double)d->Dq;
    case ATTN_RULE_ADDITIVE:
    case ATTN_RULE_CONCAT_TANH:
        return f + 2.0 * B * (Lq * (double)d->Dq + Lk * (double)d->Dk) * dh + 3.0 * pairs * dh;
    case ATTN_RULE_CONCAT:
        return f + 2.0 * pairs * (double)(d->Dq + d->Dk) +
               2.0 * B * Lq * (double)pl->dout * (double)(d->Dq + d->Dv);
    default:
        return f;
    }
}

/* Floats of the bound parameters (the seeded set's when none are given). */
static double param_floats(const attn_request *req, const plan *pl)
{
    if (req->n_params == 0)
        return attn_rule_seed_floats(req->rule, &pl->d, pl->dh, pl->dout);
    return attn_tensors_floats(pl->p, MAX_PARAMS);
}

static attn_status make_plan(const attn_request *req, plan *pl, attn_error *err)
{
    memset(pl, 0, sizeof *pl);
    if (!req)
        return attn_fail(err, ATTN_ERR_ARG, "", "NULL request");
    const attn_rule_info *info = attn_rule_describe(req->rule);
    if (!info)
        return attn_fail(err, ATTN_ERR_ARG, "rule", "unknown rule %d", (int)req->rule);
    attn_status st = attn_check_qkv(&req->query, &req->key, &req->value, &pl->d, err);
    if (st != ATTN_OK)
        return st;
    attn_dims *d = &pl->d;
    int concat = req->rule == ATTN_RULE_CONCAT;
    if (info->needs_same_dim && d->Dk != d->Dq)
        return attn_fail(err, ATTN_ERR_SHAPE, "key",
                         "key has %lld features but query has %lld; rule %s needs Dk = Dq",
                         (long long)d->Dk, (long long)d->Dq, info->name);
    if (concat && d->Lk != d->Lq)
        return attn_fail(err, ATTN_ERR_SHAPE, "key",
                         "key has %lld rows but query has %lld; rule concat pairs key row i "
                         "with query row i (Lk = Lq)",
                         (long long)d->Lk, (long long)d->Lq);
    if (!concat && d->Lv != d->Lk)
        return attn_fail(err, ATTN_ERR_SHAPE, "value",
                         "value has %lld rows but key has %lld; rule %s needs one value row "
                         "per key (Lv = Lk)",
                         (long long)d->Lv, (long long)d->Lk, info->name);
    if (req->has_scale) {
        if (req->rule != ATTN_RULE_SCALED_DOT)
            return attn_fail(err, ATTN_ERR_PARAM, "scale",
                             "scale applies only to rule scaled_dot, not %s", info->name);
        if (!isfinite(req->scale))
            return attn_fail(err, ATTN_ERR_PARAM, "scale", "scale must be a finite number");
    }
    if (concat) {
        const attn_options *o = &req->opt;
        const char *bad = o->key_mask.rank ? "key_mask" : o->causal ? "causal"
                        : o->has_window ? "window" : o->bias.rank ? "bias" : NULL;
        if (bad)
            return attn_fail(err, ATTN_ERR_PARAM, bad,
                             "%s does not apply to rule concat (its weights are over the Lv "
                             "value positions); use mask (Lq, Lv)",
                             bad);
    }
    pl->lkeys = concat ? d->Lv : d->Lk;
    st = attn_check_options(&req->opt, d->B, 0, d->Lq, pl->lkeys, concat ? "Lv" : "Lk", err);
    if (st != ATTN_OK)
        return st;
    if ((st = attn_check_sizes(req->hidden_size, req->output_size, err)) != ATTN_OK)
        return st;
    pl->dh = req->hidden_size ? req->hidden_size : d->Dq;
    pl->dout = req->output_size ? req->output_size : d->Dq;
    if (req->n_params > 0) {
        if (!req->params)
            return attn_fail(err, ATTN_ERR_ARG, "params", "n_params > 0 but params is NULL");
        if ((st = bind_params(info, req->params, req->n_params, pl, err)) != ATTN_OK)
            return st;
        if (info->n_params && (st = check_param_shapes(req, info, pl, err)) != ATTN_OK)
            return st;
    }
    double params = param_floats(req, pl); /* before dout becomes Dv */
    if (!concat)
        pl->dout = d->Dv;

    attn_shapes *sh = &pl->shapes;
    int o = d->batched;
    sh->out_rank = 2 + o;
    sh->w_rank = 2 + o;
    if (o)
        sh->out_shape[0] = sh->w_shape[0] = d->B;
    sh->out_shape[o] = d->Lq;
    sh->out_shape[o + 1] = pl->dout;
    sh->w_shape[o] = d->Lq;
    sh->w_shape[o + 1] = pl->lkeys;
    int64_t wc;
    if (!attn_count(sh->out_rank, sh->out_shape, &sh->out_count) ||
        !attn_count(sh->w_rank, sh->w_shape, &wc))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "", "the result would be too large");
    sh->w_count = req->opt.need_weights ? wc : 0;
    sh->param_floats = params;
    sh->flops = rule_flops(req->rule, pl);
    double f[4];
    rule_scratch(req->rule, pl, f);
    sh->scratch_bytes = scratch_total(pl, f);
    return ATTN_OK;
}

attn_status attn_plan(const attn_request *req, attn_shapes *shapes, attn_error *err)
{
    plan pl;
    attn_status st = make_plan(req, &pl, err);
    if (st == ATTN_OK && shapes)
        *shapes = pl.shapes;
    return st;
}

static attn_status compute_planned(attn_ctx *ctx, const attn_request *req, const plan *pl,
                                   float *output, float *weights, attn_error *err)
{
    const attn_dims *d = &pl->d;
    const attn_options *opt = &req->opt;
    int threads = ctx->threads;
    int64_t B = d->B, Lq = d->Lq, Lk = d->Lk, Dq = d->Dq, Dk = d->Dk, Dv = d->Dv;
    int64_t lkeys = pl->lkeys, dh = pl->dh, dout = pl->dout;
    int hard = opt->hard != ATTN_HARD_NONE;
    const float *Q = req->query.data, *K = req->key.data, *V = req->value.data;
    attn_rule rule = req->rule;
    int64_t dqk = Dq + Dk, dqv = Dq + Dv;

    double f[4];
    rule_scratch(rule, pl, f);
    char *at;
    attn_status st = attn_ws_get(ctx, scratch_total(pl, f), &at, err);
    if (st != ATTN_OK)
        return st;
    float *s1 = attn_ws_take(&at, (int64_t)f[0], sizeof(float));
    float *s2 = attn_ws_take(&at, (int64_t)f[1], sizeof(float));
    float *s3 = attn_ws_take(&at, (int64_t)f[2], sizeof(float));
    float *s4 = attn_ws_take(&at, (int64_t)f[3], sizeof(float));
    attn_sdpa_job *sj = attn_ws_take(&at, B, sizeof(attn_sdpa_job));
    attn_row_job *rj = attn_ws_take(&at, B, sizeof(attn_row_job));

    /* The keys each rule's score compares against, per batch row. */
    const float *keys = K;
    int64_t key_dim = Dk;
    float scale = 1.0f;
    switch (rule) {
    case ATTN_RULE_SCALED_DOT:
        scale = req->has_scale ? req->scale : (float)(1.0 / sqrt((double)Dk));
        break;
    case ATTN_RULE_GENERAL: /* q . (W k + b) = q . k' with k' = k W^T + b */
        attn_gemm_nt_heap(B * Lk, Dq, Dk, K, Dk, pl->p[0]->data, Dk,
                     pl->p[1] ? pl->p[1]->data : NULL, s2, Dq, threads);
        keys = s2;
        key_dim = Dq;
        break;
    case ATTN_RULE_ADDITIVE:
        attn_gemm_nt_heap(B * Lq, dh, Dq, Q, Dq, pl->p[0]->data, Dq, NULL, s1, dh, threads);
        attn_gemm_nt_heap(B * Lk, dh, Dk, K, Dk, pl->p[1]->data, Dk,
                     pl->p[2] ? pl->p[2]->data : NULL, s2, dh, threads);
        break;
    case ATTN_RULE_CONCAT_TANH: /* W [q; k] = Wq q + Wk k, W split by columns */
        attn_gemm_nt_heap(B * Lq, dh, Dq, Q, Dq, pl->p[0]->data, dqk, NULL, s1, dh, threads);
        attn_gemm_nt_heap(B * Lk, dh, Dk, K, Dk, pl->p[0]->data + Dq, dqk,
                     pl->p[1] ? pl->p[1]->data : NULL, s2, dh, threads);
        break;
    case ATTN_RULE_CONCAT: {
        attn_gemm_nt_heap(B * Lq, lkeys, Dq, Q, Dq, pl->p[0]->data, dqk,
                     pl->p[1] ? pl->p[1]->data : NULL, s1, lkeys, threads);
        attn_gemm_nt_heap(B * Lq, lkeys, Dk, K, Dk, pl->p[0]->data + Dq, dqk, NULL, s2, lkeys,
                     threads);
        int64_t n = B * Lq * lkeys;
        for (int64_t e = 0; e < n; e++)
            s1[e] += s2[e];
        break;
    }
    default: break;
    }

    int sdpa = !hard && (rule == ATTN_RULE_DOT || rule == ATTN_RULE_SCALED_DOT ||
                         rule == ATTN_RULE_GENERAL);
    float *attn_out = rule == ATTN_RULE_CONCAT ? s3 : output;
    int64_t ao_dim = Dv;
    for (int64_t b = 0; b < B; b++) {
        attn_row_masks m;
        attn_masks_at(opt, b, 0, 1, Lq, lkeys, &m);
        float *w = opt->need_weights ? weights + b * Lq * lkeys : NULL;
        const float *vb = V + b * d->Lv * Dv;
        float *ob = attn_out + b * Lq * ao_dim;
        if (sdpa) {
            attn_sdpa_job *j = &sj[b];
            memset(j, 0, sizeof *j);
            j->lq = Lq; j->lk = Lk; j->d = key_dim; j->dv = Dv;
            j->q = Q + b * Lq * Dq; j->q_stride = Dq;
            j->k = keys + b * Lk * key_dim; j->k_stride = key_dim;
            j->v = vb; j->v_stride = Dv;
            j->o = ob; j->o_stride = Dv;
            j->w = w; j->w_stride = lkeys;
            j->scale = scale;
            j->mask = m.mask; j->mask_stride = m.mask_stride;
            j->key_mask = m.key_mask;
            j->bias = m.bias; j->bias_stride = m.bias_stride;
            j->causal = m.causal;
            j->window = m.window;
            continue;
        }
        attn_row_job *j = &rj[b];
        memset(j, 0, sizeof *j);
        j->lq = Lq; j->lk = lkeys; j->dv = Dv;
        j->v = vb; j->v_stride = Dv;
        j->o = ob; j->o_stride = ao_dim;
        j->w = w; j->w_stride = lkeys;
        j->m = m;
        j->hard = opt->hard;
        j->top_k = opt->top_k;
        switch (rule) {
        case ATTN_RULE_DOT:
        case ATTN_RULE_SCALED_DOT:
        case ATTN_RULE_GENERAL:
            j->kind = ATTN_SCORE_DOT;
            j->d = key_dim;
            j->a = Q + b * Lq * Dq; j->a_stride = Dq;
            j->b = keys + b * Lk * key_dim; j->b_stride = key_dim;
            j->scale = scale;
            break;
        case ATTN_RULE_ADDITIVE:
        case ATTN_RULE_CONCAT_TANH:
            j->kind = ATTN_SCORE_TANH;
            j->d = dh;
            j->a = s1 + b * Lq * dh; j->a_stride = dh;
            j->b = s2 + b * Lk * dh; j->b_stride = dh;
            j->vw = rule == ATTN_RULE_ADDITIVE ? pl->p[3]->data : NULL;
            break;
        default: /* concat */
            j->kind = ATTN_SCORE_GIVEN;
            j->a = s1 + b * Lq * lkeys; j->a_stride = lkeys;
            break;
        }
    }
    if (sdpa) {
        if (attn_sdpa_run_heap(sj, (size_t)B, threads) != 0)
            return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory in the attention kernel");
    } else if ((st = attn_rows_run_heap(rj, (size_t)B, threads, err)) != ATTN_OK) {
        return st;
    }
    if (rule == ATTN_RULE_CONCAT) { /* o = out([q; c]) = Wo_q q + Wo_c c + b */
        const float *ow = pl->p[2]->data;
        attn_gemm_nt_heap(B * Lq, dout, Dq, Q, Dq, ow, dqv, pl->p[3] ? pl->p[3]->data : NULL,
                     output, dout, threads);
        attn_gemm_nt_heap(B * Lq, dout, Dv, s3, Dv, ow + Dq, dqv, NULL, s4, dout, threads);
        int64_t n = B * Lq * dout;
        for (int64_t e = 0; e < n; e++)
            output[e] += s4[e];
    }
    return ATTN_OK;
}

attn_status attn_compute(attn_ctx *ctx, const attn_request *req,
                         float *output, float *weights, attn_error *err)
{
    plan pl;
    attn_status st = make_plan(req, &pl, err);
    if (st != ATTN_OK)
        return st;
    if (!output || (req->opt.need_weights && !weights))
        return attn_fail(err, ATTN_ERR_ARG, "", "attn_compute: NULL output or weights buffer");
    attn_param_set *seeded = NULL;
    const attn_rule_info *info = attn_rule_describe(req->rule);
    if (req->n_params == 0 && info->n_params > 0) {
        /* A bare request runs with the parameters seed 0 would give. */
        if ((st = attn_seed_params(req, 0, &seeded, err)) != ATTN_OK)
            return st;
        attn_request r2 = *req;
        r2.params = seeded->items;
        r2.n_params = seeded->n;
        if ((st = make_plan(&r2, &pl, err)) != ATTN_OK) {
            attn_param_set_free(seeded);
            return st;
        }
    }
    attn_ctx *own;
    if (!(ctx = attn_ctx_for_call(ctx, &own))) {
        attn_param_set_free(seeded);
        return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for a context");
    }
    st = compute_planned(ctx, req, &pl, output, weights, err);
    attn_ctx_free(own);
    attn_param_set_free(seeded);
    return st;
}
