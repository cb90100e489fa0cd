/* kserve.c - the KServe v2 / Open Inference Protocol front end: its models
 * (each rule, multihead, and multihead-decode: decode sessions driven by
 * Triton's sequence parameters), errors, health and metadata. Inference
 * requests are in kserve_infer.c. */
#include "srv.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define KS_SERVER_NAME "attention-service"

/* --------------------------------------------------------------- errors */

/* The protocol's {"error": "message"}. It has no 422: a request whose
 * values do not fit the model is a bad request. Sizes (413) and load (503)
 * keep their status. */
static void ks_error(srv_reply *r, const srv_err *e)
{
    r->body.len = 0;
    r->body.failed = 0;
    r->status = e->status == 422 ? 400 : e->status;
    r->code = e->code;
    r->ctype = "application/json";
    r->infer_header_len = 0;
    if (r->status == 503 && !r->retry_after)
        r->retry_after = 1;
    srv_buf_puts(&r->body, "{\"error\":");
    srv_buf_json_str(&r->body, e->message);
    srv_buf_puts(&r->body, "}\n");
}

static void add_pattern(void *ud, const srv_route *row)
{
    char *list = ud;
    if (strstr(row->pattern, "/versions/") || !strcmp(row->pattern, "/v2/"))
        return; /* spellings of the rows listed */
    char item[80];
    snprintf(item, sizeof item, "%s%s", strcmp(row->method, "GET") ? "POST " : "", row->pattern);
    srv_name_list(list, 400, item);
}

static void ks_not_found(const char *path, srv_err *e)
{
    char list[400] = "";
    srv_routes_each(&srv_kserve_front, add_pattern, list);
    srv_fail(e, 404, "not_found", "", "no route %.200s; the KServe v2 routes are %s", path, list);
}

/* An infer body: JSON, or binary tensor data as application/octet-stream
 * or application/vnd.*. */
static int ks_content_type(const char *ct)
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

const srv_front srv_kserve_front = {ks_error, ks_content_type,
                                    "application/json, application/octet-stream or application/vnd.*",
                                    "Inference-Header-Content-Length",
                                    ks_not_found, SRV_R_KSERVE};

/* --------------------------------------------------------------- models */

void srv_kserve_model_name(int m, char *out, size_t n)
{
    if (m == SRV_MODEL_MULTIHEAD)
        snprintf(out, n, "multihead");
    else if (m == SRV_MODEL_DECODE)
        snprintf(out, n, "multihead-decode");
    else
        snprintf(out, n, "attention-%s", attn_rule_name((attn_rule)m));
}

int srv_kserve_model(const char *name, size_t n, int *model, srv_err *e)
{
    char buf[64], list[300] = "";
    for (int m = 0; m < SRV_KS_N_MODELS; m++) {
        srv_kserve_model_name(m, buf, sizeof buf);
        if (strlen(buf) == n && memcmp(buf, name, n) == 0) {
            *model = m;
            return 0;
        }
    }
    for (int m = 0; m < SRV_KS_N_MODELS; m++) {
        srv_kserve_model_name(m, buf, sizeof buf);
        srv_name_list(list, sizeof list, buf);
    }
    return srv_fail(e, 404, "not_found", "", "no model named \"%.*s\"; the models are: %s",
                    n > 60 ? 60 : (int)n, name, list);
}

/* One version of every model; "/versions/1" may name it. */
int srv_kserve_version(const char *v, size_t n, int model, srv_err *e)
{
    if (n == strlen(SRV_KS_MODEL_VERSION) && !strncmp(v, SRV_KS_MODEL_VERSION, n))
        return 0;
    char name[64];
    srv_kserve_model_name(model, name, sizeof name);
    return srv_fail(e, 404, "not_found", "", "model %s has only version " SRV_KS_MODEL_VERSION, name);
}

/* --------------------------------------------------------------- GET routes */

void srv_serve_v2_server(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)t, (void)body, (void)len;
    srv_buf_puts(&r->body, "{\"name\":\"" KS_SERVER_NAME "\",\"version\":\"" SRV_VERSION
                           "\",\"extensions\":[\"binary_tensor_data\"]}\n");
}

void srv_serve_v2_live(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)t, (void)body, (void)len;
    srv_buf_puts(&r->body, "{\"live\":true}\n");
}

static int draining(srv_reply *r)
{
    if (!srv_draining)
        return 0;
    srv_err e;
    srv_fail(&e, 503, "overloaded", "", "the server is shutting down");
    ks_error(r, &e);
    return 1;
}

void srv_serve_v2_ready(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)t, (void)body, (void)len;
    if (!draining(r))
        srv_buf_puts(&r->body, "{\"ready\":true}\n");
}

void srv_serve_v2_model_ready(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)body, (void)len;
    char name[64];
    srv_kserve_model_name(t->model, name, sizeof name);
    if (!draining(r))
        srv_buf_printf(&r->body, "{\"name\":\"%s\",\"ready\":true}\n", name);
}

/* --------------------------------------------------------------- metadata */

/* "(Dq, Dk)" as [-1,-1]: digits stay, symbols become -1. */
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
    int n, mha, model;
} io_writer;

/* The decode model's inputs: a step's rows (query heads H, key and value
 * heads Hkv, head dim d), and per-head options at a sequence's start. */
