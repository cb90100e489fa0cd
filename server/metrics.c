/* metrics.c - Prometheus counters kept with relaxed atomics (no locks on
 * the request path) and their text exposition for GET /metrics. */
#include "srv.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define N_STATUS 600
static const double bucket_le[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                   0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
#define N_BUCKETS (sizeof bucket_le / sizeof bucket_le[0])

/* The rows counted: one per route, except that the two model routes count
 * by model instead (their own rows stay empty and are not shown): a row
 * per model served and one, "other", for every other name a client puts
 * in the path, as route "other" takes every unmatched path. So the series
 * are a fixed set whatever clients send, and a dashboard can tell traffic
 * to unknown names (a typo, a scan) from traffic to a model. */
enum {
    ROW_KSERVE = SRV_R_COUNT, /* + a KServe model; + SRV_KS_N_MODELS: other */
    ROW_TRANSLATE = ROW_KSERVE + SRV_KS_N_MODELS + 1, /* + a translation model; + SRV_MODELS_MAX: other */
    N_ROWS = ROW_TRANSLATE + SRV_MODELS_MAX + 1
};

static _Atomic uint64_t requests[N_ROWS][N_STATUS];
static _Atomic uint64_t hist[N_ROWS][N_BUCKETS + 1];
static _Atomic uint64_t dur_us[N_ROWS];
static _Atomic uint64_t bytes_in[N_ROWS], bytes_out[N_ROWS];
static atomic_int in_flight, computing;
static _Atomic uint64_t refused[2]; /* SRV_REFUSED_CONNECTION, SRV_REFUSED_REQUEST */
static double start_time;           /* Unix seconds */

static const char *const route_labels[SRV_R_COUNT] = {
    [SRV_R_MULTIHEAD] = "/multihead", [SRV_R_HEALTHZ] = "/healthz",
    [SRV_R_READYZ] = "/readyz",       [SRV_R_METRICS] = "/metrics",
    [SRV_R_RULES] = "/rules",         [SRV_R_OPENAPI] = "/openapi.yaml",
    [SRV_R_ROOT] = "/",               [SRV_R_STATIC] = "static",
    [SRV_R_OTHER] = "other",          [SRV_R_KSERVE] = "/v2",
    [SRV_R_KSERVE_INFER] = "/v2/models/{name}/infer", [SRV_R_MODELS] = "/models",
    [SRV_R_MODELS_TRANSLATE] = "/models/{name}/translate", [SRV_R_SESSIONS] = "/sessions",
    [SRV_R_SESSION] = "/sessions/{id}", [SRV_R_SESSION_STEP] = "/sessions/{id}/step",
    [SRV_R_SESSION_TRUNCATE] = "/sessions/{id}/truncate"};
static char attn_labels[ATTN_RULE_COUNT][48];

void srv_metrics_init(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    for (int r = 0; r < ATTN_RULE_COUNT; r++)
        snprintf(attn_labels[r], sizeof attn_labels[r], "/attention/%s",
                 attn_rule_name((attn_rule)r));
}

static const char *route_label(int route)
{
    if (route >= 0 && route < ATTN_RULE_COUNT)
        return attn_labels[route];
    return (route >= 0 && route < SRV_R_COUNT) ? route_labels[route] : "other";
}

/* The row a request of route is counted in (model: see srv_metrics_end). */
static int row_of(int route, int model)
{
    if (route == SRV_R_KSERVE_INFER)
        return ROW_KSERVE + (model >= 0 && model < SRV_KS_N_MODELS ? model : SRV_KS_N_MODELS);
    if (route == SRV_R_MODELS_TRANSLATE)
        return ROW_TRANSLATE + (srv_models_name(model) ? model : SRV_MODELS_MAX);
    return route >= 0 && route < SRV_R_COUNT ? route : SRV_R_OTHER;
}

/* s into out (n bytes) as a label value of the text format: backslash,
 * double quote and newline escaped. The model names are the server's own
 * ([a-z0-9_-]), so this keeps the exposition valid should that change. */
static void label_value(char *out, size_t n, const char *s)
{
    size_t k = 0;
    for (; *s && k + 3 < n; s++) {
        char c = *s == '\n' ? 'n' : *s;
        if (*s == '\\' || *s == '"' || *s == '\n')
            out[k++] = '\\';
        out[k++] = c;
    }
    out[k] = '\0';
}

/* A row's labels, `route="/rules"` or `route="...",model="..."`, into out
 * (n bytes). Returns 0 for a row not shown: a model route's own row, or a
 * translation model's when fewer are served. */
static int row_labels(int row, char *out, size_t n)
{
    if (row < ROW_KSERVE) {
        snprintf(out, n, "route=\"%s\"", route_label(row));
        return row != SRV_R_KSERVE_INFER && row != SRV_R_MODELS_TRANSLATE;
    }
    int ks = row < ROW_TRANSLATE, i = row - (ks ? ROW_KSERVE : ROW_TRANSLATE);
    const char *name = "other";
    char ks_name[64], model[64];
    if (ks && i < SRV_KS_N_MODELS) {
        srv_kserve_model_name(i, ks_name, sizeof ks_name);
        name = ks_name;
    } else if (!ks && i < SRV_MODELS_MAX && !(name = srv_models_name(i))) {
        return 0;
    }
    label_value(model, sizeof model, name);
    snprintf(out, n, "route=\"%s\",model=\"%s\"",
             route_label(ks ? SRV_R_KSERVE_INFER : SRV_R_MODELS_TRANSLATE), model);
    return 1;
}

/* The status a row's served requests answer, exported at 0 before the
 * first one so that rate() counts that one too (Prometheus' advice:
 * initialise the series you know of); -1 for the rows of names nothing
 * serves, which never answer one. Other statuses appear with their first
 * request. */
static int row_ok_status(int row)
{
    if (row == SRV_R_OTHER || row == ROW_KSERVE + SRV_KS_N_MODELS ||
        row == ROW_TRANSLATE + SRV_MODELS_MAX)
        return -1;
    return row == SRV_R_SESSIONS ? 201 : 200;
}

void srv_metrics_begin(void) { atomic_fetch_add_explicit(&in_flight, 1, memory_order_relaxed); }

void srv_metrics_end(int route, int model, int status, uint64_t in, uint64_t out, double ms)
{
    int row = row_of(route, model);
    if (status < 0 || status >= N_STATUS)
        status = 0;
    atomic_fetch_sub_explicit(&in_flight, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&requests[row][status], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&bytes_in[row], in, memory_order_relaxed);
    atomic_fetch_add_explicit(&bytes_out[row], out, memory_order_relaxed);
    atomic_fetch_add_explicit(&dur_us[row], (uint64_t)(ms * 1000.0), memory_order_relaxed);
    size_t b = 0;
    while (b < N_BUCKETS && ms / 1000.0 > bucket_le[b])
        b++;
    atomic_fetch_add_explicit(&hist[row][b], 1, memory_order_relaxed);
}

void srv_metrics_refused(int what)
{
    if (what == SRV_REFUSED_CONNECTION || what == SRV_REFUSED_REQUEST)
        atomic_fetch_add_explicit(&refused[what], 1, memory_order_relaxed);
}

int srv_compute_enter(void)
{
    int n = atomic_fetch_add_explicit(&computing, 1, memory_order_acq_rel);
    if (n >= srv_cfg.max_inflight) {
        atomic_fetch_sub_explicit(&computing, 1, memory_order_acq_rel);
        return -1;
    }
    return 0;
}

void srv_compute_leave(void) { atomic_fetch_sub_explicit(&computing, 1, memory_order_acq_rel); }

int srv_inflight(void) { return atomic_load(&in_flight); }

/* The process's own figures, under the names Prometheus' client
 * libraries give them (Linux: read from /proc/self), and the build. */
static void process_metrics(srv_buf *b)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        srv_buf_printf(b, "# HELP process_cpu_seconds_total User and system CPU time spent.\n"
                          "# TYPE process_cpu_seconds_total counter\n"
                          "process_cpu_seconds_total %.3f\n",
                       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
    long pages = 0, page = sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%*s %ld", &pages) == 1 && page > 0)
        srv_buf_printf(b, "# HELP process_resident_memory_bytes Resident memory size.\n"
                          "# TYPE process_resident_memory_bytes gauge\n"
                          "process_resident_memory_bytes %lld\n",
                       (long long)pages * page);
    if (f)
        fclose(f);
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        int fds = -1; /* not counting the directory's own */
        while (readdir(d))
            fds++;
        closedir(d);
        srv_buf_printf(b, "# HELP process_open_fds Open file descriptors.\n"
                          "# TYPE process_open_fds gauge\n"
                          "process_open_fds %d\n", fds - 2); /* "." and ".." */
    }
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
        srv_buf_printf(b, "# HELP process_max_fds The most file descriptors the process may open.\n"
                          "# TYPE process_max_fds gauge\n"
                          "process_max_fds %llu\n", (unsigned long long)nofile.rlim_cur);
    srv_buf_printf(b, "# HELP process_start_time_seconds Start time of the process since the Unix epoch.\n"
                      "# TYPE process_start_time_seconds gauge\n"
                      "process_start_time_seconds %.3f\n"
                      "# HELP attn_build_info The server's and the library's versions.\n"
                      "# TYPE attn_build_info gauge\n"
                      "attn_build_info{version=\"%s\",libattn=\"%s\"} 1\n",
                   start_time, SRV_VERSION, attn_version());
}

