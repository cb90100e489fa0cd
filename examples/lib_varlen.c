/* lib_varlen.c - packed sequences with the library, as FlashAttention's
 * flash_attn_varlen_func takes them: three sequences of 3, 1 and 5 query
 * rows over 4, 2 and 5 keys, 4 query heads sharing 2 key/value heads
 * (GQA) of 8 features, packed without padding into (total, heads, 8);
 * causal aligned bottom-right (FlashAttention's causal). Prints each
 * query row's output per head, then each head's row log-sum-exp. */
#include <stdio.h>

#include "attn.h"

enum { H = 4, HKV = 2, D = 8, B = 3, TQ = 9, TK = 11 };

/* A deterministic input: (rows, heads, D) values from a formula. */
static void fill(float *x, int rows, int heads, int salt)
{
    for (int i = 0; i < rows * heads * D; i++)
        x[i] = (float)(((i * 17 + salt * 7) % 23) - 11) / 10.0f;
}

int main(void)
{
    static float q[TQ * H * D], k[TK * HKV * D], v[TK * HKV * D], out[TQ * H * D], lse[H * TQ];
    static const int64_t cu_q[B + 1] = {0, 3, 4, 9}, cu_k[B + 1] = {0, 4, 6, 11};
    fill(q, TQ, H, 1);
    fill(k, TK, HKV, 2);
    fill(v, TK, HKV, 3);
    attn_varlen_request req = attn_varlen_request_default(ATTN_RULE_SCALED_DOT);
    req.req.query = (attn_tensor){3, {TQ, H, D}, q};   /* (total_q, H, D) */
    req.req.key = (attn_tensor){3, {TK, HKV, D}, k};   /* (total_k, Hkv, D) */
    req.req.value = (attn_tensor){3, {TK, HKV, D}, v};
    req.batch = B;
    req.cu_seqlens_q = cu_q;
    req.cu_seqlens_k = cu_k;
    req.req.opt.causal = 1;
    req.req.opt.align = ATTN_ALIGN_BOTTOM_RIGHT;
    req.req.opt.need_weights = 0;
    attn_error err;
    attn_ctx *ctx = attn_ctx_new(0);
    if (!ctx || attn_varlen_compute(ctx, &req, out, NULL, lse, &err) != ATTN_OK) {
        fprintf(stderr, "lib_varlen: %s\n", ctx ? err.message : "out of memory");
        attn_ctx_free(ctx);
        return 1;
    }
    for (int i = 0; i < TQ * H * D; i += D) { /* output (total_q, H, D) */
        printf("row %d head %d =", i / (H * D), i / D % H);
        for (int c = 0; c < D; c++)
            printf(" %.6f", out[i + c]);
        printf("\n");
    }
    for (int h = 0; h < H; h++) { /* lse (H, total_q) */
        printf("lse head %d =", h);
        for (int r = 0; r < TQ; r++)
            printf(" %.6f", lse[h * TQ + r]);
        printf("\n");
    }
    attn_ctx_free(ctx);
    return 0;
}
