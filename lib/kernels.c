/* kernels.c - the public side of kernels.h: picks the fastest kernel
 * variant the CPU supports (once, via __builtin_cpu_supports), and holds the
 * portable C versions that run on every other CPU. */
/* kernels.h has a slash-star inside its opening comment, which -Wcomment flags. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcomment"
#include "kernels.h"
#pragma GCC diagnostic pop
#include "kernels_isa.h"
#include "pool.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------- portable C */

typedef struct {
    int64_t m, n, k;
    const float *a; int64_t lda;
    const float *b; int64_t ldb;
    const float *bias;
    float *c; int64_t ldc;
} gemm_args;

/* One row of C: four columns at a time so four dot products are in flight. */
static void gemm_row(void *arg, int64_t i, int worker)
{
    (void)worker;
    const gemm_args *g = arg;
    const float *a = g->a + i * g->lda;
    float *c = g->c + i * g->ldc;
    int64_t j = 0;
    for (; j + 4 <= g->n; j += 4) {
        const float *b0 = g->b + j * g->ldb, *b1 = b0 + g->ldb, *b2 = b1 + g->ldb, *b3 = b2 + g->ldb;
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int64_t p = 0; p < g->k; p++) {
            s0 += a[p] * b0[p];
            s1 += a[p] * b1[p];
            s2 += a[p] * b2[p];
            s3 += a[p] * b3[p];
        }
        c[j] = s0; c[j + 1] = s1; c[j + 2] = s2; c[j + 3] = s3;
    }
    for (; j < g->n; j++) {
        const float *b = g->b + j * g->ldb;
        float s = 0;
        for (int64_t p = 0; p < g->k; p++) s += a[p] * b[p];
        c[j] = s;
    }
    if (g->bias)
        for (j = 0; j < g->n; j++) c[j] += g->bias[j];
}

static void gemm_nt_generic(int64_t m, int64_t n, int64_t k,
                            const float *a, int64_t lda,
                            const float *b, int64_t ldb,
                            const float *bias,
                            float *c, int64_t ldc, int threads)
{
    gemm_args g = {m, n, k, a, lda, b, ldb, bias, c, ldc};
    if ((double)m * (double)n * (double)k < 2e5) threads = 1;
    attn_pool_run(threads, m, gemm_row, &g);
}

static int allowed(const attn_sdpa_job *jb, int64_t i, int64_t j)
{
    if (jb->mask && !jb->mask[i * jb->mask_stride + j]) return 0;
    if (jb->key_mask && !jb->key_mask[j]) return 0;
    if (jb->causal && j > i) return 0;
    if (jb->window >= 0 && (j - i > jb->window || i - j > jb->window)) return 0;
    return 1;
}

/* One query row with an lk-float score buffer (O(lk) scratch, never
 * Lq x Lk): scores, max, exp and sum, then the weighted sum of values. */
static void sdpa_row(const attn_sdpa_job *jb, int64_t i, float *s)
{
    const float *q = jb->q + i * jb->q_stride;
    float mx = -INFINITY;
    for (int64_t j = 0; j < jb->lk; j++) {
        if (!allowed(jb, i, j)) { s[j] = -INFINITY; continue; }
        const float *kk = jb->k + j * jb->k_stride;
        float d = 0.0f;
        for (int64_t p = 0; p < jb->d; p++) d += q[p] * kk[p];
        d *= jb->scale;
        if (jb->bias) d += jb->bias[i * jb->bias_stride + j];
        s[j] = d;
        if (d > mx) mx = d;
    }
    float *o = jb->o + i * jb->o_stride;
    float *w = jb->w ? jb->w + i * jb->w_stride : NULL;
    for (int64_t p = 0; p < jb->dv; p++) o[p] = 0.0f;
    if (mx == -INFINITY) {
        if (w) for (int64_t j = 0; j < jb->lk; j++) w[j] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < jb->lk; j++) {
        s[j] = (s[j] == -INFINITY) ? 0.0f : expf(s[j] - mx);
        sum += s[j];
    }
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < jb->lk; j++) {
        float p = s[j] * inv;
        if (w) w[j] = p;
        if (p == 0.0f) continue;
        const float *vv = jb->v + j * jb->v_stride;
        for (int64_t t = 0; t < jb->dv; t++) o[t] += p * vv[t];
    }
}

typedef struct {
    const attn_sdpa_job *jobs;
    float *scratch;
    int64_t maxlk;
} sdpa_args;

static void sdpa_job_generic(void *arg, int64_t t, int worker)
{
    const sdpa_args *a = arg;
    const attn_sdpa_job *jb = &a->jobs[t];
    float *s = a->scratch + (size_t)worker * (size_t)a->maxlk;
    for (int64_t i = 0; i < jb->lq; i++) sdpa_row(jb, i, s);
}

static int sdpa_run_generic(const attn_sdpa_job *jobs, size_t n, int threads)
{
    int64_t maxlk = 1;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].lk > maxlk) maxlk = jobs[i].lk;
    if (threads < 1) threads = 1;
    sdpa_args a = {jobs, malloc((size_t)threads * (size_t)maxlk * sizeof(float)), maxlk};
    if (!a.scratch) return -1;
    attn_pool_run(threads, (int64_t)n, sdpa_job_generic, &a);
    free(a.scratch);
    return 0;
}

static const attn_kernel_set kernels_generic = {"generic", gemm_nt_generic, sdpa_run_generic};

/* ------------------------------------------------------------ dispatch */

static const attn_kernel_set *active;

static const attn_kernel_set *find(const char *isa)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (strcmp(isa, "avx512") == 0 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma"))
        return &attn_kernels_avx512;
    if (strcmp(isa, "avx2") == 0 && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        return &attn_kernels_avx2;
#endif
    if (strcmp(isa, "generic") == 0) return &kernels_generic;
    return NULL;
}

/* The choice is a pure function of the CPU (and ATTN_ISA), so two threads
 * racing here store the same pointer; the atomic keeps that race defined. */
static const attn_kernel_set *kernels(void)
{
    const attn_kernel_set *k = __atomic_load_n(&active, __ATOMIC_ACQUIRE);
    if (k) return k;
    const char *env = getenv("ATTN_ISA");
    if (env) k = find(env);
    if (!k) k = find("avx512");
    if (!k) k = find("avx2");
    if (!k) k = &kernels_generic;
    __atomic_store_n(&active, k, __ATOMIC_RELEASE);
    return k;
}

const char *attn_kernels_isa(void)
{
    return kernels()->name;
}

int attn_kernels_use(const char *isa)
{
    const attn_kernel_set *k = find(isa);
    if (!k) return -1;
    __atomic_store_n(&active, k, __ATOMIC_RELEASE);
    return 0;
}

void attn_gemm_nt(int64_t m, int64_t n, int64_t k,
                  const float *a, int64_t lda,
                  const float *b, int64_t ldb,
                  const float *bias,
                  float *c, int64_t ldc, int threads)
{
    if (m <= 0 || n <= 0) return;
    kernels()->gemm_nt(m, n, k, a, lda, b, ldb, bias, c, ldc, threads);
}

int attn_sdpa_run(const attn_sdpa_job *jobs, size_t n, int threads)
{
    if (n == 0) return 0;
    return kernels()->sdpa_run(jobs, n, threads);
}

/* The CPUs this process may run on (taskset, cpusets), which can be fewer
 * than the machine has online. */
int attn_cpu_count(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n >= 1) return n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}
