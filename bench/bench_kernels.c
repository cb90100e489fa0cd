/* bench_kernels.c - times this library through its public calls (attn_compute, attn_mha_compute) and OpenBLAS sgemm on the same flops; prints one JSON object of median seconds for bench/run.py.
 *
 * Rows: the attention core (8 heads of 64 as a batch, scaled_dot, no
 * weights), the same with weights, causal, one decode step (Lq = 1, Lk =
 * 4096), multi-head attention with its projections (attn_mha_compute,
 * parameters seeded as bench/models.py writes them for ONNX Runtime, and
 * prepared once as ONNX Runtime prepares its initializers), the
 * core's two products through OpenBLAS without softmax, one 2048^3 sgemm,
 * and the peak memory of an L = 32768 core (in a child process). One
 * attn_ctx per run, reused across calls as a server's worker would.
 *
 * Usage: bench_kernels [threads [L]]   (default 2 threads; with L, only the
 * core rows and multi-head at that length, for quick checks), or
 * bench_kernels --labels (the ISA and OpenBLAS labels alone), or
 * bench_kernels --long [threads] (the long-sequence rows alone: at L =
 * 32768, 8 heads of 64, no weights, sparse local_global and linear
 * attention, non-causal and causal, against the dense core timed on ONE
 * head (8 heads would take minutes; its time scales with the heads), each
 * with its peak memory growth measured in a child process), or
 * bench_kernels --bf16 [threads] (the core in float32 and in bf16 at L =
 * 1024, 2048, 4096: the least process CPU time of 7 calls each, which a
 * shared machine inflates far less than wall time, and the wall time; and
 * one decode step, Lq = 1, Lk = 4096, least CPU time of 21), or
 * bench_kernels --mha [threads [L]] (multi-head with its projections at
 * L = 128 to 4096, or at L alone: the least process CPU time and the least
 * wall time of 15 calls, 7 from 2048, with prepared weights and with the
 * params given each call, in turns), or
 * bench_kernels --cpu [threads [L]] (core, weights and causal at each L
 * as their least process CPU time over 7 calls, or 21 up to L = 1024,
 * and the two ratios to the core: the figures a shared machine inflates
 * least, where the default rows' wall medians swing with its load), or
 * bench_kernels --decode [threads] (the decode row alone, decode_4096,
 * its keys and values on transparent huge pages as a session's cache is:
 * bench/session_bench.py runs it in turns with the server's session step,
 * so the two are timed at the same moments of a machine whose memory speed
 * moves between minutes; and decode_cold_4096, the same call with 64 MiB
 * read and written between calls, so the keys and values come from memory
 * instead of a cache that back-to-back calls keep them in), or
 * bench_kernels --mha-cross [threads [L]] (multi-head with its projections
 * on three distinct query, key and value tensors at L, default 1024, with
 * prepared weights, median: the call a POST /multihead that sends all
 * three makes; bench/service_bench.py runs it in turns with the route).
 * BENCH_NO_MEMORY=1 skips the memory row. */
#include "attn.h"
#include "bench_util.h"
#include "ours.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define E BENCH_E
#define H BENCH_H
#define DH BENCH_D

/* Labels only, never timed: OpenBLAS's build (the kernels' instruction
 * set and their exponentials come from attn.h). */
char *openblas_get_corename(void);
char *openblas_get_config(void);

static int threads = 2;
static attn_ctx *ctx;

/* ------------------------------------------------------------- core */

typedef struct {
    int64_t lq, lk;
    const float *q, *k, *v; /* (H, L, 64) */
    float *o, *w;
    int causal;
} core_args;

static void core_run(void *arg)
{
    core_args *c = arg;
    ours_core(ctx, c->lq, c->lk, c->q, c->k, c->v, c->o, c->w, c->causal);
}

static void core_bf16_run(void *arg)
{
    core_args *c = arg;
    ours_core_bf16(ctx, c->lq, c->lk, c->q, c->k, c->v, c->o, c->w, c->causal);
}

/* The same flops through OpenBLAS: S = Q K^T, then O = S V, per head (no
 * softmax, so a ceiling rather than an attention). */
