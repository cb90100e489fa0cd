/* cost.c - every path's time beside the library's estimate of it
 * (attn_shapes.flops, lib/cost.c): for each option, scaled_dot over L x L
 * pairs (or the rule named) at head dims 1 and 64, the least CPU time of
 * three runs on every core, and that time in operations at 1e11 a core
 * a second over the estimate. A ratio near or below 1 is what the work
 * cap (ATTN_MAX_WORK) needs: a request's time is then bounded by what it
 * was let through for. Usage: bench_cost [L] (2048). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"

#define RATE 1e11 /* operations a core-second the estimate is counted at */

typedef struct {
    int64_t L, d;
    float *q, *k, *v, *bias;
    uint8_t *mask;
    int64_t *global;
} inputs;

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *uniform(size_t n, unsigned *seed)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++)
        p[i] = (float)rand_r(seed) / (float)RAND_MAX - 0.5f;
    return p;
}

/* Runs r three times after a warm-up; prints the least CPU time against
 * the estimate. */
static void row(attn_ctx *ctx, const char *name, const attn_request *r)
{
    attn_shapes sh;
    attn_error e;
    if (attn_plan(r, &sh, &e) != ATTN_OK) {
        printf("  %-24s refused: %s\n", name, e.message);
        return;
    }
    float *out = malloc((size_t)sh.out_count * sizeof *out);
    float *w = sh.w_count ? malloc((size_t)sh.w_count * sizeof *w) : NULL;
    double best = 1e300;
    for (int i = 0; i < 4 && out && (w || !sh.w_count); i++) {
        double t0 = cpu_seconds();
        if (attn_compute(ctx, r, out, w, &e) != ATTN_OK) {
            printf("  %-24s failed: %s\n", name, e.message);
            break;
        }
        double t = cpu_seconds() - t0;
        if (i && t < best) best = t;
    }
    if (best < 1e300)
        printf("  %-24s estimate %9.3g  cpu %8.2f ms  time / estimate %5.2f\n", name, sh.flops,
               best * 1e3, best * RATE / sh.flops);
    free(out);
    free(w);
}

static attn_request dense(const inputs *in, attn_rule rule)
{
    attn_request r = attn_request_default(rule);
    r.query = (attn_tensor){2, {in->L, in->d}, in->q};
    r.key = (attn_tensor){2, {in->L, in->d}, in->k};
    r.value = (attn_tensor){2, {in->L, in->d}, in->v};
    r.opt.need_weights = 0;
    return r;
}

/* The softmax path's options: weights, bias, masks, softcap, causal. */
static void flash_rows(attn_ctx *ctx, const inputs *in)
{
    int64_t L = in->L;
    attn_request r = dense(in, ATTN_RULE_SCALED_DOT), x;
    row(ctx, "dense", &r);
    x = r, x.opt.causal = 1, row(ctx, "causal", &x);
    x = r, x.opt.need_weights = 1, row(ctx, "weights", &x);
    x = r, x.opt.softcap = 5.0f, row(ctx, "softcap", &x);
    x = r, x.opt.bias = (attn_tensor){2, {L, L}, in->bias}, row(ctx, "bias", &x);
    x = r, x.opt.mask = (attn_mask){2, {L, L}, in->mask}, row(ctx, "mask (3/4 random)", &x);
}

/* Decode-sized queries (3 rows, which go a row at a time) over L keys, in
 * L / 32 batches, with and without the mask. */
static void decode_rows(attn_ctx *ctx, const inputs *in)
{
    int64_t B = in->L / 32, L = in->L, d = in->d;
    unsigned seed = 2;
    float *q = uniform((size_t)(B * 3 * d), &seed), *k = uniform((size_t)(B * L * d), &seed);
    float *v = uniform((size_t)(B * L * d), &seed);
    if (q && k && v) {
        attn_request r = attn_request_default(ATTN_RULE_SCALED_DOT);
        r.query = (attn_tensor){3, {B, 3, d}, q};
        r.key = (attn_tensor){3, {B, L, d}, k};
        r.value = (attn_tensor){3, {B, L, d}, v};
        r.opt.need_weights = 0;
        row(ctx, "3 query rows", &r);
        r.opt.mask = (attn_mask){2, {3, L}, in->mask}, row(ctx, "3 query rows, mask", &r);
    }
    free(q), free(k), free(v);
}

