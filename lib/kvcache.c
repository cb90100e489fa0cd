/* kvcache.c - attn_kv_cache: a decoder's keys and values, per KV head one
 * array of key rows and one of value rows, all in one block that doubles
 * when full (amortised O(1) appends); attn_cache_compute (cache.c) reads
 * them in place. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "internal.h"

#define FIRST_ROWS 16       /* rows of an array's first allocation */
#define HUGE_PAGE (2 << 20) /* x86-64's transparent huge page */

struct attn_kv_cache {
    int64_t hkv, d, max;
    int64_t len, cap;   /* rows held, rows each array has room for */
    float *block;       /* the 2 hkv arrays of cap x d floats (NULL while cap is 0) */
    float **k, **v;     /* KV head g's arrays in block: k[g] = block + g cap d, then the values */
};

attn_kv_cache *attn_kv_cache_new(int64_t num_kv_heads, int64_t head_dim, int64_t max_tokens)
{
    size_t full = attn_kv_cache_bytes_max(num_kv_heads, head_dim, max_tokens);
    if (full == 0 || full == SIZE_MAX)
        return NULL;
    attn_kv_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->hkv = num_kv_heads;
    c->d = head_dim;
    c->max = max_tokens;
    c->k = calloc((size_t)num_kv_heads, sizeof *c->k);
    c->v = calloc((size_t)num_kv_heads, sizeof *c->v);
    if (!c->k || !c->v) {
        attn_kv_cache_free(c);
        return NULL;
    }
    return c;
}

void attn_kv_cache_free(attn_kv_cache *c)
{
    if (!c)
        return;
    free(c->block);
    free(c->k);
    free(c->v);
    free(c);
}

int64_t attn_kv_cache_len(const attn_kv_cache *c)
{
    return c ? c->len : 0;
}

/* The capacity an array gets to hold rows rows: doubled from FIRST_ROWS,
 * at most max_tokens (rows <= max_tokens). */
static int64_t cap_for(const attn_kv_cache *c, int64_t rows)
{
    if (rows <= c->cap)
        return c->cap;
    int64_t cap = c->cap ? c->cap : FIRST_ROWS;
    while (cap < rows && cap < c->max)
        cap *= 2;
    return cap < c->max ? cap : c->max;
}

/* Bytes of a cache of hkv KV heads whose arrays have room for cap rows of
 * d floats: its own struct, each KV head's two array pointers, the
 * arrays. SIZE_MAX when that is over what an int64_t counts. */
static size_t bytes_of(int64_t hkv, int64_t d, int64_t cap)
{
    int64_t all, ptrs;
    if (!attn_size_mul(hkv, cap, &all) || !attn_size_mul(all, d, &all) ||
        !attn_size_mul(all, 2 * (int64_t)sizeof(float), &all) ||
        !attn_size_mul(hkv, 2 * (int64_t)sizeof(float *), &ptrs) ||
        __builtin_add_overflow(all, ptrs + (int64_t)sizeof(attn_kv_cache), &all))
        return SIZE_MAX;
    return (size_t)all;
}

size_t attn_kv_cache_bytes_max(int64_t num_kv_heads, int64_t head_dim, int64_t max_tokens)
{
    if (num_kv_heads < 1 || head_dim < 1 || max_tokens < 1)
        return 0;
    return bytes_of(num_kv_heads, head_dim, max_tokens);
}

/* Bytes at a capacity of cap rows (cap <= max_tokens: it fits, checked at
 * creation). */
static size_t bytes_at(const attn_kv_cache *c, int64_t cap)
{
    return bytes_of(c->hkv, c->d, cap);
}

size_t attn_kv_cache_bytes(const attn_kv_cache *c)
{
    return c ? bytes_at(c, c->cap) : 0;
}

size_t attn_kv_cache_bytes_for(const attn_kv_cache *c, int64_t rows)
{
    return c ? bytes_at(c, cap_for(c, rows < c->max ? rows : c->max)) : 0;
}

/* A block of bytes for the arrays. A decode step reads the whole cache,
 * a page at a time, so from 2 MB up the block is aligned to transparent
 * huge pages and asked to have them (madvise, where the kernel has it):
 * 16 MB of 4 KB pages overflow the TLB on every step, and the page walks
 * cost about a fifth of the step on one thread. Only the whole huge pages
 * are asked for, so the cache never holds more memory than its bytes. */
