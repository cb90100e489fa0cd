/* search.c - greedy and beam search exactly as training/translate.py, and the attention along the answer's path. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t *ids; /* produced ids */
    int n;
    float score;
    int t_end, slot; /* where its last step's attention rows are */
} hyp;

typedef struct {
    mdl_run r;
    int tf, V, K, rowmax;
    float *logits, *rows, *hist, *scores;
    int *parent;        /* (max_steps + 1, K): slot at t-1 of slot k at t */
    int32_t *live, *live2; /* (K, max_steps + 1) prefixes with <bos> */
    float live_sc[MDL_MAX_BEAM], live_sc2[MDL_MAX_BEAM];
    hyp fin[3 * MDL_MAX_BEAM];
    int n_fin;
    float closest;      /* beam: the least gap between ranked candidates so far */
} search;

int64_t mdl_row_floats(const mdl_run *r, int t)
{
    const mdl_model *m = r->m;
    if (m->info.kind == MDL_KIND_SEQ2SEQ)
        return r->n_src;
    return (int64_t)m->info.dec_layers * m->info.heads * (r->n_src + t + 1);
}

static void search_free(search *s)
{
    mdl_run *r = &s->r;
    free(r->mem);
    free(r->enc_w);
    free(r->h);
    free(r->h2);
    free(r->cache);
    free(r->cache2);
    free(r->kc);
    free(r->vc);
    free(r->kc2);
    free(r->vc2);
    free(r->xk);
    free(r->xv);
    free(r->work);
    free(s->logits);
    free(s->rows);
    free(s->hist);
    free(s->scores);
    free(s->parent);
    free(s->live);
    free(s->live2);
    for (int i = 0; i < s->n_fin; i++)
        free(s->fin[i].ids);
}

static void *zalloc(size_t n, size_t size, int *fail)
{
    void *p = calloc(n ? n : 1, size);
    *fail |= !p;
    return p;
}

/* Sizes are bounded by the config checks (max_src, max_tgt <= 512, E <= 4096 ...). */
static int search_alloc(search *s)
{
    mdl_run *r = &s->r;
    const mdl_info *in = &r->m->info;
    size_t K = (size_t)s->K, E = (size_t)in->emb, H = (size_t)in->hidden, n = (size_t)r->n_src;
    size_t T = (size_t)r->max_steps, V = (size_t)in->vocab, F = (size_t)in->ffn, NH = (size_t)in->heads;
    size_t L = (size_t)in->dec_layers, ms = (size_t)in->max_src, work;
    int fail = 0;
    s->rowmax = (int)mdl_row_floats(r, r->max_steps - 1);
    if (s->tf) {
        size_t enc = n * E + n * (F + E), step = 2 * K * E + NH * K * (n > T ? n : T) + K * (F + E);
        size_t kv = 6 * K * E + NH * K * (n + T) + 2 * K * T * E + K * (F + E);
        work = enc > step ? enc : step;
        work = work > kv ? work : kv;
        r->enc_w = zalloc((size_t)in->enc_layers * NH * n * n, sizeof(float), &fail);
        if (r->recompute) {
            r->cache = zalloc(K * L * T * E, sizeof(float), &fail);
            r->cache2 = zalloc(K * L * T * E, sizeof(float), &fail);
        } else {
            r->kc = zalloc(K * L * T * E, sizeof(float), &fail);
            r->vc = zalloc(K * L * T * E, sizeof(float), &fail);
            r->kc2 = zalloc(K * L * T * E, sizeof(float), &fail);
            r->vc2 = zalloc(K * L * T * E, sizeof(float), &fail);
            r->xk = zalloc(L * n * E, sizeof(float), &fail);
            r->xv = zalloc(L * n * E, sizeof(float), &fail);
        }
    } else {
        work = K * (2 * E + ms + 4 * H + 6 * H) + 6 * H;
        r->h = zalloc(K * H, sizeof(float), &fail);
        r->h2 = zalloc(K * H, sizeof(float), &fail);
    }
    r->mem = zalloc(ms * E, sizeof(float), &fail);
    r->work = zalloc(work, sizeof(float), &fail);
    s->logits = zalloc(K * V, sizeof(float), &fail);
    s->rows = zalloc(K * (size_t)s->rowmax, sizeof(float), &fail);
    s->hist = zalloc(T * K * (size_t)s->rowmax, sizeof(float), &fail);
    s->parent = zalloc((T + 1) * K, sizeof(int), &fail);
    s->live = zalloc(K * (T + 1), sizeof(int32_t), &fail);
    s->live2 = zalloc(K * (T + 1), sizeof(int32_t), &fail);
    return fail ? mdl_fail(r->err, r->errn, "out of memory") : 0;
}

