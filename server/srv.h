/* srv.h - internal declarations shared by the service's files (server/ only). */
#ifndef SRV_H
#define SRV_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "attn.h"

/* The service's version: openapi.yaml's info.version, KServe's server
 * metadata, --version and attn_build_info. */
#define SRV_VERSION "1.0.0"

/* ------------------------------------------------------------ tasks */

/* A function run on one of the server's kept threads (tasks.c). The
 * record is the caller's, untouched by tasks.c once the task has run
 * (unsettled) or been settled. */
typedef struct srv_task {
    void (*fn)(void *arg);
    void *arg;
    struct srv_task *next; /* tasks.c's queue */
    int state;             /* tasks.c's, under its lock */
    int settled;           /* the caller will call srv_task_settle */
} srv_task;

/* Runs fn(arg) on a kept thread, starting one when none is idle. With
 * settled, the caller must call srv_task_settle(t) before t goes away;
 * without, t is only read until fn starts. Returns 0, or -1 when no
 * thread could be had (fn will not run). */
int srv_task_start(srv_task *t, void (*fn)(void *), void *arg, int settled);

/* For a task started with settled: 1 when fn ran (waiting for it to
 * return if it is running), 0 when no thread had taken it yet (it never
 * will: the caller does that work itself). */
int srv_task_settle(srv_task *t);

/* ------------------------------------------------------------ config */

typedef struct {
    const char *bind;          /* ATTN_BIND, "127.0.0.1" */
    int port;                  /* ATTN_PORT, 8080 */
    int threads;               /* ATTN_THREADS: HTTP worker threads */
    int compute_threads;       /* threads one large request may use */
    int max_inflight;          /* computes at once before 503 overloaded */
    size_t max_body;           /* ATTN_MAX_BODY bytes */
    int64_t max_elements;      /* ATTN_MAX_ELEMENTS: floats in any one tensor or result */
    int64_t max_weights;       /* ATTN_MAX_WEIGHTS: floats of returned weights */
    unsigned timeout;          /* ATTN_TIMEOUT: idle connection seconds */
    unsigned request_timeout;  /* ATTN_REQUEST_TIMEOUT: seconds from a request's headers to
                                * its body's end, past which it is 408; 0 = no limit */
    unsigned max_connections;  /* ATTN_MAX_CONNECTIONS: open connections at once */
    unsigned max_per_ip;       /* ATTN_MAX_PER_IP: from one address; 0 = no limit */
    int max_depth;             /* ATTN_MAX_DEPTH: JSON nesting of a request body */
    double max_work;           /* ATTN_MAX_WORK: estimated floating-point operations of one request */
    const char *token;         /* ATTN_TOKEN: compute routes need "Bearer <token>"; NULL = open */
    const char *cors_origins;  /* ATTN_CORS_ORIGINS: comma-separated allow-list; NULL = no CORS */
    int log_level;             /* SRV_LOG_ERROR, SRV_LOG_WARN or SRV_LOG_INFO (access log) */
    const char *static_dir;    /* ATTN_STATIC_DIR; NULL = none found */
    const char *openapi_path;  /* ATTN_OPENAPI; NULL = none found */
    int max_sessions;          /* ATTN_MAX_SESSIONS: decode sessions open at once */
    size_t session_memory;     /* ATTN_SESSION_MEMORY: bytes all sessions may hold */
    int64_t session_max_tokens; /* ATTN_SESSION_MAX_TOKENS: the largest max_tokens */
    unsigned session_ttl;      /* ATTN_SESSION_TTL: idle seconds before a session expires */
    unsigned drain_timeout;    /* ATTN_DRAIN_TIMEOUT: seconds a stop signal waits for requests */
    unsigned compute_timeout;  /* ATTN_COMPUTE_TIMEOUT: seconds a request's computations may
                                * take in all, past which it is 504; 0 = no limit */
    int trust_session_id;      /* ATTN_TRUST_SESSION_ID: take a new session's id from
                                * X-Session-Id (set by the load balancer) */
} srv_config;

extern srv_config srv_cfg;

/* NOTICE lines (start, stop, models loaded) are written at every level. */
enum { SRV_LOG_NOTICE = -1, SRV_LOG_ERROR = 0, SRV_LOG_WARN, SRV_LOG_INFO };

/* printf-style line to stderr when level <= srv_cfg.log_level. */
void srv_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* srv_log for a line already formatted (n bytes, no newline). */
void srv_log_line(int level, const char *line, size_t n);
/* A warning a client can cause at will: at most 10 a second in all, the
 * rest counted and reported with the next one let through, or by
 * srv_warn_capped_report (main's tick) once their second is over. */
