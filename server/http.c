/* http.c - the libmicrohttpd daemon: per-request state, body accumulation
 * under the cap, the response headers every reply carries, and the access
 * log. Route logic lives in routes.c. */
#include "srv.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define DISCARD_MAX ((uint64_t)16 << 20) /* bytes read past the cap before closing */

/* libmicrohttpd reads a body into what is left of a connection's memory
 * after its request line and headers: with its default 32 KiB that is
 * 16 KiB a read, and an 8.4 MB body took 5.3-6.7 ms to arrive where a
 * server that drops it took 3 (2026-12-01, loopback); at 256 KiB it took
 * 3.8-4.3. The larger memory would also let far larger request lines and
 * headers through, so the service keeps its own bounds on them below (the
 * same as the nginx of docker/), answered with its JSON errors. */
#define CONN_MEMORY ((size_t)256 << 10)
#define MAX_REQUEST_LINE 8192 /* path and query */
#define MAX_HEADER_LINE 8192
#define MAX_HEADERS 16384 /* all header lines together */

volatile int srv_draining;
/* When the drain began (srv_now_ms); a body still arriving DRAIN_UPLOAD_MS
 * later is answered 503 at its next bytes rather than waited for. */
static volatile double drain_began;
#define DRAIN_UPLOAD_MS 2000.0
/* Requests whose body has not all arrived: a second past DRAIN_UPLOAD_MS
 * (when any sender of a byte a second has had its 503) the drain no longer
 * waits for them (see srv_http_busy). */
static atomic_int uploading;
#define DRAIN_STALLED_MS (DRAIN_UPLOAD_MS + 1000.0)
static struct MHD_Daemon *daemon_;

/* One request's state, from its first callback to its completion. */
typedef struct req_state {
    srv_target target;
    char method[16];
    char path[256];
    double t0;            /* its headers' arrival (srv_now_ms: CLOCK_MONOTONIC) */
    srv_body body;
    int body_over;        /* grew past the cap while chunked */
    int status;
    uint64_t bytes_in, bytes_out;
    int has_pending;      /* a reply decided at the first call, sent at the next */
    srv_reply pending;
    struct MHD_Connection *conn; /* for the offloaded job to resume */
    srv_task task;        /* its run on a kept thread, when offloaded */
    char origin[256];     /* an Origin on the CORS allow-list, echoed back; "" = none */
    int preflight;        /* an OPTIONS preflight: answer with the CORS method list */
    int uploading;        /* counted in uploading: its body is still arriving */
    const char *code;     /* the answer's error code (static), NULL for none */
    char client[INET6_ADDRSTRLEN]; /* the client's address, for the access log */
    char id[65];          /* X-Request-Id: the client's, else one of ours */
} req_state;

static uint64_t id_seed; /* set by srv_http_start before any request */
static _Atomic uint64_t id_next;

/* The request's id: the client's (or its balancer's) X-Request-Id when it
 * is 1 to 64 characters of letters, digits and ._:-, else 16 hex digits
 * of our own (a counter mixed with a start-up seed: distinct across
 * restarts, no syscall a request). Echoed in the answer's X-Request-Id and
 * written in its access line, so one request can be found on both sides. */
