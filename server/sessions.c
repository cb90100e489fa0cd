/* sessions.c - decode sessions: a key/value cache kept on the server between
 * requests, so each decoding step sends only its new rows. The cache is
 * the library's attn_kv_cache (per KV head one array of keys and one of
 * values, doubled up to max_tokens: an amortised O(1) append), its growth
 * counted against ATTN_SESSION_MEMORY; a step computes every head in one
 * attn_cache_compute, which reads the arrays in place.
 *
 * Locking: one table lock guards the id table, the memory count and the
 * reference counts, and is held only for lookups and bookkeeping, never
 * while computing or reading a body. Each session serialises its steps with
 * a ticket lock (first come, first served); different sessions compute in
 * parallel. A session leaves the table when deleted or expired, and its
 * memory is freed when the last request holding it lets go. */
#include "srv.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define ID_HEX 32        /* 128 random bits */
#define BUCKETS 1024
#define GONE_MAX 4096    /* ids remembered as deleted or expired */

enum { GONE_NO = 0, GONE_DELETED, GONE_EXPIRED };

typedef struct srv_session srv_session;
struct srv_session {
    srv_session *next;    /* hash chain (table lock) */
    char id[ID_HEX + 1];
    /* fixed at creation */
    int64_t H, Hkv, d, max_tokens;
    attn_cache_request req; /* a step's request but its query, arrays and len */
    float *slopes, *sinks; /* req's lists (H each), or NULL: ALiBi's slopes and sinks */
    /* table lock */
    int refs;             /* requests holding the session */
    int unlinked;         /* out of the table: freed when refs reaches 0 */
    double last_ms;       /* the last request's time, for the idle TTL */
    /* mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t ticket, serving; /* the next ticket to hand out, the one whose turn it is */
    uint64_t *left;       /* tickets whose clients left while they waited: skipped */
    size_t n_left, cap_left;
    int gone;             /* GONE_DELETED or GONE_EXPIRED once unlinked */
    int64_t n;            /* rows held */
    size_t bytes;         /* what the session holds, as counted in `held` */
    /* the turn's holder only */
    attn_kv_cache *cache; /* the rows; s->n of them committed */
};

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static srv_session *buckets[BUCKETS];
static int n_open;
static size_t held;
static struct {
    char id[ID_HEX];
    unsigned char why;
} gone_ring[GONE_MAX];
static unsigned gone_next;
static double last_sweep;
static _Atomic uint64_t m_created, m_deleted, m_expired, m_steps, m_rows;

/* ------------------------------------------------------------ ids */

