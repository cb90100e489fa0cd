/* test_body.c - a body decoded as its chunks come (body.c) against the
 * codec's own decoding of the whole text (no current body): random bodies
 * of base64 tensors, short and long, split at random, some broken (bad
 * letters, padding inside, escapes, quotes, Inf and NaN, a wrong length,
 * no closing quote), must give the same tensors or the same error text;
 * and the valid long strings must have been decoded as they came (else
 * the comparison would prove nothing). */
#define SELFTEST_SEED 0x2545f4914f6cdd1dull
#include "selftest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const fields[] = {"query", "key", "value"};
enum { NF = 3 };

typedef struct {
    int rc[NF];
    srv_err e[NF];
    attn_tensor t[NF];
    int used[NF];     /* the codec took the bytes decoded as they came */
    srv_arena a;
    json_t *root;
} decoded;

/* The body's three tensors through the scanner and the codec; with b, as
 * the server does (b current), else from the text alone. */
static int decode(const char *text, size_t len, const srv_body *b, decoded *d)
{
    srv_scan_result sr;
    memset(d, 0, sizeof *d);
    srv_body_use(b);
    int ok = srv_scan(text, len, &d->a, &sr) == 0;
    json_error_t je;
    if (ok)
        d->root = json_loadb(sr.envelope, sr.envelope_len, JSON_REJECT_DUPLICATES, &je);
    if (d->root) {
        srv_codec c = {&d->a, &sr, (int64_t)1 << 26};
        for (int i = 0; i < NF; i++) {
            json_t *j = json_object_get(d->root, fields[i]), *jb = json_object_get(j, "b64");
            const srv_blob *bl = jb ? srv_blob_of(&sr, jb) : NULL;
            uint8_t *p;
            int64_t n, bad;
            d->used[i] = bl && bl->is_string && srv_body_decoded(bl->str, bl->len, &p, &n, &bad);
            d->rc[i] = srv_decode_tensor(&c, j, fields[i], &d->t[i], &d->e[i]);
        }
    }
    srv_body_use(NULL);
    return d->root != NULL;
}

static void release(decoded *d)
{
    json_decref(d->root);
    srv_arena_free(&d->a);
}

/* Appends one tensor of n floats as {"shape","dtype","b64"}, broken in one
 * of several ways when how > 0. Returns 1 when the text stays valid base64,
 * 2 when it does with escapes (valid JSON, never decoded as it comes), else 0. */
static int put_tensor(srv_buf *o, const char *name, int64_t n, int how)
{
    float *f = malloc((size_t)n * sizeof *f);
    size_t el = srv_b64_encoded_len((size_t)n * 4);
    char *t = malloc(el + 1);
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)((int)(rnd() % 20001) - 10000) / 13.0f;
    if (how == 1)
        f[rnd() % (uint64_t)n] = NAN;
    if (how == 2)
        f[rnd() % (uint64_t)n] = INFINITY;
    srv_b64_encode((const uint8_t *)f, (size_t)n * 4, t);
    t[el] = '\0';
    size_t at = (size_t)(rnd() % el);
    if (how == 3)
        t[at] = "*-_ .\x80\x01"[rnd() % 7];
    if (how == 4 && at + 4 < el)
        t[at & ~(size_t)3] = t[(at & ~(size_t)3) + 1] = '='; /* "==xx" inside */
    if (how == 5 && el > 8)
        t[at / 4 * 4 + 2] = t[at / 4 * 4 + 3] = '='; /* padding inside, or at the end */
    srv_buf_printf(o, "\"%s\":{\"shape\":[%lld],\"dtype\":\"float32\",\"b64\":\"", name, (long long)n);
    if (how == 6) { /* "\/" for each '/': the same text after unescaping */
        for (size_t c = 0; c < el; c++) {
            if (t[c] == '/')
                srv_buf_putc(o, '\\');
            srv_buf_putc(o, t[c]);
        }
    } else if (how == 7) { /* a quote inside: the string ends early */
        srv_buf_put(o, t, at);
        srv_buf_putc(o, '"');
        srv_buf_puts(o, t + at);
    } else if (how == 8) { /* one letter short */
        srv_buf_put(o, t, el - 1);
    } else {
        srv_buf_puts(o, t);
    }
    srv_buf_puts(o, "\"}");
    free(f);
    free(t);
    return how == 6 ? 2 : how == 0 || (how == 5 && at / 4 * 4 + 4 == el);
}

/* One random body: three tensors (short or long), sometimes a long
 * non-base64 string and an escaped key before them, sometimes cut short. */
