/* tfm_kv.c - the Transformer decoder with a KV cache: projections here, each head's attention one library scaled_dot call. */
#include "internal.h"

#include <string.h>

/* The PyTorch multi-head block, split: in_proj (3E, E) = [Wq; Wk; Wv], in_proj_bias = [bq; bk; bv]. */
#define W_IN(p) ((p)[0].t.data)
#define B_IN(p) ((p)[1].t.data)
#define W_OUT(p) ((p)[2].t.data)
#define B_OUT(p) ((p)[3].t.data)
#define N_W(p) ((p)[4].t.data)
#define N_B(p) ((p)[5].t.data)

static size_t kv_at(const mdl_run *r, int l, int k, int h, int pos)
{
    const mdl_info *in = &r->m->info;
    size_t d = (size_t)(in->emb / in->heads);
    return ((((size_t)l * r->K + k) * in->heads + h) * r->max_steps + pos) * d;
}

/* Projects the encoder memory into each decoder layer's cross-attention keys and values, (H, n, d). */
void mdl_kv_start(mdl_run *r)
{
    const mdl_model *m = r->m;
    int E = m->info.emb, H = m->info.heads, d = E / H, n = r->n_src;
    float *tmp = r->work;
    for (int l = 0; l < m->info.dec_layers; l++) {
        const attn_named *p = m->dl[l].cross;
        for (int kv = 0; kv < 2; kv++) {
            float *dst = (kv ? r->xv : r->xk) + (size_t)l * H * n * d;
            mdl_linear(r->mem, n, E, W_IN(p) + (size_t)(1 + kv) * E * E, B_IN(p) + (size_t)(1 + kv) * E, E, tmp);
            for (int i = 0; i < n; i++)
                for (int h = 0; h < H; h++)
                    memcpy(dst + ((size_t)h * n + i) * d, tmp + (size_t)i * E + (size_t)h * d, sizeof(float) * (size_t)d);
        }
    }
}

/* out (B, Lq, d) = softmax(q k^T / sqrt(d)) v for B = batch rows; w (B, Lq, Lk). */
static int sdpa(mdl_run *r, const float *q, int B, int Lq, const float *k, const float *v, int Lk, int d,
                const uint8_t *key_mask, float *out, float *w, const char *what)
{
    attn_request q_ = attn_request_default(ATTN_RULE_SCALED_DOT);
    q_.query = (attn_tensor){3, {B, Lq, d}, q};
    q_.key = (attn_tensor){3, {B, Lk, d}, k};
    q_.value = (attn_tensor){3, {B, Lk, d}, v};
    if (key_mask)
        q_.opt.key_mask = (attn_mask){1, {Lk}, key_mask};
    attn_error ae;
    attn_status st = attn_compute(r->ctx, &q_, out, w, &ae);
    return st == ATTN_OK ? 0 : mdl_lib_fail(r, what, st, &ae);
}

/* y (N, E) = norm1(y + self_attn(y)) with the new keys and values at position t cached. */
static int kv_self(mdl_run *r, int l, int N, int t, float *y, float *rows, int64_t row, float *s)
{
    const mdl_model *m = r->m;
    const attn_named *p = m->dl[l].self;
    int E = m->info.emb, H = m->info.heads, d = E / H;
    int64_t cross_n = (int64_t)m->info.dec_layers * H * r->n_src;
    float *qkv = s, *q = qkv + (size_t)N * 3 * E, *a = q + (size_t)N * E, *w = a + (size_t)N * E;
    mdl_linear(y, N, E, W_IN(p), B_IN(p), 3 * E, qkv);
    for (int k = 0; k < N; k++) {
        memcpy(q + (size_t)k * E, qkv + (size_t)k * 3 * E, sizeof(float) * (size_t)E);
        for (int h = 0; h < H; h++) {
            memcpy(r->kc + kv_at(r, l, k, h, t), qkv + (size_t)k * 3 * E + E + (size_t)h * d, sizeof(float) * (size_t)d);
            memcpy(r->vc + kv_at(r, l, k, h, t), qkv + (size_t)k * 3 * E + 2 * E + (size_t)h * d, sizeof(float) * (size_t)d);
        }
    }
    /* the N x H cached rows 0..t packed as (N H, t + 1, d): no masked keys */
    float *kp = w + (size_t)N * H * (t + 1), *vp = kp + (size_t)N * H * (t + 1) * d;
    for (int k = 0; k < N; k++)
        for (int h = 0; h < H; h++) {
            size_t o = ((size_t)k * H + h) * (t + 1) * d, bytes = sizeof(float) * (size_t)(t + 1) * d;
            memcpy(kp + o, r->kc + kv_at(r, l, k, h, 0), bytes);
            memcpy(vp + o, r->vc + kv_at(r, l, k, h, 0), bytes);
        }
    if (sdpa(r, q, N * H, 1, kp, vp, t + 1, d, NULL, a, w, "decoder self-attention"))
        return -1;
    for (int k = 0; k < N; k++)
        for (int h = 0; h < H; h++)
            memcpy(rows + k * row + cross_n + ((int64_t)l * H + h) * (t + 1), w + ((size_t)k * H + h) * (t + 1),
                   sizeof(float) * (size_t)(t + 1));
    mdl_linear(a, N, E, W_OUT(p), B_OUT(p), E, q);
    mdl_add_norm(y, q, N, E, N_W(p), N_B(p));
    return 0;
}

