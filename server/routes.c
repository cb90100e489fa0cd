/* routes.c - dispatch: which handler serves a method and path, and the
 * small GET routes themselves. Knows nothing of libmicrohttpd. */
#include "srv.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ALLOW_GET "GET, HEAD"
#define ALLOW_POST "POST"

static const char builtin_index[] =
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<title>attention service</title></head><body>\n"
    "<h1>attention service</h1>\n<p>The demo is not installed (set ATTN_STATIC_DIR). Routes:</p>\n<ul>\n"
    "<li>POST /attention/{rule}: <a href=\"/rules\">/rules</a> lists the rules</li>\n"
    "<li>POST /multihead</li>\n"
    "<li><a href=\"/models\">/models</a>: POST /models/{name}/translate</li>\n"
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

static void rule_list(char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; i < ATTN_RULE_COUNT && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, "%s%s", i ? ", " : "", attn_rule_name((attn_rule)i));
}

int srv_route_resolve(const char *method, const char *path, srv_target *t, srv_reply *r)
{
    memset(t, 0, sizeof *t);
    int is_get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    int is_post = strcmp(method, "POST") == 0;
    const char *allow = ALLOW_GET;

    if (strncmp(path, "/v2", 3) == 0 && (path[3] == '\0' || path[3] == '/'))
        return srv_kserve_resolve(method, path, t, r); /* KServe v2, kserve.c */
    if (strncmp(path, "/attention/", 11) == 0 || strcmp(path, "/attention") == 0) {
        attn_rule rule;
        const char *name = path[10] ? path + 11 : "";
        if (!attn_rule_from_name(name, &rule)) {
            char list[200], msg[300];
            rule_list(list, sizeof list);
            snprintf(msg, sizeof msg, "no rule named \"%.60s\"; the rules are: %s", name, list);
            return fail_reply(r, 404, "unknown_rule", "%s", msg);
        }
        t->route = (int)rule;
        t->wants_body = 1;
        allow = ALLOW_POST;
    } else if (strcmp(path, "/models") == 0 || strncmp(path, "/models/", 8) == 0) {
        srv_err e;
        int post;
        if (srv_models_route(path, &t->model, &post, &e) != 0) {
            srv_reply_error(r, &e);
            return -1;
        }
        t->route = post ? SRV_R_MODELS_TRANSLATE : SRV_R_MODELS;
        t->wants_body = post;
        allow = post ? ALLOW_POST : ALLOW_GET;
    } else if (strcmp(path, "/multihead") == 0) {
        t->route = SRV_R_MULTIHEAD;
        t->wants_body = 1;
        allow = ALLOW_POST;
    } else if (strcmp(path, "/healthz") == 0) {
        t->route = SRV_R_HEALTHZ;
    } else if (strcmp(path, "/readyz") == 0) {
        t->route = SRV_R_READYZ;
    } else if (strcmp(path, "/metrics") == 0) {
        t->route = SRV_R_METRICS;
    } else if (strcmp(path, "/rules") == 0) {
        t->route = SRV_R_RULES;
    } else if (strcmp(path, "/openapi.yaml") == 0) {
        t->route = SRV_R_OPENAPI;
    } else if (strcmp(path, "/") == 0 || strcmp(path, "/index.html") == 0 ||
               strcmp(path, "/demo") == 0 || strcmp(path, "/demo/") == 0) {
        t->route = SRV_R_ROOT;
        snprintf(t->rel, sizeof t->rel, "index.html");
    } else {
        /* /demo/<file>, or a file beside the demo's index.html. */
        const char *rel = strncmp(path, "/demo/", 6) == 0 ? path + 6 : path + 1;
        const char *ctype;
        uint64_t size;
        int fd = -1;
        if (strlen(rel) < sizeof t->rel && (fd = srv_static_open(rel, &ctype, &size)) >= 0) {
            close(fd);
            t->route = SRV_R_STATIC;
            snprintf(t->rel, sizeof t->rel, "%s", rel);
        } else {
            t->route = SRV_R_OTHER;
            return fail_reply(r, 404, "not_found",
                              "no route %.200s; see /openapi.yaml for the routes", path);
        }
    }
    if (t->wants_body ? is_post : is_get)
        return 0;
    r->allow = allow;
    char msg[120];
    snprintf(msg, sizeof msg, "%.16s is not allowed here; use %s", method, allow);
    return fail_reply(r, 405, "method_not_allowed", "%s", msg);
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

static void serve_post(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    srv_err e;
    srv_call call;
    memset(&call, 0, sizeof call);
    int rc = t->route == SRV_R_MODELS_TRANSLATE ? srv_models_translate(t->model, body, len, &call, &r->body, &e)
             : t->route == SRV_R_MULTIHEAD
                 ? srv_handle_multihead(body, len, &call, &r->body, &e)
                 : srv_handle_attention((attn_rule)t->route, body, len, &call, &r->body, &e);
    r->t_parse = call.t_parse;
    r->t_compute = call.t_compute;
    r->t_encode = call.t_encode;
    srv_call_free(&call);
    if (rc != 0)
        srv_reply_error(r, &e);
}

void srv_route_serve(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    if (t->route == SRV_R_KSERVE || t->route == SRV_R_KSERVE_INFER) {
        srv_kserve_serve(t, body, len, r);
        return;
    }
    if (t->wants_body) {
        serve_post(t, body, len, r);
        return;
    }
    const char *ctype;
    uint64_t size;
    int fd;
    switch (t->route) {
    case SRV_R_HEALTHZ:
        srv_buf_puts(&r->body, "{\"status\":\"ok\"}\n");
        break;
    case SRV_R_READYZ:
        if (srv_draining) {
            srv_err e;
            srv_fail(&e, 503, "overloaded", "", "the server is shutting down");
            srv_reply_error(r, &e);
        } else {
            srv_buf_puts(&r->body, "{\"status\":\"ready\"}\n");
        }
        break;
    case SRV_R_METRICS:
        r->ctype = "text/plain; version=0.0.4; charset=utf-8";
        srv_metrics_text(&r->body);
        break;
    case SRV_R_RULES:
        srv_rules_json(&r->body);
        break;
    case SRV_R_MODELS:
        srv_models_list(&r->body);
        break;
    case SRV_R_OPENAPI:
        if (!srv_cfg.openapi_path)
            fail_reply(r, 404, "not_found", "%s", "openapi.yaml is not installed on this server");
        else
            serve_file(r, srv_cfg.openapi_path, "application/yaml");
        break;
    case SRV_R_ROOT:
    case SRV_R_STATIC:
        if ((fd = srv_static_open(t->rel, &ctype, &size)) >= 0) {
            r->fd = fd;
            r->fd_size = size;
            r->ctype = ctype;
        } else if (t->route == SRV_R_ROOT) {
            r->ctype = "text/html; charset=utf-8";
            srv_buf_put(&r->body, builtin_index, sizeof builtin_index - 1);
        } else {
            fail_reply(r, 404, "not_found", "%s is gone", t->rel);
        }
        break;
    default:
        fail_reply(r, 404, "not_found", "%s", "no such route");
    }
}
