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

/* Bytes srv_parse_float_fast may read from p, whatever the text: the reads
 * look ahead eight bytes at a time. */
#define SRV_PARSE_FAST_PAD 64

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
/* SWAR: the 8 bytes at p less '0' in *d, and how many of them, from the
 * first, are digits. */
static inline int srv_swar_digits(const char *p, uint64_t *d)
{
    uint64_t x;
    memcpy(&x, p, 8);
    *d = x ^ 0x3030303030303030ull;
    uint64_t nd = (((*d & 0x7f7f7f7f7f7f7f7full) + 0x7676767676767676ull) | *d) &
                  0x8080808080808080ull;
    return nd ? __builtin_ctzll(nd) >> 3 : 8;
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

/* The numbers printers write, in one pass with eight digits at a time:
 * -?(0|[1-9][0-9]{0,6})(.[0-9]{1,23})?([eE][+-]?[0-9]{1,3})? with at most
 * 19 significant digits (Python's repr of a float32 gives up to 17, C's
 * "%.9g" 9). Reads at most SRV_PARSE_FAST_PAD bytes from p. Returns the
 * end, or NULL for anything else (the general path decides, and reports). */
static inline const char *srv_parse_float_fast(const char *p, float *out, int *finite)
{
    static const uint64_t p10u[9] = {1, 10, 100, 1000, 10000, 100000, 1000000,
                                     10000000, 100000000};
    /* m * 10^k + (k digits) < 10^19 (19 digits, none lost) iff m < lim[k] */
    static const uint64_t lim[9] = {0, 1000000000000000000ull, 100000000000000000ull,
                                    10000000000000000ull, 1000000000000000ull,
                                    100000000000000ull, 10000000000000ull,
                                    1000000000000ull, 100000000000ull};
    int neg = *p == '-';
    p += neg;
    uint64_t d;
    int n = srv_swar_digits(p, &d);
    if (n == 0 || n == 8 || (n > 1 && *p == '0'))
        return NULL;
    uint64_t m = n == 1 ? (d & 0xff) : srv_swar_value(d, n);
    p += n;
    int frac = 0;
    if (*p == '.') {
        const char *f0 = ++p;
        int k = srv_swar_digits(p, &d);
        for (int chunks = 0; k == 8; chunks++) {
            if (chunks == 2 || m >= lim[8])
                return NULL; /* past 24 digits, or past 19 significant */
            m = m * 100000000u + srv_swar_value(d, 8);
            p += 8;
            k = srv_swar_digits(p, &d);
        }
        if (k) {
            if (m >= lim[k])
                return NULL;
            m = m * p10u[k] + srv_swar_value(d, k);
            p += k;
        }
        frac = (int)(p - f0);
        if (frac == 0)
            return NULL;
    }
    int e10 = -frac;
    if ((*p | 0x20) == 'e') {
        p++;
        int eneg = *p == '-', ex = 0, k = 0;
        p += eneg || *p == '+';
        for (; k < 3 && (unsigned)(*p - '0') <= 9; k++)
            ex = ex * 10 + (*p++ - '0');
        if (k == 0 || (unsigned)(*p - '0') <= 9)
            return NULL;
        e10 += eneg ? -ex : ex;
    }
    if (m == 0) {
        *out = neg ? -0.0f : 0.0f;
        *finite = 1;
        return p;
    }
    return srv_eisel_lemire(m, e10, neg, out, finite) ? p : NULL;
}
#else
static inline const char *srv_parse_float_fast(const char *p, float *out, int *finite)
{
    (void)p, (void)out, (void)finite;
    return NULL;
}
#endif

#endif
