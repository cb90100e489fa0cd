/* st.c - a checked float32 safetensors reader: every size and offset from the file is validated. */
#include "internal.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ST_MAX_FILE ((uint64_t)1 << 31)   /* 2 GiB */
#define ST_MAX_HEADER ((uint64_t)1 << 26) /* 64 MiB of JSON */

void mdl_st_free(mdl_st_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++) {
        free(f->t[i].name);
        free(f->t[i].data);
    }
    free(f->t);
    free(f->model_meta);
    memset(f, 0, sizeof *f);
}

const mdl_tensor *mdl_st_find(const mdl_st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0)
            return &f->t[i];
    return NULL;
}

/* A JSON integer in [0, max]; returns 0 and sets *out, or -1. */
static int st_uint(json_t *j, int64_t max, int64_t *out)
{
    if (!json_is_integer(j))
        return -1;
    json_int_t v = json_integer_value(j);
    if (v < 0 || v > max)
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* Fills t's name, shape, count and [*b, *e) from one header entry. */
static int st_entry(const char *path, const char *key, json_t *v, uint64_t data_len, mdl_tensor *t,
                    int64_t *b, int64_t *e, char *err, size_t errn)
{
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape");
    json_t *off = json_object_get(v, "data_offsets");
    if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(sh) || !json_is_array(off))
        return mdl_fail(err, errn, "%s: tensor \"%.80s\": the header entry needs dtype, shape and "
                       "data_offsets", path, key);
    if (strcmp(json_string_value(dt), "F32") != 0)
        return mdl_fail(err, errn, "%s: tensor \"%.80s\": dtype %.20s, expected F32", path, key,
                       json_string_value(dt));
    size_t rank = json_array_size(sh);
    if (rank > ATTN_MAX_RANK)
        return mdl_fail(err, errn, "%s: tensor \"%.80s\": rank %zu, at most %d", path, key, rank,
                       ATTN_MAX_RANK);
    t->rank = (int)rank;
    t->count = 1;
    for (size_t i = 0; i < rank; i++) {
        if (st_uint(json_array_get(sh, i), INT32_MAX, &t->shape[i]) != 0 ||
            !attn_size_mul(t->count, t->shape[i], &t->count))
            return mdl_fail(err, errn, "%s: tensor \"%.80s\": bad shape (dimension %zu)", path, key, i);
    }
    int64_t bytes;
    if (json_array_size(off) != 2 || st_uint(json_array_get(off, 0), INT64_MAX, b) != 0 ||
        st_uint(json_array_get(off, 1), INT64_MAX, e) != 0 || *e < *b)
        return mdl_fail(err, errn, "%s: tensor \"%.80s\": data_offsets must be [begin, end] with "
                       "0 <= begin <= end", path, key);
    if (!attn_size_mul(t->count, 4, &bytes) || *e - *b != bytes)
        return mdl_fail(err, errn, "%s: tensor \"%.80s\": data_offsets span %lld bytes, its shape "
                       "needs %lld", path, key, (long long)(*e - *b), (long long)t->count * 4);
    if ((uint64_t)*e > data_len)
        return mdl_fail(err, errn, "%s: tensor \"%.80s\": data ends at byte %lld but the file has "
                       "%llu data bytes (truncated?)", path, key, (long long)*e,
                       (unsigned long long)data_len);
    return 0;
}

/* Copies the tensor's bytes (little-endian float32) and checks finiteness. */
static int st_copy(const char *path, mdl_tensor *t, const unsigned char *src, char *err, size_t errn)
{
    size_t bytes = (size_t)t->count * 4;
    t->data = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (!t->data)
        return mdl_fail(err, errn, "%s: tensor \"%.80s\": out of memory", path, t->name);
    memcpy(t->data, src, bytes);
    for (int64_t i = 0; i < t->count; i++)
        if (!isfinite(t->data[i]))
            return mdl_fail(err, errn, "%s: tensor \"%.80s\": value %lld is not finite (corrupted?)",
                           path, t->name, (long long)i);
    return 0;
}

