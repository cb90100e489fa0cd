/* softmax.c - one row of attention weights: the score pipeline after the
 * rule's scores (softcap, bias, ALiBi, masks), a numerically stable
 * softmax with an optional sink (fully masked rows give zeros), and hard
 * attention (argmax one-hot, top-k renormalised, or a seeded draw). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "internal.h"

/* A float's place in increasing order as an unsigned key: -0 is taken as
 * +0 (they compare equal), negatives are flipped below the positives. */
static uint32_t order_key(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = x == 0.0f ? 0x00000000u : u;
    return u ^ ((0u - (u >> 31)) | 0x80000000u);
}

/* Counts of the byte at shift of the keys of the n floats x (-INFINITY
 * skipped) into hist, in four interleaved tables so that runs of one byte
 * value, the common case for scores of one magnitude, do not wait on one
 * counter; then summed into hist[0]. */
static void count_bytes(const float *x, int64_t n, int shift, int64_t hist[4][256])
{
    memset(hist, 0, 4 * sizeof hist[0]);
    for (int64_t j = 0; j < n; j++)
        if (x[j] != -INFINITY)
            hist[j & 3][order_key(x[j]) >> shift & 255]++;
    for (int b = 0; b < 256; b++)
        hist[0][b] += hist[1][b] + hist[2][b] + hist[3][b];
}

/* The byte value, counting down from 255, whose bucket holds the need-th
 * largest key; need becomes its rank within that bucket. */
static uint32_t rank_bucket(const int64_t hist[256], int64_t *need)
{
    uint32_t b = 255;
    while (hist[b] < *need)
        *need -= hist[b--];
    return b;
}

/* Keeps the k largest of the allowed scores (-INFINITY = not allowed),
 * ties going to the lowest index, by turning the rest into -INFINITY.
 * The k-th largest value t splits the row: everything above t stays, and
 * of the entries equal to t only the first (k - above) in index order.
 * t is found by radix selection, a byte of its key at a time from the
 * top: one pass over the row, then passes over the candidates left in
 * tmp, so the time is linear in the row whatever k and the scores are. */
static void keep_top_k(float *s, int64_t lk, int64_t k, float *tmp)
{
    int64_t hist[4][256], n = 0, need = k;
    count_bytes(s, lk, 24, hist);
    for (int b = 0; b < 256; b++)
        n += hist[0][b];
    if (n <= k)
        return; /* fewer allowed keys than k: all of them stay */
    uint32_t top = rank_bucket(hist[0], &need);
    int64_t m = 0;
    for (int64_t j = 0; j < lk; j++) { /* branch-free: which keys match is random */
        tmp[m] = s[j];
        m += s[j] != -INFINITY && order_key(s[j]) >> 24 == top;
    }
    for (int shift = 16; shift >= 0; shift -= 8) {
        count_bytes(tmp, m, shift, hist);
        uint32_t b = rank_bucket(hist[0], &need);
        int64_t kept = 0;
        for (int64_t e = 0; e < m; e++) {
            tmp[kept] = tmp[e];
            kept += (order_key(tmp[e]) >> shift & 255) == b;
        }
        m = kept;
    }
    float t = tmp[0]; /* every candidate left has t's key */
    int64_t ties = need;
    for (int64_t j = 0; j < lk; j++) { /* branch-free too */
        int tie = s[j] == t && ties > 0;
        ties -= tie;
        s[j] = s[j] > t || tie ? s[j] : -INFINITY;
    }
}

void attn_row_range(const attn_row_masks *m, int64_t i, int64_t lk, int64_t *j0, int64_t *j1)
{
    /* the sides are clamped (attn_masks_at), so no sum below overflows */
    int64_t ip = i + m->off, lo = 0, hi = lk;
    int64_t right = m->causal ? 0 : m->window_right;
    if (right >= 0 && ip + right + 1 < hi)
        hi = ip + right + 1;
    if (m->window_left >= 0 && ip - m->window_left > lo)
        lo = ip - m->window_left;
    if (hi < 0)
        hi = 0;
    *j0 = lo < hi ? lo : hi;
    *j1 = hi;
}

/* Keys a mark of sample_key covers. */
#define SAMPLE_SPAN 64

/* Key j's term of a draw's sum: exp((s_j - mx) / T), 0 where not allowed. */
static double draw_term(const float *s, int64_t j, float mx, float temperature)
{
    return s[j] == -INFINITY ? 0.0 : exp(((double)s[j] - mx) / temperature);
}

/* Hard sampling (attn.h, "Draws"): the key drawn from s (-INFINITY = not
 * allowed, mx the largest allowed score) with draw x. The first pass sums
 * the exponentials in index order and keeps the running sum at every
 * SAMPLE_SPAN keys in marks (lk / SAMPLE_SPAN + 1 doubles, as bytes); the
 * second starts from the mark before the span where the sum passes the
 * target, so it takes the same sums as a walk from the first key, with
 * SAMPLE_SPAN exponentials at most where that walk took half the row's. */
