/* shape.c - validation of tensors, masks and options against a request's
 * sizes, with messages worded for an API user. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"

static attn_status check_one(const attn_tensor *t, const char *name, const char *dims2,
                             const char *dims3, const char *dims4, attn_error *err)
{
    if (t->rank != 2 && t->rank != 3 && !(t->rank == 4 && dims4))
        return attn_fail(err, ATTN_ERR_SHAPE, name, "%s must be %s%s%s or %s; got rank %d", name,
                         dims2, dims4 ? ", " : "", dims4 ? dims3 : "", dims4 ? dims4 : dims3,
                         t->rank);
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] < 1) {
            char s[96];
            attn_fmt_shape(s, sizeof s, t->rank, t->shape);
            return attn_fail(err, ATTN_ERR_SHAPE, name,
                             "%s has shape %s; every dimension must be at least 1", name, s);
        }
    int64_t c;
    if (!attn_count(t->rank, t->shape, &c))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, name, "%s has too many elements", name);
    if (!t->data)
        return attn_fail(err, ATTN_ERR_ARG, name, "%s has no data", name);
    return ATTN_OK;
}

attn_status attn_refuse_layout(const attn_options *o, const char *who, attn_error *err)
{
    if (o->qkv_layout == ATTN_QKV_BHSD)
        return ATTN_OK;
    return attn_fail(err, ATTN_ERR_PARAM, "qkv_layout",
                     "qkv_layout applies to the rules' 4-D query, key and value, not %s", who);
}

/* Rank 4: key and value heads agree, and divide query's (grouped-query
 * attention, as torch's scaled_dot_product_attention with enable_gqa). */
static attn_status check_heads(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                               attn_error *err)
{
    if (v->shape[1] != k->shape[1])
        return attn_fail(err, ATTN_ERR_SHAPE, "value",
                         "value has %lld heads but key has %lld; they must agree",
                         (long long)v->shape[1], (long long)k->shape[1]);
    if (q->shape[1] % k->shape[1] != 0)
        return attn_fail(err, ATTN_ERR_SHAPE, "key",
                         "key has %lld heads, which does not divide query's %lld: each key/value "
                         "head serves an equal group of query heads",
                         (long long)k->shape[1], (long long)q->shape[1]);
    return ATTN_OK;
}

/* t with its dimensions 1 and 2 swapped: (B, L, H, D) as (B, H, L, D). */
static attn_tensor heads_first(const attn_tensor *t)
{
    attn_tensor u = *t;
    u.shape[1] = t->shape[2];
    u.shape[2] = t->shape[1];
    return u;
}

/* BSHD's tensors, each rank 4 (checked), as BHSD's. */
static attn_status bshd_view(const attn_tensor *in[3], attn_tensor out[3], attn_error *err)
{
    static const char *const names[3] = {"query", "key", "value"};
    for (int i = 0; i < 3; i++) {
        if (in[i]->rank != 4)
            return attn_fail(err, ATTN_ERR_PARAM, "qkv_layout",
                             "qkv_layout BSHD takes a 4-D query, key and value, (B, L, H, D) "
                             "as FlashAttention holds them; %s has rank %d", names[i],
                             in[i]->rank);
        out[i] = heads_first(in[i]);
    }
    return ATTN_OK;
}

