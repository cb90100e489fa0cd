/* test_wire.c - the wire codecs against independent references: float
 * printing against printf("%.9g"), float parsing against strtof, base64
 * against RFC 4648's vectors and a round trip, the scanner's fast path
 * against the plain Jansson path on random (and randomly broken) tensors,
 * and the kept threads that parse and print big arrays' second halves. */
#define SELFTEST_SEED 0x9e3779b97f4a7c15ull
#include "selftest.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* srv_parse_float on the n bytes at s followed by ",]" and spaces, as in
 * a body (the parser's fast path reads ahead, which the end of a lone
 * number forbids): the same result as at the number's own end, or NULL. */
static const char *parse_in_body(const char *s, size_t n, float *out, int *fin)
{
    char *body = malloc(n + 80);
    if (!body)
        return NULL;
    memcpy(body, s, n);
    memcpy(body + n, ",]", 2);
    memset(body + n + 2, ' ', 78);
    const char *e = srv_parse_float(body, body + n + 80, out, fin);
    e = e ? s + (e - body) : NULL;
    free(body);
    return e;
}

/* Every printed float must equal printf's "%.9g" text and parse back to
 * the same bits. */
static void test_fmt(long n)
{
    long bad = 0, badp = 0;
    char a[64], b[64];
    const float odd[] = {-INFINITY, INFINITY, NAN};
    for (int i = 0; i < 3; i++) {
        size_t k = srv_fmt_float(odd[i], a);
        a[k] = '\0';
        check(!strcmp(a, "null"), "a non-finite float is written as null (JSON has no such number)", a);
    }
    for (long i = 0; i < n; i++) {
        uint32_t u = (uint32_t)rnd();
        float f;
        memcpy(&f, &u, 4);
        if (i % 3 == 0)
            f = (float)((int)(rnd() % 20000) - 10000) / (float)(1 + rnd() % 1000);
        if (!isfinite(f))
            continue;
        size_t k = srv_fmt_float(f, a);
        a[k] = '\0';
        snprintf(b, sizeof b, "%.9g", f);
        if (strcmp(a, b) && bad++ < 3)
            check(0, "fmt vs %.9g", b);
        float g;
        int fin;
        const char *e = srv_parse_float(a, a + k, &g, &fin);
        if ((!e || e != a + k || memcmp(&g, &f, 4)) && badp++ < 3)
            check(0, "round trip", a);
        e = parse_in_body(a, k, &g, &fin);
        if ((!e || e != a + k || memcmp(&g, &f, 4)) && badp++ < 3)
            check(0, "round trip in a body", a);
    }
    check(bad == 0, "fmt: all equal to %.9g", "");
    check(badp == 0, "fmt: all round trip", "");
}

/* A random decimal into b: an optional '-', nint digits (no leading zero
 * unless alone), then '.' and nfrac digits when nfrac > 0; returns its
 * length (not terminated). */
static int random_decimal(char *b, int nint, int nfrac)
{
    int n = 0;
    if (rnd() & 1)
        b[n++] = '-';
    for (int i = 0; i < nint; i++)
        b[n++] = (char)('0' + (i == 0 && nint > 1 ? 1 + rnd() % 9 : rnd() % 10));
    if (nfrac)
        b[n++] = '.';
    for (int i = 0; i < nfrac; i++)
        b[n++] = (char)('0' + rnd() % 10);
    return n;
}

/* A number of the parser's fast form (see numfmt.c), or just past it:
 * sign, 1-8 integer digits, 0-17 fraction digits, an exponent or not; one
 * in four is a float midpoint printed with 16-19 significant digits, where
 * a double rounding would go wrong. Returns its length. */
static int fast_form(char *b, size_t cap)
{
    if (rnd() % 4 == 0) {
        uint32_t u = (uint32_t)rnd() & 0x7effffffu;
        float f;
        memcpy(&f, &u, 4);
        double mid = ((double)f + (double)nextafterf(f, INFINITY)) / 2;
        return snprintf(b, cap, "%.*g", (int)(16 + rnd() % 4), rnd() & 1 ? mid : -mid);
    }
    int nint = 1 + (int)(rnd() % 8), nfrac = (int)(rnd() % 18);
    int n = random_decimal(b, nint, nfrac);
    if (rnd() & 1)
        n += snprintf(b + n, cap - (size_t)n, "%c%s%d", rnd() & 1 ? 'e' : 'E',
                      rnd() % 3 == 0 ? "+" : rnd() & 1 ? "-" : "",
                      (int)(rnd() % (rnd() & 1 ? 40 : 1100)));
    else
        b[n] = '\0';
    return n;
}

/* Parsing must give strtof's float for any JSON number, including 17-digit
 * reprs, long mantissas, extreme exponents and exact float midpoints. */
static void test_parse(long n)
{
    long bad = 0;
    char b[96];
    for (long i = 0; i < n; i++) {
        int len;
        uint32_t u = (uint32_t)rnd();
        float f;
        switch (i % 6) {
        case 0:
            memcpy(&f, &u, 4);
            if (!isfinite(f))
                continue;
            len = snprintf(b, sizeof b, "%.17g", (double)f);
            break;
        case 1:
            len = snprintf(b, sizeof b, "%s0.%0*llu", rnd() & 1 ? "-" : "", (int)(1 + rnd() % 19),
                           (unsigned long long)(rnd() % 10000000000000000000ull));
            break;
        case 2:
            len = snprintf(b, sizeof b, "%llue%d", (unsigned long long)(rnd() % 10000000000000000000ull),
                           (int)(rnd() % 90) - 60);
            break;
        case 3:
            len = snprintf(b, sizeof b, "%llu.%llu", (unsigned long long)(rnd() % 100000000000000000ull),
                           (unsigned long long)(rnd() % 1000000000000ull));
            break;
        case 5: /* the fast path's form, and a little past it: digit counts
                 * drawn uniformly, some near a float midpoint */
            len = fast_form(b, sizeof b);
            break;
        default: { /* the exact midpoint between two floats */
            u &= 0x7effffffu;
            memcpy(&f, &u, 4);
            float g = nextafterf(f, INFINITY);
            len = snprintf(b, sizeof b, "%.60g", ((double)f + (double)g) / 2);
            if (len >= (int)sizeof b)
                continue;
        }
        }
        float want = strtof(b, NULL), got;
        int fin;
        const char *e = srv_parse_float(b, b + len, &got, &fin);
        if ((!e || e != b + len || memcmp(&got, &want, 4)) && bad++ < 3)
            check(0, "parse vs strtof", b);
        e = parse_in_body(b, (size_t)len, &got, &fin);
        if ((!e || e != b + len || memcmp(&got, &want, 4)) && bad++ < 3)
            check(0, "parse in a body vs strtof", b);
    }
    check(bad == 0, "parse: all equal to strtof", "");
    const char *not_numbers[] = {"-", ".5", "1.", "1e", "+1", "-x", "e5", "01", "-01.5",
                                 "1.e5", "1e+", "2.5E-", "00"};
    for (size_t i = 0; i < sizeof not_numbers / sizeof *not_numbers; i++) {
        float g;
        int fin;
        const char *s = not_numbers[i];
        const char *e = srv_parse_float(s, s + strlen(s), &g, &fin);
        check(!e || e != s + strlen(s), "not a JSON number", s);
        e = parse_in_body(s, strlen(s), &g, &fin);
        check(!e || e != s + strlen(s), "not a JSON number in a body", s);
    }
    float g;
    int fin = 1;
    const char big[] = "1e39";
    srv_parse_float(big, big + 4, &g, &fin);
    check(!fin, "1e39 overflows float32", "");
}

