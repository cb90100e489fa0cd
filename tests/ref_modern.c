/* ref_modern.c - the plain double-precision reference for the modern
 * attention options (see ref_modern.h for the contract and the PRNG spec). */
#include "ref_modern.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RM_EPS_LINEAR 1e-6

/* ------------------------------------------------------------ the PRNG */

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

uint64_t rm_splitmix64(uint64_t *state)
{
    *state += UINT64_C(0x9E3779B97F4A7C15);
    return mix(*state);
}

uint64_t rm_splitmix64_at(uint64_t seed, uint64_t n)
{
    return mix(seed + (n + 1) * UINT64_C(0x9E3779B97F4A7C15));
}

void rm_normal_fill(uint64_t *state, float *dst, int64_t n)
{
    const double two_pi = 6.283185307179586476925286766559;
    for (int64_t t = 0; t < n; t++) {
        double u1 = (double)((rm_splitmix64(state) >> 11) + 1) * 0x1p-53;
        double u2 = (double)(rm_splitmix64(state) >> 11) * 0x1p-53;
        dst[t] = (float)(sqrt(-2.0 * log(u1)) * cos(two_pi * u2));
    }
}

/* --------------------------------------------------------------- ALiBi */

static void slopes_pow2(int64_t n, double *out)
{
    /* 2^(-8h/n), h = 1..n: the paper's start = ratio = 2^(-8/n). */
    for (int64_t h = 1; h <= n; h++)
        out[h - 1] = pow(2.0, -8.0 * (double)h / (double)n);
}

void rm_alibi_slopes(int64_t H, double *slopes)
{
    int64_t n = 1;
    while (n * 2 <= H)
        n *= 2;
    slopes_pow2(n, slopes);
    if (n == H)
        return;
    double *twice = malloc(sizeof(double) * (size_t)(2 * n));
    if (!twice)
        return;
    slopes_pow2(2 * n, twice);
    for (int64_t t = 0; t < H - n; t++)
        slopes[n + t] = twice[2 * t]; /* the 1st, 3rd, 5th... of 2n */
    free(twice);
}

/* ---------------------------------------------------------------- rope */

void rm_rope_apply(const rm_rope *r, double *x, int64_t L, int64_t D, int64_t stride,
                   int64_t pos0)
{
    int64_t d = r->dims > 0 ? r->dims : D;
    for (int64_t p = 0; p < L; p++) {
        double *row = x + p * stride;
        double pos = (double)(pos0 + p);
        for (int64_t k = 0; k < d / 2; k++) {
            double t = pos * pow(r->base, -2.0 * (double)k / (double)d);
            int64_t ia = r->style == RM_ROPE_HALF ? k : 2 * k;
            int64_t ib = r->style == RM_ROPE_HALF ? k + d / 2 : 2 * k + 1;
            double a = row[ia], b = row[ib];
            row[ia] = a * cos(t) - b * sin(t);
            row[ib] = a * sin(t) + b * cos(t);
        }
    }
}

/* ------------------------------------------------------------ sparsity */

void rm_bigbird_layout(int64_t nqb, int64_t nkb, int64_t window_blocks, int64_t global_blocks,
                       int64_t random_blocks, uint64_t seed, uint8_t *layout)
{
    uint64_t state = seed;
    int64_t half = (window_blocks - 1) / 2;
    int64_t *cand = malloc(sizeof(int64_t) * (size_t)(nkb > 0 ? nkb : 1));
    if (!cand)
        return;
    memset(layout, 0, (size_t)(nqb * nkb));
    for (int64_t qb = 0; qb < nqb; qb++) {
        uint8_t *row = layout + qb * nkb;
        if (qb < global_blocks) {
            memset(row, 1, (size_t)nkb);
            continue;
        }
        for (int64_t kb = 0; kb < nkb; kb++)
            if (kb < global_blocks || (kb >= qb - half && kb <= qb + half))
                row[kb] = 1;
        int64_t n = 0;
        for (int64_t kb = 0; kb < nkb; kb++)
            if (!row[kb])
                cand[n++] = kb;
        int64_t r = random_blocks < n ? random_blocks : n;
        for (int64_t t = 0; t < r; t++) {
            uint64_t x = rm_splitmix64(&state) >> 32;
            int64_t j = t + (int64_t)((x * (uint64_t)(n - t)) >> 32);
            int64_t tmp = cand[t];
            cand[t] = cand[j];
            cand[j] = tmp;
        }
        for (int64_t t = 0; t < r; t++)
            row[cand[t]] = 1;
    }
    free(cand);
}

