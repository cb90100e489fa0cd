/* harness.c - the HTTP test harness shared by test_http and test_kserve: counting, buffers, tensors in the three forms, libcurl requests, servers on free loopback ports, and the .case file runner. */
#include "harness.h"
#include "golden.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ counting */

int h_verbose;
static atomic_int n_pass, n_fail, n_skip;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;


int check(int ok, const char *name, const char *fmt, ...)
{
    if (ok) {
        atomic_fetch_add(&n_pass, 1);
        if (h_verbose) {
            pthread_mutex_lock(&print_lock);
            printf("ok   %s\n", name);
            pthread_mutex_unlock(&print_lock);
        }
        return 1;
    }
    atomic_fetch_add(&n_fail, 1);
    pthread_mutex_lock(&print_lock);
    printf("FAIL %s: ", name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    pthread_mutex_unlock(&print_lock);
    return 0;
}

void skip(const char *name, const char *why)
{
    atomic_fetch_add(&n_skip, 1);
    pthread_mutex_lock(&print_lock);
    printf("SKIPPED: %s (%s)\n", name, why);
    fflush(stdout);
    pthread_mutex_unlock(&print_lock);
}

void skip_quiet(void)
{
    atomic_fetch_add(&n_skip, 1);
}

int h_report(void)
{
    int fail = atomic_load(&n_fail);
    printf("%d passed, %d failed, %d skipped\n", atomic_load(&n_pass), fail, atomic_load(&n_skip));
    return fail ? 1 : 0;
}

double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void h_begin(const char *server_path, const char *log_path, void (*usage)(void))
{
    if (!server_path)
        usage();
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_ALL);
    FILE *lf = fopen(log_path, "w");
    if (lf)
        fclose(lf);
}

typedef struct {
    void (*fn)(CURL *h, int i, void *arg);
    int i;
    void *arg;
} client_thread;

static void *client_main(void *arg)
{
    const client_thread *c = arg;
    CURL *h = curl_easy_init();
    c->fn(h, c->i, c->arg);
    curl_easy_cleanup(h);
    return NULL;
}

double run_clients(int n, void (*fn)(CURL *h, int i, void *arg), void *args, size_t size)
{
    double t0 = now_ms();
    size_t count = n > 0 ? (size_t)n : 1;
    pthread_t *th = calloc(count, sizeof *th);
    client_thread *ct = calloc(count, sizeof *ct);
    if (!th || !ct) {
        check(0, "run_clients: memory for the threads", "calloc failed");
        free(th), free(ct);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        ct[i] = (client_thread){fn, i, (char *)args + (size_t)i * size};
        pthread_create(&th[i], NULL, client_main, &ct[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    free(th), free(ct);
    return now_ms() - t0;
}

/* ------------------------------------------------------------ buffers */

void buf_put(buf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            fprintf(stderr, "harness: out of memory\n");
            exit(2);
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

void buf_puts(buf *b, const char *s) { buf_put(b, s, strlen(s)); }

void buf_printf(buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        buf_put(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big)
        exit(2);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf_put(b, big, (size_t)n);
    free(big);
}

void buf_free(buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------ base64 */

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void b64_encode(buf *out, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n) v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n) v |= p[i + 2];
        char q[4] = {b64_alphabet[(v >> 18) & 63], b64_alphabet[(v >> 12) & 63],
                     i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=',
                     i + 2 < n ? b64_alphabet[v & 63] : '='};
        buf_put(out, q, 4);
    }
}

long b64_decode(const char *s, uint8_t **out)
{
    size_t len = strlen(s);
    if (len % 4)
        return -1;
    uint8_t *o = malloc(len / 4 * 3 + 1);
    if (!o)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            char c = s[i + j];
            const char *k = strchr(b64_alphabet, c);
            if (c == '=' && i + 4 == len && j >= 2) {
                pad++;
                v <<= 6;
            } else if (c && k && !pad) {
                v = v << 6 | (uint32_t)(k - b64_alphabet);
            } else {
                free(o);
                return -1;
            }
        }
        o[n++] = (uint8_t)(v >> 16);
        if (pad < 2) o[n++] = (uint8_t)(v >> 8);
        if (pad < 1) o[n++] = (uint8_t)v;
    }
    *out = o;
    return (long)n;
}

/* ------------------------------------------------------------ tensors */

const char *const form_names[N_FORMS] = {"nested", "flat", "b64"};

void tensor_free(tensor *t)
{
    free(t->data);
    memset(t, 0, sizeof *t);
}

