/* ctx.c - the per-worker context: a grow-only scratch arena and a thread
 * budget. */
#include <math.h>
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

double attn_ws_bytes(double n, size_t each)
{
    return ceil(n * (double)each / 64.0) * 64.0;
}

/* 2^52: every sum of pieces below it is exact in double, and fits size_t
 * on 64-bit targets. */
#define WS_MAX 4503599627370496.0

attn_status attn_ws_get(attn_ctx *ctx, double bytes, char **at, attn_error *err)
{
    if (!(bytes <= WS_MAX) || bytes > (double)(SIZE_MAX / 2))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "", "the request is too large");
    *at = attn_ctx_scratch(ctx, (size_t)bytes);
    if (!*at)
        return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for %.0f bytes of scratch",
                         bytes);
    return ATTN_OK;
}

void *attn_ws_take(char **at, int64_t n, size_t each)
{
    void *p = *at;
    *at += (((size_t)n * each) + 63) & ~(size_t)63;
    return p;
}

attn_ctx *attn_ctx_for_call(attn_ctx *ctx, attn_ctx **own)
{
    *own = NULL;
    if (ctx)
        return ctx;
    *own = attn_ctx_new(1);
    return *own;
}
