/* test_kserve.c - the KServe v2 / Open Inference Protocol routes against a
 * live server: metadata of every model, every golden vector (PyTorch) as an
 * infer request in JSON and in Triton's binary tensor data form, and errors.
 *
 *   test_kserve --server build/attn-server [--golden tests/golden]
 *               [--examples tests/kserve] [--log file]
 *
 * Requests are built as the protocol's documentation shows them (KServe
 * "Open Inference Protocol" REST, Triton "Binary Tensor Data Extension"):
 * flat row-major "data", datatype FP32/BOOL, options in "parameters",
 * binary inputs after the JSON header with Inference-Header-Content-Length.
 * Prints "N passed, N failed"; exits 1 on any failure. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden.h"

static int n_pass, n_fail, verbose;
static char base[64];

static int check(int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int check(int ok, const char *name, const char *fmt, ...)
{
    if (ok) {
        n_pass++;
        if (verbose)
            printf("ok   %s\n", name);
        return 1;
    }
    n_fail++;
    printf("FAIL %s: ", name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    return 0;
}

/* ------------------------------------------------------------ bytes */

typedef struct {
    char *p;
    size_t len, cap;
} bytes;

static void put(bytes *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p) {
            perror("test_kserve");
            exit(2);
        }
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* float32 as 4 little-endian bytes, whatever the host's order. */
static void put_f32le(bytes *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint8_t q[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    put(b, q, 4);
}

static float get_f32le(const unsigned char *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ------------------------------------------------------------ HTTP */

typedef struct {
    long status;
    bytes body, headers;
} reply;

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    put(ud, p, size * n);
    return size * n;
}

/* POST (body != NULL) or GET; extra headers NULL-terminated. */
static void http(const char *method, const char *path, const char *body, size_t len,
                 const char *const *hdrs, reply *r)
{
    memset(r, 0, sizeof *r);
    CURL *h = curl_easy_init();
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r->body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r->headers);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    struct curl_slist *hl = curl_slist_append(NULL, "Expect:");
    for (const char *const *p = hdrs; p && *p; p++)
        hl = curl_slist_append(hl, *p);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    if (strcmp(method, "GET") && strcmp(method, "POST"))
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
}

static void reply_free(reply *r)
{
    free(r->body.p);
    free(r->headers.p);
    memset(r, 0, sizeof *r);
}

/* A response header's value, or "" (static buffer). */
static const char *header(const reply *r, const char *name)
{
    static char v[256];
    size_t nl = strlen(name);
    const char *p = r->headers.p ? r->headers.p : "";
    v[0] = '\0';
    while (*p) {
        const char *eol = strstr(p, "\r\n");
        if (!eol)
            break;
        if ((size_t)(eol - p) > nl && !strncasecmp(p, name, nl) && p[nl] == ':') {
            const char *s = p + nl + 1;
            while (*s == ' ')
                s++;
            snprintf(v, sizeof v, "%.*s", (int)(eol - s), s);
        }
        p = eol + 2;
    }
    return v;
}

static const char *short_body(const reply *r)
{
    static char s[320];
    snprintf(s, sizeof s, "%.300s", r->body.p ? r->body.p : "");
    return s;
}

/* ------------------------------------------------------------ server */

static pid_t server_pid;