/* The shape is read down the first elements, then every element is
 * checked against it (ragged or mixed nesting is not a tensor). A null
 * element is the service's JSON for -inf (an lse row with no key). */
static int nested_check(json_t *j, int depth, const tensor *t)
{
    if (depth == t->rank)
        return json_is_number(j) || json_is_null(j) ? 0 : -1;
    if (!json_is_array(j) || (long)json_array_size(j) != t->shape[depth])
        return -1;
    for (size_t i = 0; i < json_array_size(j); i++)
        if (nested_check(json_array_get(j, i), depth + 1, t))
            return -1;
    return 0;
}

static int nested_shape(json_t *j, tensor *t)
{
    json_t *e = j;
    t->rank = 0;
    while (json_is_array(e)) {
        if (t->rank == MAX_RANK)
            return -1;
        t->shape[t->rank++] = (long)json_array_size(e);
        e = json_array_get(e, 0);
    }
    return t->rank ? nested_check(j, 0, t) : -1;
}

static void nested_fill(json_t *j, float *out, long *k)
{
    if (json_is_number(j) || json_is_null(j)) {
        out[(*k)++] = json_is_null(j) ? -INFINITY : (float)json_number_value(j);
        return;
    }
    for (size_t i = 0; i < json_array_size(j); i++)
        nested_fill(json_array_get(j, i), out, k);
}