attn_status attn_check_qkv(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                           int heads_ok, int bshd, attn_dims *d, attn_error *err)
{
    attn_status st;
    int h = heads_ok && !bshd;
    const char *q4 = bshd ? "(B, Lq, H, Dq)" : h ? "(B, H, Lq, Dq)" : NULL;
    const char *k4 = bshd ? "(B, Lk, Hkv, Dk)" : h ? "(B, Hkv, Lk, Dk)" : NULL;
    const char *v4 = bshd ? "(B, Lk, Hkv, Dv)" : h ? "(B, Hkv, Lk, Dv)" : NULL;
    if ((st = check_one(q, "query", "(Lq, Dq)", "(B, Lq, Dq)", q4, err)) != ATTN_OK ||
        (st = check_one(k, "key", "(Lk, Dk)", "(B, Lk, Dk)", k4, err)) != ATTN_OK ||
        (st = check_one(v, "value", "(Lk, Dv)", "(B, Lk, Dv)", v4, err)) != ATTN_OK)
        return st;
    attn_tensor view[3];
    if (bshd) {
        const attn_tensor *in[3] = {q, k, v};
        if ((st = bshd_view(in, view, err)) != ATTN_OK)
            return st;
        q = &view[0], k = &view[1], v = &view[2];
    }
    const attn_tensor *ts[2] = {k, v};
    const char *names[2] = {"key", "value"};
    static const char *const dims[5] = {"", "", "no batch dimension", "a batch dimension",
                                        "batch and head dimensions"};
    for (int i = 0; i < 2; i++) {
        if (ts[i]->rank != q->rank)
            return attn_fail(err, ATTN_ERR_SHAPE, names[i],
                             "%s has %s but query has %s (rank %d against %d); give query, key "
                             "and value the same leading dimensions",
                             names[i], dims[ts[i]->rank], dims[q->rank], ts[i]->rank, q->rank);
        if (q->rank >= 3 && ts[i]->shape[0] != q->shape[0])
            return attn_fail(err, ATTN_ERR_SHAPE, names[i],
                             "%s has batch size %lld but query has %lld", names[i],
                             (long long)ts[i]->shape[0], (long long)q->shape[0]);
    }
    if (q->rank == 4 && (st = check_heads(q, k, v, err)) != ATTN_OK)
        return st;
    int o = q->rank - 2; /* leading dimensions */
    d->batched = o > 0;
    d->heads = o == 2;
    d->B = o ? q->shape[0] : 1;
    d->H = o == 2 ? q->shape[1] : 1;
    d->Hkv = o == 2 ? k->shape[1] : 1;
    d->Lq = q->shape[o];
    d->Dq = q->shape[o + 1];
    d->Lk = k->shape[o];
    d->Dk = k->shape[o + 1];
    d->Lv = v->shape[o];
    d->Dv = v->shape[o + 1];
    return ATTN_OK;
}

/* Whether a rank-3 operand without heads3 holds B x H planes, batch row b's
 * head h at b H + h: nn.MultiheadAttention's 3-D attn_mask, (N num_heads,
 * L, S). H > 1, so that it is not (B, Lq, Lk). */
static int bh_planes(const int64_t *shape, const attn_score_dims *sd)
{
    return !sd->heads3 && sd->H > 1 && shape[0] % sd->H == 0 && shape[0] / sd->H == sd->B;
}

/* A mask-shaped operand (mask or bias) as PyTorch broadcasts it against the
 * scores (B, H, Lq, Lk): its batch and head extents *nb and *nh. Rank 2 is
 * one plane; rank 3 is per head with sd->heads3, else per batch row; rank
 * 4 needs heads (sd->H > 0). Returns 0 when the rank does not fit. */
static int maskish_lead(int rank, const int64_t *shape, const attn_score_dims *sd, int64_t *nb,
                        int64_t *nh)
{
    *nb = *nh = 1;
    if (rank == 3 && bh_planes(shape, sd)) {
        *nb = sd->B;
        *nh = sd->H;
    } else if (rank == 3)
        *(sd->heads3 ? nh : nb) = shape[0];
    else if (rank == 4 && sd->H > 0) {
        *nb = shape[0];
        *nh = shape[1];
    } else if (rank != 2)
        return 0;
    return 1;
}

/* The shapes a mask-shaped operand may have, for a message. */
static void maskish_forms(const attn_score_dims *sd, char *s, size_t n)
{
    long long B = sd->B, H = sd->H, Lq = sd->Lq, Lk = sd->Lk;
    const char *lk = sd->lk;
    if (sd->H <= 0)
        snprintf(s, n, "(Lq, %s) = (%lld, %lld) or (B, Lq, %s) = (%lld, %lld, %lld) (B may be 1: "
                 "one plane for every batch row)", lk, Lq, Lk, lk, B, Lq, Lk);
    else
        snprintf(s, n, "(Lq, %s) = (%lld, %lld), (%s, Lq, %s) = (%lld, %lld, %lld)%s or (B, H, Lq, "
                 "%s) = (%lld, %lld, %lld, %lld) (B and H may each be 1: one plane for every "
                 "batch row or head, as PyTorch broadcasts)", lk, Lq, Lk, sd->heads3 ? "H" : "B",
                 lk, sd->heads3 ? H : B, Lq, Lk, sd->heads3 || H < 2 ? "" : ", (B H, Lq, Lk)", lk,
                 B, H, Lq, Lk);
}