static void one_body(srv_buf *o, int *valid, int64_t *count)
{
    srv_buf_putc(o, '{');
    if (rnd() % 4 == 0) {
        srv_buf_puts(o, "\"note\":\"");
        for (int i = 0, n = (int)(rnd() % 9000); i < n; i++) {
            int r = (int)(rnd() % 10);
            if (r < 2)
                srv_buf_puts(o, r ? "\\\"" : "\\\\"); /* \" and \\ */
            else
                srv_buf_putc(o, "ab c/"[rnd() % 5]);
        }
        srv_buf_puts(o, "\",\"k\\\"ey\":1,");
    }
    for (int i = 0; i < NF; i++) {
        static const int64_t sizes[] = {1, 3, 100, 1023, 1024, 1025, 3071, 3072, 3073, 12288, 40000, 100001};
        count[i] = sizes[rnd() % 12];
        int how = rnd() % 3 ? 0 : 1 + (int)(rnd() % 8);
        valid[i] = put_tensor(o, fields[i], count[i], how);
        srv_buf_putc(o, i + 1 < NF ? ',' : '}');
    }
    if (rnd() % 16 == 0) /* cut short: no closing quote or brace */
        o->len = (size_t)(rnd() % o->len);
}

/* The body fed in random chunks: the same results as the whole text. */
static void test_random(int n)
{
    long used = 0, long_valid = 0;
    for (int k = 0; k < n; k++) {
        srv_buf o = {0};
        int valid[NF];
        int64_t count[NF];
        one_body(&o, valid, count);
        srv_body b;
        srv_body_init(&b, o.len, o.len, 1);
        size_t at = 0;
        while (at < o.len) {
            size_t c = rnd() % 3 ? 1 + rnd() % 40000 : 1 + rnd() % 7;
            c = c > o.len - at ? o.len - at : c;
            if (srv_body_append(&b, o.data + at, c) != 0)
                break;
            at += c;
        }
        check(at == o.len && srv_body_finish(&b) == 0 && b.len == o.len && !memcmp(b.text, o.data, o.len),
              "the body holds what came", "");
        decoded x, y;
        int okx = decode(b.text, b.len, &b, &x), oky = decode(b.text, b.len, NULL, &y);
        check(okx == oky, "the same JSON verdict", "");
        for (int i = 0; okx && oky && i < NF; i++) {
            char what[200];
            snprintf(what, sizeof what, "body %d %s (%lld floats): %.70s / %.70s", k, fields[i], (long long)count[i],
                     x.rc[i] ? x.e[i].message : "ok", y.rc[i] ? y.e[i].message : "ok");
            int same = x.rc[i] == y.rc[i] &&
                       (x.rc[i] ? !strcmp(x.e[i].message, y.e[i].message) && x.e[i].status == y.e[i].status
                                : x.t[i].rank == 1 && y.t[i].rank == 1 && x.t[i].shape[0] == y.t[i].shape[0] &&
                                      !memcmp(x.t[i].data, y.t[i].data, (size_t)x.t[i].shape[0] * 4));
            check(same, "decoded as it came = decoded after", what);
            check(!y.used[i], "no current body: nothing taken", what);
            used += x.used[i];
            if (valid[i] == 1 && count[i] * 4 / 3 >= 4096 && x.rc[i] == 0) {
                long_valid++;
                check(x.used[i], "a long valid string is decoded as it comes", what);
            }
        }
        release(&x);
        release(&y);
        srv_body_free(&b);
        srv_buf_free(&o);
    }
    check(used > n / 2 && long_valid > n / 4, "the comparison covers strings decoded as they came", "");
    printf("test_body: %d bodies, %ld strings decoded as they came (%ld long valid ones)\n", n, used, long_valid);
}

/* A chunked body (no Content-Length) is only held; a body over its
 * Content-Length-sized buffer still holds all it is given. */
static void test_held(void)
{
    srv_body b;
    srv_body_init(&b, 0, 1 << 20, 1);
    char chunk[5000];
    memset(chunk, 'A', sizeof chunk);
    chunk[0] = '"';
    for (int i = 0; i < 100; i++)
        check(srv_body_append(&b, chunk, sizeof chunk) == 0, "chunked body appends", "");
    check(srv_body_finish(&b) == 0 && b.len == 500000 && b.n_strs == 0 && b.text[b.len] == '\0',
          "a chunked body is held, not decoded", "");
    srv_body_free(&b);
    check(b.text == NULL && b.len == 0, "freed body is empty", "");
    srv_body_init(&b, 0, 1 << 20, 0);
    check(srv_body_finish(&b) == 0 && b.len == 0 && b.text && b.text[0] == '\0', "an empty body is \"\"", "");
    srv_body_free(&b);
}