void rm_sparsity_expand(const rm_sparsity *sp, int64_t Lq, int64_t Lk, rm_align align,
                        uint64_t seed, uint8_t *dense, uint8_t *layout)
{
    int64_t off = align == RM_BOTTOM_RIGHT ? Lk - Lq : 0;
    if (sp->pattern == RM_SPARSE_LOCAL_GLOBAL) {
        for (int64_t i = 0; i < Lq; i++)
            for (int64_t j = 0; j < Lk; j++) {
                int ok = llabs(i + off - j) <= sp->window;
                for (size_t g = 0; g < sp->n_global; g++)
                    if (sp->global[g] == i || sp->global[g] == j)
                        ok = 1; /* a global query, or a global key */
                dense[i * Lk + j] = (uint8_t)ok;
            }
        return;
    }
    int64_t b = sp->block;
    int64_t nqb = (Lq + b - 1) / b, nkb = (Lk + b - 1) / b;
    uint8_t *lay = malloc((size_t)(nqb * nkb));
    if (!lay)
        return;
    if (sp->pattern == RM_SPARSE_BIGBIRD)
        rm_bigbird_layout(nqb, nkb, sp->window_blocks, sp->global_blocks, sp->random_blocks,
                          seed, lay);
    else
        for (int64_t t = 0; t < nqb * nkb; t++)
            lay[t] = sp->layout[t] != 0;
    for (int64_t i = 0; i < Lq; i++)
        for (int64_t j = 0; j < Lk; j++)
            dense[i * Lk + j] = lay[(i / b) * nkb + j / b];
    if (layout)
        memcpy(layout, lay, (size_t)(nqb * nkb));
    free(lay);
}

/* ------------------------------------------------------- one head, softmax */

/* Hard selection by repeated scans: the largest remaining allowed score,
 * lowest index on ties, k times. Returns the margin (see ref_modern.h),
 * relative to max(least, largest |score|). */
static double select_top(const double *x, const int *ok, int64_t n, int64_t k, double least,
                         int *kept)
{
    int64_t n_ok = 0;
    double last = 0.0, size = least, gap = INFINITY;
    for (int64_t j = 0; j < n; j++) {
        kept[j] = 0;
        if (ok[j]) {
            n_ok++;
            if (fabs(x[j]) > size)
                size = fabs(x[j]);
        }
    }
    if (k > n_ok)
        k = n_ok;
    for (int64_t t = 0; t < k; t++) {
        int64_t best = -1;
        for (int64_t j = 0; j < n; j++)
            if (ok[j] && !kept[j] && (best < 0 || x[j] > x[best]))
                best = j;
        kept[best] = 1;
        last = x[best];
    }
    for (int64_t j = 0; j < n; j++)
        if (ok[j] && !kept[j] && last - x[j] < gap)
            gap = last - x[j];
    return size > 0.0 ? gap / size : gap;
}

