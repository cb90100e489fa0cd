/* numparse.h - the float parser's fast path, inline for the array scanner
 * (server/scan.c) and numfmt.c's srv_parse_float: JSON number text to the
 * correctly rounded float32 (strtof's result, bit for bit) by Eisel-Lemire,
 * digits read eight at a time. Anything it cannot decide it leaves to
 * srv_parse_float's exact general path (NULL return). */
#ifndef SRV_NUMPARSE_H
#define SRV_NUMPARSE_H

#include <stdint.h>
#include <string.h>

#include "pow5.h"

#if defined(__SSE2__) && defined(__x86_64__) && !defined(SRV_PARSE_SWAR)
#include <emmintrin.h>
#endif

/* Bytes srv_parse_float_fast may read from p, whatever the text: the reads
 * look ahead eight bytes at a time. */
#define SRV_PARSE_FAST_PAD 64
/* And srv_parse_short, from the sign on. */
#define SRV_PARSE_SHORT_PAD 17

/* The high and low 64 bits of a * b. */
static inline uint64_t srv_mul128(uint64_t a, uint64_t b, uint64_t *lo)
{
#ifdef __SIZEOF_INT128__
    __extension__ unsigned __int128 p = (unsigned __int128)a * b;
    *lo = (uint64_t)p;
    return (uint64_t)(p >> 64);
#else
    uint64_t al = a & 0xffffffffu, ah = a >> 32, bl = b & 0xffffffffu, bh = b >> 32;
    uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
    *lo = (mid << 32) | (ll & 0xffffffffu);
    return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
#endif
}

/* w * 10^q (w != 0, w < 10^19 exactly the number's digits) as the nearest
 * float32, ties to even: Eisel-Lemire, as fast_float's compute_float for
 * binary32 (D. Lemire, "Number Parsing at a Gigabyte per Second",
 * Software: Practice and Experience 51(8), 2021). The product of w and the
 * truncated 128-bit 5^q decides unless its bits below the float's are all
 * ones, which for q outside [-27, 55] (5^q not exact in 128 bits) returns 0:
 * the caller takes the exact path. Otherwise sets *out (+-0 on underflow,
 * +-inf on overflow, *finite 0) and returns 1. */
static inline int srv_eisel_lemire(uint64_t w, int q, int neg, float *out, int *finite)
{
    uint32_t bits;
    if (q < POW5_MIN) {
        bits = 0; /* w * 10^q < 10^-46: under half the least subnormal */
    } else if (q > POW5_MAX) {
        bits = 0x7f800000u;
    } else {
        int lz = __builtin_clzll(w);
        w <<= lz;
        const uint64_t *t = pow5_128[q - POW5_MIN];
        uint64_t lo, hi = srv_mul128(w, t[0], &lo);
        const uint64_t below = ~0ull >> 26; /* the bits under 23 + 3 */
        if ((hi & below) == below) {
            uint64_t lo2, h2 = srv_mul128(w, t[1], &lo2);
            lo += h2;
            hi += lo < h2;
            if (lo == ~0ull && (q < -27 || q > 55))
                return 0;
        }
        int up = (int)(hi >> 63), shift = up + 64 - 26;
        uint64_t mant = hi >> shift;
        /* floor(log2(10^q)) + 63 is floor(217706 q / 2^16) + 63, taken on
         * q + 32768 > 0 (no shift of a negative value) less 217706 * 32768 /
         * 2^16 = 108853; 127: the bias */
        int e2 = (int)(((int64_t)217706 * (q + 32768)) >> 16) - 108853 + 63 + up - lz + 127;
        if (e2 <= 0) { /* subnormal, or 0 */
            if (1 - e2 >= 64) {
                bits = 0;
            } else {
                mant >>= 1 - e2;
                mant = (mant + (mant & 1)) >> 1;
                bits = (uint32_t)mant; /* 1 << 23 when it rounds up to FLT_MIN */
            }
        } else {
            /* an exact tie (5^q exact, nothing below the kept bits) rounds
             * to even: only 10^-17 .. 10^10 can produce one */
            if (lo <= 1 && q >= -17 && q <= 10 && (mant & 3) == 1 && (mant << shift) == hi)
                mant &= ~1ull;
            mant = (mant + (mant & 1)) >> 1;
            if (mant >= (2ull << 23)) {
                mant = 1ull << 23;
                e2++;
            }
            bits = e2 >= 0xff ? 0x7f800000u : (uint32_t)e2 << 23 | ((uint32_t)mant & 0x7fffffu);
        }
    }
    bits |= (uint32_t)neg << 31;
    memcpy(out, &bits, sizeof bits);
    *finite = (bits & 0x7f800000u) != 0x7f800000u;
    return 1;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* How many of the 8 bytes of d (text less '0'), from the first, are digits. */
static inline int srv_swar_run(uint64_t d)
{
    uint64_t nd = (((d & 0x7f7f7f7f7f7f7f7full) + 0x7676767676767676ull) | d) &
                  0x8080808080808080ull;
    return nd ? __builtin_ctzll(nd) >> 3 : 8;
}

/* SWAR: the 8 bytes at p less '0' in *d, and how many of them, from the
 * first, are digits. */
static inline int srv_swar_digits(const char *p, uint64_t *d)
{
    uint64_t x;
    memcpy(&x, p, 8);
    *d = x ^ 0x3030303030303030ull;
    return srv_swar_run(*d);
}

/* The number the first cnt (1..8) digits of d spell (after simdjson's
 * parse_eight_digits_unrolled). */
static inline uint64_t srv_swar_value(uint64_t d, int cnt)
{
    uint64_t v = cnt == 8 ? d : d << (8 * (8 - cnt)); /* the digits, high-aligned */
    v = v * 10 + (v >> 8);
    return (((v & 0x000000FF000000FFull) * (100 + (1000000ull << 32))) +
            (((v >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32)))) >> 32;
}

/* The two primitives of the fast path, per instruction set: SSE2 (every
 * x86-64) or 64-bit words (SWAR, any little-endian CPU; -DSRV_PARSE_SWAR
 * picks it on x86 too, to test it). */
#if defined(__SSE2__) && defined(__x86_64__) && !defined(SRV_PARSE_SWAR)
/* Bit i of *digits: p[i] is a digit; of *zeros: p[i] is '0'; i < 32. */
static inline void srv_classify32(const char *p, uint32_t *digits, uint32_t *zeros)
{
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p),
            b = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
    /* x - ('0' + 128) wraps the digits to -128..-119, nothing else */
    const __m128i off = _mm_set1_epi8((char)('0' + 128)), lim = _mm_set1_epi8(-118),
                  zero = _mm_set1_epi8('0');
    *digits = (uint32_t)_mm_movemask_epi8(_mm_cmplt_epi8(_mm_sub_epi8(a, off), lim)) |
              (uint32_t)_mm_movemask_epi8(_mm_cmplt_epi8(_mm_sub_epi8(b, off), lim)) << 16;
    *zeros = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(a, zero)) |
             (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(b, zero)) << 16;
}

