/* modern.c - what the score pipeline's options cost on the dense core:
 * scaled_dot over 8 heads (batch 8) of head dim 64 (E = 512), L x L
 * without weights, plain and with softcap, ALiBi, rope, sinks, each alone
 * and all together; then a decode row (Lq = 1 against Lk keys,
 * bottom-right causal) plain and with every option. Times are CPU seconds
 * of the process (the machine is shared), best of N, on one thread.
 * Last, packed sequences of their own lengths (attn_varlen_compute)
 * against the same sequences padded to the longest with a key_mask.
 *
 * Usage: bench_modern [L] [Lk_decode] [rounds]   (default 2048 4096 5) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"
#include "bench_util.h"

#define HEADS 8
#define HD 64

static float *noise(size_t n, uint64_t seed)
{
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "bench_modern: out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((attn_splitmix64(&seed) >> 40) * 0x1p-24 * 2.0 - 1.0);
    return x;
}

enum { OPT_SOFTCAP = 1, OPT_ALIBI = 2, OPT_ROPE = 4, OPT_SINKS = 8, OPT_ALL = 15 };

static const float sinks[HEADS] = {0.5f, -1.0f, 0.0f, 2.0f, 1.0f, -0.5f, 0.25f, 3.0f};

/* CPU seconds of one scaled_dot call over (HEADS, lq, HD) queries and
 * (HEADS, lk, HD) keys with the options in `opts`. */
static double run(attn_ctx *ctx, int64_t lq, int64_t lk, int opts, int decode,
                  const float *q, const float *k, const float *v, float *o)
{
    attn_request r = attn_request_default(ATTN_RULE_SCALED_DOT);
    r.query = (attn_tensor){3, {HEADS, lq, HD, 0}, q};
    r.key = (attn_tensor){3, {HEADS, lk, HD, 0}, k};
    r.value = (attn_tensor){3, {HEADS, lk, HD, 0}, v};
    r.opt.need_weights = 0;
    if (decode) {
        r.opt.align = ATTN_ALIGN_BOTTOM_RIGHT;
        r.opt.causal = 1;
    }
    r.opt.softcap = opts & OPT_SOFTCAP ? 30.0f : 0.0f;
    r.opt.alibi = (opts & OPT_ALIBI) != 0;
    r.opt.rope.on = (opts & OPT_ROPE) != 0;
    /* the rules have one head: the batch rows share the sink */
    r.opt.sinks = opts & OPT_SINKS ? sinks : NULL;
    r.opt.n_sinks = opts & OPT_SINKS ? 1 : 0;
    attn_error err;
    double t0 = bench_cpu_now();
    if (attn_compute(ctx, &r, o, NULL, &err) != ATTN_OK) {
        fprintf(stderr, "bench_modern: %s: %s\n", err.field, err.message);
        exit(2);
    }
    return bench_cpu_now() - t0;
}

static const struct { const char *name; int opts; } rows[] = {
    {"plain", 0}, {"softcap", OPT_SOFTCAP}, {"alibi", OPT_ALIBI}, {"rope", OPT_ROPE},
    {"sinks", OPT_SINKS}, {"all four", OPT_ALL},
};
#define NROWS (sizeof rows / sizeof *rows)

/* Best of `rounds` rounds, each running every row once in turn (so a
 * change in the machine's load reaches every row alike). */
static void table(attn_ctx *ctx, int64_t lq, int64_t lk, int decode, int rounds,
                  const float *q, const float *k, const float *v, float *o)
{
    double best[NROWS];
    for (size_t i = 0; i < NROWS; i++) { /* a first call sizes the workspace */
        run(ctx, lq, lk, rows[i].opts, decode, q, k, v, o);
        best[i] = 1e30;
    }
    for (int t = 0; t < rounds; t++)
        for (size_t i = 0; i < NROWS; i++) {
            double dt = run(ctx, lq, lk, rows[i].opts, decode, q, k, v, o);
            if (dt < best[i])
                best[i] = dt;
        }
    for (size_t i = 0; i < NROWS; i++)
        printf("  %-9s %10.1f us  %+6.1f%%\n", rows[i].name, best[i] * 1e6,
               100.0 * (best[i] / best[0] - 1.0));
}

/* Sequence lengths: n of them from 16 to longest, drawn from seed. */
static int64_t lengths(int64_t *cu, int n, int64_t longest, uint64_t seed)
{
    int64_t most = 0;
    cu[0] = 0;
    for (int i = 0; i < n; i++) {
        int64_t l = 16 + (int64_t)(attn_splitmix64(&seed) % (uint64_t)(longest - 15));
        cu[i + 1] = cu[i] + l;
        most = l > most ? l : most;
    }
    return most;
}

