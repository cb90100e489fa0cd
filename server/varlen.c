/* varlen.c - packed sequences of their own lengths, as FlashAttention's
 * flash_attn_varlen_func takes them: query (total_q, H, Dq), key and value
 * (total_k, Hkv, .), sequence i the query rows cu_seqlens_q[i] to
 * cu_seqlens_q[i + 1] - 1 and the key rows of cu_seqlens_k likewise. Each
 * sequence runs through the library as a batch of one with heads, (1, H,
 * Lq, Dq), every option applying to it alone (causal and align, windows,
 * rope positions from 0, hard sample's draws numbered as its own batch).
 * The answer: output (total_q, H, Dv); weights (B, H, max Lq, max Lk), a
 * sequence's rows and keys past its own lengths zero (FlashAttention's
 * return_attn_probs form); lse (H, total_q), as FlashAttention's. */
#include "srv.h"

#include <string.h>

typedef struct {
    int64_t B, H, Hkv, Dq, Dk, Dv, total_q, total_k, max_q, max_k;
    const int64_t *cq, *ck; /* B + 1 offsets each */
} varlen;

/* cu (n offsets) against total rows: n >= 2, cu[0] = 0, every sequence
 * at least one row, cu[n - 1] = total. */
static int check_offsets(const int64_t *cu, size_t n, int64_t total, const char *field,
                         const char *rows, srv_err *e)
{
    if (n < 2)
        return srv_fail(e, 422, "invalid_param", field,
                        "%s needs at least 2 offsets (one sequence: [0, total]); got %zu", field, n);
    if (cu[0] != 0)
        return srv_fail(e, 422, "invalid_param", field, "%s must start at 0; got %lld", field,
                        (long long)cu[0]);
    for (size_t i = 1; i < n; i++)
        if (cu[i] <= cu[i - 1])
            return srv_fail(e, 422, "invalid_param", field,
                            "%s must increase: sequence %zu would have %lld rows (every sequence "
                            "needs at least one)", field, i - 1, (long long)(cu[i] - cu[i - 1]));
    if (cu[n - 1] != total)
        return srv_fail(e, 422, "invalid_param", field,
                        "%s ends at %lld but %s has %lld rows; the last offset is the total",
                        field, (long long)cu[n - 1], rows, (long long)total);
    return 0;
}

/* What cu_seqlens cannot go with: the masks and bias (each sequence has
 * its own lengths), qkv_layout (the tensors are (total, H, D)), the block
 * layout's echo (one per sequence). */
static int check_fields(const srv_job *j, srv_err *e)
{
    const attn_options *o = &j->u.att.opt;
    const char *clash = o->mask.rank ? "mask" : o->bias.rank ? "bias"
                      : o->key_mask.rank ? "key_mask" : j->bshd ? "qkv_layout"
                      : j->return_layout ? "return_layout" : NULL;
    if (!j->cu_q)
        return srv_fail(e, 422, "invalid_param", "cu_seqlens_k",
                        "cu_seqlens_k needs cu_seqlens_q (the query's sequences)");
    if (clash)
        return srv_fail(e, 422, "invalid_param", clash,
                        "%s does not apply with cu_seqlens_q: each packed sequence has its own "
                        "lengths (causal, window and the other options apply per sequence)", clash);
    return 0;
}

/* The packed tensors' shapes and the offsets, checked. */
static int read_shapes(const srv_job *j, varlen *v, srv_err *e)
{
    const attn_tensor *ts[3] = {&j->u.att.query, &j->u.att.key, &j->u.att.value};
    static const char *const names[3] = {"query", "key", "value"};
    static const char *const dims[3] = {"(total_q, H, Dq)", "(total_k, Hkv, Dk)",
                                        "(total_k, Hkv, Dv)"};
    for (int i = 0; i < 3; i++)
        if (ts[i]->rank != 3)
            return srv_fail(e, 422, "shape_mismatch", names[i],
                            "with cu_seqlens_q, %s is %s (packed sequences); got rank %d",
                            names[i], dims[i], ts[i]->rank);
    if (ts[2]->shape[0] != ts[1]->shape[0])
        return srv_fail(e, 422, "shape_mismatch", "value",
                        "value has %lld rows but key has %lld; each key row has its value row",
                        (long long)ts[2]->shape[0], (long long)ts[1]->shape[0]);
    v->total_q = ts[0]->shape[0], v->H = ts[0]->shape[1], v->Dq = ts[0]->shape[2];
    v->total_k = ts[1]->shape[0], v->Hkv = ts[1]->shape[1], v->Dk = ts[1]->shape[2];
    v->Dv = ts[2]->shape[2];
    v->cq = j->cu_q;
    v->ck = j->cu_k ? j->cu_k : j->cu_q;
    size_t nk = j->cu_k ? j->n_cu_k : j->n_cu_q;
    if (check_offsets(v->cq, j->n_cu_q, v->total_q, "cu_seqlens_q", "query", e) ||
        check_offsets(v->ck, nk, v->total_k, j->cu_k ? "cu_seqlens_k" : "cu_seqlens_q", "key", e))
        return -1;
    if (nk != j->n_cu_q)
        return srv_fail(e, 422, "invalid_param", "cu_seqlens_k",
                        "cu_seqlens_k has %zu offsets but cu_seqlens_q has %zu; both hold one "
                        "more than the sequences", nk, j->n_cu_q);
    v->B = (int64_t)j->n_cu_q - 1;
    v->max_q = v->max_k = 0;
    for (int64_t i = 0; i < v->B; i++) {
        v->max_q = v->cq[i + 1] - v->cq[i] > v->max_q ? v->cq[i + 1] - v->cq[i] : v->max_q;
        v->max_k = v->ck[i + 1] - v->ck[i] > v->max_k ? v->ck[i + 1] - v->ck[i] : v->max_k;
    }
    return 0;
}