/* Padding inside a long string, with a chunk ending right after it (so
 * the decoder sees it as a run's last quad) or anywhere near: refused as
 * the codec refuses it; at the very end it is valid; and a NaN among the
 * last floats is found wherever the chunks end near the closing quote. */
static void test_padding_splits(void)
{
    enum { N = 4001 }; /* 16004 bytes: the last quad is "xxx=" */
    float f[N];
    for (int i = 0; i < N; i++)
        f[i] = (float)i / 3.0f;
    size_t el = srv_b64_encoded_len(sizeof f);
    char *t = malloc(el + 1);
    srv_b64_encode((const uint8_t *)f, sizeof f, t);
    t[el] = '\0';
    for (int inside = 0; inside < 3; inside++) {
        size_t quad = inside == 1 ? 8000 : el - 4; /* the quad padded */
        if (inside == 1)
            t[quad + 2] = t[quad + 3] = '=';
        if (inside == 2) { /* a NaN among the last floats, after the last whole block */
            f[N - 3] = NAN;
            srv_b64_encode((const uint8_t *)f, sizeof f, t);
        }
        srv_buf o = {0};
        srv_buf_printf(&o, "{\"query\":{\"shape\":[%d],\"dtype\":\"float32\",\"b64\":\"%s\"},"
                       "\"key\":{\"shape\":[1],\"dtype\":\"float32\",\"b64\":\"AAAAAA==\"},"
                       "\"value\":{\"shape\":[1],\"dtype\":\"float32\",\"b64\":\"AAAAAA==\"}}", N, t);
        size_t start = (size_t)(strstr(o.data, "\"b64\":\"") - o.data) + 7;
        for (size_t cut = start + quad - 1; cut <= start + quad + 9; cut++) {
            srv_body b;
            srv_body_init(&b, o.len, o.len, 1);
            srv_body_append(&b, o.data, cut);
            srv_body_append(&b, o.data + cut, o.len - cut);
            srv_body_finish(&b);
            decoded x, y;
            decode(b.text, b.len, &b, &x);
            decode(b.text, b.len, NULL, &y);
            char what[200];
            snprintf(what, sizeof what, "padding %s, cut at +%d: %.70s / %.70s",
                     inside == 2 ? "at the end, NaN before it" : inside ? "inside" : "at the end",
                     (int)(cut - start - quad), x.rc[0] ? x.e[0].message : "ok", y.rc[0] ? y.e[0].message : "ok");
            check(x.rc[0] == y.rc[0] && (x.rc[0] ? !strcmp(x.e[0].message, y.e[0].message)
                                                 : !memcmp(x.t[0].data, f, sizeof f)),
                  "padding split: decoded as it came = decoded after", what);
            check(inside ? x.rc[0] != 0 && (inside == 1 || (x.used[0] && strstr(x.e[0].message, "element 3998 ")))
                         : x.rc[0] == 0 && x.used[0],
                  "padding split: verdict", what);
            release(&x);
            release(&y);
            srv_body_free(&b);
        }
        srv_buf_free(&o);
    }
    free(t);
}

/* A nested array of numbers, rows x cols (a batch of one when batch),
 * as Python's json.dumps or "%.9g" text with random whitespace, broken
 * one way when how > 0: a short row, a boolean, a string, a bracket too
 * many, or cut off before its end. */
static void put_array(srv_buf *o, int64_t rows, int64_t cols, int batch, int how)
{
    int64_t bad_row = (int64_t)(rnd() % (uint64_t)rows);
    int repr = rnd() % 2, spaced = rnd() % 2;
    srv_buf_puts(o, batch ? "[[" : "[");
    for (int64_t r = 0; r < rows; r++) {
        srv_buf_puts(o, r ? (spaced ? ", [" : ",[") : "[");
        int64_t n = how == 1 && r == bad_row ? cols - 1 : cols;
        for (int64_t c = 0; c < n; c++) {
            if (c)
                srv_buf_puts(o, spaced ? ", " : ",");
            float f = (float)((double)(int64_t)rnd() / 9.2e18 * 3.0);
            if (r == bad_row && c == 0 && how >= 2 && how <= 4)
                srv_buf_puts(o, how == 2 ? "true" : how == 3 ? "\"x\"" : "[1]");
            else
                srv_buf_printf(o, repr ? "%.17g" : "%.9g", (double)f);
        }
        srv_buf_putc(o, ']');
        if (how == 5 && r == bad_row)
            return; /* the rest never comes */
    }
    srv_buf_puts(o, batch ? "]]" : "]");
}

/* Bodies of long nested arrays fed in random chunks: an array that closes
 * while the body comes slower than a thread parses is parsed then (body.c's
 * early parse; the rate is raised here, so every long array that closes
 * before the end qualifies), and the codec must give what the text alone
 * gives, for valid arrays, broken ones (a string inside one among them),
 * and an array inside a string. Some bodies are dropped unread (the early
 * parse settled at free). */
