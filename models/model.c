/* model.c - loads a model: NAME.json (config) and NAME.safetensors, every tensor checked by name and shape. */
#include "internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mdl_model *m;
    const char *path;
    size_t used; /* tensors claimed so far */
    unsigned char *claimed; /* per tensor of the file */
    char *err;
    size_t errn;
} loader;

/* The tensor `name` with shape (d0) or (d0, d1) (d1 < 0: rank 1). */
static const float *need(loader *l, const char *name, int64_t d0, int64_t d1)
{
    const mdl_tensor *t = mdl_st_find(&l->m->st, name);
    int rank = d1 < 0 ? 1 : 2;
    if (!t) {
        mdl_fail(l->err, l->errn, "%s: tensor \"%s\" is missing", l->path, name);
        return NULL;
    }
    if (t->rank != rank || t->shape[0] != d0 || (rank == 2 && t->shape[1] != d1)) {
        char got[96] = "(";
        for (int i = 0; i < t->rank; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "",
                     (long long)t->shape[i]);
        if (rank == 1)
            mdl_fail(l->err, l->errn, "%s: tensor \"%s\" has shape %s), the config needs (%lld)",
                     l->path, name, got, (long long)d0);
        else
            mdl_fail(l->err, l->errn, "%s: tensor \"%s\" has shape %s), the config needs (%lld, %lld)",
                     l->path, name, got, (long long)d0, (long long)d1);
        return NULL;
    }
    size_t k = (size_t)(t - l->m->st.t);
    l->used += !l->claimed[k];
    l->claimed[k] = 1;
    return t->data;
}

/* A library parameter: the tensor `prefix + lib` under the library's name `lib`. */
static int need_named(loader *l, attn_named *a, const char *prefix, const char *lib, int64_t d0, int64_t d1)
{
    char full[160];
    snprintf(full, sizeof full, "%s%s", prefix, lib);
    const float *p = need(l, full, d0, d1);
    if (!p)
        return -1;
    a->name = lib;
    a->t.rank = d1 < 0 ? 1 : 2;
    a->t.shape[0] = d0;
    a->t.shape[1] = d1 < 0 ? 0 : d1;
    a->t.data = p;
    return 0;
}

static int need_gru(loader *l, mdl_gru_w *g, const char *prefix, const char *sfx, int H)
{
    char n[4][96];
    snprintf(n[0], 96, "%sweight_ih%s", prefix, sfx);
    snprintf(n[1], 96, "%sweight_hh%s", prefix, sfx);
    snprintf(n[2], 96, "%sbias_ih%s", prefix, sfx);
    snprintf(n[3], 96, "%sbias_hh%s", prefix, sfx);
    return (g->w_ih = need(l, n[0], 3 * H, H)) && (g->w_hh = need(l, n[1], 3 * H, H)) &&
                   (g->b_ih = need(l, n[2], 3 * H, -1)) && (g->b_hh = need(l, n[3], 3 * H, -1))
               ? 0 : -1;
}

static int bind_seq2seq(loader *l)
{
    mdl_model *m = l->m;
    int H = m->info.hidden, E = m->info.emb;
    if (need_gru(l, &m->enc, "encoder.", "_l0", H) || need_gru(l, &m->dec, "decoder.gru.", "", H) ||
        !(m->out_b = need(l, "out_bias", m->info.vocab, -1)))
        return -1;
    m->emb_scale = (float)sqrt((double)E); /* the inputs are embedding * sqrt(E) */
    const char *p = "decoder.attention.";
    attn_named *a = m->att;
    int rc;
    switch (m->info.lib_rule) {
    case ATTN_RULE_CONCAT:
        m->n_att = 4;
        return need_named(l, &a[0], p, "att_weight.weight", m->info.max_src, E + H) ||
               need_named(l, &a[1], p, "att_weight.bias", m->info.max_src, -1) ||
               need_named(l, &a[2], p, "out.weight", H, E + H) || need_named(l, &a[3], p, "out.bias", H, -1)
                   ? -1 : 0;
    case ATTN_RULE_ADDITIVE:
        m->n_att = 4;
        rc = need_named(l, &a[0], p, "query_proj.weight", H, H) || need_named(l, &a[1], p, "key_proj.weight", H, H) ||
             need_named(l, &a[2], p, "key_proj.bias", H, -1) || need_named(l, &a[3], p, "v.weight", 1, H);
        break;
    default: /* general */
        m->n_att = 2;
        rc = need_named(l, &a[0], p, "attn.weight", H, H) || need_named(l, &a[1], p, "attn.bias", H, -1);
        break;
    }
    if (rc || !(m->comb_w = need(l, "decoder.combine.weight", H, E + H)) ||
        !(m->comb_b = need(l, "decoder.combine.bias", H, -1)))
        return -1;
    return 0;
}