static int step_all(search *s, int N, const int32_t *last, int t)
{
    mdl_run *r = &s->r;
    int rc = !s->tf ? mdl_gru_step_all(r, N, last, t, s->logits, s->rows)
             : r->recompute ? mdl_tfm_step_all(r, N, last, t, s->logits, s->rows)
                            : mdl_kv_step_all(r, N, last, t, s->logits, s->rows);
    if (rc)
        return -1;
    int64_t row = mdl_row_floats(r, t);
    for (int k = 0; k < N; k++)
        memcpy(s->hist + ((size_t)t * s->K + k) * s->rowmax, s->rows + k * row, sizeof(float) * (size_t)row);
    return 0;
}

static int add_finished(search *s, const int32_t *prefix, int n, int32_t tail, float score, int t_end, int slot)
{
    hyp *h = &s->fin[s->n_fin];
    if (!(h->ids = malloc(sizeof(int32_t) * (size_t)(n + 1))))
        return mdl_fail(s->r.err, s->r.errn, "out of memory");
    memcpy(h->ids, prefix, sizeof(int32_t) * (size_t)n);
    h->n = n;
    if (tail >= 0)
        h->ids[h->n++] = tail;
    h->score = score;
    h->t_end = t_end;
    h->slot = slot;
    s->n_fin++;
    return 0;
}

/* Greedy, or teacher forcing along s->force (then logp gets each id's log-probability). */
static int greedy(search *s, const int32_t *force, float *logp)
{
    int32_t last = MDL_BOS, *out = s->live + 1;
    int n = 0;
    float score = 0.0f;
    for (int t = 0; t < s->r.max_steps; t++) {
        if (step_all(s, 1, &last, t))
            return -1;
        int best = 0;
        if (force) {
            best = force[t];
            mdl_log_softmax(s->logits, s->V);
            score += logp[t] = s->logits[best];
        } else {
            for (int v = 1; v < s->V; v++)
                if (s->logits[v] > s->logits[best])
                    best = v;
        }
        out[n++] = last = best;
        if (best == MDL_EOS && !force)
            break;
    }
    return add_finished(s, out, n, -1, score, n - 1, 0);
}