int srv_session_id_ok(const char *s, size_t n)
{
    if (n != ID_HEX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static unsigned bucket_of(const char *id)
{
    unsigned h = 0;
    for (int i = 0; i < 8; i++)
        h = h << 4 | (unsigned)(id[i] <= '9' ? id[i] - '0' : id[i] - 'a' + 10);
    return h % BUCKETS;
}

/* 128 bits from the kernel's generator (getrandom), as lowercase hex. */
static int new_id(char out[ID_HEX + 1])
{
    unsigned char raw[ID_HEX / 2];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t k = getrandom(raw + got, sizeof raw - got, 0);
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[ID_HEX] = '\0';
    return 0;
}

/* ------------------------------------------------------------ the table (table lock held) */

static srv_session *find(const char *id)
{
    for (srv_session *s = buckets[bucket_of(id)]; s; s = s->next)
        if (memcmp(s->id, id, ID_HEX) == 0)
            return s;
    return NULL;
}

static void unlink_session(srv_session *s, int why)
{
    srv_session **p = &buckets[bucket_of(s->id)];
    while (*p != s)
        p = &(*p)->next;
    *p = s->next;
    s->unlinked = 1;
    n_open--;
    memcpy(gone_ring[gone_next].id, s->id, ID_HEX);
    gone_ring[gone_next].why = (unsigned char)why;
    gone_next = (gone_next + 1) % GONE_MAX;
    atomic_fetch_add_explicit(why == GONE_EXPIRED ? &m_expired : &m_deleted, 1,
                              memory_order_relaxed);
}

static int gone_why(const char *id)
{
    for (unsigned i = 0; i < GONE_MAX; i++) {
        unsigned k = (gone_next + GONE_MAX - 1 - i) % GONE_MAX; /* newest first */
        if (gone_ring[k].why && memcmp(gone_ring[k].id, id, ID_HEX) == 0)
            return gone_ring[k].why;
    }
    return GONE_NO;
}

static int expired(const srv_session *s, double now)
{
    return s->refs == 0 && now - s->last_ms > srv_cfg.session_ttl * 1000.0;
}

/* ------------------------------------------------------------ memory */

/* Counts n more bytes against ATTN_SESSION_MEMORY: 0, or -1 with e filled. */
static int mem_take(size_t n, srv_err *e)
{
    pthread_mutex_lock(&table_mu);
    int ok = n <= srv_cfg.session_memory && held <= srv_cfg.session_memory - n;
    if (ok)
        held += n;
    size_t now = held;
    pthread_mutex_unlock(&table_mu);
    if (ok)
        return 0;
    return srv_fail(e, 503, "overloaded", "",
                    "the sessions hold %zu bytes of this server's %zu (ATTN_SESSION_MEMORY) and "
                    "%zu more are needed: retry later, or delete sessions you no longer use",
                    now, srv_cfg.session_memory, n);
}

static void mem_give(size_t n)
{
    pthread_mutex_lock(&table_mu);
    held -= n;
    pthread_mutex_unlock(&table_mu);
}

static void session_free(srv_session *s)
{
    attn_kv_cache_free(s->cache);
    free(s->slopes);
    free(s->sinks);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->left);
    mem_give(s->bytes);
    free(s);
}

/* ------------------------------------------------------------ holding a session */

static int unknown(srv_err *e, const char *id, int why)
{
    if (why == GONE_DELETED)
        return srv_fail(e, 404, "unknown_session", "", "session %s was deleted", id);
    if (why == GONE_EXPIRED)
        return srv_fail(e, 404, "unknown_session", "",
                        "session %s expired after %u s without a request (ATTN_SESSION_TTL) and "
                        "its memory was freed: create a new one with POST /sessions (KServe: "
                        "sequence_start)",
                        id, srv_cfg.session_ttl);
    return srv_fail(e, 404, "unknown_session", "",
                    "no session %s on this server: it never existed here, or its server "
                    "restarted (sessions live in memory): create a new one with POST /sessions "
                    "(KServe: sequence_start)",
                    id);
}

/* The session named id, held (and its idle clock restarted) until
 * release; NULL with e filled (404) when there is none. */
static srv_session *acquire(const char *id, srv_err *e)
{
    double now = srv_now_ms();
    srv_session *dead = NULL;
    pthread_mutex_lock(&table_mu);
    srv_session *s = find(id);
    if (s && expired(s, now)) { /* before the sweep got to it */
        unlink_session(s, GONE_EXPIRED);
        dead = s;
        s = NULL;
    }
    if (s) {
        s->refs++;
        s->last_ms = now;
    }
    int why = s ? GONE_NO : gone_why(id);
    pthread_mutex_unlock(&table_mu);
    if (dead)
        session_free(dead);
    if (!s)
        unknown(e, id, why);
    return s;
}

static void release(srv_session *s)
{
    pthread_mutex_lock(&table_mu);
    s->last_ms = srv_now_ms();
    int last = --s->refs == 0 && s->unlinked;
    pthread_mutex_unlock(&table_mu);
    if (last)
        session_free(s);
}

/* How often a request waiting for its session's turn looks whether its
 * client is still there (a poll() of its socket). */
#define TURN_WATCH_MS 10

/* The turn to the next ticket, past those whose clients left (mu held). */
static void pass_turn(srv_session *s)
{
    s->serving++;
    for (size_t k = 0; k < s->n_left;) {
        if (s->left[k] != s->serving) {
            k++;
            continue;
        }
        s->left[k] = s->left[--s->n_left];
        s->serving++;
        k = 0;
    }
    pthread_cond_broadcast(&s->cv);
}

/* Waits on s->cv for at most TURN_WATCH_MS (mu held). */
static void wait_a_while(srv_session *s)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += TURN_WATCH_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->cv, &s->mu, &until);
}

/* Gives up ticket mine, not yet served, for a client that left (mu held):
 * its turn will be skipped. Returns 0 when that cannot be noted (no
 * memory): the ticket then waits for its turn as before. */
static int leave_queue(srv_session *s, uint64_t mine)
{
    if (s->n_left == s->cap_left) {
        size_t cap = s->cap_left ? 2 * s->cap_left : 4;
        uint64_t *p = realloc(s->left, cap * sizeof *p);
        if (!p)
            return 0;
        s->left = p;
        s->cap_left = cap;
    }
    s->left[s->n_left++] = mine;
    return 1;
}

/* Waits for the session's turn (arrival order). Returns 0 with the turn,
 * or -1 with e filled when the session was deleted meanwhile (the turn is
 * then passed on) or the client left while waiting (its turn is then
 * skipped). */
static int turn_begin(srv_session *s, srv_err *e)
{
    pthread_mutex_lock(&s->mu);
    uint64_t mine = s->ticket++;
    /* the client is looked at by the clock, not when a wait times out:
     * turns passed often enough would wake the wait before every time-out */
    double look = srv_now_ms() + TURN_WATCH_MS;
    while (s->serving != mine) {
        wait_a_while(s);
        if (s->serving == mine || srv_now_ms() < look)
            continue;
        look = srv_now_ms() + TURN_WATCH_MS;
        if (srv_watch_client_gone() && leave_queue(s, mine)) {
            pthread_mutex_unlock(&s->mu);
            return srv_fail_lib(e, ATTN_ERR_CANCELLED, NULL);
        }
    }
    int why = s->gone;
    if (why)
        pass_turn(s);
    pthread_mutex_unlock(&s->mu);
    return why ? unknown(e, s->id, why) : 0;
}