/* j's request as sequence i, its tensors (1, H, L, D) at q, k and v
 * (NULL: the packed rows, for planning). */
static void as_sequence(srv_job *j, const attn_request *packed, const varlen *v, int64_t i,
                        const float *q, const float *k, const float *vv)
{
    int64_t lq = v->cq[i + 1] - v->cq[i], lk = v->ck[i + 1] - v->ck[i];
    attn_request *r = &j->u.att;
    *r = *packed;
    r->query = (attn_tensor){4, {1, v->H, lq, v->Dq}, q ? q : packed->query.data};
    r->key = (attn_tensor){4, {1, v->Hkv, lk, v->Dk}, k ? k : packed->key.data};
    r->value = (attn_tensor){4, {1, v->Hkv, lk, v->Dv}, vv ? vv : packed->value.data};
}

/* A sequence's own plan and library call cost about 2 us (one row each,
 * 100000 sequences: 96-147 ms of compute and some 60 ms of planning, this
 * host), ten times a (batch, head) slice's fixed part (srv_slice_cap). */
#define SEQUENCE_SLICES 10.0

/* e's message as "sequence i: message" (cut to fit). Returns -1. */
static int name_sequence(srv_err *e, int64_t i)
{
    char pre[32];
    size_t k = (size_t)snprintf(pre, sizeof pre, "sequence %lld: ", (long long)i);
    size_t n = strnlen(e->message, sizeof e->message - 1);
    if (n > sizeof e->message - 1 - k)
        n = sizeof e->message - 1 - k;
    memmove(e->message + k, e->message, n);
    memcpy(e->message, pre, k);
    e->message[k + n] = '\0';
    return -1;
}

/* Every sequence planned (its errors named by sequence), the caps checked
 * on the totals, the parameters seeded from sequence 0's plan (concat,
 * whose parameters depend on the lengths, takes no cu_seqlens). */
static int plan_all(srv_call *call, srv_job *j, const attn_request *packed, const varlen *v,
                    srv_err *e)
{
    double n = (double)v->B * ((double)v->H + SEQUENCE_SLICES), cap = srv_slice_cap();
    if (n > cap)
        return srv_fail(e, 413, "too_large", "cu_seqlens_q",
                        "cu_seqlens_q holds %lld sequences of %lld heads; each sequence costs "
                        "about what %.0f (batch, head) slices do beside its heads' (its own "
                        "plan and library call, about 2 us), and this server computes at most "
                        "%.0f slices' worth per request: pack fewer, longer sequences",
                        (long long)v->B, (long long)v->H, SEQUENCE_SLICES, cap);
    double flops = 0.0;
    for (int64_t i = v->B - 1; i >= 0; i--) {
        as_sequence(j, packed, v, i, NULL, NULL, NULL);
        if (srv_job_plan(j, e))
            return name_sequence(e, i);
        flops += j->sh.flops;
    }
    attn_shapes tot = j->sh; /* sequence 0's, for the parameters it seeds */
    tot.flops = flops;
    tot.out_rank = 3;
    int64_t w[4] = {v->B, v->H, v->max_q, v->max_k}, wc = 1, oc = 1;
    for (int d = 0; d < 4; d++)
        if (!attn_size_mul(wc, w[d], &wc))
            wc = INT64_MAX;
    if (!attn_size_mul(v->total_q, v->H, &oc) || !attn_size_mul(oc, v->Dv, &oc))
        oc = INT64_MAX;
    tot.out_count = oc;
    tot.w_rank = 4;
    tot.w_count = packed->opt.need_weights ? wc : 0;
    memcpy(tot.w_shape, w, sizeof w);
    tot.out_shape[0] = v->total_q, tot.out_shape[1] = v->H, tot.out_shape[2] = v->Dv;
    j->sh = tot;
    return srv_check_result(&tot, e) || srv_check_seed_size(j, e) || srv_check_work(flops, e) ||
           srv_job_seed(call, j, e);
}

