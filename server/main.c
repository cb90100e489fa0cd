/* main.c - the attn-server binary: configuration from flags and ATTN_*
 * environment variables, start, and a graceful drain on SIGTERM/SIGINT. */
#include "srv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

srv_config srv_cfg;

static const char usage[] =
    "usage: attn-server [options]\n"
    "Serves the attention API (see openapi.yaml). Each option may also be set\n"
    "by the environment variable shown; options win over the environment.\n"
    "\n"
    "  --bind ADDR          ATTN_BIND         IPv4 or IPv6 address to listen on (127.0.0.1;\n"
    "                                         0.0.0.0 or :: for every interface)\n"
    "  --port N             ATTN_PORT         TCP port (8080)\n"
    "  --threads N          ATTN_THREADS      HTTP polling threads (2 x cores, at least 4);\n"
    "                                         0: one thread per connection\n"
    "  --compute-threads N  ATTN_COMPUTE_THREADS  threads one large request may use, 1 to\n"
    "                                         the CPUs the process may run on (those; more\n"
    "                                         are cut to them, with a warning)\n"
    "  --max-inflight N     ATTN_MAX_INFLIGHT large requests (64 KiB+ bodies, each on its own\n"
    "                                         thread, and answers over 4M floats or work over\n"
    "                                         2e9 operations) computing at once before 503\n"
    "                                         (2 x cores)\n"
    "  --max-body SIZE      ATTN_MAX_BODY     largest request body, e.g. 64M (64 MiB)\n"
    "  --max-elements N     ATTN_MAX_ELEMENTS largest tensor or output, in floats (64M)\n"
    "  --max-weights N      ATTN_MAX_WEIGHTS  largest returned weights, in floats (64M)\n"
    "  --timeout SECONDS    ATTN_TIMEOUT      idle connection timeout: the longest wait for a\n"
    "                                         client's next bytes, at least 1 (60)\n"
    "  --request-timeout SECONDS  ATTN_REQUEST_TIMEOUT  the longest a request's body may take\n"
    "                                         to arrive, from its headers; body data later is\n"
    "                                         408 and the connection closed (120; 0: off). A\n"
    "                                         client sending its body a byte at a time keeps\n"
    "                                         its connection at most this plus --timeout\n"
    "  --drain-timeout SECONDS  ATTN_DRAIN_TIMEOUT  after SIGTERM, the longest wait for the\n"
    "                                         requests in flight before exiting without them\n"
    "                                         (status 1) (30; keep it under the orchestrator's\n"
    "                                         grace period)\n"
    "  --max-connections N  ATTN_MAX_CONNECTIONS  open connections at once; past it new ones\n"
    "                                         wait in the listen backlog until one closes (an\n"
    "                                         idle one after --timeout) (1000, or the fd limit\n"
    "                                         - 64 if lower)\n"
    "  --max-per-ip N       ATTN_MAX_PER_IP   connections from one address (0: no limit)\n"
    "  --max-depth N        ATTN_MAX_DEPTH    JSON nesting of a request body, at least 6 (32)\n"
    "  --max-work FLOPS     ATTN_MAX_WORK     estimated cost of one request in floating-\n"
    "                                         point operations (its products, and what its\n"
    "                                         options cost beside them counted at the dense\n"
    "                                         kernel's rate), e.g. 2e11 (the default, about a\n"
    "                                         second of two cores); more is refused with 413\n"
    "                                         too_large before computing, as are more (batch,\n"
    "                                         head) slices than it / 5e4 (at least 1024; each\n"
    "                                         costs some 0.2 us)\n"
    "  --compute-timeout SECONDS  ATTN_COMPUTE_TIMEOUT  the longest a request's computing\n"
    "                                         may run in all (the work cap is an estimate);\n"
    "                                         past it the request is 504 compute_timeout and\n"
    "                                         its threads free (30; 0: off)\n"
    "  --token TOKEN        ATTN_TOKEN        compute routes require Authorization: Bearer\n"
    "                                         TOKEN (401 otherwise); health, metrics, rules and\n"
    "                                         the demo stay open. Prefer the environment: flags\n"
    "                                         show in ps\n"
    "  --cors-origins LIST  ATTN_CORS_ORIGINS comma-separated origins allowed by CORS, or *\n"
    "                                         (off: no CORS headers, OPTIONS is 405)\n"
    "  --log-level LEVEL    ATTN_LOG_LEVEL    error, warn or info (access log; the default)\n"
    "  --static-dir DIR     ATTN_STATIC_DIR   the demo's files (demo/ beside the binary or in .)\n"
    "  --openapi FILE       ATTN_OPENAPI      served at /openapi.yaml (./openapi.yaml)\n"
    "  --models-dir DIR     ATTN_MODELS_DIR   trained models' weights (./training/weights, else\n"
    "                                         beside the binary); a file that does not load is\n"
    "                                         logged and listed as unavailable in GET /models\n"
    "  --models-strict B    ATTN_MODELS_STRICT 1: refuse to start when a model does not load\n"
    "                                         (B, here and below: 1, true, yes or on; 0,\n"
    "                                         false, no or off)\n"
    "  --max-sessions N     ATTN_MAX_SESSIONS decode sessions open at once (1024); one more\n"
    "                                         is 503 overloaded (0: no sessions)\n"
    "  --session-memory SIZE  ATTN_SESSION_MEMORY  bytes all sessions' caches may hold, e.g.\n"
    "                                         256M (the default); past it 503 overloaded\n"
    "  --session-max-tokens N  ATTN_SESSION_MAX_TOKENS  the largest max_tokens a session may\n"
    "                                         ask for (131072); more is 413 session_full\n"
    "  --session-ttl SECONDS  ATTN_SESSION_TTL  a session idle this long expires and its\n"
    "                                         memory is freed (300)\n"
    "  --trust-session-id B  ATTN_TRUST_SESSION_ID 1: POST /sessions (and a multihead-decode\n"
    "                                         start without sequence_id) takes the new id from\n"
    "                                         an X-Session-Id header (32 hex digits) that the\n"
    "                                         load balancer sets; only behind one that does\n"
    "  --help               this text\n"
    "  --version            the server's and the library's versions and kernels\n"
    "\n"
    "SIZE: an integer with an optional K, M or G (binary: 64M is 64 MiB); so may\n"
    "--max-elements, --max-weights and --session-max-tokens be written. SECONDS: an\n"
    "integer, or one with s, m, h or d (5m is 300). Any other N: digits only.\n"
    "SIGTERM, SIGINT and SIGHUP (unless started ignoring it, as under nohup) drain\n"
    "the server: no new connections, up to --drain-timeout for the requests in\n"
    "flight; a second signal ends the wait.\n";