static int need_mha(loader *l, attn_named *a, const char *prefix, const char *norm, int E)
{
    char nw[128], nb[128];
    snprintf(nw, sizeof nw, "%s.weight", norm);
    snprintf(nb, sizeof nb, "%s.bias", norm);
    if (need_named(l, &a[0], prefix, "in_proj_weight", 3 * E, E) ||
        need_named(l, &a[1], prefix, "in_proj_bias", 3 * E, -1) ||
        need_named(l, &a[2], prefix, "out_proj.weight", E, E) || need_named(l, &a[3], prefix, "out_proj.bias", E, -1) ||
        need_named(l, &a[4], "", nw, E, -1) || need_named(l, &a[5], "", nb, E, -1))
        return -1;
    a[4].name = "norm.weight"; /* the library's names for the residual LayerNorm */
    a[5].name = "norm.bias";
    return 0;
}

static int bind_layer(loader *l, mdl_layer *y, const char *stack, int i, int dec)
{
    int E = l->m->info.emb, F = l->m->info.ffn;
    char p[64], q[64], n1[96], n2[96], n3[64], w[4][80];
    snprintf(p, sizeof p, "%s.layers.%d.self_attn.", stack, i);
    snprintf(q, sizeof q, "%s.layers.%d.cross_attn.", stack, i);
    snprintf(n1, sizeof n1, "%s.layers.%d.norm1", stack, i);
    snprintf(n2, sizeof n2, "%s.layers.%d.norm2", stack, i);
    snprintf(n3, sizeof n3, "%s.layers.%d.norm%d", stack, i, dec ? 3 : 2);
    if (need_mha(l, y->self, p, n1, E) || (dec && need_mha(l, y->cross, q, n2, E)))
        return -1;
    const char *sfx[4] = {"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"};
    for (int k = 0; k < 4; k++)
        snprintf(w[k], sizeof w[k], "%s.layers.%d.%s", stack, i, sfx[k]);
    snprintf(n1, sizeof n1, "%s.weight", n3);
    snprintf(n2, sizeof n2, "%s.bias", n3);
    return (y->l1w = need(l, w[0], F, E)) && (y->l1b = need(l, w[1], F, -1)) &&
                   (y->l2w = need(l, w[2], E, F)) && (y->l2b = need(l, w[3], E, -1)) &&
                   (y->nw = need(l, n1, E, -1)) && (y->nb = need(l, n2, E, -1))
               ? 0 : -1;
}

static int bind_transformer(loader *l)
{
    mdl_model *m = l->m;
    for (int i = 0; i < m->info.enc_layers; i++)
        if (bind_layer(l, &m->el[i], "encoder", i, 0))
            return -1;
    for (int i = 0; i < m->info.dec_layers; i++)
        if (bind_layer(l, &m->dl[i], "decoder", i, 1))
            return -1;
    int P = m->info.max_pos, E = m->info.emb;
    if (!(m->pe = malloc(sizeof(float) * (size_t)P * (size_t)E)))
        return mdl_fail(l->err, l->errn, "%s: out of memory", l->path);
    for (int p = 0; p < P; p++)
        for (int i = 0; i < E; i += 2) {
            double ang = p / pow(10000.0, (double)i / E);
            m->pe[(size_t)p * E + i] = (float)sin(ang);
            if (i + 1 < E)
                m->pe[(size_t)p * E + i + 1] = (float)cos(ang);
        }
    m->emb_scale = (float)sqrt((double)E);
    return 0;
}

