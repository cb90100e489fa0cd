/* attention.c - attention by one rule (attn_compute): the rules' front end
 * of the pipeline (exec.c). Validation (attn_plan), and what is each rule's
 * own: its parameters, projections, scores and cost; the pipeline does the
 * rest (workspace, seeding, heads, kernels, threads). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"

attn_options attn_options_default(void)
{
    attn_options o;
    memset(&o, 0, sizeof o);
    o.need_weights = 1;
    o.window_left = o.window_right = -1;
    o.temperature = 1.0f;
    o.rope.base = 10000.0f;
    o.sparsity.window_blocks = 3;
    o.sparsity.global_blocks = 2;
    o.sparsity.random_blocks = 3;
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

/* Packed sequences (attn_varlen_request): B sequences of the packed
 * tensors' rows, sequence s's query rows cq[s] .. cq[s + 1] - 1 and key
 * rows ck[s] .. ck[s + 1] - 1. A plan of them is the plan of one sequence
 * of the longest lengths, (1, H, max_q, .) and (1, Hkv, max_k, .), whose
 * slices are then each sequence's heads. */
typedef struct {
    int on;
    int64_t B, total_q, total_k, max_q, max_k;
    const int64_t *cq, *ck;
} varlen;

/* A validated request: sizes, and the rule's parameters in the order of
 * attn_rule_describe (NULL for an optional one left out); then the
 * workspace pieces rule_lay_out took. */
typedef struct {
    attn_request req; /* a copy; its params may be the pipeline's seeded set */
    attn_dims d;
    int64_t nq, nk; /* (batch, head) slices of query and of key/value: B H and B Hkv */
    int64_t qrows, krows; /* query and key rows of all slices: nq Lq and nk Lk */
    varlen vl;      /* packed sequences, or vl.on 0 */
    int bshd;       /* ATTN_QKV_BSHD: a slice's rows H (key and value's Hkv) apart */
    int64_t lkeys; /* keys each query row attends over: Lk, or Lv for concat */
    int64_t dh, dout;
    const attn_tensor *p[MAX_PARAMS];
    attn_shapes shapes;
    attn_sparse sparse; /* the sparsity pattern in the kernels' form */
    attn_sparse *seq_sparse; /* packed sequences': each sequence's own */
    float *qp;   /* projected queries, or concat's scores */
    float *kp;   /* projected keys, or the key half of concat's scores */
    float *ctxv; /* concat: the context vectors (attention's output) */
    float *out2; /* concat: the context's half of the output */
    float *qr, *kr; /* rope: the rotated queries and keys */
    attn_rope_pass rope;
    attn_heads heads;
    float *lse; /* the run's lse buffer (attn_compute_lse), or NULL */
} plan;

static const attn_front rule_front;

/* Sequence s's query and key rows, and where its queries sit against its
 * keys (i' = i + off). */
static int64_t seq_rows(const varlen *v, int64_t s, int64_t *lq, int64_t *lk, attn_align align)
{
    *lq = v->cq[s + 1] - v->cq[s];
    *lk = v->ck[s + 1] - v->ck[s];
    return align == ATTN_ALIGN_BOTTOM_RIGHT ? *lk - *lq : 0;
}

/* Head jobs of one run: every slice, or ATTN_JOBS_PER_RUN of them. */
static int64_t group_of(const plan *pl)
{
    return pl->nq < ATTN_JOBS_PER_RUN ? pl->nq : ATTN_JOBS_PER_RUN;
}

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

/* hidden_size (or output_size), when given beside the parameters, must be
 * the Dh (Dout) they carry: it only sizes seeded parameters, so one that
 * disagrees would be ignored. */
static attn_status check_given_size(const char *size_name, int64_t given, int64_t carried,
                                    const char *param, attn_error *err)
{
    if (given == 0 || given == carried)
        return ATTN_OK;
    return attn_fail(err, ATTN_ERR_PARAM, size_name,
                     "%s is %lld but params.%s has %lld rows; %s sizes only seeded "
                     "parameters: leave it out, or make it agree",
                     size_name, (long long)given, param, (long long)carried, size_name);
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
    const char *nm = info->params[req->rule == ATTN_RULE_CONCAT ? 2 : 0].name;
    if (pl->dh < 1 || pl->dout < 1) {
        char field[64];
        snprintf(field, sizeof field, "params.%s", nm);
        return attn_fail(err, ATTN_ERR_SHAPE, field,
                         "params.%s has an empty first dimension; it must be at least 1", nm);
    }
    attn_status st = ATTN_OK;
    if (attn_rule_takes(req->rule, ATTN_OPT_HIDDEN_SIZE))
        st = check_given_size("hidden_size", req->hidden_size, pl->dh, nm, err);
    else if (attn_rule_takes(req->rule, ATTN_OPT_OUTPUT_SIZE))
        st = check_given_size("output_size", req->output_size, pl->dout, nm, err);
    if (st != ATTN_OK)
        return st;
    for (size_t i = 0; i < info->n_params; i++) {
        if (!pl->p[i])
            continue;
        char who[40];
        snprintf(who, sizeof who, "rule %s", info->name);
        st = attn_check_param_shape(info->params[i].name, pl->p[i], rank[i],
                                                want[i], sym[i], who, err);
        if (st != ATTN_OK)
            return st;
    }
    return ATTN_OK;
}

/* Floating-point operations of the rule (2 per multiply-add) for B query
 * and Bk key/value slices of Lq queries and Lk keys (lkeys scored, Lv for
 * concat): the projections, the scores (a tanh score counts 3 per hidden
 * unit), and the weighted sum of values. */
