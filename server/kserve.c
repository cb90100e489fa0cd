/* kserve.c - the KServe v2 / Open Inference Protocol routes under /v2, with
 * Triton's binary tensor data extension: each rule is a model. */
#include "srv.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KS_SERVER_NAME "attention-service"
#define KS_SERVER_VERSION "1.0.0" /* openapi.yaml info.version */
#define KS_MODEL_VERSION "1"
#define KS_N_MODELS (ATTN_RULE_COUNT + 1) /* every rule, then multihead */
#define KS_MULTIHEAD ATTN_RULE_COUNT
#define KS_MAX_INPUTS 32 /* more than any model takes */

enum { KS_SERVER = 1, KS_LIVE, KS_READY, KS_MODEL, KS_MODEL_READY, KS_INFER };

/* --------------------------------------------------------------- replies */

static void ks_error(srv_reply *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void ks_error(srv_reply *r, int status, const char *fmt, ...)
{
    char msg[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->body.len = 0;
    r->body.failed = 0;
    r->status = status;
    r->ctype = "application/json";
    r->infer_header_len = 0;
    if (status == 503 && !r->retry_after)
        r->retry_after = 1;
    srv_buf_puts(&r->body, "{\"error\":");
    srv_buf_json_str(&r->body, msg);
    srv_buf_puts(&r->body, "}\n");
}

/* The protocol has no 422: a request whose values do not fit the model is
 * a bad request. Sizes (413) and load (503) keep their status. */
void srv_kserve_error(srv_reply *r, const srv_err *e)
{
    int status = e->status == 422 ? 400 : e->status;
    ks_error(r, status, "%s", e->message);
}

static void model_name(int m, char *out, size_t n)
{
    if (m == KS_MULTIHEAD)
        snprintf(out, n, "multihead");
    else
        snprintf(out, n, "attention-%s", attn_rule_name((attn_rule)m));
}

static int model_lookup(const char *name, size_t len)
{
    char buf[64];
    for (int m = 0; m < KS_N_MODELS; m++) {
        model_name(m, buf, sizeof buf);
        if (strlen(buf) == len && memcmp(buf, name, len) == 0)
            return m;
    }
    return -1;
}

static void model_list(char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    for (int m = 0; m < KS_N_MODELS && k < n; m++) {
        char buf[64];
        model_name(m, buf, sizeof buf);
        k += (size_t)snprintf(out + k, n - k, "%s%s", m ? ", " : "", buf);
    }
}

/* ---------------------------------------------------------------- routing */

int srv_kserve_resolve(const char *method, const char *path, srv_target *t, srv_reply *r)
{
    int is_get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    int is_post = strcmp(method, "POST") == 0;
    const char *rest = path + 3; /* after "/v2" */
    t->route = SRV_R_KSERVE;
    if (!strcmp(rest, "") || !strcmp(rest, "/")) {
        t->ks_op = KS_SERVER;
    } else if (!strcmp(rest, "/health/live")) {
        t->ks_op = KS_LIVE;
    } else if (!strcmp(rest, "/health/ready")) {
        t->ks_op = KS_READY;
    } else if (!strncmp(rest, "/models/", 8)) {
        const char *name = rest + 8, *end = strchr(name, '/');
        size_t nl = end ? (size_t)(end - name) : strlen(name);
        t->ks_model = model_lookup(name, nl);
        if (t->ks_model < 0) {
            char list[300];
            model_list(list, sizeof list);
            ks_error(r, 404, "no model named \"%.*s\"; the models are: %s",
                     nl > 60 ? 60 : (int)nl, name, list);
            return -1;
        }
        const char *tail = end ? end : "";
        /* One version of every model; "/versions/1" may name it. */
        if (!strncmp(tail, "/versions/", 10)) {
            const char *v = tail + 10, *ve = strchr(v, '/');
            size_t vl = ve ? (size_t)(ve - v) : strlen(v);
            if (vl != strlen(KS_MODEL_VERSION) || strncmp(v, KS_MODEL_VERSION, vl)) {
                ks_error(r, 404, "model %.*s has only version " KS_MODEL_VERSION, (int)nl, name);
                return -1;
            }
            tail = ve ? ve : "";
        }
        if (!strcmp(tail, "")) {
            t->ks_op = KS_MODEL;
        } else if (!strcmp(tail, "/ready")) {
            t->ks_op = KS_MODEL_READY;
        } else if (!strcmp(tail, "/infer")) {
            t->ks_op = KS_INFER;
            t->route = SRV_R_KSERVE_INFER;
            t->wants_body = 1;
        }
    }
    if (!t->ks_op) {
        ks_error(r, 404, "no route %.200s; the KServe v2 routes are /v2, /v2/health/live, "
                 "/v2/health/ready, /v2/models/{name}, /v2/models/{name}/ready and "
                 "POST /v2/models/{name}/infer", path);
        return -1;
    }
    if (t->wants_body ? is_post : is_get)
        return 0;
    r->allow = t->wants_body ? "POST" : "GET, HEAD";
    ks_error(r, 405, "%.16s is not allowed here; use %s", method, r->allow);
    return -1;
}

void srv_kserve_header(srv_target *t, const char *value)
{
    t->ks_hdr = 0;
    if (!value)
        return;
    /* Digits only (no sign, no spaces): a length from the network. */
    uint64_t n = 0;
    const char *p = value;
    if (!*p)
        t->ks_hdr = -1;
    for (; *p && t->ks_hdr == 0; p++) {
        if (*p < '0' || *p > '9' || n > (UINT64_MAX - 9) / 10)
            t->ks_hdr = -1;
        else
            n = n * 10 + (uint64_t)(*p - '0');
    }
    if (t->ks_hdr == 0) {
        t->ks_hdr = 1;
        t->ks_hdr_len = n;
    }
}

int srv_kserve_content_type(const char *ct)
{
    if (!ct)
        return 1;
    while (*ct == ' ')
        ct++;
    size_t n = strcspn(ct, "; ");
    return (n == 16 && !strncasecmp(ct, "application/json", n)) ||
           (n == 24 && !strncasecmp(ct, "application/octet-stream", n)) ||
           (n > 16 && !strncasecmp(ct, "application/vnd.", 16));
}

/* ---------------------------------------------------------------- metadata */

typedef struct {
    const char *name;
    const char *shape; /* "(Dq, Dk)": digits stay, symbols become -1 */
    int is_bool;
} ks_io;

static const ks_io rule_inputs[] = {
    {"query", "(B, Lq, Dq)", 0}, {"key", "(B, Lk, Dk)", 0}, {"value", "(B, Lk, Dv)", 0},
    {"mask", "(B, Lq, Lk)", 1},  {"key_mask", "(B, Lk)", 1}, {"bias", "(B, Lq, Lk)", 0}};
static const ks_io mha_inputs[] = {
    {"query", "(B, Lq, E)", 0},   {"key", "(B, Lk, kdim)", 0},   {"value", "(B, Lk, vdim)", 0},
    {"mask", "(B, H, Lq, Lk)", 1}, {"key_mask", "(B, Lk)", 1},   {"bias", "(B, H, Lq, Lk)", 0},
    {"in_proj_weight", "(3E, E)", 0}, {"in_proj_bias", "(3E)", 0},
    {"out_proj.weight", "(E, E)", 0}, {"out_proj.bias", "(E)", 0},
    {"q_proj_weight", "(E, E)", 0},   {"k_proj_weight", "(E, kdim)", 0},
    {"v_proj_weight", "(E, vdim)", 0},
    {"W_q.weight", "(E, E)", 0},      {"W_q.bias", "(E)", 0},
    {"W_k.weight", "(Ekv, kdim)", 0}, {"W_k.bias", "(Ekv)", 0},
    {"W_v.weight", "(Ekv, vdim)", 0}, {"W_v.bias", "(Ekv)", 0},
    {"W_o.weight", "(E, E)", 0},      {"W_o.bias", "(E)", 0},
    {"norm.weight", "(E)", 0},        {"norm.bias", "(E)", 0}};
#define N_RULE_INPUTS (sizeof rule_inputs / sizeof rule_inputs[0])
#define N_MHA_INPUTS (sizeof mha_inputs / sizeof mha_inputs[0])

/* The concat rule pairs query and key rows: key_mask and bias do not apply. */
static int rule_takes(int m, const char *name)
{
    return !(m == ATTN_RULE_CONCAT && (!strcmp(name, "key_mask") || !strcmp(name, "bias")));
}

/* Calls fn for every input model m takes, in metadata order. */
static void each_input(int m, void (*fn)(void *, const ks_io *), void *ud)
{
    if (m == KS_MULTIHEAD) {
        for (size_t i = 0; i < N_MHA_INPUTS; i++)
            fn(ud, &mha_inputs[i]);
        return;
    }
    for (size_t i = 0; i < N_RULE_INPUTS; i++)
        if (rule_takes(m, rule_inputs[i].name))
            fn(ud, &rule_inputs[i]);
    const attn_rule_info *ri = attn_rule_describe((attn_rule)m);
    for (size_t i = 0; ri && i < ri->n_params; i++) {
        ks_io io = {ri->params[i].name, ri->params[i].shape, 0};
        fn(ud, &io);
    }
}

static void put_shape_text(srv_buf *b, const char *shape)
{
    srv_buf_putc(b, '[');
    const char *p = shape;
    int first = 1;
    while (*p) {
        while (*p == '(' || *p == ' ' || *p == ',')
            p++;
        if (!*p || *p == ')')
            break;
        size_t n = strcspn(p, ",)");
        size_t digits = strspn(p, "0123456789");
        srv_buf_puts(b, first ? "" : ",");
        first = 0;
        if (digits == n)
            srv_buf_put(b, p, n);
        else
            srv_buf_puts(b, "-1");
        p += n;
    }
    srv_buf_putc(b, ']');
}

typedef struct {
    srv_buf *b;
    int n;
} io_writer;

static void put_io(void *ud, const ks_io *io)
{
    io_writer *w = ud;
    srv_buf_puts(w->b, w->n++ ? ",{\"name\":" : "{\"name\":");
    srv_buf_json_str(w->b, io->name);
    srv_buf_puts(w->b, io->is_bool ? ",\"datatype\":\"BOOL\",\"shape\":" : ",\"datatype\":\"FP32\",\"shape\":");
    put_shape_text(w->b, io->shape);
    srv_buf_putc(w->b, '}');
}

typedef struct {
    const char *name;
    const ks_io *found;
    ks_io copy;
} io_finder;

static void find_io(void *ud, const ks_io *io)
{
    io_finder *f = ud;
    if (!f->found && !strcmp(f->name, io->name)) {
        f->copy = *io;
        f->found = &f->copy;
    }
}

typedef struct {
    char s[400];
    size_t n;
} name_list;

static void put_input_names(void *ud, const ks_io *io)
{
    name_list *l = ud;
    if (l->n < sizeof l->s)
        l->n += (size_t)snprintf(l->s + l->n, sizeof l->s - l->n, "%s%s", l->n ? ", " : "", io->name);
}

static void model_metadata(int m, srv_buf *b)
{
    char name[64];
    model_name(m, name, sizeof name);
    srv_buf_puts(b, "{\"name\":");
    srv_buf_json_str(b, name);
    srv_buf_puts(b, ",\"versions\":[\"" KS_MODEL_VERSION "\"],\"platform\":\"attention-c\",\"inputs\":[");
    io_writer w = {b, 0};
    each_input(m, put_io, &w);
    srv_buf_puts(b, "],\"outputs\":[");
    io_writer wo = {b, 0};
    ks_io out = {"output", m == ATTN_RULE_CONCAT ? "(B, Lq, Dout)" : "(B, Lq, Dv)", 0};
    ks_io wts = {"weights", m == KS_MULTIHEAD ? "(B, H, Lq, Lk)" : "(B, Lq, Lk)", 0};
    put_io(&wo, &out);
    put_io(&wo, &wts);
    srv_buf_puts(b, "]}\n");
}

/* ---------------------------------------------------------------- inference */

typedef struct {
    const char *name;  /* borrowed from the parsed header */
    int is_bool;
    int rank;
    int64_t shape[ATTN_MAX_RANK];
    int64_t count;
    float *f;          /* arena or codec owned */
    uint8_t *m;
} ks_input;

static int host_is_le(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static const char *const rule_params[] = {
    "seed", "causal", "window", "need_weights", "hard", "scale", "hidden_size",
    "output_size", "binary_data_output", NULL};
static const char *const mha_params[] = {
    "seed", "causal", "window", "need_weights", "hard", "num_heads", "num_kv_heads",
    "average_weights", "positional_encoding", "residual_norm", "binary_data_output", NULL};

/* Every key of obj must be one of allowed; what names the object in errors. */
static int only_keys(json_t *obj, const char *const *allowed, const char *what, srv_err *e)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (int i = 0; allowed[i]; i++)
            ok |= !strcmp(key, allowed[i]);
        if (!ok) {
            char list[300];
            size_t n = 0;
            list[0] = '\0';
            for (int i = 0; allowed[i] && n < sizeof list; i++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", allowed[i]);
            return srv_fail(e, 400, "unknown_field", key, "unknown %s \"%.60s\"; expected one of: %s",
                            what, key, list);
        }
    }
    return 0;
}

/* Reads one $request_input: shape and datatype checked, its values taken
 * from "data" or from the binary section at *off (advanced). */
static int read_input(int m, srv_call *call, srv_codec *c, json_t *j, const char *bin,
                      uint64_t bin_len, uint64_t *off, ks_input *in, srv_err *e)
{
    static const char *const in_keys[] = {"name", "shape", "datatype", "parameters", "data", NULL};
    static const char *const in_param_keys[] = {"binary_data_size", NULL};
    if (!json_is_object(j))
        return srv_fail(e, 400, "invalid_field", "inputs", "each input must be an object");
    if (only_keys(j, in_keys, "input field", e))
        return -1;
    json_t *jn = json_object_get(j, "name");
    if (!json_is_string(jn))
        return srv_fail(e, 400, "invalid_field", "inputs", "each input needs a \"name\" string");
    in->name = json_string_value(jn);
    const char *nm = in->name;
    io_finder f = {nm, NULL, {0}};
    each_input(m, find_io, &f);
    if (!f.found) {
        name_list names;
        names.s[0] = '\0';
        names.n = 0;
        each_input(m, put_input_names, &names);
        return srv_fail(e, 400, "invalid_field", nm, "model has no input \"%.60s\"; its inputs are: %s",
                        nm, names.s);
    }
    in->is_bool = f.found->is_bool;

    json_t *dt = json_object_get(j, "datatype");
    const char *want = in->is_bool ? "BOOL" : "FP32";
    if (!json_is_string(dt))
        return srv_fail(e, 400, "invalid_field", nm, "input %s needs a \"datatype\" (%s)", nm, want);
    if (strcmp(json_string_value(dt), want))
        return srv_fail(e, 400, "invalid_field", nm,
                        "input %s has datatype %.20s; this model takes it as %s", nm,
                        json_string_value(dt), want);

    json_t *sh = json_object_get(j, "shape");
    if (!json_is_array(sh) || json_array_size(sh) < 1 || json_array_size(sh) > ATTN_MAX_RANK)
        return srv_fail(e, 400, "invalid_field", nm,
                        "input %s needs a \"shape\": an array of 1 to %d dimensions", nm, ATTN_MAX_RANK);
    in->rank = (int)json_array_size(sh);
    in->count = 1;
    for (int d = 0; d < in->rank; d++) {
        json_t *x = json_array_get(sh, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 1)
            return srv_fail(e, 400, "invalid_field", nm,
                            "input %s: every dimension of its shape must be an integer of at least 1", nm);
        in->shape[d] = json_integer_value(x);
        if (!attn_size_mul(in->count, in->shape[d], &in->count))
            return srv_fail(e, 413, "too_large", nm, "input %s is too large: its size overflows", nm);
    }
    if (in->count > c->max_elements)
        return srv_fail(e, 413, "too_large", nm,
                        "input %s has %lld elements; this server accepts at most %lld per tensor",
                        nm, (long long)in->count, (long long)c->max_elements);

    json_t *par = json_object_get(j, "parameters"), *bds = NULL;
    if (par) {
        if (!json_is_object(par))
            return srv_fail(e, 400, "invalid_field", nm, "input %s: parameters must be an object", nm);
        if (only_keys(par, in_param_keys, "input parameter", e))
            return -1;
        bds = json_object_get(par, "binary_data_size");
    }
    json_t *data = json_object_get(j, "data");
    if (bds && data)
        return srv_fail(e, 400, "invalid_field", nm,
                        "input %s has both \"data\" and binary_data_size; give one", nm);
    int64_t esz = in->is_bool ? 1 : 4, want_bytes;
    if (bds) {
        if (!json_is_integer(bds) || json_integer_value(bds) < 0)
            return srv_fail(e, 400, "invalid_field", nm,
                            "input %s: binary_data_size must be a byte count", nm);
        int64_t size = json_integer_value(bds);
        if (!attn_size_mul(in->count, esz, &want_bytes) || size != want_bytes)
            return srv_fail(e, 400, "invalid_field", nm,
                            "input %s: binary_data_size is %lld but shape and datatype make %lld bytes",
                            nm, (long long)size, (long long)want_bytes);
        if ((uint64_t)size > bin_len - *off)
            return srv_fail(e, 400, "invalid_field", nm,
                            "input %s: binary_data_size %lld reaches past the %llu bytes of binary "
                            "data after the JSON header", nm, (long long)size,
                            (unsigned long long)bin_len);
        const char *src = bin + *off;
        *off += (uint64_t)size;
        if (in->is_bool) {
            in->m = srv_arena_alloc(&call->arena, (size_t)size ? (size_t)size : 1);
            if (!in->m)
                return srv_fail(e, 503, "overloaded", nm, "out of memory reading %s", nm);
            for (int64_t i = 0; i < in->count; i++) {
                uint8_t v = (uint8_t)src[i];
                if (v > 1)
                    return srv_fail(e, 400, "invalid_tensor", nm,
                                    "input %s: BOOL byte %lld is %u; it must be 0 or 1", nm,
                                    (long long)i, (unsigned)v);
                in->m[i] = v;
            }
        } else {
            in->f = srv_arena_alloc(&call->arena, (size_t)size ? (size_t)size : 1);
            if (!in->f)
                return srv_fail(e, 503, "overloaded", nm, "out of memory reading %s", nm);
            memcpy(in->f, src, (size_t)size); /* the body gives no alignment */
            int le = host_is_le();
            for (int64_t i = 0; i < in->count; i++) {
                if (!le) {
                    uint8_t *p = (uint8_t *)&in->f[i], t0 = p[0], t1 = p[1];
                    p[0] = p[3]; p[3] = t0; p[1] = p[2]; p[2] = t1;
                }
                if (!isfinite(in->f[i]))
                    return srv_fail(e, 400, "invalid_tensor", nm,
                                    "input %s: element %lld is not a finite float32 value", nm,
                                    (long long)i);
            }
        }
        return 0;
    }
    if (!data)
        return srv_fail(e, 400, "missing_field", nm,
                        "input %s has no \"data\" and no binary_data_size parameter", nm);
    /* "data" is flat or nested, row-major; only its element count must
     * agree with the declared shape. */
    int rank;
    int64_t dshape[ATTN_MAX_RANK], dcount = 1;
    if (in->is_bool) {
        attn_mask mk;
        if (srv_decode_mask(c, data, nm, &mk, e))
            return -1;
        rank = mk.rank;
        memcpy(dshape, mk.shape, sizeof dshape);
        in->m = (uint8_t *)mk.data;
    } else {
        attn_tensor tt;
        if (srv_decode_tensor(c, data, nm, &tt, e))
            return -1;
        rank = tt.rank;
        memcpy(dshape, tt.shape, sizeof dshape);
        in->f = (float *)tt.data;
    }
    for (int d = 0; d < rank; d++)
        dcount *= dshape[d]; /* the codec checked this product */
    if (dcount != in->count)
        return srv_fail(e, 400, "invalid_tensor", nm,
                        "input %s: its shape has %lld elements but its data has %lld", nm,
                        (long long)in->count, (long long)dcount);
    return 0;
}

static attn_tensor as_tensor(const ks_input *in)
{
    attn_tensor t;
    memset(&t, 0, sizeof t);
    t.rank = in->rank;
    memcpy(t.shape, in->shape, sizeof t.shape);
    t.data = in->f;
    return t;
}

static attn_mask as_mask(const ks_input *in)
{
    attn_mask mk;
    memset(&mk, 0, sizeof mk);
    mk.rank = in->rank;
    memcpy(mk.shape, in->shape, sizeof mk.shape);
    mk.data = in->m;
    return mk;
}

/* A bool option of an object; def when absent. */
static int opt_bool(json_t *obj, const char *name, int def, const char *what, int *out, srv_err *e)
{
    json_t *v = obj ? json_object_get(obj, name) : NULL;
    *out = def;
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return srv_fail(e, 400, "invalid_field", name, "%s: %s must be true or false", what, name);
    *out = json_is_true(v);
    return 0;
}

typedef struct {
    const char *name; /* "output" or "weights" */
    int binary;
} ks_output;

/* The request's "outputs" (or both, output first, when absent). */
static int read_outputs(json_t *root, int bin_all, ks_output *outs, int *n, int *listed, srv_err *e)
{
    static const char *const out_keys[] = {"name", "parameters", NULL};
    static const char *const out_param_keys[] = {"binary_data", NULL};
    json_t *jo = json_object_get(root, "outputs");
    *listed = jo != NULL;
    *n = 0;
    if (!jo) {
        outs[(*n)++] = (ks_output){"output", bin_all};
        outs[(*n)++] = (ks_output){"weights", bin_all};
        return 0;
    }
    if (!json_is_array(jo))
        return srv_fail(e, 400, "invalid_field", "outputs", "outputs must be an array of {\"name\": ...}");
    if (json_array_size(jo) > 2)
        return srv_fail(e, 400, "invalid_field", "outputs",
                        "outputs lists %zu tensors; the models have two: output and weights",
                        json_array_size(jo));
    for (size_t i = 0; i < json_array_size(jo); i++) {
        json_t *o = json_array_get(jo, i), *nm;
        if (!json_is_object(o) || !json_is_string(nm = json_object_get(o, "name")))
            return srv_fail(e, 400, "invalid_field", "outputs", "each output must be {\"name\": ...}");
        if (only_keys(o, out_keys, "output field", e))
            return -1;
        const char *s = json_string_value(nm);
        if (strcmp(s, "output") && strcmp(s, "weights"))
            return srv_fail(e, 400, "invalid_field", "outputs",
                            "no output named \"%.60s\"; the outputs are output and weights", s);
        if (*n == 1 && !strcmp(outs[0].name, s))
            return srv_fail(e, 400, "invalid_field", "outputs", "output %s is listed twice", s);
        json_t *p = json_object_get(o, "parameters");
        int bin = bin_all;
        if (p && !json_is_object(p))
            return srv_fail(e, 400, "invalid_field", "outputs", "output %s: parameters must be an object", s);
        if (p && (only_keys(p, out_param_keys, "output parameter", e) ||
                  opt_bool(p, "binary_data", bin_all, s, &bin, e)))
            return -1;
        outs[(*n)++] = (ks_output){json_string_value(nm), bin};
    }
    return 0;
}

/* Writes the response: JSON header, then the binary outputs in order. */
static int write_response(srv_reply *r, int m, json_t *id, const ks_output *outs, int n_out,
                          const attn_shapes *sh, const float *o, const float *w, srv_err *e)
{
    srv_buf *b = &r->body;
    char name[64];
    model_name(m, name, sizeof name);
    double bytes = ((double)sh->out_count + (double)sh->w_count) * 16.0 + 512.0;
    if (bytes < 1e12)
        srv_buf_reserve(b, (size_t)bytes);
    srv_buf_puts(b, "{\"model_name\":");
    srv_buf_json_str(b, name);
    srv_buf_puts(b, ",\"model_version\":\"" KS_MODEL_VERSION "\"");
    if (id) {
        srv_buf_puts(b, ",\"id\":");
        srv_buf_json_str(b, json_string_value(id));
    }
    srv_buf_puts(b, ",\"outputs\":[");
    int any_binary = 0;
    for (int i = 0; i < n_out; i++) {
        int is_w = !strcmp(outs[i].name, "weights");
        int rank = is_w ? sh->w_rank : sh->out_rank;
        const int64_t *shape = is_w ? sh->w_shape : sh->out_shape;
        int64_t count = is_w ? sh->w_count : sh->out_count;
        srv_buf_puts(b, i ? ",{\"name\":\"" : "{\"name\":\"");
        srv_buf_puts(b, outs[i].name);
        srv_buf_puts(b, "\",\"datatype\":\"FP32\",\"shape\":[");
        for (int d = 0; d < rank; d++)
            srv_buf_printf(b, "%s%lld", d ? "," : "", (long long)shape[d]);
        srv_buf_putc(b, ']');
        if (outs[i].binary) {
            /* count <= max_elements, so the product cannot overflow */
            srv_buf_printf(b, ",\"parameters\":{\"binary_data_size\":%lld}}", (long long)count * 4);
            any_binary = 1;
        } else {
            int64_t flat[1] = {count};
            srv_buf_puts(b, ",\"data\":");
            srv_encode_tensor(b, is_w ? w : o, 1, flat, 0);
            srv_buf_putc(b, '}');
        }
    }
    srv_buf_puts(b, "]}");
    if (!any_binary) {
        srv_buf_putc(b, '\n');
    } else {
        r->infer_header_len = b->len;
        r->ctype = "application/octet-stream";
        int le = host_is_le();
        for (int i = 0; i < n_out; i++) {
            if (!outs[i].binary)
                continue;
            int is_w = !strcmp(outs[i].name, "weights");
            const float *src = is_w ? w : o;
            int64_t count = is_w ? sh->w_count : sh->out_count;
            if (le) {
                srv_buf_put(b, src, (size_t)count * 4);
            } else {
                for (int64_t k = 0; k < count; k++) {
                    uint8_t p[4], q[4];
                    memcpy(p, &src[k], 4);
                    q[0] = p[3]; q[1] = p[2]; q[2] = p[1]; q[3] = p[0];
                    srv_buf_put(b, q, 4);
                }
            }
        }
    }
    if (b->failed)
        return srv_fail(e, 413, "too_large", "", "not enough memory to write the response");
    return 0;
}

/* One inference: the whole request's life, errors as srv_err. */
static int infer(const srv_target *t, const char *body, size_t len, srv_call *call,
                 srv_reply *r, srv_err *e)
{
    double t0 = srv_now_ms();
    int m = t->ks_model;
    size_t hl = len;
    if (t->ks_hdr < 0)
        return srv_fail(e, 400, "invalid_field", "Inference-Header-Content-Length",
                        "Inference-Header-Content-Length must be a decimal byte count");
    if (t->ks_hdr > 0) {
        if (t->ks_hdr_len > len)
            return srv_fail(e, 400, "invalid_field", "Inference-Header-Content-Length",
                            "Inference-Header-Content-Length is %llu but the body has only %zu bytes",
                            (unsigned long long)t->ks_hdr_len, len);
        hl = (size_t)t->ks_hdr_len;
    }
    const char *hdr = body;
    if (hl < len) {
        /* The scanner wants a NUL after the JSON: copy the header alone. */
        char *copy = srv_arena_alloc(&call->arena, hl + 1);
        if (!copy)
            return srv_fail(e, 503, "overloaded", "", "out of memory reading the request");
        memcpy(copy, body, hl);
        copy[hl] = '\0';
        hdr = copy;
    }
    /* the same JSON depth cap as the native routes (request.c) */
    if (srv_json_too_deep(hdr, hl, srv_cfg.max_depth))
        return srv_fail(e, 400, "invalid_json", "",
                        "the JSON header nests arrays or objects more than %d deep (ATTN_MAX_DEPTH)",
                        srv_cfg.max_depth);
    if (srv_scan(hdr, hl, &call->arena, &call->scan))
        return srv_fail(e, 503, "overloaded", "", "out of memory reading the request");
    json_error_t jerr;
    call->root = json_loadb(call->scan.envelope, call->scan.envelope_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!call->root)
        return srv_fail(e, 400, "invalid_json", "", "the JSON header is not valid JSON: %s", jerr.text);
    json_t *root = call->root;
    static const char *const root_keys[] = {"id", "parameters", "inputs", "outputs",
                                            "model_name", "model_version", NULL};
    if (!json_is_object(root))
        return srv_fail(e, 400, "invalid_json", "", "the request must be a JSON object");
    if (only_keys(root, root_keys, "field", e))
        return -1;
    json_t *id = json_object_get(root, "id");
    if (id && !json_is_string(id))
        return srv_fail(e, 400, "invalid_field", "id", "id must be a string");
    char name[64];
    model_name(m, name, sizeof name);
    json_t *mn = json_object_get(root, "model_name");
    if (mn && (!json_is_string(mn) || strcmp(json_string_value(mn), name)))
        return srv_fail(e, 400, "invalid_field", "model_name",
                        "model_name does not match the model in the path (%s)", name);

    json_t *params = json_object_get(root, "parameters");
    if (params && !json_is_object(params))
        return srv_fail(e, 400, "invalid_field", "parameters", "parameters must be an object");
    if (!params) {
        params = json_object();
        if (!params || json_object_set_new(root, "parameters", params))
            return srv_fail(e, 503, "overloaded", "", "out of memory");
    }
    if (only_keys(params, m == KS_MULTIHEAD ? mha_params : rule_params, "parameter", e))
        return -1;
    int bin_all;
    if (opt_bool(params, "binary_data_output", 0, "parameters", &bin_all, e))
        return -1;
    /* hard: "argmax" or the top_k integer (parameters hold no objects). */
    attn_options opt = attn_options_default();
    json_t *hard = json_object_get(params, "hard");
    int64_t top_k = 0;
    int hard_topk = hard && json_is_integer(hard);
    if (hard_topk) {
        top_k = json_integer_value(hard);
        json_object_del(params, "hard"); /* the native reader wants {"top_k": k} */
    } else if (hard && !(json_is_string(hard) && !strcmp(json_string_value(hard), "argmax"))) {
        return srv_fail(e, 400, "invalid_field", "hard",
                        "hard must be \"argmax\" or an integer k (keep the top k)");
    }
    if (srv_get_scalar_options(params, &opt, e))
        return -1;
    if (hard_topk) {
        opt.hard = ATTN_HARD_TOPK;
        opt.top_k = top_k;
    }
    uint64_t seed = 0;
    if (srv_get_seed(params, &seed, e))
        return -1;

    ks_output outs[2];
    int n_out, listed;
    if (read_outputs(root, bin_all, outs, &n_out, &listed, e))
        return -1;
    int want_w = 0;
    for (int i = 0; i < n_out; i++)
        want_w |= !strcmp(outs[i].name, "weights");
    if (listed) {
        if (want_w && !opt.need_weights)
            return srv_fail(e, 400, "invalid_field", "outputs",
                            "outputs asks for weights but need_weights is false");
        opt.need_weights = want_w; /* weights not asked for are not built */
    } else if (!opt.need_weights) {
        n_out = 1; /* output alone */
    }

    json_t *ji = json_object_get(root, "inputs");
    if (!json_is_array(ji) || json_array_size(ji) == 0)
        return srv_fail(e, 400, "missing_field", "inputs", "inputs must be a non-empty array");
    if (json_array_size(ji) > KS_MAX_INPUTS)
        return srv_fail(e, 400, "invalid_field", "inputs", "inputs has %zu tensors; at most %d",
                        json_array_size(ji), KS_MAX_INPUTS);
    size_t n_in = json_array_size(ji);
    ks_input in[KS_MAX_INPUTS];
    memset(in, 0, sizeof in);
    srv_codec c = {&call->arena, &call->scan, srv_cfg.max_elements};
    const char *bin = body + hl;
    uint64_t bin_len = len - hl, off = 0;
    for (size_t i = 0; i < n_in; i++) {
        if (read_input(m, call, &c, json_array_get(ji, i), bin, bin_len, &off, &in[i], e))
            return -1;
        for (size_t k = 0; k < i; k++)
            if (!strcmp(in[k].name, in[i].name))
                return srv_fail(e, 400, "invalid_field", in[i].name, "input %s is given twice",
                                in[i].name);
    }
    if (off != bin_len)
        return srv_fail(e, 400, "invalid_field", "binary_data_size",
                        "the body has %llu bytes of binary data after the JSON header but the "
                        "inputs' binary_data_size add up to %llu",
                        (unsigned long long)bin_len, (unsigned long long)off);

    /* Inputs to the library's request: tensors by name, the rest learned
     * parameters under their state_dict names. */
    attn_tensor q = {0}, k = {0}, v = {0};
    attn_named *pn = srv_arena_alloc(&call->arena, n_in * sizeof *pn);
    size_t np = 0;
    if (!pn)
        return srv_fail(e, 503, "overloaded", "", "out of memory");
    for (size_t i = 0; i < n_in; i++) {
        const char *nm = in[i].name;
        if (!strcmp(nm, "query")) q = as_tensor(&in[i]);
        else if (!strcmp(nm, "key")) k = as_tensor(&in[i]);
        else if (!strcmp(nm, "value")) v = as_tensor(&in[i]);
        else if (!strcmp(nm, "mask")) opt.mask = as_mask(&in[i]);
        else if (!strcmp(nm, "key_mask")) opt.key_mask = as_mask(&in[i]);
        else if (!strcmp(nm, "bias")) opt.bias = as_tensor(&in[i]);
        else pn[np++] = (attn_named){nm, as_tensor(&in[i])};
    }
    if (!q.rank)
        return srv_fail(e, 400, "missing_field", "query", "input query is required");
    attn_shapes sh;
    float *o, *w;
    if (m == KS_MULTIHEAD) {
        attn_mha_request req = attn_mha_request_default();
        req.query = q;
        req.key = k;
        req.value = v;
        req.opt = opt;
        req.params = pn;
        req.n_params = np;
        if (srv_get_multihead_options(params, &req, e) ||
            srv_run_multihead(call, &req, seed, t0, &sh, &o, &w, e))
            return -1;
    } else {
        if (!k.rank || !v.rank)
            return srv_fail(e, 400, "missing_field", k.rank ? "value" : "key",
                            "inputs key and value are required");
        attn_request req = attn_request_default((attn_rule)m);
        req.query = q;
        req.key = k;
        req.value = v;
        req.opt = opt;
        req.params = pn;
        req.n_params = np;
        if (srv_get_attention_options(params, &req, e) ||
            srv_run_attention(call, &req, seed, t0, &sh, &o, &w, e))
            return -1;
    }
    double t1 = srv_now_ms();
    int rc = write_response(r, m, id, outs, n_out, &sh, o, w, e);
    call->t_encode = srv_now_ms() - t1;
    return rc;
}

void srv_kserve_serve(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    switch (t->ks_op) {
    case KS_SERVER:
        srv_buf_puts(&r->body, "{\"name\":\"" KS_SERVER_NAME "\",\"version\":\"" KS_SERVER_VERSION
                               "\",\"extensions\":[\"binary_tensor_data\"]}\n");
        return;
    case KS_LIVE:
        srv_buf_puts(&r->body, "{\"live\":true}\n");
        return;
    case KS_READY:
    case KS_MODEL_READY:
        if (srv_draining) {
            ks_error(r, 503, "the server is shutting down");
        } else if (t->ks_op == KS_READY) {
            srv_buf_puts(&r->body, "{\"ready\":true}\n");
        } else {
            char name[64];
            model_name(t->ks_model, name, sizeof name);
            srv_buf_printf(&r->body, "{\"name\":\"%s\",\"ready\":true}\n", name);
        }
        return;
    case KS_MODEL:
        model_metadata(t->ks_model, &r->body);
        return;
    case KS_INFER:
        break;
    default:
        ks_error(r, 404, "no such route");
        return;
    }
    srv_err e;
    srv_call call;
    memset(&call, 0, sizeof call);
    int rc = infer(t, body ? body : "", body ? len : 0, &call, r, &e);
    r->t_parse = call.t_parse;
    r->t_compute = call.t_compute;
    r->t_encode = call.t_encode;
    srv_call_free(&call);
    if (rc != 0)
        srv_kserve_error(r, &e);
}