void rm_head_softmax(const rm_head *h, const double *s, const double *v, int64_t Dv,
                     double *w, double *o, rm_margin *m)
{
    int64_t Lq = h->Lq, Lk = h->Lk;
    int64_t off = h->align == RM_BOTTOM_RIGHT ? Lk - Lq : 0;
    double *x = malloc(sizeof(double) * (size_t)Lk);
    int *ok = malloc(sizeof(int) * (size_t)Lk);
    int *kept = malloc(sizeof(int) * (size_t)Lk);
    if (!x || !ok || !kept)
        goto done;
    for (int64_t i = 0; i < Lq; i++) {
        int64_t ip = i + off; /* i' */
        double *wr = w + i * Lk;
        int64_t n_ok = 0;

        /* Steps 2-4: softcap, bias and ALiBi, the masks. */
        for (int64_t j = 0; j < Lk; j++) {
            double y = s[i * Lk + j];
            if (h->softcap > 0.0)
                y = h->softcap * tanh(y / h->softcap);
            if (h->bias)
                y += h->bias[i * Lk + j];
            if (h->has_alibi)
                y -= h->alibi_slope * fabs((double)(ip - j));
            x[j] = y;
            int a = 1;
            if (h->mask && !h->mask[i * Lk + j])
                a = 0;
            if (h->key_mask && !h->key_mask[j])
                a = 0;
            if (h->causal && j > ip)
                a = 0;
            if (h->has_window && h->left >= 0 && j < ip - h->left)
                a = 0;
            if (h->has_window && h->right >= 0 && j > ip + h->right)
                a = 0;
            if (h->sparse && !h->sparse[i * Lk + j])
                a = 0;
            ok[j] = a;
            n_ok += a;
        }

        /* Step 5: softmax over the allowed keys, with the sink in the sum. */
        for (int64_t j = 0; j < Lk; j++)
            wr[j] = 0.0;
        if (n_ok > 0) {
            double M = h->has_sink ? h->sink : -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < Lk; j++)
                if (ok[j] && x[j] > M)
                    M = x[j];
            for (int64_t j = 0; j < Lk; j++)
                if (ok[j]) {
                    wr[j] = exp(x[j] - M);
                    sum += wr[j];
                }
            if (h->has_sink)
                sum += exp(h->sink - M);
            for (int64_t j = 0; j < Lk; j++)
                wr[j] /= sum;
            if (h->lse)
                h->lse[i] = M + log(sum);
        } else if (h->lse) {
            h->lse[i] = h->has_sink ? h->sink : -INFINITY;
        }

        /* Step 6: hard attention on the keys' weights. */
        if (h->hard == RM_HARD_ARGMAX || h->hard == RM_HARD_TOPK) {
            if (n_ok > 0) {
                int64_t k = h->hard == RM_HARD_ARGMAX ? 1 : h->top_k;
                double g = select_top(x, ok, Lk, k, h->gap_floor, kept);
                if (m && g < m->hard_gap)
                    m->hard_gap = g;
                double tot = 0.0;
                for (int64_t j = 0; j < Lk; j++)
                    if (kept[j])
                        tot += wr[j];
                for (int64_t j = 0; j < Lk; j++) {
                    if (h->hard == RM_HARD_ARGMAX)
                        wr[j] = kept[j] ? 1.0 : 0.0;
                    else
                        wr[j] = kept[j] && tot > 0.0 ? wr[j] / tot : 0.0;
                }
            }
        } else if (h->hard == RM_HARD_SAMPLE) {
            /* The spec in ref_modern.h, item 1. */
            uint64_t draw = rm_splitmix64_at(h->seed, h->draw_base + (uint64_t)i);
            double u = (double)(draw >> 11) * 0x1p-53;
            if (n_ok > 0) {
                double mx = -INFINITY, total = 0.0, run = 0.0, prev = 0.0;
                int64_t pick = -1;
                for (int64_t j = 0; j < Lk; j++)
                    if (ok[j] && x[j] > mx)
                        mx = x[j];
                for (int64_t j = 0; j < Lk; j++)
                    if (ok[j])
                        total += exp((x[j] - mx) / h->temperature);
                double target = u * total;
                for (int64_t j = 0; j < Lk && pick < 0; j++) {
                    prev = run;
                    if (ok[j])
                        run += exp((x[j] - mx) / h->temperature);
                    if (ok[j] && run > target)
                        pick = j;
                }
                double g = fmin(target - prev, run - target) / total;
                if (m && g < m->sample_gap)
                    m->sample_gap = g;
                for (int64_t j = 0; j < Lk; j++)
                    wr[j] = j == pick ? 1.0 : 0.0;
            }
        }

        /* Step 7: O = W V. */
        for (int64_t c = 0; c < Dv; c++) {
            double acc = 0.0;
            for (int64_t j = 0; j < Lk; j++)
                acc += wr[j] * v[j * Dv + c];
            o[i * Dv + c] = acc;
        }
    }
