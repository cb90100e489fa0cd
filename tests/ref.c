/* ref.c - the double-precision reference for every rule and for multi-head
 * attention (the oracle of tests/test_lib.c; see ref.h): the request's
 * tensors and parameters, read through attn.h's structs, are turned into
 * doubles and handed to the plain reference of tests/ref_modern.c, which
 * computes the rules, masks, softmax, hard attention and multi-head
 * attention once for both. */
#include "ref.h"
#include "ref_modern.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The double copies one call makes, freed together. */
enum { MAX_COPIES = 24 };
typedef struct {
    double *p[MAX_COPIES];
    int n, failed;
} copies;

static const double *to_double(copies *cp, const float *src, int64_t n)
{
    double *d = cp->n < MAX_COPIES ? malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)) : NULL;
    if (!d) {
        cp->failed = 1;
        return NULL;
    }
    cp->p[cp->n++] = d;
    for (int64_t i = 0; i < n; i++)
        d[i] = src[i];
    return d;
}

static const double *tensor_double(copies *cp, const attn_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return to_double(cp, t->data, n);
}

static void free_copies(copies *cp)
{
    for (int i = 0; i < cp->n; i++)
        free(cp->p[i]);
}

static const attn_tensor *find(const attn_named *p, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(p[i].name, name) == 0)
            return &p[i].t;
    return NULL;
}

/* The parameter named, in double; NULL when the request has none. */
static const double *param(copies *cp, const attn_named *p, size_t n, const char *name)
{
    const attn_tensor *t = find(p, n, name);
    return t ? tensor_double(cp, t) : NULL;
}

/* The options both routes share. Windows are symmetric (window_left keys
 * each side); hard_gap is relative to max(1, the row's largest |score|). */
static void set_options(copies *cp, const attn_options *o, int with_bias, rm_request *q)
{
    q->mask = o->mask.rank ? o->mask.data : NULL;
    q->mask_rank = o->mask.rank;
    q->mask_one_batch = o->mask.rank >= 3 && o->mask.shape[0] == 1;
    q->mask_one_head = o->mask.rank >= 3 && o->mask.shape[o->mask.rank - 3] == 1;
    q->key_mask = o->key_mask.rank ? o->key_mask.data : NULL;
    q->key_mask_rank = o->key_mask.rank;
    q->bias = with_bias && o->bias.rank ? tensor_double(cp, &o->bias) : NULL;
    q->bias_rank = o->bias.rank;
    q->bias_one_batch = o->bias.rank >= 3 && o->bias.shape[0] == 1;
    q->bias_one_head = o->bias.rank >= 3 && o->bias.shape[o->bias.rank - 3] == 1;
    q->causal = o->causal;
    q->has_window = o->has_window;
    q->left = q->right = o->window_left;
    q->hard = o->hard == ATTN_HARD_NONE     ? RM_HARD_NONE
              : o->hard == ATTN_HARD_ARGMAX ? RM_HARD_ARGMAX
                                            : RM_HARD_TOPK;
    q->top_k = o->top_k;
    q->hard_gap_floor = 1.0;
}

/* query, key and value (the query again where key or value is absent) as
 * (B, L, D) doubles into q. */
static void set_inputs(copies *cp, const attn_tensor *query, const attn_tensor *key,
                       const attn_tensor *value, rm_request *q)
{
    int batched = query->rank - 2; /* leading dimensions: batch, heads */
    const attn_tensor *k = key->rank ? key : query, *v = value->rank ? value : query;
    q->B = batched ? query->shape[0] : 1;
    q->H = batched == 2 ? query->shape[1] : 0;
    q->Hkv = batched == 2 ? k->shape[1] : 0;
    q->Lq = query->shape[batched];
    q->Lk = k->shape[batched];
    q->Dq = query->shape[batched + 1];
    q->Dk = k->shape[batched + 1];
    q->Dv = v->shape[batched + 1];
    q->query = tensor_double(cp, query);
    q->key = k == query ? q->query : tensor_double(cp, k);
    q->value = v == query ? q->query : tensor_double(cp, v);
}

/* rm_compute on q, unless a parameter was missing (params_rc -1) or a copy
 * failed: then -1 and no margins. Frees the copies. */
static int compute(copies *cp, int params_rc, const rm_request *q, double *out, double *w,
                   rm_margin *m)
{
    int rc = params_rc != 0 || cp->failed ? -1 : rm_compute(q, out, w, NULL, m);
    free_copies(cp);
    if (rc != 0)
        *m = (rm_margin){INFINITY, INFINITY, 0.0};
    return rc;
}

/* The rule's parameters (rm_request's W1, b1, W2, b2, vw); -1 when one the
 * rule needs is missing. */
static int rule_params(copies *cp, const attn_request *req, rm_request *q)
{
    static const struct {
        attn_rule rule;
        const char *W1, *b1, *W2, *b2, *vw;
        unsigned need; /* bits 0-4: W1, b1, W2, b2, vw */
    } rules[] = {
        {ATTN_RULE_GENERAL, "attn.weight", "attn.bias", NULL, NULL, NULL, 1},
        {ATTN_RULE_ADDITIVE, "query_proj.weight", NULL, "key_proj.weight", "key_proj.bias",
         "v.weight", 1 | 4 | 8 | 16},
        {ATTN_RULE_CONCAT_TANH, "attn.weight", "attn.bias", NULL, NULL, NULL, 1 | 2},
        {ATTN_RULE_CONCAT, "att_weight.weight", "att_weight.bias", "out.weight", "out.bias",
         NULL, 1 | 2 | 4 | 8},
    };
    const attn_named *P = req->params;
    size_t nP = req->n_params;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        if (rules[i].rule != req->rule)
            continue;
        const char *names[5] = {rules[i].W1, rules[i].b1, rules[i].W2, rules[i].b2, rules[i].vw};
        const double **dst[5] = {&q->W1, &q->b1, &q->W2, &q->b2, &q->vw};
        for (int j = 0; j < 5; j++) {
            *dst[j] = names[j] ? param(cp, P, nP, names[j]) : NULL;
            if (!*dst[j] && (rules[i].need >> j & 1))
                return -1;
        }
        /* W1's rows: the hidden size of additive and concat_tanh; W2's: concat's
         * output size (rm_compute reads each only where it applies). */
        q->Dh = find(P, nP, rules[i].W1)->shape[0];
        if (rules[i].W2)
            q->Dout = find(P, nP, rules[i].W2)->shape[0];
    }
    return 0;
}

