/* modern.c - what the score pipeline's options cost on the dense core:
 * scaled_dot over 8 heads (batch 8) of head dim 64 (E = 512), L x L
 * without weights, plain and with softcap, ALiBi, rope, sinks, each alone
 * and all together; then a decode row (Lq = 1 against Lk keys,
 * bottom-right causal) plain and with every option. Times are CPU seconds
 * of the process (the machine is shared), best of N, on one thread.
 *
 * Usage: bench_modern [L] [Lk_decode] [repeats]   (default 2048 4096 5) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"

#define HEADS 8
#define HD 64

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

/* Best CPU time of `repeats` calls of scaled_dot over (HEADS, lq, HD)
 * queries and (HEADS, lk, HD) keys with the options in `opts`. */
static double run(attn_ctx *ctx, int64_t lq, int64_t lk, int opts, int decode, int repeats,
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
    double best = 1e30;
    attn_error err;
    for (int t = 0; t <= repeats; t++) { /* the first call sizes the workspace */
        double t0 = cpu_now();
        if (attn_compute(ctx, &r, o, NULL, &err) != ATTN_OK) {
            fprintf(stderr, "bench_modern: %s: %s\n", err.field, err.message);
            exit(2);
        }
        double dt = cpu_now() - t0;
        if (t > 0 && dt < best)
            best = dt;
    }
    return best;
}

int main(int argc, char **argv)
{
    int64_t L = argc > 1 ? atoll(argv[1]) : 2048, LK = argc > 2 ? atoll(argv[2]) : 4096;
    int repeats = argc > 3 ? atoi(argv[3]) : 5;
    int64_t n = (L > LK ? L : LK) * HEADS * HD;
    float *q = noise((size_t)n, 1), *k = noise((size_t)n, 2), *v = noise((size_t)n, 3);
    float *o = noise((size_t)n, 4);
    attn_ctx *ctx = attn_ctx_new(1);
    static const struct { const char *name; int opts; } rows[] = {
        {"plain", 0}, {"softcap", OPT_SOFTCAP}, {"alibi", OPT_ALIBI}, {"rope", OPT_ROPE},
        {"sinks", OPT_SINKS}, {"all four", OPT_ALL},
    };
    printf("dense core: scaled_dot, %d heads x %lld x %d, no weights, 1 thread, best of %d "
           "(CPU s)\n", HEADS, (long long)L, HD, repeats);
    double base = 0.0;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        double t = run(ctx, L, L, rows[i].opts, 0, repeats, q, k, v, o);
        if (i == 0)
            base = t;
        printf("  %-9s %8.4f s  %+6.1f%%\n", rows[i].name, t, 100.0 * (t / base - 1.0));
    }
    printf("decode row: Lq = 1, Lk = %lld, %d heads, bottom_right causal, best of %d x 20 "
           "calls\n", (long long)LK, HEADS, repeats);
    double plain = run(ctx, 1, LK, 0, 1, repeats * 20, q, k, v, o);
    double all = run(ctx, 1, LK, OPT_ALL, 1, repeats * 20, q, k, v, o);
    printf("  plain     %8.1f us\n  all four  %8.1f us  %.2fx\n", plain * 1e6, all * 1e6,
           all / plain);
    attn_ctx_free(ctx);
    free(q); free(k); free(v); free(o);
    return 0;
}
