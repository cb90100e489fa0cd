/* codec.c - tensors between JSON and attn_tensor/attn_mask: nested arrays,
 * {shape,data} and {shape,dtype,b64} in; nested arrays or b64 out. Big
 * arrays arrive pre-parsed by scan.c; this file checks and adopts them. */
#include "srv.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_FLOAT, K_BOOL };

static int host_is_le(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static void swap32(void *p, int64_t n)
{
    uint8_t *b = p;
    for (int64_t i = 0; i < n; i++, b += 4) {
        uint8_t t = b[0]; b[0] = b[3]; b[3] = t;
        t = b[1]; b[1] = b[2]; b[2] = t;
    }
}

/* Whether any of 1024 floats is Inf or NaN: the exponent field plus one
 * carries into bit 31 only when it is all ones. A fixed count and no
 * compare, so the compiler vectorises it at -O2. */
static uint32_t block_nonfinite(const uint32_t *u)
{
    uint32_t bad = 0;
    for (int i = 0; i < 1024; i++)
        bad |= (u[i] & 0x7f800000u) + 0x00800000u;
    return bad >> 31;
}

/* Index of the first Inf or NaN among n floats, or -1. Blocks of 1024 are
 * checked whole (this runs over every base64 tensor), and only a bad block,
 * or the short last one, is walked. */
int64_t srv_first_nonfinite(const void *data, int64_t n)
{
    const uint32_t *u = data;
    for (int64_t b = 0; b < n; b += 1024) {
        int64_t m = n - b < 1024 ? n - b : 1024;
        if (m == 1024 && !block_nonfinite(u + b))
            continue;
        for (int64_t i = 0; i < m; i++)
            if ((u[b + i] & 0x7f800000u) == 0x7f800000u)
                return b + i;
    }
    return -1;
}

/* Base64 text to bytes in slices of 16 KiB of text, each slice's floats
 * checked for Inf and NaN (when bad is not NULL) right after it is decoded,
 * while it is still in cache: one pass over the megabytes instead of two.
 * Returns the bytes decoded, or -1 when the text is not valid padded base64
 * (a slice before the last must decode whole, without padding). *bad: the
 * index of the first float that is not finite, or -1. */
static int64_t decode_b64(const char *s, size_t len, uint8_t *dst, int64_t *bad)
{
    enum { SLICE = 16384 }; /* characters: 12288 bytes, whole floats */
    size_t done = 0;
    int64_t out = 0;
    if (bad)
        *bad = -1;
    do {
        size_t k = len - done > SLICE ? SLICE : len - done;
        int64_t n = srv_b64_decode(s + done, k, dst + out);
        if (n < 0 || (done + k < len && n != (int64_t)(k / 4 * 3)))
            return -1;
        if (bad && *bad < 0) {
            int64_t i = srv_first_nonfinite(dst + out, n / 4);
            if (i >= 0)
                *bad = out / 4 + i;
        }
        done += k;
        out += n;
    } while (done < len);
    return out;
}

static const char *kind_name(int kind) { return kind == K_BOOL ? "mask" : "tensor"; }

/* Product of the shape, overflow-checked and capped. */
static int shape_count(srv_codec *c, int rank, const int64_t *shape,
                       const char *field, int64_t *count, srv_err *e)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        if (!attn_size_mul(n, shape[i], &n))
            return srv_fail(e, 413, "too_large", field, "%s is too large: the product of its shape overflows 64 bits", field);
    if (n > c->max_elements)
        return srv_fail(e, 413, "too_large", field,
                        "%s has %lld elements; this server accepts at most %lld per tensor "
                        "(ATTN_MAX_ELEMENTS): send smaller inputs or split the batch",
                        field, (long long)n, (long long)c->max_elements);
    *count = n;
    return 0;
}

float srv_json_float(const json_t *v)
{
    if (json_is_integer(v))
        return (float)json_integer_value(v);
    return (float)json_number_value(v);
}