static float *block_new(size_t bytes)
{
    if (bytes < HUGE_PAGE)
        return malloc(bytes);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, bytes) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE); /* a hint: failure is harmless */
#endif
    return p;
}

/* Room for rows rows in every array: a new block at the doubled capacity,
 * the rows held copied to their arrays' new places. On failure the cache
 * is as it was. */
static int grow(attn_kv_cache *c, int64_t rows)
{
    int64_t cap = cap_for(c, rows);
    if (cap == c->cap)
        return 0;
    size_t row = (size_t)c->d * sizeof(float), array = (size_t)cap * (size_t)c->d;
    float *b = block_new(2 * (size_t)c->hkv * array * sizeof(float));
    if (!b)
        return -1;
    for (int64_t g = 0; g < c->hkv; g++) {
        float *k = b + (size_t)g * array, *v = b + (size_t)(c->hkv + g) * array;
        if (c->len) {
            memcpy(k, c->k[g], (size_t)c->len * row);
            memcpy(v, c->v[g], (size_t)c->len * row);
        }
        c->k[g] = k;
        c->v[g] = v;
    }
    free(c->block);
    c->block = b;
    c->cap = cap;
    return 0;
}

/* key or value's shape against (T, num_kv_heads, head_dim). */
static attn_status check_rows(const attn_kv_cache *c, const char *name, const attn_tensor *t,
                              int64_t T, attn_error *err)
{
    if (t->rank == 3 && t->data && t->shape[0] == T && t->shape[1] == c->hkv &&
        t->shape[2] == c->d)
        return ATTN_OK;
    return attn_fail(err, ATTN_ERR_SHAPE, name,
                     "%s must be a (T, num_kv_heads, head_dim) = (%lld, %lld, %lld) tensor", name,
                     (long long)T, (long long)c->hkv, (long long)c->d);
}

attn_status attn_kv_cache_append(attn_kv_cache *c, const attn_tensor *key,
                                 const attn_tensor *value, attn_error *err)
{
    if (!c || !key || !value)
        return attn_fail(err, ATTN_ERR_ARG, !c ? "cache" : !key ? "key" : "value", "%s is NULL",
                         !c ? "the cache" : !key ? "key" : "value");
    int64_t T = key->rank == 3 ? key->shape[0] : -1;
    attn_status st;
    if (T < 1)
        return attn_fail(err, ATTN_ERR_SHAPE, "key",
                         "key must be a (T, num_kv_heads, head_dim) tensor with T >= 1");
    if ((st = check_rows(c, "key", key, T, err)) != ATTN_OK ||
        (st = check_rows(c, "value", value, T, err)) != ATTN_OK)
        return st;
    if (T > c->max - c->len)
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "key",
                         "the cache holds %lld of its %lld rows; %lld more do not fit",
                         (long long)c->len, (long long)c->max, (long long)T);
    if (grow(c, c->len + T))
        return attn_fail(err, ATTN_ERR_NOMEM, "", "out of memory for the cache");
    size_t row = (size_t)c->d * sizeof(float);
    for (int64_t t = 0; t < T; t++)
        for (int64_t g = 0; g < c->hkv; g++) {
            memcpy(c->k[g] + (c->len + t) * c->d, key->data + (t * c->hkv + g) * c->d, row);
            memcpy(c->v[g] + (c->len + t) * c->d, value->data + (t * c->hkv + g) * c->d, row);
        }
    c->len += T;
    return ATTN_OK;
}

attn_status attn_kv_cache_truncate(attn_kv_cache *c, int64_t n, attn_error *err)
{
    if (!c)
        return attn_fail(err, ATTN_ERR_ARG, "cache", "the cache is NULL");
    if (n < 0 || n > c->len)
        return attn_fail(err, ATTN_ERR_ARG, "n",
                         "the cache holds %lld rows; it can keep 0 to %lld of them, not %lld",
                         (long long)c->len, (long long)c->len, (long long)n);
    c->len = n;
    return ATTN_OK;
}

const float *const *attn_kv_cache_keys(const attn_kv_cache *c)
{
    return c ? (const float *const *)c->k : NULL;
}

const float *const *attn_kv_cache_values(const attn_kv_cache *c)
{
    return c ? (const float *const *)c->v : NULL;
}
