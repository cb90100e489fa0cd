/* buf.c - large buffers kept between requests, growable output buffers and
 * per-request arenas. */
#include "srv.h"

#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ kept large buffers */

/* A request of megabytes writes a body, its decoded tensors, an output and
 * an answer of megabytes each: fresh from malloc, every page of them is a
 * page fault (a zeroed page) each time, ~2000 per 8 MB (on the Zen 5 VM,
 * whose host takes freed memory back, about 10 us each: a 13 MB JSON
 * answer spent 35 of its 45 ms on them). Freed buffers of 64 KiB to 32 MiB
 * are kept instead (at most KEEP_N, KEEP_TOTAL bytes in all, so an idle
 * server holds at most that) and handed to the next large request, whose
 * pages are then already there. */
#define KEEP_N 8
#define KEEP_MIN SRV_BIG_MIN
#define KEEP_MAX ((size_t)32 << 20)
#define KEEP_TOTAL ((size_t)96 << 20)

static pthread_mutex_t keep_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *p;
    size_t cap;
} keep[KEEP_N];
static size_t keep_bytes;

void *srv_big_alloc(size_t want, size_t *cap)
{
    void *p = NULL;
    if (want >= KEEP_MIN && want <= KEEP_MAX) {
        int best = -1;
        pthread_mutex_lock(&keep_mu);
        for (int i = 0; i < KEEP_N; i++) /* the smallest that fits */
            if (keep[i].p && keep[i].cap >= want && (best < 0 || keep[i].cap < keep[best].cap))
                best = i;
        if (best >= 0) {
            p = keep[best].p;
            *cap = keep[best].cap;
            keep[best].p = NULL;
            keep_bytes -= *cap;
        }
        pthread_mutex_unlock(&keep_mu);
        if (p)
            return p;
    }
    if (posix_memalign(&p, 64, want ? want : 1) != 0)
        return NULL;
    *cap = malloc_usable_size(p);
    return p;
}

void srv_big_free(void *p)
{
    if (!p)
        return;
    size_t cap = malloc_usable_size(p);
    if (cap >= KEEP_MIN && cap <= KEEP_MAX) {
        pthread_mutex_lock(&keep_mu);
        for (int i = 0; i < KEEP_N && p; i++)
            if (!keep[i].p && keep_bytes + cap <= KEEP_TOTAL) {
                keep[i].p = p;
                keep[i].cap = cap;
                keep_bytes += cap;
                p = NULL;
            }
        pthread_mutex_unlock(&keep_mu);
    }
    free(p);
}

/* ------------------------------------------------------------ growable buffers */

int srv_buf_reserve(srv_buf *b, size_t extra)
{
    if (b->failed)
        return -1;
    if (extra <= b->cap - b->len)
        return 0;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->failed = 1;
        return -1;
    }
    size_t want = b->len + extra;
    if (!b->data && want >= KEEP_MIN) { /* a large answer at once (reserved): the size
                                         * it needs, so that up to KEEP_MAX it is kept */
        if (!(b->data = srv_big_alloc(want, &b->cap))) {
            b->failed = 1;
            return -1;
        }
        return 0;
    }
    size_t cap = b->cap ? b->cap : 256; /* growing: doubled, so appends stay amortised O(1) */
    while (cap < want)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void srv_buf_put(srv_buf *b, const void *p, size_t n)
{
    if (srv_buf_reserve(b, n) == 0) {
        memcpy(b->data + b->len, p, n);
        b->len += n;
    }
}

void srv_buf_puts(srv_buf *b, const char *s) { srv_buf_put(b, s, strlen(s)); }

void srv_buf_putc(srv_buf *b, char c)
{
    if (srv_buf_reserve(b, 1) == 0)
        b->data[b->len++] = c;
}

/* Formats straight into the spare room; grows once when it is short. */
void srv_buf_printf(srv_buf *b, const char *fmt, ...)
{
    for (int pass = 0; pass < 2 && !b->failed; pass++) {
        size_t room = b->cap - b->len;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        if (pass > 0 || srv_buf_reserve(b, (size_t)n + 1) != 0)
            return;
    }
}

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0 when it is not one. */
static int utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    int n;
    unsigned lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