done:
    free(x);
    free(ok);
    free(kept);
}

/* -------------------------------------------------------- linear attention */

static double phi(double x, rm_feature_map fm)
{
    if (fm == RM_FM_RELU)
        return x > 0.0 ? x : 0.0;
    return x > 0.0 ? x + 1.0 : exp(x); /* elu(x) + 1 */
}

void rm_linear_head(int64_t Lq, int64_t Lk, int64_t D, int64_t Dv, const double *q,
                    const double *k, const double *v, const uint8_t *key_mask, int causal,
                    rm_align align, rm_feature_map fm, double *w, double *o)
{
    int64_t off = align == RM_BOTTOM_RIGHT ? Lk - Lq : 0;
    double *a = malloc(sizeof(double) * (size_t)(Lk > 0 ? Lk : 1));
    if (!a)
        return;
    for (int64_t i = 0; i < Lq; i++) {
        double den = 0.0;
        for (int64_t j = 0; j < Lk; j++) {
            a[j] = 0.0;
            if ((key_mask && !key_mask[j]) || (causal && j > i + off))
                continue;
            for (int64_t c = 0; c < D; c++)
                a[j] += phi(q[i * D + c], fm) * phi(k[j * D + c], fm);
            den += a[j];
        }
        den += RM_EPS_LINEAR;
        for (int64_t c = 0; c < Dv; c++) {
            double acc = 0.0;
            for (int64_t j = 0; j < Lk; j++)
                acc += a[j] * v[j * Dv + c];
            o[i * Dv + c] = acc / den;
        }
        if (w)
            for (int64_t j = 0; j < Lk; j++)
                w[i * Lk + j] = a[j] / den;
    }
    free(a);
}

/* ------------------------------------------------------------ a request */

/* y[r] = sum_c W[r][c] x[c] (+ b[r]). */
static void linear(const double *W, const double *b, const double *x, int64_t rows,
                   int64_t cols, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        double acc = b ? b[r] : 0.0;
        for (int64_t c = 0; c < cols; c++)
            acc += W[r * cols + c] * x[c];
        y[r] = acc;
    }
}

/* The (Lq, Lk) slice of a mask or bias of rank 2, 3 or 4 for (b, h). Rank
 * 3 is (H, Lq, Lk) when per_head (the rules with heads, as PyTorch
 * broadcasts it against (B, H, Lq, Lk)), else (B, Lq, Lk); one_batch,
 * one_head: the operand holds one batch row, one head. */
static size_t slice_at(int rank, int per_head, int one_batch, int one_head, int64_t b, int64_t h,
                       int64_t H, int64_t Lq, int64_t Lk)
{
    int64_t bb = one_batch ? 0 : b, hh = one_head ? 0 : h;
    if (rank == 2)
        return 0;
    if (rank == 3)
        return (size_t)((per_head ? hh : bb) * Lq * Lk);
    return (size_t)((bb * (one_head ? 1 : H) + hh) * Lq * Lk);
}

/* Adds the sinusoidal encoding (Vaswani et al. 2017) to x (L, d). */
static void add_sinusoidal(double *x, int64_t L, int64_t d)
{
    for (int64_t p = 0; p < L; p++)
        for (int64_t c = 0; c < d; c++) {
            double ang = (double)p / pow(10000.0, (double)(c - c % 2) / (double)d);
            x[p * d + c] += c % 2 == 0 ? sin(ang) : cos(ang);
        }
}

/* Step 1 for the /attention rules: raw scores (Lq, Lk) of batch element b;
 * q and k are that element's rows (rope already applied). */