/* Reads a tensor in any of the three forms; 0 ok, -1 not a tensor. */
int tensor_read(json_t *j, tensor *t)
{
    memset(t, 0, sizeof *t);
    if (json_is_array(j)) {
        if (nested_shape(j, t))
            return -1;
        t->count = 1;
        for (int i = 0; i < t->rank; i++)
            t->count *= t->shape[i];
        t->data = calloc((size_t)t->count + 1, sizeof(float));
        long k = 0;
        nested_fill(j, t->data, &k);
        return k == t->count ? 0 : -1;
    }
    json_t *shape = json_object_get(j, "shape");
    if (!json_is_array(shape) || json_array_size(shape) > MAX_RANK)
        return -1;
    t->rank = (int)json_array_size(shape);
    t->count = 1;
    for (int i = 0; i < t->rank; i++) {
        json_t *d = json_array_get(shape, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 ||
            json_integer_value(d) > (1L << 30))
            return -1;
        t->shape[i] = (long)json_integer_value(d);
        t->count *= t->shape[i];
        if (t->count > (1L << 30))
            return -1;
    }
    json_t *b64 = json_object_get(j, "b64");
    if (json_is_string(b64)) {
        if (!json_is_string(json_object_get(j, "dtype")) ||
            strcmp(json_string_value(json_object_get(j, "dtype")), "float32"))
            return -1;
        uint8_t *raw = NULL;
        long n = b64_decode(json_string_value(b64), &raw);
        if (n < 0 || n != t->count * 4) {
            free(raw);
            return -1;
        }
        t->data = calloc((size_t)t->count + 1, sizeof(float));
        for (long i = 0; i < t->count; i++) {
            uint32_t u = (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
                         (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;
            memcpy(&t->data[i], &u, 4);
        }
        free(raw);
        return 0;
    }
    json_t *data = json_object_get(j, "data");
    if (!json_is_array(data) || (long)json_array_size(data) != t->count)
        return -1;
    t->data = calloc((size_t)t->count + 1, sizeof(float));
    for (long i = 0; i < t->count; i++)
        t->data[i] = (float)json_number_value(json_array_get(data, (size_t)i));
    return 0;
}

/* The tolerance used for every numeric comparison: float32 results from a
 * different summation order than the reference's. */
int close_enough(double got, double want)
{
    return fabs(got - want) <= 1e-5 + 1e-4 * fabs(want);
}

/* Compares a tensor with expected data; describes the first difference. */
int tensor_matches(const tensor *t, int rank, const long *shape,
                          const float *want, char *why, size_t why_len)
{
    if (t->rank != rank) {
        snprintf(why, why_len, "rank %d, expected %d", t->rank, rank);
        return 0;
    }
    long count = 1;
    for (int i = 0; i < rank; i++) {
        if (t->shape[i] != shape[i]) {
            snprintf(why, why_len, "dimension %d is %ld, expected %ld", i, t->shape[i], shape[i]);
            return 0;
        }
        count *= shape[i];
    }
    for (long i = 0; i < count; i++) {
        if (t->data[i] != want[i] && !close_enough(t->data[i], want[i])) { /* -inf too */
            snprintf(why, why_len, "element %ld is %.9g, expected %.9g", i,
                     (double)t->data[i], (double)want[i]);
            return 0;
        }
    }
    return 1;
}

/* Appends a tensor to a JSON text in one of the three request forms. */
static void nested_put(buf *b, const float *d, int rank, const long *shape, long *k)
{
    buf_puts(b, "[");
    for (long i = 0; i < shape[0]; i++) {
        if (i)
            buf_puts(b, ",");
        if (rank == 1)
            buf_printf(b, "%.9g", (double)d[(*k)++]);
        else
            nested_put(b, d, rank - 1, shape + 1, k);
    }
    buf_puts(b, "]");
}

void tensor_put(buf *b, const float *d, int rank, const long *shape, int form)
{
    long count = 1;
    for (int i = 0; i < rank; i++)
        count *= shape[i];
    if (form == FORM_NESTED) {
        long k = 0;
        nested_put(b, d, rank, shape, &k);
        return;
    }
    buf_puts(b, "{\"shape\":[");
    for (int i = 0; i < rank; i++)
        buf_printf(b, "%s%ld", i ? "," : "", shape[i]);
    if (form == FORM_FLAT) {
        buf_puts(b, "],\"data\":[");
        for (long i = 0; i < count; i++)
            buf_printf(b, "%s%.9g", i ? "," : "", (double)d[i]);
        buf_puts(b, "]}");
        return;
    }
    buf_puts(b, "],\"dtype\":\"float32\",\"b64\":\"");
    uint8_t *raw = malloc((size_t)count * 4 + 1);
    for (long i = 0; i < count; i++) {
        uint32_t u;
        memcpy(&u, &d[i], 4);
        raw[4 * i] = (uint8_t)u;
        raw[4 * i + 1] = (uint8_t)(u >> 8);
        raw[4 * i + 2] = (uint8_t)(u >> 16);
        raw[4 * i + 3] = (uint8_t)(u >> 24);
    }
    b64_encode(b, raw, (size_t)count * 4);
    free(raw);
    buf_puts(b, "\"}");
}

/* ------------------------------------------------------------ HTTP */

void response_free(response *r)
{
    buf_free(&r->body);
    buf_free(&r->headers);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    buf_put(ud, p, size * n);
    return size * n;
}

typedef struct {
    const char *p;
    size_t left;
} upload;

static size_t on_read(char *dst, size_t size, size_t n, void *ud)
{
    upload *u = ud;
    size_t k = size * n;
    if (k > 1000)
        k = 1000; /* many small chunks */
    if (k > u->left)
        k = u->left;
    memcpy(dst, u->p, k);
    u->p += k;
    u->left -= k;
    return k;
}

/* Value of response header `name` (case-insensitive), copied into out;
 * 0 when present. */
int header_value(const response *r, const char *name, char *out, size_t out_len)
{
    size_t nl = strlen(name);
    const char *p = r->headers.data ? r->headers.data : "";
    while (*p) {
        const char *eol = strstr(p, "\r\n");
        if (!eol)
            eol = p + strlen(p);
        if ((size_t)(eol - p) > nl && !strncasecmp(p, name, nl) && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            size_t vl = (size_t)(eol - v);
            if (vl >= out_len)
                vl = out_len - 1;
            memcpy(out, v, vl);
            out[vl] = 0;
            return 0;
        }
        p = *eol ? eol + 2 : eol;
    }
    return -1;
}

/* Sends one request on handle h (kept across calls for keep-alive). */
void http(CURL *h, const char *base, const request *rq, response *r)
{
    memset(r, 0, sizeof *r);
    curl_easy_reset(h);
    buf url = {0}; /* unbounded: the over-long URL case is 64 KB */
    buf_printf(&url, "%s", base);
    buf_puts(&url, rq->path);
    curl_easy_setopt(h, CURLOPT_URL, url.data);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r->body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r->headers);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L); /* a hung server fails its case, not the run */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L); /* send /../ as written: traversal cases */
    struct curl_slist *hl = NULL;
    /* curl adds "Expect: 100-continue" to large bodies; the server answers
     * it, but without it the request is exactly what a plain client sends. */
    hl = curl_slist_append(hl, "Expect:");
    if (rq->has_body && !rq->no_json_type)
        hl = curl_slist_append(hl, "Content-Type: application/json");
    for (const char *const *p = rq->headers; p && *p; p++)
        hl = curl_slist_append(hl, *p);
    upload up = {rq->body, rq->body_len};
    if (rq->has_body) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        if (rq->chunked) {
            hl = curl_slist_append(hl, "Transfer-Encoding: chunked");
            curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(h, CURLOPT_READDATA, &up);
        } else {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
        }
    }
    if (strcmp(rq->method, "POST") && strcmp(rq->method, "GET")) {
        if (!strcmp(rq->method, "HEAD"))
            curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        else
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
    } else if (!strcmp(rq->method, "GET") && rq->has_body) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "GET");
    }
    if (rq->fresh)
        curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(h, CURLOPT_MAX_SEND_SPEED_LARGE, (curl_off_t)rq->pace); /* the handle is reused */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    r->curl_err = (int)curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &r->connects);
    curl_slist_free_all(hl);
    buf_free(&url);
    if (r->body.data)
        r->json = json_loadb(r->body.data, r->body.len, 0, NULL);
}

