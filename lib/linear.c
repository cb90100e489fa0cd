/* linear.c - linear attention (Katharopoulos, Vyas, Pappas, Fleuret 2020,
 * "Transformers are RNNs"): with a feature map phi, o_i = phi(q_i)^T S /
 * (phi(q_i) . z + 1e-6), S = sum_j phi(k_j) v_j^T and z = sum_j phi(k_j)
 * over the keys row i may see, in O(L d dv) time and never an Lq x Lk
 * matrix unless the weights are asked for.
 *
 * The keys are cut into chunks of CH rows; each chunk's S and z are
 * summed on their own (in parallel). Without causal, each thread adds its
 * chunks into a sum of its own and the threads' sums are added per head:
 * every query row uses that one slot. With causal, each chunk keeps its
 * slot and the slots are prefix-summed per head, so chunk c's slot holds
 * the sums of the keys before it; a row i (which sees
 * j <= i' = i + off), a chunk of query rows takes the slot of the keys
 * every one of its rows sees, plus an explicit, masked CH x (< 2 CH) block
 * for the keys on its diagonal: the chunked form of the paper's causal
 * prefix sums, with every heavy product a small matrix product
 * (lin_gemm_nn, linear_tmpl.h). */
#include <math.h>
#include <string.h>
#include "internal.h"
#include "kernels_isa.h"
#include "pool.h"

#define CH 64          /* key and query rows per chunk */
#define EPS 1e-6f      /* the paper's eps in the denominator */
#define LINE 16        /* floats per cache line: scratch pieces are whole lines */
#define LINES(n) (((n) + LINE - 1) / LINE * LINE)

/* Beside the products, in operations at the dense kernel's rate
 * (cost.c): a row's passes (the feature map, the chunk's packing; about
 * 450 at a head dim of 1), and a causal diagonal block's pair (its mask
 * and sums; 130). */
#define ROW_COST 500.0
#define DIAG_PAIR 140.0

double attn_linear_flops(const attn_head_job *m, double n, int causal)
{
    double lq = (double)m->lq, lk = (double)m->lk, d = (double)m->d, dv = (double)m->dv;
    double f = 2.0 * (lq + lk) * d * (dv + 1.0) + ROW_COST * (lq + lk);
    if (causal) /* the diagonal blocks: about CH keys a row, scores and sum */
        f += lq * fmin(1.5 * CH, lk) * (2.0 * (d + dv + 1.0) + DIAG_PAIR);
    if (m->w)
        f += 2.0 * lq * lk * d * (causal ? 0.5 : 1.0);
    return n * f;
}

/* The pieces of one run, sizes in floats. */
typedef struct {
    int64_t nkc, nqc; /* key and query chunks of a head */
    int64_t slot;     /* one d x (dv + 1) sum: S and, in its last column, z */
    int64_t slots;    /* a head's slots: nkc + 1 (causal), or 1 plus one per thread */
    double sums;      /* every head's slots, floats */
    double worker;    /* one worker's scratch */
} lin_sizes;

static lin_sizes sizes_of(int64_t lq, int64_t lk, int64_t d, int64_t dv, double n, int causal,
                          int threads)
{
    lin_sizes s;
    s.nkc = (lk + CH - 1) / CH;
    s.nqc = (lq + CH - 1) / CH;
    s.slot = d * (dv + 1);
    s.slots = causal ? s.nkc + 1 : 1 + (threads < 1 ? 1 : threads);
    s.sums = n * (double)s.slots * (double)s.slot;
    /* qp (CH x d), kt (d x 2CH), A (CH x 2CH), ot (CH x dv), den and inv (CH) */
    s.worker = (double)(LINES(CH * d) + LINES(d * 2 * CH) + LINES(CH * 2 * CH) +
                        LINES(CH * dv) + 2 * LINES(CH));
    return s;
}