static void request_id(struct MHD_Connection *conn, char id[65])
{
    const char *x = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    size_t n = x ? strspn(x, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") : 0;
    if (n > 0 && n <= 64 && !x[n]) {
        memcpy(id, x, n + 1);
        return;
    }
    uint64_t state = id_seed + atomic_fetch_add(&id_next, 1) * 0x9E3779B97F4A7C15ull;
    snprintf(id, 65, "%016llx", (unsigned long long)attn_splitmix64(&state));
}

/* Whether origin is on ATTN_CORS_ORIGINS (comma-separated, exact match,
 * or "*" for any). Off (NULL) by default: no CORS headers at all. */
static int cors_allowed(const char *origin)
{
    const char *list = srv_cfg.cors_origins;
    if (!list || !origin || !*origin)
        return 0;
    size_t ol = strlen(origin);
    while (*list) {
        while (*list == ' ' || *list == ',')
            list++;
        size_t n = strcspn(list, ",");
        size_t k = n;
        while (k && list[k - 1] == ' ')
            k--;
        if ((k == 1 && list[0] == '*') || (k == ol && strncmp(list, origin, k) == 0))
            return 1;
        list += n;
    }
    return 0;
}

/* Authorization: Bearer <ATTN_TOKEN>, compared in time independent of
 * where the first difference is. */
static int authorized(const char *hdr)
{
    static const char scheme[] = "Bearer ";
    if (!srv_cfg.token)
        return 1;
    if (!hdr || strncasecmp(hdr, scheme, sizeof scheme - 1) != 0)
        return 0;
    hdr += sizeof scheme - 1;
    size_t hl = strlen(hdr), tl = strlen(srv_cfg.token);
    unsigned diff = hl != tl;
    for (size_t i = 0; i < hl; i++)
        diff |= (unsigned char)hdr[i] ^ (unsigned char)srv_cfg.token[i < tl ? i : 0];
    return diff == 0;
}

/* The socket of conn, -1 when MHD does not say. */
static int conn_fd(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* Serves the body held in rs (on conn) into r, the codec taking the
 * strings decoded as they came, its computations stopped when the client
 * goes, then frees the body. */
static void serve_held(struct MHD_Connection *conn, req_state *rs, srv_reply *r)
{
    srv_watch w;
    srv_watch_init(&w, conn_fd(conn));
    srv_watch *prev = srv_watch_use(&w);
    srv_body_use(&rs->body);
    srv_route_serve(&rs->target, rs->body.text, rs->body.len, r);
    srv_body_use(NULL);
    srv_watch_use(prev);
    srv_body_free(&rs->body);
}

_Thread_local int srv_counted;

/* A large request runs on a kept thread (tasks.c) while its connection
 * is suspended: the polling thread goes on serving its other connections
 * (health checks, small requests) meanwhile. */
static void offloaded(void *arg)
{
    req_state *rs = arg;
    srv_reply_init(&rs->pending);
    srv_counted = 1;
    serve_held(rs->conn, rs, &rs->pending);
    srv_counted = 0;
    srv_compute_leave();
    rs->has_pending = 1;
    MHD_resume_connection(rs->conn); /* last touch: MHD owns rs again */
}

/* Starts rs on a kept thread. Returns 0, or -1 when it must not run: too
 * many large requests already (503) or no thread to be had. */
static int offload(struct MHD_Connection *conn, req_state *rs)
{
    if (srv_compute_enter() != 0)
        return -1;
    rs->conn = conn;
    MHD_suspend_connection(conn); /* before a thread can resume it */
    if (srv_task_start(&rs->task, offloaded, rs, 0) != 0) {
        MHD_resume_connection(conn);
        srv_compute_leave();
        return -1;
    }
    return 0;
}

/* Whether the request announced a body. A reply queued before MHD has
 * read the whole request closes the connection, so replies to body-less
 * requests wait for the next callback and keep-alive survives. */
static int has_body(struct MHD_Connection *conn)
{
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    return te != NULL || (cl != NULL && strcmp(cl, "0") != 0);
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, req_state *rs, srv_reply *r);

static enum MHD_Result send_or_defer(struct MHD_Connection *conn, req_state *rs, srv_reply *r)
{
    if (has_body(conn))
        return send_reply(conn, rs, r);
    rs->pending = *r;
    rs->has_pending = 1;
    return MHD_YES;
}

/* An error in the form of the request's front end (native before routing). */
static void reply_error(const req_state *rs, srv_reply *r, const srv_err *e)
{
    (rs->target.row ? rs->target.row->front->error : srv_reply_error)(r, e);
}

/* Server-Timing: "parse;dur=%.3f, compute;dur=%.3f, encode;dur=%.3f",
 * without printf. */
static void server_timing(const srv_reply *r, char timing[160])
{
    size_t tn = 0;
    memcpy(timing, "parse;dur=", 10);
    tn = 10 + srv_fmt_ms(r->t_parse, timing + 10);
    memcpy(timing + tn, ", compute;dur=", 14);
    tn += 14;
    tn += srv_fmt_ms(r->t_compute, timing + tn);
    memcpy(timing + tn, ", encode;dur=", 13);
    tn += 13;
    tn += srv_fmt_ms(r->t_encode, timing + tn);
    timing[tn] = '\0';
}

/* The headers every reply carries, and those its route or CORS add. */
static void add_headers(struct MHD_Response *resp, const req_state *rs, const srv_reply *r)
{
    char timing[160];
    server_timing(r, timing);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->ctype);
    MHD_add_response_header(resp, "Server-Timing", timing);
    MHD_add_response_header(resp, "X-Request-Id", rs->id);
    if (r->allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (r->infer_header_len) {
        char ihl[24];
        snprintf(ihl, sizeof ihl, "%llu", (unsigned long long)r->infer_header_len);
        MHD_add_response_header(resp, "Inference-Header-Content-Length", ihl);
    }
    if (r->retry_after) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->retry_after);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    if (r->status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"attn\"");
    if (r->status == 408) /* the rest of a late body is not read */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (rs->origin[0]) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", rs->origin);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
        MHD_add_response_header(resp, "Access-Control-Expose-Headers",
                                "Server-Timing, Retry-After, X-Request-Id");
    }
    if (rs->preflight) {
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                                "Authorization, Content-Type, Inference-Header-Content-Length, X-Request-Id");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    }
}

static size_t log_safe(const char *s, char *out);

