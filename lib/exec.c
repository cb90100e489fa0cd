/* exec.c - the one execution pipeline every rule and multi-head run
 * through: the workspace planner (a layout measured, then carved from the
 * context), the head jobs and the one place that picks their kernel (the
 * flash core or the row driver), and the public-call driver that checks
 * the buffers, seeds missing parameters into the workspace and runs the
 * front end on the context's own threads. */
#include <math.h>
#include <string.h>
#include "internal.h"
#include "pool.h"

/* ---------------------------------------------------------- workspace */

/* 2^52: every sum of pieces below it is exact in double, and fits size_t
 * on 64-bit targets. */
#define WS_MAX 4503599627370496.0

/* bytes of region r of ctx into *base. A failure with seeded parameters
 * (seed_bytes of the whole) that are most of it is theirs, as when they
 * were allocated on their own: the request's sizes are too large. */
static attn_status ws_region(attn_ctx *ctx, int r, double bytes, double seed_bytes,
                             char **base, attn_error *err)
{
    if (!(bytes <= WS_MAX) || bytes > (double)(SIZE_MAX / 2))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "", "the request is too large");
    if ((*base = attn_ctx_region(ctx, r, (size_t)bytes)))
        return ATTN_OK;
    if (seed_bytes * 2.0 >= bytes)
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "params",
                         "the parameters (%.0f floats) are too large to allocate",
                         seed_bytes / sizeof(float));
    return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for %.0f bytes of scratch", bytes);
}

/* ---------------------------------------------------------- head jobs */

/* The flash kernel takes the heads: a plain scaled dot product. */
static int flash_fits(const attn_head_job *j)
{
    return j->kind == ATTN_SCORE_DOT && j->hard == ATTN_HARD_NONE;
}

/* The flash kernel's form of a plain scaled-dot head. */
static void to_flash(const attn_head_job *j, attn_sdpa_job *f)
{
    memset(f, 0, sizeof *f);
    f->lq = j->lq; f->lk = j->lk; f->d = j->d; f->dv = j->dv;
    f->q = j->a; f->q_stride = j->a_stride;
    f->k = j->b; f->k_stride = j->b_stride;
    f->v = j->v; f->v_stride = j->v_stride;
    f->o = j->o; f->o_stride = j->o_stride;
    f->w = j->w; f->w_stride = j->w_stride;
    f->scale = j->scale;
    f->mask = j->m.mask; f->mask_stride = j->m.mask_stride;
    f->key_mask = j->m.key_mask;
    f->bias = j->m.bias; f->bias_stride = j->m.bias_stride;
    f->causal = j->m.causal;
    f->window_left = j->m.window_left;
    f->window_right = j->m.window_right;
    f->off = j->m.off;
    f->pos_rows = j->pos_rows;
    f->softcap = j->m.softcap;
    f->alibi = j->m.alibi;
    f->has_sink = j->m.has_sink;
    f->sink = j->m.sink;
    if (j->rope) {
        f->rope = j->rope->table;
        f->rope_rel = j->rope->rel;
        f->rope_q0 = j->rope->set[0].pos0 + j->rope_shift;
        f->rope_k0 = j->rope->set[1].pos0;
        f->rope_dims = j->rope->dims;
        f->rope_interleaved = j->rope->r->style == ATTN_ROPE_INTERLEAVED;
    }
    f->sparse = j->m.sparse;
    f->bf16 = j->bf16;
    f->lse = j->lse;
}

/* Scratch the kernel of n jobs like model asks on `threads` threads. Both
 * kernels ask a part per thread and a part per job (the flash kernel's
 * task index and bf16 keys and values, the row driver's key panels):
 * measured from one job on one and on two threads, then scaled. */
static double heads_scratch(const attn_head_job *model, int64_t n, int threads)
{
    double one, two;
    if (flash_fits(model)) {
        attn_sdpa_job f;
        to_flash(model, &f);
        one = (double)attn_sdpa_scratch_bytes(&f, 1, 1);
        two = (double)attn_sdpa_scratch_bytes(&f, 1, 2);
        /* a bf16 job's own part (its keys and values, and an index line
         * more than it needs): 2 one - two, once for each group of jobs
         * that read the same keys and values (one more where a run of
         * jobs starts inside a group) */
        double per_job = f.bf16 ? 2.0 * one - two : 0.0;
        double g = (double)model->kv_group, copies = (double)n;
        if (g > 1.0)
            copies = fmin(copies, ceil(copies / g) + 1.0);
        return (two - one) * threads + per_job * copies +
               attn_ws_bytes((double)n + 1.0, sizeof(int64_t)) + 64.0;
    }
    size_t a = attn_rows_scratch_bytes(model, 1, 1), b = attn_rows_scratch_bytes(model, 1, 2);
    if (a == SIZE_MAX || b == SIZE_MAX)
        return INFINITY;
    one = (double)a;
    two = (double)b;
    return (two - one) * threads + (2.0 * one - two) * (double)n;
}

