/* multihead.c - POST /multihead: torch.nn.MultiheadAttention semantics with
 * grouped/multi-query heads, sinusoidal positional encoding and an
 * optional residual + LayerNorm. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"

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
    P_NORM_W, P_NORM_B,
    P_COUNT
};

static const char *const pnames[P_COUNT] = {
    "in_proj_weight", "in_proj_bias", "q_proj_weight", "k_proj_weight", "v_proj_weight",
    "out_proj.weight", "out_proj.bias",
    "W_q.weight", "W_q.bias", "W_k.weight", "W_k.bias", "W_v.weight", "W_v.bias",
    "W_o.weight", "W_o.bias",
    "norm.weight", "norm.bias",
};

typedef struct {
    attn_dims d;      /* Dq = E, Dk = kdim, Dv = vdim */
    int64_t H, Hkv, hd, ekv, E3;
    const attn_tensor *p[P_COUNT];
    /* Resolved projections (biases NULL when zero). */
    const float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo, *nw, *nb;
    attn_shapes shapes;
} mplan;

static attn_status pfail(attn_error *err, attn_status st, int slot, const char *fmt, ...)
    ATTN_PRINTF(4, 5);

static attn_status pfail(attn_error *err, attn_status st, int slot, const char *fmt, ...)
{
    char field[64];
    snprintf(field, sizeof field, "params.%s", pnames[slot]);
    if (err) {
        snprintf(err->field, sizeof err->field, "%s", field);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return st;
}

static attn_status bind_mha_params(const attn_mha_request *req, mplan *pl, attn_error *err)
{
    for (size_t g = 0; g < req->n_params; g++) {
        const char *name = req->params[g].name ? req->params[g].name : "";
        int at = -1;
        for (int i = 0; i < P_COUNT; i++)
            if (strcmp(name, pnames[i]) == 0)
                at = i;
        if (at < 0) {
            char field[64];
            snprintf(field, sizeof field, "params.%s", name);
            return attn_fail(err, ATTN_ERR_PARAM, field,
                             "unknown parameter %s; multi-head takes in_proj_weight, "
                             "in_proj_bias, q_proj_weight, k_proj_weight, v_proj_weight, "
                             "out_proj.weight, out_proj.bias, or W_q/W_k/W_v/W_o .weight and "
                             ".bias, and norm.weight, norm.bias",
                             name);
        }
        if (pl->p[at])
            return pfail(err, ATTN_ERR_PARAM, at, "parameter %s is given twice", name);
        pl->p[at] = &req->params[g].t;
    }
    int torch = 0, wset = 0, first_w = -1, first_t = -1;
    for (int i = P_IN_W; i <= P_OUT_B; i++)
        if (pl->p[i]) { torch = 1; if (first_t < 0) first_t = i; }
    for (int i = P_WQ_W; i <= P_WO_B; i++)
        if (pl->p[i]) { wset = 1; if (first_w < 0) first_w = i; }
    if (torch && wset)
        return pfail(err, ATTN_ERR_PARAM, first_w,
                     "%s cannot be mixed with %s; use either PyTorch's in_proj/out_proj "
                     "names or the W_q/W_k/W_v/W_o names",
                     pnames[first_w], pnames[first_t]);
    if (!req->residual_norm)
        for (int i = P_NORM_W; i <= P_NORM_B; i++)
            if (pl->p[i])
                return pfail(err, ATTN_ERR_PARAM, i,
                             "%s is used only when residual_norm is true", pnames[i]);
    if (wset) {
        static const int req_w[4] = {P_WQ_W, P_WK_W, P_WV_W, P_WO_W};
        static const char *const shp[4] = {"(E, E)", "(Hkv*E/H, kdim)", "(Hkv*E/H, vdim)",
                                           "(E, E)"};
        for (int i = 0; i < 4; i++)
            if (!pl->p[req_w[i]])
                return pfail(err, ATTN_ERR_PARAM, req_w[i],
                             "params.%s is missing; multi-head with the W_* names needs "
                             "W_q.weight, W_k.weight, W_v.weight, W_o.weight (here %s) "
                             "(params are all or none)",
                             pnames[req_w[i]], shp[i]);
        return ATTN_OK;
    }
    int split = pl->p[P_QW] || pl->p[P_KW] || pl->p[P_VW];
    if (split && pl->p[P_IN_W])
        return pfail(err, ATTN_ERR_PARAM, P_QW,
                     "give either in_proj_weight or q_proj_weight, k_proj_weight and "
                     "v_proj_weight, not both");
    if (split) {
        for (int i = P_QW; i <= P_VW; i++)
            if (!pl->p[i])
                return pfail(err, ATTN_ERR_PARAM, i,
                             "params.%s is missing; q_proj_weight, k_proj_weight and "
                             "v_proj_weight go together (params are all or none)",
                             pnames[i]);
    } else if (!pl->p[P_IN_W]) {
        return pfail(err, ATTN_ERR_PARAM, P_IN_W,
                     "params.in_proj_weight is missing; multi-head needs in_proj_weight "
                     "(3E, E) or q_proj_weight, k_proj_weight, v_proj_weight "
                     "(params are all or none)");
    }
    if (!pl->p[P_OUT_W])
        return pfail(err, ATTN_ERR_PARAM, P_OUT_W,
                     "params.out_proj.weight is missing; multi-head needs out_proj.weight "
                     "(E, E) (params are all or none)");
    if (pl->Hkv != pl->H)
        return attn_fail(err, ATTN_ERR_PARAM, "num_kv_heads",
                         "num_kv_heads (%lld) < num_heads (%lld) needs the W_q/W_k/W_v/W_o "
                         "parameter names (PyTorch's in_proj/out_proj have one key head per "
                         "query head)",
                         (long long)pl->Hkv, (long long)pl->H);
    if (pl->p[P_IN_W] && (pl->d.Dk != pl->d.Dq || pl->d.Dv != pl->d.Dq))
        return pfail(err, ATTN_ERR_SHAPE, P_IN_W,
                     "in_proj_weight needs kdim = vdim = E, but key has %lld features, "
                     "value %lld and query %lld; give q_proj_weight, k_proj_weight and "
                     "v_proj_weight instead",
                     (long long)pl->d.Dk, (long long)pl->d.Dv, (long long)pl->d.Dq);
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
        [P_NORM_B] = {1, E, 0, "(E)"},
    };
    for (int i = 0; i < P_COUNT; i++) {
        if (!pl->p[i])
            continue;
        int64_t shape[2] = {want[i].s0, want[i].s1};
        attn_status st = attn_check_param_shape(pnames[i], pl->p[i], want[i].rank, shape,
                                                want[i].sym, "multi-head", err);
        if (st != ATTN_OK)
            return st;
    }
    return ATTN_OK;
}

