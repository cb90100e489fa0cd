/* ref.c - the plain, double-precision reference for every rule and for
 * multi-head attention (the oracle of tests/test_lib.c; see ref.h). */
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ lookups */

static const attn_tensor *param(const attn_named *p, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(p[i].name, name) == 0)
            return &p[i].t;
    return NULL;
}

/* Element (b, i, j) of a mask of shape (Lq,Lk) or (B,Lq,Lk) or, multi-head,
 * (B,H,Lq,Lk); absent masks allow everything. */
static int mask_at(const attn_mask *m, int64_t b, int64_t h, int64_t H,
                   int64_t i, int64_t j, int64_t Lq, int64_t Lk)
{
    if (m->rank == 0)
        return 1;
    if (m->rank == 2)
        return m->data[i * Lk + j] != 0;
    if (m->rank == 3)
        return m->data[(b * Lq + i) * Lk + j] != 0;
    return m->data[((b * H + h) * Lq + i) * Lk + j] != 0;
}

static double bias_at(const attn_tensor *t, int64_t b, int64_t h, int64_t H,
                      int64_t i, int64_t j, int64_t Lq, int64_t Lk)
{
    if (t->rank == 0)
        return 0.0;
    if (t->rank == 2)
        return t->data[i * Lk + j];
    if (t->rank == 3)
        return t->data[(b * Lq + i) * Lk + j];
    return t->data[((b * H + h) * Lq + i) * Lk + j];
}

/* The contract's masks, combined by AND, for query i and key j. */
static int allowed(const attn_options *o, int64_t b, int64_t h, int64_t H,
                   int64_t i, int64_t j, int64_t Lq, int64_t Lk)
{
    if (!mask_at(&o->mask, b, h, H, i, j, Lq, Lk))
        return 0;
    if (o->key_mask.rank == 1 && !o->key_mask.data[j])
        return 0;
    if (o->key_mask.rank == 2 && !o->key_mask.data[b * Lk + j])
        return 0;
    if (o->causal && j > i)
        return 0;
    if (o->has_window && llabs(i - j) > o->window_left)
        return 0;
    return 1;
}

/* ----------------------------------------------------- softmax + hard */

/* Turns scores s[0..n) (with ok[j] = may attend) into weights w: softmax
 * over the allowed keys, zeros when none; then hard attention. Returns the
 * hard-selection margin (see ref.h), +inf when not hard. */
static double weights_row(const double *s, const int *ok, int64_t n, attn_hard hard,
                          int64_t top_k, double *w)
{
    double mx = -INFINITY, sum = 0.0, gap = INFINITY;
    int64_t n_ok = 0;
    for (int64_t j = 0; j < n; j++)
        if (ok[j]) {
            n_ok++;
            if (s[j] > mx)
                mx = s[j];
        }
    for (int64_t j = 0; j < n; j++) {
        w[j] = ok[j] ? exp(s[j] - mx) : 0.0;
        sum += w[j];
    }
    for (int64_t j = 0; j < n; j++)
        w[j] = n_ok ? w[j] / sum : 0.0;
    if (hard == ATTN_HARD_NONE || n_ok == 0)
        return gap;

    /* Selection by repeated scans: the largest remaining allowed score,
     * ties to the lowest index. O(k n), which is fine for an oracle. */
    int64_t k = hard == ATTN_HARD_ARGMAX ? 1 : top_k;
    if (k > n_ok)
        k = n_ok;
    char *kept = calloc((size_t)n, 1);
    double last = 0.0, scale = 1.0;
    for (int64_t r = 0; r < k; r++) {
        int64_t best = -1;
        for (int64_t j = 0; j < n; j++)
            if (ok[j] && !kept[j] && (best < 0 || s[j] > s[best]))
                best = j;
        kept[best] = 1;
        last = s[best];
    }
    /* Margin to the best score left out. */
    for (int64_t j = 0; j < n; j++) {
        if (ok[j] && fabs(s[j]) > scale)
            scale = fabs(s[j]);
        if (ok[j] && !kept[j] && last - s[j] < gap)
            gap = last - s[j];
    }
    gap /= scale;
    if (hard == ATTN_HARD_ARGMAX) {
        for (int64_t j = 0; j < n; j++)
            w[j] = kept[j] ? 1.0 : 0.0;
    } else {
        double tot = 0.0;
        for (int64_t j = 0; j < n; j++)
            if (kept[j])
                tot += w[j];
        for (int64_t j = 0; j < n; j++)
            w[j] = kept[j] && tot > 0.0 ? w[j] / tot : 0.0;
    }
    free(kept);
    return gap;
}

