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
        double fl = floor(s), frac = s - fl;
        if (fabs(frac - 0.5) < 1e-6)
            break;
        uint32_t v = (uint32_t)fl + (frac > 0.5);
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
    static const char pairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    char dg[9];
    uint32_t hi = n / 10000, lo = n % 10000; /* 5 + 4 digits */
    memcpy(dg + 7, pairs + 2 * (lo % 100), 2);
    memcpy(dg + 5, pairs + 2 * (lo / 100), 2);
    memcpy(dg + 3, pairs + 2 * (hi % 100), 2);
    memcpy(dg + 1, pairs + 2 * (hi / 100 % 100), 2);
    dg[0] = (char)('0' + hi / 10000);
    int nd = 9; /* trailing zeros are dropped, as %g does */
    while (nd > 1 && dg[nd - 1] == '0')
        nd--;
    if (x < -4 || x >= 9) {
        *p++ = dg[0];
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, dg + 1, (size_t)nd - 1);
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
        memcpy(p, dg, (size_t)x + 1);
        p += x + 1;
        if (nd > x + 1) {
            *p++ = '.';
            memcpy(p, dg + x + 1, (size_t)(nd - x - 1));
            p += nd - x - 1;
        }
    } else {
        *p++ = '0';
        *p++ = '.';
        for (int i = 0; i < -x - 1; i++)
            *p++ = '0';
        memcpy(p, dg, (size_t)nd);
        p += nd;
    }
    return (size_t)(p - out);
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

const char *srv_parse_float(const char *p, const char *end, float *out, int *finite)
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
    int sig = 0, drop = 0; /* significant digits kept, integer digits dropped */
    if (*p == '0') {
        p++;
    } else {
        while (p < end && (unsigned)(*p - '0') <= 9) {
            if (sig < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                if (m)
                    sig++;
            } else {
                drop++;
            }
            p++;
        }
    }
    int frac = 0;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || (unsigned)(*p - '0') > 9)
            return NULL;
        while (p < end && (unsigned)(*p - '0') <= 9) {
            if (sig < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                if (m)
                    sig++;
                frac++;
            } else if (*p != '0') {
                drop = -1000000; /* digits lost: only strtof is exact */
            }
            p++;
        }
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
    if (drop == 0 && m <= (1ull << 53) && e10 >= -22 && e10 <= 22) {
        double d = (double)m;
        d = e10 >= 0 ? d * pow10d(e10) : d / pow10d(-e10);
        /* d is the correctly rounded double; rounding it again to float is
         * exact unless d sits exactly on a float midpoint. */
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        if (d >= (double)FLT_MIN && (bits & 0x1fffffffull) != 0x10000000ull) {
            float f = (float)d;
            *finite = isfinite(f);
            *out = neg ? -f : f;
            return p;
        }
    }
    return parse_slow(start, p, out, finite);
}
