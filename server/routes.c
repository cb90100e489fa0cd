/* routes.c - the route table (method, path pattern, handler), how a method
 * and path find their row, and the small GET pages. Knows nothing of
 * libmicrohttpd. */
#include "srv.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char builtin_index[] =
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<title>attention service</title></head><body>\n"
    "<h1>attention service</h1>\n<p>The demo is not installed (set ATTN_STATIC_DIR). Routes:</p>\n<ul>\n"
    "<li>POST /attention/{rule}: <a href=\"/rules\">/rules</a> lists the rules</li>\n"
    "<li>POST /multihead</li>\n"
    "<li>POST /sessions: decode sessions (a server-side KV cache)</li>\n"
    "<li><a href=\"/healthz\">/healthz</a>, <a href=\"/readyz\">/readyz</a>, "
    "<a href=\"/metrics\">/metrics</a></li>\n"
    "<li><a href=\"/openapi.yaml\">/openapi.yaml</a></li>\n</ul>\n</body></html>\n";

void srv_reply_init(srv_reply *r)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->status = 200;
    r->ctype = "application/json";
}

void srv_reply_error(srv_reply *r, const srv_err *e)
{
    r->body.len = 0;
    r->body.failed = 0;
    r->status = e->status;
    r->code = e->code;
    r->ctype = "application/json";
    if (e->status == 503 && !r->retry_after)
        r->retry_after = 1;
    srv_err_json(e, &r->body);
}

static int fail_reply(srv_reply *r, int status, const char *code, const char *fmt, const char *arg)
{
    srv_err e;
    srv_fail(&e, status, code, "", fmt, arg);
    srv_reply_error(r, &e);
    return -1;
}

static void serve_file(srv_reply *r, const char *path, const char *ctype)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        fail_reply(r, 404, "not_found", "%s is not installed on this server", path);
        return;
    }
    r->fd = fd;
    r->fd_size = (uint64_t)st.st_size;
    r->ctype = ctype;
}

/* ------------------------------------------------------------ GET pages */

static void serve_healthz(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)t, (void)body, (void)len;
    srv_buf_puts(&r->body, "{\"status\":\"ok\"}\n");
}

static void serve_readyz(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)t, (void)body, (void)len;
    if (!srv_draining) {
        srv_buf_puts(&r->body, "{\"status\":\"ready\"}\n");
        return;
    }
    srv_err e;
    srv_fail(&e, 503, "overloaded", "", "the server is shutting down");
    srv_reply_error(r, &e);
}

static void serve_metrics(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)t, (void)body, (void)len;
    r->ctype = "text/plain; version=0.0.4; charset=utf-8";
    srv_metrics_text(&r->body);
}

static void serve_rules(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)t, (void)body, (void)len;
    srv_rules_json(&r->body);
}

static void serve_openapi(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)t, (void)body, (void)len;
    if (!srv_cfg.openapi_path)
        fail_reply(r, 404, "not_found", "%s", "openapi.yaml is not installed on this server");
    else
        serve_file(r, srv_cfg.openapi_path, "application/yaml");
}

/* The demo's files; its index.html, or a built-in page, at the root. */
static void serve_static(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)body, (void)len;
    const char *rel = t->route == SRV_R_ROOT ? "index.html" : t->rel, *ctype;
    uint64_t size;
    int fd = srv_static_open(rel, &ctype, &size);
    if (fd >= 0) {
        r->fd = fd;
        r->fd_size = size;
        r->ctype = ctype;
    } else if (t->route == SRV_R_ROOT) {
        r->ctype = "text/html; charset=utf-8";
        srv_buf_put(&r->body, builtin_index, sizeof builtin_index - 1);
    } else {
        fail_reply(r, 404, "not_found", "%s is gone", t->rel);
    }
}

/* ------------------------------------------------------------ the table */

#define HEAVY_BODY 65536 /* bodies this large are computed off the polling thread */

int srv_route_schedule(const srv_target *t, size_t len)
{
    int how = t->row ? t->row->sched : SRV_SCHED_BODY;
    if (len >= HEAVY_BODY || how == SRV_SCHED_HEAVY)
        return SRV_RUN_HEAVY;
    if (how == SRV_SCHED_TURN && srv_session_busy(t))
        return SRV_RUN_AWAY;
    return SRV_RUN_HERE;
}