int srv_json_scalar(const json_t *v, float *out)
{
    const char *digits = srv_json_digits(v);
    if (!digits && !json_is_number(v))
        return -1;
    double x = digits ? strtod(digits, NULL) : json_number_value(v);
    if (!(x >= -FLT_MAX && x <= FLT_MAX))
        return -2;
    *out = digits ? strtof(digits, NULL) : srv_json_float(v); /* glibc's: correctly rounded */
    return 0;
}

/* One scalar into slot i of a float or byte buffer. */
static int put_scalar(json_t *v, int kind, void *dst, int64_t i,
                      const char *field, srv_err *e)
{
    if (kind == K_BOOL) {
        int bit;
        if (json_is_boolean(v))
            bit = json_is_true(v);
        else if (json_is_number(v) && (json_number_value(v) == 0.0 || json_number_value(v) == 1.0))
            bit = json_number_value(v) != 0.0;
        else
            return srv_fail(e, 400, "invalid_tensor", field,
                            "%s must be true/false or 1/0", field);
        ((uint8_t *)dst)[i] = (uint8_t)bit;
        return 0;
    }
    if (!json_is_number(v))
        return srv_fail(e, 400, "invalid_tensor", field, "%s must be a number", field);
    float f = srv_json_float(v);
    if (!isfinite(f))
        return srv_fail(e, 400, "invalid_tensor", field,
                        "%s is not a finite float32 value", field);
    ((float *)dst)[i] = f;
    return 0;
}

/* Walks a (small, Jansson-parsed) nested array against the shape found
 * from its first elements; any other length is ragged. */
static int walk(json_t *j, int depth, int rank, const int64_t *shape, int kind,
                void *dst, int64_t *pos, char *path, size_t plen, srv_err *e)
{
    if (depth == rank)
        return put_scalar(j, kind, dst, (*pos)++, path, e);
    if (!json_is_array(j) || (int64_t)json_array_size(j) != shape[depth])
        return srv_fail(e, 400, "invalid_tensor", path,
                        "%s is ragged: expected an array of %lld elements at this depth",
                        path, (long long)shape[depth]);
    for (size_t i = 0; i < json_array_size(j); i++) {
        int n = snprintf(path + plen, 96 - plen, "[%zu]", i);
        size_t nl = (n > 0 && plen + (size_t)n < 96) ? plen + (size_t)n : plen;
        if (walk(json_array_get(j, i), depth + 1, rank, shape, kind, dst, pos, path, nl, e))
            return -1;
        path[plen] = '\0';
    }
    return 0;
}

static int from_nested(srv_codec *c, json_t *j, const char *field, int kind,
                       int *rank, int64_t *shape, void **data, srv_err *e)
{
    int r = 0;
    json_t *x = j;
    while (json_is_array(x)) {
        if (r == ATTN_MAX_RANK)
            return srv_fail(e, 400, "invalid_tensor", field,
                            "%s has more than %d dimensions", field, ATTN_MAX_RANK);
        if (json_array_size(x) == 0)
            return srv_fail(e, 400, "invalid_tensor", field,
                            "%s has an empty dimension; every dimension must be at least 1", field);
        shape[r++] = (int64_t)json_array_size(x);
        x = json_array_get(x, 0);
    }
    int64_t count = 0;
    if (shape_count(c, r, shape, field, &count, e))
        return -1;
    size_t esz = kind == K_BOOL ? 1 : sizeof(float);
    void *dst = srv_arena_alloc(c->arena, (size_t)count * esz);
    if (!dst)
        return srv_fail(e, 503, "overloaded", field, "out of memory reading %s", field);
    char path[96];
    snprintf(path, sizeof path, "%s", field);
    int64_t pos = 0;
    if (walk(j, 0, r, shape, kind, dst, &pos, path, strlen(path), e))
        return -1;
    *rank = r;
    *data = dst;
    return 0;
}

