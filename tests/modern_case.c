/* modern_case.c - the golden_modern case reader shared by the modern
 * tests (see modern_case.h). */
#include "modern_case.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *mc_pool_take(mc_pool *pl, void *p)
{
    if (p && pl->n < MC_MAX_ALLOCS)
        pl->p[pl->n++] = p;
    else if (p) {
        free(p);
        p = NULL;
    }
    return p;
}

void mc_pool_free(mc_pool *pl)
{
    for (int i = 0; i < pl->n; i++)
        free(pl->p[i]);
    pl->n = 0;
}

int mc_list(const char *dir, char ***paths)
{
    if (!dir)
        dir = MC_DIR;
    int n = golden_list(dir, paths);
    if (n <= 0) {
        printf("no case files in %s\n0 passed, 1 failed\n", dir);
        return 0;
    }
    return n;
}

void mc_window(const char *s, int64_t *left, int64_t *right)
{
    char a[32] = "", b[32] = "";
    int n = sscanf(s, "%31s %31s", a, b);
    *left = strcmp(a, "null") ? strtoll(a, NULL, 10) : -1;
    *right = n < 2 ? *left : (strcmp(b, "null") ? strtoll(b, NULL, 10) : -1);
}

/* Keeps p for mc_free; NULL (and p freed) when the case holds too many. */
static void *take(mc_case *mc, void *p)
{
    return mc_pool_take(&mc->allocs, p);
}

static double *to_double(mc_case *mc, const golden_tensor *t)
{
    if (!t)
        return NULL;
    double *d = take(mc, malloc(sizeof(double) * (size_t)(t->count ? t->count : 1)));
    if (d)
        for (int64_t i = 0; i < t->count; i++)
            d[i] = t->f[i];
    return d;
}

/* A parameter given as values, or (seeded cases) the expected one. */
static double *param(mc_case *mc, const golden_case *c, const char *name)
{
    const golden_tensor *t = golden_get(c, GOLDEN_PARAM, name);
    if (!t)
        t = golden_get(c, GOLDEN_EXPECT, name);
    return to_double(mc, t);
}

static int opt_is(const golden_case *c, const char *key, const char *val)
{
    const char *v = golden_opt(c, key);
    return v && strcmp(v, val) == 0;
}

static int64_t opt_int(const golden_case *c, const char *key, int64_t def)
{
    return (int64_t)golden_opt_int(c, key, def);
}

/* Every option line the generator writes; anything else is a format drift. */
static const char *const known_opts[] = {
    "align", "causal", "window", "scale", "softcap", "alibi", "rope", "rope.base",
    "rope.style", "rope.dims", "rope.offset", "hard", "sparsity", "sparsity.window",
    "sparsity.block", "sparsity.window_blocks", "sparsity.global_blocks",
    "sparsity.random_blocks", "sparsity.global", "return_layout", "feature_map",
    "need_weights", "seed", "num_heads", "num_kv_heads", "attention", "average_weights",
    "positional_encoding", "residual_norm", "hidden_size", "output_size", NULL};

static const char *unknown_option(const golden_case *c)
{
    for (size_t i = 0; i < c->n_options; i++) {
        int found = 0;
        for (const char *const *k = known_opts; *k; k++)
            found |= strcmp(*k, c->options[i].key) == 0;
        if (!found)
            return c->options[i].key;
    }
    return NULL;
}

/* Rank and batch of an input tensor: rank 3 = (B, L, D), rank 2 = (L, D). */
static void dims3(const golden_tensor *t, int64_t *B, int64_t *L, int64_t *D)
{
    int batched = t->rank == 3;
    *B = batched ? t->shape[0] : 1;
    *L = t->shape[batched];
    *D = t->shape[batched + 1];
}

void mc_free(mc_case *mc)
{
    mc_pool_free(&mc->allocs);
    golden_free(&mc->c);
}

/* The rule lines the generator writes. */
static const struct {
    const char *name;
    rm_rule rule;
} rule_names[] = {
    {"dot", RM_DOT}, {"scaled_dot", RM_SCALED_DOT}, {"general", RM_GENERAL},
    {"additive", RM_ADDITIVE}, {"concat_tanh", RM_CONCAT_TANH}, {"concat", RM_CONCAT},
    {"linear", RM_LINEAR}, {"multihead", RM_MULTIHEAD},
};