/* {model}, {version}, {name} and {id} are one path segment, {rule} and a
 * {file} that ends the pattern the rest of the path (see span); each is
 * checked as it is matched (see capture). GET rows
 * answer HEAD too. First match wins; a path that matches rows of other
 * methods only is a 405 whose Allow lists them. The last column says where
 * a request is served (srv_route_schedule): BODY, on the polling thread
 * unless its body is large; HEAVY, always off it and counted as a heavy
 * computation (a translation decodes token by token); TURN, off it when it
 * would wait for its session's turn. */
#define BODY SRV_SCHED_BODY
#define HEAVY SRV_SCHED_HEAVY
#define TURN SRV_SCHED_TURN
static const srv_route routes[] = {
    {"POST", "/attention/{rule}", SRV_R_ATTENTION, srv_serve_attention, &srv_native_front, BODY},
    {"POST", "/multihead", SRV_R_MULTIHEAD, srv_serve_multihead, &srv_native_front, BODY},
    {"GET", "/models", SRV_R_MODELS, srv_serve_models, &srv_native_front, BODY},
    {"POST", "/models/{name}/translate", SRV_R_MODELS_TRANSLATE, srv_serve_translate,
     &srv_native_front, HEAVY},
    {"POST", "/sessions", SRV_R_SESSIONS, srv_serve_session_new, &srv_native_front, BODY},
    {"POST", "/sessions/{id}/step", SRV_R_SESSION_STEP, srv_serve_session_step, &srv_native_front, TURN},
    {"POST", "/sessions/{id}/truncate", SRV_R_SESSION_TRUNCATE, srv_serve_session_truncate,
     &srv_native_front, TURN},
    {"GET", "/sessions/{id}", SRV_R_SESSION, srv_serve_session_get, &srv_native_front, BODY},
    {"DELETE", "/sessions/{id}", SRV_R_SESSION, srv_serve_session_delete, &srv_native_front, BODY},
    {"GET", "/healthz", SRV_R_HEALTHZ, serve_healthz, &srv_native_front, BODY},
    {"GET", "/readyz", SRV_R_READYZ, serve_readyz, &srv_native_front, BODY},
    {"GET", "/metrics", SRV_R_METRICS, serve_metrics, &srv_native_front, BODY},
    {"GET", "/rules", SRV_R_RULES, serve_rules, &srv_native_front, BODY},
    {"GET", "/openapi.yaml", SRV_R_OPENAPI, serve_openapi, &srv_native_front, BODY},
    {"GET", "/", SRV_R_ROOT, serve_static, &srv_native_front, BODY},
    {"GET", "/index.html", SRV_R_ROOT, serve_static, &srv_native_front, BODY},
    {"GET", "/demo", SRV_R_ROOT, serve_static, &srv_native_front, BODY},
    {"GET", "/demo/", SRV_R_ROOT, serve_static, &srv_native_front, BODY},
    {"GET", "/v2", SRV_R_KSERVE, srv_serve_v2_server, &srv_kserve_front, BODY},
    {"GET", "/v2/", SRV_R_KSERVE, srv_serve_v2_server, &srv_kserve_front, BODY},
    {"GET", "/v2/health/live", SRV_R_KSERVE, srv_serve_v2_live, &srv_kserve_front, BODY},
    {"GET", "/v2/health/ready", SRV_R_KSERVE, srv_serve_v2_ready, &srv_kserve_front, BODY},
    {"GET", "/v2/models/{model}", SRV_R_KSERVE, srv_serve_v2_model, &srv_kserve_front, BODY},
    {"GET", "/v2/models/{model}/versions/{version}", SRV_R_KSERVE, srv_serve_v2_model,
     &srv_kserve_front, BODY},
    {"GET", "/v2/models/{model}/ready", SRV_R_KSERVE, srv_serve_v2_model_ready, &srv_kserve_front,
     BODY},
    {"GET", "/v2/models/{model}/versions/{version}/ready", SRV_R_KSERVE, srv_serve_v2_model_ready,
     &srv_kserve_front, BODY},
    {"POST", "/v2/models/{model}/infer", SRV_R_KSERVE_INFER, srv_serve_v2_infer, &srv_kserve_front,
     BODY},
    {"POST", "/v2/models/{model}/versions/{version}/infer", SRV_R_KSERVE_INFER, srv_serve_v2_infer,
     &srv_kserve_front, BODY},
    {"GET", "/demo/{file}", SRV_R_STATIC, serve_static, &srv_native_front, BODY},
    {"GET", "/{file}", SRV_R_STATIC, serve_static, &srv_native_front, BODY},
};
#undef BODY
#undef HEAVY
#undef TURN
#define N_ROUTES (sizeof routes / sizeof routes[0])