/* y[r] = sum_c W[r][c] x[c] (+ b[r]); W is rows x cols row-major float. */
static void linear(const float *W, const float *b, const double *x, int64_t rows,
                   int64_t cols, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        double acc = b ? b[r] : 0.0;
        for (int64_t c = 0; c < cols; c++)
            acc += (double)W[r * cols + c] * x[c];
        y[r] = acc;
    }
}

static void to_double(const float *src, int64_t n, double *dst)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = src[i];
}

/* ------------------------------------------------------ /attention */

int ref_attention(const attn_request *req, double *out, double *w, double *hard_gap)
{
    const attn_options *o = &req->opt;
    int batched = req->query.rank == 3;
    int64_t B = batched ? req->query.shape[0] : 1;
    int64_t Lq = req->query.shape[batched], Dq = req->query.shape[batched + 1];
    int64_t Lk = req->key.shape[batched], Dk = req->key.shape[batched + 1];
    int64_t Lv = req->value.shape[batched], Dv = req->value.shape[batched + 1];
    const attn_named *P = req->params;
    size_t nP = req->n_params;
    const attn_tensor *W1 = NULL, *b1 = NULL, *W2 = NULL, *b2 = NULL, *vw = NULL;
    int64_t Dh = 0, Dout = Dv, Ls = Lk;
    double gap = INFINITY;

    switch (req->rule) {
    case ATTN_RULE_GENERAL:
        W1 = param(P, nP, "attn.weight");
        b1 = param(P, nP, "attn.bias");
        if (!W1)
            return -1;
        break;
    case ATTN_RULE_ADDITIVE:
        W1 = param(P, nP, "query_proj.weight");
        W2 = param(P, nP, "key_proj.weight");
        b2 = param(P, nP, "key_proj.bias");
        vw = param(P, nP, "v.weight");
        if (!W1 || !W2 || !b2 || !vw)
            return -1;
        Dh = W1->shape[0];
        break;
    case ATTN_RULE_CONCAT_TANH:
        W1 = param(P, nP, "attn.weight");
        b1 = param(P, nP, "attn.bias");
        if (!W1 || !b1)
            return -1;
        Dh = W1->shape[0];
        break;
    case ATTN_RULE_CONCAT:
        W1 = param(P, nP, "att_weight.weight");
        b1 = param(P, nP, "att_weight.bias");
        W2 = param(P, nP, "out.weight");
        b2 = param(P, nP, "out.bias");
        if (!W1 || !b1 || !W2 || !b2)
            return -1;
        Dout = W2->shape[0];
        Ls = Lv; /* softmax runs over the value rows */
        break;
    default:
        break;
    }

    double *s = malloc(sizeof(double) * (size_t)Ls);
    double *wr = malloc(sizeof(double) * (size_t)Ls);
    int *ok = malloc(sizeof(int) * (size_t)Ls);
    int64_t wide = Dq + (Dk > Dv ? Dk : Dv) + Dh + 1;
    double *x = malloc(sizeof(double) * (size_t)wide);
    double *y = malloc(sizeof(double) * (size_t)(Dh > Dq ? Dh : Dq) + sizeof(double));
    double *hq = malloc(sizeof(double) * (size_t)(Dh + 1));
    double *ctx = malloc(sizeof(double) * (size_t)(Dv + 1));
    double *kk = malloc(sizeof(double) * (size_t)(Dk + 1));
    double scale = req->has_scale ? (double)req->scale : 1.0 / sqrt((double)Dk);

    for (int64_t b = 0; b < B; b++) {
        const float *Q = req->query.data + b * Lq * Dq;
        const float *K = req->key.data + b * Lk * Dk;
        const float *V = req->value.data + b * Lv * Dv;
        for (int64_t i = 0; i < Lq; i++) {
            const float *q = Q + i * Dq;
            if (req->rule == ATTN_RULE_ADDITIVE) {
                to_double(q, Dq, x);
                linear(W1->data, NULL, x, Dh, Dq, hq); /* Wq q_i */
            }
            for (int64_t j = 0; j < Ls; j++) {
                /* concat pairs q_i with k_i; j runs over value rows there */
                const float *k = K + (req->rule == ATTN_RULE_CONCAT ? i : j) * Dk;
                double acc = 0.0;
                switch (req->rule) {
                case ATTN_RULE_DOT:
                case ATTN_RULE_SCALED_DOT:
                    for (int64_t c = 0; c < Dq; c++)
                        acc += (double)q[c] * k[c];
                    if (req->rule == ATTN_RULE_SCALED_DOT)
                        acc *= scale;
                    break;
                case ATTN_RULE_GENERAL: /* q_i . (W k_j + b) */
                    to_double(k, Dk, kk);
                    linear(W1->data, b1 ? b1->data : NULL, kk, Dq, Dk, y);
                    for (int64_t c = 0; c < Dq; c++)
                        acc += (double)q[c] * y[c];
                    break;
                case ATTN_RULE_ADDITIVE: /* v . tanh(Wq q + Wk k + bk) */
                    to_double(k, Dk, kk);
                    linear(W2->data, b2->data, kk, Dh, Dk, y);
                    for (int64_t h = 0; h < Dh; h++)
                        acc += (double)vw->data[h] * tanh(hq[h] + y[h]);
                    break;
                case ATTN_RULE_CONCAT_TANH: /* sum_h tanh(W [q; k] + b)_h */
                    to_double(q, Dq, x);
                    to_double(k, Dk, x + Dq);
                    linear(W1->data, b1->data, x, Dh, Dq + Dk, y);
                    for (int64_t h = 0; h < Dh; h++)
                        acc += tanh(y[h]);
                    break;
                case ATTN_RULE_CONCAT: /* row j of att_weight([q_i; k_i]) */
                    to_double(q, Dq, x);
                    to_double(k, Dk, x + Dq);
                    acc = b1->data[j];
                    for (int64_t c = 0; c < Dq + Dk; c++)
                        acc += (double)W1->data[j * (Dq + Dk) + c] * x[c];
                    break;
                default:
                    break;
                }
                if (req->rule != ATTN_RULE_CONCAT)
                    acc += bias_at(&o->bias, b, 0, 0, i, j, Lq, Ls);
                s[j] = acc;
                ok[j] = allowed(o, b, 0, 0, i, j, Lq, Ls);
            }
            double g = weights_row(s, ok, Ls, o->hard, o->top_k, wr);
            if (g < gap)
                gap = g;
            if (w)
                for (int64_t j = 0; j < Ls; j++)
                    w[(b * Lq + i) * Ls + j] = wr[j];
            /* context = weights . V */
            for (int64_t c = 0; c < Dv; c++) {
                double acc = 0.0;
                for (int64_t j = 0; j < Ls; j++)
                    acc += wr[j] * V[j * Dv + c];
                ctx[c] = acc;
            }
            double *orow = out + (b * Lq + i) * Dout;
            if (req->rule == ATTN_RULE_CONCAT) { /* out([q_i; c_i]) */
                to_double(q, Dq, x);
                memcpy(x + Dq, ctx, sizeof(double) * (size_t)Dv);
                linear(W2->data, b2->data, x, Dout, Dq + Dv, orow);
            } else {
                memcpy(orow, ctx, sizeof(double) * (size_t)Dv);
            }
        }
    }
    free(s);
    free(wr);
    free(ok);
    free(x);
    free(y);
    free(hq);
    free(ctx);
    free(kk);
    if (hard_gap)
        *hard_gap = gap;
    return 0;
}

