/* models_routes.c - GET /models and POST /models/{name}/translate: the trained models (models/mdl.h) served. */
#include "srv.h"
#include "mdl.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Room for the longest text (4096 bytes, each byte up to six as a \uXXXX
 * escape) and the other fields. */
#define TRANSLATE_MAX_BODY 65536

typedef struct {
    mdl_model *m;
    char *json; /* its GET /models entry */
} served_model;

static mdl_tok *tok;
static served_model served[SRV_MODELS_MAX];
static int n_served;
static json_t *unavailable; /* [{"name", "error"}] of the files that did not load */
static char models_dir[PATH_MAX];

/* The weights directory: ATTN_MODELS_DIR, else training/weights in the
 * working directory, else beside the binary (build/../training/weights). */
static int find_dir(const char *opt, char *out, size_t n)
{
    char exe[PATH_MAX - 64], cand[PATH_MAX];
    if (opt) {
        snprintf(out, n, "%s", opt);
        return srv_is_dir(out) ? 0 : -1;
    }
    srv_exe_dir(exe, sizeof exe);
    const char *fmts[] = {"./training/weights", "%s/../training/weights", "%s/training/weights"};
    for (int i = 0; i < 3; i++) {
        snprintf(cand, sizeof cand, fmts[i], exe);
        if (srv_is_dir(cand) && realpath(cand, out))
            return 0;
    }
    snprintf(out, n, "training/weights");
    return -1;
}

/* A model name as a file stem: [a-z0-9_-], 1 to 31 characters. */
static int good_name(const char *s, size_t n)
{
    if (n < 1 || n > 31)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

/* results.json's test BLEU of a model (greedy, beam4), or JSON null. */
static json_t *bleu_of(json_t *results, const char *name)
{
    json_t *r = json_object_get(json_object_get(results, "test"), name);
    if (!r)
        return json_null();
    /* evaluate.py files the batched greedy decoder's score as "greedyb" */
    json_t *greedy = json_object_get(r, "greedy");
    if (!greedy)
        greedy = json_object_get(r, "greedyb");
    return json_pack("{s:O?,s:O?,s:O?}", "greedy", json_object_get(greedy, "bleu"),
                     "beam4", json_object_get(json_object_get(r, "beam4"), "bleu"), "sentences",
                     json_object_get(json_object_get(results, "test"), "sentences"));
}

/* results.json's copy-token alignment of a model on the test split, or JSON
 * null: the share of copy tokens whose strongest cross-attention points at
 * the source token they copy, with chance, and the mean largest weight of an
 * attention row (how sharp it is); for the Transformer per layer and head,
 * and the head that aligns best (whose figures the top-level ones are). */
static json_t *alignment_of(json_t *results, const char *name)
{
    json_t *a = json_object_get(json_object_get(json_object_get(results, "test"), name), "alignment");
    if (!json_is_object(a))
        return json_null();
    json_t *best = json_object_get(a, "best_head");
    json_t *acc = json_object_get(a, "accuracy"), *peak = json_object_get(a, "mean_peak_weight");
    return json_pack("{s:O?,s:O?,s:O?,s:O?,s:O?,s:O?}", "accuracy", acc ? acc : json_object_get(best, "accuracy"),
                     "mean_peak_weight", peak ? peak : json_object_get(best, "mean_peak_weight"), "chance",
                     json_object_get(a, "chance"), "copy_tokens", json_object_get(a, "copy_tokens"), "best_head",
                     best, "per_layer_head", json_object_get(a, "per_layer_head"));
}

/* Whether NAME.json comes from one train.py run from scratch (no "init" or
 * "continued"), whose train_steps, train_epochs and train_seconds are then the
 * whole training. */
static int one_run(json_t *cfg)
{
    return !json_object_get(cfg, "init") && !json_object_get(cfg, "continued");
}

/* A training figure summed over every run that led to the weights: NAME.json's
 * KEY_total (training/totals.py), else KEY for one run from scratch, else JSON
 * null (KEY is then the last run's alone). */
static json_t *training_total(json_t *cfg, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "%s_total", key);
    json_t *t = json_object_get(cfg, k);
    return t ? t : one_run(cfg) ? json_object_get(cfg, key) : NULL;
}

