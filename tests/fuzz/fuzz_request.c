/* fuzz_request.c - libFuzzer target: the whole request handler in process,
 * for every route. An input is "METHOD PATH\n" then the body; the route is
 * resolved and served exactly as http.c does, without a socket. Every
 * reply must be a contract status, and JSON replies must parse. Sessions
 * persist from input to input (the fuzzer interleaves creations, steps,
 * truncations and deletions); POST /sessions takes the id SESSION_ID, as
 * behind a load balancer that names sessions, so inputs can reach it; the
 * KServe model multihead-decode takes it as sequence_id. */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SESSION_ID "00000000000000000000000000000001"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int known_status(int s)
{
    static const int ok[] = {200, 201, 204, 400, 401, 404, 405, 409, 413, 415, 422, 503};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (s == ok[i])
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int inited;
    if (!inited) {
        fuzz_config();
        srv_metrics_init();
        inited = 1;
    }
    const uint8_t *nl = memchr(data, '\n', size < 300 ? size : 300);
    if (!nl)
        return 0;
    char line[300], method[16] = "", path[300] = "";
    size_t ll = (size_t)(nl - data);
    memcpy(line, data, ll);
    line[ll] = '\0';
    char *sp = strchr(line, ' ');
    if (!sp || sp - line >= (long)sizeof method)
        return 0;
    memcpy(method, line, (size_t)(sp - line));
    snprintf(path, sizeof path, "%s", sp + 1);
    size_t blen = size - ll - 1;
    char *body = malloc(blen + 1); /* NUL-terminated, as http.c hands it over */
    if (!body)
        return 0;
    memcpy(body, nl + 1, blen);
    body[blen] = '\0';

    srv_target t;
    srv_reply r;
    srv_reply_init(&r);
    if (srv_route_resolve(method, path, &t, &r) == 0) {
        if (t.route == SRV_R_SESSIONS)
            snprintf(t.session_hdr, sizeof t.session_hdr, "%s", SESSION_ID);
        srv_buf_free(&r.body);
        srv_reply_init(&r);
        srv_route_serve(&t, t.wants_body ? body : NULL, t.wants_body ? blen : 0, &r);
    }
    if (r.fd >= 0)
        close(r.fd);
    if (!known_status(r.status))
        abort();
    if (r.fd < 0 && !r.body.failed && r.ctype && strcmp(r.ctype, "application/json") == 0 &&
        r.body.len) {
        json_error_t je;
        json_t *j = json_loadb(r.body.data, r.body.len, 0, &je);
        if (!j)
            abort(); /* the server wrote broken JSON */
        if (r.status >= 400 && !json_object_get(j, "error"))
            abort();
        json_decref(j);
    }
    srv_buf_free(&r.body);
    free(body);
    return 0;
}