/* *rule for a rule line's name; -1 for a name not in rule_names. */
static int rule_of(const char *name, rm_rule *rule)
{
    for (size_t i = 0; i < sizeof rule_names / sizeof *rule_names; i++)
        if (!strcmp(name, rule_names[i].name)) {
            *rule = rule_names[i].rule;
            return 0;
        }
    return -1;
}

/* The score rules' parameter names (ref_modern.h lists their shapes); Dh
 * and Dout are the first dimension of the parameter named. */
static const struct {
    int rule;
    const char *W1, *b1, *W2, *b2, *vw, *Dh, *Dout;
} rule_params[] = {
    {RM_GENERAL, "attn.weight", "attn.bias", NULL, NULL, NULL, NULL, NULL},
    {RM_ADDITIVE, "query_proj.weight", NULL, "key_proj.weight", "key_proj.bias", "v.weight",
     "query_proj.weight", NULL},
    {RM_CONCAT_TANH, "attn.weight", "attn.bias", NULL, NULL, NULL, "attn.weight", NULL},
    {RM_CONCAT, "att_weight.weight", "att_weight.bias", "out.weight", "out.bias", NULL, NULL,
     "out.weight"},
};

/* param, or NULL where the rule has no such parameter. */
static double *param_or_null(mc_case *mc, const golden_case *c, const char *name)
{
    return name ? param(mc, c, name) : NULL;
}

/* Reads the score rule's parameters; 0 when r->rule is not one of them. */
static int read_rule_params(mc_case *mc, const golden_case *c, rm_request *r)
{
    for (size_t i = 0; i < sizeof rule_params / sizeof *rule_params; i++) {
        if (rule_params[i].rule != (int)r->rule)
            continue;
        r->W1 = param_or_null(mc, c, rule_params[i].W1);
        r->b1 = param_or_null(mc, c, rule_params[i].b1);
        r->W2 = param_or_null(mc, c, rule_params[i].W2);
        r->b2 = param_or_null(mc, c, rule_params[i].b2);
        r->vw = param_or_null(mc, c, rule_params[i].vw);
        if (rule_params[i].Dh)
            r->Dh = golden_get(c, GOLDEN_PARAM, rule_params[i].Dh)->shape[0];
        if (rule_params[i].Dout)
            r->Dout = golden_get(c, GOLDEN_PARAM, rule_params[i].Dout)->shape[0];
        return 1;
    }
    return 0;
}

/* The rule's parameters (multi-head's, with its head counts, encodings
 * and flags). */
static void read_params(mc_case *mc, const golden_case *c, rm_request *r)
{
    if (read_rule_params(mc, c, r))
        return;
    switch (r->rule) {
    case RM_MULTIHEAD: {
        int64_t E = r->Dq;
        r->H = opt_int(c, "num_heads", 1);
        r->Hkv = opt_int(c, "num_kv_heads", r->H);
        double *w;
        if ((w = param(mc, c, "in_proj_weight")) != NULL) {
            double *b = param(mc, c, "in_proj_bias");
            r->Wq = w;
            r->Wk = w + E * E;
            r->Wv = w + 2 * E * E;
            r->bq = b;
            r->bk = b ? b + E : NULL;
            r->bv = b ? b + 2 * E : NULL;
            r->Wo = param(mc, c, "out_proj.weight");
            r->bo = param(mc, c, "out_proj.bias");
        } else {
            r->Wq = param(mc, c, "W_q.weight");
            r->bq = param(mc, c, "W_q.bias");
            r->Wk = param(mc, c, "W_k.weight");
            r->bk = param(mc, c, "W_k.bias");
            r->Wv = param(mc, c, "W_v.weight");
            r->bv = param(mc, c, "W_v.bias");
            r->Wo = param(mc, c, "W_o.weight");
            r->bo = param(mc, c, "W_o.bias");
        }
        r->norm_w = param(mc, c, "norm.weight");
        r->norm_b = param(mc, c, "norm.bias");
        r->residual_norm = opt_int(c, "residual_norm", 0) != 0;
        r->average_weights = opt_int(c, "average_weights", 0) != 0;
        r->linear = opt_is(c, "attention", "linear");
        if (opt_is(c, "positional_encoding", "sinusoidal"))
            r->posenc = RM_PE_SINUSOIDAL;
        else if (opt_is(c, "positional_encoding", "learned")) {
            r->posenc = RM_PE_LEARNED;
            const golden_tensor *pt = golden_get(c, GOLDEN_PARAM, "pos_embedding.weight");
            if (!pt)
                pt = golden_get(c, GOLDEN_EXPECT, "pos_embedding.weight");
            r->pos_table = param(mc, c, "pos_embedding.weight");
            r->P = pt ? pt->shape[0] : 0;
        }
        break;
    }
    default:
        break;
    }
}