static char *entry_json(const mdl_model *m, json_t *results)
{
    const mdl_info *in = mdl_model_info(m);
    json_t *cfg = json_loads(in->config_json, 0, NULL);
    json_t *sizes = in->kind == MDL_KIND_TRANSFORMER
        ? json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "vocab", in->vocab, "emb", in->emb, "heads", in->heads,
                    "enc_layers", in->enc_layers, "dec_layers", in->dec_layers, "ffn", in->ffn,
                    "max_src_tokens", in->max_src, "max_tgt_tokens", in->max_tgt)
        : json_pack("{s:i,s:i,s:i,s:i,s:i}", "vocab", in->vocab, "emb", in->emb, "hidden", in->hidden,
                    "max_src_tokens", in->max_src, "max_tgt_tokens", in->max_tgt);
    json_t *runs = json_object_get(cfg, "runs");
    runs = runs ? json_incref(runs) : one_run(cfg) ? json_integer(1) : json_null();
    json_t *o = json_pack(
        "{s:s,s:s,s:s,s:o,s:I,s:o,s:o,s:{s:s,s:s,s:o,s:O?,s:O?,s:O?,s:O?,s:O?}}",
        "name", in->name, "kind", in->kind == MDL_KIND_TRANSFORMER ? "transformer" : "seq2seq", "rule", in->rule,
        "sizes", sizes, "params", (json_int_t)in->params, "bleu", bleu_of(results, in->name),
        "alignment", alignment_of(results, in->name),
        "trained_on", "corpus", "English->French UI strings from Debian 12's French message catalogs "
        "(training/README.md)", "split", "training/data/train.tsv; BLEU on training/data/test.tsv",
        "runs", runs, "train_steps", training_total(cfg, "train_steps"), "train_epochs",
        training_total(cfg, "train_epochs"), "train_seconds", training_total(cfg, "train_seconds"), "best_step",
        json_object_get(cfg, "best_step"), "best_valid_nll", json_object_get(cfg, "best_valid_nll"));
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(o);
    json_decref(cfg);
    return s;
}

/* Logged in full; listed for clients without the server's directory. */
static void note_unavailable(const char *name, const char *err)
{
    size_t n = strlen(models_dir);
    srv_log(SRV_LOG_ERROR, "model %s not served: %s", name, err);
    if (!strncmp(err, models_dir, n) && err[n] == '/')
        err += n + 1;
    json_array_append_new(unavailable, json_pack("{s:s,s:s}", "name", name, "error", err));
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The NAME of every NAME.safetensors in dir, sorted (at most SRV_MODELS_MAX). */
static int list_names(const char *dir, char names[][32])
{
    DIR *d = opendir(dir);
    char *p[SRV_MODELS_MAX];
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l > 12 && !strcmp(e->d_name + l - 12, ".safetensors") && good_name(e->d_name, l - 12) && n < SRV_MODELS_MAX) {
            snprintf(names[n], 32, "%.*s", (int)(l - 12), e->d_name);
            p[n] = names[n];
            n++;
        }
    }
    if (d)
        closedir(d);
    qsort(p, (size_t)n, sizeof *p, name_cmp);
    char tmp[SRV_MODELS_MAX][32];
    for (int i = 0; i < n; i++)
        snprintf(tmp[i], 32, "%s", p[i]);
    memcpy(names, tmp, sizeof(tmp[0]) * (size_t)n);
    return n;
}