static double rule_arithmetic(const plan *pl, double B, double Bk, int64_t lq, int64_t lk,
                              int64_t lkeys)
{
    const attn_dims *d = &pl->d;
    double Lq = (double)lq, Lk = (double)lk;
    double pairs = B * attn_sparsity_pairs(&pl->req.opt, lq, lkeys), dh = (double)pl->dh;
    double f = 2.0 * pairs * (double)d->Dv;
    switch (pl->req.rule) {
    case ATTN_RULE_GENERAL:
        f += 2.0 * Bk * Lk * (double)d->Dk * (double)d->Dq;
        /* fall through */
    case ATTN_RULE_DOT:
    case ATTN_RULE_SCALED_DOT:
        return f + 2.0 * pairs * (double)d->Dq;
    case ATTN_RULE_ADDITIVE:
    case ATTN_RULE_CONCAT_TANH:
        return f + 2.0 * (B * Lq * (double)d->Dq + Bk * Lk * (double)d->Dk) * dh + 3.0 * pairs * dh;
    case ATTN_RULE_CONCAT:
        return f + 2.0 * pairs * (double)(d->Dq + d->Dk) +
               2.0 * B * Lq * (double)pl->dout * (double)(d->Dq + d->Dv);
    case ATTN_RULE_LINEAR: {
        attn_head_job m;
        memset(&m, 0, sizeof m);
        m.lq = lq; m.lk = lk; m.d = d->Dk; m.dv = d->Dv;
        m.w = attn_model_weights(pl->req.opt.need_weights);
        return attn_linear_flops(&m, B, pl->req.opt.causal);
    }
    default:
        return f;
    }
}

/* The rule's cost (attn_shapes.flops): its arithmetic, and but for linear
 * attention (whose sums are its whole cost) the score pipeline's beside
 * it (cost.c). */
static double rule_flops(const plan *pl, double B, double Bk, int64_t lq, int64_t lk, int64_t lkeys)
{
    attn_rule rule = pl->req.rule;
    double f = rule_arithmetic(pl, B, Bk, lq, lk, lkeys);
    if (rule == ATTN_RULE_LINEAR)
        return f;
    int tanh = rule == ATTN_RULE_ADDITIVE || rule == ATTN_RULE_CONCAT_TANH;
    return f + attn_extra_cost(&pl->req.opt, B, lq, lkeys, pl->d.Dq + pl->d.Dv, tanh ? pl->dh : 0,
                               rule == ATTN_RULE_CONCAT);
}

static size_t rule_seed_specs(const void *p, attn_seed_spec *specs)
{
    const plan *pl = p;
    int n = attn_rule_seed_specs(pl->req.rule, &pl->d, pl->dh, pl->dout, specs);
    return n < 0 ? 0 : (size_t)n;
}

/* shapes.param_floats: the floats of the bound parameters, or of the
 * seeded set when none are given, which must be one that can be made (a
 * huge hidden_size is ATTN_ERR_TOO_LARGE here, as attn_compute finds). */
static attn_status count_params(plan *pl, attn_error *err)
{
    if (pl->req.n_params > 0) {
        pl->shapes.param_floats = attn_tensors_floats(pl->p, MAX_PARAMS);
        return ATTN_OK;
    }
    attn_seed_spec specs[ATTN_SEED_MAX];
    return attn_seed_count(specs, rule_seed_specs(pl, specs), &pl->shapes.param_floats, err);
}

/* Sizes the rule needs: Dk = Dq for the dot rules, Lk = Lq for concat,
 * Lv = Lk for the others. */
static attn_status check_rule_dims(const attn_rule_info *info, attn_rule rule,
                                   const attn_dims *d, attn_error *err)
{
    int concat = rule == ATTN_RULE_CONCAT;
    if (info->needs_same_dim && d->Dk != d->Dq)
        return attn_fail(err, ATTN_ERR_SHAPE, "key",
                         "key has %lld features but query has %lld; rule %s needs Dk = Dq",
                         (long long)d->Dk, (long long)d->Dq, info->name);
    if (concat && d->Hkv != d->H)
        return attn_fail(err, ATTN_ERR_SHAPE, "key",
                         "key has %lld heads but query has %lld; rule concat pairs key row i "
                         "with query row i, head by head (Hkv = H)",
                         (long long)d->Hkv, (long long)d->H);
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
    return ATTN_OK;
}

/* scale only for the rule that takes it (attn_rule_takes), and finite;
 * attn_options' are attn_check_options'. hidden_size and output_size are
 * only read by the rules that seed with them (see attn_rule_takes). */
static attn_status check_rule_options(const attn_rule_info *info, const attn_request *req,
                                      attn_error *err)
{
    if (req->has_scale && !attn_rule_takes(req->rule, ATTN_OPT_SCALE))
        return attn_refuse_option(ATTN_OPT_SCALE, info->name, err);
    if (req->has_scale && !isfinite(req->scale))
        return attn_fail(err, ATTN_ERR_PARAM, "scale", "scale must be a finite number");
    return ATTN_OK;
}

/* The result shapes and the cost but for the workspace (attn_plan's),
 * once everything is validated. */
static attn_status fill_shapes(plan *pl, attn_error *err)
{
    const attn_dims *d = &pl->d;
    attn_shapes *sh = &pl->shapes;
    int o = d->batched + d->heads;
    sh->out_rank = 2 + o;
    sh->w_rank = 2 + o;
    if (o)
        sh->out_shape[0] = sh->w_shape[0] = d->B;
    if (d->heads)
        sh->out_shape[1] = sh->w_shape[1] = d->H;
    sh->out_shape[o] = d->Lq;
    sh->out_shape[o + 1] = pl->dout;
    if (pl->bshd) {
        sh->out_shape[1] = d->Lq;
        sh->out_shape[2] = d->H;
    }
    sh->w_shape[o] = d->Lq;
    sh->w_shape[o + 1] = pl->lkeys;
    int64_t wc;
    if (!attn_count(sh->out_rank, sh->out_shape, &sh->out_count) ||
        !attn_count(sh->w_rank, sh->w_shape, &wc))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "", "the result would be too large");
    sh->w_count = pl->req.opt.need_weights ? wc : 0;
    sh->flops = rule_flops(pl, (double)pl->nq, (double)pl->nk, d->Lq, d->Lk, pl->lkeys);
    attn_sparsity_dims(&pl->req.opt, d->Lq, pl->lkeys, &sh->layout_rows, &sh->layout_cols,
                       &sh->layout_block);
    return ATTN_OK;
}