static float *blas_s;
static void blas_run(void *arg)
{
    core_args *c = arg;
    size_t hq = (size_t)c->lq * DH, hk = (size_t)c->lk * DH;
    for (int h = 0; h < H; h++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)c->lq, (int)c->lk, DH,
                    0.125f, c->q + h * hq, DH, c->k + h * hk, DH, 0.0f, blas_s, (int)c->lk);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)c->lq, DH, (int)c->lk,
                    1.0f, blas_s, (int)c->lk, c->v + h * hk, DH, 0.0f, c->o + h * hq, DH);
    }
}

static void square_run(void *arg)
{
    float **abc = arg;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2048, 2048, 2048, 1.0f,
                abc[0], 2048, abc[1], 2048, 0.0f, abc[2], 2048);
}

/* ------------------------------------------------------- multi-head */

typedef struct {
    int64_t l;
    const float *x;
    const attn_param_set *ps;
    const attn_mha_weights *pw; /* NULL: the params each call */
    float *out;
    const float *k, *v;         /* NULL: self-attention on x */
} mha_args;

static void mha_run(void *arg)
{
    mha_args *m = arg;
    if (m->pw) ours_mha_prepared(ctx, m->l, m->x, m->k, m->v, m->pw, m->out);
    else ours_mha(ctx, m->l, m->x, m->ps, m->out);
}

/* The mha row: with prepared weights (made once, outside the timing), as
 * ONNX Runtime's session holds its initializers; on x alone
 * (self-attention) or, with k and v, on three distinct inputs. */
static double mha_time(int64_t l, const float *x, const float *k, const float *v, float *out)
{
    attn_param_set *ps = ours_mha_params(l, x);
    attn_mha_weights *pw = ours_mha_prepare(l, x, ps);
    mha_args m = {l, x, ps, pw, out, k, v};
    double t = bench_median(mha_run, &m, bench_reps(l), 3.0);
    attn_mha_weights_free(pw);
    attn_param_set_free(ps);
    return t;
}

/* ------------------------------------------------------------ memory */

/* A "Vm...:" figure of /proc/self/status in KiB, or -1. */
static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0) v = atol(line + n);
    if (f) fclose(f);
    return v;
}

/* Peak RSS growth of one core at L = 32768 without weights, in a child with
 * its peak reset (/proc/self/clear_refs 5) after the inputs, output and
 * context exist: the growth is the library's own scratch memory. */
static void memory_child(int fd)
{
    int64_t l = 32768;
    size_t n = (size_t)l * E;
    core_args c = {l, l, bench_randf(n, 1), bench_randf(n, 2), bench_randf(n, 3), bench_randf(n, 4), NULL, 0};
    long before = status_kib("VmRSS:");
    FILE *f = fopen("/proc/self/clear_refs", "w");
    int reset = f && fputs("5", f) >= 0;
    if (f && fclose(f) != 0) reset = 0;
    double t0 = bench_now();
    core_run(&c);
    double res[2] = {(double)(status_kib("VmHWM:") - before) / 1024.0, bench_now() - t0};
    if (!reset || before < 0) res[0] = -1;
    if (write(fd, res, sizeof res) != (ssize_t)sizeof res) _exit(1);
    _exit(0);
}

static void memory_row(void)
{
    int fd[2];
    if (pipe(fd) != 0) return;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        memory_child(fd[1]);
    }
    close(fd[1]);
    double res[2];
    ssize_t got = read(fd[0], res, sizeof res);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    if (got != (ssize_t)sizeof res) return;
    if (res[0] >= 0) bench_emit("mem_32768_mib", res[0]);
    else bench_emit_str("mem_32768_skip", "no /proc/self/clear_refs to reset the peak RSS");
    bench_emit("mem_32768_s", res[1]);
}

/* ------------------------------------------------------- long rows */

#define LONG_L 32768

typedef struct {
    ours_kind kind;
    int64_t heads;
    int causal;
    const float *q, *k, *v;
    float *o;
} long_args;

static void long_run(void *arg)
{
    long_args *a = arg;
    ours_long(ctx, a->kind, a->heads, LONG_L, a->q, a->k, a->v, a->o, a->causal);
}

/* Peak RSS growth of one run of a in a child (as memory_child: inputs and
 * output made first, then the peak reset), in MiB, or -1. */