static int64_t sample_key(const float *s, int64_t lk, float mx, float temperature, uint64_t x,
                          void *marks)
{
    double u = (double)(x >> 11) * 0x1p-53, run = 0.0;
    int64_t last = -1;
    for (int64_t j = 0; j < lk; j++) {
        if (j % SAMPLE_SPAN == 0)
            memcpy((double *)marks + j / SAMPLE_SPAN, &run, sizeof run);
        double e = draw_term(s, j, mx, temperature);
        run += e;
        if (e > 0.0)
            last = j;
    }
    double target = u * run, at = 0.0;
    int64_t span = (lk - 1) / SAMPLE_SPAN; /* the last span's sum is run */
    for (int64_t b = 1; b <= (lk - 1) / SAMPLE_SPAN; b++) {
        memcpy(&at, (double *)marks + b, sizeof at);
        if (at > target) {
            span = b - 1;
            break;
        }
    }
    memcpy(&run, (double *)marks + span, sizeof run);
    for (int64_t j = span * SAMPLE_SPAN; j < lk; j++) {
        double e = draw_term(s, j, mx, temperature);
        run += e;
        if (run > target && e > 0.0)
            return j;
    }
    return last; /* rounding can leave the target at the total: the last key that could be drawn */
}

float attn_row_scores(float *s, int64_t i, const attn_head_job *jb, int64_t a, int64_t b,
                      float *c)
{
    const attn_row_masks *m = &jb->m;
    int64_t j0, j1;
    const uint8_t *mr = m->mask ? m->mask + i * m->mask_stride : NULL;
    const float *br = m->bias ? m->bias + i * m->bias_stride : NULL;
    const uint8_t *km = m->key_mask;
    float mx = -INFINITY;
    attn_row_range(m, i, jb->lk, &j0, &j1);
    if (!mr && !br && !km && !m->sparse && m->softcap == 0.0f && m->alibi == 0.0f) {
        for (int64_t j = a; j < b; j++) { /* one range of keys, no terms: no branches */
            float x = j >= j0 && j < j1 ? s[j] : -INFINITY;
            mx = x > mx ? x : mx;
            c[j - a] = x;
        }
        return mx;
    }
    for (int64_t j = a; j < b; j++) {
        int ok = j >= j0 && j < j1 && (!mr || mr[j]) && (!km || km[j]) &&
                 (!m->sparse || attn_sparse_allows(m->sparse, i, j));
        float x = -INFINITY;
        if (ok) {
            x = attn_row_terms(m, i, j, s[j]);
            if (br)
                x += br[j];
            if (x > mx)
                mx = x;
        }
        c[j - a] = x;
    }
    return mx;
}

void attn_row_weights(float *s, int64_t n, float mx, int64_t i, const attn_head_job *jb,
                      float *w, float *tmp)
{
    const attn_row_masks *m = &jb->m;
    if (mx == -INFINITY) { /* nothing to attend: defined as zeros, sink or not */
        memset(w, 0, (size_t)n * sizeof *w);
        return;
    }
    if (jb->hard == ATTN_HARD_ARGMAX || jb->hard == ATTN_HARD_SAMPLE) {
        int64_t at = 0;
        if (jb->hard == ATTN_HARD_SAMPLE) {
            uint64_t state = jb->seed + (jb->draw_base + (uint64_t)i) * 0x9E3779B97F4A7C15ull;
            at = sample_key(s, n, mx, jb->temperature, attn_splitmix64(&state), tmp);
        } else {
            while (s[at] != mx)
                at++;
        }
        memset(w, 0, (size_t)n * sizeof *w);
        w[at] = 1.0f;
        return;
    }
    if (jb->hard == ATTN_HARD_TOPK)
        keep_top_k(s, n, jb->top_k, tmp);
    /* with a sink (and no hard attention, which drops its share) the sum
     * has one more term, exp(z - M) */
    int sink = m->has_sink && jb->hard == ATTN_HARD_NONE;
    float top = sink && m->sink > mx ? m->sink : mx;
    double sum = sink ? exp((double)m->sink - top) : 0.0;
    for (int64_t j = 0; j < n; j++) {
        float e = s[j] == -INFINITY ? 0.0f : expf(s[j] - top);
        w[j] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < n; j++)
        w[j] *= inv;
}

float attn_row_lse(const float *s, int64_t n, const attn_row_masks *m)
{
    float top = m->has_sink ? m->sink : -INFINITY;
    for (int64_t j = 0; j < n; j++)
        top = s[j] > top ? s[j] : top;
    if (top == -INFINITY)
        return -INFINITY;
    double sum = m->has_sink ? exp((double)m->sink - top) : 0.0;
    for (int64_t j = 0; j < n; j++)
        if (s[j] != -INFINITY)
            sum += exp((double)s[j] - top);
    return (float)(top + log(sum));
}

void attn_row_softmax(float *s, int64_t i, const attn_head_job *jb, float *w, float *tmp)
{
    float mx = attn_row_scores(s, i, jb, 0, jb->lk, s);
    attn_row_weights(s, jb->lk, mx, i, jb, w, tmp);
}
