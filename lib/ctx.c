/* ctx.c - the per-worker context: a grow-only scratch arena and a thread
 * budget. */
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

attn_ctx *attn_ctx_for_call(attn_ctx *ctx, attn_ctx **own)
{
    *own = NULL;
    if (ctx)
        return ctx;
    *own = attn_ctx_new(1);
    return *own;
}