static void turn_end(srv_session *s)
{
    pthread_mutex_lock(&s->mu);
    pass_turn(s);
    pthread_mutex_unlock(&s->mu);
}

int srv_session_busy(const srv_target *t)
{
    int busy = 0;
    pthread_mutex_lock(&table_mu);
    srv_session *s = find(t->session);
    if (s) {
        pthread_mutex_lock(&s->mu); /* table lock, then a session's: the one order */
        busy = s->ticket != s->serving;
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&table_mu);
    return busy;
}

/* ------------------------------------------------------------ requests */

/* The body into a session job: the fields of `where`, checked. */
static int parse(srv_call *call, srv_job *j, unsigned where, const char *body, size_t len,
                 srv_err *e)
{
    srv_job_init(j, SRV_JOB_SESSION, ATTN_RULE_SCALED_DOT);
    j->ses.where = where;
    srv_codec c = {&call->arena, &call->scan, srv_cfg.max_elements};
    return srv_call_parse(call, body, len, "the body", e) ||
           srv_fields_read(call->root, SRV_F_BODY, "field", &c, j, e);
}

static void finish(srv_reply *r, srv_call *call, int rc, const srv_err *e)
{
    srv_reply_timings(r, call);
    srv_call_free(call);
    if (rc)
        srv_reply_error(r, e);
}

/* One POST's state: its call (arena, timings), job and error, and the
 * session it holds (NULL: none yet). */
typedef struct {
    srv_call call;
    srv_job j;
    srv_err e;
    srv_session *s;
} ses_post;

/* Starts q's clock; q holds nothing yet. */
static void post_begin(ses_post *q)
{
    memset(&q->call, 0, sizeof q->call);
    q->call.t0 = srv_now_ms();
    q->s = NULL;
}

/* Holds the session t names, then parses body with the fields of `where`.
 * 0 ok; on failure q->e says why (q->s may be held: post_end lets go). */
static int post_open(ses_post *q, const srv_target *t, unsigned where, const char *body, size_t len)
{
    return !(q->s = acquire(t->session, &q->e)) || parse(&q->call, &q->j, where, body, len, &q->e);
}

/* Lets go of the session held, then answers r (its error when rc). */
static void post_end(ses_post *q, int rc, srv_reply *r)
{
    if (q->s)
        release(q->s);
    finish(r, &q->call, rc, &q->e);
}

/* ------------------------------------------------------------ POST /sessions */

/* The cache request every step of a session j creates starts from: its
 * heads, scale and options, causal and aligned bottom-right (query row i
 * of Tq sits at position len - Tq + i). ALiBi's slopes and the sinks are
 * j's lists (NULL: none, or ALiBi's own slopes). */
static attn_cache_request step_request(const srv_job *j)
{
    attn_cache_request r = attn_cache_request_default();
    r.num_heads = j->ses.num_heads;
    r.num_kv_heads = j->ses.num_kv_heads;
    r.has_scale = j->u.att.has_scale;
    r.scale = j->u.att.scale;
    r.opt = j->u.att.opt;
    r.opt.causal = 1;
    r.opt.align = ATTN_ALIGN_BOTTOM_RIGHT;
    return r;
}

/* What a session holds besides its cache: itself, and its copies of the
 * ALiBi slopes and the sinks (lists of them, one float per head). */
static size_t fixed_bytes(int64_t num_heads, int lists)
{
    return sizeof(srv_session) + (size_t)lists * (size_t)num_heads * sizeof(float);
}

/* The lists a job's session copies: the ALiBi slopes, the sinks. */
static int job_lists(const srv_job *j)
{
    const attn_options *o = &j->u.att.opt;
    return (o->alibi && o->alibi_slopes) + (o->sinks != NULL);
}

/* A session's max_tokens, and all it holds once its cache is full
 * (attn_kv_cache_bytes_max and fixed_bytes: what session_new and the
 * steps charge), against this server's caps, from the sizes alone. 0, or
 * -1 with e filled. */
static int check_memory(const srv_job *j, srv_err *e)
{
    const srv_ses_fields *f = &j->ses;
    if (f->max_tokens > srv_cfg.session_max_tokens)
        return srv_fail(e, 413, "session_full", "max_tokens",
                        "max_tokens %lld is over this server's %lld (ATTN_SESSION_MAX_TOKENS)",
                        (long long)f->max_tokens, (long long)srv_cfg.session_max_tokens);
    /* 0 (a size below 1): the planner's 422 follows */
    size_t cache = attn_kv_cache_bytes_max(f->num_kv_heads, f->head_dim, f->max_tokens);
    size_t fixed = fixed_bytes(f->num_heads, job_lists(j)); /* num_heads x head_dim fits: small */
    if (cache != 0 && (cache > srv_cfg.session_memory || fixed > srv_cfg.session_memory - cache))
        return srv_fail(e, 413, "session_full", "max_tokens",
                        "a session with a full cache of max_tokens %lld rows would be over this "
                        "server's session memory, %zu bytes (ATTN_SESSION_MEMORY)",
                        (long long)f->max_tokens, srv_cfg.session_memory);
    return 0;
}