/* GET path on a fresh handle; returns the status (0 when unreachable). */
long http_get_status(CURL *h, const char *base, const char *path)
{
    request rq = {.method = "GET", .path = path};
    response r;
    http(h, base, &rq, &r);
    long st = r.curl_err ? 0 : r.status;
    response_free(&r);
    return st;
}

const char *short_body(const response *r)
{
    static _Thread_local char s[300];
    snprintf(s, sizeof s, "%.*s", r->body.len > 280 ? 280 : (int)r->body.len,
             r->body.data ? r->body.data : "");
    return s;
}

/* ------------------------------------------------------------ servers */

/* A port that was free a moment ago: bind port 0, read it back, close. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(fd, (struct sockaddr *)&a, &al)) {
        perror("harness: free port");
        exit(2);
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* The child: environment, log, exec. */
static void server_exec(const server *s, const char *bin, const char *const *env, const char *log)
{
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    setenv("ATTN_PORT", port, 1);
    setenv("ATTN_BIND", "127.0.0.1", 1);
    setenv("ATTN_LOG_LEVEL", "info", 0);
    for (const char *const *e = env; e && *e; e++)
        putenv((char *)*e);
    FILE *lf = fopen(log, "a");
    if (lf) {
        dup2(fileno(lf), 1);
        dup2(fileno(lf), 2);
    }
    execl(bin, bin, (char *)NULL);
    fprintf(stderr, "harness: cannot run %s: %s\n", bin, strerror(errno));
    _exit(127);
}

int server_start(server *s, const char *bin, const char *name, const char *health,
                 const char *const *env, const char *log)
{
    s->name = name;
    s->health = health;
    s->port = free_port();
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", s->port);
    fflush(NULL);
    s->pid = fork();
    if (s->pid < 0)
        return -1;
    if (s->pid == 0)
        server_exec(s, bin, env, log);
    CURL *h = curl_easy_init();
    double t0 = now_ms();
    int up = 0;
    while (now_ms() - t0 < 15000) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            break;
        }
        if (http_get_status(h, s->base, health) == 200) {
            up = 1;
            break;
        }
        usleep(50 * 1000);
    }
    curl_easy_cleanup(h);
    return up ? 0 : -1;
}

int server_stop(server *s)
{
    if (s->pid <= 0)
        return 0;
    kill(s->pid, SIGTERM);
    double t0 = now_ms();
    int st = 0;
    while (now_ms() - t0 < 10000) {
        pid_t p = waitpid(s->pid, &st, WNOHANG);
        if (p == s->pid) {
            s->pid = 0;
            if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                return 1;
            /* Said here, so a failed "exits 0" check says how it ended. */
            if (WIFEXITED(st))
                fprintf(stderr, "harness: server %s exited with status %d\n", s->name, WEXITSTATUS(st));
            else
                fprintf(stderr, "harness: server %s ended by signal %d\n", s->name, WTERMSIG(st));
            return 0;
        }
        usleep(20 * 1000);
    }
    fprintf(stderr, "harness: server %s did not exit within 10 s of SIGTERM; killing it\n", s->name);
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &st, 0);
    s->pid = 0;
    return 0;
}

void check_alive(CURL *h, const server *s, const char *after)
{
    long st = http_get_status(h, s->base, s->health);
    char name[300];
    snprintf(name, sizeof name, "%s: %s answers afterwards", after, s->health);
    check(st == 200, name, "GET %s on %s gave %ld", s->health, s->name, st);
}

/* ------------------------------------------------------------ JSON paths */