int srv_models_start(const char *dir_opt, int strict)
{
    char err[MDL_ERR_LEN], path[PATH_MAX + 32], names[SRV_MODELS_MAX][32];
    unavailable = json_array();
    if (find_dir(dir_opt, models_dir, sizeof models_dir) != 0) {
        srv_log(dir_opt ? SRV_LOG_ERROR : SRV_LOG_WARN, "models: no weights directory %s; GET /models lists none",
                models_dir);
        return dir_opt && strict ? -1 : 0;
    }
    snprintf(path, sizeof path, "%s/bpe.json", models_dir);
    if (!srv_is_file(path))
        snprintf(path, sizeof path, "%s/../bpe.json", models_dir);
    int n = list_names(models_dir, names);
    if (n > 0 && !(tok = mdl_tok_load(path, err, sizeof err))) {
        srv_log(SRV_LOG_ERROR, "models: tokenizer: %s; no model served", err);
        for (int i = 0; i < n; i++) /* listed, so GET /models says why it has none */
            note_unavailable(names[i], "the tokenizer (bpe.json) did not load: see the server's log");
        return strict ? -1 : 0;
    }
    snprintf(path, sizeof path, "%s/../results.json", models_dir);
    json_t *results = json_load_file(path, 0, NULL);
    for (int i = 0; i < n; i++) {
        mdl_model *m = mdl_load(models_dir, names[i], tok, err, sizeof err);
        char *js = m ? entry_json(m, results) : NULL;
        if (!m || !js) {
            note_unavailable(names[i], m ? "out of memory" : err);
            mdl_free(m);
            if (strict) {
                json_decref(results);
                return -1;
            }
            continue;
        }
        served[n_served].m = m;
        served[n_served++].json = js;
        srv_log(SRV_LOG_NOTICE, "models: %s (%s, %lld parameters) from %s", names[i], mdl_model_info(m)->rule,
                (long long)mdl_model_info(m)->params, models_dir);
    }
    json_decref(results);
    return 0;
}

void srv_models_stop(void)
{
    for (int i = 0; i < n_served; i++) {
        mdl_free(served[i].m);
        free(served[i].json);
    }
    n_served = 0;
    mdl_tok_free(tok);
    tok = NULL;
    json_decref(unavailable);
    unavailable = NULL;
}

int srv_models_find(const char *name, size_t len)
{
    for (int i = 0; i < n_served; i++)
        if (strlen(mdl_model_info(served[i].m)->name) == len && !memcmp(mdl_model_info(served[i].m)->name, name, len))
            return i;
    return -1;
}

const char *srv_models_name(int i)
{
    return i >= 0 && i < n_served ? mdl_model_info(served[i].m)->name : NULL;
}

void srv_models_list(srv_buf *b)
{
    srv_buf_puts(b, "{\"models\":[");
    for (int i = 0; i < n_served; i++) {
        srv_buf_puts(b, i ? "," : "");
        srv_buf_puts(b, served[i].json);
    }
    srv_buf_puts(b, "],\"unavailable\":");
    char *u = unavailable ? json_dumps(unavailable, JSON_COMPACT) : NULL;
    srv_buf_puts(b, u ? u : "[]");
    free(u);
    srv_buf_puts(b, "}\n");
}

/* ------------------------------------------------------------ POST /models/{name}/translate */

typedef struct {
    const char *text;
    size_t len;
    int beam, max_len;
} tr_args;

/* An integer field in [lo, hi]: absent keeps *out; not an integer is 400, out of range 422. */
static int int_field(json_t *root, const char *name, int lo, int hi, int *out, srv_err *e)
{
    json_t *v = json_object_get(root, name);
    if (!v)
        return 0;
    int64_t x;
    if (srv_json_int(v, &x) < 0) /* past int64 comes as INT64_MAX: out of range */
        return srv_fail(e, 400, "invalid_field", name, "%s must be an integer", name);
    if (x < lo || x > hi)
        return srv_fail(e, 422, "invalid_param", name, "%s must be %d to %d", name, lo, hi);
    *out = (int)x;
    return 0;
}

