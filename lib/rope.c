/* rope.c - rotary position embedding (RoFormer, Su et al. 2021): the
 * table of angles, kept in the context between calls, and the pre-pass
 * that rotates query and key rows for the row driver (the flash kernel
 * rotates them itself, see kernels_tmpl.h). Pair k of d dims turns by
 * pos * base^(-2k/d), GPT-NeoX's partial rotary; the table's cos and sin
 * are computed in double once per position and shared by every batch row
 * and head, and by the calls that follow while they need no other
 * position. */
#include <math.h>
#include <string.h>
#include "internal.h"
#include "kernels_isa.h"
#include "pool.h"

/* Positions per table task and rows per rotation task. */
#define ROPE_CHUNK 64
/* Below this many table entries or rotated pairs (rough) one thread does
 * the work. */
#define ROPE_SERIAL 65536.0

void attn_rope_plan(const attn_rope *r, int64_t hd, int64_t Lq, int64_t Lk, int64_t off,
                    attn_rope_pass *p)
{
    memset(p, 0, sizeof *p);
    p->r = r;
    p->hd = hd;
    p->dims = r->dims ? r->dims : hd;
    int64_t lo = off < 0 ? off : 0; /* the first position, before the offset */
    p->first = (double)r->offset + (double)lo;
    p->npos = Lq + off > Lk ? Lq + off - lo : Lk - lo;
    p->set[0].pos0 = off - lo; /* query i at i + off */
    p->set[1].pos0 = -lo;      /* key j at j */
}

/* The workspace bytes of p's table: cos and sin rows for its npos positions
 * and the ATTN_ROPE_REL relative rows. */
static double rope_table_bytes(const attn_rope_pass *p)
{
    return attn_ws_bytes((double)(p->npos + ATTN_ROPE_REL) * 2.0 * (double)p->hd, sizeof(float));
}

void attn_rope_take(attn_ws *ws, const attn_rope_pass *p)
{
    ws->rope = fmax(ws->rope, rope_table_bytes(p));
}

/* Feature a of pair k and its partner b. */
static void pair_of(const attn_rope_pass *p, int64_t k, int64_t *a, int64_t *b)
{
    int half = p->r->style == ATTN_ROPE_HALF;
    *a = half ? k : 2 * k;
    *b = half ? k + p->dims / 2 : 2 * k + 1;
}

/* Table rows [n0, n1) of positions first + n: C then S, hd floats each,
 * the pair's cos and sin at both of its features, 1 and 0 past dims. */
static void fill_rows(const attn_rope_pass *p, float *table, double first, int64_t n0, int64_t n1)
{
    int64_t hd = p->hd;
    for (int64_t n = n0; n < n1; n++) {
        float *c = table + n * 2 * hd, *s = c + hd;
        for (int64_t e = p->dims; e < hd; e++) {
            c[e] = 1.0f;
            s[e] = 0.0f;
        }
    }
    for (int64_t k = 0; k < p->dims / 2; k++) {
        double inv_freq = pow((double)p->r->base, -2.0 * (double)k / (double)p->dims);
        int64_t a, b;
        pair_of(p, k, &a, &b);
        for (int64_t n = n0; n < n1; n++) {
            double ang = (first + (double)n) * inv_freq;
            float *c = table + n * 2 * hd, *s = c + hd;
            c[a] = c[b] = (float)cos(ang);
            s[a] = s[b] = (float)sin(ang);
        }
    }
}

typedef struct {
    const attn_rope_pass *p;
    float *table;
    int64_t n0, n1;
} fill_args;

static void fill_task(void *arg, int64_t t, int worker)
{
    (void)worker;
    const fill_args *f = arg;
    int64_t a = f->n0 + t * ROPE_CHUNK, b = a + ROPE_CHUNK < f->n1 ? a + ROPE_CHUNK : f->n1;
    fill_rows(f->p, f->table, f->p->first, a, b);
}

void attn_rope_table(const attn_exec *ex, attn_rope_pass *p)
{
    attn_ctx *ctx = ex->ctx;
    attn_rope_key *key = &ctx->rope;
    size_t bytes = (size_t)rope_table_bytes(p);
    /* the region was sized before the call (execute_in), so this does not
     * allocate; a growth there dropped the key. It holds ATTN_ROPE_REL rows
     * of the positions 0, 1, ... (the kernel's relative angles), then the
     * call's positions. */
    float *rel = attn_ctx_region(ctx, ATTN_WS_ROPE, bytes), *table = rel + ATTN_ROPE_REL * 2 * p->hd;
    int same = key->valid && key->base == p->r->base && key->style == (int)p->r->style &&
               key->dims == p->dims && key->hd == p->hd;
    p->rel = rel;
    if (!same) {
        fill_rows(p, rel, 0.0, 0, ATTN_ROPE_REL);
        key->valid = 0;
    }
    if (same && p->first >= key->first && p->first + (double)p->npos <= key->first + (double)key->npos) {
        p->table = table + (int64_t)(p->first - key->first) * 2 * p->hd;
        return; /* every position needed is there */
    }
    /* compute the rows missing after those kept (same start), or all */
    int64_t n0 = same && p->first == key->first ? key->npos : 0;
    fill_args f = {p, table, n0, p->npos};
    double work = (double)(p->npos - n0) * (double)p->dims;
    attn_pool_run(work < ROPE_SERIAL ? 1 : ex->threads, (p->npos - n0 + ROPE_CHUNK - 1) / ROPE_CHUNK,
                  fill_task, &f);
    key->valid = 1;
    key->base = p->r->base;
    key->style = (int)p->r->style;
    key->dims = p->dims;
    key->hd = p->hd;
    key->first = p->first;
    key->npos = p->npos;
    p->table = table;
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
    const attn_kernel_set *ks = attn_kernels_active();
    int interleaved = p->r->style != ATTN_ROPE_HALF;
    for (int64_t h = 0; h < s->heads; h++)
        for (int64_t r = r0, run; r < r1; r += run) { /* runs of positions within one batch row */
            run = s->L - r % s->L < r1 - r ? s->L - r % s->L : r1 - r;
            ks->rope(p->table, s->pos0 + r % s->L, run, p->hd, p->dims, interleaved,
                     s->src + r * s->src_stride + h * p->hd, s->src_stride,
                     s->dst + r * s->dst_stride + h * p->hd, s->dst_stride);
        }
}

void attn_rope_set_rows(attn_rope_set *s, const float *src, int64_t src_stride, float *dst,
                        int64_t dst_stride, int64_t B, int64_t L, int64_t heads)
{
    s->src = src;
    s->src_stride = src_stride;
    s->dst = dst;
    s->dst_stride = dst_stride;
    s->rows = B * L;
    s->L = L;
    s->heads = heads;
}

void attn_rope_rows(const attn_exec *ex, const attn_rope_pass *p)
{
    double pairs = 0.0;
    int64_t tasks = 0;
    for (int s = 0; s < 2; s++) {
        pairs += (double)p->set[s].rows * (double)p->set[s].heads * (double)p->dims;
        tasks += (p->set[s].rows + ROPE_CHUNK - 1) / ROPE_CHUNK;
    }
    attn_pool_run(pairs < ROPE_SERIAL ? 1 : ex->threads, tasks, rows_task, (void *)p);
}