json_t *json_path(json_t *j, const char *path)
{
    const char *p = path;
    while (j && *p) {
        if (*p == '.') {
            p++;
            continue;
        }
        if (*p == '[' && p[1] == '"') {
            const char *e = strstr(p + 2, "\"]");
            if (!e)
                return NULL;
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)(e - p - 2), p + 2);
            j = json_object_get(j, key);
            p = e + 2;
        } else if (*p == '[') {
            char *e;
            long i = strtol(p + 1, &e, 10);
            if (*e != ']')
                return NULL;
            j = json_array_get(j, (size_t)i);
            p = e + 1;
        } else {
            size_t n = strcspn(p, ".[");
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)n, p);
            j = json_object_get(j, key);
            p += n;
        }
    }
    return j;
}

int json_close(json_t *got, json_t *want)
{
    if (json_is_number(want))
        return json_is_number(got) && close_enough(json_number_value(got), json_number_value(want));
    if (json_is_array(want)) {
        if (!json_is_array(got) || json_array_size(got) != json_array_size(want))
            return 0;
        for (size_t i = 0; i < json_array_size(want); i++)
            if (!json_close(json_array_get(got, i), json_array_get(want, i)))
                return 0;
        return 1;
    }
    if (json_is_object(want)) {
        if (!json_is_object(got) || json_object_size(got) != json_object_size(want))
            return 0;
        const char *k;
        json_t *v;
        json_object_foreach(want, k, v)
            if (!json_close(json_object_get(got, k), v))
                return 0;
        return 1;
    }
    return json_equal(got, want);
}

/* ------------------------------------------------------------ case files */

char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    buf b = {0};
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        buf_put(&b, tmp, n);
    fclose(f);
    if (!b.data)
        buf_put(&b, "", 0);
    *len = b.len;
    return b.data;
}

char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

/* error: CODE [FIELD] - the native error envelope. */
static void check_error_line(const char *name, const char *val, const response *r)
{
    char code[64] = "", field[256] = "";
    int nf = sscanf(val, "%63s %255s", code, field);
    json_t *c = json_path(r->json, "error.code");
    json_t *m = json_path(r->json, "error.message");
    json_t *f = json_path(r->json, "error.field");
    int ok = json_is_string(c) && !strcmp(json_string_value(c), code) && json_is_string(m) &&
             json_string_length(m) > 0;
    if (ok && nf == 2)
        ok = json_is_string(f) && !strcmp(json_string_value(f), field);
    check(ok, name, "body %s", short_body(r));
}

/* kserve-error: [TEXT] - the body is exactly {"error": "..."} (KServe's
 * error form), non-empty, containing TEXT when given. */
static void check_kserve_error_line(const char *name, const char *val, const response *r)
{
    json_t *e = json_object_get(r->json, "error");
    check(json_is_object(r->json) && json_object_size(r->json) == 1 && json_is_string(e) &&
              json_string_length(e) > 0 && strstr(json_string_value(e), val),
          name, "body %s", short_body(r));
}

/* json: PATH = JSON  or  PATH ~ "substring" */
static void check_json_line(const char *cname, char *val, const response *r)
{
    char name[512];
    char *op = strpbrk(val, "=~");
    if (!op) {
        snprintf(name, sizeof name, "%s: json %s", cname, val);
        check(0, name, "case line has no = or ~");
        return;
    }
    char opc = *op;
    *op = 0;
    char *path = trim(val), *rhs = trim(op + 1);
    json_t *got = json_path(r->json, path);
    json_t *want = json_loads(rhs, JSON_DECODE_ANY, NULL);
    snprintf(name, sizeof name, "%s: json %s %c %s", cname, path, opc, rhs);
    if (!want)
        check(0, name, "expected value is not JSON");
    else if (opc == '=')
        check(json_close(got, want), name, "body %s", short_body(r));
    else
        check(json_is_string(got) && json_is_string(want) &&
                  strstr(json_string_value(got), json_string_value(want)),
              name, "body %s", short_body(r));
    json_decref(want);
}

/* shape: PATH = d0 d1 ... - a tensor in any form with that shape */
static void check_shape_line(const char *name, char *val, const response *r)
{
    char *eq = strchr(val, '=');
    if (!eq) {
        check(0, name, "case line has no =");
        return;
    }
    *eq = 0;
    long want[MAX_RANK];
    int rank = 0;
    for (char *t = strtok(eq + 1, " "); t && rank < MAX_RANK; t = strtok(NULL, " "))
        want[rank++] = strtol(t, NULL, 10);
    tensor t;
    int ok = tensor_read(json_path(r->json, trim(val)), &t) == 0 && t.rank == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = t.shape[i] == want[i];
    check(ok, name, "got rank %d [%ld %ld %ld %ld]; body %s", t.rank, t.shape[0], t.shape[1],
          t.shape[2], t.shape[3], short_body(r));
    tensor_free(&t);
}