/* Scale, masks, bias and the score pipeline's options. */
static void read_options(mc_case *mc, const golden_case *c, rm_request *r, int64_t H)
{
    const char *s;
    if ((s = golden_opt(c, "scale")) != NULL) {
        r->has_scale = 1;
        r->scale = (float)strtod(s, NULL);
    }
    const golden_tensor *t;
    if ((t = golden_get(c, GOLDEN_MASK, "mask")) != NULL) {
        r->mask = t->m;
        r->mask_rank = t->rank;
        r->mask_one_batch = t->rank >= 3 && t->shape[0] == 1;
        r->mask_one_head = t->rank >= 3 && t->shape[t->rank - 3] == 1;
    }
    if ((t = golden_get(c, GOLDEN_MASK, "key_mask")) != NULL) {
        r->key_mask = t->m;
        r->key_mask_rank = t->rank;
    }
    if ((t = golden_get(c, GOLDEN_TENSOR, "bias")) != NULL) {
        r->bias = to_double(mc, t);
        r->bias_rank = t->rank;
        r->bias_one_batch = t->rank >= 3 && t->shape[0] == 1;
        r->bias_one_head = t->rank >= 3 && t->shape[t->rank - 3] == 1;
    }
    r->causal = opt_int(c, "causal", 0) != 0;
    r->align = opt_is(c, "align", "bottom_right") ? RM_BOTTOM_RIGHT : RM_TOP_LEFT;
    if ((s = golden_opt(c, "window")) != NULL) {
        r->has_window = 1;
        mc_window(s, &r->left, &r->right);
    }
    if ((s = golden_opt(c, "softcap")) != NULL)
        r->softcap = (float)strtod(s, NULL);
    if ((t = golden_get(c, GOLDEN_TENSOR, "alibi")) != NULL) {
        r->alibi = to_double(mc, t);
    } else if (opt_int(c, "alibi", 0)) {
        double *sl = take(mc, malloc(sizeof(double) * (size_t)H));
        rm_alibi_slopes(H, sl);
        r->alibi = sl;
    }
    if ((t = golden_get(c, GOLDEN_TENSOR, "sinks")) != NULL)
        r->sinks = to_double(mc, t);
    if (opt_int(c, "rope", 0)) {
        r->rope.on = 1;
        r->rope.base = golden_opt(c, "rope.base") ? strtod(golden_opt(c, "rope.base"), NULL)
                                                  : 10000.0;
        r->rope.style = opt_is(c, "rope.style", "interleaved") ? RM_ROPE_INTERLEAVED
                                                               : RM_ROPE_HALF;
        r->rope.dims = opt_int(c, "rope.dims", 0);
        r->rope.offset = opt_int(c, "rope.offset", 0);
    }
    if ((s = golden_opt(c, "hard")) != NULL)
        r->hard = mc_hard(s, &r->top_k, &r->temperature);
}

rm_hard mc_hard(const char *s, int64_t *top_k, double *temperature)
{
    if (!strcmp(s, "argmax"))
        return RM_HARD_ARGMAX;
    if (!strncmp(s, "top_k", 5)) {
        *top_k = strtoll(s + 5, NULL, 10);
        return RM_HARD_TOPK;
    }
    if (!strncmp(s, "sample", 6)) {
        *temperature = s[6] ? (float)strtod(s + 6, NULL) : 1.0;
        return RM_HARD_SAMPLE;
    }
    return RM_HARD_NONE;
}