/* The creation fields' values and the options: what the sizes alone say
 * against this server's caps, before anything is allocated for them (a
 * step's query row must fit a request body), then the library's own
 * planner on a one-row step. */
static int check_new(srv_call *call, srv_job *j, srv_err *e)
{
    srv_ses_fields *f = &j->ses;
    if (f->num_kv_heads == 0)
        f->num_kv_heads = f->num_heads;
    if (f->num_heads < 1)
        return srv_fail(e, 422, "invalid_param", "num_heads", "num_heads must be at least 1");
    int64_t row;
    if (!attn_size_mul(f->num_heads, f->head_dim, &row) || row > srv_cfg.max_elements)
        return srv_fail(e, 422, "invalid_param", "head_dim",
                        "num_heads x head_dim is over this server's %lld (ATTN_MAX_ELEMENTS)",
                        (long long)srv_cfg.max_elements);
    if ((uint64_t)row > srv_cfg.max_body / sizeof(float))
        return srv_fail(e, 422, "invalid_param", "head_dim",
                        "a step's query row of num_heads x head_dim floats would be over this "
                        "server's request body limit, %zu bytes (ATTN_MAX_BODY)",
                        srv_cfg.max_body);
    /* num_kv_heads outside 1..num_heads: the planner refuses it, before it
     * reads a KV head */
    int heads_ok = f->num_kv_heads >= 1 && f->num_kv_heads <= f->num_heads;
    if (heads_ok && check_memory(j, e))
        return -1;
    /* a query row of zeros over a cache of one such row per KV head */
    int64_t nkv = heads_ok ? f->num_kv_heads : 1;
    float *zeros = srv_arena_alloc(&call->arena, (size_t)row * sizeof(float));
    const float **kv = srv_arena_alloc(&call->arena, (size_t)nkv * sizeof(float *));
    if (!zeros || !kv)
        return srv_fail(e, 503, "overloaded", "", "out of memory");
    memset(zeros, 0, (size_t)row * sizeof(float));
    for (int64_t g = 0; g < nkv; g++)
        kv[g] = zeros;
    attn_cache_request req = step_request(j);
    req.query = (attn_tensor){3, {1, f->num_heads, f->head_dim}, zeros};
    req.len = 1;
    req.key = req.value = kv;
    attn_error ae = {{0}, {0}};
    attn_status st = attn_cache_plan(&req, NULL, &ae);
    if (st != ATTN_OK)
        return srv_fail_lib(e, st, &ae);
    return 0; /* the planner took num_kv_heads: heads_ok held */
}

/* A copy of the list of n floats v (NULL: none) into *out; 0, or -1 when
 * out of memory. */
static int copy_list(const float *v, int64_t n, float **out)
{
    *out = v ? malloc((size_t)n * sizeof(float)) : NULL;
    if (v && *out)
        memcpy(*out, v, (size_t)n * sizeof(float));
    return v && !*out ? -1 : 0;
}

/* A new session from a checked job (not yet in the table). */
static srv_session *session_new(const srv_job *j, srv_err *e)
{
    const srv_ses_fields *f = &j->ses;
    const attn_options *o = &j->u.att.opt;
    srv_session *s = calloc(1, sizeof *s);
    int made = s && (s->cache = attn_kv_cache_new(f->num_kv_heads, f->head_dim, f->max_tokens)) &&
               !copy_list(o->alibi ? o->alibi_slopes : NULL, f->num_heads, &s->slopes) &&
               !copy_list(o->sinks, f->num_heads, &s->sinks);
    size_t bytes = fixed_bytes(f->num_heads, job_lists(j)) + (made ? attn_kv_cache_bytes(s->cache) : 0);
    if (!made || mem_take(bytes, e)) { /* mem_take fills e itself */
        if (!made)
            srv_fail(e, 503, "overloaded", "", "out of memory for a new session");
        if (s) {
            attn_kv_cache_free(s->cache);
            free(s->slopes);
            free(s->sinks);
        }
        free(s);
        return NULL;
    }
    s->H = f->num_heads;
    s->Hkv = f->num_kv_heads;
    s->d = f->head_dim;
    s->max_tokens = f->max_tokens;
    s->req = step_request(j);
    s->req.opt.alibi_slopes = s->slopes;
    s->req.opt.sinks = s->sinks;
    s->bytes = bytes;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca; /* timed waits on the clock srv_now_ms reads */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    return s;
}

