/* native.c - the native front end: POST /attention/{rule} and POST /multihead
 * bodies to a job, the job's 200 body, and the front end's errors and
 * content type (srv_native_front). */
#include "srv.h"

#include <string.h>
#include <strings.h>

/* One allocation for the whole reply instead of a doubling series: at most
 * 16 bytes a float as text (4/3 * 4 as base64). */
static void reserve_reply(srv_buf *out, const attn_shapes *sh, int b64)
{
    double n = (double)sh->out_count + (double)sh->w_count;
    double bytes = n * (b64 ? 6.0 : 16.0) + 512.0;
    if (bytes < 1e12)
        srv_buf_reserve(out, (size_t)bytes);
}

static void encode_params(srv_buf *out, const srv_job *j)
{
    size_t n;
    const attn_named *items = srv_job_params(j, &n);
    srv_buf_puts(out, ",\"params\":{");
    for (size_t i = 0; i < n; i++) {
        if (i)
            srv_buf_putc(out, ',');
        srv_buf_json_str(out, items[i].name);
        srv_buf_putc(out, ':');
        srv_encode_tensor(out, items[i].t.data, items[i].t.rank, items[i].t.shape, j->b64);
    }
    srv_buf_putc(out, '}');
}

/* The 200 body: {"rule"?, "output", "weights"?, "lse"?, "params"?, "layout"?}. */
static int encode(srv_call *call, const srv_job *j, srv_buf *out, srv_err *e)
{
    double t0 = srv_now_ms();
    const attn_shapes *sh = &j->sh;
    reserve_reply(out, sh, j->b64);
    if (j->kind == SRV_JOB_ATTENTION) {
        srv_buf_puts(out, "{\"rule\":");
        srv_buf_json_str(out, attn_rule_name(j->u.att.rule));
        srv_buf_puts(out, ",\"output\":");
    } else {
        srv_buf_puts(out, "{\"output\":");
    }
    srv_encode_tensor(out, j->out, sh->out_rank, sh->out_shape, j->b64);
    if (srv_job_need_weights(j)) {
        srv_buf_puts(out, ",\"weights\":");
        srv_encode_tensor(out, j->weights, sh->w_rank, sh->w_shape, j->b64);
    }
    if (j->lse) { /* as JSON, a row with nothing to attend (-inf) is null */
        srv_buf_puts(out, ",\"lse\":");
        srv_encode_tensor(out, j->lse, j->lse_rank, j->lse_shape, j->b64);
    }
    if (j->return_params)
        encode_params(out, j);
    if (j->layout) {
        srv_buf_puts(out, ",\"layout\":");
        srv_encode_mask2(out, j->layout, sh->layout_rows, sh->layout_cols, j->b64);
    }
    srv_buf_puts(out, "}\n");
    call->t_encode = srv_now_ms() - t0;
    if (out->failed)
        return srv_fail(e, 413, "too_large", "", "not enough memory to write the response");
    return 0;
}

/* Body to job, run, job to reply. */
static void serve(srv_job *j, const char *body, size_t len, srv_reply *r)
{
    srv_err e;
    srv_call call;
    memset(&call, 0, sizeof call);
    call.share_root = 1; /* srv_fields_read only reads it */
    call.t0 = srv_now_ms();
    srv_codec c = {&call.arena, &call.scan, srv_cfg.max_elements};
    int rc = srv_call_parse(&call, body, len, "the body", &e) ||
             srv_fields_read(call.root, SRV_F_BODY, "field", &c, j, &e) ||
             srv_job_run(&call, j, &e) || encode(&call, j, &r->body, &e);
    srv_reply_timings(r, &call);
    srv_call_free(&call);
    if (rc)
        srv_reply_error(r, &e);
}

void srv_serve_attention(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    srv_job j;
    srv_job_init(&j, SRV_JOB_ATTENTION, t->rule);
    serve(&j, body, len, r);
}

void srv_serve_multihead(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)t;
    srv_job j;
    srv_job_init(&j, SRV_JOB_MULTIHEAD, ATTN_RULE_DOT);
    serve(&j, body, len, r);
}

/* ------------------------------------------------------------ the native front end */

static int json_content_type(const char *ct)
{
    /* application/json, optionally followed by parameters (charset). */
    static const char want[] = "application/json";
    if (!ct)
        return 1; /* no claim at all: read it as JSON */
    while (*ct == ' ')
        ct++;
    if (strncasecmp(ct, want, sizeof want - 1) != 0)
        return 0;
    ct += sizeof want - 1;
    while (*ct == ' ')
        ct++;
    return *ct == '\0' || *ct == ';';
}

static void native_not_found(const char *path, srv_err *e)
{
    srv_fail(e, 404, "not_found", "", "no route %.200s; see /openapi.yaml for the routes", path);
}

const srv_front srv_native_front = {srv_reply_error, json_content_type, "application/json", NULL,
                                    native_not_found,
                                    SRV_R_OTHER};
