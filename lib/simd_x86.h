/* simd_x86.h - what the x86 vocabularies (simd_avx2.h, simd_avx512.h)
 * share: the first two stages of their in-place N x N transposes, which
 * work inside each 128-bit lane and so read the same at every width. P is
 * the intrinsics' prefix (_mm256 or _mm512), r the N rows, t N scratch
 * registers. After them, 128-bit lane L of r[4g + k] holds column 4L + k of
 * rows 4g .. 4g + 3; each vocabulary then moves the lanes its own way.
 * Every loop of a transpose is unrolled: left as a loop, its rows live in
 * memory and each step is a load and a store (measured: the output's
 * transpose then cost a flash block as much as a dozen keys). */
#ifndef ATTN_SIMD_X86_H
#define ATTN_SIMD_X86_H

#define SIMD_TRANSPOSE_IN_LANES(P, N, r, t)                              \
    do {                                                                 \
        _Pragma("GCC unroll 16")                                         \
        for (int i_ = 0; i_ < (N); i_ += 2) {                            \
            t[i_] = P##_unpacklo_ps(r[i_], r[i_ + 1]);                   \
            t[i_ + 1] = P##_unpackhi_ps(r[i_], r[i_ + 1]);               \
        }                                                                \
        _Pragma("GCC unroll 16")                                         \
        for (int i_ = 0; i_ < (N); i_ += 4) {                            \
            r[i_] = P##_shuffle_ps(t[i_], t[i_ + 2], 0x44);              \
            r[i_ + 1] = P##_shuffle_ps(t[i_], t[i_ + 2], 0xEE);          \
            r[i_ + 2] = P##_shuffle_ps(t[i_ + 1], t[i_ + 3], 0x44);      \
            r[i_ + 3] = P##_shuffle_ps(t[i_ + 1], t[i_ + 3], 0xEE);      \
        }                                                                \
    } while (0)

#endif /* ATTN_SIMD_X86_H */