/* A 5xx answer at warn, with its body (the error's message), since the
 * access line has only its code: a request the server could not serve is
 * worth an operator's look. Capped: overload can make one per request. */
static void log_server_error(const req_state *rs, const srv_reply *r)
{
    if (r->status < 500 || srv_cfg.log_level < SRV_LOG_WARN)
        return;
    char method[3 * sizeof rs->method], path[3 * sizeof rs->path], text[400];
    method[log_safe(rs->method, method)] = '\0';
    path[log_safe(rs->path, path)] = '\0';
    size_t n = r->body.data && r->fd < 0 ? r->body.len : 0;
    while (n && (r->body.data[n - 1] == '\n' || r->body.data[n - 1] == '\r'))
        n--;
    if (n > sizeof text - 1)
        n = sizeof text - 1;
    for (size_t i = 0; i < n; i++) { /* one line: control bytes and non-ASCII as '?' */
        unsigned char c = (unsigned char)r->body.data[i];
        text[i] = c < 0x20 || c > 0x7e ? '?' : (char)c;
    }
    text[n] = '\0';
    srv_warn_capped("%s %s %s answered %d (id %s): %s", rs->client, method, path, r->status, rs->id, text);
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, req_state *rs, srv_reply *r)
{
    struct MHD_Response *resp;
    if (r->fd >= 0) {
        resp = MHD_create_response_from_fd64(r->fd_size, r->fd);
        rs->bytes_out = r->fd_size;
    } else {
        if (r->body.failed) {
            srv_err e;
            srv_fail(&e, 413, "too_large", "", "the response is too large to build");
            srv_buf_free(&r->body);
            reply_error(rs, r, &e);
        }
        log_server_error(rs, r);
        rs->bytes_out = r->body.len;
        /* The answer's own buffer, no copy: MHD hands it to srv_big_free
         * when sent, which keeps a large one for the next large answer. */
        resp = r->body.data ? MHD_create_response_from_buffer_with_free_callback(r->body.len, r->body.data,
                                                                                 srv_big_free)
                            : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (resp)
            r->body.data = NULL; /* MHD's now */
    }
    if (!resp) {
        if (r->fd >= 0)
            close(r->fd);
        srv_buf_free(&r->body);
        return MHD_NO;
    }
    add_headers(resp, rs, r);
    if (r->fd < 0 && r->status < 300 && strncmp(r->ctype, "text/html", 9) != 0)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    rs->status = r->status;
    rs->code = r->code;
    if (!strcmp(rs->method, "HEAD")) /* the headers alone go out */
        rs->bytes_out = 0;
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ok;
}

static enum MHD_Result send_error(struct MHD_Connection *conn, req_state *rs, int status,
                                  const char *code, const char *msg)
{
    srv_reply r;
    srv_err e;
    srv_reply_init(&r);
    srv_fail(&e, status, code, "", "%s", msg);
    reply_error(rs, &r, &e);
    return send_reply(conn, rs, &r);
}

/* Adds up the request's query (or header) lines: their bytes in all and
 * the longest. */
typedef struct {
    size_t total, longest;
} line_sizes;

static enum MHD_Result add_line(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
    (void)kind;
    line_sizes *z = cls;
    size_t n = strlen(key) + (value ? strlen(value) : 0) + 4; /* ": " or "=&", CRLF */
    z->total += n;
    if (n > z->longest)
        z->longest = n;
    return MHD_YES;
}

/* 414 or 431 when the request line or headers pass the service's bounds
 * (see CONN_MEMORY); MHD_YES with rs->status still 0 when they do not. */
static enum MHD_Result check_head(struct MHD_Connection *conn, req_state *rs, const char *url)
{
    line_sizes q = {strlen(url), 0}, h = {0, 0};
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, add_line, &q);
    if (q.total > MAX_REQUEST_LINE)
        return send_error(conn, rs, 414, "uri_too_long",
                          "the request line is over 8 KB; send the inputs in the body");
    MHD_get_connection_values(conn, MHD_HEADER_KIND, add_line, &h);
    if (h.longest > MAX_HEADER_LINE || h.total > MAX_HEADERS)
        return send_error(conn, rs, 431, "headers_too_large",
                          "a request header line is over 8 KB, or the headers are over 16 KB in all");
    return MHD_YES;
}

/* Whether the body's length is stated once: every Content-Length the
 * same as cl, and no Transfer-Encoding beside it. Otherwise a proxy in
 * front may take another length than libmicrohttpd (which reads the
 * first Content-Length, or the chunks) and the two split requests apart
 * differently (request smuggling). */
typedef struct {
    const char *cl;
    int conflict;
} length_check;

static enum MHD_Result length_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    length_check *c = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) ||
        (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) && value && strcmp(value, c->cl)))
        c->conflict = 1;
    return MHD_YES;
}