static double now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec * 1000.0 + tv.tv_usec / 1000.0;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &al)) {
        perror("test_kserve: free port");
        exit(2);
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int server_start(const char *bin, const char *log)
{
    int port = free_port();
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    server_pid = fork();
    if (server_pid < 0)
        return -1;
    if (server_pid == 0) {
        char ps[16];
        snprintf(ps, sizeof ps, "%d", port);
        setenv("ATTN_PORT", ps, 1);
        setenv("ATTN_BIND", "127.0.0.1", 1);
        FILE *lf = fopen(log, "a");
        if (lf) {
            dup2(fileno(lf), 1);
            dup2(fileno(lf), 2);
        }
        execl(bin, bin, (char *)NULL);
        _exit(127);
    }
    double t0 = now_ms();
    while (now_ms() - t0 < 15000) {
        int st;
        if (waitpid(server_pid, &st, WNOHANG) == server_pid) {
            server_pid = 0;
            return -1;
        }
        reply r;
        http("GET", "/v2/health/live", NULL, 0, NULL, &r);
        long s = r.status;
        reply_free(&r);
        if (s == 200)
            return 0;
        usleep(50 * 1000);
    }
    return -1;
}

static int server_stop(void)
{
    if (server_pid <= 0)
        return 0;
    kill(server_pid, SIGTERM);
    int st = 0;
    double t0 = now_ms();
    while (now_ms() - t0 < 10000) {
        if (waitpid(server_pid, &st, WNOHANG) == server_pid)
            return WIFEXITED(st) && WEXITSTATUS(st) == 0;
        usleep(20 * 1000);
    }
    kill(server_pid, SIGKILL);
    waitpid(server_pid, &st, 0);
    return 0;
}

static void check_alive(const char *after)
{
    reply r;
    http("GET", "/v2/health/ready", NULL, 0, NULL, &r);
    char name[300];
    snprintf(name, sizeof name, "%s: /v2/health/ready answers afterwards", after);
    check(r.status == 200, name, "got %ld", r.status);
    reply_free(&r);
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

static void test_server_routes(void)
{
    reply r;
    http("GET", "/v2", NULL, 0, NULL, &r);
    json_t *j = json_loads(r.body.p ? r.body.p : "", 0, NULL);
    json_t *ext = json_object_get(j, "extensions");
    int has_bin = 0;
    size_t i;
    json_t *v;
    json_array_foreach(ext, i, v) has_bin |= !strcmp(json_string_value(v) ?: "", "binary_tensor_data");
    check(r.status == 200 && json_is_string(json_object_get(j, "name")) &&
              json_is_string(json_object_get(j, "version")) && has_bin,
          "GET /v2: name, version, extensions with binary_tensor_data", "%ld %s", r.status, short_body(&r));
    json_decref(j);
    reply_free(&r);
    const char *paths[] = {"/v2/health/live", "/v2/health/ready"};
    const char *keys[] = {"live", "ready"};
    for (int k = 0; k < 2; k++) {
        http("GET", paths[k], NULL, 0, NULL, &r);
        j = json_loads(r.body.p ? r.body.p : "", 0, NULL);
        char name[80];
        snprintf(name, sizeof name, "GET %s", paths[k]);
        check(r.status == 200 && json_is_true(json_object_get(j, keys[k])), name, "%ld %s", r.status,
              short_body(&r));
        json_decref(j);
        reply_free(&r);
    }
}

static void test_metadata(void)
{
    for (size_t m = 0; m < N_MODELS; m++) {
        const model_spec *ms = &models[m];
        char path[128], name[200];
        snprintf(path, sizeof path, "/v2/models/%s", ms->model);
        reply r;
        http("GET", path, NULL, 0, NULL, &r);
        json_t *j = json_loads(r.body.p ? r.body.p : "", 0, NULL);
        snprintf(name, sizeof name, "metadata %s: 200 with name and platform", ms->model);
        if (!check(r.status == 200 && j && !strcmp(json_string_value(json_object_get(j, "name")) ?: "", ms->model) &&
                       json_is_string(json_object_get(j, "platform")),
                   name, "%ld %s", r.status, short_body(&r))) {
            json_decref(j);
            reply_free(&r);
            continue;
        }
        json_t *ins = json_object_get(j, "inputs"), *outs = json_object_get(j, "outputs");
        int ok = 1;
        char why[200] = "";
        const char *fp[] = {"query", "key", "value"};
        for (int k = 0; k < 3; k++) {
            json_t *t = find_named(ins, fp[k]);
            if (!t || strcmp(json_string_value(json_object_get(t, "datatype")) ?: "", "FP32")) {
                ok = 0;
                snprintf(why, sizeof why, "input %s missing or not FP32", fp[k]);
            }
        }
        json_t *mk = find_named(ins, "mask");
        if (!mk || strcmp(json_string_value(json_object_get(mk, "datatype")) ?: "", "BOOL")) {
            ok = 0;
            snprintf(why, sizeof why, "input mask missing or not BOOL");
        }
        for (int k = 0; ms->params[k]; k++) {
            json_t *t = find_named(ins, ms->params[k]);
            if (!t || strcmp(json_string_value(json_object_get(t, "datatype")) ?: "", "FP32")) {
                ok = 0;
                snprintf(why, sizeof why, "parameter input %s missing", ms->params[k]);
            }
        }
        /* Every dimension is -1 (variable) or a fixed positive size. */
        size_t ii, d;
        json_t *t, *x;
        json_array_foreach(ins, ii, t) {
            json_t *shp = json_object_get(t, "shape");
            if (!json_is_array(shp) || json_array_size(shp) == 0) {
                ok = 0;
                snprintf(why, sizeof why, "input %zu has no shape", ii);
            }
            json_array_foreach(shp, d, x) if (!json_is_integer(x) ||
                                              (json_integer_value(x) != -1 && json_integer_value(x) < 1)) {
                ok = 0;
                snprintf(why, sizeof why, "input %zu: dimension %zu is not -1 or a size", ii, d);
            }
        }
        snprintf(name, sizeof name, "metadata %s: inputs query/key/value FP32, mask BOOL, parameters", ms->model);
        check(ok, name, "%s", why);
        json_t *o = find_named(outs, "output"), *w = find_named(outs, "weights");
        snprintf(name, sizeof name, "metadata %s: outputs output and weights, FP32, shape -1", ms->model);
        check(o && w && json_array_size(outs) == 2 &&
                  json_integer_value(json_array_get(json_object_get(o, "shape"), 0)) == -1 &&
                  !strcmp(json_string_value(json_object_get(w, "datatype")) ?: "", "FP32"),
              name, "%s", short_body(&r));
        json_decref(j);
        reply_free(&r);
        snprintf(path, sizeof path, "/v2/models/%s/ready", ms->model);
        http("GET", path, NULL, 0, NULL, &r);
        j = json_loads(r.body.p ? r.body.p : "", 0, NULL);
        snprintf(name, sizeof name, "GET /v2/models/%s/ready", ms->model);
        check(r.status == 200 && json_is_true(json_object_get(j, "ready")), name, "%ld %s", r.status,
              short_body(&r));
        json_decref(j);
        reply_free(&r);
    }
}

/* ------------------------------------------------------------ golden infer */

enum { MODE_JSON_FLAT, MODE_JSON_NESTED_BINOUT, MODE_BIN_MIXED, MODE_BIN_IN, N_MODES };
static const char *const mode_names[] = {"JSON flat", "JSON nested data, binary_data_output",
                                         "binary in, binary output + JSON weights",
                                         "binary in, JSON out"};

static json_t *nested(const golden_tensor *t, int depth, int64_t *k)
{
    json_t *a = json_array();
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
static json_t *make_input(const golden_tensor *t, int mode, bytes *bin)
{
    int is_bool = t->kind == GOLDEN_MASK;
    json_t *shape = json_array();
    for (int d = 0; d < t->rank; d++)
        json_array_append_new(shape, json_integer(t->shape[d]));
    json_t *in = json_pack("{s:s, s:o, s:s}", "name", t->name, "shape", shape, "datatype",
                           is_bool ? "BOOL" : "FP32");
    if (mode == MODE_BIN_MIXED || mode == MODE_BIN_IN) {
        for (int64_t i = 0; i < t->count; i++) {
            if (is_bool) {
                uint8_t b = t->m[i] ? 1 : 0;
                put(bin, &b, 1);
            } else {
                put_f32le(bin, t->f[i]);
            }
        }
        json_object_set_new(in, "parameters",
                            json_pack("{s:I}", "binary_data_size", (json_int_t)(t->count * (is_bool ? 1 : 4))));
    } else if (mode == MODE_JSON_NESTED_BINOUT) {
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
static int decode_output(const reply *r, json_t *hdr, size_t hl, const char *name, out_tensor *o,
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
                o->f[k] = get_f32le((const unsigned char *)r->body.p + off + 4 * k);
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

static int close_enough(double got, double want)
{
    return fabs(got - want) <= 1e-5 + 1e-4 * fabs(want);
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
static json_t *reply_json(const reply *r, size_t *hl, char *why, size_t wl)
{
    const char *ihl = header(r, "Inference-Header-Content-Length");
    size_t n = r->body.len;
    if (*ihl) {
        char *end;
        unsigned long long v = strtoull(ihl, &end, 10);
        if (*end || v > r->body.len) {
            snprintf(why, wl, "Inference-Header-Content-Length %s for a %zu-byte body", ihl, r->body.len);
            return NULL;
        }
        n = (size_t)v;
    }
    *hl = n;
    json_error_t je;
    json_t *j = json_loadb(r->body.p ? r->body.p : "", n, 0, &je);
    if (!j)
        snprintf(why, wl, "header is not JSON: %s", je.text);
    return j;
}

static void golden_infer(const char *path, int idx)
{
    golden_case gc;
    char err[256], name[400], why[300] = "";
    const char *file = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(name, sizeof name, "kserve golden %s: loads", file);
    if (!check(golden_load(path, &gc, err, sizeof err) == 0, name, "%s", err))
        return;
    int mode = idx % N_MODES;
    int need_w = golden_opt_int(&gc, "need_weights", 1) != 0;
    char model[64];
    snprintf(model, sizeof model, "%s%s", strcmp(gc.rule, "multihead") ? "attention-" : "", gc.rule);
    bytes bin = {0};
    json_t *inputs = json_array();
    for (size_t i = 0; i < gc.n_tensors; i++) {
        const golden_tensor *t = &gc.tensors[i];
        if (t->kind != GOLDEN_EXPECT)
            json_array_append_new(inputs, make_input(t, mode, &bin));
    }
    char id[160];
    snprintf(id, sizeof id, "golden-%s", file);
    json_t *req = json_pack("{s:s, s:o, s:o}", "id", id, "inputs", inputs, "parameters", make_parameters(&gc));
    if (mode == MODE_JSON_NESTED_BINOUT)
        json_object_set_new(json_object_get(req, "parameters"), "binary_data_output", json_true());
    if (mode == MODE_BIN_MIXED) {
        json_t *outs = json_pack("[{s:s, s:{s:b}}]", "name", "output", "parameters", "binary_data", 1);
        if (need_w)
            json_array_append_new(outs, json_pack("{s:s}", "name", "weights"));
        json_object_set_new(req, "outputs", outs);
    }
    char *hdr = json_dumps(req, JSON_COMPACT);
    char *at = strstr(hdr, "\"@SEED@\"");
    if (at) { /* the seed as the file gives it, digits up to 2^64 - 1 */
        const char *seed = golden_opt(&gc, "seed");
        size_t nl = strlen(hdr) - 8 + strlen(seed) + 1;
        char *h2 = malloc(nl);
        snprintf(h2, nl, "%.*s%s%s", (int)(at - hdr), hdr, seed, at + 8);
        free(hdr);
        hdr = h2;
    }
    bytes body = {0};
    put(&body, hdr, strlen(hdr));
    put(&body, bin.p ? bin.p : "", bin.len);
    char ihl[80];
    snprintf(ihl, sizeof ihl, "Inference-Header-Content-Length: %zu", strlen(hdr));
    const char *json_hdrs[] = {"Content-Type: application/json", NULL};
    const char *bin_hdrs[] = {"Content-Type: application/octet-stream", ihl, NULL};
    int binary_in = mode == MODE_BIN_MIXED || mode == MODE_BIN_IN;
    char url[128];
    snprintf(url, sizeof url, "/v2/models/%s/infer", model);
    reply r;
    http("POST", url, body.p, body.len, binary_in ? bin_hdrs : json_hdrs, &r);
    snprintf(name, sizeof name, "kserve golden %s (%s): 200", file, mode_names[mode]);
    size_t hl = 0;
    json_t *j = NULL;
    if (check(r.status == 200, name, "%ld %s", r.status, short_body(&r)) &&
        check((j = reply_json(&r, &hl, why, sizeof why)) != NULL, name, "%s", why)) {
        snprintf(name, sizeof name, "kserve golden %s: model_name and id echoed", file);
        check(!strcmp(json_string_value(json_object_get(j, "model_name")) ?: "", model) &&
                  !strcmp(json_string_value(json_object_get(j, "id")) ?: "", id),
              name, "%s", short_body(&r));
        int any_bin = mode == MODE_JSON_NESTED_BINOUT || mode == MODE_BIN_MIXED;
        snprintf(name, sizeof name, "kserve golden %s: Inference-Header-Content-Length %s", file,
                 any_bin ? "present" : "absent");
        check(any_bin == (*header(&r, "Inference-Header-Content-Length") != 0), name, "header '%s'",
              header(&r, "Inference-Header-Content-Length"));
        for (size_t i = 0; i < gc.n_tensors; i++) {
            const golden_tensor *t = &gc.tensors[i];
            if (t->kind != GOLDEN_EXPECT || (strcmp(t->name, "output") && strcmp(t->name, "weights")))
                continue; /* seeded parameters are not returned by this protocol */
            out_tensor o;
            int ok = decode_output(&r, j, hl, t->name, &o, why, sizeof why) == 0 &&
                     matches(&o, t, why, sizeof why);
            int want_bin = mode == MODE_JSON_NESTED_BINOUT || (mode == MODE_BIN_MIXED && !strcmp(t->name, "output"));
            if (ok && o.binary != want_bin) {
                ok = 0;
                snprintf(why, sizeof why, "returned %s, expected %s", o.binary ? "binary" : "JSON",
                         want_bin ? "binary" : "JSON");
            }
            snprintf(name, sizeof name, "kserve golden %s: %s matches torch (%s)", file, t->name,
                     want_bin ? "binary" : "JSON");
            check(ok, name, "%s", why);
            free(o.f);
        }
        if (!need_w) {
            snprintf(name, sizeof name, "kserve golden %s: need_weights false leaves weights out", file);
            check(!find_named(json_object_get(j, "outputs"), "weights") &&
                      json_array_size(json_object_get(j, "outputs")) == 1,
                  name, "%s", short_body(&r));
        }
    }
    json_decref(j);
    reply_free(&r);
    free(hdr);
    free(body.p);
    free(bin.p);
    json_decref(req);
    golden_free(&gc);
}

static void run_golden(const char *dir)
{
    char **paths;
    int n = golden_list(dir, &paths);
    if (!check(n > 0, "golden vectors", "no golden cases in %s", dir))
        return;
    int seen[N_MODELS] = {0};
    for (int i = 0; i < n; i++) {
        golden_infer(paths[i], i);
        golden_case gc;
        char err[200];
        if (golden_load(paths[i], &gc, err, sizeof err) == 0) {
            for (size_t m = 0; m < N_MODELS; m++) {
                const char *mn = models[m].model;
                const char *rule = strncmp(mn, "attention-", 10) ? mn : mn + 10;
                seen[m] |= !strcmp(rule, gc.rule);
            }
            golden_free(&gc);
        }
    }
    for (size_t m = 0; m < N_MODELS; m++) {
        char name[120];
        snprintf(name, sizeof name, "golden infer covers model %s", models[m].model);
        check(seen[m], name, "no golden case for it");
    }
    golden_list_free(paths, n);
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
    bytes body = {0};
    put(&body, hdr, strlen(hdr));
    for (int i = 0; i < 4; i++)
        put_f32le(&body, ex_q[i]);
    for (int i = 0; i < 6; i++)
        put_f32le(&body, ex_k[i]);
    for (int i = 0; i < 3; i++)
        put_f32le(&body, ex_v[i]);
    put(&body, ex_mask, 6);
    char ihl[80];
    snprintf(ihl, sizeof ihl, "Inference-Header-Content-Length: %zu", strlen(hdr));
    const char *hdrs[] = {"Content-Type: application/octet-stream", ihl, NULL};
    reply r;
    http("POST", "/v2/models/attention-dot/infer", body.p, body.len, hdrs, &r);
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
    reply_free(&r);
    free(body.p);
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
    reply r;
    http("POST", "/v2/models/attention-dot/infer", req, strlen(req), hdrs, &r);
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
    reply_free(&r);
}

/* ------------------------------------------------------------ errors */

#define Q22 "{\"name\":\"query\",\"shape\":[2,2],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}"
#define K22 "{\"name\":\"key\",\"shape\":[2,2],\"datatype\":\"FP32\",\"data\":[1,0,0,1]}"
#define V22 "{\"name\":\"value\",\"shape\":[2,2],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}"

typedef struct {
    const char *name;
    const char *method, *path;
    const char *json;      /* JSON header (or the whole body) */
    const char *bin;       /* binary tail, bin_len bytes */
    size_t bin_len;
    const char *ihl;       /* Inference-Header-Content-Length value; NULL: none, "" : the JSON's length */
    long status;
    const char *ctype;     /* Content-Type header; NULL: JSON, or octet-stream with bin */
} err_case;

static const err_case err_cases[] = {
    {"unknown model (metadata)", "GET", "/v2/models/attention-nope", NULL, NULL, 0, NULL, 404, NULL},
    {"unknown model (infer)", "POST", "/v2/models/nope/infer", "{\"inputs\":[" Q22 "]}", NULL, 0, NULL, 404, NULL},
    {"unknown model version", "GET", "/v2/models/multihead/versions/7", NULL, NULL, 0, NULL, 404, NULL},
    {"unknown /v2 path", "GET", "/v2/repository/index", NULL, NULL, 0, NULL, 404, NULL},
    {"GET on infer", "GET", "/v2/models/attention-dot/infer", NULL, NULL, 0, NULL, 405, NULL},
    {"POST on metadata", "POST", "/v2/models/attention-dot", "{}", NULL, 0, NULL, 405, NULL},
    {"datatype INT32", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[{\"name\":\"query\",\"shape\":[2,2],\"datatype\":\"INT32\",\"data\":[1,2,3,4]}," K22 "," V22 "]}",
     NULL, 0, NULL, 400, NULL},
    {"datatype FP64", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 "," K22 ",{\"name\":\"value\",\"shape\":[2,2],\"datatype\":\"FP64\",\"data\":[1,2,3,4]}]}",
     NULL, 0, NULL, 400, NULL},
    {"mask as FP32", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 "," K22 "," V22 ",{\"name\":\"mask\",\"shape\":[2,2],\"datatype\":\"FP32\",\"data\":[1,1,1,1]}]}",
     NULL, 0, NULL, 400, NULL},
    {"BOOL data not boolean", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 "," K22 "," V22 ",{\"name\":\"mask\",\"shape\":[2,2],\"datatype\":\"BOOL\",\"data\":[true,\"no\",true,true]}]}",
     NULL, 0, NULL, 400, NULL},
    {"shape and data disagree", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[{\"name\":\"query\",\"shape\":[2,2],\"datatype\":\"FP32\",\"data\":[1,2,3]}," K22 "," V22 "]}",
     NULL, 0, NULL, 400, NULL},
    {"negative dimension", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[{\"name\":\"query\",\"shape\":[-2,2],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}," K22 "," V22 "]}",
     NULL, 0, NULL, 400, NULL},
    {"rank 5", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[{\"name\":\"query\",\"shape\":[1,1,1,2,2],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}," K22 "," V22 "]}",
     NULL, 0, NULL, 400, NULL},
    {"shape product overflows", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[{\"name\":\"query\",\"shape\":[4294967296,4294967296,4294967296],\"datatype\":\"FP32\","
     "\"parameters\":{\"binary_data_size\":16}}," K22 "," V22 "]}",
     "0123456789abcdef", 16, "", 413, NULL},
    {"binary_data_size not product(shape)*4", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[{\"name\":\"query\",\"shape\":[2,2],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":15}}," K22 "," V22 "]}",
     "0123456789abcde", 15, "", 400, NULL},
    {"binary_data_size past the body", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[{\"name\":\"query\",\"shape\":[2,2],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":16}}," K22 "," V22 "]}",
     "01234567", 8, "", 400, NULL},
    {"binary bytes left over", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[{\"name\":\"query\",\"shape\":[1,2],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":8}}," K22 "," V22 "]}",
     "\0\0\0\0\0\0\0\0\1", 9, "", 400, NULL},
    {"binary_data_size huge", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[{\"name\":\"query\",\"shape\":[2,2],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":4611686018427387904}}," K22 "," V22 "]}",
     "0123456789abcdef", 16, "", 400, NULL},
    {"binary_data_size negative", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[{\"name\":\"query\",\"shape\":[2,2],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":-16}}," K22 "," V22 "]}",
     "0123456789abcdef", 16, "", 400, NULL},
    {"binary NaN", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[{\"name\":\"query\",\"shape\":[1,2],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":8}}," K22 "," V22 "]}",
     "\0\0\xc0\x7f\0\0\0\0", 8, "", 400, NULL},
    {"binary BOOL byte 2", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 "," K22 "," V22 ",{\"name\":\"mask\",\"shape\":[2,2],\"datatype\":\"BOOL\",\"parameters\":{\"binary_data_size\":4}}]}",
     "\1\2\1\1", 4, "", 400, NULL},
    {"data and binary_data_size both", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[{\"name\":\"query\",\"shape\":[1,2],\"datatype\":\"FP32\",\"data\":[1,2],\"parameters\":{\"binary_data_size\":8}}," K22 "," V22 "]}",
     "\0\0\0\0\0\0\0\0", 8, "", 400, NULL},
    {"header length past the body", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 "," K22 "," V22 "]}", NULL, 0, "100000", 400, NULL},
    {"header length not a number", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 "," K22 "," V22 "]}", NULL, 0, "12abc", 400, NULL},
    {"header length overflows", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 "," K22 "," V22 "]}", NULL, 0, "184467440737095516160", 400, NULL},
    {"header length cuts the JSON", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 "," K22 "," V22 "]}", NULL, 0, "10", 400, NULL},
    {"not JSON", "POST", "/v2/models/attention-dot/infer", "{\"inputs\":[", NULL, 0, NULL, 400, NULL},
    {"no inputs", "POST", "/v2/models/attention-dot/infer", "{\"inputs\":[]}", NULL, 0, NULL, 400, NULL},
    {"missing key", "POST", "/v2/models/attention-dot/infer", "{\"inputs\":[" Q22 "," V22 "]}", NULL, 0, NULL, 400, NULL},
    {"input given twice", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 "," Q22 "," K22 "," V22 "]}", NULL, 0, NULL, 400, NULL},
    {"unknown input name", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 "," K22 "," V22 ",{\"name\":\"attn.weight\",\"shape\":[2,2],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}",
     NULL, 0, NULL, 400, NULL},
    {"unknown parameter", "POST", "/v2/models/multihead/infer",
     "{\"parameters\":{\"num_head\":2},\"inputs\":[" Q22 "]}", NULL, 0, NULL, 400, NULL},
    {"unknown output", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 "," K22 "," V22 "],\"outputs\":[{\"name\":\"attention\"}]}", NULL, 0, NULL, 400, NULL},
    {"weights asked with need_weights false", "POST", "/v2/models/attention-dot/infer",
     "{\"parameters\":{\"need_weights\":false},\"inputs\":[" Q22 "," K22 "," V22 "],\"outputs\":[{\"name\":\"weights\"}]}",
     NULL, 0, NULL, 400, NULL},
    {"Dk differs from Dq (shape mismatch)", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 ",{\"name\":\"key\",\"shape\":[2,1],\"datatype\":\"FP32\",\"data\":[1,0]}," V22 "]}",
     NULL, 0, NULL, 400, NULL},
    {"num_heads missing", "POST", "/v2/models/multihead/infer", "{\"inputs\":[" Q22 "]}", NULL, 0, NULL, 400, NULL},
    {"hard not argmax or integer", "POST", "/v2/models/attention-dot/infer",
     "{\"parameters\":{\"hard\":\"softest\"},\"inputs\":[" Q22 "," K22 "," V22 "]}", NULL, 0, NULL, 400, NULL},
    {"id not a string", "POST", "/v2/models/attention-dot/infer",
     "{\"id\":7,\"inputs\":[" Q22 "," K22 "," V22 "]}", NULL, 0, NULL, 400, NULL},
    {"model_name differs from the path", "POST", "/v2/models/attention-dot/infer",
     "{\"model_name\":\"multihead\",\"inputs\":[" Q22 "," K22 "," V22 "]}", NULL, 0, NULL, 400, NULL},
    {"unknown top-level field", "POST", "/v2/models/attention-dot/infer",
     "{\"input\":[" Q22 "]}", NULL, 0, NULL, 400, NULL},
    {"Content-Type text/plain", "POST", "/v2/models/attention-dot/infer",
     "{\"inputs\":[" Q22 "," K22 "," V22 "]}", NULL, 0, NULL, 415, "Content-Type: text/plain"},
};

static void test_errors(void)
{
    for (size_t i = 0; i < sizeof err_cases / sizeof err_cases[0]; i++) {
        const err_case *c = &err_cases[i];
        bytes body = {0};
        if (c->json)
            put(&body, c->json, strlen(c->json));
        if (c->bin)
            put(&body, c->bin, c->bin_len);
        char ihl[120];
        const char *hdrs[3] = {c->ctype ? c->ctype
                               : c->bin ? "Content-Type: application/octet-stream"
                                        : "Content-Type: application/json",
                               NULL, NULL};
        if (c->ihl) {
            snprintf(ihl, sizeof ihl, "Inference-Header-Content-Length: %s", c->ihl);
            if (!*c->ihl)
                snprintf(ihl, sizeof ihl, "Inference-Header-Content-Length: %zu", strlen(c->json));
            hdrs[1] = ihl;
        }
        reply r;
        http(c->method, c->path, c->json ? body.p : NULL, body.len, hdrs, &r);
        json_t *j = json_loadb(r.body.p ? r.body.p : "", r.body.len, 0, NULL);
        char name[200];
        snprintf(name, sizeof name, "error %s: %ld with {\"error\": \"...\"}", c->name, c->status);
        check(r.status == c->status && json_is_object(j) && json_object_size(j) == 1 &&
                  json_is_string(json_object_get(j, "error")) && json_string_length(json_object_get(j, "error")) > 0,
              name, "got %ld %s", r.status, short_body(&r));
        json_decref(j);
        reply_free(&r);
        free(body.p);
        check_alive(c->name);
    }
}

/* ------------------------------------------------------------ README examples */

/* Runs a command with the server's base URL appended; its output is shown
 * only when it fails. 0 when it exits 0. */
static int run_example(const char *cmd, char *out, size_t outlen)
{
    char line[1024];
    snprintf(line, sizeof line, "%s %s 2>&1", cmd, base);
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
        printf("skip README Python example: /usr/bin/python3 has no numpy or requests\n");
        return;
    }
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/binary_client.py", dir);
    rc = run_example(cmd, out, sizeof out);
    check(rc == 0, "README Python example (binary in and out, against torch)", "exit %d:\n%s", rc, out);
    if (verbose)
        printf("%s", out);
}

int main(int argc, char **argv)
{
    const char *bin = "build/attn-server", *golden = "tests/golden", *log = "build/test_kserve_server.log";
    const char *examples = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--server") && i + 1 < argc)
            bin = argv[++i];
        else if (!strcmp(argv[i], "--golden") && i + 1 < argc)
            golden = argv[++i];
        else if (!strcmp(argv[i], "--log") && i + 1 < argc)
            log = argv[++i];
        else if (!strcmp(argv[i], "--examples") && i + 1 < argc)
            examples = argv[++i];
        else if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else {
            fprintf(stderr, "usage: test_kserve [--server bin] [--golden dir] [--examples dir] [--log file] [-v]\n");
            return 2;
        }
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (server_start(bin, log) != 0) {
        fprintf(stderr, "test_kserve: %s did not start (see %s)\n", bin, log);
        return 1;
    }
    test_server_routes();
    test_metadata();
    run_golden(golden);
    test_documented_binary();
    test_json_outputs();
    test_errors();
    if (examples)
        test_examples(examples);
    check(server_stop(), "server exits 0 on SIGTERM", "it did not");
    curl_global_cleanup();
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