static attn_status check_maskish(const char *name, int rank, const int64_t *shape, int has_data,
                                 const attn_score_dims *sd, attn_error *err)
{
    if (rank == 0)
        return ATTN_OK;
    int64_t nb, nh;
    if (!maskish_lead(rank, shape, sd, &nb, &nh) || (nb != 1 && nb != sd->B) ||
        (nh != 1 && nh != sd->H) || shape[rank - 2] != sd->Lq || shape[rank - 1] != sd->Lk) {
        char got[96], forms[320];
        attn_fmt_shape(got, sizeof got, rank, shape);
        maskish_forms(sd, forms, sizeof forms);
        return attn_fail(err, ATTN_ERR_SHAPE, name, "%s has shape %s but must be %s", name, got,
                         forms);
    }
    int64_t c;
    if (!attn_count(rank, shape, &c))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, name, "%s has too many elements", name);
    if (!has_data)
        return attn_fail(err, ATTN_ERR_ARG, name, "%s has no data", name);
    return ATTN_OK;
}

void attn_maskish_rank4(attn_options *o, const attn_score_dims *sd)
{
    int *ranks[2] = {&o->mask.rank, &o->bias.rank};
    int64_t *shapes[2] = {o->mask.shape, o->bias.shape};
    for (int i = 0; i < 2; i++) {
        int64_t *sh = shapes[i];
        if (*ranks[i] != 3 || !(sd->heads3 || bh_planes(sh, sd)))
            continue;
        memmove(sh + 1, sh, 3 * sizeof *sh);
        sh[0] = sd->heads3 ? 1 : sd->B;
        sh[1] = sd->heads3 ? sh[1] : sd->H;
        *ranks[i] = 4;
    }
}

/* n finite numbers, one per head, or NULL with n = 0 (the default). */
static attn_status check_per_head(const char *field, const char *what, const float *v,
                                  int64_t n, int64_t H, attn_error *err)
{
    if (!v)
        return n == 0 ? ATTN_OK
                      : attn_fail(err, ATTN_ERR_ARG, field, "%s: a count without values", field);
    if (n != H)
        return attn_fail(err, ATTN_ERR_PARAM, field,
                         "%s has %lld values but there %s %lld head%s: give one %s per head",
                         field, (long long)n, H == 1 ? "is" : "are", (long long)H,
                         H == 1 ? "" : "s", what);
    for (int64_t h = 0; h < n; h++)
        if (!isfinite(v[h]))
            return attn_fail(err, ATTN_ERR_PARAM, field, "%s[%lld] is not a finite number",
                             field, (long long)h);
    return ATTN_OK;
}

/* align, window sides, softcap, ALiBi slopes and sinks (H of each). */
static attn_status check_pipeline(const attn_options *o, int64_t H, attn_error *err)
{
    attn_status st;
    if (o->align != ATTN_ALIGN_TOP_LEFT && o->align != ATTN_ALIGN_BOTTOM_RIGHT)
        return attn_fail(err, ATTN_ERR_PARAM, "align",
                         "align must be \"top_left\" or \"bottom_right\"");
    if (o->has_window && (o->window_left < -1 || o->window_right < -1))
        return attn_fail(err, ATTN_ERR_PARAM, "window",
                         "window sides must be >= 0, or -1 for an unbounded side, got [%lld, %lld]",
                         (long long)o->window_left, (long long)o->window_right);
    if (!(o->softcap >= 0.0f) || !isfinite(o->softcap))
        return attn_fail(err, ATTN_ERR_PARAM, "softcap",
                         "softcap must be 0 (off) or a finite number > 0, got %g", (double)o->softcap);
    /* the kernels divide by it once: below FLT_MIN, 1 / c overflows */
    if (o->softcap > 0.0f && o->softcap < FLT_MIN)
        return attn_fail(err, ATTN_ERR_PARAM, "softcap",
                         "softcap must be at least %.9g (the smallest normal float32), got %g",
                         (double)FLT_MIN, (double)o->softcap);
    if (o->alibi &&
        (st = check_per_head("alibi", "slope", o->alibi_slopes, o->n_alibi_slopes, H, err)) !=
            ATTN_OK)
        return st;
    return check_per_head("sinks", "sink logit", o->sinks, o->n_sinks, H, err);
}

