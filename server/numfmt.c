/* numfmt.c - exact float32 printing (9 significant digits, the text of
 * "%.9g") and parsing (Eisel-Lemire, numparse.h; strtof when it cannot
 * decide) without printf/strtod in the common case: the wire's big number
 * arrays go through here. */
#include "srv.h"
#include "numparse.h"

#include <errno.h>
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
static inline __attribute__((always_inline)) void digits9(double d, uint32_t *n, int *k)
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
        if (fabs(frac - 0.5) < 1e-6) /* one test: frac > 0.5 - 1e-6 alone is a coin toss */
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
static inline __attribute__((always_inline)) char *put_digits(char *p, uint32_t n, int x)
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
static inline __attribute__((always_inline)) char *put_digits(char *p, uint32_t n, int x)
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

static inline __attribute__((always_inline)) size_t fmt_float(float f, char *out)
{
    char *p = out;
    if (!isfinite(f)) { /* JSON has no such number; only lse's -inf comes here */
        memcpy(out, "null", 4);
        return 4;
    }
    *p = '-'; /* overwritten unless negative: no branch on a random sign */
    p += signbit(f) != 0;
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

size_t srv_fmt_float(float f, char *out) { return fmt_float(f, out); }

char *srv_fmt_floats(char *o, const float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        o += fmt_float(v[i], o);
        *o++ = ',';
    }
    return n > 0 ? o - 1 : o; /* the last ',' left past the end */
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

/* Consumes a run of digits at p into m (at most 19 significant digits):
 * *kept counts digits taken into m, *extra those past the 19th and
 * *extra_nz whether any of those was not '0'. Eight digits at a time
 * where it can (SWAR, after simdjson's parse_eight_digits), so the run's
 * length costs no branch mispredictions. */
static const char *digit_run(const char *p, const char *end, uint64_t *m, int *sig,
                             int64_t *kept, int64_t *extra, int *extra_nz)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    static const uint64_t p10u[9] = {1, 10, 100, 1000, 10000, 100000, 1000000,
                                     10000000, 100000000};
    while (end - p >= 8) {
        uint64_t d;
        int cnt = srv_swar_digits(p, &d);
        if (cnt == 0)
            return p;
        uint64_t dm = cnt == 8 ? d : d & ((1ull << (8 * cnt)) - 1);
        int lz = *m ? 0 : (dm ? __builtin_ctzll(dm) >> 3 : cnt);
        if (*sig + cnt - lz > 19)
            break; /* the scalar loop below handles the 19-digit edge */
        *m = *m * p10u[cnt] + srv_swar_value(d, cnt);
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

/* Any JSON number, within [p, end): its digits (the first 19 significant
 * ones) and exponent, then Eisel-Lemire; when digits past the 19th were
 * dropped, the value lies between m and m + 1 units of the last kept digit,
 * and if both round to the same float so does it. strtof decides what
 * Eisel-Lemire cannot. Kept out of line so the fast path does not pay this
 * function's register saves. */
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
    int sig = 0, lost = 0;
    int64_t drop = 0, kept = 0; /* digit counts: up to the body's length */
    if (*p == '0')
        p++;
    else
        p = digit_run(p, end, &m, &sig, &kept, &drop, &lost);
    int64_t frac = 0;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || (unsigned)(*p - '0') > 9)
            return NULL;
        int64_t fextra = 0;
        p = digit_run(p, end, &m, &sig, &frac, &fextra, &lost);
    }
    /* the exponent saturates at EX_MAX, beyond any count of digits (so
     * frac and drop never bring a saturated one back into range: a 1 and
     * 10^6 zeros then e-1000000 is 1, not 10^(10^6 - 10^5)) */
    const int64_t EX_MAX = (int64_t)1 << 50;
    int64_t ex = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-'))
            eneg = *p++ == '-';
        if (p >= end || (unsigned)(*p - '0') > 9)
            return NULL;
        while (p < end && (unsigned)(*p - '0') <= 9) {
            if (ex < EX_MAX)
                ex = ex * 10 + (*p - '0');
            p++;
        }
        if (eneg)
            ex = -ex;
    }
    if (m == 0) { /* all digits zero (19 significant ones are kept) */
        *out = neg ? -0.0f : 0.0f;
        *finite = 1;
        return p;
    }
    /* |ex| < 10 EX_MAX, and frac, drop <= the body's length: no overflow */
    int64_t e10 = ex - frac + drop;
    int q = e10 < -100000 ? -100000 : e10 > 100000 ? 100000 : (int)e10;
    float hi;
    int fin_hi;
    if (srv_eisel_lemire(m, q, neg, out, finite) &&
        (!lost || (srv_eisel_lemire(m + 1, q, neg, &hi, &fin_hi) &&
                   memcmp(&hi, out, sizeof hi) == 0)))
        return p;
    return parse_slow(start, p, out, finite);
}

const char *srv_parse_float(const char *p, const char *end, float *out, int *finite)
{
    if (end - p >= SRV_PARSE_FAST_PAD) {
        const char *q = srv_parse_float_fast(p, out, finite);
        if (q)
            return q;
    } else if (end - p >= SRV_PARSE_SHORT_PAD) { /* a body's last numbers */
        int neg = *p == '-';
        const char *q = srv_parse_short(p + neg, neg, out, finite);
        if (q)
            return q;
    }
    return parse_general(p, end, out, finite);
}