static void rule_scores(const rm_request *r, const double *q, const double *k, double *s)
{
    int64_t Lq = r->Lq, Lk = r->Lk, Dq = r->Dq, Dk = r->Dk, Dh = r->Dh;
    double *x = malloc(sizeof(double) * (size_t)(Dq + Dk + 1));
    double *y = malloc(sizeof(double) * (size_t)((Dh > Dq ? Dh : Dq) + 1));
    double *hq = malloc(sizeof(double) * (size_t)(Dh + 1));
    double scale = r->has_scale ? r->scale : 1.0 / sqrt((double)Dk);
    for (int64_t i = 0; i < Lq; i++) {
        const double *qi = q + i * Dq;
        if (r->rule == RM_ADDITIVE)
            linear(r->W1, NULL, qi, Dh, Dq, hq); /* Wq q_i */
        for (int64_t j = 0; j < Lk; j++) {
            const double *kj = k + (r->rule == RM_CONCAT ? i : j) * Dk;
            double acc = 0.0;
            switch (r->rule) {
            case RM_DOT:
            case RM_SCALED_DOT:
                for (int64_t c = 0; c < Dq; c++)
                    acc += qi[c] * kj[c];
                if (r->rule == RM_SCALED_DOT)
                    acc *= scale;
                break;
            case RM_GENERAL: /* q_i . (W k_j + b) */
                linear(r->W1, r->b1, kj, Dq, Dk, y);
                for (int64_t c = 0; c < Dq; c++)
                    acc += qi[c] * y[c];
                break;
            case RM_ADDITIVE: /* v . tanh(Wq q + Wk k + bk) */
                linear(r->W2, r->b2, kj, Dh, Dk, y);
                for (int64_t c = 0; c < Dh; c++)
                    acc += r->vw[c] * tanh(hq[c] + y[c]);
                break;
            case RM_CONCAT_TANH: /* sum_h tanh(W [q; k] + b)_h */
                memcpy(x, qi, sizeof(double) * (size_t)Dq);
                memcpy(x + Dq, kj, sizeof(double) * (size_t)Dk);
                linear(r->W1, r->b1, x, Dh, Dq + Dk, y);
                for (int64_t c = 0; c < Dh; c++)
                    acc += tanh(y[c]);
                break;
            case RM_CONCAT: /* row j of att_weight([q_i; k_i]) */
                memcpy(x, qi, sizeof(double) * (size_t)Dq);
                memcpy(x + Dq, kj, sizeof(double) * (size_t)Dk);
                acc = r->b1[j];
                for (int64_t c = 0; c < Dq + Dk; c++)
                    acc += r->W1[j * (Dq + Dk) + c] * x[c];
                break;
            default:
                break;
            }
            s[i * Lk + j] = acc;
        }
    }
    free(x);
    free(y);
    free(hq);
}

/* A request's work arrays: where each pointer goes and how many doubles. */
typedef struct {
    double **p;
    int64_t n;
} work;

#define N_WORK(w) ((int)(sizeof(w) / sizeof((w)[0])))

static void work_free(const work *w, int n)
{
    for (int i = 0; i < n; i++) {
        free(*w[i].p);
        *w[i].p = NULL;
    }
}

/* Allocates all n work arrays: 0, or -1 (none left allocated). */
static int work_alloc(const work *w, int n)
{
    for (int i = 0; i < n; i++)
        *w[i].p = NULL;
    for (int i = 0; i < n; i++)
        if (!(*w[i].p = malloc(sizeof(double) * (size_t)w[i].n))) {
            work_free(w, n);
            return -1;
        }
    return 0;
}

/* The per-(b, h) part of the options as an rm_head; per_head: see
 * slice_at. */
