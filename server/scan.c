/* scan.c - the request body's fast path: lifts big numeric arrays (parsed
 * straight into float32) and long strings (base64) out of the JSON text,
 * leaving a small envelope for Jansson, whose parser is ~30 MB/s.
 *
 * The scanner is conservative: anything it does not fully understand (a
 * ragged or non-finite array, a string with escapes, broken JSON) is copied
 * as is, so Jansson and the codec's slow path report the exact error. */
#include "srv.h"

#include <stdlib.h>
#include <string.h>

#define MIN_ARRAY_TEXT 128   /* shorter arrays are cheap for Jansson */
#define MIN_STRING_TEXT 256

typedef struct {
    srv_blob *v;
    size_t n, cap;
} blob_vec;

static srv_blob *blob_push(blob_vec *bv)
{
    if (bv->n == bv->cap) {
        /* from 4: a small body has a few, and 4 stay under malloc's
         * per-thread cache limit (16 did not, costing a consolidation) */
        size_t cap = bv->cap ? bv->cap * 2 : 4;
        srv_blob *p = realloc(bv->v, cap * sizeof *p);
        if (!p)
            return NULL;
        bv->v = p;
        bv->cap = cap;
    }
    srv_blob *b = &bv->v[bv->n++];
    memset(b, 0, sizeof *b);
    return b;
}