/* An integer member in [lo, hi]; returns -1 with err filled otherwise. */
static int cfg_int(json_t *c, const char *key, int lo, int hi, int *out, const char *path, char *err, size_t errn)
{
    json_t *v = json_object_get(c, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return mdl_fail(err, errn, "%s: \"%s\" must be an integer in [%d, %d]", path, key, lo, hi);
    *out = (int)json_integer_value(v);
    return 0;
}

static int read_config(mdl_model *m, json_t *c, const char *path, const mdl_tok *tok, char *err, size_t errn)
{
    mdl_info *in = &m->info;
    const char *arch = json_string_value(json_object_get(c, "arch"));
    int tf = arch && strcmp(arch, "transformer") == 0, b = 0;
    if (!arch || (!tf && strcmp(arch, "gru") != 0))
        return mdl_fail(err, errn, "%s: \"arch\" must be \"gru\" or \"transformer\"", path);
    in->kind = tf ? MDL_KIND_TRANSFORMER : MDL_KIND_SEQ2SEQ;
    if (cfg_int(c, "vocab_size", 5, 1 << 20, &in->vocab, path, err, errn) ||
        cfg_int(c, "emb", 2, 4096, &in->emb, path, err, errn) ||
        cfg_int(c, "max_src_tokens", 2, 512, &in->max_src, path, err, errn) ||
        cfg_int(c, "max_tgt_tokens", 1, 512, &in->max_tgt, path, err, errn) ||
        cfg_int(c, "bos_id", MDL_BOS, MDL_BOS, &b, path, err, errn) ||
        cfg_int(c, "eos_id", MDL_EOS, MDL_EOS, &b, path, err, errn))
        return -1;
    if (in->vocab != mdl_tok_vocab_size(tok))
        return mdl_fail(err, errn, "%s: vocab_size %d but the tokenizer has %d tokens", path, in->vocab,
                        mdl_tok_vocab_size(tok));
    if (tf) {
        snprintf(in->rule, sizeof in->rule, "multihead");
        in->hidden = in->emb;
        if (cfg_int(c, "heads", 1, 64, &in->heads, path, err, errn) ||
            cfg_int(c, "enc_layers", 1, MDL_MAX_LAYERS, &in->enc_layers, path, err, errn) ||
            cfg_int(c, "dec_layers", 1, MDL_MAX_LAYERS, &in->dec_layers, path, err, errn) ||
            cfg_int(c, "ffn", 1, 16384, &in->ffn, path, err, errn) ||
            cfg_int(c, "max_len", in->max_src > in->max_tgt ? in->max_src : in->max_tgt, 4096,
                    &in->max_pos, path, err, errn))
            return -1;
        if (in->emb % in->heads)
            return mdl_fail(err, errn, "%s: emb %d is not divisible by heads %d", path, in->emb, in->heads);
        return 0;
    }
    const char *rule = json_string_value(json_object_get(c, "rule"));
    if (!rule || !attn_rule_from_name(rule, &in->lib_rule) ||
        (in->lib_rule != ATTN_RULE_CONCAT && in->lib_rule != ATTN_RULE_ADDITIVE && in->lib_rule != ATTN_RULE_GENERAL))
        return mdl_fail(err, errn, "%s: \"rule\" must be concat, additive or general", path);
    snprintf(in->rule, sizeof in->rule, "%s", rule);
    in->heads = in->enc_layers = in->dec_layers = 1;
    if (cfg_int(c, "hidden", in->emb, in->emb, &in->hidden, path, err, errn) ||
        cfg_int(c, "max_src_len", in->max_src, in->max_src, &b, path, err, errn))
        return -1;
    return 0;
}

static int load_config(mdl_model *m, const char *dir, const char *name, const mdl_tok *tok, char *err, size_t errn)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    json_error_t je;
    json_t *c = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!c)
        return mdl_fail(err, errn, "%s: %s (line %d)", path, je.text, je.line);
    int rc = json_is_object(c) ? read_config(m, c, path, tok, err, errn)
                               : mdl_fail(err, errn, "%s: not a JSON object", path);
    if (rc == 0 && !(m->info.config_json = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS)))
        rc = mdl_fail(err, errn, "%s: out of memory", path);
    json_decref(c);
    return rc;
}

mdl_model *mdl_load(const char *dir, const char *name, const mdl_tok *tok, char *err, size_t errn)
{
    mdl_model *m = calloc(1, sizeof *m);
    if (!m) {
        mdl_fail(err, errn, "out of memory");
        return NULL;
    }
    snprintf(m->info.name, sizeof m->info.name, "%s", name);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
    loader l = {m, path, 0, NULL, err, errn};
    int rc = load_config(m, dir, name, tok, err, errn);
    if (!rc)
        rc = mdl_st_load(path, &m->st, err, errn);
    if (!rc && m->st.model_meta && strcmp(m->st.model_meta, name) != 0)
        rc = mdl_fail(err, errn, "%s: the file's __metadata__ says model \"%.40s\", expected \"%s\"",
                      path, m->st.model_meta, name);
    if (!rc && !(l.claimed = calloc(m->st.n + 1, 1)))
        rc = mdl_fail(err, errn, "out of memory");
    if (!rc && (m->emb = need(&l, "embedding.weight", m->info.vocab, m->info.emb)) == NULL)
        rc = -1;
    if (!rc)
        rc = m->info.kind == MDL_KIND_TRANSFORMER ? bind_transformer(&l) : bind_seq2seq(&l);
    if (!rc && l.used != m->st.n) {
        for (size_t i = 0; i < m->st.n && !rc; i++)
            if (!l.claimed[i])
                rc = mdl_fail(err, errn, "%s: tensor \"%s\" is not part of a %s model of this config",
                              path, m->st.t[i].name, m->info.rule);
        if (!rc)
            rc = mdl_fail(err, errn, "%s: a tensor is used twice", path);
    }
    free(l.claimed);
    if (rc) {
        mdl_free(m);
        return NULL;
    }
    for (size_t i = 0; i < m->st.n; i++)
        m->info.params += m->st.t[i].count;
    return m;
}

void mdl_free(mdl_model *m)
{
    if (!m)
        return;
    mdl_st_free(&m->st);
    free(m->pe);
    free(m->info.config_json);
    free(m);
}

const mdl_info *mdl_model_info(const mdl_model *m) { return &m->info; }