/* Hard attention on the row path. */
static void hard_rows(attn_ctx *ctx, const inputs *in)
{
    attn_request r = dense(in, ATTN_RULE_SCALED_DOT), x;
    x = r, x.opt.hard = ATTN_HARD_ARGMAX, row(ctx, "argmax", &x);
    x.opt.softcap = 5.0f, row(ctx, "argmax, softcap", &x);
    x = r, x.opt.hard = ATTN_HARD_TOPK, x.opt.top_k = 8, row(ctx, "top_k 8", &x);
    x.opt.top_k = in->L / 2, row(ctx, "top_k L/2", &x);
    x = r, x.opt.hard = ATTN_HARD_SAMPLE, x.opt.temperature = 1.0f, row(ctx, "sample", &x);
}

/* Sparsity patterns, with and without hard attention. */
static void sparse_rows(attn_ctx *ctx, const inputs *in)
{
    attn_request r = dense(in, ATTN_RULE_SCALED_DOT), x = r;
    attn_sparsity *s = &x.opt.sparsity;
    s->pattern = ATTN_SPARSE_LOCAL_GLOBAL;
    s->global = in->global;
    s->window = 16, row(ctx, "window 16", &x);
    x.opt.mask = (attn_mask){2, {in->L, in->L}, in->mask}, row(ctx, "window 16, mask", &x);
    x.opt.mask = r.opt.mask;
    x.opt.hard = ATTN_HARD_TOPK, x.opt.top_k = 1, row(ctx, "window 16, top_k 1", &x);
    x.opt.hard = ATTN_HARD_NONE, s->window = 0, s->n_global = (size_t)(in->L / 2);
    row(ctx, "half global", &x);
    s->n_global = (size_t)(in->L / 128), row(ctx, "1/128 global", &x);
    x = r, s->pattern = ATTN_SPARSE_BIGBIRD, s->window_blocks = 3, s->global_blocks = 2;
    s->random_blocks = 3, s->block = 16, row(ctx, "bigbird block 16", &x);
    x.opt.mask = (attn_mask){2, {in->L, in->L}, in->mask}, row(ctx, "bigbird block 16, mask", &x);
    x.opt.mask = r.opt.mask;
    s->block = 2, row(ctx, "bigbird block 2", &x);
}

/* The other rules (seeded parameters). */
static void rule_rows(attn_ctx *ctx, const inputs *in)
{
    static const attn_rule rules[] = {ATTN_RULE_GENERAL, ATTN_RULE_ADDITIVE,
                                      ATTN_RULE_CONCAT_TANH, ATTN_RULE_CONCAT, ATTN_RULE_LINEAR};
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
        attn_request r = dense(in, rules[i]);
        row(ctx, attn_rule_name(rules[i]), &r);
    }
    attn_request r = dense(in, ATTN_RULE_LINEAR);
    r.opt.causal = 1, row(ctx, "linear, causal", &r);
}

int main(int argc, char **argv)
{
    int64_t L = argc > 1 ? atoll(argv[1]) : 2048;
    if (L < 128 || L > 16384) {
        fprintf(stderr, "usage: bench_cost [L from 128 to 16384]\n");
        return 2;
    }
    attn_ctx *ctx = attn_ctx_new(0);
    unsigned seed = 1;
    inputs in = {.L = L, .bias = uniform((size_t)(L * L), &seed),
                 .mask = malloc((size_t)(L * L)), .global = malloc((size_t)L * sizeof(int64_t))};
    if (!ctx || !in.bias || !in.mask || !in.global)
        return 1;
    for (int64_t i = 0; i < L * L; i++)
        in.mask[i] = rand_r(&seed) % 4 != 0;
    for (int64_t i = 0; i < L; i++)
        in.global[i] = 2 * i % L;
    printf("Each path's least CPU time of 3 runs (all cores) against attn_shapes.flops,\n"
           "counted at %.0e operations a core-second; L = %lld\n", RATE, (long long)L);
    static const int64_t dims[] = {1, 64};
    for (int t = 0; t < 2; t++) {
        in.d = dims[t];
        in.q = uniform((size_t)(L * in.d), &seed);
        in.k = uniform((size_t)(L * in.d), &seed);
        in.v = uniform((size_t)(L * in.d), &seed);
        printf("head dim %lld\n", (long long)in.d);
        flash_rows(ctx, &in);
        decode_rows(ctx, &in);
        hard_rows(ctx, &in);
        sparse_rows(ctx, &in);
        rule_rows(ctx, &in);
        free(in.q), free(in.k), free(in.v);
    }
    attn_ctx_free(ctx);
    free(in.bias), free(in.mask), free(in.global);
    return 0;
}
