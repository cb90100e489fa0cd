/* rows.c - attention computed one query row at a time (scores, softmax,
 * weighted sum of values), for the rules whose scores are not a plain
 * scaled dot product and for hard attention. Blocks of ROW_BLOCK rows are
 * tasks on the kernels' thread pool; the caller's scratch
 * (attn_rows_scratch_bytes) holds ROW_BLOCK + 2 rows of Lk floats per
 * worker, plus, for the tanh scores, each job's keys packed once as a
 * transposed panel the SIMD score kernel streams through (rows_tmpl.h).
 * The Lq x Lk matrix is only written when wanted. A row under a sparsity
 * pattern (hard attention) scores only the runs of keys the pattern allows
 * it (sparse_row). */
#include <math.h>
#include <string.h>
#include "internal.h"
#include "kernels_isa.h"
#include "pool.h"

/* Below this many multiply-adds (rough) a request runs on one thread:
 * waking the pool would cost more than it saves. */
#define ROWS_SERIAL_WORK 200000.0

/* Scratch is handed out in whole cache lines (64 bytes, 16 floats). */
#define LINE_FLOATS 16

/* Query rows a task takes: a dot job's scores of them come from one
 * product, which reads each key row once for all of them (the few-row
 * GEMM's blocks of 4, whose bits do not depend on the block: a row's
 * scores are those it would get alone). */
#define ROW_BLOCK 4

typedef struct {
    const attn_row_job *jobs;
    const attn_kernel_set *k;
    int64_t lq, lk, ldb; /* ldb: lk rounded up to ATTN_ROW_PAD */
    int64_t blocks;      /* tasks a job: its rows in ROW_BLOCKs */
    float *scratch;      /* per_worker floats a worker: ROW_BLOCK s rows, tmp, w */
    int64_t per_worker;
    float *panels;       /* tanh jobs: d x ldb floats per job, else NULL */
    int64_t panel_floats;
} rows_run;

/* The runs of keys a sparsity pattern allows query row i within [lo, hi)
 * (the keys causal and the window leave), in increasing order: the spans
 * of the one-row block (kernels.h), or every key for a global query row. */
typedef struct {
    attn_span_it it;
    int whole; /* local_global's global row: [lo, hi) as one run */
} key_runs;

static void key_runs_init(key_runs *r, const attn_sparse *sp, int64_t i, int64_t lo, int64_t hi)
{
    r->whole = !sp->layout && sp->qglobal[i];
    attn_span_init(&r->it, sp, i, 1, lo, hi);
}

/* The next run [*a, *b); 0 when none is left. */
static int key_runs_next(key_runs *r, int64_t *a, int64_t *b)
{
    int kind;
    if (!r->whole)
        return attn_span_next(&r->it, a, b, &kind);
    if (r->it.pos >= r->it.khi)
        return 0;
    *a = r->it.pos;
    *b = r->it.pos = r->it.khi;
    return 1;
}

/* The dot scores of rows [i0, i0 + nr) of a job against keys [a, b)
 * into s[a..b) of nr rows lds floats apart, in one product of the
 * few-row GEMM (no scratch: never the packed one, whose sums go another
 * way), so that a row's bits are the same whatever rows it goes with. */
static void dot_scores(const attn_row_job *jb, int64_t i0, int64_t nr, int64_t a, int64_t b,
                       float *s, int64_t lds)
{
    attn_gemm_nt(nr, b - a, jb->d, jb->a + i0 * jb->a_stride, jb->a_stride,
                 jb->b + a * jb->b_stride, jb->b_stride, NULL, s + a, lds, 1, NULL);
    if (jb->scale != 1.0f)
        for (int64_t t = 0; t < nr; t++)
            for (int64_t j = a; j < b; j++)
                s[t * lds + j] *= jb->scale;
}

/* Raw scores of row i against keys [a, b) into s[a..b) (the tanh scores
 * write whole vectors around them, inside s's ldb floats). */
static void score_keys(const rows_run *r, int64_t job, int64_t i, int64_t a, int64_t b, float *s)
{
    const attn_row_job *jb = &r->jobs[job];
    const float *q = jb->a + i * jb->a_stride;
    switch (jb->kind) {
    case ATTN_SCORE_DOT:
        dot_scores(jb, i, 1, a, b, s, b - a);
        break;
    case ATTN_SCORE_TANH:
        r->k->tanh_scores(q, r->panels + job * r->panel_floats, r->ldb, jb->d, jb->vw, a, b, s);
        break;
    case ATTN_SCORE_GIVEN:
        memcpy(s + a, q + a, (size_t)(b - a) * sizeof *s);
        break;
    }
}