/* CPU seconds of one call: packed (vr), or padded (pr). */
static double call(attn_ctx *ctx, const attn_varlen_request *vr, const attn_request *pr, float *o)
{
    attn_error err;
    double t0 = bench_cpu_now();
    attn_status st = vr ? attn_varlen_compute(ctx, vr, o, NULL, NULL, &err)
                        : attn_compute(ctx, pr, o, NULL, &err);
    if (st != ATTN_OK) {
        fprintf(stderr, "bench_modern: %s: %s\n", err.field, err.message);
        exit(2);
    }
    return bench_cpu_now() - t0;
}

/* n self-attention sequences of 16 to longest rows, HEADS heads of HD:
 * packed (total, HEADS, HD) against padded (n, HEADS, most, HD) with a
 * key_mask, causal or not; best of `rounds` in turns, and the rate of the
 * products the sequences need (4 L^2 HD a head, half with causal). */
static void packed_row(attn_ctx *ctx, int n, int64_t longest, int causal, int rounds)
{
    int64_t cu[65];
    int64_t most = lengths(cu, n, longest, 11), T = cu[n];
    float *q = noise((size_t)(T * HEADS * HD), 5), *o = noise((size_t)(n * most * HEADS * HD), 6);
    float *pq = calloc((size_t)(n * most * HEADS * HD), sizeof(float));
    uint8_t *km = calloc((size_t)(n * most), 1);
    if (!pq || !km) {
        fprintf(stderr, "bench_modern: out of memory\n");
        exit(2);
    }
    double flops = 0.0;
    for (int b = 0; b < n; b++) {
        int64_t l = cu[b + 1] - cu[b];
        flops += 4.0 * (double)(l * l) * HD * HEADS * (causal ? 0.5 : 1.0);
        for (int64_t r = 0; r < l; r++) {
            km[b * most + r] = 1;
            for (int h = 0; h < HEADS; h++)
                memcpy(pq + ((b * HEADS + h) * most + r) * HD, q + ((cu[b] + r) * HEADS + h) * HD,
                       HD * sizeof(float));
        }
    }
    attn_varlen_request vr = attn_varlen_request_default(ATTN_RULE_SCALED_DOT);
    vr.req.query = vr.req.key = vr.req.value = (attn_tensor){3, {T, HEADS, HD, 0}, q};
    vr.req.opt.need_weights = 0;
    vr.req.opt.causal = causal;
    vr.batch = n;
    vr.cu_seqlens_q = cu;
    attn_request pr = attn_request_default(ATTN_RULE_SCALED_DOT);
    pr.query = pr.key = pr.value = (attn_tensor){4, {n, HEADS, most, HD}, pq};
    pr.opt = vr.req.opt;
    pr.opt.key_mask = (attn_mask){2, {n, most, 0, 0}, km};
    double best[2] = {1e30, 1e30};
    for (int t = 0; t <= rounds; t++) /* the first round sizes the workspace */
        for (int k = 0; k < 2; k++) {
            double dt = call(ctx, k ? NULL : &vr, &pr, o);
            if (t && dt < best[k])
                best[k] = dt;
        }
    printf("  %2d sequences of 16-%lld rows (%lld in all, longest %lld)%s: packed %8.2f ms "
           "(%5.1f GFLOP/s), padded with key_mask %8.2f ms (%5.1f), %.2fx\n",
           n, (long long)longest, (long long)T, (long long)most, causal ? ", causal" : "",
           best[0] * 1e3, flops / best[0] * 1e-9, best[1] * 1e3, flops / best[1] * 1e-9,
           best[1] / best[0]);
    free(q); free(o); free(pq); free(km);
}

int main(int argc, char **argv)
{
    int64_t L = argc > 1 ? atoll(argv[1]) : 2048, LK = argc > 2 ? atoll(argv[2]) : 4096;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    int64_t n = (L > LK ? L : LK) * HEADS * HD;
    float *q = noise((size_t)n, 1), *k = noise((size_t)n, 2), *v = noise((size_t)n, 3);
    float *o = noise((size_t)n, 4);
    attn_ctx *ctx = attn_ctx_new(1);
    printf("dense core: scaled_dot, %d heads x %lld x %d, no weights, 1 thread, best of %d "
           "(CPU time)\n", HEADS, (long long)L, HD, rounds);
    table(ctx, L, L, 0, rounds, q, k, v, o);
    printf("decode row: Lq = 1, Lk = %lld, %d heads, bottom_right causal, best of %d\n",
           (long long)LK, HEADS, rounds * 20);
    table(ctx, 1, LK, 1, rounds * 20, q, k, v, o);
    printf("packed sequences (cu_seqlens) against the same padded to the longest with a "
           "key_mask: %d heads of %d, self-attention, no weights, 1 thread, best of %d "
           "(CPU time)\n", HEADS, HD, rounds);
    packed_row(ctx, 16, 1024, 0, rounds);
    packed_row(ctx, 64, 256, 1, rounds);
    attn_ctx_free(ctx);
    free(q); free(k); free(v); free(o);
    return 0;
}