static double long_memory(long_args a)
{
    int fd[2];
    double mib = -1;
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        size_t n = (size_t)a.heads * LONG_L * DH;
        a.q = bench_randf(n, 1); a.k = bench_randf(n, 2); a.v = bench_randf(n, 3);
        a.o = bench_randf(n, 4);
        attn_ctx_free(ctx);
        ctx = attn_ctx_new(threads);
        long before = status_kib("VmRSS:");
        FILE *f = fopen("/proc/self/clear_refs", "w");
        int reset = f && fputs("5", f) >= 0;
        if (f && fclose(f) != 0) reset = 0;
        long_run(&a);
        mib = reset && before >= 0 ? (double)(status_kib("VmHWM:") - before) / 1024.0 : -1;
        if (write(fd[1], &mib, sizeof mib) != (ssize_t)sizeof mib) _exit(1);
        _exit(0);
    }
    close(fd[1]);
    if (read(fd[0], &mib, sizeof mib) != (ssize_t)sizeof mib) mib = -1;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return mib;
}

/* Each long row's median time (long_<row>_s), the CPU time of one more
 * run over all threads (long_<row>_cpu_s: on a machine shared with other
 * work, the figure the wall time hides) and memory (long_<row>_mib). */
static void long_rows(void)
{
    static const struct { const char *row; ours_kind kind; int64_t heads; int causal; } rows[] = {
        {"dense_1head", OURS_DENSE, 1, 0},
        {"lg", OURS_LOCAL_GLOBAL, H, 0},
        {"linear", OURS_LINEAR, H, 0},
        {"linear_causal", OURS_LINEAR, H, 1},
    };
    size_t n = (size_t)H * LONG_L * DH;
    float *q = bench_randf(n, 1), *k = bench_randf(n, 2), *v = bench_randf(n, 3), *o = bench_randf(n, 4);
    bench_emit("long_l", LONG_L);
    bench_emit("long_lg_pairs", ours_lg_pairs(LONG_L));
    bench_emit("long_lg_window", OURS_LG_WINDOW);
    bench_emit("long_lg_globals", OURS_LG_GLOBALS);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        long_args a = {rows[i].kind, rows[i].heads, rows[i].causal, q, k, v, o};
        char key[64];
        /* the dense head takes seconds a run: three runs after the warm-up */
        double t = bench_median(long_run, &a, rows[i].kind == OURS_DENSE ? 3 : 7, 3.0);
        snprintf(key, sizeof key, "long_%s_s", rows[i].row);
        bench_emit(key, t);
        clock_t c0 = clock();
        long_run(&a);
        snprintf(key, sizeof key, "long_%s_cpu_s", rows[i].row);
        bench_emit(key, (double)(clock() - c0) / CLOCKS_PER_SEC);
        snprintf(key, sizeof key, "long_%s_mib", rows[i].row);
        bench_emit(key, long_memory(a));
    }
    free(q); free(k); free(v); free(o);
}

/* ------------------------------------------------------------- rows */

static void emit_l(const char *row, int64_t l, double t)
{
    char key[64];
    snprintf(key, sizeof key, "%s_%lld", row, (long long)l);
    bench_emit(key, t);
}

/* ------------------------------------------------------------- bf16 */

/* The least CPU and wall seconds of reps calls of fn (after one warm-up). */
static void least_of(bench_fn fn, void *arg, int reps, double *cpu, double *wall)
{
    fn(arg);
    *cpu = *wall = INFINITY;
    for (int i = 0; i < reps; i++) {
        double c0 = bench_cpu_now(), w0 = bench_now();
        fn(arg);
        *cpu = fmin(*cpu, bench_cpu_now() - c0);
        *wall = fmin(*wall, bench_now() - w0);
    }
}

/* least_of for two multi-head runs (a[0], a[1]) taking turns, so that
 * both see the same load of a shared machine. */
static void least_of_pair(mha_args a[2], int reps, double cpu[2], double wall[2])
{
    for (int k = 0; k < 2; k++) {
        mha_run(&a[k]);
        cpu[k] = wall[k] = INFINITY;
    }
    for (int i = 0; i < reps; i++)
        for (int k = 0; k < 2; k++) {
            double c0 = bench_cpu_now(), w0 = bench_now();
            mha_run(&a[k]);
            cpu[k] = fmin(cpu[k], bench_cpu_now() - c0);
            wall[k] = fmin(wall[k], bench_now() - w0);
        }
}

