/* numfmt.c - exact float32 printing (9 significant digits, the text of
 * "%.9g") and parsing (fast paths, strtof fallback) without printf/strtod
 * in the common case: the wire's big number arrays go through here. */
#include "srv.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1e-32 .. 1e56, each the double nearest to the power (compiler-rounded). */
static const double p10[] = {
    1e-32, 1e-31, 1e-30, 1e-29, 1e-28, 1e-27, 1e-26, 1e-25, 1e-24, 1e-23, 
    1e-22, 1e-21, 1e-20, 1e-19, 1e-18, 1e-17, 1e-16, 1e-15, 1e-14, 1e-13, 
    1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 
    1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 
    1e26, 1e27, 1e28, 1e29, 1e30, 1e31, 1e32, 1e33, 1e34, 1e35, 1e36, 1e37, 
    1e38, 1e39, 1e40, 1e41, 1e42, 1e43, 1e44, 1e45, 1e46, 1e47, 1e48, 1e49, 
    1e50, 1e51, 1e52, 1e53, 1e54, 1e55, 1e56
};
#define P10_MIN (-32)
#define P10_MAX 56

static double pow10d(int e) { return p10[e - P10_MIN]; }

/* Slow but exact: the C library's rounding, used for near-ties only. */
static void digits_slow(double d, uint32_t *n, int *k)
{
    char tmp[40];
    snprintf(tmp, sizeof tmp, "%.8e", d); /* d.dddddddde±XX */
    uint32_t v = (uint32_t)(tmp[0] - '0');
    for (int i = 2; i < 10; i++)
        v = v * 10 + (uint32_t)(tmp[i] - '0');
    *n = v;
    *k = atoi(tmp + 11);
}

/* 9 significant digits of d > 0 as n in [1e8, 1e9) and d ~= n * 10^(k-8).
 * Scaling in double is accurate to a few ulps (~4e-7 at 1e9), so the
 * rounding is exact unless the scaled value is within 1e-6 of a tie. */
static void digits9(double d, uint32_t *n, int *k)
{
    /* floor(log10(d)) estimated from the binary exponent; off by at most
     * one, which the loop below corrects. */
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    int be = (int)((bits >> 52) & 0x7ff) - 1023;
    int e = (be * 1233) >> 12;
    for (int tries = 0; tries < 3; tries++) {
        int sh = 8 - e;
        if (sh < P10_MIN || sh > P10_MAX)
            break;
        double s = d * pow10d(sh);
        if (s >= 999999999.5) {
            e++;
            continue;
        }
        if (s < 99999999.5) {
            e--;
            continue;
        }
        uint32_t fl = (uint32_t)s; /* s > 0: truncation is floor, and inline */
        double frac = s - (double)fl;
        if (frac > 0.5 - 1e-6 && frac < 0.5 + 1e-6)
            break;
        uint32_t v = fl + (frac > 0.5);
        if (v >= 1000000000u) {
            v = 100000000u;
            e++;
        }
        *n = v;
        *k = e;
        return;
    }
    digits_slow(d, n, k);
}