static attn_status make_plan(const attn_request *req, plan *pl, attn_error *err)
{
    memset(pl, 0, sizeof *pl);
    if (!req)
        return attn_fail(err, ATTN_ERR_ARG, "", "NULL request");
    pl->req = *req;
    const attn_rule_info *info = attn_rule_describe(req->rule);
    if (!info)
        return attn_fail(err, ATTN_ERR_ARG, "rule", "unknown rule %d", (int)req->rule);
    if (req->opt.qkv_layout != ATTN_QKV_BHSD && req->opt.qkv_layout != ATTN_QKV_BSHD)
        return attn_fail(err, ATTN_ERR_PARAM, "qkv_layout", "unknown qkv_layout %d",
                         (int)req->opt.qkv_layout);
    pl->bshd = req->opt.qkv_layout == ATTN_QKV_BSHD;
    attn_status st = attn_check_qkv(&req->query, &req->key, &req->value, 1, pl->bshd, &pl->d, err);
    if (st != ATTN_OK || (st = check_rule_dims(info, req->rule, &pl->d, err)) != ATTN_OK ||
        (st = check_rule_options(info, req, err)) != ATTN_OK)
        return st;
    int concat = req->rule == ATTN_RULE_CONCAT;
    pl->nq = pl->d.B * pl->d.H; /* no overflow: query's element count */
    pl->nk = pl->d.B * pl->d.Hkv;
    pl->qrows = pl->nq * pl->d.Lq; /* no overflow: within the tensors' element counts */
    pl->krows = pl->nk * pl->d.Lk;
    pl->lkeys = concat ? pl->d.Lv : pl->d.Lk;
    attn_score_dims sd = {pl->d.B, pl->d.heads ? pl->d.H : 0, pl->d.Lq, pl->lkeys, pl->d.heads,
                          concat ? "Lv" : "Lk"};
    st = attn_check_options(&req->opt, req->rule, info->name, &sd, err);
    if (st != ATTN_OK || (st = attn_check_sizes(req->hidden_size, req->output_size, err)) != ATTN_OK)
        return st;
    attn_maskish_rank4(&pl->req.opt, &sd);
    if ((st = attn_check_rope(&req->opt.rope, pl->d.Dq, err)) != ATTN_OK)
        return st;
    pl->dh = req->hidden_size ? req->hidden_size : pl->d.Dq;
    pl->dout = req->output_size ? req->output_size : pl->d.Dq;
    if (req->n_params > 0) {
        if (!req->params)
            return attn_fail(err, ATTN_ERR_ARG, "params", "n_params > 0 but params is NULL");
        if ((st = bind_params(info, req->params, req->n_params, pl, err)) != ATTN_OK)
            return st;
        if (info->n_params && (st = check_param_shapes(req, info, pl, err)) != ATTN_OK)
            return st;
    }
    if ((st = count_params(pl, err)) != ATTN_OK) /* before dout becomes Dv */
        return st;
    if (!concat)
        pl->dout = pl->d.Dv;
    return fill_shapes(pl, err);
}

attn_status attn_plan(const attn_request *req, attn_shapes *shapes, attn_error *err)
{
    plan pl;
    attn_status st = make_plan(req, &pl, err);
    if (st == ATTN_OK && shapes) {
        pl.shapes.scratch_bytes = attn_front_scratch(&rule_front, &pl, req->n_params);
        *shapes = pl.shapes;
    }
    return st;
}

/* ------------------------------------------------ packed sequences */

/* cu (B + 1 offsets) against total rows: from 0, never falling (a
 * sequence may be empty), ending at total. */
static attn_status check_offsets(const int64_t *cu, int64_t B, int64_t total, const char *field,
                                 const char *rows, attn_error *err)
{
    if (!cu)
        return attn_fail(err, ATTN_ERR_ARG, field, "%s is NULL", field);
    if (cu[0] != 0)
        return attn_fail(err, ATTN_ERR_PARAM, field, "%s must start at 0; got %lld", field,
                         (long long)cu[0]);
    for (int64_t i = 1; i <= B; i++)
        if (cu[i] < cu[i - 1]) /* (their difference may overflow) */
            return attn_fail(err, ATTN_ERR_PARAM, field,
                             "%s must not decrease: sequence %lld would start at row %lld and "
                             "end before row %lld", field, (long long)(i - 1),
                             (long long)cu[i - 1], (long long)cu[i]);
    if (cu[B] != total)
        return attn_fail(err, ATTN_ERR_PARAM, field,
                         "%s ends at %lld but %s has %lld rows; the last offset is the total",
                         field, (long long)cu[B], rows, (long long)total);
    return ATTN_OK;
}

/* What packed sequences do not take: masks and bias (each sequence has
 * its own lengths), and rule concat (parameters sized by the length). */
static attn_status varlen_refusals(const attn_request *r, attn_error *err)
{
    const attn_options *o = &r->opt;
    const char *clash = o->mask.rank ? "mask" : o->bias.rank ? "bias"
                      : o->key_mask.rank ? "key_mask" : NULL;
    if (o->qkv_layout != ATTN_QKV_BHSD)
        return attn_fail(err, ATTN_ERR_PARAM, "qkv_layout",
                         "qkv_layout does not apply to packed sequences: they are (total, H, D) "
                         "already");
    if (r->rule == ATTN_RULE_CONCAT)
        return attn_fail(err, ATTN_ERR_PARAM, "rule",
                         "rule concat does not take packed sequences: its parameters are sized "
                         "by the sequence's length");
    if (clash)
        return attn_fail(err, ATTN_ERR_PARAM, clash,
                         "%s does not apply to packed sequences: each has its own lengths "
                         "(causal, window and the other options apply per sequence)", clash);
    return ATTN_OK;
}