typedef struct { int64_t b, e; size_t i; } st_span;

static int st_span_cmp(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    return x->b < y->b ? -1 : x->b > y->b;
}

static int st_overlaps(const char *path, const mdl_st_file *f, st_span *sp, char *err, size_t errn)
{
    qsort(sp, f->n, sizeof *sp, st_span_cmp);
    for (size_t i = 1; i < f->n; i++)
        if (sp[i].b < sp[i - 1].e)
            return mdl_fail(err, errn, "%s: tensor \"%.80s\": its data overlaps tensor \"%.80s\"",
                           path, f->t[sp[i].i].name, f->t[sp[i - 1].i].name);
    return 0;
}

static int st_header(const char *path, json_t *root, const unsigned char *data, uint64_t data_len,
                     mdl_st_file *f, char *err, size_t errn)
{
    size_t n = json_object_size(root);
    f->t = calloc(n ? n : 1, sizeof *f->t);
    st_span *sp = calloc(n ? n : 1, sizeof *sp);
    if (!f->t || !sp) {
        free(sp);
        return mdl_fail(err, errn, "%s: out of memory", path);
    }
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            json_t *m = json_object_get(v, "model");
            if (json_is_string(m) && !f->model_meta)
                f->model_meta = strdup(json_string_value(m));
            continue;
        }
        mdl_tensor *t = &f->t[f->n];
        if (!(t->name = strdup(key))) {
            rc = mdl_fail(err, errn, "%s: out of memory", path);
            break;
        }
        f->n++;
        sp[f->n - 1].i = f->n - 1;
        if ((rc = st_entry(path, key, v, data_len, t, &sp[f->n - 1].b, &sp[f->n - 1].e, err, errn)) ||
            (rc = st_copy(path, t, data + sp[f->n - 1].b, err, errn)))
            break;
    }
    if (rc == 0)
        rc = st_overlaps(path, f, sp, err, errn);
    free(sp);
    return rc;
}

int mdl_st_parse(const char *path, const unsigned char *buf, size_t len, mdl_st_file *f,
                 char *err, size_t errn)
{
    memset(f, 0, sizeof *f);
    if (len < 8)
        return mdl_fail(err, errn, "%s: %zu bytes, shorter than the 8-byte header length (truncated?)",
                       path, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | buf[i];
    if (hlen == 0 || hlen > ST_MAX_HEADER || hlen > len - 8)
        return mdl_fail(err, errn, "%s: header length %llu does not fit the file's %zu bytes "
                       "(truncated or not safetensors)", path, (unsigned long long)hlen, len);
    json_error_t je;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root || !json_is_object(root)) {
        mdl_fail(err, errn, "%s: the header is not a JSON object (%.120s, byte %d)", path,
                root ? "not an object" : je.text, root ? 0 : je.position);
        json_decref(root);
        return -1;
    }
    int rc = st_header(path, root, buf + 8 + hlen, len - 8 - hlen, f, err, errn);
    json_decref(root);
    if (rc)
        mdl_st_free(f);
    return rc;
}

int mdl_st_load(const char *path, mdl_st_file *f, char *err, size_t errn)
{
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return mdl_fail(err, errn, "%s: %s", path, strerror(errno));
    struct stat s;
    if (fstat(fileno(fp), &s) != 0 || !S_ISREG(s.st_mode) || (uint64_t)s.st_size > ST_MAX_FILE) {
        fclose(fp);
        return mdl_fail(err, errn, "%s: not a regular file of at most 2 GiB", path);
    }
    size_t len = (size_t)s.st_size;
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf || fread(buf, 1, len, fp) != len) {
        free(buf);
        fclose(fp);
        return mdl_fail(err, errn, "%s: cannot read %zu bytes", path, len);
    }
    fclose(fp);
    int rc = mdl_st_parse(path, buf, len, f, err, errn);
    free(buf);
    return rc;
}