/* One number text against strtof: the same bits and the same finiteness,
 * the whole text consumed, both at the text's own end (the general path)
 * and inside a body (the fast path). Returns 1 when all agree. */
static int parse_agrees(const char *b)
{
    size_t len = strlen(b);
    float want = strtof(b, NULL), got;
    int fin = -1;
    const char *e = srv_parse_float(b, b + len, &got, &fin);
    if (!e || e != b + len || memcmp(&got, &want, 4) || fin != !!isfinite(want))
        return 0;
    fin = -1;
    e = parse_in_body(b, len, &got, &fin);
    if (!e || e != b + len || memcmp(&got, &want, 4) || fin != !!isfinite(want))
        return 0;
    if (len < 62) { /* near a body's end: 17 to 63 bytes left, then the text ends */
        char near[64];
        size_t total = len + 1 < 17 ? 17 : len + 1; /* 17: SRV_PARSE_SHORT_PAD */
        total += (size_t)(rnd() % (64 - total));
        memcpy(near, b, len);
        memset(near + len, ' ', total - len);
        near[len] = ']';
        fin = -1;
        e = srv_parse_float(near, near + total, &got, &fin);
        return e == near + len && !memcmp(&got, &want, 4) && fin == !!isfinite(want);
    }
    return 1;
}

/* The short form srv_parse_short takes (1-7 integer digits, 1-7 fraction
 * digits or none, no exponent), against strtof: uniform digit counts, and
 * the decimals of that form nearest to a float midpoint (and one unit of
 * the last digit beside it), where a rounding of the quotient to double
 * then to float could go wrong. */
static void test_parse_short(long n)
{
    long bad = 0, nearest = 0;
    char b[64];
    for (long i = 0; i < n; i++) {
        int len = 0;
        if (i % 2) {
            int nint = 1 + (int)(rnd() % 7), nfrac = (int)(rnd() % 8);
            len = random_decimal(b, nint, nfrac);
            b[len] = '\0';
        } else {
            /* a float in [1e-7, 1e7): its midpoint to the next, to 1..7
             * fraction digits, then maybe one unit of the last digit off */
            float f = ldexpf(1.0f + (float)(rnd() % 8388608) / 8388608.0f, (int)(rnd() % 47) - 23);
            double mid = ((double)f + (double)nextafterf(f, INFINITY)) / 2;
            int nfrac = 1 + (int)(rnd() % 7);
            double unit = pow(10.0, -nfrac), off = (double)((int)(rnd() % 3) - 1) * unit;
            len = snprintf(b, sizeof b, "%s%.*f", rnd() & 1 ? "-" : "", nfrac,
                           mid + off > 0 ? mid + off : mid);
            nearest++;
        }
        if (!parse_agrees(b) && bad++ < 5)
            check(0, "short form vs strtof", b);
    }
    check(bad == 0, "parse: the short form equals strtof", "");
    printf("parse: %ld short numbers (%ld near a midpoint) against strtof, %ld differ\n", n,
           nearest, bad);
}

/* Numbers whose exponent is far past any float's and whose digits bring
 * it back: a 1 and 10^6 zeros, then e-1000000, is 1. The exponent once
 * stopped growing at 100000 (1e-1000000 read as 1e-100000), so the
 * digits' count made such numbers 10^900000 times too large (read as 1
 * where they were 0) or too small. Each against strtof. */
static void test_parse_long_exponents(void)
{
    static const struct { const char *head; long zeros; const char *tail; } cases[] = {
        {"1", 1000000, "e-1000000"},   /* 1 */
        {"1", 100000, "e-1000000"},    /* 1e-900000: 0 */
        {"1", 1000000, "e-999999"},    /* 10 */
        {"0.", 1000000, "1e1000001"},  /* 1 */
        {"-0.", 1000000, "15e1000001"}, /* -1.5 */
        {"0.", 100000, "1e1000000"},   /* 1e899999: inf */
        {"1", 20, "e-99999999999999999999999"}, /* 0 */
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t h = strlen(cases[i].head), t = strlen(cases[i].tail), n = h + (size_t)cases[i].zeros + t;
        char *b = malloc(n + 1);
        if (!b) {
            check(0, "long exponents: out of memory", "");
            return;
        }
        memcpy(b, cases[i].head, h);
        memset(b + h, '0', (size_t)cases[i].zeros);
        memcpy(b + h + cases[i].zeros, cases[i].tail, t + 1);
        if (!parse_agrees(b) && bad++ < 3)
            check(0, "long exponent vs strtof", cases[i].tail);
        free(b);
    }
    check(bad == 0, "parse: long digit runs against far exponents equal strtof", "");
}

/* The midpoint between finite f and the next float away from zero (2^128,
 * where rounding turns to infinity, past FLT_MAX): exact in double. */
static double midpoint_out(float f)
{
    float g = nextafterf(f, signbit(f) ? -INFINITY : INFINITY);
    return ((double)f + (isfinite(g) ? (double)g : copysign(0x1p128, f))) / 2;
}