void attn_linear_take(attn_ws *ws, int64_t n, const attn_head_job *model, int causal,
                      attn_heads *h)
{
    h->jobs = attn_ws_take(ws, (double)n, sizeof(attn_head_job));
    h->flash = NULL;
    if (ws->base)
        return;
    lin_sizes s = sizes_of(model->lq, model->lk, model->d, model->dv, (double)n, causal,
                           ws->threads);
    double bytes = attn_ws_bytes(s.sums, sizeof(float)) +
                   (double)ws->threads * s.worker * sizeof(float);
    ws->kernels = fmax(ws->kernels, bytes);
}

/* What the tasks of one run share. */
typedef struct {
    const attn_head_job *jobs;
    const attn_kernel_set *ks;
    int relu, causal;
    int64_t off; /* query row i sits at i' = i + off */
    int64_t lq, lk, d, dv;
    lin_sizes s;
    float *sums;
    float *scratch;
} lin_args;

/* One worker's pieces. */
typedef struct {
    float *qp, *kt, *a, *ot, *den, *inv;
} lin_scr;

static lin_scr worker_scratch(const lin_args *a, int worker)
{
    lin_scr w;
    w.qp = a->scratch + (size_t)worker * (size_t)a->s.worker;
    w.kt = w.qp + LINES(CH * a->d);
    w.a = w.kt + LINES(a->d * 2 * CH);
    w.ot = w.a + LINES(CH * 2 * CH);
    w.den = w.ot + LINES(CH * a->dv);
    w.inv = w.den + LINES(CH);
    return w;
}

/* phi of key rows [j0, j0 + nk) of job j, transposed into kt (d rows of
 * ldk floats); a key the key mask drops is a zero column, so it leaves
 * every sum and product. */
static void keys_t(const lin_args *a, const attn_head_job *j, int64_t j0, int64_t nk, float *kt,
                   int64_t ldk)
{
    const float *k = j->b + j0 * j->b_stride;
    for (int64_t p = 0; p < a->d; p++) {
        float *row = kt + p * ldk;
        for (int64_t t = 0; t < nk; t++)
            row[t] = k[t * j->b_stride + p];
        a->ks->lin_phi(row, nk, a->relu, row);
        if (j->m.key_mask)
            for (int64_t t = 0; t < nk; t++)
                if (!j->m.key_mask[j0 + t])
                    row[t] = 0.0f;
    }
}

/* Slot k of job jn. */
static float *slot_of(const lin_args *a, int64_t jn, int64_t k)
{
    return a->sums + ((size_t)jn * (size_t)a->s.slots + (size_t)k) * (size_t)a->s.slot;
}

/* Task (job, key chunk c): the chunk's S and z into slot c + 1 (causal),
 * or added to the worker's own slot 1 + worker. */
static void chunk_sums(void *arg, int64_t task, int worker)
{
    const lin_args *a = arg;
    int64_t jn = task / a->s.nkc, c = task % a->s.nkc;
    const attn_head_job *j = &a->jobs[jn];
    int64_t j0 = c * CH, nk = a->lk - j0 < CH ? a->lk - j0 : CH, dv1 = a->dv + 1;
    lin_scr w = worker_scratch(a, worker);
    keys_t(a, j, j0, nk, w.kt, CH);
    float *t = slot_of(a, jn, a->causal ? c + 1 : 1 + worker);
    a->ks->lin_gemm_nn(a->d, a->dv, nk, w.kt, CH, j->v + j0 * j->v_stride, j->v_stride, t, dv1,
                       !a->causal);
    for (int64_t p = 0; p < a->d; p++) {
        float z = a->causal ? 0.0f : t[p * dv1 + a->dv];
        for (int64_t u = 0; u < nk; u++)
            z += w.kt[p * CH + u];
        t[p * dv1 + a->dv] = z;
    }
}

/* Task (job): causal, slot c becomes the sums of chunks before c (slot 0
 * zero); else slot 0 the threads' sums added. */