/* Puts s in the table under a fresh id, or under want (32 lowercase hex
 * digits) when no live session has it: the balancer's X-Session-Id, or a
 * KServe client's sequence_id. A live want is refused when strict, else
 * replaced by a fresh id. The id into id (ID_HEX + 1 bytes), written under
 * the lock: once it is let go, a request naming the id may free s.
 * Returns 0, or -1 with e filled (503 past ATTN_MAX_SESSIONS, 409
 * sequence_live). */
static int insert(srv_session *s, const char *want, int strict, char *id, srv_err *e)
{
    int wanted = want && want[0] && srv_session_id_ok(want, strlen(want));
    pthread_mutex_lock(&table_mu);
    int live = wanted && find(want);
    if (n_open >= srv_cfg.max_sessions || (live && strict)) {
        pthread_mutex_unlock(&table_mu);
        if (live && strict)
            return srv_fail(e, 409, "sequence_live", "sequence_id",
                            "sequence %s has already started and not ended: send its next step "
                            "without sequence_start, or end it (sequence_end) first", want);
        return srv_fail(e, 503, "overloaded", "",
                        "this server holds %d sessions, its most (ATTN_MAX_SESSIONS): retry later, "
                        "or delete sessions you no longer use", srv_cfg.max_sessions);
    }
    int rc = 0;
    if (wanted && !live) {
        memcpy(s->id, want, ID_HEX + 1);
    } else {
        do
            rc = new_id(s->id);
        while (rc == 0 && find(s->id));
    }
    if (rc == 0) {
        unsigned b = bucket_of(s->id);
        s->next = buckets[b];
        buckets[b] = s;
        s->last_ms = srv_now_ms();
        n_open++;
        memcpy(id, s->id, ID_HEX + 1);
    }
    pthread_mutex_unlock(&table_mu);
    if (rc)
        return srv_fail(e, 503, "overloaded", "", "no random bytes for a session id");
    atomic_fetch_add_explicit(&m_created, 1, memory_order_relaxed);
    return 0;
}

/* A session from j's checked fields, in the table under want (see insert)
 * or a fresh id, written to id (ID_HEX + 1 bytes). 0, or -1 with e filled. */
static int create(srv_call *call, srv_job *j, const char *want, int strict, char *id, srv_err *e)
{
    srv_session *s = NULL; /* not held: once inserted, the table's */
    int rc = check_new(call, j, e) || !(s = session_new(j, e)) || insert(s, want, strict, id, e);
    if (rc && s)
        session_free(s);
    return rc;
}

int srv_session_create(srv_call *call, srv_job *j, const char *want, char *id, srv_err *e)
{
    return create(call, j, want, 1, id, e);
}

void srv_serve_session_new(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    ses_post q;
    char id[ID_HEX + 1];
    post_begin(&q);
    int rc = parse(&q.call, &q.j, SRV_F_SES_NEW, body, len, &q.e) ||
             create(&q.call, &q.j, t->session_hdr, 0, id, &q.e);
    if (!rc) {
        r->status = 201;
        srv_buf_printf(&r->body, "{\"id\":\"%s\",\"max_tokens\":%lld,\"ttl_seconds\":%u}\n",
                       id, (long long)q.j.ses.max_tokens, srv_cfg.session_ttl);
    }
    post_end(&q, rc, r);
}

/* ------------------------------------------------------------ POST /sessions/{id}/step */

/* key and value (T, Hkv, d), query (Tq, H, d). */
static int check_step(const srv_session *s, const srv_job *j, srv_err *e)
{
    const attn_tensor *k = &j->u.att.key, *v = &j->u.att.value, *q = &j->u.att.query;
    if (k->rank != 3 || k->shape[1] != s->Hkv || k->shape[2] != s->d)
        return srv_fail(e, 422, "shape_mismatch", "key",
                        "key must have shape (T, num_kv_heads, head_dim) = (T, %lld, %lld)",
                        (long long)s->Hkv, (long long)s->d);
    if (v->rank != 3 || memcmp(v->shape, k->shape, 3 * sizeof k->shape[0]))
        return srv_fail(e, 422, "shape_mismatch", "value",
                        "value must have the key's shape (T, num_kv_heads, head_dim) = "
                        "(%lld, %lld, %lld)",
                        (long long)k->shape[0], (long long)s->Hkv, (long long)s->d);
    if (q->rank != 3 || q->shape[1] != s->H || q->shape[2] != s->d)
        return srv_fail(e, 422, "shape_mismatch", "query",
                        "query must have shape (Tq, num_heads, head_dim) = (Tq, %lld, %lld)",
                        (long long)s->H, (long long)s->d);
    return 0;
}

/* The step's T rows appended to the cache, its growth (the arrays
 * doubled, up to max_tokens) counted against ATTN_SESSION_MEMORY. 0, or
 * -1 with e filled and nothing appended. */