static void die(const char *what, const char *val)
{
    fprintf(stderr, "attn-server: invalid %s: %s (see --help)\n", what, val);
    exit(2);
}

/* The digits of a non-negative integer; *end is set after them. */
static uint64_t parse_digits(const char *what, const char *s, char **end)
{
    errno = 0;
    if (*s < '0' || *s > '9')
        die(what, s);
    unsigned long long v = strtoull(s, end, 10);
    if (errno)
        die(what, s);
    return v;
}

/* min <= v * unit <= max, or the start stops. */
static uint64_t in_range(const char *what, const char *s, uint64_t v, uint64_t unit, uint64_t min,
                         uint64_t max)
{
    if (v > max / unit || v * unit < min)
        die(what, s);
    return v * unit;
}

/* An amount of bytes or floats: an integer with an optional K, M or G
 * (binary: 64M is 64 MiB), "KiB" and "MB" read the same. */
static uint64_t parse_size(const char *what, const char *s, uint64_t min, uint64_t max)
{
    char *end;
    uint64_t v = parse_digits(what, s, &end);
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (shift && *end == 'i')
        end++;
    if (*end == 'B')
        end++;
    if (*end)
        die(what, s);
    return in_range(what, s, v, (uint64_t)1 << shift, min, max);
}

/* A count (a port, threads, connections): digits only, so that no suffix
 * is taken for another unit. */
static uint64_t parse_count(const char *what, const char *s, uint64_t min, uint64_t max)
{
    char *end;
    uint64_t v = parse_digits(what, s, &end);
    if (*end)
        die(what, s);
    return in_range(what, s, v, 1, min, max);
}

/* A duration in seconds: digits, or digits and s, m, h or d ("5m" is 300). */
static uint64_t parse_seconds(const char *what, const char *s, uint64_t min, uint64_t max)
{
    char *end;
    uint64_t v = parse_digits(what, s, &end);
    uint64_t unit = 1;
    switch (*end) {
    case 's': unit = 1; end++; break;
    case 'm': unit = 60; end++; break;
    case 'h': unit = 3600; end++; break;
    case 'd': unit = 86400; end++; break;
    default: break;
    }
    if (*end)
        die(what, s);
    return in_range(what, s, v, unit, min, max);
}