/* tensor: PATH = nested arrays - a tensor in any form, within tolerance */
static void check_tensor_line(const char *name, char *val, const response *r)
{
    char *eq = strchr(val, '=');
    json_t *want = eq ? json_loads(eq + 1, JSON_DECODE_ANY, NULL) : NULL;
    if (eq)
        *eq = 0;
    tensor w = {0}, t = {0};
    char why[200] = "not a tensor";
    if (check(want && tensor_read(want, &w) == 0, name, "expected value is not a nested tensor")) {
        int ok = tensor_read(json_path(r->json, trim(val)), &t) == 0 &&
                 tensor_matches(&t, w.rank, w.shape, w.data, why, sizeof why);
        check(ok, name, "%s; body %s", why, short_body(r));
    }
    tensor_free(&t);
    tensor_free(&w);
    json_decref(want);
}

/* response-header: Name [: substring]  /  no-response-header: Name */
static void check_header_line(const char *name, int want_it, char *val, const response *r)
{
    char want[256] = "", got[1024] = "";
    char *colon = want_it ? strchr(val, ':') : NULL;
    if (colon) {
        snprintf(want, sizeof want, "%s", trim(colon + 1));
        *colon = 0;
    }
    int found = header_value(r, trim(val), got, sizeof got) == 0;
    if (want_it)
        check(found && strstr(got, want), name, "headers %s", r->headers.data ? r->headers.data : "");
    else
        check(!found, name, "present: %s", got);
}

/* Applies one check line of a case to the response. */
static void case_check(const char *cname, const char *key, char *val, const response *r)
{
    char name[512];
    snprintf(name, sizeof name, "%s: %s %s", cname, key, val);
    if (!strcmp(key, "status"))
        check(r->status == strtol(val, NULL, 10), name, "got %ld (curl %d), body %s", r->status,
              r->curl_err, short_body(r));
    else if (!strcmp(key, "error"))
        check_error_line(name, val, r);
    else if (!strcmp(key, "kserve-error"))
        check_kserve_error_line(name, val, r);
    else if (!strcmp(key, "json"))
        check_json_line(cname, val, r);
    else if (!strcmp(key, "absent"))
        check(r->json && !json_path(r->json, val), name, "body %s", short_body(r));
    else if (!strcmp(key, "shape"))
        check_shape_line(name, val, r);
    else if (!strcmp(key, "tensor"))
        check_tensor_line(name, val, r);
    else if (!strcmp(key, "response-header") || !strcmp(key, "no-response-header"))
        check_header_line(name, key[0] == 'r', val, r);
    else if (!strcmp(key, "body-contains"))
        check(r->body.data && strstr(r->body.data, val), name, "body %s", short_body(r));
    else
        check(0, name, "unknown case line '%s'", key);
}

/* One .case file, parsed: the request lines, the checks, the body. */
enum { CASE_MAX_HEADERS = 16, CASE_MAX_CHECKS = 64 };
typedef struct {
    char name[256];
    char *text;             /* the file; every pointer below points into it */
    request rq;
    char *hdrs[CASE_MAX_HEADERS];
    int nh;
    int hdr_repeat;         /* header-repeat: N Name: value */
    char *hdr_repeat_line;
    int body_repeat;        /* body-repeat: N */
    char *body_open;        /* body-open: text sent before the repeated body */
    char *body_close;       /* body-close: text sent after it */
    char *body_file;        /* body-file: name */
    char *tail;             /* binary: escaped bytes after the body */
    int ihl_auto;           /* inference-header: body */
    size_t json_len;        /* the body's length before the binary tail */
    const char *instance;   /* instance: name */
    char *checks[CASE_MAX_CHECKS][2];
    int nc;
} case_file;