/* Writes the 9 digits n with decimal exponent x as %.9g does, at p;
 * returns the end. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline char *put_digits(char *p, uint32_t n, int x)
{
    /* The last 8 digits as 8 bytes of one register, first digit in the
     * low byte (SWAR halving: 4+4, 2+2, 1+1 digits per lane), so they are
     * stored once, never written piecewise and read back whole (a
     * store-forwarding stall per float). */
    uint64_t r = n % 100000000u;
    uint64_t v = r / 10000 | (r % 10000) << 32;
    uint64_t q = (v * 10486) >> 20 & 0x0000007f0000007full; /* /100 per lane */
    v = q | (v - q * 100) << 16;
    q = (v * 103) >> 10 & 0x000f000f000f000full;            /* /10 per lane */
    v = q | (v - q * 10) << 8;
    /* Trailing zeros are dropped, as %g does: the high zero bytes. */
    int nd = v ? 9 - (__builtin_clzll(v) >> 3) : 1;
    char d0 = (char)('0' + n / 100000000u);
    v |= 0x3030303030303030ull;
    /* Stores of 8 bytes past the text are overwritten or left past the
     * returned length: out has 24 bytes, and no form writes past its 18th
     * (the text is at most 15). */
    if (x < -4 || x >= 9) {
        *p++ = d0;
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, &v, 8);
            p += nd - 1;
        }
        *p++ = 'e';
        *p++ = x < 0 ? '-' : '+';
        int ax = x < 0 ? -x : x;
        p[0] = (char)('0' + ax / 10);
        p[1] = (char)('0' + ax % 10);
        p += 2;
    } else if (x >= 0) {
        p[0] = d0;
        memcpy(p + 1, &v, 8);
        if (nd > x + 1) { /* x <= 7 here */
            p[x + 1] = '.';
            uint64_t rest = v >> (8 * x);
            memcpy(p + x + 2, &rest, 8);
            p += nd + 1;
        } else {
            p += x + 1;
        }
    } else {
        memcpy(p, "0.0000", 6); /* "0." and up to 3 zeros: x is -1 .. -4 */
        p += 1 - x;
        p[0] = d0;
        memcpy(p + 1, &v, 8);
        p += nd;
    }
    return p;
}
#else
static inline char *put_digits(char *p, uint32_t n, int x)
{
    static const char pairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    char dg[17]; /* 9 digits, then room for the fixed-size copies below */
    uint32_t hi = n / 10000, lo = n % 10000; /* 5 + 4 digits */
    memcpy(dg + 7, pairs + 2 * (lo % 100), 2);
    memcpy(dg + 5, pairs + 2 * (lo / 100), 2);
    memcpy(dg + 3, pairs + 2 * (hi % 100), 2);
    memcpy(dg + 1, pairs + 2 * (hi / 100 % 100), 2);
    dg[0] = (char)('0' + hi / 10000);
    int nd = 9; /* trailing zeros are dropped, as %g does */
    while (nd > 1 && dg[nd - 1] == '0')
        nd--;
    /* The digits are copied 8 or 9 bytes at a time and p advanced by the
     * count wanted (a variable-length memcpy is a library call): out has
     * 24 bytes, and no form writes past its 18th (the text is <= 15). */
    memset(dg + 9, '0', sizeof dg - 9);
    if (x < -4 || x >= 9) {
        *p++ = dg[0];
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, dg + 1, 8);
            p += nd - 1;
        }
        *p++ = 'e';
        *p++ = x < 0 ? '-' : '+';
        int ax = x < 0 ? -x : x;
        if (ax >= 10) {
            *p++ = (char)('0' + ax / 10);
            *p++ = (char)('0' + ax % 10);
        } else {
            *p++ = '0';
            *p++ = (char)('0' + ax);
        }
    } else if (x >= 0) {
        memcpy(p, dg, 9);
        p += x + 1;
        if (nd > x + 1) {
            *p++ = '.';
            memcpy(p, dg + x + 1, 8);
            p += nd - x - 1;
        }
    } else {
        memcpy(p, "0.0000", 6); /* "0." and up to 3 zeros: x is -1 .. -4 */
        p += 1 - x;
        memcpy(p, dg, 9);
        p += nd;
    }
    return p;
}
#endif

size_t srv_fmt_float(float f, char *out)
{
    char *p = out;
    if (!isfinite(f))
        f = 0.0f;
    if (signbit(f))
        *p++ = '-';
    double d = fabs((double)f);
    if (d == 0.0) {
        *p++ = '0';
        return (size_t)(p - out);
    }
    uint32_t n;
    int x;
    digits9(d, &n, &x);
    return (size_t)(put_digits(p, n, x) - out);
}

size_t srv_fmt_u64(uint64_t v, char *out)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

size_t srv_fmt_ms(double ms, char *out)
{
    if (!(ms >= 0.0 && ms < 1e12)) /* also NaN */
        return (size_t)snprintf(out, 32, "%.3f", ms);
    uint64_t u = (uint64_t)(ms * 1000.0 + 0.5);
    size_t n = srv_fmt_u64(u / 1000, out);
    uint32_t f = (uint32_t)(u % 1000);
    out[n++] = '.';
    out[n++] = (char)('0' + f / 100);
    out[n++] = (char)('0' + f / 10 % 10);
    out[n++] = (char)('0' + f % 10);
    return n;
}

/* ------------------------------------------------------------ parsing */

static const float p10f[] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f,
                             1e6f, 1e7f, 1e8f, 1e9f, 1e10f};

