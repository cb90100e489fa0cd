/* kernels.c - the public side of kernels.h and kernels_isa.h: one probe of
 * the CPU, one reading of ATTN_ISA, and the entry points that hand each
 * call to the chosen variant's table. */
#include "attn.h"
#include "kernels.h"
#include "kernels_isa.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether the CPU runs the named variant's instructions. */
static int cpu_runs(const char *isa)
{
    if (strcmp(isa, "generic") == 0) return 1;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (strcmp(isa, "avx512bf16") == 0)
        return cpu_runs("avx512") && __builtin_cpu_supports("avx512bf16");
    if (strcmp(isa, "avx512") == 0)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("fma");
    if (strcmp(isa, "avx2") == 0)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return 0;
}

/* Every variant of this build, best first. */
static const attn_kernel_set *const variants[] = {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    &attn_kernels_avx512bf16,
    &attn_kernels_avx512,
    &attn_kernels_avx2,
#endif
    &attn_kernels_generic,
};

const attn_kernel_set *attn_kernels_find(const char *isa)
{
    if (!isa) return NULL;
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        if (strcmp(variants[i]->name, isa) == 0) return cpu_runs(isa) ? variants[i] : NULL;
    return NULL;
}

static const attn_kernel_set *active;

/* Whether the best variant the CPU runs is also the one to choose by
 * default: not avx512bf16 on an Intel CPU without the AMX tiles, whose
 * vdpbf16ps runs at half its float32 FMA rate (measured on a Xeon with
 * AVX-512: 86 against 171 GFLOP/s on one thread), so that the bf16 core
 * emulated with FMAs (the avx512 variant) took 0.73-0.80x its time at L =
 * 2048 and 4096. Its float32 kernels are the avx512 variant's. */
static int chosen_by_default(const char *isa)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (strcmp(isa, "avx512bf16") == 0) {
        __builtin_cpu_init();
        return !__builtin_cpu_is("intel") || attn_amx_ready();
    }
#endif
    (void)isa;
    return 1;
}

/* The choice is a pure function of the CPU and ATTN_ISA, so two threads
 * racing here store the same pointer; the atomic keeps that race defined. */
const attn_kernel_set *attn_kernels_active(void)
{
    const attn_kernel_set *k = __atomic_load_n(&active, __ATOMIC_ACQUIRE);
    if (k) return k;
    k = attn_kernels_find(getenv("ATTN_ISA"));
    for (size_t i = 0; !k; i++)
        if (chosen_by_default(variants[i]->name)) k = attn_kernels_find(variants[i]->name);
    __atomic_store_n(&active, k, __ATOMIC_RELEASE);
    return k;
}

const char *attn_kernels_isa(void)
{
    return attn_kernels_active()->name;
}

const char *attn_kernel_isa(void)
{
    return attn_kernels_isa();
}

int attn_kernels_use(const char *isa)
{
    const attn_kernel_set *k = attn_kernels_find(isa);
    if (!k) return -1;
    __atomic_store_n(&active, k, __ATOMIC_RELEASE);
    return 0;
}

/* -1 until chosen, then 0 or 1 (see kernels_isa.h); like the variant,
 * a pure function of the CPU and the environment. */
static int defer_exp = -1;

static int defer_exp_choice(void)
{
    const char *env = getenv("ATTN_DEFER_EXP");
    if (env && (strcmp(env, "0") == 0 || strcmp(env, "1") == 0)) return env[0] == '1';
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_is("amd");
#else
    return 0;
#endif
}

int attn_kernels_defer_exp(void)
{
    int on = __atomic_load_n(&defer_exp, __ATOMIC_RELAXED);
    if (on < 0) {
        on = defer_exp_choice();
        __atomic_store_n(&defer_exp, on, __ATOMIC_RELAXED);
    }
    return on;
}

int attn_kernel_defers_exp(void)
{
    return attn_kernels_active()->defer_exp && attn_kernels_defer_exp();
}

void attn_kernels_set_defer_exp(int on)
{
    __atomic_store_n(&defer_exp, on != 0, __ATOMIC_RELAXED);
}

size_t attn_gemm_scratch_bytes(int64_t m, int64_t n, int64_t k, int threads)
{
    return attn_kernels_active()->gemm_scratch_bytes(m, n, k, threads);
}

void attn_gemm_nt(int64_t m, int64_t n, int64_t k,
                  const float *a, int64_t lda,
                  const float *b, int64_t ldb,
                  const float *bias,
                  float *c, int64_t ldc, int threads, void *scratch)
{
    if (m <= 0 || n <= 0) return;
    attn_kernels_active()->gemm_nt(m, n, k, a, lda, b, ldb, bias, c, ldc, 0, 0, threads, scratch,
                                   NULL);
}

int64_t attn_gemm_panel(void)
{
    return attn_kernels_active()->gemm_panel;
}

size_t attn_gemm_packed_floats(int64_t n, int64_t k)
{
    return n > 0 && k > 0 ? attn_kernels_active()->gemm_packed_floats(n, k) : 0;
}