int ref_attention(const attn_request *req, double *out, double *w, double *hard_gap)
{
    static const rm_rule rule_of[] = {
        [ATTN_RULE_DOT] = RM_DOT,         [ATTN_RULE_SCALED_DOT] = RM_SCALED_DOT,
        [ATTN_RULE_GENERAL] = RM_GENERAL, [ATTN_RULE_ADDITIVE] = RM_ADDITIVE,
        [ATTN_RULE_CONCAT_TANH] = RM_CONCAT_TANH, [ATTN_RULE_CONCAT] = RM_CONCAT,
    };
    copies cp = {{0}, 0, 0};
    rm_request q;
    rm_margin m;
    memset(&q, 0, sizeof q);
    q.rule = rule_of[req->rule];
    set_inputs(&cp, &req->query, &req->key, &req->value, &q);
    if (req->rule == ATTN_RULE_CONCAT) /* softmax over the value rows */
        q.Lk = req->value.shape[req->query.rank - 2];
    q.has_scale = req->has_scale;
    q.scale = req->scale;
    /* concat has no bias: its scores are a row of att_weight */
    set_options(&cp, &req->opt, req->rule != ATTN_RULE_CONCAT, &q);
    int rc = compute(&cp, rule_params(&cp, req, &q), &q, out, w, &m);
    if (hard_gap)
        *hard_gap = m.hard_gap;
    return rc;
}

/* The projections' parameters: the W_* family, or in_proj (packed, or
 * q/k/v_proj_weight) with out_proj; -1 when a needed weight is missing. */
static int mha_params(copies *cp, const attn_mha_request *req, rm_request *q)
{
    const attn_named *P = req->params;
    size_t nP = req->n_params;
    int64_t E = q->Dq;
    if (find(P, nP, "W_q.weight")) {
        static const char *const names[8] = {"W_q.weight", "W_q.bias", "W_k.weight", "W_k.bias",
                                             "W_v.weight", "W_v.bias", "W_o.weight", "W_o.bias"};
        const double **dst[8] = {&q->Wq, &q->bq, &q->Wk, &q->bk, &q->Wv, &q->bv, &q->Wo, &q->bo};
        for (int j = 0; j < 8; j++)
            *dst[j] = param(cp, P, nP, names[j]);
    } else {
        const double *in = param(cp, P, nP, "in_proj_weight");
        const double *bias = param(cp, P, nP, "in_proj_bias");
        q->Wq = in ? in : param(cp, P, nP, "q_proj_weight");
        q->Wk = in ? in + E * E : param(cp, P, nP, "k_proj_weight");
        q->Wv = in ? in + 2 * E * E : param(cp, P, nP, "v_proj_weight");
        q->bq = bias;
        q->bk = bias ? bias + E : NULL;
        q->bv = bias ? bias + 2 * E : NULL;
        q->Wo = param(cp, P, nP, "out_proj.weight");
        q->bo = param(cp, P, nP, "out_proj.bias");
    }
    q->norm_w = param(cp, P, nP, "norm.weight");
    q->norm_b = param(cp, P, nP, "norm.bias");
    return q->Wq && q->Wk && q->Wv && q->Wo ? 0 : -1;
}

/* nn.MultiheadAttention's 3-D attn_mask, (B H, Lq, Lk) with H > 1: row b's
 * head h at plane b H + h, which is (B, H, Lq, Lk) in memory. */
static void bh_planes(const int64_t *shape, int64_t B, int64_t H, int *rank, int *one_batch,
                      int *one_head)
{
    if (*rank == 3 && H > 1 && shape[0] == B * H)
        *rank = 4, *one_batch = *one_head = 0;
}

int ref_mha(const attn_mha_request *req, double *out, double *w, double *norm_gain)
{
    copies cp = {{0}, 0, 0};
    rm_request q;
    rm_margin m;
    memset(&q, 0, sizeof q);
    q.rule = RM_MULTIHEAD;
    set_inputs(&cp, &req->query, &req->key, &req->value, &q);
    q.H = req->num_heads;
    q.Hkv = req->num_kv_heads;
    q.residual_norm = req->residual_norm;
    q.average_weights = req->average_weights;
    q.posenc = req->positional_encoding == ATTN_PE_SINUSOIDAL ? RM_PE_SINUSOIDAL : RM_PE_NONE;
    set_options(&cp, &req->opt, 1, &q);
    bh_planes(req->opt.mask.shape, q.B, q.H, &q.mask_rank, &q.mask_one_batch, &q.mask_one_head);
    bh_planes(req->opt.bias.shape, q.B, q.H, &q.bias_rank, &q.bias_one_batch, &q.bias_one_head);
    int rc = compute(&cp, mha_params(&cp, req, &q), &q, out, w, &m);
    if (norm_gain)
        *norm_gain = m.norm_gain;
    return rc;
}