static void prefix_sums(void *arg, int64_t task, int worker)
{
    (void)worker;
    const lin_args *a = arg;
    int64_t slot = a->s.slot;
    float *s = slot_of(a, task, 0);
    memset(s, 0, (size_t)slot * sizeof(float));
    for (int64_t c = 1; c < a->s.slots; c++) {
        float *cur = s + c * slot, *to = a->causal ? cur : s;
        const float *prev = a->causal ? cur - slot : cur;
        for (int64_t e = 0; e < slot; e++)
            to[e] += prev[e];
    }
}

/* The implied weights of rows [i0, i0 + nr): phi(q) phi(K)^T chunk by
 * chunk straight into the weight rows, then each row times its 1/(den +
 * eps), zero past the keys it sees. */
static void chunk_weights(const lin_args *a, const attn_head_job *j, int64_t i0, int64_t nr,
                          const lin_scr *w)
{
    int64_t vis_end = a->lk; /* keys any row of the chunk sees: [0, vis_end) */
    if (a->causal) {
        int64_t last = i0 + nr - 1 + a->off + 1;
        vis_end = last < 0 ? 0 : last > a->lk ? a->lk : last;
    }
    float *wr = j->w + i0 * j->w_stride;
    for (int64_t k0 = 0; k0 < vis_end; k0 += CH) {
        int64_t nk = vis_end - k0 < CH ? vis_end - k0 : CH;
        keys_t(a, j, k0, nk, w->kt, CH);
        a->ks->lin_gemm_nn(nr, nk, a->d, w->qp, a->d, w->kt, CH, wr + k0, j->w_stride, 0);
    }
    for (int64_t r = 0; r < nr; r++) {
        int64_t vis = vis_end;
        if (a->causal) {
            int64_t e = i0 + r + a->off + 1;
            vis = e < 0 ? 0 : e > a->lk ? a->lk : e;
        }
        float *row = wr + r * j->w_stride, inv = w->inv[r];
        for (int64_t t = 0; t < vis; t++)
            row[t] *= inv;
        memset(row + vis, 0, (size_t)(a->lk - vis) * sizeof(float));
    }
}

/* The causal diagonal of rows [i0, i0 + nr): keys [l0, kend) that only
 * some of the rows see, as a masked block A = phi(q) phi(K)^T added to
 * the output and the denominators. */
static void chunk_diagonal(const lin_args *a, const attn_head_job *j, int64_t i0, int64_t nr,
                           int64_t l0, int64_t kend, const lin_scr *w)
{
    int64_t nl = kend - l0, ld = 2 * CH;
    keys_t(a, j, l0, nl, w->kt, ld);
    a->ks->lin_gemm_nn(nr, nl, a->d, w->qp, a->d, w->kt, ld, w->a, ld, 0);
    for (int64_t r = 0; r < nr; r++) {
        float *ar = w->a + r * ld, s = 0.0f;
        int64_t see = i0 + r + a->off + 1 - l0; /* keys l0 .. l0 + see - 1 */
        for (int64_t t = 0; t < nl; t++) {
            if (t >= see)
                ar[t] = 0.0f;
            s += ar[t];
        }
        w->den[r] += s;
    }
    a->ks->lin_gemm_nn(nr, a->dv, nl, w->a, ld, j->v + l0 * j->v_stride, j->v_stride, w->ot,
                       a->dv, 1);
}

