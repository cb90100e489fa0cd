/* bench_models.c - milliseconds per translation of the C models (one thread), for bench/translate_bench.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mdl.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void sort(double *t, int n)
{
    for (int a = 1; a < n; a++) /* insertion sort: n is small */
        for (int b = a; b > 0 && t[b] < t[b - 1]; b--) {
            double x = t[b];
            t[b] = t[b - 1];
            t[b - 1] = x;
        }
}

/* usage: bench_models WEIGHTS_DIR TOKENIZER "text" REPS [model...]
 * prints: model beam n_src n_out best_ms median_ms best_cpu_ms median_cpu_ms
 * (wall and this thread's CPU time; on a loaded machine the CPU time is the
 * fair figure). MDL_RECOMPUTE=1: the Transformer decoder without KV cache. */
int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: bench_models WEIGHTS_DIR TOKENIZER TEXT REPS [MODEL...]\n");
        return 2;
    }
    char err[MDL_ERR_LEN];
    mdl_tok *tok = mdl_tok_load(argv[2], err, sizeof err);
    if (!tok) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int reps = atoi(argv[4]);
    reps = reps < 1 ? 1 : reps > 1000 ? 1000 : reps;
    static const char *all[] = {"transformer", "concat", "additive", "general"};
    int nm = argc > 5 ? argc - 5 : 4;
    attn_ctx *ctx = attn_ctx_new(1);
    for (int i = 0; i < nm; i++) {
        const char *name = argc > 5 ? argv[5 + i] : all[i];
        mdl_model *m = mdl_load(argv[1], name, tok, err, sizeof err);
        if (!m) {
            fprintf(stderr, "%s\n", err);
            continue;
        }
        int32_t ids[600];
        int64_t n = mdl_tok_encode(tok, argv[3], strlen(argv[3]), ids, mdl_model_info(m)->max_src - 1);
        if (n < 1 || n > mdl_model_info(m)->max_src - 1) {
            fprintf(stderr, "bad text for %s\n", name);
            mdl_free(m);
            continue;
        }
        ids[n] = MDL_EOS;
        for (int beam = 1; beam <= 4; beam += 3) {
            double t[1000], c[1000];
            mdl_opts o = {.beam = beam, .want_attention = 1, .recompute = getenv("MDL_RECOMPUTE") != NULL};
            mdl_result r;
            int n_out = 0;
            for (int k = 0; k < reps; k++) {
                double t0 = now_ms(), c0 = cpu_ms();
                if (mdl_translate(m, ctx, ids, (int)n + 1, &o, &r, err, sizeof err) != 0) {
                    fprintf(stderr, "%s\n", err);
                    return 1;
                }
                t[k] = now_ms() - t0;
                c[k] = cpu_ms() - c0;
                n_out = r.n_out;
                mdl_result_free(&r);
            }
            sort(t, reps);
            sort(c, reps);
            printf("%s %d %d %d %.3f %.3f %.3f %.3f\n", name, beam, (int)n + 1, n_out, t[0], t[reps / 2], c[0],
                   c[reps / 2]);
        }
        mdl_free(m);
    }
    attn_ctx_free(ctx);
    mdl_tok_free(tok);
    return 0;
}