/* A positive number of floating-point operations: "2e11", "500000000". */
static double parse_work(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 1.0) || v > 1e30)
        die("max work (a number of floating-point operations, e.g. 2e11)", s);
    return v;
}

static int parse_level(const char *s)
{
    static const char *const names[] = {"error", "warn", "info"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    die("log level (error, warn, info)", s);
    return 0;
}

/* A switch: 1, true, yes, on or 0, false, no, off (any case); NULL is off.
 * Anything else stops the start, as a misread "false" would turn on what
 * it names. */
static int parse_bool(const char *what, const char *s)
{
    static const char *const on[] = {"1", "true", "yes", "on"}, *const off[] = {"0", "false", "no", "off"};
    for (int i = 0; s && i < 4; i++) {
        if (strcasecmp(s, on[i]) == 0)
            return 1;
        if (strcasecmp(s, off[i]) == 0)
            return 0;
    }
    if (s)
        die(what, s);
    return 0;
}

static char static_buf[PATH_MAX], openapi_buf[PATH_MAX];

static void find_files(const char *static_opt, const char *openapi_opt)
{
    char ed[PATH_MAX - 64], cand[PATH_MAX];
    srv_exe_dir(ed, sizeof ed);
    srv_cfg.static_dir = NULL;
    if (static_opt) {
        if (!realpath(static_opt, static_buf) || !srv_is_dir(static_buf))
            die("static dir (not a directory)", static_opt);
        srv_cfg.static_dir = static_buf;
    } else {
        const char *fmts[] = {"%s/../demo", "%s/demo", "./demo"};
        for (int i = 0; i < 3 && !srv_cfg.static_dir; i++) {
            snprintf(cand, sizeof cand, fmts[i], ed);
            if (srv_is_dir(cand) && realpath(cand, static_buf))
                srv_cfg.static_dir = static_buf;
        }
    }
    if (openapi_opt) {
        if (!srv_is_file(openapi_opt))
            die("openapi file (not a file)", openapi_opt);
        snprintf(openapi_buf, sizeof openapi_buf, "%s", openapi_opt);
    } else {
        const char *fmts[] = {"./openapi.yaml", "%s/../openapi.yaml", "%s/openapi.yaml"};
        snprintf(openapi_buf, sizeof openapi_buf, "%s/../openapi.yaml", ed);
        for (int i = 0; i < 3; i++) {
            snprintf(cand, sizeof cand, fmts[i], ed);
            if (srv_is_file(cand)) {
                snprintf(openapi_buf, sizeof openapi_buf, "%s", cand);
                break;
            }
        }
    }
    srv_cfg.openapi_path = openapi_buf;
}

/* glibc's allocator, tuned once before any thread: at most 2 arenas a core
 * (by default each thread may get its own, and resident memory grew with
 * them under load), and the large blocks of a request (bodies, decoded
 * tensors, results: up to 32 MiB each) reused from the heap rather than
 * mmap'd fresh and page-faulted in on every request. The freed memory kept
 * for reuse is bounded by the trim threshold per arena. */
static void tune_malloc(long cores)
{
    mallopt(M_ARENA_MAX, (int)(cores * 2));
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

/* Defaults before the environment and the flags. */
static void set_defaults(long cores)
{
    srv_cfg.bind = "127.0.0.1";
    srv_cfg.port = 8080;
    srv_cfg.threads = cores * 2 > 4 ? (int)cores * 2 : 4;
    srv_cfg.compute_threads = (int)cores;
    srv_cfg.max_inflight = 0;
    srv_cfg.max_body = (size_t)64 << 20;
    srv_cfg.max_elements = (int64_t)64 << 20;
    srv_cfg.max_weights = (int64_t)64 << 20;
    srv_cfg.timeout = 60;
    srv_cfg.request_timeout = 120;
    /* Each connection holds a descriptor: stay under the process's limit
     * so a flood is refused by the limit, not by accept() failing. */
    struct rlimit nofile;
    srv_cfg.max_connections = 1000;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY &&
        nofile.rlim_cur < 1000 + 64)
        srv_cfg.max_connections = nofile.rlim_cur > 96 ? (unsigned)nofile.rlim_cur - 64 : 32;
    srv_cfg.max_per_ip = 0;
    srv_cfg.max_depth = 32;
    srv_cfg.max_work = 2e11; /* ~1 s of the kernels on two cores */
    srv_cfg.log_level = SRV_LOG_INFO;
    srv_cfg.max_sessions = 1024;
    srv_cfg.session_memory = (size_t)256 << 20;
    srv_cfg.session_max_tokens = 131072;
    srv_cfg.session_ttl = 300;
    srv_cfg.drain_timeout = 30;
    srv_cfg.compute_timeout = 30;
}

/* Environment first, then flags over it. Each name maps to one flag; val[]
 * is indexed by these. */
enum {
    K_BIND,
    K_PORT,
    K_THREADS,
    K_COMPUTE_THREADS,
    K_MAX_INFLIGHT,
    K_MAX_BODY,
    K_MAX_ELEMENTS,
    K_MAX_WEIGHTS,
    K_TIMEOUT,
    K_LOG_LEVEL,
    K_STATIC_DIR,
    K_OPENAPI,
    K_MAX_CONNECTIONS,
    K_MAX_PER_IP,
    K_MAX_DEPTH,
    K_TOKEN,
    K_CORS_ORIGINS,
    K_MAX_WORK,
    K_MODELS_DIR,
    K_MODELS_STRICT,
    K_MAX_SESSIONS,
    K_SESSION_MEMORY,
    K_SESSION_MAX_TOKENS,
    K_SESSION_TTL,
    K_TRUST_SESSION_ID,
    K_REQUEST_TIMEOUT,
    K_DRAIN_TIMEOUT,
    K_COMPUTE_TIMEOUT,
    NKEYS
};
static const char *const keys[NKEYS][2] = {
    [K_BIND] = {"--bind", "ATTN_BIND"},
    [K_PORT] = {"--port", "ATTN_PORT"},
    [K_THREADS] = {"--threads", "ATTN_THREADS"},
    [K_COMPUTE_THREADS] = {"--compute-threads", "ATTN_COMPUTE_THREADS"},
    [K_MAX_INFLIGHT] = {"--max-inflight", "ATTN_MAX_INFLIGHT"},
    [K_MAX_BODY] = {"--max-body", "ATTN_MAX_BODY"},
    [K_MAX_ELEMENTS] = {"--max-elements", "ATTN_MAX_ELEMENTS"},
    [K_MAX_WEIGHTS] = {"--max-weights", "ATTN_MAX_WEIGHTS"},
    [K_TIMEOUT] = {"--timeout", "ATTN_TIMEOUT"},
    [K_LOG_LEVEL] = {"--log-level", "ATTN_LOG_LEVEL"},
    [K_STATIC_DIR] = {"--static-dir", "ATTN_STATIC_DIR"},
    [K_OPENAPI] = {"--openapi", "ATTN_OPENAPI"},
    [K_MAX_CONNECTIONS] = {"--max-connections", "ATTN_MAX_CONNECTIONS"},
    [K_MAX_PER_IP] = {"--max-per-ip", "ATTN_MAX_PER_IP"},
    [K_MAX_DEPTH] = {"--max-depth", "ATTN_MAX_DEPTH"},
    [K_TOKEN] = {"--token", "ATTN_TOKEN"},
    [K_CORS_ORIGINS] = {"--cors-origins", "ATTN_CORS_ORIGINS"},
    [K_MAX_WORK] = {"--max-work", "ATTN_MAX_WORK"},
    [K_MODELS_DIR] = {"--models-dir", "ATTN_MODELS_DIR"},
    [K_MODELS_STRICT] = {"--models-strict", "ATTN_MODELS_STRICT"},
    [K_MAX_SESSIONS] = {"--max-sessions", "ATTN_MAX_SESSIONS"},
    [K_SESSION_MEMORY] = {"--session-memory", "ATTN_SESSION_MEMORY"},
    [K_SESSION_MAX_TOKENS] = {"--session-max-tokens", "ATTN_SESSION_MAX_TOKENS"},
    [K_SESSION_TTL] = {"--session-ttl", "ATTN_SESSION_TTL"},
    [K_TRUST_SESSION_ID] = {"--trust-session-id", "ATTN_TRUST_SESSION_ID"},
    [K_REQUEST_TIMEOUT] = {"--request-timeout", "ATTN_REQUEST_TIMEOUT"},
    [K_DRAIN_TIMEOUT] = {"--drain-timeout", "ATTN_DRAIN_TIMEOUT"},
    [K_COMPUTE_TIMEOUT] = {"--compute-timeout", "ATTN_COMPUTE_TIMEOUT"},
};

/* Fills val[k] from the environment and argv; exits on --help or a bad flag. */
static void read_options(int argc, char **argv, const char *val[NKEYS])
{
    for (int k = 0; k < NKEYS; k++) {
        val[k] = getenv(keys[k][1]);
        /* empty is unset, but for the token: an empty secret is refused */
        if (val[k] && !*val[k] && strcmp(keys[k][1], "ATTN_TOKEN") != 0)
            val[k] = NULL;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            exit(0);
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("attn-server %s (libattn %s, kernels %s)\n", SRV_VERSION, attn_version(),
                   attn_kernel_isa());
            exit(0);
        }
        int k = 0;
        size_t fl = 0;
        for (; k < NKEYS; k++) {
            fl = strlen(keys[k][0]);
            if (strncmp(argv[i], keys[k][0], fl) == 0 && (argv[i][fl] == '=' || argv[i][fl] == '\0'))
                break;
        }
        if (k == NKEYS)
            die("option", argv[i]);
        if (argv[i][fl] == '=')
            val[k] = argv[i] + fl + 1;
        else if (i + 1 < argc)
            val[k] = argv[++i];
        else
            die("option (needs a value)", argv[i]);
    }
}