/* x (A, M, N, D) as y (A, N, M, D). */
static void swap_middle(const float *x, float *y, int64_t A, int64_t M, int64_t N, int64_t D)
{
    const int64_t shape[4] = {A, M, N, D};
    srv_swap_middle(x, y, shape);
}

typedef struct {
    float *q, *k, *v, *out, *w, *lse; /* one sequence's, (1, H, L, D) */
} scratch;

static int take_scratch(srv_call *call, const varlen *v, int weights, int lse, scratch *s,
                        srv_err *e)
{
    int64_t hq = v->H * v->max_q, hk = v->Hkv * v->max_k; /* within the totals */
    size_t f = sizeof(float);
    s->q = srv_arena_alloc(&call->arena, (size_t)(hq * v->Dq) * f);
    s->k = srv_arena_alloc(&call->arena, (size_t)(hk * v->Dk) * f);
    s->v = srv_arena_alloc(&call->arena, (size_t)(hk * v->Dv) * f);
    s->out = srv_arena_alloc(&call->arena, (size_t)(hq * v->Dv) * f);
    s->w = weights ? srv_arena_alloc(&call->arena, (size_t)(hq * v->max_k) * f) : NULL;
    s->lse = lse ? srv_arena_alloc(&call->arena, (size_t)hq * f) : NULL;
    if (!s->q || !s->k || !s->v || !s->out || (weights && !s->w) || (lse && !s->lse))
        return srv_fail(e, 413, "too_large", "", "not enough memory for the result");
    return 0;
}

/* Sequence i's results into the packed answer. */
static void put_sequence(srv_job *j, const varlen *v, int64_t i, const scratch *s)
{
    int64_t q0 = v->cq[i], lq = v->cq[i + 1] - q0, lk = v->ck[i + 1] - v->ck[i];
    swap_middle(s->out, j->out + q0 * v->H * v->Dv, 1, v->H, lq, v->Dv);
    for (int64_t h = 0; h < v->H; h++) {
        if (s->w)
            for (int64_t r = 0; r < lq; r++)
                memcpy(j->weights + ((i * v->H + h) * v->max_q + r) * v->max_k,
                       s->w + (h * lq + r) * lk, (size_t)lk * sizeof(float));
        if (s->lse)
            memcpy(j->lse + h * v->total_q + q0, s->lse + h * lq, (size_t)lq * sizeof(float));
    }
}

/* Each sequence's tensors transposed to (1, H, L, D), computed, put. */
static int compute_all(srv_call *call, srv_job *j, const attn_request *packed, const varlen *v,
                       srv_err *e)
{
    scratch s;
    if (take_scratch(call, v, j->weights != NULL, j->lse != NULL, &s, e))
        return -1;
    float *out = j->out, *w = j->weights, *lse = j->lse;
    int rc = 0;
    for (int64_t i = 0; i < v->B && rc == 0; i++) {
        int64_t lq = v->cq[i + 1] - v->cq[i], lk = v->ck[i + 1] - v->ck[i];
        swap_middle(packed->query.data + v->cq[i] * v->H * v->Dq, s.q, 1, lq, v->H, v->Dq);
        swap_middle(packed->key.data + v->ck[i] * v->Hkv * v->Dk, s.k, 1, lk, v->Hkv, v->Dk);
        swap_middle(packed->value.data + v->ck[i] * v->Hkv * v->Dv, s.v, 1, lk, v->Hkv, v->Dv);
        as_sequence(j, packed, v, i, s.q, s.k, s.v);
        j->out = s.out, j->weights = s.w, j->lse = s.lse;
        rc = srv_job_compute(call, j, e) ||
             srv_check_finite(s.out, v->H * lq * v->Dv, v->Dv, e);
        j->out = out, j->weights = w, j->lse = lse;
        if (rc == 0)
            put_sequence(j, v, i, &s);
    }
    j->u.att = *packed;
    return rc ? -1 : 0;
}

int srv_varlen_run(srv_call *call, srv_job *j, srv_err *e)
{
    varlen v = {0};
    if (check_fields(j, e) || srv_job_finish_options(j, e) || read_shapes(j, &v, e))
        return -1;
    attn_request packed = j->u.att;
    if (plan_all(call, j, &packed, &v, e))
        return -1;
    packed.params = j->u.att.params; /* seeded, when the request sent none */
    packed.n_params = j->u.att.n_params;
    j->lse_rank = 2;
    j->lse_shape[0] = v.H, j->lse_shape[1] = v.total_q;
    if (srv_job_take_result(call, j, e))
        return -1;
    if (j->weights) /* past each sequence's lengths */
        memset(j->weights, 0, (size_t)j->sh.w_count * sizeof(float));
    double t0 = srv_now_ms();
    int rc = compute_all(call, j, &packed, &v, e);
    call->t_compute = srv_now_ms() - t0;
    return rc;
}