/* "query[3][1]" for flat index i of a tensor of the given shape. */
static void index_path(char *out, size_t n, const char *field, int rank,
                       const int64_t *shape, int64_t i)
{
    int64_t idx[ATTN_MAX_RANK] = {0};
    for (int d = rank - 1; d >= 0; d--) {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    size_t k = (size_t)snprintf(out, n, "%s", field);
    for (int d = 0; d < rank && k < n; d++)
        k += (size_t)snprintf(out + k, n - k, "[%lld]", (long long)idx[d]);
}

/* The flat index of the first number in a lifted array's text t[0..n)
 * that a double does not read as exactly 0 or 1, or -1: a mask's floats
 * cannot tell (1e-50 rounds to 0.0f, 0.99999999 to 1.0f), and the same
 * array short enough to stay in Jansson's envelope is refused for them.
 * The scanner has checked the syntax; the text ends before the body's
 * NUL, so strtod stops at the number's end. */
static int64_t first_inexact_bit(const char *t, size_t n)
{
    const char *end = t + n, *p = t;
    int64_t i = 0;
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        if (c <= ' ' || c == ',' || c == '[' || c == ']') {
            p++;
            continue;
        }
        i++;
        if (c == 't' || c == 'f') { /* true, false */
            p += c == 't' ? 4 : 5;
            continue;
        }
        const char *q = p + (c == '-'); /* 0, 1, 0.0, 1.000, -0 ... at once */
        if (*q == '0' || *q == '1') {
            q++;
            if (*q == '.')
                while (*++q == '0') {}
            if (*q == ',' || *q == ']' || (unsigned char)*q <= ' ') {
                p = q;
                continue;
            }
        }
        char *r;
        double x = strtod(p, &r);
        if (x != 0.0 && x != 1.0)
            return i - 1;
        p = r;
    }
    return -1;
}

/* Adopts a blob the scanner parsed. */
static int from_blob(srv_codec *c, const srv_blob *b, const char *field, int kind,
                     int *rank, int64_t *shape, void **data, srv_err *e)
{
    int64_t count = 0;
    if (shape_count(c, b->rank, b->shape, field, &count, e))
        return -1;
    char at[96];
    if (kind == K_FLOAT) {
        if (b->has_bool) {
            index_path(at, sizeof at, field, b->rank, b->shape, b->first_bool);
            return srv_fail(e, 400, "invalid_tensor", at, "%s must be a number, not a boolean", at);
        }
        *data = b->data;
    } else {
        uint8_t *m = srv_arena_alloc(c->arena, (size_t)count);
        if (!m)
            return srv_fail(e, 503, "overloaded", field, "out of memory reading %s", field);
        int64_t bad = b->text && b->has_long ? first_inexact_bit(b->text, b->text_len) : -1;
        for (int64_t i = 0; i < count && bad < 0; i++) {
            float f = b->data[i];
            if (f != 0.0f && f != 1.0f)
                bad = i;
            m[i] = f != 0.0f;
        }
        if (bad >= 0) {
            index_path(at, sizeof at, field, b->rank, b->shape, bad);
            return srv_fail(e, 400, "invalid_tensor", at, "%s must be true/false or 1/0", at);
        }
        *data = m;
    }
    *rank = b->rank;
    memcpy(shape, b->shape, sizeof b->shape);
    return 0;
}

/* A string value, plain or lifted out by the scanner. */
static int get_string(srv_codec *c, json_t *j, const char **s, size_t *len)
{
    if (json_is_string(j)) {
        *s = json_string_value(j);
        *len = json_string_length(j);
        return 0;
    }
    const srv_blob *b = srv_blob_of(c->scan, j);
    if (b && b->is_string) {
        *s = b->str;
        *len = b->len;
        return 0;
    }
    return -1;
}

/* A tensor object's keys (shape, data, dtype, b64 and no other) and its
 * shape into r and shape, with its element count. */