attn_status attn_check_options(const attn_options *o, attn_rule as, const char *who,
                               const attn_score_dims *sd, attn_error *err)
{
    int64_t B = sd->B, H = sd->H, Lq = sd->Lq, Lk = sd->Lk;
    attn_status st = attn_check_taken(o, as, who, err);
    if (st != ATTN_OK)
        return st;
    if (o->feature_map != ATTN_FM_ELU && o->feature_map != ATTN_FM_RELU)
        return attn_fail(err, ATTN_ERR_PARAM, "feature_map",
                         "feature_map must be \"elu\" or \"relu\"");
    if ((st = check_maskish("mask", o->mask.rank, o->mask.shape, o->mask.data != NULL, sd,
                            err)) != ATTN_OK ||
        (st = check_maskish("bias", o->bias.rank, o->bias.shape, o->bias.data != NULL, sd,
                            err)) != ATTN_OK)
        return st;
    const attn_mask *km = &o->key_mask;
    if (km->rank != 0) {
        int ok = (km->rank == 1 && km->shape[0] == Lk) ||
                 (km->rank == 2 && km->shape[0] == B && km->shape[1] == Lk);
        if (!ok) {
            char got[96];
            attn_fmt_shape(got, sizeof got, km->rank, km->shape);
            return attn_fail(err, ATTN_ERR_SHAPE, "key_mask",
                             "key_mask has shape %s but must be (Lk) = (%lld) or (B, Lk) = "
                             "(%lld, %lld)",
                             got, (long long)Lk, (long long)B, (long long)Lk);
        }
        if (!km->data)
            return attn_fail(err, ATTN_ERR_ARG, "key_mask", "key_mask has no data");
    }
    if ((st = check_pipeline(o, H > 0 ? H : 1, err)) != ATTN_OK)
        return st;
    if (o->precision != ATTN_PRECISION_FP32 && o->precision != ATTN_PRECISION_BF16)
        return attn_fail(err, ATTN_ERR_PARAM, "precision", "precision must be \"fp32\" or \"bf16\"");
    if (o->precision == ATTN_PRECISION_BF16 &&
        (o->hard != ATTN_HARD_NONE || o->sparsity.pattern != ATTN_SPARSE_NONE))
        return attn_fail(err, ATTN_ERR_PARAM, "precision",
                         "precision \"bf16\" does not apply with %s (only the dense flash kernel "
                         "computes in bfloat16)",
                         o->hard != ATTN_HARD_NONE ? "hard" : "sparsity");
    if ((st = attn_sparsity_check(o, Lq, Lk, err)) != ATTN_OK)
        return st;
    switch (o->hard) {
    case ATTN_HARD_NONE:
    case ATTN_HARD_ARGMAX:
        break;
    case ATTN_HARD_TOPK:
        if (o->top_k < 1 || o->top_k > Lk)
            return attn_fail(err, ATTN_ERR_PARAM, "hard.top_k",
                             "top_k must be between 1 and the number of keys (%lld), got %lld",
                             (long long)Lk, (long long)o->top_k);
        break;
    case ATTN_HARD_SAMPLE:
        if (!(o->temperature > 0.0f) || !isfinite(o->temperature))
            return attn_fail(err, ATTN_ERR_PARAM, "hard.sample.temperature",
                             "the sampling temperature must be a number > 0, got %g",
                             (double)o->temperature);
        break;
    default:
        return attn_fail(err, ATTN_ERR_PARAM, "hard",
                         "hard must be none, argmax, top_k or sample, got %d", (int)o->hard);
    }
    return ATTN_OK;
}

attn_status attn_check_param_shape(const char *name, const attn_tensor *t,
                                   int rank, const int64_t *shape,
                                   const char *symbols, const char *who,
                                   attn_error *err)
{
    char field[64];
    snprintf(field, sizeof field, "params.%s", name);
    int ok = t->rank == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = t->shape[i] == shape[i];
    if (!ok) {
        char got[96], want[96];
        attn_fmt_shape(got, sizeof got, t->rank, t->shape);
        attn_fmt_shape(want, sizeof want, rank, shape);
        return attn_fail(err, ATTN_ERR_SHAPE, field, "params.%s has shape %s but %s needs %s = %s",
                         name, got, who, symbols, want);
    }
    if (!t->data)
        return attn_fail(err, ATTN_ERR_ARG, field, "params.%s has no data", name);
    return ATTN_OK;
}

/* Where (b, h)'s (Lq, Lk) plane starts in a mask-shaped operand: rank 3 is
 * per batch row (attn_maskish_rank4 made one of per-head planes rank 4); a
 * leading dimension of 1 serves every batch row or head. */
static int64_t slice_at(int rank, const int64_t *shape, int64_t b, int64_t h, int64_t plane)
{
    if (rank == 2)
        return 0;
    if (rank == 3)
        return (shape[0] == 1 ? 0 : b) * plane;
    return ((shape[0] == 1 ? 0 : b) * shape[1] + (shape[1] == 1 ? 0 : h)) * plane;
}

