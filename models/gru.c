/* gru.c - the three GRU seq2seq models: encoder, and a decoder step whose attention is one library call. */
#include "internal.h"

#include <string.h>

/* x (E) = embedding[id] * sqrt(E) (float32), the GRU models' input. */
static void gru_embed(const mdl_model *m, int32_t id, float *x)
{
    int E = m->info.emb;
    const float *e = m->emb + (size_t)id * E;
    for (int j = 0; j < E; j++)
        x[j] = e[j] * m->emb_scale;
}

int mdl_gru_start(mdl_run *r)
{
    const mdl_model *m = r->m;
    int H = m->info.hidden, E = m->info.emb;
    float *h = r->h, *scratch = r->work, *x = r->work + 6 * (size_t)H;
    memset(r->mem, 0, sizeof(float) * (size_t)m->info.max_src * H);
    memset(h, 0, sizeof(float) * (size_t)H);
    for (int i = 0; i < r->n_src; i++) {
        gru_embed(m, r->src[i], x);
        mdl_gru_step(&m->enc, x, 1, E, H, h, scratch);
        memcpy(r->mem + (size_t)i * H, h, sizeof(float) * (size_t)H);
    }
    return 0; /* the decoder starts from h_L, already in slot 0 */
}

/* The attention of one step: concat gives x directly; additive and general
 * give the context c, and x = combine([e; c]). w gets (N, Lk) weights. */
static int gru_attend(mdl_run *r, int N, const float *e, float *x, float *w, int64_t *lk)
{
    const mdl_model *m = r->m;
    int H = m->info.hidden, E = m->info.emb;
    attn_request q = attn_request_default(m->info.lib_rule);
    uint8_t mask[MDL_MAX_BEAM * 512];
    q.params = m->att;
    q.n_params = m->n_att;
    if (m->info.lib_rule == ATTN_RULE_CONCAT) {
        *lk = m->info.max_src; /* values padded to Lv rows; the padding masked out */
        for (int k = 0; k < N; k++)
            for (int j = 0; j < m->info.max_src; j++)
                mask[k * m->info.max_src + j] = j < r->n_src;
        q.query = (attn_tensor){2, {N, E}, e};
        q.key = (attn_tensor){2, {N, H}, r->h};
        q.value = (attn_tensor){2, {m->info.max_src, H}, r->mem};
        q.opt.mask = (attn_mask){2, {N, m->info.max_src}, mask};
    } else {
        *lk = r->n_src;
        q.query = (attn_tensor){2, {N, H}, r->h};
        q.key = (attn_tensor){2, {r->n_src, H}, r->mem};
        q.value = q.key;
    }
    float *c = x + (size_t)N * H, *cat = c + (size_t)N * H;
    attn_error ae;
    attn_status st = attn_compute(r->ctx, &q, m->info.lib_rule == ATTN_RULE_CONCAT ? x : c, w, &ae);
    if (st != ATTN_OK)
        return mdl_lib_fail(r, "attention", st, &ae);
    if (m->info.lib_rule != ATTN_RULE_CONCAT) {
        for (int k = 0; k < N; k++) {
            memcpy(cat + (size_t)k * (E + H), e + (size_t)k * E, sizeof(float) * (size_t)E);
            memcpy(cat + (size_t)k * (E + H) + E, c + (size_t)k * H, sizeof(float) * (size_t)H);
        }
        mdl_linear(cat, N, E + H, m->comb_w, m->comb_b, H, x);
    }
    return 0;
}

int mdl_gru_step_all(mdl_run *r, int N, const int32_t *last, int t, float *logits, float *rows)
{
    (void)t;
    const mdl_model *m = r->m;
    int H = m->info.hidden, E = m->info.emb;
    float *e = r->work, *w = e + (size_t)N * E, *x = w + (size_t)N * m->info.max_src;
    float *scratch = x + (size_t)N * (3 * H + E + H);
    for (int k = 0; k < N; k++)
        gru_embed(m, last[k], e + (size_t)k * E);
    int64_t lk;
    if (gru_attend(r, N, e, x, w, &lk))
        return -1;
    for (int k = 0; k < N; k++)
        memcpy(rows + (size_t)k * r->n_src, w + (size_t)k * lk, sizeof(float) * (size_t)r->n_src);
    for (int64_t i = 0; i < (int64_t)N * H; i++)
        x[i] = x[i] > 0 ? x[i] : 0;
    mdl_gru_step(&m->dec, x, N, H, H, r->h, scratch);
    mdl_linear(r->h, N, H, m->emb, m->out_b, m->info.vocab, logits);
    return 0;
}

void mdl_gru_reorder(mdl_run *r, const int *parent, int N)
{
    int H = r->m->info.hidden;
    for (int k = 0; k < N; k++)
        memcpy(r->h2 + (size_t)k * H, r->h + (size_t)parent[k] * H, sizeof(float) * (size_t)H);
    float *t = r->h;
    r->h = r->h2;
    r->h2 = t;
}