static void apply_options(const char *val[NKEYS], long cores)
{
    const char *v;
    if (val[K_BIND])
        srv_cfg.bind = val[K_BIND];
    struct in6_addr any;
    if (inet_pton(AF_INET, srv_cfg.bind, &any) != 1 && inet_pton(AF_INET6, srv_cfg.bind, &any) != 1)
        die("bind address (an IPv4 or IPv6 address, not a host name)", srv_cfg.bind);
    if ((v = val[K_PORT]))
        srv_cfg.port = (int)parse_count("port (0 to 65535)", v, 0, 65535);
    if ((v = val[K_THREADS]))
        srv_cfg.threads = (int)parse_count("threads (0 to 1024)", v, 0, 1024);
    if ((v = val[K_COMPUTE_THREADS]))
        srv_cfg.compute_threads = (int)parse_count("compute threads (1 to 1024)", v, 1, 1024);
    if ((v = val[K_MAX_INFLIGHT]))
        srv_cfg.max_inflight = (int)parse_count("max in-flight (at least 1)", v, 1, 1 << 20);
    if ((v = val[K_MAX_BODY]))
        srv_cfg.max_body = (size_t)parse_size("max body (at least 1)", v, 1, (uint64_t)1 << 40);
    if ((v = val[K_MAX_ELEMENTS]))
        srv_cfg.max_elements = (int64_t)parse_size("max elements (at least 1)", v, 1, (uint64_t)1 << 40);
    if ((v = val[K_MAX_WEIGHTS]))
        srv_cfg.max_weights = (int64_t)parse_size("max weights", v, 0, (uint64_t)1 << 40);
    if ((v = val[K_TIMEOUT]))
        srv_cfg.timeout = (unsigned)parse_seconds("timeout (1 second to 1 day)", v, 1, 86400);
    if ((v = val[K_LOG_LEVEL]))
        srv_cfg.log_level = parse_level(v);
    if ((v = val[K_MAX_CONNECTIONS]))
        srv_cfg.max_connections = (unsigned)parse_count("max connections (at least 1)", v, 1, 1 << 20);
    if ((v = val[K_MAX_PER_IP]))
        srv_cfg.max_per_ip = (unsigned)parse_count("max per IP", v, 0, 1 << 20);
    /* a per-head 4-d mask inside the body object needs 5 */
    if ((v = val[K_MAX_DEPTH]))
        srv_cfg.max_depth = (int)parse_count("max depth (6 to 2048)", v, 6, 2048);
    srv_cfg.token = val[K_TOKEN];
    if (val[K_TOKEN] && !*val[K_TOKEN]) /* a secret that failed to render must not turn auth off */
        die("token (empty; unset ATTN_TOKEN to serve without one)", val[K_TOKEN]);
    srv_cfg.cors_origins = val[K_CORS_ORIGINS];
    if ((v = val[K_MAX_WORK]))
        srv_cfg.max_work = parse_work(v);
    if ((v = val[K_MAX_SESSIONS]))
        srv_cfg.max_sessions = (int)parse_count("max sessions", v, 0, 1 << 24);
    if ((v = val[K_SESSION_MEMORY]))
        srv_cfg.session_memory = (size_t)parse_size("session memory", v, 0, (uint64_t)1 << 44);
    if ((v = val[K_SESSION_MAX_TOKENS]))
        srv_cfg.session_max_tokens =
            (int64_t)parse_size("session max tokens (at least 1)", v, 1, (uint64_t)1 << 40);
    if ((v = val[K_SESSION_TTL]))
        srv_cfg.session_ttl = (unsigned)parse_seconds("session TTL (1 s to 365 days)", v, 1, 86400 * 365);
    srv_cfg.trust_session_id =
        parse_bool("trust session id (1, true, yes, on; 0, false, no, off)", val[K_TRUST_SESSION_ID]);
    if ((v = val[K_REQUEST_TIMEOUT]))
        srv_cfg.request_timeout = (unsigned)parse_seconds("request timeout (0 to 1 day)", v, 0, 86400);
    if ((v = val[K_DRAIN_TIMEOUT]))
        srv_cfg.drain_timeout = (unsigned)parse_seconds("drain timeout (0 to 1 day)", v, 0, 86400);
    if ((v = val[K_COMPUTE_TIMEOUT]))
        srv_cfg.compute_timeout = (unsigned)parse_seconds("compute timeout (0 to 1 day)", v, 0, 86400);
    /* Threads beyond the CPUs gain nothing; the library plans a call's
     * working memory (the cap's measure) for the contexts' threads. */
    if (srv_cfg.compute_threads > cores) {
        srv_log(SRV_LOG_WARN, "ATTN_COMPUTE_THREADS=%d is more than the %ld CPUs this process may run "
                "on; using %ld", srv_cfg.compute_threads, cores, cores);
        srv_cfg.compute_threads = (int)cores;
    }
    attn_set_max_threads(srv_cfg.compute_threads);
    if (srv_cfg.max_inflight < 1) /* not set: the default */
        srv_cfg.max_inflight = srv_cfg.compute_threads > 1 ? srv_cfg.compute_threads * 2 : 2;
    find_files(val[K_STATIC_DIR], val[K_OPENAPI]);
}