static int tr_parse(json_t *root, const mdl_info *in, tr_args *a, srv_err *e)
{
    static const char *const fields[] = {"text", "beam", "max_len", NULL};
    if (!json_is_object(root))
        return srv_fail(e, 400, "invalid_json", "", "the body must be a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        int ok = 0;
        for (int i = 0; fields[i]; i++)
            ok |= !strcmp(key, fields[i]);
        if (!ok)
            return srv_fail(e, 400, "unknown_field", key, "unknown field \"%.60s\"; the fields are: text, beam, max_len",
                            key);
    }
    json_t *t = json_object_get(root, "text");
    if (!t)
        return srv_fail(e, 400, "missing_field", "text", "text is required");
    if (!json_is_string(t))
        return srv_fail(e, 400, "invalid_field", "text", "text must be a string");
    a->text = json_string_value(t);
    a->len = json_string_length(t);
    a->beam = 1;
    a->max_len = 0;
    if (int_field(root, "beam", 1, MDL_MAX_BEAM, &a->beam, e) ||
        int_field(root, "max_len", 1, in->max_tgt, &a->max_len, e))
        return -1;
    if (a->len > MDL_MAX_TEXT_BYTES)
        return srv_fail(e, 422, "invalid_param", "text", "text has %zu bytes; at most %d", a->len, MDL_MAX_TEXT_BYTES);
    return 0;
}

/* Source ids of the text: 422 when it has no token or more than the model takes. */
static int tr_source(const mdl_info *in, const tr_args *a, int32_t *ids, int *n, srv_err *e)
{
    int64_t k = mdl_tok_encode(tok, a->text, a->len, ids, in->max_src - 1);
    if (k < 0)
        return srv_fail(e, 400, "invalid_field", "text", "text is not valid UTF-8");
    if (k == 0)
        return srv_fail(e, 422, "invalid_param", "text", "text is empty (no token)");
    if (k > in->max_src - 1)
        return srv_fail(e, 422, "invalid_param", "text",
                        "text has %lld tokens; model %s takes at most %d (plus <eos>)", (long long)k, in->name,
                        in->max_src - 1);
    ids[k] = MDL_EOS;
    *n = (int)k + 1;
    return 0;
}

static void put_tokens(srv_buf *b, const char *key, const int32_t *ids, int n)
{
    srv_buf_printf(b, ",\"%s\":[", key);
    for (int i = 0; i < n; i++) {
        srv_buf_puts(b, i ? "," : "");
        srv_buf_json_str(b, mdl_tok_str(tok, ids[i]));
    }
    srv_buf_putc(b, ']');
}

static int tr_reply(const mdl_info *in, const mdl_result *r, int beam, srv_buf *out, srv_err *e)
{
    char *text = mdl_tok_decode(tok, r->out, r->n_out);
    if (!text)
        return srv_fail(e, 503, "overloaded", "", "out of memory");
    srv_buf_puts(out, "{\"model\":");
    srv_buf_json_str(out, in->name);
    srv_buf_puts(out, ",\"translation\":");
    srv_buf_json_str(out, text);
    free(text);
    srv_buf_printf(out, ",\"beam\":%d", beam);
    put_tokens(out, "source_tokens", r->src, r->n_src);
    put_tokens(out, "target_tokens", r->out, r->n_out);
    int64_t L = in->dec_layers, H = in->heads, T = r->n_out, S = r->n_src;
    srv_buf_puts(out, ",\"attention\":{\"cross\":");
    if (in->kind == MDL_KIND_TRANSFORMER) {
        int64_t cs[4] = {L, H, T, S}, ds[4] = {L, H, T, T}, es[4] = {in->enc_layers, H, S, S};
        srv_encode_tensor(out, r->cross, 4, cs, 0);
        srv_buf_puts(out, ",\"decoder\":");
        srv_encode_tensor(out, r->dec, 4, ds, 0);
        srv_buf_puts(out, ",\"encoder\":");
        srv_encode_tensor(out, r->enc, 4, es, 0);
    } else {
        int64_t cs[2] = {T, S};
        srv_encode_tensor(out, r->cross, 2, cs, 0);
    }
    srv_buf_puts(out, "}}\n");
    return out->failed ? srv_fail(e, 503, "overloaded", "", "out of memory writing the response") : 0;
}