static int object_shape(srv_codec *c, json_t *j, const char *field, int *r, int64_t *shape,
                        int64_t *count, srv_err *e)
{
    char sub[96];
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        if (strcmp(key, "shape") && strcmp(key, "data") && strcmp(key, "dtype") && strcmp(key, "b64")) {
            snprintf(sub, sizeof sub, "%s.%s", field, key);
            return srv_fail(e, 400, "invalid_tensor", sub,
                            "%s: unknown key; a tensor object has shape and data, or shape, dtype and b64", sub);
        }
    }
    json_t *js = json_object_get(j, "shape");
    snprintf(sub, sizeof sub, "%s.shape", field);
    if (!json_is_array(js) || json_array_size(js) > ATTN_MAX_RANK)
        return srv_fail(e, 400, "invalid_tensor", sub,
                        "%s must be an array of up to %d positive integers", sub, ATTN_MAX_RANK);
    *r = (int)json_array_size(js);
    for (int i = 0; i < *r; i++) {
        json_t *d = json_array_get(js, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 1)
            return srv_fail(e, 400, "invalid_tensor", sub,
                            "%s must be an array of up to %d positive integers", sub, ATTN_MAX_RANK);
        shape[i] = json_integer_value(d);
    }
    return shape_count(c, *r, shape, field, count, e);
}

/* A tensor object's b64 string (jb) of count elements into *data:
 * little-endian floats checked for finiteness as they are decoded (while
 * the body arrived, when it could be), bytes for 0 or 1. */
static int object_b64(srv_codec *c, json_t *jb, const char *field, int kind, int64_t count,
                      void **data, srv_err *e)
{
    char sub[96];
    size_t esz = kind == K_BOOL ? 1 : sizeof(float);
    snprintf(sub, sizeof sub, "%s.b64", field);
    const char *s;
    size_t slen;
    if (get_string(c, jb, &s, &slen))
        return srv_fail(e, 400, "invalid_tensor", sub, "%s must be a base64 string", sub);
    int fused = kind == K_FLOAT && host_is_le();
    int64_t bad = -1, n;
    uint8_t *dst;
    if (!fused || !srv_body_decoded(s, slen, &dst, &n, &bad)) { /* not decoded as it came */
        void *raw = srv_arena_alloc(c->arena, srv_b64_decoded_max(slen)); /* max-aligned */
        if (!(dst = raw))
            return srv_fail(e, 503, "overloaded", field, "out of memory reading %s", field);
        n = decode_b64(s, slen, dst, fused ? &bad : NULL);
    }
    if (n < 0)
        return srv_fail(e, 400, "invalid_tensor", sub, "%s is not valid padded standard base64", sub);
    if (n != count * (int64_t)esz)
        return srv_fail(e, 400, "invalid_tensor", sub,
                        "%s decodes to %lld bytes; shape needs %lld (%zu per element)",
                        sub, (long long)n, (long long)(count * (int64_t)esz), esz);
    if (kind == K_FLOAT) {
        if (!fused) {
            swap32(dst, count);
            bad = srv_first_nonfinite(dst, count);
        }
        if (bad >= 0)
            return srv_fail(e, 400, "invalid_tensor", sub,
                            "%s: element %lld is not finite", sub, (long long)bad);
    } else {
        for (int64_t i = 0; i < count; i++)
            if (dst[i] > 1)
                return srv_fail(e, 400, "invalid_tensor", sub,
                                "%s: byte %lld is neither 0 nor 1", sub, (long long)i);
    }
    *data = dst;
    return 0;
}

/* A tensor object's data (jd): a flat array of count values, lifted out
 * by the scanner or as Jansson read it, into *data. */