static const float *pdata(const mplan *pl, int slot)
{
    return pl->p[slot] ? pl->p[slot]->data : NULL;
}

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
}

/* The parameters attn_mha_seed_params draws for the planned sizes, in
 * drawing order, into s (room for ATTN_SEED_MAX); returns how many. The
 * one table both seeding and the plan's cost read. */
static size_t mha_seed_specs(const mplan *pl, int residual_norm, attn_seed_spec *s)
{
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
    if (residual_norm) {
        s[n++] = (attn_seed_spec){"norm.weight", 1, {E, 0}, E, ATTN_INIT_ONES};
        s[n++] = (attn_seed_spec){"norm.bias", 1, {E, 0}, E, ATTN_INIT_ZEROS};
    }
    return n;
}

/* How mha_run lays its work out: the flags it runs with and the floats of
 * each scratch piece, in carving order. */
typedef struct {
    int pe, has_k, has_v, avg, fused;
    int64_t qw;     /* floats per row of the q projection (3E when fused) */
    int64_t jobs_n; /* head jobs per kernel run */
    double f[8];    /* encoded q, k, v; projected q, k, v; heads' output; per-head weights */
} mha_layout;

/* Self-attention whose q/k/v weights (and biases) lie back to back, as
 * in_proj_weight does (and the seeded set does): one GEMM of 3E outputs
 * packs each input row block once instead of three times, and the heads
 * read q, k and v straight out of its (L, 3E) rows. */
