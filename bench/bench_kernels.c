/* bench_kernels.c - times this project's kernels (and OpenBLAS sgemm on the
 * same flops, as the ceiling) for the rows of `make bench`; prints one JSON
 * object of median seconds (and MiB for the memory row) for bench/run.py.
 *
 * Usage: bench_kernels [threads [L]]   (default 2 threads; with L, only
 * ours at that length, core rows and multi-head, for quick checks). BENCH_NO_MEMORY=1 skips the
 * L = 32768 memory row. */
#include "kernels.h"
#include "kernels_isa.h"
#include "attn.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define E 512
#define H 8
#define DH (E / H)

static int threads = 2;
static int first_field = 1;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *randf(size_t n)
{
    /* 64-byte aligned, as a caller that cares for speed allocates: weight
     * rows then take the kernels' non-temporal stores */
    float *p = aligned_alloc(64, (n * sizeof *p + 63) / 64 * 64);
    if (!p) { fprintf(stderr, "bench: out of memory\n"); exit(2); }
    uint64_t s = 88172645463325252ull + n;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        p[i] = (float)((double)(s >> 40) * 0x1p-24 * 2.0 - 1.0);
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of up to `reps` timed runs after one warm-up, stopping early once
 * `budget` seconds are spent (at least three runs). */
typedef void (*bench_fn)(void *);
static double median_time(bench_fn fn, void *arg, int reps, double budget)
{
    double t[64] = {0};
    int n = 0;
    fn(arg);
    double start = now();
    while (n < reps && n < 64) {
        double t0 = now();
        fn(arg);
        t[n++] = now() - t0;
        if (now() - start > budget && n >= 3) break;
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return t[n / 2];
}

static void emit(const char *key, double v)
{
    printf("%s\"%s\": %.9g", first_field ? "{" : ", ", key, v);
    first_field = 0;
    fflush(stdout);
}

/* ------------------------------------------------------------- core */

typedef struct {
    int64_t lq, lk;
    const float *q, *k, *v;
    float *o, *w;
    int causal;
    attn_sdpa_job jobs[H];
} core_args;

/* 8 heads of one (L, E) self-attention: head h is columns h*64.. of Q, K,
 * V and O, the layout multi-head attention uses. */
static void core_setup(core_args *c)
{
    for (int h = 0; h < H; h++) {
        attn_sdpa_job *j = &c->jobs[h];
        memset(j, 0, sizeof *j);
        j->lq = c->lq; j->lk = c->lk; j->d = DH; j->dv = DH;
        j->q = c->q + h * DH; j->q_stride = E;
        j->k = c->k + h * DH; j->k_stride = E;
        j->v = c->v + h * DH; j->v_stride = E;
        j->o = c->o + h * DH; j->o_stride = E;
        j->w = c->w ? c->w + (size_t)h * (size_t)(c->lq * c->lk) : NULL;
        j->w_stride = c->lk;
        j->scale = 1.0f / sqrtf((float)DH);
        j->causal = c->causal;
        j->window = -1;
    }
}

static void core_run(void *arg)
{
    core_args *c = arg;
    if (attn_sdpa_run_heap(c->jobs, H, threads) != 0) { fprintf(stderr, "bench: sdpa failed\n"); exit(2); }
}

/* The same flops through OpenBLAS: S = Q K^T, then O = S V, per head (no
 * softmax, so a ceiling rather than an attention). */
static float *blas_s;
static void blas_run(void *arg)
{
    core_args *c = arg;
    for (int h = 0; h < H; h++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)c->lq, (int)c->lk, DH,
                    0.125f, c->q + h * DH, E, c->k + h * DH, E, 0.0f, blas_s, (int)c->lk);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)c->lq, DH, (int)c->lk,
                    1.0f, blas_s, (int)c->lk, c->v + h * DH, E, 0.0f, c->o + h * DH, E);
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
    const float *x, *win, *bin, *wo, *bo;
    float *qkv, *att, *out;
    attn_sdpa_job jobs[H];
} mha_args;

