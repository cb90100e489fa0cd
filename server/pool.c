/* pool.c - compute contexts (scratch memory and a thread budget) kept
 * across requests, so large requests reuse their threads and scratch
 * instead of building them per call, and small ones reuse a one-thread
 * context of their HTTP thread; and what stops a lent context's calls
 * (the request's watch). */
#include "srv.h"

#include <poll.h>
#include <pthread.h>

#define POOL_MAX 64
#define SMALL_FLOPS 4e6 /* below this a single thread beats any fan-out */
/* A context keeps the largest workspace it has grown (1.5 times a call's
 * need): one whose request planned more working memory than this is freed
 * when the request ends, not kept, so a burst of large requests leaves no
 * gigabytes behind in the pool or in the HTTP threads' own contexts. The
 * next such request builds its workspace again, a small part of its time. */
#define KEEP_BYTES ((size_t)256 << 20)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static attn_ctx *free_ctx[POOL_MAX];
static int n_free;

/* Each thread's one-thread context for small computations: what the
 * library would build and free per call (a calloc and a scratch block),
 * kept instead. Freed when its thread exits. */
static pthread_key_t small_key;
static pthread_once_t small_once = PTHREAD_ONCE_INIT;
static int small_ok;

static void small_free(void *p) { attn_ctx_free(p); }

static void small_init(void) { small_ok = pthread_key_create(&small_key, small_free) == 0; }

static attn_ctx *small_ctx(void)
{
    pthread_once(&small_once, small_init);
    if (!small_ok)
        return NULL;
    attn_ctx *c = pthread_getspecific(small_key);
    if (!c && (c = attn_ctx_new(1)) && pthread_setspecific(small_key, c) != 0) {
        attn_ctx_free(c);
        c = NULL;
    }
    return c; /* NULL: the library's own one-thread path */
}

#define WATCH_FD_EVERY_MS 1.0 /* how often a watch polls its socket */

static _Thread_local srv_watch *watch;

void srv_watch_init(srv_watch *w, int fd)
{
    w->fd = fd;
    w->deadline_ms = 0.0;
    atomic_init(&w->fd_due_ms, srv_now_ms() + WATCH_FD_EVERY_MS);
}

srv_watch *srv_watch_use(srv_watch *w)
{
    srv_watch *prev = watch;
    watch = w;
    return prev;
}

/* Whether the peer has shut the connection on fd (a close or a reset: a
 * client that half-closes after its request counts as gone, as nginx
 * counts it). */
static int client_gone(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

int srv_watch_client_gone(void)
{
    return watch && watch->fd >= 0 && client_gone(watch->fd);
}

/* The interrupt of a context lent under a watch (attn_ctx_set_interrupt):
 * a clock read a call, the socket's poll() once a millisecond at most. */
static attn_status watch_poll(void *arg)
{
    srv_watch *w = arg;
    double now = srv_now_ms();
    if (w->deadline_ms > 0 && now >= w->deadline_ms)
        return ATTN_ERR_TIMEOUT;
    if (w->fd < 0 || now < atomic_load_explicit(&w->fd_due_ms, memory_order_relaxed))
        return ATTN_OK;
    atomic_store_explicit(&w->fd_due_ms, now + WATCH_FD_EVERY_MS, memory_order_relaxed);
    return client_gone(w->fd) ? ATTN_ERR_CANCELLED : ATTN_OK;
}

/* Sets what stops c's calls: the thread's watch, its deadline starting at
 * the request's first computation, or else a limit a call. */
static void stop_by_watch(attn_ctx *c)
{
    if (!watch) {
        attn_ctx_set_time_limit(c, srv_cfg.compute_timeout); /* NULL: a no-op */
        attn_ctx_set_interrupt(c, NULL, NULL);
        return;
    }
    if (!watch->deadline_ms && srv_cfg.compute_timeout)
        watch->deadline_ms = srv_now_ms() + 1000.0 * srv_cfg.compute_timeout;
    attn_ctx_set_time_limit(c, 0.0);
    attn_ctx_set_interrupt(c, watch_poll, watch);
}

attn_ctx *srv_ctx_acquire(double flops)
{
    attn_ctx *c = NULL;
    if (flops < SMALL_FLOPS) {
        c = small_ctx();
    } else {
        pthread_mutex_lock(&mu);
        if (n_free > 0)
            c = free_ctx[--n_free];
        pthread_mutex_unlock(&mu);
        if (!c)
            c = attn_ctx_new(srv_cfg.compute_threads);
    }
    stop_by_watch(c);
    return c;
}

void srv_ctx_release(attn_ctx *ctx, size_t scratch)
{
    attn_ctx_set_interrupt(ctx, NULL, NULL); /* its watch ends with the request */
    int own = ctx && small_ok && ctx == pthread_getspecific(small_key);
    if (ctx && scratch > KEEP_BYTES) {
        if (own)
            pthread_setspecific(small_key, NULL);
        attn_ctx_free(ctx);
        return;
    }
    if (!ctx || own)
        return; /* none, or the thread's own: it stays with the thread */
    pthread_mutex_lock(&mu);
    if (n_free < POOL_MAX) {
        free_ctx[n_free++] = ctx;
        ctx = NULL;
    }
    pthread_mutex_unlock(&mu);
    if (ctx) /* the pool is full */
        attn_ctx_free(ctx);
}

void srv_ctx_shutdown(void)
{
    pthread_mutex_lock(&mu);
    while (n_free > 0)
        attn_ctx_free(free_ctx[--n_free]);
    pthread_mutex_unlock(&mu);
}