static const char *parse_slow(const char *start, const char *stop,
                              float *out, int *finite)
{
    char tmp[128];
    size_t n = (size_t)(stop - start);
    char *s = n < sizeof tmp ? tmp : malloc(n + 1);
    if (!s)
        return NULL;
    memcpy(s, start, n);
    s[n] = '\0';
    errno = 0;
    float f = strtof(s, NULL);
    if (s != tmp)
        free(s);
    *out = f;
    *finite = isfinite(f);
    return stop;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* SWAR: the 8 bytes at p less '0' in *d, and how many of them, from the
 * first, are digits. */
static inline int swar_digits(const char *p, uint64_t *d)
{
    uint64_t x;
    memcpy(&x, p, 8);
    *d = x ^ 0x3030303030303030ull;
    uint64_t nd = (((*d & 0x7f7f7f7f7f7f7f7full) + 0x7676767676767676ull) | *d) &
                  0x8080808080808080ull;
    return nd ? __builtin_ctzll(nd) >> 3 : 8;
}

/* The number the first cnt (1..8) digits of d spell. */
static inline uint64_t swar_value(uint64_t d, int cnt)
{
    uint64_t v = cnt == 8 ? d : d << (8 * (8 - cnt)); /* the digits, high-aligned */
    v = v * 10 + (v >> 8);
    return (((v & 0x000000FF000000FFull) * (100 + (1000000ull << 32))) +
            (((v >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32)))) >> 32;
}
#endif

/* Consumes a run of digits at p into m (at most 19 significant digits):
 * *kept counts digits taken into m, *extra those past the 19th and
 * *extra_nz whether any of those was not '0'. Eight digits at a time
 * where it can (SWAR, after simdjson's parse_eight_digits), so the run's
 * length costs no branch mispredictions. */
static const char *digit_run(const char *p, const char *end, uint64_t *m, int *sig,
                             int *kept, int *extra, int *extra_nz)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    static const uint64_t p10u[9] = {1, 10, 100, 1000, 10000, 100000, 1000000,
                                     10000000, 100000000};
    while (end - p >= 8) {
        uint64_t d;
        int cnt = swar_digits(p, &d);
        if (cnt == 0)
            return p;
        uint64_t dm = cnt == 8 ? d : d & ((1ull << (8 * cnt)) - 1);
        int lz = *m ? 0 : (dm ? __builtin_ctzll(dm) >> 3 : cnt);
        if (*sig + cnt - lz > 19)
            break; /* the scalar loop below handles the 19-digit edge */
        *m = *m * p10u[cnt] + swar_value(d, cnt);
        *sig += cnt - lz;
        *kept += cnt;
        p += cnt;
        if (cnt < 8)
            return p;
    }
#endif
    while (p < end && (unsigned)(*p - '0') <= 9) {
        if (*sig < 19) {
            *m = *m * 10 + (uint64_t)(*p - '0');
            if (*m)
                (*sig)++;
            (*kept)++;
        } else {
            (*extra)++;
            *extra_nz |= *p != '0';
        }
        p++;
    }
    return p;
}

/* The common short decimal, -?d+(.d+)? with at most 7 digits in all and
 * no exponent: m < 2^24 and 10^frac are exact floats, so one division is
 * correctly rounded (the general path's first case, reached without its
 * bookkeeping). Returns the end, or NULL for anything else. */
