/* varlen.c - packed sequences of their own lengths, as FlashAttention's
 * flash_attn_varlen_func takes them: query (total_q, H, Dq), key and value
 * (total_k, Hkv, .), sequence i the query rows cu_seqlens_q[i] to
 * cu_seqlens_q[i + 1] - 1 and the key rows of cu_seqlens_k likewise. The
 * route's checks and caps around the library's attn_varlen_compute, which
 * attends each sequence on its own, every option applying to it alone.
 * The answer: output (total_q, H, Dv); weights (B, H, max Lq, max Lk), a
 * sequence's rows and keys past its own lengths zero (FlashAttention's
 * return_attn_probs form); lse (H, total_q), as FlashAttention's. */
#include "srv.h"

#include <math.h>
#include <stdio.h>

/* cu (n offsets): at least 2 (one sequence); the library checks their
 * values against the rows. */
static int check_count(size_t n, const char *field, srv_err *e)
{
    if (n < 2)
        return srv_fail(e, 422, "invalid_param", field,
                        "%s needs at least 2 offsets (one sequence: [0, total]); got %zu", field, n);
    return 0;
}

/* What cu_seqlens cannot go with on this route: qkv_layout (the tensors
 * are (total, H, D)) and the block layout's echo (each sequence lays out
 * its own; the library refuses masks, bias and key_mask itself); both
 * offset lists of one length. */
static int check_fields(const srv_job *j, srv_err *e)
{
    const char *clash = j->u.att.opt.qkv_layout != ATTN_QKV_BHSD ? "qkv_layout"
                      : j->return_layout ? "return_layout" : NULL;
    if (!j->cu_q)
        return srv_fail(e, 422, "invalid_param", "cu_seqlens_k",
                        "cu_seqlens_k needs cu_seqlens_q (the query's sequences)");
    if (clash)
        return srv_fail(e, 422, "invalid_param", clash,
                        "%s does not apply with cu_seqlens_q: each packed sequence has its own "
                        "lengths (causal, window and the other options apply per sequence)", clash);
    if (check_count(j->n_cu_q, "cu_seqlens_q", e) ||
        (j->cu_k && check_count(j->n_cu_k, "cu_seqlens_k", e)))
        return -1;
    if (j->cu_k && j->n_cu_k != j->n_cu_q)
        return srv_fail(e, 422, "invalid_param", "cu_seqlens_k",
                        "cu_seqlens_k has %zu offsets but cu_seqlens_q has %zu; both hold one "
                        "more than the sequences", j->n_cu_k, j->n_cu_q);
    return 0;
}

/* A sequence costs about what a (batch, head) slice does beside its
 * heads' slices: 100000 one-row sequences of one head took 17-29 ms of
 * compute on /attention/dot, additive and dot with hard argmax (whose row
 * kernels take one sequence at a time), against 77-94 ms for 400000
 * slices of a batch (this host). So B sequences of H heads count as
 * B (H + 1) slices against the cap. */
static int check_sequences(int64_t B, int64_t H, srv_err *e)
{
    char whose[160];
    snprintf(whose, sizeof whose, "cu_seqlens_q's %lld sequences of %lld heads (a sequence "
             "costing about a slice beside its heads') are", (long long)B, (long long)H);
    return srv_check_slices((double)B * ((double)H + 1.0), "cu_seqlens_q", whose, e);
}

/* BigBird lays out each sequence with queries and keys over its own
 * lengths: the cells of them all against the layout cap. */
static int check_layouts(const attn_varlen_request *vr, srv_err *e)
{
    const attn_sparsity *sp = &vr->req.opt.sparsity;
    const int64_t *cq = vr->cu_seqlens_q, *ck = vr->cu_seqlens_k ? vr->cu_seqlens_k : cq;
    double cells = 0.0, b = (double)sp->block; /* >= 1: the plan checked it */
    if (sp->pattern != ATTN_SPARSE_BIGBIRD)
        return 0;
    for (int64_t s = 0; s < vr->batch; s++) {
        double lq = (double)(cq[s + 1] - cq[s]), lk = (double)(ck[s + 1] - ck[s]);
        if (lq > 0 && lk > 0)
            cells += ceil(lq / b) * ceil(lk / b);
    }
    return srv_check_layout_cells(cells, e);
}

void srv_varlen_request(const srv_job *j, attn_varlen_request *vr)
{
    *vr = attn_varlen_request_default(j->u.att.rule);
    vr->req = j->u.att;
    vr->batch = (int64_t)j->n_cu_q - 1;
    vr->cu_seqlens_q = j->cu_q;
    vr->cu_seqlens_k = j->cu_k;
}

int srv_varlen_run(srv_call *call, srv_job *j, srv_err *e)
{
    attn_error ae = {{0}, {0}};
    attn_varlen_request vr;
    if (check_fields(j, e) || srv_job_finish_options(j, e))
        return -1;
    srv_varlen_request(j, &vr);
    attn_status st = attn_varlen_plan(&vr, &j->sh, &ae);
    if (st != ATTN_OK)
        return srv_fail_plan(j, st, &ae, e);
    int64_t H = j->sh.out_shape[1];
    if (check_layouts(&vr, e) || srv_check_result(&j->sh, e) || srv_check_seed_size(j, e) ||
        srv_check_work(j->sh.flops, e) || check_sequences(vr.batch, H, e) ||
        srv_check_scratch(j->sh.scratch_bytes, e) ||
        srv_job_seed(call, j, e))
        return -1;
    vr.req.params = j->u.att.params; /* seeded, when the request sent none */
    vr.req.n_params = j->u.att.n_params;
    j->lse_rank = 2;
    j->lse_shape[0] = H, j->lse_shape[1] = j->sh.out_shape[0];
    if (srv_job_take_result(call, j, e))
        return -1;
    double t0 = srv_now_ms();
    attn_ctx *ctx = srv_ctx_acquire(j->sh.flops);
    st = attn_varlen_compute(ctx, &vr, j->out, j->weights, j->lse, &ae);
    srv_ctx_release(ctx, j->sh.scratch_bytes);
    int rc = st != ATTN_OK ? srv_fail_lib(e, st, &ae)
           : srv_check_finite(j->out, j->sh.out_count, j->sh.out_shape[2], e);
    call->t_compute = srv_now_ms() - t0;
    return rc;
}