/* The packed request as one sequence of the longest lengths, (1, H,
 * max_q, Dq) and (1, Hkv, max_k, .), which make_plan validates; the
 * offsets checked into *v. */
static attn_status varlen_view(const attn_varlen_request *vr, attn_request *view, varlen *v,
                               attn_error *err)
{
    if (!vr)
        return attn_fail(err, ATTN_ERR_ARG, "", "NULL request");
    const attn_request *r = &vr->req;
    const attn_tensor *ts[3] = {&r->query, &r->key, &r->value};
    static const char *const names[3] = {"query", "key", "value"};
    static const char *const dims[3] = {"(total_q, H, Dq)", "(total_k, Hkv, Dk)",
                                        "(total_k, Hkv, Dv)"};
    for (int i = 0; i < 3; i++) {
        int64_t c;
        char sh[96];
        if (ts[i]->rank != 3)
            return attn_fail(err, ATTN_ERR_SHAPE, names[i],
                             "with packed sequences %s is %s; got rank %d", names[i], dims[i],
                             ts[i]->rank);
        attn_fmt_shape(sh, sizeof sh, 3, ts[i]->shape);
        if (ts[i]->shape[0] < 1 || ts[i]->shape[1] < 1 || ts[i]->shape[2] < 1)
            return attn_fail(err, ATTN_ERR_SHAPE, names[i],
                             "%s has shape %s; every dimension must be at least 1", names[i], sh);
        if (!attn_count(3, ts[i]->shape, &c))
            return attn_fail(err, ATTN_ERR_TOO_LARGE, names[i], "%s has too many elements",
                             names[i]);
    }
    if (r->value.shape[0] != r->key.shape[0])
        return attn_fail(err, ATTN_ERR_SHAPE, "value",
                         "value has %lld rows but key has %lld; each key row has its value row",
                         (long long)r->value.shape[0], (long long)r->key.shape[0]);
    if (vr->batch < 1)
        return attn_fail(err, ATTN_ERR_SHAPE, "batch",
                         "batch is %lld sequences; there must be at least 1",
                         (long long)vr->batch);
    memset(v, 0, sizeof *v);
    v->on = 1;
    v->B = vr->batch;
    v->cq = vr->cu_seqlens_q;
    v->ck = vr->cu_seqlens_k ? vr->cu_seqlens_k : vr->cu_seqlens_q;
    v->total_q = r->query.shape[0];
    v->total_k = r->key.shape[0];
    attn_status st = check_offsets(v->cq, v->B, v->total_q, "cu_seqlens_q", "query", err);
    if (st != ATTN_OK ||
        (st = check_offsets(v->ck, v->B, v->total_k,
                            vr->cu_seqlens_k ? "cu_seqlens_k" : "cu_seqlens_q", "key", err)) != ATTN_OK ||
        (st = varlen_refusals(r, err)) != ATTN_OK)
        return st;
    for (int64_t s = 0; s < v->B; s++) {
        int64_t lq, lk;
        seq_rows(v, s, &lq, &lk, ATTN_ALIGN_TOP_LEFT);
        v->max_q = lq > v->max_q ? lq : v->max_q;
        v->max_k = lk > v->max_k ? lk : v->max_k;
    }
    *view = *r;
    for (int i = 0; i < 3; i++) {
        attn_tensor *t = i == 0 ? &view->query : i == 1 ? &view->key : &view->value;
        *t = (attn_tensor){4, {1, ts[i]->shape[1], i ? v->max_k : v->max_q, ts[i]->shape[2]},
                           ts[i]->data};
    }
    return ATTN_OK;
}

/* err's message as "sequence s: message" (cut to fit); returns st. */
static attn_status in_sequence(attn_error *err, int64_t s, attn_status st)
{
    if (!err)
        return st;
    char pre[40];
    size_t k = (size_t)snprintf(pre, sizeof pre, "sequence %lld: ", (long long)s);
    size_t n = strnlen(err->message, sizeof err->message - 1);
    if (n > sizeof err->message - 1 - k)
        n = sizeof err->message - 1 - k;
    memmove(err->message + k, err->message, n);
    memcpy(err->message, pre, k);
    err->message[k + n] = '\0';
    return st;
}

/* Each sequence passes over the global indices (its check, its marks):
 * more than its tokens would repeat one, and a few bytes of body would
 * cost every sequence that many steps. */
static attn_status global_count(const attn_options *o, int64_t lq, int64_t lk, attn_error *err)
{
    int64_t most = lq > lk ? lq : lk;
    const attn_sparsity *sp = &o->sparsity;
    if (sp->pattern != ATTN_SPARSE_LOCAL_GLOBAL || sp->n_global <= (uint64_t)most)
        return ATTN_OK;
    return attn_fail(err, ATTN_ERR_PARAM, "sparsity.global",
                     "sparsity.global has %zu indices but the sequence has %lld tokens, "
                     "max(Lq, Lk): more would repeat one", sp->n_global, (long long)most);
}

/* The plan of the view made the plan of the packed sequences: its slices
 * each sequence's heads, its results' shapes and its cost. */
