/* error.c - the contract's error envelope and the library-status mapping. */
#include "srv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int srv_fail(srv_err *e, int status, const char *code, const char *field,
             const char *fmt, ...)
{
    e->status = status;
    e->code = code;
    snprintf(e->field, sizeof e->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

int srv_fail_lib(srv_err *e, attn_status st, const attn_error *ae)
{
    const char *field = ae ? ae->field : "";
    if (!strcmp(field, "lse")) /* the library's lse buffer is the request's return_lse */
        field = "return_lse";
    const char *msg = (ae && ae->message[0]) ? ae->message : attn_status_str(st);
    switch (st) {
    case ATTN_ERR_SHAPE:
        return srv_fail(e, 422, "shape_mismatch", field, "%s", msg);
    case ATTN_ERR_PARAM:
        return srv_fail(e, 422, "invalid_param", field, "%s", msg);
    case ATTN_ERR_TOO_LARGE:
        return srv_fail(e, 413, "too_large", field, "%s", msg);
    case ATTN_ERR_NOMEM:
        return srv_fail(e, 503, "overloaded", field, "out of memory: %s", msg);
    case ATTN_ERR_TIMEOUT:
        return srv_fail(e, 504, "compute_timeout", field,
                        "the request's computation passed this server's limit of %u s "
                        "(ATTN_COMPUTE_TIMEOUT); send less work, or split it into requests",
                        srv_cfg.compute_timeout);
    case ATTN_ERR_CANCELLED: /* seen by no one but the logs and the metrics */
        return srv_fail(e, 499, "client_closed", field, "the client closed the connection");
    default:
        return srv_fail(e, 500, "internal", field, "%s", msg);
    }
}

void srv_err_json(const srv_err *e, srv_buf *b)
{
    srv_buf_puts(b, "{\"error\":{\"code\":");
    srv_buf_json_str(b, e->code);
    srv_buf_puts(b, ",\"message\":");
    srv_buf_json_str(b, e->message);
    srv_buf_puts(b, ",\"field\":");
    srv_buf_json_str(b, e->field); /* "" when no one field is at fault */
    srv_buf_puts(b, "}}\n");
}