static int object_data(srv_codec *c, json_t *jd, const char *field, int kind, int64_t count,
                       void **data, srv_err *e)
{
    char sub[96];
    snprintf(sub, sizeof sub, "%s.data", field);
    int dr;
    int64_t dshape[ATTN_MAX_RANK];
    void *dd;
    const srv_blob *b = srv_blob_of(c->scan, jd);
    if (b && !b->is_string) {
        if (from_blob(c, b, sub, kind, &dr, dshape, &dd, e))
            return -1;
    } else if (json_is_array(jd)) {
        if (from_nested(c, jd, sub, kind, &dr, dshape, &dd, e))
            return -1;
    } else {
        return srv_fail(e, 400, "invalid_tensor", sub, "%s must be a flat array of %lld values", sub, (long long)count);
    }
    if (dr != 1 || dshape[0] != count)
        return srv_fail(e, 400, "invalid_tensor", sub,
                        "%s must be a flat array of %lld values (the product of shape)",
                        sub, (long long)count);
    *data = dd;
    return 0;
}

static int from_object(srv_codec *c, json_t *j, const char *field, int kind,
                       int *rank, int64_t *shape, void **data, srv_err *e)
{
    int64_t count = 0;
    if (object_shape(c, j, field, rank, shape, &count, e))
        return -1;
    json_t *jd = json_object_get(j, "data"), *jt = json_object_get(j, "dtype"),
           *jb = json_object_get(j, "b64");
    if ((jd != NULL) == (jb != NULL))
        return srv_fail(e, 400, "invalid_tensor", field,
                        "%s must have exactly one of data and b64", field);
    const char *want = kind == K_BOOL ? "bool" : "float32";
    if (jt && (!json_is_string(jt) || strcmp(json_string_value(jt), want))) {
        char sub[96];
        snprintf(sub, sizeof sub, "%s.dtype", field);
        return srv_fail(e, 400, "invalid_tensor", sub,
                        "%s must be \"%s\" for a %s", sub, want, kind_name(kind));
    }
    return jb ? object_b64(c, jb, field, kind, count, data, e)
              : object_data(c, jd, field, kind, count, data, e);
}

static int decode_any(srv_codec *c, json_t *j, const char *field, int kind,
                      int *rank, int64_t *shape, void **data, srv_err *e)
{
    const srv_blob *b = srv_blob_of(c->scan, j);
    if (b && !b->is_string)
        return from_blob(c, b, field, kind, rank, shape, data, e);
    if (json_is_array(j))
        return from_nested(c, j, field, kind, rank, shape, data, e);
    if (json_is_object(j) && !b)
        return from_object(c, j, field, kind, rank, shape, data, e);
    return srv_fail(e, 400, "invalid_tensor", field,
                    "%s must be a %s: nested arrays, {\"shape\",\"data\"} or {\"shape\",\"dtype\",\"b64\"}",
                    field, kind_name(kind));
}

/* decode_any into a view's rank and shape, and at least one dimension. */
static int decode_view(srv_codec *c, json_t *j, const char *field, int kind, attn_tensor *view,
                       void **d, srv_err *e)
{
    *d = NULL;
    memset(view, 0, sizeof *view);
    if (decode_any(c, j, field, kind, &view->rank, view->shape, d, e))
        return -1;
    if (view->rank == 0)
        return srv_fail(e, 400, "invalid_tensor", field, "%s must have at least one dimension", field);
    return 0;
}

int srv_decode_tensor(srv_codec *c, json_t *j, const char *field,
                      attn_tensor *out, srv_err *e)
{
    void *d;
    int rc = decode_view(c, j, field, K_FLOAT, out, &d, e);
    out->data = d;
    return rc;
}

/* A mask's rank and shape are laid out as a tensor's. */
int srv_decode_mask(srv_codec *c, json_t *j, const char *field,
                    attn_mask *out, srv_err *e)
{
    attn_tensor view;
    void *d;
    int rc = decode_view(c, j, field, K_BOOL, &view, &d, e);
    out->rank = view.rank;
    memcpy(out->shape, view.shape, sizeof out->shape);
    out->data = d;
    return rc;
}

/* ------------------------------------------------------------ output */

/* Elements i0 .. i1-1 of the first dimension of a tensor of count floats,
 * comma-separated, without brackets around them: at most range_bound
 * bytes. */
