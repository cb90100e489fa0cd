/* rope.c - rotary position embedding (RoFormer, Su et al. 2021) as a
 * pre-pass of the pipeline: query and key rows are rotated once, per head,
 * before any score is computed, so the kernels see plain rows. The angles
 * come from one table of cos and sin per position, computed in double
 * once per call and shared by every batch row and head (pair k of d dims
 * turns by pos * base^(-2k/d), GPT-NeoX's partial rotary). */
#include <math.h>
#include <string.h>
#include "internal.h"
#include "pool.h"

/* Positions per table task and rows per rotation task. */
#define ROPE_CHUNK 64
/* Below this many rotated pairs (rough) the pass runs on one thread. */
#define ROPE_SERIAL_PAIRS 65536.0

void attn_rope_plan(const attn_rope *r, int64_t hd, int64_t Lq, int64_t Lk, int64_t off,
                    attn_rope_pass *p)
{
    memset(p, 0, sizeof *p);
    p->r = r;
    p->dims = r->dims ? r->dims : hd;
    int64_t lo = off < 0 ? off : 0; /* the first position, before the offset */
    p->first = (double)r->offset + (double)lo;
    p->npos = Lq + off > Lk ? Lq + off - lo : Lk - lo;
    p->set[0].pos0 = off - lo; /* query i at i + off */
    p->set[1].pos0 = -lo;      /* key j at j */
}

double attn_rope_table_floats(const attn_rope_pass *p)
{
    return (double)p->npos * (double)p->dims;
}

static void table_task(void *arg, int64_t t, int worker)
{
    (void)worker;
    const attn_rope_pass *p = arg;
    int64_t half = p->dims / 2, t1 = (t + 1) * ROPE_CHUNK < p->npos ? (t + 1) * ROPE_CHUNK : p->npos;
    for (int64_t k = 0; k < half; k++) {
        double inv_freq = pow((double)p->r->base, -2.0 * (double)k / (double)p->dims);
        for (int64_t n = t * ROPE_CHUNK; n < t1; n++) {
            double ang = (p->first + (double)n) * inv_freq;
            p->table[n * p->dims + k] = (float)cos(ang);
            p->table[n * p->dims + half + k] = (float)sin(ang);
        }
    }
}

/* One row of hd features from x into y (which may be x), turned by the
 * table row cs (dims/2 cosines, then dims/2 sines). */
static void rotate(const attn_rope_pass *p, const float *x, float *y, int64_t hd, const float *cs)
{
    int64_t half = p->dims / 2;
    const float *sn = cs + half;
    if (p->r->style == ATTN_ROPE_HALF) {
        for (int64_t k = 0; k < half; k++) {
            float a = x[k], b = x[k + half];
            y[k] = a * cs[k] - b * sn[k];
            y[k + half] = a * sn[k] + b * cs[k];
        }
    } else {
        for (int64_t k = 0; k < half; k++) {
            float a = x[2 * k], b = x[2 * k + 1];
            y[2 * k] = a * cs[k] - b * sn[k];
            y[2 * k + 1] = a * sn[k] + b * cs[k];
        }
    }
    if (y != x)
        memcpy(y + p->dims, x + p->dims, (size_t)(hd - p->dims) * sizeof *y);
}

/* Task t: ROPE_CHUNK rows of the query set, then of the key set. */
static void rows_task(void *arg, int64_t t, int worker)
{
    (void)worker;
    const attn_rope_pass *p = arg;
    int64_t nq = (p->set[0].rows + ROPE_CHUNK - 1) / ROPE_CHUNK;
    const attn_rope_set *s = &p->set[t < nq ? 0 : 1];
    int64_t r0 = (t < nq ? t : t - nq) * ROPE_CHUNK;
    int64_t r1 = r0 + ROPE_CHUNK < s->rows ? r0 + ROPE_CHUNK : s->rows;
    for (int64_t r = r0; r < r1; r++) {
        const float *cs = p->table + (s->pos0 + r % s->L) * p->dims;
        for (int64_t h = 0; h < s->heads; h++)
            rotate(p, s->src + r * s->src_stride + h * s->hd, s->dst + r * s->dst_stride + h * s->hd,
                   s->hd, cs);
    }
}

void attn_rope_run(const attn_exec *ex, const attn_rope_pass *p)
{
    double pairs = (double)p->npos * (double)p->dims;
    int64_t tasks = 0;
    for (int s = 0; s < 2; s++) {
        pairs += (double)p->set[s].rows * (double)p->set[s].heads * (double)p->dims;
        tasks += (p->set[s].rows + ROPE_CHUNK - 1) / ROPE_CHUNK;
    }
    int threads = pairs < ROPE_SERIAL_PAIRS ? 1 : ex->threads;
    attn_pool_run(threads, (p->npos + ROPE_CHUNK - 1) / ROPE_CHUNK, table_task, (void *)p);
    attn_pool_run(threads, tasks, rows_task, (void *)p);
}