static int one_length(struct MHD_Connection *conn, const char *cl)
{
    length_check c = {cl, 0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, length_header, &c);
    return !c.conflict;
}

/* A POST's headers that say how its body comes: one length, no coding
 * but chunked, within ATTN_MAX_BODY, a Content-Type its front end reads;
 * then the body's reader is set up for it. */
static enum MHD_Result accept_body(struct MHD_Connection *conn, req_state *rs)
{
    const srv_front *front = rs->target.row->front;
    size_t expect = 0; /* chunked */
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && !one_length(conn, cl))
        return send_error(conn, rs, 400, "invalid_request",
                          "the request's length is ambiguous: Content-Length given twice with "
                          "different values, or with Transfer-Encoding (RFC 9112, 6.3)");
    /* Any coding but chunked alone leaves no length to read the body by
     * (libmicrohttpd would wait for the idle timeout). */
    const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (te && strcasecmp(te, "chunked") != 0)
        return send_error(conn, rs, 400, "invalid_request",
                          "Transfer-Encoding other than chunked is not supported: send the body "
                          "with Content-Length, or chunked alone (RFC 9112, 6.3)");
    if (cl) {
        char *endp;
        unsigned long long n = strtoull(cl, &endp, 10);
        if (endp == cl || n > srv_cfg.max_body) {
            char msg[160];
            snprintf(msg, sizeof msg, "the body is %.40s bytes; this server accepts at most %zu",
                     cl, srv_cfg.max_body);
            return send_error(conn, rs, 413, "body_too_large", msg);
        }
        expect = (size_t)n;
    }
    if (front->length_header)
        srv_target_length(&rs->target, MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                                   front->length_header));
    const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!front->content_ok(ct)) {
        char msg[240];
        snprintf(msg, sizeof msg, "Content-Type %.100s is not supported; send %s", ct,
                 front->content_types);
        return send_error(conn, rs, 415, "unsupported_media_type", msg);
    }
    /* Only a JSON body may hold base64 strings (a KServe body may end in
     * raw tensor bytes: nothing there to decode). */
    srv_body_init(&rs->body, expect, srv_cfg.max_body, front == &srv_native_front);
    if (rs->target.len_hdr > 0 && rs->target.len_hdr_value < expect)
        srv_body_align(&rs->body, (size_t)rs->target.len_hdr_value); /* binary tensors in place */
    return MHD_YES;
}

static enum MHD_Result first_key(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind, (void)value;
    *(const char **)cls = key;
    return MHD_NO; /* the first is enough */
}

/* 400 for a route with a body that is given a query string: its fields
 * are read from the body alone, so ?causal=true would be ignored. 0 when
 * there is none. */
static int no_query(struct MHD_Connection *conn, srv_err *e)
{
    const char *key = NULL;
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, first_key, &key);
    if (!key)
        return 0;
    return srv_fail(e, 400, "unknown_field", key,
                    "query parameter \"%.60s\": this route reads its fields from the body only, "
                    "never from the query string", key);
}

/* The request's first call: its route, then, for a POST, whether its
 * headers let the body be read (all decided before a byte of it is). */
static enum MHD_Result begin_request(struct MHD_Connection *conn, req_state *rs,
                                     const char *url, const char *method)
{
    srv_reply r;
    srv_reply_init(&r);
    if (srv_cfg.cors_origins && strcmp(method, "OPTIONS") == 0) {
        /* A CORS preflight: 204 for any route that exists, whatever its
         * method; the browser then sends the real request. */
        if (srv_route_resolve("GET", url, &rs->target, &r) != 0 && r.status == 404)
            return send_or_defer(conn, rs, &r);
        srv_buf_free(&r.body);
        srv_reply_init(&r);
        r.status = 204;
        rs->preflight = 1;
        return send_or_defer(conn, rs, &r);
    }
    if (srv_route_resolve(method, url, &rs->target, &r) != 0)
        return send_or_defer(conn, rs, &r);
    int authed = authorized(MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                        MHD_HTTP_HEADER_AUTHORIZATION));
    /* Every route with a body needs the token, and so do GET and DELETE of
     * a session: they read and free a client's cache. */
    if (!rs->target.wants_body && (authed || rs->target.route != SRV_R_SESSION)) {
        srv_route_serve(&rs->target, NULL, 0, &r);
        return send_or_defer(conn, rs, &r);
    }
    srv_buf_free(&r.body);
    /* Before the body is read: an unauthorised client costs no memory. */
    srv_err e;
    if (!authed)
        srv_fail(&e, 401, "unauthorized", "", "this route needs Authorization: Bearer <token> "
                 "(the server's ATTN_TOKEN)");
    if (!authed || no_query(conn, &e)) {
        srv_reply_init(&r);
        reply_error(rs, &r, &e);
        return send_or_defer(conn, rs, &r);
    }
    if (srv_cfg.trust_session_id && (rs->target.route == SRV_R_SESSIONS ||
                                     (rs->target.route == SRV_R_KSERVE_INFER &&
                                      rs->target.model == SRV_MODEL_DECODE))) {
        const char *sid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Session-Id");
        if (sid && strlen(sid) < sizeof rs->target.session_hdr)
            strcpy(rs->target.session_hdr, sid);
    }
    return accept_body(conn, rs);
}

