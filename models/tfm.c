/* tfm.c - the post-norm Transformer: encoder, and a decoder step that keeps each layer's inputs as its key/value cache. */
#include "internal.h"

#include <string.h>

/* out (Lq, E) = LayerNorm(q + MultiheadAttention(q, kv, kv)); w (H, Lq, Lk). */
static int mha(mdl_run *r, const attn_named *p, const float *q, int Lq, const float *kv, int Lk,
               float *out, float *w, const char *what)
{
    const mdl_model *m = r->m;
    int E = m->info.emb;
    attn_mha_request q_ = attn_mha_request_default();
    q_.query = (attn_tensor){2, {Lq, E}, q};
    if (kv) {
        q_.key = (attn_tensor){2, {Lk, E}, kv};
        q_.value = q_.key;
    }
    q_.num_heads = m->info.heads;
    q_.params = p;
    q_.n_params = MDL_NAMED;
    q_.residual_norm = 1;
    q_.average_weights = 0;
    attn_error ae;
    attn_status st = attn_mha_compute(r->ctx, &q_, out, w, &ae);
    return st == ATTN_OK ? 0 : mdl_lib_fail(r, what, st, &ae);
}

/* x (N, E) = LayerNorm(x + linear2(relu(linear1(x)))); scratch (N, F + E). */
void mdl_ffn(const mdl_model *m, const mdl_layer *y, float *x, int N, float *scratch)
{
    int E = m->info.emb, F = m->info.ffn;
    float *h = scratch, *o = scratch + (size_t)N * F;
    mdl_linear(x, N, E, y->l1w, y->l1b, F, h);
    for (int64_t i = 0; i < (int64_t)N * F; i++)
        h[i] = h[i] > 0 ? h[i] : 0;
    mdl_linear(h, N, F, y->l2w, y->l2b, E, o);
    mdl_add_norm(x, o, N, E, y->nw, y->nb);
}

/* x (N, E) = embedding[ids] * sqrt(E) + PE[pos0 + i] (pos_step 1) or PE[pos0] (pos_step 0). */
static void embed(const mdl_model *m, const int32_t *ids, int N, int pos0, int pos_step, float *x)
{
    int E = m->info.emb;
    for (int i = 0; i < N; i++) {
        const float *e = m->emb + (size_t)ids[i] * E, *pe = m->pe + (size_t)(pos0 + i * pos_step) * E;
        float *xi = x + (size_t)i * E;
        for (int j = 0; j < E; j++)
            xi[j] = e[j] * m->emb_scale + pe[j];
    }
}

int mdl_tfm_start(mdl_run *r)
{
    const mdl_model *m = r->m;
    int E = m->info.emb, H = m->info.heads, n = r->n_src;
    float *x = r->mem, *o = r->work, *scratch = o + (size_t)n * E;
    embed(m, r->src, n, 0, 1, x);
    for (int l = 0; l < m->info.enc_layers; l++) {
        float *w = r->enc_w + (size_t)l * H * n * n;
        if (mha(r, m->el[l].self, x, n, NULL, 0, o, w, "encoder self-attention"))
            return -1;
        memcpy(x, o, sizeof(float) * (size_t)n * E);
        mdl_ffn(m, &m->el[l], x, n, scratch);
    }
    return 0;
}

static float *cache_at(const mdl_run *r, float *base, int k, int l, int pos)
{
    const mdl_model *m = r->m;
    size_t E = (size_t)m->info.emb;
    return base + (((size_t)k * m->info.dec_layers + l) * r->max_steps + pos) * E;
}

int mdl_tfm_step_all(mdl_run *r, int N, const int32_t *last, int t, float *logits, float *rows)
{
    const mdl_model *m = r->m;
    int E = m->info.emb, H = m->info.heads, L = m->info.dec_layers, n = r->n_src;
    int64_t row = mdl_row_floats(r, t), cross_n = (int64_t)L * H * n;
    float *y = r->work, *y2 = y + (size_t)N * E, *w = y2 + (size_t)N * E;
    float *scratch = w + (size_t)H * N * (n > t + 1 ? n : t + 1);
    embed(m, last, N, t, 0, y);
    for (int l = 0; l < L; l++) {
        const mdl_layer *ly = &m->dl[l];
        for (int k = 0; k < N; k++) { /* self-attention over this hypothesis' positions 0..t */
            memcpy(cache_at(r, r->cache, k, l, t), y + (size_t)k * E, sizeof(float) * (size_t)E);
            if (mha(r, ly->self, y + (size_t)k * E, 1, cache_at(r, r->cache, k, l, 0), t + 1,
                    y2 + (size_t)k * E, w, "decoder self-attention"))
                return -1;
            for (int h = 0; h < H; h++)
                memcpy(rows + k * row + cross_n + ((int64_t)l * H + h) * (t + 1), w + (size_t)h * (t + 1),
                       sizeof(float) * (size_t)(t + 1));
        }
        if (mha(r, ly->cross, y2, N, r->mem, n, y, w, "decoder cross-attention"))
            return -1;
        for (int k = 0; k < N; k++)
            for (int h = 0; h < H; h++)
                memcpy(rows + k * row + ((int64_t)l * H + h) * n, w + ((size_t)h * N + k) * n,
                       sizeof(float) * (size_t)n);
        mdl_ffn(m, ly, y, N, scratch);
    }
    mdl_linear(y, N, E, m->emb, NULL, m->info.vocab, logits);
    return 0;
}

void mdl_tfm_reorder(mdl_run *r, const int *parent, int N, int t)
{
    const mdl_model *m = r->m;
    size_t bytes = sizeof(float) * (size_t)m->info.emb * (size_t)(t + 1);
    for (int k = 0; k < N; k++)
        for (int l = 0; l < m->info.dec_layers; l++)
            memcpy(cache_at(r, r->cache2, k, l, 0), cache_at(r, r->cache, parent[k], l, 0), bytes);
    float *tmp = r->cache;
    r->cache = r->cache2;
    r->cache2 = tmp;
}