/* core_cpu_L, core_bf16_cpu_L (and _wall), bf16_speedup_cpu_L, then one
 * decode step (Lq = 1, Lk = 4096) in each: decode_cpu_4096,
 * decode_bf16_cpu_4096. */
static void bf16_rows(const float *q, const float *k, const float *v, float *o)
{
    static const int64_t ls[] = {1024, 2048, 4096};
    for (size_t i = 0; i < sizeof ls / sizeof ls[0]; i++) {
        core_args c = {ls[i], ls[i], q, k, v, o, NULL, 0};
        double fc, fw, bc, bw;
        least_of(core_run, &c, 7, &fc, &fw);
        least_of(core_bf16_run, &c, 7, &bc, &bw);
        emit_l("core_cpu", ls[i], fc);
        emit_l("core_bf16_cpu", ls[i], bc);
        emit_l("core_wall", ls[i], fw);
        emit_l("core_bf16_wall", ls[i], bw);
        emit_l("bf16_speedup_cpu", ls[i], fc / bc);
    }
    core_args c = {1, 4096, q, k, v, o, NULL, 0}; /* one decode step */
    double fc, fw, bc, bw;
    least_of(core_run, &c, 21, &fc, &fw);
    least_of(core_bf16_run, &c, 21, &bc, &bw);
    bench_emit("decode_cpu_4096", fc);
    bench_emit("decode_bf16_cpu_4096", bc);
}

/* mha_cpu_L and mha_wall_L: multi-head with its projections and prepared
 * weights, the least process CPU time (every thread's) and the least wall
 * time of 15 calls (7 from L = 2048), at the one length l or at 128 to
 * 4096; mha_params_cpu_L and mha_params_wall_L the same with the params
 * given on each call (the matrices packed again each time), the two
 * interleaved call by call. CPU time is what a shared machine inflates
 * least: builds compare on it. */
static void mha_cpu_rows(int64_t l)
{
    int64_t ls[] = {128, 256, 512, 1024, 2048, 4096};
    size_t nls = sizeof ls / sizeof ls[0];
    if (l > 0) { ls[0] = l; nls = 1; }
    float *x = bench_randf((size_t)4096 * E, 1), *out = bench_randf((size_t)4096 * E, 4);
    for (size_t i = 0; i < nls; i++) {
        attn_param_set *ps = ours_mha_params(ls[i], x);
        attn_mha_weights *pw = ours_mha_prepare(ls[i], x, ps);
        mha_args m[2] = {{ls[i], x, ps, pw, out, NULL, NULL}, {ls[i], x, ps, NULL, out, NULL, NULL}};
        double c[2], w[2];
        least_of_pair(m, ls[i] <= 1024 ? 15 : 7, c, w);
        emit_l("mha_cpu", ls[i], c[0]);
        emit_l("mha_wall", ls[i], w[0]);
        emit_l("mha_params_cpu", ls[i], c[1]);
        emit_l("mha_params_wall", ls[i], w[1]);
        attn_mha_weights_free(pw);
        attn_param_set_free(ps);
    }
    free(x);
    free(out);
}

/* cpu_core_L, cpu_weights_L, cpu_causal_L (least CPU seconds) and
 * cpu_weights_ratio_L, cpu_causal_ratio_L; w holds H L^2 floats. */
static void cpu_rows(int64_t l, const float *q, const float *k, const float *v, float *o, float *w)
{
    core_args c = {l, l, q, k, v, o, NULL, 0};
    int reps = l <= 1024 ? 21 : 7;
    double core, wts, causal, wall;
    least_of(core_run, &c, reps, &core, &wall);
    c.w = w;
    least_of(core_run, &c, reps, &wts, &wall);
    c.w = NULL;
    c.causal = 1;
    least_of(core_run, &c, reps, &causal, &wall);
    emit_l("cpu_core", l, core);
    emit_l("cpu_weights", l, wts);
    emit_l("cpu_causal", l, causal);
    emit_l("cpu_weights_ratio", l, wts / core);
    emit_l("cpu_causal_ratio", l, causal / core);
}

