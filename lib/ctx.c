/* ctx.c - the context: a thread pool of its own and a grow-only, 64-byte
 * aligned workspace in three regions, the call's pieces (planned exactly
 * before the call, see exec.c), the kernels' scratch (taken by each
 * kernel in turn) and the rotary table (kept between calls, rope.c). All
 * only grow, so once a context has run a shape, the same shape again
 * allocates nothing. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include "internal.h"
#include "pool.h"

/* attn_max_threads' value; 0 until it is first asked or set. */
static _Atomic int max_threads;

int attn_max_threads(void)
{
    int n = atomic_load(&max_threads), none = 0;
    if (n > 0)
        return n;
    atomic_compare_exchange_strong(&max_threads, &none, attn_cpu_count());
    return atomic_load(&max_threads);
}

void attn_set_max_threads(int n)
{
    atomic_store(&max_threads, n < 1 ? attn_cpu_count() : n > 1024 ? 1024 : n);
}

attn_ctx *attn_ctx_new(int threads)
{
    attn_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->threads = threads > 0 ? threads : attn_max_threads();
    if (ctx->threads < 1)
        ctx->threads = 1;
    if (ctx->threads > 1 && !(ctx->pool = attn_pool_new(ctx->threads))) {
        free(ctx);
        return NULL;
    }
    return ctx;
}

void attn_ctx_set_time_limit(attn_ctx *ctx, double seconds)
{
    if (ctx)
        ctx->time_limit_ns = !(seconds > 0.0) ? 0
                           : seconds >= 1e9 ? (int64_t)1e18 : (int64_t)(seconds * 1e9 + 0.5);
}

void attn_ctx_set_interrupt(attn_ctx *ctx, attn_interrupt_fn fn, void *arg)
{
    if (ctx) {
        ctx->interrupt = fn;
        ctx->interrupt_arg = fn ? arg : NULL;
    }
}

void attn_ctx_free(attn_ctx *ctx)
{
    if (!ctx)
        return;
    attn_pool_free(ctx->pool);
    for (int r = 0; r < ATTN_REGIONS; r++)
        free(ctx->region[r].mem);
    free(ctx);
}

void *attn_ctx_region(attn_ctx *ctx, int r, size_t bytes)
{
    attn_region *g = &ctx->region[r];
    if (bytes > g->peak)
        g->peak = bytes;
    if (bytes == 0)
        bytes = 64;
    if (bytes > g->cap) {
        /* Grow by half again so a slowly growing workload does not
         * reallocate every call. */
        size_t want = bytes + bytes / 2;
        if (want < bytes)
            want = bytes;
        want = (want + 63) & ~(size_t)63;
        if (want < bytes)
            return NULL;
        void *p = NULL;
        if (posix_memalign(&p, 64, want) != 0)
            return NULL;
        free(g->mem);
        g->mem = p;
        g->cap = want;
        if (r == ATTN_WS_ROPE)
            ctx->rope.valid = 0; /* the table did not move with it */
    }
    return g->mem;
}

attn_ctx *attn_ctx_for_call(attn_ctx *ctx, attn_ctx **own)
{
    *own = NULL;
    if (ctx)
        return ctx;
    *own = attn_ctx_new(1);
    return *own;
}
