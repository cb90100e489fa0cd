/* lib_example.c - the README's library example, whole: causal scaled-dot
 * attention of 4 queries over 6 keys, printed as the output and weights. */
#include <stdio.h>
#include <stdlib.h>

#include "attn.h"

int main(void)
{
    float q[4 * 8], k[6 * 8], v[6 * 3];
    for (int i = 0; i < 4 * 8; i++) q[i] = (float)((i * 7) % 11) / 10.0f - 0.5f;
    for (int i = 0; i < 6 * 8; i++) k[i] = (float)((i * 5) % 13) / 10.0f - 0.6f;
    for (int i = 0; i < 6 * 3; i++) v[i] = (float)i / 10.0f;

    attn_request req = attn_request_default(ATTN_RULE_SCALED_DOT);
    req.query = (attn_tensor){2, {4, 8}, q}; /* (Lq, Dq), borrowed */
    req.key = (attn_tensor){2, {6, 8}, k};   /* (Lk, Dk) */
    req.value = (attn_tensor){2, {6, 3}, v}; /* (Lk, Dv) */
    req.opt.causal = 1;

    attn_shapes sh;
    attn_error err;
    if (attn_plan(&req, &sh, &err) != ATTN_OK) {
        fprintf(stderr, "%s: %s\n", err.field, err.message);
        return 1;
    }
    float *out = malloc((size_t)sh.out_count * sizeof *out); /* (4, 3) */
    float *w = malloc((size_t)sh.w_count * sizeof *w);       /* (4, 6) */
    attn_ctx *ctx = attn_ctx_new(0); /* one per worker thread; 0 = all cores */
    attn_status st = ctx ? attn_compute(ctx, &req, out, w, &err) : ATTN_ERR_NOMEM;
    if (st != ATTN_OK) {
        fprintf(stderr, "%s: %s\n", attn_status_str(st), err.message);
        return 1;
    }
    for (int i = 0; i < 4; i++)
        printf("output[%d] = %.6f %.6f %.6f\n", i, out[i * 3], out[i * 3 + 1], out[i * 3 + 2]);
    for (int i = 0; i < 4; i++) {
        printf("weights[%d] =", i);
        for (int j = 0; j < 6; j++)
            printf(" %.6f", w[i * 6 + j]);
        printf("\n");
    }
    attn_ctx_free(ctx);
    free(out);
    free(w);
    return 0;
}