static int is_fused(const attn_mha_request *req, const mplan *pl)
{
    int64_t E = pl->d.Dq;
    if (req->key.rank || req->value.rank || pl->Hkv != pl->H)
        return 0;
    if (!pl->wq) /* planned without parameters: the seeded in_proj_* */
        return 1;
    return pl->wk == pl->wq + E * E && pl->wv == pl->wk + E * E &&
           ((!pl->bq && !pl->bk && !pl->bv) ||
            (pl->bq && pl->bk == pl->bq + E && pl->bv == pl->bk + E));
}

static void mha_lay_out(const attn_mha_request *req, const mplan *pl, mha_layout *ly)
{
    const attn_dims *d = &pl->d;
    double bq = (double)d->B * (double)d->Lq, bk = (double)d->B * (double)d->Lk;
    ly->pe = req->positional_encoding == ATTN_PE_SINUSOIDAL;
    ly->has_k = req->key.rank != 0;
    ly->has_v = req->value.rank != 0;
    ly->avg = req->opt.need_weights && req->average_weights;
    ly->fused = is_fused(req, pl);
    ly->qw = ly->fused ? pl->E3 : d->Dq;
    ly->jobs_n = ly->avg ? pl->H : d->B * pl->H; /* averaging runs one batch row at a time */
    ly->f[0] = ly->pe ? bq * (double)d->Dq : 0.0;
    ly->f[1] = ly->pe && ly->has_k ? bk * (double)d->Dk : 0.0;
    ly->f[2] = ly->pe && ly->has_v ? bk * (double)d->Dv : 0.0;
    ly->f[3] = bq * (double)ly->qw;
    ly->f[4] = ly->f[5] = ly->fused ? 0.0 : bk * (double)pl->ekv;
    ly->f[6] = bq * (double)d->Dq;
    ly->f[7] = ly->avg ? (double)pl->H * (double)d->Lq * (double)d->Lk : 0.0;
}

/* Workspace bytes of a layout: its float pieces and the job arrays. */
static double mha_scratch(const mha_layout *ly)
{
    double bytes = 0.0;
    for (int i = 0; i < 8; i++)
        bytes += attn_ws_bytes(ly->f[i], sizeof(float));
    return bytes + attn_ws_bytes((double)ly->jobs_n, sizeof(attn_sdpa_job)) +
           attn_ws_bytes((double)ly->jobs_n, sizeof(attn_row_job));
}

/* Floating-point operations of mha_run (2 per multiply-add): the q, k, v
 * and output projections, and per head the scores and the weighted sum. */
static double mha_flops(const mplan *pl)
{
    const attn_dims *d = &pl->d;
    double B = (double)d->B, Lq = (double)d->Lq, Lk = (double)d->Lk, E = (double)d->Dq;
    double proj = 2.0 * Lq * E * E + Lk * (double)pl->ekv * (double)(d->Dk + d->Dv);
    return 2.0 * B * (proj + 2.0 * Lq * Lk * E);
}

/* Floats of the bound parameters, or of the seeded set when none are. */
static double mha_param_floats(const attn_mha_request *req, const mplan *pl)
{
    if (req->n_params == 0) {
        attn_seed_spec s[ATTN_SEED_MAX];
        return attn_seed_floats(s, mha_seed_specs(pl, req->residual_norm, s));
    }
    return attn_tensors_floats(pl->p, P_COUNT);
}