void srv_warn_capped(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void srv_warn_capped_report(void);

/* Writes out the info lines srv_log has batched (main calls it often). */
void srv_log_flush(void);

double srv_now_ms(void);

/* ------------------------------------------------------------ buffers */

/* A buffer of at least want bytes, 64-byte aligned, its usable size in
 * *cap: one kept from an earlier large request when one fits, else new.
 * NULL when out of memory. The caller owns it: free, realloc or (better)
 * srv_big_free it. */
void *srv_big_alloc(size_t want, size_t *cap);
#define SRV_BIG_MIN ((size_t)64 << 10) /* smaller buffers are never kept */
/* Frees p (any malloc'd block; NULL is fine), or keeps it for the next
 * srv_big_alloc when it is large and there is room. */
void  srv_big_free(void *p);

/* A growable byte buffer. On allocation failure `failed` is set and later
 * appends are dropped; the caller checks it once at the end. */
typedef struct {
    char *data;
    size_t len, cap;
    int failed;
} srv_buf; /* data: malloc'd; srv_buf_free keeps a large one (srv_big_free) */

int  srv_buf_reserve(srv_buf *b, size_t extra); /* 0 ok, -1 failed */
void srv_buf_put(srv_buf *b, const void *p, size_t n);
void srv_buf_puts(srv_buf *b, const char *s);
void srv_buf_putc(srv_buf *b, char c);
void srv_buf_printf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a quoted, escaped JSON string. */
void srv_buf_json_str(srv_buf *b, const char *s);
void srv_buf_free(srv_buf *b);

/* A per-request arena: every allocation is freed at once by srv_arena_free.
 * Zero-initialise it ({0}) before the first use. Small allocations are cut
 * from a chunk the calling thread keeps across requests (so a small
 * request mallocs next to nothing); an arena is used and freed by one
 * thread. */
typedef struct srv_arena_blk srv_arena_blk;
typedef struct {
    srv_arena_blk *head;    /* blocks of their own, and adopted blocks */
    srv_arena_blk *carved;  /* adopted blocks whose records are in the chunk */
    unsigned char *chunk;   /* the thread's chunk while this arena holds it */
    size_t used;            /* bytes of chunk handed out */
} srv_arena;
/* Returns NULL when out of memory or when n overflows. */
void *srv_arena_alloc(srv_arena *a, size_t n);
/* Hands a malloc'd block to the arena, which frees it with the rest.
 * Returns -1 (and keeps nothing) when out of memory. */
int   srv_arena_adopt(srv_arena *a, void *p);
void  srv_arena_free(srv_arena *a);

/* ------------------------------------------------------------ numbers */

/* Writes f as the shortest of "%.9g"'s text (9 significant digits, exact
 * float32 round trip) into out (>= 24 bytes); returns the length. Non-finite
 * values, which JSON has no number for, are written as null: outputs are
 * checked finite before they are encoded, so only an lse's -inf (a row
 * with nothing to attend) comes here. */
size_t srv_fmt_float(float f, char *out);
/* The n floats of v as srv_fmt_float writes them, comma-separated, at o
 * (room for 20 bytes a float and 24 more); returns the end. One call a
 * row: the formatter inlined in its loop. */
char *srv_fmt_floats(char *o, const float *v, int64_t n);

/* Writes v in decimal into out (>= 20 bytes); returns the length. */
size_t srv_fmt_u64(uint64_t v, char *out);

/* Writes ms as printf's "%.3f" would (to the nearest thousandth) into out
 * (>= 32 bytes); returns the length. For timings: no printf per request. */
size_t srv_fmt_ms(double ms, char *out);

/* Parses one JSON number at p (not past end). On success returns the
 * position after it and sets *out to the float32 nearest the decimal;
 * returns NULL when the text is not a JSON number. *finite is 0 when the
 * value overflows float32. */
const char *srv_parse_float(const char *p, const char *end, float *out, int *finite);

/* ------------------------------------------------------------ base64 */

size_t srv_b64_encoded_len(size_t n);            /* 4*ceil(n/3) */
void   srv_b64_encode(const uint8_t *in, size_t n, char *out);
/* Decodes standard padded base64. Returns the number of bytes written to out
 * (which must hold srv_b64_decoded_max(len) bytes), or -1 when invalid. */
int64_t srv_b64_decode(const char *in, size_t len, uint8_t *out);
size_t srv_b64_decoded_max(size_t len);
/* Index of the first Inf or NaN among n floats, or -1 (codec.c). */
int64_t srv_first_nonfinite(const void *data, int64_t n);

/* ------------------------------------------------------------ request bodies (body.c) */

/* One long string of a body, decoded as base64 while the body came in. */
typedef struct {
    size_t off, len;     /* its text: body text[off, off + len) */
    size_t out;          /* its bytes: area + out (64-byte aligned) */
    int64_t n;           /* bytes decoded */
    int64_t bad;         /* first float (4 bytes each) that is Inf or NaN, or -1 */
} srv_body_str;

/* JSON's whitespace (RFC 8259): space, tab, line feed, carriage return. */
static inline int srv_json_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

struct srv_body_early; /* body.c's: a long array parsed while the body came */
struct srv_blob_s;     /* srv_blob, below */

/* A request body as it arrives. Owns text, area, strs and early. */
typedef struct {
    char *text;              /* NUL-terminated after srv_body_finish */
    size_t len, cap;
    size_t lead, align_at;   /* text is lead bytes into its buffer, so that
                              * text + align_at is 64-byte aligned */
    size_t fin_done;         /* bytes from text + align_at checked as they
                              * came: no 4-byte word there is Inf or NaN */
    int fin_on, fin_stop;    /* checking; stopped at a block that has one */
    size_t expect, max;      /* Content-Length (0: chunked); the cap on len */
    int decode;              /* strings are decoded as they come */
    uint8_t *area;           /* the decoded strings */
    size_t area_cap, area_used;
    int no_area;
    srv_body_str *strs;      /* in text order */
    size_t n_strs, strs_cap;
    /* the tokenizer: text[0, pos) seen; the current string's state */
    size_t pos, s_off, s_done, s_out, s_n, checked;
    int in_str, slow, esc, tried, live, padded;
    int64_t bad;
    /* long arrays parsed as they close (body.c's track_arrays): the
     * entries in text order, and the tracker's state */
    struct srv_body_early *early, *early_last;
    size_t a_pos, a_start;
    int a_state, a_depth;
    size_t wait_start, wait_end; /* an array that closed while the last
                                  * one's parse ran (wait_end 0: none) */
    double t_first;          /* when the first bytes came (srv_now_ms) */
} srv_body;

/* An empty body of Content-Length expect (0 when chunked) that will never
 * hold more than max bytes; decode: decode its long strings as they come
 * (a JSON body with a Content-Length; other bodies are only held). */
void srv_body_init(srv_body *b, size_t expect, size_t max, int decode);
/* Places the text so that text + at is 64-byte aligned, when its buffer
 * is allocated at once from the Content-Length: a KServe body's binary
 * tensors after a JSON header of `at` bytes are then read in place, with
 * no copy. Call before the first append; a no-op for a smaller body. */
void srv_body_align(srv_body *b, size_t at);
/* How many bytes from p, a pointer into the current body's aligned binary
 * section (srv_body_align) a multiple of 4 bytes from its start, are known
 * to hold no Inf or NaN float: they were checked while they came, still in
 * cache. 0 when nothing is known (the caller checks everything). */
size_t srv_body_finite_prefix(const char *p);
/* Appends n bytes (the caller keeps len + n <= max). -1: out of memory. */
int  srv_body_append(srv_body *b, const char *p, size_t n);
/* NUL-terminates the text. -1: out of memory. */
int  srv_body_finish(srv_body *b);
/* Frees what b holds; b is empty (and reusable) after. */
void srv_body_free(srv_body *b);
/* Makes b this thread's current body (NULL: none) for srv_body_decoded;
 * b must outlive its use. */
void srv_body_use(const srv_body *b);
/* Whether the string s[0, len) (a pointer into the current body's text) was
 * decoded as it came: then *data (borrowed; lives as long as the body),
 * *n bytes, and *bad as srv_first_nonfinite would say over them. */
int  srv_body_decoded(const char *s, size_t len, uint8_t **data, int64_t *n, int64_t *bad);
/* When s is the first character of a string of the current body that was
 * decoded as it came: its length (its closing quote is s[len]; no quote or
 * backslash before it). Else 0. */
size_t srv_body_string_len(const char *s);
/* Whether the array at p (a pointer into the current body's text) was
 * parsed while the body came (waiting for that parse if it still runs):
 * then *b is srv_scan_array's tensor, its data now the caller's, and the
 * return is the position after the array; else NULL. */
const char *srv_body_array(const char *p, struct srv_blob_s *b);

/* ------------------------------------------------------------ errors */

/* An error on its way to the client: HTTP status, contract code, field. */
typedef struct {
    int status;
    const char *code;
    char field[96];
    char message[1200]; /* room for an unknown field and the whole list of fields */
} srv_err;

/* Fills e; returns -1 so callers can `return srv_fail(...)`. */
int srv_fail(srv_err *e, int status, const char *code, const char *field,
             const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Maps a library status to the contract's status and code (and the
 * library's "lse", its lse buffer, to the field return_lse). */
int srv_fail_lib(srv_err *e, attn_status st, const attn_error *ae);
/* Writes {"error":{...}} into b. */
void srv_err_json(const srv_err *e, srv_buf *b);

/* ------------------------------------------------------------ big-value scanner */

/* Large numeric arrays and long strings found by srv_scan in a request body,
 * replaced in the envelope by {"\u0001t":i} / {"\u0001s":i} placeholders so
 * Jansson only parses the small rest. */
typedef struct srv_blob_s {
    int is_string;
    /* array: */
    int rank;
    int64_t shape[ATTN_MAX_RANK];
    int64_t count;
    float *data;      /* arena-owned */
    int has_bool, has_num;
    /* a number of it was read other than by the scanner's row runs, whose
     * numbers (7 digits, no exponent) are 0 or 1 when they round to 0.0f
     * or 1.0f: only then may one be 1e-50 or 0.99999999, so only then
     * does a mask's text need a look */
    int has_long;
    int64_t first_bool; /* flat index of the first true/false */
    const char *text;   /* its text in the body, text_len bytes (whether a number had a fraction) */
    size_t text_len;
    /* string: */
    const char *str;  /* points into the body; no escapes */
    size_t len;
} srv_blob;

typedef struct {
    char *envelope;   /* arena-owned, NUL-terminated */
    size_t envelope_len;
    srv_blob *blobs;  /* arena-owned */
    size_t n_blobs;
    int depth;        /* deepest nesting of arrays and objects outside strings,
                       * as srv_json_too_deep counts it */
    int reserved;     /* a string holds U+0001 (as the escape \u0001): the
                       * placeholders' keys begin with it, so such a body is
                       * refused rather than read as one of them */
    size_t values;    /* at least the JSON values left in the envelope (its
                       * ',', '[' and '{' outside strings): what Jansson
                       * would make, 20-80 bytes of memory each */
} srv_scan_result;

/* Scans body[0..len) (body[len] must be NUL). Returns 0, or -1 when out of
 * memory. Text it does not understand is copied as is for Jansson to judge.
 * Linear, no recursion: out->depth may be checked before any parser runs
 * (srv_json_too_deep(body, len, m) is out->depth > m). */
int srv_scan(const char *body, size_t len, srv_arena *a, srv_scan_result *out);
/* How many arrays srv_scan has parsed in two halves on two threads so far
 * (the tests check that a split happens). */
long srv_scan_joins(void);
/* The scanner's parse of the regular nested array of numbers at p ('['),
 * reading no byte at or past end: the position after its ']' with *b
 * filled (b->data malloc'd, the caller's), or NULL when the scanner
 * would leave the text to Jansson. What srv_scan does at p, so a body's
 * array parsed early (body.c) is the tensor srv_scan would have made. */
const char *srv_scan_array(const char *p, const char *end, srv_blob *b);
/* How many arrays were parsed while their body was still coming, and how
 * many of those srv_scan took (the tests and /metrics read both). */
void srv_body_early_counts(long *parsed, long *taken);
/* For the tests: waits until every array of b handed to a thread to parse
 * early has been parsed (srv_scan would otherwise do those not yet
 * started itself). */
void srv_body_early_wait(const srv_body *b);
/* The rate body.c takes a thread to parse JSON at, in bytes per
 * nanosecond (1: a conservative 1 GB/s): an array is parsed early only
 * while the body comes slower than that. The tests raise it to have every
 * long array parsed early whatever the clock says. */
extern double srv_body_parse_rate;

/* A non-negative integer up to 2^64 - 1 (beyond int64 the scanner passes
 * it in a placeholder). Returns 0, or -1 when j is anything else. */
int srv_json_u64(json_t *j, uint64_t *out);

/* The digits of an integer past int64 that srv_scan put in a placeholder
 * (Jansson refuses such integers), or NULL when j is anything else. */
const char *srv_json_digits(const json_t *j);

/* An integer: 0 with *out for one within int64, 1 with *out = INT64_MAX
 * for one past it (srv_json_digits), -1 when j is not an integer. */
int srv_json_int(const json_t *j, int64_t *out);

/* Whether body[0..len) nests arrays and objects deeper than max_depth
 * (outside strings). Linear, no recursion: run before any parser. */
int srv_json_too_deep(const char *body, size_t len, int max_depth);

/* Whether body[0..len) starts (after JSON whitespace) with anything but
 * '{': a body no route takes, refused before any parser reads it. An empty
 * body is not this (Jansson says what is wrong with it). */
int srv_json_not_object(const char *body, size_t len);

/* Returns the blob a placeholder object stands for, or NULL. */
const srv_blob *srv_blob_of(const srv_scan_result *sr, json_t *j);

/* ------------------------------------------------------------ codec */

typedef struct {
    srv_arena *arena;
    const srv_scan_result *scan;
    int64_t max_elements;
} srv_codec;

/* A JSON number (Jansson's, from srv_scan's envelope) as the float32
 * nearest its text: an integer converted once, not through a double. */
float srv_json_float(const json_t *v);

/* A single number, a field's (scale, a temperature): 0 with *out the
 * float32 nearest its text, -1 when v is not a number, -2 when its value
 * is past float32's finite range. Integers past int64 count (their
 * placeholder's digits). */
int srv_json_scalar(const json_t *v, float *out);

/* Decodes a float tensor (any of the three forms) at field `field`. */
int srv_decode_tensor(srv_codec *c, json_t *j, const char *field,
                      attn_tensor *out, srv_err *e);
/* Decodes a boolean mask (true/false or 1/0, or b64 dtype "bool"). */
int srv_decode_mask(srv_codec *c, json_t *j, const char *field,
                    attn_mask *out, srv_err *e);
/* Appends a tensor as nested arrays (b64 = 0) or {shape,dtype,b64}. */
void srv_encode_tensor(srv_buf *b, const float *data, int rank,
                       const int64_t *shape, int b64);

/* Appends a rows x cols bool tensor: nested true/false, or
 * {shape, dtype "bool", b64} with one byte each. */
void srv_encode_mask2(srv_buf *b, const uint8_t *m, int64_t rows, int64_t cols, int b64);

/* ------------------------------------------------------------ requests */

/* Everything one POST needs: inputs it owns, timings, the response. */
typedef struct srv_seeded srv_seeded;

typedef struct {
    srv_arena arena;
    srv_scan_result scan;
    json_t *root;
    srv_seeded *seeded;     /* parameters made from the seed, if any (a cache reference) */
    int share_root;         /* set before srv_call_parse by a caller that only reads root:
                             * the tree may be one shared with this thread's other calls */
    double t0;              /* when decoding began */
    double t_parse, t_compute, t_encode; /* ms */
    int counted;            /* a large job's place in ATTN_MAX_INFLIGHT, given back by srv_call_free */
} srv_call;

/* Scans and parses text[0..len) (text[len] must be NUL) into call->root, a
 * JSON object (a reference of the call's own; with share_root, read it
 * only); what names the text in errors ("the body"). 0, or -1. */
int srv_call_parse(srv_call *call, const char *text, size_t len, const char *what, srv_err *e);
void srv_call_free(srv_call *call);
/* 0, or -1 with e filled (422 overflow) when one of out's n floats is not
 * finite: a float32 overflow inside the computation; row_len floats a row. */
int srv_check_finite(const float *out, int64_t n, int64_t row_len, srv_err *e);

/* ------------------------------------------------------------ the job */

/* One computation, whichever front end decoded it: an attention request
 * or a multi-head request (the tag says which member of u), the seed for
 * the parameters not sent, and how the result is wanted. */
typedef enum { SRV_JOB_ATTENTION = 0, SRV_JOB_MULTIHEAD, SRV_JOB_SESSION } srv_job_kind;

/* What a session route's body holds besides the attention request's
 * fields (a SRV_JOB_SESSION job: scale, options and tensors in u.att). */
typedef struct {
    unsigned where;          /* SRV_F_SES_NEW, SRV_F_SES_STEP or SRV_F_SES_CUT (KServe:
                              * SRV_F_SES_STEP, with SRV_F_SES_NEW on a sequence's start) */
    int64_t num_heads, num_kv_heads, head_dim, max_tokens, length;
    /* KServe's sequence parameters (the multihead-decode model) */
    int seq_start, seq_end;
    int seq_id_kind;         /* 0 absent, 1 an integer, 2 a string */
    uint64_t seq_num;        /* the integer */
    const char *seq_text;    /* the string (borrowed from the parsed body) */
} srv_ses_fields;

typedef struct {
    srv_job_kind kind;
    union {
        attn_request att;     /* SRV_JOB_ATTENTION */
        attn_mha_request mha; /* SRV_JOB_MULTIHEAD */
    } u;                      /* SRV_JOB_SESSION: att (scaled_dot) */
    srv_ses_fields ses;       /* SRV_JOB_SESSION */
    uint64_t seed;           /* the parameters not sent, hard sample and BigBird */
    int return_params;       /* native: echo the parameters used */
    int return_lse;          /* native: each query row's log-sum-exp */
    int return_layout;       /* echo the sparsity pattern's block layout */
    int b64;                 /* native: output_format "b64" */
    int binary_output;       /* KServe: binary_data_output */
    unsigned sparsity_given; /* the sparsity members read (srv_job_note) */
    int temperature_given;   /* and the temperature */
    /* alibi and sinks as read (a number is a list of one), put into the
     * options by srv_job_run: */
    attn_tensor alibi, sinks;
    float alibi_one, sinks_one;
    /* filled by srv_job_run: */
    attn_shapes sh;
    float *out, *weights;    /* arena-owned; weights NULL when not wanted */
    float *lse;              /* arena-owned, lse_shape; NULL unless return_lse */
    int lse_rank;
    int64_t lse_shape[ATTN_MAX_RANK];
    uint8_t *layout;         /* arena-owned, sh.layout_rows x sh.layout_cols; NULL unless asked */
    /* cu_seqlens_q and cu_seqlens_k (varlen.c): packed sequences, NULL
     * when not sent */
    const int64_t *cu_q, *cu_k;
    size_t n_cu_q, n_cu_k;
} srv_job;

void srv_job_init(srv_job *j, srv_job_kind kind, attn_rule rule);

/* Seeded parameter sets shared across requests (seedcache.c): seeding is a
 * pure function of the seed and a few sizes, so the last few sets are kept.
 * srv_seed_job returns a new reference to the set for j's seed and shapes
 * in *out, which the caller gives back with srv_seeded_release; the set is
 * read-only while held. */
attn_status srv_seed_job(const srv_job *j, srv_seeded **out, attn_error *ae);
/* The set a reference holds (borrowed: valid until the reference is released). */
const attn_param_set *srv_seeded_set(const srv_seeded *s);
/* A multi-head set's prepared weights (attn_mha_weights_new of the set),
 * borrowed as the set is; NULL until a request that found the set in the
 * cache made them, or when they do not fit the cache's memory: then use
 * the set. */
const attn_mha_weights *srv_seeded_weights(const srv_seeded *s);
void srv_seeded_release(srv_seeded *s); /* NULL is a no-op */
void srv_seed_cache_clear(void);        /* at shutdown */
void srv_job_set_params(srv_job *j, const attn_named *items, size_t n);
const attn_named *srv_job_params(const srv_job *j, size_t *n);
int srv_job_need_weights(const srv_job *j);

/* Plans, checks the caps against the plan (ATTN_MAX_ELEMENTS for the
 * output and for seeded parameters, ATTN_MAX_WEIGHTS, ATTN_MAX_WORK),
 * seeds the parameters when the job has none (kept in call->seeded) and
 * computes into j->out and j->weights. Returns 0, or -1 with e filled. */
int srv_job_run(srv_call *call, srv_job *j, srv_err *e);

/* The caps srv_job_run checks, for a route that plans on its own (a
 * session's step): the output under ATTN_MAX_ELEMENTS and the weights under
 * ATTN_MAX_WEIGHTS, so that nothing is allocated that would exhaust memory;
 * the estimated work under ATTN_MAX_WORK, before any of it is done (a 2 KB
 * body of base64 shapes can ask for hours). 0, or -1 with e filled (413). */
int srv_check_result(const attn_shapes *sh, srv_err *e);
int srv_check_layout_cells(double cells, srv_err *e);
int srv_check_scratch(size_t bytes, srv_err *e);
/* A plan's refusal; parameters the request did not send that are too
 * large to count name the field that sized them. */
int srv_fail_plan(const srv_job *j, attn_status st, const attn_error *ae, srv_err *e);
int srv_check_work(double flops, srv_err *e);
/* n (batch, head) slices' worth under what ATTN_MAX_WORK buys (each costs a
 * fixed part beside its flops, about 0.2 us). 0, or -1 with e filled (413
 * naming field; whose begins the message: "<whose> n (batch, head)
 * slices' worth"). */
int srv_check_slices(double n, const char *field, const char *whose, srv_err *e);
/* The parameters seeding j would make (j->sh, planned) under
 * ATTN_MAX_ELEMENTS. 0, or -1 with e filled (413). */
int srv_check_seed_size(const srv_job *j, srv_err *e);

/* Steps of srv_job_run that varlen.c runs too: seed j's parameters when
 * it has none; take its result's memory (j->sh's output and weights, lse
 * of j->lse_shape when asked), counting it against ATTN_MAX_INFLIGHT when
 * its result or work is large. Each 0, or -1 with e filled. */
int srv_job_seed(srv_call *call, srv_job *j, srv_err *e);
int srv_job_take_result(srv_call *call, srv_job *j, srv_err *e);

/* ------------------------------------------------------------ packed sequences (varlen.c) */

/* A job with cu_seqlens_q: query (total_q, H, Dq), key and value (total_k,
 * Hkv, .) hold sequences of their own lengths, as FlashAttention's
 * flash_attn_varlen_func takes them. Checks them and the caps, computes
 * them in one library call (attn_varlen_compute), and leaves the output
 * (total_q, H, Dv), the weights (B, H, max Lq, max Lk), zero past each
 * sequence's lengths, and lse (H, total_q) in j. 0, or -1 with e filled. */
int srv_varlen_run(srv_call *call, srv_job *j, srv_err *e);
/* The library's request for such a job (its offsets' counts checked). */
void srv_varlen_request(const srv_job *j, attn_varlen_request *vr);

/* ------------------------------------------------------------ the field table (fields.c) */

typedef enum {
    SRV_FT_TENSOR, SRV_FT_MASK, SRV_FT_PARAMS, SRV_FT_BOOL, SRV_FT_INT, SRV_FT_NUMBER,
    SRV_FT_HARD, SRV_FT_SEED, SRV_FT_WORD, SRV_FT_WINDOW, SRV_FT_HEADS, SRV_FT_OBJECT,
    SRV_FT_INDICES, SRV_FT_SEQ_ID
} srv_ftype;

/* Where a field is taken: the job kinds, then the places. */
enum {
    SRV_F_ATT = 1 << 0,       /* /attention/{rule} and the attention-* models */
    SRV_F_MHA = 1 << 1,       /* /multihead and the multihead model */
    SRV_F_BODY = 1 << 2,      /* a member of the native JSON body */
    SRV_F_KS_PARAM = 1 << 3,  /* a KServe request parameter */
    SRV_F_KS_INPUT = 1 << 4,  /* a KServe input tensor */
    SRV_F_REQ_ATT = 1 << 5,   /* required by attention */
    SRV_F_REQ_MHA = 1 << 6,   /* required by multi-head */
    SRV_F_CONCAT = 1 << 7,    /* in a query: the job is the concat rule */
    SRV_F_SES_NEW = 1 << 8,   /* POST /sessions */
    SRV_F_SES_STEP = 1 << 9,  /* POST /sessions/{id}/step */
    SRV_F_SES_CUT = 1 << 10,  /* POST /sessions/{id}/truncate */
    SRV_F_REQ_SES = 1 << 11   /* required by the session routes that take it */
};
#define SRV_F_KINDS (SRV_F_ATT | SRV_F_MHA | SRV_F_SES_NEW | SRV_F_SES_STEP | SRV_F_SES_CUT)

/* Where in a job a field lands. */
enum {
    SRV_SLOT_QUERY, SRV_SLOT_KEY, SRV_SLOT_VALUE, SRV_SLOT_MASK, SRV_SLOT_KEY_MASK, SRV_SLOT_BIAS,
    SRV_SLOT_CAUSAL, SRV_SLOT_WINDOW, SRV_SLOT_NEED_WEIGHTS, SRV_SLOT_HARD, SRV_SLOT_SEED,
    SRV_SLOT_RETURN_PARAMS, SRV_SLOT_RETURN_LSE, SRV_SLOT_OUTPUT_FORMAT, SRV_SLOT_BINARY_OUTPUT, SRV_SLOT_NUM_HEADS,
    SRV_SLOT_NUM_KV_HEADS, SRV_SLOT_AVERAGE_WEIGHTS, SRV_SLOT_POSENC, SRV_SLOT_RESIDUAL_NORM,
    SRV_SLOT_PARAMS, SRV_SLOT_HIDDEN_SIZE, SRV_SLOT_OUTPUT_SIZE, SRV_SLOT_SCALE,
    SRV_SLOT_LEARNED, /* a KServe input that is a learned parameter */
    SRV_SLOT_HEAD_DIM, SRV_SLOT_MAX_TOKENS, SRV_SLOT_LENGTH, /* sessions */
    /* the modern options */
    SRV_SLOT_ALIGN, SRV_SLOT_WINDOW_LEFT, SRV_SLOT_WINDOW_RIGHT, SRV_SLOT_SOFTCAP,
    SRV_SLOT_ALIBI, SRV_SLOT_SINKS, SRV_SLOT_ROPE, SRV_SLOT_ROPE_ON, SRV_SLOT_ROPE_BASE,
    SRV_SLOT_ROPE_STYLE, SRV_SLOT_ROPE_DIMS, SRV_SLOT_ROPE_OFFSET, SRV_SLOT_TEMPERATURE,
    SRV_SLOT_SEQ_ID, SRV_SLOT_SEQ_START, SRV_SLOT_SEQ_END, /* KServe sequences */
    SRV_SLOT_SPARSITY, SRV_SLOT_SP_PATTERN, SRV_SLOT_SP_WINDOW, SRV_SLOT_SP_GLOBAL,
    SRV_SLOT_SP_BLOCK, SRV_SLOT_SP_WINDOW_BLOCKS, SRV_SLOT_SP_GLOBAL_BLOCKS,
    SRV_SLOT_SP_RANDOM_BLOCKS, SRV_SLOT_SP_LAYOUT, SRV_SLOT_RETURN_LAYOUT, SRV_SLOT_ATTENTION,
    SRV_SLOT_FEATURE_MAP, SRV_SLOT_PRECISION, SRV_SLOT_QKV_LAYOUT, SRV_SLOT_CU_Q, SRV_SLOT_CU_K
};

typedef struct {
    const char *name;
    srv_ftype type;
    int slot;
    unsigned where;          /* SRV_F_* */
    int64_t min;             /* integers: the least value (INT64_MIN: any) */
    const char *shape;       /* tensors: the shape for attention (KServe metadata) */
    const char *mha_shape;   /* and for multi-head */
    const char *desc;        /* one line, for /rules and error messages */
} srv_field;

/* Whether a field applies to the rule (attention jobs: the library's
 * attn_rule_takes says which option a rule takes; srv_fields_read refuses
 * the others with 422), or to multi-head when rule is SRV_MODEL_MULTIHEAD.
 * For GET /rules and the KServe metadata. */
int srv_field_applies(const srv_field *f, int rule);
/* Whether a field applies to multi-head attention of the given form:
 * softmax (linear 0) takes the options rule dot takes, linear those of
 * rule linear. */
int srv_field_applies_mha(const srv_field *f, int linear);

/* The field named so among those accepted `where` (a job kind and a place). */
const srv_field *srv_field_find(const char *name, unsigned where);
void srv_fields_each(unsigned where, void (*fn)(void *, const srv_field *), void *ud);
const char *srv_field_type(const srv_field *f);
/* The where-bit of the job's kind (SRV_F_ATT or SRV_F_MHA). */
unsigned srv_job_where(const srv_job *j);
/* Reads every field of obj taken at `place` (SRV_F_BODY, SRV_F_KS_PARAM)
 * into j: unknown keys ("unknown <what>"), types, ranges and required
 * fields checked. Returns 0, or -1 with e filled. */
int srv_fields_read(json_t *obj, unsigned place, const char *what, srv_codec *c, srv_job *j,
                    srv_err *e);
/* Reads a list of token indices (a JSON list of integers, or a long one
 * the scanner lifted out) into *out (arena-owned) and *n; the count is
 * capped as a tensor's. Returns 0, or -1 with e filled. */
int srv_read_indices(srv_codec *c, json_t *v, const char *field, int64_t **out, size_t *n,
                     srv_err *e);
/* Puts what the front ends read beside the options into them: alibi and
 * sinks lists (a number is a list of one) and the seed, which also draws
 * hard sample's keys and BigBird's blocks. Idempotent; srv_fields_read
 * and srv_job_run call it. Returns 0, or -1 with e filled. */
int srv_job_finish_options(srv_job *j, srv_err *e);
/* Notes that a field landed in slot: rope and window sides turn their
 * option on, a sparsity member is marked given. Every reader calls it. */
void srv_job_note(srv_job *j, int slot);
/* KServe's flat parameters and inputs, checked as the native body's nested
 * members are as it is read: temperature needs hard "sample"; each
 * sparsity_* needs the pattern (the sparsity parameter) and must be one of
 * its members, and the pattern's required members must be there. 0, or -1
 * with e filled (400). */
int srv_job_check_flat(const srv_job *j, srv_err *e);
/* The job's options (borrowed). */
attn_options *srv_job_options(srv_job *j);
/* Stores a list of n indices read for an index slot (sparsity's global
 * tokens, cu_seqlens_q, cu_seqlens_k). */
void srv_job_set_indices(srv_job *j, int slot, const int64_t *ix, size_t n);
/* Where a tensor or mask slot is in j (NULL for other slots). */
attn_tensor *srv_job_tensor(srv_job *j, int slot);
attn_mask *srv_job_mask(srv_job *j, int slot);
/* Appends name to the comma-separated list in out (n bytes, NUL-terminated). */
void srv_name_list(char *out, size_t n, const char *name);

/* What stops a request's computations: its compute deadline
 * (ATTN_COMPUTE_TIMEOUT from its first computation on, over all of them,
 * a translation's many calls included; 0 until then) and its client
 * leaving (fd, the connection's socket, shut by the peer; -1: not
 * watched), looked at once fd_due_ms has passed and then every
 * millisecond, so that short requests make no system call for it. The
 * HTTP layer makes one its thread's for the request (srv_watch_use,
 * which returns the one it replaces). */
typedef struct {
    int fd;
    double deadline_ms;       /* srv_now_ms's clock */
    _Atomic double fd_due_ms; /* the computing threads' turns, in any order */
} srv_watch;
void srv_watch_init(srv_watch *w, int fd); /* a request starting now */
srv_watch *srv_watch_use(srv_watch *w);
int srv_watch_client_gone(void); /* the thread's watch: its client has gone (a poll()) */

/* Compute contexts, reused across requests: borrow one for a computation
 * of about `flops` work, give it back after. Its calls stop at the
 * thread's watch (ATTN_ERR_TIMEOUT past the deadline, ATTN_ERR_CANCELLED
 * when the client has gone), or without one each at ATTN_COMPUTE_TIMEOUT.
 * NULL means "use no context". */
attn_ctx *srv_ctx_acquire(double flops);
void srv_ctx_release(attn_ctx *ctx, size_t scratch); /* what the request planned */
void srv_ctx_shutdown(void);

/* ------------------------------------------------------------ routes / http */

/* Route ids used for metrics labels (a fixed set: no unbounded labels). */
enum {
    SRV_R_ATTENTION = 0, /* + rule: one per rule */
    SRV_R_MULTIHEAD = ATTN_RULE_COUNT,
    SRV_R_HEALTHZ, SRV_R_READYZ, SRV_R_METRICS, SRV_R_RULES, SRV_R_OPENAPI,
    SRV_R_ROOT, SRV_R_STATIC, SRV_R_OTHER,
    SRV_R_KSERVE, SRV_R_KSERVE_INFER, /* /v2/... (kserve.c) */
    SRV_R_MODELS, SRV_R_MODELS_TRANSLATE, /* /models... (models_routes.c) */
    SRV_R_SESSIONS, SRV_R_SESSION, SRV_R_SESSION_STEP, SRV_R_SESSION_TRUNCATE, /* sessions.c */
    SRV_R_COUNT
};

/* What a route answers, before http.c turns it into an MHD response. */
typedef struct {
    int status;
    srv_buf body;          /* owned; handed to MHD */
    int fd;                /* >= 0: a file to send instead of body (closed by MHD) */
    uint64_t fd_size;
    const char *ctype;     /* static string */
    const char *allow;     /* Allow header for 405, static */
    int retry_after;       /* seconds, for 503; 0 = none */
    double t_parse, t_compute, t_encode;
    uint64_t infer_header_len; /* KServe binary reply: Inference-Header-Content-Length; 0 = none */
    const char *code;      /* an error's code (static), for the access log; NULL = none */
} srv_reply;

typedef struct srv_route srv_route;

/* Where a method and path lead: the route table's row and what its
 * placeholders named. */
typedef struct {
    const srv_route *row;  /* NULL when nothing matched */
    int route;             /* SRV_R_* (attention routes: + the rule) */
    int wants_body;        /* POST routes: read a body, then serve */
    attn_rule rule;        /* {rule} */
    int model;             /* {model}: a rule, SRV_MODEL_MULTIHEAD or SRV_MODEL_DECODE;
                            * {name}: a served translation model's index; -1 when the
                            * path named no model served */
    char rel[520];         /* {file}: a path under the static folder */
    char session[72];      /* {id}: a session id (its form checked, not its existence) */
    char session_hdr[40];  /* POST /sessions, a multihead-decode start: X-Session-Id, when trusted */
    int len_hdr;           /* the front end's length header: 0 absent, 1 given, -1 malformed */
    uint64_t len_hdr_value;
} srv_target;

#define SRV_MODEL_MULTIHEAD ATTN_RULE_COUNT
#define SRV_MODEL_DECODE (ATTN_RULE_COUNT + 1) /* multihead-decode: decode sessions */

/* A route's handler: answers the request t names, with its body, into r
 * (every srv_serve_* below has this type; definitions spell it out). */
typedef void srv_serve_fn(const srv_target *t, const char *body, size_t len, srv_reply *r);
typedef srv_serve_fn *srv_handler;

/* What differs between the native routes and KServe's, for http.c. */
typedef struct {
    void (*error)(srv_reply *r, const srv_err *e); /* writes an error reply */
    int (*content_ok)(const char *ctype);          /* a POST body's Content-Type (NULL: none) */
    const char *content_types;  /* what content_ok takes, for the 415's message */
    const char *length_header;  /* a request header that sizes part of the body, or NULL */
    void (*not_found)(const char *path, srv_err *e);
    int unmatched_route;        /* SRV_R_* of a path no row matches */
} srv_front;

extern const srv_front srv_native_front, srv_kserve_front;

/* Where a route's requests are served (the route table's last column). */
enum {
    SRV_SCHED_BODY,  /* on the polling thread, unless the body is large */
    SRV_SCHED_HEAVY, /* always as a heavy computation, whatever the body */
    SRV_SCHED_TURN   /* may wait for its session's turn: then off the polling thread */
};

struct srv_route {
    const char *method;    /* "GET" (and HEAD), "POST" or "DELETE" */
    const char *pattern;   /* "/v2/models/{model}/infer" */
    int route;             /* SRV_R_* */
    srv_handler serve;
    const srv_front *front;
    int sched;             /* SRV_SCHED_* */
};

void srv_reply_init(srv_reply *r);
void srv_reply_error(srv_reply *r, const srv_err *e);
/* Copies a call's timings into the reply (Server-Timing). */
void srv_reply_timings(srv_reply *r, const srv_call *call);
/* Resolves method + path. Returns 0, or -1 with r filled (404, 405). */
int srv_route_resolve(const char *method, const char *path, srv_target *t, srv_reply *r);
/* Serves a resolved target; body is NULL for GET routes. */
srv_serve_fn srv_route_serve;
/* How to serve t with a body of len bytes, from its row's SRV_SCHED_*:
 * SRV_RUN_HEAVY (a large body, or a heavy route: off the polling threads,
 * counted against the cap on computations at once, 503 past it),
 * SRV_RUN_AWAY (it would wait for its session's turn: off the polling
 * thread when a thread is to be had, else here) or SRV_RUN_HERE. */
enum { SRV_RUN_HERE, SRV_RUN_HEAVY, SRV_RUN_AWAY };
int srv_route_schedule(const srv_target *t, size_t len);
/* Calls fn for every row of the route table that front serves. */
void srv_routes_each(const srv_front *front, void (*fn)(void *, const srv_route *), void *ud);
/* Records the value of the front end's length header (NULL: absent): a
 * decimal byte count, or malformed. */
void srv_target_length(srv_target *t, const char *value);

/* The handlers of the route table's POST rows (native.c, kserve.c). */
srv_serve_fn srv_serve_attention, srv_serve_multihead;
srv_serve_fn srv_serve_v2_server, srv_serve_v2_live, srv_serve_v2_ready, srv_serve_v2_model,
    srv_serve_v2_model_ready, srv_serve_v2_infer;

#define SRV_KS_MODEL_VERSION "1"
#define SRV_KS_N_MODELS (ATTN_RULE_COUNT + 2) /* every rule, multihead, multihead-decode */
/* "attention-<rule>", "multihead" or "multihead-decode". */
void srv_kserve_model_name(int model, char *out, size_t n);
/* The field-table where-bits of a model's jobs, with place (kserve.c). */
unsigned srv_kserve_where(int model, unsigned place);
/* KServe's {model} and {version} path segments (kserve.c): 0, or -1 with
 * e filled (404). */
int srv_kserve_model(const char *name, size_t n, int *model, srv_err *e);
int srv_kserve_version(const char *v, size_t n, int model, srv_err *e);

/* Writes GET /rules' JSON. */
void srv_rules_json(srv_buf *b);

/* Static files. Resolves url path (e.g. "/demo/app.js" with prefix stripped)
 * under srv_cfg.static_dir; returns an open fd and the content type, or -1
 * (no such file, or a path that tries to leave the directory). */
int srv_static_open(const char *rel, const char **ctype, uint64_t *size);

/* Whether p names a directory / a regular file (following links). */
int srv_is_dir(const char *p);
int srv_is_file(const char *p);

/* The directory of the running binary into out (n bytes), or "." when
 * /proc/self/exe cannot be read: files shipped beside the build are found
 * from it whatever the working directory. */
void srv_exe_dir(char *out, size_t n);

/* ------------------------------------------------------------ metrics */

void srv_metrics_init(void);                   /* once, before serving */
void srv_metrics_begin(void);                  /* a request started */
/* A request ended. On the model routes (SRV_R_KSERVE_INFER,
 * SRV_R_MODELS_TRANSLATE) model is the target's: a model served is
 * counted under its name, any other value under "other"; other routes
 * ignore it. */
void srv_metrics_end(int route, int model, int status, uint64_t bytes_in,
                     uint64_t bytes_out, double ms);
void srv_metrics_text(srv_buf *b);
/* What libmicrohttpd refused before a request reached a route: a
 * connection over ATTN_MAX_PER_IP, closed at once, or a request it
 * answered itself (a malformed Content-Length, headers or URL too long). */
enum { SRV_REFUSED_CONNECTION, SRV_REFUSED_REQUEST };
void srv_metrics_refused(int what);
int  srv_compute_enter(void);  /* 0 ok, -1 overloaded */
void srv_compute_leave(void);
/* Set while this thread serves a request that srv_compute_enter already
 * counted (a large body, a heavy route): a job it runs is not counted
 * again (srv_job_run counts jobs with large results or work). */
extern _Thread_local int srv_counted;
int  srv_inflight(void);

/* ------------------------------------------------------------ daemon */

int  srv_http_start(void);     /* 0 ok, -1 failed (logged) */
void srv_http_quiesce(void);   /* stop accepting */
/* Requests a drain waits for: those in flight, but for bodies still
 * arriving 3 s into it (a sender that stalls is closed with the daemon; one
 * that sends gets 503 at its next bytes from 2 s on). */
int  srv_http_busy(void);
void srv_http_stop(void);      /* close everything */
int  srv_http_connections(void); /* connections open now */
void srv_http_watch(void);     /* main's tick: warns when the connections are at their limit */
extern volatile int srv_draining;

/* ------------------------------------------------------------ trained models (models_routes.c) */

/* Loads every NAME.safetensors + NAME.json of the weights directory (dir, or
 * ATTN_MODELS_DIR's default search: ./training/weights, then beside the
 * binary). A file that does not load is logged and listed under
 * "unavailable" in GET /models; with strict, start-up fails instead.
 * Returns 0, or -1 (strict only). */
#define SRV_MODELS_MAX 16 /* models served at most */
int  srv_models_start(const char *dir, int strict);
void srv_models_stop(void);
/* The index of the served model named name[0..len), or -1. */
int  srv_models_find(const char *name, size_t len);
/* The name of the served model of index i (borrowed, valid until
 * srv_models_stop), or NULL when fewer are served. */
const char *srv_models_name(int i);
/* 404 unknown_model for name[0..len), listing the served models. */
int  srv_models_unknown(const char *name, size_t len, srv_err *e);
void srv_models_list(srv_buf *b);
int  srv_models_translate(int model, const char *body, size_t len, srv_call *call, srv_buf *out, srv_err *e);
/* GET /models and POST /models/{name}/translate. */
srv_serve_fn srv_serve_models, srv_serve_translate;

/* ------------------------------------------------------------ decode sessions (sessions.c) */

/* The session routes: POST /sessions, POST /sessions/{id}/step and
 * /truncate, GET and DELETE /sessions/{id}. */
srv_serve_fn srv_serve_session_new, srv_serve_session_step, srv_serve_session_truncate,
    srv_serve_session_get, srv_serve_session_delete;
/* The session functions the KServe sequence model shares with the routes
 * above (one implementation; kserve_infer.c only adapts names). j is a
 * SRV_JOB_SESSION job read with the SRV_F_SES_NEW fields (create) or the
 * SRV_F_SES_STEP fields (step); call owns the arena the results live in.
 *
 * srv_session_create: a session from j's sizes and options under the id
 * want (32 lowercase hex digits; refused with 409 sequence_live when a
 * live session has it), or under a fresh random id when want is NULL or
 * "". Its id into id (33 bytes). 0, or -1 with e filled. */
int  srv_session_create(srv_call *call, srv_job *j, const char *want, char *id, srv_err *e);
/* A step result: out (Tq, H, d), w (H, Tq, n) or NULL and lse (H, Tq) or
 * NULL (return_lse), arena-owned. */
typedef struct {
    int64_t n, Tq, H, d;
    float *out, *w, *lse;
} srv_step_result;
/* POST /sessions/{id}/step's work: appends j's key and value rows to the
 * session id, then its queries attend the whole cache. 0, or -1 with e
 * filled (404 unknown_session, 422 shapes, 413 session_full, 503). */
int  srv_session_step(srv_call *call, const char *id, const srv_job *j, srv_step_result *res,
                      srv_err *e);
/* DELETE /sessions/{id}'s work: 0, or -1 with e filled (404). */
int  srv_session_end(const char *id, srv_err *e);
/* Whether a request for t's session would wait for another request's turn
 * now (srv_route_schedule, for the rows marked SRV_SCHED_TURN: it then
 * runs on a thread of its own, so the wait holds no polling thread). */
int  srv_session_busy(const srv_target *t);
/* Whether s[0..n) has the form of a session id (a path segment). */
int  srv_session_id_ok(const char *s, size_t n);
/* Expires the sessions idle past ATTN_SESSION_TTL (main calls it often). */
void srv_sessions_tick(void);
/* Frees every session (at shutdown, with no request in flight). */
void srv_sessions_stop(void);
/* The sessions' gauges and counters, in Prometheus text. */
void srv_sessions_metrics(srv_buf *b);

#endif /* SRV_H */
