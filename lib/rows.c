/* rows.c - attention computed one query row at a time (scores, softmax,
 * weighted sum of values), for the rules whose scores are not a plain
 * scaled dot product and for hard attention. Scratch is two rows of Lk
 * floats per thread; the Lq x Lk matrix is only written when wanted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

typedef struct {
    const attn_row_job *jobs;
    int64_t lq, lk;
    float *scratch; /* 3 * lk floats per thread */
} rows_run;

static void score_row(const attn_row_job *jb, int64_t i, float *s)
{
    const float *a = jb->a + i * jb->a_stride;
    switch (jb->kind) {
    case ATTN_SCORE_DOT:
        attn_gemm_nt(1, jb->lk, jb->d, a, jb->a_stride, jb->b, jb->b_stride, NULL, s, jb->lk, 1);
        if (jb->scale != 1.0f)
            for (int64_t j = 0; j < jb->lk; j++)
                s[j] *= jb->scale;
        break;
    case ATTN_SCORE_TANH:
        for (int64_t j = 0; j < jb->lk; j++) {
            const float *b = jb->b + j * jb->b_stride;
            float acc = 0.0f;
            if (jb->vw)
                for (int64_t h = 0; h < jb->d; h++)
                    acc += jb->vw[h] * tanhf(a[h] + b[h]);
            else
                for (int64_t h = 0; h < jb->d; h++)
                    acc += tanhf(a[h] + b[h]);
            s[j] = acc;
        }
        break;
    case ATTN_SCORE_GIVEN:
        memcpy(s, a, (size_t)jb->lk * sizeof *s);
        break;
    }
}

static void rows_range(void *arg, int tid, int64_t begin, int64_t end)
{
    rows_run *r = arg;
    float *s = r->scratch + (size_t)tid * 3 * (size_t)r->lk;
    float *tmp = s + r->lk;
    float *wrow = tmp + r->lk;
    for (int64_t row = begin; row < end; row++) {
        const attn_row_job *jb = &r->jobs[row / r->lq];
        int64_t i = row % r->lq;
        float *w = jb->w ? jb->w + i * jb->w_stride : wrow;
        score_row(jb, i, s);
        attn_row_softmax(s, i, jb->lk, &jb->m, jb->hard, jb->top_k, w, tmp);
        float *o = jb->o + i * jb->o_stride;
        memset(o, 0, (size_t)jb->dv * sizeof *o);
        for (int64_t j = 0; j < jb->lk; j++) {
            float wj = w[j];
            if (wj == 0.0f)
                continue;
            const float *v = jb->v + j * jb->v_stride;
            for (int64_t c = 0; c < jb->dv; c++)
                o[c] += wj * v[c];
        }
    }
}

attn_status attn_rows_run(const attn_row_job *jobs, size_t n, int threads,
                          attn_error *err)
{
    if (n == 0)
        return ATTN_OK;
    int64_t lq = jobs[0].lq, lk = jobs[0].lk, rows, per;
    if (threads < 1)
        threads = 1;
    if (!attn_size_mul((int64_t)n, lq, &rows) || !attn_size_mul(lk, 3 * (int64_t)threads, &per) ||
        (uint64_t)per > SIZE_MAX / sizeof(float))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "", "the request is too large");
    if (threads > rows)
        threads = (int)rows;
    rows_run r = {jobs, lq, lk, malloc((size_t)per * sizeof(float))};
    if (!r.scratch)
        return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for scratch space");
    attn_parallel(threads, rows, rows_range, &r);
    free(r.scratch);
    return ATTN_OK;
}