/* Lanes 0..15 of a byte mask: 0xff from lane 16 - i of srv_lanes + i. */
static const uint8_t srv_lanes[48] = {
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255};

/* The number sixteen digits spell, the first the most significant: digit j
 * is src[j] for j < k and src[j + 1] from k on (a decimal point at src[k]
 * left out), and 0 from j = n on. 0 <= k, n <= 16. The conversion is
 * simdjson's and fast_float's: pairs, quads, then octets by multiply-add. */
static inline uint64_t srv_sixteen_digits(const char *src, int k, int n)
{
    __m128i from_k = _mm_loadu_si128((const __m128i *)(const void *)(srv_lanes + 32 - k)),
            below_n = _mm_loadu_si128((const __m128i *)(const void *)(srv_lanes + 16 - n));
    __m128i v = _mm_or_si128(_mm_andnot_si128(from_k, _mm_loadu_si128((const __m128i *)(const void *)src)),
                             _mm_and_si128(from_k, _mm_loadu_si128((const __m128i *)(const void *)(src + 1))));
    v = _mm_and_si128(_mm_sub_epi8(v, _mm_set1_epi8('0')), below_n);
    v = _mm_add_epi16(_mm_mullo_epi16(_mm_and_si128(v, _mm_set1_epi16(0xff)), _mm_set1_epi16(10)),
                      _mm_srli_epi16(v, 8));
    v = _mm_madd_epi16(v, _mm_set1_epi32(100 | 1 << 16));
    v = _mm_packs_epi32(v, v);
    v = _mm_madd_epi16(v, _mm_set1_epi32(10000 | 1 << 16));
    uint64_t x = (uint64_t)_mm_cvtsi128_si64(v);
    return (x & 0xffffffffu) * 100000000u + (x >> 32);
}
#else
/* The high bit of each byte of x gathered into bits 0..7. */
static inline uint32_t srv_swar_bits(uint64_t x)
{
    return (uint32_t)(((x & 0x8080808080808080ull) * 0x02040810204081ull) >> 56);
}

static inline void srv_classify32(const char *p, uint32_t *digits, uint32_t *zeros)
{
    *digits = *zeros = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t d;
        memcpy(&d, p + 8 * i, 8);
        d ^= 0x3030303030303030ull;
        uint64_t nd = (((d & 0x7f7f7f7f7f7f7f7full) + 0x7676767676767676ull) | d),
                 nz = (((d & 0x7f7f7f7f7f7f7f7full) + 0x7f7f7f7f7f7f7f7full) | d);
        *digits |= srv_swar_bits(~nd) << (8 * i);
        *zeros |= srv_swar_bits(~nz) << (8 * i);
    }
}