static int append_rows(srv_session *s, const attn_tensor *k, const attn_tensor *v, srv_err *e)
{
    int64_t n1 = attn_kv_cache_len(s->cache) + k->shape[0];
    size_t extra = attn_kv_cache_bytes_for(s->cache, n1) - attn_kv_cache_bytes(s->cache);
    if (extra && mem_take(extra, e))
        return -1;
    attn_error ae = {{0}, {0}};
    attn_status st = attn_kv_cache_append(s->cache, k, v, &ae);
    if (st != ATTN_OK) {
        mem_give(extra);
        return st == ATTN_ERR_NOMEM
                   ? srv_fail(e, 503, "overloaded", "", "out of memory for the session's cache")
                   : srv_fail_lib(e, st, &ae);
    }
    pthread_mutex_lock(&s->mu);
    s->bytes += extra;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* The step's library request: query q over the cache's first n rows,
 * read in place. */
static attn_cache_request over_cache(const srv_session *s, const attn_tensor *q, int64_t n,
                                     int need_weights)
{
    attn_cache_request req = s->req;
    req.query = *q;
    req.len = n;
    req.key = attn_kv_cache_keys(s->cache);
    req.value = attn_kv_cache_values(s->cache);
    req.opt.need_weights = need_weights;
    return req;
}

/* Every query head over the cache's first n rows, in one library call
 * that reads the cache in place: out (Tq, H, d), w (H, Tq, n) or NULL,
 * lse (H, Tq) or NULL. */
static int compute(const srv_session *s, const attn_tensor *q, int64_t n, float *out, float *w,
                   float *lse, double flops, size_t scratch, srv_err *e)
{
    attn_cache_request req = over_cache(s, q, n, w != NULL);
    attn_error ae = {{0}, {0}};
    attn_ctx *ctx = srv_ctx_acquire(flops); /* the whole step: large ones get threads */
    attn_status st = attn_cache_compute_lse(ctx, &req, out, w, lse, &ae);
    srv_ctx_release(ctx, scratch);
    if (st != ATTN_OK)
        return srv_fail_lib(e, st, &ae);
    return srv_check_finite(out, q->shape[0] * q->shape[1] * q->shape[2], q->shape[2], e);
}

/* The library's plan of the step over n rows: its results' sizes, its
 * cost (the score pipeline's included) and its working memory (bf16's
 * rounded copies of the cache's keys and values, a head's at a time). A
 * plan the library refuses is left for the computation to report: the
 * step is then counted as the query's output, every head's weights over
 * every row when asked (past any cap when they overflow) and dense
 * products, without working memory. */
static void plan_cache(const srv_session *s, const srv_job *j, int64_t n, attn_shapes *sh)
{
    attn_cache_request req = over_cache(s, &j->u.att.query, n, j->u.att.opt.need_weights);
    attn_error ae;
    if (attn_cache_plan(&req, sh, &ae) == ATTN_OK)
        return;
    int64_t Tq = j->u.att.query.shape[0];
    memset(sh, 0, sizeof *sh);
    attn_size_mul(s->H * Tq, s->d, &sh->out_count); /* the query's size: checked by the codec */
    if (j->u.att.opt.need_weights && !attn_size_mul(s->H * Tq, n, &sh->w_count))
        sh->w_count = INT64_MAX;
    sh->flops = 4.0 * (double)s->H * (double)Tq * (double)n * (double)s->d;
}

/* The step's results, sized and checked against the caps before the cache
 * changes. */
typedef struct {
    int64_t n, Tq;
    float *out, *w, *lse;
    double flops;
    size_t scratch; /* the working memory the computation plans */
} step_out;

static int plan_step(srv_call *call, const srv_session *s, const srv_job *j, int64_t n,
                     step_out *so, srv_err *e)
{
    int64_t Tq = j->u.att.query.shape[0];
    so->n = n;
    so->Tq = Tq;
    if (n > s->max_tokens)
        return srv_fail(e, 413, "session_full", "key",
                        "the session holds %lld of its max_tokens %lld rows; %lld more do not fit "
                        "(truncate it, or start a session with a larger max_tokens)",
                        (long long)(n - j->u.att.key.shape[0]), (long long)s->max_tokens,
                        (long long)j->u.att.key.shape[0]);
    attn_shapes sh;
    plan_cache(s, j, n, &sh);
    so->flops = sh.flops;
    if (srv_check_result(&sh, e) || srv_check_work(sh.flops, e) ||
        srv_check_scratch(sh.scratch_bytes, e))
        return -1;
    so->scratch = (size_t)sh.scratch_bytes; /* within the cap */
    so->out = srv_arena_alloc(&call->arena, (size_t)sh.out_count * sizeof(float));
    so->w = sh.w_count ? srv_arena_alloc(&call->arena, (size_t)sh.w_count * sizeof(float)) : NULL;
    /* H x Tq: at most the output's floats */
    so->lse = j->return_lse ? srv_arena_alloc(&call->arena, (size_t)(s->H * Tq) * sizeof(float)) : NULL;
    if (!so->out || (sh.w_count && !so->w) || (j->return_lse && !so->lse))
        return srv_fail(e, 413, "too_large", "", "not enough memory for the step's result");
    return 0;
}

/* Appends, computes and commits the new length, in the session's turn; a
 * refused step leaves the cache as it was. */
static int run_step(srv_call *call, srv_session *s, const srv_job *j, step_out *so, srv_err *e)
{
    if (turn_begin(s, e))
        return -1;
    int64_t n0 = s->n, n1 = n0 + j->u.att.key.shape[0];
    double t0 = srv_now_ms();
    int rc = plan_step(call, s, j, n1, so, e) || append_rows(s, &j->u.att.key, &j->u.att.value, e);
    if (!rc && (rc = compute(s, &j->u.att.query, n1, so->out, so->w, so->lse, so->flops, so->scratch, e)))
        attn_kv_cache_truncate(s->cache, n0, NULL); /* the refused step's rows out again */
    if (!rc) {
        pthread_mutex_lock(&s->mu);
        s->n = n1;
        pthread_mutex_unlock(&s->mu);
        atomic_fetch_add_explicit(&m_steps, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&m_rows, (uint64_t)(n1 - n0), memory_order_relaxed);
    }
    call->t_compute = srv_now_ms() - t0;
    turn_end(s);
    return rc;
}

static void encode_step(srv_call *call, const srv_session *s, const srv_job *j, const step_out *so,
                        srv_buf *b)
{
    double t0 = srv_now_ms();
    int64_t oshape[3] = {so->Tq, s->H, s->d}, wshape[3] = {s->H, so->Tq, so->n};
    double floats = (double)so->Tq * (double)s->H * ((double)s->d + (so->w ? (double)so->n : 0));
    srv_buf_reserve(b, (size_t)(floats * (j->b64 ? 6.0 : 16.0)) + 128);
    srv_buf_puts(b, "{\"output\":");
    srv_encode_tensor(b, so->out, 3, oshape, j->b64);
    if (so->w) {
        srv_buf_puts(b, ",\"weights\":");
        srv_encode_tensor(b, so->w, 3, wshape, j->b64);
    }
    if (so->lse) {
        srv_buf_puts(b, ",\"lse\":");
        srv_encode_tensor(b, so->lse, 2, wshape, j->b64);
    }
    srv_buf_printf(b, ",\"length\":%lld}\n", (long long)so->n);
    call->t_encode = srv_now_ms() - t0;
}

void srv_serve_session_step(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    ses_post q;
    step_out so;
    memset(&so, 0, sizeof so);
    post_begin(&q);
    int rc = post_open(&q, t, SRV_F_SES_STEP, body, len) || check_step(q.s, &q.j, &q.e);
    q.call.t_parse = srv_now_ms() - q.call.t0;
    if (!rc)
        rc = run_step(&q.call, q.s, &q.j, &so, &q.e);
    if (!rc)
        encode_step(&q.call, q.s, &q.j, &so, &r->body);
    post_end(&q, rc, r);
}

int srv_session_step(srv_call *call, const char *id, const srv_job *j, srv_step_result *res,
                     srv_err *e)
{
    step_out so;
    memset(&so, 0, sizeof so);
    srv_session *s = acquire(id, e);
    if (!s)
        return -1;
    int rc = check_step(s, j, e) || run_step(call, s, j, &so, e);
    if (!rc)
        *res = (srv_step_result){so.n, so.Tq, s->H, s->d, so.out, so.w, so.lse};
    release(s);
    return rc;
}

/* ------------------------------------------------------------ truncate, GET, DELETE */

void srv_serve_session_truncate(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    ses_post q;
    post_begin(&q);
    int rc = post_open(&q, t, SRV_F_SES_CUT, body, len) || turn_begin(q.s, &q.e);
    if (!rc) {
        srv_session *s = q.s;
        int64_t want = q.j.ses.length;
        pthread_mutex_lock(&s->mu);
        int64_t n = s->n;
        if (want <= n)
            s->n = want;
        pthread_mutex_unlock(&s->mu);
        if (want <= n)
            attn_kv_cache_truncate(s->cache, want, NULL);
        turn_end(s);
        if (want > n)
            rc = srv_fail(&q.e, 422, "invalid_param", "length",
                          "length %lld is past the session's %lld rows; truncate only drops rows",
                          (long long)want, (long long)n);
        else
            srv_buf_printf(&r->body, "{\"length\":%lld}\n", (long long)want);
    }
    post_end(&q, rc, r);
}

/* Holds the session t names, or answers r with why not (404) and returns
 * NULL. The caller releases what it got. */
static srv_session *acquire_or_reply(const srv_target *t, srv_reply *r)
{
    srv_err e;
    srv_session *s = acquire(t->session, &e);
    if (!s)
        srv_reply_error(r, &e);
    return s;
}

void srv_serve_session_get(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)body, (void)len;
    srv_session *s = acquire_or_reply(t, r);
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    int64_t n = s->n;
    size_t bytes = s->bytes;
    pthread_mutex_unlock(&s->mu);
    srv_buf_printf(&r->body,
                   "{\"id\":\"%s\",\"length\":%lld,\"max_tokens\":%lld,\"bytes\":%zu,"
                   "\"ttl_seconds\":%u,\"num_heads\":%lld,\"num_kv_heads\":%lld,\"head_dim\":%lld}\n",
                   s->id, (long long)n, (long long)s->max_tokens, bytes, srv_cfg.session_ttl,
                   (long long)s->H, (long long)s->Hkv, (long long)s->d);
    release(s);
}