static attn_status varlen_finish(plan *pl, const varlen *v, attn_error *err)
{
    const attn_dims *d = &pl->d;
    const attn_options *o = &pl->req.opt;
    attn_shapes *sh = &pl->shapes;
    pl->vl = *v;
    pl->nq = v->B * d->H; /* within the query's rows times H */
    pl->nk = v->B * d->Hkv;
    pl->qrows = v->total_q * d->H;
    pl->krows = v->total_k * d->Hkv;
    double flops = 0.0;
    for (int64_t s = 0; s < v->B; s++) {
        int64_t lq, lk;
        seq_rows(v, s, &lq, &lk, ATTN_ALIGN_TOP_LEFT);
        if (lq == 0) /* nothing to compute, nothing to check */
            continue;
        if (o->hard == ATTN_HARD_TOPK && o->top_k > lk)
            return attn_fail(err, ATTN_ERR_PARAM, "hard.top_k",
                             "top_k is %lld but sequence %lld has %lld keys; top_k must be at "
                             "most every sequence's keys", (long long)o->top_k, (long long)s,
                             (long long)lk);
        attn_status st = lk ? global_count(o, lq, lk, err) : ATTN_OK;
        if (st == ATTN_OK && lk)
            st = attn_sparsity_check(o, lq, lk, err);
        if (st != ATTN_OK)
            return in_sequence(err, s, st);
        flops += rule_flops(pl, (double)d->H, (double)d->Hkv, lq, lk, lk);
    }
    sh->out_rank = 3;
    sh->out_shape[0] = v->total_q, sh->out_shape[1] = d->H, sh->out_shape[2] = d->Dv;
    sh->w_rank = 4;
    sh->w_shape[0] = v->B, sh->w_shape[1] = d->H, sh->w_shape[2] = v->max_q;
    sh->w_shape[3] = v->max_k;
    int64_t wc;
    if (!attn_count(3, sh->out_shape, &sh->out_count) || !attn_count(4, sh->w_shape, &wc))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "", "the result would be too large");
    sh->w_count = o->need_weights ? wc : 0;
    sh->flops = flops;
    sh->layout_rows = sh->layout_cols = sh->layout_block = 0; /* one a sequence */
    return ATTN_OK;
}

static attn_status make_varlen_plan(const attn_varlen_request *vr, plan *pl, attn_error *err)
{
    attn_request view;
    varlen v;
    attn_status st = varlen_view(vr, &view, &v, err);
    if (st != ATTN_OK || (st = make_plan(&view, pl, err)) != ATTN_OK)
        return st;
    return varlen_finish(pl, &v, err);
}

attn_varlen_request attn_varlen_request_default(attn_rule rule)
{
    attn_varlen_request r;
    memset(&r, 0, sizeof r);
    r.req = attn_request_default(rule);
    return r;
}

attn_status attn_varlen_plan(const attn_varlen_request *req, attn_shapes *shapes, attn_error *err)
{
    plan pl;
    attn_status st = make_varlen_plan(req, &pl, err);
    if (st == ATTN_OK && shapes) {
        pl.shapes.scratch_bytes = attn_front_scratch(&rule_front, &pl, req->req.n_params);
        *shapes = pl.shapes;
    }
    return st;
}

attn_status attn_varlen_seed_params(const attn_varlen_request *req, uint64_t seed,
                                    attn_param_set **out, attn_error *err)
{
    plan pl;
    attn_status st = make_varlen_plan(req, &pl, err);
    return st != ATTN_OK ? st : attn_seed_params(&pl.req, seed, out, err);
}

attn_status attn_varlen_compute(attn_ctx *ctx, const attn_varlen_request *req, float *output,
                                float *weights, float *lse, attn_error *err)
{
    plan pl;
    attn_status st = make_varlen_plan(req, &pl, err);
    if (st == ATTN_OK && lse)
        st = attn_check_lse(req->req.rule, &req->req.opt, attn_rule_name(req->req.rule), err);
    return st != ATTN_OK ? st
                         : attn_execute(ctx, &rule_front, &pl, req->req.n_params, &pl.shapes,
                                        output, weights, lse, err);
}

/* ------------------------------------------------ the pipeline's stages */

static attn_status rule_bind(void *p, const attn_named *params, size_t n, attn_error *err)
{
    plan *pl = p;
    attn_request r = pl->req;
    varlen v = pl->vl;
    r.params = params;
    r.n_params = n;
    attn_status st = make_plan(&r, pl, err);
    return st == ATTN_OK && v.on ? varlen_finish(pl, &v, err) : st;
}

static const float *pdata(const plan *pl, int i)
{
    return pl->p[i] ? pl->p[i]->data : NULL;
}

static attn_gemm_call gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                           const float *b, int64_t ldb, const float *bias, float *c, int64_t ldc)
{
    attn_gemm_call g = {m, n, k, a, b, bias, c, lda, ldb, ldc, NULL, NULL, 0, 0};
    return g;
}

/* The rule's projections into g; how many. General's keys k' = k W^T + b
 * (so q . (W k + b) = q . k'); additive's and concat_tanh's Wq q and
 * Wk k + b (concat_tanh's W [q; k] split by columns); concat's scores
 * W [q; k] + b as its two halves, which rule_run adds. */
static int rule_gemms(const plan *pl, attn_gemm_call *g)
{
    const attn_dims *d = &pl->d;
    int64_t nq = pl->qrows, nk = pl->krows, Dq = d->Dq, Dk = d->Dk, dh = pl->dh;
    int64_t dqk = Dq + Dk, lkeys = pl->lkeys;
    const float *Q = pl->req.query.data, *K = pl->req.key.data, *w0 = pdata(pl, 0);
    switch (pl->req.rule) {
    case ATTN_RULE_GENERAL:
        g[0] = gemm(nk, Dq, Dk, K, Dk, w0, Dk, pdata(pl, 1), pl->kp, Dq);
        return 1;
    case ATTN_RULE_ADDITIVE:
        g[0] = gemm(nq, dh, Dq, Q, Dq, w0, Dq, NULL, pl->qp, dh);
        g[1] = gemm(nk, dh, Dk, K, Dk, pdata(pl, 1), Dk, pdata(pl, 2), pl->kp, dh);
        return 2;
    case ATTN_RULE_CONCAT_TANH:
        g[0] = gemm(nq, dh, Dq, Q, Dq, w0, dqk, NULL, pl->qp, dh);
        g[1] = gemm(nk, dh, Dk, K, Dk, w0 ? w0 + Dq : NULL, dqk, pdata(pl, 1), pl->kp, dh);
        return 2;
    case ATTN_RULE_CONCAT: /* Hkv = H, Lk = Lq */
        g[0] = gemm(nq, lkeys, Dq, Q, Dq, w0, dqk, pdata(pl, 1), pl->qp, lkeys);
        g[1] = gemm(nq, lkeys, Dk, K, Dk, w0 ? w0 + Dq : NULL, dqk, NULL, pl->kp, lkeys);
        return 2;
    default:
        return 0;
    }
}