/* Whether the request's body is still coming past ATTN_REQUEST_TIMEOUT,
 * counted from its headers. The idle timeout (ATTN_TIMEOUT) is between
 * reads only: a client sending a byte every few seconds would keep its
 * connection for as long as its body lasts. */
static int past_deadline(const req_state *rs)
{
    return srv_cfg.request_timeout > 0 && srv_now_ms() - rs->t0 > srv_cfg.request_timeout * 1e3;
}

static void late_message(char msg[160])
{
    snprintf(msg, 160, "the request's body took over %u s to arrive (ATTN_REQUEST_TIMEOUT); "
             "the connection is closed", srv_cfg.request_timeout);
}

/* A reply's status line and headers, as text (cut_off writes them). */
typedef struct {
    char text[2048];
    size_t len;
} raw_head;

/* Appends a header line "key: value\r\n" (MHD_get_response_headers'
 * iterator), leaving room for the CRLF that ends the head. */
static enum MHD_Result head_line(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind;
    raw_head *h = cls;
    size_t room = sizeof h->text - 2 - h->len;
    int n = snprintf(h->text + h->len, room, "%s: %s\r\n", key, value);
    if (n > 0 && (size_t)n < room)
        h->len += (size_t)n;
    else
        h->text[h->len] = '\0'; /* a line that does not fit is left out */
    return MHD_YES;
}

/* Body bytes that will not be served: past the deadline (408
 * request_timeout) or while the server drains (503 overloaded); e says
 * which. Then the connection is closed. libmicrohttpd queues no reply
 * while a body is still arriving (0.9.75 refuses it until the body's end,
 * which a slow sender decides), so the reply, with the headers send_reply
 * would give it, is written on the socket here and MHD_NO closes the
 * connection. The socket is free to write: MHD sends nothing while it
 * reads a request's body. */
static enum MHD_Result cut_off(struct MHD_Connection *conn, req_state *rs, const srv_err *e)
{
    srv_reply r;
    srv_reply_init(&r);
    reply_error(rs, &r, e);
    log_server_error(rs, &r);
    rs->status = r.status;
    rs->code = r.code;
    rs->bytes_out = r.body.len;
    raw_head h;
    h.len = (size_t)snprintf(h.text, sizeof h.text, "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n",
                             r.status, MHD_get_reason_phrase_for((unsigned)r.status), r.body.len);
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (resp && ci && !r.body.failed) {
        add_headers(resp, rs, &r);
        MHD_get_response_headers(resp, head_line, &h);
        memcpy(h.text + h.len, "\r\n", 2);
        h.len += 2;
        struct iovec iov[2] = {{h.text, h.len}, {r.body.data, r.body.len}};
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
        /* Never waiting for the client: it is cut off either way. */
        if (sendmsg(ci->connect_fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)(h.len + r.body.len))
            rs->bytes_out = 0;
    }
    if (resp)
        MHD_destroy_response(resp);
    srv_buf_free(&r.body);
    return MHD_NO;
}

/* A piece of the body: kept while under the cap and the deadline. */
static enum MHD_Result receive_body(struct MHD_Connection *conn, req_state *rs,
                                    const char *upload, size_t n)
{
    rs->bytes_in += n;
    srv_err e;
    char msg[160];
    if (!rs->status && past_deadline(rs)) { /* a Content-Length body's bytes, or a chunk's */
        late_message(msg);
        srv_fail(&e, 408, "request_timeout", "", "%s", msg);
        return cut_off(conn, rs, &e);
    }
    if (!rs->status && srv_draining && srv_now_ms() - drain_began > DRAIN_UPLOAD_MS) {
        /* not worth holding the drain for a slow sender */
        srv_fail(&e, 503, "overloaded", "", "the server is shutting down; send the request again");
        return cut_off(conn, rs, &e);
    }
    if (rs->body_over) /* discarding; a sender that never stops is cut off */
        return rs->bytes_in - srv_cfg.max_body > DISCARD_MAX ? MHD_NO : MHD_YES;
    if (n > srv_cfg.max_body - rs->body.len) {
        /* A chunked body that grew past the cap: answer now if MHD lets
         * us, else drop the rest and answer at its end. */
        rs->body_over = 1;
        srv_body_free(&rs->body);
        snprintf(msg, sizeof msg, "the body is over %zu bytes, this server's cap", srv_cfg.max_body);
        if (send_error(conn, rs, 413, "body_too_large", msg) == MHD_YES)
            return MHD_YES;
        rs->status = 0;
        return MHD_YES;
    }
    return srv_body_append(&rs->body, upload, n) == 0 ? MHD_YES : MHD_NO;
}

