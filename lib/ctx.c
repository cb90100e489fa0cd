/* ctx.c - the per-worker context: a grow-only scratch arena, a thread
 * budget, and the small parallel-for the row-by-row paths use. */
#include <pthread.h>
#include <stdlib.h>
#include "internal.h"

attn_ctx *attn_ctx_new(int threads)
{
    attn_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->threads = threads > 0 ? threads : attn_cpu_count();
    if (ctx->threads < 1)
        ctx->threads = 1;
    return ctx;
}

void attn_ctx_free(attn_ctx *ctx)
{
    if (!ctx)
        return;
    free(ctx->arena);
    free(ctx);
}

void *attn_ctx_scratch(attn_ctx *ctx, size_t bytes)
{
    if (bytes == 0)
        bytes = 64;
    if (bytes > ctx->cap) {
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
        free(ctx->arena);
        ctx->arena = p;
        ctx->cap = want;
    }
    return ctx->arena;
}

typedef struct {
    attn_range_fn fn;
    void *arg;
    int tid;
    int64_t begin, end;
} attn_piece;

static void *attn_piece_main(void *p)
{
    attn_piece *pc = p;
    pc->fn(pc->arg, pc->tid, pc->begin, pc->end);
    return NULL;
}

#define ATTN_MAX_THREADS 256

void attn_parallel(int threads, int64_t n, attn_range_fn fn, void *arg)
{
    if (threads > ATTN_MAX_THREADS)
        threads = ATTN_MAX_THREADS;
    if (threads > n)
        threads = (int)n;
    if (threads <= 1) {
        if (n > 0)
            fn(arg, 0, 0, n);
        return;
    }
    attn_piece pieces[ATTN_MAX_THREADS];
    pthread_t tids[ATTN_MAX_THREADS];
    int started[ATTN_MAX_THREADS] = {0};
    for (int t = 0; t < threads; t++) {
        pieces[t].fn = fn;
        pieces[t].arg = arg;
        pieces[t].tid = t;
        pieces[t].begin = n * t / threads;
        pieces[t].end = n * (t + 1) / threads;
    }
    for (int t = 1; t < threads; t++)
        started[t] = pthread_create(&tids[t], NULL, attn_piece_main, &pieces[t]) == 0;
    attn_piece_main(&pieces[0]);
    /* A thread that could not be started has its piece run here, so the
     * result never depends on thread creation succeeding. */
    for (int t = 1; t < threads; t++) {
        if (started[t])
            pthread_join(tids[t], NULL);
        else
            attn_piece_main(&pieces[t]);
    }
}