/* Bytes 0..c-1 of a word (c in 0..8). */
static inline uint64_t srv_swar_low(int c)
{
    return c >= 8 ? ~0ull : (1ull << (8 * c)) - 1;
}

static inline uint64_t srv_sixteen_digits(const char *src, int k, int n)
{
    uint64_t w[2], x, y;
    for (int i = 0; i < 2; i++) {
        int ki = k - 8 * i < 0 ? 0 : k - 8 * i, ni = n - 8 * i < 0 ? 0 : n - 8 * i;
        memcpy(&x, src + 8 * i, 8);
        memcpy(&y, src + 8 * i + 1, 8);
        uint64_t m = srv_swar_low(ki);
        w[i] = srv_swar_value((((x & m) | (y & ~m)) ^ 0x3030303030303030ull) & srv_swar_low(ni), 8);
    }
    return w[0] * 100000000u + w[1];
}
#endif

/* Whether the double d (positive) rounds to the float32 nearest the value it
 * stands for, within 32 units of its last place: nowhere near a midpoint
 * between two floats (bit 28 of the 29 below a float's), in [2^-126,
 * 2^127): a normal float, never rounded up to infinity. */
static inline int srv_rounds_as_float(double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    uint32_t ex = (uint32_t)(bits >> 52), low = (uint32_t)bits & 0x1fffffffu;
    return ex - (1023u - 126u) <= 252u && low - 0x10000000u + 32u > 64u;
}

/* The short numbers most requests carry, p past the sign: 1 to 7 integer
 * digits (no leading zero but a lone one), then either nothing or '.' and
 * fraction digits, 7 digits in all, and no exponent. The digits are
 * w < 10^7 and the value w / 10^k (k <= 6), both exact in double
 * precision: the quotient rounded to double then to float is the correctly
 * rounded float (strtof's). It could only differ if the double rounding
 * landed on a float midpoint M = m 2^e (m < 2^25) the exact quotient is not
 * at; but w - M 10^k is a nonzero multiple of 2^-s with 2^s <= 2^(-e-k) (or
 * an integer), so |w / 10^k - M| >= 1 / (2^s 10^k) > M 2^-53 whenever
 * m 5^k < 2^53 (5^6 < 2^28) and w < 2^53: more than half a double's unit
 * away. Returns the end, or NULL for any other form (srv_parse_float_long
 * takes it). Reads at most 10 bytes from p (SRV_PARSE_SHORT_PAD covers
 * them with the sign). */
static inline __attribute__((always_inline)) const char *
srv_parse_short(const char *p, int neg, float *out, int *finite)
{
    static const double p10k[8] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7};
    uint64_t di, w;
    int ni = srv_swar_digits(p, &di), nf = 0;
    const char *e;
    if ((di & 0xffff) == 0x1e00) {
        /* "0." (less '0': 0x00 0x1e), the form of most values in (-1, 1):
         * the fraction's digits alone, one word read at p + 2 */
        uint64_t z;
        memcpy(&z, p + 2, 8);
        z ^= 0x3030303030303030ull;
        nf = srv_swar_run(z);
        if (nf == 0 || nf > 6) /* "0.", or 7 digits or more: as below */
            return NULL;
        w = srv_swar_value(z, nf);
        e = p + 2 + nf;
    } else {
        if (ni == 0 || ni > 7 || (ni > 1 && *p == '0'))
            return NULL;
        e = p + ni;
        if (*e == '.') {
            /* the digits either side of the point in one word: bytes below
             * ni from p, the others from p + 1 */
            uint64_t y, m = (1ull << (8 * ni)) - 1;
            memcpy(&y, p + 1, 8);
            uint64_t z = (di & m) | ((y ^ 0x3030303030303030ull) & ~m);
            int nt = srv_swar_run(z);
            nf = nt - ni;
            if (nf == 0 || nt == 8) /* "1.", or 8 digits or more: the general path's */
                return NULL;
            w = srv_swar_value(z, nt);
            e += 1 + nf;
        } else {
            w = srv_swar_value(di, ni);
        }
    }
    if ((*e | 0x20) == 'e')
        return NULL;
    float f = (float)((double)(int64_t)w / p10k[nf]); /* w < 2^53: a signed conversion */
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    bits |= (uint32_t)neg << 31;
    memcpy(out, &bits, sizeof bits);
    *finite = 1;
    return e;
}