/* A request line (one that shapes what is sent); 0 when key is not one. */
static int case_request_line(case_file *c, const char *key, char *val)
{
    if (!strcmp(key, "request")) {
        char *sp = strchr(val, ' ');
        if (sp) {
            *sp = 0;
            c->rq.path = trim(sp + 1);
        }
        c->rq.method = val;
    } else if (!strcmp(key, "header")) {
        if (c->nh < CASE_MAX_HEADERS - 1)
            c->hdrs[c->nh++] = val;
        if (!strncasecmp(val, "Content-Type", 12))
            c->rq.no_json_type = 1;
    } else if (!strcmp(key, "header-repeat")) {
        c->hdr_repeat = atoi(val);
        c->hdr_repeat_line = strchr(val, ' ');
    } else if (!strcmp(key, "instance")) {
        c->instance = val;
    } else if (!strcmp(key, "chunked")) {
        c->rq.chunked = !strcmp(val, "yes");
    } else if (!strcmp(key, "body-file")) {
        c->body_file = val;
    } else if (!strcmp(key, "body-repeat")) {
        c->body_repeat = atoi(val);
    } else if (!strcmp(key, "body-open")) {
        c->body_open = val;
    } else if (!strcmp(key, "body-close")) {
        c->body_close = val;
    } else if (!strcmp(key, "binary")) {
        c->tail = val;
    } else if (!strcmp(key, "inference-header")) {
        c->ihl_auto = !strcmp(val, "body");
    } else {
        return 0;
    }
    return 1;
}

/* Splits the file into lines and body; 0 ok. */
static int case_parse(case_file *c, char *text, size_t len)
{
    c->text = text;
    c->rq = (request){.method = "GET", .path = "/"};
    c->body_repeat = 1;
    char *body = strstr(text, "\n--- body\n");
    if (body) {
        *body = 0;
        c->rq.body = body + 10;
        c->rq.body_len = len - (size_t)(c->rq.body - text);
        c->rq.has_body = 1;
    }
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        line = trim(line);
        if (!*line || *line == '#')
            continue;
        char *colon = strchr(line, ':');
        if (!colon) {
            check(0, c->name, "line without a key: %s", line);
            return -1;
        }
        *colon = 0;
        char *key = trim(line), *val = trim(colon + 1);
        if (!case_request_line(c, key, val) && c->nc < CASE_MAX_CHECKS) {
            c->checks[c->nc][0] = key;
            c->checks[c->nc][1] = val;
            c->nc++;
        }
    }
    return 0;
}

/* C escapes (\0, \1, \xNN, \\) to bytes, appended to b. */
static void put_escaped(buf *b, const char *s)
{
    while (*s) {
        unsigned char ch = (unsigned char)*s++;
        if (ch == '\\' && *s == 'x' && s[1] && s[2]) {
            char hex[3] = {s[1], s[2], 0};
            ch = (unsigned char)strtoul(hex, NULL, 16);
            s += 3;
        } else if (ch == '\\' && *s >= '0' && *s <= '7') {
            ch = (unsigned char)(*s++ - '0');
        } else if (ch == '\\' && *s) {
            ch = (unsigned char)*s++;
        }
        buf_put(b, &ch, 1);
    }
}

/* The body as sent: body-open, the file's own or body-file's body-repeat
 * times, body-close, then the binary tail (its JSON header loses its final
 * newline). 0 ok. */
static int case_body(case_file *c, const char *dir, buf *out)
{
    char *owned = NULL;
    if (c->body_file) {
        char bp[1024];
        snprintf(bp, sizeof bp, "%s/%s", dir, c->body_file);
        owned = read_file(bp, &c->rq.body_len);
        if (!owned) {
            check(0, c->name, "cannot read body file %s", bp);
            return -1;
        }
        c->rq.body = owned;
        c->rq.has_body = 1;
    }
    if (c->body_open)
        buf_put(out, c->body_open, strlen(c->body_open));
    for (int i = 0; c->rq.has_body && i < (c->body_repeat > 1 ? c->body_repeat : 1); i++)
        buf_put(out, c->rq.body, c->rq.body_len);
    if (c->body_close)
        buf_put(out, c->body_close, strlen(c->body_close));
    free(owned);
    if (c->tail && out->len && out->data[out->len - 1] == '\n')
        out->data[--out->len] = 0;
    c->json_len = out->len;
    if (c->tail)
        put_escaped(out, c->tail);
    if (!out->data)
        buf_put(out, "", 0);
    c->rq.body = out->data;
    c->rq.body_len = out->len;
    return 0;
}

/* The header list: the case's own, Inference-Header-Content-Length, then
 * the repeated ones. Every entry is malloc'd; NULL-terminated. */
static char **case_headers(const case_file *c)
{
    int n = c->nh + 1 + (c->hdr_repeat > 0 ? c->hdr_repeat : 0);
    char **h = calloc((size_t)n + 1, sizeof *h);
    int k = 0;
    for (int i = 0; i < c->nh; i++)
        h[k++] = strdup(c->hdrs[i]);
    if (c->ihl_auto) {
        buf hb = {0};
        buf_printf(&hb, "Inference-Header-Content-Length: %zu", c->json_len);
        h[k++] = hb.data;
    }
    const char *hc = c->hdr_repeat_line ? strchr(c->hdr_repeat_line, ':') : NULL;
    for (int i = 0; hc && i < c->hdr_repeat; i++) {
        buf hb = {0};
        buf_printf(&hb, "%.*s-%d:%s", (int)(hc - c->hdr_repeat_line - 1), c->hdr_repeat_line + 1,
                   i + 1, hc + 1);
        h[k++] = hb.data;
    }
    return h;
}