static void head_options(const rm_request *r, int64_t b, int64_t h, int64_t H, int per_head,
                         const uint8_t *sparse, rm_head *hd)
{
    int64_t Lq = r->Lq, Lk = r->Lk;
    memset(hd, 0, sizeof *hd);
    hd->Lq = Lq;
    hd->Lk = Lk;
    hd->align = r->align;
    hd->causal = r->causal;
    hd->has_window = r->has_window;
    hd->left = r->left;
    hd->right = r->right;
    hd->softcap = r->softcap;
    hd->has_alibi = r->alibi != NULL;
    hd->alibi_slope = r->alibi ? r->alibi[h] : 0.0;
    hd->has_sink = r->sinks != NULL;
    hd->sink = r->sinks ? r->sinks[h] : 0.0;
    hd->hard = r->hard;
    hd->top_k = r->top_k;
    hd->gap_floor = r->hard_gap_floor;
    hd->temperature = r->temperature > 0.0 ? r->temperature : 1.0;
    hd->seed = r->seed;
    hd->draw_base = r->draw_offset + (uint64_t)((b * H + h) * Lq);
    hd->mask = r->mask ? r->mask + slice_at(r->mask_rank, per_head, r->mask_one_batch,
                                            r->mask_one_head, b, h, H, Lq, Lk) : NULL;
    hd->bias = r->bias ? r->bias + slice_at(r->bias_rank, per_head, r->bias_one_batch,
                                            r->bias_one_head, b, h, H, Lq, Lk) : NULL;
    hd->key_mask = r->key_mask ? r->key_mask + (r->key_mask_rank == 2 ? b * Lk : 0) : NULL;
    hd->sparse = sparse;
    hd->lse = r->lse ? r->lse + (b * H + h) * Lq : NULL;
}

static int compute_attention(const rm_request *r, const uint8_t *sparse, double *out,
                             double *w, rm_margin *m)
{
    int64_t B = r->B, Lq = r->Lq, Lk = r->Lk, Dq = r->Dq, Dk = r->Dk, Dv = r->Dv;
    int64_t H = r->H > 0 ? r->H : 1, Hkv = r->Hkv > 0 ? r->Hkv : H;
    int64_t krows = r->rule == RM_CONCAT ? Lq : Lk;
    int64_t Dout = r->rule == RM_CONCAT ? r->Dout : Dv;
    double *q, *k, *s, *wh, *ctx, *x;
    const work bufs[] = {{&q, Lq * Dq}, {&k, krows * Dk}, {&s, Lq * Lk},
                         {&wh, Lq * Lk}, {&ctx, Lq * Dv}, {&x, Dq + Dv}};
    if (work_alloc(bufs, N_WORK(bufs)) != 0)
        return -1;
    for (int64_t n = 0; n < B * H; n++) { /* query slice n: batch row b, head h */
        int64_t b = n / H, h = n % H, kn = b * Hkv + h / (H / Hkv);
        const double *V = r->value + kn * Lk * Dv;
        memcpy(q, r->query + n * Lq * Dq, sizeof(double) * (size_t)(Lq * Dq));
        memcpy(k, r->key + kn * krows * Dk, sizeof(double) * (size_t)(krows * Dk));
        if (r->rope.on) {
            int64_t off = r->align == RM_BOTTOM_RIGHT ? Lk - Lq : 0;
            rm_rope_apply(&r->rope, q, Lq, Dq, Dq, off + r->rope.offset);
            rm_rope_apply(&r->rope, k, Lk, Dk, Dk, r->rope.offset);
        }
        rm_head hd;
        head_options(r, b, h, H, r->H > 0, sparse, &hd);
        if (r->rule == RM_LINEAR) {
            rm_linear_head(Lq, Lk, Dq, Dv, q, k, V, hd.key_mask, r->causal, r->align,
                           r->feature_map, wh, ctx);
        } else {
            rule_scores(r, q, k, s);
            rm_head_softmax(&hd, s, V, Dv, wh, ctx, m);
        }
        if (w)
            memcpy(w + n * Lq * Lk, wh, sizeof(double) * (size_t)(Lq * Lk));
        for (int64_t i = 0; i < Lq; i++) {
            double *orow = out + (n * Lq + i) * Dout;
            if (r->rule == RM_CONCAT) { /* out([q_i; c_i]) */
                memcpy(x, q + i * Dq, sizeof(double) * (size_t)Dq);
                memcpy(x + Dq, ctx + i * Dv, sizeof(double) * (size_t)Dv);
                linear(r->W2, r->b2, x, Dout, Dq + Dv, orow);
            } else {
                memcpy(orow, ctx + i * Dv, sizeof(double) * (size_t)Dv);
            }
        }
    }
    work_free(bufs, N_WORK(bufs));
    return 0;
}

