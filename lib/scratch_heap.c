/* scratch_heap.c - the kernels' entry points with their scratch from the
 * heap, for callers that hold no workspace yet (attention.c, multihead.c):
 * one allocation a call, as the kernels made themselves before they took
 * scratch from their caller. Meant to go once the context's workspace
 * holds the kernels' scratch. */
#include <stdlib.h>
#include "internal.h"

/* bytes rounded up to whole cache lines, 64-byte aligned; NULL for none. */
static void *heap_scratch(size_t bytes)
{
    if (bytes == 0 || bytes > SIZE_MAX - 63)
        return NULL;
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

void attn_gemm_nt_heap(int64_t m, int64_t n, int64_t k,
                       const float *a, int64_t lda,
                       const float *b, int64_t ldb,
                       const float *bias,
                       float *c, int64_t ldc, int threads)
{
    /* without memory for packing, the unpacked path runs (scratch NULL) */
    void *s = heap_scratch(attn_gemm_scratch_bytes(m, n, k, threads));
    attn_gemm_nt(m, n, k, a, lda, b, ldb, bias, c, ldc, threads, s);
    free(s);
}

int attn_sdpa_run_heap(const attn_sdpa_job *jobs, size_t n, int threads)
{
    if (n == 0)
        return 0;
    void *s = heap_scratch(attn_sdpa_scratch_bytes(jobs, n, threads));
    if (!s)
        return -1;
    attn_sdpa_run(jobs, n, threads, s);
    free(s);
    return 0;
}

attn_status attn_rows_run_heap(const attn_row_job *jobs, size_t n, int threads,
                               attn_error *err)
{
    size_t bytes = attn_rows_scratch_bytes(jobs, n, threads);
    if (bytes == SIZE_MAX)
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "", "the request is too large");
    void *s = heap_scratch(bytes);
    if (!s && bytes > 0)
        return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for scratch space");
    attn_status st = attn_rows_run(jobs, n, threads, s, err);
    free(s);
    return st;
}