void srv_metrics_text(srv_buf *b)
{
    char l[512]; /* a row's labels (row_labels); gcc -O3 bounds them at 335 bytes */
    srv_buf_puts(b, "# HELP attn_requests_total HTTP requests by route and status, and by model on "
                    "the model routes.\n"
                    "# TYPE attn_requests_total counter\n");
    for (int r = 0; r < N_ROWS; r++) {
        if (!row_labels(r, l, sizeof l))
            continue;
        for (int s = 0; s < N_STATUS; s++) {
            uint64_t n = atomic_load_explicit(&requests[r][s], memory_order_relaxed);
            if (n || s == row_ok_status(r))
                srv_buf_printf(b, "attn_requests_total{%s,status=\"%d\"} %llu\n", l, s,
                               (unsigned long long)n);
        }
    }
    srv_buf_puts(b, "# HELP attn_request_duration_seconds Time from request to response.\n"
                    "# TYPE attn_request_duration_seconds histogram\n");
    for (int r = 0; r < N_ROWS; r++) {
        uint64_t cum = 0;
        for (size_t i = 0; i <= N_BUCKETS; i++)
            cum += atomic_load_explicit(&hist[r][i], memory_order_relaxed);
        if (!cum || !row_labels(r, l, sizeof l))
            continue;
        cum = 0;
        for (size_t i = 0; i < N_BUCKETS; i++) {
            cum += atomic_load_explicit(&hist[r][i], memory_order_relaxed);
            srv_buf_printf(b, "attn_request_duration_seconds_bucket{%s,le=\"%g\"} %llu\n", l,
                           bucket_le[i], (unsigned long long)cum);
        }
        cum += atomic_load_explicit(&hist[r][N_BUCKETS], memory_order_relaxed);
        srv_buf_printf(b, "attn_request_duration_seconds_bucket{%s,le=\"+Inf\"} %llu\n", l,
                       (unsigned long long)cum);
        srv_buf_printf(b, "attn_request_duration_seconds_sum{%s} %.6f\n", l,
                       (double)atomic_load_explicit(&dur_us[r], memory_order_relaxed) / 1e6);
        srv_buf_printf(b, "attn_request_duration_seconds_count{%s} %llu\n", l,
                       (unsigned long long)cum);
    }
    srv_buf_puts(b, "# HELP attn_request_bytes_total Request body bytes received.\n"
                    "# TYPE attn_request_bytes_total counter\n");
    for (int r = 0; r < N_ROWS; r++)
        if (row_labels(r, l, sizeof l))
            srv_buf_printf(b, "attn_request_bytes_total{%s} %llu\n", l,
                           (unsigned long long)atomic_load(&bytes_in[r]));
    srv_buf_puts(b, "# HELP attn_response_bytes_total Response body bytes sent.\n"
                    "# TYPE attn_response_bytes_total counter\n");
    for (int r = 0; r < N_ROWS; r++)
        if (row_labels(r, l, sizeof l))
            srv_buf_printf(b, "attn_response_bytes_total{%s} %llu\n", l,
                           (unsigned long long)atomic_load(&bytes_out[r]));
    srv_buf_printf(b, "# HELP attn_requests_in_flight Requests being served now.\n"
                      "# TYPE attn_requests_in_flight gauge\n"
                      "attn_requests_in_flight %d\n"
                      "# HELP attn_computes_in_flight Large requests computing now (limited by ATTN_MAX_INFLIGHT).\n"
                      "# TYPE attn_computes_in_flight gauge\n"
                      "attn_computes_in_flight %d\n",
                   atomic_load(&in_flight), atomic_load(&computing));
    srv_buf_printf(b, "# HELP attn_http_refused_total What libmicrohttpd refused itself: connections over "
                      "ATTN_MAX_PER_IP, closed at once, and requests it answered (a malformed Content-Length "
                      "or chunk, headers or URL too long, another HTTP version); those whose headers reached "
                      "a route are in attn_requests_total too.\n"
                      "# TYPE attn_http_refused_total counter\n"
                      "attn_http_refused_total{what=\"connection\"} %llu\n"
                      "attn_http_refused_total{what=\"request\"} %llu\n",
                   (unsigned long long)atomic_load(&refused[SRV_REFUSED_CONNECTION]),
                   (unsigned long long)atomic_load(&refused[SRV_REFUSED_REQUEST]));
    srv_buf_printf(b, "# HELP attn_connections_open HTTP connections open now.\n"
                      "# TYPE attn_connections_open gauge\n"
                      "attn_connections_open %d\n"
                      "# HELP attn_limit The server's limits (ATTN_MAX_CONNECTIONS, ATTN_MAX_PER_IP, "
                      "ATTN_MAX_INFLIGHT; 0: none), for saturation ratios.\n"
                      "# TYPE attn_limit gauge\n"
                      "attn_limit{name=\"max_connections\"} %u\n"
                      "attn_limit{name=\"max_per_ip\"} %u\n"
                      "attn_limit{name=\"max_inflight\"} %d\n",
                   srv_http_connections(), srv_cfg.max_connections, srv_cfg.max_per_ip,
                   srv_cfg.max_inflight);
    long parsed, taken;
    srv_body_early_counts(&parsed, &taken);
    srv_buf_printf(b, "# HELP attn_json_early_parses_total Long JSON arrays (256 KB to 16 MB of text) "
                      "parsed on a kept thread while a slow upload was still arriving.\n"
                      "# TYPE attn_json_early_parses_total counter\n"
                      "attn_json_early_parses_total %ld\n"
                      "# HELP attn_json_early_parses_used_total Of those, the arrays whose tensor the "
                      "request then used (the rest went with a body that was dropped or refused).\n"
                      "# TYPE attn_json_early_parses_used_total counter\n"
                      "attn_json_early_parses_used_total %ld\n",
                   parsed, taken);
    process_metrics(b);
    srv_buf_printf(b, "# HELP attn_kernels_info The attention kernels this process runs: instruction-set variant, deferred exponentials (ATTN_ISA, ATTN_DEFER_EXP).\n"
                      "# TYPE attn_kernels_info gauge\n"
                      "attn_kernels_info{isa=\"%s\",defer_exp=\"%d\"} 1\n",
                   attn_kernel_isa(), attn_kernel_defers_exp());
    srv_sessions_metrics(b);
}
