/* request.c - POST /attention/{rule} and POST /multihead: JSON fields to
 * attn_request / attn_mha_request, the computation, and the 200 body. */
#include "srv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const attention_fields[] = {
    "query", "key", "value", "params", "seed", "hidden_size", "output_size",
    "return_params", "scale", "mask", "key_mask", "causal", "window", "bias",
    "hard", "need_weights", "output_format", NULL};

static const char *const multihead_fields[] = {
    "query", "key", "value", "num_heads", "num_kv_heads", "params", "mask",
    "key_mask", "causal", "window", "bias", "need_weights", "average_weights",
    "positional_encoding", "residual_norm", "seed", "return_params",
    "output_format", NULL};

void srv_call_free(srv_call *call)
{
    json_decref(call->root);
    call->root = NULL;
    srv_seeded_release(call->seeded);
    call->seeded = NULL;
    srv_arena_free(&call->arena);
}

/* Body -> envelope (big arrays lifted out) -> Jansson, duplicates refused. */
static int parse_root(const char *body, size_t len, srv_call *call,
                      const char *const *allowed, srv_err *e)
{
    if (srv_scan(body, len, &call->arena, &call->scan))
        return srv_fail(e, 503, "overloaded", "", "out of memory reading the request");
    /* Before Jansson, which recurses once per level (up to 2048); the
     * scanner counted the depth in the same pass (srv_json_too_deep's). */
    if (call->scan.depth > srv_cfg.max_depth)
        return srv_fail(e, 400, "invalid_json", "",
                        "the body nests arrays or objects more than %d deep (ATTN_MAX_DEPTH)",
                        srv_cfg.max_depth);
    json_error_t jerr;
    call->root = json_loadb(call->scan.envelope, call->scan.envelope_len,
                            JSON_REJECT_DUPLICATES, &jerr);
    if (!call->root)
        return srv_fail(e, 400, "invalid_json", "", "the body is not valid JSON: %s", jerr.text);
    if (!json_is_object(call->root))
        return srv_fail(e, 400, "invalid_json", "", "the body must be a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach(call->root, key, v) {
        int ok = 0;
        for (int i = 0; allowed[i]; i++)
            ok |= strcmp(key, allowed[i]) == 0;
        if (!ok) {
            char list[400];
            size_t n = 0;
            list[0] = '\0';
            for (int i = 0; allowed[i] && n < sizeof list; i++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", allowed[i]);
            return srv_fail(e, 400, "unknown_field", key,
                            "unknown field \"%s\"; the fields are: %s", key, list);
        }
    }
    return 0;
}

static int get_bool(json_t *root, const char *name, int *out, srv_err *e)
{
    json_t *v = json_object_get(root, name);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return srv_fail(e, 400, "invalid_field", name, "%s must be true or false", name);
    *out = json_is_true(v);
    return 0;
}

/* An integer field; *present tells whether it was given. */
static int get_int(json_t *root, const char *name, int64_t *out, int *present, srv_err *e)
{
    json_t *v = json_object_get(root, name);
    *present = v != NULL;
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return srv_fail(e, 400, "invalid_field", name, "%s must be an integer", name);
    *out = json_integer_value(v);
    return 0;
}

static int get_tensor(srv_codec *c, json_t *root, const char *name, int required,
                      attn_tensor *t, srv_err *e)
{
    json_t *v = json_object_get(root, name);
    memset(t, 0, sizeof *t);
    if (!v) {
        if (required)
            return srv_fail(e, 400, "missing_field", name, "%s is required", name);
        return 0;
    }
    return srv_decode_tensor(c, v, name, t, e);
}

/* The masking options every route shares that are tensors. */
static int get_options(srv_codec *c, json_t *root, attn_options *opt, srv_err *e)
{
    json_t *v;
    if ((v = json_object_get(root, "mask")) && srv_decode_mask(c, v, "mask", &opt->mask, e))
        return -1;
    if ((v = json_object_get(root, "key_mask")) && srv_decode_mask(c, v, "key_mask", &opt->key_mask, e))
        return -1;
    if (get_tensor(c, root, "bias", 0, &opt->bias, e))
        return -1;
    return srv_get_scalar_options(root, opt, e);
}

int srv_get_scalar_options(json_t *obj, attn_options *opt, srv_err *e)
{
    json_t *v;
    if (get_bool(obj, "causal", &opt->causal, e))
        return -1;
    int present;
    if (get_int(obj, "window", &opt->window, &present, e))
        return -1;
    opt->has_window = present;
    int nw = opt->need_weights;
    if (get_bool(obj, "need_weights", &nw, e))
        return -1;
    opt->need_weights = nw;
    if ((v = json_object_get(obj, "hard"))) {
        json_t *k;
        if (json_is_string(v) && strcmp(json_string_value(v), "argmax") == 0) {
            opt->hard = ATTN_HARD_ARGMAX;
        } else if (json_is_object(v) && json_object_size(v) == 1 &&
                   json_is_integer(k = json_object_get(v, "top_k"))) {
            opt->hard = ATTN_HARD_TOPK;
            opt->top_k = json_integer_value(k);
        } else {
            return srv_fail(e, 400, "invalid_field", "hard",
                            "hard must be \"argmax\" or {\"top_k\": k} with an integer k");
        }
    }
    return 0;
}

static int get_params(srv_codec *c, json_t *root, attn_named **items, size_t *n, srv_err *e)
{
    json_t *p = json_object_get(root, "params");
    *items = NULL;
    *n = 0;
    if (!p)
        return 0;
    if (!json_is_object(p))
        return srv_fail(e, 400, "invalid_field", "params",
                        "params must be an object of tensors named as in the PyTorch state_dict");
    size_t cnt = json_object_size(p);
    if (cnt == 0)
        return 0;
    attn_named *it = srv_arena_alloc(c->arena, cnt * sizeof *it);
    if (!it)
        return srv_fail(e, 503, "overloaded", "params", "out of memory");
    const char *key;
    json_t *v;
    size_t i = 0;
    json_object_foreach(p, key, v) {
        char field[96];
        snprintf(field, sizeof field, "params.%s", key);
        it[i].name = key; /* owned by root, which outlives the computation */
        if (srv_decode_tensor(c, v, field, &it[i].t, e))
            return -1;
        i++;
    }
    *items = it;
    *n = cnt;
    return 0;
}

int srv_get_seed(json_t *obj, uint64_t *seed, srv_err *e)
{
    json_t *v = json_object_get(obj, "seed");
    if (v && srv_json_u64(v, seed) != 0)
        return srv_fail(e, 400, "invalid_field", "seed",
                        "seed must be an integer from 0 to 18446744073709551615");
    return 0;
}

static int get_common(json_t *root, uint64_t *seed, int *ret_params, int *b64, srv_err *e)
{
    json_t *v;
    if (srv_get_seed(root, seed, e) || get_bool(root, "return_params", ret_params, e))
        return -1;
    if ((v = json_object_get(root, "output_format"))) {
        const char *s = json_is_string(v) ? json_string_value(v) : "";
        if (strcmp(s, "json") && strcmp(s, "b64"))
            return srv_fail(e, 400, "invalid_field", "output_format",
                            "output_format must be \"json\" or \"b64\"");
        *b64 = strcmp(s, "b64") == 0;
    }
    return 0;
}

/* Caps the result sizes so one request cannot exhaust memory. */
static int check_result(const attn_shapes *sh, srv_err *e)
{
    if (sh->out_count > srv_cfg.max_elements)
        return srv_fail(e, 413, "too_large", "",
                        "the output would have %lld elements; this server builds at most %lld "
                        "(ATTN_MAX_ELEMENTS): send smaller inputs or split the batch",
                        (long long)sh->out_count, (long long)srv_cfg.max_elements);
    if (sh->w_count > srv_cfg.max_weights)
        return srv_fail(e, 413, "too_large", "need_weights",
                        "the weights would have %lld elements; this server returns at most %lld "
                        "(set need_weights to false)",
                        (long long)sh->w_count, (long long)srv_cfg.max_weights);
    return 0;
}

/* One allocation for the whole reply instead of a doubling series: at most
 * 16 bytes a float as text (4/3 * 4 as base64). */
static void reserve_reply(srv_buf *out, const attn_shapes *sh, int b64)
{
    double n = (double)sh->out_count + (double)sh->w_count;
    double bytes = n * (b64 ? 6.0 : 16.0) + 512.0;
    if (bytes < 1e12)
        srv_buf_reserve(out, (size_t)bytes);
}

static void encode_params(srv_buf *out, const attn_named *items, size_t n, int b64)
{
    srv_buf_puts(out, ",\"params\":{");
    for (size_t i = 0; i < n; i++) {
        if (i)
            srv_buf_putc(out, ',');
        srv_buf_json_str(out, items[i].name);
        srv_buf_putc(out, ':');
        srv_encode_tensor(out, items[i].t.data, items[i].t.rank, items[i].t.shape, b64);
    }
    srv_buf_putc(out, '}');
}

/* Runs the computation with a pooled context, counting it as in flight. */
typedef attn_status (*compute_fn)(attn_ctx *, const void *, float *, float *, attn_error *);

static attn_status run_attention(attn_ctx *c, const void *r, float *o, float *w, attn_error *ae)
{
    return attn_compute(c, r, o, w, ae);
}

static attn_status run_multihead(attn_ctx *c, const void *r, float *o, float *w, attn_error *ae)
{
    return attn_mha_compute(c, r, o, w, ae);
}

/* Refuses a request whose estimated work is over ATTN_MAX_WORK before any
 * of it is done: a 2 KB body of base64 shapes can ask for hours. */
static int check_work(double flops, srv_err *e)
{
    if (flops <= srv_cfg.max_work)
        return 0;
    return srv_fail(e, 413, "too_large", "",
                    "the request would take about %.3g floating-point operations; this server "
                    "computes at most %.3g per request (ATTN_MAX_WORK): send shorter sequences, "
                    "fewer heads or a smaller batch, or split the request",
                    flops, srv_cfg.max_work);
}

static int compute(srv_call *call, compute_fn fn, const void *req, const attn_shapes *sh,
                   double flops, float **out, float **w, srv_err *e)
{
    if (check_work(flops, e))
        return -1;
    size_t ob = (size_t)sh->out_count * sizeof(float), wb = (size_t)sh->w_count * sizeof(float);
    *out = srv_arena_alloc(&call->arena, ob);
    *w = sh->w_count ? srv_arena_alloc(&call->arena, wb) : NULL;
    if (!*out || (sh->w_count && !*w))
        return srv_fail(e, 413, "too_large", "", "not enough memory for the result");
    double t0 = srv_now_ms();
    attn_ctx *ctx = srv_ctx_acquire(flops);
    attn_error ae = {{0}, {0}};
    attn_status st = fn(ctx, req, *out, *w, &ae);
    srv_ctx_release(ctx);
    call->t_compute = srv_now_ms() - t0;
    return st == ATTN_OK ? 0 : srv_fail_lib(e, st, &ae);
}

int srv_get_attention_options(json_t *obj, attn_request *req, srv_err *e)
{
    int present;
    json_t *v;
    if (get_int(obj, "hidden_size", &req->hidden_size, &present, e))
        return -1;
    if (present && req->hidden_size < 1)
        return srv_fail(e, 422, "invalid_param", "hidden_size", "hidden_size must be at least 1");
    if (get_int(obj, "output_size", &req->output_size, &present, e))
        return -1;
    if (present && req->output_size < 1)
        return srv_fail(e, 422, "invalid_param", "output_size", "output_size must be at least 1");
    if ((v = json_object_get(obj, "scale"))) {
        if (!json_is_number(v))
            return srv_fail(e, 400, "invalid_field", "scale", "scale must be a number");
        req->has_scale = 1;
        req->scale = (float)json_number_value(v);
    }
    return 0;
}

int srv_get_multihead_options(json_t *obj, attn_mha_request *req, srv_err *e)
{
    int present;
    json_t *v;
    if (get_int(obj, "num_heads", &req->num_heads, &present, e))
        return -1;
    if (!present)
        return srv_fail(e, 400, "missing_field", "num_heads",
                        "num_heads is required (an integer that divides the embedding size)");
    if (get_int(obj, "num_kv_heads", &req->num_kv_heads, &present, e))
        return -1;
    if (present && req->num_kv_heads < 1)
        return srv_fail(e, 422, "invalid_param", "num_kv_heads",
                        "num_kv_heads must be at least 1 and divide num_heads");
    int avg = 0, rn = 0;
    if (get_bool(obj, "average_weights", &avg, e) || get_bool(obj, "residual_norm", &rn, e))
        return -1;
    req->average_weights = avg;
    req->residual_norm = rn;
    if ((v = json_object_get(obj, "positional_encoding")) && !json_is_null(v)) {
        const char *s = json_is_string(v) ? json_string_value(v) : "";
        if (strcmp(s, "sinusoidal") == 0)
            req->positional_encoding = ATTN_PE_SINUSOIDAL;
        else if (strcmp(s, "none") != 0)
            return srv_fail(e, 400, "invalid_field", "positional_encoding",
                            "positional_encoding must be \"sinusoidal\" (or \"none\")");
    }
    return 0;
}

static double last_dim(const attn_tensor *t)
{
    return t->rank ? (double)t->shape[t->rank - 1] : 0.0;
}

/* Seeded parameters are allocated and filled before any shape is planned:
 * without this cap, "hidden_size": 1e8 in a 100-byte body asks for
 * gigabytes (found by tests/fuzz/fuzz_request). The bound is generous (an
 * upper estimate of every rule's parameter count), in doubles so nothing
 * overflows. */
static int check_seed_size(double floats, const char *field, srv_err *e)
{
    if (floats <= (double)srv_cfg.max_elements)
        return 0;
    return srv_fail(e, 413, "too_large", field,
                    "seeding the parameters would take about %.0f floats; this server builds at most "
                    "%lld (use a smaller %s, smaller inputs, or send params)",
                    floats, (long long)srv_cfg.max_elements, field);
}

int srv_run_attention(srv_call *call, attn_request *req, uint64_t seed, double t0,
                      attn_shapes *sh, float **o, float **w, srv_err *e)
{
    attn_error ae = {{0}, {0}};
    attn_status st;
    if (req->n_params == 0) {
        double dq = last_dim(&req->query), dk = last_dim(&req->key), dv = last_dim(&req->value);
        double lv = req->value.rank >= 2 ? (double)req->value.shape[req->value.rank - 2] : 0.0;
        double dh = req->hidden_size > 0 ? (double)req->hidden_size : dq;
        double dout = req->output_size > 0 ? (double)req->output_size : dq;
        double rows = dh > dq ? dh : dq;
        if (check_seed_size(rows * (dq + dk + 2.0), "hidden_size", e) ||
            check_seed_size((lv + 1.0) * (dq + dk + 1.0) + dout * (dq + dv + 1.0), "output_size", e))
            return -1;
        if ((st = srv_seed_attention(req, seed, &call->seeded, &ae)) != ATTN_OK)
            return srv_fail_lib(e, st, &ae);
        req->params = srv_seeded_set(call->seeded)->items;
        req->n_params = srv_seeded_set(call->seeded)->n;
    }
    if ((st = attn_plan(req, sh, &ae)) != ATTN_OK)
        return srv_fail_lib(e, st, &ae);
    if (check_result(sh, e))
        return -1;
    call->t_parse = srv_now_ms() - t0;

    int64_t batch = req->query.rank == 3 ? req->query.shape[0] : 1;
    int r = req->query.rank;
    double pairs = (double)batch * (double)req->query.shape[r - 2] *
                   (double)req->key.shape[req->key.rank - 2];
    double flops = 2.0 * pairs * (double)(req->query.shape[r - 1] + req->value.shape[req->value.rank - 1]);
    if (req->rule == ATTN_RULE_ADDITIVE || req->rule == ATTN_RULE_CONCAT_TANH)
        /* a tanh and a multiply-add per (query, key, hidden unit) */
        flops += 3.0 * pairs * (req->hidden_size > 0 ? (double)req->hidden_size : last_dim(&req->query));
    return compute(call, run_attention, req, sh, flops, o, w, e);
}

int srv_run_multihead(srv_call *call, attn_mha_request *req, uint64_t seed, double t0,
                      attn_shapes *sh, float **o, float **w, srv_err *e)
{
    attn_error ae = {{0}, {0}};
    attn_status st;
    if (req->n_params == 0) {
        /* in, out and norm projections: about E x (2E + kdim + vdim) */
        double em = last_dim(&req->query);
        double kd = req->key.rank ? last_dim(&req->key) : em;
        double vd = req->value.rank ? last_dim(&req->value) : em;
        if (check_seed_size(em * (2.0 * em + kd + vd + 8.0), "query", e))
            return -1;
        if ((st = srv_seed_multihead(req, seed, &call->seeded, &ae)) != ATTN_OK)
            return srv_fail_lib(e, st, &ae);
        req->params = srv_seeded_set(call->seeded)->items;
        req->n_params = srv_seeded_set(call->seeded)->n;
    }
    if ((st = attn_mha_plan(req, sh, &ae)) != ATTN_OK)
        return srv_fail_lib(e, st, &ae);
    if (check_result(sh, e))
        return -1;
    call->t_parse = srv_now_ms() - t0;

    const attn_tensor *k = req->key.rank ? &req->key : &req->query;
    int r = req->query.rank;
    int64_t batch = r == 3 ? req->query.shape[0] : 1;
    double lq = (double)req->query.shape[r - 2], lk = (double)k->shape[k->rank - 2];
    double emb = (double)req->query.shape[r - 1];
    double flops = 2.0 * (double)batch * (4.0 * lq * lk * emb / 2.0 + 4.0 * (lq + lk) * emb * emb);
    return compute(call, run_multihead, req, sh, flops, o, w, e);
}

/* The 200 body both native routes share after their first field. */
static int encode_reply(srv_buf *out, const attn_shapes *sh, const float *o,
                        const float *w, int need_weights, const attn_named *params,
                        size_t n_params, int ret_params, int b64, srv_err *e)
{
    srv_buf_puts(out, "\"output\":");
    srv_encode_tensor(out, o, sh->out_rank, sh->out_shape, b64);
    if (need_weights) {
        srv_buf_puts(out, ",\"weights\":");
        srv_encode_tensor(out, w, sh->w_rank, sh->w_shape, b64);
    }
    if (ret_params)
        encode_params(out, params, n_params, b64);
    srv_buf_puts(out, "}\n");
    if (out->failed)
        return srv_fail(e, 413, "too_large", "", "not enough memory to write the response");
    return 0;
}

int srv_handle_attention(attn_rule rule, const char *body, size_t len,
                         srv_call *call, srv_buf *out, srv_err *e)
{
    double t0 = srv_now_ms();
    if (parse_root(body, len, call, attention_fields, e))
        return -1;
    json_t *root = call->root;
    srv_codec c = {&call->arena, &call->scan, srv_cfg.max_elements};
    attn_request req = attn_request_default(rule);
    uint64_t seed = 0;
    int ret_params = 0, b64 = 0;
    if (get_tensor(&c, root, "query", 1, &req.query, e) ||
        get_tensor(&c, root, "key", 1, &req.key, e) ||
        get_tensor(&c, root, "value", 1, &req.value, e) ||
        get_options(&c, root, &req.opt, e) ||
        get_common(root, &seed, &ret_params, &b64, e))
        return -1;
    attn_named *items;
    if (get_params(&c, root, &items, &req.n_params, e))
        return -1;
    req.params = items;
    if (srv_get_attention_options(root, &req, e))
        return -1;
    attn_shapes sh;
    float *o, *w;
    if (srv_run_attention(call, &req, seed, t0, &sh, &o, &w, e))
        return -1;

    double t1 = srv_now_ms();
    reserve_reply(out, &sh, b64);
    srv_buf_puts(out, "{\"rule\":");
    srv_buf_json_str(out, attn_rule_name(rule));
    srv_buf_putc(out, ',');
    int rc = encode_reply(out, &sh, o, w, req.opt.need_weights, req.params,
                          req.n_params, ret_params, b64, e);
    call->t_encode = srv_now_ms() - t1;
    return rc;
}

int srv_handle_multihead(const char *body, size_t len, srv_call *call,
                         srv_buf *out, srv_err *e)
{
    double t0 = srv_now_ms();
    if (parse_root(body, len, call, multihead_fields, e))
        return -1;
    json_t *root = call->root;
    srv_codec c = {&call->arena, &call->scan, srv_cfg.max_elements};
    attn_mha_request req = attn_mha_request_default();
    uint64_t seed = 0;
    int ret_params = 0, b64 = 0;
    if (get_tensor(&c, root, "query", 1, &req.query, e) ||
        get_tensor(&c, root, "key", 0, &req.key, e) ||
        get_tensor(&c, root, "value", 0, &req.value, e) ||
        get_options(&c, root, &req.opt, e) ||
        get_common(root, &seed, &ret_params, &b64, e) ||
        srv_get_multihead_options(root, &req, e))
        return -1;
    attn_named *items;
    if (get_params(&c, root, &items, &req.n_params, e))
        return -1;
    req.params = items;
    attn_shapes sh;
    float *o, *w;
    if (srv_run_multihead(call, &req, seed, t0, &sh, &o, &w, e))
        return -1;

    double t1 = srv_now_ms();
    reserve_reply(out, &sh, b64);
    srv_buf_putc(out, '{');
    int rc = encode_reply(out, &sh, o, w, req.opt.need_weights, req.params,
                          req.n_params, ret_params, b64, e);
    call->t_encode = srv_now_ms() - t1;
    return rc;
}
