/* pool.c - compute contexts (scratch memory and a thread budget) kept
 * across requests, so large requests reuse their threads and scratch
 * instead of building them per call. */
#include "srv.h"

#include <pthread.h>

#define POOL_MAX 64
#define SMALL_FLOPS 4e6 /* below this a single thread beats any fan-out */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static attn_ctx *free_ctx[POOL_MAX];
static int n_free;

attn_ctx *srv_ctx_acquire(double flops)
{
    if (flops < SMALL_FLOPS)
        return NULL; /* the library's one-thread path with private scratch */
    attn_ctx *c = NULL;
    pthread_mutex_lock(&mu);
    if (n_free > 0)
        c = free_ctx[--n_free];
    pthread_mutex_unlock(&mu);
    if (!c)
        c = attn_ctx_new(srv_cfg.compute_threads);
    return c;
}

void srv_ctx_release(attn_ctx *ctx)
{
    if (!ctx)
        return;
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