void attn_masks_at(const attn_options *o, int64_t b, int64_t h, int64_t H,
                   int64_t Lq, int64_t Lk, attn_row_masks *m)
{
    int64_t plane = Lq * Lk; /* validated by the caller's plan */
    memset(m, 0, sizeof *m);
    if (o->mask.rank) {
        m->mask = o->mask.data + slice_at(o->mask.rank, o->mask.shape, b, h, plane);
        m->mask_stride = Lk;
    }
    if (o->bias.rank) {
        m->bias = o->bias.data + slice_at(o->bias.rank, o->bias.shape, b, h, plane);
        m->bias_stride = Lk;
    }
    if (o->key_mask.rank)
        m->key_mask = o->key_mask.data + (o->key_mask.rank == 2 ? b * Lk : 0);
    m->causal = o->causal != 0;
    m->window_left = m->window_right = -1;
    if (o->has_window) { /* a side wider than every |i' - j| (< Lq + Lk) bounds nothing */
        m->window_left = o->window_left >= Lq + Lk ? -1 : o->window_left;
        m->window_right = o->window_right >= Lq + Lk ? -1 : o->window_right;
    }
    m->off = o->align == ATTN_ALIGN_BOTTOM_RIGHT ? Lk - Lq : 0;
    m->softcap = o->softcap;
    if (o->alibi)
        m->alibi = o->alibi_slopes ? o->alibi_slopes[h] : attn_alibi_slope(H, h);
    m->has_sink = o->sinks != NULL;
    m->sink = o->sinks ? o->sinks[h] : 0.0f;
}

float attn_alibi_slope(int64_t H, int64_t h)
{
    int64_t n = 1;
    while (n * 2 <= H)
        n *= 2;
    /* powers of two: 2^(-8(h+1)/n); past n, the 1st, 3rd, ... slopes of 2n */
    double e = h < n ? -8.0 * (double)(h + 1) / (double)n
                     : -8.0 * (double)(2 * (h - n) + 1) / (double)(2 * n);
    return (float)exp2(e);
}

attn_status attn_check_rope(const attn_rope *r, int64_t hd, attn_error *err)
{
    if (!r->on)
        return ATTN_OK;
    if (!(r->base > 0.0f) || !isfinite(r->base))
        return attn_fail(err, ATTN_ERR_PARAM, "rope.base",
                         "rope base must be a finite number > 0, got %g", (double)r->base);
    if (r->style != ATTN_ROPE_HALF && r->style != ATTN_ROPE_INTERLEAVED)
        return attn_fail(err, ATTN_ERR_PARAM, "rope.style",
                         "rope style must be \"half\" or \"interleaved\"");
    if (r->dims < 0 || r->dims % 2 != 0 || r->dims > hd || (r->dims == 0 && hd % 2 != 0))
        return attn_fail(err, ATTN_ERR_PARAM, "rope.dims",
                         "rope dims must be even and at most the head dim %lld, got %lld%s",
                         (long long)hd, (long long)(r->dims ? r->dims : hd),
                         r->dims ? "" : " (the head dim, the default)");
    if (r->offset < 0 || r->offset > ATTN_ROPE_MAX_OFFSET)
        return attn_fail(err, ATTN_ERR_PARAM, "rope.offset",
                         "rope offset must be from 0 to %lld (2^31 - 1), got %lld",
                         (long long)ATTN_ROPE_MAX_OFFSET, (long long)r->offset);
    return ATTN_OK;
}

attn_status attn_check_kv_heads(int64_t H, int64_t given, int64_t *hkv, attn_error *err)
{
    *hkv = given ? given : H;
    if (*hkv < 1 || *hkv > H || H % *hkv != 0)
        return attn_fail(err, ATTN_ERR_PARAM, "num_kv_heads",
                         "num_kv_heads must divide num_heads = %lld, got %lld", (long long)H,
                         (long long)*hkv);
    return ATTN_OK;
}

attn_status attn_check_sizes(int64_t hidden_size, int64_t output_size, attn_error *err)
{
    if (hidden_size < 0)
        return attn_fail(err, ATTN_ERR_PARAM, "hidden_size",
                         "hidden_size must be 0 (the default) or >= 1, got %lld", (long long)hidden_size);
    if (output_size < 0)
        return attn_fail(err, ATTN_ERR_PARAM, "output_size",
                         "output_size must be 0 (the default) or >= 1, got %lld", (long long)output_size);
    return ATTN_OK;
}

double attn_tensors_floats(const attn_tensor *const *p, size_t n)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!p[i])
            continue;
        double c = 1.0;
        for (int r = 0; r < p[i]->rank; r++)
            c *= (double)p[i]->shape[r];
        total += c;
    }
    return total;
}