static char *write_range(char *o, const float *data, int rank, const int64_t *shape,
                         int64_t count, int64_t i0, int64_t i1)
{
    if (rank == 1)
        return srv_fmt_floats(o, data + i0, i1 - i0);
    int64_t inner = shape[0] ? count / shape[0] : 1;
    for (int64_t i = i0; i < i1; i++) {
        if (i > i0)
            *o++ = ',';
        *o++ = '[';
        o = write_range(o, data + i * inner, rank - 1, shape + 1, inner, 0, shape[1]);
        *o++ = ']';
    }
    return o;
}

/* The most bytes write_range takes for n elements of the first dimension
 * of a tensor (rank, shape; inner floats an element): 15 for a float's
 * text ("-1.23456789e-38") and a comma, and two brackets and a comma for
 * each array within an element, shape[1] x ... x shape[k-1] of them at
 * depth k (a tensor of shape (B, 1, 1, 1) puts three pairs around each
 * float). -1 when that overflows. */
static int64_t range_bound(int rank, const int64_t *shape, int64_t inner, int64_t n)
{
    int64_t arrays = 0, level = 1, per;
    for (int k = 1; k < rank; k++)
        if (__builtin_add_overflow(arrays, level, &arrays) || !attn_size_mul(level, shape[k], &level))
            return -1;
    if (!attn_size_mul(inner, 16, &inner) || !attn_size_mul(arrays, 3, &arrays) ||
        __builtin_add_overflow(inner, arrays, &per) || !attn_size_mul(per, n, &per))
        return -1;
    return per;
}

/* Tensors of this many floats are written by two threads, a half each
 * (handing a half over costs some tens of us; these take 250 us or more). */
#define ENCODE_SPLIT 16384

typedef struct {
    const float *data;
    int rank;
    const int64_t *shape;
    int64_t count, i0, i1;
    char *text; /* malloc'd, NULL when out of memory */
    size_t len;
    srv_task task;
} encode_half;

static void encode_tail(void *arg)
{
    encode_half *h = arg;
    /* within the whole tensor's bound, which the caller has checked */
    int64_t n = range_bound(h->rank, h->shape, h->count / h->shape[0], h->i1 - h->i0);
    size_t cap;
    h->text = srv_big_alloc((size_t)n + 16, &cap); /* kept: no page faults next time */
    if (h->text)
        h->len = (size_t)(write_range(h->text, h->data, h->rank, h->shape, h->count, h->i0, h->i1) - h->text);
}

/* The nested array at o (room for nested_bound bytes); returns the end.
 * A big one in two halves, the second on a kept thread (tasks.c) into its
 * own buffer, then copied after the first (the same text). If no thread
 * has taken the second half when the first is done (a busy machine), this
 * thread writes it too. The halves split the first dimension longer than
 * 1: a batch of one, (1, L, E) or (1, H, L, L), is split in L or H. */
static char *write_nested(char *o, const float *data, int rank, const int64_t *shape,
                          int64_t count)
{
    if (rank > 1 && shape[0] == 1) {
        *o++ = '[';
        o = write_nested(o, data, rank - 1, shape + 1, count);
        *o++ = ']';
        return o;
    }
    int64_t mid = shape[0] / 2;
    encode_half half = {data, rank, shape, count, mid, shape[0], NULL, 0, {0}};
    int split = count >= ENCODE_SPLIT && mid > 0 &&
                srv_task_start(&half.task, encode_tail, &half, 1) == 0;
    *o++ = '[';
    o = write_range(o, data, rank, shape, count, 0, split ? mid : shape[0]);
    if (split) {
        *o++ = ',';
        if (srv_task_settle(&half.task) && half.text) {
            memcpy(o, half.text, half.len);
            o += half.len;
        } else {
            o = write_range(o, data, rank, shape, count, mid, shape[0]);
        }
        srv_big_free(half.text);
    }
    *o++ = ']';
    return o;
}