/* concat's o = out([q; c]) = Wo_q q + b (into out) and Wo_c c (into
 * out2), which rule_run adds; the other rules have none. */
static int rule_out_gemms(const plan *pl, float *out, attn_gemm_call *g)
{
    const attn_dims *d = &pl->d;
    int64_t BL = pl->nq * d->Lq, Dq = d->Dq, Dv = d->Dv, dout = pl->dout, dqv = Dq + Dv;
    const float *ow = pdata(pl, 2);
    if (pl->req.rule != ATTN_RULE_CONCAT)
        return 0;
    g[0] = gemm(BL, dout, Dq, pl->req.query.data, Dq, ow, dqv, pdata(pl, 3), out, dout);
    g[1] = gemm(BL, dout, Dv, pl->ctxv, Dv, ow ? ow + Dq : NULL, dqv, NULL, pl->out2, dout);
    return 2;
}

/* The kind and width of the rule's scores. */
static attn_score_kind rule_kind(const plan *pl, int64_t *width)
{
    switch (pl->req.rule) {
    case ATTN_RULE_GENERAL:
        *width = pl->d.Dq; /* the projected keys */
        return ATTN_SCORE_DOT;
    case ATTN_RULE_DOT:
    case ATTN_RULE_SCALED_DOT:
    case ATTN_RULE_LINEAR: /* phi(q) . phi(k), in linear.c */
        *width = pl->d.Dk;
        return ATTN_SCORE_DOT;
    case ATTN_RULE_CONCAT:
        *width = 0;
        return ATTN_SCORE_GIVEN;
    default:
        *width = pl->dh;
        return ATTN_SCORE_TANH;
    }
}

/* rope's positions: query row i at i' = i + off, key j at j. Packed
 * sequences take one table over every sequence's positions, the query
 * rows of each moved by its slice's shift (slice_of). */
static void rope_plan(plan *pl)
{
    const attn_dims *d = &pl->d;
    const attn_options *o = &pl->req.opt;
    if (!pl->vl.on) {
        attn_rope_plan(&o->rope, d->Dq, d->Lq, d->Lk,
                       o->align == ATTN_ALIGN_BOTTOM_RIGHT ? d->Lk - d->Lq : 0, &pl->rope);
        return;
    }
    int64_t lo = 0, hi = 0, lq, lk;
    for (int64_t s = 0; s < pl->vl.B; s++) {
        int64_t off = seq_rows(&pl->vl, s, &lq, &lk, o->align);
        lo = off < lo ? off : lo;
        hi = lq + off > hi ? lq + off : hi;
        hi = lk > hi ? lk : hi;
    }
    /* queries at lo .. hi - 1 and keys at 0 .. hi - 1: set[0].pos0 = 0,
     * set[1].pos0 = -lo */
    attn_rope_plan(&o->rope, d->Dq, hi - lo, hi, lo, &pl->rope);
}

/* The sparsity pattern in the kernels' form: packed sequences each lay
 * out their own, over their own lengths. */
static void sparse_lay_out(plan *pl, attn_ws *ws)
{
    const attn_options *o = &pl->req.opt;
    if (!pl->vl.on) {
        attn_sparse_lay_out(ws, o, pl->d.Lq, pl->d.Lk, &pl->sparse);
        return;
    }
    int on = o->sparsity.pattern != ATTN_SPARSE_NONE;
    pl->seq_sparse = attn_ws_take(ws, on ? (double)pl->vl.B : 0.0, sizeof(attn_sparse));
    for (int64_t s = 0; on && s < pl->vl.B; s++) {
        int64_t lq, lk;
        attn_sparse measured;
        seq_rows(&pl->vl, s, &lq, &lk, o->align);
        if (lq && lk) /* an empty sequence has no head job to read it */
            attn_sparse_lay_out(ws, o, lq, lk, ws->base ? &pl->seq_sparse[s] : &measured);
    }
}

/* The rule's pieces: qp, kp, ctxv, out2 (each only where the rule has it),
 * then one head job per batch row; and what its kernels will ask. */