void attn_heads_take(attn_ws *ws, int64_t n, const attn_head_job *model, attn_heads *h)
{
    h->jobs = attn_ws_take(ws, (double)n, sizeof(attn_head_job));
    h->flash = attn_ws_take(ws, (double)n, sizeof(attn_sdpa_job));
    if (!ws->base) /* measuring */
        ws->kernels = fmax(ws->kernels, heads_scratch(model, n, ws->threads));
}

float *attn_model_weights(int kept)
{
    static float some;
    return kept ? &some : NULL;
}

void attn_head_init(attn_head_job *j, const attn_options *o, int64_t b, int64_t h, int64_t H,
                    int64_t lq, int64_t lk, float *w)
{
    memset(j, 0, sizeof *j);
    j->lq = lq;
    j->lk = lk;
    attn_masks_at(o, b, h, H, lq, lk, &j->m);
    j->hard = o->hard;
    j->top_k = o->top_k;
    j->temperature = o->temperature;
    j->seed = o->seed;
    j->draw_base = (uint64_t)((b * H + h) * lq);
    j->bf16 = o->precision == ATTN_PRECISION_BF16;
    j->w = w;
    j->w_stride = lk;
}

/* bytes of the context's kernel region for one kernel call (NULL for
 * none, or when out of memory). */
static void *kernel_scratch(const attn_exec *ex, size_t bytes)
{
    return bytes ? attn_ctx_region(ex->ctx, ATTN_WS_KERNELS, bytes) : NULL;
}

/* The row driver on n jobs of one size. */
static attn_status rows_run(const attn_exec *ex, const attn_head_job *jobs, size_t n,
                            attn_error *err)
{
    size_t bytes = attn_rows_scratch_bytes(jobs, n, ex->threads);
    if (bytes == SIZE_MAX)
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "", "the request is too large");
    void *s = kernel_scratch(ex, bytes);
    if (!s && bytes)
        return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for scratch space");
    return attn_rows_run(jobs, n, ex->threads, s, err);
}

size_t attn_same_size_run(const attn_head_job *jobs, size_t n)
{
    size_t k = 1;
    while (k < n && jobs[k].lq == jobs[0].lq && jobs[k].lk == jobs[0].lk)
        k++;
    return k;
}

attn_status attn_exec_heads(const attn_exec *ex, const attn_heads *h, size_t n, attn_error *err)
{
    if (n == 0)
        return ATTN_OK;
    if (!flash_fits(&h->jobs[0])) { /* the row driver takes jobs of one size at a time */
        attn_status st = ATTN_OK;
        for (size_t i = 0, k; i < n && st == ATTN_OK; i += k) {
            k = attn_same_size_run(h->jobs + i, n - i);
            st = rows_run(ex, h->jobs + i, k, err);
        }
        return st;
    }
    for (size_t i = 0; i < n; i++)
        to_flash(&h->jobs[i], &h->flash[i]);
    void *s = kernel_scratch(ex, attn_sdpa_scratch_bytes(h->flash, n, ex->threads));
    if (!s)
        return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory in the attention kernel");
    attn_sdpa_run(h->flash, n, ex->threads, s);
    return ATTN_OK;
}

void attn_ws_gemms(attn_ws *ws, const attn_gemm_call *g, int n)
{
    for (int i = 0; i < n; i++)
        ws->kernels = fmax(ws->kernels,
                           (double)attn_gemm_scratch_bytes(g[i].m, g[i].n, g[i].k, ws->threads));
}

void attn_exec_gemms(const attn_exec *ex, const attn_gemm_call *g, int n)
{
    for (int i = 0; i < n; i++) {
        /* without the memory to pack, the kernel's unpacked path runs */
        void *s = kernel_scratch(ex, attn_gemm_scratch_bytes(g[i].m, g[i].n, g[i].k, ex->threads));
        attn_gemm_nt_packed(g[i].m, g[i].n, g[i].k, g[i].a, g[i].lda, g[i].b, g[i].ldb,
                            g[i].bias, g[i].c, g[i].ldc, g[i].cg, g[i].cgs, ex->threads, s,
                            g[i].bp, g[i].packer);
    }
}

/* ------------------------------------------------------------ driver */

/* The seeded parameters of a call without any: their specs (ns of them,
 * nfloats floats), and the pieces that hold them. */
typedef struct {
    attn_seed_spec specs[ATTN_SEED_MAX];
    size_t ns;
    double nfloats;
    attn_named *items;
    float *data;
} seeded;