/* nn.MultiheadAttention's forward from the kernels alone: one GEMM for the
 * packed q/k/v projection (3E outputs), the heads, the output projection. */
static void mha_run(void *arg)
{
    mha_args *m = arg;
    attn_gemm_nt_heap(m->l, 3 * E, E, m->x, E, m->win, E, m->bin, m->qkv, 3 * E, threads);
    for (int h = 0; h < H; h++) {
        attn_sdpa_job *j = &m->jobs[h];
        memset(j, 0, sizeof *j);
        j->lq = m->l; j->lk = m->l; j->d = DH; j->dv = DH;
        j->q = m->qkv + h * DH; j->q_stride = 3 * E;
        j->k = m->qkv + E + h * DH; j->k_stride = 3 * E;
        j->v = m->qkv + 2 * E + h * DH; j->v_stride = 3 * E;
        j->o = m->att + h * DH; j->o_stride = E;
        j->scale = 1.0f / sqrtf((float)DH);
        j->window = -1;
    }
    if (attn_sdpa_run_heap(m->jobs, H, threads) != 0) { fprintf(stderr, "bench: sdpa failed\n"); exit(2); }
    attn_gemm_nt_heap(m->l, E, E, m->att, E, m->wo, E, m->bo, m->out, E, threads);
}

/* The same module through the library's public call, as the service runs
 * it (parameters seeded, weights not asked for). */
typedef struct {
    attn_ctx *ctx;
    attn_mha_request req;
    float *out;
} api_args;

static void api_run(void *arg)
{
    api_args *a = arg;
    attn_error err;
    if (attn_mha_compute(a->ctx, &a->req, a->out, NULL, &err) != ATTN_OK) {
        fprintf(stderr, "bench: attn_mha_compute: %s\n", err.message);
        exit(2);
    }
}

static double api_time(int64_t l, const float *x, float *out)
{
    api_args a = {attn_ctx_new(threads), attn_mha_request_default(), out};
    a.req.query = (attn_tensor){3, {1, l, E, 0}, x};
    a.req.num_heads = H;
    a.req.opt.need_weights = 0;
    attn_param_set *ps = NULL;
    attn_error err;
    if (!a.ctx || attn_mha_seed_params(&a.req, 1, &ps, &err) != ATTN_OK) {
        fprintf(stderr, "bench: cannot set up attn_mha_compute\n");
        exit(2);
    }
    a.req.params = ps->items;
    a.req.n_params = ps->n;
    double t = median_time(api_run, &a, l <= 1024 ? 15 : 7, 3.0);
    attn_param_set_free(ps);
    attn_ctx_free(a.ctx);
    return t;
}

/* ------------------------------------------------------------ memory */

static long maxrss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Peak RSS growth of one self-attention at L = 32768 without weights,
 * measured in a child so earlier runs' peaks do not hide it. The inputs and
 * output are touched first, so the growth is the kernel's own memory. */