/* Validates everything but the parameters when with_params is 0. */
static attn_status make_mplan(const attn_mha_request *req, int with_params, mplan *pl,
                              attn_error *err)
{
    memset(pl, 0, sizeof *pl);
    if (!req)
        return attn_fail(err, ATTN_ERR_ARG, "", "NULL request");
    const attn_tensor *k = req->key.rank ? &req->key : &req->query;
    const attn_tensor *v = req->value.rank ? &req->value : &req->query;
    attn_status st = attn_check_qkv(&req->query, k, v, &pl->d, err);
    if (st != ATTN_OK)
        return st;
    attn_dims *d = &pl->d;
    if (d->Lv != d->Lk)
        return attn_fail(err, ATTN_ERR_SHAPE, "value",
                         "value has %lld rows but key has %lld; multi-head needs one value "
                         "row per key (Lv = Lk)",
                         (long long)d->Lv, (long long)d->Lk);
    int64_t E = d->Dq;
    pl->H = req->num_heads;
    if (pl->H < 1)
        return attn_fail(err, ATTN_ERR_PARAM, "num_heads",
                         "num_heads must be at least 1, got %lld", (long long)pl->H);
    if (E % pl->H != 0)
        return attn_fail(err, ATTN_ERR_PARAM, "num_heads",
                         "the embedding size E = %lld (query's features) is not divisible by "
                         "num_heads = %lld",
                         (long long)E, (long long)pl->H);
    pl->Hkv = req->num_kv_heads ? req->num_kv_heads : pl->H;
    if (pl->Hkv < 1 || pl->Hkv > pl->H || pl->H % pl->Hkv != 0)
        return attn_fail(err, ATTN_ERR_PARAM, "num_kv_heads",
                         "num_kv_heads must divide num_heads = %lld, got %lld",
                         (long long)pl->H, (long long)pl->Hkv);
    pl->hd = E / pl->H;
    pl->ekv = pl->Hkv * pl->hd;
    if (!attn_size_mul(E, 3, &pl->E3))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "query", "E is too large");
    if (req->positional_encoding != ATTN_PE_NONE &&
        req->positional_encoding != ATTN_PE_SINUSOIDAL)
        return attn_fail(err, ATTN_ERR_PARAM, "positional_encoding",
                         "positional_encoding must be \"sinusoidal\" or absent");
    if ((st = attn_check_options(&req->opt, d->B, pl->H, d->Lq, d->Lk, "Lk", err)) != ATTN_OK)
        return st;
    if (with_params && req->n_params > 0) {
        if (!req->params)
            return attn_fail(err, ATTN_ERR_ARG, "params", "n_params > 0 but params is NULL");
        if ((st = bind_mha_params(req, pl, err)) != ATTN_OK ||
            (st = check_mha_shapes(pl, err)) != ATTN_OK)
            return st;
        resolve(pl);
    }
    attn_shapes *sh = &pl->shapes;
    int o = d->batched, r = 0;
    sh->out_rank = 2 + o;
    if (o)
        sh->out_shape[0] = d->B;
    sh->out_shape[o] = d->Lq;
    sh->out_shape[o + 1] = E;
    if (o)
        sh->w_shape[r++] = d->B;
    if (!req->average_weights)
        sh->w_shape[r++] = pl->H;
    sh->w_shape[r++] = d->Lq;
    sh->w_shape[r++] = d->Lk;
    sh->w_rank = r;
    int64_t wc;
    if (!attn_count(sh->out_rank, sh->out_shape, &sh->out_count) ||
        !attn_count(sh->w_rank, sh->w_shape, &wc))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "", "the result would be too large");
    sh->w_count = req->opt.need_weights ? wc : 0;
    mha_layout ly;
    mha_lay_out(req, pl, &ly);
    sh->param_floats = mha_param_floats(req, pl);
    sh->flops = mha_flops(pl);
    sh->scratch_bytes = mha_scratch(&ly);
    return ATTN_OK;
}