static void test_early(int n)
{
    long parsed0, taken0, parsed1, taken1, valid_long = 0;
    srv_body_early_counts(&parsed0, &taken0);
    srv_body_parse_rate = 1e12; /* every eligible array, however fast the chunks come */
    for (int k = 0; k < n; k++) {
        srv_buf o = {0};
        srv_buf_putc(&o, '{');
        if (rnd() % 4 == 0) { /* a fake array in a string: parsed early or not, never used */
            srv_buf_puts(&o, "\"note\":\"see:");
            put_array(&o, 200 + (int64_t)(rnd() % 200), 100, 0, 0);
            srv_buf_puts(&o, "\",");
        }
        int hows[NF];
        size_t span[NF][2];
        for (int i = 0; i < NF; i++) { /* the last one short: the others close early */
            int64_t rows = i == NF - 1 ? 1 + (int64_t)(rnd() % 40) : 50 + (int64_t)(rnd() % 400);
            int64_t cols = 1 + (int64_t)(rnd() % 120);
            hows[i] = rnd() % 3 ? 0 : 1 + (int)(rnd() % 5);
            srv_buf_printf(&o, "\"%s\": ", fields[i]);
            span[i][0] = o.len;
            put_array(&o, rows, cols, rnd() % 4 == 0, hows[i]);
            span[i][1] = o.len;
            srv_buf_puts(&o, i + 1 < NF ? ", " : "}");
        }
        for (int i = 0; i < NF; i++) /* long enough, with something still to come */
            valid_long += hows[i] == 0 && span[i][1] - span[i][0] >= 256 << 10 && o.len > span[i][1];
        srv_body b;
        srv_body_init(&b, o.len, o.len, 1);
        for (size_t at = 0, c; at < o.len; at += c) {
            c = rnd() % 3 ? 1 + rnd() % 70000 : 1 + rnd() % 9;
            c = c > o.len - at ? o.len - at : c;
            srv_body_append(&b, o.data + at, c);
        }
        srv_body_finish(&b);
        if (rnd() % 4) /* else srv_scan may find a parse not yet started: it does it itself */
            srv_body_early_wait(&b);
        if (rnd() % 8 == 0) { /* dropped unread: the parse is settled at free */
            srv_body_free(&b);
            srv_buf_free(&o);
            continue;
        }
        decoded x, y;
        int okx = decode(b.text, b.len, &b, &x), oky = decode(b.text, b.len, NULL, &y);
        check(okx == oky, "early arrays: the same JSON verdict", "");
        for (int i = 0; okx && oky && i < NF; i++) {
            int64_t cnt = 1;
            for (int d = 0; !x.rc[i] && d < x.t[i].rank; d++)
                cnt *= x.t[i].shape[d];
            int same = x.rc[i] == y.rc[i] &&
                       (x.rc[i] ? !strcmp(x.e[i].message, y.e[i].message)
                                : x.t[i].rank == y.t[i].rank &&
                                      !memcmp(x.t[i].shape, y.t[i].shape, sizeof x.t[i].shape) &&
                                      !memcmp(x.t[i].data, y.t[i].data, (size_t)cnt * 4));
            char what[160];
            snprintf(what, sizeof what, "body %d %s (broken %d): %.60s / %.60s", k, fields[i], hows[i],
                     x.rc[i] ? x.e[i].message : "ok", y.rc[i] ? y.e[i].message : "ok");
            check(same, "early arrays: parsed as it came = parsed after", what);
        }
        release(&x);
        release(&y);
        srv_body_free(&b);
        srv_buf_free(&o);
    }
    srv_body_early_counts(&parsed1, &taken1);
    srv_body_parse_rate = 1.0;
    /* a body's first long array is always parsed early (and awaited in
     * three bodies of four); one closing while it runs, only if it ends in
     * time: fewer on a slower machine */
    check(taken1 - taken0 > valid_long / 8 && taken1 > taken0 && parsed1 - parsed0 >= taken1 - taken0,
          "the comparison covers arrays parsed as the body came", "");
    printf("test_body: %d bodies of long arrays, %ld arrays parsed early, %ld of them taken (%ld long valid arrays)\n",
           n, parsed1 - parsed0, taken1 - taken0, valid_long);
}

int main(int argc, char **argv)
{
    long scale = argc > 1 ? atol(argv[1]) : 1;
    test_held();
    test_padding_splits();
    test_random((int)(400 * scale));
    test_early((int)(200 * scale));
    printf("%ld passed, %ld failed\n", passed, failed);
    return failed != 0;
}