/* The hard cases of decimal to float32, each against strtof: exact
 * midpoints between neighbouring floats and the doubles just beside them
 * (printed with 17 to 25 significant digits and in full), subnormals and
 * the normal/subnormal edge, the overflow edge (FLT_MAX's midpoint to 2^128
 * rounds to infinity, just under it does not), 19- and 20-digit and longer
 * mantissas (digits dropped), exponents at and past the table's ends, -0
 * and long runs of zeros. */
static void test_parse_hard(long n)
{
    long bad = 0, total = 0;
    char b[1200];
#define HARD(...)                                                                 \
    do {                                                                          \
        snprintf(b, sizeof b, __VA_ARGS__);                                       \
        total++;                                                                  \
        if (!parse_agrees(b) && bad++ < 5)                                        \
            check(0, "hard case vs strtof", b);                                   \
    } while (0)
    static const char *fixed[] = {
        "0", "-0", "-0.0", "0.0e5", "-0e-999", "0e999", "1e-999", "-1e-999", "1e999", "-1e999",
        "1e38", "1e39", "3.4028234e38", "3.40282347e38", "3.4028235e38", "3.4028236e38",
        "-3.40282357e38", "3.3e38", "2e38", "0.34028236e39", "340282357000000000000000000000000000000",
        "3.40282356779733661637539395458142568447e38", /* just under the midpoint */
        "3.40282356779733661637539395458142568448e38", /* FLT_MAX/2^128 midpoint: inf */
        "340282356779733661637539395458142568448", "340282356779733661637539395458142568447.9",
        "1.17549435e-38", "1.1754942e-38", "1.1754943508222875e-38", "1.17549421069e-38",
        "1.4e-45", "1.401298464324817e-45", "7.006492321624085e-46", "7.0064923216240854e-46",
        "7.00649232162408535461864791644958065640130970938257885878534141944895541342930300743319094181060791015625e-46",
        "7.00649232162408535461864791644958065640130970938257885878534141944895541342930300743319094181060791015626e-46",
        "7.00649232162408535461864791644958065640130970938257885878534141944895541342930300743319094181060791015624e-46",
        "2.1019476964872256e-45", "1e-45", "1e-46", "9999999999999999999e-65", "9999999999999999999e-64",
        "1e-65", "1e-66", "12345678901234567890123e-85", "9999999999999999999e19", "1e38",
        "0.000000000000000000000000000000000000000000001", "16777217", "16777217.0", "16777217.000000001",
        "33554434", "33554435", "33554436", "0.1", "0.2", "0.3", "1.5", "2.5", "-2.5e-1",
        "1.00000005960464477539062", "1.000000059604644775390625", "1.000000059604644775390626",
        "1.00000017881393432617187499", "1.000000178813934326171875", "9007199254740993",
        "18446744073709551615", "18446744073709551616", "99999999999999999999", "10000000000000000000001",
        "0.99999997019767761230468749", "0.9999999701976776123046875", "0.99999997019767761230468751",
        "4.7019774032891500318749461488889827112746622270883500860350068251e-38",
        "1234567890123456789012345678901234567890e-40", "0.0000000000000000000000000000001e31",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        HARD("%s", fixed[i]);
    for (long i = 0; i < n; i++) {
        uint32_t u = (uint32_t)rnd();
        int kind = (int)(i % 8);
        if (kind == 1)
            u &= 0x807fffffu; /* subnormals */
        else if (kind == 2)
            u = (u & 0x80ffffffu) | (rnd() & 1 ? 0 : 0x7e000000u); /* near 0 or FLT_MAX */
        u &= rnd() % 16 ? 0xffffffffu : 0xffffff00u; /* some short mantissas */
        if ((u & 0x7f800000u) == 0x7f800000u)
            u &= 0xff7fffffu;
        float f;
        memcpy(&f, &u, 4);
        double mid = midpoint_out(f);
        double beside = rnd() & 1 ? nextafter(mid, 0) : nextafter(mid, 2 * mid);
        /* a few to a hundred doubles from the midpoint: the fast path's
         * double-precision check must send those within its error bound
         * (12 units) to the exact path, and may keep the others */
        double near = mid, away = rnd() & 1 ? 0 : 2 * mid;
        for (int k = (int)(rnd() % 100); k >= 0; k--)
            near = nextafter(near, away);
        int digits = 17 + (int)(rnd() % 9);
        switch (kind) {
        case 0:
        case 1:
        case 2:
            HARD("%.*g", digits, mid);
            HARD("%.*g", digits, beside);
            HARD("%.9g", (double)f);
            HARD("%.*g", 16 + (int)(rnd() % 4), near);
            break;
        case 3: /* the midpoint in full (every digit of it) */
            HARD("%.1000g", mid);
            HARD("%.1000e", beside);
            break;
        case 4: /* 19 and 20 significant digits, a shifted point */
            HARD("%llu%se%d", (unsigned long long)(rnd() % 10000000000000000000ull),
                 rnd() & 1 ? "" : "0", (int)(rnd() % 100) - 70);
            HARD("0.%llue%d", (unsigned long long)(rnd() | 1), (int)(rnd() % 100) - 50);
            break;
        case 5: /* the mantissa of a midpoint, then digits that tip it or not */
            HARD("%.17g%s", mid, rnd() & 1 ? "000000000000000001" : "00000000000000000");
            HARD("%.25e", mid);
            break;
        case 6: /* exponents at the table's ends */
            HARD("%llue%d", (unsigned long long)(1 + rnd() % 10000000000000000000ull),
                 (rnd() & 1 ? -65 : 38) - (int)(rnd() % 20));
            HARD("%s%llue-%d", rnd() & 1 ? "-" : "", (unsigned long long)(1 + rnd() % 100),
                 40 + (int)(rnd() % 10));
            break;
        default: /* Python's repr form of the float */
            HARD("%.17g", (double)f);
            HARD("%.*e", (int)(rnd() % 10), (double)f);
        }
    }
#undef HARD
    check(bad == 0, "parse: the hard cases equal strtof", "");
    printf("parse: %ld hard cases against strtof, %ld differ\n", total, bad);
}

static void test_b64(void)
{
    const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char o[32] = {0};
        uint8_t d[32];
        srv_b64_encode((const uint8_t *)plain[i], strlen(plain[i]), o);
        check(strcmp(o, enc[i]) == 0, "b64 encode RFC 4648 vector", enc[i]);
        int64_t n = srv_b64_decode(enc[i], strlen(enc[i]), d);
        check(n == (int64_t)strlen(plain[i]) && memcmp(d, plain[i], (size_t)n) == 0,
              "b64 decode RFC 4648 vector", enc[i]);
    }
    const char *bad[] = {"Zg=a", "Zm9", "Zm!v", "Z===", "=Zm9", "Zm9v\n"};
    for (int i = 0; i < 6; i++) {
        uint8_t d[16];
        check(srv_b64_decode(bad[i], strlen(bad[i]), d) == -1, "b64 rejects", bad[i]);
    }
    size_t n = 100003;
    uint8_t *a = malloc(n), *b = malloc(n + 3);
    char *t = malloc(srv_b64_encoded_len(n));
    for (size_t i = 0; i < n; i++)
        a[i] = (uint8_t)rnd();
    srv_b64_encode(a, n, t);
    int64_t k = srv_b64_decode(t, srv_b64_encoded_len(n), b);
    check(k == (int64_t)n && memcmp(a, b, n) == 0, "b64 round trip of 100003 bytes", "");
    /* The vector paths against RFC 4648 read bit by bit (an independent
     * reference: a round trip alone would pass an encoder and a decoder
     * wrong the same way). */
    static const char az[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    int ref_ok = 1;
    for (size_t c = 0; c < n / 3 * 4 && ref_ok; c++) {
        unsigned v = 0;
        for (size_t bit = c * 6; bit < c * 6 + 6; bit++)
            v = v << 1 | ((a[bit / 8] >> (7 - bit % 8)) & 1u);
        ref_ok = t[c] == az[v];
    }
    check(ref_ok, "b64 encode of 100003 bytes matches RFC 4648 bit by bit", "");
    /* Every length to 700 bytes (the vector decoder's block edges and its
     * 48-byte tail), and a bad byte at every position of a 400-byte text:
     * the output must hold exactly decoded_max bytes (writes past it are
     * caught by ASan and valgrind). */
    int lens_ok = 1, bad_ok = 1;
    for (size_t len = 0; len <= 700; len++) {
        size_t el = srv_b64_encoded_len(len);
        uint8_t *d = malloc(srv_b64_decoded_max(el));
        srv_b64_encode(a, len, t);
        lens_ok &= srv_b64_decode(t, el, d) == (int64_t)len && memcmp(a, d, len) == 0;
        free(d);
    }
    check(lens_ok, "b64 round trip of every length 0..700", "");
    srv_b64_encode(a, 300, t);
    uint8_t *d400 = malloc(srv_b64_decoded_max(400));
    /* bytes >= 0x80 whose low 7 bits are a letter ('A', 'a', '0', '+'):
     * the VBMI decoder looks up the low 7 bits only */
    const char bads[] = {'*', '=', '\x80', '\n', ' ', '\0', '-', '_', '\x7f', '\xff',
                         '\xc1', '\xe1', '\xb0', '\xab'};
    for (size_t pos = 0; pos < 396; pos++)
        for (size_t j = 0; j < sizeof bads; j++) {
            char keep = t[pos];
            t[pos] = bads[j];
            bad_ok &= srv_b64_decode(t, 400, d400) == -1;
            t[pos] = keep;
        }
    check(bad_ok, "b64 rejects a bad byte at every position of 400 characters", "");
    free(d400);
    free(a);
    free(b);
    free(t);
}

/* ---------------------------------------------------- scanner vs Jansson */

static int compact; /* no whitespace at all: the scanner's row runs */

static void put_ws(srv_buf *b)
{
    while (!compact && rnd() % 3 == 0)
        srv_buf_putc(b, " \n\t\r"[rnd() % 4]);
}

static void put_num(srv_buf *b)
{
    char t[64];
    switch (rnd() % 8) {
    case 0: snprintf(t, sizeof t, "%d", (int)(rnd() % 2000) - 1000); break;
    case 1: snprintf(t, sizeof t, "%.17g", (double)(int64_t)rnd() / 1e18); break;
    case 2: snprintf(t, sizeof t, "%.9g", (float)((double)(int64_t)rnd() / 1e15)); break;
    case 3: snprintf(t, sizeof t, "%.4f", (double)(int64_t)rnd() / 1e19); break;
    case 4: snprintf(t, sizeof t, "%de%d", (int)(rnd() % 100), (int)(rnd() % 80) - 40); break;
    case 5:
        if (rnd() % 40 == 0) {
            snprintf(t, sizeof t, "%s", rnd() % 3 == 0 ? "1e39" : rnd() % 2 ? "true" : "false");
            break;
        }
        snprintf(t, sizeof t, "%d", (int)(rnd() % 2));
        break;
    case 6: snprintf(t, sizeof t, "%s", rnd() % 500 == 0 ? "01" : "-0.0"); break;
    default: snprintf(t, sizeof t, "%.3E", (double)(int64_t)rnd() / 1e17); break;
    }
    srv_buf_puts(b, t);
}

static void put_array(srv_buf *b, int depth, int rank, const int *dims)
{
    srv_buf_putc(b, '[');
    put_ws(b);
    int n = dims[depth];
    if (rnd() % 1000 == 0)
        n += rnd() % 2 ? 1 : -1; /* ragged */
    for (int i = 0; i < n; i++) {
        if (i) {
            srv_buf_putc(b, ',');
            put_ws(b);
        }
        if (depth + 1 < rank)
            put_array(b, depth + 1, rank, dims);
        else
            put_num(b);
        put_ws(b);
    }
    if (rnd() % 2000 == 0)
        srv_buf_putc(b, ','); /* trailing comma: not JSON */
    srv_buf_putc(b, ']');
}

typedef struct {
    int rc;
    attn_tensor t;
    attn_mask m;
    srv_err e;
    srv_arena a;
    json_t *root;
} decoded;

static void decode(const char *body, size_t len, int fast, int mask, decoded *d)
{
    srv_scan_result sr;
    memset(d, 0, sizeof *d);
    memset(&sr, 0, sizeof sr);
    if (fast) {
        if (srv_scan(body, len, &d->a, &sr)) {
            d->rc = -2;
            return;
        }
    } else {
        sr.envelope = (char *)body;
        sr.envelope_len = len;
    }
    json_error_t je;
    d->root = json_loadb(sr.envelope, sr.envelope_len, JSON_REJECT_DUPLICATES, &je);
    if (!d->root) {
        d->rc = -3;
        return;
    }
    srv_codec c = {&d->a, &sr, (int64_t)1 << 26};
    json_t *q = json_object_get(d->root, "query");
    d->rc = mask ? srv_decode_mask(&c, q, "query", &d->m, &d->e)
                 : srv_decode_tensor(&c, q, "query", &d->t, &d->e);
}

static int same_result(const decoded *x, const decoded *y, int mask)
{
    if (x->rc != y->rc)
        return 0;
    if (x->rc == -1)
        return x->e.status == y->e.status && !strcmp(x->e.code, y->e.code) &&
               !strcmp(x->e.field, y->e.field);
    if (x->rc != 0)
        return 1;
    int rank = mask ? x->m.rank : x->t.rank;
    const int64_t *s1 = mask ? x->m.shape : x->t.shape, *s2 = mask ? y->m.shape : y->t.shape;
    if (rank != (mask ? y->m.rank : y->t.rank) || memcmp(s1, s2, sizeof x->t.shape))
        return 0;
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= s1[i];
    return mask ? !memcmp(x->m.data, y->m.data, (size_t)n)
                : !memcmp(x->t.data, y->t.data, (size_t)n * 4);
}

/* The body b decoded by the scanner and by Jansson: whether both give the
 * same tensor or the same error (code and field), counting the agreeing
 * tensors in *ok and errors in *err. */
static int scanner_agrees(const srv_buf *b, int mask, long *ok, long *err)
{
    decoded fast, slow;
    decode(b->data, b->len, 1, mask, &fast);
    decode(b->data, b->len, 0, mask, &slow);
    int same = same_result(&fast, &slow, mask);
    if (same)
        ++*(fast.rc == 0 ? ok : err);
    json_decref(fast.root);
    json_decref(slow.root);
    srv_arena_free(&fast.a);
    srv_arena_free(&slow.a);
    return same;
}

static void test_scan(int n)
{
    long bad = 0, ok = 0, err = 0;
    for (int it = 0; it < n; it++) {
        int rank = 1 + (int)(rnd() % 4), dims[4];
        for (int i = 0; i < 4; i++)
            dims[i] = 1 + (int)(rnd() % (rank > 2 ? 4 : 20));
        srv_buf b = {0};
        compact = rnd() % 2;
        srv_buf_puts(&b, "{\"query\":");
        put_ws(&b);
        put_array(&b, 0, rank, dims);
        if (rnd() % 2) /* text after the array: its rows are not near the end */
            srv_buf_puts(&b, ",\"pad\":\"0123456789012345678901234567890123456789012345678901234567890123"
                             "45678901234567890123456789012345678901234567890123456789\"");
        srv_buf_puts(&b, "}");
        srv_buf_putc(&b, '\0');
        b.len--;
        int mask = rnd() % 4 == 0;
        if (!scanner_agrees(&b, mask, &ok, &err) && bad++ < 3)
            check(0, "scanner and Jansson disagree on", b.data);
        srv_buf_free(&b);
    }
    check(bad == 0, "scanner agrees with Jansson", "");
    printf("scanner: %ld tensors equal, %ld errors equal (code and field), %ld differ\n", ok, err, bad);
}

/* A number beside a midpoint between two floats, for Jansson to read: the
 * midpoint m of a random float and the next, as "%.*e" with 16 to 24
 * digits (a decimal whose double is m, but not m itself), that with a
 * digit far down appended (just above m), or in full (m exactly); or an
 * integer (17 to 19 digits) at or beside a midpoint. Written at b. */
static void midpoint_text(char *b, size_t cap)
{
    uint32_t u = (uint32_t)rnd() & 0xff7fffffu; /* finite */
    if (rnd() % 8 == 0)
        u &= 0x807fffffu; /* subnormal */
    float f;
    memcpy(&f, &u, 4);
    double mid = midpoint_out(f);
    char m[64];
    snprintf(m, sizeof m, "%.*e", 16 + (int)(rnd() % 9), mid);
    char *e = strchr(m, 'e');
    switch (rnd() % 5) {
    case 0: snprintf(b, cap, "%s", m); break;
    case 1: snprintf(b, cap, "%.*s00000000001%s", (int)(e - m), m, e); break;
    case 2: snprintf(b, cap, "%.60e", mid); break;
    case 3: /* an integer midpoint (25 bits, the last 1) of 2^55 to 2^62, or 1 beside it */
        snprintf(b, cap, "%lld", (long long)((rnd() % (1ull << 24) | 1 | 1ull << 24) << (30 + rnd() % 8)) +
                                 (long long)(rnd() % 3) - 1);
        break;
    default: { /* one past int64, 2^64 to 2^91 (20 to 28 digits), either sign, or 1 beside it */
        double big = ldexp((double)(rnd() % (1ull << 24) | 1 | 1ull << 24), 40 + (int)(rnd() % 27));
        int n = snprintf(b, cap, "%s%.0f", rnd() % 2 ? "-" : "", big);
        char *last = b + n - 1; /* even: 2^40 divides it */
        if (rnd() % 3 == 0)
            ++*last;
        else if (rnd() % 2 && *last != '0')
            --*last;
    }
    }
}

/* Numbers Jansson reads, a scalar and those of an array under 128 bytes of
 * text, become the float strtof gives, as a long array's do (the scanner's
 * copy_number; srv_json_float), not their double's rounding. Counts the
 * numbers the double would have rounded otherwise: the test's reach. */
static void test_envelope_numbers(long n)
{
    long bad = 0, total = 0, twice = 0;
    for (long i = 0; i < n; i++) {
        char t[3][80], body[400];
        for (int k = 0; k < 3; k++)
            midpoint_text(t[k], sizeof t[k]);
        int len = snprintf(body, sizeof body, "{\"query\": [[%s, %s]], \"scale\": %s}", t[0], t[1], t[2]);
        decoded d;
        decode(body, (size_t)len, 1, 0, &d);
        json_t *scale = d.root ? json_object_get(d.root, "scale") : NULL;
        for (int k = 0; k < 3; k++) {
            float want = strtof(t[k], NULL), got = NAN;
            if (k < 2 && d.rc == 0 && d.t.rank == 2 && d.t.shape[1] == 2)
                got = ((const float *)d.t.data)[k];
            else if (k == 2 && scale && srv_json_scalar(scale, &got))
                got = NAN;
            twice += (float)strtod(t[k], NULL) != want;
            total++;
            if (memcmp(&got, &want, 4) && bad++ < 3)
                check(0, "a short array's or a scalar's number vs strtof", t[k]);
        }
        json_decref(d.root);
        srv_arena_free(&d.a);
    }
    check(bad == 0, "short arrays and scalars: strtof's float", "");
    check(twice > n / 20, "the cases reach numbers a double rounds wrongly", "");
    printf("envelope numbers: %ld against strtof (%ld of them misrounded through a double), %ld differ\n",
           total, twice, bad);
}

/* Arrays of over a megabyte, which the scanner parses in two halves on two
 * threads: against Jansson, clean and with one defect at a random place (a
 * bad number, a non-finite one, a short or long row, a bracket too many,
 * a boolean), so a defect lands in either half and near the split. */
static void test_scan_split(int n)
{
    long bad = 0, ok = 0, err = 0;
    for (int it = 0; it < n; it++) {
        int rank = 1 + it % 3, rows = rank == 1 ? 1 : 300 + (int)(rnd() % 400);
        int cols = rank == 1 ? 120000 : 80 + (int)(rnd() % 300), inner = rank == 3 ? 1 + (int)(rnd() % 3) : 1;
        int total = rows * cols, defect = it % 4 ? (int)(rnd() % (uint64_t)total) : -1;
        int kind = (int)(rnd() % 6);
        /* a batch of one, (1, rows, cols) or (1, 1, rows, cols), split in
         * its rows; sometimes with a second element after it, a ragged
         * outer dimension */
        int wrap = it % 5 == 1 ? 1 : it % 5 == 2 ? 2 : 0, extra = wrap && it % 3 == 0;
        if (rank == 3)
            cols = (cols + inner - 1) / inner;
        srv_buf b = {0};
        srv_buf_puts(&b, "{\"query\": ");
        for (int w = 0; w < wrap; w++)
            srv_buf_putc(&b, '[');
        if (rank > 1)
            srv_buf_putc(&b, '[');
        int k = 0;
        for (int r = 0; r < rows; r++) {
            if (r)
                srv_buf_puts(&b, ", ");
            srv_buf_putc(&b, '[');
            for (int m = 0; m < (rank == 3 ? inner : 1); m++) {
                if (m)
                    srv_buf_puts(&b, ", ");
                if (rank == 3)
                    srv_buf_putc(&b, '[');
                for (int c = 0; c < cols; c++, k++) {
                    char t[64];
                    if (k == defect && kind == 2)
                        continue; /* a short row */
                    if (c)
                        srv_buf_puts(&b, rnd() % 2 ? ", " : ",");
                    float f = (float)((double)(int64_t)rnd() / 4e18);
                    if (k == defect)
                        snprintf(t, sizeof t, "%s", kind == 0 ? "01" : kind == 1 ? "1e39" : kind == 3 ? "1, 2" : kind == 4 ? "[1]" : "true");
                    else
                        snprintf(t, sizeof t, rnd() % 2 ? "%.17g" : "%.9g", (double)f);
                    srv_buf_puts(&b, t);
                }
                if (rank == 3)
                    srv_buf_putc(&b, ']');
            }
            srv_buf_putc(&b, ']');
        }
        if (rank > 1)
            srv_buf_putc(&b, ']');
        if (extra)
            srv_buf_puts(&b, ", [[1]]");
        for (int w = 0; w < wrap; w++)
            srv_buf_putc(&b, ']');
        srv_buf_puts(&b, ", \"key\": [1, 2]}");
        srv_buf_putc(&b, '\0');
        b.len--;
        int mask = kind == 5 && rnd() % 2;
        if (!scanner_agrees(&b, mask, &ok, &err) && bad++ < 3) {
            char what[96];
            snprintf(what, sizeof what, "rank %d in %d, %d rows, defect %d at %d", rank, wrap, rows, kind, defect);
            check(0, "split scanner and Jansson disagree", what);
        }
        srv_buf_free(&b);
    }
    check(bad == 0, "split scanner agrees with Jansson", "");
    printf("scanner, arrays over 1 MB: %ld tensors equal, %ld errors equal, %ld differ\n", ok, err, bad);
}

/* Rows of Python's repr numbers (17 digits, ", " between them), the form
 * the scanner reads in runs, with hard numbers among them: float
 * midpoints to 17-25 digits, which its fast parse leaves to the exact one
 * mid-row, and "%.9g" and short ones. Every float must equal strtof's of
 * its own text. (An array under MIN_ARRAY_TEXT bytes stays in Jansson's
 * envelope, whose double is rounded to float: the same but for decimals
 * within half a double's unit of a float midpoint, as Python's json and
 * torch.tensor give; so the arrays here are longer.) */
static void test_scan_long_rows(int n)
{
    long total = 0, bad = 0;
    for (int it = 0; it < n; it++) {
        int rows = 1 + (int)(rnd() % 6), cols = 8 + (int)(rnd() % 53); /* >= 128 bytes */
        float *want = malloc((size_t)rows * cols * sizeof *want);
        srv_buf b = {0};
        srv_buf_puts(&b, "{\"query\": [");
        for (int r = 0, k = 0; r < rows; r++) {
            srv_buf_puts(&b, r ? ", [" : "[");
            for (int c = 0; c < cols; c++, k++) {
                uint32_t u = (uint32_t)rnd() & 0xbfffffffu; /* |f| < 2 */
                float f, g;
                memcpy(&f, &u, 4);
                g = nextafterf(f, signbit(f) ? -INFINITY : INFINITY);
                char t[64];
                int kind = (int)(rnd() % 8);
                if (kind == 0)
                    snprintf(t, sizeof t, "%.*g", 17 + (int)(rnd() % 9), ((double)f + g) / 2);
                else if (kind == 1)
                    snprintf(t, sizeof t, rnd() % 2 ? "%.9g" : "%.3g", (double)f);
                else
                    snprintf(t, sizeof t, "%.17g", (double)f);
                srv_buf_printf(&b, "%s%s", c ? ", " : "", t);
                want[k] = strtof(t, NULL);
            }
            srv_buf_putc(&b, ']');
        }
        srv_buf_puts(&b, "], \"key\": [1, 2]}");
        decoded d;
        decode(b.data, b.len, 1, 0, &d);
        total += (long)rows * cols;
        if (d.rc != 0 || d.t.shape[0] != rows || d.t.shape[1] != cols ||
            memcmp(d.t.data, want, (size_t)rows * cols * sizeof *want))
            bad++;
        json_decref(d.root);
        srv_arena_free(&d.a);
        srv_buf_free(&b);
        free(want);
    }
    check(bad == 0, "scanner: rows of long numbers with hard ones equal strtof", "");
    printf("scanner, long rows: %ld numbers in %d bodies against strtof, %ld bodies differ\n", total, n,
           bad);
}

/* A batch of one, (1, 2000, 200), is parsed in two halves (the helper
 * thread may start too late for one parse: 50 tries) into the same floats
 * as Jansson's; a batch of one vector, (1, 400000), is not split. */
static void test_scan_batch_of_one(void)
{
    srv_buf b = {0};
    srv_buf_puts(&b, "{\"query\": [[");
    for (int r = 0; r < 2000; r++) {
        srv_buf_puts(&b, r ? ", [" : "[");
        for (int c = 0; c < 200; c++)
            srv_buf_printf(&b, "%s%.17g", c ? ", " : "", (double)(float)((double)(int64_t)rnd() / 4e18));
        srv_buf_putc(&b, ']');
    }
    srv_buf_puts(&b, "]]}");
    long ok = 0, err = 0, tries = 0, j0 = srv_scan_joins();
    int same = 1;
    while (tries < 50 && srv_scan_joins() == j0) {
        tries++;
        same &= scanner_agrees(&b, 0, &ok, &err);
    }
    check(same && err == 0, "a batch of one: the same floats as Jansson", "");
    check(srv_scan_joins() > j0, "a batch of one is parsed in two halves", "");
    printf("scanner, (1, 2000, 200): split after %ld tries\n", tries);
    srv_buf_free(&b);
    srv_buf_puts(&b, "{\"query\": [[");
    for (int c = 0; c < 400000; c++)
        srv_buf_puts(&b, c ? ", 0.25" : "0.25");
    srv_buf_puts(&b, "]]}");
    j0 = srv_scan_joins();
    same = scanner_agrees(&b, 0, &ok, &err);
    check(same && err == 0 && srv_scan_joins() == j0, "a batch of one vector: one pass, the same floats", "");
    srv_buf_free(&b);
}

/* U+0001, the placeholders' first character, in a string: reserved (the
 * request is refused) when escaped as \u0001, in a key or a value; not
 * for the text "\u0001" after an escaped backslash, nor elsewhere. */
static void test_scan_reserved(void)
{
    static const struct {
        const char *body;
        int reserved;
    } cases[] = {
        {"{\"key\": {\"\\u0001t\": 0}}", 1},
        {"{\"seed\": {\"\\u0001u\": \"7\"}}", 1},
        {"{\"text\": \"a\\u0001b\"}", 1},
        {"{\"text\": \"a\\\\u0001b\"}", 0},
        {"{\"text\": \"a\\u0002b\", \"u0001\": 1}", 0},
        {"{\"text\": \"\\n\\u00\"}", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        srv_arena a = {0};
        srv_scan_result sr;
        int rc = srv_scan(cases[i].body, strlen(cases[i].body), &a, &sr);
        check(rc == 0 && sr.reserved == cases[i].reserved, "U+0001 in a string is reserved, as escaped",
              cases[i].body);
        srv_arena_free(&a);
    }
}

/* A base64 tensor of 20000 floats (7 of the decoder's 16 KiB slices):
 * the floats back, and every error as the whole text would give it: a
 * padded quad at a slice's end is invalid, an invalid byte is reported
 * before an earlier NaN, a NaN in a late slice by its own index. */
static void b64_case(char *text, int64_t count, decoded *d)
{
    srv_buf b = {0};
    srv_buf_printf(&b, "{\"query\":{\"shape\":[%lld],\"dtype\":\"float32\",\"b64\":\"", (long long)count);
    srv_buf_puts(&b, text);
    srv_buf_puts(&b, "\"}}");
    decode(b.data, b.len, 1, 0, d);
    srv_buf_free(&b);
}

static void test_b64_tensor(void)
{
    enum { N = 20000 };
    float *f = malloc(N * sizeof *f);
    size_t el = srv_b64_encoded_len(N * sizeof *f);
    char *t = malloc(el + 1);
    for (int i = 0; i < N; i++)
        f[i] = (float)((int)(rnd() % 2001) - 1000) / 7.0f;
    srv_b64_encode((const uint8_t *)f, N * sizeof *f, t);
    t[el] = '\0';
    decoded d;
    b64_case(t, N, &d);
    check(d.rc == 0 && d.t.rank == 1 && d.t.shape[0] == N && !memcmp(d.t.data, f, N * sizeof *f),
          "b64 tensor of 20000 floats decodes to its floats", "");
    json_decref(d.root);
    srv_arena_free(&d.a);

    char keep[2] = {t[16382], t[16383]};
    t[16382] = t[16383] = '='; /* the end of the first slice */
    b64_case(t, N, &d);
    check(d.rc == -1 && strstr(d.e.message, "not valid padded"), "b64 tensor: padding mid-text refused",
          d.e.message);
    json_decref(d.root);
    srv_arena_free(&d.a);
    t[16382] = keep[0];
    t[16383] = keep[1];

    /* JSON escapes past the scanner's first 64 KiB window: "\/" is '/' */
    char *esc = malloc(2 * el + 1);
    size_t w = 0;
    for (size_t c = 0; c < el; c++) {
        if (t[c] == '/' && c > 70000)
            esc[w++] = '\\';
        esc[w++] = t[c];
    }
    esc[w] = '\0';
    b64_case(esc, N, &d);
    check(w > el && d.rc == 0 && !memcmp(d.t.data, f, N * sizeof *f),
          "b64 tensor with escapes after 64 KiB decodes to its floats", d.e.message);
    json_decref(d.root);
    srv_arena_free(&d.a);
    free(esc);

    float nan = NAN, inf = INFINITY, f0 = f[0], f1 = f[15001];
    f[0] = inf;
    f[15001] = nan;
    srv_b64_encode((const uint8_t *)f, N * sizeof *f, t);
    t[100000] = '*';
    b64_case(t, N, &d);
    check(d.rc == -1 && strstr(d.e.message, "not valid padded"), "b64 tensor: bad byte before an Inf",
          d.e.message);
    json_decref(d.root);
    srv_arena_free(&d.a);
    f[0] = f0;
    srv_b64_encode((const uint8_t *)f, N * sizeof *f, t);
    b64_case(t, N, &d);
    check(d.rc == -1 && strstr(d.e.message, "element 15001 is not finite"),
          "b64 tensor: NaN in the 5th slice found by its index", d.e.message);
    json_decref(d.root);
    srv_arena_free(&d.a);
    f[15001] = f1;
    srv_b64_encode((const uint8_t *)f, N * sizeof *f, t);
    b64_case(t, N + 1, &d);
    check(d.rc == -1 && strstr(d.e.message, "decodes to 80000 bytes"), "b64 tensor: size mismatch",
          d.e.message);
    json_decref(d.root);
    srv_arena_free(&d.a);
    free(f);
    free(t);
}

/* Tensors written by two threads (from 16384 floats; a batch of one split
 * in its next dimension) against the same values written one by one with
 * "%.9g" by the C library (and small ones, written by one): the same text,
 * within the room the writer reserved. The last shapes hold only the
 * longest floats ("-1.23456791e-20", 15 characters), with up to three
 * pairs of brackets around each: /multihead's weights of one head, one
 * query and one key, (B, 1, 1, 1), once overran the reserved 20 bytes a
 * float by 2, in one thread (B = 3000) and in two (B = 20000). */
static void test_encode_split(void)
{
    static const int64_t shapes[][4] = {{16384}, {128, 129}, {8, 64, 64}, {3, 7, 1000}, {1, 20000}, {5, 3},
                                        {1, 8, 64, 64}, {1, 1, 130, 130}, {1, 1, 1, 1}, {1, 64, 256},
                                        {3000, 1, 1, 1}, {20000, 1, 1, 1}, {1, 9000, 1, 1}, {17000, 1, 1}};
    static const int ranks[] = {1, 2, 3, 3, 2, 2, 4, 4, 4, 3, 4, 4, 4, 3};
    enum { FIRST_LONG = 10 };
    for (size_t s = 0; s < sizeof ranks / sizeof *ranks; s++) {
        int rank = ranks[s];
        const int64_t *sh = shapes[s];
        int64_t n = 1;
        for (int i = 0; i < rank; i++)
            n *= sh[i];
        float *v = malloc((size_t)n * sizeof *v);
        srv_buf want = {0}, got = {0};
        for (int64_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)rnd();
            if (s >= FIRST_LONG)
                v[i] = -(1.0f + (float)(u % 1000000 + 100000) / 1.2e6f) * 1e-20f;
            else
                v[i] = i % 3 == 0 ? 0.0f : (float)((double)(int32_t)u / 2e9) * (i % 7 ? 1.0f : 1e-20f);
        }
        /* the reference: brackets by the shape, each float by printf */
        for (int64_t i = 0; i < n; i++) {
            int opens = 0, closes = 0; /* dimensions that start, end here */
            for (int64_t q = 1, d = rank - 1; d >= 0; d--) {
                q *= sh[d];
                opens += i % q == 0;
                closes += (i + 1) % q == 0;
            }
            if (i)
                srv_buf_putc(&want, ',');
            for (int k = 0; k < opens; k++)
                srv_buf_putc(&want, '[');
            char t[32];
            if (v[i] == 0.0f)
                snprintf(t, sizeof t, "%s0", signbit(v[i]) ? "-" : "");
            else
                snprintf(t, sizeof t, "%.9g", (double)v[i]);
            srv_buf_puts(&want, t);
            for (int k = 0; k < closes; k++)
                srv_buf_putc(&want, ']');
        }
        srv_encode_tensor(&got, v, rank, sh, 0);
        char what[64];
        snprintf(what, sizeof what, "rank %d, %lld floats", rank, (long long)n);
        check(!want.failed && !got.failed && got.len == want.len && memcmp(got.data, want.data, got.len) == 0,
              "a nested tensor's text equals printf's", what);
        check(got.len <= got.cap, "a nested tensor's text stays within the room reserved", what);
        srv_buf_free(&want);
        srv_buf_free(&got);
        free(v);
    }
}

/* The kept threads behind the split parse and print (tasks.c): tasks
 * started and settled at once, some taken by a thread by then and some
 * not. A settled task ran exactly when settle says so (a withdrawn one
 * never runs, even later), and a task's record is free to reuse after
 * settle: each round reuses the same one. */
static atomic_int task_runs;

static void count_run(void *arg)
{
    atomic_fetch_add(&task_runs, 1);
    atomic_fetch_add((atomic_int *)arg, 1);
}

static void test_tasks(int rounds)
{
    srv_task t;
    atomic_int mine[8];
    int said_ran = 0, withdrawn = 0, wrong = 0;
    for (int r = 0; r < rounds; r++) {
        atomic_int *m = &mine[r % 8];
        atomic_store(m, 0);
        if (srv_task_start(&t, count_run, m, 1) != 0) {
            check(0, "a task gets a thread", "srv_task_start failed");
            return;
        }
        if (r % 3 == 0) /* sometimes give the thread time to take it */
            for (volatile int spin = 0; spin < 2000; spin++) {}
        int ran = srv_task_settle(&t);
        said_ran += ran;
        withdrawn += !ran;
        wrong += atomic_load(m) != ran; /* settled: a run has returned */
    }
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL); /* a withdrawn task that still ran would show now */
    char what[96];
    snprintf(what, sizeof what, "%d rounds: %d ran, %d withdrawn, %d counted runs", rounds, said_ran,
             withdrawn, atomic_load(&task_runs));
    check(wrong == 0 && atomic_load(&task_runs) == said_ran, "settle tells whether a task ran", what);
    printf("tasks: %s\n", what);
}

int main(int argc, char **argv)
{
    long scale = argc > 1 ? atol(argv[1]) : 1;
    test_fmt(2000000 * scale);
    test_parse(2000000 * scale);
    test_parse_hard(400000 * scale);
    test_parse_long_exponents();
    test_parse_short(1000000 * scale);
    test_b64();
    test_b64_tensor();
    test_scan((int)(20000 * scale));
    test_envelope_numbers(20000 * scale);
    test_scan_split((int)(24 * scale));
    test_scan_long_rows((int)(2000 * scale));
    test_scan_batch_of_one();
    test_scan_reserved();
    test_encode_split();
    test_tasks((int)(20000 * scale));
    printf("%ld passed, %ld failed\n", passed, failed);
    return failed != 0;
}