/* Writes {"\u0001k":i}, the placeholder of blob i (k: 't' or 's'). */
static char *put_placeholder(char *o, char k, size_t i)
{
    memcpy(o, "{\"\\u0001", 8);
    o[8] = k;
    o[9] = '"';
    o[10] = ':';
    o += 11;
    o += srv_fmt_u64(i, o);
    *o++ = '}';
    return o;
}

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* Parses the regular nested array at p ('[') into b, growing b->data
 * (malloc'd) as it goes: one pass, no pre-count. Returns the position after
 * the array, or NULL to leave the text to the slow path (b->data freed). */
static const char *parse_array(const char *p, const char *end, srv_blob *b)
{
    int64_t dims[ATTN_MAX_RANK], cnt[ATTN_MAX_RANK];
    int depth = 0, leaf = -1;
    size_t n = 0, cap = 256;
    float *data = malloc(cap * sizeof *data);
    if (!data)
        return NULL;
    for (int i = 0; i < ATTN_MAX_RANK; i++)
        dims[i] = -1;
    while (p < end) {
        /* expect an element (or ']' for an empty array: refused) */
        while (p < end && is_ws(*p))
            p++;
        if (p >= end)
            goto bail;
        if (*p == '[') {
            if (depth == ATTN_MAX_RANK || (leaf >= 0 && depth >= leaf))
                goto bail;
            cnt[depth++] = 0;
            p++;
            continue;
        }
        if (depth == 0)
            goto bail;
        if (leaf < 0)
            leaf = depth;
        else if (depth != leaf)
            goto bail;
        float f;
        if (*p == 't' && end - p >= 4 && memcmp(p, "true", 4) == 0) {
            f = 1.0f;
            p += 4;
            if (!b->has_bool)
                b->first_bool = (int64_t)n;
            b->has_bool = 1;
        } else if (*p == 'f' && end - p >= 5 && memcmp(p, "false", 5) == 0) {
            f = 0.0f;
            p += 5;
            if (!b->has_bool)
                b->first_bool = (int64_t)n;
            b->has_bool = 1;
        } else {
            int finite;
            p = srv_parse_float(p, end, &f, &finite);
            if (!p || !finite)
                goto bail;
            b->has_num = 1;
        }
        if (n == cap) {
            if (cap > SIZE_MAX / 2 / sizeof *data)
                goto bail;
            float *g = realloc(data, cap * 2 * sizeof *data);
            if (!g)
                goto bail;
            data = g;
            cap *= 2;
        }
        data[n++] = f;
        cnt[depth - 1]++;
        /* then ',' (another element) or one or more ']' */
        for (;;) {
            while (p < end && is_ws(*p))
                p++;
            if (p >= end)
                goto bail;
            if (*p == ',') {
                p++;
                break;
            }
            if (*p != ']')
                goto bail;
            p++;
            int d = --depth;
            if (dims[d] < 0)
                dims[d] = cnt[d];
            else if (dims[d] != cnt[d])
                goto bail;
            if (depth == 0) {
                b->rank = leaf;
                for (int i = 0; i < leaf; i++)
                    b->shape[i] = dims[i];
                b->count = (int64_t)n;
                b->data = data;
                return p;
            }
            cnt[depth - 1]++;
        }
    }
bail:
    free(data);
    return NULL;
}

/* The string at *p: a long one after a colon becomes a placeholder, any
 * other is copied. Returns 0 (*p past it), 1 when unterminated (copied to
 * the end for Jansson to refuse), -1 when out of memory. */
static inline int scan_string(const char **pp, const char *end, char **op, blob_vec *bv,
                              int after_colon)
{
    const char *p = *pp;
    /* memchr runs at memory speed over megabytes of base64; only a string
     * with a backslash needs the careful walk. Both searches go 64 KiB at a
     * time, the second over what the first just read (still in cache). */
    const char *s = NULL, *w = p + 1;
    int esc = 0, bs = 0;
    while (!s && !bs && w < end) {
        size_t k = (size_t)(end - w) < ((size_t)64 << 10) ? (size_t)(end - w) : (size_t)64 << 10;
        s = memchr(w, '"', k);
        bs = memchr(w, '\\', (size_t)((s ? s : w + k) - w)) != NULL;
        w += k;
    }
    if (!s)
        s = end;
    if (bs) {
        esc = 1;
        s = p + 1;
        while (s < end && *s != '"') {
            if (*s == '\\')
                s++;
            s++;
        }
    }
    if (s >= end) {
        memcpy(*op, p, (size_t)(end - p));
        *op += end - p;
        return 1;
    }
    size_t slen = (size_t)(s - p - 1);
    if (after_colon && !esc && slen >= MIN_STRING_TEXT) {
        srv_blob *b = blob_push(bv);
        if (!b)
            return -1;
        b->is_string = 1;
        b->str = p + 1;
        b->len = slen;
        *op = put_placeholder(*op, 's', bv->n - 1);
    } else {
        memcpy(*op, p, slen + 2);
        *op += slen + 2;
    }
    *pp = s + 1;
    return 0;
}

int srv_scan(const char *body, size_t len, srv_arena *a, srv_scan_result *out)
{
    const char *p = body, *end = body + len;
    memset(out, 0, sizeof *out);
    /* Placeholders are shorter than what they replace, except for a big
     * integer's (35 bytes for 19 or 20 digits and the ':' before them):
     * the envelope is at most twice the body. Untouched pages cost nothing. */
    if (len > (SIZE_MAX - 64) / 2)
        return -1;
    char *env = srv_arena_alloc(a, 2 * len + 64);
    if (!env)
        return -1;
    char *o = env;
    blob_vec bv = {0};
    int after_colon = 0;
    int depth = 0, deepest = 0; /* counted as srv_json_too_deep does */
    while (p < end) {
        char c = *p;
        if (c == '"') {
            int rc = scan_string(&p, end, &o, &bv, after_colon);
            if (rc < 0)
                goto oom;
            if (rc > 0)
                break;
            after_colon = 0;
            continue;
        }
        if (c == '[' && after_colon) {
            srv_blob *b = blob_push(&bv);
            if (!b)
                goto oom;
            const char *stop = parse_array(p, end, b);
            if (stop && stop - p >= MIN_ARRAY_TEXT) {
                if (depth + b->rank > deepest) /* its brackets nest rank deep */
                    deepest = depth + b->rank;
                if (srv_arena_adopt(a, b->data) != 0) {
                    free(b->data);
                    goto oom;
                }
                o = put_placeholder(o, 't', bv.n - 1);
                p = stop;
                after_colon = 0;
                continue;
            }
            if (stop) /* small: Jansson reads it as cheaply */
                free(b->data);
            bv.n--; /* leave it to the slow path */
        }
        if (after_colon && c >= '1' && c <= '9') {
            /* An integer past Jansson's int64 (a seed up to 2^64 - 1):
             * passed on as a string in a placeholder. */
            const char *q = p;
            while (q < end && *q >= '0' && *q <= '9')
                q++;
            size_t nd = (size_t)(q - p);
            int big = nd == 20 || (nd == 19 && memcmp(p, "9223372036854775807", 19) > 0);
            if (big && (q >= end || (*q != '.' && *q != 'e' && *q != 'E'))) {
                o += sprintf(o, "{\"\\u0001u\":\"%.*s\"}", (int)nd, p);
                p = q;
                after_colon = 0;
                continue;
            }
        }
        if (c == '[' || c == '{') {
            if (++depth > deepest)
                deepest = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        }
        if (!is_ws(c))
            after_colon = c == ':';
        *o++ = c;
        p++;
    }
    *o = '\0';
    out->depth = deepest;
    out->envelope = env;
    out->envelope_len = (size_t)(o - env);
    if (bv.n) {
        out->blobs = srv_arena_alloc(a, bv.n * sizeof *bv.v);
        if (!out->blobs)
            goto oom;
        memcpy(out->blobs, bv.v, bv.n * sizeof *bv.v);
        out->n_blobs = bv.n;
    }
    free(bv.v);
    return 0;
oom:
    free(bv.v);
    return -1;
}

const srv_blob *srv_blob_of(const srv_scan_result *sr, json_t *j)
{
    if (!sr || !json_is_object(j) || json_object_size(j) != 1)
        return NULL;
    json_t *ix = json_object_get(j, "\x01t");
    int want_string = 0;
    if (!ix) {
        ix = json_object_get(j, "\x01s");
        want_string = 1;
    }
    if (!json_is_integer(ix))
        return NULL;
    json_int_t i = json_integer_value(ix);
    if (i < 0 || (uint64_t)i >= sr->n_blobs || sr->blobs[i].is_string != want_string)
        return NULL;
    return &sr->blobs[i];
}

int srv_json_u64(json_t *j, uint64_t *out)
{
    if (json_is_integer(j)) {
        if (json_integer_value(j) < 0)
            return -1;
        *out = (uint64_t)json_integer_value(j);
        return 0;
    }
    json_t *s = json_is_object(j) && json_object_size(j) == 1 ? json_object_get(j, "\x01u") : NULL;
    if (!json_is_string(s))
        return -1;
    uint64_t v = 0;
    for (const char *p = json_string_value(s); *p; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Bytes of x equal to the byte in every lane of pat get their high bit
 * set; the lowest set one is exact (a borrow may flag bytes above it). */
static uint64_t bytes_eq(uint64_t x, uint64_t pat)
{
    uint64_t v = x ^ pat;
    return (v - 0x0101010101010101ull) & ~v & 0x8080808080808080ull;
}

/* Offset of the first byte in body[i..len) that matters to the depth
 * count ('"', '[', ']', '{', '}'), eight bytes a step: a body is mostly
 * digits, and a byte loop over them cost as much as parsing them. */
static size_t next_structural(const char *body, size_t i, size_t len)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (len - i >= 8) {
        uint64_t x;
        memcpy(&x, body + i, 8);
        uint64_t lo = x | 0x2020202020202020ull; /* '[' -> '{', ']' -> '}' */
        uint64_t hit = bytes_eq(lo, 0x7b7b7b7b7b7b7b7bull) | bytes_eq(lo, 0x7d7d7d7d7d7d7d7dull) |
                       bytes_eq(x, 0x2222222222222222ull);
        if (hit)
            return i + (size_t)(__builtin_ctzll(hit) >> 3);
        i += 8;
    }
#endif
    return i;
}

int srv_json_too_deep(const char *body, size_t len, int max_depth)
{
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        i = next_structural(body, i, len);
        if (i >= len)
            break;
        char c = body[i];
        if (c == '"') {
            /* Jump to the closing quote with memchr: base64 tensors are
             * megabytes of string, and a byte loop over them cost more than
             * decoding them. A quote ends the string unless an odd run of
             * backslashes precedes it (the opening quote bounds the run). */
            size_t open = i;
            for (;;) {
                const char *q = memchr(body + i + 1, '"', len - i - 1);
                if (!q)
                    return 0; /* unterminated: the parser reports it */
                i = (size_t)(q - body);
                size_t bs = 0;
                while (i - bs - 1 > open && body[i - bs - 1] == '\\')
                    bs++;
                if (bs % 2 == 0)
                    break;
            }
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                return 1;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return 0;
}
