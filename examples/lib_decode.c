/* lib_decode.c - decoding with the library's KV cache: 4 query heads
 * sharing 2 KV heads (GQA) of 8 features, a prompt of 5 tokens, then 6
 * steps of one token each; every step appends its key and value rows to
 * an attn_kv_cache and attends over the whole cache (causal, aligned
 * bottom-right, rope), printing each step's output. */
#include <stdio.h>
#include <stdlib.h>

#include "attn.h"

enum { H = 4, HKV = 2, D = 8, PROMPT = 5, STEPS = 6 };

/* Row t of a deterministic input: (rows, heads, D) values from a formula. */
static void fill(float *x, int t, int rows, int heads, int salt)
{
    for (int i = 0; i < rows * heads * D; i++)
        x[i] = (float)(((t * 131 + i * 17 + salt) % 23) - 11) / 10.0f;
}

static int step(attn_ctx *ctx, attn_kv_cache *kv, int t, int T, float *out)
{
    float k[PROMPT * HKV * D], v[PROMPT * HKV * D], q[PROMPT * H * D];
    fill(k, t, T, HKV, 1);
    fill(v, t, T, HKV, 2);
    fill(q, t, T, H, 3);
    attn_tensor kt = {3, {T, HKV, D}, k}, vt = {3, {T, HKV, D}, v};
    attn_error err;
    if (attn_kv_cache_append(kv, &kt, &vt, &err) != ATTN_OK) {
        fprintf(stderr, "append: %s\n", err.message);
        return -1;
    }
    attn_cache_request req = attn_cache_request_default();
    req.query = (attn_tensor){3, {T, H, D}, q}; /* (Tq, H, d): the new rows' queries */
    req.num_heads = H;
    req.num_kv_heads = HKV;
    req.len = attn_kv_cache_len(kv);
    req.key = attn_kv_cache_keys(kv);
    req.value = attn_kv_cache_values(kv);
    req.opt.causal = 1;
    req.opt.align = ATTN_ALIGN_BOTTOM_RIGHT; /* the new rows are the cache's last */
    req.opt.rope.on = 1;                     /* positions 0, 1, ... across steps */
    req.opt.rope.base = 10000.0f;
    req.opt.need_weights = 0;
    if (attn_cache_compute(ctx, &req, out, NULL, &err) != ATTN_OK) {
        fprintf(stderr, "compute: %s\n", err.message);
        return -1;
    }
    return 0;
}

int main(void)
{
    attn_ctx *ctx = attn_ctx_new(1);
    attn_kv_cache *kv = attn_kv_cache_new(HKV, D, PROMPT + STEPS);
    float out[PROMPT * H * D];
    int rc = ctx && kv ? 0 : 1;
    for (int t = 0, T = PROMPT; !rc && t <= STEPS; t++, T = 1) {
        rc = step(ctx, kv, t, T, out);
        for (int i = 0; !rc && i < T * H * D; i += D) { /* each query row of each head */
            printf("step %d row %d head %d =", t, i / (H * D), i / D % H);
            for (int c = 0; c < D; c++)
                printf(" %.6f", out[i + c]);
            printf("\n");
        }
    }
    attn_kv_cache_free(kv);
    attn_ctx_free(ctx);
    return rc;
}