static void memory_row(void)
{
    int64_t l = 32768;
    int fd[2];
    if (pipe(fd) != 0) return;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        core_args c = {l, l, randf((size_t)l * E), randf((size_t)l * E), randf((size_t)l * E),
                       randf((size_t)l * E), NULL, 0, {{0}}};
        core_setup(&c);
        long before = maxrss_kib();
        double t0 = now();
        core_run(&c);
        double res[2] = {(double)(maxrss_kib() - before) / 1024.0, now() - t0};
        if (write(fd[1], res, sizeof res) != (ssize_t)sizeof res) _exit(1);
        _exit(0);
    }
    close(fd[1]);
    double res[2];
    ssize_t got = read(fd[0], res, sizeof res);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    if (got == (ssize_t)sizeof res) {
        emit("mem_32768_mib", res[0]);
        emit("mem_32768_s", res[1]);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1) threads = atoi(argv[1]);
    if (threads < 1) threads = 1;
    openblas_set_num_threads(threads);
    int64_t ls[] = {128, 512, 1024, 2048, 4096};
    size_t nls = sizeof ls / sizeof ls[0];
    int quick = argc > 2;
    if (quick) { ls[0] = atoll(argv[2]); nls = 1; }
    if (ls[0] < 1 || ls[0] > 4096) { fprintf(stderr, "bench: L must be 1..4096\n"); return 2; }
    int64_t lmax = 4096;
    float *q = randf((size_t)lmax * E), *k = randf((size_t)lmax * E), *v = randf((size_t)lmax * E);
    float *o = randf((size_t)lmax * E);
    float *w = randf((size_t)H * (size_t)lmax * (size_t)lmax);
    blas_s = randf((size_t)lmax * (size_t)lmax);
    printf("{\"isa\": \"%s\"", attn_kernels_isa());
    first_field = 0;
    char key[64];
    for (size_t i = 0; i < nls; i++) {
        int64_t l = ls[i];
        int reps = l <= 1024 ? 15 : 7;
        core_args c = {l, l, q, k, v, o, NULL, 0, {{0}}};
        core_setup(&c);
        snprintf(key, sizeof key, "core_%lld", (long long)l);
        emit(key, median_time(core_run, &c, reps, 3.0));
        c.w = w;
        core_setup(&c);
        snprintf(key, sizeof key, "weights_%lld", (long long)l);
        emit(key, median_time(core_run, &c, reps, 3.0));
        c.w = NULL;
        c.causal = 1;
        core_setup(&c);
        snprintf(key, sizeof key, "causal_%lld", (long long)l);
        emit(key, median_time(core_run, &c, reps, 3.0));
    }
    if (quick) {
        float *win = randf(3 * E * E), *bin = randf(3 * E), *wo = randf(E * E), *bo = randf(E);
        float *qkv = randf((size_t)ls[0] * 3 * E), *att = randf((size_t)ls[0] * E);
        mha_args m = {ls[0], q, win, bin, wo, bo, qkv, att, o, {{0}}};
        snprintf(key, sizeof key, "mha_%lld", (long long)ls[0]);
        emit(key, median_time(mha_run, &m, 15, 3.0));
        printf("}\n");
        return 0;
    }
    {
        core_args c = {1, 4096, q, k, v, o, NULL, 0, {{0}}};
        core_setup(&c);
        emit("decode_4096", median_time(core_run, &c, 41, 2.0));
    }
    {
        float *win = randf(3 * E * E), *bin = randf(3 * E), *wo = randf(E * E), *bo = randf(E);
        float *qkv = randf((size_t)lmax * 3 * E), *att = randf((size_t)lmax * E);
        for (size_t i = 0; i < sizeof ls / sizeof ls[0]; i++) {
            mha_args m = {ls[i], q, win, bin, wo, bo, qkv, att, o, {{0}}};
            snprintf(key, sizeof key, "mha_%lld", (long long)ls[i]);
            emit(key, median_time(mha_run, &m, ls[i] <= 1024 ? 15 : 7, 3.0));
            snprintf(key, sizeof key, "api_%lld", (long long)ls[i]);
            emit(key, api_time(ls[i], q, o));
        }
        free(win); free(bin); free(wo); free(bo); free(qkv); free(att);
    }
    /* OpenBLAS last: its threads keep spinning for a while after each
     * call and would slow whatever ran next. */
    for (size_t i = 0; i < nls; i++) {
        core_args c = {ls[i], ls[i], q, k, v, o, NULL, 0, {{0}}};
        snprintf(key, sizeof key, "blas_%lld", (long long)ls[i]);
        emit(key, median_time(blas_run, &c, ls[i] <= 1024 ? 15 : 7, 3.0));
    }
    {
        /* the machine's practical ceiling: one large square sgemm */
        float *a = randf(2048 * 2048), *b = randf(2048 * 2048), *c = randf(2048 * 2048);
        float *abc[3] = {a, b, c};
        emit("sgemm_2048", median_time(square_run, abc, 7, 3.0));
        free(a); free(b); free(c);
    }
    free(w);
    free(blas_s);
    if (!getenv("BENCH_NO_MEMORY")) memory_row();
    printf("}\n");
    free(q); free(k); free(v); free(o);
    return 0;
}