attn_status attn_mha_plan(const attn_mha_request *req, attn_shapes *shapes, attn_error *err)
{
    mplan pl;
    attn_status st = make_mplan(req, 1, &pl, err);
    if (st == ATTN_OK && shapes)
        *shapes = pl.shapes;
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
    size_t n = mha_seed_specs(&pl, req->residual_norm, s);
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

static attn_status mha_run(attn_ctx *ctx, const attn_mha_request *req, const mplan *pl,
                           float *output, float *weights, attn_error *err)
{
    const attn_dims *d = &pl->d;
    const attn_options *opt = &req->opt;
    int threads = ctx->threads;
    int64_t B = d->B, Lq = d->Lq, Lk = d->Lk, E = d->Dq, kd = d->Dk, vd = d->Dv;
    int64_t H = pl->H, hd = pl->hd, ekv = pl->ekv, group = pl->H / pl->Hkv;
    int hard = opt->hard != ATTN_HARD_NONE;
    mha_layout ly;
    mha_lay_out(req, pl, &ly);
    int pe = ly.pe, avg = ly.avg, has_k = ly.has_k, has_v = ly.has_v, fused = ly.fused;
    int64_t qw = ly.qw, jobs_n = ly.jobs_n;
    char *at;
    attn_status st = attn_ws_get(ctx, mha_scratch(&ly), &at, err);
    if (st != ATTN_OK)
        return st;
    float *piece[8];
    for (int i = 0; i < 8; i++)
        piece[i] = attn_ws_take(&at, (int64_t)ly.f[i], sizeof(float));
    attn_sdpa_job *sj = attn_ws_take(&at, jobs_n, sizeof(attn_sdpa_job));
    attn_row_job *rj = attn_ws_take(&at, jobs_n, sizeof(attn_row_job));

    const float *qx = req->query.data;
    const float *kx = has_k ? req->key.data : NULL;
    const float *vx = has_v ? req->value.data : NULL;
    if (pe) {
        add_posenc(qx, piece[0], B, Lq, E);
        qx = piece[0];
        if (has_k) {
            add_posenc(kx, piece[1], B, Lk, kd);
            kx = piece[1];
        }
        if (has_v) {
            add_posenc(vx, piece[2], B, Lk, vd);
            vx = piece[2];
        }
    }
    if (!kx) kx = qx; /* self-attention: the (encoded) query */
    if (!vx) vx = qx;
    float *qp = piece[3];
    float *kp = piece[4], *vp = piece[5];
    int64_t ks = ekv; /* row stride of the k and v projections */
    if (fused) {
        kp = qp + E;
        vp = qp + 2 * E;
        ks = qw;
    }
    float *ao = piece[6];
    float *hw = piece[7];

    if (fused) {
        attn_gemm_nt_heap(B * Lq, qw, E, qx, E, pl->wq, E, pl->bq, qp, qw, threads);
    } else {
        attn_gemm_nt_heap(B * Lq, E, E, qx, E, pl->wq, E, pl->bq, qp, E, threads);
        attn_gemm_nt_heap(B * Lk, ekv, kd, kx, kd, pl->wk, kd, pl->bk, kp, ekv, threads);
        attn_gemm_nt_heap(B * Lk, ekv, vd, vx, vd, pl->wv, vd, pl->bv, vp, ekv, threads);
    }

    float scale = (float)(1.0 / sqrt((double)hd));
    int64_t plane = Lq * Lk;
    for (int64_t b0 = 0; b0 < B; b0 += avg ? 1 : B) {
        int64_t b1 = avg ? b0 + 1 : B;
        size_t n = 0;
        for (int64_t b = b0; b < b1; b++) {
            for (int64_t h = 0; h < H; h++, n++) {
                attn_row_masks m;
                attn_masks_at(opt, b, h, H, Lq, Lk, &m);
                int64_t g = h / group;
                const float *q = qp + b * Lq * qw + h * hd;
                const float *k = kp + b * Lk * ks + g * hd;
                const float *v = vp + b * Lk * ks + g * hd;
                float *o = ao + b * Lq * E + h * hd;
                float *w = !opt->need_weights ? NULL
                         : avg ? hw + h * plane
                               : weights + (b * H + h) * plane;
                if (!hard) {
                    attn_sdpa_job *j = &sj[n];
                    memset(j, 0, sizeof *j);
                    j->lq = Lq; j->lk = Lk; j->d = hd; j->dv = hd;
                    j->q = q; j->q_stride = qw;
                    j->k = k; j->k_stride = ks;
                    j->v = v; j->v_stride = ks;
                    j->o = o; j->o_stride = E;
                    j->w = w; j->w_stride = Lk;
                    j->scale = scale;
                    j->mask = m.mask; j->mask_stride = m.mask_stride;
                    j->key_mask = m.key_mask;
                    j->bias = m.bias; j->bias_stride = m.bias_stride;
                    j->causal = m.causal;
                    j->window = m.window;
                } else {
                    attn_row_job *j = &rj[n];
                    memset(j, 0, sizeof *j);
                    j->kind = ATTN_SCORE_DOT;
                    j->lq = Lq; j->lk = Lk; j->d = hd; j->dv = hd;
                    j->a = q; j->a_stride = qw;
                    j->b = k; j->b_stride = ks;
                    j->scale = scale;
                    j->v = v; j->v_stride = ks;
                    j->o = o; j->o_stride = E;
                    j->w = w; j->w_stride = Lk;
                    j->m = m;
                    j->hard = opt->hard;
                    j->top_k = opt->top_k;
                }
            }
        }
        if (!hard) {
            if (attn_sdpa_run_heap(sj, n, threads) != 0)
                return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory in the attention kernel");
        } else {
            if ((st = attn_rows_run_heap(rj, n, threads, err)) != ATTN_OK)
                return st;
        }
        if (avg) { /* torch averages the per-head softmax weights */
            float *wb = weights + b0 * plane;
            float inv = 1.0f / (float)H;
            for (int64_t e = 0; e < plane; e++) {
                float s = 0.0f;
                for (int64_t h = 0; h < H; h++)
                    s += hw[h * plane + e];
                wb[e] = s * inv;
            }
        }
    }
    attn_gemm_nt_heap(B * Lq, E, E, ao, E, pl->wo, E, pl->bo, output, E, threads);
    if (req->residual_norm) {
        int64_t n = B * Lq * E;
        for (int64_t e = 0; e < n; e++)
            output[e] += qx[e];
        layer_norm(output, B * Lq, E, pl->nw, pl->nb);
    }
    return ATTN_OK;
}

attn_status attn_mha_compute(attn_ctx *ctx, const attn_mha_request *req,
                             float *output, float *weights, attn_error *err)
{
    mplan pl;
    attn_status st = make_mplan(req, 1, &pl, err);
    if (st != ATTN_OK)
        return st;
    if (!output || (req->opt.need_weights && !weights))
        return attn_fail(err, ATTN_ERR_ARG, "",
                         "attn_mha_compute: NULL output or weights buffer");
    attn_param_set *seeded = NULL;
    if (req->n_params == 0) {
        /* A bare request runs with the parameters seed 0 would give. */
        if ((st = attn_mha_seed_params(req, 0, &seeded, err)) != ATTN_OK)
            return st;
        attn_mha_request r2 = *req;
        r2.params = seeded->items;
        r2.n_params = seeded->n;
        if ((st = make_mplan(&r2, 1, &pl, err)) != ATTN_OK) {
            attn_param_set_free(seeded);
            return st;
        }
    }
    attn_ctx *own;
    if (!(ctx = attn_ctx_for_call(ctx, &own))) {
        attn_param_set_free(seeded);
        return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for a context");
    }
    st = mha_run(ctx, req, &pl, output, weights, err);
    attn_ctx_free(own);
    attn_param_set_free(seeded);
    return st;
}