static void rule_lay_out(void *p, attn_ws *ws)
{
    plan *pl = p;
    const attn_dims *d = &pl->d;
    double bq = (double)pl->qrows, bk = (double)pl->krows;
    double f[4] = {0.0, 0.0, 0.0, 0.0};
    switch (pl->req.rule) {
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
    pl->qp = attn_ws_take(ws, f[0], sizeof(float));
    pl->kp = attn_ws_take(ws, f[1], sizeof(float));
    pl->ctxv = attn_ws_take(ws, f[2], sizeof(float));
    pl->out2 = attn_ws_take(ws, f[3], sizeof(float));
    sparse_lay_out(pl, ws);
    const attn_options *o = &pl->req.opt;
    if (o->rope.on) {
        rope_plan(pl);
        attn_rope_take(ws, &pl->rope);
        int copies = !attn_rope_in_kernel(o, d->Lq); /* rows rotated before the kernels */
        pl->qr = attn_ws_take(ws, copies ? bq * (double)d->Dq : 0.0, sizeof(float));
        pl->kr = attn_ws_take(ws, copies ? bk * (double)d->Dk : 0.0, sizeof(float));
    }
    int linear = pl->req.rule == ATTN_RULE_LINEAR;
    if (ws->base) {
        if (linear)
            attn_linear_take(ws, group_of(pl), NULL, pl->req.opt.causal, &pl->heads);
        else
            attn_heads_take(ws, group_of(pl), NULL, &pl->heads);
        return;
    }
    attn_gemm_call g[2]; /* measuring: what the kernels will ask */
    attn_ws_gemms(ws, g, rule_gemms(pl, g));
    attn_ws_gemms(ws, g, rule_out_gemms(pl, NULL, g));
    attn_head_job model;
    attn_head_init(&model, &pl->req.opt, 0, 0, d->H, d->Lq, pl->lkeys,
                   attn_model_weights(pl->req.opt.need_weights));
    model.kind = rule_kind(pl, &model.d);
    model.dv = d->Dv;
    model.kv_group = d->Hkv > 0 ? d->H / d->Hkv : 1;
    if (linear)
        attn_linear_take(ws, group_of(pl), &model, pl->req.opt.causal, &pl->heads);
    else
        attn_heads_take(ws, group_of(pl), &model, &pl->heads);
}

/* Where slice r's rows lie, in rows of the packed tensors: query (and
 * output) rows from q0, qstep apart; key rows from k0 and value rows from
 * v0, kstep apart; n0 the number of its first query row among all (the
 * lse's and the draws' order), shift its queries' rope shift. A batch's
 * slice r = b H + h holds Lq rows from r Lq, or with BSHD every H-th
 * row from b Lq H + h; a packed sequence's head h is every H-th row of
 * (total_q, H, D) from its first. */
typedef struct {
    int64_t b, h, lq, lk, q0, qstep, k0, v0, kstep, n0, shift;
} slice;

static slice slice_of(const plan *pl, int64_t r)
{
    const attn_dims *d = &pl->d;
    slice c;
    c.b = r / d->H;
    c.h = r % d->H;
    int64_t g = c.h / (d->H / d->Hkv), kr = c.b * d->Hkv + g;
    if (!pl->vl.on) {
        c.lq = d->Lq, c.lk = pl->lkeys;
        c.q0 = c.n0 = r * d->Lq, c.k0 = kr * d->Lk, c.v0 = kr * d->Lv;
        c.qstep = c.kstep = 1;
        c.shift = 0;
        if (pl->bshd) {
            c.q0 = c.b * d->Lq * d->H + c.h, c.qstep = d->H;
            c.k0 = c.b * d->Lk * d->Hkv + g, c.v0 = c.b * d->Lv * d->Hkv + g, c.kstep = d->Hkv;
        }
        return c;
    }
    const varlen *v = &pl->vl;
    int64_t off = seq_rows(v, c.b, &c.lq, &c.lk, pl->req.opt.align);
    c.q0 = v->cq[c.b] * d->H + c.h, c.qstep = d->H;
    c.k0 = c.v0 = v->ck[c.b] * d->Hkv + g, c.kstep = d->Hkv;
    c.n0 = c.h * v->total_q + v->cq[c.b];
    c.shift = off + pl->rope.set[1].pos0 - pl->rope.set[0].pos0;
    return c;
}

/* Slice r's head into j (batch row or sequence b, query head h; h = 0
 * without heads): the rule's score and where its output goes. Its key and
 * value rows are those of head h / (H / Hkv). */
static void rule_head(const plan *pl, int64_t r, slice c, attn_head_job *j, float *out, float *w)
{
    const attn_dims *d = &pl->d;
    int64_t Dq = d->Dq, Dv = d->Dv, lkeys = pl->lkeys, kd;
    attn_head_init(j, &pl->req.opt, c.b, c.h, d->H, c.lq, c.lk, w ? w + r * d->Lq * lkeys : NULL);
    j->w_stride = lkeys;
    j->draw_base = (uint64_t)c.n0;
    j->lse = pl->lse ? pl->lse + c.n0 : NULL;
    j->kind = rule_kind(pl, &kd);
    j->d = kd;
    j->dv = Dv;
    if (pl->req.opt.sparsity.pattern != ATTN_SPARSE_NONE)
        j->m.sparse = pl->vl.on ? &pl->seq_sparse[c.b] : &pl->sparse;
    j->v = pl->req.value.data + c.v0 * Dv;
    j->v_stride = c.kstep * Dv;
    j->o = (pl->req.rule == ATTN_RULE_CONCAT ? pl->ctxv : out) + c.q0 * Dv;
    j->o_stride = c.qstep * Dv;
    if (j->kind == ATTN_SCORE_DOT) {
        const attn_options *o = &pl->req.opt;
        int copies = o->rope.on && !attn_rope_in_kernel(o, d->Lq);
        const float *q = copies ? pl->qr : pl->req.query.data;
        const float *k = copies ? pl->kr : pl->req.key.data;
        j->rope = o->rope.on && !copies ? &pl->rope : NULL;
        j->rope_shift = c.shift;
        j->a = q + c.q0 * Dq; j->a_stride = c.qstep * Dq;
        j->b = (pl->req.rule == ATTN_RULE_GENERAL ? pl->kp : k) + c.k0 * kd;
        j->b_stride = c.kstep * kd;
        j->scale = pl->req.rule != ATTN_RULE_SCALED_DOT ? 1.0f
                 : pl->req.has_scale ? pl->req.scale : (float)(1.0 / sqrt((double)d->Dk));
    } else if (j->kind == ATTN_SCORE_GIVEN) {
        j->a = pl->qp + c.q0 * lkeys; j->a_stride = c.qstep * lkeys;
    } else {
        j->a = pl->qp + c.q0 * kd; j->a_stride = c.qstep * kd;
        j->b = pl->kp + c.k0 * kd; j->b_stride = c.kstep * kd;
        j->vw = pl->req.rule == ATTN_RULE_ADDITIVE ? pdata(pl, 3) : NULL;
    }
}

/* a[e] += b[e] for e < n: the two halves of a split projection. */
static void add_into(float *a, const float *b, int64_t n)
{
    for (int64_t e = 0; e < n; e++)
        a[e] += b[e];
}

/* Packed sequences' query and key rows rotated into qr and kr, one
 * sequence at a time (its rows' positions start at 0). */
static void rope_sequences(const attn_exec *ex, plan *pl)
{
    const attn_dims *d = &pl->d;
    const varlen *v = &pl->vl;
    int64_t wq = d->H * d->Dq, wk = d->Hkv * d->Dk, base = pl->rope.set[0].pos0, lq, lk;
    for (int64_t s = 0; s < v->B; s++) {
        int64_t off = seq_rows(v, s, &lq, &lk, pl->req.opt.align);
        if (!lq || !lk)
            continue;
        attn_rope_set_rows(&pl->rope.set[0], pl->req.query.data + v->cq[s] * wq, wq,
                           pl->qr + v->cq[s] * wq, wq, 1, lq, d->H);
        attn_rope_set_rows(&pl->rope.set[1], pl->req.key.data + v->ck[s] * wk, wk,
                           pl->kr + v->ck[s] * wk, wk, 1, lk, d->Hkv);
        pl->rope.set[0].pos0 = off + pl->rope.set[1].pos0; /* row i' - lo */
        attn_rope_rows(ex, &pl->rope);
    }
    pl->rope.set[0].pos0 = base;
}

/* dot and scaled_dot's rotary embedding: the table, and for the row
 * driver query and key rows rotated into qr and kr. */
static void rule_rope(const attn_exec *ex, plan *pl)
{
    const attn_dims *d = &pl->d;
    attn_rope_table(ex, &pl->rope);
    if (attn_rope_in_kernel(&pl->req.opt, d->Lq))
        return;
    if (pl->vl.on) {
        rope_sequences(ex, pl);
        return;
    }
    /* B Lq rows of H heads each (BSHD), or B H rows of one */
    int64_t hq = pl->bshd ? d->H : 1, hk = pl->bshd ? d->Hkv : 1;
    attn_rope_set_rows(&pl->rope.set[0], pl->req.query.data, hq * d->Dq, pl->qr, hq * d->Dq,
                       pl->nq / hq, d->Lq, hq);
    attn_rope_set_rows(&pl->rope.set[1], pl->req.key.data, hk * d->Dk, pl->kr, hk * d->Dk,
                       pl->nk / hk, d->Lk, hk);
    attn_rope_rows(ex, &pl->rope);
}

/* A packed sequence's head whose queries have no key (FlashAttention's
 * empty key sequence): output rows of zeros, as for any row with nothing
 * to attend, and lse the log of the empty sum, or with a sink its logit.
 * zero_padding has zeroed its weights. */
static void no_keys(const plan *pl, slice c, float *out)
{
    const attn_options *o = &pl->req.opt;
    int64_t Dv = pl->d.Dv;
    for (int64_t i = 0; i < c.lq; i++) {
        memset(out + (c.q0 + i * c.qstep) * Dv, 0, (size_t)Dv * sizeof(float));
        if (pl->lse)
            pl->lse[c.n0 + i] = o->sinks ? o->sinks[c.h] : -INFINITY;
    }
}

/* Packed sequences' weights past each sequence's lengths: zero. */
static void zero_padding(const plan *pl, float *w)
{
    int64_t mq = pl->d.Lq, mk = pl->lkeys;
    for (int64_t r = 0; r < pl->nq; r++) {
        slice c = slice_of(pl, r);
        float *ws = w + r * mq * mk;
        for (int64_t i = 0; i < c.lq && c.lk < mk; i++)
            memset(ws + i * mk + c.lk, 0, (size_t)(mk - c.lk) * sizeof(float));
        memset(ws + c.lq * mk, 0, (size_t)((mq - c.lq) * mk) * sizeof(float));
    }
}

static attn_status rule_run(const attn_exec *ex, void *p, float *out, float *w, float *lse,
                            attn_error *err)
{
    plan *pl = p;
    pl->lse = lse;
    const attn_dims *d = &pl->d;
    attn_gemm_call g[2];
    attn_exec_gemms(ex, g, rule_gemms(pl, g));
    if (pl->req.opt.rope.on)
        rule_rope(ex, pl);
    if (pl->req.rule == ATTN_RULE_CONCAT)
        add_into(pl->qp, pl->kp, pl->nq * d->Lq * pl->lkeys);
    if (pl->vl.on && pl->req.opt.need_weights)
        zero_padding(pl, w);
    int64_t run = group_of(pl);
    for (int64_t r0 = 0; r0 < pl->nq; r0 += run) {
        int64_t end = pl->nq - r0 < run ? pl->nq : r0 + run;
        size_t n = 0; /* the run's jobs: its slices with queries and keys */
        for (int64_t r = r0; r < end; r++) {
            slice c = slice_of(pl, r);
            if (c.lq && !c.lk)
                no_keys(pl, c, out);
            else if (c.lq)
                rule_head(pl, r, c, &pl->heads.jobs[n++], out, pl->req.opt.need_weights ? w : NULL);
        }
        attn_status st = !n ? ATTN_OK
                       : pl->req.rule == ATTN_RULE_LINEAR
                       ? attn_linear_run(ex, &pl->heads, n, &pl->req.opt, err)
                       : attn_exec_heads(ex, &pl->heads, n, err);
        if (st != ATTN_OK)
            return st;
    }
    if (pl->req.rule != ATTN_RULE_CONCAT)
        return ATTN_OK;
    attn_exec_gemms(ex, g, rule_out_gemms(pl, out, g));
    add_into(out, pl->out2, pl->nq * d->Lq * pl->dout);
    return ATTN_OK;
}

attn_status attn_compute(attn_ctx *ctx, const attn_request *req,
                         float *output, float *weights, attn_error *err)
{
    return attn_compute_lse(ctx, req, output, weights, NULL, err);
}

attn_status attn_compute_lse(attn_ctx *ctx, const attn_request *req, float *output,
                             float *weights, float *lse, attn_error *err)
{
    plan pl;
    attn_status st = make_plan(req, &pl, err);
    if (st == ATTN_OK && lse)
        st = attn_check_lse(req->rule, &req->opt, attn_rule_name(req->rule), err);
    return st != ATTN_OK ? st
                         : attn_execute(ctx, &rule_front, &pl, req->n_params, &pl.shapes,
                                        output, weights, lse, err);
}

static const attn_front rule_front = {
    "attn_compute", rule_seed_specs, rule_bind, rule_lay_out, rule_run,
};