/* Takes the held session s out of the table: 0, or -1 with e filled when
 * another request took it out first. */
static int end_held(srv_session *s, srv_err *e)
{
    pthread_mutex_lock(&table_mu);
    int first = !s->unlinked;
    if (first)
        unlink_session(s, GONE_DELETED);
    pthread_mutex_unlock(&table_mu);
    if (!first)
        return unknown(e, s->id, GONE_DELETED);
    /* Steps waiting for their turn now answer 404; the one computing
     * finishes. The memory goes with the last holder. */
    pthread_mutex_lock(&s->mu);
    s->gone = GONE_DELETED;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void srv_serve_session_delete(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    (void)body, (void)len;
    srv_session *s = acquire_or_reply(t, r);
    if (!s)
        return;
    srv_err e;
    if (end_held(s, &e))
        srv_reply_error(r, &e);
    else
        r->status = 204;
    release(s);
}

int srv_session_end(const char *id, srv_err *e)
{
    srv_session *s = acquire(id, e);
    if (!s)
        return -1;
    int rc = end_held(s, e);
    release(s);
    return rc;
}

/* ------------------------------------------------------------ expiry, shutdown, metrics */

void srv_sessions_tick(void)
{
    double now = srv_now_ms();
    if (now - last_sweep < 1000.0)
        return;
    last_sweep = now;
    srv_session *dead = NULL;
    pthread_mutex_lock(&table_mu);
    for (int b = 0; b < BUCKETS; b++)
        for (srv_session *s = buckets[b], *next; s; s = next) {
            next = s->next;
            if (expired(s, now)) {
                unlink_session(s, GONE_EXPIRED);
                s->next = dead;
                dead = s;
            }
        }
    pthread_mutex_unlock(&table_mu);
    while (dead) {
        srv_session *next = dead->next;
        session_free(dead);
        dead = next;
    }
}

void srv_sessions_stop(void)
{
    for (int b = 0; b < BUCKETS; b++)
        while (buckets[b]) {
            srv_session *s = buckets[b];
            buckets[b] = s->next;
            n_open--;
            session_free(s);
        }
}

void srv_sessions_metrics(srv_buf *b)
{
    pthread_mutex_lock(&table_mu);
    int open = n_open;
    size_t bytes = held;
    pthread_mutex_unlock(&table_mu);
    srv_buf_printf(b,
                   "# HELP attn_sessions_open Decode sessions open now.\n"
                   "# TYPE attn_sessions_open gauge\n"
                   "attn_sessions_open %d\n"
                   "# HELP attn_session_bytes Bytes the decode sessions hold (caches and bookkeeping).\n"
                   "# TYPE attn_session_bytes gauge\n"
                   "attn_session_bytes %zu\n"
                   "# HELP attn_sessions_created_total Decode sessions created.\n"
                   "# TYPE attn_sessions_created_total counter\n"
                   "attn_sessions_created_total %llu\n"
                   "# HELP attn_sessions_deleted_total Decode sessions deleted by their clients.\n"
                   "# TYPE attn_sessions_deleted_total counter\n"
                   "attn_sessions_deleted_total %llu\n"
                   "# HELP attn_session_evictions_total Decode sessions expired after their idle time-to-live (ATTN_SESSION_TTL), their memory freed.\n"
                   "# TYPE attn_session_evictions_total counter\n"
                   "attn_session_evictions_total %llu\n"
                   "# HELP attn_session_steps_total Decode steps computed.\n"
                   "# TYPE attn_session_steps_total counter\n"
                   "attn_session_steps_total %llu\n"
                   "# HELP attn_session_rows_total Key and value rows appended to sessions.\n"
                   "# TYPE attn_session_rows_total counter\n"
                   "attn_session_rows_total %llu\n",
                   open, bytes, (unsigned long long)atomic_load(&m_created),
                   (unsigned long long)atomic_load(&m_deleted),
                   (unsigned long long)atomic_load(&m_expired),
                   (unsigned long long)atomic_load(&m_steps),
                   (unsigned long long)atomic_load(&m_rows));
}