/* The first `want` candidates in (score descending, flat index ascending) order. */
static int top_candidates(const float *sc, int64_t total, int want, int64_t *idx)
{
    int c = 0;
    for (int64_t i = 0; i < total; i++) {
        float v = sc[i];
        if (c == want && !(v > sc[idx[c - 1]]))
            continue;
        int j = c < want ? c++ : c - 1;
        while (j > 0 && v > sc[idx[j - 1]]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    return c;
}

/* One beam step: candidates of the N live hypotheses at step t; returns the new live count (0 = done). */
static int beam_select(search *s, int N, int t, int *done)
{
    int K = s->K, V = s->V, T = s->r.max_steps, keep[MDL_MAX_BEAM], nxt = 0;
    int64_t idx[2 * MDL_MAX_BEAM + 1];
    for (int k = 0; k < N; k++) {
        float *lp = s->logits + (size_t)k * V;
        mdl_log_softmax(lp, V);
        for (int v = 0; v < V; v++)
            s->scores[(size_t)k * V + v] = s->live_sc[k] + lp[v];
    }
    /* The best 2K decide the step; the next one shows how near it came. */
    int c = top_candidates(s->scores, (int64_t)N * V, 2 * K + 1, idx);
    for (int rank = 0; rank + 1 < c; rank++) {
        float gap = s->scores[idx[rank]] - s->scores[idx[rank + 1]];
        s->closest = gap < s->closest ? gap : s->closest;
    }
    c = c < 2 * K ? c : 2 * K;
    for (int rank = 0; rank < c; rank++) {
        int hi = (int)(idx[rank] / V), tok = (int)(idx[rank] % V);
        float sc = s->scores[idx[rank]];
        if (tok == MDL_EOS) {
            if (rank < K && add_finished(s, s->live + (size_t)hi * (T + 1) + 1, t, MDL_EOS, sc, t, hi))
                return -1;
            continue;
        }
        if (nxt < K) {
            memcpy(s->live2 + (size_t)nxt * (T + 1), s->live + (size_t)hi * (T + 1), sizeof(int32_t) * (size_t)(t + 1));
            s->live2[(size_t)nxt * (T + 1) + t + 1] = tok;
            s->live_sc2[nxt] = sc;
            keep[nxt++] = hi;
        }
        if (rank >= K - 1 && nxt >= K)
            break;
    }
    if (s->n_fin >= K || nxt == 0) {
        *done = 1;
        return 0;
    }
    memcpy(s->parent + (size_t)(t + 1) * K, keep, sizeof(int) * (size_t)nxt);
    int32_t *tmp = s->live;
    s->live = s->live2;
    s->live2 = tmp;
    memcpy(s->live_sc, s->live_sc2, sizeof(float) * (size_t)nxt);
    if (s->tf && s->r.recompute)
        mdl_tfm_reorder(&s->r, keep, nxt, t);
    else if (s->tf)
        mdl_kv_reorder(&s->r, keep, nxt, t);
    else
        mdl_gru_reorder(&s->r, keep, nxt);
    return nxt;
}

static int beam(search *s)
{
    int N = 1, T = s->r.max_steps, done = 0;
    int32_t last[MDL_MAX_BEAM];
    s->live[0] = MDL_BOS;
    s->live_sc[0] = 0.0f;
    if (!(s->scores = malloc(sizeof(float) * (size_t)s->K * (size_t)s->V)))
        return mdl_fail(s->r.err, s->r.errn, "out of memory");
    for (int t = 0; t < T && !done; t++) {
        for (int k = 0; k < N; k++)
            last[k] = s->live[(size_t)k * (T + 1) + t];
        if (step_all(s, N, last, t) || (N = beam_select(s, N, t, &done)) < 0)
            return -1;
    }
    if (!done) /* the step limit: the live hypotheses count as finished */
        for (int k = 0; k < N; k++)
            if (add_finished(s, s->live + (size_t)k * (T + 1) + 1, T, -1, s->live_sc[k], T - 1,
                             s->parent[(size_t)T * s->K + k]))
                return -1;
    return 0;
}

/* The finished hypothesis with the best score / length (ties: the first). */
static const hyp *best_hyp(const search *s)
{
    int best = 0;
    for (int i = 1; i < s->n_fin; i++)
        if ((double)s->fin[i].score / s->fin[i].n > (double)s->fin[best].score / s->fin[best].n)
            best = i;
    return &s->fin[best];
}

/* Copies the answer's ids and the attention rows along its path into res. */
static int assemble(search *s, const hyp *h, int want, mdl_result *res)
{
    mdl_run *r = &s->r;
    const mdl_info *in = &r->m->info;
    int n = r->n_src, T = h->n, L = s->tf ? in->dec_layers : 1, H = s->tf ? in->heads : 1;
    int fail = 0;
    res->n_src = n;
    res->n_out = T;
    res->score = h->score;
    res->closest = s->K > 1 ? s->closest : 0.0f;
    res->src = zalloc((size_t)n, sizeof(int32_t), &fail);
    res->out = zalloc((size_t)T, sizeof(int32_t), &fail);
    if (want) {
        res->n_cross = (int64_t)L * H * T * n;
        res->cross = zalloc((size_t)res->n_cross, sizeof(float), &fail);
        if (s->tf) {
            res->n_dec = (int64_t)L * H * T * T;
            res->n_enc = (int64_t)in->enc_layers * H * n * n;
            res->dec = zalloc((size_t)res->n_dec, sizeof(float), &fail);
            res->enc = zalloc((size_t)res->n_enc, sizeof(float), &fail);
        }
    }
    if (fail)
        return mdl_fail(r->err, r->errn, "out of memory");
    memcpy(res->src, r->src, sizeof(int32_t) * (size_t)n);
    memcpy(res->out, h->ids, sizeof(int32_t) * (size_t)T);
    if (!want)
        return 0;
    if (s->tf)
        memcpy(res->enc, r->enc_w, sizeof(float) * (size_t)res->n_enc);
    int slot = h->slot;
    for (int t = h->t_end; t >= 0; t--) {
        const float *row = s->hist + ((size_t)t * s->K + slot) * s->rowmax;
        for (int lh = 0; lh < L * H; lh++) {
            memcpy(res->cross + ((size_t)lh * T + t) * n, row + (size_t)lh * n, sizeof(float) * (size_t)n);
            if (s->tf)
                memcpy(res->dec + ((size_t)lh * T + t) * T, row + (size_t)L * H * n + (size_t)lh * (t + 1),
                       sizeof(float) * (size_t)(t + 1));
        }
        slot = s->parent[(size_t)t * s->K + slot];
    }
    return 0;
}

int mdl_translate(const mdl_model *m, attn_ctx *ctx, const int32_t *src, int n_src,
                  const mdl_opts *o, mdl_result *res, char *err, size_t errn)
{
    memset(res, 0, sizeof *res);
    const mdl_info *in = &m->info;
    if (!src || n_src < 1 || n_src > in->max_src)
        return mdl_fail(err, errn, "the source must have 1 to %d ids", in->max_src);
    for (int i = 0; i < n_src; i++)
        if (src[i] < 0 || src[i] >= in->vocab)
            return mdl_fail(err, errn, "source id %d is out of the vocabulary", (int)src[i]);
    if (o->beam < 1 || o->beam > MDL_MAX_BEAM || o->max_len < 0 || o->max_len > in->max_tgt)
        return mdl_fail(err, errn, "beam must be 1 to %d and max_len 0 to %d", MDL_MAX_BEAM, in->max_tgt);
    if (o->force && (o->n_force < 1 || o->n_force > in->max_tgt))
        return mdl_fail(err, errn, "forced ids must be 1 to %d", in->max_tgt);
    for (int i = 0; o->force && i < o->n_force; i++)
        if (o->force[i] < 0 || o->force[i] >= in->vocab)
            return mdl_fail(err, errn, "forced id %d is out of the vocabulary", (int)o->force[i]);
    search s;
    memset(&s, 0, sizeof s);
    s.closest = INFINITY;
    mdl_run *r = &s.r;
    r->m = m;
    r->ctx = ctx;
    r->src = src;
    r->n_src = n_src;
    r->K = s.K = o->force ? 1 : o->beam;
    r->max_steps = o->max_len ? o->max_len : (2 * n_src + 10 < in->max_tgt ? 2 * n_src + 10 : in->max_tgt);
    if (o->force)
        r->max_steps = o->n_force;
    r->err = err;
    r->errn = errn;
    r->recompute = o->recompute;
    s.tf = in->kind == MDL_KIND_TRANSFORMER;
    s.V = in->vocab;
    int rc = search_alloc(&s);
    if (!rc)
        rc = s.tf ? mdl_tfm_start(r) : mdl_gru_start(r);
    if (!rc && s.tf && !r->recompute)
        mdl_kv_start(r);
    if (!rc && o->force && !(res->logp = calloc((size_t)o->n_force, sizeof(float))))
        rc = mdl_fail(err, errn, "out of memory");
    if (!rc)
        rc = s.K == 1 ? greedy(&s, o->force, res->logp) : beam(&s);
    if (!rc)
        rc = assemble(&s, best_hyp(&s), o->want_attention, res);
    search_free(&s);
    if (rc)
        mdl_result_free(res);
    return rc && r->lib_st != ATTN_OK ? (int)r->lib_st : rc;
}

void mdl_result_free(mdl_result *r)
{
    free(r->src);
    free(r->out);
    free(r->cross);
    free(r->dec);
    free(r->enc);
    free(r->logp);
    memset(r, 0, sizeof *r);
}