/* Row i of a job with a sparsity pattern (hard attention: the flash kernel
 * takes the rest), at the cost of the keys the pattern allows it: only
 * they are scored (raw, at their keys, into tmp), their final scores
 * packed in key order into s, and their weights (attn_row_weights: the
 * bits the whole row would give, so the same argmax, top_k and draws) into
 * wc; the output sums the value rows of the keys with a weight (one for
 * argmax and sample, whose output is then that value row exactly). Keys
 * outside the runs have weight 0 and are never drawn. */
static void sparse_row(const rows_run *r, int64_t job, int64_t i, float *s, float *tmp,
                       float *wc)
{
    const attn_row_job *jb = &r->jobs[job];
    int64_t lo, hi, a, b, n = 0;
    float mx = -INFINITY;
    key_runs it;
    attn_row_range(&jb->m, i, jb->lk, &lo, &hi);
    key_runs_init(&it, jb->m.sparse, i, lo, hi);
    while (key_runs_next(&it, &a, &b)) {
        score_keys(r, job, i, a, b, tmp);
        float x = attn_row_scores(tmp, i, jb, a, b, s + n);
        mx = x > mx ? x : mx;
        n += b - a;
    }
    attn_row_weights(s, n, mx, i, jb, wc, tmp);
    if (jb->lse)
        jb->lse[i] = attn_row_lse(s, n, &jb->m);
    float *o = jb->o + i * jb->o_stride, *w = jb->w ? jb->w + i * jb->w_stride : NULL;
    memset(o, 0, (size_t)jb->dv * sizeof *o);
    if (w)
        memset(w, 0, (size_t)jb->lk * sizeof *w);
    key_runs_init(&it, jb->m.sparse, i, lo, hi);
    for (int64_t t = 0; key_runs_next(&it, &a, &b); t += b - a) {
        if (w)
            memcpy(w + a, wc + t, (size_t)(b - a) * sizeof *w);
        for (int64_t j = a; j < b; j++) {
            float x = wc[t + j - a];
            const float *vr = jb->v + j * jb->v_stride;
            if (x != 0.0f)
                for (int64_t c = 0; c < jb->dv; c++)
                    o[c] += x * vr[c];
        }
    }
}

/* Raw scores of row i into s: every key, or for the tanh scores the
 * keys causal and the window leave (the rest is masked after). */
static void score_row(const rows_run *r, int64_t job, int64_t i, float *s)
{
    const attn_row_job *jb = &r->jobs[job];
    int64_t j0 = 0, j1 = jb->lk;
    if (jb->kind == ATTN_SCORE_TANH)
        attn_row_range(&jb->m, i, jb->lk, &j0, &j1);
    if (j0 < j1)
        score_keys(r, job, i, j0, j1, s);
}

/* Row i of a job from its raw scores in s: the pipeline, the weights (or
 * the hard choice) and the output row. */
static void finish_row(const rows_run *r, const attn_row_job *jb, int64_t i, float *s,
                       float *tmp, float *wrow)
{
    float *w = jb->w ? jb->w + i * jb->w_stride : wrow;
    const attn_row_masks *m = &jb->m;
    if (jb->hard == ATTN_HARD_NONE && !m->mask && !m->key_mask && !m->bias &&
        m->softcap == 0.0f && m->alibi == 0.0f && !m->has_sink) {
        /* Only causal / window, if anything: the allowed keys are one
         * range, so the SIMD softmax runs over it and the rest is zero. */
        int64_t j0, j1;
        attn_row_range(m, i, jb->lk, &j0, &j1);
        memset(w, 0, (size_t)j0 * sizeof *w);
        memset(w + j1, 0, (size_t)(jb->lk - j1) * sizeof *w);
        if (j0 < j1)
            r->k->softmax(s + j0, j1 - j0, w + j0);
        if (jb->lse)
            jb->lse[i] = attn_row_lse(s + j0, j1 > j0 ? j1 - j0 : 0, m);
    } else {
        attn_row_softmax(s, i, jb, w, tmp);
        if (jb->lse) /* s holds the final scores */
            jb->lse[i] = attn_row_lse(s, jb->lk, m);
    }
    r->k->weighted_sum(w, jb->lk, jb->v, jb->v_stride, jb->dv, jb->o + i * jb->o_stride);
}