/* Sends the case and makes its checks; then Server-Timing, then (after an
 * error) that the server still answers. */
static void case_send(CURL *h, case_file *c, server *s)
{
    response r;
    http(h, s->base, &c->rq, &r);
    int bad = r.status >= 400 || r.curl_err;
    for (int i = 0; i < c->nc; i++)
        case_check(c->name, c->checks[i][0], c->checks[i][1], &r);
    char st[4096], name[300];
    snprintf(name, sizeof name, "%s: Server-Timing", c->name);
    /* every response carries Server-Timing (414 and 431 too: the service
     * answers them below libmicrohttpd's own limit) */
    if (r.status != 0)
        check(header_value(&r, "Server-Timing", st, sizeof st) == 0 && strstr(st, "parse;dur=") &&
                  strstr(st, "compute;dur=") && strstr(st, "encode;dur="),
              name, "missing or incomplete; headers %s", r.headers.data);
    response_free(&r);
    if (bad)
        check_alive(h, s, c->name);
}

/* Runs one .case file: request lines, check lines, then "--- body". */
static void run_case(CURL *h, const char *dir, const char *file,
                     server *(*instance)(const char *name))
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t len;
    case_file c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%.*s", (int)(strlen(file) - 5), file);
    char *text = read_file(path, &len);
    if (!text) {
        check(0, c.name, "cannot read %s", path);
        return;
    }
    buf body = {0};
    if (case_parse(&c, text, len) == 0 && case_body(&c, dir, &body) == 0) {
        char **hdrs = case_headers(&c);
        c.rq.headers = (const char *const *)hdrs;
        case_send(h, &c, instance(c.instance));
        for (char **p = hdrs; *p; p++)
            free(*p);
        free(hdrs);
    }
    buf_free(&body);
    free(text);
}

static int case_filter(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 5 && !strcmp(d->d_name + n - 5, ".case");
}

void run_case_dir(const char *dir, const char *only, server *(*instance)(const char *name))
{
    struct dirent **list;
    int n = scandir(dir, &list, case_filter, alphasort);
    if (!check(n > 0, "case files", "no *.case files in %s", dir))
        return;
    CURL *h = curl_easy_init();
    for (int i = 0; i < n; i++) {
        if (!only || strstr(list[i]->d_name, only))
            run_case(h, dir, list[i]->d_name, instance);
        free(list[i]);
    }
    free(list);
    curl_easy_cleanup(h);
}

/* ------------------------------------------------------------ golden vectors */

void golden_each(const char *dir, const char *only, const char *prefix,
                 void (*fn)(const char *file, const golden_case *gc, void *arg), void *arg)
{
    char **paths;
    int n = golden_list(dir, &paths);
    if (!check(n > 0, "golden vectors", "no golden cases in %s", dir))
        return;
    for (int i = 0; i < n; i++) {
        if (only && !strstr(paths[i], only))
            continue;
        golden_case gc;
        char err[256], name[400];
        const char *file = strrchr(paths[i], '/') ? strrchr(paths[i], '/') + 1 : paths[i];
        snprintf(name, sizeof name, "%s %s", prefix, file);
        if (!check(golden_load(paths[i], &gc, err, sizeof err) == 0, name, "%s", err))
            continue;
        fn(file, &gc, arg);
        golden_free(&gc);
    }
    golden_list_free(paths, n);
}

double metric_sample(const char *text, const char *sample)
{
    size_t sl = strlen(sample);
    for (const char *p = text; p && (p = strstr(p, sample)) != NULL; p += sl)
        if ((p == text || p[-1] == '\n') && p[sl] == ' ')
            return strtod(p + sl + 1, NULL);
    return -1;
}

int log_has(const char *log, const char *first, ...)
{
    FILE *f = fopen(log, "r");
    char line[4096];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        va_list ap;
        va_start(ap, first);
        found = 1;
        for (const char *w = first; w; w = va_arg(ap, const char *))
            found &= strstr(line, w) != NULL;
        va_end(ap);
    }
    if (f)
        fclose(f);
    return found;
}