static const char *decode_shape(const char *name)
{
    static const char *const shapes[][2] = {{"query", "(Tq, H, d)"}, {"key", "(T, Hkv, d)"},
                                            {"value", "(T, Hkv, d)"}, {"alibi", "(H)"},
                                            {"sinks", "(H)"}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(shapes[i][0], name))
            return shapes[i][1];
    return "(-1)";
}

/* A field's shape for the model: its decode, multi-head or rule form. */
static const char *field_shape(const io_writer *w, const srv_field *f)
{
    return w->model == SRV_MODEL_DECODE ? decode_shape(f->name) : w->mha ? f->mha_shape : f->shape;
}

static void put_io(io_writer *w, const char *name, const char *shape, const char *datatype)
{
    srv_buf_puts(w->b, w->n++ ? ",{\"name\":" : "{\"name\":");
    srv_buf_json_str(w->b, name);
    srv_buf_printf(w->b, ",\"datatype\":\"%s\",\"shape\":", datatype);
    put_shape_text(w->b, shape);
    srv_buf_putc(w->b, '}');
}

static void put_field(void *ud, const srv_field *f)
{
    io_writer *w = ud;
    if (!srv_field_applies(f, w->model))
        return;
    put_io(w, f->name, field_shape(w, f),
           f->type == SRV_FT_MASK ? "BOOL" : f->type == SRV_FT_INDICES ? "INT64" : "FP32");
}

/* One request parameter: its name, JSON type and meaning; on the decode
 * model, whether only a sequence's start takes it. */
static void put_param(void *ud, const srv_field *f)
{
    io_writer *w = ud;
    if (!srv_field_applies(f, w->model))
        return;
    srv_buf_puts(w->b, w->n++ ? ",{\"name\":" : "{\"name\":");
    srv_buf_json_str(w->b, f->name);
    srv_buf_puts(w->b, ",\"type\":");
    srv_buf_json_str(w->b, srv_field_type(f));
    if (w->model == SRV_MODEL_DECODE)
        srv_buf_puts(w->b, (f->where & SRV_F_SES_STEP) ? ",\"sequence_start_only\":false"
                                                       : ",\"sequence_start_only\":true");
    srv_buf_puts(w->b, ",\"description\":");
    srv_buf_json_str(w->b, f->desc);
    srv_buf_putc(w->b, '}');
}

static void put_outputs(srv_buf *b, int m)
{
    int mha = m == SRV_MODEL_MULTIHEAD;
    io_writer wo = {b, 0, mha, m};
    if (m == SRV_MODEL_DECODE) {
        put_io(&wo, "output", "(Tq, H, d)", "FP32");
        put_io(&wo, "weights", "(H, Tq, n)", "FP32");
        put_io(&wo, "lse", "(H, Tq)", "FP32");
        return;
    }
    put_io(&wo, "output", m == ATTN_RULE_CONCAT ? "(B, Lq, Dout)" : "(B, Lq, Dv)", "FP32");
    put_io(&wo, "weights", mha ? "(B, H, Lq, Lk)" : "(B, Lq, Lk)", "FP32");
    if (mha || attn_rule_takes((attn_rule)m, ATTN_OPT_SINKS)) /* a softmax over the keys */
        put_io(&wo, "lse", mha ? "(B, H, Lq)" : "(B, Lq)", "FP32");
    if (mha || m == ATTN_RULE_DOT || m == ATTN_RULE_SCALED_DOT) /* sparsity's block layout */
        put_io(&wo, "layout", "(Rb, Cb)", "BOOL");
}

void srv_serve_v2_model(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)body, (void)len;
    int m = t->model, mha = m == SRV_MODEL_MULTIHEAD;
    char name[64];
    srv_kserve_model_name(m, name, sizeof name);
    srv_buf *b = &r->body;
    srv_buf_puts(b, "{\"name\":");
    srv_buf_json_str(b, name);
    srv_buf_puts(b, ",\"versions\":[\"" SRV_KS_MODEL_VERSION "\"],\"platform\":\"attention-c\",\"inputs\":[");
    io_writer w = {b, 0, mha, m};
    srv_fields_each(srv_kserve_where(m, SRV_F_KS_INPUT), put_field, &w);
    const attn_rule_info *ri = m < ATTN_RULE_COUNT ? attn_rule_describe((attn_rule)m) : NULL;
    for (size_t i = 0; ri && i < ri->n_params; i++)
        put_io(&w, ri->params[i].name, ri->params[i].shape, "FP32");
    srv_buf_puts(b, "],\"outputs\":[");
    put_outputs(b, m);
    srv_buf_puts(b, "],\"parameters\":[");
    io_writer wp = {b, 0, mha, m};
    srv_fields_each(srv_kserve_where(m, SRV_F_KS_PARAM), put_param, &wp);
    srv_buf_puts(b, "]}\n");
}

unsigned srv_kserve_where(int m, unsigned place)
{
    if (m == SRV_MODEL_MULTIHEAD)
        return SRV_F_MHA | place;
    if (m == SRV_MODEL_DECODE) /* a sequence's start takes the creation fields too */
        return SRV_F_SES_NEW | SRV_F_SES_STEP | place;
    return SRV_F_ATT | place | (m == ATTN_RULE_CONCAT ? SRV_F_CONCAT : 0u);
}