void srv_routes_each(const srv_front *front, void (*fn)(void *, const srv_route *), void *ud)
{
    for (size_t i = 0; i < N_ROUTES; i++)
        if (routes[i].front == front)
            fn(ud, &routes[i]);
}

/* ------------------------------------------------------------ matching */

static void rule_list(char *out, size_t n)
{
    out[0] = '\0';
    for (int i = 0; i < ATTN_RULE_COUNT; i++)
        srv_name_list(out, n, attn_rule_name((attn_rule)i));
}

static int is(const char *ph, const char *name)
{
    return strncmp(ph, name, strlen(name)) == 0;
}

/* Checks the text s[0..n) the placeholder ph ("{rule}...") took and
 * records it in t. Returns 1 when it fits, 0 when the row does not match
 * after all (no such file), -1 with e filled when the path names what does
 * not exist. */
static int capture(const char *ph, const char *s, size_t n, srv_target *t, srv_err *e)
{
    char list[300];
    if (is(ph, "{rule}")) {
        char word[64];
        size_t k = n < 63 ? n : 63;
        memcpy(word, s, k); /* no printf on every request's path */
        word[k] = '\0';
        if (n < 63 && attn_rule_from_name(word, &t->rule)) {
            t->route = SRV_R_ATTENTION + (int)t->rule;
            return 1;
        }
        rule_list(list, sizeof list);
        return srv_fail(e, 404, "unknown_rule", "", "no rule named \"%.60s\"; the rules are: %s",
                        word, list);
    }
    if (is(ph, "{name}")) {
        t->model = srv_models_find(s, n);
        return t->model >= 0 ? 1 : srv_models_unknown(s, n, e);
    }
    if (is(ph, "{id}")) {
        if (srv_session_id_ok(s, n)) {
            memcpy(t->session, s, n);
            t->session[n] = '\0';
            return 1;
        }
        return srv_fail(e, 404, "unknown_session", "", "no session \"%.*s\": it never existed "
                        "(a session id is 32 lowercase hex digits, as POST /sessions gave it)",
                        n < 72 ? (int)n : 72, s);
    }
    if (is(ph, "{model}"))
        return srv_kserve_model(s, n, &t->model, e) == 0 ? 1 : -1;
    if (is(ph, "{version}"))
        return srv_kserve_version(s, n, t->model, e) == 0 ? 1 : -1;
    /* {file}: a file of the demo's folder. */
    const char *ctype;
    uint64_t size;
    int fd = -1;
    if (n >= sizeof t->rel || (fd = srv_static_open(s, &ctype, &size)) < 0)
        return 0;
    close(fd);
    memcpy(t->rel, s, n + 1);
    return 1;
}

/* How much of the path at s the placeholder ph takes: one segment, or the
 * rest of the path for {rule} ("/attention/a/b" names no rule) and for a
 * {file} that ends the pattern. */
static size_t span(const char *ph, const char *after, const char *s)
{
    return is(ph, "{rule}") || (is(ph, "{file}") && !*after) ? strlen(s) : strcspn(s, "/");
}

/* Whether path has the pattern's shape: its literal text, and some text
 * where a placeholder stands. */
static int fits(const char *p, const char *s)
{
    while (*p) {
        if (*p == '{') {
            const char *after = strchr(p, '}') + 1;
            s += span(p, after, s);
            p = after;
        } else if (*p++ != *s++) {
            return 0;
        }
    }
    return *s == '\0';
}

/* Whether path matches pattern, its placeholders checked and captured
 * into t: 1, 0, or -1 with e filled (see capture). */