/* Bytes write_nested may take: range_bound of the whole first dimension
 * and the two outer brackets. Its peeled dimensions of 1 are arrays that
 * range_bound counts already (three bytes each), and its split leaves the
 * text as one pass writes it; -1 when that overflows. */
static int64_t nested_bound(int rank, const int64_t *shape, int64_t count)
{
    int64_t n = range_bound(rank, shape, shape[0] ? count / shape[0] : 0, shape[0]);
    return n < 0 || n > INT64_MAX - 2 ? -1 : n + 2;
}

void srv_encode_tensor(srv_buf *b, const float *data, int rank,
                       const int64_t *shape, int b64)
{
    int64_t count = 1;
    for (int i = 0; i < rank; i++)
        if (!attn_size_mul(count, shape[i], &count)) {
            b->failed = 1;
            return;
        }
    if (b64) {
        srv_buf_puts(b, "{\"shape\":[");
        for (int i = 0; i < rank; i++)
            srv_buf_printf(b, "%s%lld", i ? "," : "", (long long)shape[i]);
        srv_buf_puts(b, "],\"dtype\":\"float32\",\"b64\":\"");
        if ((uint64_t)count > SIZE_MAX / 8 || srv_buf_reserve(b, srv_b64_encoded_len((size_t)count * 4)) != 0) {
            b->failed = 1;
            return;
        }
        if (host_is_le()) {
            srv_b64_encode((const uint8_t *)data, (size_t)count * 4, b->data + b->len);
        } else {
            float *tmp = malloc((size_t)count * 4);
            if (!tmp) {
                b->failed = 1;
                return;
            }
            memcpy(tmp, data, (size_t)count * 4);
            swap32(tmp, count);
            srv_b64_encode((const uint8_t *)tmp, (size_t)count * 4, b->data + b->len);
            free(tmp);
        }
        b->len += srv_b64_encoded_len((size_t)count * 4);
        srv_buf_puts(b, "\"}");
        return;
    }
    if (rank == 0) {
        srv_buf_puts(b, "[]");
        return;
    }
    int64_t bound = nested_bound(rank, shape, count);
    if (bound < 0 || (uint64_t)bound > SIZE_MAX - 64 || srv_buf_reserve(b, (size_t)bound + 64) != 0) {
        b->failed = 1;
        return;
    }
    char *o = write_nested(b->data + b->len, data, rank, shape, count);
    b->len = (size_t)(o - b->data);
}

/* A bool tensor of rank 2 (a block layout): nested true/false, or
 * {"shape", "dtype": "bool", "b64"} with one byte each. */
void srv_encode_mask2(srv_buf *b, const uint8_t *m, int64_t rows, int64_t cols, int b64)
{
    int64_t count;
    if (!attn_size_mul(rows, cols, &count) || (uint64_t)count > SIZE_MAX / 8) {
        b->failed = 1;
        return;
    }
    if (b64) {
        srv_buf_printf(b, "{\"shape\":[%lld,%lld],\"dtype\":\"bool\",\"b64\":\"", (long long)rows,
                       (long long)cols);
        if (srv_buf_reserve(b, srv_b64_encoded_len((size_t)count)) != 0)
            return;
        srv_b64_encode(m, (size_t)count, b->data + b->len);
        b->len += srv_b64_encoded_len((size_t)count);
        srv_buf_puts(b, "\"}");
        return;
    }
    if (srv_buf_reserve(b, (size_t)count * 6 + 2 * (size_t)rows + 2) != 0)
        return;
    srv_buf_putc(b, '[');
    for (int64_t i = 0; i < rows; i++) {
        srv_buf_puts(b, i ? ",[" : "[");
        for (int64_t k = 0; k < cols; k++)
            srv_buf_puts(b, m[i * cols + k] ? (k ? ",true" : "true") : (k ? ",false" : "false"));
        srv_buf_putc(b, ']');
    }
    srv_buf_putc(b, ']');
}