/* ------------------------------------------------------- /multihead */

/* Adds the sinusoidal encoding to x (L, d): PE[p,2i] = sin(p/10000^(2i/d)),
 * PE[p,2i+1] = cos(p/10000^(2i/d)) (Vaswani et al. 2017, section 3.5). */
static void add_posenc(double *x, int64_t L, int64_t d)
{
    for (int64_t p = 0; p < L; p++)
        for (int64_t c = 0; c < d; c++) {
            double ang = (double)p / pow(10000.0, (double)(c - c % 2) / (double)d);
            x[p * d + c] += c % 2 == 0 ? sin(ang) : cos(ang);
        }
}

/* Y (L, rows) = X (L, cols) W^T + b, with an optional row offset into W and b
 * (for the packed in_proj_weight). */
static void project(const double *X, int64_t L, int64_t cols, const float *W,
                    const float *b, int64_t rows, double *Y)
{
    for (int64_t p = 0; p < L; p++)
        linear(W, b, X + p * cols, rows, cols, Y + p * rows);
}

int ref_mha(const attn_mha_request *req, double *out, double *w, double *norm_gain)
{
    double gain = 0.0;
    const attn_options *o = &req->opt;
    const attn_named *P = req->params;
    size_t nP = req->n_params;
    int batched = req->query.rank == 3;
    int64_t B = batched ? req->query.shape[0] : 1;
    int64_t Lq = req->query.shape[batched], E = req->query.shape[batched + 1];
    const attn_tensor *K = req->key.rank ? &req->key : &req->query;
    const attn_tensor *V = req->value.rank ? &req->value : &req->query;
    int64_t Lk = K->shape[batched], kdim = K->shape[batched + 1];
    int64_t vdim = V->shape[batched + 1];
    int64_t H = req->num_heads, Hkv = req->num_kv_heads ? req->num_kv_heads : H;
    int64_t hd = E / H, group = H / Hkv;
    const float *Wq, *Wk, *Wv, *bq = NULL, *bk = NULL, *bv = NULL, *Wo, *bo = NULL;
    const attn_tensor *t;

    if ((t = param(P, nP, "W_q.weight")) != NULL) {
        const attn_tensor *tk = param(P, nP, "W_k.weight");
        const attn_tensor *tv = param(P, nP, "W_v.weight");
        const attn_tensor *to = param(P, nP, "W_o.weight");
        if (!tk || !tv || !to)
            return -1;
        Wq = t->data;
        Wk = tk->data;
        Wv = tv->data;
        Wo = to->data;
        if ((t = param(P, nP, "W_q.bias")) != NULL)
            bq = t->data;
        if ((t = param(P, nP, "W_k.bias")) != NULL)
            bk = t->data;
        if ((t = param(P, nP, "W_v.bias")) != NULL)
            bv = t->data;
        if ((t = param(P, nP, "W_o.bias")) != NULL)
            bo = t->data;
    } else {
        if ((t = param(P, nP, "in_proj_weight")) != NULL) {
            Wq = t->data;
            Wk = t->data + E * E;
            Wv = t->data + 2 * E * E;
        } else {
            const attn_tensor *a = param(P, nP, "q_proj_weight");
            const attn_tensor *bb = param(P, nP, "k_proj_weight");
            const attn_tensor *c = param(P, nP, "v_proj_weight");
            if (!a || !bb || !c)
                return -1;
            Wq = a->data;
            Wk = bb->data;
            Wv = c->data;
        }
        if ((t = param(P, nP, "in_proj_bias")) != NULL) {
            bq = t->data;
            bk = t->data + E;
            bv = t->data + 2 * E;
        }
        if ((t = param(P, nP, "out_proj.weight")) == NULL)
            return -1;
        Wo = t->data;
        if ((t = param(P, nP, "out_proj.bias")) != NULL)
            bo = t->data;
    }
    const attn_tensor *nw = param(P, nP, "norm.weight");
    const attn_tensor *nb = param(P, nP, "norm.bias");

    int64_t kvw = Hkv * hd;
    double *xq = malloc(sizeof(double) * (size_t)(Lq * E));
    double *xk = malloc(sizeof(double) * (size_t)(Lk * kdim));
    double *xv = malloc(sizeof(double) * (size_t)(Lk * vdim));
    double *pq = malloc(sizeof(double) * (size_t)(Lq * E));
    double *pk = malloc(sizeof(double) * (size_t)(Lk * kvw));
    double *pv = malloc(sizeof(double) * (size_t)(Lk * kvw));
    double *cat = malloc(sizeof(double) * (size_t)(Lq * E));
    double *s = malloc(sizeof(double) * (size_t)Lk);
    double *wr = malloc(sizeof(double) * (size_t)Lk);
    int *ok = malloc(sizeof(int) * (size_t)Lk);
    double *row = malloc(sizeof(double) * (size_t)E);

    if (w && req->average_weights)
        memset(w, 0, sizeof(double) * (size_t)(B * Lq * Lk));
    for (int64_t b = 0; b < B; b++) {
        to_double(req->query.data + b * Lq * E, Lq * E, xq);
        to_double(K->data + b * Lk * kdim, Lk * kdim, xk);
        to_double(V->data + b * Lk * vdim, Lk * vdim, xv);
        if (req->positional_encoding == ATTN_PE_SINUSOIDAL) {
            add_posenc(xq, Lq, E);
            add_posenc(xk, Lk, kdim);
            add_posenc(xv, Lk, vdim);
        }
        project(xq, Lq, E, Wq, bq, E, pq);
        project(xk, Lk, kdim, Wk, bk, kvw, pk);
        project(xv, Lk, vdim, Wv, bv, kvw, pv);
        for (int64_t h = 0; h < H; h++) {
            int64_t g = h / group; /* the key/value head query head h reads */
            for (int64_t i = 0; i < Lq; i++) {
                for (int64_t j = 0; j < Lk; j++) {
                    double acc = 0.0;
                    for (int64_t c = 0; c < hd; c++)
                        acc += pq[i * E + h * hd + c] * pk[j * kvw + g * hd + c];
                    s[j] = acc / sqrt((double)hd) + bias_at(&o->bias, b, h, H, i, j, Lq, Lk);
                    ok[j] = allowed(o, b, h, H, i, j, Lq, Lk);
                }
                weights_row(s, ok, Lk, o->hard, o->top_k, wr);
                for (int64_t c = 0; c < hd; c++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < Lk; j++)
                        acc += wr[j] * pv[j * kvw + g * hd + c];
                    cat[i * E + h * hd + c] = acc;
                }
                if (w && req->average_weights)
                    for (int64_t j = 0; j < Lk; j++)
                        w[(b * Lq + i) * Lk + j] += wr[j] / (double)H;
                else if (w)
                    for (int64_t j = 0; j < Lk; j++)
                        w[((b * H + h) * Lq + i) * Lk + j] = wr[j];
            }
        }
        for (int64_t i = 0; i < Lq; i++) {
            double *orow = out + (b * Lq + i) * E;
            linear(Wo, bo, cat + i * E, E, E, row);
            if (req->residual_norm) {
                /* LayerNorm(q' + attention), biased variance, eps 1e-5. */
                double mean = 0.0, var = 0.0;
                for (int64_t c = 0; c < E; c++) {
                    row[c] += xq[i * E + c];
                    mean += row[c];
                }
                mean /= (double)E;
                for (int64_t c = 0; c < E; c++)
                    var += (row[c] - mean) * (row[c] - mean);
                var /= (double)E;
                double xmax = 0.0, gmax = nw ? 0.0 : 1.0;
                for (int64_t c = 0; c < E; c++) {
                    if (fabs(row[c]) > xmax)
                        xmax = fabs(row[c]);
                    if (nw && fabs(nw->data[c]) > gmax)
                        gmax = fabs(nw->data[c]);
                }
                if (xmax * gmax / sqrt(var + 1e-5) > gain)
                    gain = xmax * gmax / sqrt(var + 1e-5);
                for (int64_t c = 0; c < E; c++) {
                    double y = (row[c] - mean) / sqrt(var + 1e-5);
                    row[c] = y * (nw ? nw->data[c] : 1.0) + (nb ? nb->data[c] : 0.0);
                }
            }
            memcpy(orow, row, sizeof(double) * (size_t)E);
        }
    }
    free(xq);
    free(xk);
    free(xv);
    free(pq);
    free(pk);
    free(pv);
    free(cat);
    free(s);
    free(wr);
    free(ok);
    free(row);
    if (norm_gain)
        *norm_gain = gain;
    return 0;
}