/* core, weights and causal at L; w holds H L^2 floats. */
static void core_rows(int64_t l, const float *q, const float *k, const float *v, float *o, float *w)
{
    core_args c = {l, l, q, k, v, o, NULL, 0};
    emit_l("core", l, bench_median(core_run, &c, bench_reps(l), 3.0));
    emit_l("core_bf16", l, bench_median(core_bf16_run, &c, bench_reps(l), 3.0));
    c.w = w;
    emit_l("weights", l, bench_median(core_run, &c, bench_reps(l), 3.0));
    c.w = NULL;
    c.causal = 1;
    emit_l("causal", l, bench_median(core_run, &c, bench_reps(l), 3.0));
}

/* OpenBLAS last: its threads keep spinning for a while after each call and
 * would slow whatever ran next. */
static void blas_rows(const int64_t *ls, size_t nls, const float *q, const float *k, const float *v, float *o)
{
    for (size_t i = 0; i < nls; i++) {
        core_args c = {ls[i], ls[i], q, k, v, o, NULL, 0};
        emit_l("blas", ls[i], bench_median(blas_run, &c, bench_reps(ls[i]), 3.0));
    }
    float *a = bench_randf(2048 * 2048, 5), *b = bench_randf(2048 * 2048, 6), *cc = bench_randf(2048 * 2048, 7);
    float *abc[3] = {a, b, cc};
    bench_emit("sgemm_2048", bench_median(square_run, abc, 7, 3.0));
    free(a); free(b); free(cc);
}

static void labels(void)
{
    bench_emit_str("isa", attn_kernel_isa());
    bench_emit_str("defer_exp", attn_kernel_defers_exp() ? "yes" : "no");
    bench_emit("threads", threads);
    bench_emit_str("openblas_corename", openblas_get_corename());
    bench_emit_str("openblas_config", openblas_get_config());
}

/* --mha-cross: the module on three distinct inputs (the HTTP row's
 * request sends query, key and value), prepared weights, median. */
static void mha_cross_row(int64_t l)
{
    size_t n = (size_t)l * E;
    float *q = bench_randf(n, 1), *k = bench_randf(n, 2), *v = bench_randf(n, 3), *o = bench_randf(n, 4);
    emit_l("mha_cross", l, mha_time(l, q, k, v, o));
    free(q); free(k); free(v); free(o);
}

/* One decode call after 64 MiB are read and written (one byte a line),
 * which pushes the call's keys and values out of every cache. */
#define EVICT_BYTES ((size_t)64 << 20)
static volatile unsigned char *evict_buf;
static double decode_cold(core_args *c)
{
    double t[41];
    for (int r = 0; r < 41; r++) {
        for (size_t i = 0; i < EVICT_BYTES; i += 64)
            evict_buf[i]++;
        double t0 = bench_now();
        core_run(c);
        t[r] = bench_now() - t0;
    }
    qsort(t, 41, sizeof t[0], bench_cmp_double);
    return t[20];
}

/* --decode: the decode row alone, warm and cold (see the usage above). */
static int decode_only(void)
{
    size_t n = (size_t)4096 * E;
    float *q = bench_randf(n, 1), *k = bench_randf_huge(n, 2), *v = bench_randf_huge(n, 3), *o = bench_randf(n, 4);
    ctx = attn_ctx_new(threads);
    evict_buf = calloc(EVICT_BYTES, 1);
    if (!ctx || !evict_buf) { fprintf(stderr, "bench: out of memory\n"); return 2; }
    core_args c = {1, 4096, q, k, v, o, NULL, 0};
    bench_open();
    bench_emit("threads", threads);
    bench_emit("decode_4096", bench_median(core_run, &c, 41, 2.0));
    bench_emit("decode_cold_4096", decode_cold(&c));
    bench_close();
    free((void *)evict_buf);
    attn_ctx_free(ctx);
    free(q); free(k); free(v); free(o);
    return 0;
}

/* OpenBLAS starts its threads when it loads, and each polls for work,
 * yielding, for about 2^28 cycles (0.1 s here) before it sleeps; a row
 * timed meanwhile shares the CPUs with them (the decode call alone took
 * 1.0-1.2 ms in that window, 0.46 ms after it). So nothing is timed until
 * they sleep. */
