/* kernels.c - the public side of kernels.h and kernels_isa.h: one probe of
 * the CPU, one reading of ATTN_ISA, and the entry points that hand each
 * call to the chosen variant's table. */
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

/* The choice is a pure function of the CPU and ATTN_ISA, so two threads
 * racing here store the same pointer; the atomic keeps that race defined. */
const attn_kernel_set *attn_kernels_active(void)
{
    const attn_kernel_set *k = __atomic_load_n(&active, __ATOMIC_ACQUIRE);
    if (k) return k;
    k = attn_kernels_find(getenv("ATTN_ISA"));
    for (size_t i = 0; !k; i++) k = attn_kernels_find(variants[i]->name);
    __atomic_store_n(&active, k, __ATOMIC_RELEASE);
    return k;
}

const char *attn_kernels_isa(void)
{
    return attn_kernels_active()->name;
}

int attn_kernels_use(const char *isa)
{
    const attn_kernel_set *k = attn_kernels_find(isa);
    if (!k) return -1;
    __atomic_store_n(&active, k, __ATOMIC_RELEASE);
    return 0;
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
    attn_kernels_active()->gemm_nt(m, n, k, a, lda, b, ldb, bias, c, ldc, threads, scratch);
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