static int match(const char *pattern, const char *path, srv_target *t, srv_err *e)
{
    if (!fits(pattern, path))
        return 0;
    const char *p = pattern, *s = path;
    while (*p) {
        if (*p != '{') {
            p++, s++;
            continue;
        }
        const char *after = strchr(p, '}') + 1;
        size_t n = span(p, after, s);
        int rc = capture(p, s, n, t, e);
        if (rc <= 0)
            return rc;
        s += n;
        p = after;
    }
    return 1;
}

static int method_fits(const char *row, const char *method)
{
    return !strcmp(row, method) || (!strcmp(row, "GET") && !strcmp(method, "HEAD"));
}

/* A 405's Allow header for the methods a path's rows take (bits: 1 GET,
 * 2 POST, 4 DELETE). */
static const char *allow_header(unsigned bits)
{
    static const char *const lists[8] = {"", "GET, HEAD", "POST", "GET, HEAD, POST", "DELETE",
                                         "GET, HEAD, DELETE", "POST, DELETE",
                                         "GET, HEAD, POST, DELETE"};
    return lists[bits & 7];
}

static unsigned method_bit(const char *row)
{
    return !strcmp(row, "POST") ? 2u : !strcmp(row, "DELETE") ? 4u : 1u;
}

/* The front end of an unmatched path: that of the rows under the same
 * first segment ("/v2/..."), else the native one. */
static const srv_front *front_of(const char *path)
{
    if (!*path) /* a request line of only a query: MHD's url is "" */
        return &srv_native_front;
    size_t n = strcspn(path + 1, "/") + 1;
    for (size_t i = 0; i < N_ROUTES; i++) {
        const char *pat = routes[i].pattern;
        if (strcspn(pat + 1, "/") + 1 == n && !strncmp(pat, path, n) && !strchr(pat, '{'))
            return routes[i].front;
    }
    return &srv_native_front;
}

static int fail_with(const srv_front *front, srv_reply *r, srv_err *e)
{
    front->error(r, e);
    return -1;
}

int srv_route_resolve(const char *method, const char *path, srv_target *t, srv_reply *r)
{
    unsigned allow = 0; /* method_bit's */
    const srv_route *other = NULL;
    srv_err e;
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < N_ROUTES; i++) {
        const srv_route *row = &routes[i];
        srv_target cand;
        memset(&cand, 0, sizeof cand);
        cand.route = row->route;
        cand.model = -1; /* until {model} or {name} names a model served */
        int m = match(row->pattern, path, &cand, &e);
        if (m < 0) {
            t->route = row->route == SRV_R_ATTENTION ? SRV_R_OTHER : row->route;
            t->model = cand.model; /* for the metrics: a 404 version counts under its model */
            return fail_with(row->front, r, &e);
        }
        if (!m)
            continue;
        if (method_fits(row->method, method)) {
            *t = cand;
            t->row = row;
            t->wants_body = !strcmp(row->method, "POST");
            return 0;
        }
        allow |= method_bit(row->method);
        if (!other) {
            other = row;
            *t = cand;
        }
    }
    const srv_front *front = other ? other->front : front_of(path);
    if (!other) {
        t->route = front->unmatched_route;
        front->not_found(path, &e);
        return fail_with(front, r, &e);
    }
    r->allow = allow_header(allow);
    srv_fail(&e, 405, "method_not_allowed", "", "%.16s is not allowed here; use %s", method, r->allow);
    return fail_with(front, r, &e);
}

void srv_route_serve(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    if (!t->row) {
        fail_reply(r, 404, "not_found", "%s", "no such route");
        return;
    }
    t->row->serve(t, body, len, r);
}

void srv_reply_timings(srv_reply *r, const srv_call *call)
{
    r->t_parse = call->t_parse;
    r->t_compute = call->t_compute;
    r->t_encode = call->t_encode;
}

void srv_target_length(srv_target *t, const char *value)
{
    t->len_hdr = 0;
    if (!value)
        return;
    /* Digits only (no sign, no spaces): a length from the network. */
    uint64_t n = 0;
    const char *p = value;
    t->len_hdr = *p ? 1 : -1;
    for (; *p && t->len_hdr > 0; p++) {
        if (*p < '0' || *p > '9' || n > (UINT64_MAX - 9) / 10)
            t->len_hdr = -1;
        else
            n = n * 10 + (uint64_t)(*p - '0');
    }
    t->len_hdr_value = n;
}