/* The numbers printers write, with no branch on their length:
 * -?(0|[1-9][0-9]{0,14})(.[0-9]+)?([eE][+-]?[0-9]{1,3})? within 32 bytes
 * (Python's repr of a float32 as a double gives up to 17 significant
 * digits, C's "%.9g" 9). One classification of 32 bytes places the point,
 * the end and the leading zeros; the first 16 significant digits are
 * converted at once (w, zero-padded), and w * 10^q is computed in double
 * precision: the value is within 11 units of the double's last place of it
 * (16 digits or more: 10^-15 of truncation, 9 units; one rounding each of
 * w, of 10^q, of the product), so a double not within 32 units of a midpoint between
 * two floats rounds as the exact value does (strtof's result). Anything
 * else (about one number in ten million, a midpoint, or a form outside the
 * above) returns NULL: the general path decides exactly, and reports. Reads
 * at most SRV_PARSE_FAST_PAD bytes from p. */
static inline const char *srv_parse_float_long(const char *p, float *out, int *finite)
{
    /* 10^q for q in [-44, 22] (those below 0 rounded: one more rounding) */
    static const double p10[67] = {
        1e-44, 1e-43, 1e-42, 1e-41, 1e-40, 1e-39, 1e-38, 1e-37, 1e-36, 1e-35, 1e-34, 1e-33,
        1e-32, 1e-31, 1e-30, 1e-29, 1e-28, 1e-27, 1e-26, 1e-25, 1e-24, 1e-23, 1e-22, 1e-21,
        1e-20, 1e-19, 1e-18, 1e-17, 1e-16, 1e-15, 1e-14, 1e-13, 1e-12, 1e-11, 1e-10, 1e-9,
        1e-8,  1e-7,  1e-6,  1e-5,  1e-4,  1e-3,  1e-2,  1e-1,  1e0,   1e1,   1e2,   1e3,
        1e4,   1e5,   1e6,   1e7,   1e8,   1e9,   1e10,  1e11,  1e12,  1e13,  1e14,  1e15,
        1e16,  1e17,  1e18,  1e19,  1e20,  1e21,  1e22};
    int neg = *p == '-';
    p += neg;
    uint32_t dig, zer;
    srv_classify32(p, &dig, &zer);
    uint64_t nd = ~(uint64_t)dig, nz = ~(uint64_t)zer; /* bits 32..63 set */
    int ni = __builtin_ctzll(nd); /* integer digits */
    if (ni == 0 || ni > 15 || (ni > 1 && *p == '0'))
        return NULL;
    int point = p[ni] == '.', at = ni + point;
    int fd = __builtin_ctzll(nd >> at), end = at + fd; /* fraction digits */
    if (end >= 32 || (point && fd == 0))
        return NULL;
    /* "0.00ddd": the significant digits start after the fraction's zeros
     * and hold no point; otherwise at p, with the point after ni digits */
    int lz = __builtin_ctzll(nz >> at), zint = *p == '0';
    lz = lz < fd ? lz : fd;
    const char *src = zint ? p + at + lz - 1 : p;
    int k = zint ? 0 : ni, sig = zint ? fd - lz : ni + fd;
    uint64_t w = srv_sixteen_digits(src, k, sig < 16 ? sig : 16);
    int q = (zint ? -lz : ni) - 16;
    p += end;
    if ((*p | 0x20) == 'e') {
        p++;
        int eneg = *p == '-', ex = 0, c = 0;
        p += eneg || *p == '+';
        for (; c < 3 && (unsigned)(*p - '0') <= 9; c++)
            ex = ex * 10 + (*p++ - '0');
        if (c == 0 || (unsigned)(*p - '0') <= 9)
            return NULL;
        q += eneg ? -ex : ex;
    }
    if (w == 0) {
        *out = neg ? -0.0f : 0.0f;
        *finite = 1;
        return p;
    }
    if (q < -44 || q > 22)
        return NULL;
    double d = (double)w * p10[q + 44];
    if (!srv_rounds_as_float(d))
        return NULL;
    float f = (float)d;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    bits |= (uint32_t)neg << 31; /* no branch on the sign, random in the data */
    memcpy(out, &bits, sizeof bits);
    *finite = 1;
    return p;
}

/* srv_parse_short's form, else srv_parse_float_long's. */
static inline const char *srv_parse_float_fast(const char *p, float *out, int *finite)
{
    int neg = *p == '-';
    const char *q = srv_parse_short(p + neg, neg, out, finite);
    return q ? q : srv_parse_float_long(p, out, finite);
}
#else
static inline const char *srv_parse_short(const char *p, int neg, float *out, int *finite)
{
    (void)p, (void)neg, (void)out, (void)finite;
    return NULL;
}

static inline const char *srv_parse_float_long(const char *p, float *out, int *finite)
{
    (void)p, (void)out, (void)finite;
    return NULL;
}

static inline const char *srv_parse_float_fast(const char *p, float *out, int *finite)
{
    (void)p, (void)out, (void)finite;
    return NULL;
}
#endif

#endif
