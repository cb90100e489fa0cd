/* test_kserve.c - the KServe v2 / Open Inference Protocol routes against a
 * live server: metadata of every model, every golden vector (PyTorch) as an
 * infer request in every input and output form, the bad requests of
 * tests/kserve/ case files, and the README's examples.
 *
 *   test_kserve --server build/attn-server [--golden tests/golden]
 *               [--cases tests/kserve] [--examples tests/kserve] [--log file]
 *
 * Requests are built as the protocol's documentation shows them (KServe
 * "Open Inference Protocol" REST, Triton "Binary Tensor Data Extension"):
 * flat row-major "data", datatype FP32/BOOL, options in "parameters",
 * binary inputs after the JSON header with Inference-Header-Content-Length.
 * The server, the requests and the case files go through tests/harness.c.
 * Prints "N passed, N failed, N skipped"; exits 1 on any failure. */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "harness.h"
#include "ref_modern.h"

static server srv;  /* the one instance, default settings */
static CURL *curl;  /* one handle: kept-alive connections, as a client would */

/* ------------------------------------------------------------ buf */

/* float32 as 4 little-endian bytes, whatever the host's order. */
static void put_f32le(buf *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint8_t q[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    buf_put(b, q, 4);
}


static float get_f32le(const unsigned char *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ------------------------------------------------------------ HTTP */

/* POST (body != NULL) or GET; extra headers NULL-terminated, no default
 * Content-Type. */
static void kv_http(const char *method, const char *path, const char *body, size_t len,
                    const char *const *hdrs, response *r)
{
    request rq = {.method = method, .path = path, .headers = hdrs, .body = body,
                  .body_len = len, .has_body = body != NULL, .no_json_type = 1};
    http(curl, srv.base, &rq, r);
}

/* A response header's value, or "" (one static buffer). */
static const char *header(const response *r, const char *name)
{
    static char v[256];
    if (header_value(r, name, v, sizeof v) != 0)
        v[0] = '\0';
    return v;
}


/* ------------------------------------------------------------ metadata */

typedef struct {
    const char *model;
    const char *params[24]; /* learned-parameter inputs, as openapi.yaml names them */
} model_spec;

static const model_spec models[] = {
    {"attention-dot", {NULL}},
    {"attention-scaled_dot", {NULL}},
    {"attention-general", {"attn.weight", "attn.bias", NULL}},
    {"attention-additive", {"query_proj.weight", "key_proj.weight", "key_proj.bias", "v.weight", NULL}},
    {"attention-concat_tanh", {"attn.weight", "attn.bias", NULL}},
    {"attention-concat", {"att_weight.weight", "att_weight.bias", "out.weight", "out.bias", NULL}},
    {"multihead", {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias",
                   "q_proj_weight", "k_proj_weight", "v_proj_weight", "W_q.weight", "W_q.bias",
                   "W_k.weight", "W_k.bias", "W_v.weight", "W_v.bias", "W_o.weight", "W_o.bias",
                   "norm.weight", "norm.bias", NULL}},
};
#define N_MODELS (sizeof models / sizeof models[0])

static json_t *find_named(json_t *arr, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (!strcmp(json_string_value(json_object_get(v, "name")) ?: "", name))
            return v;
    }
    return NULL;
}

/* A model's inputs: query/key/value FP32, mask BOOL, its parameters FP32,
 * every dimension -1 (variable) or a size. 1 when so, else why says. */
static int metadata_inputs_ok(const model_spec *ms, json_t *ins, char *why, size_t wl)
{
    const char *fp[] = {"query", "key", "value"};
    for (int k = 0; k < 3; k++) {
        json_t *t = find_named(ins, fp[k]);
        if (!t || strcmp(json_string_value(json_object_get(t, "datatype")) ?: "", "FP32"))
            return snprintf(why, wl, "input %s missing or not FP32", fp[k]), 0;
    }
    json_t *mk = find_named(ins, "mask");
    if (!mk || strcmp(json_string_value(json_object_get(mk, "datatype")) ?: "", "BOOL"))
        return snprintf(why, wl, "input mask missing or not BOOL"), 0;
    for (int k = 0; ms->params[k]; k++) {
        json_t *t = find_named(ins, ms->params[k]);
        if (!t || strcmp(json_string_value(json_object_get(t, "datatype")) ?: "", "FP32"))
            return snprintf(why, wl, "parameter input %s missing", ms->params[k]), 0;
    }
    size_t ii, d;
    json_t *t, *x;
    json_array_foreach(ins, ii, t) {
        json_t *shp = json_object_get(t, "shape");
        if (!json_is_array(shp) || json_array_size(shp) == 0)
            return snprintf(why, wl, "input %zu has no shape", ii), 0;
        json_array_foreach(shp, d, x) {
            if (!json_is_integer(x) || (json_integer_value(x) != -1 && json_integer_value(x) < 1))
                return snprintf(why, wl, "input %zu: dimension %zu is not -1 or a size", ii, d), 0;
        }
    }
    return 1;
}

/* GET /v2/models/{model} for every model: name, platform, inputs, outputs. */
static void test_metadata(void)
{
    for (size_t m = 0; m < N_MODELS; m++) {
        const model_spec *ms = &models[m];
        char path[128], name[200], why[200] = "";
        snprintf(path, sizeof path, "/v2/models/%s", ms->model);
        response r;
        kv_http("GET", path, NULL, 0, NULL, &r);
        json_t *j = r.json;
        snprintf(name, sizeof name, "metadata %s: 200 with name and platform", ms->model);
        if (check(r.status == 200 && j && !strcmp(json_string_value(json_object_get(j, "name")) ?: "", ms->model) &&
                      json_is_string(json_object_get(j, "platform")),
                  name, "%ld %s", r.status, short_body(&r))) {
            json_t *outs = json_object_get(j, "outputs");
            snprintf(name, sizeof name, "metadata %s: inputs query/key/value FP32, mask BOOL, parameters", ms->model);
            check(metadata_inputs_ok(ms, json_object_get(j, "inputs"), why, sizeof why), name, "%s", why);
            json_t *o = find_named(outs, "output"), *w = find_named(outs, "weights");
            /* dot, scaled_dot and multihead also have the sparsity pattern's layout */
            int sparse = !strcmp(ms->model, "attention-dot") || !strcmp(ms->model, "attention-scaled_dot") ||
                         !strcmp(ms->model, "multihead");
            json_t *l = find_named(outs, "layout");
            /* the rules with a softmax over the keys (not concat or linear)
             * and multihead have each query row's log-sum-exp */
            int lse = strcmp(ms->model, "attention-concat") && strcmp(ms->model, "attention-linear");
            json_t *ls = find_named(outs, "lse");
            snprintf(name, sizeof name, "metadata %s: outputs output and weights, FP32, shape -1%s%s", ms->model,
                     lse ? ", lse FP32" : "", sparse ? ", and layout BOOL" : "");
            check(o && w && json_array_size(outs) == 2u + (size_t)sparse + (size_t)lse &&
                      json_integer_value(json_array_get(json_object_get(o, "shape"), 0)) == -1 &&
                      !strcmp(json_string_value(json_object_get(w, "datatype")) ?: "", "FP32") &&
                      (!lse || (ls && !strcmp(json_string_value(json_object_get(ls, "datatype")) ?: "", "FP32"))) &&
                      (!sparse || (l && !strcmp(json_string_value(json_object_get(l, "datatype")) ?: "", "BOOL"))),
                  name, "%s", short_body(&r));
        }
        response_free(&r);
    }
}

/* GET /v2/models/multihead-decode: a decode step's inputs and outputs
 * (rank 3), the per-head options, and the parameters (the sequence's, the
 * creation ones marked as taken at its start only). Its infer route is
 * checked step by step in test_sessions. */
static void test_decode_metadata(void)
{
    response r;
    kv_http("GET", "/v2/models/multihead-decode", NULL, 0, NULL, &r);
    json_t *j = r.json, *ins = j ? json_object_get(j, "inputs") : NULL;
    json_t *outs = j ? json_object_get(j, "outputs") : NULL, *ps = j ? json_object_get(j, "parameters") : NULL;
    static const struct {
        const char *name;
        size_t rank;
    } io[] = {{"query", 3}, {"key", 3}, {"value", 3}, {"alibi", 1}, {"sinks", 1}};
    int ok = r.status == 200 && json_array_size(ins) == 5 && json_array_size(outs) == 3; /* output, weights, lse */
    for (size_t i = 0; ok && i < sizeof io / sizeof io[0]; i++) {
        json_t *t = find_named(ins, io[i].name);
        ok = t && json_array_size(json_object_get(t, "shape")) == io[i].rank &&
             !strcmp(json_string_value(json_object_get(t, "datatype")) ?: "", "FP32");
    }
    check(ok, "metadata multihead-decode: inputs query, key, value (rank 3), alibi, sinks (H)", "%s",
          short_body(&r));
    json_t *o = find_named(outs, "output"), *w = find_named(outs, "weights");
    check(o && w && json_array_size(json_object_get(o, "shape")) == 3 &&
              json_array_size(json_object_get(w, "shape")) == 3,
          "metadata multihead-decode: outputs output (Tq, H, d) and weights (H, Tq, n)", "%s", short_body(&r));
    static const struct {
        const char *name;
        int start_only;
    } want[] = {{"sequence_id", 0}, {"sequence_start", 0}, {"sequence_end", 0}, {"need_weights", 0},
                {"num_heads", 1}, {"num_kv_heads", 1}, {"head_dim", 1}, {"max_tokens", 1},
                {"softcap", 1}, {"rope_base", 1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        json_t *p = find_named(ps, want[i].name), *so = p ? json_object_get(p, "sequence_start_only") : NULL;
        char name[160];
        snprintf(name, sizeof name, "metadata multihead-decode: parameter %s%s", want[i].name,
                 want[i].start_only ? ", at the start only" : "");
        check(json_is_boolean(so) && json_is_true(so) == want[i].start_only, name, "%s", short_body(&r));
    }
    check(!find_named(ps, "causal") && !find_named(ps, "hard"),
          "metadata multihead-decode: no causal or hard parameter (a step is causal, bottom-right)", "%s",
          short_body(&r));
    response_free(&r);
}

/* ------------------------------------------------------------ golden infer */

/* The ways one golden case is sent: every input form (flat or nested
 * JSON data, binary tensor data) with every output form (JSON; binary via
 * binary_data_output; binary output beside JSON weights via "outputs"). */
enum { IN_FLAT, IN_NESTED, IN_BINARY };
enum { OUT_JSON, OUT_BINARY, OUT_MIXED };
typedef struct {
    const char *name;
    int in, out;
} infer_mode;
static const infer_mode modes[] = {
    {"JSON flat in, JSON out", IN_FLAT, OUT_JSON},
    {"JSON flat in, binary out", IN_FLAT, OUT_BINARY},
    {"JSON nested in, JSON out", IN_NESTED, OUT_JSON},
    {"JSON nested in, binary out", IN_NESTED, OUT_BINARY},
    {"binary in, JSON out", IN_BINARY, OUT_JSON},
    {"binary in, binary out", IN_BINARY, OUT_BINARY},
    {"binary in, binary output and JSON weights", IN_BINARY, OUT_MIXED},
};
#define N_MODES (int)(sizeof modes / sizeof modes[0])

static json_t *nested(const golden_tensor *t, int depth, int64_t *k)
{
    json_t *a = json_array();
    if (depth >= t->rank || depth >= GOLDEN_MAX_RANK)
        return a; /* not reached; bounds the recursion for the compiler too */
    for (int64_t i = 0; i < t->shape[depth]; i++) {
        if (depth == t->rank - 1) {
            int64_t at = (*k)++;
            json_array_append_new(a, t->kind == GOLDEN_MASK ? json_boolean(t->m[at]) : json_real(t->f[at]));
        } else {
            json_array_append_new(a, nested(t, depth + 1, k));
        }
    }
    return a;
}

/* One $request_input; binary tensors append their bytes to bin. */
static json_t *make_input(const golden_tensor *t, int mode, buf *bin)
{
    int is_bool = t->kind == GOLDEN_MASK;
    json_t *shape = json_array();
    for (int d = 0; d < t->rank; d++)
        json_array_append_new(shape, json_integer(t->shape[d]));
    json_t *in = json_pack("{s:s, s:o, s:s}", "name", t->name, "shape", shape, "datatype",
                           is_bool ? "BOOL" : "FP32");
    if (modes[mode].in == IN_BINARY) {
        for (int64_t i = 0; i < t->count; i++) {
            if (is_bool) {
                uint8_t b = t->m[i] ? 1 : 0;
                buf_put(bin, &b, 1);
            } else {
                put_f32le(bin, t->f[i]);
            }
        }
        json_object_set_new(in, "parameters",
                            json_pack("{s:I}", "binary_data_size", (json_int_t)(t->count * (is_bool ? 1 : 4))));
    } else if (modes[mode].in == IN_NESTED) {
        int64_t k = 0;
        json_object_set_new(in, "data", nested(t, 0, &k));
    } else {
        json_t *data = json_array();
        for (int64_t i = 0; i < t->count; i++)
            json_array_append_new(data, is_bool ? json_boolean(t->m[i]) : json_real(t->f[i]));
        json_object_set_new(in, "data", data);
    }
    return in;
}

static int is_bool_option(const char *k)
{
    return !strcmp(k, "causal") || !strcmp(k, "average_weights") || !strcmp(k, "need_weights") ||
           !strcmp(k, "residual_norm");
}

/* Golden options as the request's "parameters". */
static json_t *make_parameters(const golden_case *gc)
{
    json_t *p = json_object();
    for (size_t i = 0; i < gc->n_options; i++) {
        const char *k = gc->options[i].key, *v = gc->options[i].value;
        if (is_bool_option(k))
            json_object_set_new(p, k, json_boolean(atoi(v)));
        else if (!strcmp(k, "positional_encoding"))
            json_object_set_new(p, k, json_string(v));
        else if (!strcmp(k, "hard") && !strncmp(v, "top_k", 5))
            json_object_set_new(p, k, json_integer(atoll(v + 5)));
        else if (!strcmp(k, "hard"))
            json_object_set_new(p, k, json_string(v));
        else if (!strcmp(k, "seed"))
            json_object_set_new(p, k, json_string("@SEED@")); /* may exceed int64: spliced in as text */
        else
            json_object_set_new(p, k, json_loads(v, JSON_DECODE_ANY, NULL));
    }
    return p;
}

/* A decoded response output. */
typedef struct {
    int rank;
    int64_t shape[8];
    int64_t count;
    float *f;
    int binary;
} out_tensor;

/* Splits a response into its JSON header and binary tail and decodes
 * output `name`; 0 when found and well-formed, else why says what. */
static int decode_output(const response *r, json_t *hdr, size_t hl, const char *name, out_tensor *o,
                         char *why, size_t wl)
{
    memset(o, 0, sizeof *o);
    size_t off = hl, i;
    json_t *v;
    json_array_foreach(json_object_get(hdr, "outputs"), i, v) {
        json_t *bds = json_object_get(json_object_get(v, "parameters"), "binary_data_size");
        int match = !strcmp(json_string_value(json_object_get(v, "name")) ?: "", name);
        if (!match) {
            off += bds ? (size_t)json_integer_value(bds) : 0;
            continue;
        }
        json_t *shp = json_object_get(v, "shape"), *x;
        size_t d;
        o->count = 1;
        if (strcmp(json_string_value(json_object_get(v, "datatype")) ?: "", "FP32")) {
            snprintf(why, wl, "datatype is not FP32");
            return -1;
        }
        json_array_foreach(shp, d, x) {
            if (d >= 8)
                break;
            o->shape[d] = json_integer_value(x);
            o->count *= o->shape[d];
            o->rank = (int)d + 1;
        }
        o->f = calloc((size_t)o->count + 1, sizeof(float));
        if (bds) {
            o->binary = 1;
            if (json_object_get(v, "data")) {
                snprintf(why, wl, "binary output also has \"data\"");
                return -1;
            }
            if (json_integer_value(bds) != o->count * 4 || off + (size_t)o->count * 4 > r->body.len) {
                snprintf(why, wl, "binary_data_size %lld for %lld floats, %zu body bytes",
                         (long long)json_integer_value(bds), (long long)o->count, r->body.len);
                return -1;
            }
            for (int64_t k = 0; k < o->count; k++)
                o->f[k] = get_f32le((const unsigned char *)r->body.data + off + 4 * k);
            return 0;
        }
        json_t *data = json_object_get(v, "data");
        if (!json_is_array(data) || (int64_t)json_array_size(data) != o->count) {
            snprintf(why, wl, "data is not a flat array of %lld numbers", (long long)o->count);
            return -1;
        }
        json_array_foreach(data, d, x) {
            if (!json_is_number(x)) {
                snprintf(why, wl, "data[%zu] is not a number", d);
                return -1;
            }
            o->f[d] = (float)json_number_value(x);
        }
        return 0;
    }
    snprintf(why, wl, "no output named %s", name);
    return -1;
}

static int matches(const out_tensor *o, const golden_tensor *t, char *why, size_t wl)
{
    if (o->rank != t->rank) {
        snprintf(why, wl, "rank %d, expected %d", o->rank, t->rank);
        return 0;
    }
    for (int d = 0; d < t->rank; d++)
        if (o->shape[d] != t->shape[d]) {
            snprintf(why, wl, "dimension %d is %lld, expected %lld", d, (long long)o->shape[d],
                     (long long)t->shape[d]);
            return 0;
        }
    for (int64_t i = 0; i < t->count; i++)
        if (!close_enough(o->f[i], t->f[i])) {
            snprintf(why, wl, "element %lld is %.9g, expected %.9g", (long long)i, (double)o->f[i],
                     (double)t->f[i]);
            return 0;
        }
    return 1;
}

/* Parses a reply into its JSON header (and its length). */
static json_t *reply_json(const response *r, size_t *hl, char *why, size_t wl)
{
    const char *ihl = header(r, "Inference-Header-Content-Length");
    size_t n = r->body.len;
    if (*ihl) {
        char *end;
        unsigned long long v = strtoull(ihl, &end, 10);
        if (*end || v > r->body.len) {
            snprintf(why, wl, "Inference-Header-Content-Length %.40s for a %zu-byte body", ihl, r->body.len);
            return NULL;
        }
        n = (size_t)v;
    }
    *hl = n;
    json_error_t je;
    json_t *j = json_loadb(r->body.data ? r->body.data : "", n, 0, &je);
    if (!j)
        snprintf(why, wl, "header is not JSON: %s", je.text);
    return j;
}

/* The infer request's JSON header for a golden case in one mode (binary
 * inputs' bytes appended to bin); malloc'd text. */
static char *golden_header(const golden_case *gc, const char *id, int mode, buf *bin)
{
    json_t *inputs = json_array();
    for (size_t i = 0; i < gc->n_tensors; i++) {
        const golden_tensor *t = &gc->tensors[i];
        if (t->kind != GOLDEN_EXPECT)
            json_array_append_new(inputs, make_input(t, mode, bin));
    }
    json_t *req = json_pack("{s:s, s:o, s:o}", "id", id, "inputs", inputs, "parameters",
                            make_parameters(gc));
    if (modes[mode].out == OUT_BINARY)
        json_object_set_new(json_object_get(req, "parameters"), "binary_data_output", json_true());
    if (modes[mode].out == OUT_MIXED) {
        json_t *outs = json_pack("[{s:s, s:{s:b}}]", "name", "output", "parameters", "binary_data", 1);
        if (golden_opt_int(gc, "need_weights", 1) != 0)
            json_array_append_new(outs, json_pack("{s:s}", "name", "weights"));
        json_object_set_new(req, "outputs", outs);
    }
    char *hdr = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    char *at = strstr(hdr, "\"@SEED@\"");
    if (at) { /* the seed as the file gives it, digits up to 2^64 - 1 */
        const char *seed = golden_opt(gc, "seed");
        size_t nl = strlen(hdr) - 8 + strlen(seed) + 1;
        char *h2 = malloc(nl);
        snprintf(h2, nl, "%.*s%s%s", (int)(at - hdr), hdr, seed, at + 8);
        free(hdr);
        hdr = h2;
    }
    return hdr;
}

/* The reply's output and weights against torch, each in the form the mode
 * asked for. */
static void golden_outputs(const golden_case *gc, const response *r, json_t *j, size_t hl,
                           int mode, const char *cname)
{
    char name[500], why[300] = "";
    for (size_t i = 0; i < gc->n_tensors; i++) {
        const golden_tensor *t = &gc->tensors[i];
        if (t->kind != GOLDEN_EXPECT || (strcmp(t->name, "output") && strcmp(t->name, "weights")))
            continue; /* seeded parameters are not returned by this protocol */
        out_tensor o;
        int ok = decode_output(r, j, hl, t->name, &o, why, sizeof why) == 0 &&
                 matches(&o, t, why, sizeof why);
        int want_bin = modes[mode].out == OUT_BINARY ||
                       (modes[mode].out == OUT_MIXED && !strcmp(t->name, "output"));
        if (ok && o.binary != want_bin) {
            ok = 0;
            snprintf(why, sizeof why, "returned %s, expected %s", o.binary ? "binary" : "JSON",
                     want_bin ? "binary" : "JSON");
        }
        snprintf(name, sizeof name, "%s: %s matches torch (%s)", cname, t->name,
                 want_bin ? "binary" : "JSON");
        check(ok, name, "%s", why);
        free(o.f);
    }
    if (golden_opt_int(gc, "need_weights", 1) == 0) {
        snprintf(name, sizeof name, "%s: need_weights false leaves weights out", cname);
        check(!find_named(json_object_get(j, "outputs"), "weights") &&
                  json_array_size(json_object_get(j, "outputs")) == 1,
              name, "%s", short_body(r));
    }
}

/* One golden case as one infer request in one mode, and its checks. */
static void golden_infer_mode(const golden_case *gc, const char *file, int mode)
{
    char model[64], id[160], url[128], cname[300], name[400], why[300] = "";
    snprintf(model, sizeof model, "%s%s", strcmp(gc->rule, "multihead") ? "attention-" : "", gc->rule);
    snprintf(id, sizeof id, "golden-%s", file);
    snprintf(url, sizeof url, "/v2/models/%s/infer", model);
    snprintf(cname, sizeof cname, "kserve golden %s (%s)", file, modes[mode].name);
    buf bin = {0}, body = {0};
    char *hdr = golden_header(gc, id, mode, &bin);
    buf_put(&body, hdr, strlen(hdr));
    buf_put(&body, bin.data ? bin.data : "", bin.len);
    char ihl[80];
    snprintf(ihl, sizeof ihl, "Inference-Header-Content-Length: %zu", strlen(hdr));
    const char *json_hdrs[] = {"Content-Type: application/json", NULL};
    const char *bin_hdrs[] = {"Content-Type: application/octet-stream", ihl, NULL};
    int binary_in = modes[mode].in == IN_BINARY;
    response r;
    kv_http("POST", url, body.data, body.len, binary_in ? bin_hdrs : json_hdrs, &r);
    snprintf(name, sizeof name, "%s: 200", cname);
    size_t hl = 0;
    json_t *j = NULL;
    if (check(r.status == 200, name, "%ld %s", r.status, short_body(&r)) &&
        check((j = reply_json(&r, &hl, why, sizeof why)) != NULL, name, "%s", why)) {
        snprintf(name, sizeof name, "%s: model_name and id echoed", cname);
        check(!strcmp(json_string_value(json_object_get(j, "model_name")) ?: "", model) &&
                  !strcmp(json_string_value(json_object_get(j, "id")) ?: "", id),
              name, "%s", short_body(&r));
        int any_bin = modes[mode].out != OUT_JSON;
        snprintf(name, sizeof name, "%s: Inference-Header-Content-Length %s", cname,
                 any_bin ? "present" : "absent");
        check(any_bin == (*header(&r, "Inference-Header-Content-Length") != 0), name, "header '%s'",
              header(&r, "Inference-Header-Content-Length"));
        golden_outputs(gc, &r, j, hl, mode, cname);
    }
    json_decref(j);
    response_free(&r);
    free(hdr);
    buf_free(&body);
    buf_free(&bin);
}

/* One golden case in every mode (modes[]); marks in seen[] the models that
 * serve its rule. */
static void golden_infer(const char *file, const golden_case *gc, void *seen_models)
{
    int *seen = seen_models;
    for (int mode = 0; mode < N_MODES; mode++)
        golden_infer_mode(gc, file, mode);
    for (size_t m = 0; m < N_MODELS; m++) {
        const char *mn = models[m].model;
        const char *rule = strncmp(mn, "attention-", 10) ? mn : mn + 10;
        seen[m] |= !strcmp(rule, gc->rule);
    }
}

static void run_golden(const char *dir)
{
    int seen[N_MODELS] = {0};
    golden_each(dir, NULL, "kserve golden", golden_infer, seen);
    for (size_t m = 0; m < N_MODELS; m++) {
        char name[120];
        snprintf(name, sizeof name, "golden infer covers model %s", models[m].model);
        check(seen[m], name, "no golden case for it");
    }
}

/* ------------------------------------------------------------ the documented binary example */

/* Plain dot-product attention with a mask (true = may attend), written
 * here as the reference for the hand-made requests below. */
static void ref_dot(const float *q, const float *k, const float *v, const uint8_t *mask, int lq,
                    int lk, int d, int dv, float *out, float *w)
{
    for (int i = 0; i < lq; i++) {
        double s[16], mx = -INFINITY, sum = 0;
        for (int j = 0; j < lk; j++) {
            s[j] = 0;
            for (int x = 0; x < d; x++)
                s[j] += (double)q[i * d + x] * k[j * d + x];
            if (mask[i * lk + j] && s[j] > mx)
                mx = s[j];
        }
        for (int j = 0; j < lk; j++)
            sum += mask[i * lk + j] ? exp(s[j] - mx) : 0;
        for (int j = 0; j < lk; j++)
            w[i * lk + j] = mask[i * lk + j] ? (float)(exp(s[j] - mx) / sum) : 0.0f;
        for (int c = 0; c < dv; c++) {
            double o = 0;
            for (int j = 0; j < lk; j++)
                o += (double)w[i * lk + j] * v[j * dv + c];
            out[i * dv + c] = (float)o;
        }
    }
}

static const float ex_q[] = {1.5f, -0.25f, 0.5f, 2.0f};
static const float ex_k[] = {1.0f, 0.0f, 0.0f, 1.0f, -1.0f, 0.5f};
static const float ex_v[] = {10.0f, -3.0f, 0.125f};
static const uint8_t ex_mask[] = {1, 0, 1, 1, 1, 1};

/* The request as Triton's "Binary Tensor Data Extension" page lays it out:
 * a pretty-printed JSON header naming the model, inputs with
 * binary_data_size, one output with binary_data and one without; then the
 * tensors' bytes in input order. */
static void test_documented_binary(void)
{
    const char *hdr =
        "{\n"
        "  \"model_name\" : \"attention-dot\",\n"
        "  \"inputs\" : [\n"
        "    {\n"
        "      \"name\" : \"query\",\n"
        "      \"shape\" : [ 2, 2 ],\n"
        "      \"datatype\" : \"FP32\",\n"
        "      \"parameters\" : {\n"
        "        \"binary_data_size\" : 16\n"
        "      }\n"
        "    },\n"
        "    { \"name\" : \"key\", \"shape\" : [ 3, 2 ], \"datatype\" : \"FP32\", \"parameters\" : { \"binary_data_size\" : 24 } },\n"
        "    { \"name\" : \"value\", \"shape\" : [ 3, 1 ], \"datatype\" : \"FP32\", \"parameters\" : { \"binary_data_size\" : 12 } },\n"
        "    { \"name\" : \"mask\", \"shape\" : [ 2, 3 ], \"datatype\" : \"BOOL\", \"parameters\" : { \"binary_data_size\" : 6 } }\n"
        "  ],\n"
        "  \"outputs\" : [\n"
        "    {\n"
        "      \"name\" : \"output\",\n"
        "      \"parameters\" : {\n"
        "        \"binary_data\" : true\n"
        "      }\n"
        "    },\n"
        "    {\n"
        "      \"name\" : \"weights\"\n"
        "    }\n"
        "  ]\n"
        "}";
    buf body = {0};
    buf_put(&body, hdr, strlen(hdr));
    for (int i = 0; i < 4; i++)
        put_f32le(&body, ex_q[i]);
    for (int i = 0; i < 6; i++)
        put_f32le(&body, ex_k[i]);
    for (int i = 0; i < 3; i++)
        put_f32le(&body, ex_v[i]);
    buf_put(&body, ex_mask, 6);
    char ihl[80];
    snprintf(ihl, sizeof ihl, "Inference-Header-Content-Length: %zu", strlen(hdr));
    const char *hdrs[] = {"Content-Type: application/octet-stream", ihl, NULL};
    response r;
    kv_http("POST", "/v2/models/attention-dot/infer", body.data, body.len, hdrs, &r);
    float out[2], w[6];
    ref_dot(ex_q, ex_k, ex_v, ex_mask, 2, 3, 2, 1, out, w);
    char why[300] = "";
    size_t hl = 0;
    json_t *j = NULL;
    if (check(r.status == 200, "documented binary request: 200", "%ld %s", r.status, short_body(&r)) &&
        check((j = reply_json(&r, &hl, why, sizeof why)) != NULL, "documented binary request: JSON header", "%s", why)) {
        check(hl < r.body.len && !strcmp(header(&r, "Content-Type"), "application/octet-stream"),
              "documented binary reply: Inference-Header-Content-Length and octet-stream",
              "hl %zu of %zu, type '%s'", hl, r.body.len, header(&r, "Content-Type"));
        check(r.body.len - hl == 8, "documented binary reply: 8 bytes of binary output", "%zu bytes",
              r.body.len - hl);
        out_tensor o, ow;
        golden_tensor go = {.rank = 2, .shape = {2, 1}, .count = 2, .f = out};
        golden_tensor gw = {.rank = 2, .shape = {2, 3}, .count = 6, .f = w};
        int ok = decode_output(&r, j, hl, "output", &o, why, sizeof why) == 0 && o.binary &&
                 matches(&o, &go, why, sizeof why);
        check(ok, "documented binary reply: binary output matches the reference", "%s", why);
        ok = decode_output(&r, j, hl, "weights", &ow, why, sizeof why) == 0 && !ow.binary &&
             matches(&ow, &gw, why, sizeof why);
        check(ok, "documented binary reply: JSON weights match the reference", "%s", why);
        check(!strcmp(json_string_value(json_object_get(json_array_get(json_object_get(j, "outputs"), 0), "name")) ?: "", "output"),
              "documented binary reply: outputs in the requested order", "%s", short_body(&r));
        free(o.f);
        free(ow.f);
    }
    json_decref(j);
    response_free(&r);
    free(body.data);
}

/* The lse output as binary tensor data: each query row's log-sum-exp
 * (computed by hand in double: ln(sum_j e^(q_i.k_j / sqrt 2)) over the
 * keys the mask leaves), and the float -inf for a row with no key, which
 * JSON data cannot carry (it writes null). */
static void test_lse_binary(void)
{
    static const char body[] =
        "{\"outputs\":[{\"name\":\"lse\",\"parameters\":{\"binary_data\":true}}],\"inputs\":["
        "{\"name\":\"query\",\"shape\":[3,2],\"datatype\":\"FP32\",\"data\":[1.0,0.5,0.25,-1.0,2.0,2.0]},"
        "{\"name\":\"key\",\"shape\":[3,2],\"datatype\":\"FP32\",\"data\":[1,0,0,1,-0.5,0.75]},"
        "{\"name\":\"value\",\"shape\":[3,2],\"datatype\":\"FP32\",\"data\":[1,2,3,4,5,6]},"
        "{\"name\":\"mask\",\"shape\":[3,3],\"datatype\":\"BOOL\","
        "\"data\":[true,true,true,true,false,true,false,false,false]}]}";
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    response r;
    kv_http("POST", "/v2/models/attention-scaled_dot/infer", body, strlen(body), hdrs, &r);
    char why[300] = "";
    size_t hl = 0;
    json_t *j = NULL;
    out_tensor o = {0};
    int ok = r.status == 200 && (j = reply_json(&r, &hl, why, sizeof why)) != NULL &&
             decode_output(&r, j, hl, "lse", &o, why, sizeof why) == 0;
    if (ok && !(o.binary && o.rank == 1 && o.count == 3 && fabs(o.f[0] - 1.4742226602425221) < 1e-5 &&
                fabs(o.f[1] - 0.5492761580293373) < 1e-5 && o.f[2] == -INFINITY)) {
        snprintf(why, sizeof why, "binary %d, rank %d, count %lld, values %.9g %.9g %.9g", o.binary,
                 o.rank, (long long)o.count, o.count > 0 ? o.f[0] : 0.0, o.count > 1 ? o.f[1] : 0.0,
                 o.count > 2 ? o.f[2] : 0.0);
        ok = 0;
    }
    check(ok, "binary lse output: the rows' log-sum-exps, -inf for a row with no key", "%ld %s %s",
          r.status, why, short_body(&r));
    free(o.f);
    json_decref(j);
    response_free(&r);
}

/* A large binary request (2 heads, L = 300, d = 64: a 460 KB body, which
 * the server reads in place from its buffer, checked for Inf and NaN in
 * 16 KiB blocks as it comes) against a float64 reference, its JSON header
 * padded to an odd length; then the same with a NaN in the query's first
 * float, deep in the key (past the checked blocks' first bad one) and in
 * the value's last float (past the last whole block), each reported by
 * its input and index. */
static void test_large_binary(void)
{
    enum { H = 2, L = 300, D = 64, N = H * L * D };
    static const struct { int input, at; const char *name; } nans[] = {
        {-1, 0, ""}, {0, 0, "query"}, {1, 30001, "key"}, {2, N - 1, "value"}};
    float *t = malloc(3 * N * sizeof *t);
    double *dt = malloc(3 * N * sizeof *dt), *want = malloc(N * sizeof *want);
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < 3 * N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        dt[i] = t[i];
    }
    /* the float64 reference of tests/ref_modern.c: the heads as the batch */
    rm_request rq;
    memset(&rq, 0, sizeof rq);
    rq.rule = RM_SCALED_DOT;
    rq.B = H, rq.Lq = rq.Lk = L, rq.Dq = rq.Dk = rq.Dv = D;
    rq.query = dt, rq.key = dt + N, rq.value = dt + 2 * N;
    check(rm_compute(&rq, want, NULL, NULL, NULL) == 0, "large binary request: the float64 reference",
          "rm_compute failed");
    for (size_t nan = 0; nan < sizeof nans / sizeof *nans; nan++) {
        buf hdr = {0}, body = {0};
        const char *names[] = {"query", "key", "value"};
        buf_puts(&hdr, "{\"inputs\":[");
        for (int n = 0; n < 3; n++) {
            char one[200];
            snprintf(one, sizeof one, "%s{\"name\":\"%s\",\"shape\":[%d,%d,%d],\"datatype\":\"FP32\","
                     "\"parameters\":{\"binary_data_size\":%d}}", n ? "," : "", names[n], H, L, D, 4 * N);
            buf_puts(&hdr, one);
        }
        buf_puts(&hdr, "],\"outputs\":[{\"name\":\"output\",\"parameters\":{\"binary_data\":true}}]}");
        while (hdr.len % 64 != 37)
            buf_put(&hdr, " ", 1);
        buf_put(&body, hdr.data, hdr.len);
        for (int i = 0; i < 3 * N; i++)
            put_f32le(&body, nan && i == nans[nan].input * N + nans[nan].at ? NAN : t[i]);
        char ihl[80];
        snprintf(ihl, sizeof ihl, "Inference-Header-Content-Length: %zu", hdr.len);
        const char *hdrs[] = {"Content-Type: application/octet-stream", ihl, NULL};
        response r;
        kv_http("POST", "/v2/models/attention-scaled_dot/infer", body.data, body.len, hdrs, &r);
        if (nan) {
            char want_msg[64], name[96];
            snprintf(want_msg, sizeof want_msg, "input %s: element %d is not", nans[nan].name, nans[nan].at);
            snprintf(name, sizeof name, "large binary request: a NaN at %s element %d named", nans[nan].name,
                     nans[nan].at);
            check(r.status == 400 && strstr(r.body.data ? r.body.data : "", want_msg), name, "%ld %s",
                  r.status, short_body(&r));
        } else {
            char why[300] = "";
            size_t hl = 0;
            json_t *j = NULL;
            out_tensor o = {0};
            int ok = r.status == 200 && (j = reply_json(&r, &hl, why, sizeof why)) != NULL &&
                     decode_output(&r, j, hl, "output", &o, why, sizeof why) == 0 && o.binary && o.count == N;
            double worst = 0;
            for (int i = 0; ok && i < N; i++) {
                double err = fabs((double)o.f[i] - want[i]) / (1e-3 + fabs(want[i]));
                worst = err > worst ? err : worst;
            }
            check(ok && worst < 1e-4, "large binary request (460 KB, read in place): output within 1e-4 of float64",
                  "status %ld, %s, worst relative error %g", r.status, why, worst);
            json_decref(j);
            free(o.f);
        }
        response_free(&r);
        free(hdr.data);
        free(body.data);
    }
    free(t);
    free(dt);
    free(want);
}

/* The KServe REST documentation's JSON form, with "outputs" choosing the
 * weights alone. */
static void test_json_outputs(void)
{
    const char *req =
        "{\"id\":\"abc-1\",\"inputs\":["
        "{\"name\":\"query\",\"shape\":[2,2],\"datatype\":\"FP32\",\"data\":[1.5,-0.25,0.5,2.0]},"
        "{\"name\":\"key\",\"shape\":[3,2],\"datatype\":\"FP32\",\"data\":[[1,0],[0,1],[-1,0.5]]},"
        "{\"name\":\"value\",\"shape\":[3,1],\"datatype\":\"FP32\",\"data\":[10,-3,0.125]},"
        "{\"name\":\"mask\",\"shape\":[2,3],\"datatype\":\"BOOL\",\"data\":[true,false,true,true,true,true]}],"
        "\"outputs\":[{\"name\":\"weights\"}]}";
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    response r;
    kv_http("POST", "/v2/models/attention-dot/infer", req, strlen(req), hdrs, &r);
    float out[2], w[6];
    ref_dot(ex_q, ex_k, ex_v, ex_mask, 2, 3, 2, 1, out, w);
    char why[300] = "";
    size_t hl;
    json_t *j = r.status == 200 ? reply_json(&r, &hl, why, sizeof why) : NULL;
    out_tensor o;
    golden_tensor gw = {.rank = 2, .shape = {2, 3}, .count = 6, .f = w};
    int ok = j && json_array_size(json_object_get(j, "outputs")) == 1 &&
             decode_output(&r, j, hl, "weights", &o, why, sizeof why) == 0 && matches(&o, &gw, why, sizeof why);
    check(ok, "JSON request with outputs [weights]: only weights, matching the reference", "%ld %s %s",
          r.status, why, short_body(&r));
    check(j && !strcmp(json_string_value(json_object_get(j, "id")) ?: "", "abc-1") &&
              !strcmp(header(&r, "Content-Type"), "application/json") &&
              !*header(&r, "Inference-Header-Content-Length"),
          "JSON reply: id echoed, application/json, no Inference-Header-Content-Length", "%s", short_body(&r));
    if (j)
        free(o.f);
    json_decref(j);
    response_free(&r);
}

/* ------------------------------------------------------------ errors */

/* The bad requests are tests/kserve/ case files (format: tests/http/README.md),
 * each against this one server. */
static server *one_server(const char *name)
{
    (void)name;
    return &srv;
}

/* ------------------------------------------------------------ README examples */

/* Runs a command with the server's base URL appended; its output is shown
 * only when it fails. 0 when it exits 0. */
static int run_example(const char *cmd, char *out, size_t outlen)
{
    char line[1024];
    snprintf(line, sizeof line, "%s %s 2>&1", cmd, srv.base);
    FILE *p = popen(line, "r");
    size_t n = 0;
    out[0] = '\0';
    if (!p)
        return -1;
    while (n + 1 < outlen && fgets(out + n, (int)(outlen - n), p))
        n += strlen(out + n);
    return pclose(p);
}

/* The curl (JSON) and Python (binary tensor data) examples the README
 * shows, against this server; Python is skipped without numpy/requests. */
static void test_examples(const char *dir)
{
    char cmd[600], out[4096];
    snprintf(cmd, sizeof cmd, "sh %s/curl_example.sh", dir);
    int rc = run_example(cmd, out, sizeof out);
    check(rc == 0, "README curl example (JSON infer)", "exit %d:\n%s", rc, out);
    if (system("/usr/bin/python3 -c 'import numpy, requests' >/dev/null 2>&1") != 0) {
        skip("README Python example", "/usr/bin/python3 has no numpy or requests");
        return;
    }
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/binary_client.py", dir);
    rc = run_example(cmd, out, sizeof out);
    check(rc == 0, "README Python example (binary in and out, against torch)", "exit %d:\n%s", rc, out);
    if (h_verbose)
        printf("%s", out);
}

int main(int argc, char **argv)
{
    const char *bin = "build/attn-server", *golden = "tests/golden", *log = "build/test_kserve_server.log";
    const char *examples = NULL, *cases = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--server") && i + 1 < argc)
            bin = argv[++i];
        else if (!strcmp(argv[i], "--golden") && i + 1 < argc)
            golden = argv[++i];
        else if (!strcmp(argv[i], "--log") && i + 1 < argc)
            log = argv[++i];
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc)
            cases = argv[++i];
        else if (!strcmp(argv[i], "--examples") && i + 1 < argc)
            examples = argv[++i];
        else if (!strcmp(argv[i], "-v"))
            h_verbose = 1;
        else {
            fprintf(stderr, "usage: test_kserve [--server bin] [--golden dir] [--cases dir] "
                            "[--examples dir] [--log file] [-v]\n");
            return 2;
        }
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    FILE *lf = fopen(log, "w"); /* truncate: one run per log */
    if (lf)
        fclose(lf);
    if (server_start(&srv, bin, "kserve", "/v2/health/ready", NULL, log) != 0) {
        fprintf(stderr, "test_kserve: %s did not start (see %s)\n", bin, log);
        return 1;
    }
    curl = curl_easy_init();
    test_metadata();
    test_decode_metadata();
    run_golden(golden);
    test_documented_binary();
    test_lse_binary();
    test_large_binary();
    test_json_outputs();
    if (cases)
        run_case_dir(cases, NULL, one_server);
    if (examples)
        test_examples(examples);
    check(server_stop(&srv), "server exits 0 on SIGTERM", "it did not");
    curl_easy_cleanup(curl);
    curl_global_cleanup();
    return h_report();
}
