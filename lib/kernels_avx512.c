/* kernels_avx512.c - the kernels (kernels_tmpl.h, rows_tmpl.h, linear_tmpl.h)
 * compiled for AVX-512 (simd_avx512.h); kernels.c runs them only on CPUs
 * that have it. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include "kernels_isa.h"
#include "pool.h"
#include "simd_avx512.h"
#include "simd_math.h"
#include "kernels_tmpl.h"
#include "rows_tmpl.h"
#include "linear_tmpl.h"

const attn_kernel_set attn_kernels_avx512 = ATTN_KERNEL_SET("avx512");

#else
typedef int attn_kernels_avx512_unused; /* ISO C wants a declaration */
#endif