/* The whole layout of a call: its seeded parameters (drawn and bound to
 * the plan when carving), then the front end's pieces. */
static attn_status lay_out_call(const attn_front *f, void *plan, seeded *s, attn_ws *ws,
                                attn_error *err)
{
    s->items = attn_ws_take(ws, (double)s->ns, sizeof(attn_named));
    s->data = attn_ws_take(ws, s->nfloats, sizeof(float));
    if (ws->base && s->ns) {
        attn_seed_fill(s->specs, s->ns, 0, s->items, s->data);
        attn_status st = f->bind(plan, s->items, s->ns, err);
        if (st != ATTN_OK)
            return st;
    }
    f->lay_out(plan, ws);
    return ATTN_OK;
}

double attn_front_scratch(const attn_front *f, void *plan, size_t n_params)
{
    seeded s;
    attn_ws ws = {NULL, 0.0, attn_max_threads(), 0.0, 0.0};
    s.ns = n_params == 0 ? f->seed_specs(plan, s.specs) : 0;
    s.nfloats = attn_seed_floats(s.specs, s.ns);
    lay_out_call(f, plan, &s, &ws, NULL);
    return ws.used + ws.kernels + ws.rope;
}

/* A call its stop ended early with st: its outputs are what the tasks it
 * ran wrote, and the rotary table the context keeps may be part-filled. */
static attn_status stopped_early(attn_ctx *ctx, attn_status st, attn_error *err)
{
    ctx->rope.valid = 0;
    if (st == ATTN_ERR_TIMEOUT && !ctx->interrupt)
        return attn_fail(err, st, "", "the computation passed its time limit of %.3g s",
                         (double)ctx->time_limit_ns / 1e9);
    return attn_fail(err, st, "", "the computation was stopped: %s", attn_status_str(st));
}

static attn_status execute_in(attn_ctx *ctx, const attn_front *f, void *plan, size_t n_params,
                              float *out, float *w, float *lse, attn_error *err)
{
    seeded s;
    int64_t nfloats = 0;
    s.ns = n_params == 0 ? f->seed_specs(plan, s.specs) : 0;
    attn_status st = attn_seed_size(s.specs, s.ns, &nfloats, err);
    if (st != ATTN_OK)
        return st;
    s.nfloats = (double)nfloats;
    attn_ws ws = {NULL, 0.0, ctx->threads, 0.0, 0.0};
    lay_out_call(f, plan, &s, &ws, err);
    double seed_bytes = attn_ws_bytes(s.nfloats, sizeof(float));
    char *kernels, *rope;
    if ((st = ws_region(ctx, ATTN_WS_PIECES, ws.used, seed_bytes, &ws.base, err)) != ATTN_OK ||
        (st = ws_region(ctx, ATTN_WS_KERNELS, ws.kernels, 0.0, &kernels, err)) != ATTN_OK ||
        (ws.rope > 0.0 && (st = ws_region(ctx, ATTN_WS_ROPE, ws.rope, 0.0, &rope, err)) != ATTN_OK))
        return st;
    ws.used = ws.kernels = ws.rope = 0.0;
    if ((st = lay_out_call(f, plan, &s, &ws, err)) != ATTN_OK)
        return st;
    attn_exec ex = {ctx, ctx->threads};
    attn_pool_stop stop;
    int stops = attn_pool_stop_arm(&stop, ctx->time_limit_ns, ctx->interrupt, ctx->interrupt_arg);
    struct attn_pool *prev = attn_pool_use(ctx->pool);
    attn_pool_stop *prev_stop = attn_pool_stop_use(stops ? &stop : NULL);
    int64_t t0 = attn_pool_now_ns();
    st = f->run(&ex, plan, out, w, lse, err);
    attn_pool_settle(ctx->pool, attn_pool_now_ns() - t0);
    attn_pool_stop_use(prev_stop);
    attn_pool_use(prev);
    attn_status why = (attn_status)atomic_load(&stop.hit);
    if (why != ATTN_OK)
        return stopped_early(ctx, why, err);
    return st;
}

attn_status attn_execute(attn_ctx *ctx, const attn_front *f, void *plan, size_t n_params,
                         const attn_shapes *sh, float *out, float *w, float *lse,
                         attn_error *err)
{
    if (!out || (sh->w_count && !w))
        return attn_fail(err, ATTN_ERR_ARG, "", "%s: NULL output or weights buffer", f->who);
    attn_ctx *own;
    if (!(ctx = attn_ctx_for_call(ctx, &own)))
        return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for a context");
    attn_status st = execute_in(ctx, f, plan, n_params, out, w, lse, err);
    attn_ctx_free(own);
    return st;
}
