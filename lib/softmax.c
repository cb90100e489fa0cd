/* softmax.c - one row of attention weights: masks and bias applied to the
 * scores, a numerically stable softmax (fully masked rows give zeros), and
 * hard attention (argmax one-hot, or top-k renormalised). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Keeps the k largest of the allowed scores (-INFINITY = not allowed),
 * ties going to the lowest index, by turning the rest into -INFINITY.
 * The k-th largest value t splits the row: everything above t stays, and
 * of the entries equal to t only the first (k - above) in index order. */
static void keep_top_k(float *s, int64_t lk, int64_t k, float *tmp)
{
    int64_t n = 0;
    for (int64_t j = 0; j < lk; j++)
        if (s[j] != -INFINITY)
            tmp[n++] = s[j];
    if (n <= k)
        return; /* fewer allowed keys than k: all of them stay */
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_desc);
    float t = tmp[k - 1];
    int64_t above = 0;
    for (int64_t e = 0; e < k; e++)
        above += tmp[e] > t;
    int64_t ties = k - above;
    for (int64_t j = 0; j < lk; j++) {
        if (s[j] > t)
            continue;
        if (s[j] == t && ties > 0) {
            ties--;
            continue;
        }
        s[j] = -INFINITY;
    }
}

void attn_row_softmax(float *s, int64_t i, int64_t lk, const attn_row_masks *m,
                      attn_hard hard, int64_t top_k, float *w, float *tmp)
{
    const uint8_t *mr = m->mask ? m->mask + i * m->mask_stride : NULL;
    const float *br = m->bias ? m->bias + i * m->bias_stride : NULL;
    const uint8_t *km = m->key_mask;
    float mx = -INFINITY;
    for (int64_t j = 0; j < lk; j++) {
        int ok = (!mr || mr[j]) && (!km || km[j]) && (!m->causal || j <= i) &&
                 (m->window < 0 || (j - i <= m->window && i - j <= m->window)) &&
                 (!m->sparse || attn_sparse_allows(m->sparse, i, j));
        if (ok) {
            float x = br ? s[j] + br[j] : s[j];
            s[j] = x;
            if (x > mx)
                mx = x;
        } else {
            s[j] = -INFINITY;
        }
    }
    if (mx == -INFINITY) { /* nothing to attend: defined as zeros */
        memset(w, 0, (size_t)lk * sizeof *w);
        return;
    }
    if (hard == ATTN_HARD_ARGMAX) {
        int64_t at = 0;
        while (s[at] != mx)
            at++;
        memset(w, 0, (size_t)lk * sizeof *w);
        w[at] = 1.0f;
        return;
    }
    if (hard == ATTN_HARD_TOPK)
        keep_top_k(s, lk, top_k, tmp);
    double sum = 0.0;
    for (int64_t j = 0; j < lk; j++) {
        float e = s[j] == -INFINITY ? 0.0f : expf(s[j] - mx);
        w[j] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < lk; j++)
        w[j] *= inv;
}
