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
        size_t cap = bv->cap ? bv->cap * 2 : 16;
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

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* First pass over an array starting at p ('['): its end and an upper bound
 * on its scalar count. Returns NULL if it holds anything but numbers,
 * booleans and arrays. */
static const char *array_extent(const char *p, const char *end, int64_t *bound)
{
    int depth = 0;
    int64_t commas = 0;
    for (; p < end; p++) {
        switch (*p) {
        case '[': depth++; break;
        case ']':
            if (--depth == 0) {
                *bound = commas + 1;
                return p + 1;
            }
            break;
        case ',': commas++; break;
        case '"': case '{': case '}': case ':': case 'n':
            return NULL;
        default: break;
        }
    }
    return NULL;
}

/* Parses the regular nested array at p into blob b (data preallocated for
 * `bound` floats). Returns 0, or -1 to leave the text to the slow path. */
static int parse_array(const char *p, const char *end, srv_blob *b, int64_t bound)
{
    int64_t dims[ATTN_MAX_RANK], cnt[ATTN_MAX_RANK];
    int depth = 0, leaf = -1;
    int64_t n = 0;
    for (int i = 0; i < ATTN_MAX_RANK; i++)
        dims[i] = -1;
    while (p < end) {
        /* expect an element (or ']' for an empty array: refused) */
        while (p < end && is_ws(*p))
            p++;
        if (p >= end)
            return -1;
        if (*p == '[') {
            if (depth == ATTN_MAX_RANK || (leaf >= 0 && depth >= leaf))
                return -1;
            cnt[depth++] = 0;
            p++;
            continue;
        }
        if (depth == 0)
            return -1;
        if (leaf < 0)
            leaf = depth;
        else if (depth != leaf)
            return -1;
        float f;
        if (*p == 't' && end - p >= 4 && memcmp(p, "true", 4) == 0) {
            f = 1.0f;
            p += 4;
            b->has_bool = 1;
        } else if (*p == 'f' && end - p >= 5 && memcmp(p, "false", 5) == 0) {
            f = 0.0f;
            p += 5;
            b->has_bool = 1;
        } else {
            int finite;
            p = srv_parse_float(p, end, &f, &finite);
            if (!p || !finite)
                return -1;
            b->has_num = 1;
        }
        if (n >= bound)
            return -1;
        b->data[n++] = f;
        cnt[depth - 1]++;
        /* then ',' (another element) or one or more ']' */
        for (;;) {
            while (p < end && is_ws(*p))
                p++;
            if (p >= end)
                return -1;
            if (*p == ',') {
                p++;
                break;
            }
            if (*p != ']')
                return -1;
            p++;
            int d = --depth;
            if (dims[d] < 0)
                dims[d] = cnt[d];
            else if (dims[d] != cnt[d])
                return -1;
            if (depth == 0) {
                b->rank = leaf;
                for (int i = 0; i < leaf; i++)
                    b->shape[i] = dims[i];
                b->count = n;
                return 0;
            }
            cnt[depth - 1]++;
        }
    }
    return -1;
}

int srv_scan(const char *body, size_t len, srv_arena *a, srv_scan_result *out)
{
    const char *p = body, *end = body + len;
    memset(out, 0, sizeof *out);
    char *env = srv_arena_alloc(a, len + 64);
    if (!env)
        return -1;
    char *o = env;
    blob_vec bv = {0};
    int after_colon = 0;
    while (p < end) {
        char c = *p;
        if (c == '"') {
            const char *s = p + 1;
            int esc = 0;
            while (s < end && *s != '"') {
                if (*s == '\\') {
                    esc = 1;
                    s++;
                }
                s++;
            }
            if (s >= end) { /* unterminated: Jansson will say so */
                memcpy(o, p, (size_t)(end - p));
                o += end - p;
                break;
            }
            size_t slen = (size_t)(s - p - 1);
            if (after_colon && !esc && slen >= MIN_STRING_TEXT) {
                srv_blob *b = blob_push(&bv);
                if (!b)
                    goto oom;
                b->is_string = 1;
                b->str = p + 1;
                b->len = slen;
                o += sprintf(o, "{\"\\u0001s\":%zu}", bv.n - 1);
            } else {
                memcpy(o, p, slen + 2);
                o += slen + 2;
            }
            p = s + 1;
            after_colon = 0;
            continue;
        }
        if (c == '[' && after_colon) {
            int64_t bound;
            const char *stop = array_extent(p, end, &bound);
            if (stop && stop - p >= MIN_ARRAY_TEXT &&
                (uint64_t)bound <= SIZE_MAX / sizeof(float)) {
                float *data = srv_arena_alloc(a, (size_t)bound * sizeof(float));
                if (!data)
                    goto oom;
                srv_blob *b = blob_push(&bv);
                if (!b)
                    goto oom;
                b->data = data;
                if (parse_array(p, stop, b, bound) == 0) {
                    o += sprintf(o, "{\"\\u0001t\":%zu}", bv.n - 1);
                    p = stop;
                    after_colon = 0;
                    continue;
                }
                bv.n--; /* leave it to the slow path */
            }
        }
        if (!is_ws(c))
            after_colon = c == ':';
        *o++ = c;
        p++;
    }
    *o = '\0';
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
