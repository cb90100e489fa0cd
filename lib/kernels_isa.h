/* kernels_isa.h - internal: which instruction-set variant of the kernels in
 * kernels.h runs, so tests and benchmarks can check and time each one. */
#ifndef ATTN_KERNELS_ISA_H
#define ATTN_KERNELS_ISA_H

#include <stddef.h>
#include <stdint.h>

/* Name of the variant in use: "avx512", "avx2" or "generic". The first call
 * picks the best one the CPU supports (or the one named by the environment
 * variable ATTN_ISA, when the CPU supports it). */
const char *attn_kernels_isa(void);

/* Switches to the named variant. Returns 0, or -1 when the name is unknown
 * or the CPU lacks the instructions. Not thread-safe: call it while no
 * kernel runs. */
int attn_kernels_use(const char *isa);

/* One instruction-set variant of the kernels in kernels.h. */
typedef struct {
    const char *name;
    void (*gemm_nt)(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, const float *bias,
                    float *c, int64_t ldc, int threads);
    int (*sdpa_run)(const attn_sdpa_job *jobs, size_t n, int threads);
} attn_kernel_set;

/* Defined only on x86-64 builds (kernels_avx512.c, kernels_avx2.c). */
extern const attn_kernel_set attn_kernels_avx512;
extern const attn_kernel_set attn_kernels_avx2;

#endif /* ATTN_KERNELS_ISA_H */
