/* kernels_avx512bf16.c - the kernels (kernels_tmpl.h, rows_tmpl.h,
 * linear_tmpl.h) compiled for AVX-512 with AVX512_BF16 (simd_avx512.h with
 * SIMD_AVX512_BF16): the float32 kernels as avx512's, the bf16 ones with
 * vdpbf16ps or the AMX tiles (amx.c); kernels.c runs them only on CPUs that
 * have AVX512_BF16. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#define SIMD_AVX512_BF16 1
#include "kernels_isa.h"
#include "pool.h"
#include "simd_avx512.h"
#include "simd_math.h"
#include "kernels_tmpl.h"
#include "rows_tmpl.h"
#include "linear_tmpl.h"

const attn_kernel_set attn_kernels_avx512bf16 = ATTN_KERNEL_SET("avx512bf16");

#else
typedef int attn_kernels_avx512bf16_unused; /* ISO C wants a declaration */
#endif
