/* harness.h - the HTTP test harness shared by test_http and test_kserve: counts checks, starts the server on a free loopback port, posts with libcurl, reads tensors and runs .case files, stops the server. */
#ifndef HARNESS_H
#define HARNESS_H

#include <curl/curl.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ------------------------------------------------------------ counting */

/* -v: name every passing check too. */
extern int h_verbose;

/* One test: counts it (thread-safe), prints a failure with its details.
 * Returns ok. */
int check(int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A check not made (a tool is missing): counted as skipped, and announced
 * with a `SKIPPED: name (why)` line that tests/run.sh collects. */
void skip(const char *name, const char *why);
/* A check not made because what it checks is not built yet (the caller
 * reports it): counted as skipped, with no SKIPPED line (those mean a
 * missing tool). */
void skip_quiet(void);

/* Prints "N passed, N failed, N skipped"; returns the exit status (1 when
 * anything failed). */
int h_report(void);

double now_ms(void);

/* Starts a test program's run: usage() (which exits) unless a server binary
 * was given; SIGPIPE ignored (a server that dies mid-request must not kill
 * the test); libcurl initialised; the server log at log_path emptied (one
 * run per log). */
void h_begin(const char *server_path, const char *log_path, void (*usage)(void));

/* Whether a line of the server log at log holds every one of the
 * NULL-ended strings. */
int log_has(const char *log, const char *first, ...);

/* n concurrent clients: runs fn(h, i, arg) for i = 0..n-1, arg the i-th
 * element of args (size bytes apart), each on its own thread with its own
 * libcurl handle h (closed after). Returns when all have finished, with the
 * wall time in ms. args stays the caller's. */
double run_clients(int n, void (*fn)(CURL *h, int i, void *arg), void *args, size_t size);

/* ------------------------------------------------------------ buffers */

typedef struct {
    char *data; /* always NUL-terminated once anything was put */
    size_t len, cap;
} buf;

void buf_put(buf *b, const void *p, size_t n);
void buf_puts(buf *b, const char *s);
void buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(buf *b);

void b64_encode(buf *out, const uint8_t *p, size_t n);
long b64_decode(const char *s, uint8_t **out); /* padded base64; length or -1 */

/* A whole file, NUL-terminated; NULL when unreadable. */
char *read_file(const char *path, size_t *len);
char *trim(char *s); /* strips blanks and a CR at both ends, in place */
/* The value of sample (a metric's name and labels as the server writes
 * them) on a line of its own in a Prometheus text exposition; -1 when
 * absent or text is NULL. */
double metric_sample(const char *text, const char *sample);

/* ------------------------------------------------------------ tensors */

#define MAX_RANK 4

/* A tensor decoded from a response, whatever form it came in. */
typedef struct {
    int rank;
    long shape[MAX_RANK];
    long count;
    float *data;
} tensor;

/* The three request forms of a tensor: nested arrays, {shape, data},
 * {shape, dtype, b64}. */
enum { FORM_NESTED, FORM_FLAT, FORM_B64, N_FORMS };
extern const char *const form_names[N_FORMS];

int tensor_read(json_t *j, tensor *t); /* any form; 0 ok, -1 not a tensor */
void tensor_free(tensor *t);
void tensor_put(buf *b, const float *d, int rank, const long *shape, int form);

/* The tolerance of every comparison with a reference (PyTorch, double):
 * |got - want| <= 1e-5 + 1e-4 |want|. */
int close_enough(double got, double want);

/* Compares a tensor with expected data; why says the first difference. */
int tensor_matches(const tensor *t, int rank, const long *shape, const float *want,
                   char *why, size_t why_len);

/* Walks a path such as error.code, output[1][0], params["attn.weight"]. */
json_t *json_path(json_t *j, const char *path);
int json_close(json_t *got, json_t *want); /* numbers within close_enough */

/* ------------------------------------------------------------ HTTP */

typedef struct {
    const char *method;
    const char *path;
    const char *const *headers; /* NULL-terminated, may be NULL */
    const char *body;
    size_t body_len;
    int has_body;
    int chunked;      /* Transfer-Encoding: chunked, sent in 1000-byte pieces */
    int no_json_type; /* do not add Content-Type: application/json */
    int fresh;        /* on a new connection, not a kept-alive one */
    long pace;        /* send the body at most this many bytes a second (0: at once) */
} request;

typedef struct {
    long status;
    buf body;
    buf headers;
    long connects; /* new connections this request opened */
    int curl_err;
    json_t *json; /* parsed body, NULL when not JSON */
} response;

/* Sends one request on handle h (kept across calls for keep-alive). */
void http(CURL *h, const char *base, const request *rq, response *r);
void response_free(response *r);
long http_get_status(CURL *h, const char *base, const char *path); /* 0: unreachable */

/* Response header `name` (case-insensitive) into out; 0 when present. */
int header_value(const response *r, const char *name, char *out, size_t out_len);
const char *short_body(const response *r); /* the first 280 bytes, per thread */

/* ------------------------------------------------------------ servers */

typedef struct {
    const char *name;
    pid_t pid;
    int port;
    char base[64];    /* http://127.0.0.1:PORT */
    const char *health; /* the path that answers 200 once it is up */
} server;

/* Starts bin on a free loopback port with extra "K=V" environment
 * (NULL-terminated, may be NULL), output appended to log; waits up to 15 s
 * for GET health. 0 ok. */
int server_start(server *s, const char *bin, const char *name, const char *health,
                 const char *const *env, const char *log);

/* SIGTERM, then up to 10 s; 1 when it exited with status 0. */
int server_stop(server *s);

/* After a bad request the server must still answer its health path. One
 * test. */
void check_alive(CURL *h, const server *s, const char *after);

/* ------------------------------------------------------------ golden vectors */

struct golden_case;

/* Loads each golden case in dir (name order; only those whose path contains
 * `only` when it is not NULL) and calls fn(file, case, arg): the case is
 * freed after. One test that dir holds a case, and one per case that it
 * loads, named "PREFIX FILE". */
void golden_each(const char *dir, const char *only, const char *prefix,
                 void (*fn)(const char *file, const struct golden_case *gc, void *arg), void *arg);

/* ------------------------------------------------------------ case files */

/* Runs every *.case file in dir (name order; only those whose name contains
 * `only` when it is not NULL), each against the server instance() names
 * (NULL: the default). The format is in tests/http/README.md. */
void run_case_dir(const char *dir, const char *only, server *(*instance)(const char *name));


#endif