/* Task t: the rows of one ROW_BLOCK of a job. */
static void rows_task(void *arg, int64_t t, int worker)
{
    rows_run *r = arg;
    float *s = r->scratch + (size_t)worker * (size_t)r->per_worker;
    float *tmp = s + ROW_BLOCK * r->ldb, *wrow = tmp + r->ldb;
    int64_t job = t / r->blocks, i0 = t % r->blocks * ROW_BLOCK;
    int64_t nr = r->lq - i0 < ROW_BLOCK ? r->lq - i0 : ROW_BLOCK;
    const attn_row_job *jb = &r->jobs[job];
    if (jb->m.sparse) {
        for (int64_t k = 0; k < nr; k++)
            sparse_row(r, job, i0 + k, s, tmp, wrow);
        return;
    }
    int block = jb->kind == ATTN_SCORE_DOT; /* the block's scores at once */
    if (block)
        dot_scores(jb, i0, nr, 0, jb->lk, s, r->ldb);
    for (int64_t k = 0; k < nr; k++) {
        float *row = block ? s + k * r->ldb : s;
        if (!block)
            score_row(r, job, i0 + k, row);
        finish_row(r, jb, i0 + k, row, tmp, wrow);
    }
}

/* Job t's keys b (lk x d) as the panel bt[h][j] = b[j][h], zero-padded
 * to ldb columns. */
static void pack_task(void *arg, int64_t t, int worker)
{
    (void)worker;
    rows_run *r = arg;
    const attn_row_job *jb = &r->jobs[t];
    float *bt = r->panels + t * r->panel_floats;
    for (int64_t h = 0; h < jb->d; h++) {
        float *dst = bt + h * r->ldb;
        for (int64_t j = 0; j < jb->lk; j++)
            dst[j] = jb->b[j * jb->b_stride + h];
        for (int64_t j = jb->lk; j < r->ldb; j++)
            dst[j] = 0.0f;
    }
}

/* Sizes of a run: ldb, the per-worker floats and the panel floats (total
 * and per job). Returns 0 when they overflow. */
static int rows_sizes(const attn_row_job *jobs, size_t n, int threads, int64_t *ldb,
                      int64_t *per_worker, int64_t *panels, int64_t *panel_floats)
{
    int64_t lk = jobs[0].lk, d = jobs[0].d, per;
    *ldb = (lk + ATTN_ROW_PAD - 1) / ATTN_ROW_PAD * ATTN_ROW_PAD;
    *panels = *panel_floats = 0;
    *per_worker = ((ROW_BLOCK + 2) * *ldb + LINE_FLOATS - 1) / LINE_FLOATS * LINE_FLOATS;
    if (!attn_size_mul(*per_worker, threads < 1 ? 1 : threads, &per) ||
        (uint64_t)per > SIZE_MAX / sizeof(float))
        return 0;
    if (jobs[0].kind != ATTN_SCORE_TANH)
        return 1;
    return attn_size_mul(d, *ldb, panel_floats) &&
           attn_size_mul((int64_t)n, *panel_floats, panels) &&
           (uint64_t)*panels <= SIZE_MAX / sizeof(float) - (uint64_t)per;
}

size_t attn_rows_scratch_bytes(const attn_row_job *jobs, size_t n, int threads)
{
    int64_t ldb, per_worker, panels, panel_floats;
    if (n == 0)
        return 0;
    if (!rows_sizes(jobs, n, threads, &ldb, &per_worker, &panels, &panel_floats))
        return SIZE_MAX;
    return ((size_t)per_worker * (size_t)(threads < 1 ? 1 : threads) + (size_t)panels) *
           sizeof(float);
}

attn_status attn_rows_run(const attn_row_job *jobs, size_t n, int threads, void *scratch,
                          attn_error *err)
{
    if (n == 0)
        return ATTN_OK;
    int64_t lq = jobs[0].lq, lk = jobs[0].lk, rows, ldb, per_worker, panels, panel_floats;
    int tanh = jobs[0].kind == ATTN_SCORE_TANH;
    int64_t d = jobs[0].d, dv = jobs[0].dv;
    if (threads < 1)
        threads = 1;
    for (size_t t = 1; t < n; t++)
        if (jobs[t].kind != jobs[0].kind || jobs[t].d != d)
            return attn_fail(err, ATTN_ERR_ARG, "", "attn_rows_run: jobs of different kinds");
    if (!attn_size_mul((int64_t)n, lq, &rows) ||
        !rows_sizes(jobs, n, threads, &ldb, &per_worker, &panels, &panel_floats))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "", "the request is too large");
    float *mem = scratch;
    int64_t blocks = (lq + ROW_BLOCK - 1) / ROW_BLOCK, tasks = (int64_t)n * blocks;
    rows_run r = {jobs, attn_kernels_active(), lq, lk, ldb, blocks, mem, per_worker,
                  tanh ? mem + per_worker * threads : NULL, panel_floats};
    double work = (double)rows * (double)lk * ((double)dv + (tanh ? 16.0 * (double)d : 1.0));
    if (work < ROWS_SERIAL_WORK)
        threads = 1;
    if (threads > tasks)
        threads = (int)tasks;
    if (tanh)
        attn_pool_run(threads, (int64_t)n, pack_task, &r);
    attn_pool_run(threads, tasks, rows_task, &r);
    return ATTN_OK;
}