int srv_models_translate(int idx, const char *body, size_t len, srv_call *call, srv_buf *out, srv_err *e)
{
    double t0 = srv_now_ms();
    if (idx < 0 || idx >= n_served)
        return srv_fail(e, 404, "unknown_model", "", "no such model");
    const mdl_model *m = served[idx].m;
    const mdl_info *in = mdl_model_info(m);
    /* Jansson reads the whole body value by value (some 20-80 bytes of
     * memory a byte of JSON): a translate request is a short text and a
     * few numbers, so only a short body gets that far. */
    if (len > TRANSLATE_MAX_BODY)
        return srv_fail(e, 413, "too_large", "", "a translate request is at most %d bytes of JSON, got %zu",
                        TRANSLATE_MAX_BODY, len);
    /* Not srv_call_parse: its scanner lifts long strings (base64 tensors)
     * out of the tree, and the text is one. */
    if (srv_json_too_deep(body, len, srv_cfg.max_depth))
        return srv_fail(e, 400, "invalid_json", "", "the body nests more than %d deep (ATTN_MAX_DEPTH)",
                        srv_cfg.max_depth);
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return srv_fail(e, 400, "invalid_json", "", "the body is not valid JSON: %s", je.text);
    tr_args a = {.text = NULL}; /* gcc -O3 cannot see that tr_parse fills it when it returns 0 */
    int32_t ids[512 + 1];
    int n = 0, rc = tr_parse(root, in, &a, e);
    if (!rc)
        rc = tr_source(in, &a, ids, &n, e);
    if (!rc) {
        mdl_opts o = {.beam = a.beam, .max_len = a.max_len, .want_attention = 1};
        mdl_result r;
        char err[MDL_ERR_LEN];
        attn_ctx *ctx = srv_ctx_acquire(0);
        double t1 = srv_now_ms();
        rc = mdl_translate(m, ctx, ids, n, &o, &r, err, sizeof err);
        double t2 = srv_now_ms();
        srv_ctx_release(ctx, 0);
        if (rc > 0) { /* a library call's status: stopped (504, 499), else a fault */
            attn_error ae = {.field = ""};
            snprintf(ae.message, sizeof ae.message, "%.300s", err);
            srv_fail_lib(e, (attn_status)rc, &ae);
        } else if (rc)
            srv_fail(e, 503, "overloaded", "", "%s", err);
        else
            rc = tr_reply(in, &r, a.beam, out, e);
        call->t_parse = t1 - t0;
        call->t_compute = t2 - t1;
        call->t_encode = srv_now_ms() - t2;
        mdl_result_free(&r);
    }
    json_decref(root);
    return rc;
}

/* 404 unknown_model for name[0..len), listing the models served. */
int srv_models_unknown(const char *name, size_t len, srv_err *e)
{
    char list[400] = "";
    for (int i = 0; i < n_served; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 mdl_model_info(served[i].m)->name);
    srv_fail(e, 404, "unknown_model", "", "no model named \"%.*s\"; the models are: %s",
             (int)(len > 60 ? 60 : len), name, n_served ? list : "(none loaded)");
    return -1;
}

void srv_serve_models(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)t, (void)body, (void)len;
    srv_models_list(&r->body);
}

void srv_serve_translate(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    srv_err e;
    srv_call call;
    memset(&call, 0, sizeof call);
    int rc = srv_models_translate(t->model, body, len, &call, &r->body, &e);
    srv_reply_timings(r, &call);
    srv_call_free(&call);
    if (rc != 0)
        srv_reply_error(r, &e);
}