/* Task (job, query chunk): the output rows (and weights) of the chunk. */
static void chunk_out(void *arg, int64_t task, int worker)
{
    const lin_args *a = arg;
    int64_t jn = task / a->s.nqc, qc = task % a->s.nqc;
    const attn_head_job *j = &a->jobs[jn];
    int64_t i0 = qc * CH, nr = a->lq - i0 < CH ? a->lq - i0 : CH, d = a->d, dv = a->dv;
    lin_scr w = worker_scratch(a, worker);
    for (int64_t r = 0; r < nr; r++)
        a->ks->lin_phi(j->a + (i0 + r) * j->a_stride, d, a->relu, w.qp + r * d);
    /* the slot every row of the chunk sees in full, and the keys past it
     * some rows see */
    int64_t cb = 0, kend = 0; /* without causal: slot 0, every key */
    if (a->causal) {
        int64_t p0 = i0 + a->off + 1, last = i0 + nr + a->off;
        cb = p0 <= 0 ? 0 : p0 / CH < a->s.nkc ? p0 / CH : a->s.nkc;
        kend = last < 0 ? 0 : last > a->lk ? a->lk : last;
    }
    const float *sl = slot_of(a, jn, cb);
    a->ks->lin_gemm_nn(nr, dv, d, w.qp, d, sl, dv + 1, w.ot, dv, 0);
    for (int64_t r = 0; r < nr; r++) {
        float s = 0.0f;
        for (int64_t p = 0; p < d; p++)
            s += w.qp[r * d + p] * sl[p * (dv + 1) + dv];
        w.den[r] = s;
    }
    if (kend > cb * CH)
        chunk_diagonal(a, j, i0, nr, cb * CH, kend, &w);
    for (int64_t r = 0; r < nr; r++) {
        float inv = 1.0f / (w.den[r] + EPS);
        float *o = j->o + (i0 + r) * j->o_stride;
        w.inv[r] = inv;
        for (int64_t c = 0; c < dv; c++)
            o[c] = w.ot[r * dv + c] * inv;
    }
    if (j->w)
        chunk_weights(a, j, i0, nr, &w);
}

/* n jobs of one size. */
static attn_status linear_run(const attn_exec *ex, const attn_head_job *jobs, size_t n,
                              const attn_options *o, attn_error *err)
{
    const attn_head_job *j0 = &jobs[0];
    lin_args a;
    memset(&a, 0, sizeof a);
    a.jobs = jobs;
    a.ks = attn_kernels_active();
    a.relu = o->feature_map == ATTN_FM_RELU;
    a.causal = o->causal != 0;
    a.lq = j0->lq;
    a.lk = j0->lk;
    a.d = j0->d;
    a.dv = j0->dv;
    a.off = o->align == ATTN_ALIGN_BOTTOM_RIGHT ? a.lk - a.lq : 0;
    int threads = ex->threads;
    a.s = sizes_of(a.lq, a.lk, a.d, a.dv, (double)n, a.causal, threads);
    double sums_bytes = attn_ws_bytes(a.s.sums, sizeof(float));
    double bytes = sums_bytes + (double)threads * a.s.worker * sizeof(float);
    float *base = attn_ctx_region(ex->ctx, ATTN_WS_KERNELS, (size_t)bytes);
    if (!base)
        return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for linear attention's sums");
    a.sums = base;
    a.scratch = base + (size_t)sums_bytes / sizeof(float); /* a multiple of 64 bytes */
    double work = (double)n * (double)(a.lq + a.lk) * (double)a.d * (double)a.dv;
    if (work < 2e5)
        threads = 1;
    if (!a.causal) /* the threads' own sums start at zero */
        for (size_t jn = 0; jn < n; jn++)
            memset(slot_of(&a, (int64_t)jn, 1), 0,
                   (size_t)(a.s.slots - 1) * (size_t)a.s.slot * sizeof(float));
    attn_pool_run(threads, (int64_t)n * a.s.nkc, chunk_sums, &a);
    attn_pool_run(threads, (int64_t)n, prefix_sums, &a);
    attn_pool_run(threads, (int64_t)n * a.s.nqc, chunk_out, &a);
    return ATTN_OK;
}

attn_status attn_linear_run(const attn_exec *ex, const attn_heads *h, size_t n,
                            const attn_options *o, attn_error *err)
{
    attn_status st = ATTN_OK;
    for (size_t i = 0, k; i < n && st == ATTN_OK; i += k) {
        k = attn_same_size_run(h->jobs + i, n - i);
        st = linear_run(ex, h->jobs + i, k, o, err);
    }
    return st;
}
