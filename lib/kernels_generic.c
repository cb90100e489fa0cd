/* kernels_generic.c - the kernels (kernels_tmpl.h, rows_tmpl.h, linear_tmpl.h)
 * compiled in portable C (simd_generic.h), for CPUs without AVX2 or when
 * ATTN_ISA says so. */
#include "kernels_isa.h"
#include "pool.h"
#include "simd_generic.h"
#include "simd_math.h"
#include "kernels_tmpl.h"
#include "rows_tmpl.h"
#include "linear_tmpl.h"

const attn_kernel_set attn_kernels_generic = ATTN_KERNEL_SET("generic");