const void *attn_gemm_pack(int64_t n, int64_t k, const float *b, int64_t ldb, float *bp)
{
    const attn_kernel_set *ks = attn_kernels_active();
    if (n > 0 && k > 0)
        ks->gemm_pack(n, k, b, ldb, bp);
    return ks;
}

void attn_gemm_nt_packed(int64_t m, int64_t n, int64_t k,
                         const float *a, int64_t lda,
                         const float *b, int64_t ldb,
                         const float *bias,
                         float *c, int64_t ldc, int64_t cg, int64_t cgs, int threads,
                         void *scratch, const float *bp, const void *packer)
{
    if (m <= 0 || n <= 0) return;
    const attn_kernel_set *ks = attn_kernels_active();
    ks->gemm_nt(m, n, k, a, lda, b, ldb, bias, c, ldc, cg > 0 ? cg : 0, cgs, threads, scratch,
                packer == (const void *)ks ? bp : NULL);
}

float attn_sum_exp(const float *s, int64_t n, float m)
{
    return n > 0 ? attn_kernels_active()->sum_exp(s, n, m) : 0.0f;
}

size_t attn_sdpa_scratch_bytes(const attn_sdpa_job *jobs, size_t n, int threads)
{
    return attn_kernels_active()->sdpa_scratch_bytes(jobs, n, threads);
}

void attn_sdpa_run(const attn_sdpa_job *jobs, size_t n, int threads, void *scratch)
{
    if (n == 0) return;
    attn_kernels_active()->sdpa_run(jobs, n, threads, scratch);
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

/* ------------------------------------------------- key spans (kernels.h) */

void attn_span_init(attn_span_it *it, const attn_sparse *sp, int64_t i0, int64_t nr, int64_t klo,
                      int64_t khi)
{
    memset(it, 0, sizeof *it);
    it->sp = sp;
    it->i0 = i0;
    it->nr = nr;
    it->klo = it->pos = klo;
    it->khi = khi;
    if (sp->layout) {
        it->qb0 = i0 / sp->block;
        it->qb1 = (i0 + nr - 1) / sp->block;
        return;
    }
    /* window and off are clamped by sparse.c, so these sums cannot overflow */
    int64_t lo = i0 + sp->off - sp->window, hi = i0 + nr + sp->off + sp->window;
    it->band_lo = lo < klo ? klo : lo > khi ? khi : lo;
    it->band_hi = hi < it->band_lo ? it->band_lo : hi > khi ? khi : hi;
}

/* The next run of global keys in [pos, end); 0 when there is none. */
static int span_globals(attn_span_it *it, int64_t end, int64_t *lo, int64_t *hi)
{
    const attn_sparse *sp = it->sp;
    while (it->g < sp->n_gkeys && sp->gkeys[it->g] < it->pos)
        it->g++;
    if (it->g >= sp->n_gkeys || sp->gkeys[it->g] >= end)
        return 0;
    *lo = sp->gkeys[it->g++];
    *hi = *lo + 1;
    while (it->g < sp->n_gkeys && sp->gkeys[it->g] == *hi && *hi < end) {
        ++*hi;
        it->g++;
    }
    it->pos = *hi;
    return 1;
}

int attn_span_next(attn_span_it *it, int64_t *lo, int64_t *hi, int *kind)
{
    const attn_sparse *sp = it->sp;
    if (it->pos >= it->khi)
        return 0;
    if (sp->layout) {
        int64_t b = sp->block, kb = it->pos / b, nkb = sp->lcols;
        for (;; kb++) { /* the first key block some row of the block allows */
            if (kb >= nkb || kb * b >= it->khi)
                return 0;
            int on = 0;
            for (int64_t q = it->qb0; q <= it->qb1 && !on; q++)
                on = sp->layout[q * nkb + kb] != 0;
            if (on)
                break;
        }
        *lo = kb * b > it->pos ? kb * b : it->pos;
        for (kb++; kb < nkb && kb * b < it->khi; kb++) { /* and the run after it */
            int on = 0;
            for (int64_t q = it->qb0; q <= it->qb1 && !on; q++)
                on = sp->layout[q * nkb + kb] != 0;
            if (!on)
                break;
        }
        *hi = kb * b < it->khi ? kb * b : it->khi;
        *kind = it->qb0 != it->qb1 ? ATTN_SPAN_MIXED : ATTN_SPAN_FULL;
        it->pos = *hi;
        return 1;
    }
    *kind = ATTN_SPAN_FULL;
    if (it->pos < it->band_lo && span_globals(it, it->band_lo, lo, hi))
        return 1;
    if (it->pos < it->band_hi) {
        /* the band, cut around the global keys in it: a global key is
         * allowed for every row, not only those whose window holds it */
        if (it->pos < it->band_lo)
            it->pos = it->band_lo;
        if (span_globals(it, it->pos + 1, lo, hi))
            return 1;
        /* span_globals left g at the next global key */
        *lo = it->pos;
        *hi = it->g < sp->n_gkeys && sp->gkeys[it->g] < it->band_hi ? sp->gkeys[it->g]
                                                                     : it->band_hi;
        *kind = ATTN_SPAN_BAND;
        it->pos = *hi;
        return 1;
    }
    return span_globals(it, it->khi, lo, hi);
}