/* The whole body is in: serve it here, or on a thread of its own, as its
 * route's row says (srv_route_schedule). */
static enum MHD_Result serve_body(struct MHD_Connection *conn, req_state *rs)
{
    if (srv_body_finish(&rs->body) != 0)
        return MHD_NO;
    int how = srv_route_schedule(&rs->target, rs->body.len);
    /* A request that would wait here (for its session's turn) would stall
     * this polling thread's other connections: it waits on a thread of its
     * own instead (here when none is to be had). */
    if (how == SRV_RUN_AWAY && srv_cfg.threads > 0 && offload(conn, rs) == 0)
        return MHD_YES;
    int heavy = how == SRV_RUN_HEAVY;
    if (heavy) {
        /* With a thread per connection the computation already has its own
         * thread (and MHD allows no suspending there): count it only. */
        int counted = srv_cfg.threads == 0 && srv_compute_enter() == 0;
        if (!counted && srv_cfg.threads > 0 && offload(conn, rs) == 0)
            return MHD_YES;
        if (!counted) {
            char msg[120];
            snprintf(msg, sizeof msg, "the server is busy with %d heavy requests; retry shortly",
                     srv_cfg.max_inflight);
            return send_error(conn, rs, 503, "overloaded", msg);
        }
    }
    srv_reply r;
    srv_reply_init(&r);
    srv_counted = heavy;
    serve_held(conn, rs, &r);
    srv_counted = 0;
    if (heavy)
        srv_compute_leave();
    return send_reply(conn, rs, &r);
}

/* The client's address as text ("-" when it cannot be had). */
static void client_address(struct MHD_Connection *conn, char out[INET6_ADDRSTRLEN])
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    const void *a = !sa ? NULL
                  : sa->sa_family == AF_INET ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                  : sa->sa_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
                  : NULL;
    if (!a || !inet_ntop(sa->sa_family, a, out, INET6_ADDRSTRLEN))
        strcpy(out, "-");
}