/* row = LayerNorm(x + row) (biased variance, eps 1e-5; gamma and beta may be
 * NULL: ones and zeros). Returns the row's gain (rm_margin's norm_gain). */
static double residual_norm(double *row, const double *x, int64_t E, const double *gamma,
                            const double *beta)
{
    double mean = 0.0, var = 0.0, xmax = 0.0, gmax = gamma ? 0.0 : 1.0;
    for (int64_t c = 0; c < E; c++) {
        row[c] += x[c];
        mean += row[c];
    }
    mean /= (double)E;
    for (int64_t c = 0; c < E; c++)
        var += (row[c] - mean) * (row[c] - mean);
    var /= (double)E;
    for (int64_t c = 0; c < E; c++) {
        if (fabs(row[c]) > xmax)
            xmax = fabs(row[c]);
        if (gamma && fabs(gamma[c]) > gmax)
            gmax = fabs(gamma[c]);
    }
    for (int64_t c = 0; c < E; c++) {
        double y = (row[c] - mean) / sqrt(var + 1e-5);
        row[c] = y * (gamma ? gamma[c] : 1.0) + (beta ? beta[c] : 0.0);
    }
    return xmax * gmax / sqrt(var + 1e-5);
}

static int compute_multihead(const rm_request *r, const uint8_t *sparse, double *out,
                             double *w, rm_margin *m)
{
    int64_t B = r->B, Lq = r->Lq, Lk = r->Lk, E = r->Dq, kdim = r->Dk, vdim = r->Dv;
    int64_t H = r->H, Hkv = r->Hkv ? r->Hkv : r->H, hd = E / H, kvw = Hkv * hd;
    int64_t off = r->align == RM_BOTTOM_RIGHT ? Lk - Lq : 0;
    double *xq, *xk, *xv, *pq, *pk, *pv, *qh, *kh, *vh, *s, *wh, *oh, *cat;
    const work bufs[] = {{&xq, Lq * E},   {&xk, Lk * kdim}, {&xv, Lk * vdim}, {&pq, Lq * E},
                         {&pk, Lk * kvw}, {&pv, Lk * kvw},  {&qh, Lq * hd},   {&kh, Lk * hd},
                         {&vh, Lk * hd},  {&s, Lq * Lk},    {&wh, Lq * Lk},   {&oh, Lq * hd},
                         {&cat, Lq * E}};
    if (work_alloc(bufs, N_WORK(bufs)) != 0)
        return -1;
    if (w && r->average_weights)
        memset(w, 0, sizeof(double) * (size_t)(B * Lq * Lk));
    for (int64_t b = 0; b < B; b++) {
        memcpy(xq, r->query + b * Lq * E, sizeof(double) * (size_t)(Lq * E));
        memcpy(xk, r->key + b * Lk * kdim, sizeof(double) * (size_t)(Lk * kdim));
        memcpy(xv, r->value + b * Lk * vdim, sizeof(double) * (size_t)(Lk * vdim));
        if (r->posenc == RM_PE_SINUSOIDAL) {
            add_sinusoidal(xq, Lq, E);
            add_sinusoidal(xk, Lk, kdim);
            add_sinusoidal(xv, Lk, vdim);
        } else if (r->posenc == RM_PE_LEARNED) {
            /* Table rows 0..Lq-1 for queries, 0..Lk-1 for keys and values. */
            for (int64_t t = 0; t < Lq * E; t++)
                xq[t] += r->pos_table[t];
            for (int64_t t = 0; t < Lk * E; t++) {
                xk[t] += r->pos_table[t];
                xv[t] += r->pos_table[t];
            }
        }
        for (int64_t p = 0; p < Lq; p++)
            linear(r->Wq, r->bq, xq + p * E, E, E, pq + p * E);
        for (int64_t p = 0; p < Lk; p++) {
            linear(r->Wk, r->bk, xk + p * kdim, kvw, kdim, pk + p * kvw);
            linear(r->Wv, r->bv, xv + p * vdim, kvw, vdim, pv + p * kvw);
        }
        for (int64_t h = 0; h < H; h++) {
            int64_t g = h / (H / Hkv); /* the key/value head query head h reads */
            for (int64_t p = 0; p < Lq; p++)
                memcpy(qh + p * hd, pq + p * E + h * hd, sizeof(double) * (size_t)hd);
            for (int64_t p = 0; p < Lk; p++) {
                memcpy(kh + p * hd, pk + p * kvw + g * hd, sizeof(double) * (size_t)hd);
                memcpy(vh + p * hd, pv + p * kvw + g * hd, sizeof(double) * (size_t)hd);
            }
            if (r->rope.on) {
                rm_rope_apply(&r->rope, qh, Lq, hd, hd, off + r->rope.offset);
                rm_rope_apply(&r->rope, kh, Lk, hd, hd, r->rope.offset);
            }
            rm_head ho;
            head_options(r, b, h, H, 0, sparse, &ho);
            if (r->linear) {
                rm_linear_head(Lq, Lk, hd, hd, qh, kh, vh, ho.key_mask, r->causal, r->align,
                               r->feature_map, wh, oh);
            } else {
                for (int64_t i = 0; i < Lq; i++)
                    for (int64_t j = 0; j < Lk; j++) {
                        double acc = 0.0;
                        for (int64_t c = 0; c < hd; c++)
                            acc += qh[i * hd + c] * kh[j * hd + c];
                        s[i * Lk + j] = acc / sqrt((double)hd);
                    }
                rm_head_softmax(&ho, s, vh, hd, wh, oh, m);
            }
            for (int64_t i = 0; i < Lq; i++)
                memcpy(cat + i * E + h * hd, oh + i * hd, sizeof(double) * (size_t)hd);
            if (w && r->average_weights)
                for (int64_t t = 0; t < Lq * Lk; t++)
                    w[b * Lq * Lk + t] += wh[t] / (double)H;
            else if (w)
                memcpy(w + (b * H + h) * Lq * Lk, wh, sizeof(double) * (size_t)(Lq * Lk));
        }
        for (int64_t i = 0; i < Lq; i++) {
            double *row = out + (b * Lq + i) * E;
            linear(r->Wo, r->bo, cat + i * E, E, E, row);
            if (r->residual_norm) {
                double g = residual_norm(row, xq + i * E, E, r->norm_w, r->norm_b);
                if (m && g > m->norm_gain)
                    m->norm_gain = g;
            }
        }
    }
    work_free(bufs, N_WORK(bufs));
    return 0;
}

int rm_compute(const rm_request *req, double *out, double *w, uint8_t *layout, rm_margin *m)
{
    uint8_t *sparse = NULL;
    int rc;
    if (m) {
        m->hard_gap = INFINITY;
        m->sample_gap = INFINITY;
        m->norm_gain = 0.0;
    }
    if (req->sparsity.pattern != RM_SPARSE_NONE) {
        sparse = malloc((size_t)(req->Lq * req->Lk));
        if (!sparse)
            return -1;
        rm_sparsity_expand(&req->sparsity, req->Lq, req->Lk, req->align, req->seed, sparse,
                           req->sparsity.pattern == RM_SPARSE_LOCAL_GLOBAL ? NULL : layout);
    }
    if (req->rule == RM_MULTIHEAD)
        rc = compute_multihead(req, sparse, out, w, m);
    else
        rc = compute_attention(req, sparse, out, w, m);
    free(sparse);
    return rc;
}