void srv_buf_json_str(srv_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    srv_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            srv_buf_putc(b, '\\');
            srv_buf_putc(b, (char)c);
        } else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            srv_buf_put(b, esc, 6);
        } else if (c < 0x80) {
            srv_buf_putc(b, (char)c);
        } else {
            /* Messages quote client text (a path with %ff, a key cut short
             * by a width limit): a byte that is not valid UTF-8 would make
             * the whole reply invalid JSON, so it becomes U+FFFD. (The NUL
             * check in utf8_len's loop stops at the string's end.) */
            int n = utf8_len(p);
            if (n) {
                srv_buf_put(b, p, (size_t)n);
                p += n - 1;
            } else {
                srv_buf_puts(b, "\\ufffd");
            }
        }
    }
    srv_buf_putc(b, '"');
}

void srv_buf_free(srv_buf *b)
{
    srv_big_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------ arena */

/* Large allocations (a request's big tensors) are blocks of their own
 * (srv_big_alloc: kept between large requests);
 * small ones are cut from a 64 KB chunk that each thread keeps between
 * requests, so a small request costs a handful of pointer bumps instead of
 * a dozen mallocs and frees. Everything is 64-byte (cache-line) aligned:
 * the kernels write weight rows with non-temporal stores, which only pay
 * on aligned rows. */
struct srv_arena_blk {
    srv_arena_blk *next;
    void *adopted; /* a malloc'd block handed over by srv_arena_adopt */
    _Alignas(64) unsigned char align[];
};

#define CHUNK_BYTES ((size_t)64 << 10)
#define CHUNK_MAX_ALLOC ((size_t)16 << 10) /* larger requests get a block */

static pthread_key_t chunk_key;
static pthread_once_t chunk_once = PTHREAD_ONCE_INIT;
static int chunk_ok;

static void chunk_init(void) { chunk_ok = pthread_key_create(&chunk_key, free) == 0; }

/* n bytes (a multiple of 64) from the arena's chunk, or NULL when they do
 * not fit or no chunk can be had. */
static void *chunk_cut(srv_arena *a, size_t n)
{
    if (!a->chunk) {
        pthread_once(&chunk_once, chunk_init);
        if (!chunk_ok)
            return NULL;
        void *c = pthread_getspecific(chunk_key);
        if (c) {
            pthread_setspecific(chunk_key, NULL); /* this arena holds it now */
        } else if (posix_memalign(&c, 64, CHUNK_BYTES) != 0) {
            return NULL;
        }
        a->chunk = c;
        a->used = 0;
    }
    if (n > CHUNK_BYTES - a->used)
        return NULL;
    void *p = a->chunk + a->used;
    a->used += n;
    return p;
}

void *srv_arena_alloc(srv_arena *a, size_t n)
{
    if (n > SIZE_MAX - sizeof(srv_arena_blk) - 64)
        return NULL;
    if (n <= CHUNK_MAX_ALLOC) {
        void *p = chunk_cut(a, n ? (n + 63) & ~(size_t)63 : 64);
        if (p)
            return p;
    }
    size_t cap;
    srv_arena_blk *blk = srv_big_alloc(sizeof(srv_arena_blk) + (n ? n : 1), &cap); /* 64-aligned */
    if (!blk)
        return NULL;
    blk->next = a->head;
    blk->adopted = NULL;
    a->head = blk;
    return blk->align;
}

int srv_arena_adopt(srv_arena *a, void *p)
{
    /* aligned like every block: the struct itself demands 64 (UBSan
     * flags a plain malloc'd one; tests/fuzz/fuzz_request found it) */
    srv_arena_blk *blk = chunk_cut(a, sizeof(srv_arena_blk));
    if (blk) {
        blk->next = a->carved;
        blk->adopted = p;
        a->carved = blk;
        return 0;
    }
    void *mem = NULL;
    if (posix_memalign(&mem, 64, sizeof(srv_arena_blk)) != 0)
        return -1;
    blk = mem;
    blk->next = a->head;
    blk->adopted = p;
    a->head = blk;
    return 0;
}

void srv_arena_free(srv_arena *a)
{
    srv_arena_blk *blk = a->head;
    while (blk) {
        srv_arena_blk *next = blk->next;
        free(blk->adopted);
        srv_big_free(blk);
        blk = next;
    }
    for (blk = a->carved; blk; blk = blk->next)
        free(blk->adopted);
    if (a->chunk) {
        /* back to the thread for its next request, unless it has one */
        if (!chunk_ok || pthread_getspecific(chunk_key) || pthread_setspecific(chunk_key, a->chunk) != 0)
            free(a->chunk);
    }
    a->head = NULL;
    a->carved = NULL;
    a->chunk = NULL;
    a->used = 0;
}