/* src into dst[cap], cut short if need be, always NUL-terminated. */
static void copy_cut(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void body_arrived(req_state *rs)
{
    if (rs->uploading) {
        rs->uploading = 0;
        atomic_fetch_sub(&uploading, 1);
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls)
{
    (void)cls;
    (void)version;
    req_state *rs = *con_cls;
    if (!rs) {
        if (!(rs = calloc(1, sizeof *rs)))
            return MHD_NO;
        *con_cls = rs;
        rs->t0 = srv_now_ms();
        client_address(conn, rs->client);
        copy_cut(rs->method, sizeof rs->method, method);
        copy_cut(rs->path, sizeof rs->path, url);
        request_id(conn, rs->id);
        rs->target.route = SRV_R_OTHER;
        srv_body_init(&rs->body, 0, srv_cfg.max_body, 0);
        srv_metrics_begin();
        rs->uploading = 1;
        atomic_fetch_add(&uploading, 1);
        const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
        if (cors_allowed(origin) && strlen(origin) < sizeof rs->origin) /* cut, it would match none */
            copy_cut(rs->origin, sizeof rs->origin, origin);
        enum MHD_Result head = check_head(conn, rs, url);
        if (head != MHD_YES || rs->status)
            return head;
        return begin_request(conn, rs, url, method);
    }
    if (*upload_size > 0) {
        size_t n = *upload_size;
        *upload_size = 0;
        return receive_body(conn, rs, upload, n);
    }
    body_arrived(rs);
    if (rs->has_pending) {
        rs->has_pending = 0;
        return send_reply(conn, rs, &rs->pending);
    }
    if (rs->status) /* already answered */
        return MHD_YES;
    if (past_deadline(rs)) { /* its last bytes (a chunked body's end, trailers) came late */
        char msg[160];
        late_message(msg);
        return send_error(conn, rs, 408, "request_timeout", msg);
    }
    if (rs->body_over) {
        char msg[120];
        snprintf(msg, sizeof msg, "the body is over %zu bytes, this server's cap", srv_cfg.max_body);
        return send_error(conn, rs, 413, "body_too_large", msg);
    }
    return serve_body(conn, rs);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* s as one field of a log line: spaces, control bytes, DEL, bytes from
 * 0x80 and '%' itself written %XX (a path's %0a, decoded, would start a
 * forged line, and its %20 a forged field); at most 3 strlen(s) bytes into
 * out. */
static size_t log_safe(const char *s, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p > 0x20 && *p < 0x7f && *p != '%') {
            out[n++] = (char)*p;
            continue;
        }
        out[n++] = '%';
        out[n++] = hex[*p >> 4];
        out[n++] = hex[*p & 15];
    }
    return n;
}

/* The access log line, "CLIENT METHOD PATH STATUS IN OUT 1.234ms [CODE]
 * id=ID" (after the log's time and level), formatted by hand: printf cost
 * more than the rest of the line's work. CODE is an error's code. */
static void access_line(const req_state *rs, int status, double ms)
{
    char line[sizeof rs->client + 3 * sizeof rs->method + 3 * sizeof rs->path + 4 * 24 + 80 +
              sizeof " id=" + sizeof rs->id];
    size_t n = strlen(rs->client);
    memcpy(line, rs->client, n);
    line[n++] = ' ';
    n += log_safe(rs->method, line + n);
    line[n++] = ' ';
    n += log_safe(rs->path, line + n);
    line[n++] = ' ';
    if (status < 0) { /* never: statuses are 100..599 or 499 */
        line[n++] = '-';
        status = -status;
    }
    n += srv_fmt_u64((uint64_t)status, line + n);
    line[n++] = ' ';
    n += srv_fmt_u64(rs->bytes_in, line + n);
    line[n++] = ' ';
    n += srv_fmt_u64(rs->bytes_out, line + n);
    line[n++] = ' ';
    n += srv_fmt_ms(ms, line + n);
    memcpy(line + n, "ms", 2);
    n += 2;
    if (rs->code) {
        size_t cl = strnlen(rs->code, 40);
        line[n++] = ' ';
        memcpy(line + n, rs->code, cl);
        n += cl;
    }
    size_t il = strlen(rs->id); /* only the characters request_id lets through */
    memcpy(line + n, " id=", 4);
    memcpy(line + n + 4, rs->id, il);
    n += 4 + il;
    srv_log_line(SRV_LOG_INFO, line, n);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    req_state *rs = *con_cls;
    if (!rs)
        return;
    *con_cls = NULL;
    body_arrived(rs);
    double ms = srv_now_ms() - rs->t0;
    /* Unanswered: the connection idled past ATTN_TIMEOUT (408), the
     * request broke HTTP (libmicrohttpd answered it 400, a malformed chunk
     * say), or the client left first (499, as nginx counts it). */
    if (!rs->status && rs->has_pending) { /* made, but the client left before it */
        rs->status = 499;
        rs->code = rs->pending.code;
    }
    int status = rs->status ? rs->status : rs->body_over ? 413 : 0;
    if (!status)
        status = toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? 408
               : toe == MHD_REQUEST_TERMINATED_WITH_ERROR      ? 400
                                                                : 499;
    srv_metrics_end(rs->target.route, rs->target.model, status, rs->bytes_in, rs->bytes_out, ms);
    if (srv_cfg.log_level >= SRV_LOG_INFO)
        access_line(rs, status, ms);
    if (rs->has_pending) { /* the client left before the reply */
        if (rs->pending.fd >= 0)
            close(rs->pending.fd);
        srv_buf_free(&rs->pending.body);
    }
    srv_body_free(&rs->body);
    free(rs);
}

/* Percent-decodes the URL path in place, as libmicrohttpd would, except
 * that %00 stays as it is: a decoded NUL would cut the path short, so
 * "/demo/index.html%00.txt" would serve index.html. Left encoded, it is
 * no route and no file (static names have no '%'). Returns the length. */
static size_t unescape_url(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    (void)conn;
    char *w = s;
    for (const char *p = s; *p; p++) {
        int hi, lo;
        if (*p == '%' && (hi = hexval(p[1])) >= 0 && (lo = hexval(p[2])) >= 0 && (hi | lo)) {
            *w++ = (char)(hi << 4 | lo);
            p += 2;
        } else {
            *w++ = *p;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* libmicrohttpd's messages, at warn; those a client causes at will at
 * info, with the access lines, so that a client cannot write warnings as
 * fast as it can connect: it hung up mid-request ("closed by remote
 * side"), its connection was closed on purpose ("Application reported
 * internal error": a 408 or a drain's 503 written by cut_off, or a sender
 * past the body cap), or it sent what libmicrohttpd answers itself (a
 * Content-Length that is not a number or too large, headers or a URL too
 * long, another HTTP version: "Error processing request", counted in
 * attn_http_refused_total, as no access line has them). A connection over
 * ATTN_MAX_PER_IP (libmicrohttpd: "Server reached connection limit") is
 * counted and named at warn, capped. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    if (strstr(msg, "reached connection limit")) {
        srv_metrics_refused(SRV_REFUSED_CONNECTION);
        if (srv_cfg.max_per_ip)
            srv_warn_capped("a connection was closed at once: ATTN_MAX_PER_IP (%u) connections from its "
                            "address are open", srv_cfg.max_per_ip);
        else
            srv_warn_capped("a connection was closed at once: ATTN_MAX_CONNECTIONS (%u) are open",
                            srv_cfg.max_connections);
        return;
    }
    if (strstr(msg, "Error processing request"))
        srv_metrics_refused(SRV_REFUSED_REQUEST);
    if (srv_cfg.log_level < SRV_LOG_WARN)
        return;
    static const char *const client_caused[] = {"remote side", "Application reported internal error",
                                                "Content-Length", "Error processing request"};
    int level = SRV_LOG_WARN;
    for (size_t i = 0; i < sizeof client_caused / sizeof *client_caused; i++)
        if (strstr(msg, client_caused[i]))
            level = SRV_LOG_INFO;
    srv_log(level, "microhttpd: %s", msg);
}

int srv_http_connections(void)
{
    const union MHD_DaemonInfo *i =
        daemon_ ? MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_CURRENT_CONNECTIONS) : NULL;
    return i ? (int)i->num_connections : 0;
}

/* At ATTN_MAX_CONNECTIONS new connections wait in the listen backlog,
 * unseen by libmicrohttpd and so by its log: say so, once a minute at
 * most while it lasts. */
void srv_http_watch(void)
{
    static double warned = -1e18;
    int open = srv_http_connections();
    if (open >= (int)srv_cfg.max_connections && srv_now_ms() - warned > 60000.0) {
        warned = srv_now_ms();
        srv_log(SRV_LOG_WARN, "%d connections open, ATTN_MAX_CONNECTIONS: new ones wait in the listen "
                "backlog until one closes (an idle one after ATTN_TIMEOUT, %us)", open, srv_cfg.timeout);
    }
}

int srv_http_start(void)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    struct sockaddr *sa;
    /* poll(), not epoll (which MHD_USE_AUTO picks on Linux): libmicrohttpd
     * 0.9.75's MHD_quiesce_daemon (a stop signal's first step) races an
     * epoll worker that is awake for the listening socket's removal, and
     * the loser aborts the process (MHD_PANIC "Failed to remove listen FD
     * from epoll set"): a test's server got SIGTERM just as a connection
     * closed, and died of SIGABRT instead of draining. Under poll() the
     * quiesce only signals the workers. */
    unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
                     MHD_ALLOW_SUSPEND_RESUME;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET, srv_cfg.bind, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)srv_cfg.port);
        sa = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, srv_cfg.bind, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)srv_cfg.port);
        sa = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        srv_log(SRV_LOG_ERROR, "ATTN_BIND %s is not an IPv4 or IPv6 address", srv_cfg.bind);
        return -1;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    id_seed = ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec) ^ ((uint64_t)getpid() << 32);
    /* threads = 0: a thread per connection, so a long computation never
     * holds up another connection (a polling pool accepts bursts of
     * connections on one thread, which then serves them in turn). */
    unsigned pool = srv_cfg.threads > 0 ? (unsigned)srv_cfg.threads : 0;
    if (!pool)
        flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG | (flags & MHD_USE_IPv6);
    daemon_ = MHD_start_daemon(flags, (uint16_t)srv_cfg.port, NULL, NULL, on_request, NULL,
                               MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
                               MHD_OPTION_SOCK_ADDR, sa,
                               /* no pool: repeat a harmless option instead */
                               pool ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_CONNECTION_LIMIT,
                               pool ? pool : srv_cfg.max_connections,
                               MHD_OPTION_THREAD_STACK_SIZE, (size_t)1 << 20,
                               MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONN_MEMORY,
                               MHD_OPTION_CONNECTION_TIMEOUT, srv_cfg.timeout,
                               MHD_OPTION_CONNECTION_LIMIT, srv_cfg.max_connections,
                               MHD_OPTION_PER_IP_CONNECTION_LIMIT, srv_cfg.max_per_ip,
                               MHD_OPTION_UNESCAPE_CALLBACK, unescape_url, NULL,
                               MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                               MHD_OPTION_END);
    if (!daemon_) {
        srv_log(SRV_LOG_ERROR, "cannot listen on %s:%d", srv_cfg.bind, srv_cfg.port);
        return -1;
    }
    /* port 0: the one the system chose, for the log line */
    const union MHD_DaemonInfo *bound = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
    if (bound && bound->port)
        srv_cfg.port = bound->port;
    return 0;
}

void srv_http_quiesce(void)
{
    drain_began = srv_now_ms();
    srv_draining = 1;
    if (daemon_) {
        MHD_socket fd = MHD_quiesce_daemon(daemon_);
        if (fd != MHD_INVALID_SOCKET)
            close(fd);
    }
}

int srv_http_busy(void)
{
    int n = srv_inflight();
    if (srv_draining && srv_now_ms() - drain_began > DRAIN_STALLED_MS)
        n -= atomic_load(&uploading);
    return n > 0 ? n : 0;
}

void srv_http_stop(void)
{
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
}