int mc_sparsity(const golden_case *c, rm_sparsity *sp, int64_t *globals)
{
    const char *s = golden_opt(c, "sparsity");
    if (!s)
        return 0;
    if (!strcmp(s, "local_global"))
        sp->pattern = RM_SPARSE_LOCAL_GLOBAL;
    else if (!strcmp(s, "bigbird"))
        sp->pattern = RM_SPARSE_BIGBIRD;
    else
        sp->pattern = RM_SPARSE_BLOCKS;
    sp->window = opt_int(c, "sparsity.window", 0);
    sp->block = opt_int(c, "sparsity.block", 1);
    sp->window_blocks = opt_int(c, "sparsity.window_blocks", 3);
    sp->global_blocks = opt_int(c, "sparsity.global_blocks", 2);
    sp->random_blocks = opt_int(c, "sparsity.random_blocks", 3);
    const char *g = golden_opt(c, "sparsity.global");
    char *end;
    sp->n_global = 0;
    while (g && sp->n_global < MC_MAX_GLOBALS) {
        long long v = strtoll(g, &end, 10);
        if (end == g)
            break;
        globals[sp->n_global++] = v;
        g = end;
    }
    sp->global = globals;
    const golden_tensor *t = golden_get(c, GOLDEN_MASK, "sparsity.layout");
    sp->layout = t ? t->m : NULL;
    return 1;
}

void mc_lib_sparsity(const rm_sparsity *sp, attn_sparsity *s)
{
    s->pattern = sp->pattern == RM_SPARSE_LOCAL_GLOBAL ? ATTN_SPARSE_LOCAL_GLOBAL
               : sp->pattern == RM_SPARSE_BIGBIRD ? ATTN_SPARSE_BIGBIRD
               : sp->pattern == RM_SPARSE_BLOCKS ? ATTN_SPARSE_BLOCKS : ATTN_SPARSE_NONE;
    s->window = sp->window;
    s->global = sp->global;
    s->n_global = sp->n_global;
    s->block = sp->block;
    s->window_blocks = sp->window_blocks;
    s->global_blocks = sp->global_blocks;
    s->random_blocks = sp->random_blocks;
}

/* The request's seed, the sparsity pattern and the feature map. */
static void read_sparsity(mc_case *mc, const golden_case *c, rm_request *r)
{
    r->seed = golden_opt(c, "seed") ? strtoull(golden_opt(c, "seed"), NULL, 10) : 0;
    mc_sparsity(c, &r->sparsity, mc->globals);
    r->feature_map = opt_is(c, "feature_map", "relu") ? RM_FM_RELU : RM_FM_ELU;
}

int mc_read(const char *path, mc_case *mc, char *err, size_t errlen)
{
    rm_request r;
    int64_t tmp, Bq;
    int multihead;
    const char *s;
    memset(mc, 0, sizeof *mc);
    golden_case *c = &mc->c;
    if (golden_load(path, c, err, errlen) != 0)
        return -1;
    if ((s = unknown_option(c)) != NULL) {
        snprintf(err, errlen, "unknown option line %s (format drift)", s);
        return -1;
    }
    memset(&r, 0, sizeof r);
    multihead = !strcmp(c->rule, "multihead");
    if (rule_of(c->rule, &r.rule) != 0) {
        snprintf(err, errlen, "unknown rule %s", c->rule);
        return -1;
    }

    /* Inputs. */
    const golden_tensor *tq = golden_get(c, GOLDEN_TENSOR, "query");
    const golden_tensor *tk = golden_get(c, GOLDEN_TENSOR, "key");
    const golden_tensor *tv = golden_get(c, GOLDEN_TENSOR, "value");
    if (!tk)
        tk = tq; /* multi-head self-attention */
    if (!tv)
        tv = tq;
    dims3(tq, &r.B, &r.Lq, &r.Dq);
    dims3(tk, &Bq, &tmp, &r.Dk);
    dims3(tv, &Bq, &r.Lk, &r.Dv);
    int batched = tq->rank == 3;
    r.query = to_double(mc, tq);
    r.key = to_double(mc, tk);
    r.value = to_double(mc, tv);

    read_params(mc, c, &r);
    int64_t H = multihead ? r.H : 1;
    read_options(mc, c, &r, H);
    read_sparsity(mc, c, &r);


    (void)batched;
    mc->r = r;
    mc->multihead = multihead;
    mc->H = H;
    mc->Dout = multihead ? r.Dq : (r.rule == RM_CONCAT ? r.Dout : r.Dv);
    mc->n_out = r.B * r.Lq * mc->Dout;
    mc->n_w = (multihead && !r.average_weights ? H : 1) * r.B * r.Lq * r.Lk;
    if (mc->allocs.n >= MC_MAX_ALLOCS) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}