static void let_blas_settle(void)
{
    struct timespec t = {0, 300 * 1000 * 1000};
    nanosleep(&t, NULL);
}

int main(int argc, char **argv)
{
    let_blas_settle();
    if (argc > 1 && strcmp(argv[1], "--labels") == 0) {
        bench_open();
        labels();
        bench_close();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--long") == 0) {
        threads = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 2;
        ctx = attn_ctx_new(threads);
        if (!ctx) { fprintf(stderr, "bench: attn_ctx_new failed\n"); return 2; }
        bench_open();
        labels();
        long_rows();
        bench_close();
        attn_ctx_free(ctx);
        return 0;
    }
    if (argc > 1 && (strcmp(argv[1], "--mha") == 0 || strcmp(argv[1], "--mha-cross") == 0)) {
        int cross = strcmp(argv[1], "--mha-cross") == 0;
        threads = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 2;
        int64_t l = argc > 3 ? atoll(argv[3]) : cross ? 1024 : 0;
        if (l < cross || l > 4096) { fprintf(stderr, "bench: L must be 1..4096\n"); return 2; }
        ctx = attn_ctx_new(threads);
        if (!ctx) { fprintf(stderr, "bench: attn_ctx_new failed\n"); return 2; }
        bench_open();
        labels();
        if (cross) mha_cross_row(l);
        else mha_cpu_rows(l);
        bench_close();
        attn_ctx_free(ctx);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--decode") == 0) {
        threads = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 2;
        return decode_only();
    }
    if (argc > 1 && strcmp(argv[1], "--bf16") == 0) {
        threads = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 2;
        size_t n = (size_t)4096 * E;
        float *q = bench_randf(n, 1), *k = bench_randf(n, 2), *v = bench_randf(n, 3), *o = bench_randf(n, 4);
        ctx = attn_ctx_new(threads);
        if (!ctx) { fprintf(stderr, "bench: attn_ctx_new failed\n"); return 2; }
        bench_open();
        labels();
        bf16_rows(q, k, v, o);
        bench_close();
        attn_ctx_free(ctx);
        free(q); free(k); free(v); free(o);
        return 0;
    }
    int cpu = argc > 1 && strcmp(argv[1], "--cpu") == 0;
    if (cpu) argv++, argc--;
    if (argc > 1) threads = atoi(argv[1]);
    if (threads < 1) threads = 1;
    openblas_set_num_threads(threads);
    int64_t ls[] = {128, 512, 1024, 2048, 4096};
    size_t nls = sizeof ls / sizeof ls[0];
    int quick = argc > 2;
    if (quick) { ls[0] = atoll(argv[2]); nls = 1; }
    if (ls[0] < 1 || ls[0] > 4096) { fprintf(stderr, "bench: L must be 1..4096\n"); return 2; }
    size_t n = (size_t)4096 * E;
    float *q = bench_randf(n, 1), *k = bench_randf(n, 2), *v = bench_randf(n, 3), *o = bench_randf(n, 4);
    float *w = bench_randf((size_t)H * 4096 * 4096, 5);
    blas_s = bench_randf((size_t)4096 * 4096, 6);
    ctx = attn_ctx_new(threads);
    if (!ctx) { fprintf(stderr, "bench: attn_ctx_new failed\n"); return 2; }
    bench_open();
    labels();
    for (size_t i = 0; i < nls; i++) {
        if (cpu) cpu_rows(ls[i], q, k, v, o, w);
        else core_rows(ls[i], q, k, v, o, w);
    }
    if (cpu) quick = 1, nls = 0; /* those rows alone */
    if (!quick) {
        core_args c = {1, 4096, q, k, v, o, NULL, 0};
        bench_emit("decode_4096", bench_median(core_run, &c, 41, 2.0));
    }
    for (size_t i = 0; i < nls; i++) emit_l("mha", ls[i], mha_time(ls[i], q, NULL, NULL, o));
    if (!quick) blas_rows(ls, nls, q, k, v, o);
    free(w);
    free(blas_s);
    if (!quick && !getenv("BENCH_NO_MEMORY")) memory_row();
    bench_close();
    attn_ctx_free(ctx);
    free(q); free(k); free(v); free(o);
    return 0;
}