/* SIGTERM, SIGINT and SIGHUP (a closed terminal, or a supervisor's
 * reload), blocked before any thread exists so they arrive in sigwait and
 * nowhere else, and each drains as SIGTERM does (the access lines still in
 * the log's buffer are written); a closed client must not kill us. A
 * SIGHUP the process was started ignoring (nohup) stays ignored: a blocked
 * signal would reach sigwait even so. */
static void block_stop_signals(sigset_t *stop)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    sigemptyset(stop);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction was;
        if (sigaction(sigs[i], NULL, &was) == 0 && was.sa_handler == SIG_IGN && sigs[i] == SIGHUP)
            continue;
        sigaddset(stop, sigs[i]);
    }
    pthread_sigmask(SIG_BLOCK, stop, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* After a stop signal: no new connections, up to ATTN_DRAIN_TIMEOUT for the
 * requests in flight (not for bodies that stall: srv_http_busy); a second signal ends
 * the wait at once. Returns the exit status. */
static int drain(int sig, const sigset_t *stop)
{
    srv_log(SRV_LOG_NOTICE, "signal %d: draining (no new connections; finishing %d in flight)",
            sig, srv_inflight());
    srv_http_quiesce();
    double deadline = srv_now_ms() + 1000.0 * srv_cfg.drain_timeout;
    int again = 0;
    while (srv_http_busy() > 0 && srv_now_ms() < deadline && again <= 0) {
        struct timespec tick = {0, 10 * 1000 * 1000};
        again = sigtimedwait(stop, NULL, &tick);
        srv_log_flush();
    }
    if (srv_http_busy() > 0) {
        /* A computation that never ends must not keep the process alive:
         * stopping the daemon would wait for it forever. */
        if (again > 0)
            srv_log(SRV_LOG_ERROR, "signal %d again: exiting without the %d requests in flight", again,
                    srv_http_busy());
        else
            srv_log(SRV_LOG_ERROR, "%d requests still in flight after %u s (ATTN_DRAIN_TIMEOUT); exiting "
                    "without them", srv_http_busy(), srv_cfg.drain_timeout);
        srv_log_flush();
        _exit(1); /* not exit(): the requests' threads still run */
    }
    if (srv_inflight() > 0)
        srv_log(SRV_LOG_WARN, "closing %d requests whose bodies stopped arriving", srv_inflight());
    srv_http_stop();
    srv_ctx_shutdown();
    srv_seed_cache_clear();
    srv_models_stop();
    srv_sessions_stop();
    srv_log(SRV_LOG_NOTICE, "stopped");
    srv_log_flush();
    return 0;
}

/* The start line: where the server listens and every setting in effect
 * (the token's presence, never its value), so a log shows what ran. An
 * ATTN_ISA or ATTN_DEFER_EXP the library did not take is named: it falls
 * back to its own choice without a word. */
static void log_settings(void)
{
    static const char *const levels[] = {"error", "warn", "info"};
    srv_log(SRV_LOG_NOTICE,
            "attn-server %s listening on http://%s:%d (threads %d, compute threads %d, max inflight %d, "
            "max connections %u, max per ip %u, max body %zu, max depth %d, max elements %lld, "
            "max weights %lld, max work %g, timeout %us, request timeout %us, max sessions %d, "
            "session memory %zu, session max tokens %lld, session ttl %us, trust session id %s, "
            "drain timeout %us, compute timeout %us, token %s, cors origins %s, log level %s, kernels %s, demo %s, openapi %s)",
            SRV_VERSION, srv_cfg.bind, srv_cfg.port, srv_cfg.threads, srv_cfg.compute_threads,
            srv_cfg.max_inflight, srv_cfg.max_connections, srv_cfg.max_per_ip, srv_cfg.max_body,
            srv_cfg.max_depth, (long long)srv_cfg.max_elements, (long long)srv_cfg.max_weights,
            srv_cfg.max_work, srv_cfg.timeout, srv_cfg.request_timeout, srv_cfg.max_sessions,
            srv_cfg.session_memory, (long long)srv_cfg.session_max_tokens, srv_cfg.session_ttl,
            srv_cfg.trust_session_id ? "on" : "off", srv_cfg.drain_timeout,
            srv_cfg.compute_timeout, srv_cfg.token ? "on" : "off",
            srv_cfg.cors_origins ? srv_cfg.cors_origins : "off", levels[srv_cfg.log_level],
            attn_kernel_isa(), srv_cfg.static_dir ? srv_cfg.static_dir : "built-in page",
            srv_cfg.openapi_path ? srv_cfg.openapi_path : "none");
    const char *isa = getenv("ATTN_ISA"), *defer = getenv("ATTN_DEFER_EXP");
    if (isa && *isa && strcmp(isa, attn_kernel_isa()) != 0)
        srv_log(SRV_LOG_WARN, "ATTN_ISA=%.40s is not a kernel variant this CPU runs; using %s", isa,
                attn_kernel_isa());
    if (defer && *defer && strcmp(defer, "0") != 0 && strcmp(defer, "1") != 0)
        srv_log(SRV_LOG_WARN, "ATTN_DEFER_EXP=%.40s is neither 0 nor 1; ignored", defer);
}

int main(int argc, char **argv)
{
    long cores = attn_max_threads(); /* the CPUs this process may run on */
    if (cores < 1)
        cores = 1;
    if (cores > 512)
        cores = 512;
    tune_malloc(cores);
    set_defaults(cores);
    const char *val[NKEYS];
    read_options(argc, argv, val);
    apply_options(val, cores);

    sigset_t stop;
    block_stop_signals(&stop);
    srv_metrics_init();
    int strict = parse_bool("models strict (1, true, yes, on; 0, false, no, off)", val[K_MODELS_STRICT]);
    if (srv_models_start(val[K_MODELS_DIR], strict) != 0) {
        srv_log(SRV_LOG_ERROR, "a model did not load and ATTN_MODELS_STRICT is set: not starting");
        srv_log_flush();
        return 1;
    }
    if (srv_http_start() != 0)
        return 1;
    log_settings();
    int sig = 0;
    while (sig <= 0) {
        struct timespec tick = {0, 100 * 1000 * 1000};
        sig = sigtimedwait(&stop, NULL, &tick);
        srv_sessions_tick();
        srv_http_watch();
        srv_warn_capped_report();
        srv_log_flush();
    }
    return drain(sig, &stop);
}