/* y (N, E) = norm2(y + cross_attn(y, memory)). */
static int kv_cross(mdl_run *r, int l, int N, float *y, float *rows, int64_t row, float *s)
{
    const mdl_model *m = r->m;
    const attn_named *p = m->dl[l].cross;
    int E = m->info.emb, H = m->info.heads, d = E / H, n = r->n_src;
    float *q = s, *qh = q + (size_t)N * E, *ah = qh + (size_t)N * E, *w = ah + (size_t)N * E;
    mdl_linear(y, N, E, W_IN(p), B_IN(p), E, q);
    for (int k = 0; k < N; k++) /* (N, H, d) -> (H, N, d) */
        for (int h = 0; h < H; h++)
            memcpy(qh + ((size_t)h * N + k) * d, q + (size_t)k * E + (size_t)h * d, sizeof(float) * (size_t)d);
    if (sdpa(r, qh, H, N, r->xk + (size_t)l * H * n * d, r->xv + (size_t)l * H * n * d, n, d, NULL, ah, w,
             "decoder cross-attention"))
        return -1;
    for (int k = 0; k < N; k++)
        for (int h = 0; h < H; h++) {
            memcpy(q + (size_t)k * E + (size_t)h * d, ah + ((size_t)h * N + k) * d, sizeof(float) * (size_t)d);
            memcpy(rows + k * row + ((int64_t)l * H + h) * n, w + ((size_t)h * N + k) * n, sizeof(float) * (size_t)n);
        }
    mdl_linear(q, N, E, W_OUT(p), B_OUT(p), E, qh);
    mdl_add_norm(y, qh, N, E, N_W(p), N_B(p));
    return 0;
}

int mdl_kv_step_all(mdl_run *r, int N, const int32_t *last, int t, float *logits, float *rows)
{
    const mdl_model *m = r->m;
    int E = m->info.emb;
    int64_t row = mdl_row_floats(r, t);
    float *y = r->work, *s = y + (size_t)N * E;
    for (int k = 0; k < N; k++) {
        const float *e = m->emb + (size_t)last[k] * E, *pe = m->pe + (size_t)t * E;
        for (int j = 0; j < E; j++)
            y[(size_t)k * E + j] = e[j] * m->emb_scale + pe[j];
    }
    for (int l = 0; l < m->info.dec_layers; l++) {
        if (kv_self(r, l, N, t, y, rows, row, s) || kv_cross(r, l, N, y, rows, row, s))
            return -1;
        mdl_ffn(m, &m->dl[l], y, N, s);
    }
    mdl_linear(y, N, E, m->emb, NULL, m->info.vocab, logits);
    return 0;
}

void mdl_kv_reorder(mdl_run *r, const int *parent, int N, int t)
{
    const mdl_info *in = &r->m->info;
    size_t bytes = sizeof(float) * (size_t)(in->emb / in->heads) * (size_t)(t + 1);
    for (int l = 0; l < in->dec_layers; l++)
        for (int k = 0; k < N; k++)
            for (int h = 0; h < in->heads; h++) {
                memcpy(r->kc2 + kv_at(r, l, k, h, 0), r->kc + kv_at(r, l, parent[k], h, 0), bytes);
                memcpy(r->vc2 + kv_at(r, l, k, h, 0), r->vc + kv_at(r, l, parent[k], h, 0), bytes);
            }
    float *a = r->kc, *b = r->vc;
    r->kc = r->kc2;
    r->vc = r->vc2;
    r->kc2 = a;
    r->vc2 = b;
}