static const char *parse_short(const char *p, const char *end, int neg, float *out)
{
    uint32_t m = 0;
    int nd = 0, frac = 0;
    while (p < end && (unsigned)(*p - '0') <= 9 && nd < 8) {
        m = m * 10 + (uint32_t)(*p++ - '0');
        nd++;
    }
    if (nd == 0 || (nd > 1 && m < p10f[nd - 1]) || nd > 7)
        return NULL; /* a leading zero, or long: the general path */
    if (p < end && *p == '.') {
        p++;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (end - p >= 8) {
            /* all the fraction's digits at once (SWAR, as in digit_run) */
            uint64_t d;
            frac = swar_digits(p, &d);
            if (frac == 0 || nd + frac > 7)
                return NULL;
            static const uint32_t p10u[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
            m = m * p10u[frac] + (uint32_t)swar_value(d, frac);
            p += frac;
        } else
#endif
        {
            while (p < end && (unsigned)(*p - '0') <= 9 && nd + frac < 8) {
                m = m * 10 + (uint32_t)(*p++ - '0');
                frac++;
            }
            if (frac == 0 || nd + frac > 7)
                return NULL;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E' || (unsigned)(*p - '0') <= 9))
        return NULL;
    float f = (float)m / p10f[frac]; /* m == 0 gives +0 */
    *out = neg ? -f : f;
    return p;
}

/* m * 10^e10 as the nearest float, when m <= 2^53 and |e10| <= 22: both are
 * exact doubles, so the double product or quotient is correctly rounded,
 * and rounding it to float is exact unless it sits exactly on a float
 * midpoint or below FLT_MIN (then 0: the caller takes the general path). */
static inline int clinger(uint64_t m, int e10, int neg, float *out, int *finite)
{
    double d = (double)m;
    d = e10 >= 0 ? d * pow10d(e10) : d / pow10d(-e10);
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    if (d < (double)FLT_MIN || (bits & 0x1fffffffull) == 0x10000000ull)
        return 0;
    float f = (float)d;
    *finite = isfinite(f);
    *out = neg ? -f : f;
    return 1;
}

/* Everything parse_short does not take; kept out of line so the short
 * path does not pay this function's register saves. */
__attribute__((noinline))
static const char *parse_general(const char *p, const char *end, float *out, int *finite)
{
    const char *start = p;
    int neg = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end || (unsigned)(*p - '0') > 9)
        return NULL;
    uint64_t m = 0;
    int sig = 0, drop = 0, kept = 0, extra_nz = 0;
    if (*p == '0')
        p++;
    else
        p = digit_run(p, end, &m, &sig, &kept, &drop, &extra_nz);
    int frac = 0;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || (unsigned)(*p - '0') > 9)
            return NULL;
        int fextra = 0, fnz = 0;
        p = digit_run(p, end, &m, &sig, &frac, &fextra, &fnz);
        if (fnz)
            drop = -1000000; /* digits lost: only strtof is exact */
    }
    int ex = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-'))
            eneg = *p++ == '-';
        if (p >= end || (unsigned)(*p - '0') > 9)
            return NULL;
        while (p < end && (unsigned)(*p - '0') <= 9) {
            if (ex < 100000)
                ex = ex * 10 + (*p - '0');
            p++;
        }
        if (eneg)
            ex = -ex;
    }
    if (drop < 0)
        return parse_slow(start, p, out, finite);
    int e10 = ex - frac + drop;
    *finite = 1;
    if (m == 0) {
        *out = neg ? -0.0f : 0.0f;
        return p;
    }
    if (drop == 0 && m <= (1u << 24) && e10 >= -10 && e10 <= 10) {
        /* Both operands exact in float: one correctly rounded operation. */
        float f = (float)m;
        f = e10 >= 0 ? f * p10f[e10] : f / p10f[-e10];
        *out = neg ? -f : f;
        return p;
    }
    if (drop == 0 && m <= (1ull << 53) && e10 >= -22 && e10 <= 22 &&
        clinger(m, e10, neg, out, finite))
        return p;
    if (drop == 0 && e10 >= -27 && e10 <= 27) {
        /* Up to 19 digits (Python's float32 repr gives 17): m and 10^|e10|
         * are exact in a 64-bit significand, so the long double result is
         * correctly rounded, and rounding it to float is exact unless it
         * sits exactly on a float midpoint (then strtof decides). */
        static const long double p10l[] = {
            1e0L, 1e1L, 1e2L, 1e3L, 1e4L, 1e5L, 1e6L, 1e7L, 1e8L, 1e9L, 1e10L,
            1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L, 1e20L,
            1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
        if (LDBL_MANT_DIG >= 64) {
            long double x = (long double)m;
            x = e10 >= 0 ? x * p10l[e10] : x / p10l[-e10];
            if (x >= (long double)FLT_MIN && x <= (long double)(FLT_MAX / 2)) {
                float f = (float)x;
                float g = x > (long double)f ? nextafterf(f, INFINITY) : nextafterf(f, -INFINITY);
                if (x == (long double)f || x != ((long double)f + (long double)g) * 0.5L) {
                    *out = neg ? -f : f;
                    return p;
                }
            }
        }
    }
    return parse_slow(start, p, out, finite);
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__

/* The numbers a client's printer writes, in one pass with eight digits at a
 * time: -?(0|[1-9][0-9]{0,6})(.[0-9]{1,15})?([eE][+-]?[0-9]{1,3})? with at
 * most 19 digits in all (Python's float32 repr, C's "%.9g", JavaScript's
 * shortest form). Needs 32 readable bytes from p (the reads look ahead).
 * Returns the end, or NULL for anything else (the general path decides). */
static const char *parse_fast(const char *p, float *out, int *finite)
{
    static const uint64_t p10u[9] = {1, 10, 100, 1000, 10000, 100000, 1000000,
                                     10000000, 100000000};
    int neg = *p == '-';
    p += neg;
    uint64_t d;
    int n = swar_digits(p, &d);
    if (n == 0 || n == 8 || (n > 1 && *p == '0'))
        return NULL;
    uint64_t m = swar_value(d, n);
    p += n;
    int frac = 0;
    if (*p == '.') {
        int f = swar_digits(++p, &d);
        if (f == 8) {
            m = m * 100000000u + swar_value(d, 8);
            p += 8;
            frac = 8;
            f = swar_digits(p, &d);
            if (f == 8)
                return NULL;
        } else if (f == 0) {
            return NULL;
        }
        if (f) {
            m = m * p10u[f] + swar_value(d, f);
            p += f;
            frac += f;
        }
        if (n + frac > 19)
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
    if (m > (1ull << 53) || e10 < -22 || e10 > 22 || !clinger(m, e10, neg, out, finite))
        return NULL;
    return p;
}
#endif

const char *srv_parse_float(const char *p, const char *end, float *out, int *finite)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (end - p >= 32) {
        const char *q = parse_fast(p, out, finite);
        if (q)
            return q;
    }
#endif
    int neg = p < end && *p == '-';
    const char *q = parse_short(p + neg, end, neg, out);
    if (q) {
        *finite = 1;
        return q;
    }
    return parse_general(p, end, out, finite);
}
