/* cost.c - what a computation costs beside its multiply-adds, counted in
 * the floating-point operations that would take as long on the dense
 * kernel (attn_shapes.flops is the two together).
 *
 * The arithmetic alone (2 per multiply-add) under-counts every path but
 * the dense scaled dot product at a wide head: at a head dim of 1 a scored
 * pair is 4 operations, but its exponential, a mask's byte, a top_k's
 * selection or a tanh cost tens to thousands. A caller capping flops (the
 * server's ATTN_MAX_WORK) would let those through at hundreds of times
 * its budget. So each unit of work below is charged what it was measured
 * to take, one core's time at 1e11 operations a second (0.01 ns each; the
 * dense kernel runs at about 2e11 a core), the worst of head dims 1 and
 * 64 rounded up: bench/cost.c times every path and prints its time beside
 * this estimate (make bench-cost). */
#include <math.h>

#include "internal.h"

#define PAIR_SOFTMAX 16.0 /* a scored pair's exponential and running sums (flash: 9-20) */
#define PAIR_STORE 32.0   /* a weight written or a bias read (18-30) */
#define PAIR_MASK 50.0    /* an explicit mask's byte, staged beside the scores (12-48) */
#define PAIR_MASK_ROW 200.0 /* one on the row path, where its branch is the data's (100-230) */
#define PAIR_ROW 300.0    /* a pair on the row-by-row path: hard attention, concat (140-300) */
#define DECODE_ROWS 16    /* fewer query rows go a row at a time (the widest ISA's rule) */
#define PAIR_DECODE 400.0 /* a pair of such a row, which reads the keys and values again */
#define DECODE_COL 8.0    /* (180-380 at d + dv = 2, 420-1450 at 128), and a column of d + dv */
#define PAIR_SELECT 1500.0 /* top_k's selection or sample's two double sums (300-1450) */
#define PAIR_ROW_SOFTCAP 1400.0 /* softcap's tanhf on the row path (1300; the flash
                                 * kernel's polynomial is within PAIR_SOFTMAX) */
#define PAIR_TANH 50.0    /* a tanh rule's pair beside its units (50) */
#define UNIT_TANH 28.0    /* one hidden unit's tanh of a tanh rule's pair (26-28) */
#define PAIR_GLOBAL 450.0 /* a pair of a local_global global row or key (200-430) */
#define ROW_SWEEP 16.0    /* a key of a hard row under a pattern: the row's passes (3-14) */
#define LAYOUT_CELL 200.0 /* a block of a bigbird or blocks layout (190) */

/* Extra cost of one (query, key) slice of lq x lk under options o, times
 * slices; width is a pair's d + dv on the kernels' path, tanh_units the
 * hidden size of a tanh rule (else 0), rows set for the concat rule, which
 * scores on the row path (hard attention's; the tanh rules' own cost is
 * their units'). */
double attn_extra_cost(const attn_options *o, double slices, int64_t lq, int64_t lk, int64_t width,
                       int64_t tanh_units, int rows)
{
    const attn_sparsity *s = &o->sparsity;
    double Lq = (double)lq, Lk = (double)lk, pairs = attn_sparsity_pairs(o, lq, lk);
    double pair = PAIR_SOFTMAX, f = 0.0;
    int hard = o->hard != ATTN_HARD_NONE, by_rows = rows || hard || tanh_units;
    if (o->need_weights) pair += PAIR_STORE;
    if (o->bias.data) pair += PAIR_STORE;
    if (o->mask.data) pair += by_rows ? PAIR_MASK_ROW : PAIR_MASK;
    if (rows || hard) pair += PAIR_ROW;
    if (!by_rows && lq < DECODE_ROWS) pair += PAIR_DECODE + DECODE_COL * (double)width;
    if (o->hard == ATTN_HARD_TOPK || o->hard == ATTN_HARD_SAMPLE) pair += PAIR_SELECT;
    if (tanh_units) pair += PAIR_TANH + UNIT_TANH * (double)tanh_units;
    if (o->softcap > 0.0f && by_rows) pair += PAIR_ROW_SOFTCAP;
    f = pairs * pair;
    if (s->pattern == ATTN_SPARSE_LOCAL_GLOBAL)
        f += PAIR_GLOBAL * fmin(pairs, (double)s->n_global * (Lq + Lk));
    if (s->pattern == ATTN_SPARSE_BIGBIRD || s->pattern == ATTN_SPARSE_BLOCKS) {
        double b = (double)s->block;
        f += LAYOUT_CELL * ceil(Lq / b) * ceil(Lk / b);
    }
    if (s->pattern != ATTN_SPARSE_NONE && hard)
        f += ROW_SWEEP * Lq * Lk;
    return slices * f;
}
